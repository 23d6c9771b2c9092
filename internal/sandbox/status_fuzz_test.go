package sandbox

import (
	"bytes"
	"testing"
)

// FuzzReadStatus: the status pipe's bytes come from the child before it
// execs the target; whatever they are, readStatus returns without a panic,
// and it never reports success for input with no JSON line at all.
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
		_, err := readStatus(bytes.NewReader(data))
		if err == nil && !bytes.Contains(data, []byte("{")) {
			t.Fatalf("success from %q, which has no JSON object", data)
		}
	})
}
