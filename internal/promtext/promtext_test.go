package promtext

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// scrape returns r's exposition.
func scrape(t *testing.T, r *Registry) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.Write(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// must returns v, panicking on a registration error (which fails the test).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestExpositionGolden pins the exposition of a registry that uses every
// kind of family (go test ./internal/promtext -update to rewrite).
func TestExpositionGolden(t *testing.T) {
	r := NewRegistry()
	passes := must(r.Counter("cacheon_passes_total", "Loop passes by outcome.", "outcome"))
	passes.With("ok").Add(41)
	passes.With("ok").Inc()
	passes.With("error").Inc()
	passes.With("idle") // exposed at zero
	esc := must(r.Counter("cacheon_escapes_total", "Help with a \\ backslash\nand a newline.", "path", "reason"))
	esc.With(`C:\dir`, "said \"no\"\nthen left").Inc()
	esc.With("bad\xffutf8", "").Add(0.5)
	must(r.Gauge("cacheon_up", "Whether the node runs.")).With().Set(1)
	temps := must(r.Gauge("cacheon_values", "Special values.", "kind"))
	temps.With("big").Set(1e6)
	temps.With("huge").Set(1e300)
	temps.With("frac").Set(0.125)
	temps.With("neg").Set(-3)
	temps.With("nan").Set(math.NaN())
	temps.With("pinf").Set(math.Inf(1))
	temps.With("ninf").Set(math.Inf(-1))
	temps.With("dec").Add(2.5)
	temps.With("dec").Dec()
	lat := must(r.Histogram("cacheon_pass_seconds", "Duration of a pass.", []float64{0.1, 1, 10, math.Inf(1)}, "phase"))
	for _, v := range []float64{0.05, 0.1, 0.5, 3, 20} {
		lat.With("intake").Observe(v)
	}
	lat.With("settle").Observe(1)
	plain := must(r.Histogram("cacheon_sizes_bytes", "", []float64{1024}))
	plain.With().Observe(2048)
	if err := r.GaugeFunc("cacheon_queue_depth", "Reservations by state.", []string{"state"}, func(ctx context.Context) ([]Sample, error) {
		return []Sample{{[]string{"screening"}, 2}, {[]string{"fetching"}, 7}, {[]string{"reserved"}, 0}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.GaugeFunc("cacheon_leases", "Open leases (the database is down).", nil, func(context.Context) ([]Sample, error) {
		return nil, errors.New("database is down")
	}); err != nil {
		t.Fatal(err)
	}
	_ = must(r.Counter("cacheon_unused_total", "Never used: left out.", "x"))
	got := scrape(t, r)

	golden := filepath.Join("testdata", "exposition.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("exposition changed (go test ./internal/promtext -update if on purpose):\n%s\nwant:\n%s", got, want)
	}
	// A second scrape counts the failing family again.
	if got := scrape(t, r); !strings.Contains(got, `promtext_collect_errors_total{family="cacheon_leases"} 2`) {
		t.Fatalf("second scrape:\n%s", got)
	}
}

func TestRegisterErrors(t *testing.T) {
	ok := func(context.Context) ([]Sample, error) { return nil, nil }
	tests := []struct {
		name string
		reg  func(r *Registry) error
		want string
	}{
		{"empty name", func(r *Registry) error { _, err := r.Counter("", "h"); return err }, `invalid metric name ""`},
		{"digit first", func(r *Registry) error { _, err := r.Gauge("1abc", "h"); return err }, `invalid metric name "1abc"`},
		{"dash", func(r *Registry) error { _, err := r.Gauge("a-b", "h"); return err }, `invalid metric name "a-b"`},
		{"non-ascii", func(r *Registry) error { _, err := r.Gauge("métrique", "h"); return err }, `invalid metric name`},
		{"label with colon", func(r *Registry) error { _, err := r.Gauge("a", "h", "x:y"); return err }, `invalid label name "x:y"`},
		{"label digit first", func(r *Registry) error { _, err := r.Gauge("a", "h", "0x"); return err }, `invalid label name "0x"`},
		{"reserved label", func(r *Registry) error { _, err := r.Counter("a", "h", "__name__"); return err }, `"__name__": names starting with "__" are reserved`},
		{"label twice", func(r *Registry) error { _, err := r.Counter("a", "h", "x", "x"); return err }, `label name "x" given twice`},
		{"le on histogram", func(r *Registry) error { _, err := r.Histogram("a", "h", []float64{1}, "le"); return err }, `label name "le" is reserved`},
		{"buckets unsorted", func(r *Registry) error { _, err := r.Histogram("a", "h", []float64{1, 1}); return err }, `bucket 1 (1) is not above bucket 0 (1)`},
		{"bucket NaN", func(r *Registry) error { _, err := r.Histogram("a", "h", []float64{math.NaN()}); return err }, `bucket 0 is NaN`},
		{"bucket -Inf", func(r *Registry) error { _, err := r.Histogram("a", "h", []float64{math.Inf(-1), 1}); return err }, `bucket 0 is -Inf`},
		{"inner +Inf", func(r *Registry) error {
			_, err := r.Histogram("a", "h", []float64{math.Inf(1), math.Inf(1)})
			return err
		}, `bucket 0 is +Inf`},
		{"nil callback", func(r *Registry) error { return r.GaugeFunc("a", "h", nil, nil) }, `nil callback`},
		{"gauge func label", func(r *Registry) error { return r.GaugeFunc("a", "h", []string{"a b"}, ok) }, `invalid label name "a b"`},
		{"duplicate", func(r *Registry) error {
			if _, err := r.Counter("a_total", "h"); err != nil {
				return err
			}
			_, err := r.Gauge("a_total", "h", "x")
			return err
		}, `register gauge "a_total": "a_total" is already written by family "a_total"`},
		{"histogram suffix", func(r *Registry) error {
			if _, err := r.Histogram("lat", "h", nil); err != nil {
				return err
			}
			return r.GaugeFunc("lat_count", "h", nil, ok)
		}, `"lat_count" is already written by family "lat"`},
		{"histogram over a gauge", func(r *Registry) error {
			if _, err := r.Gauge("lat_sum", "h"); err != nil {
				return err
			}
			_, err := r.Histogram("lat", "h", nil)
			return err
		}, `"lat_sum" is already written by family "lat_sum"`},
		{"the registry's own family", func(r *Registry) error { _, err := r.Counter(CollectErrorsName, "h"); return err }, `already written`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.reg(NewRegistry())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestEscape(t *testing.T) {
	tests := []struct{ in, label, help string }{
		{"plain", "plain", "plain"},
		{`a\b`, `a\\b`, `a\\b`},
		{`say "hi"`, `say \"hi\"`, `say "hi"`},
		{"two\nlines", `two\nlines`, `two\nlines`},
		{"\\n literal", `\\n literal`, `\\n literal`},
		{"tab\tand\rcr", "tab\tand\rcr", "tab\tand\rcr"},
		{"bad \xff byte", "bad \uFFFD byte", "bad \uFFFD byte"},
		{"é ✓", "é ✓", "é ✓"},
		{"", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := EscapeLabelValue(tt.in); got != tt.label {
				t.Errorf("EscapeLabelValue(%q) = %q, want %q", tt.in, got, tt.label)
			}
			if got := EscapeHelp(tt.in); got != tt.help {
				t.Errorf("EscapeHelp(%q) = %q, want %q", tt.in, got, tt.help)
			}
		})
	}
}

func TestFormatFloat(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-1, "-1"}, {42, "42"},
		{1e6, "1000000"}, {1 << 52, "4503599627370496"}, {1 << 53, "9.007199254740992e+15"},
		{1e21, "1e+21"}, {0.1, "0.1"}, {2.5, "2.5"}, {1e-7, "1e-07"}, {-0.001, "-0.001"},
		{math.Inf(1), "+Inf"}, {math.Inf(-1), "-Inf"}, {math.NaN(), "NaN"},
		{math.MaxFloat64, "1.7976931348623157e+308"}, {math.SmallestNonzeroFloat64, "5e-324"},
	}
	for _, tt := range tests {
		if got := FormatFloat(tt.in); got != tt.want {
			t.Errorf("FormatFloat(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMisusePanics(t *testing.T) {
	r := NewRegistry()
	c := must(r.Counter("c_total", "h", "a"))
	h := must(r.Histogram("h", "h", []float64{1}))
	tests := []struct {
		name string
		f    func()
	}{
		{"negative add", func() { c.With("x").Add(-1) }},
		{"NaN add", func() { c.With("x").Add(math.NaN()) }},
		{"too few values", func() { c.With() }},
		{"too many values", func() { c.With("x", "y") }},
		{"values on a family without labels", func() { h.With("x") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tt.f()
		})
	}
}

func TestGaugeFuncFailures(t *testing.T) {
	tests := []struct {
		name    string
		samples []Sample
		err     error
	}{
		{"callback error", nil, errors.New("boom")},
		{"wrong label count", []Sample{{[]string{"a", "b"}, 1}}, nil},
		{"same labels twice", []Sample{{[]string{"a"}, 1}, {[]string{"a"}, 2}}, nil},
		{"same labels after UTF-8 repair", []Sample{{[]string{"\xff"}, 1}, {[]string{"\xfe"}, 2}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			must(r.Gauge("other", "h")).With().Set(3)
			var gotCtx context.Context
			ctx := context.WithValue(context.Background(), t, "marker")
			if err := r.GaugeFunc("depth", "h", []string{"state"}, func(c context.Context) ([]Sample, error) {
				gotCtx = c
				return tt.samples, tt.err
			}); err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := r.Write(ctx, &b); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if strings.Contains(out, "\ndepth") || strings.Contains(out, "# TYPE depth ") {
				t.Errorf("the failed family was served:\n%s", out)
			}
			if !strings.Contains(out, "\nother 3\n") || !strings.Contains(out, `promtext_collect_errors_total{family="depth"} 1`) {
				t.Errorf("want the other family and one collect error:\n%s", out)
			}
			if gotCtx == nil || gotCtx.Value(t) != "marker" {
				t.Error("the callback did not get the scrape's context")
			}
		})
	}
}

func TestWriteCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := NewRegistry().Write(ctx, &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Write(canceled) = %v", err)
	}
}

// TestConcurrent updates every kind of metric from several goroutines
// while scraping; go test -race checks the synchronization, the final
// scrape the totals.
func TestConcurrent(t *testing.T) {
	r := NewRegistry()
	c := must(r.Counter("c_total", "h", "worker"))
	g := must(r.Gauge("g", "h"))
	h := must(r.Histogram("h", "h", []float64{1, 2}, "worker"))
	if err := r.GaugeFunc("f", "h", nil, func(context.Context) ([]Sample, error) { return []Sample{{nil, 1}}, nil }); err != nil {
		t.Fatal(err)
	}
	const workers, n = 4, 500
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		for {
			select {
			case <-stop:
				return
			default:
				var b bytes.Buffer
				if err := r.Write(context.Background(), &b); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	for w := range workers {
		wg.Go(func() {
			name := []string{"a", "b"}[w%2]
			for i := range n {
				c.With(name).Inc()
				g.With().Add(1)
				h.With(name).Observe(float64(i % 3))
			}
		})
	}
	wg.Wait()
	close(stop)
	<-scraped
	out := scrape(t, r)
	for _, want := range []string{
		`c_total{worker="a"} 1000`, `c_total{worker="b"} 1000`, "\ng 2000\n",
		`h_bucket{worker="a",le="+Inf"} 1000`, `h_count{worker="b"} 1000`, "\nf 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestHandler(t *testing.T) {
	r := NewRegistry()
	must(r.Gauge("up", "h")).With().Set(1)
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	tests := []struct {
		method string
		code   int
		body   string
	}{
		{http.MethodGet, 200, "# HELP up h\n# TYPE up gauge\nup 1\n"},
		{http.MethodHead, 200, ""},
		{http.MethodPost, 405, "method not allowed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			if _, err := b.ReadFrom(resp.Body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.code || b.String() != tt.body {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, b.String(), tt.code, tt.body)
			}
			if tt.code == 200 && resp.Header.Get("Content-Type") != ContentType {
				t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
			}
		})
	}
}
