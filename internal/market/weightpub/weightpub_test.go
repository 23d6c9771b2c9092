package weightpub

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cacheon/internal/market/chain"
	"cacheon/internal/market/weights"
	"cacheon/internal/store"
)

func openStore(t *testing.T, dir string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newFake() *fakeChain {
	c := &fakeChain{}
	c.State.Head, c.State.Finality = 10, 1
	c.State.Meta = []chain.Neuron{{UID: 0, Hotkey: "burn"}, {UID: 1, Hotkey: "val"}, {UID: 2, Hotkey: "a"}, {UID: 3, Hotkey: "b"}}
	return c
}

func testConfig() Config {
	return Config{
		Hotkey: "val", Projection: weights.Config{HalfLife: 10, Burn: &weights.Burn{UID: 0, Hotkey: "burn"}},
		Interval: 5, Deadline: 3, Now: func() time.Time { return time.Unix(1_700_000_000, 0) },
	}
}

func newPub(t *testing.T, cfg Config, st store.Store, c Chain) *Publisher {
	t.Helper()
	p, err := New(cfg, st, c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func claimsOf(cs ...weights.Claim) func(context.Context) ([]weights.Claim, error) {
	return func(context.Context) ([]weights.Claim, error) { return cs, nil }
}

func tick(t *testing.T, p *Publisher, claims func(context.Context) ([]weights.Claim, error), want string) Step {
	t.Helper()
	s, err := p.Tick(context.Background(), claims)
	if err != nil {
		t.Fatalf("tick (want %s): %v", want, err)
	}
	if s.Action != want {
		t.Fatalf("tick: %s (%+v), want %s", s.Action, s.Publication, want)
	}
	return s
}

var twoClaims = claimsOf(weights.Claim{Hotkey: "a", SpeedupPPM: 1_300_000, CrownedBlock: 0}, weights.Claim{Hotkey: "b", SpeedupPPM: 1_100_000, CrownedBlock: 9})

func TestPublishConfirmAndInterval(t *testing.T) {
	c, st := newFake(), openStore(t, t.TempDir())
	p := newPub(t, testConfig(), st, c)
	s := tick(t, p, twoClaims, "submitted")
	if s.Publication.Block != 9 || s.Publication.Deadline != 12 || s.Publication.Extrinsic != "x0" || s.Publication.Submissions != 1 {
		t.Errorf("submitted = %+v", s.Publication)
	}
	c.advance(1)
	tick(t, p, twoClaims, "waiting") // block 11 is not finalized yet
	c.advance(1)
	s = tick(t, p, twoClaims, store.WeightConfirmed)
	if s.Publication.ConfirmedBlock != 11 || len(c.State.Sets) != 1 {
		t.Errorf("confirmed at %d, want 11", s.Publication.ConfirmedBlock)
	}
	tick(t, p, twoClaims, "none") // finalized 11 < 9 + interval
	c.advance(3)
	tick(t, p, twoClaims, "submitted")
	if len(c.State.Sets) != 2 {
		t.Errorf("%d submissions, want 2", len(c.State.Sets))
	}
	// The first vector: credits a 300000×10/19 = 157894, b 100000×10/10 = 100000.
	if got := c.State.Sets[0].Weights; FormatWeights(got) != "[2:612244 3:387756]" {
		t.Errorf("first vector %s", FormatWeights(got))
	}
}

func TestPreviewWritesNothing(t *testing.T) {
	c, st := newFake(), openStore(t, t.TempDir())
	p := newPub(t, testConfig(), st, c)
	v, err := p.Preview(context.Background(), twoClaims)
	if err != nil || v.Block != 9 || FormatWeights(v.Weights) != "[2:612244 3:387756]" {
		t.Fatalf("preview %+v, %v", v, err)
	}
	st.View(context.Background(), func(tx store.Tx) error {
		if ps, _ := tx.WeightPublications(context.Background(), 0); len(ps) != 0 || len(c.State.Sets) != 0 {
			t.Errorf("%d publications, %d submissions after a preview", len(ps), len(c.State.Sets))
		}
		return nil
	})
}

func TestPublishBurnAndQuantizedReadBack(t *testing.T) {
	c, st := newFake(), openStore(t, t.TempDir())
	c.State.Quantize = true
	p := newPub(t, testConfig(), st, c)
	s := tick(t, p, claimsOf(), "submitted")
	if !strings.HasPrefix(s.Publication.Reason, "burn") {
		t.Errorf("burn intent reason %q", s.Publication.Reason)
	}
	c.advance(2)
	tick(t, p, claimsOf(), store.WeightConfirmed)
	// Three-way split: quantization moves entries by a few ppm, within tolerance.
	c.advance(5)
	tick(t, p, claimsOf(weights.Claim{Hotkey: "a", SpeedupPPM: 1_100_000}, weights.Claim{Hotkey: "b", SpeedupPPM: 1_100_007}, weights.Claim{Hotkey: "val", SpeedupPPM: 1_333_333}), "submitted")
	c.advance(2)
	last := c.State.Sets[len(c.State.Sets)-1].Weights
	if q := quantize(last); FormatWeights(q) == FormatWeights(last) {
		t.Fatalf("quantization changed nothing in %s: the test proves nothing", FormatWeights(last))
	}
	tick(t, p, claimsOf(), store.WeightConfirmed)
}

func TestHeldDiverged(t *testing.T) {
	c, st := newFake(), openStore(t, t.TempDir())
	c.tamper = func(ws []chain.Weight) []chain.Weight {
		out := append([]chain.Weight(nil), ws...)
		out[0].PPM -= DefaultTolerance + 1
		return out
	}
	p := newPub(t, testConfig(), st, c)
	tick(t, p, twoClaims, "submitted")
	c.advance(2)
	s := tick(t, p, twoClaims, store.WeightHeld)
	if !strings.HasPrefix(s.Publication.Reason, HeldDiverged) {
		t.Errorf("reason %q", s.Publication.Reason)
	}
}

func TestHeldDeadlineThenResubmitAsNewIntent(t *testing.T) {
	c, st := newFake(), openStore(t, t.TempDir())
	c.State.Drop = []int{0}
	p := newPub(t, testConfig(), st, c)
	tick(t, p, twoClaims, "submitted")
	for i := 0; i < 3; i++ { // finalized 10, 11, 12: not past the deadline 12
		c.advance(1)
		tick(t, p, twoClaims, "waiting")
	}
	c.advance(1)
	s := tick(t, p, twoClaims, store.WeightHeld)
	if !strings.HasPrefix(s.Publication.Reason, HeldDeadline) || len(c.State.Sets) != 1 {
		t.Errorf("reason %q, %d submissions", s.Publication.Reason, len(c.State.Sets))
	}
	c.advance(1) // finalized 14 = 9 + interval
	tick(t, p, twoClaims, "submitted")
	c.advance(2)
	tick(t, p, twoClaims, store.WeightConfirmed)
}

func TestSubmitErrorIsNeverResubmitted(t *testing.T) {
	c, st := newFake(), openStore(t, t.TempDir())
	c.setErr = errNet
	submits := 0
	c.onSubmit = func() { submits++ }
	p := newPub(t, testConfig(), st, c)
	if _, err := p.Tick(context.Background(), twoClaims); !errors.Is(err, errNet) {
		t.Fatalf("tick: %v, want the submit error", err)
	}
	c.setErr = nil
	tick(t, p, twoClaims, "waiting")
	c.advance(4)
	s := tick(t, p, twoClaims, store.WeightHeld)
	if submits != 1 || !strings.Contains(s.Publication.Reason, "submit failed: connection reset") || !strings.Contains(s.Publication.Reason, "interrupted") {
		t.Errorf("%d submissions, reason %q", submits, s.Publication.Reason)
	}
}

func TestRestartReadsBackFirst(t *testing.T) {
	dir := t.TempDir()
	c, st := newFake(), openStore(t, dir)
	tick(t, newPub(t, testConfig(), st, c), twoClaims, "submitted")
	c.advance(2)
	submits := 0
	c.onSubmit = func() { submits++ }
	tick(t, newPub(t, testConfig(), st, c), twoClaims, store.WeightConfirmed) // a new process
	if submits != 0 {
		t.Errorf("%d resubmissions after restart", submits)
	}
}

func TestHeldAuthorityChanged(t *testing.T) {
	t.Run("another hotkey", func(t *testing.T) {
		c, st := newFake(), openStore(t, t.TempDir())
		tick(t, newPub(t, testConfig(), st, c), twoClaims, "submitted")
		cfg := testConfig()
		cfg.Hotkey = "a"
		s := tick(t, newPub(t, cfg, st, c), twoClaims, store.WeightHeld)
		if !strings.HasPrefix(s.Publication.Reason, HeldAuthority) {
			t.Errorf("reason %q", s.Publication.Reason)
		}
	})
	t.Run("deregistered", func(t *testing.T) {
		c, st := newFake(), openStore(t, t.TempDir())
		c.State.Drop = []int{0}
		p := newPub(t, testConfig(), st, c)
		tick(t, p, twoClaims, "submitted")
		c.State.Meta = c.State.Meta[2:]
		s := tick(t, p, twoClaims, store.WeightHeld)
		if !strings.HasPrefix(s.Publication.Reason, HeldAuthority) {
			t.Errorf("reason %q", s.Publication.Reason)
		}
		c.advance(5)
		if _, err := p.Tick(context.Background(), twoClaims); err == nil || !strings.Contains(err.Error(), "not in the metagraph") {
			t.Errorf("publishing while deregistered: %v", err)
		}
	})
}

func TestBadClaimWritesNothing(t *testing.T) {
	c, st := newFake(), openStore(t, t.TempDir())
	p := newPub(t, testConfig(), st, c)
	bad := claimsOf(weights.Claim{Hotkey: "a", SpeedupPPM: 1_300_000}, weights.Claim{Hotkey: "b", SpeedupPPM: 900_000})
	if _, err := p.Tick(context.Background(), bad); !errors.Is(err, weights.ErrBadClaim) {
		t.Fatalf("tick: %v, want ErrBadClaim", err)
	}
	unreadable := func(context.Context) ([]weights.Claim, error) { return nil, errors.New("claims table unreadable") }
	if _, err := p.Tick(context.Background(), unreadable); err == nil {
		t.Fatal("tick with unreadable claims succeeded")
	}
	st.View(context.Background(), func(tx store.Tx) error {
		if ps, _ := tx.WeightPublications(context.Background(), 0); len(ps) != 0 || len(c.State.Sets) != 0 {
			t.Errorf("%d publications, %d submissions after failed projections", len(ps), len(c.State.Sets))
		}
		return nil
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, mod := range []func(*Config){
		func(c *Config) { c.Hotkey = "" },
		func(c *Config) { c.Interval = 0 },
		func(c *Config) { c.Deadline = 0 },
		func(c *Config) { c.Projection.HalfLife = 0 },
	} {
		cfg := testConfig()
		mod(&cfg)
		if _, err := New(cfg, nil, nil); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

func TestWithin(t *testing.T) {
	w := func(pairs ...uint32) []chain.Weight {
		var out []chain.Weight
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, chain.Weight{UID: uint16(pairs[i]), PPM: pairs[i+1]})
		}
		return out
	}
	tests := []struct {
		a, b []chain.Weight
		want bool
	}{
		{w(1, 500_000, 2, 500_000), w(1, 500_000, 2, 500_000), true},
		{w(1, 500_000, 2, 500_000), w(1, 500_016, 2, 499_984), true},
		{w(1, 500_000, 2, 500_000), w(1, 500_017, 2, 499_983), false},
		{w(1, 999_990, 2, 10), w(1, 1_000_000), true}, // quantized away
		{w(1, 1_000_000), w(2, 1_000_000), false},
		{w(1, 1_000_000), nil, false},
	}
	for i, tc := range tests {
		if got := Within(tc.a, tc.b, DefaultTolerance); got != tc.want {
			t.Errorf("%d: Within(%v, %v) = %v", i, tc.a, tc.b, got)
		}
	}
}

func TestDecodeVector(t *testing.T) {
	good := `{"block":3,"burn":false,"shares":[],"weights":[{"uid":1,"ppm":400000},{"uid":4,"ppm":600000}]}`
	if ws, err := DecodeVector(good); err != nil || len(ws) != 2 {
		t.Errorf("good vector: %v, %v", ws, err)
	}
	for _, bad := range []string{
		``, `{}`, `{"weights":[{"uid":1,"ppm":1000000}]} x`, `{"weights":[{"uid":1,"ppm":999999}]}`,
		`{"weights":[{"uid":2,"ppm":500000},{"uid":1,"ppm":500000}]}`, `{"weights":[{"uid":1,"ppm":0},{"uid":2,"ppm":1000000}]}`,
		`{"weights":[{"uid":1,"ppm":1000000}],"extra":1}`,
	} {
		if _, err := DecodeVector(bad); err == nil {
			t.Errorf("DecodeVector(%q) accepted", bad)
		}
	}
}

func FuzzDecodeVector(f *testing.F) {
	f.Add(`{"block":3,"burn":false,"shares":[],"weights":[{"uid":1,"ppm":400000},{"uid":4,"ppm":600000}]}`)
	f.Add(`{"weights":[{"uid":65535,"ppm":1000000}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		ws, err := DecodeVector(s)
		if err != nil {
			return
		}
		var sum uint64
		for i, w := range ws {
			if w.PPM == 0 || i > 0 && w.UID <= ws[i-1].UID {
				t.Fatalf("accepted %v", ws)
			}
			sum += uint64(w.PPM)
		}
		if sum != weights.Million {
			t.Fatalf("accepted sum %d", sum)
		}
	})
}
