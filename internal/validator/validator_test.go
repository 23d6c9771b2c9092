package validator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/nodeconfig"
)

// TestOpenConfigErrors: what the configuration names but cannot be used is
// ErrConfig (the CLI's exit status 2), naming the key; nothing is left
// open behind it.
func TestOpenConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, arena, calibration, want string
	}{
		{"unknown arena", "no-such-arena", "cal", "arena"},
		{"missing calibration", "cpu-tiny", "missing.calibration", "referee.calibration"},
		{"calibration not canonical", "cpu-tiny", "garbage.calibration", "referee.calibration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "garbage.calibration"), []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
			text := "data = \"state\"\nchain = \"http://127.0.0.1:1\"\narena = \"" + tc.arena + "\"\n[referee]\ncalibration = \"" + tc.calibration + "\"\n"
			cfg, err := nodeconfig.Parse([]byte(text), dir, "v.toml")
			if err != nil {
				t.Fatal(err)
			}
			v, err := Open(context.Background(), cfg, Options{})
			if err == nil {
				v.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v: want ErrConfig naming %s", err, tc.want)
			}
			// The store was closed again: a second open takes its lock.
			if v, err := Open(context.Background(), cfg, Options{}); v != nil || !errors.Is(err, ErrConfig) {
				t.Fatalf("second open: %v", err)
			}
		})
	}
}
