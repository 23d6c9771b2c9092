package devnet

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/market/miner"
	"cacheon/internal/market/weightpub"
	"cacheon/internal/node"
	"cacheon/internal/store"
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

// Demo runs the scripted scenario against the running devnet d and
// returns what happened; Summary.OK is true only if every expected
// outcome did. A devnet directory runs the demo once.
func Demo(ctx context.Context, d *Devnet, wait time.Duration) (*Summary, error) {
	start := time.Now()
	say := d.Config.Progress
	mark := filepath.Join(d.Config.Dir, "demo.json")
	if _, err := os.Stat(mark); err == nil {
		return nil, fmt.Errorf("devnet demo: the demo ran in %s already (its summary is %s); use a fresh --dir", d.Config.Dir, mark)
	}
	sum := &Summary{Dir: d.Config.Dir, Dashboard: "http://" + d.Addr + "/", Note: Note}
	type sub struct {
		Submission
		state string
	}
	subs := make([]*sub, len(scenario))
	for i, s := range scenario {
		key, err := devKey(filepath.Join(d.Config.Dir, "keys", s.miner+".key"))
		if err != nil {
			return nil, err
		}
		w := d.wallet(key)
		if _, err := register(ctx, w); err != nil {
			return nil, fmt.Errorf("devnet demo: register %s: %w", s.miner, err)
		}
		h, err := d.publish(s.bundle, s.serve, s.miner)
		if err != nil {
			return nil, err
		}
		state := filepath.Join(d.Config.Dir, "miners", s.miner+".state")
		if err := os.MkdirAll(filepath.Dir(state), 0o700); err != nil {
			return nil, fmt.Errorf("devnet demo: %w", err)
		}
		if _, err := miner.Commit(ctx, w, state, h, d.WWWURL+"/"+s.miner+".tar.gz", rand.Reader); err != nil {
			return nil, fmt.Errorf("devnet demo: %s commits: %w", s.miner, err)
		}
		say(fmt.Sprintf("%s committed to %s (%s…), archive at %s/%s.tar.gz", s.miner, s.bundle, h[:12], d.WWWURL, s.miner))
		subs[i] = &sub{Submission: Submission{Miner: s.miner, Bundle: s.bundle, Hotkey: w.Hotkey(), Expect: s.expect}, state: state}
	}
	for i, s := range subs {
		w := d.wallet(mustKey(filepath.Join(d.Config.Dir, "keys", scenario[i].miner+".key")))
		rv, err := miner.Reveal(ctx, w, s.state, miner.RevealOptions{Wait: 2 * time.Minute})
		if err != nil {
			return nil, fmt.Errorf("devnet demo: %s reveals: %w", s.Miner, err)
		}
		if len(rv) == 1 {
			say(fmt.Sprintf("%s revealed in block %d", s.Miner, rv[0].Pos.Block))
		}
	}
	deadline := time.Now().Add(wait)
	last := ""
	for {
		rs, err := d.Validator.Node.Reservations(ctx)
		if err != nil {
			return nil, fmt.Errorf("devnet demo: %w", err)
		}
		decided, err := d.decisions(ctx)
		if err != nil {
			return nil, err
		}
		var line []string
		done := 0
		for _, s := range subs {
			s.State, s.Reason, s.Reservation = "not reserved yet", "", ""
			for _, r := range rs {
				if r.Hotkey == s.Hotkey {
					s.Reservation, s.State, s.Reason = r.ID, r.State, r.Reason
					if dc, ok := decided[r.ID]; ok {
						s.State, s.Reason = dc.Outcome, dc.Reason
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
	crowns, err := d.Validator.Node.Crowns(ctx)
	if err != nil {
		return nil, fmt.Errorf("devnet demo: %w", err)
	}
	if len(crowns) > 0 {
		c := crowns[len(crowns)-1]
		sum.Crown = &c
		say(fmt.Sprintf("crown: %s by %s…, speedup %s, generation %d, crown ref %s", c.Record.Target, c.Record.Attribution.Contributor[:12],
			c.Record.Speedup, c.Record.Generation, c.Digest))
		if sum.Weights, err = d.confirmedWeights(ctx, time.Until(deadline)+time.Minute); err != nil {
			return nil, err
		}
		say("weights confirmed on the chain: " + sum.Weights)
		if sum.Release, err = d.release(ctx, c); err != nil {
			return nil, err
		}
		say(fmt.Sprintf("release %s %s built, signed and verified: descriptor %s", sum.Release.Name, sum.Release.Version, sum.Release.Descriptor))
	} else {
		sum.OK = false
	}
	if sum.JournalSeq, sum.JournalHead, err = d.journalHead(ctx); err != nil {
		return nil, err
	}
	sum.Took = time.Since(start).Round(time.Second).String()
	data, err := json.MarshalIndent(sum, "", "  ")
	if err == nil {
		err = os.WriteFile(mark, append(data, '\n'), 0o600)
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
func (d *Devnet) publish(name, serve, minerName string) (string, error) {
	var committed, served bytes.Buffer
	h, err := bundle.Package(d.BundleDir(name), &committed)
	if err != nil {
		return "", fmt.Errorf("devnet demo: package %s: %w", name, err)
	}
	data := committed.Bytes()
	if serve != name {
		if _, err := bundle.Package(d.BundleDir(serve), &served); err != nil {
			return "", fmt.Errorf("devnet demo: package %s: %w", serve, err)
		}
		data = served.Bytes()
	}
	if err := os.WriteFile(filepath.Join(d.WWW, minerName+".tar.gz"), data, 0o644); err != nil {
		return "", fmt.Errorf("devnet demo: %w", err)
	}
	return h, nil
}

// mustKey reads a key devKey wrote moments before.
func mustKey(path string) ed25519.PrivateKey {
	k, err := devKey(path)
	if err != nil {
		panic(err)
	}
	return k
}

// decisions are settlement's decisions by reservation.
func (d *Devnet) decisions(ctx context.Context) (map[string]store.Decision, error) {
	out := map[string]store.Decision{}
	err := d.Validator.Store.View(ctx, func(tx store.Tx) error {
		ds, err := tx.Decisions(ctx)
		for _, dc := range ds {
			out[dc.Reservation] = dc
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("devnet demo: decisions: %w", err)
	}
	return out, nil
}

// journalHead is the settlement journal's head.
func (d *Devnet) journalHead(ctx context.Context) (seq int64, digest string, err error) {
	err = d.Validator.Store.View(ctx, func(tx store.Tx) error {
		seq, digest, err = tx.JournalHead(ctx)
		return err
	})
	return seq, digest, err
}

// confirmedWeights waits for a weight publication confirmed after the
// crown: one whose vector credits a claim (not the burn).
func (d *Devnet) confirmedWeights(ctx context.Context, wait time.Duration) (string, error) {
	end := time.Now().Add(wait)
	for {
		var pubs []store.WeightPublication
		err := d.Validator.Store.View(ctx, func(tx store.Tx) error {
			var err error
			pubs, err = tx.WeightPublications(ctx, 5)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("devnet demo: weights: %w", err)
		}
		for _, p := range pubs {
			if p.State != store.WeightConfirmed {
				continue
			}
			ws, err := weightpub.DecodeVector(p.Vector)
			if err != nil {
				return "", fmt.Errorf("devnet demo: weights: %w", err)
			}
			if len(ws) > 1 || (len(ws) == 1 && ws[0].UID != 0) {
				return weightpub.FormatWeights(ws), nil
			}
		}
		if time.Now().After(end) {
			return "", errors.New("devnet demo: no weight publication crediting the crown was confirmed in time")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}
