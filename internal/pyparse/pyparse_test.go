package pyparse

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"cacheon/internal/sandbox"
)

// TestMain lets the sandbox re-execute this test binary as the script's
// launcher.
func TestMain(m *testing.M) {
	sandbox.MaybeRunChild()
	os.Exit(m.Run())
}

var norm = Script{Name: "cacheon_runtime/astnorm.py"}

func newRunner(t *testing.T) *Runner {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	r, err := New(t.Context(), "", norm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

func TestRun(t *testing.T) {
	r := newRunner(t)
	res, err := r.Run(t.Context(), []byte(`{"files":[{"path":"a.py","source":"X = 1\n"}]}`), 1<<20)
	if err != nil || res.ExitErr != nil || res.Overflow {
		t.Fatalf("run: %+v, %v", res, err)
	}
	if !bytes.HasPrefix(res.Stdout, []byte(`{"path":"a.py","norm":"Module(`)) {
		t.Errorf("stdout %q", res.Stdout)
	}
	// A failing script is reported in ExitErr, with its stderr.
	res, err = r.Run(t.Context(), []byte("not json"), 1<<20)
	if err != nil || res.ExitErr == nil || !strings.Contains(res.Stderr, "JSONDecodeError") {
		t.Errorf("bad input: %+v, %v; want an exit error with the traceback", res, err)
	}
}

// TestRunOverflow: output past the limit stops the process and is cut at
// the limit.
func TestRunOverflow(t *testing.T) {
	r := newRunner(t)
	src := strings.Repeat(`{"path":"a.py","source":"X = 1\n"},`, 200)
	res, err := r.Run(t.Context(), []byte(`{"files":[`+strings.TrimSuffix(src, ",")+`]}`), 100)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Overflow || len(res.Stdout) != 100 {
		t.Errorf("overflow %v with %d bytes, want true with 100", res.Overflow, len(res.Stdout))
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(t.Context(), "/nonexistent/python3", norm); err == nil {
		t.Error("missing interpreter: want an error")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	if _, err := New(t.Context(), "", Script{Name: "cacheon_runtime/nope.py"}); err == nil {
		t.Error("missing script: want an error")
	}
}

func TestLatin1(t *testing.T) {
	in := []byte{0, 'a', 0x7f, 0x80, 0xe9, 0xff}
	got := Latin1(in)
	want := "\x00a\x7f\u0080\u00e9\u00ff"
	if got != want {
		t.Errorf("Latin1 = %q, want %q", got, want)
	}
}

func TestTail(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"  x \n", "x"},
		{strings.Repeat("a", 3000) + "end", "..." + strings.Repeat("a", 2045) + "end"},
	} {
		if got := Tail(tc.in); got != tc.want {
			t.Errorf("Tail(%.20q) = %.40q, want %.40q", tc.in, got, tc.want)
		}
	}
}
