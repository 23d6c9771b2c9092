package main

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// rule forbids a package (and, with a trailing "/...", every package under
// it) from depending on others, directly or through any chain of imports.
type rule struct {
	pkg    string   // import path, or a prefix ending in "/..."
	forbid []string // import paths or "/..." prefixes
	why    string
}

// The product side (objects, release) is what ships without any chain: it
// never reaches the candidate runtime, the referee or the market. The
// referee decides without knowing who pays. The dashboard only reads.
var layerRules = []rule{
	{"cacheon/internal/release", productForbidden,
		"a release is built and verified offline from product objects alone: no chain, no store, no candidate runtime, no catalog internals"},
	// product/producttest builds test fixtures from the real catalogs:
	// test support, imported only by tests, outside this rule.
	{"cacheon/internal/product", productForbidden,
		"product objects hold digests; the catalog reaches them through a small interface, never the reverse"},
	{"cacheon/internal/referee/...", []string{"cacheon/internal/market/...", "cacheon/internal/store/...", "cacheon/internal/dashboard/...", "cacheon/internal/cli"},
		"the referee decides one proposal from evidence; who submitted it and who is paid is the market's"},
	{"cacheon/internal/evidence/...", []string{"cacheon/internal/market/...", "cacheon/internal/store/...", "cacheon/internal/sandbox", "cacheon/internal/worker", "cacheon/internal/engine"},
		"evidence is re-checked without a GPU, an engine or a database"},
	{"cacheon/internal/dashboard/...", []string{"cacheon/internal/sandbox", "cacheon/internal/worker", "cacheon/internal/engine", "cacheon/internal/verify", "cacheon/internal/referee/..."},
		"the dashboard reads the store; it never runs candidate code or decides anything"},
	{"cacheon/internal/market/fetch", []string{"cacheon/internal/engine", "cacheon/internal/verify", "cacheon/internal/referee/...", "cacheon/internal/worker", "cacheon/internal/sandbox", "cacheon/internal/scan", "cacheon/internal/store/..."},
		"fetching only downloads and extracts within bounds: it runs nothing, judges nothing and records nothing"},
	{"cacheon/internal/fingerprint", []string{"cacheon/internal/engine", "cacheon/internal/verify", "cacheon/internal/referee/...", "cacheon/internal/worker", "cacheon/internal/market/...", "cacheon/internal/store/..."},
		"the copy fingerprint parses sources in the parser sandbox; it never runs candidate code and knows no market"},
	{"cacheon/internal/pyparse", []string{"cacheon/internal/scan", "cacheon/internal/fingerprint", "cacheon/internal/engine", "cacheon/internal/verify", "cacheon/internal/worker"},
		"the parse-script launcher sits below the scan and the fingerprint that use it"},
	{"cacheon/internal/served", []string{"cacheon/internal/verify", "cacheon/internal/referee/...", "cacheon/internal/market/...", "cacheon/internal/store/..."},
		"verify's served stage sits below verify: it serves the kernel in an engine and regrades, and decides nothing else"},
	{"cacheon/internal/market/...", []string{"cacheon/internal/cli", "cacheon/internal/dashboard/..."},
		"the market is driven by the validator node, not by the command line or the UI"},
	{"cacheon/internal/...", []string{"cacheon/internal/cli"},
		"the CLI is the top: domain packages never reach back into it"},
	{"cacheon/...", []string{"cacheon/internal/product/producttest"},
		"producttest is test support: only tests import it"},
	{"cacheon/...", []string{"cacheon/internal/compattest"},
		"compattest is test support: only tests import it"},
	{"cacheon/internal/store/...", []string{"cacheon/internal/market/...", "cacheon/internal/referee/...", "cacheon/internal/engine",
		"cacheon/internal/verify", "cacheon/internal/scan", "cacheon/internal/sandbox", "cacheon/internal/worker", "cacheon/internal/bundle"},
		"the store records the market's state; it knows nothing above it and never touches a bundle or candidate code"},
	{"cacheon/internal/market/intake", []string{"cacheon/internal/engine", "cacheon/internal/verify", "cacheon/internal/referee/...",
		"cacheon/internal/scan", "cacheon/internal/sandbox", "cacheon/internal/worker"},
		"intake reaches fetch, scan, fingerprint and screen only through the interfaces it declares; the node wires the real ones"},
	{"cacheon/internal/market/weights", []string{"cacheon/internal/store/...", "cacheon/internal/engine", "cacheon/internal/referee/...",
		"cacheon/internal/market/localchain", "cacheon/internal/market/weightpub", "cacheon/internal/market/intake", "cacheon/internal/market/fetch"},
		"the weight projection is a pure function of claims, the block and the metagraph: no store, no chain client, no referee"},
	{"cacheon/internal/market/weightpub", []string{"cacheon/internal/engine", "cacheon/internal/verify", "cacheon/internal/referee/...",
		"cacheon/internal/market/localchain", "cacheon/internal/sandbox", "cacheon/internal/worker"},
		"weight publication reaches the chain through its own interface; the node wires the real one"},
	{"cacheon/internal/market/settle", []string{"cacheon/internal/store/...", "cacheon/internal/market/intake", "cacheon/internal/engine",
		"cacheon/internal/referee/...", "cacheon/internal/verify", "cacheon/internal/sandbox", "cacheon/internal/worker"},
		"settlement planning is pure: the same inputs give the same plan; only settle/commit touches the store"},
	{"cacheon/...", []string{"cacheon/internal/store/storetest", "cacheon/internal/store/pgtest", "cacheon/internal/crashtest"},
		"storetest, pgtest and crashtest are test support: only tests import them"},
	{"cacheon/internal/fault", []string{"cacheon/internal/..."},
		"attribution is a leaf every layer may use"},
	{"cacheon/internal/tritoncache", []string{"cacheon/internal/..."},
		"the Triton cache copies are a leaf below the worker and the engine (no process start, no sandbox)"},
}

