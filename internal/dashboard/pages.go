package dashboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// What a malformed request is told. None of them repeats the request.
const (
	badID    = "bad submission id: want 64 lowercase hex digits"
	badRef   = "bad evidence ref: want DOMAIN:SHA256 (lowercase dotted words, a colon, 64 lowercase hex digits)"
	badQuery = "bad query string: the only parameter is state=NAME (lowercase letters and underscores)"
)

// validID reports whether s is a reservation id: 64 lowercase hex digits.
func validID(s string) (string, bool) {
	if len(s) != 64 {
		return "", false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return s, true
}

// validRef reports whether s is an evidence ref: a domain of lowercase
// dotted words (each starting with a letter; at most 128 bytes), a colon,
// and a digest (64 lowercase hex digits).
func validRef(s string) (string, bool) {
	domain, digest, ok := strings.Cut(s, ":")
	if !ok || len(domain) == 0 || len(domain) > 128 {
		return "", false
	}
	if _, ok := validID(digest); !ok {
		return "", false
	}
	for _, word := range strings.Split(domain, ".") {
		if word == "" || !('a' <= word[0] && word[0] <= 'z') {
			return "", false
		}
		for _, c := range []byte(word) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
				return "", false
			}
		}
	}
	return s, true
}

// validState reports whether s can be a queue state's name.
func validState(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// stateFilter reads the one query parameter the queue takes.
func stateFilter(r *http.Request) (string, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", false
	}
	vs, ok := q["state"]
	if !ok {
		return "", true
	}
	if len(vs) != 1 || !validState(vs[0]) {
		return "", false
	}
	return vs[0], true
}

// digest is what the live updates compare: the Overview's JSON without
// its Updated time, hashed.
func digest(o Overview) string {
	o.Updated = time.Time{}
	b, err := json.Marshal(o)
	if err != nil {
		return "unencodable"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// loadPages parses each page template with the layout.
func (s *server) loadPages() error {
	s.pages = map[string]*template.Template{}
	names, err := fs.Glob(assets, "assets/templates/page_*.html")
	if err != nil {
		return fmt.Errorf("dashboard: list templates: %w", err)
	}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "assets/templates/page_"), ".html")
		t, err := template.New("layout.html").Funcs(s.funcs()).ParseFS(assets,
			"assets/templates/layout.html", "assets/templates/plots.html", n)
		if err != nil {
			return fmt.Errorf("dashboard: parse %s: %w", n, err)
		}
		s.pages[name] = t
	}
	return nil
}

// page is what the layout renders.
type page struct {
	Site     string
	Title    string
	Nav      string
	Overview *Overview // nil on error pages
	Digest   string
	Rendered time.Time
	Body     any
}

// loader reads a page's own data: its title and the body its template
// renders.
type loader func(ctx context.Context) (title string, body any, err error)

// render writes page name. The Overview is read first, then the page's
// data: a change between the two reads makes the page newer than the
// digest it carries, so the next live event refreshes it again (never
// the other way round, which would leave a stale page marked current).
func (s *server) render(w http.ResponseWriter, r *http.Request, name string, load loader) {
	o, err := s.src.Overview(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("overview: %w", err))
		return
	}
	title, body, err := load(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := page{Site: s.opts.Title, Title: title, Nav: name, Overview: &o, Digest: digest(o), Rendered: s.opts.Now().UTC(), Body: body}
	s.write(w, r, http.StatusOK, name, p)
}

