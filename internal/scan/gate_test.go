package scan

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGateClasses covers the four classes of issue 16 (what a bundle uses
// of allowed modules, introspection, stores into objects it did not
// create, shadow modules) with an attack and, where it matters, the honest
// pattern next to it. want lists "path:line rule" findings in order; ""
// means the bundle is clean.
func TestGateClasses(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		// 1. Code execution and I/O through allowed modules.
		{"utils by from-import alias", map[string]string{"k.py": "from torch import utils as u\nu.data\n"},
			"k.py:1 module-attribute-not-allowed|k.py:2 module-attribute-not-allowed"},
		{"utils by plain import alias", map[string]string{"k.py": "import torch.utils.data as D\nD.DataLoader\n"},
			"k.py:1 module-attribute-not-allowed|k.py:2 concurrency"},
		{"utils through an assignment chain", map[string]string{"k.py": "import torch\na = torch\nb = a.utils\nb.benchmark.Timer\n"},
			"k.py:3 module-attribute-not-allowed|k.py:4 module-attribute-not-allowed"},
		{"utils through a bundle re-export", map[string]string{
			"h.py": "import torch\nT = torch\n",
			"k.py": "from h import T\nT.utils.collect_env.run('id')\n"},
			"k.py:2 module-attribute-not-allowed"},
		{"utils through getattr literal", map[string]string{"k.py": "import torch\ngetattr(torch, 'utils')\n"},
			"k.py:2 module-attribute-not-allowed"},
		{"type hints evaluate strings", map[string]string{"k.py": "import typing\ndef f(x: 'int'): pass\ntyping.get_type_hints(f)\n"},
			"k.py:3 module-attribute-not-allowed"},
		{"forward ref evaluate", map[string]string{"k.py": "from typing import ForwardRef\nForwardRef('1')._evaluate(None, None, frozenset())\n"},
			"k.py:1 module-attribute-not-allowed|k.py:2 forbidden-builtin|k.py:2 module-attribute-not-allowed"},
		{"singledispatch evaluates annotations", map[string]string{"k.py": "import functools\n@functools.singledispatch\ndef f(x): pass\n"},
			"k.py:2 module-attribute-not-allowed"},
		{"jit save and load", map[string]string{"k.py": "import torch.jit as J\nJ.save(None, 'x')\nJ.load('x')\n"},
			"k.py:2 file-access|k.py:3 unsafe-loader"},
		{"compile", map[string]string{"k.py": "import torch\nf = torch.compile(lambda x: x)\n"},
			"k.py:2 module-attribute-not-allowed"},
		{"distributed beyond the collectives", map[string]string{"k.py": "import torch.distributed as dist\ndist.distributed_c10d._world\ndist.all_reduce\n"},
			"k.py:2 module-attribute-not-allowed"},
		{"re-exported stdlib module", map[string]string{"k.py": "import torch\ntorch.textwrap.dedent('x')\ntorch.select\n"},
			"k.py:2 module-escape"},
		{"operator setitem", map[string]string{"k.py": "import operator, torch\noperator.setitem(torch.ops.__dict__, 'x', 1)\n"},
			"k.py:2 module-attribute-not-allowed|k.py:2 dunder-access"},
		{"help imports by name", map[string]string{"k.py": "help('os')\n"}, "k.py:1 forbidden-builtin"},
		{"a profiler's named range, not the profiler (hs51)", map[string]string{"k.py": "import torch\nfrom torch.profiler import record_function\n" +
			"with record_function('k'):\n    pass\nwith torch.autograd.profiler.record_function('k'):\n    pass\n" +
			"p = torch.profiler.profile\nq = torch.autograd.profiler.emit_nvtx\n"},
			"k.py:7 module-attribute-not-allowed|k.py:8 module-attribute-not-allowed"},
		{"allowed uses", map[string]string{"k.py": "import torch, math, functools, itertools\nfrom typing import Optional\n" +
			"import torch.nn.functional as F\nimport torch.distributed as dist\n" +
			"y = F.silu(torch.ones(1)) * math.pi\nz = functools.partial(F.gelu, approximate='tanh')\n" +
			"o = dist.ReduceOp.SUM\nw = torch.cuda.is_available() and torch.backends.cuda.matmul.allow_tf32\n" +
			"q = torch._scaled_mm if hasattr(torch, '_scaled_mm') else None\n"}, ""},

		// 2. Introspection.
		{"generator frame builtins", map[string]string{"k.py": "def g():\n    yield 1\nb = g().gi_frame.f_back.f_globals\n"},
			"k.py:3 introspection"},
		{"introspection through getattr", map[string]string{"k.py": "def g():\n    yield 1\nf = getattr(g(), 'gi_frame')\n"},
			"k.py:3 introspection"},
		{"code object", map[string]string{"k.py": "async def c():\n    pass\nx = c().cr_code.co_consts\n"},
			"k.py:3 introspection"},
		{"traceback frame", map[string]string{"k.py": "try:\n    1/0\nexcept Exception as e:\n    t = e.__traceback__.tb_frame\n"},
			"k.py:4 dunder-access"},
		// rt50a (session 50): AttributeError.obj is the object whose
		// attribute was missing; of a module, the module itself, untyped.
		{"exception referent", map[string]string{"k.py": "import torch\ntry:\n    torch.nn.functional.zz\nexcept AttributeError as e:\n    m = e.obj\n    o = m.torch.os\n"},
			"k.py:5 introspection|k.py:6 module-escape"},
		// rt50d's second line: a chain on a base the scanner cannot type
		// is judged again from a component named torch or triton.
		{"torch reached through an untyped value", map[string]string{"k.py": "def f(x):\n    a = x.torch.load\n    b = x.m.torch.os\n    return x.torch.nn.functional.silu(a), b\n"},
			"k.py:2 unsafe-loader|k.py:3 module-escape"},
		{"exception referent through getattr, a format field and a match", map[string]string{"k.py": "import torch\ntry:\n    torch.zz\nexcept AttributeError as e:\n" +
			"    a = getattr(e, 'obj')\n    b = '{0.obj}'.format(e)\n    match e:\n        case AttributeError(obj=m):\n            pass\n"},
			"k.py:5 introspection|k.py:6 introspection|k.py:8 introspection"},
		{"honest exception handling", map[string]string{"k.py": "import torch\ntry:\n    f = torch.nn.functional.zz\nexcept AttributeError as e:\n" +
			"    f = None\n    why = (str(e), e.args, e.name, hasattr(e, 'obj'))\n"}, ""},
		// rt50b (session 50): a module handed over where the flow facts
		// did not look (the allow-list of places, astflow._stray_flows).
		{"module in an annotation", map[string]string{"k.py": "import torch\nimport dataclasses\n@dataclasses.dataclass\nclass C:\n    m: torch.nn.functional = None\n"},
			"k.py:5 module-alias"},
		{"module as an operand, a slice bound, an assert message, a format field", map[string]string{"k.py": "import torch\n" +
			"class L:\n    def __eq__(self, o):\n        return False\n" +
			"a = L() == torch\nb = [1][torch:]\nc = f'{torch}'\nassert a, torch.nn.functional\n"},
			"k.py:5 module-alias|k.py:6 module-alias|k.py:7 module-alias|k.py:8 module-alias"},
		{"module through an augmented assignment, a match value and a boolean operator", map[string]string{"k.py": "import torch\n" +
			"p = 0\np += torch\nmatch p:\n    case torch.nn.functional:\n        pass\nq = (torch.nn.functional or 0).torch\n"},
			"k.py:3 module-alias|k.py:5 module-alias|k.py:7 module-alias"},
		{"modules where nothing is handed over", map[string]string{"k.py": "import torch\nimport torch.nn.functional as F\n" +
			"ok = F is not None and torch.cuda is not None\nif torch.cuda:\n    pass\nx = not torch\ntorch.nn\n" +
			"def f(t: torch.Tensor) -> torch.Tensor:\n    return F.silu(t)\ntry:\n    pass\nexcept torch.cuda.OutOfMemoryError:\n    pass\n"}, ""},
		// rt50c (session 50): real submodules the hand-written list
		// lacked, a re-exported allowed module and modules under another
		// name, handed over as untyped values.
		{"an allowed module re-exported, handed over", map[string]string{"k.py": "import torch\ndef f(m=torch.nn.functional.torch):\n    return m\n"},
			"k.py:2 module-alias"},
		{"modules under another name", map[string]string{"k.py": "import torch\na = torch.functional.F\nb = torch.functional.opt_einsum.set_flags\nc = torch.nn.functional.utils\n"},
			"k.py:2 module-attribute-not-allowed|k.py:3 module-attribute-not-allowed|k.py:4 module-attribute-not-allowed"},
		{"functions of the submodules handed over", map[string]string{"k.py": "import torch, functools\nimport torch.nn.functional as F\n" +
			"g = functools.partial(F.silu)\nh = [torch.functional.einsum, torch.select, torch.chunk]\n"}, ""},
		// session 50: a private attribute of an object the scanner
		// cannot type, unless the bundle binds the name itself.
		{"private attributes of library objects", map[string]string{"k.py": "import torch\nops = [torch.ops.aten.add]\n" +
			"op = ops[0]._op\ndef f(m):\n    return m._modules\n"},
			"k.py:3 private-api|k.py:5 private-api"},
		{"private attributes the bundle binds, namedtuple's API", map[string]string{"k.py": "import collections\nimport helpers\n" +
			"P = collections.namedtuple('P', 'a b')\nclass K:\n    def __init__(self):\n        self._cache = {}\n    def _key(self, x):\n        return x\n" +
			"    def run(self, x):\n        return self._cache.get(self._key(x))\np = P(1, 2)._replace(a=3)\nq = p._asdict(), P._fields\nt = helpers._TABLE\n",
			"helpers.py": "_TABLE = {}\n"}, ""},
		// rt50d (session 50): modules bound in a class's scope.
		{"modules bound in a class's scope", map[string]string{"k.py": "import torch\nclass C:\n    from torch.nn import functional as TF\n" +
			"    import torch\n    if True:\n        F = torch.nn.functional\n    (G := torch.nn.functional)\n    ok = 1\n"},
			"k.py:3 module-alias|k.py:4 module-alias|k.py:6 module-alias|k.py:7 module-alias"},
		// hs50c (session 50): honest privates on self, a plain class's
		// own attribute named like a tensor's handle, a module tested by
		// `and`; the same reads on a method called with another object.
		{"privates of self and an optional module's probe", map[string]string{"k.py": "import torch\ntry:\n    import triton\nexcept ImportError:\n    triton = None\n" +
			"class Rope(torch.nn.Module):\n    def __init__(self, base):\n        super().__init__()\n        self._base = base\n" +
			"        self.register_buffer('_inv_freq', torch.ones(4), persistent=False)\n" +
			"    def forward(self, x):\n        return x * self._inv_freq * self._base, list(self._parameters)\n" +
			"def has_triton():\n    return triton and triton.__version__ >= '3'\n"}, ""},
		{"a method reading self's privates called with another object", map[string]string{"k.py": "import torch\nclass A:\n    def f(self):\n        return self._op\n" +
			"op = A.f(torch.ops.aten.add)\n"}, "k.py:5 unbound-method"},
		{"a tensor subclass's own view base", map[string]string{"k.py": "import torch\nclass T(torch.Tensor):\n    def f(self):\n        return self._base\n"},
			"k.py:4 tensor-internals"},
		{"a tensor's private pickling and view handles", map[string]string{"k.py": "def f(x):\n    a = x._reduce_ex_internal(2)\n    b = x._base\n    return x._is_view()\n"},
			"k.py:2 tensor-internals|k.py:3 tensor-internals|k.py:4 tensor-internals"},
		{"operator tables through a container", map[string]string{"k.py": "import torch\nops = [torch.ops.aten.mul.Tensor]\nops[0].py_kernels.clear()\n"},
			"k.py:3 private-api"},
		{"operator tables through getattr", map[string]string{"k.py": "import torch\nops = {'m': torch.ops.aten.add.default}\nt = getattr(ops['m'], 'python_key_table')\n"},
			"k.py:3 private-api"},
		{"kernel names that start like generator or code attributes", map[string]string{"k.py": "class AR:\n" +
			"    def __init__(self):\n        self.ag_parts = 2\n        self.co_dtype = None\n        self.gi_tiles = 1\n" +
			"    def parts(self):\n        return self.ag_parts + self.gi_tiles\n"}, ""},
		{"subclass walk by mro", map[string]string{"k.py": "x = type(1).mro()[-1]\n"}, "k.py:1 dunder-access|k.py:1 introspection"},
		{"format string field", map[string]string{"k.py": "s = '{0.__class__.__init__.__globals__}'.format(1)\nt = '{0.gi_frame}'\n"},
			"k.py:1 dunder-access|k.py:2 introspection"},
		{"match class pattern reads attributes", map[string]string{"k.py": "def g():\n    yield 1\nmatch g():\n    case object(gi_frame=object(f_builtins=b)):\n        pass\n"},
			"k.py:4 introspection|k.py:4 introspection"},
		{"ndarray ctypes and dump", map[string]string{"k.py": "import torch\na = torch.ones(1).numpy()\nc = a.ctypes\na.dump('x')\n"},
			"k.py:3 native-ffi|k.py:4 file-access"},
		{"honest format strings", map[string]string{"k.py": "s = '{0.shape} {1:>{2}} {x.__name__}'.format(1, 2, 3, x=int)\n"}, ""},
		// Session 24 (an honest style refused): the class's name through
		// __class__ is type(x).__name__; a store into it, or anything else
		// of the class, stays refused.
		{"class name through __class__", map[string]string{"k.py": "class K:\n    def __repr__(self):\n        return f'{self.__class__.__name__}()'\n" +
			"    def who(self):\n        return self.__class__.__qualname__, '{0.__class__.__name__}'.format(self)\n"}, ""},
		// Session 24 (an honest style refused): a frozen dataclass's
		// object.__setattr__(self, "name", v) is judged as setattr(self,
		// "name", v); onto anything else, with a dunder or a computed
		// name, or read as a value, it stays refused.
		{"frozen dataclass store through object.__setattr__", map[string]string{"k.py": "import dataclasses\n" +
			"@dataclasses.dataclass(frozen=True)\nclass C:\n    n: int\n    w: int = dataclasses.field(init=False, default=0)\n" +
			"    def __post_init__(self):\n        object.__setattr__(self, 'w', 2 * self.n)\n"}, ""},
		{"object.__setattr__ onto a module", map[string]string{"k.py": "import torch.nn.functional as F\nobject.__setattr__(F, 'silu', abs)\n"},
			"k.py:2 global-mutation|k.py:2 module-alias"},
		{"object.__setattr__ onto a parameter", map[string]string{"k.py": "def f(x):\n    object.__setattr__(x, 'add', abs)\n"},
			"k.py:2 foreign-store"},
		{"object.__setattr__ onto a class", map[string]string{"k.py": "import torch\nobject.__setattr__(type(torch.ones(1)), 'add', abs)\n"},
			"k.py:2 foreign-store|k.py:2 dunder-access"},
		{"object.__setattr__ with a dunder or a computed name", map[string]string{"k.py": "class C:\n    def m(self, n):\n" +
			"        object.__setattr__(self, '__class__', int)\n        object.__setattr__(self, n, 1)\n        f = object.__setattr__\n"},
			"k.py:3 dynamic-attribute|k.py:4 dunder-access|k.py:5 dunder-access"},
		{"class name store through __class__", map[string]string{"k.py": "def f(x):\n    x.__class__.__name__ = 'y'\n"},
			"k.py:2 dunder-access|k.py:2 foreign-store"},
		{"more of the class than its name", map[string]string{"k.py": "def f(x):\n    return x.__class__.__name__.upper(), x.__class__.__dict__, x.__class__.__name__.__class__\n"},
			"k.py:2 dunder-access|k.py:2 dunder-access|k.py:2 dunder-access"},

		// 3. Stores into objects the bundle did not create.
		{"class through type()", map[string]string{"k.py": "import torch\ntype(torch.ones(1)).add = torch.sub\n"},
			"k.py:2 dunder-access|k.py:2 foreign-store"},
		{"class through a name bound to type()", map[string]string{"k.py": "import torch\nt = type(torch.ones(1))\nt.add = torch.sub\n"},
			"k.py:2 dunder-access|k.py:3 foreign-store"},
		{"torch.Tensor directly", map[string]string{"k.py": "import torch\ntorch.Tensor.add = torch.sub\n"},
			"k.py:2 global-mutation"},
		{"through __class__", map[string]string{"k.py": "def f(x):\n    x.__class__.foo = 1\n"},
			"k.py:2 dunder-access|k.py:2 foreign-store"},
		{"parameter patched by a helper", map[string]string{"k.py": "import torch\ndef p(c):\n    c.add = torch.sub\np(torch.Tensor)\n"},
			"k.py:3 foreign-store"},
		{"setattr on a call result", map[string]string{"k.py": "import torch\nsetattr(type(torch.ones(1)), 'add', 1)\n"},
			"k.py:2 foreign-store|k.py:2 dunder-access"},
		{"item of a container", map[string]string{"k.py": "import torch\nl = [torch.Tensor]\nl[0].add = 1\n"},
			"k.py:3 foreign-store"},
		{"loop variable", map[string]string{"k.py": "import torch\nfor k in (torch.Tensor,):\n    k.add = 1\n"},
			"k.py:3 global-mutation"},
		{"unbound method with a foreign self", map[string]string{"k.py": "import torch\nclass P:\n    def m(self):\n        self.add = 1\nP.m(torch.Tensor)\n"},
			"k.py:5 unbound-method"},
		{"unbound method through type()", map[string]string{"k.py": "import torch\nclass P:\n    def m(self):\n        self.add = 1\ntype(P()).m(torch.Tensor)\n"},
			"k.py:5 dunder-access|k.py:5 unbound-method"},
		{"unbound method through a plain alias", map[string]string{"k.py": "import torch\nclass P:\n    def m(self):\n        self.add = 1\nk = P\nk.m(torch.Tensor)\n"},
			"k.py:6 unbound-method"},
		{"unbound method through an item, a call, an attribute", map[string]string{"k.py": "import torch\nclass P:\n    def m(self):\n        self.add = 1\n" +
			"def get():\n    return P\n[P][0].m(torch.Tensor)\nget().m(torch.Tensor)\nclass H:\n    def __init__(self):\n        self.c = P\n    def go(self):\n        self.c.m(torch.Tensor)\n"},
			"k.py:7 unbound-method|k.py:8 unbound-method|k.py:13 unbound-method"},
		// hs53: a call with fewer arguments than such a method needs
		// cannot run it with another object as self (q.to(dtype) beside
		// a bundle's to(self, device)); with enough, or a star, it can.
		{"unbound method by arity", map[string]string{"k.py": "import torch\nclass T:\n    def to(self, device):\n        self.d = device\n" +
			"    def copy_(self, v, *, w):\n        self.v = v\n" +
			"def f(q, out, k):\n    a = q.to(torch.float32)\n    out.copy_(a, w=1)\n    k.to(torch.Tensor, 1)\n" +
			"    k.to(*[torch.Tensor])\n    k.copy_(torch.Tensor, 1, w=2)\n    return a\n"},
			"k.py:10 unbound-method|k.py:11 unbound-method|k.py:12 unbound-method"},
		{"methods on instances and read-only methods anywhere", map[string]string{"k.py": "import torch\nclass P:\n    def m(self, v):\n        self.v = v\n    def r(self):\n        return self.v\n" +
			"    def both(self):\n        self.m(1)\n        return self.r()\ni = P()\ni.m(2)\nP().m(3)\nP.r(torch.Tensor)\n[i][0].r()\n"}, ""},
		{"method used in its class body", map[string]string{"k.py": "import torch\nclass P:\n    def m(self):\n        self.add = 1\n    m(torch.Tensor)\n"},
			"k.py:2 unbound-method"},
		{"decorator that calls the method", map[string]string{"k.py": "import torch\ndef d(f):\n    f(torch.Tensor)\n    return f\nclass P:\n    @d\n    def m(self):\n        self.add = 1\n"},
			"k.py:8 foreign-store"},
		{"metaclass returns a shared class", map[string]string{"k.py": "import torch\nclass M(type):\n    def __new__(m, *a):\n        return torch.Tensor\nclass C(metaclass=M):\n    pass\nC.add = 1\n"},
			"k.py:2 dunder-access|k.py:7 foreign-store"},
		{"__new__ returns a shared class", map[string]string{"k.py": "import torch\nclass R:\n    def __new__(cls):\n        return torch.Tensor\nr = R()\nr.add = 1\n"},
			"k.py:6 foreign-store"},
		{"subscript store into a module's dict", map[string]string{"k.py": "import torch\ntorch.ops.__dict__['x'] = 1\n"},
			"k.py:2 dunder-access|k.py:2 global-mutation"},
		{"honest stores", map[string]string{"k.py": "import torch\nimport dataclasses\n" +
			"@dataclasses.dataclass\nclass Cfg:\n    block: int = 64\n" +
			"class K:\n    n = 0\n    def __init__(self):\n        self.cache = {}\n        self.cfg = Cfg()\n" +
			"    @property\n    def size(self):\n        return self._size\n    @size.setter\n    def size(self, v):\n        self._size = v\n" +
			"    @classmethod\n    def make(cls):\n        cls.n += 1\n        return cls()\n" +
			"    def __call__(self, x, out):\n        self.cache[x.shape] = 1\n        setattr(self, 'last', x.shape)\n        out[...] = x\n" +
			"class L(K):\n    def __init__(self):\n        super().__init__()\n        K.__init__(self)\n" +
			"k = K()\nk.size = 3\nc = Cfg()\nc.block = 128\nK.n = 1\n" +
			"def f():\n    pass\nf.calls = 0\nD = {}\nD['a'] = 1\n" +
			"m = torch.nn.Identity()\nm.training = False\nb = torch.zeros(2)\nb.requires_grad = False\n"}, ""},

		// 4. Shadow modules: see TestShadowInstalledModule.
		{"runtime package", map[string]string{"cacheon_runtime.py": "", "k.py": "import torch\n"},
			"cacheon_runtime.py:0 module-shadowing"},
		{"file-less process modules", map[string]string{"cython_runtime.py": "", "__main__.py": "", "_cython_3_0.py": "",
			"k.py": "import cython_runtime\n"},
			"__main__.py:0 module-shadowing|_cython_3_0.py:0 module-shadowing|cython_runtime.py:0 module-shadowing|k.py:1 import-not-allowed"},

		// Red team, session 9: what library frames and formats do.
		{"update_wrapper copies code", map[string]string{"k.py": "import functools, torch\ndef g(t):\n    return t\n" +
			"functools.update_wrapper(torch.nn.functional.relu, g, assigned=('__code__',))\n"},
			"k.py:4 module-attribute-not-allowed|k.py:4 dunder-access"},
		{"class namespace from a dict", map[string]string{"k.py": "def rex(self, p):\n    return (int, ())\n" +
			"K = type('K', (), {'__reduce_ex__': rex})\n"},
			"k.py:3 dunder-access|k.py:3 dunder-access"},
		{"class namespace from keywords", map[string]string{"k.py": "class M(type):\n    pass\n" +
			"C = M('C', (), dict(__match_args__=('x',)))\n"},
			"k.py:1 dunder-access|k.py:3 dunder-access"},
		{"match args as data", map[string]string{"k.py": "ARGS = ('__globals__',)\n"},
			"k.py:1 dunder-access"},
		// hs24: a weak-reference or dict slot is not an access; any other
		// dunder listed there, or these outside a class body's __slots__,
		// still is.
		{"slots weakref and dict", map[string]string{"k.py": "class A:\n    __slots__ = ('acc', '__weakref__')\n" +
			"class B:\n    __slots__ = ['__dict__']\nclass C:\n    __slots__ = '__weakref__'\n"}, ""},
		// rt25b: enum's _x_ machinery and raw memory through sparse
		// tensors and unchecked views.
		{"enum convert", map[string]string{"k.py": "import enum\nclass E(enum.IntEnum):\n    A = 1\nE._convert_('X', 'torch', lambda n: True)\n"},
			"k.py:4 introspection"},
		{"enum member value and name", map[string]string{"k.py": "import enum\nclass E(enum.Enum):\n    A = 1\nv = E.A._value_, E.A._name_, E.A.value\n"}, ""},
		{"sparse and unchecked views", map[string]string{"k.py": "import torch\nx = torch.zeros(4)\n" +
			"s = torch.sparse_coo_tensor([[0]], [1.0], (4,))\nd = x.to_sparse()\n" +
			"a = torch.ops.aten._reshape_alias(x, (2,), (9,))\nb = torch.frombuffer(bytearray(8), dtype=torch.uint8)\n"},
			"k.py:3 tensor-internals|k.py:4 tensor-internals|k.py:5 tensor-internals|k.py:6 tensor-internals"},
		{"contextlib's own context managers", map[string]string{"k.py": "import contextlib\nfrom contextlib import nullcontext\n" +
			"@contextlib.contextmanager\ndef blocks():\n    yield 4\nwith contextlib.suppress(KeyError), nullcontext():\n    pass\n"}, ""},
		{"contextlib beyond them", map[string]string{"k.py": "import contextlib\ns = contextlib.ExitStack()\ncontextlib.chdir('/')\n"},
			"k.py:2 module-attribute-not-allowed|k.py:3 module-attribute-not-allowed"},
		// A finalizer tells when the validator frees what a kernel made
		// (rt43's moe_state_lifetime), in a class body or bound there.
		{"finalizer", map[string]string{"k.py": "class P:\n    def __del__(self):\n        pass\n" +
			"def fin(self):\n    pass\nclass Q:\n    __del__ = fin\n"},
			"k.py:2 introspection|k.py:7 dunder-access"},
		// Clocks (rt52's lead, session 53): how long since a kernel's last
		// call tells verify's calls from an engine's; inline assembly
		// stays legal when the scanner can read its text.
		{"clocks", map[string]string{"k.py": "import torch\nimport triton.language as tl\n" +
			"from triton.language.extra.cuda import globaltimer\n" +
			"e = torch.cuda.Event(enable_timing=True)\nms = e.elapsed_time(e)\nf = getattr(e, 'elapsed_time')\n" +
			"t = tl.extra.cuda.globaltimer\nA = '%glob' + 'altimer'\n" +
			"r = tl.inline_asm_elementwise(A, '=l', [], dtype=tl.int64, is_pure=False, pack=1)\n" +
			"c = tl.inline_asm_elementwise('mov.u64 $0, %clock64;', '=l', [], dtype=tl.int64, is_pure=False, pack=1)\n" +
			"p = tl.inline_asm_elementwise(asm='mov.u32 $0, %pm3;', constraints='=r', args=[], dtype=tl.int32, is_pure=False, pack=1)\n" +
			"asm = tl.inline_asm_elementwise\nfrom triton.language import inline_asm_elementwise as ia\n"},
			"k.py:3 module-attribute-not-allowed|k.py:5 clock|k.py:6 clock|k.py:7 clock|k.py:7 module-attribute-not-allowed|k.py:9 clock|k.py:10 clock|k.py:11 clock|k.py:12 clock|k.py:13 clock"},
		// rt53: past the first rule.
		{"clocks past the literal", map[string]string{"k.py": "import triton\nimport triton.language as tl\n" +
			"a = tl.inline_asm_elementwise('mov.u64 $0, %glo$(baltimer$);', '=l', [], dtype=tl.int64, is_pure=False, pack=1)\n" +
			"@tl.core.builtin\ndef f(_semantic=None):\n    return _semantic.builder.create_inline_asm('x', '=l', [], [], False, 1)\n" +
			"e = tl.core.extern_elementwise('', '', [], {(): ('llvm.readcyclecounter', tl.int64)}, is_pure=False)\n" +
			"@triton.jit\ndef k(x):\n    pass\nk._src = 'y'\n" +
			"g = tl.inline_asm_elementwise('mov.u64 $0, %gridid;', '=l', [], dtype=tl.int64, is_pure=False, pack=1)\n" +
			"s = tl.extra.cuda.smid()\nt = k.configs_timings\n" +
			"C = 'mov.u64 $0, %globaltimer;'\nc = tl.inline_asm_elementwise(C, '=l', [], dtype=tl.int64, is_pure=False, pack=1)\n" +
			"def g(b):\n    return getattr(b, 'create_inline_asm')\n"},
			"k.py:3 clock|k.py:4 module-attribute-not-allowed|k.py:6 clock|k.py:7 clock|k.py:7 module-attribute-not-allowed|" +
				"k.py:11 foreign-store|k.py:12 clock|k.py:13 clock|k.py:13 module-attribute-not-allowed|k.py:14 clock|k.py:16 clock|k.py:18 clock"},
		{"honest assembly texts the scanner reads", map[string]string{"k.py": "import triton.language as tl\n" +
			"CVT = '{ .reg .b32 %clocked, %pm0a; mov.b32 %clocked, $1; mov.b32 $0, %clocked; }'\n" +
			"def f(x, FAST):\n    return tl.inline_asm_elementwise(CVT if FAST else 'mov.b32 $0, $1;', '=r,r', [x], dtype=tl.int32, is_pure=True, pack=1)\n"},
			""},
		{"honest inline assembly and events", map[string]string{"k.py": "import torch\nimport triton.language as tl\n" +
			"from triton.language import inline_asm_elementwise\n" +
			"y = tl.inline_asm_elementwise('{ .reg .b16 %lo, %hi; mov.b32 {%lo, %hi}, $1; cvt.f32.bf16 $0, %hi; }', '=r,r', [1], dtype=tl.float32, is_pure=True, pack=1)\n" +
			"z = inline_asm_elementwise(asm='tanh.approx.f32 $0, $1;', constraints='=f,f', args=[1], dtype=tl.float32, is_pure=True, pack=1)\n" +
			"e = torch.cuda.Event()\ne.record()\ne.synchronize()\n"}, ""},
		{"slots other dunder", map[string]string{"k.py": "class A:\n    __slots__ = ('__globals__',)\n"},
			"k.py:2 dunder-access"},
		{"weakref string outside slots", map[string]string{"k.py": "class A:\n    names = ('__weakref__',)\n" +
			"__slots__ = ('__dict__',)\ndef f():\n    __slots__ = '__dict__'\n"},
			"k.py:2 dunder-access|k.py:3 dunder-access|k.py:5 dunder-access"},
		{"wraps handed to partial", map[string]string{"k.py": "import functools\n" +
			"w = functools.partial(functools.wraps, assigned=('default',), updated=())\n"},
			"k.py:2 module-attribute-not-allowed"},
		{"wraps by name handed on", map[string]string{"k.py": "from functools import wraps, partial\n" +
			"w = partial(wraps, assigned=('default',))\n"},
			"k.py:2 module-attribute-not-allowed"},
		{"wraps with starred args", map[string]string{"k.py": "import functools\nA = (int, ('default',), ())\n" +
			"functools.wraps(*A)\n"},
			"k.py:3 module-attribute-not-allowed"},
		{"wraps applied by a call copies a __dict__ onto an operator", map[string]string{"k.py": "import functools, torch\n" +
			"def _s():\n    pass\n_s._op = print\nfunctools.wraps(_s)(torch.ops.aten.add)\n"},
			"k.py:5 module-attribute-not-allowed"},
		{"wraps by name kept and applied later", map[string]string{"k.py": "from functools import wraps\nimport torch\n" +
			"def _s():\n    pass\nw = wraps(_s)\nw(torch.nn.functional.relu)\n"},
			"k.py:5 module-attribute-not-allowed"},
		{"wraps as a decorator of the bundle's own def", map[string]string{"k.py": "import functools\nfrom functools import wraps\n" +
			"def f(x):\n    return x\n@functools.wraps(f)\ndef g(x):\n    return f(x)\n@wraps(f)\ndef h(x):\n    return f(x)\n"},
			""},
		{"tensor internals", map[string]string{"k.py": "import torch\nx = torch.ones(2)\nv = x._version\n" +
			"s = getattr(x, 'untyped_storage')\nt = x.storage()\n"},
			"k.py:3 tensor-internals|k.py:4 tensor-internals|k.py:5 tensor-internals"},
		{"a storage's descriptor I/O", map[string]string{"k.py": "import torch\nT = [torch.ones(2)]\n" +
			"w = T[0].untyped_storage()._write_file\n"},
			"k.py:3 file-access|k.py:3 tensor-internals"},
		{"a dict's get beside a mutator named get", map[string]string{"k.py": "class Pool:\n" +
			"    def __init__(self):\n        self.bufs = {}\n    def get(self, k):\n        self.bufs[k] = 1\n        return self.bufs[k]\n" +
			"CACHE = {}\nv = CACHE.get('a')\ndef f():\n    local = {'a': 1}\n    return local.get('a')\nw = Pool.get\n"},
			"k.py:12 unbound-method"},
		{"type aliased and its result called", map[string]string{"k.py": "_T = type\n_U = type(type)\n" +
			"M = _U('M', (object,), {})\nC = type(int)('C', (), {})\n"},
			"k.py:1 dunder-access|k.py:2 dunder-access|k.py:2 dunder-access|k.py:3 dunder-access|k.py:4 dunder-access|k.py:4 dunder-access"},
		{"metaclasses of allowed modules", map[string]string{"k.py": "import abc, enum\nfrom abc import ABCMeta\n" +
			"M = abc.ABCMeta('M', (abc.ABCMeta,), {})\nN = ABCMeta('N', (), {})\nclass K(abc.ABCMeta):\n    pass\n" +
			"class L(type):\n    pass\nE = enum.Enum('E', {'a': 1})\n"},
			"k.py:3 dunder-access|k.py:4 dunder-access|k.py:5 dunder-access|k.py:7 dunder-access|k.py:9 dunder-access"},
		{"classes honest code writes", map[string]string{"k.py": "import abc, enum\nclass A(abc.ABC):\n    pass\n" +
			"class B(metaclass=abc.ABCMeta):\n    pass\nclass Color(enum.Enum):\n    RED = 1\n" +
			"c = Color(1)\nn = type(c).__name__\nsame = type(c) is Color\n"}, ""},
		{"honest class styles that store into self", map[string]string{"k.py": "import abc, dataclasses, typing\n" +
			"T = typing.TypeVar('T')\nclass Walk(metaclass=abc.ABCMeta):\n    def __init__(self):\n        self.memo = {}\n" +
			"class Cache(typing.Generic[T]):\n    def __init__(self):\n        self.items = []\n" +
			"@dataclasses.dataclass\nclass Base:\n    n: int = 0\n    def __post_init__(self):\n        self.m = self.n\n" +
			"@dataclasses.dataclass\nclass Child(Base):\n    def __post_init__(self):\n        super().__post_init__()\n        self.k = 1\n"}, ""},
		{"a dataclass's __init__ read from the class", map[string]string{"k.py": "import dataclasses, torch\n" +
			"@dataclasses.dataclass\nclass Knob:\n    _op: object = None\nKnob.__init__(torch.ops.aten.mul, print)\n"},
			"k.py:5 unbound-method"},
		{"typing evaluates a forward reference", map[string]string{"k.py": "import typing\n" +
			"r = typing.get_args(typing.Optional['x'])[0]\nv = r._evaluate({}, {}, frozenset())\n"},
			"k.py:3 forbidden-builtin"},
		{"operator special methods by name", map[string]string{"k.py": "class V:\n    def __init__(self, v):\n        self.v = v\n" +
			"    def __add__(self, o):\n        return V(self.v + o.v)\n    __radd__ = __add__\n    __hash__ = None\n" +
			"    def __eq__(self, o):\n        return self.v == o.v\n    def __ne__(self, o):\n        return not self.__eq__(o)\n" +
			"    def __repr__(self):\n        return 'V' + super().__repr__()\n" +
			"class R:\n    kinds = {}\n    def __init_subclass__(cls, **kw):\n        super().__init_subclass__(**kw)\n" +
			"def f(a, b):\n    return a.__mul__(b), a.__getitem__(0), b.__rsub__(a)\n"}, ""},
		{"special methods that store, enter or create stay refused", map[string]string{"k.py": "import torch\n" +
			"def f(t, k, v):\n    t.__setitem__(k, v)\n    t.__iadd__(v)\n    torch.no_grad().__enter__()\n" +
			"    torch.Tensor.__new__(torch.Tensor)\n    torch.Tensor.__add__\n    t.__class__.__eq__\n" +
			"    torch.nn.Module.__init_subclass__()\n    __setitem__ = 1\n"},
			"k.py:3 dunder-access|k.py:4 dunder-access|k.py:5 dunder-access|k.py:6 dunder-access|k.py:7 dunder-access|" +
				"k.py:8 dunder-access|k.py:9 dunder-access|k.py:10 dunder-access"},
		{"copy protocol", map[string]string{"k.py": "class P:\n    def __reduce_ex__(self, p):\n        return (int, ())\n" +
			"    def __deepcopy__(self, memo):\n        return self\n"},
			"k.py:2 dunder-access|k.py:4 dunder-access"},
		{"module containers and aten tables", map[string]string{"k.py": "import torch\n" +
			"torch.nn.functional.GRID_SAMPLE_PADDING_MODES.update({})\ntorch.ops.aten.mul.Tensor.py_kernels\n" +
			"torch.ops.aten.add.default.py_impl\ny = torch.ones(2).add(1)\nz = torch.sort(torch.ones(2))\n"},
			"k.py:2 module-attribute-not-allowed|k.py:3 module-attribute-not-allowed|k.py:3 private-api|k.py:4 module-attribute-not-allowed|k.py:4 private-api"},
		{"virtual subclass registration", map[string]string{"k.py": "import numbers, abc, torch\n" +
			"numbers.Real.register(torch.Tensor)\nabc.ABC.register(torch.Tensor)\nclass B(abc.ABC):\n    pass\nB.register(int)\n"},
			"k.py:2 module-attribute-not-allowed|k.py:3 module-attribute-not-allowed|k.py:6 global-mutation"},
		{"bases that are other modules' ABCs", map[string]string{"k.py": "import numbers, typing, collections, torch\n" +
			"from collections.abc import Sequence as Seq\nclass A(numbers.Real):\n    pass\nclass B(Seq):\n    pass\n" +
			"class C(typing.Mapping[str, int]):\n    pass\nclass D(torch.types.Sequence):\n    pass\nclass E(collections.abc.Sized):\n    pass\n" +
			"class F(typing.SupportsInt):\n    pass\nclass M(typing.Type):\n    pass\n"},
			"k.py:3 global-mutation|k.py:5 global-mutation|k.py:7 global-mutation|k.py:9 global-mutation|k.py:11 global-mutation|k.py:13 global-mutation|k.py:15 dunder-access"},
		{"__subclasshook__ and register on the bundle's ABCs", map[string]string{"h.py": "import abc\nclass Base(abc.ABC):\n    pass\n",
			"k.py": "import abc, typing, torch\nfrom h import Base\nclass P(metaclass=abc.ABCMeta):\n" +
				"    @classmethod\n    def __subclasshook__(cls, c):\n        return True\n    @classmethod\n    def add(cls):\n        cls.register(torch.Tensor)\n" +
				"    def me(self):\n        return type(self).register(torch.Tensor)\nk = P\nk.register(torch.Tensor)\nBase.register(torch.Tensor)\n" +
				"getattr(Base, 'register')(torch.Tensor)\ntyping.Sequence.register(torch.Tensor)\ntorch.types.Sequence.register(torch.Tensor)\n" +
				"class Q(typing.Protocol):\n    pass\nQ.register(torch.Tensor)\n"},
			"k.py:5 global-mutation|k.py:9 global-mutation|k.py:11 dunder-access|k.py:11 global-mutation|k.py:13 global-mutation|k.py:14 global-mutation|k.py:15 global-mutation|k.py:16 global-mutation|k.py:17 global-mutation|k.py:20 global-mutation"},
		{"honest ABCs, protocols and registries", map[string]string{"k.py": "import abc, typing, enum, collections, numbers\n" +
			"from collections.abc import Sequence\nclass Strategy(abc.ABC):\n    table = {}\n    @classmethod\n    def register(cls, name):\n        cls.table[name] = cls\n" +
			"    @abc.abstractmethod\n    def run(self, x):\n        ...\nclass Dense(Strategy):\n    def run(self, x):\n        return x\nDense.register('dense')\n" +
			"class Registry:\n    def __init__(self):\n        self.fns = {}\n    def add(self, f):\n        self.fns[f.__name__] = f\n        return f\n" +
			"REG = Registry()\n@REG.add\ndef f(x):\n    return x\nclass Runner(typing.Protocol):\n    def run(self, x): ...\n" +
			"class Box(typing.Generic[typing.TypeVar('T')]):\n    pass\nclass Pair(typing.NamedTuple):\n    a: int\n    b: int\n" +
			"class Color(enum.Enum):\n    RED = 1\nclass Cfg(collections.OrderedDict):\n    pass\n" +
			"def ok(x, eps):\n    return isinstance(x, Sequence) and isinstance(eps, numbers.Real)\n"}, ""},
		{"format string built at run time", map[string]string{"k.py": "import torch\nf = '{0.__glo' + 'bals__}'\n" +
			"s = f.format(torch.is_tensor)\nt = f.format_map({})\nu = '{0.shape}'.format(torch.ones(1))\n"},
			"k.py:3 dynamic-attribute|k.py:4 dynamic-attribute"},
		{"builtin names bound by a function", map[string]string{"k.py": "def f(input, open=None):\n    return input.shape, open\n" +
			"g = lambda compile: compile\ndef h():\n    [0 for eval in ()]\n    return eval('1')\n" +
			"def i(x, eval=eval):\n    return x\ndef j():\n    global open\n    open = 1\n    return open('x')\n"},
			"k.py:6 forbidden-builtin|k.py:7 forbidden-builtin|k.py:12 forbidden-builtin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := strings.Join(scanFiles(t, tt.files), "|"); got != tt.want {
				t.Errorf("findings %q, want %q", got, tt.want)
			}
		})
	}
}

