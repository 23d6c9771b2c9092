package referee

import (
	"errors"
	"fmt"
	"math"
)

// Trajectory is one timed engine's sealed output for one prompt, scored by
// the pristine teacher T: TeacherNLL[i] is T's teacher-forced negative
// log-likelihood of the engine's i-th generated token, OwnLogprob[i] the
// log-probability the engine itself reported for that token.
type Trajectory struct {
	TeacherNLL []float64
	OwnLogprob []float64
}

// promptStats are the per-prompt quality metrics.
type promptStats struct{ mean, worst, tail float64 }

// metricNames name the three per-prompt metrics, in the order of the
// rule's arrays.
var metricNames = [3]string{"mean NLL", "worst NLL", "tail rate"}

func (s promptStats) at(j int) float64 { return [3]float64{s.mean, s.worst, s.tail}[j] }

// QualityRule holds the quality constants of a calibration record. Each
// array is indexed as metricNames: mean NLL, worst NLL, tail rate (the
// share of tokens whose teacher NLL exceeds TailNLL).
type QualityRule struct {
	// Alpha is the familywise error rate of the regression bounds.
	Alpha float64
	// TailNLL is the NLL above which a token counts toward the tail rate.
	TailNLL float64
	// DriftEnvelope bounds |mean(B′−B)| per metric: stock drifting more
	// than this leaves nothing to compare against (NO_DECISION).
	DriftEnvelope [3]float64
	// AllowedDelta is the regression of C over the incumbent that is
	// tolerated per metric.
	AllowedDelta [3]float64
	// DivergenceEnvelope bounds how much further from the pristine
	// teacher the candidate engine's own log-probabilities may lie than
	// the incumbent's (mean absolute difference per token).
	DivergenceEnvelope float64
}

// QualityResult is the quality rule applied to one attempt.
type QualityResult struct {
	Drift      [3]float64 // |mean(B′−B)| per metric
	Regression [3]float64 // mean(C − (B+B′)/2) per metric
	Lower      [3]float64 // its familywise lower bound
	Upper      [3]float64 // and upper bound
	// Divergence of each engine's own log-probabilities from the teacher's
	// for the same tokens: B, C, B′.
	Divergence [3]float64
	Verdict    Verdict
}

// Decide applies the rule to the teacher's scores of B's, C's and B′'s
// trajectories of the same prompts, in order:
//   - any metric whose stock drift |mean(B′−B)| exceeds its envelope →
//     NO_DECISION quality_drift;
//   - any metric whose regression C − (B+B′)/2 is above its allowed delta
//     even at the familywise lower bound → FAIL quality_regression;
//   - the candidate engine's own log-probabilities diverging from the
//     teacher's by more than the incumbent's plus the envelope → FAIL;
//   - any metric whose upper bound is above its allowed delta (the bounds
//     straddle it) → NO_DECISION quality_undecided;
//   - else PASS.
//
// Bounds are normal bounds on the mean of paired per-prompt differences,
// one-sided at alpha / 6 (three metrics, both sides).
func (q QualityRule) Decide(b, c, bPrime []Trajectory) (QualityResult, error) {
	if len(b) < 2 || len(c) != len(b) || len(bPrime) != len(b) {
		return QualityResult{}, fmt.Errorf("quality: want the same ≥ 2 prompts for B, C and B′, got %d, %d, %d", len(b), len(c), len(bPrime))
	}
	if !(q.Alpha > 0 && q.Alpha < 1) {
		return QualityResult{}, fmt.Errorf("quality: alpha %v: want 0 < alpha < 1", q.Alpha)
	}
	var sb, sc, sbp []promptStats
	var res QualityResult
	for i := range b {
		for role, x := range []struct {
			t   Trajectory
			out *[]promptStats
		}{{b[i], &sb}, {c[i], &sc}, {bPrime[i], &sbp}} {
			st, err := q.stats(x.t)
			if err != nil {
				return QualityResult{}, fmt.Errorf("quality: prompt %d, role %s: %w", i, [3]string{"B", "C", "B′"}[role], err)
			}
			*x.out = append(*x.out, st)
		}
	}
	z := normalQuantile(1 - q.Alpha/6)
	n := float64(len(b))
	for j := range metricNames {
		var drift, diffs []float64
		for i := range b {
			drift = append(drift, sbp[i].at(j)-sb[i].at(j))
			diffs = append(diffs, sc[i].at(j)-(sb[i].at(j)+sbp[i].at(j))/2)
		}
		res.Drift[j] = math.Abs(mean(drift))
		m, sd := mean(diffs), stddev(diffs)
		res.Regression[j] = m
		res.Lower[j], res.Upper[j] = m-z*sd/math.Sqrt(n), m+z*sd/math.Sqrt(n)
	}
	for k, ts := range [][]Trajectory{b, c, bPrime} {
		res.Divergence[k] = divergence(ts)
	}
	res.Verdict = q.verdict(res)
	return res, nil
}

