package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cacheon/internal/dashboard/dashtest"
)

// handler is the dashboard over f with a fixed clock.
func handler(t testing.TB, f *fake, opts Options) http.Handler {
	t.Helper()
	if opts.Now == nil {
		opts.Now = func() time.Time { return t0.Add(time.Hour) }
	}
	h, err := New(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// get sends one request to h.
func get(h http.Handler, method, target string, body io.Reader) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, body)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// checkHeaders holds every response to the security headers; live data
// must never be cached. A static asset (200) is cached for good; served
// evidence (200) has a stricter policy still.
func checkHeaders(t *testing.T, target string, w *httptest.ResponseRecorder) {
	t.Helper()
	h := w.Result().Header
	for k, want := range map[string]string{
		"Content-Security-Policy": contentSecurityPolicy,
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
		"Cache-Control":           "no-store",
	} {
		ok := w.Code == http.StatusOK
		if ok && strings.HasPrefix(target, "/static/") && k == "Cache-Control" {
			want = "public, max-age=31536000, immutable"
		}
		if ok && strings.HasPrefix(target, "/evidence/") && k == "Content-Security-Policy" {
			want = "default-src 'none'; sandbox; frame-ancestors 'none'"
		}
		if got := h.Get(k); got != want {
			t.Errorf("%s: %s: %q, want %q", target, k, got, want)
		}
	}
	if h.Get("Content-Type") == "" {
		t.Errorf("%s: no Content-Type", target)
	}
}

// pageCases are the pages of the fake, with what wantPage needs.
func pageCases() []struct{ path, page, arg string } {
	return []struct{ path, page, arg string }{
		{"/", "overview", ""},
		{"/?state=promoted", "overview", "promoted"},
		{"/?state=nothing_here", "overview", "nothing_here"},
		{"/?unrelated=1", "overview", ""},
		{"/submission/" + hexOf("alice"), "submission", hexOf("alice")},
		{"/submission/" + hexOf("carol"), "submission", hexOf("carol")},
		{"/submission/" + hexOf("bob"), "submission", hexOf("bob")},
		{"/attempt/" + refOf("cacheon.referee.attempt", "a1"), "attempt", refOf("cacheon.referee.attempt", "a1")},
		{"/attempt/" + refOf("cacheon.referee.attempt", "d1"), "attempt", refOf("cacheon.referee.attempt", "d1")},
		{"/stacks", "stacks", ""},
		{"/weights", "weights", ""},
		{"/journal", "journal", ""},
	}
}

// TestPages renders every page and compares every figure it shows with
// the fake's.
func TestPages(t *testing.T) {
	f := newFake()
	h := handler(t, f, Options{})
	for _, tc := range pageCases() {
		t.Run(tc.path, func(t *testing.T) {
			w := get(h, "GET", tc.path, nil)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			checkHeaders(t, tc.path, w)
			if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			body := w.Body.String()
			for _, d := range dashtest.Compare(htmlValues(t, body), wantPage(t, f, tc.page, tc.arg), true) {
				t.Error(d)
			}
			o, _ := f.Overview(context.Background())
			if !strings.Contains(body, `data-digest="`+digest(o)+`"`) {
				t.Error("the page does not carry the overview's digest")
			}
			for _, bad := range []string{"<script>alert", "<svg onload", `href="javascript:`, "ZgotmplZ", "style="} {
				if strings.Contains(body, bad) {
					t.Errorf("page contains %q", bad)
				}
			}
			if regexp.MustCompile(`<script>`).MatchString(body) {
				t.Error("page has an inline script")
			}
		})
	}
}

// TestAPI checks that every JSON twin is the fake's value.
func TestAPI(t *testing.T) {
	f := newFake()
	h := handler(t, f, Options{})
	ctx := context.Background()
	a1 := refOf("cacheon.referee.attempt", "a1")
	overview, _ := f.Overview(ctx)
	subs, _ := f.Submissions(ctx)
	detail, _ := f.Submission(ctx, hexOf("alice"))
	attempt, _ := f.Attempt(ctx, a1)
	stacks, _ := f.Stacks(ctx)
	journal, _ := f.Journal(ctx)
	weights, _ := f.Weights(ctx)
	crowns, _ := f.CrownRecords(ctx)
	for _, tc := range []struct {
		path string
		want any
	}{
		{"/api/overview", overview},
		{"/api/submissions", subs},
		{"/api/submissions?state=failed", subs[1:2]},
		{"/api/submission/" + hexOf("alice"), detail},
		{"/api/attempt/" + a1, attempt},
		{"/api/stacks", stacks},
		{"/api/journal", journal},
		{"/api/weights", weights},
		{"/api/crowns", crowns},
	} {
		t.Run(tc.path, func(t *testing.T) {
			w := get(h, "GET", tc.path, nil)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			checkHeaders(t, tc.path, w)
			if ct := w.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			got := reflect.New(reflect.TypeOf(tc.want))
			dec := json.NewDecoder(w.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(got.Interface()); err != nil {
				t.Fatal(err)
			}
			if cs, ok := got.Interface().(*[]CrownRecord); ok {
				// A record is served indented; its bytes compact back.
				for i := range *cs {
					var b bytes.Buffer
					if err := json.Compact(&b, (*cs)[i].Record); err != nil {
						t.Fatal(err)
					}
					(*cs)[i].Record = b.Bytes()
				}
			}
			if !reflect.DeepEqual(got.Elem().Interface(), tc.want) {
				t.Errorf("got %+v\nwant %+v", got.Elem().Interface(), tc.want)
			}
		})
	}
}

// TestBadInput sends malformed, hostile and unknown ids, refs, queries
// and URLs: each is refused with a short message that never repeats it.
func TestBadInput(t *testing.T) {
	f := newFake()
	h := handler(t, f, Options{})
	unknownRef := refOf("cacheon.referee.attempt", "nobody")
	for _, tc := range []struct {
		target string
		code   int
	}{
		{"/submission/abc", 400},
		{"/submission/" + strings.ToUpper(hexOf("alice")), 400},
		{"/submission/" + hexOf("alice") + "0", 400},
		{"/submission/%3Cscript%3Ealert(1)%3C%2Fscript%3E", 400},
		{"/submission/%22%3E%3Csvg%20onload=alert(1)%3E", 400},
		{"/submission/%00", 400},
		{"/submission/" + hexOf("alice")[:63] + "%00", 400},
		{"/submission/..%2f..%2fetc%2fpasswd", 400},
		{"/submission/" + hexOf("nobody"), 404},
		{"/attempt/" + hexOf("a1"), 400},
		{"/attempt/Cacheon.referee:" + hexOf("a1"), 400},
		{"/attempt/cacheon..referee:" + hexOf("a1"), 400},
		{"/attempt/1cacheon:" + hexOf("a1"), 400},
		{"/attempt/cacheon.referee.attempt:" + hexOf("a1")[:10], 400},
		{"/attempt/cacheon.referee.attempt:%3Cscript%3E", 400},
		{"/attempt/" + strings.Repeat("a", 129) + ":" + hexOf("a1"), 400},
		{"/attempt/" + unknownRef, 404},
		{"/evidence/%3Cimg%20src=x%3E", 400},
		{"/evidence/" + unknownRef, 404},
		{"/api/submission/abc", 400},
		{"/api/submission/" + hexOf("nobody"), 404},
		{"/api/attempt/x:y", 400},
		{"/api/attempt/" + unknownRef, 404},
		{"/?state=%3Cscript%3E", 400},
		{"/?state=promoted&state=failed", 400},
		{"/?state=", 400},
		{"/?%zz", 400},
		{"/api/submissions?state=%22%3E%3Csvg%3E", 400},
		{"/submission/" + strings.Repeat("a", 3000), 414},
		{"/?state=" + strings.Repeat("a", 3000), 414},
		{"/nowhere%3Cscript%3E", 404},
		{"/api/nowhere", 404},
		{"/static/0123456789abcdef/live.js", 404},
		{"/submission/", 404},
	} {
		t.Run(tc.target[:min(len(tc.target), 60)], func(t *testing.T) {
			w := get(h, "GET", tc.target, nil)
			if w.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.code, w.Body)
			}
			checkHeaders(t, tc.target, w)
			body := w.Body.String()
			for _, bad := range []string{"<script>", "<svg", "<img", "alert(", "\x00", "passwd", "zz", strings.Repeat("a", 100)} {
				if strings.Contains(body, bad) {
					t.Errorf("the answer repeats %q: %s", bad, body)
				}
			}
			if strings.HasPrefix(tc.target, "/api/") {
				var e struct{ Error string }
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" {
					t.Errorf("API error is not {\"error\": …}: %s", body)
				}
			}
		})
	}
}

