package scan

import (
	"strings"
	"testing"
)

const (
	testHeader = `{"python":"3.11.7","stdlib":["os","sys"]}` + "\n"
	testFile   = `{"path":"a.py","error":null,` +
		`"imports":[{"module":"torch.nn","level":0,"from":false,"names":[],"asname":"nn","line":1,"col":1},` +
		`{"module":"","level":1,"from":true,"asname":"","names":[{"name":"x","asname":""},{"name":"*","asname":""}],"line":2,"col":1}],` +
		`"calls":[{"func":"getattr","nargs":2,"nkeywords":0,"starred":false,"target":"x","name_literal":true,"name_arg":"y","module_level":true,"line":3,"col":1}],` +
		`"attributes":[{"base":"torch","attrs":["load"],"ctx":"load","module_level":false,"line":4,"col":5}],` +
		`"stores":[{"root":"torch","target":"torch.x","ctx":"store","line":5,"col":1}],` +
		`"names":[{"name":"eval","ctx":"load","line":6,"col":3},{"name":"f","ctx":"def","kind":"function","line":7,"col":1}],` +
		`"aliases":[{"name":"t","chains":["torch.nn"],"line":8,"col":1}],` +
		`"flows":[{"chain":"torch","where":"container","callee":"","line":9,"col":2}]}` + "\n"
	testError = `{"path":"b.py","error":{"line":3,"col":6,"msg":"invalid syntax"},"imports":[],"calls":[],"attributes":[],"stores":[],"names":[]}` + "\n"
	// testClasses carries the facts of astscope: classes, methods,
	// receivers, store links, values and format fields.
	testClasses = `{"path":"a.py","error":null,"imports":[],` +
		`"calls":[{"func":"setattr","nargs":3,"nkeywords":0,"starred":false,"target":"self","target_roots":[],"name_literal":true,"name_arg":"x","target_receiver":1,"module_level":false,"line":4,"col":9}],` +
		`"attributes":[{"base":"self","attrs":["m"],"ctx":"load","module_level":false,"receiver":1,"root_call":"","root_arg":0,"called":true,"arg0":1,"format":false,"line":5,"col":9},` +
		`{"base":"","attrs":["__class__"],"ctx":"load","module_level":true,"receiver":0,"root_call":"type","root_arg":0,"called":false,"arg0":0,"format":true,"line":6,"col":1}],` +
		`"stores":[{"root":"self","target":"self.x[...]","roots":[],"links":["x","[]"],"receiver":1,"ctx":"store","line":3,"col":9}],` +
		`"names":[{"name":"C","ctx":"def","kind":"class","decorators":[{"chain":"dataclasses.dataclass","call":false}],"line":1,"col":1},` +
		`{"name":"c","ctx":"store","value":{"kind":"call","callee":"C"},"line":7,"col":1}],` +
		`"aliases":[],"flows":[],` +
		`"classes":[{"name":"C","bases":["torch.nn.Module",""],"keywords":false,"decorators":[],"refs":["m"],"top":true,"line":1,"col":1}],` +
		`"methods":[{"class":1,"name":"m","decorators":[{"chain":"functools.lru_cache","call":true}],"line":2,"col":5}]}` + "\n"
	// testTypes carries the facts of asttyping.py.
	testTypes = `{"path":"a.py","error":null,"imports":[],"calls":[],"attributes":[],"stores":[],"names":[],"aliases":[],"flows":[],` +
		`"type_names":[{"line":1,"col":9,"where":"annotation","place":"param","generics":["typing.Callable"]},` +
		`{"line":2,"col":18,"where":"classinfo","callee":"isinstance","call_line":2,"call_col":1}],` +
		`"type_checking":[{"test":"TYPE_CHECKING","line":3,"col":1,"imports":[[4,5]]}],` +
		`"annotations":[[1,9,1,30]],` +
		`"type_calls":[{"line":5,"col":5,"where":"identity"},{"line":6,"col":20,"where":"classinfo","callee":"isinstance","call_line":6,"call_col":1}]}` + "\n"
	testRichHeader = `{"python":"3.11.2","stdlib":["os"],"importable":["os","six"],"submodules":["torch.nn","torch.utils.data"]}` + "\n"
)

