// Package fingerprint computes a bundle's copy fingerprint: a digest of its
// selected payload that ignores what a copier changes for free — comments,
// formatting, docstrings and local names — and changes with any real code
// change (a constant, an operator, a call).
//
// What it covers. Every Python file of the bundle (on an admitted bundle
// these are exactly the rows' sources and the bundle-local modules they
// import: the scan refuses any other Python file as undeclared), every
// declared CUDA source, and the manifest's meaning: each [[ops]] row's
// slot, variant, entry, prepare, dtypes, architectures and capability
// domain (the metadata file's meaning, not its bytes). Left out: the
// bundle id, the [competition] table, manifest comments and formatting,
// metadata formatting, documentation files.
//
// How files are named. A row's source is named by its role — "source#k",
// k the order of first use over the rows sorted by (slot, variant) — and
// likewise a CUDA source ("cuda#k"); so renaming an op's file and its
// manifest reference leaves the fingerprint alone. Every other Python file
// is named by its bundle path, which its importers spell in their import
// statements anyway: renaming a helper module changes the fingerprint.
//
// How Python is normalized. python/cacheon_runtime/astnorm.py, run inside
// the sandbox through internal/pyparse like the scan's parser, parses each
// file with ast (nothing is executed), drops string-constant statements
// (docstrings), renames local names canonically in order of first
// occurrence per scope and writes a canonical dump that is the same on
// every supported interpreter. Go decodes that output strictly and within
// bounds (decode.go) and hashes it. CUDA sources are hashed without their
// comments and layout (cnorm.go).
//
// The fingerprint is canon.Digest("cacheon.copy_fingerprint", 1, …) over
// the rows and the per-file SHA-256 of the normalized dumps.
package fingerprint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"sort"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/canon"
	"cacheon/internal/capability"
	"cacheon/internal/fault"
	"cacheon/internal/nofollow"
	"cacheon/internal/pyparse"
	"cacheon/internal/slot"
)

// Domain is the canon digest domain of the copy fingerprint.
const Domain = "cacheon.copy_fingerprint"

const schema = 1

// Bounds on what is fingerprinted (the scan's bounds on Python sources).
const (
	maxSourceBytes = 1 << 20
	maxSources     = 256
	maxTotalBytes  = 16 << 20
	maxStdout      = 128 << 20
	// DefaultTimeout bounds one Fingerprint when Config.Timeout is zero.
	DefaultTimeout = 30 * time.Second
)

// script is the normalizer inside python.Files().
var script = pyparse.Script{Name: "cacheon_runtime/astnorm.py"}

// Config configures a Fingerprinter.
type Config struct {
	// Slots loads the manifest (required).
	Slots *slot.Catalog
	// Python runs the normalizer ("" = python3 on PATH, resolved).
	Python string
	// Timeout bounds one Fingerprint (0 = DefaultTimeout).
	Timeout time.Duration
}

// Fingerprinter computes copy fingerprints.
type Fingerprinter struct {
	cfg Config
}

// New returns a Fingerprinter for cfg.
func New(cfg Config) *Fingerprinter {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Fingerprinter{cfg: cfg}
}

// row is a manifest row's meaning, as fingerprinted.
type row struct {
	Slot          string            `json:"slot"`
	Variant       string            `json:"variant"`
	Entry         string            `json:"entry"`
	Prepare       string            `json:"prepare,omitempty"`
	DTypes        []string          `json:"dtypes,omitempty"`
	Architectures []string          `json:"architectures,omitempty"`
	Domain        capability.Domain `json:"domain"`
	Source        string            `json:"source"`
	CUDA          []string          `json:"cuda,omitempty"`
}

// file is one fingerprinted file: its name (role or path) and the SHA-256
// of its normalized dump (Python) or normalized text (CUDA).
type file struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // "python" or "cuda"
	SHA256 string `json:"sha256"`
}

// payload is what the fingerprint digests.
type payload struct {
	Ops   []row  `json:"ops"`
	Files []file `json:"files"`
}

// source is a file to read and name.
type source struct {
	path, name string
	data       []byte
}

