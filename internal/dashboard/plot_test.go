package dashboard

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// inBox reports whether every coordinate lies in the plot.
func inBox(t *testing.T, what string, vs ...string) {
	t.Helper()
	for _, v := range vs {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > plotW+1 || strings.Contains(v, "NaN") {
			t.Errorf("%s: coordinate %q", what, v)
		}
	}
}

func TestRatePlot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reads  []Read
		empty  bool
		points int
	}{
		{"no reads", nil, true, 0},
		{"no waves", []Read{{Role: "B", Rate: 1}}, true, 0},
		{"one wave each", []Read{{Role: "B", Rate: 5, WaveRates: []float64{5}}, {Role: "C", Rate: 6, WaveRates: []float64{6}}}, false, 2},
		{"equal rates", []Read{{Role: "B", Rate: 7, WaveRates: []float64{7, 7, 7}}}, false, 3},
		{"zeros", []Read{{Role: "B", Rate: 0, WaveRates: []float64{0, 0}}}, false, 2},
		{"not finite", []Read{{Role: "B′", Rate: math.NaN(), WaveRates: []float64{1, math.Inf(1), math.NaN(), 2}}}, false, 2},
		{"all not finite", []Read{{Role: "B", Rate: math.Inf(-1), WaveRates: []float64{math.NaN()}}}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newRatePlot(tc.reads)
			if p.Empty != tc.empty {
				t.Fatalf("Empty %v, want %v", p.Empty, tc.empty)
			}
			n := 0
			for _, s := range p.Series {
				if s.MedianY != "" {
					inBox(t, s.Role+" median", s.MedianY)
				}
				for _, pt := range s.Points {
					inBox(t, fmt.Sprintf("%s wave %d", s.Role, pt.Wave), pt.X, pt.Y)
					n++
				}
			}
			if n != tc.points {
				t.Errorf("%d points, want %d", n, tc.points)
			}
		})
	}
}

func TestWeightPlot(t *testing.T) {
	if !newWeightPlot(nil).Empty {
		t.Error("no publication: not empty")
	}
	var pubs []WeightPublication
	for i := 70; i >= 1; i-- { // newest first
		pubs = append(pubs, WeightPublication{ID: fmt.Sprint(i), Block: uint64(i * 100), State: "confirmed",
			Vector: []WeightEntry{{UID: 1, Hotkey: "a", PPM: 250_000}, {UID: 2, Hotkey: fmt.Sprint("h", i%11), PPM: 750_000}}})
	}
	p := newWeightPlot(pubs)
	if len(p.Bars) != maxWeightBars || p.Omitted != 70-maxWeightBars {
		t.Fatalf("%d bars, %d omitted", len(p.Bars), p.Omitted)
	}
	if p.Bars[0].Block != 1100 || p.Bars[len(p.Bars)-1].Block != 7000 {
		t.Errorf("bars from block %d to %d, want the latest 60 oldest first", p.Bars[0].Block, p.Bars[len(p.Bars)-1].Block)
	}
	for _, b := range p.Bars {
		var h float64
		for _, s := range b.Segments {
			inBox(t, "segment", s.X, s.Y, s.W, s.H)
			v, _ := strconv.ParseFloat(s.H, 64)
			h += v
		}
		if math.Abs(h-innerH) > 0.5 {
			t.Errorf("block %d: segments %.1f high, want %.1f", b.Block, h, innerH)
		}
	}
	if len(p.Legend) != 12 {
		t.Errorf("%d legend entries, want 12 hotkeys", len(p.Legend))
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{speedup(1_070_000), "1.0700"},
		{speedup(1_234_567), "1.2345"},
		{speedup(12_000_001), "12.0000"},
		{percent(600_000), "60.0000"},
		{percent(1), "0.0001"},
		{percent(1_000_000), "100.0000"},
		{rate(1000.126), "1000.13"},
		{exact(1000.125), "1000.125"},
		{short(hexOf("x")), hexOf("x")[:16]},
		{refName("cacheon.referee.read:" + hexOf("x")), "read:" + hexOf("x")[:12]},
		{roleKey("B′"), "Bp"},
		{verdictClass("PASS quality unchanged within the calibrated bounds"), "good"},
		{verdictClass("FAIL quality: mean NLL regressed"), "bad"},
		{verdictClass("NO_DECISION quality_undecided: bounds straddle"), "warn"},
		{verdictClass("crowned"), "good"},
		{verdictClass(""), "neutral"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}
