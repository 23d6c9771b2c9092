package fingerprint

import (
	"strings"
	"testing"
)

func TestDecodeOutput(t *testing.T) {
	paths := []string{"a.py", "b.py"}
	for _, tc := range []struct {
		name, out string
		want      []normResult // nil: an error
	}{
		{"ok", `{"path":"a.py","norm":"Module()"}` + "\n" + `{"path":"b.py","error":"SyntaxError: x (line 1)"}` + "\n",
			[]normResult{{norm: "Module()"}, {err: "SyntaxError: x (line 1)"}}},
		{"spaces are JSON's", `{ "norm" : "M" , "path" : "a.py" }` + "\n" + `{"path":"b.py","norm":"N"}` + "\n",
			[]normResult{{norm: "M"}, {norm: "N"}}},
		{"missing line", `{"path":"a.py","norm":"M"}` + "\n", nil},
		{"unterminated", `{"path":"a.py","norm":"M"}` + "\n" + `{"path":"b.py","norm":"N"}`, nil},
		{"trailing line", `{"path":"a.py","norm":"M"}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n\n", nil},
		{"wrong order", `{"path":"b.py","norm":"M"}` + "\n" + `{"path":"a.py","norm":"N"}` + "\n", nil},
		{"both", `{"path":"a.py","norm":"M","error":"e"}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
		{"neither", `{"path":"a.py"}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
		{"empty dump", `{"path":"a.py","norm":""}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
		{"duplicate key", `{"path":"a.py","norm":"M","norm":"X"}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
		{"case-folded key", `{"PATH":"a.py","norm":"M"}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
		{"unknown key", `{"path":"a.py","norm":"M","x":"y"}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
		{"number", `{"path":"a.py","norm":1}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
		{"nested", `{"path":"a.py","norm":{"a":"b"}}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
		{"two objects on a line", `{"path":"a.py","norm":"M"}{}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
		{"array", `["a.py"]` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
		{"empty error", `{"path":"a.py","error":""}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
		{"long error", `{"path":"a.py","error":"` + strings.Repeat("e", maxErrorBytes+1) + `"}` + "\n" + `{"path":"b.py","norm":"N"}` + "\n", nil},
	} {
		got, err := decodeOutput([]byte(tc.out), paths)
		switch {
		case tc.want == nil && err == nil:
			t.Errorf("%s: decoded %v, want an error", tc.name, got)
		case tc.want != nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != nil && (len(got) != len(tc.want) || got[0] != tc.want[0] || got[1] != tc.want[1]):
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// FuzzDecodeOutput: the decoder never panics, and what it accepts is one
// result per path, each with exactly one of a bounded dump and an error.
func FuzzDecodeOutput(f *testing.F) {
	f.Add([]byte(`{"path":"a.py","norm":"Module()"}`+"\n"+`{"path":"b.py","error":"SyntaxError"}`+"\n"), 2)
	f.Add([]byte(`{"path":"a.py","norm":"M","norm":"X"}`+"\n"), 1)
	f.Add([]byte(`{"path":"a.py","norm":"\u0000\ud800"}`+"\n"), 1)
	f.Add([]byte("\n"), 0)
	f.Fuzz(func(t *testing.T, out []byte, n int) {
		n = max(0, n%4)
		paths := []string{"a.py", "b.py", "k/c.py"}[:min(n, 3)]
		got, err := decodeOutput(out, paths)
		if err != nil {
			return
		}
		if len(got) != len(paths) {
			t.Fatalf("%d results for %d paths", len(got), len(paths))
		}
		for _, r := range got {
			if (r.norm == "") == (r.err == "") {
				t.Fatalf("result %+v: want exactly one of a dump and an error", r)
			}
			if len(r.norm) > maxNormBytes {
				t.Fatalf("dump of %d bytes accepted", len(r.norm))
			}
		}
	})
}
