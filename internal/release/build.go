package release

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"cacheon/internal/product"
)

// Names inside a release directory.
const (
	TreeDir        = "tree"
	TreeFile       = "tree.json"
	TarFile        = "engine.tar"
	SBOMFile       = "sbom.json"
	DescriptorFile = "descriptor.json"
	SignatureFile  = "descriptor.dsse.json"

	// ManifestPath, IntegrationsDir and SourcesDir are paths inside the
	// engine tree.
	ManifestPath    = "release.json"
	IntegrationsDir = "integrations"
	SourcesDir      = "sources"
)

// BuildInput is what a release is built from: the release manifest, the
// integration records covering its contributions, and the directories of
// its reviewed source trees (matched to the manifest's sources by digest).
type BuildInput struct {
	Manifest product.ReleaseManifest
	Records  []product.IntegrationRecord
	Sources  []string
	// Out is the release directory to create; it must not exist or be
	// empty.
	Out string
}

// Build materializes the release: the engine tree, its listing and tar, the
// SBOM and the descriptor. Every input is re-hashed before use; every
// contribution must be covered by exactly one of the records and its
// selected payload must be preserved byte for byte in its source tree. The
// directory appears at Out only when complete and self-verified.
func Build(in BuildInput) (Report, error) {
	m := in.Manifest
	manifestBytes, md, err := product.Encode(&m)
	if err != nil {
		return Report{}, fmt.Errorf("build: release manifest: %w", err)
	}
	records := map[string]product.IntegrationRecord{}
	var entries []Entry
	for i, r := range in.Records {
		data, d, err := product.Encode(&r)
		if err != nil {
			return Report{}, fmt.Errorf("build: integration record %d: %w", i+1, err)
		}
		if _, dup := records[d]; dup {
			return Report{}, fmt.Errorf("build: integration record %s given twice", d)
		}
		records[d] = r
		entries = append(entries, Entry{Path: IntegrationsDir + "/" + d + ".json", Mode: product.ModeFile, Data: data})
	}
	if err := m.CheckCoverage(records); err != nil {
		return Report{}, fmt.Errorf("build: release manifest %s: %w", md, err)
	}
	trees, err := matchSources(&m, in.Sources)
	if err != nil {
		return Report{}, fmt.Errorf("build: %w", err)
	}
	for _, c := range m.Contributions {
		l := trees[c.Source].listing
		if err := product.CheckPreserved(records[c.Integration].CrownRecord.SelectedPayload, c.Prefix, l); err != nil {
			return Report{}, fmt.Errorf("build: %s: source %s does not preserve the crowned selected payload: %w", c.Target, c.Source, err)
		}
	}
	entries = append(entries, Entry{Path: ManifestPath, Mode: product.ModeFile, Data: manifestBytes})
	for _, s := range m.Sources {
		t := trees[s.Name]
		entries = append(entries, TreeEntries(SourcesDir+"/"+s.Name, t.dir, t.listing)...)
	}
	sbom, err := NewSBOM(&m, records)
	if err != nil {
		return Report{}, fmt.Errorf("build: %w", err)
	}

	parent := filepath.Dir(filepath.Clean(in.Out))
	if err := checkOutput(in.Out); err != nil {
		return Report{}, fmt.Errorf("build: %w", &OutputError{err})
	}
	tmp, err := os.MkdirTemp(parent, ".cacheon-release-*")
	if err != nil {
		return Report{}, fmt.Errorf("build: %w", &OutputError{err})
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Report{}, fmt.Errorf("build: %w", err)
	}
	l, err := Materialize(filepath.Join(tmp, TreeDir), entries)
	if err != nil {
		return Report{}, fmt.Errorf("build: %w", err)
	}
	listing := TreeListing{Files: l}
	listingBytes, treeDigest, err := product.Encode(&listing)
	if err != nil {
		return Report{}, fmt.Errorf("build: tree listing: %w", err)
	}
	tarRef, err := writeTarFile(filepath.Join(tmp, TarFile), filepath.Join(tmp, TreeDir), l)
	if err != nil {
		return Report{}, fmt.Errorf("build: %w", err)
	}
	sbomBytes, sbomDigest, err := product.Encode(&sbom)
	if err != nil {
		return Report{}, fmt.Errorf("build: sbom: %w", err)
	}
	desc := Descriptor{
		Name: m.Name, Version: m.Version, Release: md, Tree: treeDigest,
		Tar:  tarRef,
		SBOM: sbomDigest,
	}
	descBytes, _, err := product.Encode(&desc)
	if err != nil {
		return Report{}, fmt.Errorf("build: descriptor: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{TreeFile, listingBytes}, {SBOMFile, sbomBytes}, {DescriptorFile, descBytes}} {
		p := filepath.Join(tmp, f.name)
		if err := writeNew(p, f.data, 0o644); err != nil {
			return Report{}, fmt.Errorf("build: %s: %w", f.name, err)
		}
		if err := os.Chtimes(p, epoch(), epoch()); err != nil {
			return Report{}, fmt.Errorf("build: %s: %w", f.name, err)
		}
	}
	rep, err := check(tmp, descBytes)
	if err != nil {
		return Report{}, fmt.Errorf("build: self-check: %w", err)
	}
	if err := os.Remove(in.Out); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Report{}, fmt.Errorf("build: %w", &OutputError{err})
	}
	if err := os.Rename(tmp, in.Out); err != nil {
		return Report{}, fmt.Errorf("build: %w", &OutputError{err})
	}
	return rep, nil
}

