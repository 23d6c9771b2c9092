package intake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"cacheon/internal/market/chain"
	"cacheon/internal/store"
)

// fakeChain is a Source over a fixed list of reveals.
type fakeChain struct {
	head    uint64
	reveals []chain.Reveal
}

func (c *fakeChain) Finalized(context.Context) (chain.Head, error) {
	return chain.Head{Number: c.head, Hash: "h"}, nil
}

func (c *fakeChain) Reveals(_ context.Context, after chain.Position, upTo uint64, limit int) ([]chain.Reveal, error) {
	var out []chain.Reveal
	for _, r := range c.reveals {
		if after.Less(r.Pos) && r.Pos.Block <= upTo {
			out = append(out, r)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

// add appends a reveal at (block, idx) whose archive holds content (the
// URL carries it, the content hash is its digest).
func (c *fakeChain) add(block uint64, idx uint32, hotkey, content string) chain.Reveal {
	r := chain.Reveal{
		Pos: chain.Position{Block: block, Index: idx}, Hotkey: hotkey,
		ContentHash: hashOf(content), URL: "https://bundles.example/" + content,
		CommitBlock: block - 1, Extrinsic: fmt.Sprintf("x-%d-%d", block, idx),
	}
	c.reveals = append(c.reveals, r)
	sort.Slice(c.reveals, func(i, j int) bool { return c.reveals[i].Pos.Less(c.reveals[j].Pos) })
	return r
}

func hashOf(content string) string {
	s := sha256.Sum256([]byte(content))
	return hex.EncodeToString(s[:])
}

type transientErr struct{ msg string }

func (e transientErr) Error() string   { return e.msg }
func (e transientErr) Transient() bool { return true }

// fakeFetcher writes the URL's last path element as the bundle's payload.
// Contents starting "flaky" fail transiently on their first fetch (a
// marker file in markDir remembers it across processes), "down" always
// fail transiently and "gone" fail for good.
type fakeFetcher struct {
	markDir string
	calls   int
}

func (f *fakeFetcher) Fetch(_ context.Context, url, contentHash, destDir string) error {
	f.calls++
	content := url[strings.LastIndex(url, "/")+1:]
	switch {
	case strings.HasPrefix(content, "down"):
		return transientErr{"connection refused"}
	case strings.HasPrefix(content, "gone"):
		return errors.New("HTTP 404")
	case strings.HasPrefix(content, "flaky"):
		mark := filepath.Join(f.markDir, "flaky-"+contentHash)
		if _, err := os.Stat(mark); err != nil {
			os.WriteFile(mark, nil, 0o600)
			return transientErr{"timeout"}
		}
	}
	if hashOf(content) != contentHash {
		return errors.New("content hash mismatch")
	}
	return os.WriteFile(filepath.Join(destDir, "payload"), []byte(content), 0o600)
}

func payload(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "payload"))
	return string(b)
}

// fakeScanner rejects payloads containing "evil".
type fakeScanner struct{}

func (fakeScanner) Scan(_ context.Context, dir string) error {
	if strings.Contains(payload(dir), "evil") {
		return errors.New("forbidden import os")
	}
	return nil
}

// fakeFP fingerprints the payload with its digits and "_" removed (a
// stand-in for comments, whitespace and local names).
type fakeFP struct{}

func (fakeFP) Fingerprint(_ context.Context, dir string) (string, error) {
	p := strings.Map(func(r rune) rune {
		if r == '_' || (r >= '0' && r <= '9') {
			return -1
		}
		return r
	}, payload(dir))
	return hashOf("fp:" + p), nil
}

// fakeScreener fails payloads containing "wrong".
type fakeScreener struct{}

func (fakeScreener) Screen(_ context.Context, dir string) error {
	if strings.Contains(payload(dir), "wrong") {
		return errors.New("rmsnorm: allclose failed at row 3")
	}
	return nil
}

// clock is a hand-driven clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

type fixture struct {
	in    *Intake
	st    store.Store
	chain *fakeChain
	clock *clock
	fetch *fakeFetcher
}

// opener opens a fresh empty store for one test.
type opener func(t *testing.T) store.Store

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	return newFixtureOn(t, cfg, openSQLite(t))
}

func newFixtureOn(t *testing.T, cfg Config, st store.Store) *fixture {
	t.Helper()
	f := &fixture{st: st, chain: &fakeChain{head: 100}, clock: &clock{t: time.Unix(1_700_000_000, 0)}, fetch: &fakeFetcher{markDir: t.TempDir()}}
	if cfg.Arena == "" {
		cfg.Arena = "arena-1"
	}
	cfg.WorkDir = filepath.Join(t.TempDir(), "work")
	cfg.Now = f.clock.now
	in, err := New(cfg, st, f.chain, f.fetch, fakeScanner{}, fakeFP{}, fakeScreener{})
	if err != nil {
		t.Fatal(err)
	}
	f.in = in
	return f
}

// drain runs Process until nothing is left to do.
func (f *fixture) drain(t *testing.T) {
	t.Helper()
	for i := 0; ; i++ {
		more, err := f.in.Process(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			return
		}
		if i > 10000 {
			t.Fatal("Process does not converge")
		}
	}
}

func (f *fixture) get(t *testing.T, rv chain.Reveal) store.Reservation {
	t.Helper()
	id, err := ReservationID(rv)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.in.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) events(t *testing.T) []store.Event {
	t.Helper()
	var evs []store.Event
	if err := f.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		evs, err = tx.Events(context.Background(), "")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// checkJournal checks that every reservation's events chain from its
// arrival to its current state through allowed transitions only.
func checkJournal(t *testing.T, st store.Store) {
	t.Helper()
	ctx := context.Background()
	ok := newAllowed()
	st.View(ctx, func(tx store.Tx) error {
		evs, err := tx.Events(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		last := map[string]string{}
		for _, e := range evs {
			prev, seen := last[e.Reservation]
			if !seen && e.From != "" || seen && prev != e.From {
				t.Errorf("event %d of %s: from %q, but the reservation was %q", e.Seq, e.Reservation, e.From, prev)
			}
			if !ok[[2]State{State(e.From), State(e.To)}] {
				t.Errorf("event %d: %q -> %q is not in the table", e.Seq, e.From, e.To)
			}
			last[e.Reservation] = e.To
		}
		rs, err := tx.List(ctx, 0, allStates()...)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != len(last) {
			t.Errorf("%d reservations, %d with events", len(rs), len(last))
		}
		for _, r := range rs {
			if last[r.ID] != r.State {
				t.Errorf("%s is %s, its last event says %s", r.ID, r.State, last[r.ID])
			}
		}
		return nil
	})
}

func allStates() []string {
	seen := map[State]bool{}
	var out []string
	for _, t := range Transitions() {
		for _, s := range []State{t.From, t.To} {
			if s != Arrival && !seen[s] {
				seen[s] = true
				out = append(out, string(s))
			}
		}
	}
	return out
}
