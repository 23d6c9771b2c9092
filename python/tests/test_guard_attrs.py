"""Tests of the runtime guard's objects check against library functions
that store into what they are applied to (session 15, class 3):
``typing.final(torch.nn.functional.silu)`` sets ``__final__``,
``typing.no_type_check``, ``abc.abstractmethod`` and ``functools.wraps``
set or copy attributes, ``typing.runtime_checkable`` flips a protocol's
flag. The static scan refuses these on objects the bundle did not create;
the guard is the second line for a store the scan misses: it compares
every watched function's ``__dict__`` and ``__kwdefaults__`` entries and
every watched class's, module's and function's values by identity, so
that a replaced value whose ``__eq__`` says yes (a candidate "liar") is
still a change.

Each attack runs in a child process (they change the process for good);
honest use of the same decorators on the candidate's own objects must
pass first.

Run: python3 -B -m unittest discover -s python/tests -p 'test_guard*'
"""

import json
import os
import subprocess
import sys
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PARENT = os.path.dirname(HERE)
sys.path.insert(0, PARENT)

import torch  # noqa: E402

from cacheon_runtime import guard  # noqa: E402

CHILD = r"""
import json, sys
sys.path.insert(0, %(parent)r)
import torch
from cacheon_runtime import guard
g = guard.Guard(torch)
out = {"start": g.objects()}
import abc, dataclasses, enum, functools, typing
%(honest)s
out["honest"] = g.objects()
exec(sys.argv[1])
out["after"] = g.objects()
print(json.dumps(out))
"""

# The decorators on the candidate's own functions and classes: no change
# to any watched object.
HONEST = """
@typing.final
@functools.lru_cache(maxsize=None)
def tile(n):
    return n

def counted(fn):
    @typing.final
    @functools.wraps(fn)
    def inner(*a):
        return fn(*a)
    return inner

@counted
def act(x):
    return torch.nn.functional.silu(x)

@typing.final
@functools.total_ordering
@dataclasses.dataclass(frozen=True)
class Cfg:
    n: int = 0
    def __lt__(self, o):
        return self.n < o.n

class Base(abc.ABC):
    @abc.abstractmethod
    def run(self, x): ...

class Impl(Base):
    @typing.final
    def run(self, x):
        return act(x)

@typing.runtime_checkable
class Runs(typing.Protocol):
    def run(self, x): ...

@typing.overload
def pick(x: int) -> int: ...
def pick(x):
    return x

@typing.no_type_check
def loose(x: "anything"):
    return x

@enum.unique
class Mode(enum.Enum):
    A = 1

typing.final(loose)
assert isinstance(Impl(), Runs) and Cfg(1) > Cfg(0) and tile(3) == 3 and pick(2) == 2
Impl().run(torch.ones(2))
"""

LIAR = """
class Liar:
    def __eq__(self, o):
        return True
    __hash__ = None
    def __call__(self, *a, **k):
        return None
"""


def run_child(attack):
    code = CHILD % {"parent": PARENT, "honest": textwrap.indent(textwrap.dedent(HONEST), "")}
    p = subprocess.run([sys.executable, "-I", "-B", "-c", code, textwrap.dedent(attack)],
                       capture_output=True, timeout=300)
    if p.returncode != 0:
        raise AssertionError("child failed:\n" + p.stderr.decode("utf-8", "replace"))
    return json.loads(p.stdout.decode().strip().splitlines()[-1])


class ObjectsAttributesTest(unittest.TestCase):
    """What the objects check says after each store (in a child process)."""

    ATTACKS = {
        "final": ("typing.final(torch.nn.functional.silu)",
                  "the attributes of torch.nn.functional.silu changed (__final__ added"),
        "no_type_check_by_decorator_stack": (
            "def as_mish(f):\n    return torch.nn.functional.mish\n"
            "@typing.no_type_check\n@as_mish\ndef marked():\n    pass\n",
            "the attributes of torch.nn.functional.mish changed (__no_type_check__ added"),
        "abstractmethod": ("abc.abstractmethod(torch.nn.functional.relu)",
                           "the attributes of torch.nn.functional.relu changed (__isabstractmethod__ added"),
        "wraps_by_call": ("def src():\n    pass\nsrc.hook = print\n"
                          "functools.wraps(src)(torch.nn.functional.hardswish)",
                          "the attributes of torch.nn.functional.hardswish changed"),
        "runtime_checkable_library_protocol": (
            "import torch.nn.modules.lazy as L\ntyping.runtime_checkable(L._LazyProtocol)",
            "torch.nn.modules.lazy._LazyProtocol._is_runtime_protocol was "),
        "kwdefaults_in_place": ("kw = dataclasses.dataclass.__kwdefaults__\nkw['frozen'] = True",
                                "the code or defaults of dataclasses.dataclass were replaced"),
        "liar_default": (LIAR + "torch.nn.functional.silu.__defaults__ = (Liar(),)",
                         "the code or defaults of torch.nn.functional.silu were replaced"),
        "liar_class_attribute": (LIAR + "torch.nn.Linear.extra_repr = Liar()",
                                 "torch.nn.modules.linear.Linear.extra_repr was replaced or deleted"),
        "liar_module_binding": (LIAR + "torch.nn.functional.silu = Liar()",
                                "torch.nn.functional.silu was rebound or deleted"),
    }

    def test_attacks_and_honest_use(self):
        for name, (attack, want) in self.ATTACKS.items():
            with self.subTest(name):
                got = run_child(attack)
                self.assertEqual(got["start"], "", name)
                self.assertEqual(got["honest"], "", name)
                self.assertIn(want, got["after"], name)


