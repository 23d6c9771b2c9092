package promtext

import (
	"context"
	"strings"
	"testing"
)

// unescape reverses a label value's (quote) or HELP text's escaping; ok is
// false on an escape the format does not have, or an unescaped quote in a
// label value.
func unescape(s string, quote bool) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' && quote:
			return "", false
		case c != '\\':
			b.WriteByte(c)
			continue
		}
		if i++; i == len(s) {
			return "", false
		}
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !quote {
				return "", false
			}
			b.WriteByte('"')
		default:
			return "", false
		}
	}
	return b.String(), true
}

// FuzzLabelValue: whatever the label value and help text, the exposition
// is exactly a HELP, a TYPE and one sample line, and the escaped parts read
// back to the (UTF-8 repaired) input.
func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"", "plain", `a\b`, `"q"`, "l1\nl2", `\n`, "\\\"\n", "\xff", "é\r\t", "}\" 1\nx"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, value, help string) {
		r := NewRegistry()
		g, err := r.Gauge("m", help, "l")
		if err != nil {
			t.Fatal(err)
		}
		g.With(value).Set(1)
		out := scrape(t, r)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if !strings.HasSuffix(out, "\n") || len(lines) != 2+min(1, len(help)) {
			t.Fatalf("exposition is not HELP, TYPE and one sample:\n%q", out)
		}
		if help != "" {
			h, ok := strings.CutPrefix(lines[0], "# HELP m ")
			if !ok {
				t.Fatalf("HELP line %q", lines[0])
			}
			if got, ok := unescape(h, false); !ok || got != strings.ToValidUTF8(help, "\uFFFD") {
				t.Fatalf("HELP %q reads back as %q, %v", help, got, ok)
			}
			lines = lines[1:]
		}
		if lines[0] != "# TYPE m gauge" {
			t.Fatalf("TYPE line %q", lines[0])
		}
		v, ok := strings.CutPrefix(lines[1], `m{l="`)
		if v, ok = strings.CutSuffix(v, `"} 1`); !ok {
			t.Fatalf("sample line %q", lines[1])
		}
		if got, ok := unescape(v, true); !ok || got != strings.ToValidUTF8(value, "\uFFFD") {
			t.Fatalf("label value %q reads back as %q, %v", value, got, ok)
		}
		var b strings.Builder
		if err := r.Write(context.Background(), &b); err != nil || b.String() != out {
			t.Fatalf("a second scrape differs: %v", err)
		}
	})
}
