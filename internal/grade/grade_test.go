package grade

import (
	"errors"
	"math"
	"strings"
	"testing"

	"cacheon/internal/metric"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

func f32(t *testing.T, shape []int, v ...float64) *tensor.Tensor {
	t.Helper()
	x, err := tensor.FromFloat64(tensor.F32, shape, v)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// call is a two-output call with one input: out_a and out_b expect
// {1, 2, 3, 4}; the dump returns them (and the input) as each case edits.
type call struct {
	dump map[string]*tensor.Tensor
	sent []Input
}

func TestCall(t *testing.T) {
	pol := metric.Policy{Kind: metric.AllClose}
	tol := metric.Tolerance{Atol: 1e-5, Rtol: 1e-5}
	outputs := []slot.Output{
		{Name: "out_a", Spec: tensor.Contiguous(tensor.F32, 2, 2)},
		{Name: "out_b", Spec: tensor.Contiguous(tensor.F32, 2, 2)},
	}
	want := []float64{1, 2, 3, 4}
	expected := map[string][]float64{"out_a": want, "out_b": want}
	base := func() call {
		x := f32(t, []int{3}, 5, 6, 7)
		return call{
			dump: map[string]*tensor.Tensor{
				"in.x":  f32(t, []int{3}, 5, 6, 7),
				"x":     x, // before-value: not what is checked
				"out_a": f32(t, []int{2, 2}, want...),
				"out_b": f32(t, []int{2, 2}, want...),
			},
			sent: []Input{{Name: "x", Sent: x}},
		}
	}
	tests := []struct {
		name   string
		edit   func(c *call)
		kind   Kind   // 0: passes
		fname  string // Failure.Name
		graded int    // len(Result.Outputs)
		worst  string // Result.Worst.Name, "" for none
	}{
		{"pass", func(c *call) {}, 0, "", 2, "out_a"},
		{"worst passing output: same score, larger severity", func(c *call) {
			c.dump["out_b"] = f32(t, []int{2, 2}, 1, 2, 3, 4.00001)
		}, 0, "", 2, "out_b"},
		{"input mutation", func(c *call) { c.dump["in.x"] = f32(t, []int{3}, 5, 6, 7.5) }, InputMutated, "x", 0, ""},
		{"input dtype changed", func(c *call) {
			c.dump["in.x"] = &tensor.Tensor{DType: tensor.I32, Shape: []int{3}, Data: c.dump["in.x"].Data}
		}, InputMutated, "x", 0, ""},
		{"input reshaped", func(c *call) {
			c.dump["in.x"] = &tensor.Tensor{DType: tensor.F32, Shape: []int{3, 1}, Data: c.dump["in.x"].Data}
		}, InputMutated, "x", 0, ""},
		{"input missing", func(c *call) { delete(c.dump, "in.x") }, InputMissing, "x", 0, ""},
		{"first of two inputs reported", func(c *call) {
			c.sent = append(c.sent, Input{Name: "y", Sent: f32(t, []int{1}, 1)})
			c.dump["in.x"] = f32(t, []int{3}, 0, 0, 0)
		}, InputMutated, "x", 0, ""},
		{"missing output", func(c *call) { delete(c.dump, "out_b") }, OutputMissing, "out_b", 1, "out_a"},
		{"wrong dtype", func(c *call) {
			bf, err := tensor.FromFloat64(tensor.BF16, []int{2, 2}, want)
			if err != nil {
				t.Fatal(err)
			}
			c.dump["out_a"] = bf
		}, OutputContract, "out_a", 0, ""},
		{"wrong shape", func(c *call) { c.dump["out_b"] = f32(t, []int{4}, want...) }, OutputContract, "out_b", 1, "out_a"},
		{"metric failure stops grading", func(c *call) {
			c.dump["out_a"] = f32(t, []int{2, 2}, 1, 2, 3, 5)
			delete(c.dump, "out_b") // never reached
		}, OutputMetric, "out_a", 1, "out_a"},
		{"worst is the lower score", func(c *call) {
			c.dump["out_b"] = f32(t, []int{2, 2}, 1, 2, 3, 9)
		}, OutputMetric, "out_b", 2, "out_b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.edit(&c)
			res, err := Call(pol, tol, outputs, expected, c.dump, c.sent)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.kind == 0 && res.Failure != nil:
				t.Fatalf("failed: %+v", res.Failure)
			case tt.kind != 0 && (res.Failure == nil || res.Failure.Kind != tt.kind || res.Failure.Name != tt.fname):
				t.Fatalf("failure %+v, want kind %d on %s", res.Failure, tt.kind, tt.fname)
			}
			if len(res.Outputs) != tt.graded {
				t.Fatalf("graded %d outputs, want %d", len(res.Outputs), tt.graded)
			}
			if got := worstName(res); got != tt.worst {
				t.Fatalf("worst %q, want %q", got, tt.worst)
			}
			if f := res.Failure; f != nil && f.Kind == OutputContract && (f.Got != c.dump[f.Name] || f.Want.DType != tensor.F32) {
				t.Fatalf("contract failure does not carry what came back and the contract: %+v", f)
			}
			if f := res.Failure; f != nil && f.Kind == OutputMetric && (f.Metric.Pass || f.Metric.Metric == "") {
				t.Fatalf("metric failure carries %+v", f.Metric)
			}
		})
	}
}

