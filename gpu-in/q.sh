#!/usr/bin/env bash
# Session 23, call 1: verify queue timing (old vs new), cold singles, the
# attention audit on real engine data.
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/machine.txt"
.bin/cacheon verify examples/silu_torch --device cuda --seed 1 --json > /dev/null 2>&1
.bin/cacheon-old verify examples/silu_torch --device cuda --seed 1 --json > /dev/null 2>&1
Q="examples/silu_torch examples/decode_torch examples/sdpa_torch examples/moe_torch examples/triton_silu examples/decode_torch"
for round in 1 2; do
  for b in cacheon-old cacheon; do
    s=$(date +%s.%N)
    .bin/$b verify $Q --device cuda --seed 7 --json > "$OUT/q-$b-$round.jsonl" 2> "$OUT/q-$b-$round.err"
    echo "$b round $round rc $? wall $(python3 -c "import time;print('%.1f'%(time.time()-$s))")" >> "$OUT/summary.txt"
    python3 - "$OUT/q-$b-$round.jsonl" >> "$OUT/summary.txt" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("  %-24s %.2f %s" % (r.get("bundle","?").rstrip("/").split("/")[-1], r.get("seconds", 0), " ".join(sorted(set(x["outcome"] for x in r.get("rows", []))))))
PY
  done
done
for round in 1 2; do
  for ex in triton_silu silu_torch decode_torch; do
    s=$(date +%s.%N)
    .bin/cacheon verify examples/$ex --device cuda --seed $((4+round)) --json > "$OUT/cold-$ex-$round.json" 2>/dev/null
    echo "cold $ex round $round rc $? wall $(python3 -c "import time;print('%.2f'%(time.time()-$s))")" >> "$OUT/summary.txt"
  done
done
s=$(date +%s.%N)
.bin/cacheon engine bench --arena h200-dense-1b --stack gpu-in/attn-stack.toml --audit-share 0.02 --audit-max 48 --compare-stock=false --json > "$OUT/attn-audit.json" 2> "$OUT/attn-audit.err"
echo "attn audit rc $? wall $(python3 -c "import time;print('%.1f'%(time.time()-$s))")" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
