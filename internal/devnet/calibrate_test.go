package devnet

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"cacheon/internal/referee"
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
