package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/slot"
	"cacheon/internal/target"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func catalog(t testing.TB) *slot.Catalog {
	t.Helper()
	c, err := slot.NewCatalog()
	if err != nil {
		t.Fatalf("slot catalog: %v", err)
	}
	return c
}

// writeTree creates files (slash paths → contents) under dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// goldenSummary is the stable rendering of a loaded bundle that the golden
// files record.
type goldenSummary struct {
	Manifest    Manifest `json:"manifest"`
	Crownable   bool     `json:"crownable"`
	Reason      string   `json:"not_crownable_reason,omitempty"`
	ContentHash string   `json:"content_hash"`
	Files       []string `json:"files"`
}

// TestLoadGolden loads every fixture bundle under testdata/bundles and
// compares a summary with testdata/bundles/NAME.golden.json.
// Regenerate with: go test ./internal/bundle -run TestLoadGolden -update
func TestLoadGolden(t *testing.T) {
	cat := catalog(t)
	dirs, err := filepath.Glob(filepath.Join("testdata", "bundles", "*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, dir := range dirs {
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			continue
		}
		n++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			b, err := Load(dir, cat)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			hash, err := ContentHash(dir)
			if err != nil {
				t.Fatal(err)
			}
			files, err := Files(dir)
			if err != nil {
				t.Fatal(err)
			}
			s := goldenSummary{Manifest: b.Manifest, Crownable: b.Manifest.Crownable(),
				Reason: b.Manifest.NotCrownableReason(), ContentHash: hash}
			for _, f := range files {
				s.Files = append(s.Files, f.Path)
			}
			got, err := json.MarshalIndent(s, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := dir + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("summary differs from %s:\n%s", golden, got)
			}
		})
	}
	if n < 3 {
		t.Fatalf("found %d fixture bundles, want at least 3", n)
	}
}

// baseFiles is a valid bundle that the rejection table mutates.
func baseFiles() map[string]string {
	return map[string]string{
		"kernels/a.py":            "def run(x, out):\n    pass\n",
		"kernels/b.py":            "def run(x, out):\n    pass\n",
		"kernels/moe.py":          "def prepare(w13, w2):\n    return None\n",
		"kernels/native.cu":       "__global__ void k() {}\n",
		"kernels/native.cuh":      "#pragma once\n",
		"metadata/t64.json":       `{"capabilities": {"num_tokens": {"max": 64}}}`,
		"metadata/t65.json":       `{"capabilities": {"num_tokens": {"min": 65}}}`,
		"metadata/t32.json":       `{"capabilities": {"num_tokens": {"max": 32}}}`,
		"metadata/world.json":     `{"capabilities": {"world_size": 2}}`,
		"metadata/bad.json":       `{"capabilities": {"head_dim": []}}`,
		"metadata/bf16.json":      `{"capabilities": {"dtype": "bf16"}}`,
		"metadata/h128.json":      `{"capabilities": {"head_dim": 128}}`,
		"metadata/op_rms.json":    `{"op": "norm.rmsnorm", "dtypes": ["bf16"]}`,
		"metadata/slot_gelu.json": `{"slot": "activation.gelu"}`,
		"metadata/upstream.json":  `{"op": "activation.silu_and_mul", "dtypes": [], "max_last_dim": 65536, "notes": "x", "arch": "sm_90"}`,
		"metadata/attn.json":      `{"op": "attention.sdpa", "dtypes": ["float32"], "max_last_dim": 128, "notes": "head_dim<=128"}`,
		"notes.txt":               "not python\n",
	}
}

const head = "bundle_id = \"t\"\nabi_version = \"cacheon-op-abi-v0\"\n"

const silu = "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"kernels/a.py\"\nentry = \"run\"\n"

