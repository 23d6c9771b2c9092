package referee

import (
	"fmt"
	"math/big"
	"strconv"

	"cacheon/internal/canon"
	"cacheon/internal/evidence"
)

// Calibration is the record every decision takes its constants from, never
// from flags at decision time: the speed rule's n, m, k; the quality
// rule's constants; the calibrated stock rate with its envelope (device
// sanity); what it was measured on; and the raw reads that produced it.
type Calibration struct {
	Arena string `json:"arena"` // arena digest (settings, workload selected)
	// Device is the device's model as the referee's device guard
	// describes it (Device.Describe: "cpu", or the GPU's name and driver).
	Device string `json:"device"`
	// Runtime is the digest of the runtime that was calibrated.
	Runtime string           `json:"runtime"`
	Speed   SpeedRule        `json:"speed"`
	Quality QualityConstants `json:"quality"`
	// StockRate is the calibrated scored rate of the stock stack, tokens/s.
	StockRate canon.Decimal `json:"stock_rate"`
	// StockEnvelope is the relative band around StockRate every incumbent
	// read must lie in (else NO_DECISION device_degraded).
	StockEnvelope canon.Decimal `json:"stock_envelope"`
	// Reads are the A/A and control attempts, as sealed evidence.
	Reads []evidence.Ref `json:"reads"`
}

// QualityConstants are QualityRule's constants as canonical decimals.
type QualityConstants struct {
	Alpha              canon.Decimal    `json:"alpha"`
	TailNLL            canon.Decimal    `json:"tail_nll"`
	DriftEnvelope      [3]canon.Decimal `json:"drift_envelope"`
	AllowedDelta       [3]canon.Decimal `json:"allowed_delta"`
	DivergenceEnvelope canon.Decimal    `json:"divergence_envelope"`
}

// Rule is the quality rule these constants make.
func (q QualityConstants) Rule() (QualityRule, error) {
	f := func(name string, d canon.Decimal) (float64, error) {
		x, err := strconv.ParseFloat(string(d), 64)
		if _, perr := canon.ParseDecimal(string(d)); err != nil || perr != nil || x < 0 {
			return 0, fmt.Errorf("quality %s = %q: want a non-negative decimal", name, d)
		}
		return x, nil
	}
	var r QualityRule
	var err error
	if r.Alpha, err = f("alpha", q.Alpha); err != nil {
		return QualityRule{}, err
	}
	if r.TailNLL, err = f("tail_nll", q.TailNLL); err != nil {
		return QualityRule{}, err
	}
	if r.DivergenceEnvelope, err = f("divergence_envelope", q.DivergenceEnvelope); err != nil {
		return QualityRule{}, err
	}
	for j := range metricNames {
		if r.DriftEnvelope[j], err = f("drift_envelope", q.DriftEnvelope[j]); err != nil {
			return QualityRule{}, err
		}
		if r.AllowedDelta[j], err = f("allowed_delta", q.AllowedDelta[j]); err != nil {
			return QualityRule{}, err
		}
	}
	if !(r.Alpha > 0 && r.Alpha < 1) {
		return QualityRule{}, fmt.Errorf("quality alpha = %s: want 0 < alpha < 1", q.Alpha)
	}
	return r, nil
}

// Validate checks the record's constants.
func (c *Calibration) Validate() error {
	if err := canon.ValidDigest(c.Arena); err != nil {
		return fmt.Errorf("calibration arena: %w", err)
	}
	if _, _, _, err := c.Speed.rats(); err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	if _, err := c.Quality.Rule(); err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	for name, d := range map[string]canon.Decimal{"stock_rate": c.StockRate, "stock_envelope": c.StockEnvelope} {
		if r, err := rat(d); err != nil || r.Sign() <= 0 {
			return fmt.Errorf("calibration %s = %q: want a positive decimal", name, d)
		}
	}
	return nil
}

// Provenance is what a calibration is for: the arena (its workload
// selected), the device's model as Device.Describe names it, and the
// runtime's digest. Constants measured on another device model or driver,
// or with another runtime, do not describe this referee's noise.
type Provenance struct {
	Arena, Device, Runtime string
}

// Matches reports, as an error naming the field, where the calibration was
// made for something else than want.
func (c *Calibration) Matches(want Provenance) error {
	for _, f := range []struct{ name, got, want, hint string }{
		{"arena", c.Arena, want.Arena, "another arena or workload"},
		{"device", c.Device, want.Device, "another device model or driver"},
		{"runtime", c.Runtime, want.Runtime, "another runtime (another cacheon build)"},
	} {
		if f.got != f.want {
			return fmt.Errorf("was made for %s (%s %q, this is %q): run cacheon calibrate here", f.hint, f.name, f.got, f.want)
		}
	}
	return nil
}

// Sane checks an incumbent read's scored rate against the calibrated stock
// rate: |rate − stock| / stock must not exceed the envelope.
func (c *Calibration) Sane(role string, rate *big.Rat) Verdict {
	stock, err1 := rat(c.StockRate)
	env, err2 := rat(c.StockEnvelope)
	if err1 != nil || err2 != nil || stock.Sign() <= 0 {
		return Because(ReasonCalibrationMiss, "the calibration's stock rate %q or envelope %q is unusable", c.StockRate, c.StockEnvelope)
	}
	dev := new(big.Rat).Sub(rate, stock)
	dev.Abs(dev).Quo(dev, stock)
	if dev.Cmp(env) > 0 {
		return Because(ReasonDeviceDegraded, "%s read %s tokens/s, %s from the calibrated %s (envelope %s)", role, dec(rate), dec(dev), c.StockRate, c.StockEnvelope)
	}
	return Verdict{}
}
