package scan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// genSnippet is one piece of generated Python with a known verdict. {n}
// stands for the snippet's index, so that the names of different snippets
// never meet (the scanner resolves names file-wide).
type genSnippet struct {
	code      string
	forbidden bool
}

// genHeader starts every generated file.
const genHeader = "import functools\nimport itertools\nimport math\nimport typing\n\nimport torch\nimport torch.nn.functional as F\n"

var genSnippets = []genSnippet{
	// Allowed: honest code in ordinary and unusual styles.
	{code: "x{n} = F.silu(torch.ones(2)) * math.pi"},
	{code: "class K{n}:\n    def __init__(self):\n        self.v = {}\n    def __call__(self, x):\n        self.v[0] = x\n        return x\nk{n} = K{n}()\nk{n}.extra = 1"},
	{code: "def f{n}(x, out):\n    out[...] = x\n    return functools.reduce(lambda a, b: a + b, [1, 2])"},
	{code: "c{n} = functools.partial(F.gelu, approximate='tanh')"},
	{code: "d{n} = {}\nd{n}['k'] = torch.zeros(1)"},
	{code: "t{n}: typing.Optional[int] = None"},
	{code: "s{n} = '{0.shape} {0.dtype}'.format(torch.ones(1))"},
	{code: "g{n} = torch.cuda.is_available() and torch.cuda.device_count()"},
	{code: "def h{n}():\n    yield 1\nv{n} = list(h{n}())"},
	{code: "m{n} = torch.nn.Identity()\nm{n}.training = False"},
	{code: "class P{n}:\n    @property\n    def p(self):\n        return self._p\n    @p.setter\n    def p(self, v):\n        self._p = v"},
	{code: "w{n} = getattr(torch, 'float8_e4m3fn', None)"},
	{code: "e{n} = list(itertools.product([1], [2]))"},
	{code: "ev{n} = torch.cuda.Event()\nev{n}.record()"},
	{code: "match {n}:\n    case 0:\n        z{n} = 1\n    case _:\n        z{n} = 2"},
	{code: "class Q{n}(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = torch.nn.Parameter(torch.ones(1))"},
	{code: "def r{n}(x):\n    r{n}.calls = getattr(r{n}, 'calls', 0) + 1\n    return x"},
	{code: "y{n} = torch.ops.aten.silu(torch.ones(1)) if hasattr(torch, 'ops') else None"},
	{code: "def a{n}(q, k, v):\n    m = torch.full(q.shape[:-1], float('-inf'))\n    p = torch.exp(q @ k.t() - m[..., None])\n    return p @ v"},
	{code: "def inp{n}(input, weight):\n    return input * weight"},
	{code: "def wr{n}(fn):\n    @functools.wraps(fn)\n    def inner(*a):\n        return fn(*a)\n    return inner"},
	{code: "@typing.final\n@functools.lru_cache(maxsize=None)\ndef tf{n}(x):\n    return x\ntyping.final(tf{n})"},

	// Forbidden: one class of escape each.
	{code: "import torch.utils.data as D{n}", forbidden: true},
	{code: "u{n} = torch.utils", forbidden: true},
	{code: "typing.get_type_hints(print)", forbidden: true},
	{code: "cf{n} = torch.compile(print)", forbidden: true},
	{code: "type(torch.ones(1)).add{n} = torch.sub", forbidden: true},
	{code: "torch.Tensor.mul{n} = 1", forbidden: true},
	{code: "def p{n}(c):\n    c.add = 1", forbidden: true},
	{code: "def gf{n}():\n    yield 1\nb{n} = gf{n}().gi_frame", forbidden: true},
	{code: "ev{n} = eval('1')", forbidden: true},
	{code: "o{n} = open('/etc/passwd')", forbidden: true},
	{code: "ga{n} = getattr(torch, 'lo' + 'ad')", forbidden: true},
	{code: "ct{n} = torch.cuda.Event(enable_timing=True).elapsed_time", forbidden: true},
	{code: "fs{n} = '{0.__class__}'.format(1)", forbidden: true},
	{code: "class U{n}:\n    def mu{n}(self):\n        self.a = 1\nU{n}.mu{n}(torch.Tensor)", forbidden: true},
	{code: "setattr(torch.nn.functional, 'silu', print)", forbidden: true},
	{code: "hl{n} = torch.hub.load('a', 'b')", forbidden: true},
	{code: "l{n} = [torch.Tensor]\nl{n}[0].add = 1", forbidden: true},
	{code: "import os as os{n}", forbidden: true},
	{code: "gl{n} = (lambda: 1).__globals__", forbidden: true},
	{code: "wd{n} = torch.distributed.distributed_c10d._world", forbidden: true},
	{code: "torch.ops.load_library('x{n}')", forbidden: true},
	{code: "tw{n} = torch.textwrap", forbidden: true},
	{code: "mr{n} = int.mro()", forbidden: true},
	{code: "try:\n    torch.zz{n}\nexcept AttributeError as e{n}:\n    m{n} = e{n}.obj", forbidden: true},
	{code: "def mg{n}():\n    yield 1\nmatch mg{n}():\n    case object(gi_frame=fr{n}):\n        pass", forbidden: true},
	{code: "nd{n} = torch.ones(1).numpy().ctypes", forbidden: true},
	{code: "fm{n} = ('{0.__glo' + 'bals__}').format(print)", forbidden: true},
	{code: "functools.update_wrapper(F.relu, print, assigned=('__code__',))", forbidden: true},
	{code: "functools.wraps(print, assigned=('x',))(F.relu)", forbidden: true},
	{code: "class Re{n}:\n    def __reduce_ex__(self, p):\n        return (int, ())", forbidden: true},
	{code: "F.GRID_SAMPLE_PADDING_MODES.clear()", forbidden: true},
	{code: "pk{n} = torch.ops.aten.add.default.py_kernels", forbidden: true},
	{code: "def ev{n}(x, eval=eval):\n    return eval(x)", forbidden: true},
	{code: "typing.final(F.relu)", forbidden: true},
	{code: "def sw{n}(f):\n    return F.relu\n@typing.no_type_check\n@sw{n}\ndef nt{n}():\n    pass", forbidden: true},
}

