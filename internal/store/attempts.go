package store

import (
	"context"
	"fmt"
)

// AttemptRecord is one qualification attempt's outcome as the validator
// recorded it: the referee loop writes it in the same transaction as the
// intake's lease completion; settlement and the dashboard read it.
type AttemptRecord struct {
	Reservation  string
	N            int    // attempt number of this reservation, 1, 2, … (the reservation's Attempts counter after it)
	Lease        string // the lease it ran under
	Group        string // the device group that ran it
	Holder       string // the lease holder
	Reproduction bool
	Verdict      string // "PASS", "FAIL", "NO_DECISION"
	Reason       string // the referee's reason code ("" for PASS)
	Detail       string
	Evidence     string // the sealed attempt record's ref (e.g. "cacheon.referee.attempt:<sha256>"), "" when none was sealed
	Incumbent    string // digest of the evaluation stack it was measured against
	Target       string // the registered target
	Proposal     string // the candidate's content hash
	SpeedupPPM   int64  // r in integer parts per million (0 when no speed was measured)
	Block        uint64 // finalized head block when recorded
	StartedMS    int64
	EndedMS      int64
}

// AttemptsTx is the attempts journal's part of Tx.
type AttemptsTx interface {
	// RecordAttempt appends an attempt; ErrStale if (Reservation, N)
	// exists. Attempts are never updated or deleted. The reservation must
	// exist; a record with an empty reservation, N < 1, a verdict other
	// than PASS, FAIL or NO_DECISION, or a negative speedup is refused.
	RecordAttempt(ctx context.Context, a AttemptRecord) error
	// Attempts returns a reservation's attempts by N ("" : every attempt,
	// by reservation queue position then N).
	Attempts(ctx context.Context, reservation string) ([]AttemptRecord, error)
}

// attemptVerdicts are the verdicts an attempt may record.
var attemptVerdicts = map[string]bool{"PASS": true, "FAIL": true, "NO_DECISION": true}

// validAttempt returns why a is not a record RecordAttempt accepts, or nil.
func validAttempt(a AttemptRecord) error {
	switch {
	case a.Reservation == "":
		return fmt.Errorf("record attempt %d: empty reservation", a.N)
	case a.N < 1:
		return fmt.Errorf("record attempt of %s: attempt number %d, want 1 or more", a.Reservation, a.N)
	case !attemptVerdicts[a.Verdict]:
		return fmt.Errorf("record attempt %s#%d: verdict %q, want PASS, FAIL or NO_DECISION", a.Reservation, a.N, a.Verdict)
	case a.SpeedupPPM < 0:
		return fmt.Errorf("record attempt %s#%d: negative speedup %d ppm", a.Reservation, a.N, a.SpeedupPPM)
	}
	return nil
}
