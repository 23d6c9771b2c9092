package referee

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"cacheon/internal/evidence"
)

// QualityFigure is one metric of role T's quality rule in one attempt.
type QualityFigure struct {
	Metric string // "mean NLL", "worst NLL" or "tail rate"
	// Drift is the stock drift |mean(B′−B)|; DriftEnvelope its bound.
	Drift, DriftEnvelope float64
	// Regression is mean(C − (B+B′)/2) with its familywise bounds;
	// Allowed the regression tolerated.
	Regression, Lower, Upper, Allowed float64
}

// QualityReport is role T's own result in one attempt: the quality rule
// of the attempt's calibration applied to T's sealed scores, as Check
// re-derives it (not the attempt's overall verdict, which the speed rule
// or the audit may have decided first).
type QualityReport struct {
	// Prompts is how many prompts T scored (per engine).
	Prompts int
	Figures []QualityFigure
	// Divergence is each engine's (B, C, B′) own log-probabilities'
	// distance from the teacher's; the candidate may lie at most
	// DivergenceEnvelope further than the incumbent.
	Divergence         [3]float64
	DivergenceEnvelope float64
	Verdict            Verdict
}

// CheckQuality re-derives role T's result of the attempt ref names from
// its evidence alone. ok is false when T scored nothing (the attempt ended
// before the quality role).
func CheckQuality(store *evidence.Store, ref evidence.Ref) (rep *QualityReport, ok bool, err error) {
	rec, err := evidence.Load[AttemptRecord](store, ref)
	if err != nil {
		return nil, false, err
	}
	if len(rec.Scores) == 0 {
		return nil, false, nil
	}
	plan, err := evidence.Load[Plan](store, rec.Plan)
	if err != nil {
		return nil, false, err
	}
	secret, err := hex.DecodeString(rec.Secret)
	if err != nil || len(secret) != 32 {
		return nil, false, fmt.Errorf("quality of %s: the revealed secret is not 32 hex bytes", ref)
	}
	if sum := sha256.Sum256(secret); hex.EncodeToString(sum[:]) != plan.Commit {
		return nil, false, fmt.Errorf("quality of %s: the revealed secret does not match the plan's commitment", ref)
	}
	cal, err := evidence.Load[Calibration](store, evidence.Ref{Domain: DomainCalibration, Digest: plan.Calibration})
	if err != nil {
		return nil, false, fmt.Errorf("quality of %s: calibration: %w", ref, err)
	}
	qr, err := cal.Quality.Rule()
	if err != nil {
		return nil, false, fmt.Errorf("quality of %s: %w", ref, err)
	}
	sets := map[string]TrajectorySet{}
	for _, r := range rec.Reads {
		rr, err := evidence.Load[ReadRecord](store, r)
		if err != nil {
			return nil, false, err
		}
		if sets[rr.Role], err = evidence.Load[TrajectorySet](store, rr.Trajectories); err != nil {
			return nil, false, err
		}
	}
	res, err := qualityOf(rec, plan, secret, sets, qr)
	if err != nil {
		return nil, false, fmt.Errorf("quality of %s: %w", ref, err)
	}
	rep = &QualityReport{Divergence: res.Divergence, DivergenceEnvelope: qr.DivergenceEnvelope, Verdict: res.Verdict}
	for _, sc := range rec.Scores {
		if sc.Role == "B" {
			rep.Prompts++
		}
	}
	for j, name := range metricNames {
		rep.Figures = append(rep.Figures, QualityFigure{Metric: name, Drift: res.Drift[j], DriftEnvelope: qr.DriftEnvelope[j],
			Regression: res.Regression[j], Lower: res.Lower[j], Upper: res.Upper[j], Allowed: qr.AllowedDelta[j]})
	}
	return rep, true, nil
}
