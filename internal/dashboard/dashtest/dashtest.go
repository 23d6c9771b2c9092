// Package dashtest drives the dashboard in a real browser for tests:
// headless Chromium (Debian's chromium package, or $CACHEON_CHROMIUM)
// through the DevTools protocol with chromedp. It is test support: only
// tests import it, and the cacheon binary never links it.
//
// Browser starts one browser for a test; Open opens a page in a new tab
// and records every console error, uncaught exception and Content
// Security Policy violation of that tab; CheckPage opens a dashboard page
// and checks that it rendered, that its live stream connected, that the
// figures it shows equal the wanted ones, and that the console stayed
// clean. Every figure the dashboard shows carries a data-k key (and, for
// plot marks, its exact value in data-v), which Page.Values reads.
package dashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Timeouts of the browser steps; generous, for a loaded two-core machine.
const (
	startTimeout = 60 * time.Second
	stepTimeout  = 30 * time.Second
	// LiveTimeout bounds how long a live update may take to show.
	LiveTimeout = 15 * time.Second
)

// Chromium finds the browser: $CACHEON_CHROMIUM if set, else chromium
// (Debian's package) on PATH.
func Chromium() (string, error) {
	if p := os.Getenv("CACHEON_CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("CACHEON_CHROMIUM=%s: %w", p, err)
		}
		return path, nil
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		return "", fmt.Errorf("no chromium on PATH: %w", err)
	}
	return path, nil
}

// required reports whether a missing browser fails the test rather than
// skipping it: in CI ($CI set) or when CACHEON_REQUIRE_CHROMIUM=1.
func required() bool {
	return os.Getenv("CI") != "" || os.Getenv("CACHEON_REQUIRE_CHROMIUM") == "1"
}

// Browser starts headless Chromium for t and returns the browser's
// context; Open makes tabs in it. The browser is stopped when the test
// ends. Without Chromium the test is skipped (saying why), or fails in CI
// and with CACHEON_REQUIRE_CHROMIUM=1.
func Browser(t testing.TB) context.Context {
	t.Helper()
	path, err := Chromium()
	if err != nil {
		if required() {
			t.Fatalf("dashtest: %v (scripts/ensure-chromium installs Debian's chromium)", err)
		}
		t.Skipf("dashtest: skipping the browser test: %v (install Debian's chromium with scripts/ensure-chromium, or set CACHEON_CHROMIUM)", err)
	}
	var out syncBuffer
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Flag("headless", "new"),
		chromedp.DisableGPU,
		// --no-sandbox: tests run as root in containers, where Chromium's
		// sandbox cannot start. Acceptable only for this test browser,
		// which loads nothing but the test's own loopback server; never
		// run a browser for real use this way.
		chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(&out),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first action starts the browser, which lives as long as the
	// context of that action: so no deadline on it, a timer instead.
	timer := time.AfterFunc(startTimeout, cancel)
	err = chromedp.Do(ctx)
	if !timer.Stop() {
		err = fmt.Errorf("not started within %v: %w", startTimeout, err)
	}
	if err != nil {
		t.Fatalf("dashtest: start %s: %v\n%s", path, err, out.String())
	}
	return ctx
}

// syncBuffer collects the browser's output for a failure message.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Page is one tab of the browser with its console watched.
type Page struct {
	t   testing.TB
	ctx context.Context // the tab
	URL string

	mu       sync.Mutex
	problems []string
}

// Open opens url in a new tab of browser, failing t unless it loads with
// status 200. The tab is closed when the test ends.
func Open(t testing.TB, browser context.Context, url string) *Page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	// The tab lives as long as the context of its first action.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		t.Fatalf("dashtest: open a tab: %v", err)
	}
	p := &Page{t: t, ctx: ctx, URL: url}
	watch, stopWatch := context.WithCancel(ctx)
	messages := chromedp.Console(watch)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if problem(m) {
				p.mu.Lock()
				p.problems = append(p.problems, fmt.Sprintf("%s (%s:%d)", m.String(), m.URL, m.Line+1))
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		stopWatch()
		<-done
		cancel()
	})
	stepCtx, cancelStep := context.WithTimeout(ctx, stepTimeout)
	defer cancelStep()
	resp, err := chromedp.Run(stepCtx, chromedp.NavigateResponse(url))
	if err != nil {
		t.Fatalf("dashtest: open %s: %v", url, err)
	}
	if resp == nil || resp.Status != 200 {
		status := int64(0)
		if resp != nil {
			status = resp.Status
		}
		t.Fatalf("dashtest: open %s: status %d, want 200", url, status)
	}
	return p
}

