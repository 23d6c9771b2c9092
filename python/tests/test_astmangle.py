"""Tests of cacheon_runtime.astmangle: the tree rewritten as the compiler
mangles class-private names. Run:

    python3 -m unittest discover -s python/tests -p 'test_astmangle.py'
"""

import ast
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from cacheon_runtime import astmangle  # noqa: E402

# Every place a name stands, inside and outside classes (match needs 3.10).
SOURCE = '''
import torch
_Probe__t = torch
class Probe:
    __a = 1
    def verifying(self, __p=2, *, __k=3):
        global __g
        mods = __t.sys.modules
        x = [__c for __c in range(3)]
        f = lambda __l: __l
        try:
            pass
        except E as __e:
            pass
        from m import __y as __z
        from __mm import q
        from .__rel import r
        from . import __rz
        import __q
        def __inner(self):
            return self.__attr, __a
        class __Nested:
            def g(self):
                return __n, self.__x
        return dict(__kw=1)
@dec(__outer)
class ___:
    def f(self):
        return __free
'''
MATCH = '''
class M:
    def f(self, v):
        match v:
            case [__m1, *__rest]:
                pass
            case {"a": 1, **__mr}:
                pass
'''


def compiled_names(code, out):
    out.update(code.co_names, code.co_varnames, code.co_cellvars, code.co_freevars)
    for k in code.co_consts:
        if isinstance(k, types.CodeType):
            compiled_names(k, out)
    return out


def tree_names(tree):
    out = set()
    for node in ast.walk(tree):
        for field in ("id", "attr", "arg", "name", "asname", "module", "rest"):
            v = getattr(node, field, None)
            if isinstance(v, str):
                out.add(v)
                out.update(v.split("."))
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
    return out


def private(name):
    return name.startswith("_") and "__" in name and not name.endswith("__")


class AsTheCompiler(unittest.TestCase):
    def check(self, src):
        code = compiled_names(compile(src, "k.py", "exec"), set())
        names = tree_names(astmangle.mangle(ast.parse(src)))
        # every private name the compiled code uses is in the tree as spelt
        self.assertEqual(sorted(n for n in code if private(n) and n not in names), [])
        # and the tree keeps no unmangled private name the code does not use
        # (a call's keyword names are the compiler's constants, not names)
        left = sorted(n for n in names if n.startswith("__") and not n.endswith("__") and n not in code)
        self.assertEqual(left, ["__kw"] if "__kw" in src else [])

    def test_names_everywhere(self):
        self.check(SOURCE)

    @unittest.skipIf(sys.version_info < (3, 10), "match")
    def test_match_captures(self):
        self.check(MATCH)

    def test_examples(self):
        tree = astmangle.mangle(ast.parse(SOURCE))
        names = tree_names(tree)
        for want in ("_Probe__t", "_Probe__a", "_Probe__p", "_Probe__k", "_Probe__g", "_Probe__inner",
                     "_Probe__Nested", "_Nested__n", "_Nested__x", "_Probe__rel", "_Probe__mm"):
            self.assertIn(want, names)
        for kept in ("__outer", "__free"):  # outside any class; a class named by underscores
            self.assertIn(kept, names)


if __name__ == "__main__":
    unittest.main()
