package scan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"cacheon/internal/sandbox"
	"cacheon/python"
)

// Limits on the interpreter's output. Facts are untrusted input.
const (
	maxStdout = 8 << 20
	maxStderr = 64 << 10
)

// scriptName is the parse script's path inside python.Files(); helperNames
// are the modules it imports, written next to it.
const scriptName = "cacheon_runtime/astfacts.py"

var helperNames = []string{"cacheon_runtime/astflow.py", "cacheon_runtime/astscope.py", "cacheon_runtime/astenv.py"}

// source is one Python file to parse: its bundle-relative slash path and
// its bytes.
type source struct {
	path string
	data []byte
}

// parsed is what the scanner learnt about one source: its facts, or why it
// has none (the parser crashed on it, or its facts overflowed the limit).
type parsed struct {
	facts    *fileFacts
	crash    string
	overflow bool
}

// Confinement of the parser. It reads hostile source, so it runs in the
// same sandbox as candidate code (no network, no writes outside its job
// directory, no processes beyond its own threads) with limits sized for
// parsing: a source that makes the parser loop or balloon ends there.
const (
	parserCPUSeconds = 30
	parserMemory     = 2 << 30
	parserProcs      = 16
)

// parser runs the parse script with one interpreter.
type parser struct {
	python string // resolved interpreter path
	dir    string // private temp directory holding the script
	script string
	limit  int // stdout bytes accepted per run
	policy sandbox.Policy
	// packages are the modules whose submodules the header lists.
	packages []string
}

// newParser resolves the interpreter, asks it where its installation lives
// (the sandbox grants exactly that; known, when set, is the answer already
// asked for) and writes the embedded parse script and
// its helper modules to a private temporary directory, the parser's job
// directory. The caller must call close.
func newParser(ctx context.Context, interpreter string, known *sandbox.PythonInstall) (*parser, error) {
	name := interpreter
	if name == "" {
		name = "python3"
	}
	py, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("find python interpreter: %w", err)
	}
	if py, err = filepath.Abs(py); err != nil {
		return nil, fmt.Errorf("find python interpreter: %w", err)
	}
	var install sandbox.PythonInstall
	if known != nil {
		install = *known
	} else if install, err = sandbox.InspectPython(ctx, py); err != nil {
		return nil, fmt.Errorf("parser sandbox: %w", err)
	}
	if interpreter == "" {
		// The default python3 on PATH may be a version manager's shim,
		// which cannot run in the sandbox: run what it resolves to.
		py = install.Executable
	}
	dir, err := os.MkdirTemp("", "cacheon-scan-")
	if err != nil {
		return nil, fmt.Errorf("create parse script directory: %w", err)
	}
	for _, name := range append([]string{scriptName}, helperNames...) {
		code, err := fs.ReadFile(python.Files(), name)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(name)), code, 0o600)
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("write parse script: %w", err)
		}
	}
	script := filepath.Join(dir, filepath.Base(scriptName))
	pol := sandbox.Policy{
		Dir: dir, Exec: append(install.Paths, filepath.Dir(py)), Network: sandbox.NetNone,
		CPUSeconds: parserCPUSeconds, MemoryBytes: parserMemory, MaxProcs: parserProcs,
		Require: []string{sandbox.LayerProcessGroup, sandbox.LayerNoNewPrivs},
	}
	return &parser{python: py, dir: dir, script: script, limit: maxStdout, policy: pol}, nil
}

// close deletes the script and its directory.
func (p *parser) close() error {
	if err := os.RemoveAll(p.dir); err != nil {
		return fmt.Errorf("remove parse script: %w", err)
	}
	return nil
}

