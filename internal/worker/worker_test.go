package worker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// shStarter runs a shell script as the "worker" so the client's protocol
// handling can be tested without Python.
type shStarter struct{ script string }

func (s shStarter) Start(ctx context.Context, argv, env []string, dir string) (Process, error) {
	return StartCmd([]string{"/bin/sh", "-c", s.script}, env, dir, nil)
}

func startFake(t *testing.T, script string) *Client {
	t.Helper()
	c, err := Start(context.Background(), shStarter{script}, Options{Python: "unused", RuntimeParent: "unused", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

func TestReplyDecoding(t *testing.T) {
	tests := []struct {
		name, script, err string
		protocol          bool // the error is a *ProtocolError
	}{
		{"ok", `read l; echo '{"id":"1","ok":true,"python":"3","torch":"1.13","cuda":false,"device_count":0,"triton":null,"pid":1}'`, "", false},
		{"ok with audit hook", `read l; echo '{"id":"1","ok":true,"python":"3","torch":"1.13","cuda":false,"device_count":0,"triton":null,"pid":1,"audit_hook":true}'`, "", false},
		{"audit hook not a bool", `read l; echo '{"id":"1","ok":true,"python":"3","torch":"1.13","cuda":false,"device_count":0,"triton":null,"pid":1,"audit_hook":"yes"}'`, "audit_hook", true},
		{"failure reply", `read l; echo '{"id":"1","ok":false,"error":{"class":"internal","message":"no torch"}}'`, "internal: no torch", false},
		{"wrong id", `read l; echo '{"id":"7","ok":true}'`, "does not match", true},
		{"unknown field", `read l; echo '{"id":"1","ok":true,"python":"3","torch":"x","cuda":false,"device_count":0,"triton":null,"pid":1,"verdict":"PASS"}'`, "unknown field", true},
		{"missing ok", `read l; echo '{"id":"1"}'`, "lacks \"ok\"", true},
		{"garbage", `read l; echo 'hello world'`, "decode reply", true},
		{"dies", `read l; echo boom >&2; exit 3`, "worker exited unexpectedly", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startFake(t, tt.script)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.Hello(ctx)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
			var pe *ProtocolError
			if got := errors.As(err, &pe); got != tt.protocol {
				t.Errorf("err %v: a ProtocolError %v, want %v", err, got, tt.protocol)
			}
		})
	}
}

// TestRunCallErrorClasses: a call error is the candidate raising or the
// runtime guard's tamper finding; any other class is not a reply Go
// accepts.
func TestRunCallErrorClasses(t *testing.T) {
	reply := func(class string) string {
		return `read l; echo '{"id":"1","ok":true,"calls":[{"call":0,"phase":"eager","file":"call-0.safetensors","before":{},"after":{},"error":{"class":"` + class + `","type":"T","message":"m","traceback":""}}]}'; read l`
	}
	for class, ok := range map[string]bool{ClassException: true, ClassTamper: true, "verdict": false, "": false} {
		c := startFake(t, reply(class))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rr, err := c.Run(ctx, RunRequest{Module: "m0", Device: "cpu", Entry: "f", Inputs: "in.safetensors", Dir: "/job"})
		cancel()
		if ok && (err != nil || rr.Calls[0].Error.Class != class) {
			t.Errorf("class %q: %v", class, err)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), "unknown class")) {
			t.Errorf("class %q accepted (err %v)", class, err)
		}
	}
}

func TestAuditHookLayer(t *testing.T) {
	for _, tc := range []struct {
		started, reported int
		want              string
	}{
		{1, 1, "audit-hook: applied (python PEP 578: files, exec, dlopen, subprocess, sockets, pickle, type setattr)"},
		{2, 1, "audit-hook: NOT APPLIED (1 of 2 runtime processes reported it"},
		{0, 0, "audit-hook: NOT APPLIED (no runtime process started)"},
	} {
		if got := AuditHookLayer(tc.started, tc.reported); !strings.HasPrefix(got, tc.want) {
			t.Errorf("AuditHookLayer(%d, %d) = %q, want %q…", tc.started, tc.reported, got, tc.want)
		}
	}
}

