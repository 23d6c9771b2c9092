package slot

import (
	"math"
	"slices"
	"testing"
)

// sinkValueRows checks a call's value input against the same call
// without sinks: unchanged, or (sinkvalues.go) every sink key row's value
// rows, and only those, scaled per KV head by a factor within the drawn
// range. It reports whether the values were scaled.
func sinkValueRows(t *testing.T, cs, plain *Case, replay int) bool {
	t.Helper()
	ss := cs.Spec.Sinks
	v, v0 := cs.Ranks[0][ss.Value].Float64s(), plain.Ranks[0][ss.Value].Float64s()
	k, k0 := cs.Ranks[0][ss.Key].Float64s(), plain.Ranks[0][ss.Key].Float64s()
	hkv, d := cs.Dims["HKV"], cs.Dims["D"]
	w := hkv * d
	scaled := false
	for r := range len(v) / w {
		sink := !slices.Equal(k[r*w:(r+1)*w], k0[r*w:(r+1)*w])
		if slices.Equal(v[r*w:(r+1)*w], v0[r*w:(r+1)*w]) {
			continue
		}
		if !sink {
			t.Fatalf("call %d: value row %d changed, its key is no sink", replay, r)
		}
		scaled = true
		for j := range hkv {
			x, y := v[r*w+j*d:r*w+(j+1)*d], v0[r*w+j*d:r*w+(j+1)*d]
			f := math.Sqrt(dot(x, x) / dot(y, y))
			if lo, hi := sinkValueMin/sinkValueJitter*(1-1e-5), sinkValueJitter*(1+1e-5); !(f >= lo && f <= hi) {
				t.Fatalf("call %d: sink row %d head %d: value scaled by %g, want within [%g, %g]", replay, r, j, f, lo, hi)
			}
			for e := range x {
				if math.Abs(x[e]-f*y[e]) > 1e-5*(math.Abs(x[e])+math.Abs(f*y[e]))+1e-30 {
					t.Fatalf("call %d: sink row %d head %d: element %d %g, not %g times %g", replay, r, j, e, x[e], f, y[e])
				}
			}
		}
	}
	return scaled
}
