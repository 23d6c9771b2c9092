package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/market/chain"
	"cacheon/internal/market/intake"
	"cacheon/internal/store"
)

// fakeChain is a Source over a fixed list of reveals, all finalized.
type fakeChain struct {
	reveals []chain.Reveal
	err     error
}

func (c *fakeChain) Finalized(context.Context) (chain.Head, error) {
	return chain.Head{Number: 100, Hash: "h"}, c.err
}

func (c *fakeChain) Reveals(_ context.Context, after chain.Position, upTo uint64, limit int) ([]chain.Reveal, error) {
	var out []chain.Reveal
	for _, r := range c.reveals {
		if after.Less(r.Pos) && r.Pos.Block <= upTo && (limit <= 0 || len(out) < limit) {
			out = append(out, r)
		}
	}
	return out, nil
}

// add reveals content committed as the content of committed (the same
// unless the URL serves something else).
func (c *fakeChain) add(hotkey, committed, served string) {
	b := uint64(10 + len(c.reveals))
	c.reveals = append(c.reveals, chain.Reveal{Pos: chain.Position{Block: b}, Hotkey: hotkey,
		ContentHash: hashOf(committed), URL: "https://bundles.example/" + served, CommitBlock: b - 1, Extrinsic: "x" + served})
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

type transientFake string

func (e transientFake) Error() string   { return string(e) }
func (e transientFake) Transient() bool { return true }

// fakeFetcher writes the URL's last element as the bundle's payload; an
// archive that is not the committed content is a permanent mismatch.
type fakeFetcher struct{ onFetch func() }

func (f fakeFetcher) Fetch(_ context.Context, url, contentHash, dir string) error {
	if f.onFetch != nil {
		f.onFetch()
	}
	content := url[strings.LastIndex(url, "/")+1:]
	if hashOf(content) != contentHash {
		return errors.New("hash_mismatch: the archive is not the committed bundle")
	}
	return os.WriteFile(filepath.Join(dir, "payload"), []byte(content), 0o600)
}

func payload(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "payload"))
	return string(b)
}

// fakeScan rejects payloads containing "evil".
type fakeScan struct{}

func (fakeScan) Scan(_ context.Context, dir string) error {
	if strings.Contains(payload(dir), "evil") {
		return errors.New("1 finding(s): op.py:1:1 import-not-allowed import os")
	}
	return nil
}

// fakeFP drops what follows '~' (a stand-in for comments).
type fakeFP struct{}

func (fakeFP) Fingerprint(_ context.Context, dir string) (string, error) {
	p, _, _ := strings.Cut(payload(dir), "~")
	return hashOf(p), nil
}

// fakeScreen answers from a queue of errors per payload (then nil).
type fakeScreen map[string][]error

func (s fakeScreen) Screen(_ context.Context, dir string) error {
	p := payload(dir)
	if q := s[p]; len(q) > 0 {
		s[p] = q[1:]
		return q[0]
	}
	return nil
}

// newNode builds a node over a SQLite store in dir with the fakes.
func newNode(t *testing.T, dir string, src intake.Source, f intake.Fetcher, scr intake.Screener) *Node {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	in, err := intake.New(intake.Config{Arena: "cpu-tiny", WorkDir: filepath.Join(dir, "work")}, st, src, f, fakeScan{}, fakeFP{}, scr)
	if err != nil {
		t.Fatal(err)
	}
	return &Node{Store: st, Intake: in}
}

func TestIntakePass(t *testing.T) {
	src := &fakeChain{}
	src.add("alice", "silu~alice", "silu~alice") // valid
	src.add("bob", "bob's own", "silu~alice")    // serves another archive
	src.add("carol", "silu~carol", "silu~carol") // alice's work, another comment
	src.add("dave", "evil~dave", "evil~dave")    // scan findings
	src.add("erin", "silu~alice", "silu~alice")  // alice's exact bundle
	n := newNode(t, t.TempDir(), src, fakeFetcher{}, fakeScreen{})

	c, err := n.IntakePass(t.Context())
	if err != nil || c.Stopped != nil {
		t.Fatalf("pass: %v, stopped %v", err, c.Stopped)
	}
	// alice: fetch, scan, screen; bob: fetch; carol and dave: fetch, scan;
	// erin: failed on the content hash before any fetch.
	if want := (PassCounts{Admitted: 5, Steps: 9}); c != want {
		t.Errorf("counts %+v, want %+v", c, want)
	}
	rs, err := n.Reservations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 5 {
		t.Fatalf("%d reservations, want 5", len(rs))
	}
	alice := rs[0].ID
	for i, want := range []struct{ hotkey, state, reason string }{
		{"alice", "promoted", "screen passed"},
		{"bob", "failed", "fetch: hash_mismatch: the archive is not the committed bundle"},
		{"carol", "failed", "copy_of:" + alice + " (same selected-payload fingerprint, revealed earlier by alice)"},
		{"dave", "failed", "scan: 1 finding(s): op.py:1:1 import-not-allowed import os"},
		{"erin", "failed", "copy_of:" + alice + " (same content hash, revealed earlier by alice)"},
	} {
		r := rs[i]
		if r.Hotkey != want.hotkey || r.State != want.state || r.Reason != want.reason {
			t.Errorf("reservation %d: %s %s %q, want %s %s %q", i, r.Hotkey, r.State, r.Reason, want.hotkey, want.state, want.reason)
		}
		if r.Block != src.reveals[i].Pos.Block || r.ContentHash != src.reveals[i].ContentHash || r.UpdatedBlock != 100 {
			t.Errorf("reservation %d: %+v does not list its reveal %+v", i, r, src.reveals[i])
		}
	}
	if rs[0].Fingerprint != hashOf("silu") {
		t.Errorf("alice's fingerprint %q is not recorded", rs[0].Fingerprint)
	}

	// Nothing new: a second pass moves nothing.
	if c, err := n.IntakePass(t.Context()); err != nil || c != (PassCounts{}) {
		t.Errorf("second pass: %+v, %v", c, err)
	}
	// The promoted reservation is the qualification work.
	l, ok, err := n.Intake.Lease(t.Context(), "g0", "h0", 60e9)
	if err != nil || !ok || l.Reservation.ID != alice || l.Reproduction {
		t.Errorf("lease: %+v %v %v, want alice's new work", l, ok, err)
	}
}

