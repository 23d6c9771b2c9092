#!/usr/bin/env bash
# Session 23, call 2: the gate with the merged binary (decoys, MoE and MSA
# pad rows, MSA served shapes, world sizes), then the queue timing again.
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
GATE_ATTACKS="moe_shared_prepare_workspace moe_reduce_pad_rows_tell msa_decode_unserved_heads msa_decode_wide_sheet_window msa_prefill_long_prefix_window msa_decode_pad_rows_tell msa_short_rows_any_order sdpa_short_output_bits decode_short_output_bits decode_multisink_skip sdpa_multisink_skip" OUT=$OUT scripts/gpu-run gate > "$OUT/gate.log" 2>&1
tail -1 "$OUT/gate.err" > "$OUT/summary.txt"
awk -F'\t' '{print $1, $4, $6, $7, $11}' "$OUT/gate.tsv" >> "$OUT/summary.txt"
Q="examples/silu_torch examples/decode_torch examples/sdpa_torch examples/moe_torch examples/triton_silu examples/msa_block_score_torch examples/decode_torch"
for b in cacheon-old cacheon; do
  s=$(date +%s.%N)
  .bin/$b verify $Q --device cuda --seed 7 --json > "$OUT/q-$b.jsonl" 2> "$OUT/q-$b.err"
  echo "$b rc $? wall $(python3 -c "import time;print('%.1f'%(time.time()-$s))")" >> "$OUT/summary.txt"
  python3 - "$OUT/q-$b.jsonl" >> "$OUT/summary.txt" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("  %-24s %.2f %s" % (r.get("bundle","?").rstrip("/").split("/")[-1], r.get("seconds", 0), " ".join(sorted(set(x["outcome"] for x in r.get("rows", []))))))
PY
done
cat "$OUT/summary.txt"
