package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/arenas"
	"cacheon/internal/canon"
	"cacheon/internal/evidence"
	"cacheon/internal/referee"
	"cacheon/python"
)

// cpuTinyCalibration writes a calibration record for cpu-tiny under which
// only the run's own numbers decide (a wide stock envelope, and a drift
// ceiling no CPU read reaches: speed on a shared CPU is noise).
func cpuTinyCalibration(t *testing.T) string {
	t.Helper()
	a, err := arenas.Resolve("cpu-tiny")
	if err != nil {
		t.Fatal(err)
	}
	if a, err = a.Select(""); err != nil {
		t.Fatal(err)
	}
	ad, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	wide := canon.Decimal("1000000000")
	device, err := referee.HostDevice{}.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cal := referee.Calibration{Arena: ad, Device: device, Runtime: python.Digest(),
		Speed: referee.SpeedRule{N: "1000", M: "0.05", K: "0"},
		Quality: referee.QualityConstants{Alpha: "0.05", TailNLL: "6.2", DriftEnvelope: [3]canon.Decimal{"0.5", "2", "0.5"},
			AllowedDelta: [3]canon.Decimal{"0.5", "2", "0.5"}, DivergenceEnvelope: "0.5"},
		StockRate: "1", StockEnvelope: wide}
	data, _, err := evidence.Encode(referee.DomainCalibration, cal)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "cal.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestQualifyCommand: a wrong kernel is a candidate FAIL at the screen
// (exit 2); a slower one FAILs not_faster after real reads (exit 2), and
// its evidence re-derives with evidence check until a byte of it changes.
func TestQualifyCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the arena runtime")
	}
	cal := cpuTinyCalibration(t)
	ev := t.TempDir()
	code, out, errs := run(t, "qualify", "--arena", "cpu-tiny", "--candidate", "../../examples/broken_silu_wrong_math",
		"--calibration", cal, "--evidence", ev, "--attempts", "1", "--waves", "1")
	if code != ExitFindings || !strings.Contains(out, "FAIL verify_failed") {
		t.Fatalf("a wrong kernel: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = run(t, "qualify", "--arena", "cpu-tiny", "--candidate", "../referee/testdata/silu_slow",
		"--calibration", cal, "--evidence", ev, "--attempts", "1", "--waves", "1", "--warmup", "0", "--json")
	if code != ExitFindings {
		t.Fatalf("a slower kernel: exit %d\n%s\n%s", code, out, errs)
	}
	var res referee.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if res.Verdict.Reason != referee.ReasonNotFaster || res.Qualification == nil || len(res.Qualification.Attempts) != 1 {
		t.Fatalf("result %+v", res)
	}
	ref := res.Qualification.Attempts[0].Ref
	if code, out, errs = run(t, "evidence", "check", ref.String(), "--evidence", ev); code != 0 || !strings.Contains(out, "re-derived: the speed rule") {
		t.Fatalf("evidence check: exit %d\n%s\n%s", code, out, errs)
	}
	p := filepath.Join(ev, ref.Domain, ref.Digest[:2], ref.Digest)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte("not_faster"), []byte("not_slower"), 1), 0o400); err != nil {
		t.Fatal(err)
	}
	if code, _, errs = run(t, "evidence", "check", ref.String(), "--evidence", ev); code != ExitFindings || !strings.Contains(errs, "digest mismatch") {
		t.Fatalf("evidence check after a change: exit %d\n%s", code, errs)
	}
	missing := filepath.Join(t.TempDir(), "none")
	if code, _, errs = run(t, "evidence", "check", ref.String(), "--evidence", missing); code != ExitFindings || !strings.Contains(errs, "no evidence store") {
		t.Fatalf("evidence check of a missing store: exit %d\n%s", code, errs)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("evidence check created the store it was asked to read")
	}
	if code, _, errs = run(t, "qualify", "--arena", "cpu-tiny", "--candidate", "x"); code != ExitUsage || !strings.Contains(errs, "--calibration") {
		t.Fatalf("qualify without a calibration: exit %d\n%s", code, errs)
	}
	if code, _, errs = run(t, "qualify", "--arena", "cpu-tiny", "--candidate", "x", "--calibration", "c", "--repeat", "-2"); code != ExitUsage || !strings.Contains(errs, "--repeat -2") {
		t.Fatalf("qualify --repeat -2: exit %d\n%s", code, errs)
	}
}

// TestQualifyCalibrationElsewhere: a calibration made by another build, on
// another device or unreadable is the caller's input (exit 1, naming the
// file and the field), never a candidate FAIL (exit 2).
func TestQualifyCalibrationElsewhere(t *testing.T) {
	good := cpuTinyCalibration(t)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bytes.TrimSuffix(data, []byte("\n")))
	cal, err := evidence.Decode[referee.Calibration](evidence.Ref{Domain: referee.DomainCalibration, Digest: hex.EncodeToString(sum[:])}, bytes.TrimSuffix(data, []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, edit func(*referee.Calibration)) string {
		c := cal
		edit(&c)
		b, _, err := evidence.Encode(referee.DomainCalibration, c)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := filepath.Join(t.TempDir(), "garbage.calibration")
	if err := os.WriteFile(garbage, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"another build", write("build.calibration", func(c *referee.Calibration) { c.Runtime = strings.Repeat("7", 64) }), "another runtime"},
		{"another device", write("device.calibration", func(c *referee.Calibration) { c.Device = "cuda" }), "another device model or driver"},
		{"not a calibration", garbage, "garbage.calibration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := run(t, "qualify", "--arena", "cpu-tiny", "--candidate", "x", "--calibration", tc.path, "--evidence", t.TempDir())
			if code != ExitUsage || !strings.Contains(errs, tc.want) || !strings.Contains(errs, tc.path) {
				t.Fatalf("exit %d, want %d naming %s and %q:\n%s", code, ExitUsage, tc.path, tc.want, errs)
			}
		})
	}
}
