package dashtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// csp is the dashboard's policy (the dashboard package cannot be imported
// here: its own tests import this package).
const csp = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// pages are small documents under the policy: a clean one, and one for
// each kind of problem the harness must catch.
var pages = map[string]string{
	"/clean": `<!DOCTYPE html><html><head><link rel="icon" href="data:,"><script src="/live.js"></script></head>
<body><p data-k="answer">42</p><svg><circle data-k="dot" data-v="0.1" r="1"><title>dot</title></circle></svg></body></html>`,
	"/inline-script": `<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body><script>document.title = "ran"</script></body></html>`,
	"/inline-style":  `<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body><p style="color: red">red</p></body></html>`,
	"/console-error": `<!DOCTYPE html><html><head><link rel="icon" href="data:,"><script src="/error.js"></script></head><body></body></html>`,
	"/exception":     `<!DOCTYPE html><html><head><link rel="icon" href="data:,"><script src="/throw.js"></script></head><body></body></html>`,
	"/missing":       `<!DOCTYPE html><html><head><link rel="icon" href="data:,"><link rel="stylesheet" href="/nothing.css"></head><body></body></html>`,
}

var scripts = map[string]string{
	"/live.js":  `document.addEventListener("DOMContentLoaded", () => { document.body.dataset.live = "live"; });`,
	"/error.js": `console.error("something broke");`,
	"/throw.js": `throw new Error("uncaught");`,
}

func server(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		if body, ok := pages[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, body)
			return
		}
		if body, ok := scripts[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "text/javascript")
			io.WriteString(w, body)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHarness shows that the harness reads a clean page's figures and
// catches every kind of console problem, CSP violations included.
func TestHarness(t *testing.T) {
	srv := server(t) // closed after the browser (cleanups run last first)
	browser := Browser(t)

	t.Run("clean", func(t *testing.T) {
		p := CheckPage(t, browser, srv.URL+"/clean", "", map[string]string{"answer": "42", "dot": "0.1"}, true)
		if d := Compare(p.Values(), map[string]string{"answer": "41"}, false); len(d) != 1 {
			t.Errorf("Compare found %q, want one difference", d)
		}
	})
	for _, path := range []string{"/inline-script", "/inline-style", "/console-error", "/exception", "/missing"} {
		t.Run(path[1:], func(t *testing.T) {
			p := Open(t, browser, srv.URL+path)
			deadline := time.Now().Add(LiveTimeout)
			for len(p.Problems()) == 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if len(p.Problems()) == 0 {
				t.Fatalf("%s: no problem seen", path)
			}
			t.Logf("%s: %q", path, p.Problems())
		})
	}
}

// TestChromium: the browser is found through $CACHEON_CHROMIUM or PATH,
// and a missing one is an error only in CI or when required.
func TestChromium(t *testing.T) {
	t.Setenv("CACHEON_CHROMIUM", "/nonexistent/chromium")
	if _, err := Chromium(); err == nil {
		t.Error("a missing $CACHEON_CHROMIUM was found")
	}
	for _, tc := range []struct {
		ci, require string
		want        bool
	}{
		{"", "", false},
		{"true", "", true},
		{"", "1", true},
		{"", "0", false},
	} {
		t.Setenv("CI", tc.ci)
		t.Setenv("CACHEON_REQUIRE_CHROMIUM", tc.require)
		if got := required(); got != tc.want {
			t.Errorf("CI=%q CACHEON_REQUIRE_CHROMIUM=%q: required %v, want %v", tc.ci, tc.require, got, tc.want)
		}
	}
}