// TestReadOnly refuses every method but GET and HEAD, and every body.
func TestReadOnly(t *testing.T) {
	h := handler(t, newFake(), Options{})
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
		for _, target := range []string{"/", "/api/overview", "/api/stream", "/submission/" + hexOf("alice"), "/healthz", "/nowhere"} {
			w := get(h, method, target, strings.NewReader("x=1"))
			if w.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: status %d, want 405", method, target, w.Code)
			}
			if got := w.Header().Get("Allow"); got != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q", method, target, got)
			}
			checkHeaders(t, target, w)
		}
	}
	w := get(h, "GET", "/", strings.NewReader(strings.Repeat("x", 10<<10)))
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("GET with a body: status %d, want 413", w.Code)
	}
	r := httptest.NewRequest("GET", "/", strings.NewReader("x"))
	r.ContentLength, r.TransferEncoding = -1, []string{"chunked"}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("GET with a chunked body: status %d, want 413", rec.Code)
	}
	w = get(h, "HEAD", "/", nil)
	if w.Code != http.StatusOK {
		t.Errorf("HEAD /: status %d", w.Code)
	}
	checkHeaders(t, "/", w)
}

// TestSourceErrors: a failing Source is a 500 that says nothing of the
// error, which goes to the log; a missing object is a 404.
func TestSourceErrors(t *testing.T) {
	f := newFake()
	var logged bytes.Buffer
	h := handler(t, f, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	f.fail(errors.New("open /var/lib/cacheon/secret.db: permission denied"))
	for _, target := range []string{"/", "/stacks", "/weights", "/journal", "/submission/" + hexOf("alice"),
		"/attempt/" + refOf("cacheon.referee.attempt", "a1"), "/evidence/" + refOf("cacheon.referee.attempt", "a1"),
		"/api/overview", "/api/submissions", "/api/stacks", "/api/weights", "/api/journal", "/api/crowns"} {
		w := get(h, "GET", target, nil)
		if w.Code != http.StatusInternalServerError {
			t.Errorf("%s: status %d, want 500", target, w.Code)
		}
		checkHeaders(t, target, w)
		if strings.Contains(w.Body.String(), "secret") {
			t.Errorf("%s: the answer leaks the error: %s", target, w.Body)
		}
	}
	if !strings.Contains(logged.String(), "secret.db") {
		t.Errorf("the error was not logged: %q", logged.String())
	}
	f.fail(ErrNotFound)
	if w := get(h, "GET", "/stacks", nil); w.Code != http.StatusNotFound {
		t.Errorf("ErrNotFound: status %d, want 404", w.Code)
	}
}

// TestEvidence serves sealed evidence as JSON data, never as a page.
func TestEvidence(t *testing.T) {
	f := newFake()
	h := handler(t, f, Options{})
	ref := refOf("cacheon.referee.attempt", "a1")
	target := "/evidence/" + ref
	w := get(h, "GET", target, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	checkHeaders(t, target, w)
	if ct := w.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if !bytes.Equal(w.Body.Bytes(), f.evidence[ref]) {
		t.Errorf("body %q, want the stored bytes", w.Body)
	}
}

// TestStatic serves every asset the layout names, cacheable for good.
func TestStatic(t *testing.T) {
	h := handler(t, newFake(), Options{})
	body := get(h, "GET", "/", nil).Body.String()
	urls := regexp.MustCompile(`(?:href|src)="(/static/[0-9a-f]{16}/[a-z.]+)"`).FindAllStringSubmatch(body, -1)
	if len(urls) != 3 {
		t.Fatalf("%d static assets named, want 3 (icon, style, script)", len(urls))
	}
	for _, m := range urls {
		w := get(h, "GET", m[1], nil)
		if w.Code != http.StatusOK || w.Body.Len() == 0 {
			t.Errorf("%s: status %d, %d bytes", m[1], w.Code, w.Body.Len())
		}
		checkHeaders(t, m[1], w)
	}
}

// TestHealthAndMetrics: /healthz follows Options.Health; /metrics is the
// given handler, and absent without one.
func TestHealthAndMetrics(t *testing.T) {
	f := newFake()
	var unhealthy error
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, "cacheon_queue 4\n")
	})
	h := handler(t, f, Options{Metrics: metrics, Health: func(context.Context) error { return unhealthy }})
	for _, tc := range []struct {
		target string
		err    error
		code   int
		body   string
	}{
		{"/healthz", nil, 200, "ok\n"},
		{"/healthz", errors.New("store unreachable"), 503, "unhealthy: store unreachable\n"},
		{"/metrics", nil, 200, "cacheon_queue 4\n"},
	} {
		unhealthy = tc.err
		w := get(h, "GET", tc.target, nil)
		if w.Code != tc.code || w.Body.String() != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.target, w.Code, w.Body, tc.code, tc.body)
		}
		checkHeaders(t, tc.target, w)
	}
	bare := handler(t, f, Options{})
	if w := get(bare, "GET", "/metrics", nil); w.Code != http.StatusNotFound {
		t.Errorf("/metrics without a handler: %d, want 404", w.Code)
	}
	if w := get(bare, "GET", "/healthz", nil); w.Code != http.StatusOK {
		t.Errorf("/healthz without a check: %d, want 200", w.Code)
	}
}

