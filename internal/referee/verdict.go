// Package referee decides whether one exact proposal — one registered
// target replaced in the incumbent evaluation stack — makes the complete
// engine faster in one arena at unchanged quality, twice (seeds: overview
// and product model; docs/architecture.md).
//
// This file and its siblings hold the pure decision rules: the one speed
// rule over host-timed reads (speed.go), the quality rule over teacher-forced
// scores (quality.go), the calibration record their constants come from
// (calibration.go), and the verdicts with their stable reason codes. They
// take numbers the referee measured and sealed, never numbers an engine
// process reported, and are exact where a boundary matters: read rates are
// rationals of integer token counts and host nanoseconds, so "drift exactly
// n" and "r exactly on the bar" decide the same way on every machine and on
// re-derivation from evidence.
package referee

import (
	"fmt"

	"cacheon/internal/engine"
	"cacheon/internal/fault"
)

// Outcome is a verdict's kind.
type Outcome string

// Outcomes. NO_DECISION is never a loss: the attempt is retried, never
// decided on a lowered bar.
const (
	Pass       Outcome = "PASS"
	Fail       Outcome = "FAIL"
	NoDecision Outcome = "NO_DECISION"
)

// Reason is a stable code of why an attempt ended as it did.
type Reason string

// Candidate-attributable FAIL reasons.
const (
	ReasonScan          Reason = "scan_failed"
	ReasonVerify        Reason = "verify_failed"
	ReasonGraphCapture  Reason = "graph_capture_failed"
	ReasonCandidateErr  Reason = "candidate_exception"
	ReasonAudit         Reason = "audit_violation"
	ReasonNeverFired    Reason = "never_fired"
	ReasonQuality       Reason = "quality_regression"
	ReasonNotFaster     Reason = "not_faster"
	ReasonStarvedEngine Reason = "starved_other_engine"
	// ReasonCandidateEngine: the candidate's engine failed in its own
	// steps (out of memory, an internal error, death) where the resident
	// incumbent's, read right after on the same device, served.
	ReasonCandidateEngine Reason = "candidate_engine_failed"
)

// NO_DECISION reasons.
const (
	ReasonDrift           Reason = "drift"
	ReasonQualityDrift    Reason = "quality_drift"
	ReasonQualityUnsure   Reason = "quality_undecided"
	ReasonIncumbent       Reason = "incumbent_failed"
	ReasonDeviceDegraded  Reason = "device_degraded"
	ReasonDeviceBusy      Reason = "device_busy"
	ReasonInfrastructure  Reason = "infrastructure"
	ReasonEngineCrash     Reason = "engine_crash"
	ReasonMemoryNotFreed  Reason = "device_memory_not_released"
	ReasonCalibrationMiss Reason = "calibration_mismatch"
)

// outcomeOf is the one table of which reason ends how.
var outcomeOf = map[Reason]Outcome{
	ReasonScan: Fail, ReasonVerify: Fail, ReasonGraphCapture: Fail, ReasonCandidateErr: Fail,
	ReasonAudit: Fail, ReasonNeverFired: Fail, ReasonQuality: Fail, ReasonNotFaster: Fail,
	ReasonStarvedEngine: Fail, ReasonCandidateEngine: Fail,
	ReasonDrift: NoDecision, ReasonQualityDrift: NoDecision, ReasonQualityUnsure: NoDecision,
	ReasonIncumbent: NoDecision, ReasonDeviceDegraded: NoDecision, ReasonDeviceBusy: NoDecision,
	ReasonInfrastructure: NoDecision, ReasonEngineCrash: NoDecision, ReasonMemoryNotFreed: NoDecision,
	ReasonCalibrationMiss: NoDecision,
}

// Reasons lists every reason code with its outcome (for docs and tests).
func Reasons() map[Reason]Outcome {
	out := make(map[Reason]Outcome, len(outcomeOf))
	for r, o := range outcomeOf {
		out[r] = o
	}
	return out
}

// Verdict is the end of one attempt: an outcome, and for FAIL and
// NO_DECISION a stable reason code and one sentence.
type Verdict struct {
	Outcome Outcome `json:"outcome"`
	Reason  Reason  `json:"reason,omitempty"`
	Detail  string  `json:"detail,omitempty"`
}

// Passed is the PASS verdict.
func Passed(detail string) Verdict { return Verdict{Outcome: Pass, Detail: detail} }

// Because ends an attempt for reason, with a sentence; the reason decides
// the outcome.
func Because(r Reason, format string, args ...any) Verdict {
	o, ok := outcomeOf[r]
	if !ok {
		// An unknown code is a bug of the referee, never the candidate's.
		return Verdict{Outcome: NoDecision, Reason: ReasonInfrastructure, Detail: fmt.Sprintf("unknown reason %q: %s", r, fmt.Sprintf(format, args...))}
	}
	return Verdict{Outcome: o, Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// String is "PASS", or "FAIL reason: detail".
func (v Verdict) String() string {
	if v.Reason == "" {
		return string(v.Outcome)
	}
	return fmt.Sprintf("%s %s: %s", v.Outcome, v.Reason, v.Detail)
}

// Attribute turns an error of a role into a verdict: the candidate's fault
// (package fault) is a FAIL for candidateReason; anything else — the
// infrastructure's or an unattributed error — is NO_DECISION, never a loss.
// An engine failure of a candidate's engine that its engine could not
// attribute, after the candidate's code ran in it, is NO_DECISION
// `engine_crash`: the attempt then reads the incumbent to tell whose it
// was (Referee.blame).
func Attribute(err error, candidateReason Reason, role string) Verdict {
	switch {
	case fault.Of(err) == fault.Candidate:
		return Because(candidateReason, "%s: %v", role, err)
	case engine.RanCandidate(err):
		return Because(ReasonEngineCrash, "%s: %v", role, err)
	}
	return Because(ReasonInfrastructure, "%s: %v", role, err)
}
