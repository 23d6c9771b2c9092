package weightpub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"cacheon/internal/crashtest"
	"cacheon/internal/market/chain"
	"cacheon/internal/market/weights"
	"cacheon/internal/store"
)

// The crash tests re-execute the test binary as a validator publishing
// weights (helper-process pattern): envCrash carries the child's
// scenario directory, the failpoint to die at and at which occurrence.
// The chain is a fakeChain saved in the directory, so it outlives the
// killed child; the parent restarts the child without a failpoint and
// checks the journal and the chain.
const (
	envCrash = "CACHEON_WEIGHTS_CRASH_CHILD"
	// CACHEON_WEIGHTS_CRASH_LONG=n adds random crash points up to n (long
	// mode); CACHEON_WEIGHTS_CRASH_SEED repeats one.
	envLong = "CACHEON_WEIGHTS_CRASH_LONG"
	envSeed = "CACHEON_WEIGHTS_CRASH_SEED"
)

type childSpec struct {
	Dir        string `json:"dir"`
	Failpoint  string `json:"failpoint"`
	Occurrence int    `json:"occurrence"`
	CountsTo   string `json:"counts_to,omitempty"`
}

// crashEnd is the head from which the scenario stops, once the latest
// publication is confirmed.
const crashEnd = 45

func TestMain(m *testing.M) {
	crashtest.Child(envCrash, crashChild)
	os.Exit(m.Run())
}

// crashClaims: no claim before block 15 (a burn), then two miners whose
// shares move with the blocks (their claims are of different ages).
func crashClaims(ch Chain) func(ctx context.Context) ([]weights.Claim, error) {
	return func(ctx context.Context) ([]weights.Claim, error) {
		h, err := ch.Finalized(ctx)
		if err != nil || h.Number < 15 {
			return nil, err
		}
		return []weights.Claim{{Hotkey: "a", SpeedupPPM: 1_500_000, CrownedBlock: 14}, {Hotkey: "b", SpeedupPPM: 1_200_000, CrownedBlock: 2}}, nil
	}
}

