package reference

import (
	"fmt"
	"math"
	"testing"
)

func absVec(x []float64) []float64 {
	a := make([]float64, len(x))
	for i, v := range x {
		a[i] = math.Abs(v)
	}
	return a
}

// The attention sensitivity is Σ_j p_j·|v_j|: the naive attention over
// |v|, at least |out| everywhere, and |out| itself where v ≥ 0; decode's
// is sdpa's on the gathered cache.
func TestAttentionSensitivity(t *testing.T) {
	for i, dm := range []AttnDims{{T: 5, S: 9, Hq: 4, Hkv: 2, D: 8}, {T: 70, S: 70, Hq: 2, Hkv: 1, D: 16}} {
		r := newRand(uint64(40 + i))
		q, k, v := randVec(r, dm.T*dm.Hq*dm.D), randVec(r, dm.S*dm.Hkv*dm.D), randVec(r, dm.S*dm.Hkv*dm.D)
		out, sens, err := SDPASensitivity(q, k, v, dm, 0.3, true)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%+v", dm)
		assertIdentical(t, name+" out", out, must(t)(SDPA(q, k, v, dm, 0.3, true)))
		assertClose(t, name+" sens", sens, naiveSDPA(q, k, absVec(v), dm, 0.3, true), 1e-12)
		// One pass's weights applied to |v| are SDPA's over |v|, bit for bit.
		assertIdentical(t, name+" sens, one pass", sens, must(t)(SDPA(q, k, absVec(v), dm, 0.3, true)))
		for j, s := range sens {
			if s < math.Abs(out[j])*(1-1e-12) {
				t.Fatalf("%s: sens[%d] = %v below |out| %v", name, j, s, math.Abs(out[j]))
			}
		}
		_, pos, err := SDPASensitivity(q, k, absVec(v), dm, 0.3, true)
		if err != nil {
			t.Fatal(err)
		}
		assertClose(t, name+" v ≥ 0", pos, must(t)(SDPA(q, k, absVec(v), dm, 0.3, true)), 1e-15)
	}
	dm := DecodeDims{B: 3, Hq: 4, Hkv: 2, D: 8, Pages: 20, PageSize: 4, MaxPages: 6}
	q, kc, vc, table, lens := randPaged(17, dm)
	out, sens, err := PagedDecodeSensitivity(q, kc, vc, table, lens, dm, 0.4)
	if err != nil {
		t.Fatal(err)
	}
	assertIdentical(t, "decode out", out, must(t)(PagedDecode(q, kc, vc, table, lens, dm, 0.4)))
	assertClose(t, "decode sens", sens, naivePagedDecode(q, kc, absVec(vc), table, lens, dm, 0.4), 1e-12)
	assertIdentical(t, "decode sens, one pass", sens, must(t)(PagedDecode(q, kc, absVec(vc), table, lens, dm, 0.4)))
	if _, _, err := PagedDecodeSensitivity(q, kc, vc, table, lens, DecodeDims{}, 0.4); err == nil {
		t.Fatal("invalid dimensions accepted")
	}
}
