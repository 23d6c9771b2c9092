package referee

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"

	"cacheon/internal/arena"
	"cacheon/internal/canon"
	"cacheon/internal/engine"
	"cacheon/internal/evidence"
	"cacheon/internal/target"
)

// CalibrateRequest is one calibration of an arena.
type CalibrateRequest struct {
	Arena *arena.Arena
	// AA is a candidate that computes exactly what the stock kernel does
	// (A/A); Pairs how many A/A attempts to measure.
	AA    string
	Pairs int
	// Negative is an honest candidate slower than stock: it must FAIL.
	Negative string
	// Positive is an honest candidate faster than PositiveIncumbent, an
	// incumbent stack holding a slow but correct kernel: it must PASS.
	Positive          string
	PositiveIncumbent []engine.StackSpec
	Targets           *target.Catalog
	// Runtime is the digest of the runtime calibrated; the device is
	// the referee's (Device.Describe).
	Runtime string
}

// CalibrationReport says what calibrate measured and how the controls
// ended.
type CalibrationReport struct {
	Drifts, Ratios []canon.Decimal
	Negative       Verdict
	Positive       Verdict
}

// Floors keep the constants above what a perfectly quiet (or perfectly
// deterministic) machine would give, so that no bound is zero.
const (
	floorN, floorM         = 0.002, 0.002
	speedK                 = 2
	floorStockEnvelope     = 0.05
	floorDivergence        = 0.01
	qualityAlpha           = 0.05
	calibrationSafety      = 3.0
	calibrationMarginScale = 1.5
)

var qualityFloors = [3]float64{0.01, 0.1, 0.01}

