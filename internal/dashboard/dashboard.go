// Package dashboard is the validator's read-only web UI: the queue by
// state, each submission's timeline, each attempt's reads and verdict, the
// crowns and evaluation stacks by generation, the weight publications and
// the settlement journal with its verification, plus /metrics and
// /healthz.
//
// It reads through a Source the validator node implements and can never
// change state: only GET and HEAD are served, no page has a form, and the
// Source has no method that writes. Pages are html/template renderings
// with their assets (CSS, one script, the icon) embedded in the binary;
// plots are inline SVG drawn on the server, every figure labelled with
// its exact value. Every page has a JSON twin under /api (and
// /api/crowns lists the settled crowns as the crown records `cacheon
// integrate` takes), and /api/stream
// (server-sent events) tells open pages when the Overview changed so that
// they refresh their live region without a reload.
package dashboard

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"
)

// assets holds the templates and the static files.
//
//go:embed assets
var assets embed.FS

// Options configures the dashboard. The zero value works.
type Options struct {
	// Title heads every page (default "Cacheon validator").
	Title string
	// Metrics is served at /metrics when not nil.
	Metrics http.Handler
	// Health answers /healthz: nil error is 200 "ok", an error 503 with
	// its text. Nil: always healthy.
	Health func(ctx context.Context) error
	// Now is the clock of the pages' "rendered at" (default time.Now).
	Now func() time.Time
	// Poll is how often a live stream reads the Overview (default 1s).
	Poll time.Duration
	// MaxStreams bounds the live streams open at once (default 32);
	// more are answered 503 and the browser retries.
	MaxStreams int
	// StreamLife ends a live stream after this long (default 10m); the
	// browser reconnects at once.
	StreamLife time.Duration
	// Logger receives the Source's errors (default: discarded).
	Logger *slog.Logger
}

// Bounds on requests.
const (
	// maxURL bounds the request target (path and query).
	maxURL = 2048
	// defaultPoll is Options.Poll's default.
	defaultPoll = time.Second
)

// contentSecurityPolicy forbids everything the pages do not need: no
// inline script or style, nothing from elsewhere, no framing, no forms.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// server is the dashboard's state: the options, the parsed templates and
// the static files by their content-addressed URL.
type server struct {
	src     Source
	opts    Options
	log     *slog.Logger
	pages   map[string]*template.Template
	static  map[string]staticFile // by URL path
	assetOf map[string]string     // file name → URL path
	streams chan struct{}         // one token per open stream
}

// staticFile is one embedded asset.
type staticFile struct {
	body        []byte
	contentType string
}

// New returns the dashboard's handler over src.
func New(src Source, opts Options) (http.Handler, error) {
	if src == nil {
		return nil, errors.New("dashboard: no source")
	}
	if opts.Title == "" {
		opts.Title = "Cacheon validator"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Poll <= 0 {
		opts.Poll = defaultPoll
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 32
	}
	if opts.StreamLife <= 0 {
		opts.StreamLife = 10 * time.Minute
	}
	s := &server{src: src, opts: opts, log: opts.Logger, streams: make(chan struct{}, opts.MaxStreams)}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := s.loadStatic(); err != nil {
		return nil, err
	}
	if err := s.loadPages(); err != nil {
		return nil, err
	}
	return s.guard(s.routes()), nil
}

// loadStatic reads the static files and names each by its content hash.
func (s *server) loadStatic() error {
	s.static, s.assetOf = map[string]staticFile{}, map[string]string{}
	entries, err := fs.ReadDir(assets, "assets/static")
	if err != nil {
		return fmt.Errorf("dashboard: read static assets: %w", err)
	}
	types := map[string]string{
		".css": "text/css; charset=utf-8",
		".js":  "text/javascript; charset=utf-8",
		".svg": "image/svg+xml",
	}
	for _, e := range entries {
		body, err := assets.ReadFile("assets/static/" + e.Name())
		if err != nil {
			return fmt.Errorf("dashboard: read %s: %w", e.Name(), err)
		}
		ct, ok := types[path.Ext(e.Name())]
		if !ok {
			return fmt.Errorf("dashboard: static asset %s: unknown type", e.Name())
		}
		sum := sha256.Sum256(body)
		url := "/static/" + hex.EncodeToString(sum[:8]) + "/" + e.Name()
		s.static[url] = staticFile{body: body, contentType: ct}
		s.assetOf[e.Name()] = url
	}
	return nil
}

// routes is every URL the dashboard answers.
func (s *server) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", s.overviewPage)
	m.HandleFunc("GET /submission/{id}", s.submissionPage)
	m.HandleFunc("GET /attempt/{ref}", s.attemptPage)
	m.HandleFunc("GET /stacks", s.stacksPage)
	m.HandleFunc("GET /weights", s.weightsPage)
	m.HandleFunc("GET /journal", s.journalPage)
	m.HandleFunc("GET /evidence/{ref}", s.evidence)

	m.HandleFunc("GET /api/overview", s.apiOverview)
	m.HandleFunc("GET /api/submissions", s.apiSubmissions)
	m.HandleFunc("GET /api/submission/{id}", s.apiSubmission)
	m.HandleFunc("GET /api/attempt/{ref}", s.apiAttempt)
	m.HandleFunc("GET /api/stacks", s.apiStacks)
	m.HandleFunc("GET /api/weights", s.apiWeights)
	m.HandleFunc("GET /api/journal", s.apiJournal)
	m.HandleFunc("GET /api/crowns", s.apiCrowns)
	m.HandleFunc("GET /api/stream", s.stream)

	m.HandleFunc("GET /static/{hash}/{name}", s.staticAsset)
	m.HandleFunc("GET /healthz", s.healthz)
	if s.opts.Metrics != nil {
		m.Handle("GET /metrics", s.opts.Metrics)
	}
	m.HandleFunc("/", s.notFound)
	return m
}

