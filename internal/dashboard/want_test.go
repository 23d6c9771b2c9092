package dashboard

import (
	"context"
	"fmt"
	"html"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// This file says, from the fake's values alone, which figure each page
// must show under which data-k key. The handler tests read the keys from
// the HTML, the browser tests from the DOM (after live updates too), and
// both compare with the same want.

// wantPage is every data-k key of a page and its value. arg is the page's
// id or ref (or the state filter of the overview).
func wantPage(t testing.TB, f *fake, page, arg string) map[string]string {
	t.Helper()
	ctx := context.Background()
	o, err := f.Overview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := map[string]string{
		"head":             fmt.Sprint(o.Head),
		"journal.seq":      fmt.Sprint(o.Journal.Seq),
		"stack.generation": fmt.Sprint(o.Stack.Generation),
		"crowns":           fmt.Sprint(o.Crowns),
		"updated":          o.Updated.UTC().Format("2006-01-02 15:04:05Z"),
		"journal.verified": map[bool]string{true: "verified", false: "NOT VERIFIED"}[o.Journal.Verified],
		"weights.block":    "none yet",
	}
	if o.Weights != nil {
		w["weights.block"], w["weights.state"] = fmt.Sprint(o.Weights.Block), o.Weights.State
	}
	switch page {
	case "overview":
		total := 0
		for _, c := range o.Queue {
			w["queue."+c.State] = fmt.Sprint(c.Count)
			total += c.Count
		}
		w["queue.total"] = fmt.Sprint(total)
		subs, _ := f.Submissions(ctx)
		for _, s := range subs {
			if arg != "" && s.State != arg {
				continue
			}
			p := "sub." + s.ID + "."
			w[p+"position"] = fmt.Sprintf("%d/%d", s.Block, s.Index)
			w[p+"state"], w[p+"reason"] = s.State, s.Reason
			w[p+"attempts"], w[p+"passes"] = fmt.Sprint(s.Attempts), fmt.Sprint(s.Passes)
			w[p+"updated"] = fmt.Sprint(s.UpdatedBlock)
			if s.Outcome != "" {
				w[p+"outcome"] = s.Outcome
			}
		}
	case "submission":
		d, err := f.Submission(ctx, arg)
		if err != nil {
			t.Fatal(err)
		}
		s := d.Submission
		for k, v := range map[string]string{"id": s.ID, "position": fmt.Sprintf("%d/%d", s.Block, s.Index), "hotkey": s.Hotkey,
			"content_hash": s.ContentHash, "url": s.URL, "reason": s.Reason, "attempts": fmt.Sprint(s.Attempts),
			"passes": fmt.Sprint(s.Passes), "updated": fmt.Sprint(s.UpdatedBlock), "state": s.State, "fingerprint": d.Fingerprint} {
			w["detail."+k] = v
		}
		if s.Outcome != "" {
			w["detail.outcome"] = s.Outcome
		}
		for i, e := range d.Timeline {
			p := fmt.Sprintf("tl.%d.", i)
			w[p+"at"] = "—"
			if !e.At.IsZero() {
				w[p+"at"] = e.At.UTC().Format("2006-01-02 15:04:05Z")
			}
			w[p+"block"], w[p+"step"], w[p+"reason"] = fmt.Sprint(e.Block), e.Step, e.Reason
			w[p+"transition"] = ""
			if e.To != "" {
				from := e.From
				if from == "" {
					from = "(arrival)"
				}
				w[p+"transition"] = from + " → " + e.To
			}
		}
		for _, a := range d.Attempts {
			p := fmt.Sprintf("att.%d.", a.Number)
			w[p+"number"], w[p+"verdict"], w[p+"reason"], w[p+"ratio"] = fmt.Sprint(a.Number), a.Verdict, a.Reason, a.Ratio
		}
	case "attempt":
		a, err := f.Attempt(ctx, arg)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"verdict": a.Verdict, "reason": a.Reason, "detail": a.Detail, "target": a.Target,
			"ratio": a.Ratio, "drift": a.Drift, "bar": a.Bar} {
			w["attempt."+k] = v
		}
		for _, r := range a.Reads {
			k := map[string]string{"B": "B", "C": "C", "B′": "Bp"}[r.Role]
			w["rate."+k] = fmt.Sprintf("%.2f", r.Rate)
			w["waves."+k] = fmt.Sprint(len(r.WaveRates))
			w["median."+k] = strconv.FormatFloat(r.Rate, 'g', -1, 64)
			for i, v := range r.WaveRates {
				w[fmt.Sprintf("wave.%s.%d", k, i+1)] = strconv.FormatFloat(v, 'g', -1, 64)
			}
		}
		w["audit.graded"], w["audit.failures"], w["audit.summary"] = fmt.Sprint(a.Audit.Graded), fmt.Sprint(a.Audit.Failures), a.Audit.Summary
		w["quality.verdict"] = a.Quality.Verdict
		for i, q := range a.Quality.Rows {
			p := fmt.Sprintf("q.%d.", i)
			w[p+"prompt"], w[p+"metric"], w[p+"value"], w[p+"limit"] = q.Prompt, q.Metric, q.Value, q.Limit
			w[p+"pass"] = map[bool]string{true: "yes", false: "no"}[q.Pass]
		}
	case "stacks":
		st, _ := f.Stacks(ctx)
		for _, g := range st {
			p := fmt.Sprintf("gen.%d.", g.Generation)
			w[p+"generation"], w[p+"digest"] = fmt.Sprint(g.Generation), g.Digest
			if c := g.Crown; c != nil {
				w[p+"crown.seq"], w[p+"crown.target"], w[p+"crown.contributor"] = fmt.Sprint(c.Seq), c.Target, c.Contributor
				w[p+"crown.speedup"] = fmt.Sprintf("%.4f", math.Floor(float64(c.SpeedupPPM)/100)/10_000)
				w[p+"crown.ppm"], w[p+"crown.block"] = fmt.Sprint(c.SpeedupPPM), fmt.Sprint(c.Block)
			}
			for _, e := range g.Entries {
				w[p+"entry."+e.Target] = e.Target
			}
		}
	case "weights":
		pubs, _ := f.Weights(ctx)
		for _, pub := range pubs {
			p := "pub." + pub.ID + "."
			w[p+"block"], w[p+"state"], w[p+"reason"] = fmt.Sprint(pub.Block), pub.State, pub.Reason
			for _, e := range pub.Vector {
				w[fmt.Sprintf("%s%d", p, e.UID)] = fmt.Sprint(e.PPM)
				w[fmt.Sprintf("w.%s.%d", pub.ID, e.UID)] = fmt.Sprint(e.PPM)
			}
		}
	case "journal":
		j, _ := f.Journal(ctx)
		w["jv.verified"], w["jv.count"] = "verifies", fmt.Sprint(len(j.Entries))
		if !j.Verified {
			w["jv.verified"], w["jv.error"] = "does not verify", j.Error
		}
		for _, e := range j.Entries {
			p := fmt.Sprintf("je.%d.", e.Seq)
			w[p+"seq"], w[p+"kind"], w[p+"target"], w[p+"summary"] = fmt.Sprint(e.Seq), e.Kind, e.Target, e.Summary
		}
	default:
		t.Fatalf("no page %q", page)
	}
	return w
}

// keyRE finds a data-k element in the dashboard's own HTML: the key, an
// optional data-v right after it, and the text up to the next tag.
var keyRE = regexp.MustCompile(`data-k="([^"]*)"(?: data-v="([^"]*)")?[^>]*>([^<]*)`)

// htmlValues reads the data-k keys of a rendered page, as the browser
// would (data-v, else the text, unescaped and trimmed).
func htmlValues(t testing.TB, body string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, m := range keyRE.FindAllStringSubmatch(body, -1) {
		k, v := html.UnescapeString(m[1]), strings.TrimSpace(html.UnescapeString(m[3]))
		if strings.Contains(m[0], `data-v="`) {
			v = html.UnescapeString(m[2])
		}
		if _, dup := got[k]; dup {
			t.Errorf("key %s shown twice", k)
		}
		got[k] = v
	}
	return got
}