func TestNewWithoutSource(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil) did not fail")
	}
}

func TestValid(t *testing.T) {
	id := hexOf("x")
	for _, tc := range []struct {
		s           string
		isID, isRef bool
		isState     bool
		name        string
	}{
		{s: id, isID: true, name: "id"},
		{s: "cacheon.referee.attempt:" + id, isRef: true, name: "ref"},
		{s: "a:" + id, isRef: true, name: "one-letter domain"},
		{s: "a_1.b2:" + id, isRef: true, name: "digits and underscores"},
		{s: ":" + id, name: "no domain"},
		{s: "a.:" + id, name: "empty word"},
		{s: "_a:" + id, name: "word starting with _"},
		{s: "a:" + id + ":" + id, name: "two colons"},
		{s: "a:" + strings.ToUpper(id), name: "upper-case digest"},
		{s: "promoted", isState: true, name: "state"},
		{s: "reproduction_pending", isState: true, name: "state with _"},
		{s: "Promoted", name: "upper-case state"},
		{s: strings.Repeat("a", 33), name: "long state"},
	} {
		_, isID := validID(tc.s)
		_, isRef := validRef(tc.s)
		if isID != tc.isID || isRef != tc.isRef || validState(tc.s) != tc.isState {
			t.Errorf("%s: id %v ref %v state %v, want %v %v %v", tc.name, isID, isRef, validState(tc.s), tc.isID, tc.isRef, tc.isState)
		}
	}
}

