package sandbox

import (
	"fmt"
	"strings"
)

// Layer is the outcome of one confinement layer.
type Layer struct {
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
	Detail  string `json:"detail"`
}

// Report lists every layer, in a fixed order, with whether it was applied
// and how (or why not).
type Report struct {
	Layers []Layer `json:"layers"`
}

// Missing returns the layers that were not applied.
func (r Report) Missing() []Layer {
	var out []Layer
	for _, l := range r.Layers {
		if !l.Applied {
			out = append(out, l)
		}
	}
	return out
}

// Layer returns the named layer and whether the report has it.
func (r Report) Layer(name string) (Layer, bool) {
	for _, l := range r.Layers {
		if l.Name == name {
			return l, true
		}
	}
	return Layer{}, false
}

// String renders one line per layer, for logs and verify output.
func (r Report) String() string {
	var b strings.Builder
	for _, l := range r.Layers {
		state := "applied"
		if !l.Applied {
			state = "NOT APPLIED"
		}
		fmt.Fprintf(&b, "%-14s %-11s %s\n", l.Name, state, l.Detail)
	}
	return b.String()
}

// set records the outcome of a layer, replacing an earlier entry of that name.
func (r *Report) set(name string, applied bool, format string, args ...any) {
	l := Layer{Name: name, Applied: applied, Detail: fmt.Sprintf(format, args...)}
	for i := range r.Layers {
		if r.Layers[i].Name == name {
			r.Layers[i] = l
			return
		}
	}
	r.Layers = append(r.Layers, l)
}

// sorted returns the report with layers in layerOrder, and a "not reported"
// entry for any layer missing from it, so callers always see every layer.
func (r Report) sorted() Report {
	out := Report{Layers: make([]Layer, 0, len(layerOrder()))}
	for _, name := range layerOrder() {
		l, ok := r.Layer(name)
		if !ok {
			l = Layer{Name: name, Detail: "not reported by the sandbox child"}
		}
		out.Layers = append(out.Layers, l)
	}
	return out
}
