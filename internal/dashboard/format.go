package dashboard

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"
)

// funcs are the templates' helpers.
func (s *server) funcs() template.FuncMap {
	return template.FuncMap{
		"asset":      func(name string) string { return s.assetOf[name] },
		"short":      short,
		"rate":       rate,
		"exact":      exact,
		"speedup":    speedup,
		"percent":    percent,
		"when":       when,
		"roleKey":    roleKey,
		"verdictCls": verdictClass,
		"refName":    refName,
		"add":        func(a, b int) int { return a + b },
		"hasPrefix":  strings.HasPrefix,
		"stateCounts": func(q []StateCount) int {
			n := 0
			for _, c := range q {
				n += c.Count
			}
			return n
		},
	}
}

// short is the first 16 characters of a digest, id or hotkey.
func short(s string) string {
	if len(s) <= 16 {
		return s
	}
	return s[:16]
}

// rate is a rate as the pages show it: tokens/second, two decimals.
func rate(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// exact is a float's shortest exact representation (what data-v holds).
func exact(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// speedup shows a speedup in ppm as x.xxxx (truncated, as the ppm are).
func speedup(ppm uint64) string {
	return fmt.Sprintf("%d.%04d", ppm/1_000_000, ppm%1_000_000/100)
}

// percent shows ppm as a percentage with four decimals (exact: one ppm
// is 0.0001 %).
func percent(ppm uint32) string {
	return fmt.Sprintf("%d.%04d", ppm/10_000, ppm%10_000)
}

// when shows a time in UTC, to the second; the zero time is a dash.
func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// roleKey is a read role as a key or class name ("B′" is "Bp").
func roleKey(role string) string {
	switch role {
	case "B", "C":
		return role
	case "B′", "B'":
		return "Bp"
	}
	return "other"
}

// verdictClass is the class that colours a verdict or a state.
func verdictClass(v string) string {
	if w := strings.Fields(v); len(w) > 0 {
		v = w[0] // "FAIL quality: …" is a FAIL
	}
	switch strings.ToUpper(v) {
	case "PASS", "QUALIFIED", "CONFIRMED", "CROWNED", "TRUE":
		return "good"
	case "FAIL", "FAILED", "EXPIRED", "HELD", "FALSE":
		return "bad"
	case "NO_DECISION":
		return "warn"
	}
	return "neutral"
}

// refName shortens an evidence ref for display: its domain's last word
// and the digest's first 12 digits.
func refName(ref string) string {
	domain, digest, ok := strings.Cut(ref, ":")
	if !ok {
		return short(ref)
	}
	if i := strings.LastIndexByte(domain, '.'); i >= 0 {
		domain = domain[i+1:]
	}
	if len(digest) > 12 {
		digest = digest[:12]
	}
	return domain + ":" + digest
}
