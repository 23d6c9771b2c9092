#!/usr/bin/env bash
# Session 23, call 4: the MoE probe shape (256 experts, top-8) on CUDA.
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
A=internal/verify/testdata/adversarial
L="examples/moe_torch examples/moe_reduce_torch examples/moe_epilogue_atomic $A/control_moe_prepared $A/control_grouped_moe $A/control_moe_intermediate_format $A/control_moe_splitk_partials $A/moe_wide_routing_truncate $A/moe_shared_prepare_workspace"
s=$(date +%s.%N)
.bin/cacheon verify $L --device cuda --seed 7 --json > "$OUT/m.jsonl" 2> "$OUT/m.err"
echo "rc $? wall $(python3 -c "import time;print('%.1f'%(time.time()-$s))")"
python3 - "$OUT/m.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    rows = r.get("rows", [])
    print("%-34s %.2f %s %s" % (r.get("bundle","?").rstrip("/").split("/")[-1], r.get("seconds", 0),
        " ".join("%s:%s" % (x["dtype"][:4], x["outcome"]) for x in rows),
        "; ".join((x.get("reason") or "")[:110] for x in rows if x["outcome"] not in ("PASS", "N/A"))[:300]))
PY
