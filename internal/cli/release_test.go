package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"cacheon/internal/product"
	"cacheon/internal/product/producttest"
)

var updateReleaseScripts = flag.Bool("update-release-scripts", false, "regenerate the files of testdata/script/release_e2e.txtar")

const releaseScript = "testdata/script/release_e2e.txtar"

// releaseScriptFiles returns the files the release end-to-end script runs
// on: a sample crown (canonical, as settlement writes it) over a genesis
// stack, a reviewed source tree that preserves its payload, a review, a
// release base, and bad inputs. (txtar ends every file with a newline; a
// canonical object file may end with one.)
func releaseScriptFiles(t *testing.T) []txtar.File {
	t.Helper()
	const target = "activation.silu_and_mul"
	cat := producttest.Catalog(t)
	crown := producttest.Crown(t, cat, producttest.Genesis(t, cat), target, "miner-1")
	crownBytes, _, err := product.Encode(&crown)
	if err != nil {
		t.Fatal(err)
	}
	pretty := func(v any) []byte {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return append(b, '\n')
	}
	var files []txtar.File
	src := producttest.SourceFiles(producttest.Payload(target), producttest.Prefix)
	names := make([]string, 0, len(src))
	for p := range src {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		files = append(files, txtar.File{Name: "src/" + p, Data: []byte(src[p])})
	}
	kernel := []byte(producttest.Payload(target)["kernel.py"])
	kernel[0] ^= 0x01
	var env map[string]any
	if err := json.Unmarshal(crownBytes, &env); err != nil {
		t.Fatal(err)
	}
	review := producttest.Review()
	bad := strings.Replace(string(pretty(review)), `"reviewer":`, `"score": 0.5, "reviewd_by": "x", "reviewer":`, 1)
	files = append(files,
		txtar.File{Name: "tampered/kernel.py", Data: kernel},
		txtar.File{Name: "review.json", Data: pretty(review)},
		txtar.File{Name: "bad-review.json", Data: []byte(bad)},
		txtar.File{Name: "base.json", Data: pretty(producttest.Base(t))},
		txtar.File{Name: "crown-pretty.json", Data: pretty(env)},
		txtar.File{Name: "crown.json", Data: crownBytes},
	)
	return files
}

// TestReleaseScriptFixtures keeps the end-to-end script's files in step
// with the sample objects (their digests follow the slot contracts).
func TestReleaseScriptFixtures(t *testing.T) {
	data, err := os.ReadFile(releaseScript)
	if err != nil {
		t.Fatal(err)
	}
	ar := txtar.Parse(data)
	want := releaseScriptFiles(t)
	if *updateReleaseScripts {
		ar.Files = want
		if err := os.WriteFile(releaseScript, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if len(ar.Files) != len(want) {
		t.Fatalf("%s has %d files, want %d; regenerate with -update-release-scripts", releaseScript, len(ar.Files), len(want))
	}
	for i, f := range ar.Files {
		w := want[i].Data
		if len(w) > 0 && w[len(w)-1] != '\n' {
			w = append(w, '\n') // txtar ends every file with a newline
		}
		if f.Name != want[i].Name || !bytes.Equal(f.Data, w) {
			t.Fatalf("%s: file %s is out of date; regenerate with go test ./internal/cli -run TestReleaseScriptFixtures -update-release-scripts", releaseScript, want[i].Name)
		}
	}
}

// TestReleaseCommandsAreChainIndependent: the release and integrate
// commands import only product packages, and none of those depends on the
// chain, intake, settlement, weights or store packages. (The cli package
// as a whole also serves market commands, so the check is on these files'
// imports and their dependencies.)
func TestReleaseCommandsAreChainIndependent(t *testing.T) {
	allowed := []string{"cacheon/internal/release", "cacheon/internal/product", "cacheon/internal/target", "cacheon/internal/slot"}
	var pkgs []string
	for _, file := range []string{"release.go", "release_sign.go", "integrate.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, "cacheon/") {
				continue
			}
			if !slices.Contains(allowed, p) {
				t.Errorf("%s imports %s; the release commands may import only %v", file, p, allowed)
			}
			pkgs = append(pkgs, p)
		}
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not available")
	}
	out, err := exec.Command(gobin, append([]string{"list", "-deps"}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		for _, part := range strings.Split(d, "/") {
			if slices.Contains([]string{"chain", "intake", "settle", "settlement", "weights", "store"}, part) {
				t.Errorf("the release commands depend on market package %s", d)
			}
		}
	}
	if _, err := os.Stat(filepath.Join("testdata", "script", "release_e2e.txtar")); err != nil {
		t.Fatal(err)
	}
}