func crashChild(specJSON string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := crashRun(spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func crashRun(spec childSpec) error {
	ctx := context.Background()
	path := filepath.Join(spec.Dir, "chain.json")
	c, err := loadFake(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(spec.Dir, 0o700); err != nil {
			return err
		}
		c = newFake()
		c.path = path
		c.State.Quantize = true
		c.State.Drop = []int{1} // the chain loses the second submission
		err = c.save()
	}
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, filepath.Join(spec.Dir, "db"))
	if err != nil {
		return err
	}
	defer st.Close()
	counts := map[string]int{}
	cfg := testConfig()
	cfg.Interval, cfg.Deadline = 4, 3
	cfg.Failpoint = crashtest.Killer(crashtest.Point{Failpoint: spec.Failpoint, Occurrence: spec.Occurrence}, counts)
	p, err := New(cfg, st, c)
	if err != nil {
		return err
	}
	for i := 0; i < 200; i++ {
		if _, err := p.Tick(ctx, crashClaims(c)); err != nil {
			return err
		}
		var last []store.WeightPublication
		if err := st.View(ctx, func(tx store.Tx) error {
			last, err = tx.WeightPublications(ctx, 1)
			return err
		}); err != nil {
			return err
		}
		if c.State.Head >= crashEnd && len(last) == 1 && last[0].State == store.WeightConfirmed {
			return crashtest.WriteCounts(spec.CountsTo, counts)
		}
		if err := c.advance(1); err != nil {
			return err
		}
	}
	return errors.New("the publisher did not settle in 200 ticks")
}

// checkRun checks a finished scenario: nothing open, every publication
// confirmed (and shown by the chain) or held with a reason, at most one
// submission per intent and none outside one, every recorded extrinsic
// carrying exactly the retained vector. It returns the journal.
func checkRun(t *testing.T, dir string) []store.WeightPublication {
	t.Helper()
	ctx := context.Background()
	c, err := loadFake(filepath.Join(dir, "chain.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var pubs []store.WeightPublication
	st.View(ctx, func(tx store.Tx) error {
		pubs, err = tx.WeightPublications(ctx, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(pubs, func(i, j int) bool { return pubs[i].ID < pubs[j].ID })
	sets := map[string]fakeSet{}
	for _, s := range c.State.Sets {
		sets[s.ID] = s
	}
	for i, p := range pubs {
		want, err := DecodeVector(p.Vector)
		if err != nil {
			t.Errorf("publication %d: %v", p.ID, err)
			continue
		}
		switch p.State {
		case store.WeightConfirmed:
			shown := false
			for _, s := range c.State.Sets {
				shown = shown || !s.Dropped && s.Block == p.ConfirmedBlock && Within(want, quantize(s.Weights), DefaultTolerance)
			}
			if !shown {
				t.Errorf("publication %d confirmed at block %d, which the chain does not show", p.ID, p.ConfirmedBlock)
			}
		case store.WeightHeld:
			if !strings.HasPrefix(p.Reason, HeldDeadline) && !strings.HasPrefix(p.Reason, HeldDiverged) && !strings.HasPrefix(p.Reason, HeldAuthority) {
				t.Errorf("publication %d held without a reason: %q", p.ID, p.Reason)
			}
		default:
			t.Errorf("publication %d still %s at the end", p.ID, p.State)
		}
		if p.Extrinsic != "" {
			s, ok := sets[p.Extrinsic]
			if !ok || FormatWeights(s.Weights) != FormatWeights(want) {
				t.Errorf("publication %d: extrinsic %s carries %v, retained %v", p.ID, p.Extrinsic, s.Weights, want)
			}
		}
		// Submissions made while this publication was the latest.
		hi := uint64(1 << 62)
		if i+1 < len(pubs) {
			hi = pubs[i+1].Block
		}
		n := 0
		for _, s := range c.State.Sets {
			if s.Head >= p.Block && s.Head < hi {
				n++
			}
		}
		if n > 1 {
			t.Errorf("publication %d (block %d): submitted %d times", p.ID, p.Block, n)
		}
	}
	if len(pubs) == 0 || len(c.State.Sets) > 0 && c.State.Sets[0].Head < pubs[0].Block {
		t.Errorf("a submission before any intent, or no publication at all (%d)", len(pubs))
	}
	return pubs
}

func TestCrash(t *testing.T) {
	base := t.TempDir()
	ref := filepath.Join(base, "ref")
	countsFile := filepath.Join(base, "counts.json")
	start := time.Now()
	if crashtest.Run(t, envCrash, childSpec{Dir: ref, CountsTo: countsFile}) {
		t.Fatal("the reference run was killed")
	}
	refPubs := checkRun(t, ref)
	held := 0
	for _, p := range refPubs {
		t.Logf("reference: %d block %d %s %s", p.ID, p.Block, p.State, p.Reason)
		if p.State == store.WeightHeld {
			held++
		}
	}
	if held != 1 || len(refPubs) < 5 {
		t.Errorf("reference: %d publications, %d held; want ≥5 and the lost submission held", len(refPubs), held)
	}
	counts := crashtest.ReadCounts(t, countsFile)
	cases := crashtest.Points(t, Failpoints(), counts, envLong, envSeed)
	t.Logf("reference run %v; failpoint counts %v", time.Since(start), counts)
	for i, cc := range cases {
		t.Run(fmt.Sprintf("%s#%d", cc.Failpoint, cc.Occurrence), func(t *testing.T) {
			dir := filepath.Join(base, strconv.Itoa(i))
			if !crashtest.Run(t, envCrash, childSpec{Dir: dir, Failpoint: cc.Failpoint, Occurrence: cc.Occurrence}) {
				t.Fatalf("the child did not reach %s #%d", cc.Failpoint, cc.Occurrence)
			}
			if crashtest.Run(t, envCrash, childSpec{Dir: dir}) {
				t.Fatal("the restarted child was killed")
			}
			pubs := checkRun(t, dir)
			if last := pubs[len(pubs)-1]; last.State != store.WeightConfirmed {
				t.Errorf("the last publication is %s (%s), want confirmed", last.State, last.Reason)
			}
		})
	}
}

var _ Chain = (*fakeChain)(nil)
var _ chain.Weight
