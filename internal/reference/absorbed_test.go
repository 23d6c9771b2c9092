package reference

import (
	"math"
	"testing"
)

// TestRMSNormAbsorbed: a row whose sum is dominated by one square may lose
// its small squares to a float32 running sum; a row of like squares loses
// none of consequence; zero rows and eps alone give zero.
func TestRMSNormAbsorbed(t *testing.T) {
	const h = 4096
	like := make([]float64, h)
	outlier := make([]float64, h)
	for j := range like {
		like[j] = 1 + float64(j%7)/7
		outlier[j] = 0.5
	}
	outlier[17] = 4096
	zero := make([]float64, h)
	x := append(append(append([]float64(nil), like...), outlier...), zero...)
	got, err := RMSNormAbsorbed(x, 3, h, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 0 {
		t.Errorf("like squares: absorbed %g, want 0", got[0])
	}
	total := 4096.0*4096 + (h-1)*0.25 + 1e-6*h
	if want := (h - 1) * 0.25 / total; math.Abs(got[1]-want) > 1e-12*want {
		t.Errorf("one outlier: absorbed %g, want %g", got[1], want)
	}
	if got[2] != 0 {
		t.Errorf("zero row: absorbed %g, want 0", got[2])
	}
	if _, err := RMSNormAbsorbed(x[:10], 3, h, 1e-6); err == nil {
		t.Error("short x: no error")
	}
}
