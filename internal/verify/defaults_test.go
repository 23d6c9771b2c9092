package verify

import (
	"fmt"
	"testing"
)

// TestDefaultWorldSizes: gloo on cpu gets an even and an odd world size
// and 4;
// on cuda a collective runs one rank per GPU, so the defaults never ask
// for more ranks than visible devices (a single GPU runs NCCL's own path
// at world size 1).
func TestDefaultWorldSizes(t *testing.T) {
	for _, tc := range []struct {
		device string
		gpus   int
		want   string
	}{
		{"cpu", 0, "[2 3 4]"},
		{"cpu", 8, "[2 3 4]"},
		{"cuda", 0, "[1]"},
		{"cuda", 1, "[1]"},
		{"cuda", 2, "[2]"},
		{"cuda", 3, "[2 3]"},
		{"cuda", 4, "[2 3 4]"},
		{"cuda", 8, "[2 3 4]"},
	} {
		if got := fmt.Sprint(DefaultWorldSizes(tc.device, tc.gpus)); got != tc.want {
			t.Errorf("DefaultWorldSizes(%s, %d) = %s, want %s", tc.device, tc.gpus, got, tc.want)
		}
	}
}
