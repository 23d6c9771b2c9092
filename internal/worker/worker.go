// Package worker starts cacheon_runtime worker processes and speaks the
// JSON-lines protocol of docs/worker-protocol.md with them.
//
// The worker is hostile: every reply is read with a size bound, decoded
// strictly (unknown fields are errors) and treated as a claim, never as a
// verdict. This package only moves requests and facts; grading lives in
// internal/verify.
package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxReplyBytes bounds one reply line.
const MaxReplyBytes = 1 << 20

// stderrKeep is how much of the worker's stderr is kept for diagnostics.
const stderrKeep = 64 << 10

// Process is a started worker process. The sandbox provides one; tests can
// use a plain exec.Cmd through PlainStarter.
type Process interface {
	Stdin() io.WriteCloser
	Stdout() io.Reader
	Stderr() io.Reader
	// Wait waits for the process (and its group) to exit.
	Wait() error
	// Kill ends the whole process group at once.
	Kill()
}

// Starter starts argv with env in dir.
type Starter interface {
	Start(ctx context.Context, argv, env []string, dir string) (Process, error)
}

// Client is one running worker.
type Client struct {
	proc    Process
	stdin   io.WriteCloser
	replies *bufio.Reader
	nextID  int

	mu     sync.Mutex
	stderr tailBuffer
	errc   chan struct{}

	exited   chan struct{}
	waitErr  error
	killOnce sync.Once
	maxReply int

	// replyAt is when the last reply line had been read in full, before
	// it was decoded: callers that time a request stop the clock there.
	replyAt time.Time
}

// Options configure a worker start.
type Options struct {
	Python        string   // interpreter path
	RuntimeParent string   // directory holding the materialized cacheon_runtime package
	Dir           string   // working (job) directory
	Env           []string // extra environment (CUDA_VISIBLE_DEVICES, …)
	// Module is the dotted module under cacheon_runtime whose main() the
	// process runs: "" means "worker" (the verify worker); the arena
	// runtime is "engine.main".
	Module string
	// MaxReply bounds one reply line (0 means MaxReplyBytes).
	MaxReply int
}