// Fingerprint returns the copy fingerprint of the bundle in bundleDir (64
// lowercase hex digits). A bundle that does not load or whose Python does
// not parse is the candidate's fault (fault.CandidateErr); a missing or
// failing interpreter is infrastructure (fault.InfraErr).
func (f *Fingerprinter) Fingerprint(ctx context.Context, bundleDir string) (string, error) {
	if f.cfg.Slots == nil {
		return "", fmt.Errorf("fingerprint: no slot catalog")
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	b, err := bundle.Load(bundleDir, f.cfg.Slots)
	if err != nil {
		return "", fault.CandidateErr(fmt.Errorf("fingerprint: %w", err))
	}
	rows, names, cuda := roles(b)
	py, err := pythonFiles(b.Dir, names)
	if err != nil {
		return "", err
	}
	p := payload{Ops: rows, Files: []file{}}
	if len(py) > 0 {
		sums, err := f.normalize(ctx, py)
		if err != nil {
			return "", err
		}
		for i, s := range py {
			p.Files = append(p.Files, file{Name: s.name, Kind: "python", SHA256: sums[i]})
		}
	}
	for _, c := range cuda {
		data, err := readFile(b.Dir, c.path, maxSourceBytes)
		if err != nil {
			return "", fault.CandidateErr(fmt.Errorf("fingerprint: %w", err))
		}
		p.Files = append(p.Files, file{Name: c.name, Kind: "cuda", SHA256: sha([]byte(normalizeC(data)))})
	}
	sort.Slice(p.Files, func(i, j int) bool { return p.Files[i].Name < p.Files[j].Name })
	d, err := canon.Digest(Domain, schema, p)
	if err != nil {
		return "", fmt.Errorf("fingerprint: digest: %w", err)
	}
	return d, nil
}

// roles returns the manifest's rows sorted by (slot, variant), naming each
// source and CUDA file by its role, and the names given: path → name for
// the Python sources, and the CUDA sources in order of first use.
func roles(b *bundle.Bundle) ([]row, map[string]string, []source) {
	ops := append([]bundle.Op(nil), b.Manifest.Ops...)
	sort.SliceStable(ops, func(i, j int) bool {
		if ops[i].Slot != ops[j].Slot {
			return ops[i].Slot < ops[j].Slot
		}
		return ops[i].Variant < ops[j].Variant
	})
	names := map[string]string{}
	cudaNames := map[string]string{}
	var cuda []source
	rows := make([]row, 0, len(ops))
	for _, op := range ops {
		if _, ok := names[op.Source]; !ok {
			names[op.Source] = fmt.Sprintf("source#%d", len(names))
		}
		r := row{Slot: op.Slot, Variant: op.Variant, Entry: op.Entry, Prepare: op.Prepare,
			DTypes: op.DTypes, Architectures: op.Architectures, Domain: op.Domain, Source: names[op.Source]}
		for _, c := range op.CUDASources {
			if _, ok := cudaNames[c]; !ok {
				cudaNames[c] = fmt.Sprintf("cuda#%d", len(cudaNames))
				cuda = append(cuda, source{path: c, name: cudaNames[c]})
			}
			r.CUDA = append(r.CUDA, cudaNames[c])
		}
		rows = append(rows, r)
	}
	return rows, names, cuda
}

// pythonFiles reads every Python file the content hash covers, named by
// role (a row's source) or by path, within the bounds.
func pythonFiles(dir string, names map[string]string) ([]source, error) {
	files, err := bundle.Files(dir)
	if err != nil {
		return nil, fmt.Errorf("fingerprint: list files: %w", err)
	}
	var out []source
	total := 0
	for _, fl := range files {
		if path.Ext(fl.Path) != ".py" {
			continue
		}
		if len(out) == maxSources {
			return nil, fault.CandidateErr(fmt.Errorf("fingerprint: more than %d Python files", maxSources))
		}
		data, err := readFile(dir, fl.Path, maxSourceBytes)
		if err != nil {
			return nil, fault.CandidateErr(fmt.Errorf("fingerprint: %w", err))
		}
		if total += len(data); total > maxTotalBytes {
			return nil, fault.CandidateErr(fmt.Errorf("fingerprint: the Python files exceed %d bytes together", maxTotalBytes))
		}
		name, ok := names[fl.Path]
		if !ok {
			name = "module:" + fl.Path
		}
		out = append(out, source{path: fl.Path, name: name, data: data})
	}
	return out, nil
}

// readFile reads a bundle file without following a final symlink, at most
// limit bytes.
func readFile(dir, rel string, limit int64) ([]byte, error) {
	fh, err := nofollow.Open(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", rel, limit)
	}
	return data, nil
}

// wireFile is one file of the normalizer's request (latin-1, see
// pyparse.Latin1).
type wireFile struct {
	Path   string `json:"path"`
	Source string `json:"source"`
}

// normalize runs astnorm once over srcs in the sandbox and returns the
// SHA-256 of each file's normalized dump, in order.
func (f *Fingerprinter) normalize(ctx context.Context, srcs []source) ([]string, error) {
	req := struct {
		Files []wireFile `json:"files"`
	}{Files: make([]wireFile, len(srcs))}
	paths := make([]string, len(srcs))
	for i, s := range srcs {
		req.Files[i] = wireFile{Path: s.path, Source: pyparse.Latin1(s.data)}
		paths[i] = s.path
	}
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, fmt.Errorf("fingerprint: encode request: %w", err)
	}
	r, err := pyparse.New(ctx, f.cfg.Python, script)
	if err != nil {
		return nil, fault.InfraErr(fmt.Errorf("fingerprint: %w", err))
	}
	defer r.Close()
	res, err := r.Run(ctx, in.Bytes(), maxStdout)
	if err != nil {
		return nil, fault.InfraErr(fmt.Errorf("fingerprint: %w", err))
	}
	if res.Overflow {
		return nil, fault.InfraErr(fmt.Errorf("fingerprint: the normalizer wrote more than %d bytes", maxStdout))
	}
	if res.ExitErr != nil {
		return nil, fault.InfraErr(fmt.Errorf("fingerprint: run normalizer %s: %w (stderr: %s)", r.Python(), res.ExitErr, pyparse.Tail(res.Stderr)))
	}
	results, err := decodeOutput(res.Stdout, paths)
	if err != nil {
		return nil, fault.InfraErr(fmt.Errorf("fingerprint: %w", err))
	}
	sums := make([]string, len(results))
	for i, nr := range results {
		if nr.err != "" {
			return nil, fault.CandidateErr(fmt.Errorf("fingerprint: %s cannot be normalized: %s", paths[i], nr.err))
		}
		sums[i] = sha([]byte(nr.norm))
	}
	return sums, nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
