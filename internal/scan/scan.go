// Package scan is the static policy over a miner's bundle, applied before
// any candidate code runs.
//
// The rules live in Go. Python sources are parsed by the real Python
// grammar: one interpreter start per bundle runs the embedded script
// python/cacheon_runtime/astfacts.py (with asttyping.py beside it, whose
// facts typefacts.go judges), which receives the sources on stdin,
// calls ast.parse and reports raw syntax facts (imports, calls, attribute
// chains, assignment targets, names, aliases, where module objects flow,
// classes, methods and their receivers) as JSON lines, after a header that
// lists every module the interpreter can import and the allowed packages'
// submodules.
//
// The policy is an allow-list of what a bundle uses (docs/verify.md,
// "Static policy"): allowed imports (policy.go), the attribute allow-list of
// each allowed module (attrs.go), deny rules with their own messages
// (refs.go), introspection (introspect.go), ownership of what a bundle may
// store into (owner.go, stores.go) and the module names a bundle may not
// take (reserved.go). The script never opens a bundle file and never imports or
// executes candidate code; since it parses hostile source it still runs in
// the sandbox (internal/sandbox) with limits sized for parsing. Its output
// is decoded strictly and bounded like any other hostile input.
//
// Check is the scan a miner runs on a bundle directory. Admit is the gate:
// it scans a staged copy of a bundle and returns the only form of a bundle
// that verify and the engine accept (*Admitted).
//
// File rules (links, binaries, undeclared files) come from walking the
// bundle without following links. Policy violations are findings; Scan
// returns an error only when the scan itself cannot be done.
package scan

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"cacheon/internal/sandbox"
)

// Scan limits. A bundle beyond them gets scan-limit findings.
const (
	maxSourceBytes = 1 << 20  // one Python source
	maxSources     = 256      // Python sources parsed per bundle
	maxTotalBytes  = 16 << 20 // all Python sources together
	// DefaultTimeout bounds a whole scan when Input.Timeout is zero.
	DefaultTimeout = 20 * time.Second
)

// Input names the bundle to scan and what its manifest declares.
type Input struct {
	// Root is the bundle directory.
	Root string
	// HasManifest enables the undeclared-file rule (the bundle has a
	// manifest.toml whose declarations are given below).
	HasManifest bool
	// Sources are the declared Python sources, relative slash paths.
	Sources []string
	// CUDASources are the declared .cu/.cuh sources, relative slash paths.
	CUDASources []string
	// Metadata are the declared metadata JSON files (a row's metadata =
	// path), relative slash paths: declared data, wherever they live.
	Metadata []string
	// Python is the interpreter; "" means python3 from PATH.
	Python string
	// Install is Python's installation when the caller inspected it
	// already (Config.Install); nil = the parser asks.
	Install *sandbox.PythonInstall
	// Timeout bounds the scan; zero means DefaultTimeout.
	Timeout time.Duration
}

// Finding is one policy violation. Line and Col are 1-based; both are 0 for
// a finding about a whole file or directory.
type Finding struct {
	Path    string
	Line    int
	Col     int
	Rule    string
	Message string
}

// String renders "path:line:col rule-id message".
func (f Finding) String() string {
	return fmt.Sprintf("%s:%d:%d %s %s", f.Path, f.Line, f.Col, f.Rule, f.Message)
}

// Report is the outcome of a scan. The bundle passes when Findings is empty.
type Report struct {
	// Findings are sorted by path, line, column, rule and message.
	Findings []Finding
	// Info is information that is not a finding: what the manifest's
	// metadata files carry that this validator ignores (descriptive keys)
	// and how legacy keys were read. Check fills it; it never fails a
	// bundle.
	Info []Info
	// Files counts the regular files examined.
	Files int
}

// Info is one piece of information about a bundle, for its author.
type Info struct {
	Path    string
	Message string
}

// String renders "path: message".
func (i Info) String() string { return i.Path + ": " + i.Message }