// productForbidden is what the product side must never depend on.
var productForbidden = []string{
	"cacheon/internal/bundle", "cacheon/internal/slot", "cacheon/internal/reference", "cacheon/internal/metric",
	"cacheon/internal/capability", "cacheon/internal/worker", "cacheon/internal/sandbox", "cacheon/internal/engine",
	"cacheon/internal/scan", "cacheon/internal/verify", "cacheon/internal/grade",
	"cacheon/internal/referee/...", "cacheon/internal/market/...", "cacheon/internal/store/...", "cacheon/internal/node",
}

// dependentsRule allows only some packages to depend on pkg.
type dependentsRule struct {
	pkg     string   // import path, or a prefix ending in "/..."
	allowed []string // the packages that may depend on it
	why     string
}

// dependents keeps a package's dependents to a few (transitively): the
// node is the one place that wires the validator, and only the command
// line above it builds one.
var dependents = []dependentsRule{
	{"cacheon/internal/node", []string{"cacheon/internal/validator", "cacheon/internal/devnet", "cacheon/internal/cli", "cacheon/cmd/cacheon"},
		"the node wires the validator; domain packages are wired by it and never reach it (only the validator daemon, the devnet built on it and the CLI do)"},
	{"cacheon/internal/dashboard/dashtest", []string{"cacheon/internal/dashboard", "cacheon/internal/devnet"},
		"dashtest is test support (a real browser): only tests import it"},
}

