package referee

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"cacheon/internal/evidence"
)

// CheckReport is what re-deriving an attempt from its evidence found.
type CheckReport struct {
	Attempt evidence.Ref `json:"attempt"`
	Verdict Verdict      `json:"verdict"`
	// Derived lists the decisions re-derived from sealed numbers.
	Derived []string `json:"derived"`
	// Event is set when the verdict was decided by an event (an engine
	// that failed, a busy device) rather than by sealed numbers; the check
	// then confirms only that the evidence is consistent with it.
	Event bool `json:"event"`
}

// Check re-derives an attempt's decision from its retained evidence alone
// (no GPU, no engine): every object is re-opened (so a changed byte
// anywhere is an error), the revealed secret must match the plan's
// commitment, the incumbent reads must sit in the calibration's envelope,
// C must have fired, the speed rule is recomputed from the per-wave host
// measurements, the audit from its sealed grades, T's prompt selection from
// the secret and the quality rule from T's scores and the engines' own
// log-probabilities. The re-derived verdict must equal the sealed one.
func Check(store *evidence.Store, ref evidence.Ref) (*CheckReport, error) {
	rec, err := evidence.Load[AttemptRecord](store, ref)
	if err != nil {
		return nil, err
	}
	plan, err := evidence.Load[Plan](store, rec.Plan)
	if err != nil {
		return nil, err
	}
	secret, err := hex.DecodeString(rec.Secret)
	if err != nil || len(secret) != 32 {
		return nil, fmt.Errorf("check %s: the revealed secret is not 32 hex bytes", ref)
	}
	if sum := sha256.Sum256(secret); hex.EncodeToString(sum[:]) != plan.Commit {
		return nil, fmt.Errorf("check %s: the revealed secret does not match the plan's commitment %s", ref, plan.Commit)
	}
	cal, err := evidence.Load[Calibration](store, evidence.Ref{Domain: DomainCalibration, Digest: plan.Calibration})
	if err != nil {
		return nil, fmt.Errorf("check %s: calibration: %w", ref, err)
	}
	if err := cal.Validate(); err != nil {
		return nil, fmt.Errorf("check %s: %w", ref, err)
	}
	rep := &CheckReport{Attempt: ref, Verdict: rec.Verdict}
	got, err := derive(store, rec, plan, secret, &cal, rep)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", ref, err)
	}
	if got.Outcome == "" {
		rep.Event = true
		if !eventReasons[rec.Verdict.Reason] {
			return nil, fmt.Errorf("check %s: the attempt claims %v, a decision the sealed numbers would have to give, without them", ref, rec.Verdict)
		}
		return rep, nil
	}
	if got != rec.Verdict {
		return nil, fmt.Errorf("check %s: the evidence gives %v, the attempt says %v", ref, got, rec.Verdict)
	}
	return rep, nil
}

// eventReasons are the reasons an event decides (an engine that failed, a
// busy device): the only ones an attempt may give without the numbers.
var eventReasons = map[Reason]bool{
	ReasonScan: true, ReasonVerify: true, ReasonGraphCapture: true, ReasonCandidateErr: true,
	ReasonIncumbent: true, ReasonDeviceBusy: true, ReasonInfrastructure: true, ReasonEngineCrash: true,
	ReasonMemoryNotFreed: true, ReasonStarvedEngine: true, ReasonCandidateEngine: true,
}

