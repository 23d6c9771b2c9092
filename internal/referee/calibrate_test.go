package referee

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/bundle"
	"cacheon/internal/engine"
	"cacheon/internal/evidence"
	"cacheon/internal/sandbox"
)

// TestMain lets the sandbox re-execute this test binary: the screen scans
// and verifies candidates in sandboxed workers.
func TestMain(m *testing.M) {
	sandbox.MaybeRunChild()
	os.Exit(m.Run())
}

// variant copies examples/silu_torch with a distinct README (so a distinct
// content hash) and returns its directory and hash.
func variant(t *testing.T, name string) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"manifest.toml", "silu.py"} {
		b, err := os.ReadFile(filepath.Join("../../examples/silu_torch", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := bundle.ContentHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, h
}

// TestCalibrate: constants come from the A/A attempts; the negative
// control must FAIL and the positive PASS, else no record is written.
func TestCalibrate(t *testing.T) {
	ctx := context.Background()
	python := needPython(t)
	aa, aaHash := variant(t, "aa")
	slow, slowHash := variant(t, "slow")
	fast, fastHash := variant(t, "fast")
	a, cat, targets := tiny(t)
	for _, tc := range []struct {
		name             string
		rates            map[string]float64 // content hash → tokens/s; "" = stock
		wantErr          string
		negative, posInc string
	}{
		{"controls hold", map[string]float64{"": 1000, aaHash: 1000, slowHash: 800, fastHash: 1000}, "", slow, slow},
		{"a negative control that passes", map[string]float64{"": 1000, aaHash: 1000, slowHash: 800, fastHash: 1300}, "negative control", fast, slow},
		{"a positive control that fails", map[string]float64{"": 1000, aaHash: 1000, slowHash: 1000, fastHash: 1000}, "positive control", slow, slow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := evidence.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			open := func(ctx context.Context, c engine.Config) (Session, error) {
				rate, cand := tc.rates[""], false
				for _, sp := range c.Stack {
					h, err := bundle.ContentHash(sp.Bundle)
					if err != nil {
						return nil, err
					}
					rate, cand = tc.rates[h], true
				}
				sc := &script{incRates: []float64{rate}, candRate: rate}
				return &fakeSession{s: sc, a: a, candidate: cand, audit: c.Audit != nil}, nil
			}
			r := &Referee{Open: open, Device: HostDevice{}, Slots: cat, Store: store, Python: python, ScratchRoot: t.TempDir(),
				TPrompts: 6, AuditShare: "0.5", AuditMax: 16, MinAudited: 2}
			pos := tc.posInc
			cal, ref, rep, err := r.Calibrate(ctx, CalibrateRequest{Arena: a, AA: aa, Pairs: 3, Negative: tc.negative, Positive: fast,
				PositiveIncumbent: []engine.StackSpec{{Slot: targetSlot, Bundle: pos}}, Targets: targets, Runtime: fmt.Sprintf("%064x", 9)})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Calibrate: %v, want an error about the %s (report %+v)", err, tc.wantErr, rep)
				}
				return
			}
			if err != nil {
				t.Fatalf("Calibrate: %v (report %+v)", err, rep)
			}
			if rep.Negative.Outcome != Fail || rep.Positive.Outcome != Pass || cal.StockRate != "1000" || cal.Speed.K != "2" {
				t.Fatalf("calibration %+v, report %+v", cal, rep)
			}
			back, err := evidence.Load[Calibration](store, ref)
			if err != nil || back.Speed != cal.Speed || len(back.Reads) != 3+2 {
				t.Fatalf("sealed calibration %+v (%v)", back, err)
			}
		})
	}
}
