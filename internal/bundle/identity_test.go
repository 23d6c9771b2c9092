package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestIdentityByHand recomputes the three contribution digests from literal
// canonical JSON, independently of canon and of the implementation.
func TestIdentityByHand(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"k/b.py": "bb", "k/a.py": "a", "metadata/m.json": "{}", "unrelated.py": "x"})

	payload, err := SelectedPayloadDigest(dir, []string{"metadata/m.json", "k/b.py", "k/a.py", "k/a.py"})
	if err != nil {
		t.Fatal(err)
	}
	wantPayload := sha(`{"domain":"cacheon.selected_payload","payload":[` +
		`{"path":"k/a.py","sha256":"` + sha("a") + `","size":1},` +
		`{"path":"k/b.py","sha256":"` + sha("bb") + `","size":2},` +
		`{"path":"metadata/m.json","sha256":"` + sha("{}") + `","size":2}` +
		`],"schema_version":1}`)
	if payload != wantPayload {
		t.Fatalf("selected payload %s, want %s", payload, wantPayload)
	}

	spec := sha("target spec")
	delta, err := SelectedDeltaDigest("activation.silu_and_mul", spec, payload)
	if err != nil {
		t.Fatal(err)
	}
	wantDelta := sha(`{"domain":"cacheon.selected_delta","payload":{"selected_payload":"` + payload +
		`","target":"activation.silu_and_mul","target_spec_digest":"` + spec + `"},"schema_version":1}`)
	if delta != wantDelta {
		t.Fatalf("selected delta %s, want %s", delta, wantDelta)
	}

	content := sha("content")
	attr, err := AttributionDigest(delta, "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY", content)
	if err != nil {
		t.Fatal(err)
	}
	wantAttr := sha(`{"domain":"cacheon.attribution","payload":{"content_hash":"` + content +
		`","miner":"5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY","selected_delta":"` + delta + `"},"schema_version":1}`)
	if attr != wantAttr {
		t.Fatalf("attribution %s, want %s", attr, wantAttr)
	}

	// Files outside the selection do not move the payload identity.
	writeTree(t, dir, map[string]string{"unrelated.py": "changed", "README.md": "new"})
	again, err := SelectedPayloadDigest(dir, []string{"k/a.py", "k/b.py", "metadata/m.json"})
	if err != nil || again != payload {
		t.Fatalf("payload moved with unrelated files: %s %v", again, err)
	}
}

func TestSelectedPayloadOfFixture(t *testing.T) {
	dir := filepath.Join("testdata", "bundles", "variants")
	b, err := Load(dir, catalog(t))
	if err != nil {
		t.Fatal(err)
	}
	paths, err := b.SelectedPaths([]string{"attention.sdpa"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := SelectedPayloadFiles(dir, paths)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || files[0].Path != "kernels/attention.py" || files[2].Path != "metadata/h64.json" {
		t.Fatalf("files = %+v", files)
	}
}

func TestIdentityRejects(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.py": "a", "__pycache__/x.py": "b"})
	good := sha("x")
	tests := []struct {
		name string
		fn   func() error
		want string
	}{
		{"no files", func() error { _, err := SelectedPayloadDigest(dir, nil); return err }, "no files selected"},
		{"escaping path", func() error { _, err := SelectedPayloadDigest(dir, []string{"../a.py"}); return err }, `".." components`},
		{"absolute path", func() error { _, err := SelectedPayloadDigest(dir, []string{"/etc/passwd"}); return err }, "absolute paths"},
		{"missing file", func() error { _, err := SelectedPayloadDigest(dir, []string{"b.py"}); return err }, "b.py does not exist"},
		{"excluded file", func() error { _, err := SelectedPayloadDigest(dir, []string{"__pycache__/x.py"}); return err }, "not covered by the content hash"},
		{"bad target", func() error { _, err := SelectedDeltaDigest("Bad Target", good, good); return err }, "is not a target name"},
		{"bad spec digest", func() error { _, err := SelectedDeltaDigest("a.b", "xyz", good); return err }, "target_spec_digest"},
		{"zero payload digest", func() error { _, err := SelectedDeltaDigest("a.b", good, strings.Repeat("0", 64)); return err }, "all-zero"},
		{"bad delta", func() error { _, err := AttributionDigest("nope", "miner", good); return err }, "selected_delta"},
		{"empty miner", func() error { _, err := AttributionDigest(good, "", good); return err }, "miner"},
		{"miner with space", func() error { _, err := AttributionDigest(good, "a b", good); return err }, "not printable ASCII"},
		{"bad content hash", func() error { _, err := AttributionDigest(good, "m", strings.ToUpper(good)); return err }, "content_hash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.fn()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want error containing %q", err, tt.want)
			}
		})
	}
}
