package scan

import (
	"strings"
	"testing"
)

// TestTypingIdioms: the builtin type in annotations and as isinstance's
// class argument, imports under "if TYPE_CHECKING:" and
// torch.compiler.is_compiling scan clean; every neighbouring form that
// hands type to code that can call it, or an import that can run, stays
// refused. want lists "path:line rule" findings in order; "" means clean.
func TestTypingIdioms(t *testing.T) {
	const future = "from __future__ import annotations\n"
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		// 1. type where only its identity counts.
		{"annotations and isinstance", map[string]string{"k.py": "from typing import Callable, Dict, List, Optional, Type\n" +
			"import typing, collections.abc\n" +
			"def register(name: str) -> Callable[[type], type]:\n" +
			"    def deco(cls: type) -> type:\n        return cls\n    return deco\n" +
			"def g(a: Dict[str, type], b: Optional[Type[type]], c: typing.List[type], d: list[type], *e: type, **f: type) -> collections.abc.Callable[..., type]: ...\n" +
			"x: type\ny: Dict[str, type] = {}\n" +
			"def h(act):\n    z: type = int\n    return act() if isinstance(act, type) else act\n" +
			"def i(obj):\n    return issubclass(obj, (int, (type, float)))\n"}, ""},
		{"class body annotation under the future import", map[string]string{"k.py": future + "import dataclasses\n" +
			"@dataclasses.dataclass\nclass C:\n    kind: type = int\n"}, ""},
		{"three-argument type in an annotation", map[string]string{"k.py": "def f(x: type('A', (), {})): pass\n"},
			"k.py:1 dunder-access"},
		{"three-argument type in an annotation under the future import", map[string]string{"k.py": future +
			"def f(x: type('A', (), {})) -> type('B', (), {}): pass\n"},
			"k.py:2 dunder-access|k.py:2 dunder-access"},
		{"type called in isinstance's neighbour", map[string]string{"k.py": "def f(x):\n    return isinstance(x, type) or type('A', (), {})\n"},
			"k.py:2 dunder-access"},
		{"alias", map[string]string{"k.py": "t = type\nC = t('A', (), {})\n"}, "k.py:1 dunder-access"},
		// type(x) of a class x is type itself: its result only with
		// is/is not, as isinstance's class or for its name (session 21's
		// second red-team pass laundered type(int) through each of these).
		{"type(x) for identity", map[string]string{"k.py": "import torch\ndef f(x, y):\n" +
			"    a = type(x) is torch.Tensor or type(x) is not int\n" +
			"    b = isinstance(y, type(x)) or isinstance(y, (int, type(None)))\n" +
			"    return a, b, type(x).__name__\n"}, ""},
		// hs50b (session 50): formatted into a message, only its str()
		// or repr() is taken; an exception's argument is kept (e.args).
		{"type(x) formatted", map[string]string{"k.py": "def f(x):\n" +
			"    a = f'got {type(x)} {type(x)!r}'\n    b = 'got %s' % type(x)\n    c = 'got %s %s' % (type(x), 1)\n" +
			"    return a, b, c, 'got {}'.format(type(x))\n"}, ""},
		{"type(x) as an exception's argument", map[string]string{"k.py": "def f(x):\n    raise TypeError('got', type(x))\n"}, "k.py:2 dunder-access"},
		{"type(x) in a tuple", map[string]string{"k.py": "T = (type(int),)[0]\n"}, "k.py:1 dunder-access"},
		{"type(x) returned", map[string]string{"k.py": "def tt():\n    return type(int)\n"}, "k.py:2 dunder-access"},
		{"type(x) in a dict", map[string]string{"k.py": "d = {'t': type(int)}\n"}, "k.py:1 dunder-access"},
		{"type(x) as an argument", map[string]string{"k.py": "def ident(v):\n    return v\nT = ident(type(int))\n"}, "k.py:3 dunder-access"},
		{"type(x) stored on an attribute", map[string]string{"k.py": "class H:\n    pass\nh = H()\nh.t = type(int)\n"}, "k.py:4 dunder-access"},
		{"type(x) compared with ==", map[string]string{"k.py": "class E:\n    def __eq__(self, o):\n        return o\nr = E() == type(int)\n"}, "k.py:4 dunder-access"},
		{"type(x)'s mro", map[string]string{"k.py": "m = type(int).mro()\n"}, "k.py:1 dunder-access|k.py:1 introspection"},
		{"type(x) called", map[string]string{"k.py": "k = type(int)(int)\n"}, "k.py:1 dunder-access"},
		{"type(x) handed to a bundle's isinstance", map[string]string{"k.py": "S = []\ndef isinstance(a, b):\n    S.append(b)\n" +
			"isinstance(0, type(int))\n"}, "k.py:4 dunder-access"},
		{"alias by annotated assignment", map[string]string{"k.py": "t: type = type\n"}, "k.py:1 dunder-access"},
		{"base class", map[string]string{"k.py": "class M(type):\n    pass\n"}, "k.py:1 dunder-access"},
		{"argument", map[string]string{"k.py": "def g(f):\n    return f('A', (), {})\ng(type)\n"}, "k.py:3 dunder-access"},
		{"default", map[string]string{"k.py": "def f(x: type = type):\n    return x\n"}, "k.py:1 dunder-access"},
		{"subscripted and called", map[string]string{"k.py": "ts = [type]\nts[0]('A', (), {})\n"}, "k.py:1 dunder-access"},
		{"bundle subscript in an annotation", map[string]string{"k.py": "class E:\n    def __getitem__(self, t):\n        return t('A', (), {})\n" +
			"e = E()\ndef f(x: e[type]): pass\n"}, "k.py:5 dunder-access"},
		{"bundle generic in an annotation under the future import", map[string]string{"k.py": future + "class E:\n    pass\n" +
			"def f(x: E[type]): pass\n"}, "k.py:4 dunder-access"},
		{"rebound typing name in an annotation", map[string]string{"k.py": "from typing import List\nclass E:\n    def __class_getitem__(cls, t):\n        return t\n" +
			"List = E\ndef f(x: List[type]): pass\n"}, "k.py:6 dunder-access"},
		{"rebound builtin generic in an annotation", map[string]string{"k.py": "class E:\n    def __class_getitem__(cls, t):\n        return t\n" +
			"list = E\ndef f(x: list[type]): pass\n"}, "k.py:5 dunder-access"},
		{"typing name re-exported by a bundle module", map[string]string{"h.py": "from typing import Callable\n" +
			"class Callable:\n    def __class_getitem__(cls, t):\n        return t\n",
			"k.py": "from h import Callable\ndef f(x: Callable[type]): pass\n"}, "k.py:2 dunder-access"},
		{"typing a bundle submodule in an annotation", map[string]string{"pkg/typing.py": "class Callable:\n    def __class_getitem__(cls, t):\n        return t\n",
			"pkg/helper.py":   "from . import typing\n",
			"pkg/__init__.py": "import typing\nfrom . import helper\ndef f(x: typing.Callable[type]): pass\n"},
			"pkg/__init__.py:3 dunder-access"},
		{"call in an annotation", map[string]string{"k.py": "def g(t):\n    return t\ndef f(x: g(type)): pass\n"}, "k.py:3 dunder-access"},
		{"operator in an annotation", map[string]string{"k.py": "class E:\n    def __or__(self, t):\n        return t\n" +
			"def f(x: E() | type): pass\n"}, "k.py:4 dunder-access"},
		{"class body annotation without the future import", map[string]string{"k.py": "import dataclasses\n" +
			"@dataclasses.dataclass\nclass C:\n    kind: type = int\n" +
			"dataclasses.fields(C)[0].type('A', (), {})\n"}, "k.py:4 dunder-access"},
		{"isinstance rebound", map[string]string{"k.py": "isinstance = lambda a, b: b('A', (), {})\nisinstance(1, type)\n"},
			"k.py:2 dunder-access"},
		{"isinstance a parameter", map[string]string{"k.py": "def f(isinstance):\n    return isinstance(1, type)\n"},
			"k.py:2 dunder-access"},
		{"isinstance from a bundle module", map[string]string{"h.py": "def isinstance(a, b):\n    return b('A', (), {})\n",
			"k.py": "from h import isinstance\nisinstance(1, type)\n"}, "k.py:2 dunder-access"},
		{"isinstance's first argument", map[string]string{"k.py": "issubclass(type, object)\n"}, "k.py:1 dunder-access"},
		{"isinstance with a list", map[string]string{"k.py": "isinstance(1, [type])\n"}, "k.py:1 dunder-access"},
		{"isinstance with a keyword", map[string]string{"k.py": "isinstance(1, type, x=1)\n"}, "k.py:1 dunder-access"},
		{"isinstance with a starred tuple", map[string]string{"k.py": "isinstance(1, (*(), type))\n"}, ""}, // still a tuple holding type

		// 2. torch.compiler's read-only queries.
		{"is_compiling guarded", map[string]string{"k.py": "import torch\nfrom torch.compiler import is_compiling\n" +
			"def c():\n    if hasattr(torch, 'compiler') and hasattr(torch.compiler, 'is_compiling'):\n" +
			"        return torch.compiler.is_compiling() or torch.compiler.is_dynamo_compiling() or is_compiling()\n    return False\n"}, ""},
		{"the rest of torch.compiler", map[string]string{"k.py": "import torch\nfrom torch import compiler as c\n" +
			"f = torch.compiler.compile\ng = c.disable\nh = getattr(torch.compiler, 'reset')\n"},
			"k.py:3 module-attribute-not-allowed|k.py:4 module-attribute-not-allowed|k.py:5 module-attribute-not-allowed"},

		// 3. Imports under TYPE_CHECKING.
		{"type checking imports", map[string]string{"k.py": future + "from typing import TYPE_CHECKING, Optional\nimport typing\n" +
			"if TYPE_CHECKING:\n    '''for annotations only'''\n    import numpy as np\n    from vllm.config import VllmConfig\n" +
			"if typing.TYPE_CHECKING:\n    import os.path\n    pass\n" +
			"def f(x: np.ndarray, c: Optional[VllmConfig] = None) -> 'os.PathLike':\n    y: np.ndarray = x\n    return y\n"}, ""},
		{"type checking import without the future import", map[string]string{"k.py": "from typing import TYPE_CHECKING\n" +
			"if TYPE_CHECKING:\n    import numpy as np\ndef f(x: 'np.ndarray'): pass\n"}, ""},
		{"a name imported there used at run time", map[string]string{"k.py": "from typing import TYPE_CHECKING\n" +
			"if TYPE_CHECKING:\n    import numpy as np\ndef f(x):\n    return np.asarray(x)\n"},
			"k.py:3 import-not-allowed"},
		{"a name imported there as a default", map[string]string{"k.py": "from typing import TYPE_CHECKING\n" +
			"if TYPE_CHECKING:\n    from os import system\ndef f(x, run=system): pass\n"},
			"k.py:3 concurrency|k.py:3 import-not-allowed"},
		{"a name imported there rebound", map[string]string{"k.py": "from typing import TYPE_CHECKING\n" +
			"if TYPE_CHECKING:\n    import numpy as np\nnp = None\n"},
			"k.py:3 import-not-allowed"},
		{"TYPE_CHECKING rebound", map[string]string{"k.py": "from typing import TYPE_CHECKING\nTYPE_CHECKING = True\n" +
			"if TYPE_CHECKING:\n    import os\n"}, "k.py:4 import-not-allowed"},
		{"TYPE_CHECKING rebound in a function", map[string]string{"k.py": "from typing import TYPE_CHECKING\ndef f():\n    global TYPE_CHECKING\n    TYPE_CHECKING = 1\n" +
			"if TYPE_CHECKING:\n    import os\n"}, "k.py:6 import-not-allowed"},
		{"TYPE_CHECKING not typing's", map[string]string{"k.py": "TYPE_CHECKING = True\nif TYPE_CHECKING:\n    import os\n"},
			"k.py:3 import-not-allowed"},
		{"TYPE_CHECKING from a bundle module", map[string]string{"h.py": "TYPE_CHECKING = True\n",
			"k.py": "from h import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\n"}, "k.py:3 import-not-allowed"},
		{"TYPE_CHECKING also imported elsewhere", map[string]string{"h.py": "TYPE_CHECKING = True\n",
			"k.py": "from typing import TYPE_CHECKING\ndef f():\n    from h import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\n"},
			"k.py:5 import-not-allowed"},
		{"TYPE_CHECKING imported after the if", map[string]string{"k.py": "if TYPE_CHECKING:\n    import os\nfrom typing import TYPE_CHECKING\n"},
			"k.py:2 import-not-allowed"},
		{"another typing name", map[string]string{"k.py": "from typing import TYPE_CHECKING, Any as TC\nif TC:\n    import os\n"},
			"k.py:3 import-not-allowed"},
		{"TYPE_CHECKING a bundle submodule", map[string]string{"pkg/TYPE_CHECKING.py": "",
			"pkg/helper.py":   "from . import TYPE_CHECKING\n",
			"pkg/__init__.py": "from typing import TYPE_CHECKING\nfrom . import helper\nif TYPE_CHECKING:\n    import os\n"},
			"pkg/__init__.py:4 import-not-allowed"},
		{"TYPE_CHECKING a bundle import", map[string]string{"pkg/helper.py": "import pkg.TYPE_CHECKING\n",
			"pkg/__init__.py": "from typing import TYPE_CHECKING\nfrom . import helper\nif TYPE_CHECKING:\n    import os\n"},
			"pkg/__init__.py:4 import-not-allowed"},
		{"typing a bundle submodule", map[string]string{"pkg/helper.py": "from . import typing\n",
			"pkg/__init__.py": "import typing\nfrom . import helper\nif typing.TYPE_CHECKING:\n    import os\n"},
			"pkg/__init__.py:4 import-not-allowed"},
		{"typing rebound", map[string]string{"k.py": "import typing\nclass T:\n    TYPE_CHECKING = True\ntyping = T\n" +
			"if typing.TYPE_CHECKING:\n    import os\n"}, "k.py:6 import-not-allowed"},
		{"else branch", map[string]string{"k.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\nelse:\n    pass\n"},
			"k.py:3 import-not-allowed"},
		{"negated test", map[string]string{"k.py": "from typing import TYPE_CHECKING\nif not TYPE_CHECKING:\n    import os\n"},
			"k.py:3 import-not-allowed"},
		{"other statements in the body", map[string]string{"k.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\n    x = 1\n"},
			"k.py:3 import-not-allowed"},
		{"in a function", map[string]string{"k.py": "from typing import TYPE_CHECKING\ndef f():\n    if TYPE_CHECKING:\n        import os\n"},
			"k.py:4 import-not-allowed"},
		{"the other rules still apply", map[string]string{"k.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from torch import load\n"},
			"k.py:3 unsafe-loader"},
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