// TestCandidateEnv: verify's ranks and the engine get the same names; the
// thread count is the one rule.
func TestCandidateEnv(t *testing.T) {
	keys := func(env []string) []string {
		var out []string
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			out = append(out, k)
		}
		return out
	}
	a, b := CandidateEnv("/job/a", 0, "cuda", true), CandidateEnv("/scratch/b", 1, "cpu", true)
	if fmt.Sprint(keys(a)) != fmt.Sprint(keys(b)) {
		t.Fatalf("names differ: %q vs %q", keys(a), keys(b))
	}
	want := map[string]string{"HOME": "/job/a", "TMPDIR": "/job/a", "TRITON_CACHE_DIR": "/job/a/triton-cache",
		"OMP_NUM_THREADS": "1", "CACHEON_RANK": "0", "CACHEON_DEVICE": "cuda", "CACHEON_TRITON": "1"}
	for _, kv := range workerEnv(a) {
		k, v, _ := strings.Cut(kv, "=")
		if w, ok := want[k]; ok && w != v {
			t.Errorf("%s = %q, want %q", k, v, w)
		}
		delete(want, k)
	}
	if len(want) > 0 {
		t.Errorf("missing %v", want)
	}
	// Triton's key only where the process will use Triton on cuda
	for _, env := range [][]string{b, CandidateEnv("/job/a", 0, "cuda", false)} {
		if !slices.Contains(env, "CACHEON_TRITON=0") {
			t.Errorf("%q: want CACHEON_TRITON=0", env)
		}
	}
}

func TestDeadWorkerKeepsStderr(t *testing.T) {
	c := startFake(t, `read l; echo "Traceback: MemoryError" >&2; exit 1`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Hello(ctx)
	var ee *ExitError
	if !errors.As(err, &ee) || !strings.Contains(ee.Stderr, "MemoryError") {
		t.Fatalf("err = %v (%#v)", err, ee)
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "child-alive")
	// The fake never answers and leaves a grandchild that would touch the
	// marker after 2 s if it survived the kill.
	c := startFake(t, `(sleep 2; touch `+marker+`) & read l; sleep 60`)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Hello(ctx)
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a grandchild survived the kill")
	}
}

func TestReplyLineLimit(t *testing.T) {
	c := startFake(t, `read l; head -c 2000000 /dev/zero | tr '\0' 'a'; echo`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Hello(ctx)
	var pe *ProtocolError
	if err == nil || !strings.Contains(err.Error(), "longer than") || !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a line-length ProtocolError", err)
	}
}

