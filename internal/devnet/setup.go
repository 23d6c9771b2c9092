package devnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"cacheon/arenas"
	"cacheon/internal/engine"
	"cacheon/internal/evidence"
	"cacheon/internal/referee"
	"cacheon/internal/slot"
	"cacheon/internal/target"
	"cacheon/internal/worker"
	"cacheon/python"
)

// The devnet's referee settings: few waves and prompts, so an attempt
// takes seconds on a CPU; the same rules as everywhere.
const (
	devWaves    = 3
	devTPrompts = 4
	devAudit    = "0.5"
	devMinAudit = 1
	devPairs    = 2
	// devQualifyRetries is how many NO_DECISION attempts the devnet's
	// intake takes before it holds a submission for the operator.
	devQualifyRetries = 8
)

// configText is the validator's configuration: the store, evidence and
// bundles under Dir/validator, the slow kernel as the arena's
// generation-0 incumbent, weights published every 10 finalized blocks
// with the validator itself as the burn target.
func (d *Devnet) configText(hotkey string) string {
	q := strconv.Quote
	return fmt.Sprintf(`# Written by cacheon devnet up (again at every start: the chain's port changes).
data = "validator"
chain = %s
arena = %s
python = %s
allow_loopback_http = true
listen = %s
poll = "300ms"

[referee]
calibration = %s
waves = %d
t_prompts = %d
audit_share = %s
min_audited = %d

[intake]
# A burst of load on a shared CPU can undecide several attempts in a row
# (the incumbent's reads drift past the noise ceiling); the devnet measures
# again more often than the default 3 before it holds a submission for the
# operator. The bar a decision must clear is unchanged.
qualify_retries = %d

[weights]
key = "keys/validator.key"
burn_uid = 0
burn_hotkey = %s
interval = 10
deadline = 30

# The devnet's incumbent: a correct but deliberately slow silu_and_mul, so
# an honest kernel's win is large enough to resolve on a shared CPU.
[[base]]
target = "activation.silu_and_mul"
bundle = "bundles/slow"
`, q(d.ChainURL), q(d.Config.Arena), q(d.Config.Python), q(d.Config.Addr),
		q(filepath.Join("calibration", d.Config.Arena+".calibration")), devWaves, devTPrompts, q(devAudit), devMinAudit, devQualifyRetries, q(hotkey))
}

// calibrationTries bounds how often a devnet measures its arena when a
// control does not end as it must. On a shared CPU a burst of load in
// one read can undecide a control (NO_DECISION) or, by widening the A/A
// noise that sets the margin, fail the positive one; each try is a whole
// new calibration, and its controls must behave: the bar is never lowered.
const calibrationTries = 3

// calibrateUntilDecided runs calibrate until it succeeds, fails for
// another reason than a control (a *referee.ControlError), or has tried
// calibrationTries times.
func calibrateUntilDecided(ctx context.Context, calibrate func(context.Context, string) error, path string, progress func(string)) error {
	for try := 1; ; try++ {
		err := calibrate(ctx, path)
		var ce *referee.ControlError
		if err == nil || !errors.As(err, &ce) || try == calibrationTries {
			return err
		}
		progress(fmt.Sprintf("calibration try %d of %d refused (%v); measuring again", try, calibrationTries, err))
	}
}

// staleCalibration is why the calibration at path does not serve this
// devnet's validator (referee.LoadCalibration: made for another arena,
// device model or runtime, as after an upgrade of a resumed devnet, or
// unreadable), nil when it does.
func (d *Devnet) staleCalibration(ctx context.Context, path string) error {
	ar, err := arenas.Resolve(d.Config.Arena)
	if err != nil {
		return err
	}
	ad, err := ar.Digest()
	if err != nil {
		return err
	}
	device, err := referee.DeviceOf(ar).Describe(ctx)
	if err != nil {
		return err
	}
	store, err := evidence.Open(filepath.Join(d.Config.Dir, "calibration", "evidence"))
	if err != nil {
		return err
	}
	_, _, err = referee.LoadCalibration(store, path, referee.Provenance{Arena: ad, Device: device, Runtime: python.Digest()})
	return err
}

// calibrate measures the arena on this machine with cacheon calibrate's
// procedure (referee.Calibrate): A/A with the honest kernel (it computes
// exactly what the stock kernel does), the slow kernel as the negative
// control (slower than stock: it must FAIL), the honest kernel over the
// slow incumbent as the positive control (it must PASS). The record is
// refused unless both controls behave, and is written to path.
func (d *Devnet) calibrate(ctx context.Context, path string) error {
	ar, err := arenas.Resolve(d.Config.Arena)
	if err != nil {
		return fmt.Errorf("devnet: %w", err)
	}
	slots, err := slot.NewCatalog()
	if err != nil {
		return fmt.Errorf("devnet: %w", err)
	}
	targets, err := target.NewCatalog(slots)
	if err != nil {
		return fmt.Errorf("devnet: %w", err)
	}
	store, err := evidence.Open(filepath.Join(d.Config.Dir, "calibration", "evidence"))
	if err != nil {
		return fmt.Errorf("devnet: calibration evidence: %w", err)
	}
	scratch, err := os.MkdirTemp(worker.ScratchRoot(), "cacheon-devnet-cal-*")
	if err != nil {
		return fmt.Errorf("devnet: %w", err)
	}
	defer os.RemoveAll(scratch)
	r := &referee.Referee{Open: referee.OpenEngine, Device: referee.DeviceOf(ar), Slots: slots, Store: store, Python: d.Config.Python,
		ScratchRoot: worker.ScratchRoot(), Waves: devWaves, TPrompts: devTPrompts, AuditShare: devAudit, AuditMax: 64,
		MinAudited: devMinAudit, KernelCache: filepath.Join(scratch, "kernels"), Progress: d.Config.Progress}
	cal, _, rep, err := r.Calibrate(ctx, referee.CalibrateRequest{Arena: ar, AA: d.BundleDir("honest"), Pairs: devPairs,
		Negative: d.BundleDir("slow"), Positive: d.BundleDir("honest"),
		PositiveIncumbent: []engine.StackSpec{{Slot: "activation.silu_and_mul", Bundle: d.BundleDir("slow")}},
		Targets:           targets, Runtime: python.Digest()})
	if rep != nil {
		d.Config.Progress(fmt.Sprintf("A/A drifts %v, ratios %v; negative control %v; positive control %v", rep.Drifts, rep.Ratios, rep.Negative, rep.Positive))
	}
	if err != nil {
		return fmt.Errorf("devnet: calibrate %s: %w", d.Config.Arena, err)
	}
	data, _, err := evidence.Encode(referee.DomainCalibration, *cal)
	if err != nil {
		return fmt.Errorf("devnet: calibration: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("devnet: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("devnet: %w", err)
	}
	d.Config.Progress(fmt.Sprintf("calibrated: n %s, m %s, k %s (written to %s)", cal.Speed.N, cal.Speed.M, cal.Speed.K, path))
	return nil
}
