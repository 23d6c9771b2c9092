package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTorchBuiltWithCUDA: torch's version file names a CUDA version in a
// CUDA build (old and annotated forms) and None in a CPU build.
func TestTorchBuiltWithCUDA(t *testing.T) {
	tests := []struct {
		name, src string
		want      bool
	}{
		{"torch 2.x, CUDA 13.0", "__version__ = '2.11.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\ngit_version = 'abc'\n", true},
		{"torch 1.x, CUDA 11.7", "__version__ = '1.13.1+cu117'\ncuda = '11.7'\nhip = None\n", true},
		{"a CPU build", "__version__ = '1.13.0a0'\ndebug = False\ncuda = None\ngit_version = 'Unknown'\nhip = None\n", false},
		{"annotated CPU build", "cuda: Optional[str] = None\nhip: Optional[str] = None\n", false},
		{"a comment is not the line", "# cuda = '12.1'\ncuda = None\n", false},
		{"hip is not cuda", "cuda = None\nhip = '6.0'\n", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := torchBuiltWithCUDA([]byte(tt.src)); got != tt.want {
				t.Errorf("torchBuiltWithCUDA = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCUDAArchitecture runs the probe through a stand-in interpreter that
// prints what a driver would make it print: a compute capability is named
// as the engine names it, anything else is an error naming the probe.
func TestCUDAArchitecture(t *testing.T) {
	for _, tc := range []struct {
		printed, want string
		ok            bool
	}{
		{"sm90", "sm90", true},
		{"sm100\n", "sm100", true},
		{"no device", "", false},
		{"sm9", "", false},
	} {
		dir := t.TempDir()
		fake := filepath.Join(dir, "python3")
		if err := os.WriteFile(fake, []byte("#!/bin/sh\nprintf '"+strings.ReplaceAll(tc.printed, "\n", `\n`)+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := CUDAArchitecture(context.Background(), fake)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("printed %q: got %q, %v; want %q (ok %v)", tc.printed, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "cuda architecture probe") {
			t.Errorf("error does not name the probe: %v", err)
		}
	}
}
