package devnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/arenas"
	"cacheon/internal/canon"
	"cacheon/internal/evidence"
	"cacheon/internal/referee"
	"cacheon/python"
)

func TestCalibrateUntilDecided(t *testing.T) {
	undecided := fmt.Errorf("devnet: %w", &referee.ControlError{Control: "negative", Verdict: referee.Because(referee.ReasonDeviceDegraded, "x"), Want: referee.Fail})
	positive := &referee.ControlError{Control: "positive", Verdict: referee.Because(referee.ReasonNotFaster, "r below a bar widened by noise"), Want: referee.Pass}
	other := errors.New("calibrate: the A/A candidate did not pass the screen")
	for _, tc := range []struct {
		name    string
		results []error
		calls   int
		want    error
	}{
		{"first try", []error{nil}, 1, nil},
		{"undecided, then decided", []error{undecided, undecided, nil}, 3, nil},
		{"undecided every time", []error{undecided, undecided, undecided, nil}, calibrationTries, referee.ErrUndecided},
		{"a positive control that failed, then a good calibration", []error{positive, nil}, 2, nil},
		{"another failure is not retried", []error{other, nil}, 1, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			var said []string
			err := calibrateUntilDecided(context.Background(), func(context.Context, string) error {
				calls++
				return tc.results[calls-1]
			}, "cal", func(s string) { said = append(said, s) })
			if calls != tc.calls {
				t.Fatalf("%d calibrations, want %d", calls, tc.calls)
			}
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if len(said) != calls-1 {
				t.Fatalf("progress said %q after %d calls", said, calls)
			}
		})
	}
}

// TestStaleCalibration: a resumed devnet measures its arena again when
// the record in its directory was made by another build (runtime) or on
// another machine (device), and keeps one made here.
func TestStaleCalibration(t *testing.T) {
	ctx := context.Background()
	ar, err := arenas.Resolve("cpu-tiny")
	if err != nil {
		t.Fatal(err)
	}
	ad, err := ar.Digest()
	if err != nil {
		t.Fatal(err)
	}
	here, err := referee.HostDevice{}.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		device, runtime string
		stale           string // "" = current
	}{
		{"made here by this build", here, python.Digest(), ""},
		{"another build", here, fmt.Sprintf("%064x", 7), "another runtime"},
		{"another machine", "cpu: another processor ×64", python.Digest(), "another device model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Devnet{Config: Config{Dir: t.TempDir(), Arena: "cpu-tiny"}}
			wide := canon.Decimal("1000000000")
			cal := referee.Calibration{Arena: ad, Device: tc.device, Runtime: tc.runtime,
				Speed: referee.SpeedRule{N: "0.02", M: "0.01", K: "2"},
				Quality: referee.QualityConstants{Alpha: "0.05", TailNLL: "6.2", DriftEnvelope: [3]canon.Decimal{"0.5", "2", "0.5"},
					AllowedDelta: [3]canon.Decimal{"0.5", "2", "0.5"}, DivergenceEnvelope: "0.5"},
				StockRate: "1", StockEnvelope: wide}
			data, _, err := evidence.Encode(referee.DomainCalibration, cal)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(d.Config.Dir, "calibration", "cpu-tiny.calibration")
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			err = d.staleCalibration(ctx, path)
			if tc.stale == "" && err != nil || tc.stale != "" && (err == nil || !strings.Contains(err.Error(), tc.stale)) {
				t.Fatalf("staleCalibration = %v, want %q", err, tc.stale)
			}
		})
	}
}
