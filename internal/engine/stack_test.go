package engine

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"cacheon/internal/slot"
)

// TestVerifiedCounts: every slot with a count is cut at its MaxCount (a
// call one above it is outside every variant's domain), and the cut is in
// the domain the runtime loads.
func TestVerifiedCounts(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"activation.silu_and_mul": "num_tokens", "attention.decode": "batch_size",
		"attention.msa_block_score": "batch_size", "moe.fused_experts": "num_tokens"}
	for _, spec := range cat.Specs() {
		f := spec.CountField()
		if w, ok := want[spec.Name]; ok && f != w {
			t.Errorf("%s: count field %q, want %q", spec.Name, f, w)
		}
		if spec.Count == "" {
			continue
		}
		if f == "" {
			t.Errorf("%s: count %s is no descriptor field", spec.Name, spec.Count)
			continue
		}
		d, err := VerifiedCounts(spec)
		if err != nil {
			t.Fatal(err)
		}
		if ok, why := d.Match(map[string]any{f: spec.MaxCount}); !ok {
			t.Errorf("%s: %s = MaxCount %d refused: %s", spec.Name, f, spec.MaxCount, why)
		}
		if ok, _ := d.Match(map[string]any{f: spec.MaxCount + 1}); ok {
			t.Errorf("%s: %s = %d (above MaxCount) admitted", spec.Name, f, spec.MaxCount+1)
		}
		canon, err := json.Marshal(d.Canonical())
		if err != nil {
			t.Fatal(err)
		}
		if want := `"max":` + strconv.Itoa(spec.MaxCount); !strings.Contains(string(canon), want) {
			t.Errorf("%s: canonical domain %s lacks %s", spec.Name, canon, want)
		}
	}
}