func TestIntakePassStopsOnTransient(t *testing.T) {
	src := &fakeChain{}
	src.add("alice", "silu~alice", "silu~alice")
	src.add("bob", "silu2~bob", "silu2~bob")
	scr := fakeScreen{"silu~alice": {transientFake("NO_DECISION infrastructure: worker died")}}
	n := newNode(t, t.TempDir(), src, fakeFetcher{}, scr)

	c, err := n.IntakePass(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !Transient(c.Stopped) || !strings.Contains(c.Stopped.Error(), "worker died") {
		t.Fatalf("stopped %v, want the transient screen error", c.Stopped)
	}
	if c.Admitted != 2 || c.Steps != 2 { // alice fetched and scanned; bob waits
		t.Errorf("counts %+v", c)
	}
	states := func() []string {
		rs, err := n.Reservations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.State)
		}
		return out
	}
	// The screen that could not decide sends alice back behind the queue
	// (fetched and checked again within the fetch budget).
	if got := strings.Join(states(), " "); got != "transport_retry reserved" {
		t.Errorf("states %s, want transport_retry reserved", got)
	}
	c, err = n.IntakePass(t.Context())
	if err != nil || c.Stopped != nil || c.Steps != 6 { // alice: fetch, scan, screen again; bob: the same
		t.Fatalf("second pass: %+v, %v", c, err)
	}
	if got := strings.Join(states(), " "); got != "promoted promoted" {
		t.Errorf("states %s, want promoted promoted", got)
	}
}

// TestIntakeTransientNeverBlocks: a bundle whose screen can never decide
// does not hold up the queue: the work behind it is promoted, and it is
// held (the machine's fault, not failed) once the fetch budget is spent.
func TestIntakeTransientNeverBlocks(t *testing.T) {
	src := &fakeChain{}
	src.add("alice", "silu~alice", "silu~alice")
	src.add("bob", "silu2~bob", "silu2~bob")
	never := transientFake("NO_DECISION infrastructure: worker died")
	scr := fakeScreen{"silu~alice": {never, never, never, never, never}}
	n := newNode(t, t.TempDir(), src, fakeFetcher{}, scr)
	for pass := 0; pass < 5; pass++ {
		if _, err := n.IntakePass(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := n.Reservations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].State != "held" || !strings.Contains(rs[0].Reason, "retry budget spent") ||
		!strings.Contains(rs[0].Reason, "worker died") || rs[1].State != "promoted" {
		t.Fatalf("reservations %+v: want alice held with the screen's reason and bob promoted", rs)
	}
}

func TestIntakePassResumesOnce(t *testing.T) {
	dir := t.TempDir()
	src := &fakeChain{}
	src.add("alice", "silu~alice", "silu~alice")

	// A validator dies while it fetches: the fetch's outcome is never
	// recorded.
	ctx, cancel := context.WithCancel(t.Context())
	n := newNode(t, dir, src, fakeFetcher{onFetch: cancel}, fakeScreen{})
	if _, err := n.IntakePass(ctx); !errors.Is(err, context.Canceled) || Transient(err) {
		t.Fatalf("pass: %v, want the cancellation as a hard error", err)
	}
	if rs, _ := n.Reservations(t.Context()); len(rs) != 1 || rs[0].State != "fetching" {
		t.Fatalf("%+v, want one reservation left fetching", rs)
	}
	n.Store.Close()

	n = newNode(t, dir, src, fakeFetcher{}, fakeScreen{})
	c, err := n.IntakePass(t.Context())
	if err != nil || c != (PassCounts{Resumed: 1, Steps: 3}) { // fetch again, scan, screen
		t.Fatalf("restarted pass: %+v, %v", c, err)
	}
	if rs, _ := n.Reservations(t.Context()); rs[0].State != "promoted" {
		t.Errorf("state %s, want promoted", rs[0].State)
	}
	if c, err := n.IntakePass(t.Context()); err != nil || c.Resumed != 0 {
		t.Errorf("a later pass resumed again: %+v, %v", c, err)
	}
}

func TestIntakePassChainDown(t *testing.T) {
	src := &fakeChain{err: errors.New("connection refused")}
	n := newNode(t, t.TempDir(), src, fakeFetcher{}, fakeScreen{})
	c, err := n.IntakePass(t.Context())
	if err == nil || Transient(err) || c.Stopped != nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("pass: %+v, %v; want the chain's error", c, err)
	}
}

func TestStates(t *testing.T) {
	all := []intake.State{intake.Deferred, intake.Reserved, intake.Fetching, intake.TransportRetry, intake.Published,
		intake.Screening, intake.Promoted, intake.Qualifying, intake.ReproductionPending, intake.NoDecision,
		intake.Held, intake.Failed, intake.Expired, intake.Qualified}
	got := States()
	if len(got) != len(all) {
		t.Fatalf("States() = %v, want the %d states", got, len(all))
	}
	have := map[intake.State]bool{}
	for _, s := range got {
		have[s] = true
	}
	for _, s := range all {
		if !have[s] {
			t.Errorf("States() lacks %s", s)
		}
	}
}
