package slot

import (
	"bytes"
	"testing"

	"cacheon/internal/tensor"
)

// TestPackPlan: sdpa's serving case is always packed and about three in four of its
// other cases are, with rooms within bounds and sometimes empty; a slot
// without Spec.Packed never is. The rooms hold other sequences' rows,
// drawn on their own (sdpa_packed_room_tell read past its view for rows
// that were not the input's repeated), and anew at each replay.
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
			if p.Before < 0 || p.Before > maxPackRoom+c.Dims["T"] || p.After < 0 || p.After > maxPackRoom {
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
				inRows := map[string]bool{}
				for i := range n {
					inRows[string(in.Data[i*rb:(i+1)*rb])] = true
				}
				// Each room: its rows shaped as the input's, other
				// sequences (no row a copy of the view's), the same when
				// drawn again.
				for key, rows := range map[string]int{"room_before." + name: p.Before, "room_after." + name: p.After} {
					r := rooms[key]
					if rows == 0 {
						if r != nil {
							t.Fatalf("seed %d: %s present for an empty room", seed, key)
						}
						continue
					}
					if r == nil || r.DType != in.DType || r.Shape[0] != rows || len(r.Data) != rows*rb {
						t.Fatalf("seed %d: %s missing or misshaped", seed, key)
					}
					for i := range rows {
						if inRows[string(r.Data[i*rb:(i+1)*rb])] {
							t.Fatalf("seed %d: %s row %d repeats a row of the view", seed, key, i)
						}
					}
					again, _ := c.Rooms(0, p)
					if !bytes.Equal(again[key].Data, r.Data) {
						t.Fatalf("seed %d: %s differs when drawn again", seed, key)
					}
					// A replay's rooms are its own (the next batch's
					// other sequences: sdpa_room_replay_tell).
					rc := c.Clone()
					if err := rc.Refresh(1); err != nil {
						t.Fatal(err)
					}
					next, _ := rc.Rooms(0, p)
					if bytes.Equal(next[key].Data, r.Data) {
						t.Fatalf("seed %d: %s the same at replay 1", seed, key)
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
	if packed < total/2 || packed > 9*total/10 || emptyRoom == 0 {
		t.Errorf("packed %d of %d other cases (want about three in four), %d with an empty room", packed, total, emptyRoom)
	}
}
