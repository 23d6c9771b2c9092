package arenas

import (
	"strings"
	"testing"
)

func TestResolveArena(t *testing.T) {
	for _, tc := range []struct{ arg, name, err string }{
		{"cpu-tiny", "cpu-tiny", ""},
		{"h200-moe.toml", "h200-moe", ""},
		{"nope", "", `--arena "nope": no such file and no shipped arena`},
		{"../cpu-tiny", "", "no such file"},
	} {
		a, err := Resolve(tc.arg)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.arg, err, tc.err)
			}
			continue
		}
		if err != nil || a.Name != tc.name || a.Dir == "" {
			t.Errorf("%s: %+v %v", tc.arg, a, err)
		}
	}
}