// Scan applies the static policy to the bundle in.Root. It returns an error
// only for infrastructure or I/O problems (no interpreter, unreadable
// directory, timeout); policy violations are findings.
func Scan(ctx context.Context, in Input, pol Policy) (*Report, error) {
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	t, err := walkTree(in.Root)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	declared := make(map[string]bool)
	declaredCUDA := make(map[string]bool)
	var missing []Finding
	for _, list := range []struct {
		paths []string
		into  map[string]bool
	}{{in.Sources, declared}, {in.CUDASources, declaredCUDA}} {
		for _, p := range list.paths {
			if err := checkDeclared(p); err != nil {
				missing = append(missing, Finding{Path: displayPath(p), Rule: RuleMissingSource,
					Message: fmt.Sprintf("declared source path %s; fix the manifest", err)})
				continue
			}
			list.into[p] = true
			if t.info[p] == nil && !t.flagged[p] {
				missing = append(missing, Finding{Path: p, Rule: RuleMissingSource,
					Message: "declared in the manifest but not a regular file in the bundle; add the file or fix the manifest"})
			}
		}
	}
	for _, p := range in.Metadata {
		// The loader reads them as JSON; nothing else is exempted by them.
		if checkDeclared(p) == nil && strings.EqualFold(path.Ext(p), ".json") {
			declared[p] = true
		}
	}
	if err := t.classify(declaredCUDA); err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	srcs, err := t.pythonSources()
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}

	findings := append(t.findings, missing...)
	var header *factsHeader
	facts := make(map[string]*fileFacts)
	if len(srcs) > 0 {
		p, err := newParser(ctx, in.Python, in.Install)
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		p.packages = allowedTops(pol)
		h, results, err := p.parseAll(ctx, srcs)
		cerr := p.close()
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		if cerr != nil {
			return nil, fmt.Errorf("scan: %w", cerr)
		}
		header = h
		for i, r := range results {
			rel := srcs[i].path
			switch {
			case r.crash != "":
				findings = append(findings, Finding{Path: rel, Rule: RuleSyntaxError,
					Message: fmt.Sprintf("the Python parser crashed on this file (%s); simplify deeply nested code", sanitize(r.crash))})
			case r.overflow:
				findings = append(findings, Finding{Path: rel, Rule: RuleScanLimit,
					Message: "the file yields more syntax facts than the scanner accepts; split or simplify it"})
			case r.facts.Error != nil:
				e := r.facts.Error
				findings = append(findings, Finding{Path: rel, Line: e.Line, Col: e.Col, Rule: RuleSyntaxError,
					Message: fmt.Sprintf("does not parse: %s", sanitize(e.Msg))})
			default:
				facts[rel] = r.facts
			}
		}
	}

	ix := newModIndex(t.pyFiles(), reservedModules(pol, header))
	for _, name := range ix.shadowNames() {
		findings = append(findings, Finding{Path: ix.shadows[name], Rule: RuleModuleShadowing,
			Message: fmt.Sprintf("bundle module %q has the name of a module the interpreter can import (standard library or installed), an allowed or a policed module: "+
				"at run time the import may bind that module instead; rename it", name)})
	}
	c := newChecker(ix, pol, facts, header)
	for _, s := range srcs {
		if ff := facts[s.path]; ff != nil {
			findings = append(findings, c.check(s.path, ff)...)
		}
	}
	if in.HasManifest {
		findings = append(findings, t.undeclared(ix, declared, declaredCUDA, facts)...)
	}
	return &Report{Findings: sortFindings(findings), Files: len(t.files)}, nil
}

// allowedTops returns the policy's allowed top-level modules, sorted and
// deduplicated: the packages whose submodules the parser lists.
func allowedTops(pol Policy) []string {
	seen := make(map[string]bool)
	var out []string
	for _, m := range pol.AllowedImports {
		if top := topLevel(m); !seen[top] {
			seen[top] = true
			out = append(out, top)
		}
	}
	sort.Strings(out)
	return out
}