func TestParseFacts(t *testing.T) {
	paths := []string{"a.py", "b.py"}
	tests := []struct {
		name    string
		out     string
		files   int
		wantErr string
	}{
		{name: "complete", out: testHeader + testFile + testError, files: 2},
		{name: "partial run", out: testHeader + testFile, files: 1},
		{name: "header only", out: testHeader, files: 0},
		{name: "empty", out: "", wantErr: "no header"},
		{name: "no final newline", out: strings.TrimSuffix(testHeader, "\n"), wantErr: "newline"},
		{name: "unknown header field", out: `{"python":"3","stdlib":[],"x":1}` + "\n", wantErr: "unknown field"},
		{name: "missing version", out: `{"stdlib":[]}` + "\n", wantErr: "interpreter version"},
		{name: "wrong path", out: testHeader + testError, wantErr: `want "a.py"`},
		{name: "too many files", out: testHeader + testFile + testError + testError, wantErr: "3 file lines for 2"},
		{name: "trailing data", out: testHeader + strings.TrimSuffix(testFile, "\n") + " {}\n", wantErr: "trailing data"},
		{name: "unknown file field", out: testHeader + `{"path":"a.py","error":null,"evil":true}` + "\n", wantErr: "unknown field"},
		{name: "negative line", out: testHeader + strings.Replace(testFile, `"line":6`, `"line":-6`, 1), wantErr: "out of range"},
		{name: "bad ctx", out: testHeader + strings.Replace(testFile, `"ctx":"store"`, `"ctx":"param"`, 1), wantErr: "unknown context"},
		{name: "store with load ctx", out: testHeader + strings.Replace(testFile, `"ctx":"store"`, `"ctx":"load"`, 1), wantErr: "store"},
		{name: "empty chain", out: testHeader + strings.Replace(testFile, `"attrs":["load"]`, `"attrs":[]`, 1), wantErr: "empty chain"},
		{name: "newline in name", out: testHeader + strings.Replace(testFile, `"name":"eval"`, `"name":"ev\nal"`, 1), wantErr: "bad character"},
		{name: "dotted attribute", out: testHeader + strings.Replace(testFile, `"attrs":["load"]`, `"attrs":["a.b"]`, 1), wantErr: "bad character"},
		{name: "bad module", out: testHeader + strings.Replace(testFile, `"module":"torch.nn"`, `"module":"torch..nn"`, 1), wantErr: "bad character"},
		{name: "negative level", out: testHeader + strings.Replace(testFile, `"level":1`, `"level":-1`, 1), wantErr: "level"},
		{name: "facts next to error", out: testHeader + testFile + strings.Replace(testError, `"names":[]`, `"names":[{"name":"x","ctx":"load","line":1,"col":1}]`, 1), wantErr: "next to a parse error"},
		{name: "plain import with names", out: testHeader + strings.Replace(testFile, `"from":false,"names":[]`, `"from":false,"names":[{"name":"x","asname":""}]`, 1), wantErr: "plain import"},
		{name: "not json", out: testHeader + "nope\n", wantErr: "decode"},
		{name: "def ctx on an attribute", out: testHeader + strings.Replace(testFile, `"ctx":"load","module_level":false`, `"ctx":"def","module_level":false`, 1), wantErr: "unknown context"},
		{name: "bad name ctx", out: testHeader + strings.Replace(testFile, `"ctx":"def"`, `"ctx":"param"`, 1), wantErr: "unknown context"},
		{name: "alias without chains", out: testHeader + strings.Replace(testFile, `"chains":["torch.nn"]`, `"chains":[]`, 1), wantErr: "no chains"},
		{name: "alias with a bad chain", out: testHeader + strings.Replace(testFile, `"chains":["torch.nn"]`, `"chains":["torch..nn"]`, 1), wantErr: "bad character"},
		{name: "alias chain too long", out: testHeader + strings.Replace(testFile, `"chains":["torch.nn"]`, `"chains":["`+strings.Repeat("a.", maxChain)+`a"]`, 1), wantErr: "chain of"},
		{name: "long alias chain", out: testHeader + strings.Replace(testFile, `"chains":["torch.nn"]`, `"chains":["`+strings.Repeat("torch.", 1000)+`nn"]`, 1), files: 1},
		{name: "unknown flow place", out: testHeader + strings.Replace(testFile, `"where":"container"`, `"where":"elsewhere"`, 1), wantErr: "unknown place"},
		{name: "bad flow callee", out: testHeader + strings.Replace(testFile, `"callee":""`, `"callee":"a b"`, 1), wantErr: "bad character"},
		{name: "bad store roots", out: testHeader + strings.Replace(testFile, `"target":"torch.x"`, `"target":"torch.x","roots":["a.b"]`, 1), wantErr: "bad character"},
		{name: "bad call target", out: testHeader + strings.Replace(testFile, `"target":"x"`, `"target":"x..y"`, 1), wantErr: "bad character"},
		{name: "classes and methods", out: testRichHeader + testClasses, files: 1},
		{name: "receiver out of range", out: testHeader + strings.Replace(testClasses, `"receiver":1,"ctx"`, `"receiver":2,"ctx"`, 1), wantErr: "method reference 2"},
		{name: "negative receiver", out: testHeader + strings.Replace(testClasses, `"arg0":1`, `"arg0":-1`, 1), wantErr: "method reference -1"},
		{name: "method of no class", out: testHeader + strings.Replace(testClasses, `"class":1`, `"class":2`, 1), wantErr: "class 2 out of range"},
		{name: "bad link", out: testHeader + strings.Replace(testClasses, `"links":["x","[]"]`, `"links":["x","[0]"]`, 1), wantErr: "bad character"},
		{name: "unknown def kind", out: testHeader + strings.Replace(testClasses, `"kind":"class"`, `"kind":"module"`, 1), wantErr: "unknown definition kind"},
		{name: "value on a def", out: testHeader + strings.Replace(testClasses, `"kind":"class",`, `"kind":"class","value":{"kind":"other","callee":""},`, 1), wantErr: "not stored"},
		{name: "unknown value kind", out: testHeader + strings.Replace(testClasses, `"value":{"kind":"call"`, `"value":{"kind":"eval"`, 1), wantErr: "unknown value kind"},
		{name: "bad decorator chain", out: testHeader + strings.Replace(testClasses, `"chain":"functools.lru_cache"`, `"chain":"functools..lru_cache"`, 1), wantErr: "decorator"},
		{name: "bad root call", out: testHeader + strings.Replace(testClasses, `"root_call":"type"`, `"root_call":"ty pe"`, 1), wantErr: "bad character"},
		{name: "bad submodule", out: strings.Replace(testRichHeader, `"torch.nn"`, `"torch..nn"`, 1), wantErr: "submodule name"},
		{name: "bad importable name", out: strings.Replace(testRichHeader, `"six"`, `"six.moves"`, 1), wantErr: "importable name"},
		{name: "typing facts", out: testHeader + testTypes, files: 1},
		{name: "unknown type name place", out: testHeader + strings.Replace(testTypes, `"where":"annotation"`, `"where":"call"`, 1), wantErr: "unknown place"},
		{name: "unknown annotation place", out: testHeader + strings.Replace(testTypes, `"place":"param"`, `"place":"lambda"`, 1), wantErr: "unknown place"},
		{name: "unknown classinfo callee", out: testHeader + strings.Replace(testTypes, `"callee":"isinstance"`, `"callee":"f"`, 1), wantErr: "unknown callee"},
		{name: "annotation with a call", out: testHeader + strings.Replace(testTypes, `"place":"param",`, `"place":"param","callee":"isinstance",`, 1), wantErr: "with a call"},
		{name: "classinfo with generics", out: testHeader + strings.Replace(testTypes, `"callee":"isinstance",`, `"callee":"isinstance","generics":["x"],`, 1), wantErr: "annotation's fields"},
		{name: "bad generic", out: testHeader + strings.Replace(testTypes, `"typing.Callable"`, `"typing..Callable"`, 1), wantErr: "bad character"},
		{name: "identity type call with a callee", out: testHeader + strings.Replace(testTypes, `"where":"identity"`, `"where":"identity","callee":"isinstance"`, 1), wantErr: "type call: an identity use with other fields"},
		{name: "type call in an annotation", out: testHeader + strings.Replace(testTypes, `"where":"identity"`, `"where":"annotation","place":"param"`, 1), wantErr: "type call: in an annotation"},
		{name: "type call with a bad position", out: testHeader + strings.Replace(testTypes, `"line":5,"col":5`, `"line":-1,"col":5`, 1), wantErr: "type call: position"},
		{name: "identity use as a type name", out: testHeader + strings.Replace(testTypes, `"where":"annotation","place":"param","generics":["typing.Callable"]`, `"where":"identity"`, 1), wantErr: "type name: an identity use"},
		{name: "bad type checking test", out: testHeader + strings.Replace(testTypes, `"test":"TYPE_CHECKING"`, `"test":""`, 1), wantErr: "type checking"},
		{name: "short import position", out: testHeader + strings.Replace(testTypes, `[[4,5]]`, `[[4]]`, 1), wantErr: "not line, col"},
		{name: "short span", out: testHeader + strings.Replace(testTypes, `[[1,9,1,30]]`, `[[1,9,1]]`, 1), wantErr: "not line, col, end line, end col"},
		{name: "reversed span", out: testHeader + strings.Replace(testTypes, `[[1,9,1,30]]`, `[[1,9,1,3]]`, 1), wantErr: "ends before"},
		{name: "facts next to error (types)", out: testHeader + testFile + strings.Replace(testError, `"names":[]`, `"names":[],"annotations":[[1,1,1,2]]`, 1), wantErr: "next to a parse error"},
		{name: "facts next to error (alias)", out: testHeader + testFile + strings.Replace(testError, `"names":[]`, `"names":[],"aliases":[{"name":"x","chains":["y"],"line":1,"col":1}]`, 1), wantErr: "next to a parse error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := parseFacts([]byte(tt.out), paths)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(b.files) != tt.files {
				t.Fatalf("files = %d, want %d", len(b.files), tt.files)
			}
		})
	}
}

