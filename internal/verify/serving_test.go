package verify

import (
	"strings"
	"testing"

	"cacheon/internal/capability"
	"cacheon/internal/slot"
)

// TestServingShapes: a row's serving case (its first) runs on a served
// shape, drawn from the seed, jittered as rowShapes jitters it (so it
// costs no case of its own) and with serving's padding; a domain that
// excludes the served counts moves the count into it; a domain that
// excludes every served width leaves none (the row's first case then
// takes the serving forms on its own shape).
func TestServingShapes(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	silu, _ := cat.Lookup("activation.silu_and_mul")
	fin, _ := cat.Lookup("collective.moe_finalize_ar_rmsnorm")
	domain := func(spec *slot.Spec, meta string) (capability.Domain, func(slot.Dims) bool) {
		var dom capability.Domain
		if meta != "" {
			m, err := capability.ReadMetadata([]byte(meta), capability.ReadOptions{LastDimField: "last_dim"})
			if err != nil {
				t.Fatal(err)
			}
			dom = m.Domain
		}
		return dom, func(d slot.Dims) bool {
			desc, err := spec.DescriptorOf(withWS(d))
			if err != nil {
				return false
			}
			full := map[string]any{}
			for k, v := range desc {
				full[k] = v
			}
			ok, _ := dom.Without("dtype", "device", "graph_mode").Match(full)
			return ok
		}
	}
	firsts := map[string]bool{}
	for seed := uint64(1); seed <= 24; seed++ {
		dom, fits := domain(silu, "")
		got := servingShapes(silu, dom, seed, fits)
		if len(got) != len(silu.ServedShapes) || !strings.HasPrefix(got[0].Name, "served-") {
			t.Fatalf("seed %d: serving shapes %v", seed, names(got))
		}
		firsts[got[0].Name] = true
		found := false
		for _, sh := range rowShapes(silu, dom, seed, fits) {
			found = found || (sh.Name == got[0].Name && sh.Dims["N"] == got[0].Dims["N"] && sh.Dims["D"] == got[0].Dims["D"])
		}
		if !found {
			t.Errorf("seed %d: serving shape %v is not among the row's shapes", seed, got[0])
		}
		dom, fits = domain(silu, `{"capabilities": {"num_tokens": {"min": 200}}}`)
		if got := servingShapes(silu, dom, seed, fits); len(got) == 0 || got[0].Dims["N"] != 200 || !strings.HasPrefix(got[0].Name, "served-") {
			t.Errorf("seed %d, num_tokens >= 200: serving shapes %v", seed, names(got))
		}
		dom, fits = domain(silu, `{"capabilities": {"hidden_dim": {"max": 100}}}`)
		if got := servingShapes(silu, dom, seed, fits); len(got) != 0 {
			t.Errorf("seed %d, hidden_dim <= 100: serving shapes %v, want none", seed, names(got))
		}
		dom, fits = domain(fin, "")
		for _, sh := range servingShapes(fin, dom, seed, fits) {
			if (sh.Dims["T"]+sh.Dims["PAD"])%8 != 0 || sh.Dims["PAD"] >= 8 {
				t.Errorf("seed %d: moe_finalize serving shape %v without serving's padding", seed, sh)
			}
		}
	}
	if len(firsts) < 4 {
		t.Errorf("the serving shape was one of %v over 24 seeds, want it drawn", firsts)
	}
}