// recorder is a Source that records which methods were called.
type recorder struct {
	Source
	mu    sync.Mutex
	calls []string
}

func (r *recorder) note(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, name)
}

func (r *recorder) Overview(ctx context.Context) (Overview, error) {
	r.note("Overview")
	return r.Source.Overview(ctx)
}

func (r *recorder) Submissions(ctx context.Context) ([]Submission, error) {
	r.note("Submissions")
	return r.Source.Submissions(ctx)
}

func (r *recorder) Submission(ctx context.Context, id string) (SubmissionDetail, error) {
	r.note("Submission")
	return r.Source.Submission(ctx, id)
}

func (r *recorder) Attempt(ctx context.Context, ref string) (AttemptDetail, error) {
	r.note("Attempt")
	return r.Source.Attempt(ctx, ref)
}

func (r *recorder) Evidence(ctx context.Context, ref string) ([]byte, error) {
	r.note("Evidence")
	return r.Source.Evidence(ctx, ref)
}

// TestReads: a page reads the Overview before its own data (so the digest
// it carries is never newer than what it shows), and malformed input
// never reaches the Source.
func TestReads(t *testing.T) {
	for _, tc := range []struct {
		target string
		calls  []string
	}{
		{"/", []string{"Overview", "Submissions"}},
		{"/submission/" + hexOf("alice"), []string{"Overview", "Submission"}},
		{"/attempt/" + refOf("cacheon.referee.attempt", "a1"), []string{"Overview", "Attempt"}},
		{"/submission/bad", nil},
		{"/attempt/bad", nil},
		{"/evidence/bad", nil},
		{"/api/submission/bad", nil},
		{"/api/attempt/bad:" + hexOf("x"), []string{"Attempt"}},
		{"/api/attempt/bad", nil},
		{"/?state=%3C", nil},
		{"/api/submissions?state=%3C", nil},
	} {
		rec := &recorder{Source: newFake()}
		h, err := New(rec, Options{})
		if err != nil {
			t.Fatal(err)
		}
		get(h, "GET", tc.target, nil)
		if !slices.Equal(rec.calls, tc.calls) {
			t.Errorf("%s: calls %q, want %q", tc.target, rec.calls, tc.calls)
		}
	}
}
