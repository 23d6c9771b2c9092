package scan

import (
	"reflect"
	"strings"
	"testing"
)

func TestFindingString(t *testing.T) {
	tests := []struct {
		f    Finding
		want string
	}{
		{Finding{Path: "k.py", Line: 3, Col: 7, Rule: RuleForbiddenBuiltin, Message: "call to eval()"}, "k.py:3:7 forbidden-builtin call to eval()"},
		{Finding{Path: "w.pt", Rule: RuleBinaryFile, Message: "binary"}, "w.pt:0:0 binary-file binary"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestRulesAreUniqueKebabCase(t *testing.T) {
	seen := make(map[string]bool)
	for _, r := range Rules() {
		if seen[r.ID] {
			t.Errorf("duplicate rule %q", r.ID)
		}
		seen[r.ID] = true
		if r.ID != strings.ToLower(r.ID) || strings.ContainsAny(r.ID, " _") || r.Summary == "" {
			t.Errorf("rule %q: not kebab-case or no summary", r.ID)
		}
	}
	for _, r := range referenceRules() {
		if !seen[r.rule] {
			t.Errorf("reference rule %q for %q is not listed by Rules()", r.rule, r.prefix)
		}
	}
}

func TestHasDottedPrefix(t *testing.T) {
	tests := []struct {
		name, prefix string
		want         bool
	}{
		{"torch.load", "torch.load", true},
		{"torch.load.x", "torch.load", true},
		{"torch.loads", "torch.load", false},
		{"torch", "torch.load", false},
		{"importlib.util", "imp", false},
		{"imp", "imp", true},
	}
	for _, tt := range tests {
		if got := hasDottedPrefix(tt.name, tt.prefix); got != tt.want {
			t.Errorf("hasDottedPrefix(%q, %q) = %v", tt.name, tt.prefix, got)
		}
	}
}

func TestModuleOf(t *testing.T) {
	tests := []struct {
		rel  string
		name string
		pkg  []string
		ok   bool
	}{
		{"kernels/silu.py", "kernels.silu", []string{"kernels"}, true},
		{"kernels/__init__.py", "kernels", []string{"kernels"}, true},
		{"main.py", "main", []string{}, true},
		{"__init__.py", "", []string{}, true},
		{"my-kernels/silu.py", "", nil, false},
		{"2fast.py", "", nil, false},
		{"ядро/x.py", "ядро.x", []string{"ядро"}, true},
	}
	for _, tt := range tests {
		name, pkg, ok := moduleOf(tt.rel)
		if name != tt.name || ok != tt.ok || (ok && !reflect.DeepEqual(pkg, tt.pkg)) {
			t.Errorf("moduleOf(%q) = %q, %q, %v", tt.rel, name, pkg, ok)
		}
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		pkg    []string
		im     importFact
		abs    string
		climbs bool
	}{
		{nil, importFact{Module: "torch.nn"}, "torch.nn", false},
		{[]string{"a", "b"}, importFact{Level: 1, Module: "c"}, "a.b.c", false},
		{[]string{"a", "b"}, importFact{Level: 2}, "a", false},
		{[]string{"a", "b"}, importFact{Level: 3, Module: "x"}, "x", false},
		{[]string{"a", "b"}, importFact{Level: 4, Module: "x"}, "", true},
		{nil, importFact{Level: 1}, "", false},
		{nil, importFact{Level: 2, Module: "up"}, "", true},
	}
	for _, tt := range tests {
		abs, climbs := resolve(tt.pkg, tt.im)
		if abs != tt.abs || climbs != tt.climbs {
			t.Errorf("resolve(%q, %+v) = %q, %v", tt.pkg, tt.im, abs, climbs)
		}
	}
}

func TestCheckDeclared(t *testing.T) {
	for p, ok := range map[string]bool{
		"kernel.py": true, "a/b.cu": true,
		"": false, ".": false, "../x.py": false, "/abs.py": false, "a/../b.py": false,
		"a//b.py": false, `a\b.py`: false, "a\nb.py": false, "./a.py": false,
	} {
		if err := checkDeclared(p); (err == nil) != ok {
			t.Errorf("checkDeclared(%q) = %v", p, err)
		}
	}
}

func TestAllowedExtra(t *testing.T) {
	for rel, ok := range map[string]bool{
		"manifest.toml": true, "metadata/capabilities.json": true, "README.md": true,
		"docs/readme.rst": true, "LICENSE": true, "COPYING.txt": true, "NOTICE": true,
		".gitignore": true, "sub/.gitignore": true,
		"metadata/a/b.json": false, "metadata/x.yaml": false, "README.py": false,
		"LICENSE.sh": false, "sub/manifest.toml": false, "notes.txt": false,
	} {
		if got := allowedExtra(rel); got != ok {
			t.Errorf("allowedExtra(%q) = %v", rel, got)
		}
	}
}

func TestReservedModules(t *testing.T) {
	r := reservedModules(Policy{AllowedImports: []string{"numpy.linalg"}}, &factsHeader{Stdlib: []string{"zlib"}, Importable: []string{"six"}})
	for _, name := range []string{"numpy", "zlib", "os", "pickle", "dill", "torch", "cffi", "six", "cacheon_runtime"} {
		if !r[name] {
			t.Errorf("%q is not reserved", name)
		}
	}
	if r["kernels"] {
		t.Error(`"kernels" is reserved`)
	}
}

func TestSanitize(t *testing.T) {
	if got := sanitize("bad\nline\x1b[31m\u2028end"); strings.ContainsAny(got, "\n\x1b\u2028") {
		t.Errorf("sanitize left control characters: %q", got)
	}
	if got := sanitize(strings.Repeat("x", 1000)); len(got) > 310 {
		t.Errorf("sanitize did not truncate: %d bytes", len(got))
	}
}