// Calibrate measures the arena (A/A attempts with every role run), derives
// the constants, and runs the controls against them: the record is refused
// unless the negative control FAILs and the positive PASSes. The derivation:
//   - n = max(floor, 3 · the largest A/A drift);
//   - m = max(floor, 1.5 · the largest |r − 1| of A/A), so A/A never passes;
//   - k = 2;
//   - the stock rate is the median incumbent read, its envelope max(5 %,
//     4 · the largest deviation of an incumbent read from it);
//   - each quality envelope and allowed delta is max(floor, 3 · the largest
//     A/A value), the tail threshold ln(vocabulary) (a uniform guess).
func (r *Referee) Calibrate(ctx context.Context, req CalibrateRequest) (*Calibration, evidence.Ref, *CalibrationReport, error) {
	if req.Pairs < 2 {
		return nil, evidence.Ref{}, nil, fmt.Errorf("calibrate: %d A/A attempts: want at least 2", req.Pairs)
	}
	ad, err := req.Arena.Digest()
	if err != nil {
		return nil, evidence.Ref{}, nil, err
	}
	device, err := r.Device.Describe(ctx)
	if err != nil {
		return nil, evidence.Ref{}, nil, fmt.Errorf("calibrate: describe the device: %w", err)
	}
	tail := canon.Decimal(fmt.Sprintf("%.4f", math.Log(float64(req.Arena.Model.VocabSize))))
	wide := canon.Decimal("1000000000")
	provisional := &Calibration{Arena: ad, Device: device, Runtime: req.Runtime,
		Speed: SpeedRule{N: wide, M: "0", K: "0"},
		Quality: QualityConstants{Alpha: "0.05", TailNLL: tail, DriftEnvelope: [3]canon.Decimal{wide, wide, wide},
			AllowedDelta: [3]canon.Decimal{wide, wide, wide}, DivergenceEnvelope: wide},
		StockRate: "1", StockEnvelope: wide}
	if err := r.useCalibration(provisional); err != nil {
		return nil, evidence.Ref{}, nil, err
	}
	r.Measure = true
	defer func() { r.Measure = false }()
	scr, v := Screen(ctx, req.AA, req.Arena, r.Slots, r.Python, r.ScratchRoot, r.Progress)
	if v.Outcome != "" {
		return nil, evidence.Ref{}, nil, fmt.Errorf("calibrate: the A/A candidate did not pass the screen: %v", v)
	}
	defer scr.Close()
	slotName := scr.Job.Admitted.Bundle().Manifest.Ops[0].Slot
	p := Proposal{Arena: req.Arena, Candidate: engine.StackSpec{Slot: slotName, Bundle: scr.Dir()}, CandidateHash: scr.ContentHash()}
	if p.IncumbentDigest, err = r.incumbentDigest(ctx, Request{Arena: req.Arena, Targets: req.Targets}); err != nil {
		return nil, evidence.Ref{}, nil, err
	}
	var m measurements
	var refs []evidence.Ref
	for i := 1; i <= req.Pairs; i++ {
		r.say("calibrate: A/A attempt %d of %d", i, req.Pairs)
		rec, ref, err := r.Attempt(ctx, p, i)
		if err != nil {
			return nil, evidence.Ref{}, nil, err
		}
		refs = append(refs, ref)
		if err := m.add(r.Store, *rec); err != nil {
			return nil, evidence.Ref{}, nil, fmt.Errorf("calibrate: A/A attempt %d (%v): %w", i, rec.Verdict, err)
		}
	}
	r.Measure = false
	cal := m.derive(ad, device, req.Runtime, tail)
	cal.Reads = refs
	if err := r.useCalibration(cal); err != nil {
		return nil, evidence.Ref{}, nil, err
	}
	rep := &CalibrationReport{Drifts: m.driftsDec(), Ratios: m.ratiosDec()}
	neg, err := r.Run(ctx, Request{Arena: req.Arena, Candidate: req.Negative, Attempts: 1, Targets: req.Targets, Contributor: "calibration"})
	if err != nil {
		return nil, evidence.Ref{}, rep, fmt.Errorf("calibrate: negative control: %w", err)
	}
	rep.Negative = neg.Verdict
	pos, err := r.Run(ctx, Request{Arena: req.Arena, Candidate: req.Positive, Incumbent: req.PositiveIncumbent, Attempts: 1,
		Targets: req.Targets, Contributor: "calibration"})
	if err != nil {
		return nil, evidence.Ref{}, rep, fmt.Errorf("calibrate: positive control: %w", err)
	}
	rep.Positive = pos.Verdict
	for _, q := range []*Result{neg, pos} {
		if q.Qualification != nil {
			for _, a := range q.Qualification.Attempts {
				cal.Reads = append(cal.Reads, a.Ref)
			}
		}
	}
	if neg.Verdict.Outcome != Fail {
		return nil, evidence.Ref{}, rep, controlErr("negative", neg.Verdict, Fail, "this calibration cannot tell a slower kernel")
	}
	if pos.Verdict.Outcome != Pass {
		return nil, evidence.Ref{}, rep, controlErr("positive", pos.Verdict, Pass, "this calibration cannot resolve a true win")
	}
	ref, err := r.Store.Put(DomainCalibration, *cal)
	if err != nil {
		return nil, evidence.Ref{}, rep, err
	}
	return cal, ref, rep, nil
}

// ErrUndecided marks a calibration refused because a control ended
// NO_DECISION (drift, a degraded or busy device): nothing was learnt about
// the arena, and measuring again is the remedy, never a lowered bar.
var ErrUndecided = errors.New("a control ended NO_DECISION; measure again")

// ControlError refuses a calibration whose control did not end as it
// must. One that ended NO_DECISION is also ErrUndecided.
type ControlError struct {
	Control string // "negative" or "positive"
	Verdict Verdict
	Want    Outcome
	Why     string
}

func (e *ControlError) Error() string {
	return fmt.Sprintf("calibrate: the %s control ended %v, not %s: %s", e.Control, e.Verdict, e.Want, e.Why)
}

// Is makes a NO_DECISION control ErrUndecided.
func (e *ControlError) Is(target error) bool {
	return target == ErrUndecided && e.Verdict.Outcome == NoDecision
}

// controlErr is the ControlError of a control that ended v.
func controlErr(which string, v Verdict, want Outcome, why string) error {
	return &ControlError{Control: which, Verdict: v, Want: want, Why: why}
}

// useCalibration makes cal the referee's calibration, sealed.
func (r *Referee) useCalibration(cal *Calibration) error {
	ref, err := r.Store.Put(DomainCalibration, *cal)
	if err != nil {
		return err
	}
	r.Calibration, r.CalibRef = cal, ref
	return nil
}

// measurements are what the A/A attempts gave.
type measurements struct {
	drifts, ratios []*big.Rat
	incumbent      []*big.Rat
	quality        []QualityResult
}

