package verify

import (
	"testing"

	"cacheon/internal/bundle"
	"cacheon/internal/capability"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// TestRowContext: on cuda a row is verified in the mode the engine selects
// it in: graph mode (with capture and graph replays) when its domain admits
// it and it is not declared graph_safe = false, else eagerly; a variant
// the engine selects only eagerly on cuda is graded, not N/A (the red-team
// bundle eager_cuda_unverified). On cpu every row is eager.
func TestRowContext(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	silu, _ := cat.Lookup("activation.silu_and_mul")
	oneOf := func(field string, values ...string) capability.Domain {
		d, err := capability.OneOf(field, values...)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	safe := func(d capability.Domain, b bool) capability.Domain {
		d.GraphSafe = &b
		return d
	}
	eager, graphOnly := oneOf("graph_mode", "eager"), oneOf("graph_mode", "graph")
	cudaEager := oneOf("device", "cuda").Intersect(eager)
	for _, tc := range []struct {
		name      string
		domain    capability.Domain
		device    string
		arch      string
		wantMode  string
		wantGraph bool
		applies   bool
	}{
		{"no constraint, cuda", capability.Domain{}, "cuda", "", "graph", true, true},
		{"eager only, cuda", eager, "cuda", "", "eager", false, true},
		{"cuda and eager only", cudaEager, "cuda", "", "eager", false, true},
		{"graph only, cuda", graphOnly, "cuda", "", "graph", true, true},
		{"graph_safe false, cuda", safe(capability.Domain{}, false), "cuda", "", "eager", false, true},
		{"graph_safe true, cuda", safe(capability.Domain{}, true), "cuda", "", "graph", true, true},
		{"graph only and graph_safe false: never selected", safe(graphOnly, false), "cuda", "", "eager", false, false},
		{"no constraint, cpu", capability.Domain{}, "cpu", "", "eager", false, true},
		{"graph only, cpu", graphOnly, "cpu", "", "eager", false, false},
		{"cuda and eager only, cpu", cudaEager, "cpu", "", "eager", false, false},
		// A row that declares architectures (the established tool's Triton
		// examples do) applies on the device's, as in a live binding.
		{"architecture of the device", oneOf("architecture", "sm80", "sm90"), "cuda", "sm90", "graph", true, true},
		{"another architecture", oneOf("architecture", "sm80", "sm100"), "cuda", "sm90", "graph", true, false},
		{"architecture unknown", oneOf("architecture", "sm90"), "cuda", "", "graph", true, false},
		{"architecture on cpu: not known offline", oneOf("architecture", "sm90"), "cpu", "", "eager", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := bundle.Op{Slot: silu.Name, Domain: tc.domain}
			o := Options{Device: tc.device, Architecture: tc.arch}
			dom, base, graph := rowContext(op, silu, o, tensor.BF16, 1)
			if base["graph_mode"] != tc.wantMode || graph != tc.wantGraph {
				t.Errorf("context graph_mode %v, graph phase %v; want %s, %v", base["graph_mode"], graph, tc.wantMode, tc.wantGraph)
			}
			ok, reason := dom.Without(silu.NumericFields()...).Match(base)
			if ok != tc.applies || eligible(op, silu, o, tensor.BF16, 1) != tc.applies {
				t.Errorf("applies %v (%s), want %v", ok, reason, tc.applies)
			}
		})
	}
}

// TestReportArch: a report says when the CUDA device's architecture is
// unknown, which is why rows declaring architectures are then N/A.
func TestReportArch(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Device: "cuda", Architecture: "sm90"}, "sm90"},
		{Options{Device: "cuda"}, "unknown"},
		{Options{Device: "cpu"}, ""},
	} {
		if got := reportArch(tc.o); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
	}
}
