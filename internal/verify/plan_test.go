package verify

import (
	"fmt"
	"strings"
	"testing"

	"cacheon/internal/capability"
	"cacheon/internal/slot"
)

// TestRowShapes: besides the jittered registered shapes, a row runs the
// count extremes and the corners of its variant's declared domain; a
// domain out of reach gets no corner.
func TestRowShapes(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	silu, _ := cat.Lookup("activation.silu_and_mul")
	sdpa, _ := cat.Lookup("attention.sdpa")
	tests := []struct {
		name string
		spec *slot.Spec
		meta string
		// want lists shapes (name: dims checked) that must be present;
		// absent lists names that must not be.
		want   map[string]string
		absent []string
	}{
		{"no domain: counts 1 and the maximum", silu, `{}`,
			map[string]string{"tiny@1": "N=1", "tiny@4096": "N=4096"}, []string{"tiny@lo", "tiny@hi"}},
		{"token range: both ends", silu, `{"capabilities": {"num_tokens": {"min": 200, "max": 300}}}`,
			map[string]string{"tiny@lo": "N=200", "tiny@hi": "N=300"}, nil},
		// The upper corner is the registered maximum, already a count shape.
		{"open range: count up to the registered maximum", silu, `{"capabilities": {"num_tokens": {"min": 33}}}`,
			map[string]string{"tiny@lo": "N=33", "tiny@4096": "N=4096"}, []string{"tiny@hi"}},
		{"max_last_dim: the largest last dimension below it", silu, `{"max_last_dim": 1001}`,
			map[string]string{"tiny@hi": "D=500"}, []string{"tiny@lo"}},
		{"out of reach: no corner", silu, `{"capabilities": {"num_tokens": {"min": 5000}}}`,
			nil, []string{"tiny@lo", "tiny@hi", "mlp@lo", "wide@hi"}},
		{"head_dim set: both members", sdpa, `{"capabilities": {"head_dim": [96, 160]}}`,
			map[string]string{"decode-like@lo": "D=96", "decode-like@hi": "D=160"}, nil},
		{"a huge domain stays affordable", silu, `{"capabilities": {"hidden_dim": {"min": 65536}}}`,
			map[string]string{"tiny@lo": "D=65536"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dom capability.Domain
			if tt.meta != "{}" {
				m, err := capability.ReadMetadata([]byte(tt.meta), capability.ReadOptions{LastDimField: "last_dim"})
				if err != nil {
					t.Fatal(err)
				}
				dom = m.Domain
			}
			fits := func(d slot.Dims) bool {
				desc, err := tt.spec.DescriptorOf(withWS(d))
				if err != nil {
					return false
				}
				full := map[string]any{}
				for k, v := range desc {
					full[k] = v
				}
				ok, _ := dom.Without("dtype", "device", "graph_mode").Match(full)
				return ok
			}
			got := map[string]slot.Dims{}
			for _, sh := range rowShapes(tt.spec, dom, 1, fits) {
				if _, dup := got[sh.Name]; dup {
					t.Errorf("shape %s twice", sh.Name)
				}
				got[sh.Name] = sh.Dims
				if n, err := tt.spec.InputElements(sh.Dims); err != nil || n > maxCaseElements {
					t.Errorf("shape %s: %d input elements (%v), budget %d", sh.Name, n, err, maxCaseElements)
				}
			}
			for name, dims := range tt.want {
				d, ok := got[name]
				if !ok {
					t.Errorf("no shape %s among %v", name, keys(got))
					continue
				}
				k, v, _ := strings.Cut(dims, "=")
				if fmt.Sprint(d[k]) != v {
					t.Errorf("%s: %s = %d, want %s", name, k, d[k], v)
				}
			}
			for _, name := range tt.absent {
				if _, ok := got[name]; ok {
					t.Errorf("unexpected shape %s: %v", name, got[name])
				}
			}
		})
	}
}

func keys(m map[string]slot.Dims) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
