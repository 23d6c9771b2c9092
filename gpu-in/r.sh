#!/usr/bin/env bash
# Session 23, call 3: the referee with the final binary (positive control
# crowned, evidence re-derived; A/A and the negative control), then the
# verify queue, two rounds, session 22's binary and this one side by side.
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
OUT=$OUT scripts/gpu-run qualify > "$OUT/qualify.log" 2>&1
OUT=$OUT REPEAT_AA=2 REPEAT_NEG=1 scripts/gpu-run repeat > "$OUT/repeat.log" 2>&1
cat "$OUT/referee.txt" > "$OUT/summary.txt" 2>/dev/null
grep -E "attempt|verdict|mean|order|PASS|FAIL" "$OUT/repeat.log" | tail -25 >> "$OUT/summary.txt"
Q="examples/silu_torch examples/decode_torch examples/sdpa_torch examples/moe_torch examples/triton_silu examples/decode_torch"
for round in 1 2; do
  for b in cacheon-old cacheon; do
    s=$(date +%s.%N)
    .bin/$b verify $Q --device cuda --seed 7 --json > "$OUT/q-$b-$round.jsonl" 2> /dev/null
    echo "$b round $round rc $? wall $(python3 -c "import time;print('%.1f'%(time.time()-$s))")" >> "$OUT/summary.txt"
    python3 - "$OUT/q-$b-$round.jsonl" >> "$OUT/summary.txt" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("  %-24s %.2f %s" % (r.get("bundle","?").rstrip("/").split("/")[-1], r.get("seconds", 0), " ".join(sorted(set(x["outcome"] for x in r.get("rows", []))))))
PY
  done
done
rm -f "$OUT"/q-*.jsonl
cat "$OUT/summary.txt"
