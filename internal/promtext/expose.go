package promtext

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// ContentType is the media type of the exposition.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Write writes the exposition of every family with samples to w: families
// sorted by name, samples by label values. GaugeFunc callbacks run with ctx;
// one that fails leaves its family out and is counted in
// CollectErrorsName. The error is ctx's when it is done before the
// collection, else the first write error.
func (r *Registry) Write(ctx context.Context, w io.Writer) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("collect metrics: %w", err)
	}
	r.mu.Lock()
	fams := make([]*family, 0, len(r.families))
	for _, f := range r.families {
		fams = append(fams, f)
	}
	r.mu.Unlock()
	slices.SortFunc(fams, func(a, b *family) int { return strings.Compare(a.name, b.name) })

	// Collect the error counts last, so that they include this scrape's.
	pts := make([][]point, len(fams))
	errsAt := -1
	for i, f := range fams {
		if f.name == CollectErrorsName {
			errsAt = i
			continue
		}
		p, err := f.collect(ctx)
		if err != nil {
			r.errs.With(f.name).Inc()
			continue
		}
		pts[i] = p
	}
	if errsAt >= 0 {
		pts[errsAt], _ = fams[errsAt].collect(ctx)
	}

	var b bytes.Buffer
	for i, f := range fams {
		if len(pts[i]) > 0 {
			writeFamily(&b, f, pts[i])
		}
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write metrics: %w", err)
	}
	return nil
}

// Handler serves the exposition (GET and HEAD) with the request's context.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var b bytes.Buffer
		if err := r.Write(req.Context(), &b); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
		if req.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(b.Bytes()) // the client went away: nothing to do
	})
}

// writeFamily writes one family's HELP, TYPE and sample lines.
func writeFamily(b *bytes.Buffer, f *family, pts []point) {
	slices.SortFunc(pts, func(x, y point) int { return slices.Compare(x.values, y.values) })
	if f.help != "" {
		b.WriteString("# HELP " + f.name + " ")
		writeEscaped(b, strings.ToValidUTF8(f.help, "\uFFFD"), false)
		b.WriteByte('\n')
	}
	b.WriteString("# TYPE " + f.name + " " + f.typ + "\n")
	for _, p := range pts {
		if f.typ != "histogram" {
			writeSample(b, f.name, f.labels, p.values, "", p.value)
			continue
		}
		for i, n := range p.buckets {
			writeSample(b, f.name+"_bucket", f.labels, p.values, FormatFloat(f.upper[i]), float64(n))
		}
		writeSample(b, f.name+"_bucket", f.labels, p.values, "+Inf", float64(p.count))
		writeSample(b, f.name+"_sum", f.labels, p.values, "", p.sum)
		writeSample(b, f.name+"_count", f.labels, p.values, "", float64(p.count))
	}
}

// writeSample writes `name{l1="v1",...,le="LE"} value`; le is left out
// when "".
func writeSample(b *bytes.Buffer, name string, labels, values []string, le string, v float64) {
	b.WriteString(name)
	if len(labels) > 0 || le != "" {
		b.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l + `="`)
			writeEscaped(b, values[i], true)
			b.WriteByte('"')
		}
		if le != "" {
			if len(labels) > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`le="` + le + `"`)
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(FormatFloat(v))
	b.WriteByte('\n')
}

// writeEscaped writes s with backslash and newline escaped, and the double
// quote too in a label value (quote).
func writeEscaped(b *bytes.Buffer, s string, quote bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '"' && quote:
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
}

// EscapeLabelValue returns s as it appears between the quotes of a label
// value: backslash, double quote and newline escaped (invalid UTF-8
// replaced by U+FFFD).
func EscapeLabelValue(s string) string {
	var b bytes.Buffer
	writeEscaped(&b, strings.ToValidUTF8(s, "\uFFFD"), true)
	return b.String()
}

// EscapeHelp returns s as it appears in a HELP line: backslash and newline
// escaped (invalid UTF-8 replaced by U+FFFD).
func EscapeHelp(s string) string {
	var b bytes.Buffer
	writeEscaped(&b, strings.ToValidUTF8(s, "\uFFFD"), false)
	return b.String()
}

// FormatFloat formats a sample value as Prometheus reads it: +Inf, -Inf,
// NaN; an integer of magnitude below 2^53 in plain digits (1000000, not
// 1e+06); anything else in the shortest form that reads back exactly.
func FormatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case f == 0:
		return "0" // -0 too
	case f == math.Trunc(f) && math.Abs(f) < 1<<53:
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