// TestHonestUnusualStyles: the styles honest kernels use must scan clean:
// a callable object as the entry, a sub-package, unicode identifiers, a
// match statement, blockwise attention with an online softmax, grouped
// MoE with index_add_.
func TestHonestUnusualStyles(t *testing.T) {
	if err := exec.Command("python3", "-I", "-S", "-c", "import sys; sys.exit(sys.version_info < (3, 10))").Run(); err != nil {
		t.Skip("python3 is older than 3.10 (match)")
	}
	got := scanFiles(t, map[string]string{
		"ops/__init__.py": "from .softmax import online_softmax\n",
		"ops/softmax.py": "import torch\n\n\ndef online_softmax(q, k, v, blk=16):\n" +
			"    m = torch.full(q.shape[:-1], float('-inf'))\n    l = torch.zeros(q.shape[:-1])\n" +
			"    acc = torch.zeros(q.shape, dtype=torch.float32)\n    for s in range(0, k.shape[0], blk):\n" +
			"        sc = q.float() @ k[s:s + blk].float().t()\n        m_new = torch.maximum(m, sc.amax(-1))\n" +
			"        p = torch.exp(sc - m_new[..., None])\n        corr = torch.exp(m - m_new)\n" +
			"        l = l * corr + p.sum(-1)\n        acc = acc * corr[..., None] + p @ v[s:s + blk].float()\n" +
			"        m = m_new\n    return acc / l[..., None]\n",
		"k.py": "import torch\nfrom ops import online_softmax\n\n\nclass Attention:\n" +
			"    def __init__(self, blk: int = 16) -> None:\n        self.blk = blk\n\n" +
			"    def __call__(self, q, k, v, out):\n        match q.dim():\n            case 2:\n" +
			"                out.copy_(online_softmax(q, k, v, self.blk))\n            case _:\n" +
			"                raise ValueError('2-D only')\n\n\nattention = Attention()\nε = 1e-6\n\n\n" +
			"def moe(x, ids, w, w1, out):\n    res = torch.zeros(x.shape[0], w1.shape[1])\n" +
			"    for e in range(w1.shape[0]):\n        rows = (ids == e).nonzero()[:, 0]\n" +
			"        res.index_add_(0, rows, (x[rows] @ w1[e].t()) * w[rows, None] + ε)\n    out.copy_(res)\n",
	})
	if len(got) != 0 {
		t.Errorf("findings %q, want none", got)
	}
}