// parseAll parses every source, normally in one interpreter run. When the
// parser crashes on a file (a hostile source can overflow the C stack of
// older interpreters) or a run's facts overflow the output limit, the file
// is marked and the remaining files are parsed by a fresh run, so one
// hostile file cannot hide the others. Infrastructure failures (no
// interpreter, no output at all, undecodable output, cancellation) are
// errors.
func (p *parser) parseAll(ctx context.Context, srcs []source) (*factsHeader, []parsed, error) {
	results := make([]parsed, len(srcs))
	var header *factsHeader
	for start := 0; start < len(srcs); {
		batch := srcs[start:]
		paths := make([]string, len(batch))
		for i, s := range batch {
			paths[i] = s.path
		}
		out, overflow, exitErr, stderr, err := p.run(ctx, batch)
		if err != nil {
			return nil, nil, err
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, nil, fmt.Errorf("run parser: %w", ctxErr)
		}
		clean := exitErr == nil && !overflow
		if !clean {
			out = out[:bytes.LastIndexByte(out, '\n')+1]
		}
		b, err := parseFacts(out, paths)
		if err != nil {
			if exitErr != nil {
				return nil, nil, fmt.Errorf("run parser %s: %w (stderr: %s)", p.python, exitErr, tail(stderr))
			}
			return nil, nil, err
		}
		if header == nil {
			header = &b.header
		}
		for i := range b.files {
			results[start+i].facts = &b.files[i]
		}
		done := len(b.files)
		switch {
		case clean && done == len(batch):
			return header, results, nil
		case clean:
			return nil, nil, fmt.Errorf("run parser: it stopped after %d of %d files", done, len(batch))
		case done == len(batch):
			return nil, nil, fmt.Errorf("run parser %s: %v after the last file (stderr: %s)", p.python, exitErr, tail(stderr))
		case overflow && done > 0:
			start += done // the overflowing file gets a fresh budget
		case overflow:
			results[start].overflow = true
			start++
		default:
			results[start+done].crash = exitErr.Error()
			start += done + 1
		}
	}
	return header, results, nil
}

// run starts the interpreter once for srcs, inside the sandbox. It returns
// stdout (at most p.limit bytes; overflow says more was written, and the
// process was stopped right then), the process's exit error, a bounded
// stderr, and err for failures to run at all.
func (p *parser) run(ctx context.Context, srcs []source) (stdout []byte, overflow bool, exitErr error, stderr string, err error) {
	input, err := encodeRequest(srcs, p.packages)
	if err != nil {
		return nil, false, nil, "", err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	cmd, err := sandbox.Command(runCtx, p.policy, p.python, "-I", "-S", "-W", "ignore", p.script)
	if err != nil {
		return nil, false, nil, "", fmt.Errorf("start parser %s: %w", p.python, err)
	}
	cmd.Stdin = bytes.NewReader(input)
	out := &capWriter{limit: p.limit, onOverflow: stop}
	errOut := &capWriter{limit: maxStderr}
	cmd.Stdout = out
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		return nil, false, nil, "", fmt.Errorf("start parser %s: %w", p.python, err)
	}
	waitErr := cmd.Wait()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, false, nil, "", fmt.Errorf("run parser: %w", ctxErr)
	}
	if out.over { // stopped by us: whatever Wait says is about the stop
		return out.buf.Bytes(), true, waitErr, errOut.buf.String(), nil
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return nil, false, nil, "", fmt.Errorf("run parser %s: %w", p.python, waitErr)
	}
	return out.buf.Bytes(), false, waitErr, errOut.buf.String(), nil
}

// wireRequest is the script's stdin: the sources, and the packages whose
// submodules the header lists.
type wireRequest struct {
	Files    []wireFile `json:"files"`
	Packages []string   `json:"packages"`
}

// wireFile carries a source's bytes as latin-1 code points, so the script
// recovers the exact bytes with str.encode("latin-1") and ast.parse decodes
// them as import would (honouring a BOM or a PEP 263 coding cookie).
type wireFile struct {
	Path   string `json:"path"`
	Source string `json:"source"`
}

func encodeRequest(srcs []source, packages []string) ([]byte, error) {
	req := wireRequest{Files: make([]wireFile, len(srcs)), Packages: packages}
	for i, s := range srcs {
		req.Files[i] = wireFile{Path: s.path, Source: latin1(s.data)}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, fmt.Errorf("encode parser request: %w", err)
	}
	return buf.Bytes(), nil
}

// latin1 maps every byte to the code point of the same value.
func latin1(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b) + len(b)/4)
	for _, c := range b {
		sb.WriteRune(rune(c))
	}
	return sb.String()
}

// capWriter keeps the first limit bytes written and silently drops the
// rest, so a chatty child never blocks on a full pipe. onOverflow, if set,
// runs once when the limit is first exceeded.
type capWriter struct {
	buf        bytes.Buffer
	limit      int
	over       bool
	onOverflow func()
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.limit - w.buf.Len()
	if len(p) > room {
		if !w.over && w.onOverflow != nil {
			w.onOverflow()
		}
		w.over = true
		if room > 0 {
			w.buf.Write(p[:room])
		}
		return len(p), nil
	}
	w.buf.Write(p)
	return len(p), nil
}

// tail returns the last part of a stderr capture for an error message.
func tail(s string) string {
	const n = 2048
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	if s == "" {
		return "empty"
	}
	return s
}
