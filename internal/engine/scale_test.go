package engine

import (
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"cacheon/internal/slot"
)

// TestAttentionScaleBits: the softmax scale the engine passes is the very
// float64 verify serves for rsqrt(D) (slot.EvalScalar), at every head and
// index-head width an arena uses or might. A scale one ulp away from the
// served one let a kernel tell serving from verify (sdpa_scale_bits_tell:
// the engine's head_dim ** -0.5 against Go's 1 / math.Sqrt(D)).
func TestAttentionScaleBits(t *testing.T) {
	python, parent := realRuntime(t)
	dims := []int{16, 32, 48, 64, 80, 96, 112, 128, 192, 256}
	var args []string
	for _, d := range dims {
		args = append(args, strconv.Itoa(d))
	}
	const prog = `import sys
sys.path.insert(0, sys.argv[1])
from cacheon_runtime.engine.config import attention_scale
print(" ".join(repr(attention_scale(int(d))) for d in sys.argv[2:]))`
	out, err := exec.Command(python, append([]string{"-I", "-B", "-c", prog, parent}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("engine's attention_scale: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	if len(got) != len(dims) {
		t.Fatalf("engine printed %q for %d dims", out, len(dims))
	}
	for i, d := range dims {
		engine, err := strconv.ParseFloat(got[i], 64)
		if err != nil {
			t.Fatal(err)
		}
		served, err := slot.EvalScalar("rsqrt(D)", slot.Dims{"D": d})
		if err != nil {
			t.Fatal(err)
		}
		if math.Float64bits(engine) != math.Float64bits(served) {
			t.Errorf("D=%d: the engine passes %v, verify serves %v", d, engine, served)
		}
	}
}
