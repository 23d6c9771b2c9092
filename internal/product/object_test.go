package product_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/canon"
	"cacheon/internal/product"
	"cacheon/internal/product/producttest"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestRoundTrip(t *testing.T) {
	w := newWorld(t)
	rs := readers()
	for _, o := range w.objects() {
		t.Run(o.name, func(t *testing.T) {
			data, d, err := product.Encode(o.obj)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			if d != hex.EncodeToString(sum[:]) {
				t.Fatalf("digest %s is not the sha256 of the bytes", d)
			}
			want, err := canon.Digest(o.obj.Domain(), product.SchemaVersion, o.obj)
			if err != nil {
				t.Fatal(err)
			}
			if d != want {
				t.Fatalf("digest %s, canon.Digest says %s", d, want)
			}
			got, err := rs[o.obj.Domain()](data)
			if err != nil {
				t.Fatalf("strict reader refuses its own encoding: %v", err)
			}
			if got != d {
				t.Fatalf("reader digest %s, want %s", got, d)
			}
		})
	}
}

// TestDigestsGolden pins the encoding of every sample object: digests must
// be identical on every machine and change only deliberately (regenerate
// with go test ./internal/product -update).
func TestDigestsGolden(t *testing.T) {
	w := newWorld(t)
	var b strings.Builder
	for _, o := range w.objects() {
		d, err := product.Digest(o.obj)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s\n", o.name, d)
	}
	golden := filepath.Join("testdata", "digests.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != b.String() {
		t.Fatalf("digests changed:\n got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// mutateJSON decodes data, applies f to the generic tree and returns the
// canonical encoding, so that the strict reader gets past the canonical
// byte check and has to judge the fields.
func mutateJSON(t *testing.T, data []byte, f func(env map[string]any)) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var env map[string]any
	if err := dec.Decode(&env); err != nil {
		t.Fatal(err)
	}
	f(env)
	out, err := canon.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func payloadOf(env map[string]any) map[string]any { return env["payload"].(map[string]any) }

// digestFields names one digest-valued field per object kind.
func digestFields() map[string]string {
	return map[string]string{
		product.DomainArena:             "runtime.digest",
		product.DomainReference:         "arena",
		product.DomainEvaluationStack:   "catalog",
		product.DomainCandidateStack:    "incumbent",
		product.DomainCrown:             "incumbent",
		product.DomainIntegrationRecord: "source.digest",
		product.DomainReview:            "",
		product.DomainReleaseBase:       "reference",
		product.DomainReleaseManifest:   "policy.catalog",
	}
}

func setPath(m map[string]any, dotted string, v any) {
	parts := strings.Split(dotted, ".")
	for _, p := range parts[:len(parts)-1] {
		m = m[p].(map[string]any)
	}
	m[parts[len(parts)-1]] = v
}

// TestReadersRejectBadInput runs every strict reader over every kind of bad
// input and checks that the error names the offending field.
func TestReadersRejectBadInput(t *testing.T) {
	w := newWorld(t)
	rs := readers()
	for _, o := range w.objects() {
		data, _, err := product.Encode(o.obj)
		if err != nil {
			t.Fatal(err)
		}
		dom := o.obj.Domain()
		cases := []struct {
			name, want string
			data       []byte
		}{
			{"unknown field", `$.payload: unknown field "surplus"`, mutateJSON(t, data, func(e map[string]any) { payloadOf(e)["surplus"] = true })},
			{"unknown envelope field", `$: unknown field "extra"`, mutateJSON(t, data, func(e map[string]any) { e["extra"] = "x" })},
			{"duplicate key", `duplicate key "domain"`, bytes.Replace(data, []byte(`{"domain":`), []byte(`{"domain":"x","domain":`), 1)},
			{"float in payload", `$.payload.a: number 1.5`, bytes.Replace(data, []byte(`"payload":{`), []byte(`"payload":{"a":1.5,`), 1)},
			{"float schema version", `$.schema_version: number 1.0`, bytes.Replace(data, []byte(`"schema_version":1}`), []byte(`"schema_version":1.0}`), 1)},
			{"whitespace", "not canonical", bytes.Replace(data, []byte(`{"domain":`), []byte(`{ "domain":`), 1)},
			{"trailing newline", "not canonical", append(append([]byte{}, data...), '\n')},
			{"wrong domain", "$.domain", mutateJSON(t, data, func(e map[string]any) { e["domain"] = "cacheon.other" })},
			{"wrong schema version", "$.schema_version", mutateJSON(t, data, func(e map[string]any) { e["schema_version"] = json.Number("2") })},
			{"not an object", "want an object", []byte(`[]`)},
			{"empty", "", nil},
		}
		// a missing field: drop each payload key in turn
		var keys []string
		mutateJSON(t, data, func(e map[string]any) {
			for k := range payloadOf(e) {
				keys = append(keys, k)
			}
		})
		for _, k := range keys {
			if k == "notes" || k == "previous" || k == "crown" && dom == product.DomainCandidateStack {
				continue
			}
			key := k
			cases = append(cases, struct {
				name, want string
				data       []byte
			}{"missing " + key, fmt.Sprintf(`$.payload: missing field %q`, key), mutateJSON(t, data, func(e map[string]any) { delete(payloadOf(e), key) })})
		}
		if f := digestFields()[dom]; f != "" {
			cases = append(cases, struct {
				name, want string
				data       []byte
			}{"malformed digest", "$.payload." + f, mutateJSON(t, data, func(e map[string]any) { setPath(payloadOf(e), f, strings.Repeat("A", 64)) })},
				struct {
					name, want string
					data       []byte
				}{"all-zero digest", "$.payload." + f, mutateJSON(t, data, func(e map[string]any) { setPath(payloadOf(e), f, strings.Repeat("0", 64)) })})
		}
		for _, c := range cases {
			t.Run(o.name+"/"+c.name, func(t *testing.T) {
				_, err := rs[dom](c.data)
				if err == nil {
					t.Fatalf("accepted:\n%s", c.data)
				}
				if !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %q does not contain %q", err, c.want)
				}
			})
		}
	}
}

// TestReadersRejectWrongDerivedDigests changes a digest that is derived from
// other content and checks that the reader notices the mismatch.
func TestReadersRejectWrongDerivedDigests(t *testing.T) {
	w := newWorld(t)
	rs := readers()
	cases := []struct {
		name  string
		obj   product.Object
		field string
	}{
		{"crown payload digest", &w.crown, "selected_payload.digest"},
		{"integration crown ref", &w.record, "crown"},
		{"integration embedded payload digest", &w.record, "crown_record.selected_payload.digest"},
		{"integration preserved hash", &w.record, "preserved"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, _, err := product.Encode(c.obj)
			if err != nil {
				t.Fatal(err)
			}
			bad := mutateJSON(t, data, func(e map[string]any) {
				if c.field == "preserved" {
					p := payloadOf(e)["preserved"].([]any)[0].(map[string]any)
					p["sha256"] = producttest.FakeDigest("other")
					return
				}
				setPath(payloadOf(e), c.field, producttest.FakeDigest("wrong"))
			})
			_, err = rs[c.obj.Domain()](bad)
			if err == nil || !strings.Contains(err.Error(), "$.payload."+c.field) {
				t.Fatalf("error %v does not name $.payload.%s", err, c.field)
			}
		})
	}
}

func TestDecodeLenientReview(t *testing.T) {
	w := newWorld(t)
	human := []byte(`{
  "reviewer": "maintainer@cacheon.example",
  "decision": "approved",
  "checks": {"reproduction": "pass", "correctness": "pass", "security": "pass",
             "license": "pass", "compatibility": "pass"},
  "tests": [{"name": "tests/test_contrib.py", "outcome": "pass"}],
  "license": "Apache-2.0",
  "provenance": "rewritten from the crowned proposal by the maintainers"
}`)
	r, err := product.ReadReview(human)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := product.Digest(&r)
	b, _ := product.Digest(&w.review)
	if a != b {
		t.Fatalf("lenient read gives %+v", r)
	}
	// wrapped in the envelope, with free formatting
	env := []byte(`{"schema_version": 1, "domain": "cacheon.review", "payload": ` + string(human) + `}`)
	if _, err := product.ReadReview(env); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, in, want string }{
		{"duplicate", strings.Replace(string(human), `"license": "Apache-2.0"`, `"license": "MIT", "license": "Apache-2.0"`, 1), `duplicate key "license"`},
		{"unknown", strings.Replace(string(human), `"license": "Apache-2.0"`, `"licence": "MIT", "license": "Apache-2.0"`, 1), `unknown field "licence"`},
		{"missing", strings.Replace(string(human), `"license": "Apache-2.0",`, ``, 1), `missing field "license"`},
		{"float", strings.Replace(string(human), `"tests": [`, `"score": 0.5, "tests": [`, 1), `$.score`},
		{"approval with a failing check", strings.Replace(string(human), `"security": "pass"`, `"security": "fail"`, 1), `checks.security`},
		{"approval with a failing test", strings.Replace(string(human), `"outcome": "pass"`, `"outcome": "fail"`, 1), `tests[0].outcome`},
		{"bad decision", strings.Replace(string(human), `"approved"`, `"maybe"`, 1), `$.decision`},
		{"envelope with bad payload", strings.Replace(string(env), `"approved"`, `"maybe"`, 1), `$.payload.decision`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := product.ReadReview([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v does not contain %q", err, c.want)
			}
		})
	}
}

func TestSourceSkip(t *testing.T) {
	tests := []struct {
		rel   string
		isDir bool
		skip  bool
	}{
		{".git", true, true},
		{"a/__pycache__", true, true},
		{"._meta", true, false}, // only files named "._*" are resource forks
		{"src", true, false},
		{"kernel.py", false, false},
		{"a/kernel.pyc", false, true},
		{"a/kernel.pyo", false, true},
		{".pyc", false, false}, // no suffix: pathlib's rule
		{"a/._kernel.py", false, true},
		{"._meta/kernel.py", false, false},
	}
	for _, tt := range tests {
		if got := product.SourceSkip(tt.rel, tt.isDir); got != tt.skip {
			t.Errorf("SourceSkip(%q, dir=%t) = %t, want %t", tt.rel, tt.isDir, got, tt.skip)
		}
	}
}