func worstName(r Result) string {
	if r.Worst == nil {
		return ""
	}
	return r.Worst.Name
}

// TestOutputsGradingError: a reference the metric refuses is an
// infrastructure error naming the output, with the outputs graded before it.
func TestOutputsGradingError(t *testing.T) {
	outputs := []slot.Output{
		{Name: "ok", Spec: tensor.Contiguous(tensor.F32, 2)},
		{Name: "bad", Spec: tensor.Contiguous(tensor.F32, 2)},
	}
	dump := map[string]*tensor.Tensor{"ok": f32(t, []int{2}, 1, 2), "bad": f32(t, []int{2}, 1, 2)}
	expected := map[string][]float64{"ok": {1, 2}, "bad": {1}} // wrong length
	res, err := Outputs(metric.Policy{Kind: metric.AllClose}, metric.Tolerance{Atol: 1e-5}, outputs, expected, dump)
	if err == nil || !strings.HasPrefix(err.Error(), "grading bad: ") || !errors.Is(err, metric.ErrLength) {
		t.Fatalf("error %v, want grading bad: ...", err)
	}
	if res.Failure != nil || len(res.Outputs) != 1 || worstName(res) != "ok" {
		t.Fatalf("result %+v", res)
	}
}

func TestWorse(t *testing.T) {
	tests := []struct {
		name string
		a, b metric.Result
		want bool
	}{
		{"lower score", metric.Result{Score: 0.5}, metric.Result{Score: 0.9}, true},
		{"higher score", metric.Result{Score: 0.9, Severity: 9}, metric.Result{Score: 0.5}, false},
		{"same score, larger severity", metric.Result{Score: 1, Severity: 2}, metric.Result{Score: 1, Severity: 1}, true},
		{"same score, smaller severity", metric.Result{Score: 1, Severity: 1}, metric.Result{Score: 1, Severity: 2}, false},
		{"equal", metric.Result{Score: 1, Severity: 1}, metric.Result{Score: 1, Severity: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Worse(tt.a, tt.b); got != tt.want {
				t.Fatalf("Worse = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKindOfInput(t *testing.T) {
	for k, want := range map[Kind]bool{InputMissing: true, InputMutated: true, OutputMissing: false, OutputContract: false, OutputMetric: false} {
		if k.OfInput() != want {
			t.Errorf("%d.OfInput() = %v", k, !want)
		}
	}
}

// TestOutputsSensitivity: the reference's sensitivity (slot.SensKey)
// reaches the systematic check, which refuses an output rounded to 14 of
// float32's 24 bits by it (and not without it); a sensitivity of another
// length is an infrastructure error.
func TestOutputsSensitivity(t *testing.T) {
	const n = 512
	outputs := []slot.Output{{Name: "out", Spec: tensor.Contiguous(tensor.F32, n)}}
	exp, short := make([]float64, n), make([]float64, n)
	for i := range exp {
		exp[i] = 1 + float64(i*37%n)/n + 1e-3*float64(i%7)
		m, e := math.Frexp(exp[i])
		short[i] = math.Ldexp(math.Round(math.Ldexp(m, 14)), e-14)
	}
	dump := map[string]*tensor.Tensor{"out": f32(t, []int{n}, short...)}
	pol, tol := metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.99}, metric.Tolerance{Atol: 1e-4, Rtol: 1e-4}
	res, err := Outputs(pol, tol, outputs, map[string][]float64{"out": exp}, dump)
	if err != nil || res.Failure != nil {
		t.Fatalf("without a sensitivity: %v %+v", err, res.Failure)
	}
	res, err = Outputs(pol, tol, outputs, map[string][]float64{"out": exp, slot.SensKey("out"): exp}, dump)
	if err != nil || res.Failure == nil || res.Failure.Kind != OutputSystematic || !strings.Contains(res.Failure.Metric.Explain, "rounding sensitivity") {
		t.Fatalf("14 bits of 24 with a sensitivity: %v %+v", err, res.Failure)
	}
	if _, err := Outputs(pol, tol, outputs, map[string][]float64{"out": exp, slot.SensKey("out"): exp[:3]}, dump); err == nil || !strings.Contains(err.Error(), "sensitivity has 3 values") {
		t.Fatalf("a short sensitivity: %v", err)
	}
}