func (s *server) write(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		s.log.Error("dashboard: render", "page", name, "path", r.URL.Path, "err", err)
		plain(w, http.StatusInternalServerError, "internal error: the page could not be rendered")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// errorPage renders msg (the dashboard's own text) with its status.
func (s *server) errorPage(w http.ResponseWriter, r *http.Request, code int, msg string) {
	p := page{Site: s.opts.Title, Title: http.StatusText(code), Nav: "error", Rendered: s.opts.Now().UTC(),
		Body: struct {
			Code    int
			Message string
		}{code, msg}}
	s.write(w, r, code, "error", p)
}

func (s *server) overviewPage(w http.ResponseWriter, r *http.Request) {
	filter, ok := stateFilter(r)
	if !ok {
		s.bad(w, r, badQuery)
		return
	}
	s.render(w, r, "overview", func(ctx context.Context) (string, any, error) {
		subs, err := s.src.Submissions(ctx)
		if err != nil {
			return "", nil, fmt.Errorf("submissions: %w", err)
		}
		title := "Queue"
		if filter != "" {
			title = "Queue: " + filter
		}
		return title, overviewBody{Filter: filter, Submissions: filterState(subs, filter), Total: len(subs)}, nil
	})
}

// overviewBody is the overview page's own part.
type overviewBody struct {
	Filter      string
	Submissions []Submission
	Total       int
}

// filterState keeps the submissions in state (all when state is empty).
func filterState(subs []Submission, state string) []Submission {
	if state == "" {
		return subs
	}
	out := []Submission{}
	for _, sub := range subs {
		if sub.State == state {
			out = append(out, sub)
		}
	}
	return out
}

func (s *server) submissionPage(w http.ResponseWriter, r *http.Request) {
	id, ok := validID(r.PathValue("id"))
	if !ok {
		s.bad(w, r, badID)
		return
	}
	s.render(w, r, "submission", func(ctx context.Context) (string, any, error) {
		d, err := s.src.Submission(ctx, id)
		if err != nil {
			return "", nil, fmt.Errorf("submission %s: %w", id, err)
		}
		return "Submission " + short(id), d, nil
	})
}

// attemptBody is the attempt page's own part.
type attemptBody struct {
	AttemptDetail
	Plot ratePlot
}

func (s *server) attemptPage(w http.ResponseWriter, r *http.Request) {
	ref, ok := validRef(r.PathValue("ref"))
	if !ok {
		s.bad(w, r, badRef)
		return
	}
	s.render(w, r, "attempt", func(ctx context.Context) (string, any, error) {
		a, err := s.src.Attempt(ctx, ref)
		if err != nil {
			return "", nil, fmt.Errorf("attempt %s: %w", ref, err)
		}
		return fmt.Sprintf("Attempt %d", a.Number), attemptBody{AttemptDetail: a, Plot: newRatePlot(a.Reads)}, nil
	})
}

func (s *server) stacksPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, "stacks", func(ctx context.Context) (string, any, error) {
		st, err := s.src.Stacks(ctx)
		if err != nil {
			return "", nil, fmt.Errorf("stacks: %w", err)
		}
		return "Crowns and evaluation stacks", st, nil
	})
}

// weightsBody is the weights page's own part.
type weightsBody struct {
	Publications []WeightPublication
	Plot         weightPlot
}

func (s *server) weightsPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, "weights", func(ctx context.Context) (string, any, error) {
		pubs, err := s.src.Weights(ctx)
		if err != nil {
			return "", nil, fmt.Errorf("weights: %w", err)
		}
		return "Weights", weightsBody{Publications: pubs, Plot: newWeightPlot(pubs)}, nil
	})
}

func (s *server) journalPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, "journal", func(ctx context.Context) (string, any, error) {
		j, err := s.src.Journal(ctx)
		if err != nil {
			return "", nil, fmt.Errorf("journal: %w", err)
		}
		return "Settlement journal", j, nil
	})
}

// The JSON twins: the Source's values as they are.

func (s *server) apiOverview(w http.ResponseWriter, r *http.Request) {
	o, err := s.src.Overview(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("overview: %w", err))
		return
	}
	s.writeJSON(w, r, o)
}

func (s *server) apiSubmissions(w http.ResponseWriter, r *http.Request) {
	filter, ok := stateFilter(r)
	if !ok {
		s.bad(w, r, badQuery)
		return
	}
	subs, err := s.src.Submissions(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("submissions: %w", err))
		return
	}
	if subs == nil {
		subs = []Submission{}
	}
	s.writeJSON(w, r, filterState(subs, filter))
}

func (s *server) apiSubmission(w http.ResponseWriter, r *http.Request) {
	id, ok := validID(r.PathValue("id"))
	if !ok {
		s.bad(w, r, badID)
		return
	}
	d, err := s.src.Submission(r.Context(), id)
	if err != nil {
		s.fail(w, r, fmt.Errorf("submission %s: %w", id, err))
		return
	}
	s.writeJSON(w, r, d)
}

func (s *server) apiAttempt(w http.ResponseWriter, r *http.Request) {
	ref, ok := validRef(r.PathValue("ref"))
	if !ok {
		s.bad(w, r, badRef)
		return
	}
	a, err := s.src.Attempt(r.Context(), ref)
	if err != nil {
		s.fail(w, r, fmt.Errorf("attempt %s: %w", ref, err))
		return
	}
	s.writeJSON(w, r, a)
}

func (s *server) apiStacks(w http.ResponseWriter, r *http.Request) {
	st, err := s.src.Stacks(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("stacks: %w", err))
		return
	}
	if st == nil {
		st = []StackGeneration{}
	}
	s.writeJSON(w, r, st)
}

func (s *server) apiWeights(w http.ResponseWriter, r *http.Request) {
	pubs, err := s.src.Weights(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("weights: %w", err))
		return
	}
	if pubs == nil {
		pubs = []WeightPublication{}
	}
	s.writeJSON(w, r, pubs)
}

func (s *server) apiJournal(w http.ResponseWriter, r *http.Request) {
	j, err := s.src.Journal(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("journal: %w", err))
		return
	}
	s.writeJSON(w, r, j)
}

// apiCrowns lists the settled crowns as crown records (no page: the
// stacks page shows the crowns; this is for `cacheon integrate`'s side).
func (s *server) apiCrowns(w http.ResponseWriter, r *http.Request) {
	cs, err := s.src.CrownRecords(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("crowns: %w", err))
		return
	}
	if cs == nil {
		cs = []CrownRecord{}
	}
	s.writeJSON(w, r, cs)
}
