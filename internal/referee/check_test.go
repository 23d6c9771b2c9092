package referee

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRederives: every attempt's verdict is re-derived from its
// evidence alone — numeric verdicts exactly, event verdicts as consistent.
func TestCheckRederives(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     script
		event bool
	}{
		{"pass", script{incRates: []float64{1000, 1000}, candRate: 1100}, false},
		{"not faster", script{incRates: []float64{1000, 1000}, candRate: 900}, false},
		{"drift", script{incRates: []float64{1000, 1100}, candRate: 1300}, false},
		{"audit", script{incRates: []float64{1000, 1000}, candRate: 1100, auditFail: true}, false},
		{"quality", script{incRates: []float64{1000, 1000}, candRate: 1100, ownGap: 0.1}, false},
		{"candidate engine failed", script{incRates: []float64{1000}, candErr: os.ErrClosed}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			r, p := newFakeReferee(t, &s)
			rec, ref, err := r.Attempt(context.Background(), p, 1)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Check(r.Store, ref)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if rep.Verdict != rec.Verdict || rep.Event != tc.event || (!tc.event && len(rep.Derived) == 0) {
				t.Fatalf("Check = %+v for %v", rep, rec.Verdict)
			}
		})
	}
}

// TestCheckTamper: a changed byte in any object, a forged verdict, or a
// secret that was not the committed one is an error.
func TestCheckTamper(t *testing.T) {
	s := script{incRates: []float64{1000, 1000}, candRate: 1100}
	r, p := newFakeReferee(t, &s)
	rec, ref, err := r.Attempt(context.Background(), p, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a wave's time", func(t *testing.T) {
		read := rec.Reads[1]
		path := filepath.Join(r.Store.Root(), read.Domain, read.Digest[:2], read.Digest)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(string(b), `"nanos":`) + len(`"nanos":`)
		b[i] = '9'
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o400); err != nil {
			t.Fatal(err)
		}
		if _, err := Check(r.Store, ref); err == nil || !strings.Contains(err.Error(), "digest mismatch") {
			t.Fatalf("Check after a changed wave: %v", err)
		}
	})
	forge := func(t *testing.T, change func(*AttemptRecord)) error {
		t.Helper()
		f := *rec
		change(&f)
		fref, err := r.Store.Put(DomainAttempt, f)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Check(r.Store, fref)
		return err
	}
	s2 := script{incRates: []float64{1000, 1000}, candRate: 900}
	r2, p2 := newFakeReferee(t, &s2)
	slow, _, err := r2.Attempt(context.Background(), p2, 1)
	if err != nil {
		t.Fatal(err)
	}
	r = r2
	rec = slow
	t.Run("a FAIL re-sealed as PASS", func(t *testing.T) {
		if err := forge(t, func(a *AttemptRecord) { a.Verdict = Passed("r = 1.1") }); err == nil {
			t.Fatal("a forged PASS checked out")
		}
	})
	t.Run("another secret", func(t *testing.T) {
		if err := forge(t, func(a *AttemptRecord) { a.Secret = strings.Repeat("ab", 32) }); err == nil || !strings.Contains(err.Error(), "commitment") {
			t.Fatalf("a secret that was not committed: %v", err)
		}
	})
	t.Run("an event verdict claiming PASS", func(t *testing.T) {
		if err := forge(t, func(a *AttemptRecord) { a.Reads = a.Reads[:1]; a.Verdict = Passed("x") }); err == nil {
			t.Fatal("a PASS without reads checked out")
		}
	})
	t.Run("a numeric verdict without its numbers", func(t *testing.T) {
		if err := forge(t, func(a *AttemptRecord) { a.Reads = a.Reads[:1]; a.Verdict = Because(ReasonAudit, "x") }); err == nil {
			t.Fatal("an audit violation without an audit checked out")
		}
	})
}

// TestCheckQuality: role T's own result, re-derived from the evidence,
// is the quality rule's — PASS where the attempt passed, FAIL quality
// where the candidate's own log-probabilities diverge — and there is none
// where T scored nothing (the speed rule decided first).
func TestCheckQuality(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      script
		scored bool
		want   Outcome
		reason Reason
	}{
		{"pass", script{incRates: []float64{1000, 1000}, candRate: 1100}, true, Pass, ""},
		{"quality", script{incRates: []float64{1000, 1000}, candRate: 1100, ownGap: 0.1}, true, Fail, ReasonQuality},
		{"not faster: T never ran", script{incRates: []float64{1000, 1000}, candRate: 900}, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			r, p := newFakeReferee(t, &s)
			rec, ref, err := r.Attempt(context.Background(), p, 1)
			if err != nil {
				t.Fatal(err)
			}
			rep, ok, err := CheckQuality(r.Store, ref)
			if err != nil || ok != tc.scored {
				t.Fatalf("CheckQuality: %+v, %v, %v; want scored %v (attempt %v)", rep, ok, err, tc.scored, rec.Verdict)
			}
			if !ok {
				return
			}
			if rep.Verdict.Outcome != tc.want || rep.Verdict.Reason != tc.reason {
				t.Errorf("T's verdict %v; want %s %s", rep.Verdict, tc.want, tc.reason)
			}
			if len(rep.Figures) != 3 || rep.Prompts < 2 {
				t.Errorf("%d figures over %d prompts; want 3 over ≥ 2", len(rep.Figures), rep.Prompts)
			}
		})
	}
}
