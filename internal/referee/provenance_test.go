package referee

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/arena"
	"cacheon/internal/canon"
	"cacheon/internal/evidence"
)

// TestLoadCalibrationProvenance: a calibration is refused, naming the
// field, when it was made for another arena, device model or runtime.
func TestLoadCalibrationProvenance(t *testing.T) {
	made := Provenance{Arena: fmt.Sprintf("%064x", 1), Device: "cuda: NVIDIA H100 80GB HBM3 (driver 580.159.04)", Runtime: fmt.Sprintf("%064x", 2)}
	wide := canon.Decimal("1000000000")
	cal := Calibration{Arena: made.Arena, Device: made.Device, Runtime: made.Runtime,
		Speed: SpeedRule{N: "0.02", M: "0.01", K: "2"},
		Quality: QualityConstants{Alpha: "0.05", TailNLL: "6.2", DriftEnvelope: [3]canon.Decimal{"0.5", "2", "0.5"},
			AllowedDelta: [3]canon.Decimal{"0.5", "2", "0.5"}, DivergenceEnvelope: "0.5"},
		StockRate: "1", StockEnvelope: wide}
	data, _, err := evidence.Encode(DomainCalibration, cal)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.calibration")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want func(*Provenance)
		err  string // "" = accepted
	}{
		{"the same", func(*Provenance) {}, ""},
		{"another arena", func(p *Provenance) { p.Arena = fmt.Sprintf("%064x", 9) }, "another arena or workload (arena"},
		{"another card", func(p *Provenance) { p.Device = "cuda: NVIDIA H200 (driver 580.159.04)" }, "another device model or driver (device"},
		{"another driver", func(p *Provenance) { p.Device = "cuda: NVIDIA H100 80GB HBM3 (driver 590.1)" }, "another device model or driver"},
		{"a device kind only", func(p *Provenance) { p.Device = "cuda" }, "another device model or driver"},
		{"another runtime", func(p *Provenance) { p.Runtime = fmt.Sprintf("%064x", 3) }, "another runtime (another cacheon build) (runtime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := made
			tc.want(&want)
			store, err := evidence.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := LoadCalibration(store, path, want)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("LoadCalibration: %v", err)
			case tc.err == "" && got.Device != made.Device:
				t.Fatalf("loaded %+v", got)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path)):
				t.Fatalf("LoadCalibration: %v, want an error naming %s and %q", err, path, tc.err)
			}
		})
	}
}

// TestNvidiaDescribe: the GPU is described by nvidia-smi's name and driver
// of the guarded index; output that is not one line of two fields is an
// error, not a description.
func TestNvidiaDescribe(t *testing.T) {
	for _, tc := range []struct {
		name, out, want, err string
	}{
		{"h100", "NVIDIA H100 80GB HBM3, 580.159.04", "cuda: NVIDIA H100 80GB HBM3 (driver 580.159.04)", ""},
		{"h200", "NVIDIA H200, 580.159.04", "cuda: NVIDIA H200 (driver 580.159.04)", ""},
		{"no driver", "NVIDIA H200", "", "want one line of two fields"},
		{"two cards", "NVIDIA H200, 580.159.04\nNVIDIA H200, 580.159.04", "", "want one line of two fields"},
		{"empty", "", "", "want one line of two fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			smi, out := filepath.Join(dir, "nvidia-smi"), filepath.Join(dir, "out")
			if err := os.WriteFile(out, []byte(tc.out+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			script := fmt.Sprintf("#!/bin/sh\n[ \"$1\" = -i ] && [ \"$2\" = 3 ] || exit 9\ncat '%s'\n", out)
			if err := os.WriteFile(smi, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := NvidiaDevice{Index: 3, SMI: smi}.Describe(context.Background())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Describe = %q, %v; want an error about %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Describe = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestDescribeCPU: a CPU arena's device is the processor's model and the
// CPU count; a host whose cpuinfo names none is "cpu".
func TestDescribeCPU(t *testing.T) {
	for _, tc := range []struct {
		name, info string
		n          int
		want       string
	}{
		{"x86", "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)  Processor\nflags\t: fpu\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R)  Processor\n", 2, "cpu: Intel(R) Xeon(R) Processor ×2"},
		{"no model name", "processor\t: 0\nBogoMIPS\t: 50.00\n", 4, "cpu"},
		{"empty model name", "model name\t:   \n", 4, "cpu"},
		{"no cpuinfo", "", 8, "cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := describeCPU(tc.info, tc.n); got != tc.want {
				t.Fatalf("describeCPU = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDeviceOf: a cuda arena is guarded through nvidia-smi, any other by
// the host.
func TestDeviceOf(t *testing.T) {
	for _, tc := range []struct {
		device string
		want   Device
	}{{"cuda", NvidiaDevice{}}, {"cpu", HostDevice{}}} {
		if got := DeviceOf(&arena.Arena{Device: tc.device}); got != tc.want {
			t.Errorf("DeviceOf(%s) = %#v, want %#v", tc.device, got, tc.want)
		}
	}
}
