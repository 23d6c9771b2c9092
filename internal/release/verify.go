package release

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"cacheon/internal/product"
)

// Failure is a verification failure: the file that is wrong (relative to
// the release directory), the field within it where that applies, and
// why.
type Failure struct {
	File   string `json:"file"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

// Error is "file: field: reason" (without the field when there is none).
func (f *Failure) Error() string {
	if f.Field != "" {
		return f.File + ": " + f.Field + ": " + f.Reason
	}
	return f.File + ": " + f.Reason
}

func fail(file, field, format string, args ...any) error {
	return &Failure{File: file, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Contributed is one contribution of a verified release.
type Contributed struct {
	Target      string `json:"target"`
	Contributor string `json:"contributor"`
	Proposal    string `json:"proposal"`
	Crown       string `json:"crown"`
	Integration string `json:"integration"`
	Reviewer    string `json:"reviewer"`
}

// Report describes a release that passed its checks.
type Report struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	Release    string `json:"release"`
	Descriptor string `json:"descriptor"`
	Tree       string `json:"tree"`
	// KeyID is the key whose signature verified (empty when unsigned).
	KeyID         string        `json:"keyid,omitempty"`
	Files         int           `json:"files"`
	Contributions []Contributed `json:"contributions"`
}

// Check verifies everything in a release directory except the signature:
// every digest is recomputed from the bytes on disk and every contribution
// must be covered by exactly one integration record whose selected payload
// the tree preserves. Sign uses it before signing.
func Check(dir string) (Report, error) {
	if err := checkLayout(dir, false); err != nil {
		return Report{}, err
	}
	desc, err := os.ReadFile(filepath.Join(dir, DescriptorFile))
	if err != nil {
		return Report{}, fail(DescriptorFile, "", "%v", err)
	}
	return check(dir, desc)
}

// Sign checks the release in dir and signs its descriptor with priv,
// writing the DSSE envelope to descriptor.dsse.json (replacing any earlier
// signature).
func Sign(dir string, priv ed25519.PrivateKey) (Report, error) {
	rep, err := Check(dir)
	if err != nil {
		return Report{}, fmt.Errorf("sign: %w", err)
	}
	desc, err := os.ReadFile(filepath.Join(dir, DescriptorFile))
	if err != nil {
		return Report{}, fmt.Errorf("sign: %w", err)
	}
	if sum := sha256.Sum256(desc); hex.EncodeToString(sum[:]) != rep.Descriptor {
		return Report{}, fmt.Errorf("sign: %s changed while it was checked", DescriptorFile)
	}
	env := SignEnvelope(priv, PayloadType, desc)
	data, err := env.Marshal()
	if err != nil {
		return Report{}, fmt.Errorf("sign: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".sign-*")
	if err != nil {
		return Report{}, fmt.Errorf("sign: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return Report{}, fmt.Errorf("sign: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Report{}, fmt.Errorf("sign: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return Report{}, fmt.Errorf("sign: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, SignatureFile)); err != nil {
		return Report{}, fmt.Errorf("sign: %w", err)
	}
	rep.KeyID = KeyID(priv.Public().(ed25519.PublicKey))
	return rep, nil
}

// Verify verifies a signed release offline against a caller-supplied public
// key: the DSSE signature over the descriptor, then everything Check
// checks. It needs nothing but the release directory and the key — no
// network, no chain, no state directory. A failure is a *Failure naming
// the file (and field) that is wrong.
func Verify(dir string, pub ed25519.PublicKey) (Report, error) {
	if err := checkLayout(dir, true); err != nil {
		return Report{}, err
	}
	envBytes, err := os.ReadFile(filepath.Join(dir, SignatureFile))
	if err != nil {
		return Report{}, fail(SignatureFile, "", "%v", err)
	}
	env, err := ReadEnvelope(envBytes)
	if err != nil {
		return Report{}, fail(SignatureFile, "", "%v", err)
	}
	payload, err := env.Verify(pub, PayloadType)
	if err != nil {
		return Report{}, fail(SignatureFile, "", "%v", err)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, DescriptorFile))
	if err != nil {
		return Report{}, fail(DescriptorFile, "", "%v", err)
	}
	if err := equalBytes(onDisk, payload); err != nil {
		return Report{}, fail(DescriptorFile, "", "differs from the signed descriptor (%v)", err)
	}
	rep, err := check(dir, payload)
	if err != nil {
		return Report{}, err
	}
	rep.KeyID = KeyID(pub)
	return rep, nil
}

// checkLayout refuses a release directory with anything but the known
// entries (the signature only when signed is true, optional otherwise).
func checkLayout(dir string, signed bool) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fail(".", "", "%v", err)
	}
	have := map[string]bool{}
	for _, e := range ents {
		have[e.Name()] = true
		switch e.Name() {
		case TreeDir:
			if !e.IsDir() {
				return fail(TreeDir, "", "is not a directory")
			}
		case TreeFile, TarFile, SBOMFile, DescriptorFile, SignatureFile:
			if !e.Type().IsRegular() {
				return fail(e.Name(), "", "is not a regular file")
			}
		default:
			return fail(e.Name(), "", "is not part of a release directory")
		}
	}
	for _, n := range []string{TreeDir, TreeFile, TarFile, SBOMFile, DescriptorFile} {
		if !have[n] {
			return fail(n, "", "missing")
		}
	}
	if signed && !have[SignatureFile] {
		return fail(SignatureFile, "", "missing: the release is not signed (run cacheon release sign)")
	}
	return nil
}

// fieldOf splits a reader error into the JSON path it names, if any.
func fieldOf(err error) (string, string) {
	msg := err.Error()
	if i := strings.Index(msg, "$."); i >= 0 {
		rest := msg[i+2:]
		if j := strings.Index(rest, ": "); j >= 0 {
			return rest[:j], rest[j+2:]
		}
	}
	return "", msg
}

func readFail(file string, err error) error {
	field, reason := fieldOf(err)
	return fail(file, field, "%s", reason)
}

// integrationName matches the file name of an integration record.
func integrationName() *regexp.Regexp {
	return regexp.MustCompile(`^` + IntegrationsDir + `/([0-9a-f]{64})\.json$`)
}

// check verifies the contents of a release directory against the
// descriptor bytes desc.
func check(dir string, desc []byte) (Report, error) {
	d, descDigest, err := product.Decode[Descriptor](desc)
	if err != nil {
		return Report{}, readFail(DescriptorFile, err)
	}

	// The listing, bound by the descriptor, and the tree, re-hashed.
	tb, err := os.ReadFile(filepath.Join(dir, TreeFile))
	if err != nil {
		return Report{}, fail(TreeFile, "", "%v", err)
	}
	listing, treeDigest, err := product.Decode[TreeListing](tb)
	if err != nil {
		return Report{}, readFail(TreeFile, err)
	}
	if treeDigest != d.Tree {
		return Report{}, fail(TreeFile, "", "digest %s is not the descriptor's tree digest %s", treeDigest, d.Tree)
	}
	got, err := product.ScanTree(filepath.Join(dir, TreeDir), nil)
	if err != nil {
		var ee *product.EntryError
		if errors.As(err, &ee) {
			return Report{}, fail(TreeDir+"/"+ee.Path, "", "%v", ee.Err)
		}
		return Report{}, fail(TreeDir, "", "%v", err)
	}
	if diffs := product.CompareListings(listing.Files, got); len(diffs) > 0 {
		reason := diffs[0].Reason
		if len(diffs) > 1 {
			reason += fmt.Sprintf(" (and %d more differences)", len(diffs)-1)
		}
		return Report{}, fail(TreeDir+"/"+diffs[0].Path, "", "%s", reason)
	}
	files := listing.Files

	// The tar: same files, deterministic headers, and the bound hash.
	if err := checkTarFile(filepath.Join(dir, TarFile), files, d.Tar); err != nil {
		return Report{}, err
	}

	// The release manifest inside the tree.
	manifestFile := TreeDir + "/" + ManifestPath
	mb, err := os.ReadFile(filepath.Join(dir, TreeDir, ManifestPath))
	if err != nil {
		return Report{}, fail(manifestFile, "", "%v", err)
	}
	m, md, err := product.Decode[product.ReleaseManifest](mb)
	if err != nil {
		return Report{}, readFail(manifestFile, err)
	}
	if md != d.Release {
		return Report{}, fail(DescriptorFile, "release", "%s is not the digest of %s (%s)", d.Release, manifestFile, md)
	}
	if m.Name != d.Name || m.Version != d.Version {
		return Report{}, fail(DescriptorFile, "name", "%s %s is not the release manifest's %s %s", d.Name, d.Version, m.Name, m.Version)
	}

	// The integration records, each named by its digest.
	records := map[string]product.IntegrationRecord{}
	re := integrationName()
	sourceDirs := map[string]bool{}
	for _, s := range m.Sources {
		sourceDirs[SourcesDir+"/"+s.Name+"/"] = true
	}
	for _, f := range files {
		switch {
		case f.Path == ManifestPath:
		case strings.HasPrefix(f.Path, IntegrationsDir+"/"):
			mt := re.FindStringSubmatch(f.Path)
			if mt == nil {
				return Report{}, fail(TreeDir+"/"+f.Path, "", "is not named DIGEST.json")
			}
			rb, err := os.ReadFile(filepath.Join(dir, TreeDir, filepath.FromSlash(f.Path)))
			if err != nil {
				return Report{}, fail(TreeDir+"/"+f.Path, "", "%v", err)
			}
			r, rd, err := product.Decode[product.IntegrationRecord](rb)
			if err != nil {
				return Report{}, readFail(TreeDir+"/"+f.Path, err)
			}
			if rd != mt[1] {
				return Report{}, fail(TreeDir+"/"+f.Path, "", "holds record %s, not %s", rd, mt[1])
			}
			records[rd] = r
		default:
			if !slices.ContainsFunc(keys(sourceDirs), func(p string) bool { return strings.HasPrefix(f.Path, p) }) {
				return Report{}, fail(TreeDir+"/"+f.Path, "", "is not part of the release (neither the manifest, an integration record nor a listed source)")
			}
		}
	}
	if err := m.CheckCoverage(records); err != nil {
		return Report{}, readFail(manifestFile, fmt.Errorf("$.payload.%w", err))
	}

	// The reviewed sources, and the crowned payloads preserved in them.
	subs := map[string][]product.FileEntry{}
	for i, s := range m.Sources {
		sub := Subtree(files, SourcesDir+"/"+s.Name)
		sd, err := product.SourceDigest(sub)
		if err != nil {
			return Report{}, fail(TreeDir+"/"+SourcesDir+"/"+s.Name, "", "%v", err)
		}
		if sd != s.Digest {
			return Report{}, fail(TreeDir+"/"+SourcesDir+"/"+s.Name, "", "tree digest %s is not the release manifest's sources[%d].digest %s", sd, i, s.Digest)
		}
		subs[s.Name] = sub
	}
	var contributed []Contributed
	for _, c := range m.Contributions {
		r := records[c.Integration]
		if err := product.CheckPreserved(r.CrownRecord.SelectedPayload, c.Prefix, subs[c.Source]); err != nil {
			file := TreeDir + "/" + SourcesDir + "/" + c.Source
			var pe *product.PreserveError
			if errors.As(err, &pe) {
				file += "/" + pe.SourcePath
			}
			return Report{}, fail(file, "", "does not preserve the crowned selected payload of %s: %v", c.Target, err)
		}
		contributed = append(contributed, Contributed{
			Target: c.Target, Contributor: c.Attribution.Contributor, Proposal: c.Attribution.Proposal,
			Crown: c.Crown, Integration: c.Integration, Reviewer: r.Review.Reviewer,
		})
	}

	// The SBOM, re-derived.
	sb, err := os.ReadFile(filepath.Join(dir, SBOMFile))
	if err != nil {
		return Report{}, fail(SBOMFile, "", "%v", err)
	}
	sbom, sbomDigest, err := product.Decode[SBOM](sb)
	if err != nil {
		return Report{}, readFail(SBOMFile, err)
	}
	want, err := NewSBOM(&m, records)
	if err != nil {
		return Report{}, fail(SBOMFile, "", "%v", err)
	}
	if field, ok := diffSBOM(sbom, want); !ok {
		return Report{}, fail(SBOMFile, field, "differs from the SBOM the release manifest and its integration records imply")
	}
	if sbomDigest != d.SBOM {
		return Report{}, fail(DescriptorFile, "sbom", "%s is not the digest of %s (%s)", d.SBOM, SBOMFile, sbomDigest)
	}
	if contributed == nil {
		contributed = []Contributed{}
	}
	return Report{
		Name: m.Name, Version: m.Version, Release: md, Descriptor: descDigest, Tree: treeDigest,
		Files: len(files), Contributions: contributed,
	}, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkTarFile checks the engine tar against the listing and the
// descriptor's hash and size.
func checkTarFile(path string, files []product.FileEntry, want TarRef) error {
	f, err := os.Open(path)
	if err != nil {
		return fail(TarFile, "", "%v", err)
	}
	defer f.Close()
	h := sha256.New()
	cw := &countingWriter{w: h}
	tee := io.TeeReader(f, cw)
	if err := CheckTar(tee, files); err != nil {
		return fail(TarFile, "", "%v", err)
	}
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fail(TarFile, "", "%v", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.SHA256 || cw.n != want.Size {
		return fail(TarFile, "", "sha256 %s and size %d are not the descriptor's tar %s, %d", got, cw.n, want.SHA256, want.Size)
	}
	return nil
}

// diffSBOM names the first field where got differs from want.
func diffSBOM(got, want SBOM) (string, bool) {
	switch {
	case got.Release != want.Release:
		return "release", false
	case got.Name != want.Name:
		return "name", false
	case got.Version != want.Version:
		return "version", false
	}
	for i := range max(len(got.Components), len(want.Components)) {
		f := fmt.Sprintf("components[%d]", i)
		if i >= len(got.Components) || i >= len(want.Components) {
			return f, false
		}
		g, w := got.Components[i], want.Components[i]
		for _, c := range []struct{ name, g, w string }{
			{"kind", g.Kind, w.Kind}, {"name", g.Name, w.Name}, {"version", g.Version, w.Version},
			{"digest", g.Digest, w.Digest}, {"provenance", g.Provenance, w.Provenance},
		} {
			if c.g != c.w {
				return f + "." + c.name, false
			}
		}
	}
	return "", true
}