// genSource builds a file from fuzz bytes: each byte picks a snippet and
// whether it sits at module level or in a function's body. It returns
// the source and, per chosen snippet, its first and last line and verdict.
func genSource(data []byte) (string, [][3]int) {
	var b strings.Builder
	b.WriteString(genHeader)
	line := strings.Count(genHeader, "\n") + 1
	var spans [][3]int
	for i, c := range data {
		if i == 8 {
			break
		}
		s := genSnippets[int(c)%len(genSnippets)]
		code := strings.ReplaceAll(s.code, "{n}", strconv.Itoa(i))
		if int(c)/len(genSnippets)%2 == 1 && !strings.HasPrefix(code, "import ") {
			code = "def _wrap" + strconv.Itoa(i) + "():\n    " + strings.ReplaceAll(code, "\n", "\n    ") + "\n    pass"
		}
		n := strings.Count(code, "\n") + 1
		bad := 0
		if s.forbidden {
			bad = 1
		}
		spans = append(spans, [3]int{line, line + n - 1, bad})
		b.WriteString(code + "\n")
		line += n
	}
	return b.String(), spans
}

// FuzzScanGenerated scans Python built from snippets of known verdict: a
// file with a forbidden snippet has a finding on that snippet's lines; a
// file of allowed snippets only has no finding at all.
func FuzzScanGenerated(f *testing.F) {
	requirePython(f)
	allowed, forbidden := 0, 0
	for i, s := range genSnippets {
		if s.forbidden {
			forbidden = i
		} else {
			allowed = i
		}
	}
	n := byte(len(genSnippets))
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{byte(allowed), byte(forbidden)})
	f.Add([]byte{n + 1, n + 9, 13, n + 14, 17, n + 10})
	f.Add([]byte{18, 19, 20, 21, 22, 23, 24, 25})
	f.Add([]byte{26, n + 27, 28, 29, 30, n + 31, 32, 33})
	f.Add([]byte{34, 35, 36, n + 37, 38, 39, 40, 11})
	f.Add([]byte{18, n + 19, 44, 45, n + 46, 47, 48, 49})
	f.Add([]byte{50, n + 44, n + 18, 19, n + 50, 12})
	f.Fuzz(func(t *testing.T, data []byte) {
		src, spans := genSource(data)
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "kernel.py"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := Scan(context.Background(), Input{Root: root}, DefaultPolicy())
		if err != nil {
			t.Fatal(err)
		}
		anyBad := false
		for _, sp := range spans {
			if sp[2] == 0 {
				continue
			}
			anyBad = true
			hit := false
			for _, fd := range rep.Findings {
				hit = hit || (fd.Line >= sp[0] && fd.Line <= sp[1])
			}
			if !hit {
				t.Errorf("no finding on the forbidden snippet at lines %d-%d:\n%s\nfindings: %v", sp[0], sp[1], numbered(src), rep.Findings)
			}
		}
		if !anyBad && len(rep.Findings) > 0 {
			t.Errorf("allowed snippets only, yet findings:\n%s\nfindings: %v", numbered(src), rep.Findings)
		}
	})
}

func numbered(src string) string {
	var b strings.Builder
	for i, l := range strings.Split(src, "\n") {
		fmt.Fprintf(&b, "%3d %s\n", i+1, l)
	}
	return b.String()
}