func (m *measurements) add(store *evidence.Store, rec AttemptRecord) error {
	if rec.Speed == nil {
		return errors.New("it ended before its reads were complete")
	}
	s, err1 := rat(rec.Speed.Drift)
	q, err2 := rat(rec.Speed.Ratio)
	b, err3 := rat(rec.Speed.B)
	bp, err4 := rat(rec.Speed.BPrime)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	m.drifts, m.ratios, m.incumbent = append(m.drifts, s), append(m.ratios, q), append(m.incumbent, b, bp)
	if len(rec.Scores) == 0 {
		return errors.New("T did not score it")
	}
	plan, err := evidence.Load[Plan](store, rec.Plan)
	if err != nil {
		return err
	}
	sets := map[string]TrajectorySet{}
	for _, ref := range rec.Reads {
		rr, err := evidence.Load[ReadRecord](store, ref)
		if err != nil {
			return err
		}
		if sets[rr.Role], err = evidence.Load[TrajectorySet](store, rr.Trajectories); err != nil {
			return err
		}
	}
	secret, err := hex.DecodeString(rec.Secret)
	if err != nil {
		return err
	}
	wide := QualityRule{Alpha: qualityAlpha, TailNLL: 1e9}
	res, err := qualityOf(rec, plan, secret, sets, wide)
	if err != nil {
		return err
	}
	m.quality = append(m.quality, res)
	return nil
}

func (m *measurements) derive(arenaDigest, device, runtime string, tail canon.Decimal) *Calibration {
	maxOf := func(v []float64) float64 {
		out := 0.0
		for _, x := range v {
			out = math.Max(out, x)
		}
		return out
	}
	var drift, dev []float64
	for i, s := range m.drifts {
		f, _ := s.Float64()
		drift = append(drift, f)
		r, _ := m.ratios[i].Float64()
		dev = append(dev, math.Abs(r-1))
	}
	inc := append([]*big.Rat{}, m.incumbent...)
	sort.Slice(inc, func(i, j int) bool { return inc[i].Cmp(inc[j]) < 0 })
	stock := inc[len(inc)/2]
	stockF, _ := stock.Float64()
	var spread []float64
	for _, x := range inc {
		f, _ := x.Float64()
		spread = append(spread, math.Abs(f-stockF)/stockF)
	}
	var q QualityConstants
	q.Alpha, q.TailNLL = decimalOf(qualityAlpha), tail
	for j := range metricNames {
		var d, reg []float64
		for _, res := range m.quality {
			d = append(d, res.Drift[j])
			reg = append(reg, math.Abs(res.Regression[j]))
		}
		q.DriftEnvelope[j] = decimalOf(math.Max(qualityFloors[j], calibrationSafety*maxOf(d)))
		q.AllowedDelta[j] = decimalOf(math.Max(qualityFloors[j], calibrationSafety*maxOf(reg)))
	}
	var div []float64
	for _, res := range m.quality {
		div = append(div, res.Divergence[1]-math.Max(res.Divergence[0], res.Divergence[2]))
	}
	q.DivergenceEnvelope = decimalOf(math.Max(floorDivergence, calibrationSafety*maxOf(div)))
	return &Calibration{Arena: arenaDigest, Device: device, Runtime: runtime,
		Speed: SpeedRule{N: decimalOf(math.Max(floorN, calibrationSafety*maxOf(drift))),
			M: decimalOf(math.Max(floorM, calibrationMarginScale*maxOf(dev))), K: decimalOf(speedK)},
		Quality: q, StockRate: dec(stock), StockEnvelope: decimalOf(math.Max(floorStockEnvelope, 4*maxOf(spread)))}
}

func (m *measurements) driftsDec() []canon.Decimal { return decs(m.drifts) }
func (m *measurements) ratiosDec() []canon.Decimal { return decs(m.ratios) }

func decs(v []*big.Rat) []canon.Decimal {
	out := make([]canon.Decimal, len(v))
	for i, x := range v {
		out[i] = dec(x)
	}
	return out
}

// decimalOf rounds a float to a canonical decimal of six significant
// places (constants, not measurements).
func decimalOf(x float64) canon.Decimal {
	d, err := canon.ParseDecimal(fmt.Sprintf("%.6g", x))
	if err != nil {
		return canon.Decimal(fmt.Sprintf("%.6f", x))
	}
	return d
}
