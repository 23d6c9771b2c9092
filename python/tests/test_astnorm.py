"""Tests of cacheon_runtime.astnorm (the normalized dump behind the copy
fingerprint). Run:

    python3 -m unittest discover -s python/tests -p 'test_astnorm.py'
"""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from cacheon_runtime import astnorm  # noqa: E402


def norm(src):
    return astnorm.normalize(src.encode("utf-8"))


# Pairs that must normalize the same.
SAME = [
    ("comments and layout",
     "def f(a, b):\n    return a+b  # sum\n",
     "def f(a,\n      b):\n    # sum\n    return (a + b)\n"),
    ("docstrings",
     '"""mod"""\nclass C:\n    """c"""\n    def m(self):\n        """m"""\n        return 1\n',
     "class C:\n    def m(self):\n        return 1\n"),
    ("docstring-only body",
     'def f():\n    """only a docstring"""\n',
     "def f():\n    pass\n"),
    ("parameters and locals",
     "def f(x, *args, k=1, **kw):\n    y = x + k\n    for i in args:\n        y += i\n    return y, kw\n",
     "def f(a, *rest, k=1, **extra):\n    acc = a + k\n    for e in rest:\n        acc += e\n    return acc, extra\n"),
    ("closures and nonlocal",
     "def f(x):\n    t = 0\n    def g(y):\n        nonlocal t\n        t = t + y + x\n        return t\n    return g\n",
     "def f(p):\n    s = 0\n    def h(q):\n        nonlocal s\n        s = s + q + p\n        return s\n    return h\n"),
    ("comprehension variables",
     "def f(xs):\n    return [v * 2 for v in xs if v], {k: w for k, w in xs}\n",
     "def f(items):\n    return [e * 2 for e in items if e], {a: b for a, b in items}\n"),
    ("module-level comprehension variables",
     "Y = [v for v in range(3)]\n",
     "Y = [q for q in range(3)]\n"),
    ("lambda parameters",
     "F = lambda a, b=2: a * b\n",
     "F = lambda x, y=2: x * y\n"),
    ("except, with and walrus names",
     "def f(p):\n    with open(p) as fh:\n        pass\n    try:\n        pass\n    except E as e:\n        raise e\n    if (n := len(p)) > 1:\n        return n\n",
     "def f(q):\n    with open(q) as h:\n        pass\n    try:\n        pass\n    except E as err:\n        raise err\n    if (m := len(q)) > 1:\n        return m\n"),
    ("globals keep their names, locals do not shadow them",
     "def f(a):\n    global G\n    G = a\n    return torch.relu(a)\n",
     "def f(b):\n    global G\n    G = b\n    return torch.relu(b)\n"),
    ("string statements as comments",
     "def f():\n    'step one'\n    x = 1\n    'step two'\n    return x\n",
     "def f():\n    y = 1\n    return y\n"),
    ("a nested def's name is local",
     "def f():\n    def helper(z):\n        return z\n    return helper(1)\n",
     "def f():\n    def h2(w):\n        return w\n    return h2(1)\n"),
]

# Pairs that must normalize differently.
DIFFERENT = [
    ("constant", "def f(a):\n    return a + 1\n", "def f(a):\n    return a + 2\n"),
    ("constant type", "X = 1\n", "X = True\n"),
    ("float", "X = 1.0\n", "X = 1\n"),
    ("operator", "def f(a, b):\n    return a + b\n", "def f(a, b):\n    return a - b\n"),
    ("call", "def f(a):\n    return torch.relu(a)\n", "def f(a):\n    return torch.sigmoid(a)\n"),
    ("attribute", "def f(a):\n    return a.float()\n", "def f(a):\n    return a.half()\n"),
    ("module-level name", "SCALE = 1\n", "FACTOR = 1\n"),
    ("function name", "def f():\n    pass\n", "def g():\n    pass\n"),
    ("keyword argument name", "def f(a):\n    return g(a, dim=1)\n", "def f(a):\n    return g(a, axis=1)\n"),
    ("parameter order", "def f(a, b):\n    return a - b\n", "def f(b, a):\n    return a - b\n"),
    ("global versus local", "def f():\n    return torch\n", "def f(torch):\n    return torch\n"),
    ("class attribute name", "class C:\n    w = 1\n", "class C:\n    v = 1\n"),
    ("import alias", "import torch.nn.functional as F\n", "import torch.nn.functional as G\n"),
    ("string in an expression", "X = f('a')\n", "X = f('b')\n"),
    ("two locals swapped", "def f(a, b):\n    c = a\n    d = b\n    return c - d\n",
     "def f(a, b):\n    c = a\n    d = b\n    return d - c\n"),
]


class NormalizeTest(unittest.TestCase):
    def test_same(self):
        for name, a, b in SAME:
            with self.subTest(name):
                self.assertEqual(norm(a), norm(b))

    def test_different(self):
        for name, a, b in DIFFERENT:
            with self.subTest(name):
                self.assertNotEqual(norm(a), norm(b))

    def test_syntax_error(self):
        out = astnorm._one({"path": "x.py", "source": "def f(:\n"})
        self.assertEqual(out["path"], "x.py")
        self.assertIn("SyntaxError", out["error"])
        self.assertNotIn("norm", out)

    def test_coding_cookie(self):
        latin = "# -*- coding: latin-1 -*-\nX = '\xe9'\n".encode("latin-1")
        utf8 = "X = '\xe9'\n".encode("utf-8")
        self.assertEqual(astnorm.normalize(latin), astnorm.normalize(utf8))

    def test_script(self):
        req = {"files": [{"path": "a.py", "source": "X = 1\n"}, {"path": "b.py", "source": "("}]}
        script = os.path.join(os.path.dirname(HERE), "cacheon_runtime", "astnorm.py")
        out = subprocess.run([sys.executable, "-I", "-S", "-W", "ignore", script],
                             input=json.dumps(req).encode(), stdout=subprocess.PIPE, check=True).stdout
        lines = [json.loads(line) for line in out.decode("ascii").splitlines()]
        self.assertEqual([line["path"] for line in lines], ["a.py", "b.py"])
        self.assertIn("norm", lines[0])
        self.assertIn("error", lines[1])


if __name__ == "__main__":
    unittest.main()
