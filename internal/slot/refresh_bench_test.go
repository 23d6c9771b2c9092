package slot

import (
	"testing"

	"cacheon/internal/tensor"
)

// BenchmarkDecodeLlamaCall times what verify's planner does for one call
// of the llama-shaped decode case: a copy of the case, its inputs drawn
// again, and the reference.
func BenchmarkDecodeLlamaCall(b *testing.B) {
	cat, err := NewCatalog()
	if err != nil {
		b.Fatal(err)
	}
	s, ok := cat.Lookup("attention.decode")
	if !ok {
		b.Fatal("no attention.decode")
	}
	var sh Shape
	for _, x := range s.Shapes {
		if x.Name == "llama" {
			sh = x
		}
	}
	c, err := s.NewCase(CaseParams{Seed: 1, Shape: sh, DType: tensor.BF16, Dist: Normal, WorldSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("refresh", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			d := c.Clone()
			if err := d.RefreshAs(1+i%4, Distributions()[i%len(Distributions())]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reference", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := c.Reference(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
