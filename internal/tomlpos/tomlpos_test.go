package tomlpos

import (
	"bytes"
	"testing"
)

const doc = `name = "tiny"
model.kind = "llama"

[engine]
graph_buckets = [1, 2, 4]
limits = { pages = 8, page.size = 16 }

[workloads."b.64"]
seed = 7

[[ops]]
slot = "norm.rmsnorm"
dtypes = ["bf16", "float16"]

[[ops]]
slot = "activation.silu_and_mul"
`

func TestIndex(t *testing.T) {
	ix := New([]byte(doc))
	tests := []struct {
		name  string
		look  func(string) (Pos, bool)
		path  string
		want  Pos
		found bool
	}{
		{"key of a top-level key", ix.Key, "name", Pos{1, 1}, true},
		{"value of a top-level key", ix.Value, "name", Pos{1, 8}, true},
		{"dotted key: each part at its key", ix.Key, "model.kind", Pos{2, 7}, true},
		{"dotted key: the parent at its key", ix.Key, "model", Pos{2, 1}, true},
		{"dotted key: the value", ix.Value, "model.kind", Pos{2, 14}, true},
		{"table header key", ix.Key, "engine", Pos{4, 2}, true},
		{"table header as value", ix.Value, "engine", Pos{4, 2}, true},
		{"key under a table", ix.Key, "engine.graph_buckets", Pos{5, 1}, true},
		{"array element", ix.Value, "engine.graph_buckets[2]", Pos{5, 24}, true},
		{"inline table key", ix.Key, "engine.limits.pages", Pos{6, 12}, true},
		{"inline table dotted key", ix.Key, "engine.limits.page.size", Pos{6, 28}, true},
		{"inline table value", ix.Value, "engine.limits.page.size", Pos{6, 35}, true},
		{"quoted key with a dot", ix.Key, "workloads.b.64.seed", Pos{9, 1}, true},
		{"missing key falls back to its table", ix.Key, "workloads.b.64.requests", Pos{8, 12}, true},
		{"array-of-tables row", ix.Value, "ops[1]", Pos{15, 3}, true},
		{"key of an array-of-tables row", ix.Key, "ops[1].slot", Pos{16, 1}, true},
		{"missing value falls back to its row", ix.Value, "ops[1].entry", Pos{15, 3}, true},
		{"element past the end falls back to the array (its key-value: arrays carry no range)", ix.Value, "ops[0].dtypes[5]", Pos{13, 1}, true},
		{"nothing written", ix.Value, "competition.mode", Pos{}, false},
		{"nothing written (key)", ix.Key, "device", Pos{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.look(tt.path)
			if got != tt.want || ok != tt.found {
				t.Fatalf("%s = %v, %v; want %v, %v", tt.path, got, ok, tt.want, tt.found)
			}
		})
	}
	for path, want := range map[string]bool{"model": true, "model.kind": true, "engine.limits.page": true, "workloads.b.64": true, "device": false, "ops[1].slot": true} {
		if ix.HasKey(path) != want {
			t.Errorf("HasKey(%q) = %v", path, !want)
		}
	}
	if h := ix.ArrayTables("ops"); len(h) != 2 || h[0] != (Pos{11, 3}) || h[1] != (Pos{15, 3}) {
		t.Errorf("ArrayTables(ops) = %v", h)
	}
	if h := ix.Tables("engine"); len(h) != 1 || h[0] != (Pos{4, 2}) {
		t.Errorf("Tables(engine) = %v", h)
	}
	if h := ix.Tables("ops"); len(h) != 0 {
		t.Errorf("Tables(ops) = %v", h)
	}
}

// TestFirstWins: a path written twice (an invalid document) keeps its first
// position, and what precedes a syntax error is still indexed.
func TestFirstWins(t *testing.T) {
	ix := New([]byte("a = 1\na = 2\n[[ops]]\n[[ops]]\nb = = 3\n"))
	if p, _ := ix.Key("a"); p != (Pos{1, 1}) {
		t.Fatalf("Key(a) = %v", p)
	}
	if h := ix.ArrayTables("ops"); len(h) != 2 {
		t.Fatalf("ArrayTables(ops) = %v", h)
	}
}

// FuzzNew: the index never panics, and every position it reports is inside
// the document.
func FuzzNew(f *testing.F) {
	f.Add([]byte(doc))
	f.Add([]byte("[a]\n[a.b]\n[[a.c]]\n"))
	f.Add([]byte(`"" = { x = [1, {y = 2}] }`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix := New(data)
		lines := bytes.Count(data, []byte("\n")) + 1
		check := func(what string, p Pos) {
			if p.Line < 0 || p.Line > lines || (p.Line > 0 && p.Col < 1) {
				t.Fatalf("%s at %v outside %d lines", what, p, lines)
			}
		}
		for k, p := range ix.keys {
			check("key "+k, p)
		}
		for k, p := range ix.values {
			check("value "+k, p)
		}
	})
}