// TestShadowInstalledModule: a bundle module named like a package the
// interpreter has installed (not standard library, not allowed, not
// policed) is refused, whichever package that is on this machine.
func TestShadowInstalledModule(t *testing.T) {
	requirePython(t)
	p, err := newParser(t.Context(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	out, _, _, _, err := p.run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseFacts(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain := reservedModules(DefaultPolicy(), &factsHeader{Stdlib: b.header.Stdlib})
	name := ""
	for _, m := range b.header.Importable {
		if !plain[m] && isIdentifier(m) && !strings.HasPrefix(m, "_") {
			name = m
			break
		}
	}
	if name == "" {
		t.Skip("the interpreter has no installed package beyond the standard library and the policy")
	}
	got := scanFiles(t, map[string]string{name + ".py": "", "k.py": "import torch\n"})
	if want := name + ".py:0 module-shadowing"; strings.Join(got, "|") != want {
		t.Errorf("shadowing installed %q: findings %q, want %q", name, got, want)
	}
}

// TestSubmodulesHandedOver: the installed torch's real submodules are
// modules wherever a bundle puts them, the hand-written list's or not
// (rt50c: torch.functional in a list, torch.return_types in a dict, a
// from-import passed as an argument). The parse script lists them from
// the interpreter that has torch.
func TestSubmodulesHandedOver(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-I", "-c", "import torch").Run(); err != nil {
		t.Skip("no /usr/bin/python3 with torch")
	}
	got := scanFilesWith(t, map[string]string{"k.py": "import torch\nfrom torch import functional as TF\n" +
		"a = [torch.functional][0]\nb = {'k': torch.return_types}\ndef f(m):\n    return m\nf(TF)\n"}, "/usr/bin/python3")
	if want := "k.py:3 module-alias|k.py:4 module-alias|k.py:7 module-alias"; strings.Join(got, "|") != want {
		t.Errorf("findings %q, want %q", strings.Join(got, "|"), want)
	}
}
