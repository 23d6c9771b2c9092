package scan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"cacheon/internal/bundle"
	"cacheon/internal/compattest"
	"cacheon/internal/fault"
	"cacheon/internal/slot"
)

// compatScan is what Check must say about a bundle of the compatibility
// corpus: no findings, or findings matching each regexp (on "path rule
// message"), in any order.
var compatScan = map[string][]string{
	"miner_m3_swigluoai_override": {
		`^manifest\.toml manifest manifest\.toml:\d+:\d+: ops\[0\]\.base_kernel: not supported by this validator: base_kernel asks for an override`,
		`^kernels/swigluoai\.py import-not-allowed import of "cutlass" is not supported by this validator: CuTe DSL`,
		`^kernels/swigluoai\.py import-not-allowed import of "cutlass\.cute" is not supported by this validator`,
	},
	"miner_setup_demo": {
		`^manifest\.toml manifest manifest\.toml:\d+:\d+: ops\[0\]\.setup: not supported by this validator: setup names an engine setup hook`,
		`^kernels/k\.py import-not-allowed import of "sglang\.srt\.layers\.layernorm" is not supported by this validator`,
		`^kernels/k\.py global-mutation assignment to "RMSNorm\.forward_cuda"`,
	},
}

// TestCompatCheck scans every bundle of the corpus (../shared/compat) and
// both archives packed by the established tool. Descriptive metadata keys
// are information, not findings; what this validator does not support is
// refused with "not supported by this validator" and the reason; an archive
// scans exactly as the folder it came from.
func TestCompatCheck(t *testing.T) {
	requirePython(t)
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := Config{Slots: cat, Python: "/usr/bin/python3"}
	if _, err := os.Stat(cfg.Python); err != nil {
		cfg.Python = ""
	}
	byName := map[string]*Report{}
	for _, b := range compattest.Bundles(t) {
		t.Run(b.Name, func(t *testing.T) {
			rep, err := Check(ctx, b.Dir, cfg)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			byName[b.Name] = rep
			var got []string
			for _, f := range rep.Findings {
				got = append(got, f.Path+" "+f.Rule+" "+f.Message)
			}
			want := compatScan[b.Name]
			if len(got) != len(want) {
				t.Fatalf("%d findings, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
			}
			for _, re := range want {
				found := false
				for _, g := range got {
					found = found || regexp.MustCompile(re).MatchString(g)
				}
				if !found {
					t.Errorf("no finding matches %q:\n%s", re, strings.Join(got, "\n"))
				}
			}
			for _, in := range rep.Info {
				if !strings.HasPrefix(in.Path, "metadata/") || !strings.Contains(in.Message, "ignored") && !strings.Contains(in.Message, "max_last_dim bounds") {
					t.Errorf("unexpected info %s", in)
				}
				if strings.Contains(in.Message, `"op"`) || strings.Contains(in.Message, `"dtypes"`) {
					t.Errorf("a key the reader uses is listed as ignored: %s", in)
				}
			}
		})
	}
	// Spot checks of the information the metadata earns.
	wantInfo := map[string]string{
		"miner_silu_torch":      `metadata/silu_and_mul.json: top-level key "notes" is descriptive and ignored`,
		"miner_attention_torch": `metadata/attention.json: max_last_dim bounds head_dim, the last dimension of slot attention.sdpa's inputs`,
	}
	for name, want := range wantInfo {
		rep := byName[name]
		if rep == nil {
			continue
		}
		var got []string
		for _, in := range rep.Info {
			got = append(got, in.String())
		}
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("%s: info %q lacks %q", name, got, want)
		}
	}
	for _, a := range compattest.Archives(t) {
		t.Run("archive/"+a.Name, func(t *testing.T) {
			rep, err := Check(ctx, a.Path, cfg)
			if err != nil {
				t.Fatalf("Check(archive): %v", err)
			}
			dir, ok := byName[a.Name]
			if !ok {
				t.Skip("folder not scanned")
			}
			if summary(rep) != summary(dir) {
				t.Errorf("archive scans as\n%s\nits folder as\n%s", summary(rep), summary(dir))
			}
		})
	}
}

func summary(r *Report) string {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString(f.String() + "\n")
	}
	for _, i := range r.Info {
		b.WriteString("info " + i.String() + "\n")
	}
	return b.String() + "files " + strconv.Itoa(r.Files)
}

// TestCheckArchiveRefused: an archive that cannot be extracted is the
// candidate's fault; a path that is neither a directory nor an archive is
// the user's.
func TestCheckArchiveRefused(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.tar.gz")
	if err := os.WriteFile(bad, []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Check(context.Background(), bad, Config{})
	var ee *bundle.ExtractError
	if !errors.As(err, &ee) || fault.Of(err) != fault.Candidate {
		t.Fatalf("got %v (fault %v), want a candidate's *bundle.ExtractError", err, fault.Of(err))
	}
	other := filepath.Join(dir, "x.zip")
	if err := os.WriteFile(other, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(context.Background(), other, Config{}); err == nil || !strings.Contains(err.Error(), "not a bundle: want a directory or a .tar.gz archive") {
		t.Fatalf("got %v", err)
	}
}

// TestUnsupportedImport: a module of a feature this validator does not
// serve is refused with the reason; any other foreign import keeps the
// generic message.
func TestUnsupportedImport(t *testing.T) {
	rep := func(src string) []Finding {
		requirePython(t)
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "k.py"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return scanOrFatal(t, Input{Root: root}).Findings
	}
	for _, tc := range []struct{ src, want string }{
		{"try:\n    import cutlass.cute as cute\nexcept ImportError:\n    pass\n", `import of "cutlass.cute" is not supported by this validator: CuTe DSL`},
		{"from cutlass import Float32\n", `import of "cutlass" is not supported by this validator`},
		{"import numpy\n", `import of "numpy" is not allowed: the arena allows`},
	} {
		fs := rep(tc.src)
		if len(fs) != 1 || fs[0].Rule != RuleImportNotAllowed || !strings.Contains(fs[0].Message, tc.want) {
			t.Errorf("%q: findings %v, want one %s containing %q", tc.src, fs, RuleImportNotAllowed, tc.want)
		}
	}
}
