package localchain

// The node's HTTP JSON API (docs/market.md, "Chain API").

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxRevealsPage caps the reveals one GET /v1/reveals returns; the client
// pages through longer answers.
const MaxRevealsPage = 1000

// maxRequestBody caps a request body (one signed extrinsic).
const maxRequestBody = MaxExtrinsicBytes

// apiError is the body of every non-2xx answer.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// NewHandler returns the HTTP API over c.
func NewHandler(c *Chain) http.Handler {
	s := &server{c: c}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/info", s.info)
	mux.HandleFunc("GET /v1/head", s.head)
	mux.HandleFunc("GET /v1/finalized", s.finalized)
	mux.HandleFunc("GET /v1/reveals", s.reveals)
	mux.HandleFunc("GET /v1/metagraph", s.metagraph)
	mux.HandleFunc("GET /v1/weights/{hotkey}", s.weights)
	mux.HandleFunc("GET /v1/accounts/{hotkey}", s.account)
	mux.HandleFunc("GET /v1/commitments/{digest}", s.commitment)
	mux.HandleFunc("GET /v1/extrinsics/{id}", s.extrinsic)
	mux.HandleFunc("POST /v1/extrinsics", s.submit)
	mux.HandleFunc("GET /v1/blocks/{number}", s.block)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, refuse(CodeNotFound, fmt.Errorf("%s %s: no such endpoint", r.Method, r.URL.Path)))
	})
	return mux
}

// Serve answers the API on ln until ctx ends, then shuts down gracefully
// (in-flight requests get up to five seconds).
func Serve(ctx context.Context, ln net.Listener, c *Chain) error {
	srv := &http.Server{
		Handler:           NewHandler(c),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve chain API: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down chain API: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve chain API: %w", err)
	}
	return nil
}

type server struct{ c *Chain }

func writeJSONBody(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var r *RefusedError
	if errors.As(err, &r) {
		writeJSONBody(w, httpStatus(r.Code), apiError{Error: err.Error(), Code: r.Code})
		return
	}
	writeJSONBody(w, http.StatusInternalServerError, apiError{Error: err.Error(), Code: "internal"})
}

func answer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSONBody(w, http.StatusOK, v)
}

// noQuery refuses query parameters on endpoints that take none.
func noQuery(r *http.Request) error {
	if r.URL.RawQuery != "" {
		return refuse(CodeMalformed, fmt.Errorf("%s takes no query parameters", r.URL.Path))
	}
	return nil
}

func (s *server) info(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		writeError(w, err)
		return
	}
	v, err := s.c.Info(r.Context())
	answer(w, v, err)
}

func (s *server) head(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		writeError(w, err)
		return
	}
	v, err := s.c.Head(r.Context())
	answer(w, v, err)
}

func (s *server) finalized(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		writeError(w, err)
		return
	}
	v, err := s.c.Finalized(r.Context())
	answer(w, v, err)
}

// revealsQuery is GET /v1/reveals's query: after_block, after_index,
// up_to (required) and limit (1..MaxRevealsPage, default the maximum).
type revealsQuery struct {
	AfterBlock uint64
	AfterIndex uint32
	UpTo       uint64
	Limit      int
}

// parseRevealsQuery strictly parses the reveals query: known keys only,
// each at most once, decimal integers in range.
func parseRevealsQuery(raw string) (revealsQuery, error) {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return revealsQuery{}, fmt.Errorf("reveals: query: %w", err)
	}
	q := revealsQuery{Limit: MaxRevealsPage}
	seen := false
	for k, vs := range vals {
		if len(vs) != 1 {
			return revealsQuery{}, fmt.Errorf("reveals: query key %q given %d times", clip(k), len(vs))
		}
		v := vs[0]
		var n uint64
		switch k {
		case "after_block", "up_to":
			n, err = strconv.ParseUint(v, 10, 63)
		case "after_index":
			n, err = strconv.ParseUint(v, 10, 32)
		case "limit":
			n, err = strconv.ParseUint(v, 10, 31)
			if err == nil && (n < 1 || n > MaxRevealsPage) {
				err = fmt.Errorf("want 1 to %d", MaxRevealsPage)
			}
		default:
			return revealsQuery{}, fmt.Errorf("reveals: unknown query key %q (want after_block, after_index, up_to, limit)", clip(k))
		}
		if err != nil || strconv.FormatUint(n, 10) != v {
			if err == nil {
				err = errors.New("not a canonical decimal")
			}
			return revealsQuery{}, fmt.Errorf("reveals: %s=%q: %v", k, clip(v), err)
		}
		switch k {
		case "after_block":
			q.AfterBlock = n
		case "after_index":
			q.AfterIndex = uint32(n)
		case "up_to":
			q.UpTo, seen = n, true
		case "limit":
			q.Limit = int(n)
		}
	}
	if !seen {
		return revealsQuery{}, errors.New("reveals: up_to is required (at most the finalized head)")
	}
	return q, nil
}

func (s *server) reveals(w http.ResponseWriter, r *http.Request) {
	q, err := parseRevealsQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, refuse(CodeMalformed, err))
		return
	}
	v, err := s.c.Reveals(r.Context(), posOf(q), q.UpTo, q.Limit)
	answer(w, v, err)
}

func (s *server) metagraph(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		writeError(w, err)
		return
	}
	v, err := s.c.Metagraph(r.Context())
	answer(w, v, err)
}

func (s *server) weights(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		writeError(w, err)
		return
	}
	v, err := s.c.Weights(r.Context(), r.PathValue("hotkey"))
	answer(w, v, err)
}

func (s *server) account(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		writeError(w, err)
		return
	}
	v, err := s.c.Account(r.Context(), r.PathValue("hotkey"))
	answer(w, v, err)
}

func (s *server) commitment(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		writeError(w, err)
		return
	}
	v, err := s.c.Commitment(r.Context(), r.PathValue("digest"))
	answer(w, v, err)
}

func (s *server) extrinsic(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		writeError(w, err)
		return
	}
	v, err := s.c.Extrinsic(r.Context(), r.PathValue("id"))
	answer(w, v, err)
}

func (s *server) block(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		writeError(w, err)
		return
	}
	raw := r.PathValue("number")
	n, err := strconv.ParseUint(raw, 10, 63)
	if err != nil || strconv.FormatUint(n, 10) != raw {
		writeError(w, refuse(CodeMalformed, fmt.Errorf("block %q: want a decimal block number", clip(raw))))
		return
	}
	v, err := s.c.Block(r.Context(), n)
	answer(w, v, err)
}

func (s *server) submit(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		writeError(w, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeJSONBody(w, http.StatusRequestEntityTooLarge, apiError{
				Error: fmt.Sprintf("extrinsic: the body exceeds the %d-byte cap", maxRequestBody), Code: CodeMalformed})
			return
		}
		writeError(w, refuse(CodeMalformed, fmt.Errorf("extrinsic: read body: %w", err)))
		return
	}
	x, err := ParseExtrinsic(body)
	if err != nil {
		writeError(w, refuse(codeOf(err), err))
		return
	}
	rc, err := s.c.Submit(r.Context(), x)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSONBody(w, http.StatusAccepted, rc)
}