func TestMaterializeRuntime(t *testing.T) {
	dir := t.TempDir()
	a, err := MaterializeRuntime(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := MaterializeRuntime(dir)
	if err != nil || a != b {
		t.Fatalf("second materialize: %s, %v (first %s)", b, err, a)
	}
	for _, f := range []string{"__init__.py", "worker.py", "stio.py"} {
		if _, err := os.Stat(filepath.Join(a, "cacheon_runtime", f)); err != nil {
			t.Errorf("runtime lacks %s: %v", f, err)
		}
	}
}

// TestChildSurvivesThreadExit: the parent-death signal is tied to the OS
// thread that forked the child. A goroutine that starts a worker, then
// locks its thread and returns, destroys the thread it forked from; the
// child must not die with it.
func TestChildSurvivesThreadExit(t *testing.T) {
	hello := `'{"id":"%d","ok":true,"python":"3","torch":"1.13","cuda":false,"device_count":0,"triton":null,"pid":1}'`
	script := "read l; echo " + fmt.Sprintf(hello, 1) + "; read l; echo " + fmt.Sprintf(hello, 2)
	got := make(chan *Client, 1)
	go func() {
		c, err := Start(context.Background(), shStarter{script}, Options{Python: "unused", RuntimeParent: "unused", Dir: t.TempDir()})
		if err != nil {
			t.Error(err)
		}
		got <- c
		runtime.LockOSThread() // returning now destroys this thread
	}()
	c := <-got
	if c == nil {
		t.FailNow()
	}
	t.Cleanup(c.Kill)
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Hello(ctx); err != nil {
		t.Fatalf("worker died when the goroutine that started it destroyed its thread: %v", err)
	}
}

func TestReplyAtMarksArrivalBeforeDecoding(t *testing.T) {
	// The reply arrives about 300 ms after the request; ReplyAt must lie
	// between the send and the return of Receive, and after the delay.
	c := startFake(t, `read l; sleep 0.3; echo '{"id":"1","ok":true,"python":"3","torch":"1.13","cuda":false,"device_count":0,"triton":null,"pid":1}'`)
	if !c.ReplyAt().IsZero() {
		t.Fatal("ReplyAt is set before any reply")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sent := time.Now()
	if _, err := c.Hello(ctx); err != nil {
		t.Fatal(err)
	}
	done := time.Now()
	at := c.ReplyAt()
	if at.Before(sent.Add(250*time.Millisecond)) || at.After(done) {
		t.Fatalf("ReplyAt %v is not within [send+250ms, return] = [%v, %v]", at.Sub(sent), 250*time.Millisecond, done.Sub(sent))
	}
}

func TestWorkerEnv(t *testing.T) {
	t.Setenv("NCCL_NVLS_ENABLE", "1") // the host's value never reaches a worker
	env := workerEnv([]string{"HOME=/job", "X=1", "X=2", "NCCL_CUMEM_ENABLE=0"})
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("%s appears twice in %q", k, env)
		}
		got[k] = v
	}
	want := map[string]string{"HOME": "/job", "X": "2", "NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0",
		"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1", "LANG": "C.UTF-8"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (env %q)", k, got[k], v, env)
		}
	}
}

// FuzzReplyLine: whatever a worker (candidate code in its process) writes,
// reading and decoding a reply line never panics, never returns more than
// the line limit, and an accepted reply carries the request's id.
func FuzzReplyLine(f *testing.F) {
	f.Add([]byte(`{"id":"1","ok":true,"calls":[{"call":0,"phase":"eager","file":"c0.safetensors","before":{},"after":{},"error":null}]}`+"\n"), 256)
	f.Add([]byte(`{"id":"1","ok":false,"error":{"class":"exception","type":"ValueError","message":"x"}}`+"\n"), 64)
	f.Add([]byte(`{"id":"2","ok":true}`), 8)
	f.Add([]byte("\n\n"), 1)
	f.Add([]byte(`{"id":"1","ok":true,"entry_params":[{"name":"x","kind":"positional","default":false},{"name":"kw","kind":"var_keyword","default":false}]}`+"\n"), 256)
	f.Add([]byte(`{"id":"1","ok":true,"entry_params":null}`+"\n"), 64)
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		if limit < 1 || limit > 1<<16 {
			limit = 1 << 10
		}
		line, err := readLine(bufio.NewReaderSize(bytes.NewReader(data), 16), limit)
		if err != nil {
			return
		}
		if len(line) > limit {
			t.Fatalf("line of %d bytes past the %d-byte limit", len(line), limit)
		}
		var rr RunReply
		if err := decodeReply(line, "1", &rr); err == nil && rr.ID != "1" {
			t.Fatalf("accepted a reply for id %q", rr.ID)
		}
		var ld Loaded
		if err := decodeReply(line, "1", &ld); err == nil && ld.ID != "1" {
			t.Fatalf("accepted a load reply for id %q", ld.ID)
		}
	})
}

func TestAbsCommand(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if got := AbsCommand("./py3"); got != filepath.Join(wd, "py3") {
		t.Errorf("AbsCommand(./py3) = %q", got)
	}
	if got := AbsCommand("/usr/bin/python3"); got != "/usr/bin/python3" {
		t.Errorf("absolute path changed: %q", got)
	}
	if got := AbsCommand("sh"); !filepath.IsAbs(got) {
		t.Errorf("AbsCommand(sh) = %q, want a PATH lookup", got)
	}
	if got := AbsCommand("no-such-interpreter-xyz"); got != "no-such-interpreter-xyz" {
		t.Errorf("unresolvable name changed: %q", got)
	}
}
