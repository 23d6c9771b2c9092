package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/market/settle"
	"cacheon/internal/store"
)

// fakeTargets: two unrelated singletons.
type fakeTargets struct{}

func (fakeTargets) Displaces(string) []string { return nil }
func (fakeTargets) Activate(active []string, name string) ([]string, []string, error) {
	next := []string{name}
	for _, a := range active {
		if a != name {
			next = append(next, a)
		}
	}
	if len(next) == 2 && next[0] > next[1] {
		next[0], next[1] = next[1], next[0]
	}
	return next, nil, nil
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// journalStore writes a two-crown settlement journal, and then extra, into
// a new SQLite store.
func journalStore(t *testing.T, extra func(tx store.Tx, head settle.Head) error) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, _ := settle.StackDigest(settle.Genesis())
	var cands []settle.Candidate
	for i, tgt := range []string{"x", "y"} {
		id := tgt + "-res"
		cands = append(cands, settle.Candidate{Reservation: id, Proposal: sha("p" + id), Contributor: "hk", Target: tgt, Incumbent: g,
			SpeedupPPM: 1_100_000, Order: settle.Order{Block: uint64(10 + i)}, Evidence: [2]string{sha("a" + id), sha("b" + id)}})
	}
	p, err := settle.Make(fakeTargets{}, settle.Input{Candidates: cands, Stack: settle.Genesis(), StackDigest: g})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		for _, c := range p.Crowns {
			for i, ev := range c.Events {
				if err := tx.AppendJournal(ctx, store.JournalEntry{Seq: ev.Seq, Digest: c.Digests[i], Prev: ev.Prev,
					Kind: string(ev.Kind), Reservation: ev.Reservation, Data: c.Data[i]}); err != nil {
					return err
				}
			}
		}
		if extra != nil {
			return extra(tx, p.Head)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestEventsVerify(t *testing.T) {
	dir := journalStore(t, nil)
	code, out, errs := run(t, "events", "verify", "--data", dir)
	if code != 0 || !strings.Contains(out, "4 event(s) verify; head 4 ") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = run(t, "events", "verify", "--data", dir, "--json")
	var rep verifyReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK || rep.Events != 4 || rep.Head.Seq != 4 {
		t.Fatalf("--json: exit %d: %s", code, out)
	}

	// An entry whose bytes are not what its digest says: the chain
	// breaks at it.
	bad := journalStore(t, func(tx store.Tx, head settle.Head) error {
		return tx.AppendJournal(context.Background(), store.JournalEntry{Seq: head.Seq + 1, Digest: sha("forged"), Prev: head.Digest,
			Kind: "CROWN", Reservation: "z", Data: []byte(`{"forged":true}`)})
	})
	code, out, errs = run(t, "events", "verify", "--data", bad)
	if code != ExitFindings || !strings.Contains(errs, "event 5:") {
		t.Fatalf("broken chain: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = run(t, "events", "verify", "--data", bad, "--json")
	rep = verifyReport{}
	if code != ExitFindings || json.Unmarshal([]byte(out), &rep) != nil || rep.OK || rep.BadEvent != 5 || rep.Head.Seq != 4 {
		t.Fatalf("broken chain --json: exit %d: %s", code, out)
	}

	if code, _, _ := run(t, "events", "verify", "--data", filepath.Join(t.TempDir(), "none")); code != ExitFindings {
		t.Errorf("a missing store: exit %d, want %d", code, ExitFindings)
	}
	if code, _, _ := run(t, "events", "verify"); code != ExitUsage {
		t.Errorf("no --data: exit %d, want %d", code, ExitUsage)
	}
}
