package verify

import (
	"context"
	"os"
	"strings"
	"testing"

	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/worker"
)

// probed is a backendFacts whose probe already answered f.
func probed(f glooFacts) *backendFacts {
	b := &backendFacts{probed: f}
	b.once.Do(func() {})
	return b
}

// TestBackendUnsupported: a collective's exception on cpu is the
// backend's (N/A) only when it carries the words gloo itself raised for
// what the probe found it lacks.
func TestBackendUnsupported(t *testing.T) {
	torch113 := glooFacts{BF16: "lacks", Missing: map[string]string{
		"reduce_scatter": "ProcessGroupGloo does not support reduce_scatter",
		"all_to_all":     "ProcessGroup gloo does not support alltoall",
	}}
	catalog, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	allReduce, _ := catalog.Lookup("collective.all_reduce")
	silu, _ := catalog.Lookup("activation.silu_and_mul")
	exc := func(msg string) *worker.Failure {
		return &worker.Failure{Class: worker.ClassException, Type: "RuntimeError", Message: msg}
	}
	tests := []struct {
		name   string
		facts  glooFacts
		device string
		spec   *slot.Spec
		dt     tensor.DType
		f      *worker.Failure
		want   string // substring of the reason; "" = not N/A
	}{
		{"missing op", torch113, "cpu", allReduce, tensor.F32, exc("ProcessGroupGloo does not support reduce_scatter"), "does not implement reduce_scatter"},
		{"missing op, any dtype", torch113, "cpu", allReduce, tensor.BF16, exc("ProcessGroup gloo does not support alltoall"), "does not implement all_to_all"},
		{"missing op on cuda", torch113, "cuda", allReduce, tensor.F32, exc("ProcessGroupGloo does not support reduce_scatter"), ""},
		{"op the probe found implemented", glooFacts{BF16: "lacks"}, "cpu", allReduce, tensor.F32, exc("ProcessGroupGloo does not support reduce_scatter"), ""},
		{"other words", torch113, "cpu", allReduce, tensor.F32, exc("does not support"), ""},
		{"not a collective slot", torch113, "cpu", silu, tensor.F32, exc("ProcessGroupGloo does not support reduce_scatter"), ""},
		{"not an exception", torch113, "cpu", allReduce, tensor.F32, &worker.Failure{Class: "timeout", Message: "ProcessGroupGloo does not support reduce_scatter"}, ""},
		{"bfloat16 gloo lacks", torch113, "cpu", allReduce, tensor.BF16, exc("Invalid scalar type"), "has no bfloat16 reduction"},
		{"bfloat16 words in float32", torch113, "cpu", allReduce, tensor.F32, exc("Invalid scalar type"), ""},
		{"bfloat16 gloo reduces", glooFacts{BF16: "reduces"}, "cpu", allReduce, tensor.BF16, exc("Invalid scalar type"), ""},
		{"probe failed", glooFacts{}, "cpu", allReduce, tensor.BF16, exc("Invalid scalar type; ProcessGroupGloo does not support reduce_scatter"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Device: tc.device, backend: probed(tc.facts)}
			got := nativeUnsupported(context.Background(), o, tc.spec, tc.dt, tc.f)
			switch {
			case tc.want == "" && got != "":
				t.Errorf("N/A (%s), want the candidate's failure", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("reason %q, want one containing %q", got, tc.want)
			}
		})
	}
}

// TestGlooProbe runs the probe in the test's python: whatever it finds,
// each missing collective comes with gloo's own words, and Debian's torch
// 1.13 (what CI installs) lacks bfloat16 reductions and reduce_scatter.
func TestGlooProbe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts python with torch")
	}
	python, err := worker.FindPython(context.Background(), "")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no python3 with torch: %v", err)
		}
		t.Skipf("no python3 with torch: %v", err)
	}
	b := &backendFacts{python: python}
	f := b.facts(context.Background())
	if f.BF16 == "" {
		t.Fatalf("the probe gave no answer (python %s)", python)
	}
	for op, msg := range f.Missing {
		if len(msg) < 16 {
			t.Errorf("%s: gloo's words %q are too short to tell from a candidate's", op, msg)
		}
	}
	t.Logf("python %s: bfloat16 %s; missing %v", python, f.BF16, f.Missing)
	if os.Getenv("CI") == "true" {
		if f.BF16 != "lacks" || f.Missing["reduce_scatter"] == "" {
			t.Errorf("CI's torch 1.13: want bfloat16 lacking and reduce_scatter missing, got %+v", f)
		}
	}
}