func TestLoadValidVariants(t *testing.T) {
	cat := catalog(t)
	tests := []struct {
		name     string
		manifest string
		check    func(t *testing.T, b *Bundle)
	}{
		{"defaults", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"kernels/a.py\"\n", func(t *testing.T, b *Bundle) {
			op := b.Manifest.Ops[0]
			if op.Variant != DefaultVariant || op.Entry != "silu_and_mul" || op.Prepare != "" || op.Domain.String() != "any" {
				t.Fatalf("defaults not applied: %+v", op)
			}
			if b.Manifest.Crownable() {
				t.Fatal("a manifest without [competition] is not crownable")
			}
		}},
		{"dtype normalisation", head + silu + "dtypes = [\"fp16\", \"bf16\"]\narchitectures = [\"9.0\", \"sm_100a\"]\n", func(t *testing.T, b *Bundle) {
			op := b.Manifest.Ops[0]
			if strings.Join(op.DTypes, ",") != "bfloat16,float16" || strings.Join(op.Architectures, ",") != "sm100a,sm90" {
				t.Fatalf("got dtypes %v architectures %v", op.DTypes, op.Architectures)
			}
		}},
		{"manifest narrows metadata", head + silu + "dtypes = [\"bf16\", \"fp16\"]\nmetadata = \"metadata/bf16.json\"\n", func(t *testing.T, b *Bundle) {
			if got := b.Manifest.Ops[0].Domain.String(); got != `dtype = "bfloat16"` {
				t.Fatalf("domain = %s", got)
			}
		}},
		{"disjoint ranges", head +
			"[[ops]]\nslot = \"activation.silu_and_mul\"\nvariant = \"small\"\nsource = \"kernels/a.py\"\nmetadata = \"metadata/t64.json\"\n" +
			"[[ops]]\nslot = \"activation.silu_and_mul\"\nvariant = \"large\"\nsource = \"kernels/b.py\"\nmetadata = \"metadata/t65.json\"\n", func(t *testing.T, b *Bundle) {
			if len(b.Rows("activation.silu_and_mul")) != 2 {
				t.Fatal("want two rows")
			}
		}},
		{"variants disjoint by dtype", head +
			"[[ops]]\nslot = \"activation.silu_and_mul\"\nvariant = \"bf\"\nsource = \"kernels/a.py\"\ndtypes = [\"bf16\"]\n" +
			"[[ops]]\nslot = \"activation.silu_and_mul\"\nvariant = \"fp\"\nsource = \"kernels/b.py\"\ndtypes = [\"fp16\"]\n", nil},
		{"cuda sources and system mode", head + "[competition]\ntarget = \"whole.engine\"\nmode = \"system\"\n" + silu +
			"cuda_sources = [\"kernels/native.cu\", \"kernels/native.cuh\"]\n", func(t *testing.T, b *Bundle) {
			if b.Manifest.Crownable() || !strings.Contains(b.Manifest.NotCrownableReason(), "never crownable") {
				t.Fatalf("system mode must not be crownable: %q", b.Manifest.NotCrownableReason())
			}
			if len(b.Manifest.Ops[0].CUDASources) != 2 {
				t.Fatal("cuda_sources lost")
			}
		}},
		{"atomic target", head + "[competition]\ntarget = \"collective.moe_epilogue.v1\"\nmode = \"atomic\"\n" + silu, func(t *testing.T, b *Bundle) {
			if !b.Manifest.Crownable() || b.Manifest.Competition.Mode != target.ModeAtomic {
				t.Fatal("atomic mode is crownable")
			}
		}},
		{"different slots need no variants", head + silu + "[[ops]]\nslot = \"norm.rmsnorm\"\nsource = \"kernels/b.py\"\n", nil},
		{"prepare slot", head + "[[ops]]\nslot = \"moe.fused_experts\"\nsource = \"kernels/moe.py\"\nprepare = \"prepare\"\n", nil},
		{"inline tables", head + "ops = [{slot = \"activation.silu_and_mul\", source = \"kernels/a.py\"}]\n", nil},
		{"empty dtypes restrict nothing", head + silu + "dtypes = []\narchitectures = []\n", func(t *testing.T, b *Bundle) {
			if op := b.Manifest.Ops[0]; op.DTypes != nil || op.Architectures != nil || op.Domain.String() != "any" {
				t.Fatalf("empty lists: dtypes %v architectures %v domain %s", op.DTypes, op.Architectures, op.Domain)
			}
		}},
		{"upstream metadata", head + silu + "metadata = \"metadata/upstream.json\"\n", func(t *testing.T, b *Bundle) {
			op := b.Manifest.Ops[0]
			if got := op.Domain.String(); got != "last_dim <= 65536" {
				t.Fatalf("domain = %s", got)
			}
			want := `top-level key "notes" is descriptive and ignored|top-level key "arch" is descriptive and ignored; to restrict architecture, put it under "capabilities"`
			if got := strings.Join(op.Notes, "|"); got != want {
				t.Fatalf("notes = %q, want %q", got, want)
			}
		}},
		{"max_last_dim bounds head_dim on attention", head + "[[ops]]\nslot = \"attention.sdpa\"\nsource = \"kernels/a.py\"\nmetadata = \"metadata/attn.json\"\n", func(t *testing.T, b *Bundle) {
			op := b.Manifest.Ops[0]
			if got := op.Domain.String(); got != `dtype = "float32", head_dim <= 128` {
				t.Fatalf("domain = %s", got)
			}
			if got := strings.Join(op.Notes, "|"); !strings.Contains(got, "max_last_dim bounds head_dim, the last dimension of slot attention.sdpa's inputs") {
				t.Fatalf("notes = %q", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			files := baseFiles()
			files["manifest.toml"] = tt.manifest
			writeTree(t, dir, files)
			b, err := Load(dir, cat)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if tt.check != nil {
				tt.check(t, b)
			}
		})
	}
}

func TestLoadRejects(t *testing.T) {
	cat := catalog(t)
	row2 := func(v1, m1, v2, m2 string) string {
		s := "[[ops]]\nslot = \"activation.silu_and_mul\"\n"
		r := s
		if v1 != "" {
			r += "variant = \"" + v1 + "\"\n"
		}
		r += "source = \"kernels/a.py\"\n"
		if m1 != "" {
			r += "metadata = \"" + m1 + "\"\n"
		}
		r += s
		if v2 != "" {
			r += "variant = \"" + v2 + "\"\n"
		}
		r += "source = \"kernels/b.py\"\n"
		if m2 != "" {
			r += "metadata = \"" + m2 + "\"\n"
		}
		return head + r
	}
	tests := []struct {
		name     string
		manifest string
		want     string
	}{
		{"invalid TOML", "bundle_id = \n", "manifest.toml:1:"},
		{"byte-order mark", "\ufeff" + head + silu, "manifest.toml:1:1: the file starts with a UTF-8 byte-order mark (hint: save it as UTF-8 without a BOM)"},
		{"duplicate key", head + "bundle_id = \"u\"\n" + silu, "manifest.toml:3:1: bundle_id: key bundle_id is already defined"},
		{"unknown top-level key", head + "extras = \"x\"\n" + silu, "manifest.toml:3:1: extras: unknown key"},
		{"unknown row key", head + silu + "speedup = \"2x\"\n", "manifest.toml:7:1: ops[0].speedup: unknown key"},
		{"setup hook", head + silu + "setup = \"engine\"\n", "manifest.toml:7:1: ops[0].setup: not supported by this validator: setup names an engine setup hook"},
		{"top-level setup", head + "setup = \"x\"\n" + silu, "manifest.toml:3:1: setup: not supported by this validator"},
		{"override point", head + silu + "base_kernel = \"mega\"\noverride_point = \"epilogue\"\n", "ops[0].base_kernel: not supported by this validator: base_kernel asks for an override"},
		{"override point after unknown key", head + silu + "speedup = 2\noverride_point = \"epilogue\"\n", "ops[0].override_point: not supported by this validator"},
		{"metadata names another slot", head + silu + "metadata = \"metadata/op_rms.json\"\n", `manifest.toml:7:12: ops[0].metadata: metadata/op_rms.json: op: names slot "norm.rmsnorm", but this row is for slot activation.silu_and_mul`},
		{"metadata names an unknown slot", head + silu + "metadata = \"metadata/slot_gelu.json\"\n", `ops[0].metadata: metadata/slot_gelu.json: slot: names slot "activation.gelu", but this row is for slot activation.silu_and_mul`},
		{"unknown competition key", head + "[competition]\ntarget = \"a.b\"\nmode = \"slot\"\nfoo = 1\n" + silu, "competition.foo: unknown key"},
		{"wrong type bundle_id", "bundle_id = 7\nabi_version = \"cacheon-op-abi-v0\"\n" + silu, "manifest.toml:1:13: bundle_id: wrong type: got a TOML integer, want a string"},
		{"wrong type variant", head + silu + "variant = 7\n", "manifest.toml:7:11: ops[0].variant: wrong type: got a TOML integer, want a string"},
		{"wrong type dtypes", head + silu + "dtypes = \"bf16\"\n", "ops[0].dtypes: wrong type: got a TOML string, want an array of strings"},
		{"wrong type dtypes element", head + silu + "dtypes = [\"bf16\", 3]\n", "ops[0].dtypes: wrong type: got a TOML integer"},
		{"wrong type ops", head + "ops = 3\n", "ops: wrong type: got a TOML integer, want an array of tables"},
		{"wrong type competition", head + "competition = \"x\"\n" + silu, "competition: wrong type"},
		{"ops as a table", head + "[ops]\nslot = \"activation.silu_and_mul\"\nsource = \"kernels/a.py\"\n", "manifest.toml:3:2: ops: [ops] declares a single table"},
		{"second row index", head + silu + silu + "bogus = 1\n", "manifest.toml:11:1: ops[1].bogus: unknown key"},
		{"missing bundle_id", "abi_version = \"cacheon-op-abi-v0\"\n" + silu, "missing required key bundle_id"},
		{"bad bundle_id", "bundle_id = \"a b\"\nabi_version = \"cacheon-op-abi-v0\"\n" + silu, "manifest.toml:1:13: bundle_id: \"a b\" is not a valid bundle id"},
		{"bundle_id control char", "bundle_id = \"a\\u0000\"\nabi_version = \"cacheon-op-abi-v0\"\n" + silu, "is not a valid bundle id"},
		{"missing abi", "bundle_id = \"t\"\n" + silu, "missing required key abi_version"},
		{"wrong abi", "bundle_id = \"t\"\nabi_version = \"cacheon-op-abi-v1\"\n" + silu, "manifest.toml:2:15: abi_version: unsupported ABI version"},
		{"no ops", head, "has no [[ops]] rows"},
		{"competition missing mode", head + "[competition]\ntarget = \"activation.silu_and_mul\"\n" + silu, "manifest.toml:3:2: competition: missing required key mode"},
		{"competition missing target", head + "[competition]\nmode = \"slot\"\n" + silu, "competition: missing required key target"},
		{"competition bad mode", head + "[competition]\ntarget = \"activation.silu_and_mul\"\nmode = \"whole\"\n" + silu, "manifest.toml:5:8: competition.mode: unknown mode \"whole\""},
		{"competition bad target name", head + "[competition]\ntarget = \"Bad Target\"\nmode = \"atomic\"\n" + silu, "is not a target name"},
		{"competition slot target not a slot", head + "[competition]\ntarget = \"collective.moe_epilogue.v1\"\nmode = \"slot\"\n" + silu, "is not a registered slot"},
		{"competition slot target without row", head + "[competition]\ntarget = \"norm.rmsnorm\"\nmode = \"slot\"\n" + silu, "no [[ops]] row implements that slot"},
		{"missing slot", head + "[[ops]]\nsource = \"kernels/a.py\"\n", "manifest.toml:3:3: ops[0]: missing required key slot"},
		{"unknown slot", head + "[[ops]]\nslot = \"activation.gelu\"\nsource = \"kernels/a.py\"\n", "manifest.toml:4:8: ops[0].slot: unknown slot \"activation.gelu\""},
		{"missing source", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\n", "ops[0]: missing required key source"},
		{"bad variant", head + silu + "variant = \"bad id\"\n", "ops[0].variant: \"bad id\" is not a valid variant name"},
		{"entry not identifier", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"kernels/a.py\"\nentry = \"run-fast\"\n", "manifest.toml:6:9: ops[0].entry: \"run-fast\" is not a Python identifier"},
		{"entry keyword", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"kernels/a.py\"\nentry = \"lambda\"\n", "is a Python keyword"},
		{"entry leading digit", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"kernels/a.py\"\nentry = \"1run\"\n", "is not a Python identifier"},
		{"prepare not allowed", head + silu + "prepare = \"prep\"\n", "ops[0].prepare: slot activation.silu_and_mul has no prepare step"},
		{"prepare required", head + "[[ops]]\nslot = \"moe.fused_experts\"\nsource = \"kernels/moe.py\"\n", "slot moe.fused_experts requires a prepare function"},
		{"prepare bad identifier", head + "[[ops]]\nslot = \"moe.fused_experts\"\nsource = \"kernels/moe.py\"\nprepare = \"a.b\"\n", "ops[0].prepare: \"a.b\" is not a Python identifier"},
		{"absolute source", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"/etc/passwd.py\"\n", "manifest.toml:5:10: ops[0].source: \"/etc/passwd.py\": absolute paths are not allowed"},
		{"dotdot source", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"../x.py\"\n", "\"..\" components are not allowed"},
		{"inner dotdot source", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"kernels/../kernels/a.py\"\n", "\"..\" components are not allowed"},
		{"dot source", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"./kernels/a.py\"\n", "\".\" components are not allowed"},
		{"backslash source", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = 'kernels\\a.py'\n", "backslashes are not allowed"},
		{"doubled slash", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"kernels//a.py\"\n", "empty path component"},
		{"drive letter", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"C:/a.py\"\n", "drive-letter paths"},
		{"control char path", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"kernels/a\\u0007.py\"\n", "control character"},
		{"empty source", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"\"\n", "empty path"},
		{"source not python", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"notes.txt\"\n", "\"notes.txt\": want a .py file"},
		{"missing source file", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"kernels/missing.py\"\n", "kernels/missing.py does not exist"},
		{"source is a directory", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"dir.py\"\n", "dir.py is not a regular file"},
		{"source through a file", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"notes.txt/a.py\"\n", "notes.txt is not a directory"},
		{"source symlink", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"link.py\"\n", "link.py is a symlink"},
		{"source under symlinked dir", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"linkdir/a.py\"\n", "linkdir is a symlink"},
		{"source excluded", head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nsource = \"._a.py\"\n", "excluded from the content hash"},
		{"metadata not json", head + silu + "metadata = \"kernels/b.py\"\n", "want a .json file"},
		{"metadata missing", head + silu + "metadata = \"metadata/none.json\"\n", "metadata/none.json does not exist"},
		{"metadata invalid", head + silu + "metadata = \"metadata/bad.json\"\n", "manifest.toml:7:12: ops[0].metadata: metadata/bad.json: capabilities.head_dim: one_of must not be empty"},
		{"metadata unsupplied field", head + silu + "metadata = \"metadata/world.json\"\n", "ops[0].metadata: predicate on capability field \"world_size\" can never match: slot activation.silu_and_mul's live binding supplies only architecture, device"},
		{"metadata unsupplied head_dim", head + silu + "metadata = \"metadata/h128.json\"\n", "capability field \"head_dim\" can never match"},
		{"empty domain", head + silu + "dtypes = [\"fp16\"]\nmetadata = \"metadata/bf16.json\"\n", "manifest.toml:3:3: ops[0]: capability domain of variant \"default\" is empty: dtype: no value satisfies every predicate (the allowed set is empty) (metadata: = \"bfloat16\"; manifest row: = \"float16\")"},
		{"bad dtype", head + silu + "dtypes = [\"int8\"]\n", "manifest.toml:7:11: ops[0].dtypes[0]: unknown dtype \"int8\""},
		{"duplicate dtype", head + silu + "dtypes = [\"bf16\", \"bfloat16\"]\n", "ops[0].dtypes[1]: \"bfloat16\" duplicates entry 0"},
		{"bad architecture", head + silu + "architectures = [\"hopper\"]\n", "ops[0].architectures[0]: invalid architecture"},
		{"cuda source wrong suffix", head + silu + "cuda_sources = [\"kernels/a.py\"]\n", "ops[0].cuda_sources[0]: \"kernels/a.py\": want a .cu or .cuh file"},
		{"cuda source duplicate", head + silu + "cuda_sources = [\"kernels/native.cu\", \"kernels/native.cu\"]\n", "ops[0].cuda_sources[1]: duplicate entry"},
		{"cuda source escaping", head + silu + "cuda_sources = [\"../native.cu\"]\n", "\"..\" components are not allowed"},
		{"repeated slot without variants", row2("", "", "", ""), "manifest.toml:3:3: ops[0]: slot activation.silu_and_mul has 2 rows: every row of a repeated slot must name an explicit, unique variant"},
		{"repeated slot one variant", row2("", "", "b", ""), "ops[0]: slot activation.silu_and_mul has 2 rows"},
		{"repeated slot second lacks variant", row2("a", "metadata/t64.json", "", "metadata/t65.json"), "ops[1]: slot activation.silu_and_mul has 2 rows"},
		{"duplicate variant", row2("a", "metadata/t64.json", "a", "metadata/t65.json"), "ops[1].variant: duplicate variant \"a\" of slot activation.silu_and_mul (also ops[0])"},
		{"duplicate default variant", row2("default", "", "default", ""), "duplicate variant \"default\""},
		{"overlapping variants", row2("a", "metadata/t64.json", "b", "metadata/t32.json"), "ops[1]: variant \"b\" of slot activation.silu_and_mul overlaps variant \"a\" (ops[0])"},
		{"overlap with any", row2("a", "metadata/t64.json", "b", ""), "overlaps variant \"a\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			files := baseFiles()
			files["manifest.toml"] = tt.manifest
			writeTree(t, dir, files)
			if err := os.Mkdir(filepath.Join(dir, "dir.py"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("kernels/a.py", filepath.Join(dir, "link.py")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("kernels", filepath.Join(dir, "linkdir")); err != nil {
				t.Fatal(err)
			}
			writeTree(t, dir, map[string]string{"._a.py": "x"})
			_, err := Load(dir, cat)
			if err == nil {
				t.Fatalf("Load succeeded, want error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error\n  %v\ndoes not contain\n  %s", err, tt.want)
			}
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("error is %T, want *ManifestError", err)
			}
			t.Log(err)
		})
	}
}

func TestLoadManifestFile(t *testing.T) {
	cat := catalog(t)
	t.Run("missing manifest", func(t *testing.T) {
		_, err := Load(t.TempDir(), cat)
		if err == nil || !strings.Contains(err.Error(), "manifest.toml: cannot read the manifest") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("symlinked manifest", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"real.toml": head + silu, "kernels/a.py": ""})
		if err := os.Symlink("real.toml", filepath.Join(dir, "manifest.toml")); err != nil {
			t.Fatal(err)
		}
		_, err := Load(dir, cat)
		if err == nil || !strings.Contains(err.Error(), "manifest.toml is a symlink") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("oversized manifest", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"manifest.toml": head + silu + "#" + strings.Repeat("x", maxManifestBytes), "kernels/a.py": ""})
		_, err := Load(dir, cat)
		if err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("not a directory", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		writeTree(t, filepath.Dir(f), map[string]string{"file": "x"})
		if _, err := Load(f, cat); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("nil catalog", func(t *testing.T) {
		if _, err := Load(t.TempDir(), nil); err == nil {
			t.Fatal("want error")
		}
	})
}

func TestSelectedPaths(t *testing.T) {
	b, err := Load(filepath.Join("testdata", "bundles", "variants"), catalog(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.SelectedPaths([]string{"attention.sdpa"}, []string{"kernels/helpers.py", "kernels/attention.py"})
	if err != nil {
		t.Fatal(err)
	}
	want := "kernels/attention.py,kernels/helpers.py,metadata/h128.json,metadata/h64.json"
	if strings.Join(got, ",") != want {
		t.Fatalf("SelectedPaths = %v, want %s", got, want)
	}
	for _, tc := range []struct {
		slots, extra []string
		want         string
	}{
		{nil, nil, "no target member slots"},
		{[]string{"norm.rmsnorm"}, nil, "no [[ops]] row for slot norm.rmsnorm"},
		{[]string{"attention.sdpa"}, []string{"../x.py"}, "\"..\" components"},
		{[]string{"attention.sdpa"}, []string{"__pycache__/x.py"}, "not covered by the content hash"},
	} {
		if _, err := b.SelectedPaths(tc.slots, tc.extra); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SelectedPaths(%v, %v) error %v, want %q", tc.slots, tc.extra, err, tc.want)
		}
	}
}

func FuzzManifest(f *testing.F) {
	seeds := []string{
		head + silu,
		head + "[competition]\ntarget = \"activation.silu_and_mul\"\nmode = \"slot\"\n" + silu + "dtypes = [\"bf16\"]\narchitectures = [\"sm_90\"]\nmetadata = \"metadata/t64.json\"\ncuda_sources = [\"kernels/native.cu\"]\n",
		head + "[[ops]]\nslot = \"activation.silu_and_mul\"\nvariant = \"a\"\nsource = \"kernels/a.py\"\nmetadata = \"metadata/t64.json\"\n[[ops]]\nslot = \"activation.silu_and_mul\"\nvariant = \"b\"\nsource = \"kernels/b.py\"\nmetadata = \"metadata/t65.json\"\n",
		head + "ops = [{slot = \"moe.fused_experts\", source = \"kernels/moe.py\", prepare = \"prepare\"}]\n",
		"bundle_id = 7\n",
		"[[ops]]\n[[ops]]\nx.y.z = 1\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	for _, name := range []string{"single", "variants", "moe"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "bundles", name, "manifest.toml")); err == nil {
			f.Add(b)
		}
	}
	cat := catalog(f)
	dir := f.TempDir()
	writeTree(f, dir, baseFiles())
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, "manifest.toml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := Load(dir, cat)
		if err != nil {
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("error %v is %T, want *ManifestError", err, err)
			}
			_ = err.Error()
			return
		}
		if len(b.Manifest.Ops) == 0 {
			t.Fatal("loaded a bundle with no rows")
		}
		for _, op := range b.Manifest.Ops {
			if op.Domain.Empty() {
				t.Fatalf("loaded an empty domain for %s/%s", op.Slot, op.Variant)
			}
			if err := checkRelPath(op.Source); err != nil {
				t.Fatalf("loaded an unsafe source path %q", op.Source)
			}
		}
	})
}