func (q QualityRule) verdict(res QualityResult) Verdict {
	for j, name := range metricNames {
		if res.Drift[j] > q.DriftEnvelope[j] {
			return Because(ReasonQualityDrift, "the incumbent's %s drifted %.4g between B and B′, above its envelope %.4g", name, res.Drift[j], q.DriftEnvelope[j])
		}
	}
	for j, name := range metricNames {
		if res.Lower[j] > q.AllowedDelta[j] {
			return Because(ReasonQuality, "%s regressed by %.4g (lower bound %.4g) over the incumbent, above the allowed %.4g", name, res.Regression[j], res.Lower[j], q.AllowedDelta[j])
		}
	}
	if inc := math.Max(res.Divergence[0], res.Divergence[2]); res.Divergence[1]-inc > q.DivergenceEnvelope {
		return Because(ReasonQuality, "the candidate engine's own log-probabilities lie %.4g from the pristine teacher's, the incumbent's %.4g (envelope %.4g)", res.Divergence[1], inc, q.DivergenceEnvelope)
	}
	for j, name := range metricNames {
		if res.Upper[j] > q.AllowedDelta[j] {
			return Because(ReasonQualityUnsure, "%s: the regression's bounds [%.4g, %.4g] straddle the allowed %.4g", name, res.Lower[j], res.Upper[j], q.AllowedDelta[j])
		}
	}
	return Passed("quality unchanged within the calibrated bounds")
}

// stats are the per-prompt metrics of one trajectory.
func (q QualityRule) stats(t Trajectory) (promptStats, error) {
	if len(t.TeacherNLL) == 0 {
		return promptStats{}, errors.New("no scored token")
	}
	if len(t.OwnLogprob) != len(t.TeacherNLL) {
		return promptStats{}, fmt.Errorf("%d own log-probabilities for %d tokens", len(t.OwnLogprob), len(t.TeacherNLL))
	}
	st := promptStats{worst: math.Inf(-1)}
	tail := 0
	for i, x := range t.TeacherNLL {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return promptStats{}, fmt.Errorf("token %d: teacher NLL %v is not a finite non-negative number", i, x)
		}
		if y := t.OwnLogprob[i]; math.IsNaN(y) || math.IsInf(y, 0) || y > 0 {
			return promptStats{}, fmt.Errorf("token %d: own log-probability %v is not a finite non-positive number", i, y)
		}
		st.mean += x
		st.worst = math.Max(st.worst, x)
		if x > q.TailNLL {
			tail++
		}
	}
	st.mean /= float64(len(t.TeacherNLL))
	st.tail = float64(tail) / float64(len(t.TeacherNLL))
	return st, nil
}

// divergence is the mean over all tokens of |own log-probability −
// teacher log-probability|.
func divergence(ts []Trajectory) float64 {
	var sum float64
	var n int
	for _, t := range ts {
		for i, nll := range t.TeacherNLL {
			sum += math.Abs(t.OwnLogprob[i] + nll)
			n++
		}
	}
	return sum / float64(n)
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// stddev is the sample standard deviation.
func stddev(v []float64) float64 {
	m := mean(v)
	var s float64
	for _, x := range v {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(v)-1))
}

// normalQuantile is the standard normal quantile function.
func normalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }
