package referee

import (
	"testing"
)

// trajectories makes n prompts whose tokens all have the given teacher NLL
// (plus a per-prompt wobble) and own log-probability −NLL − gap.
func trajectories(n int, nll, wobble, gap float64) []Trajectory {
	out := make([]Trajectory, n)
	for i := range out {
		x := nll + wobble*float64(i%3-1)
		out[i] = Trajectory{TeacherNLL: []float64{x, x, x, x}, OwnLogprob: []float64{-x - gap, -x - gap, -x - gap, -x - gap}}
	}
	return out
}

func TestQualityRule(t *testing.T) {
	rule := QualityRule{Alpha: 0.05, TailNLL: 8,
		DriftEnvelope: [3]float64{0.01, 0.05, 0.01}, AllowedDelta: [3]float64{0.005, 0.05, 0.01}, DivergenceEnvelope: 0.02}
	base := trajectories(24, 2, 0.1, 0.01)
	for _, tc := range []struct {
		name    string
		b, c, p []Trajectory
		want    Outcome
		reason  Reason
	}{
		{"unchanged", base, base, base, Pass, ""},
		{"stock drift", base, base, trajectories(24, 2.05, 0.1, 0.01), NoDecision, ReasonQualityDrift},
		{"proven regression", base, trajectories(24, 2.2, 0.1, 0.01), base, Fail, ReasonQuality},
		// Same pristine NLL, but the candidate engine's own numbers moved
		// away from the teacher's (a shrink inside per-call tolerance).
		{"own log-probabilities diverge", base, trajectories(24, 2, 0.1, 0.06), base, Fail, ReasonQuality},
		// A noisy per-prompt change whose mean sits near the allowed delta.
		{"straddles the allowed delta", base, noisy(base, 0.004, 0.05), base, NoDecision, ReasonQualityUnsure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := rule.Decide(tc.b, tc.c, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict.Outcome != tc.want || res.Verdict.Reason != tc.reason {
				t.Fatalf("verdict %v (drift %v, regression %v [%v, %v], divergence %v), want %s %s",
					res.Verdict, res.Drift, res.Regression, res.Lower, res.Upper, res.Divergence, tc.want, tc.reason)
			}
		})
	}
	for _, bad := range []struct {
		name    string
		b, c, p []Trajectory
	}{
		{"one prompt", base[:1], base[:1], base[:1]},
		{"different prompt counts", base, base[:3], base},
		{"negative NLL", base, []Trajectory{{TeacherNLL: []float64{-1}, OwnLogprob: []float64{0}}, base[1]}, base[:2]},
		{"missing own log-probabilities", base[:2], []Trajectory{{TeacherNLL: []float64{1}}, base[1]}, base[:2]},
	} {
		if _, err := rule.Decide(bad.b, bad.c, bad.p); err == nil {
			t.Errorf("%s: decided", bad.name)
		}
	}
}

// noisy shifts each prompt's NLL by shift ± spread.
func noisy(ts []Trajectory, shift, spread float64) []Trajectory {
	out := make([]Trajectory, len(ts))
	for i, t := range ts {
		d := shift + spread*float64(i%2*2-1)
		var nll, own []float64
		for j := range t.TeacherNLL {
			nll = append(nll, t.TeacherNLL[j]+d)
			own = append(own, t.OwnLogprob[j]-d)
		}
		out[i] = Trajectory{TeacherNLL: nll, OwnLogprob: own}
	}
	return out
}