// OutputError is a release directory that cannot be created where Build
// was told to (it is not empty, or its parent is not writable): the
// caller's choice of output, not a fault of the inputs.
type OutputError struct{ Err error }

func (e *OutputError) Error() string { return "output: " + e.Err.Error() }
func (e *OutputError) Unwrap() error { return e.Err }

type sourceTree struct {
	dir     string
	listing []product.FileEntry
}

// matchSources scans every given directory and matches it to the
// manifest's sources by digest: each source needs exactly one tree, and
// every tree must be a source.
func matchSources(m *product.ReleaseManifest, dirs []string) (map[string]sourceTree, error) {
	byDigest := map[string]sourceTree{}
	for _, d := range dirs {
		l, err := product.ScanTree(d, product.SourceSkip)
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		sd, err := product.SourceDigest(l)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", d, err)
		}
		if prev, dup := byDigest[sd]; dup {
			return nil, fmt.Errorf("source %s: same tree (digest %s) as %s", d, sd, prev.dir)
		}
		byDigest[sd] = sourceTree{dir: d, listing: l}
	}
	out := map[string]sourceTree{}
	for i, s := range m.Sources {
		t, ok := byDigest[s.Digest]
		if !ok {
			return nil, fmt.Errorf("source %q: sources[%d].digest %s matches none of the given source trees", s.Name, i, s.Digest)
		}
		out[s.Name] = t
		delete(byDigest, s.Digest)
	}
	for d, t := range byDigest {
		return nil, fmt.Errorf("source %s: its digest %s is not a source of the release", t.dir, d)
	}
	return out, nil
}

// writeTarFile writes the deterministic tar of the tree to path (a new
// file, mode 0644, time zero) and returns its hash and size.
func writeTarFile(path, tree string, l []product.FileEntry) (TarRef, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return TarRef{}, err
	}
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(f, h)}
	err = WriteTar(cw, tree, l)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return TarRef{}, err
	}
	if err := os.Chmod(path, 0o644); err != nil {
		return TarRef{}, err
	}
	if err := os.Chtimes(path, epoch(), epoch()); err != nil {
		return TarRef{}, err
	}
	return TarRef{SHA256: hex.EncodeToString(h.Sum(nil)), Size: cw.n}, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

// Write counts what it passes on.
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// checkOutput accepts an output path that does not exist or is an empty
// directory.
func checkOutput(out string) error {
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(ents) > 0:
		return fmt.Errorf("%s is not empty", out)
	}
	return nil
}