class ObjectsCostTest(unittest.TestCase):
    """What one objects check costs in this process (nothing changed):
    printed, and bounded loosely (a loaded CI machine varies)."""

    def test_cost(self):
        o = guard._Objects()
        self.assertEqual(o.changed(), "")
        times = []
        for _ in range(30):
            t = time.perf_counter()
            self.assertEqual(o.changed(), "")
            times.append(time.perf_counter() - t)
        times.sort()
        print("\n[guard] objects check: %d classes (%d entries), %d functions (%d with attributes), "
              "%d bindings: min %.2f ms, median %.2f ms" % (
                  len(o.classes), len(o._cls_entries[1]), len(o.functions), len(o._attrd),
                  len(o._bind[0]), times[0] * 1e3, times[len(times) // 2] * 1e3))
        self.assertLess(times[0], 0.2)


if __name__ == "__main__":
    unittest.main()


class ImportStateTest(unittest.TestCase):
    """The import machinery check: library finders (pkg_resources adds
    some when torch 1.13's Version is first used) pass; a finder of no
    library file, a removed entry or a replaced __import__ do not."""

    def test_library_finder_passes(self):
        from cacheon_runtime import importstate
        st = importstate.ImportState()
        torch.torch_version.Version("1.0")  # may import pkg_resources (torch 1.13)
        self.assertEqual(st.changed(), "")

    def test_candidate_finder_refused(self):
        import builtins
        from cacheon_runtime import importstate
        st = importstate.ImportState()

        class Finder:
            def find_spec(self, *a):
                return None
        Finder.__module__ = "bundle_mod"
        sys.meta_path.insert(0, Finder())
        try:
            self.assertIn("sys.meta_path gained", st.changed())
        finally:
            sys.meta_path.pop(0)
        hooks = list(sys.path_hooks)
        sys.path_hooks.append(lambda p: None)
        try:
            self.assertIn("sys.path_hooks gained", st.changed())
        finally:
            sys.path_hooks[:] = hooks
        first = sys.meta_path.pop()
        try:
            self.assertIn("present at start was removed", st.changed())
        finally:
            sys.meta_path.append(first)
        orig = builtins.__import__
        builtins.__import__ = lambda *a, **k: orig(*a, **k)
        try:
            self.assertIn("__import__ was replaced", st.changed())
        finally:
            builtins.__import__ = orig
        self.assertEqual(st.changed(), "")


class FirstUseDataTest(unittest.TestCase):
    """A class of Triton's may gain data on first use (its driver sets
    CudaUtils.instance at a kernel's first launch, after the snapshot when
    the runtime imported Triton to compute its cache key); behaviour, an
    object of another class, or data added to a torch class are changes."""

    def _class(self, module):
        return type("Utils", (), {"__module__": module, "get": lambda self: 1})

    def test_triton_class_gains_data(self):
        for value in (lambda c: object.__new__(c), lambda c: None, lambda c: 3, lambda c: "sm90"):
            c = self._class("triton.backends.nvidia.driver")
            d = dict(c.__dict__)
            c.instance = value(c)
            self.assertEqual(guard._Objects._class_changed(c, d), "")

    def test_triton_class_gains_behaviour(self):
        class Other:
            def get(self):
                return 2
        for value in (lambda self: 2, staticmethod(len), property(lambda self: 3), Other(), Other):
            c = self._class("triton.runtime.jit")
            d = dict(c.__dict__)
            c.extra = value
            self.assertIn("Utils.extra was added", guard._Objects._class_changed(c, d))

    def test_torch_class_gains_data(self):
        c = self._class("torch.nn.modules.linear")
        d = dict(c.__dict__)
        c.instance = 1
        self.assertIn("Utils.instance was added", guard._Objects._class_changed(c, d))
