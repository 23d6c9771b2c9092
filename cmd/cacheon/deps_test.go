package main

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyConfinement keeps each heavy third-party dependency inside
// the one package that owns it, so the trusted core stays small and the
// release path stays chain- and sandbox-free.
func TestDependencyConfinement(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not on PATH")
	}
	owners := map[string][]string{
		"github.com/landlock-lsm/go-landlock": {"cacheon/internal/sandbox"},
		"github.com/pelletier/go-toml/v2":     {"cacheon/internal/bundle", "cacheon/internal/arena", "cacheon/internal/engine", "cacheon/internal/tomlpos"},
		"github.com/spf13/cobra":              {"cacheon/internal/cli"},
		"github.com/rogpeppe/go-internal":     {},
	}
	out, err := exec.Command("go", "list", "-json", "cacheon/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		for _, imp := range p.Imports {
			for dep, allowed := range owners {
				if imp != dep && !strings.HasPrefix(imp, dep+"/") {
					continue
				}
				ok := false
				for _, a := range allowed {
					ok = ok || a == p.ImportPath
				}
				if !ok {
					t.Errorf("%s imports %s; only %v may", p.ImportPath, imp, allowed)
				}
			}
		}
	}
}
