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
	// A row of like values on bfloat16's grid (8 significant bits): no
	// square is small, but a float32 running sum's roundings lean one way,
	// and the share is what it falls short by.
	grid := make([]float64, h)
	for j := range grid {
		grid[j] = float64(math.Float32frombits(math.Float32bits(float32(3+float64(j%97)/61)) &^ 0xffff))
	}
	g, err := RMSNormAbsorbed(grid, 1, h, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	var run float32
	sum := 0.0
	for _, v := range grid {
		run += float32(v * v)
		sum += v * v
	}
	if want := (sum - float64(run)) / (sum + 1e-6*h); !(want > 0) || math.Abs(g[0]-want) > 1e-9*want {
		t.Errorf("bfloat16 grid row: absorbed %g, want the running sum's shortfall %g", g[0], want)
	}
	if _, err := RMSNormAbsorbed(x[:10], 3, h, 1e-6); err == nil {
		t.Error("short x: no error")
	}
}
