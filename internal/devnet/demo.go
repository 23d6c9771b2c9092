package devnet

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/dashboard"
	"cacheon/internal/market/localchain"
	"cacheon/internal/market/miner"
	"cacheon/internal/node"
)

// Submission is one miner's part of the scenario and what became of it.
type Submission struct {
	Miner       string `json:"miner"`
	Bundle      string `json:"bundle"`
	Hotkey      string `json:"hotkey"`
	Reservation string `json:"reservation,omitempty"`
	State       string `json:"state"`
	Reason      string `json:"reason,omitempty"`
	// Expect says what must happen; OK whether it did.
	Expect string `json:"expect"`
	OK     bool   `json:"ok"`
}

// Summary is what the demo did.
type Summary struct {
	Dir         string       `json:"dir"`
	Dashboard   string       `json:"dashboard"`
	Note        string       `json:"note"`
	Submissions []Submission `json:"submissions"`
	// Crown is the settled crown (the crown record integrate took).
	Crown *node.Crown `json:"crown,omitempty"`
	// Weights is the confirmed weight vector after the crown (uid → ppm).
	Weights string `json:"weights,omitempty"`
	// JournalSeq and JournalHead are the settlement journal's head.
	JournalSeq  int64  `json:"journal_seq"`
	JournalHead string `json:"journal_head"`
	// Release is the signed, verified release built from the crown.
	Release *Release `json:"release,omitempty"`
	OK      bool     `json:"ok"`
	Took    string   `json:"took"`
}

// Note is what the demo says of speed on a CPU.
const Note = "CPU arena: speed on a shared CPU is noise, so the incumbent holds a deliberately slow but correct silu_and_mul " +
	"and the honest kernel's win over it is large enough to resolve; the referee's rules are the ones a GPU arena uses."

// miners are the scenario, in reveal order: the honest kernel first (so
// it is the first revealer of its work), then the broken one, the copy,
// the slower one and the mismatched one.
var scenario = []struct{ miner, bundle, serve, expect string }{
	{"alice", "honest", "honest", "crowned after two passing attempts"},
	{"bob", "broken", "broken", "failed at screening (verify)"},
	{"carol", "copy", "copy", "failed as a copy of alice's"},
	{"dave", "slower", "slower", "failed not_faster"},
	{"erin", "mismatch", "slow", "failed at intake: the archive does not match the committed hash"},
}

// ErrDemoRan says the demo ran in a directory already (or began and was
// interrupted): its miners' commitments are on that devnet's chain, so it
// does not run twice there.
var ErrDemoRan = errors.New("the demo ran in this devnet directory already")

// DemoFile is the demo's summary, written to the devnet's directory.
const DemoFile = "demo.json"

// CheckDemo returns an error wrapping ErrDemoRan when the demo ran (or
// began) in dir, naming what it found.
func CheckDemo(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, DemoFile)); err == nil {
		return fmt.Errorf("devnet demo: %w: its summary is %s; use a fresh --dir (cacheon devnet up --dir %s serves the dashboard of that run)",
			ErrDemoRan, filepath.Join(dir, DemoFile), dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "miners")); err == nil {
		return fmt.Errorf("devnet demo: %w: it began there (%s holds its miners' commitments) and did not finish; use a fresh --dir",
			ErrDemoRan, filepath.Join(dir, "miners"))
	}
	return nil
}