// problem reports whether a console message is one a page must never
// cause: an error (console.error, a failed load, a CSP violation, which
// Chromium reports as an error), an uncaught exception, or anything
// naming the Content Security Policy.
func problem(m chromedp.ConsoleMessage) bool {
	switch {
	case m.Type == chromedp.ConsoleError, m.IsException():
		return true
	case m.Source == "security",
		strings.Contains(m.Text, "Content Security Policy"),
		strings.Contains(m.Text, "Content-Security-Policy"):
		return true
	}
	return false
}

// Context is the tab's context, for chromedp actions of the caller's own.
func (p *Page) Context() context.Context { return p.ctx }

// Problems are the console errors, exceptions and CSP violations seen in
// the tab so far.
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.problems)
}

// CheckClean fails t if the tab logged any problem. Console messages
// arrive asynchronously: it first lets the page settle briefly.
func (p *Page) CheckClean() {
	p.t.Helper()
	// A round trip to the page: messages sent before it have arrived.
	p.Eval(`1`, new(int))
	time.Sleep(100 * time.Millisecond)
	for _, m := range p.Problems() {
		p.t.Errorf("dashtest: %s: console: %s", p.URL, m)
	}
}

// Eval evaluates a JavaScript expression in the page into out.
func (p *Page) Eval(expr string, out any) {
	p.t.Helper()
	if err := p.eval(expr, out); err != nil {
		p.t.Fatalf("dashtest: %s: eval %q: %v", p.URL, expr, err)
	}
}

func (p *Page) eval(expr string, out any) error {
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// WaitFor waits until the JavaScript expression cond is true in the page,
// failing t after timeout.
func (p *Page) WaitFor(cond string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		err := p.eval("Boolean("+cond+")", &ok)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("dashtest: %s: %s not true after %v (last error: %v)", p.URL, cond, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// valuesJS reads every data-k element: its data-v if it has one, else its
// text; and the keys seen more than once.
const valuesJS = `(() => {
  const values = {}, dup = [];
  for (const e of document.querySelectorAll("[data-k]")) {
    const k = e.dataset.k;
    if (k in values) dup.push(k);
    values[k] = e.hasAttribute("data-v") ? e.dataset.v : e.textContent.trim();
  }
  return {values, dup};
})()`

// Values reads the figures the page shows, by their data-k key. A key
// shown twice fails t.
func (p *Page) Values() map[string]string {
	p.t.Helper()
	var got struct {
		Values map[string]string `json:"values"`
		Dup    []string          `json:"dup"`
	}
	p.Eval(valuesJS, &got)
	if len(got.Dup) > 0 {
		p.t.Errorf("dashtest: %s: keys shown more than once: %q", p.URL, got.Dup)
	}
	return got.Values
}

// Compare lists how got differs from want: missing and different keys,
// and, when exact, keys want does not have.
func Compare(got, want map[string]string, exact bool) []string {
	var diffs []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: missing, want %q", k, w))
		case g != w:
			diffs = append(diffs, fmt.Sprintf("%s: %q, want %q", k, g, w))
		}
	}
	if exact {
		for k, g := range got {
			if _, ok := want[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s: %q shown, not wanted", k, g))
			}
		}
	}
	slices.Sort(diffs)
	return diffs
}

// Screenshot writes a full-page PNG of the tab when
// $CACHEON_DASHBOARD_SCREENSHOT names a file: to that path for name "",
// else next to it with "-name" before the extension. Unset: nothing.
func (p *Page) Screenshot(name string) {
	p.t.Helper()
	path := os.Getenv("CACHEON_DASHBOARD_SCREENSHOT")
	if path == "" {
		return
	}
	if name != "" {
		ext := filepath.Ext(path)
		path = strings.TrimSuffix(path, ext) + "-" + name + ext
	}
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("dashtest: screenshot of %s: %v", p.URL, err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatalf("dashtest: %v", err)
	}
	p.t.Logf("dashtest: screenshot of %s in %s", p.URL, path)
}

// CheckPage opens a dashboard page at url and checks it: status 200, the
// live stream connected (the page's status says "live"), every key of
// want shown with its value (exact: and no other key), a clean console.
// It writes the screenshot named name (see Page.Screenshot) and returns
// the page, still open, for further steps.
func CheckPage(t testing.TB, browser context.Context, url, name string, want map[string]string, exact bool) *Page {
	t.Helper()
	p := Open(t, browser, url)
	p.WaitFor(`document.body.dataset.live === "live"`, LiveTimeout)
	for _, d := range Compare(p.Values(), want, exact) {
		t.Errorf("dashtest: %s: %s", url, d)
	}
	p.Screenshot(name)
	p.CheckClean()
	return p
}
