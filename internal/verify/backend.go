package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/worker"
)

// glooMessage is what torch's gloo backend raises for a reduction of a
// dtype it has no kernel for (torch 1.13, Debian's python3-torch: bfloat16).
const glooMessage = "Invalid scalar type"

// backendFacts answers, once per run, what the cpu collectives' backend
// (gloo, in the run's Python) cannot do: reduce bfloat16, and which of
// the collectives the scan allows it does not implement at all.
type backendFacts struct {
	once   sync.Once
	python string
	probed glooFacts
}

// glooFacts is the probe's answer.
type glooFacts struct {
	// BF16 is "lacks" when a bfloat16 all_reduce raised glooMessage.
	BF16 string `json:"bf16"`
	// Missing maps a collective gloo does not implement to the error
	// text it raised (its own words: "ProcessGroupGloo does not support
	// reduce_scatter").
	Missing map[string]string `json:"missing"`
}

// glooProbe joins a one-rank gloo group, all-reduces one bfloat16
// element and calls each allowed collective once on float32: trusted code
// of the validator's, no candidate's, in the run's interpreter. It prints
// one JSON object (glooFacts). A collective counts as missing only when it
// raised a RuntimeError whose first line says "support" or "not
// implemented" (torch 1.13: "ProcessGroupGloo does not support
// reduce_scatter") and is at least 16 characters long, so that an
// argument mistake of the probe's own is not taken for one and a
// candidate's short message never matches it.
const glooProbe = `import json, sys, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method=sys.argv[1], rank=0, world_size=1)
facts = {"bf16": "reduces", "missing": {}}
try:
    dist.all_reduce(torch.zeros(1, dtype=torch.bfloat16))
except RuntimeError as e:
    facts["bf16"] = "lacks" if sys.argv[2] in str(e) else "other"
def t():
    return torch.ones(4)
ops = {
    "reduce_scatter": lambda: dist.reduce_scatter(t(), [t()]),
    "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(t(), t()),
    "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(t(), t()),
    "all_to_all": lambda: dist.all_to_all([t()], [t()]),
    "all_to_all_single": lambda: dist.all_to_all_single(t(), t()),
    "all_gather": lambda: dist.all_gather([t()], t()),
    "gather": lambda: dist.gather(t(), [t()], dst=0),
    "scatter": lambda: dist.scatter(t(), [t()], src=0),
    "reduce": lambda: dist.reduce(t(), 0),
    "broadcast": lambda: dist.broadcast(t(), 0),
}
for name, op in ops.items():
    if not hasattr(dist, name):
        continue
    try:
        op()
    except RuntimeError as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        low = msg.lower()
        if ("support" in low or "not implemented" in low) and len(msg) >= 16:
            facts["missing"][name] = msg
print(json.dumps(facts))
`

// facts runs the probe once (zero facts when it cannot tell).
func (b *backendFacts) facts(ctx context.Context) glooFacts {
	b.once.Do(func() {
		port, err := worker.FreePort()
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, b.python, "-I", "-B", "-c", glooProbe,
			fmt.Sprintf("tcp://127.0.0.1:%d", port), glooMessage).Output()
		if err != nil {
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var f glooFacts
		if json.Unmarshal([]byte(lines[len(lines)-1]), &f) == nil {
			b.probed = f
		}
	})
	return b.probed
}

// lacksBF16 reports whether gloo in the run's interpreter has no
// bfloat16 reduction (false when the probe cannot tell).
func (b *backendFacts) lacksBF16(ctx context.Context) bool {
	return b.facts(ctx).BF16 == "lacks"
}

// missing returns the collective gloo does not implement whose own error
// text msg holds, and that text ("" when none).
func (b *backendFacts) missing(ctx context.Context, msg string) (op, text string) {
	m := b.facts(ctx).Missing
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if m[n] != "" && strings.Contains(msg, m[n]) {
			return n, m[n]
		}
	}
	return "", ""
}

// unsupported reports why a candidate's failure on the cpu collectives'
// backend is the backend's and not the candidate's ("" otherwise): a
// bfloat16 collective call on gloo that raised gloo's own error for a
// dtype it cannot reduce, where the probe confirms gloo in this torch
// cannot; or a call of a collective the scan allows (reduce_scatter,
// all_gather_into_tensor, the list all_to_all, ...) that raised the very
// words gloo raises for it, where the probe found gloo does not implement
// it. Serving runs these on NCCL, so the call cannot be verified on cpu,
// and the row (or the served stage) is N/A rather than FAIL (hs24's
// c05_allreduce_native_inplace; hs33's two-shot all-reduce through
// reduce_scatter). A candidate that raises the same words itself gains
// the same N/A on cpu alone: on cuda it is graded, and a run whose rows
// are all N/A exits 2.
func (b *backendFacts) unsupported(ctx context.Context, dt tensor.DType, msg string) string {
	if b == nil {
		return ""
	}
	if op, text := b.missing(ctx, msg); op != "" {
		return "gloo in this torch does not implement " + op + " (" + oneLine(text) +
			"), which the candidate's collective called: it cannot be verified on cpu here; verify it on cuda (NCCL)"
	}
	if dt == tensor.BF16 && strings.Contains(msg, glooMessage) && b.lacksBF16(ctx) {
		return "gloo in this torch has no bfloat16 reduction, and the candidate's collective raised its error (" +
			oneLine(msg) + "): a native bfloat16 collective cannot be verified on cpu here; verify it on cuda (NCCL)"
	}
	return ""
}

// nativeUnsupported is unsupported for a row's failed call: a collective
// slot's exception on cpu.
func nativeUnsupported(ctx context.Context, o Options, spec *slot.Spec, dt tensor.DType, f *worker.Failure) string {
	if o.Device == "cuda" || spec.Kind != slot.Collective || f == nil || f.Class != worker.ClassException {
		return ""
	}
	return o.backend.unsupported(ctx, dt, f.Type+": "+f.Message)
}
