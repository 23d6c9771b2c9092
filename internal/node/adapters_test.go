package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"cacheon/internal/fault"
	"cacheon/internal/market/fetch"
	"cacheon/internal/referee"
	"cacheon/internal/scan"
)

func findings(n int) *scan.Report {
	rep := &scan.Report{}
	for i := 0; i < n; i++ {
		rep.Findings = append(rep.Findings, scan.Finding{Path: "op.py", Line: i + 1, Col: 1, Rule: "import-not-allowed", Message: fmt.Sprintf("import os (%d)", i)})
	}
	return rep
}

func TestScanner(t *testing.T) {
	boom := errors.New("run parser: signal: killed")
	for _, tc := range []struct {
		name      string
		rep       *scan.Report
		err       error
		want      string // "" = nil error
		transient bool
	}{
		{"clean", findings(0), nil, "", false},
		{"one finding", findings(1), nil, "1 finding(s): op.py:1:1 import-not-allowed import os (0)", false},
		{"five findings name three", findings(5), nil, "5 finding(s): op.py:1:1 import-not-allowed import os (0); op.py:2:1 import-not-allowed import os (1); op.py:3:1 import-not-allowed import os (2); and 2 more", false},
		{"the scan's machinery failed", nil, boom, boom.Error(), true},
		{"infrastructure", nil, fault.InfraErr(boom), boom.Error(), true},
		{"not a bundle", nil, fault.CandidateErr(errors.New("scan x: not a bundle")), "scan x: not a bundle", false},
		{"the step named once", nil, fmt.Errorf("scan: %w", boom), boom.Error(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scanner{check: func(context.Context, string) (*scan.Report, error) { return tc.rep, tc.err }}
			err := s.Scan(t.Context(), "dir")
			checkErr(t, err, tc.want, tc.transient)
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("the cause is lost: %v", err)
			}
		})
	}
}

type fakeFingerprint struct {
	sum string
	err error
}

func (f fakeFingerprint) Fingerprint(context.Context, string) (string, error) { return f.sum, f.err }

func TestFingerprinter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fp        fakeFingerprint
		want      string
		transient bool
	}{
		{"ok", fakeFingerprint{sum: "abc"}, "", false},
		{"does not parse", fakeFingerprint{err: fault.CandidateErr(errors.New("fingerprint: op.py cannot be normalized"))}, "op.py cannot be normalized", false},
		{"no interpreter", fakeFingerprint{err: fault.InfraErr(errors.New("fingerprint: find python interpreter"))}, "find python interpreter", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, err := fingerprinter{fp: tc.fp}.Fingerprint(t.Context(), "dir")
			checkErr(t, err, tc.want, tc.transient)
			if err == nil && sum != tc.fp.sum {
				t.Errorf("fingerprint %q, want %q", sum, tc.fp.sum)
			}
		})
	}
}

func TestScreener(t *testing.T) {
	for _, tc := range []struct {
		name      string
		v         referee.Verdict
		closeErr  error
		want      string
		transient bool
	}{
		{"pass", referee.Verdict{}, nil, "", false},
		{"pass, the private copy stays", referee.Verdict{}, errors.New("permission denied"), "remove the screen's private copy: permission denied", true},
		{"verify fails", referee.Because(referee.ReasonVerify, "activation.silu_and_mul/default: allclose"), nil, "FAIL verify_failed: activation.silu_and_mul/default: allclose", false},
		{"scan refuses", referee.Because(referee.ReasonScan, "2 scan finding(s)"), nil, "FAIL scan_failed: 2 scan finding(s)", false},
		{"no decision", referee.Because(referee.ReasonInfrastructure, "verify: worker died"), nil, "NO_DECISION infrastructure: verify: worker died", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			closed := false
			s := screener{screen: func(context.Context, string) (func() error, referee.Verdict) {
				if tc.v.Outcome != "" {
					return nil, tc.v
				}
				return func() error { closed = true; return tc.closeErr }, tc.v
			}}
			err := s.Screen(t.Context(), "dir")
			checkErr(t, err, tc.want, tc.transient)
			if tc.v.Outcome == "" && !closed {
				t.Error("a passing screen's private copy was not closed")
			}
		})
	}
}

// checkErr wants err to read want ("" = nil) and be transient or not.
func checkErr(t *testing.T, err error, want string, transient bool) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		return
	}
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if got := Transient(err); got != transient {
		t.Errorf("Transient = %v, want %v", got, transient)
	}
	if wrapped := fmt.Errorf("process x: scan: %w", err); Transient(wrapped) != transient {
		t.Error("wrapping changed Transient")
	}
	if strings.HasPrefix(err.Error(), "scan: ") || strings.HasPrefix(err.Error(), "screen: ") {
		t.Errorf("%q repeats the step the intake prefixes", err)
	}
}

type fetchFunc func() error

func (f fetchFunc) Fetch(context.Context, string, string, string) error { return f() }

// TestFetcher: the real fetcher's errors keep their Transient and lose
// the step name the intake adds itself.
func TestFetcher(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	real := fetcher{f: fetch.New(fetch.Config{AllowLoopbackHTTP: true})}
	hash := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name      string
		url       string
		want      string // a prefix of the error
		transient bool
	}{
		{"not found", srv.URL + "/gone", "http_status: ", false},
		{"busy", srv.URL + "/busy", "http_status: ", true},
		{"plain http beyond loopback", "http://8.8.8.8/a.tar.gz", "address_not_public: ", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := real.Fetch(t.Context(), tc.url, hash, t.TempDir())
			var fe *fetch.Error
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.As(err, &fe) {
				t.Fatalf("err = %v, want %q… from a *fetch.Error", err, tc.want)
			}
			if Transient(err) != tc.transient {
				t.Errorf("Transient = %v, want %v", Transient(err), tc.transient)
			}
		})
	}
	if err := (fetcher{f: fetchFunc(func() error { return nil })}).Fetch(t.Context(), "", "", ""); err != nil {
		t.Errorf("a fetch that succeeds: %v", err)
	}
}