// moduleRE is what Options.Module may be (it is spliced into the boot line).
var moduleRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$`)

// Argv is the worker command line for the options.
func (o Options) Argv() []string {
	pkg, name := "cacheon_runtime", "worker"
	if o.Module != "" {
		name = o.Module
		if i := strings.LastIndexByte(o.Module, '.'); i >= 0 {
			pkg, name = pkg+"."+o.Module[:i], o.Module[i+1:]
		}
	}
	boot := "import sys; sys.path.insert(0, " + strconv.Quote(o.RuntimeParent) + "); from " + pkg + " import " + name + "; " + name + ".main()"
	return []string{o.Python, "-I", "-B", "-c", boot}
}

// Start launches a worker and waits for nothing; call Hello next.
func Start(ctx context.Context, st Starter, o Options) (*Client, error) {
	if o.Python == "" || o.RuntimeParent == "" || o.Dir == "" {
		return nil, errors.New("start worker: python, runtime and dir are required")
	}
	if o.Module != "" && !moduleRE.MatchString(o.Module) {
		return nil, fmt.Errorf("start worker: module %q is not a dotted module name", o.Module)
	}
	if o.MaxReply <= 0 {
		o.MaxReply = MaxReplyBytes
	}
	env := append([]string{"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "PYTHONHASHSEED=0"}, o.Env...)
	p, err := st.Start(ctx, o.Argv(), env, o.Dir)
	if err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	c := &Client{proc: p, stdin: p.Stdin(), replies: bufio.NewReaderSize(p.Stdout(), 64<<10), exited: make(chan struct{}), errc: make(chan struct{}), maxReply: o.MaxReply}
	go func() {
		c.stderr.copyFrom(p.Stderr(), &c.mu)
		close(c.errc)
	}()
	go func() {
		c.waitErr = p.Wait()
		close(c.exited)
	}()
	return c, nil
}

// Stderr returns the retained tail of the worker's stderr.
func (c *Client) Stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// Kill ends the worker's process group.
func (c *Client) Kill() {
	c.killOnce.Do(func() { c.proc.Kill() })
}

// Close asks the worker to shut down and kills it if it does not exit
// within grace.
func (c *Client) Close(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_, _ = c.Call(ctx, map[string]any{"op": "shutdown"}, nil)
	_ = c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(grace):
		c.Kill()
		<-c.exited
	}
	return nil
}

// Exited reports whether the process has exited, and its wait error.
func (c *Client) Exited() (bool, error) {
	select {
	case <-c.exited:
		return true, c.waitErr
	default:
		return false, nil
	}
}

// TimeoutError reports a request that outlived its deadline; the worker has
// been killed. When the deadline was a limit the user set (WithLimit),
// Limit and Name say which, and the message names it as they gave it.
type TimeoutError struct {
	After time.Duration // how long the request waited
	Limit time.Duration // the user's limit (0 when the deadline was not one)
	Name  string        // how the user set it, e.g. "--timeout"
}

func (e *TimeoutError) Error() string {
	if e.Limit > 0 {
		return fmt.Sprintf("worker did not answer within %s (%s %s) and was killed", e.Limit, e.Name, e.Limit)
	}
	return fmt.Sprintf("worker did not answer within %s and was killed", e.After.Round(time.Millisecond))
}

// limitKey carries a userLimit in a context.
type limitKey struct{}

type userLimit struct {
	d        time.Duration
	name     string
	deadline time.Time
}

// WithLimit is context.WithTimeout for a limit the user set (name is how
// they set it, e.g. "--timeout"): a request that outlives it fails with a
// *TimeoutError naming the limit. When ctx already ends sooner, the limit
// is not what ends the request and is not named.
func WithLimit(ctx context.Context, d time.Duration, name string) (context.Context, context.CancelFunc) {
	want := time.Now().Add(d)
	ctx, cancel := context.WithDeadline(ctx, want)
	if got, ok := ctx.Deadline(); ok && got.Equal(want) {
		ctx = context.WithValue(ctx, limitKey{}, userLimit{d: d, name: name, deadline: want})
	}
	return ctx, cancel
}

// timeoutError is the error of a request whose ctx reached its deadline.
func timeoutError(ctx context.Context, after time.Duration) *TimeoutError {
	te := &TimeoutError{After: after}
	if l, ok := ctx.Value(limitKey{}).(userLimit); ok {
		if dl, ok := ctx.Deadline(); ok && dl.Equal(l.deadline) {
			te.Limit, te.Name = l.d, l.name
		}
	}
	return te
}

// ExitError reports a worker that died while a request was outstanding.
type ExitError struct {
	Err    error
	Stderr string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("worker exited unexpectedly (%v)", e.Err)
}

// Send writes one request and returns its id. The request must be a map or
// a struct with an "op" field; Send adds "id".
func (c *Client) Send(req map[string]any) (string, error) {
	c.nextID++
	id := strconv.Itoa(c.nextID)
	req["id"] = id
	b, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("encode request: %w", err)
	}
	b = append(b, '\n')
	if _, err := c.stdin.Write(b); err != nil {
		return "", fmt.Errorf("send %v request: %w", req["op"], err)
	}
	return id, nil
}

// ReplyAt is when the last reply received had been read in full, before
// it was decoded (the zero time before the first reply).
func (c *Client) ReplyAt() time.Time { return c.replyAt }

// Receive reads the reply to id and decodes it into resp (strictly). A
// reply with ok=false is returned as *Failure.
func (c *Client) Receive(ctx context.Context, id string, resp any) error {
	type result struct {
		line []byte
		err  error
		at   time.Time
	}
	ch := make(chan result, 1)
	go func() {
		line, err := readLine(c.replies, c.maxReply)
		ch <- result{line, err, time.Now()}
	}()
	start := time.Now()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		c.Kill()
		<-ch
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return timeoutError(ctx, time.Since(start))
		}
		return ctx.Err()
	}
	c.replyAt = r.at
	if r.err != nil {
		// The process may be dying; give it a moment to report status.
		select {
		case <-c.exited:
		case <-time.After(2 * time.Second):
		}
		<-c.errcOrTimeout()
		if done, werr := c.Exited(); done {
			return &ExitError{Err: werr, Stderr: c.Stderr()}
		}
		if errors.Is(r.err, errLineTooLong) {
			return &ProtocolError{Err: fmt.Errorf("read reply: %w", r.err)}
		}
		return fmt.Errorf("read reply: %w", r.err)
	}
	return decodeReply(r.line, id, resp)
}

// ProtocolError is a reply that breaks the protocol: a line that does not
// decode, answers another request, lacks "ok", or is too long. Once
// candidate code has run in a worker it can write to the worker's
// descriptors, so callers that sent it a load or run request blame a
// ProtocolError on the candidate.
type ProtocolError struct{ Err error }

func (e *ProtocolError) Error() string { return e.Err.Error() }
func (e *ProtocolError) Unwrap() error { return e.Err }

// decodeReply checks one reply line against the request id and decodes it
// strictly into resp (nil: only the head is checked). A reply with
// ok=false is returned as *Failure, one that breaks the protocol as
// *ProtocolError.
func decodeReply(line []byte, id string, resp any) error {
	err := decodeReplyLine(line, id, resp)
	var f *Failure
	if err != nil && !errors.As(err, &f) {
		return &ProtocolError{Err: err}
	}
	return err
}

func decodeReplyLine(line []byte, id string, resp any) error {
	var head struct {
		ID    string   `json:"id"`
		OK    *bool    `json:"ok"`
		Error *Failure `json:"error"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return fmt.Errorf("decode reply: %w (line starts %q)", err, clipBytes(line, 120))
	}
	if head.ID != id {
		return fmt.Errorf("reply id %q does not match request id %q", head.ID, id)
	}
	if head.OK == nil {
		return fmt.Errorf("reply %s lacks \"ok\"", id)
	}
	if !*head.OK {
		if head.Error == nil {
			return fmt.Errorf("reply %s: ok=false without an error", id)
		}
		return head.Error
	}
	if resp == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(resp); err != nil {
		return fmt.Errorf("decode reply %s: %w", id, err)
	}
	return nil
}

func (c *Client) errcOrTimeout() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		select {
		case <-c.errc:
		case <-time.After(time.Second):
		}
		close(ch)
	}()
	return ch
}

// Call sends a request and waits for its reply.
func (c *Client) Call(ctx context.Context, req map[string]any, resp any) (string, error) {
	id, err := c.Send(req)
	if err != nil {
		return "", err
	}
	return id, c.Receive(ctx, id, resp)
}

// errLineTooLong is a reply line over the client's bound.
var errLineTooLong = errors.New("reply line longer than the bound")

func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > limit {
			return nil, fmt.Errorf("%w (%d bytes)", errLineTooLong, limit)
		}
		if err == nil {
			return bytes.TrimRight(buf, "\r\n"), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) && len(buf) == 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

func clipBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// tailBuffer keeps the last stderrKeep bytes written.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) copyFrom(r io.Reader, mu *sync.Mutex) {
	buf := make([]byte, 8192)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			mu.Lock()
			t.b = append(t.b, buf[:n]...)
			if len(t.b) > stderrKeep {
				t.b = append([]byte(nil), t.b[len(t.b)-stderrKeep:]...)
			}
			mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (t *tailBuffer) String() string { return string(t.b) }
