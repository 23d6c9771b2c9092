package dashboard

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"cacheon/internal/dashboard/dashtest"
)

// shotName names a page's screenshot: "" (the path itself) for the
// overview, else the path's words.
func shotName(path string) string {
	if path == "/" {
		return ""
	}
	name := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			return r
		}
		return '-'
	}, path)
	return strings.Trim(name, "-")[:min(len(strings.Trim(name, "-")), 40)]
}

// TestBrowser opens every page in headless Chromium over the fake: each
// renders, shows exactly the fake's figures (read from the DOM), connects
// its live stream, and logs no error, exception or CSP violation. Then a
// change in the fake shows up on open pages without a reload.
func TestBrowser(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(handler(t, f, Options{Poll: 100 * time.Millisecond}))
	t.Cleanup(srv.Close) // after the browser's cleanup: no stream is left open
	start := time.Now()
	browser := dashtest.Browser(t)
	t.Logf("browser started in %v", time.Since(start).Round(time.Millisecond))

	for _, tc := range pageCases() {
		t.Run(tc.path, func(t *testing.T) {
			dashtest.CheckPage(t, browser, srv.URL+tc.path, shotName(tc.path), wantPage(t, f, tc.page, tc.arg), true)
		})
	}

	t.Run("live", func(t *testing.T) {
		carol := hexOf("carol")
		overview := dashtest.CheckPage(t, browser, srv.URL+"/", "live-before", wantPage(t, f, "overview", ""), true)
		detail := dashtest.CheckPage(t, browser, srv.URL+"/submission/"+carol, "live-submission", wantPage(t, f, "submission", carol), true)
		// A reload would lose these.
		for _, p := range []*dashtest.Page{overview, detail} {
			p.Eval(`window.cacheonProbe = 42`, new(int))
		}

		moved := time.Now()
		f.move(carol, "qualifying", "lease to cpu0")
		state := `document.querySelector('[data-k="sub.` + carol + `.state"]').textContent === "qualifying"`
		overview.WaitFor(state, dashtest.LiveTimeout)
		t.Logf("the overview showed the move after %v", time.Since(moved).Round(time.Millisecond))
		detail.WaitFor(`document.querySelector('[data-k="detail.state"]').textContent === "qualifying"`, dashtest.LiveTimeout)

		for name, p := range map[string]*dashtest.Page{"overview": overview, "submission": detail} {
			var probe int
			p.Eval(`window.cacheonProbe`, &probe)
			var refreshes string
			p.Eval(`document.body.dataset.refreshes`, &refreshes)
			if n, _ := strconv.Atoi(refreshes); probe != 42 || n < 1 {
				t.Errorf("%s: probe %d, %s refresh(es): the page was reloaded or not refreshed", name, probe, refreshes)
			}
			var live string
			p.Eval(`document.getElementById("live-status").dataset.state`, &live)
			if live != "live" {
				t.Errorf("%s: live status %q", name, live)
			}
		}
		for _, d := range dashtest.Compare(overview.Values(), wantPage(t, f, "overview", ""), true) {
			t.Errorf("overview after the move: %s", d)
		}
		for _, d := range dashtest.Compare(detail.Values(), wantPage(t, f, "submission", carol), true) {
			t.Errorf("submission after the move: %s", d)
		}
		overview.Screenshot("live-after")
		overview.CheckClean()
		detail.CheckClean()
	})
	t.Logf("browser tests took %v", time.Since(start).Round(time.Millisecond))
}
