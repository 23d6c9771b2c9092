package scan

import (
	"strings"
	"testing"
)

// TestArgumentMutators: the library callables that store into what they
// are applied to (typing.final, no_type_check, runtime_checkable,
// overload, dataclass_transform, functools.total_ordering,
// dataclasses.dataclass, abc.abstractmethod and its old forms) are
// allowed on the bundle's own defs and classes only; the honest
// decorator styles next to each attack scan clean. want lists
// "path:line rule" findings in order; "" means the bundle is clean.
func TestArgumentMutators(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		// Attacks: the callable applied to an object the bundle did not create.
		{"final called on a torch function", map[string]string{"k.py": "import typing, torch\n" +
			"typing.final(torch.nn.functional.silu)\n"},
			"k.py:2 foreign-store"},
		{"final and no_type_check by bare name", map[string]string{"k.py": "from typing import final, no_type_check\n" +
			"import torch\nF = torch.nn.functional\nfinal(F.silu)\nno_type_check(torch.add)\n"},
			"k.py:4 foreign-store|k.py:5 foreign-store"},
		{"called on a parameter, an item, a call result", map[string]string{"k.py": "import abc, functools, dataclasses, torch\n" +
			"def f(fn):\n    abc.abstractmethod(fn)\nL = [torch.nn.Linear]\nfunctools.total_ordering(L[0])\n" +
			"dataclasses.dataclass(type(torch.ones(1)))\n"},
			"k.py:3 foreign-store|k.py:5 foreign-store|k.py:6 foreign-store|k.py:6 dunder-access"},
		{"handed on: alias, map, partial, list", map[string]string{"k.py": "import typing, functools, torch\n" +
			"fin = typing.final\nfin(torch.add)\nlist(map(typing.no_type_check, [torch.mul]))\n" +
			"p = functools.partial(typing.final, torch.sub)\nDECOS = [typing.runtime_checkable]\n"},
			"k.py:2 foreign-store|k.py:3 foreign-store|k.py:4 foreign-store|k.py:5 foreign-store|k.py:6 foreign-store"},
		{"decorator above one that may return a torch function", map[string]string{"k.py": "import typing, functools, torch\n" +
			"def to_silu(f):\n    return torch.nn.functional.silu\n@typing.final\n@to_silu\ndef g():\n    pass\n" +
			"@functools.wraps(g)\n@(lambda f: torch.nn.functional.relu)\ndef h():\n    pass\n" +
			"@typing.no_type_check\n@typing.overload\ndef i(x: int) -> int: ...\n"},
			"k.py:6 foreign-store|k.py:10 foreign-store|k.py:14 foreign-store"},
		{"class decorators on a class a metaclass builds", map[string]string{"k.py": "import dataclasses, functools, torch\n" +
			"def meta(name, bases, ns):\n    return torch.nn.Linear\n@dataclasses.dataclass\nclass C(metaclass=meta):\n    x: int = 0\n" +
			"@functools.total_ordering\nclass D(metaclass=lambda *a: torch.nn.Bilinear):\n    pass\n"},
			"k.py:5 foreign-store|k.py:8 foreign-store"},
		{"decorator factories applied by a call", map[string]string{"k.py": "import dataclasses, typing, torch\n" +
			"dataclasses.dataclass(frozen=True)(torch.nn.Linear)\nT = typing.dataclass_transform()\nT(torch.nn.Bilinear)\n"},
			"k.py:2 foreign-store|k.py:3 foreign-store"},
		{"no_type_check on a class", map[string]string{"k.py": "import typing, torch\n" +
			"@typing.no_type_check\nclass K:\n    act = torch.nn.functional.silu\nclass L:\n    pass\ntyping.no_type_check(L)\n"},
			"k.py:3 foreign-store|k.py:7 foreign-store"},
		{"overload above wraps, and stores through an overloaded name", map[string]string{"k.py": "import typing, functools, torch\n" +
			"@typing.overload\n@functools.wraps(torch.add)\ndef add(x: int) -> int: ...\n" +
			"@typing.overload\ndef g(x: int) -> int: ...\ng.hook = print\n"},
			"k.py:4 foreign-store|k.py:7 foreign-store"},
		{"a module's container mutated through the class's method", map[string]string{"k.py": "import collections, typing, torch\n" +
			"import torch.nn.functional as F\nlist.clear(torch.nn.functional.GRID_SAMPLE_PADDING_MODES)\n" +
			"list.append(typing.EXCLUDED_ATTRIBUTES, 'x')\ncollections.OrderedDict.clear(F.GRID_SAMPLE_INTERPOLATION_MODES)\n" +
			"L = [1]\nlist.append(L, 2)\ndef f(xs):\n    list.sort(xs)\n"},
			"k.py:3 module-attribute-not-allowed|k.py:4 module-attribute-not-allowed|k.py:4 module-attribute-not-allowed|k.py:5 module-attribute-not-allowed"},
		// Honest: the same callables on the bundle's own objects.
		{"applied by a call to the name it rebinds", map[string]string{"k.py": "import dataclasses, functools, typing, torch\n" +
			"class Cfg:\n    eps: float = 1e-5\nCfg = dataclasses.dataclass(Cfg)\nCFG = Cfg()\n" +
			"class W:\n    def __init__(self, n):\n        self.n = n\n    def __lt__(self, o):\n        return self.n < o.n\n" +
			"    def __eq__(self, o):\n        return self.n == o.n\nW = functools.total_ordering(W)\n" +
			"def _gate(x):\n    return x\n_gate = typing.final(_gate)\nY = _gate(torch.ones(1))\n"},
			""},
		{"rebound first to a torch class, then applied", map[string]string{"k.py": "import dataclasses, torch\n" +
			"C = torch.nn.Linear\nC = dataclasses.dataclass(C)\nC(1, 1)\n"},
			"k.py:3 foreign-store"},
		{"decorators on the bundle's own defs and classes", map[string]string{"k.py": "import abc, dataclasses, enum, functools, typing\n" +
			"from typing import final, overload\nimport torch\nimport triton\n" +
			"@final\n@functools.lru_cache(maxsize=None)\ndef tile(n):\n    return n\n" +
			"@typing.final\n@functools.total_ordering\n@dataclasses.dataclass(frozen=True)\nclass Cfg:\n    n: int = 0\n" +
			"    def __lt__(self, o):\n        return self.n < o.n\n" +
			"class Base(abc.ABC):\n    @classmethod\n    @abc.abstractmethod\n    def make(cls):\n        ...\n" +
			"    @property\n    @abc.abstractmethod\n    def width(self):\n        ...\n" +
			"    @typing.final\n    @torch.no_grad()\n    def run(self, x):\n        return x\n" +
			"@typing.runtime_checkable\nclass Runs(typing.Protocol):\n    def run(self, x): ...\n" +
			"@overload\ndef pick(x: int) -> int: ...\n@overload\ndef pick(x: str) -> str: ...\ndef pick(x):\n    return x\n" +
			"@enum.unique\nclass Mode(enum.Enum):\n    A = 1\n" +
			"@typing.final\n@triton.jit\ndef kern(X):\n    pass\n" +
			"def deco(fn):\n    @typing.final\n    @functools.wraps(fn)\n    def inner(*a):\n        return fn(*a)\n    return inner\n" +
			"@typing.dataclass_transform()\nclass Model:\n    pass\n" +
			"@typing.no_type_check\ndef loose(x: 'anything'):\n    return x\n"}, ""},
		{"direct calls on the bundle's own objects", map[string]string{"k.py": "import abc, dataclasses, functools, typing\n" +
			"from typing import final\ndef f(x):\n    return x\nclass P:\n    n: int = 0\n" +
			"typing.final(f)\nfinal(f)\ndataclasses.dataclass(P)\nfunctools.total_ordering(P)\n" +
			"class R:\n    n: int = 0\nR = dataclasses.dataclass(R)\nR.extra = 1\n" +
			"class Q:\n    def setup(self):\n        return typing.final(self)\n"}, ""},
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