// strayDependents lists every package of graph (package → its transitive
// dependencies) that depends on a rule's package without being one the
// rule allows.
func strayDependents(graph map[string][]string, rules []dependentsRule) []string {
	var out []string
	for pkg, deps := range graph {
		for _, r := range rules {
			if match(r.pkg, pkg) || slices.ContainsFunc(r.allowed, func(a string) bool { return match(a, pkg) }) {
				continue
			}
			for _, d := range deps {
				if match(r.pkg, d) {
					out = append(out, pkg+" depends on "+d+": "+r.why)
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// owners keeps each heavy third-party dependency inside the packages that
// own it (direct imports), so the trusted core stays small.
var owners = map[string][]string{
	"github.com/landlock-lsm/go-landlock": {"cacheon/internal/sandbox"},
	"github.com/pelletier/go-toml/v2":     {"cacheon/internal/bundle", "cacheon/internal/arena", "cacheon/internal/engine", "cacheon/internal/tomlpos", "cacheon/internal/nodeconfig"},
	"github.com/chromedp/chromedp":        {"cacheon/internal/dashboard/dashtest"},
	"github.com/spf13/cobra":              {"cacheon/internal/cli"},
	"github.com/rogpeppe/go-internal":     {},
	"modernc.org/sqlite":                  {"cacheon/internal/sqlitefile"},
	"github.com/jackc/pgx/v5":             {"cacheon/internal/store", "cacheon/internal/store/pgtest"},
}

// match reports whether path is pattern or, for "x/...", x or under x.
func match(pattern, path string) bool {
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == p || strings.HasPrefix(path, p+"/")
	}
	return pattern == path
}

// violations lists every (package, forbidden dependency) pair of graph
// (package → its transitive dependencies) that a rule forbids.
func violations(graph map[string][]string, rules []rule) []string {
	var out []string
	for pkg, deps := range graph {
		for _, r := range rules {
			if !match(r.pkg, pkg) {
				continue
			}
			for _, d := range deps {
				for _, f := range r.forbid {
					if match(f, d) && d != pkg {
						out = append(out, pkg+" depends on "+d+": "+r.why)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// goList returns every package of the module with its direct imports and
// its transitive dependencies (go list -deps semantics).
func goList(t *testing.T) (imports, deps map[string][]string) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not on PATH")
	}
	out, err := exec.Command("go", "list", "-json", "cacheon/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports, deps = map[string][]string{}, map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Deps       []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		imports[p.ImportPath], deps[p.ImportPath] = p.Imports, p.Deps
	}
	return imports, deps
}

// TestLayerRules holds the module's real dependency graph against the
// layer rules.
func TestLayerRules(t *testing.T) {
	_, deps := goList(t)
	if _, ok := deps["cacheon/internal/release"]; !ok {
		t.Fatal("go list did not report cacheon/internal/release")
	}
	for _, v := range violations(deps, layerRules) {
		t.Error(v)
	}
}

// TestLayerRulesCatch shows that the rules fail on what they forbid: a
// direct import, a chain of imports, and a sub-package of a forbidden tree
// — and stay quiet on what they allow.
func TestLayerRulesCatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		graph map[string][]string
		want  int
	}{
		{"release importing bundle", map[string][]string{"cacheon/internal/release": {"cacheon/internal/canon", "cacheon/internal/bundle"}}, 1},
		{"release reaching slot through a product package", map[string][]string{
			"cacheon/internal/release":        {"cacheon/internal/product", "cacheon/internal/target", "cacheon/internal/slot"},
			"cacheon/internal/product":        {"cacheon/internal/target", "cacheon/internal/slot"},
			"cacheon/internal/product/stacks": {"cacheon/internal/canon"},
		}, 2},
		{"referee reaching a market sub-package", map[string][]string{"cacheon/internal/referee": {"cacheon/internal/market/chain"}}, 1},
		{"dashboard reaching the engine", map[string][]string{"cacheon/internal/dashboard": {"cacheon/internal/store", "cacheon/internal/engine"}}, 1},
		{"fetch reaching the engine through verify", map[string][]string{"cacheon/internal/market/fetch": {"cacheon/internal/bundle", "cacheon/internal/verify", "cacheon/internal/engine"}}, 2},
		{"fingerprint reaching the referee", map[string][]string{"cacheon/internal/fingerprint": {"cacheon/internal/pyparse", "cacheon/internal/referee"}}, 1},
		{"intake reaching the engine", map[string][]string{"cacheon/internal/market/intake": {"cacheon/internal/store", "cacheon/internal/engine"}}, 1},
		{"settlement planning reaching the store through intake", map[string][]string{
			"cacheon/internal/market/settle":        {"cacheon/internal/canon", "cacheon/internal/market/intake"},
			"cacheon/internal/market/intake":        {"cacheon/internal/store"},
			"cacheon/internal/market/settle/commit": {"cacheon/internal/market/settle", "cacheon/internal/store"},
		}, 1},
		{"store reaching the market", map[string][]string{"cacheon/internal/store": {"cacheon/internal/market/chain"}}, 1},
		{"a domain package importing the CLI", map[string][]string{"cacheon/internal/verify": {"cacheon/internal/cli"}}, 1},
		{"allowed", map[string][]string{
			"cacheon/internal/release": {"cacheon/internal/canon", "cacheon/internal/product"},
			"cacheon/internal/referee": {"cacheon/internal/engine", "cacheon/internal/evidence"},
			"cacheon/internal/cli":     {"cacheon/internal/release", "cacheon/internal/market/chain"},
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := violations(tc.graph, layerRules); len(got) != tc.want {
				t.Errorf("%d violation(s), want %d: %q", len(got), tc.want, got)
			}
		})
	}
}

// TestDependents holds the real graph against the dependents rules, and
// shows on synthetic graphs that they catch a direct and a transitive
// dependent and allow the CLI and main.
func TestDependents(t *testing.T) {
	_, deps := goList(t)
	for _, v := range strayDependents(deps, dependents) {
		t.Error(v)
	}
	for _, tc := range []struct {
		name  string
		graph map[string][]string
		want  int
	}{
		{"intake importing the node", map[string][]string{"cacheon/internal/market/intake": {"cacheon/internal/node"}}, 1},
		{"the referee reaching it through another package", map[string][]string{
			"cacheon/internal/referee":   {"cacheon/internal/dashboard", "cacheon/internal/node"},
			"cacheon/internal/dashboard": {"cacheon/internal/node"},
		}, 2},
		{"the CLI, main and the node itself", map[string][]string{
			"cacheon/internal/cli":  {"cacheon/internal/node", "cacheon/internal/market/intake"},
			"cacheon/cmd/cacheon":   {"cacheon/internal/cli", "cacheon/internal/node"},
			"cacheon/internal/node": {"cacheon/internal/market/intake"},
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strayDependents(tc.graph, dependents); len(got) != tc.want {
				t.Errorf("%d stray dependent(s), want %d: %q", len(got), tc.want, got)
			}
		})
	}
}

// TestDependencyConfinement keeps each heavy third-party dependency inside
// the packages that own it.
func TestDependencyConfinement(t *testing.T) {
	imports, _ := goList(t)
	for pkg, imps := range imports {
		for _, imp := range imps {
			for dep, allowed := range owners {
				if imp != dep && !strings.HasPrefix(imp, dep+"/") {
					continue
				}
				if !slices.Contains(allowed, pkg) {
					t.Errorf("%s imports %s; only %v may", pkg, imp, allowed)
				}
			}
		}
	}
}
