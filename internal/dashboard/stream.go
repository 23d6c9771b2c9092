package dashboard

import (
	"fmt"
	"net/http"
	"time"
)

// keepAliveEvery is how often an idle stream sends a comment, so that
// proxies and the browser keep the connection.
const keepAliveEvery = 15 * time.Second

// stream is /api/stream: server-sent events. It reads the Overview every
// Options.Poll and sends an "overview" event, whose data is the
// Overview's digest, at once and then whenever the digest changes. An
// open page compares it with the digest it was rendered with and, when
// they differ, refreshes its live region. The stream ends after
// Options.StreamLife (the browser reconnects) or when the client leaves.
func (s *server) stream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		apiError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		w.Header().Set("Retry-After", "5")
		apiError(w, http.StatusServiceUnavailable, "too many live streams")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// retry: how long the browser waits before reconnecting.
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", max(int64(s.opts.Poll/time.Millisecond), 500)); err != nil {
		return
	}
	flusher.Flush()

	ctx := r.Context()
	end := time.NewTimer(s.opts.StreamLife)
	defer end.Stop()
	poll := time.NewTicker(s.opts.Poll)
	defer poll.Stop()
	var last string
	var failing bool
	quiet := time.Now()
	for {
		o, err := s.src.Overview(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				s.log.Error("dashboard: live stream", "err", err)
			}
			failing = true
		default:
			failing = false
			if d := digest(o); d != last {
				last = d
				if _, err := fmt.Fprintf(w, "event: overview\ndata: %s\n\n", d); err != nil {
					return
				}
				flusher.Flush()
				quiet = time.Now()
			}
		}
		if time.Since(quiet) >= keepAliveEvery {
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
			quiet = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-end.C:
			return
		case <-poll.C:
		}
	}
}
