package miner

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/fault"
	"cacheon/internal/market/localchain"
)

// runningChain is a local chain producing blocks as fast as it can (the
// tests wait on chain events, never on the clock).
func runningChain(t *testing.T, finality uint64) *localchain.Chain {
	t.Helper()
	c, err := localchain.Open(context.Background(), localchain.Options{Dir: filepath.Join(t.TempDir(), "chain"), Finality: finality})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		c.Close()
	})
	return c
}

func wallet(t *testing.T, c *localchain.Chain, seed string) *localchain.Wallet {
	t.Helper()
	s := sha256.Sum256([]byte(seed))
	w := localchain.NewWallet(c, ed25519.NewKeyFromSeed(s[:]), time.Millisecond)
	r, err := w.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WaitIncluded(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	return w
}

func writeBundle(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"manifest.toml": "name = \"x\"\n", "kernel.py": "def f():\n    return 1\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestContentHashOfDirectoryAndArchiveAgree(t *testing.T) {
	dir := writeBundle(t)
	want, err := bundle.ContentHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "b.tar.gz")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.Package(dir, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, p := range []string{dir, archive} {
		got, err := ContentHash(context.Background(), p)
		if err != nil || got != want {
			t.Fatalf("ContentHash(%s) = %s %v, want %s", p, got, err, want)
		}
	}
	if _, err := ContentHash(context.Background(), filepath.Join(dir, "kernel.py")); fault.Of(err) != fault.Candidate {
		t.Fatalf("a non-archive file: %v", err)
	}
}

func TestCommitThenReveal(t *testing.T) {
	ctx := context.Background()
	c := runningChain(t, 2)
	w := wallet(t, c, "miner")
	state := filepath.Join(t.TempDir(), "hotkey.commits.json")
	h, err := ContentHash(ctx, writeBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	u := "https://example.com/" + h + ".tar.gz"
	cm, err := Commit(ctx, w, state, h, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Pos.Block == 0 || cm.H != h {
		t.Fatalf("committed %+v", cm)
	}
	if st, err := os.Stat(state); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", st, err)
	}
	var msgs []string
	got, err := Reveal(ctx, w, state, RevealOptions{Wait: time.Hour, Progress: func(m string) { msgs = append(msgs, m) }})
	if err != nil || len(got) != 1 || got[0].Commitment != cm.Commitment || got[0].CommitBlock != cm.Pos.Block || got[0].Pos.Block <= cm.Pos.Block+1 {
		t.Fatalf("revealed %+v %v", got, err)
	}
	st, err := LoadState(state)
	if err != nil || st.Commits[0].RevealBlock != got[0].Pos.Block {
		t.Fatalf("state after reveal: %+v %v", st, err)
	}
	if again, err := Reveal(ctx, w, state, RevealOptions{Wait: time.Hour}); err != nil || len(again) != 0 {
		t.Fatalf("second reveal: %+v %v", again, err)
	}
	if _, err := Reveal(ctx, w, state, RevealOptions{Commitment: cm.Commitment, Wait: time.Hour}); err == nil || !strings.Contains(err.Error(), "already revealed") {
		t.Fatalf("reveal of a revealed commitment: %v", err)
	}
}

func TestRevealOfChangedContentIsRefused(t *testing.T) {
	ctx := context.Background()
	c := runningChain(t, 1)
	w := wallet(t, c, "miner")
	state := filepath.Join(t.TempDir(), "k.commits.json")
	h := strings.Repeat("ab", 32)
	cm, err := Commit(ctx, w, state, h, "https://example.com/b.tar.gz", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := LoadState(state)
	st.Commits[0].H = strings.Repeat("cd", 32) // the bundle changed after the commit
	if err := SaveState(state, st); err != nil {
		t.Fatal(err)
	}
	_, err = Reveal(ctx, w, state, RevealOptions{Commitment: cm.Commitment, Wait: time.Hour})
	if localchain.Refusal(err) != localchain.CodeMismatch || fault.Of(err) != fault.Candidate {
		t.Fatalf("mismatched reveal: %v (fault %v)", err, fault.Of(err))
	}
}

func TestRevealWaitRunsOut(t *testing.T) {
	ctx := context.Background()
	// A chain that produces blocks only when told: the commitment is
	// included but never finalized.
	c, err := localchain.Open(ctx, localchain.Options{Dir: filepath.Join(t.TempDir(), "c"), Finality: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := sha256.Sum256([]byte("m"))
	w := localchain.NewWallet(c, ed25519.NewKeyFromSeed(s[:]), time.Millisecond)
	if _, err := w.Register(ctx); err != nil {
		t.Fatal(err)
	}
	c.Produce(ctx)
	h := strings.Repeat("ab", 32)
	salt, _ := localchain.NewSalt(nil)
	d, _ := localchain.CommitmentDigest(h, "https://e.com/b", w.Hotkey(), salt)
	if _, err := w.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
	c.Produce(ctx)
	state := filepath.Join(t.TempDir(), "k.commits.json")
	if err := SaveState(state, State{Version: 1, Commits: []Pending{{Commitment: d, Chain: c.Genesis(), H: h, U: "https://e.com/b", Salt: salt, Block: 2}}}); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	_, err = Reveal(ctx, w, state, RevealOptions{Wait: 0, Progress: func(m string) { msgs = append(msgs, m) }})
	if fault.Of(err) != fault.Infra || !strings.Contains(err.Error(), "--wait ran out") {
		t.Fatalf("reveal before finality: %v", err)
	}
	if len(msgs) != 1 || !strings.Contains(msgs[0], "waiting for finality") {
		t.Fatalf("progress %q", msgs)
	}
}

func TestParseStateRefuses(t *testing.T) {
	d := strings.Repeat("ab", 32)
	good := `{"commits":[{"chain":"` + d + `","commitment":"` + d + `","h":"` + d + `","salt":"` + d + `","u":"https://e.com/b"}],"version":1}`
	if _, err := ParseState([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{
		"version 2":   strings.Replace(good, `"version":1`, `"version":2`, 1),
		"unknown key": strings.Replace(good, `"version":1`, `"extra":1,"version":1`, 1),
		"bad salt":    strings.Replace(good, `"salt":"`+d, `"salt":"xyz`, 1),
		"bad url":     strings.Replace(good, `https://e.com/b`, `ftp://e.com/b`, 1),
		"duplicate":   strings.Replace(good, `}],`, `},{"chain":"`+d+`","commitment":"`+d+`","h":"`+d+`","salt":"`+d+`","u":"https://e.com/b"}],`, 1),
		"whitespace":  " " + good,
	} {
		if _, err := ParseState([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseState: an accepted state file re-encodes to its exact bytes and
// nothing panics.
func FuzzParseState(f *testing.F) {
	d := strings.Repeat("ab", 32)
	f.Add([]byte(`{"commits":[{"chain":"` + d + `","commitment":"` + d + `","h":"` + d + `","salt":"` + d + `","u":"https://e.com/b"}],"version":1}`))
	f.Add([]byte(`{"commits":[],"version":1}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseState(b)
		if err != nil {
			return
		}
		dir := t.TempDir()
		p := filepath.Join(dir, "s.json")
		if err := SaveState(p, s); err != nil {
			t.Fatal(err)
		}
		again, _ := os.ReadFile(p)
		if string(again) != string(b) {
			t.Fatalf("accepted %q, saved as %q", b, again)
		}
	})
}
