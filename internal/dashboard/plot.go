package dashboard

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// The plots are inline SVG drawn here: no script draws them, and every
// mark carries its exact figure (data-v, and a <title> a browser shows on
// hover), so a test reads the plotted numbers from the page.

// Plot geometry, in SVG user units.
const (
	plotW, plotH                   = 720.0, 280.0
	padL, padR, padT, padB         = 72.0, 48.0, 16.0, 40.0
	innerW, innerH                 = plotW - padL - padR, plotH - padT - padB
	maxWeightBars                  = 60 // the latest publications plotted
	weightColours                  = 8  // classes c0 … c7
	ppmTotal               float64 = 1_000_000
)

// ratePlot is the per-wave rates of an attempt's reads.
type ratePlot struct {
	Empty  bool
	W, H   float64
	Series []rateSeries
	Legend string // x of the legend
	YTicks []tick
	XTicks []tick
	Box    box
}

type rateSeries struct {
	Role, Key string
	Points    []ratePoint
	Line      string // polyline points
	Median    float64
	MedianY   string
	LegendY   string
}

type ratePoint struct {
	Key     string
	Wave    int
	Rate    float64
	X, Y    string
	Caption string
}

type tick struct {
	Pos   string // x or y
	Label string
}

// box is the plotting area and where the tick labels go.
type box struct{ X, Y, W, H, Right, Bottom, YLabelX, XLabelY string }

func plotBox() box {
	return box{X: coord(padL), Y: coord(padT), W: coord(innerW), H: coord(innerH), Right: coord(padL + innerW),
		Bottom: coord(padT + innerH), YLabelX: coord(padL - 6), XLabelY: coord(padT + innerH + 18)}
}

func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// newRatePlot lays out reads: x is the wave, y the rate; one series per
// read with its median (the scored rate) as a dashed line.
func newRatePlot(reads []Read) ratePlot {
	p := ratePlot{W: plotW, H: plotH, Box: plotBox()}
	lo, hi, waves := math.Inf(1), math.Inf(-1), 0
	for _, r := range reads {
		for _, v := range append(slices.Clip(r.WaveRates), r.Rate) {
			if finite(v) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		waves = max(waves, len(r.WaveRates))
	}
	if waves == 0 || math.IsInf(lo, 0) {
		p.Empty = true
		return p
	}
	span := hi - lo
	if span <= 0 {
		span = math.Max(math.Abs(hi)*0.01, 1)
	}
	lo, hi = lo-span*0.1, hi+span*0.1
	y := func(v float64) float64 { return padT + innerH - (v-lo)/(hi-lo)*innerH }
	x := func(i int) float64 {
		if waves == 1 {
			return padL + innerW/2
		}
		return padL + float64(i)*innerW/float64(waves-1)
	}
	for i := 0; i <= 4; i++ {
		v := lo + (hi-lo)*float64(i)/4
		p.YTicks = append(p.YTicks, tick{coord(y(v)), strconv.FormatFloat(v, 'f', decimals(hi-lo), 64)})
	}
	step := max(1, waves/10)
	for i := 0; i < waves; i += step {
		p.XTicks = append(p.XTicks, tick{coord(x(i)), strconv.Itoa(i + 1)})
	}
	for n, r := range reads {
		s := rateSeries{Role: r.Role, Key: roleKey(r.Role), Median: r.Rate, LegendY: coord(padT + 14 + float64(n)*16)}
		p.Legend = coord(padL + innerW + 10)
		if finite(r.Rate) {
			s.MedianY = coord(y(r.Rate))
		}
		for i, v := range r.WaveRates {
			if !finite(v) {
				continue
			}
			pt := ratePoint{Key: s.Key, Wave: i + 1, Rate: v, X: coord(x(i)), Y: coord(y(v)),
				Caption: fmt.Sprintf("%s wave %d: %s tokens/s", r.Role, i+1, exact(v))}
			s.Points = append(s.Points, pt)
			if s.Line != "" {
				s.Line += " "
			}
			s.Line += pt.X + "," + pt.Y
		}
		p.Series = append(p.Series, s)
	}
	return p
}

// decimals is how many decimals tick labels need over a span.
func decimals(span float64) int {
	switch {
	case span >= 50:
		return 0
	case span >= 5:
		return 1
	case span >= 0.5:
		return 2
	}
	return 4
}

// weightPlot is the weight vectors over time: one stacked bar per
// publication (oldest left), one segment per uid.
type weightPlot struct {
	Empty   bool
	W, H    float64
	Bars    []weightBar
	YTicks  []tick
	Legend  []legendEntry
	Box     box
	Omitted int // older publications not plotted
}

type weightBar struct {
	ID, State string
	Block     uint64
	X, W      string
	LabelX    string
	Label     bool
	Segments  []weightSegment
}

type weightSegment struct {
	PubID   string
	X, W    string
	UID     uint16
	Hotkey  string
	PPM     uint32
	Y, H    string
	Class   string
	Caption string
}

type legendEntry struct {
	Hotkey, Class string
	X, Y          string
}

// newWeightPlot lays out pubs (newest first, as the Source gives them).
func newWeightPlot(pubs []WeightPublication) weightPlot {
	p := weightPlot{W: plotW, H: plotH + 20, Box: plotBox()}
	if len(pubs) == 0 {
		p.Empty = true
		return p
	}
	shown := pubs[:min(len(pubs), maxWeightBars)]
	p.Omitted = len(pubs) - len(shown)
	var hotkeys []string
	for _, pub := range shown {
		for _, e := range pub.Vector {
			hotkeys = append(hotkeys, e.Hotkey)
		}
	}
	slices.Sort(hotkeys)
	hotkeys = slices.Compact(hotkeys)
	class := func(hotkey string) string {
		i, _ := slices.BinarySearch(hotkeys, hotkey)
		return "c" + strconv.Itoa(i%weightColours)
	}
	for i, h := range hotkeys {
		p.Legend = append(p.Legend, legendEntry{Hotkey: h, Class: class(h),
			X: coord(padL + float64(i%4)*innerW/4), Y: coord(plotH + float64(i/4)*16)})
	}
	p.H += float64((len(hotkeys)+3)/4) * 16
	y := func(ppm float64) float64 { return padT + innerH - ppm/ppmTotal*innerH }
	for i := 0; i <= 4; i++ {
		v := ppmTotal * float64(i) / 4
		p.YTicks = append(p.YTicks, tick{coord(y(v)), strconv.FormatFloat(v, 'f', 0, 64)})
	}
	slot := innerW / float64(len(shown))
	width := math.Min(40, slot*0.7)
	every := max(1, len(shown)/12)
	for n := range shown {
		pub := shown[len(shown)-1-n] // oldest first
		x := padL + float64(n)*slot + (slot-width)/2
		bar := weightBar{ID: pub.ID, State: pub.State, Block: pub.Block, X: coord(x), W: coord(width),
			LabelX: coord(x + width/2), Label: n%every == 0}
		var acc float64
		for _, e := range pub.Vector {
			top := y(acc + float64(e.PPM))
			bar.Segments = append(bar.Segments, weightSegment{PubID: pub.ID, X: bar.X, W: bar.W, UID: e.UID, Hotkey: e.Hotkey, PPM: e.PPM,
				Y: coord(top), H: coord(y(acc) - top), Class: class(e.Hotkey),
				Caption: fmt.Sprintf("block %d, uid %d (%s): %d ppm", pub.Block, e.UID, short(e.Hotkey), e.PPM)})
			acc += float64(e.PPM)
		}
		p.Bars = append(p.Bars, bar)
	}
	return p
}
