package scan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"cacheon/internal/pyparse"
	"cacheon/internal/sandbox"
)

// maxStdout limits the interpreter's output per run. Facts are untrusted
// input.
const maxStdout = 8 << 20

// scriptName is the parse script's path inside python.Files(); helperNames
// are the modules it imports, written next to it.
const scriptName = "cacheon_runtime/astfacts.py"

var helperNames = []string{"cacheon_runtime/astflow.py", "cacheon_runtime/astscope.py", "cacheon_runtime/astenv.py", "cacheon_runtime/asttyping.py", "cacheon_runtime/astmangle.py"}

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

// parser runs the parse script (in the sandbox, through internal/pyparse).
type parser struct {
	r     *pyparse.Runner
	limit int // stdout bytes accepted per run
	// packages are the modules whose submodules the header lists.
	packages []string
}

// newParser prepares the parse script and its helper modules for one
// interpreter (see pyparse.New); known, when set, is the interpreter's
// installation already inspected. The caller must call close.
func newParser(ctx context.Context, interpreter string, known *sandbox.PythonInstall) (*parser, error) {
	r, err := pyparse.New(ctx, interpreter, pyparse.Script{Name: scriptName, Helpers: helperNames, Install: known})
	if err != nil {
		return nil, err
	}
	return &parser{r: r, limit: maxStdout}, nil
}

// close deletes the script and its directory.
func (p *parser) close() error { return p.r.Close() }

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
				return nil, nil, fmt.Errorf("run parser %s: %w (stderr: %s)", p.r.Python(), exitErr, pyparse.Tail(stderr))
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
			return nil, nil, fmt.Errorf("run parser %s: %v after the last file (stderr: %s)", p.r.Python(), exitErr, pyparse.Tail(stderr))
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
	res, err := p.r.Run(ctx, input, p.limit)
	if err != nil {
		return nil, false, nil, "", err
	}
	return res.Stdout, res.Overflow, res.ExitErr, res.Stderr, nil
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
		req.Files[i] = wireFile{Path: s.path, Source: pyparse.Latin1(s.data)}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, fmt.Errorf("encode parser request: %w", err)
	}
	return buf.Bytes(), nil
}
