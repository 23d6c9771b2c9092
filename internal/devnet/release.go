package devnet

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"cacheon/arenas"
	"cacheon/internal/bundle"
	"cacheon/internal/node"
	"cacheon/internal/product"
	"cacheon/internal/release"
	"cacheon/internal/slot"
	"cacheon/internal/target"
	"cacheon/python"
)

// Release is the release the demo built from the crown.
type Release struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Dir         string `json:"dir"`
	Integration string `json:"integration"` // the integration record's digest
	Manifest    string `json:"manifest"`    // the release manifest's digest
	Descriptor  string `json:"descriptor"`  // the signed descriptor's digest
	KeyID       string `json:"key_id"`
}

// payloadPrefix is where the reviewed source keeps the crowned payload.
const payloadPrefix = "cacheon_engine/contrib/silu_and_mul"

// buildRelease does a maintainer's part with the crown, as `cacheon integrate`
// and `cacheon release manifest|build|sign|verify` do: the crowned
// proposal's archive is fetched from the URL its miner committed to and
// checked against the crowned content hash, the reviewed source tree holds
// the crowned payload byte for byte under payloadPrefix, the review
// approves it, the release manifest ships it, and the release is built,
// signed with a devnet key and verified with nothing but its public key.
// It reads nothing of the validator's but the crown record (over HTTP).
func buildRelease(ctx context.Context, info *Info, c node.Crown, archiveURL string) (*Release, error) {
	root := filepath.Join(info.Dir, "release")
	if err := os.RemoveAll(root); err != nil {
		return nil, fmt.Errorf("devnet release: %w", err)
	}
	src := filepath.Join(root, "src")
	dst := filepath.Join(src, filepath.FromSlash(payloadPrefix))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fmt.Errorf("devnet release: %w", err)
	}
	crowned := filepath.Join(root, "crowned")
	if err := fetchArchive(ctx, archiveURL, c.Record.Attribution.Proposal, crowned); err != nil {
		return nil, fmt.Errorf("devnet release: the crowned archive: %w", err)
	}
	for _, f := range c.Record.SelectedPayload.Files {
		data, err := os.ReadFile(filepath.Join(crowned, filepath.FromSlash(f.Path)))
		if err != nil {
			return nil, fmt.Errorf("devnet release: crowned payload: %w", err)
		}
		p := filepath.Join(dst, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("devnet release: %w", err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, fmt.Errorf("devnet release: %w", err)
		}
	}
	readme := "The devnet's engine source: the crowned silu_and_mul, reviewed and integrated under " + payloadPrefix + ".\n"
	if err := os.WriteFile(filepath.Join(src, "README.md"), []byte(readme), 0o644); err != nil {
		return nil, fmt.Errorf("devnet release: %w", err)
	}
	listing, srcDigest, err := product.ScanSource(src)
	if err != nil {
		return nil, fmt.Errorf("devnet release: %w", err)
	}
	rev := product.Review{Reviewer: "maintainer@devnet.invalid", Decision: product.DecisionApproved,
		Checks:  product.ReviewChecks{Reproduction: "pass", Correctness: "pass", Security: "pass", License: "pass", Compatibility: "pass"},
		Tests:   []product.TestResult{{Name: "cacheon verify (cpu)", Outcome: "pass"}},
		License: "Apache-2.0", Provenance: "the crowned proposal " + c.Record.Attribution.Proposal + ", unchanged",
		Notes: "devnet demo review"}
	rec, err := product.Integrate(c.Record, listing, payloadPrefix, rev)
	if err != nil {
		return nil, fmt.Errorf("devnet release: integrate: %w", err)
	}
	_, recDigest, err := product.Encode(&rec)
	if err != nil {
		return nil, fmt.Errorf("devnet release: %w", err)
	}
	ar, err := arenas.Resolve(info.Arena)
	if err != nil {
		return nil, fmt.Errorf("devnet release: %w", err)
	}
	ad, err := ar.Digest()
	if err != nil {
		return nil, fmt.Errorf("devnet release: %w", err)
	}
	slots, err := slot.NewCatalog()
	if err != nil {
		return nil, fmt.Errorf("devnet release: %w", err)
	}
	targets, err := target.NewCatalog(slots)
	if err != nil {
		return nil, fmt.Errorf("devnet release: %w", err)
	}
	base := product.ReleaseBase{Name: "cacheon-engine-devnet", Version: "0.0.1-devnet",
		Runtime:   product.RuntimePin{Name: "cacheon-runtime", Version: "devnet", Digest: python.Digest()},
		Model:     product.ModelIdentity{Name: info.Arena, Revision: "seeded weights", Digest: ad},
		Native:    product.NativeIdentity{Platform: "linux/cpu", Toolchain: "none", Digest: digestOf("no native code")},
		Reference: ad,
		Sources:   []product.BaseSource{{Name: "engine", Provenance: "the devnet's reviewed source tree"}}}
	m, err := product.NewRelease(targets, base, map[string]string{"engine": srcDigest}, []product.IntegrationRecord{rec})
	if err != nil {
		return nil, fmt.Errorf("devnet release: manifest: %w", err)
	}
	_, mDigest, err := product.Encode(&m)
	if err != nil {
		return nil, fmt.Errorf("devnet release: %w", err)
	}
	out := filepath.Join(root, "out")
	if err := os.RemoveAll(out); err != nil {
		return nil, fmt.Errorf("devnet release: %w", err)
	}
	if _, err := release.Build(release.BuildInput{Manifest: m, Records: []product.IntegrationRecord{rec}, Sources: []string{src}, Out: out}); err != nil {
		return nil, fmt.Errorf("devnet release: build: %w", err)
	}
	key, err := devKey(filepath.Join(info.Dir, "keys", "release.key"))
	if err != nil {
		return nil, err
	}
	if _, err := release.Sign(out, key); err != nil {
		return nil, fmt.Errorf("devnet release: sign: %w", err)
	}
	pub := key.Public().(ed25519.PublicKey)
	rep, err := release.Verify(out, pub)
	if err != nil {
		return nil, fmt.Errorf("devnet release: verify: %w", err)
	}
	return &Release{Name: rep.Name, Version: rep.Version, Dir: out, Integration: recDigest, Manifest: mDigest,
		Descriptor: rep.Descriptor, KeyID: release.KeyID(pub)}, nil
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// maxArchive bounds the crowned archive the demo downloads.
const maxArchive = 64 << 20

// fetchArchive downloads the archive at url and extracts it into dest,
// refusing it unless its content hash is want.
func fetchArchive(ctx context.Context, url, want, dest string) error {
	if url == "" {
		return errors.New("the validator's API names no archive URL for it")
	}
	body, err := getBody(ctx, &http.Client{Timeout: time.Minute}, url, maxArchive)
	if err != nil {
		return err
	}
	if _, err := bundle.Extract(ctx, bytes.NewReader(body), dest, bundle.DefaultExtractLimits(), want); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}