// derive recomputes the verdict from what was sealed, in the order the
// attempt decided. An empty verdict means the sealed numbers end before
// any numeric decision: an event decided the attempt.
func derive(store *evidence.Store, rec AttemptRecord, plan Plan, secret []byte, cal *Calibration, rep *CheckReport) (Verdict, error) {
	reads := map[string]ReadRecord{}
	sets := map[string]TrajectorySet{}
	for _, r := range rec.Reads {
		rr, err := evidence.Load[ReadRecord](store, r)
		if err != nil {
			return Verdict{}, err
		}
		set, err := evidence.Load[TrajectorySet](store, rr.Trajectories)
		if err != nil {
			return Verdict{}, err
		}
		if _, dup := reads[rr.Role]; dup {
			return Verdict{}, fmt.Errorf("two reads of role %s", rr.Role)
		}
		reads[rr.Role], sets[rr.Role] = rr, set
	}
	// Stock incumbent sanity, in the order the reads happened.
	for _, role := range []string{"B", "B′"} {
		rr, ok := reads[role]
		if !ok || !plan.Stock {
			continue
		}
		rate, err := ScoredRate(rr.Waves)
		if err != nil {
			return Verdict{}, err
		}
		rep.Derived = append(rep.Derived, role+" within the calibrated stock envelope")
		if v := cal.Sane(role, rate); v.Outcome != "" {
			return v, nil
		}
	}
	if len(reads) < 3 {
		return Verdict{}, nil
	}
	c := reads["C"]
	rep.Derived = append(rep.Derived, "fired in C's timed waves")
	if c.Selected == 0 {
		return Because(ReasonNeverFired, "the candidate for %s was never selected in C's timed waves (%d calls, %d not selected)", plan.Target, c.Fired, c.Fired-c.Selected), nil
	}
	speed, err := cal.Speed.Decide(reads["B"].Waves, c.Waves, reads["B′"].Waves)
	if err != nil {
		return Verdict{}, err
	}
	rep.Derived = append(rep.Derived, "the speed rule from every wave's host time")
	if rec.Speed == nil || *rec.Speed != *summary(speed) {
		return Verdict{}, fmt.Errorf("the sealed speed figures %+v are not the evidence's %+v", rec.Speed, summary(speed))
	}
	if speed.Verdict.Outcome != Pass {
		return speed.Verdict, nil
	}
	if rec.Audit == nil {
		return Verdict{}, nil
	}
	audit, err := evidence.Load[AuditRecord](store, *rec.Audit)
	if err != nil {
		return Verdict{}, err
	}
	rep.Derived = append(rep.Derived, "the audit from its sealed grades")
	if v := auditVerdict(audit, plan.slots(), plan.MinAudited); v.Outcome != "" {
		return v, nil
	}
	if len(rec.Scores) == 0 {
		return Verdict{}, nil
	}
	qr, err := cal.Quality.Rule()
	if err != nil {
		return Verdict{}, err
	}
	v, err := deriveQuality(rec, plan, secret, sets, qr, speed)
	if err != nil {
		return Verdict{}, err
	}
	rep.Derived = append(rep.Derived, "T's prompt selection from the revealed secret", "the quality rule from T's scores")
	return v, nil
}

// deriveQuality recomputes T's selection and the quality rule.
func deriveQuality(rec AttemptRecord, plan Plan, secret []byte, sets map[string]TrajectorySet, qr QualityRule, speed SpeedResult) (Verdict, error) {
	res, err := qualityOf(rec, plan, secret, sets, qr)
	if err != nil {
		return Verdict{}, err
	}
	if res.Verdict.Outcome != Pass {
		return res.Verdict, nil
	}
	return Passed(fmt.Sprintf("r = %s ≥ bar %s; audit clean; quality unchanged", speed.Ratio, speed.Bar)), nil
}

// qualityOf recomputes T's selection and applies qr to T's sealed scores.
func qualityOf(rec AttemptRecord, plan Plan, secret []byte, sets map[string]TrajectorySet, qr QualityRule) (QualityResult, error) {
	picked := selectPrompts(secret, rec.Reads, sets["B"], plan.TPrompts)
	traj := map[string][]Trajectory{}
	var order []string
	for _, sc := range rec.Scores {
		q, ok := findRequest(sets[sc.Role], sc.RID)
		if !ok {
			return QualityResult{}, fmt.Errorf("T scored %s of %s, which no sealed read holds", sc.RID, sc.Role)
		}
		if tokensDigest(q.Tokens) != sc.Digest {
			return QualityResult{}, fmt.Errorf("T's score of %s/%s names other tokens than the sealed trajectory", sc.Role, sc.RID)
		}
		nll, err := parseFloats(sc.NLL)
		if err != nil {
			return QualityResult{}, err
		}
		own, err := parseFloats(q.Logprobs)
		if err != nil {
			return QualityResult{}, err
		}
		if len(nll) != len(own) {
			return QualityResult{}, fmt.Errorf("T's score of %s/%s has %d values for %d tokens", sc.Role, sc.RID, len(nll), len(own))
		}
		traj[sc.Role] = append(traj[sc.Role], Trajectory{TeacherNLL: nll, OwnLogprob: own})
		if sc.Role == "B" {
			order = append(order, sc.RID)
		}
	}
	if !slices.Equal(order, picked) {
		return QualityResult{}, fmt.Errorf("T scored prompts %v; the revealed secret selects %v", order, picked)
	}
	return qr.Decide(traj["B"], traj["C"], traj["B′"])
}

func findRequest(set TrajectorySet, rid string) (SealedRequest, bool) {
	for _, q := range set.Requests {
		if q.RID == rid {
			return q, true
		}
	}
	return SealedRequest{}, false
}