func FuzzParseFacts(f *testing.F) {
	f.Add([]byte(testHeader + testFile + testError))
	f.Add([]byte(testHeader + testFile))
	f.Add([]byte(testHeader))
	f.Add([]byte(`{"python":"3.9.18","stdlib":[]}` + "\n" + `{"path":"a.py","error":null,"imports":null}` + "\n"))
	f.Add([]byte("{}\n{}\n"))
	f.Add([]byte(testRichHeader + testClasses + testError))
	paths := []string{"a.py", "b.py"}
	f.Fuzz(func(t *testing.T, out []byte) {
		b, err := parseFacts(out, paths)
		if err != nil {
			return
		}
		if len(b.files) > len(paths) {
			t.Fatalf("%d files for %d paths", len(b.files), len(paths))
		}
		for i, ff := range b.files {
			if ff.Path != paths[i] {
				t.Fatalf("file %d is %q", i, ff.Path)
			}
			if ff.Error != nil && len(ff.Imports)+len(ff.Calls)+len(ff.Attributes)+len(ff.Stores)+len(ff.Names) > 0 {
				t.Fatal("facts next to an error")
			}
			for _, a := range ff.Attributes {
				if len(a.Attrs) == 0 || a.Line < 0 || a.Col < 0 {
					t.Fatalf("bad attribute %+v", a)
				}
			}
			// The rules must digest anything the parser accepts.
			ix := newModIndex([]string{"a.py", "b.py", "pkg/__init__.py"}, map[string]bool{"os": true})
			c := newChecker(ix, DefaultPolicy(), map[string]*fileFacts{ff.Path: &b.files[i]}, &b.header)
			for _, fd := range c.check(ff.Path, &b.files[i]) {
				if strings.ContainsAny(fd.String(), "\n\r") {
					t.Fatalf("finding spans lines: %q", fd.String())
				}
			}
			ix.closure([]string{ff.Path}, func(string) *fileFacts { return &b.files[i] })
		}
	})
}
