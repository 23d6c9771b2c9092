package scan

import (
	"strings"
	"testing"
)

// TestNamesAsTheInterpreterBindsThem: a name means what the interpreter
// makes of it, not what it looks like (rt51a): a class-private name
// inside a class is its mangled form, a package's __init__.py has every
// submodule the bundle imports as a global, and a name bound nowhere is
// refused. The honest uses of private names and submodules next to them
// scan clean.
func TestNamesAsTheInterpreterBindsThem(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"mangled global name", map[string]string{"k.py": "import torch\n_Probe__t = torch\nclass Probe:\n" +
			"    def f(self):\n        return __t.sys.modules\n"},
			"k.py:5 module-escape|k.py:5 sys-modules"},
		{"mangled attribute of a bundle module", map[string]string{"h.py": "import torch\n_Q__t = torch\n",
			"k.py": "import h\nclass Q:\n    def f(self):\n        return h.__t.os.getpid()\n"},
			"k.py:4 module-escape"},
		{"mangled in a nested function and a lambda", map[string]string{"k.py": "import torch\n_C__t = torch\nclass C:\n" +
			"    def f(self):\n        def g():\n            return __t.os\n        return g, (lambda: __t.sys)\n"},
			"k.py:6 module-alias|k.py:6 module-escape|k.py:7 module-alias|k.py:7 module-escape"},
		{"a class named by underscores does not mangle", map[string]string{"k.py": "import torch\n_C__t = torch\nclass __:\n" +
			"    def f(self):\n        return __t\n"},
			"k.py:5 unbound-name"},
		{"submodule bound in its package by a from-import", map[string]string{
			"kern/__init__.py": "from .helper import SCALE\ndef f():\n    return helper.T.sys.modules\n",
			"kern/helper.py":   "import torch\nT = torch\nSCALE = 1.0\n"},
			"kern/__init__.py:3 module-escape|kern/__init__.py:3 sys-modules"},
		{"submodule bound in its package by another file's import", map[string]string{
			"kern/__init__.py": "from .main import run\ndef f():\n    return helper.T.os.system\n",
			"kern/main.py":     "import kern.helper\ndef run():\n    return 1\n",
			"kern/helper.py":   "import torch\nT = torch\n"},
			"kern/__init__.py:3 concurrency|kern/__init__.py:3 module-escape"},
		{"a name bound nowhere", map[string]string{"k.py": "def f(x):\n    return x + undefined_thing\n"},
			"k.py:2 unbound-name"},
		{"honest private names and submodules", map[string]string{
			"kern/__init__.py": "from . import helper\nfrom .ops import run\n__all__ = ['run', 'helper']\n",
			"kern/helper.py":   "SCALE = 2.0\n",
			"kern/ops.py": "from __future__ import annotations\nimport torch\n" +
				"class Runner:\n    __slots__ = ('__cache',)\n    def __init__(self):\n        self.__cache = {}\n" +
				"    def __key(self, x: Tensor) -> tuple:\n        return (x.shape, x.dtype)\n" +
				"    def __call__(self, x):\n        k = self.__key(x)\n        if k not in self.__cache:\n" +
				"            self.__cache[k] = torch.empty_like(x)\n        return self.__cache[k]\n" +
				"def run(x):\n    return Runner()(x), __name__\n"}, ""},
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
