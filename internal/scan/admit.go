package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"cacheon/internal/bundle"
	"cacheon/internal/fault"
	"cacheon/internal/sandbox"
	"cacheon/internal/slot"
)

// RuleManifest is the rule of a missing or invalid manifest in Check.
const RuleManifest = "manifest"

// Config is what a whole-bundle scan needs besides the bundle.
type Config struct {
	// Slots checks the manifest.
	Slots *slot.Catalog
	// Python parses the sources ("" = python3 on PATH, resolved).
	Python string
	// Install, when set, is Python's installation as the caller already
	// inspected it (sandbox.InspectPython), so that one verify job asks the
	// interpreter where it lives once; nil = the scan asks.
	Install *sandbox.PythonInstall
	// Policy is the arena policy (DefaultPolicy when zero).
	Policy Policy
	// ScratchRoot holds the private directory an archive is extracted into
	// (CheckArchive; "" = the system temp directory).
	ScratchRoot string
}

func (c Config) policy() Policy {
	if c.Policy.AllowedImports == nil {
		return DefaultPolicy()
	}
	return c.Policy
}

// Check scans the bundle directory dir as a miner runs it: the manifest is
// loaded and checked (a missing or invalid one is a finding of rule
// "manifest"; the tree is still scanned), then the file tree and every
// Python source. Findings are sorted by path; Report.Info says what the
// metadata carries that is ignored. dir may also be a .tar.gz archive of a
// bundle, scanned with CheckArchive.
func Check(ctx context.Context, dir string, c Config) (*Report, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	if !st.IsDir() {
		if st.Mode().IsRegular() && IsArchive(dir) {
			return CheckArchive(ctx, dir, c)
		}
		return nil, fault.CandidateErr(fmt.Errorf("scan %s: not a bundle: want a directory or a .tar.gz archive", dir))
	}
	return checkDir(ctx, dir, c)
}

// checkDir is Check on a directory.
func checkDir(ctx context.Context, dir string, c Config) (*Report, error) {
	in := Input{Root: dir, Python: c.Python, Install: c.Install}
	var findings []Finding
	var info []Info
	if _, err := os.Lstat(filepath.Join(dir, bundle.ManifestName)); errors.Is(err, fs.ErrNotExist) {
		findings = append(findings, Finding{Path: bundle.ManifestName, Rule: RuleManifest,
			Message: "missing: a bundle has a manifest.toml at its root (is " + dir + " a bundle?)"})
	} else if err == nil {
		b, err := bundle.Load(dir, c.Slots)
		if err != nil {
			f := Finding{Path: bundle.ManifestName, Rule: RuleManifest, Message: err.Error()}
			var me *bundle.ManifestError
			if errors.As(err, &me) {
				f.Line, f.Col = me.Line, me.Col
			}
			findings = append(findings, f)
		} else {
			declare(&in, b)
			info = notes(b)
		}
	}
	r, err := Scan(ctx, in, c.policy())
	if err != nil {
		return nil, err
	}
	r.Info = info
	r.Findings = append(findings, r.Findings...)
	sort.SliceStable(r.Findings, func(i, j int) bool { return r.Findings[i].Path < r.Findings[j].Path })
	return r, nil
}

// notes lists, once per metadata file, the notes of how the manifest's
// rows read it (bundle.Op.Notes).
func notes(b *bundle.Bundle) []Info {
	var out []Info
	seen := map[string]bool{}
	for _, op := range b.Manifest.Ops {
		for _, n := range op.Notes {
			if k := op.Metadata + "\x00" + n; !seen[k] {
				seen[k] = true
				out = append(out, Info{Path: op.Metadata, Message: n})
			}
		}
	}
	return out
}

// declare fills in what the manifest declares.
func declare(in *Input, b *bundle.Bundle) {
	in.HasManifest = true
	seen := map[string]bool{}
	for _, op := range b.Manifest.Ops {
		if !seen[op.Source] {
			in.Sources = append(in.Sources, op.Source)
			seen[op.Source] = true
		}
		in.CUDASources = append(in.CUDASources, op.CUDASources...)
		if op.Metadata != "" && !seen[op.Metadata] {
			in.Metadata = append(in.Metadata, op.Metadata)
			seen[op.Metadata] = true
		}
	}
}

// Admitted is a staged bundle that passed the scan: the only form of a
// bundle that verify and the engine run. Only Admit makes one, so no code
// path can run a bundle the scan has not cleared.
type Admitted struct {
	staged *bundle.Staged
}

// Bundle is the admitted copy.
func (a *Admitted) Bundle() *bundle.Bundle { return a.staged.Bundle }

// Dir is the admitted copy's directory.
func (a *Admitted) Dir() string { return a.staged.Bundle.Dir }

// ContentHash is the admitted copy's content hash.
func (a *Admitted) ContentHash() string { return a.staged.ContentHash }

// Origin is where the bundle was staged from, as given.
func (a *Admitted) Origin() string { return a.staged.Origin }

// OriginDir is the absolute origin directory ("" for an archive).
func (a *Admitted) OriginDir() string { return a.staged.OriginDir }

// FindingsError is returned by Admit for a bundle with findings.
type FindingsError struct {
	Findings []Finding
}

func (e *FindingsError) Error() string {
	return fmt.Sprintf("%d scan finding(s)", len(e.Findings))
}

// Admit scans a staged bundle's copy — the code that will run — and admits
// it when there is no finding. When it was staged from a directory that
// holds something its copy leaves out (symlinks, caches, special files),
// the origin is scanned too and its findings are the ones reported, so a
// miner sees what to fix in the tree they wrote. Findings are a
// *FindingsError; other errors mean the scan could not be done.
func Admit(ctx context.Context, s *bundle.Staged, c Config) (*Admitted, error) {
	in := Input{Root: s.Bundle.Dir, Python: c.Python, Install: c.Install}
	declare(&in, s.Bundle)
	rep, err := Scan(ctx, in, c.policy())
	if err != nil {
		return nil, err
	}
	if s.OriginDir != "" {
		omitted, err := bundle.Omitted(s.OriginDir)
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		if len(omitted) > 0 {
			orig, err := Check(ctx, s.OriginDir, c)
			if err != nil {
				return nil, err
			}
			if len(orig.Findings) > 0 {
				return nil, &FindingsError{Findings: orig.Findings}
			}
		}
	}
	if len(rep.Findings) > 0 {
		return nil, &FindingsError{Findings: rep.Findings}
	}
	return &Admitted{staged: s}, nil
}
