package slot

import (
	"bytes"
	"testing"

	"cacheon/internal/tensor"
)

// TestPackPlan: sdpa's serving case is always packed and about half its
// other cases are, with rooms within bounds and sometimes empty; a slot
// without Spec.Packed never is. Every room repeats the input's rows so
// that the packed buffer, rooms and view together, is the input tiled.
func TestPackPlan(t *testing.T) {
	cat, err := NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	sdpa, _ := cat.Lookup("attention.sdpa")
	silu, _ := cat.Lookup("activation.silu_and_mul")
	packed, emptyRoom, total := 0, 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		for i, serving := range []bool{true, false, false, false} {
			c, err := sdpa.NewCase(CaseParams{Seed: seed, Shape: sdpa.Shapes[1], DType: tensor.F32, Dist: Normal, Index: i, Serving: serving})
			if err != nil {
				t.Fatal(err)
			}
			p, ok := c.PackPlan()
			if serving && !ok {
				t.Fatalf("seed %d: the serving case is not packed", seed)
			}
			if !serving {
				total++
			}
			if !ok {
				continue
			}
			if !serving {
				packed++
			}
			if p.Before < 0 || p.Before > maxPackRoom || p.After < 0 || p.After > maxPackRoom {
				t.Fatalf("rooms %d, %d outside [0, %d]", p.Before, p.After, maxPackRoom)
			}
			if p.Before == 0 || p.After == 0 {
				emptyRoom++
			}
			rooms, err := c.Rooms(0, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range p.Names {
				in := c.Ranks[0][name]
				n := in.Shape[0]
				rb := len(in.Data) / n
				// The whole buffer: room before, the view, room after.
				var buf []byte
				if r := rooms["room_before."+name]; r != nil {
					buf = append(buf, r.Data...)
				} else if p.Before != 0 {
					t.Fatalf("no room before %s", name)
				}
				buf = append(buf, in.Data...)
				if r := rooms["room_after."+name]; r != nil {
					buf = append(buf, r.Data...)
				} else if p.After != 0 {
					t.Fatalf("no room after %s", name)
				}
				if len(buf) != (p.Before+n+p.After)*rb {
					t.Fatalf("%s: buffer of %d bytes, want %d rows of %d", name, len(buf), p.Before+n+p.After, rb)
				}
				for row := range p.Before + n + p.After {
					src := ((row-p.Before)%n + n) % n
					if !bytes.Equal(buf[row*rb:(row+1)*rb], in.Data[src*rb:(src+1)*rb]) {
						t.Fatalf("seed %d %s: buffer row %d is not input row %d", seed, name, row, src)
					}
				}
			}
		}
		c, err := silu.NewCase(CaseParams{Seed: seed, Shape: silu.Shapes[0], DType: tensor.F32, Dist: Normal, Serving: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.PackPlan(); ok {
			t.Fatal("silu_and_mul, no Spec.Packed, was packed")
		}
	}
	if packed < total/3 || packed > 2*total/3 || emptyRoom == 0 {
		t.Errorf("packed %d of %d other cases (want about half), %d with an empty room", packed, total, emptyRoom)
	}
}
