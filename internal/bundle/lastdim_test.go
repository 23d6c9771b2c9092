package bundle

import (
	"testing"

	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// TestLastDimField checks, on every registered slot and shape, that the
// field max_last_dim bounds is the one the live binding fills with the last
// dimension of the slot's first input (what the established tool's
// max_last_dim limits), and that attention slots bound head_dim.
func TestLastDimField(t *testing.T) {
	cat := catalog(t)
	for _, spec := range cat.Specs() {
		field := LastDimField(spec)
		var first *slot.Arg
		for i := range spec.Args {
			if spec.Args[i].Kind == slot.ArgInput {
				first = &spec.Args[i]
				break
			}
		}
		if first == nil {
			t.Fatalf("%s: no input argument", spec.Name)
		}
		for i, sh := range spec.Shapes {
			c, err := spec.NewCase(slot.CaseParams{Seed: 1, Shape: sh, DType: tensor.F32, Dist: slot.Normal, Index: i, WorldSize: 2})
			if err != nil {
				continue // a shape that does not split at world size 2
			}
			desc, err := c.Descriptor()
			if err != nil {
				t.Fatal(err)
			}
			want, err := slot.EvalDim(first.Shape[len(first.Shape)-1], c.Dims)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := desc[field]
			if !ok || got != want {
				t.Errorf("%s shape %s: max_last_dim bounds %s = %d (supplied %v), but %s's last dimension is %d",
					spec.Name, sh.Name, field, got, ok, first.Name, want)
			}
		}
	}
	for _, name := range []string{"attention.sdpa", "attention.decode", "attention.msa_block_score", "attention.msa_prefill_block_score"} {
		spec, _ := cat.Lookup(name)
		if got := LastDimField(spec); got != "head_dim" {
			t.Errorf("%s: max_last_dim bounds %s, want head_dim", name, got)
		}
	}
}
