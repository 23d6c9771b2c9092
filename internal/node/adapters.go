package node

// The adapters between the intake's interfaces and the real scan,
// fingerprint and screen. One rule decides what the intake retries: a
// failure that is the candidate's fails the reservation; anything else
// (no interpreter, the sandbox, a worker, a timeout of the machinery) is
// the machine's and comes back transient, so the reservation stays where
// it is and the step runs again later (the rule of referee.Attribute).
// The intake names the step in the reasons it records ("fetch: …", "scan:
// …"), so the adapters drop the same name from the front of an error.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cacheon/internal/arena"
	"cacheon/internal/fault"
	"cacheon/internal/market/intake"
	"cacheon/internal/referee"
	"cacheon/internal/scan"
	"cacheon/internal/slot"
)

// transientErr marks an error the intake retries: the machine's fault,
// not the bundle's.
type transientErr struct{ err error }

func (t transientErr) Error() string   { return t.err.Error() }
func (t transientErr) Unwrap() error   { return t.err }
func (t transientErr) Transient() bool { return true }

// Transient reports whether err says it is worth retrying (an error in
// its chain implements Transient() bool and reports true): a pass that
// stopped on one is retried by the next.
func Transient(err error) bool {
	var t interface{ Transient() bool }
	return errors.As(err, &t) && t.Transient()
}

// unlessCandidate returns err, without the leading step name the intake
// adds itself, as is when it is the candidate's fault and marked transient
// otherwise.
func unlessCandidate(err error, step string) error {
	if err == nil {
		return nil
	}
	var out error = trimmedErr{err: err, prefix: step + ": "}
	if fault.Of(err) == fault.Candidate {
		return out
	}
	return transientErr{out}
}

// fetcher is the real fetch (*fetch.Fetcher). Its errors read "fetch:
// reason: …" and the intake names the step itself, so the reason recorded
// would say "fetch: fetch: …": the adapter drops the inner step name and
// keeps the error (and its Transient) underneath.
type fetcher struct{ f intake.Fetcher }

func (f fetcher) Fetch(ctx context.Context, url, contentHash, dir string) error {
	if err := f.f.Fetch(ctx, url, contentHash, dir); err != nil {
		return trimmedErr{err: err, prefix: "fetch: "}
	}
	return nil
}

// trimmedErr is err reading without a leading prefix.
type trimmedErr struct {
	err    error
	prefix string
}

func (t trimmedErr) Error() string { return strings.TrimPrefix(t.err.Error(), t.prefix) }
func (t trimmedErr) Unwrap() error { return t.err }

// maxShown is how many findings a rejection's reason names.
const maxShown = 3

// scanner is the static policy (scan.Check) over a fetched bundle.
type scanner struct {
	check func(ctx context.Context, dir string) (*scan.Report, error)
}

// Scan rejects a bundle with findings, naming the first few; an error of
// the scan itself is transient unless it blames the bundle (scan.Check
// reports those only for the scan's machinery: no interpreter, the
// sandbox, I/O, a timeout).
func (s scanner) Scan(ctx context.Context, dir string) error {
	rep, err := s.check(ctx, dir)
	if err != nil {
		return unlessCandidate(err, "scan")
	}
	if len(rep.Findings) == 0 {
		return nil
	}
	var shown []string
	for i, f := range rep.Findings {
		if i == maxShown {
			shown = append(shown, fmt.Sprintf("and %d more", len(rep.Findings)-maxShown))
			break
		}
		shown = append(shown, f.String())
	}
	return fmt.Errorf("%d finding(s): %s", len(rep.Findings), strings.Join(shown, "; "))
}

// fingerprintFunc is what fingerprinter needs (*fingerprint.Fingerprinter).
type fingerprintFunc interface {
	Fingerprint(ctx context.Context, dir string) (string, error)
}

// fingerprinter is the copy fingerprint: a bundle that does not load or
// parse fails (fault.CandidateErr); a missing or failing interpreter is
// transient.
type fingerprinter struct{ fp fingerprintFunc }

func (f fingerprinter) Fingerprint(ctx context.Context, dir string) (string, error) {
	sum, err := f.fp.Fingerprint(ctx, dir)
	return sum, unlessCandidate(err, "fingerprint")
}

// screenFunc screens a bundle: a nil close and a verdict on FAIL or
// NO_DECISION, a close and the zero verdict on PASS.
type screenFunc func(ctx context.Context, dir string) (close func() error, v referee.Verdict)

// refereeScreen is referee.Screen on the arena's device and dtype.
func refereeScreen(a *arena.Arena, slots *slot.Catalog, python, scratch string, progress func(string)) screenFunc {
	return func(ctx context.Context, dir string) (func() error, referee.Verdict) {
		s, v := referee.Screen(ctx, dir, a, slots, python, scratch, progress)
		if s == nil {
			return nil, v
		}
		return s.Close, v
	}
}

// screener is the referee's screen: FAIL fails the reservation,
// NO_DECISION is transient.
type screener struct{ screen screenFunc }

func (s screener) Screen(ctx context.Context, dir string) error {
	closeFn, v := s.screen(ctx, dir)
	switch {
	case v.Outcome == "" || v.Outcome == referee.Pass:
		if closeFn == nil {
			return nil
		}
		if err := closeFn(); err != nil {
			return transientErr{fmt.Errorf("remove the screen's private copy: %w", err)}
		}
		return nil
	case v.Outcome == referee.Fail:
		return errors.New(v.String())
	default:
		return transientErr{errors.New(v.String())}
	}
}
