package verify

import (
	"strings"
	"testing"

	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/worker"
)

func TestCheckIdentityOverlap(t *testing.T) {
	out := slot.Output{Name: "out", Spec: tensor.Spec{Shape: []int{4, 8}, Stride: []int{8, 1}, DType: tensor.F32, Alignment: 16}}
	outID := worker.Identity{DataPtr: 0x1000, StoragePtr: 0x1000, Shape: []int{4, 8}, Stride: []int{8, 1}, DType: "float32", Device: "cpu"}
	tests := []struct {
		name   string
		inPtr  uint64
		reason string
	}{
		{"disjoint input after", 0x1000 + 128, ""},
		{"disjoint input before", 0x1000 - 128, ""},
		{"input ends inside output", 0x1000 - 64, "overlaps"},
		{"input starts inside output", 0x1000 + 64, "overlaps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := worker.Identity{DataPtr: tt.inPtr, StoragePtr: tt.inPtr, Shape: []int{32}, Stride: []int{1}, DType: "float32", Device: "cpu"}
			ids := map[string]worker.Identity{"out": outID, "x": in}
			got := checkIdentity(worker.CallFacts{Before: ids, After: ids}, []slot.Output{out})
			if (tt.reason == "") != (got == "") || !strings.Contains(got, tt.reason) {
				t.Fatalf("checkIdentity = %q, want %q", got, tt.reason)
			}
		})
	}
	moved := outID
	moved.DataPtr += 16
	got := checkIdentity(worker.CallFacts{Before: map[string]worker.Identity{"out": outID}, After: map[string]worker.Identity{"out": moved}}, []slot.Output{out})
	if !strings.Contains(got, "storage identity of out changed") {
		t.Fatalf("rebinding not reported: %q", got)
	}
}
