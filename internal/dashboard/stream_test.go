package dashboard

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// events reads the data of the "overview" events of a stream.
func events(body io.Reader) <-chan string {
	out := make(chan string, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		var event string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "overview":
				out <- strings.TrimPrefix(line, "data: ")
			case line == "":
				event = ""
			}
		}
	}()
	return out
}

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case d, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return ""
}

// TestStream: the stream sends the overview's digest at once and again
// when it changes; streams are bounded in number and in life.
func TestStream(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(handler(t, f, Options{Poll: 20 * time.Millisecond, MaxStreams: 1}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" ||
		resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	ch := events(resp.Body)
	o, _ := f.Overview(ctx)
	if d := next(t, ch); d != digest(o) {
		t.Errorf("first event %q, want the overview's digest %q", d, digest(o))
	}

	second, err := http.Get(srv.URL + "/api/stream")
	if err != nil {
		t.Fatal(err)
	}
	second.Body.Close()
	if second.StatusCode != http.StatusServiceUnavailable || second.Header.Get("Retry-After") == "" {
		t.Errorf("a stream over MaxStreams: status %d, want 503 with Retry-After", second.StatusCode)
	}

	f.move(hexOf("carol"), "qualifying", "lease to cpu0")
	o, _ = f.Overview(ctx)
	if d := next(t, ch); d != digest(o) {
		t.Errorf("after a move: %q, want %q", d, digest(o))
	}
	cancel() // the client leaves; srv.Close waits for the handler to return
}

func TestStreamLife(t *testing.T) {
	srv := httptest.NewServer(handler(t, newFake(), Options{Poll: 10 * time.Millisecond, StreamLife: 100 * time.Millisecond}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stream: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream outlived StreamLife")
	}
}

// TestDigest: the digest follows every field but Updated.
func TestDigest(t *testing.T) {
	f := newFake()
	o, _ := f.Overview(context.Background())
	d := digest(o)
	o2 := o
	o2.Updated = o.Updated.Add(time.Hour)
	if digest(o2) != d {
		t.Error("the digest changed with Updated alone")
	}
	for name, change := range map[string]func(*Overview){
		"head":        func(o *Overview) { o.Head++ },
		"transitions": func(o *Overview) { o.Transitions++ },
		"queue":       func(o *Overview) { o.Queue = append([]StateCount(nil), o.Queue...); o.Queue[0].Count++ },
		"journal":     func(o *Overview) { o.Journal.Verified = false },
		"stack":       func(o *Overview) { o.Stack.Generation++ },
		"weights":     func(o *Overview) { o.Weights = nil },
	} {
		o2 := o
		change(&o2)
		if digest(o2) == d {
			t.Errorf("%s: the digest did not change", name)
		}
	}
}
