package fingerprint

import "testing"

func TestNormalizeC(t *testing.T) {
	for _, tc := range []struct {
		name, a, b string
		same       bool
	}{
		{"line comment", "int x = 1; // one\n", "int x = 1; // uno\n", true},
		{"block comment", "/* header */\nint x;", "int /* the */ x;", true},
		{"layout", "__global__ void k(float* a, int n) {\n  a[0] = n + 1;\n}\n", "__global__ void k(float *a,int n){a[0]=n+1;}", true},
		{"splice", "#define A(x) \\\n  (x)\n", "#define A(x) (x)\n", true},
		{"comment marker in a string", `const char* s = "a // b";`, `const char* s = "a";`, false},
		{"comment marker in a char", `char c = '/'; // x`, `char c = '/';`, true},
		{"escaped quote", `s = "a\" // b";`, `s = "a\"";`, false},
		{"words stay apart", "int x;", "intx;", false},
		{"operators stay apart", "a - -b", "a--b", false},
		{"constant", "x = 1;", "x = 2;", false},
		{"operator", "x = a + b;", "x = a * b;", false},
		{"unterminated comment", "int x; /* open", "int x;", true},
	} {
		if got := normalizeC([]byte(tc.a)) == normalizeC([]byte(tc.b)); got != tc.same {
			t.Errorf("%s: same = %v, want %v (%q, %q)", tc.name, got, tc.same, normalizeC([]byte(tc.a)), normalizeC([]byte(tc.b)))
		}
	}
}

// FuzzNormalizeC: the normalizer never panics, never grows its input and
// is idempotent.
func FuzzNormalizeC(f *testing.F) {
	for _, s := range []string{"int x = 1; // c\n", "/* a */ b", `"a\"b" 'c'`, "a - -b", "#define X \\\n 1", "'", "/*", "\\"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		once := normalizeC(src)
		if len(once) > len(src) {
			t.Fatalf("normalized %q to the longer %q", src, once)
		}
		if twice := normalizeC([]byte(once)); twice != once {
			t.Fatalf("not idempotent: %q -> %q -> %q", src, once, twice)
		}
	})
}
