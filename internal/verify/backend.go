package verify

import (
	"context"
	"fmt"
	"os/exec"
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

// backendFacts answers, once per run, whether the cpu collectives'
// backend (gloo, in the run's Python) reduces bfloat16 natively.
type backendFacts struct {
	once   sync.Once
	lacks  bool
	python string
}

// glooProbe joins a one-rank gloo group and all-reduces one bfloat16
// element: trusted code of the validator's, no candidate's, in the run's
// interpreter. It prints "lacks" when gloo raises glooMessage.
const glooProbe = `import sys, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method=sys.argv[1], rank=0, world_size=1)
try:
    dist.all_reduce(torch.zeros(1, dtype=torch.bfloat16))
    print("reduces")
except RuntimeError as e:
    print("lacks" if sys.argv[2] in str(e) else "other")
`

// lacksBF16 reports whether gloo in the run's interpreter has no
// bfloat16 reduction (false when the probe cannot tell).
func (b *backendFacts) lacksBF16(ctx context.Context) bool {
	b.once.Do(func() {
		port, err := worker.FreePort()
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, b.python, "-I", "-B", "-c", glooProbe,
			fmt.Sprintf("tcp://127.0.0.1:%d", port), glooMessage).Output()
		b.lacks = err == nil && strings.TrimSpace(string(out)) == "lacks"
	})
	return b.lacks
}

// nativeUnsupported reports why a collective row's failure is the cpu
// backend's and not the candidate's: a bfloat16 collective call on gloo
// that raised gloo's own error for a dtype it cannot reduce, where the
// probe confirms gloo in this torch cannot ("" otherwise). A native
// bfloat16 all-reduce (what NCCL runs in serving) then cannot be verified
// on cpu, and the row is N/A rather than FAIL (hs24's
// c05_allreduce_native_inplace); on cuda it is graded. A candidate that
// raises the same words itself gains the same N/A on cpu alone.
func nativeUnsupported(ctx context.Context, o Options, spec *slot.Spec, dt tensor.DType, f *worker.Failure) string {
	if o.Device == "cuda" || spec.Kind != slot.Collective || dt != tensor.BF16 || o.backend == nil ||
		f == nil || f.Class != worker.ClassException || !strings.Contains(f.Message, glooMessage) || !o.backend.lacksBF16(ctx) {
		return ""
	}
	return "gloo in this torch has no bfloat16 reduction, and the candidate's collective raised its error (" +
		oneLine(f.Type+": "+f.Message) + "): a native bfloat16 collective cannot be verified on cpu here; verify it on cuda (NCCL)"
}