// guard sets the headers of every response and refuses what a read-only
// UI never takes: other methods, bodies, overlong URLs.
func (s *server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		switch {
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			h.Set("Allow", "GET, HEAD")
			plain(w, http.StatusMethodNotAllowed, "method not allowed: this dashboard only reads")
		case len(requestURI(r)) > maxURL:
			plain(w, http.StatusRequestURITooLong, "request URL too long")
		case r.ContentLength != 0 || len(r.TransferEncoding) > 0:
			h.Set("Connection", "close")
			plain(w, http.StatusRequestEntityTooLarge, "request bodies are not accepted")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// requestURI is the request target as sent (as rebuilt when a caller made
// the request itself).
func requestURI(r *http.Request) string {
	if r.RequestURI != "" {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

// plain writes a short plain-text answer. msg is always the dashboard's
// own text, never the request's.
func plain(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n")
}

// writeJSON answers v as JSON.
func (s *server) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		s.fail(w, r, fmt.Errorf("encode %s: %w", r.URL.Path, err))
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(append(body, '\n'))
}

// apiError answers an /api request's error as JSON.
func apiError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	body, _ := json.Marshal(map[string]string{"error": msg})
	w.Write(append(body, '\n'))
}

// fail answers a Source (or rendering) error: 404 for ErrNotFound, else
// 500 with a short message; the error itself goes only to the log.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := http.StatusInternalServerError, "internal error: the validator could not read its records (see its log)"
	switch {
	case errors.Is(err, ErrNotFound):
		code, msg = http.StatusNotFound, "not found"
	case r.Context().Err() != nil:
		return // the client went away
	default:
		s.log.Error("dashboard", "path", r.URL.Path, "err", err)
	}
	if isAPI(r) {
		apiError(w, code, msg)
		return
	}
	s.errorPage(w, r, code, msg)
}

// bad answers a malformed request (400).
func (s *server) bad(w http.ResponseWriter, r *http.Request, msg string) {
	if isAPI(r) {
		apiError(w, http.StatusBadRequest, msg)
		return
	}
	s.errorPage(w, r, http.StatusBadRequest, msg)
}

func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	if isAPI(r) {
		apiError(w, http.StatusNotFound, "not found")
		return
	}
	s.errorPage(w, r, http.StatusNotFound, "not found")
}

// staticAsset serves an embedded file under its content-addressed URL:
// it never changes, so it may be cached for good.
func (s *server) staticAsset(w http.ResponseWriter, r *http.Request) {
	f, ok := s.static[r.URL.Path]
	if !ok {
		s.notFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Write(f.body)
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.opts.Health != nil {
		if err := s.opts.Health(r.Context()); err != nil {
			plain(w, http.StatusServiceUnavailable, "unhealthy: "+err.Error())
			return
		}
	}
	plain(w, http.StatusOK, "ok")
}

// evidence serves a sealed evidence object as JSON. The bytes are the
// evidence store's, not the dashboard's: they are served as data
// (nosniff, attachment-safe type, a sandboxing policy), never as a page.
func (s *server) evidence(w http.ResponseWriter, r *http.Request) {
	ref, ok := validRef(r.PathValue("ref"))
	if !ok {
		s.bad(w, r, badRef)
		return
	}
	body, err := s.src.Evidence(r.Context(), ref)
	if err != nil {
		s.fail(w, r, fmt.Errorf("evidence %s: %w", ref, err))
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; sandbox; frame-ancestors 'none'")
	w.Write(body)
}