// Demo runs the scripted scenario against the devnet info names (running
// in this process or another) and returns what happened; Summary.OK is
// true only if every expected outcome did. It drives the devnet as any
// client would: miners sign through the chain's API and serve their
// archives from the archive host's directory, and everything the summary
// reports is read through the validator's read-only JSON API. A devnet
// directory runs the demo once (CheckDemo). say hears progress.
func Demo(ctx context.Context, info *Info, wait time.Duration, say func(string)) (*Summary, error) {
	start := time.Now()
	if say == nil {
		say = func(string) {}
	}
	if err := CheckDemo(info.Dir); err != nil {
		return nil, err
	}
	v := newAPI(info.Validator)
	sum := &Summary{Dir: info.Dir, Dashboard: info.Dashboard(), Note: Note}
	type sub struct {
		Submission
		state string
		w     *localchain.Wallet
	}
	subs := make([]*sub, len(scenario))
	for i, s := range scenario {
		key, err := devKey(filepath.Join(info.Dir, "keys", s.miner+".key"))
		if err != nil {
			return nil, err
		}
		w, err := walletAt(info.Chain, key)
		if err != nil {
			return nil, err
		}
		if _, err := register(ctx, w); err != nil {
			return nil, fmt.Errorf("devnet demo: register %s: %w", s.miner, err)
		}
		h, err := publish(info, s.bundle, s.serve, s.miner)
		if err != nil {
			return nil, err
		}
		state := filepath.Join(info.Dir, "miners", s.miner+".state")
		if err := os.MkdirAll(filepath.Dir(state), 0o700); err != nil {
			return nil, fmt.Errorf("devnet demo: %w", err)
		}
		if _, err := miner.Commit(ctx, w, state, h, info.Archives+"/"+s.miner+".tar.gz", rand.Reader); err != nil {
			return nil, fmt.Errorf("devnet demo: %s commits: %w", s.miner, err)
		}
		say(fmt.Sprintf("%s committed to %s (%s…), archive at %s/%s.tar.gz", s.miner, s.bundle, h[:12], info.Archives, s.miner))
		subs[i] = &sub{Submission: Submission{Miner: s.miner, Bundle: s.bundle, Hotkey: w.Hotkey(), Expect: s.expect}, state: state, w: w}
	}
	for _, s := range subs {
		rv, err := miner.Reveal(ctx, s.w, s.state, miner.RevealOptions{Wait: 2 * time.Minute})
		if err != nil {
			return nil, fmt.Errorf("devnet demo: %s reveals: %w", s.Miner, err)
		}
		if len(rv) == 1 {
			say(fmt.Sprintf("%s revealed in block %d", s.Miner, rv[0].Pos.Block))
		}
	}
	deadline := time.Now().Add(wait)
	last := ""
	var rs []dashboard.Submission
	for {
		var err error
		rs, err = v.submissions(ctx)
		if err != nil {
			return nil, fmt.Errorf("devnet demo: %w", err)
		}
		var line []string
		done := 0
		for _, s := range subs {
			s.State, s.Reason, s.Reservation = "not reserved yet", "", ""
			for _, r := range rs {
				if r.Hotkey == s.Hotkey {
					s.Reservation, s.State, s.Reason = r.ID, r.State, r.Reason
					if r.Outcome != "" {
						s.State = r.Outcome
					}
				}
			}
			s.OK = expected(s.Miner, s.State, s.Reason)
			if s.State == "failed" || s.State == "crowned" || s.State == "held" || s.State == "expired" {
				done++
			}
			line = append(line, s.Miner+" "+s.State)
		}
		if l := strings.Join(line, ", "); l != last {
			say(fmt.Sprintf("[%s] %s", time.Since(start).Round(time.Second), l))
			last = l
		}
		if done == len(subs) {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("devnet demo: not every submission reached a decision within %v (%s); the dashboard at %s shows where each stands", wait, last, sum.Dashboard)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	sum.OK = true
	for _, s := range subs {
		sum.Submissions = append(sum.Submissions, s.Submission)
		sum.OK = sum.OK && s.OK
	}
	crowns, err := v.crowns(ctx)
	if err != nil {
		return nil, fmt.Errorf("devnet demo: %w", err)
	}
	if len(crowns) > 0 {
		c := crowns[len(crowns)-1]
		sum.Crown = &c
		say(fmt.Sprintf("crown: %s by %s…, speedup %s, generation %d, crown ref %s", c.Record.Target, c.Record.Attribution.Contributor[:12],
			c.Record.Speedup, c.Record.Generation, c.Digest))
		if sum.Weights, err = v.confirmedWeights(ctx, time.Until(deadline)+time.Minute); err != nil {
			return nil, err
		}
		say("weights confirmed on the chain: " + sum.Weights)
		if sum.Release, err = buildRelease(ctx, info, c, crownedURL(rs, c.Reservation)); err != nil {
			return nil, err
		}
		say(fmt.Sprintf("release %s %s built, signed and verified: descriptor %s", sum.Release.Name, sum.Release.Version, sum.Release.Descriptor))
	} else {
		sum.OK = false
	}
	o, err := v.overview(ctx)
	if err != nil {
		return nil, fmt.Errorf("devnet demo: %w", err)
	}
	sum.JournalSeq, sum.JournalHead = int64(o.Journal.Seq), o.Journal.Digest
	if !o.Journal.Verified {
		sum.OK = false
		say("the settlement journal does not verify: " + o.Journal.Error)
	}
	sum.Took = time.Since(start).Round(time.Second).String()
	data, err := json.MarshalIndent(sum, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(info.Dir, DemoFile), append(data, '\n'), 0o600)
	}
	if err != nil {
		return nil, fmt.Errorf("devnet demo: %w", err)
	}
	return sum, nil
}

// expected reports whether a submission ended as the scenario says.
func expected(miner, state, reason string) bool {
	switch miner {
	case "alice":
		return state == "crowned"
	case "bob":
		return state == "failed" && strings.HasPrefix(reason, "screen: FAIL")
	case "carol":
		return state == "failed" && strings.HasPrefix(reason, "copy_of:")
	case "dave":
		return state == "failed" && strings.Contains(reason, "not_faster")
	case "erin":
		return state == "failed" && strings.HasPrefix(reason, "fetch: hash_mismatch")
	}
	return false
}

// publish packages bundle name, serves archive serve at miner's URL and
// returns the committed content hash (of name, not necessarily of what
// is served).
func publish(info *Info, name, serve, minerName string) (string, error) {
	var committed, served bytes.Buffer
	h, err := bundle.Package(bundleDir(info.Dir, name), &committed)
	if err != nil {
		return "", fmt.Errorf("devnet demo: package %s: %w", name, err)
	}
	data := committed.Bytes()
	if serve != name {
		if _, err := bundle.Package(bundleDir(info.Dir, serve), &served); err != nil {
			return "", fmt.Errorf("devnet demo: package %s: %w", serve, err)
		}
		data = served.Bytes()
	}
	if err := os.WriteFile(filepath.Join(info.WWW, minerName+".tar.gz"), data, 0o644); err != nil {
		return "", fmt.Errorf("devnet demo: %w", err)
	}
	return h, nil
}

// crownedURL is the archive URL the crowned reservation committed to.
func crownedURL(rs []dashboard.Submission, reservation string) string {
	for _, r := range rs {
		if r.ID == reservation {
			return r.URL
		}
	}
	return ""
}