// pythonSources reads every .py file that has no file-level finding yet,
// within the scan limits; files beyond them and files with NUL bytes get
// findings instead.
func (t *tree) pythonSources() ([]source, error) {
	var srcs []source
	total := 0
	for _, rel := range t.pyFiles() {
		if t.flagged[rel] {
			continue
		}
		if len(srcs) == maxSources {
			t.add(rel, RuleScanLimit, fmt.Sprintf("the bundle has more than %d Python files; the scanner parses only the first %d", maxSources, maxSources))
			continue
		}
		data, tooBig, err := t.read(rel, maxSourceBytes)
		if err != nil {
			return nil, err
		}
		switch {
		case tooBig:
			t.add(rel, RuleScanLimit, fmt.Sprintf("the file is larger than %d bytes; split it", maxSourceBytes))
		case bytes.IndexByte(data[:min(len(data), headBytes)], 0) >= 0:
			t.add(rel, RuleBinaryFile, "the file contains NUL bytes, so it is binary; ship text sources only")
		case total+len(data) > maxTotalBytes:
			t.add(rel, RuleScanLimit, fmt.Sprintf("the bundle's Python sources exceed %d bytes together; the scanner stops here", maxTotalBytes))
		default:
			total += len(data)
			srcs = append(srcs, source{path: rel, data: data})
		}
	}
	return srcs, nil
}

// pyFiles lists the regular *.py files of the tree, sorted.
func (t *tree) pyFiles() []string {
	var out []string
	for _, rel := range t.files {
		if path.Ext(rel) == ".py" {
			out = append(out, rel)
		}
	}
	return out
}

// undeclared reports files the manifest does not account for: anything but
// manifest.toml, declared sources, Python modules imported (transitively,
// bundle-locally) by declared sources, metadata/*.json and the rows' declared
// metadata files, documentation and
// licence files (README*, LICENSE*, COPYING*, NOTICE* as text) and
// .gitignore. Files with another file-level finding are not reported twice.
func (t *tree) undeclared(ix *modIndex, declared, declaredCUDA map[string]bool, facts map[string]*fileFacts) []Finding {
	var start []string
	for p := range declared {
		if path.Ext(p) == ".py" && t.info[p] != nil {
			start = append(start, p)
		}
	}
	sort.Strings(start)
	reached := ix.closure(start, func(rel string) *fileFacts { return facts[rel] })
	var out []Finding
	for _, rel := range t.files {
		if t.flagged[rel] || declared[rel] || declaredCUDA[rel] || reached[rel] || allowedExtra(rel) {
			continue
		}
		out = append(out, Finding{Path: rel, Rule: RuleUndeclaredFile,
			Message: "not declared in manifest.toml and not imported by a declared source; remove it or declare it"})
	}
	return out
}

// allowedExtra reports the undeclared files a bundle may carry.
func allowedExtra(rel string) bool {
	if rel == "manifest.toml" {
		return true
	}
	if ok, _ := path.Match("metadata/*.json", rel); ok {
		return true
	}
	base := path.Base(rel)
	if base == ".gitignore" {
		return true
	}
	switch strings.ToLower(path.Ext(base)) {
	case "", ".md", ".txt", ".rst":
	default:
		return false
	}
	upper := strings.ToUpper(base)
	for _, prefix := range []string{"README", "LICENSE", "COPYING", "NOTICE"} {
		if strings.HasPrefix(upper, prefix) {
			return true
		}
	}
	return false
}

// sortFindings orders findings by path, line, column, rule and message and
// drops exact duplicates.
func sortFindings(fs []Finding) []Finding {
	sort.Slice(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		switch {
		case a.Path != b.Path:
			return a.Path < b.Path
		case a.Line != b.Line:
			return a.Line < b.Line
		case a.Col != b.Col:
			return a.Col < b.Col
		case a.Rule != b.Rule:
			return a.Rule < b.Rule
		}
		return a.Message < b.Message
	})
	out := fs[:0]
	for i, f := range fs {
		if i > 0 && f == fs[i-1] {
			continue
		}
		out = append(out, f)
	}
	if out == nil {
		out = []Finding{}
	}
	return out
}

// sanitize makes interpreter text safe to print on one line.
func sanitize(s string) string {
	const n = 300
	var b strings.Builder
	for i, r := range s {
		if i >= n {
			b.WriteString("...")
			break
		}
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			r = ' '
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}
