package sandbox

import (
	"bytes"
	"testing"
)

// FuzzReadStatus: the status pipe's bytes come from the child before it
// execs the target; whatever they are, readStatus returns a report or an
// error, and never a report together with a claim that it is missing.
func FuzzReadStatus(f *testing.F) {
	for _, s := range []string{
		`{"report":{"layers":[{"name":"landlock","applied":true}]}}` + "\n",
		`{"report":{"layers":[]}}` + "\n" + `{"error":"execve: no such file"}` + "\n",
		`{"error":"seccomp: EPERM"}`,
		"",
		"not json\n",
		`{"report":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := readStatus(bytes.NewReader(data))
		if err != nil && len(r.Layers) != 0 && !bytes.Contains(data, []byte(`"report"`)) {
			t.Fatalf("layers %v without a report line, err %v", r.Layers, err)
		}
		for _, l := range r.Missing() {
			if l.Applied {
				t.Fatalf("Missing returned an applied layer %+v", l)
			}
		}
	})
}
