package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/market/settle"
	"cacheon/internal/slot"
	"cacheon/internal/store"
)

// attemptsTx is a hand-written store.Tx that answers Attempts only (any
// other method the adapters have no business calling panics through the
// nil interface).
type attemptsTx struct {
	store.Tx
	attempts map[string][]store.AttemptRecord
	err      error
}

func (f attemptsTx) Attempts(_ context.Context, id string) ([]store.AttemptRecord, error) {
	return f.attempts[id], f.err
}

func attemptRef(name string) string { return "cacheon.referee.attempt:" + hexOf(name) }

func hexOf(name string) string { return strings.Repeat("0", 64-len(name)) + name }

func attempt(n int, verdict, evidence string, ppm int64) store.AttemptRecord {
	return store.AttemptRecord{Reservation: "r", N: n, Verdict: verdict, Evidence: evidence, Target: "activation.silu_and_mul",
		Incumbent: hexOf("inc"), SpeedupPPM: ppm}
}

func TestCandidates(t *testing.T) {
	res := store.Reservation{ID: "r", ContentHash: hexOf("c"), Hotkey: hexOf("hk"), Pos: store.Position{Block: 40, Index: 2}, CommitBlock: 38}
	boom := errors.New("database is gone")
	for _, tc := range []struct {
		name     string
		attempts []store.AttemptRecord
		err      error
		ok       bool
		want     settle.Candidate
		wantErr  string
	}{
		{"no attempt", nil, nil, false, settle.Candidate{}, ""},
		{"one pass", []store.AttemptRecord{attempt(1, "PASS", attemptRef("a1"), 1_500_000)}, nil, false, settle.Candidate{}, ""},
		{"a pass and a fail", []store.AttemptRecord{attempt(1, "PASS", attemptRef("a1"), 1_500_000), attempt(2, "FAIL", attemptRef("a2"), 900_000)},
			nil, false, settle.Candidate{}, ""},
		{"two passes: the lower r", []store.AttemptRecord{attempt(1, "PASS", attemptRef("a1"), 1_500_000), attempt(2, "PASS", attemptRef("a2"), 1_400_000)},
			nil, true, settle.Candidate{Evidence: [2]string{hexOf("a1"), hexOf("a2")}, SpeedupPPM: 1_400_000}, ""},
		{"the last two passes", []store.AttemptRecord{attempt(1, "PASS", attemptRef("a1"), 1_100_000), attempt(2, "NO_DECISION", "", 0),
			attempt(3, "PASS", attemptRef("a3"), 1_600_000), attempt(4, "PASS", attemptRef("a4"), 1_700_000)},
			nil, true, settle.Candidate{Evidence: [2]string{hexOf("a3"), hexOf("a4")}, SpeedupPPM: 1_600_000}, ""},
		{"a pass without evidence", []store.AttemptRecord{attempt(1, "PASS", "", 1_500_000), attempt(2, "PASS", attemptRef("a2"), 1_400_000)},
			nil, false, settle.Candidate{}, "attempt 1: evidence ref"},
		{"evidence of another kind", []store.AttemptRecord{attempt(1, "PASS", attemptRef("a1"), 1_500_000),
			attempt(2, "PASS", "cacheon.referee.read:"+hexOf("a2"), 1_400_000)}, nil, false, settle.Candidate{}, "attempt 2: evidence ref"},
		{"the store fails", nil, boom, false, settle.Candidate{}, boom.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := attemptsTx{attempts: map[string][]store.AttemptRecord{"r": tc.attempts}, err: tc.err}
			got, ok, err := candidates{}.Candidate(context.Background(), tx, res)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v; want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.ok {
				t.Fatalf("ok %v, %v; want ok %v", ok, err, tc.ok)
			}
			if !ok {
				return
			}
			want := tc.want
			want.Reservation, want.Proposal, want.Contributor, want.Target = "r", res.ContentHash, res.Hotkey, "activation.silu_and_mul"
			want.Incumbent, want.Order, want.SubmitBlock = hexOf("inc"), settle.Order{Block: 40, Index: 2}, 38
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// writeBundle writes a manifest (and the op's source) into dir/name.
func writeBundle(t *testing.T, dir, name, manifest string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	src := "import torch\n\ndef silu_and_mul(x):\n    d = x.shape[-1] // 2\n    return torch.nn.functional.silu(x[..., :d]) * x[..., d:]\n"
	for f, data := range map[string]string{"manifest.toml": manifest, "silu.py": src} {
		if err := os.WriteFile(filepath.Join(p, f), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTargets(t *testing.T) {
	slots, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	const head = "bundle_id = \"t\"\nabi_version = \"cacheon-op-abi-v0\"\n"
	const op = "\n[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"silu.py\"\nentry = \"silu_and_mul\"\n"
	writeBundle(t, work, "competition", head+"\n[competition]\ntarget = \"activation.silu_and_mul\"\nmode = \"slot\"\n"+op)
	writeBundle(t, work, "one-op", head+op)
	writeBundle(t, work, "broken", head+"[[ops]]\nslot = 7\n")
	boom := errors.New("database is gone")
	for _, tc := range []struct {
		name     string
		id       string
		attempts []store.AttemptRecord
		err      error
		want     string
		ok       bool
		wantErr  bool
	}{
		{"an attempt names it", "none", []store.AttemptRecord{{N: 1, Verdict: "FAIL"}, {N: 2, Target: "norm.rmsnorm"}}, nil, "norm.rmsnorm", true, false},
		{"no bundle fetched yet", "none", nil, nil, "", false, false},
		{"the manifest's competition", "competition", nil, nil, "activation.silu_and_mul", true, false},
		{"its only slot", "one-op", nil, nil, "activation.silu_and_mul", true, false},
		{"a bundle that does not load", "broken", nil, nil, "", false, false},
		{"the store fails", "competition", nil, boom, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := attemptsTx{attempts: map[string][]store.AttemptRecord{tc.id: tc.attempts}, err: tc.err}
			tg := targets{work: func(id string) string { return filepath.Join(work, id) }, slots: slots}
			got, ok, err := tg.Target(context.Background(), tx, store.Reservation{ID: tc.id})
			if (err != nil) != tc.wantErr || got != tc.want || ok != tc.ok {
				t.Errorf("%q, %v, %v; want %q, %v (error %v)", got, ok, err, tc.want, tc.ok, tc.wantErr)
			}
		})
	}
}
