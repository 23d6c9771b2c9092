"""Tests of the runtime guard in one process (issue 16, class 5): the raw
memory path that no torch mode can intercept, the guard's checks run in
this interpreter or a child one, and what the poison costs. The worker-
and engine-level attacks are in test_guard.py.

Attacks that change process-wide torch state run in a child process; only
thread-local, context-managed state is touched in this process.

Run: python3 -B -m unittest discover -s python/tests
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
sys.path.insert(0, HERE)
sys.path.insert(0, PARENT)

import torch  # noqa: E402

from cacheon_runtime import guard, rawmem, stio  # noqa: E402


CHILD = r"""
import json, os, sys
sys.path.insert(0, %(parent)r)
import torch
from cacheon_runtime import guard, rawmem, stio
g = guard.Guard(torch)
raw = rawmem.RawMem(torch)
out = {}
%(body)s
print(json.dumps(out))
"""


def child(body):
    """Run body in a fresh Python with the runtime importable; returns the
    dict it fills in `out`."""
    code = CHILD % {"parent": PARENT, "body": textwrap.dedent(body)}
    p = subprocess.run([sys.executable, "-I", "-B", "-c", code], capture_output=True, timeout=300)
    if p.returncode != 0:
        raise AssertionError("child failed:\n" + p.stderr.decode("utf-8", "replace"))
    return json.loads(p.stdout.decode().strip().splitlines()[-1])


class RawPathTest(unittest.TestCase):
    """Class 5 (b): even with the tampering in place (the checks above
    aside), the raw path writes and reads what memory holds."""

    def test_raw_fill_and_dump_under_a_faking_dispatch_mode(self):
        out = child("""
            from torch.utils._python_dispatch import TorchDispatchMode
            x = torch.randn(4, 6)
            right = torch.nn.functional.silu(x[:, :3]) * x[:, 3:]
            base = torch.empty(4 * 3 + 4)
            view = base[4:].view(4, 3)

            class Fake(TorchDispatchMode):
                def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                    name = str(func)
                    if "fill_" in name:
                        return args[0]
                    r = func(*args, **(kwargs or {}))
                    if any(k in name for k in ("clone", "_to_copy", "copy_", "contiguous")):
                        r = right.clone() if r.shape == right.shape else r
                    return r
            with Fake():
                out["mode"] = g.quick()
                raw.fill(base, rawmem.pattern(torch, torch.float32, float("nan")))
                data = stio.dumps({"out": view})
                faked = torch.equal(view.clone(), right)
            t, _ = stio.loads(data)
            out["dump_nan"] = bool(torch.isnan(t["out"]).all())
            out["torch_path_faked"] = faked
        """)
        self.assertIn("dispatch", out["mode"])
        self.assertTrue(out["dump_nan"])        # raw: the poison, truthfully
        self.assertTrue(out["torch_path_faked"])  # what a torch-op dump would have said

    def test_raw_path_ignores_a_kernel_registered_over_fill_and_copy(self):
        out = child("""
            import struct
            base = torch.arange(8, dtype=torch.float32)
            lib = torch.library.Library("aten", "IMPL")
            lib.impl("fill_.Scalar", lambda self, v: self, "CPU")
            out["table"] = g.full()
            # (checked in plain Python below: torch's own reductions may
            # fill_ their results too, which now does nothing)
            base.fill_(float("nan"))                       # does nothing now
            vals = struct.unpack("<8f", raw.read(base))
            out["torch_fill_nan"] = any(v != v for v in vals)
            raw.fill(base, rawmem.pattern(torch, torch.float32, float("nan")))
            vals = struct.unpack("<8f", stio.dumps({"b": base})[-32:])
            out["raw_fill_nan"] = all(v != v for v in vals)
        """)
        self.assertIn("aten::fill_.Scalar", out["table"])
        self.assertFalse(out["torch_fill_nan"])
        self.assertTrue(out["raw_fill_nan"])

    def test_patched_methods_do_not_change_the_raw_path(self):
        out = child("""
            torch.Tensor.fill_ = lambda self, v: self
            torch.Tensor.copy_ = lambda self, src, non_blocking=False: self
            torch.Tensor.contiguous = lambda self, *a, **k: torch.zeros_like(self)
            out["identities"] = g.full()
            base = torch.zeros(6)
            raw.fill(base, rawmem.pattern(torch, torch.float32, float("nan")))
            src = torch.arange(6, dtype=torch.float32)
            dst = torch.empty(6)
            raw.write(dst, src)
            t, _ = stio.loads(stio.dumps({"b": base, "d": dst[1:5:2]}))
            out["nan"] = bool(torch.isnan(t["b"]).all())
            out["d"] = t["d"].tolist()
        """)
        self.assertIn("was replaced", out["identities"])
        self.assertTrue(out["nan"])
        self.assertEqual(out["d"], [1.0, 3.0])

    def test_resized_storage_is_not_touched(self):
        out = child("""
            base = torch.zeros(64)
            view = base[8:].view(7, 8)
            base.storage().resize_(0) if not hasattr(base, "untyped_storage") else base.untyped_storage().resize_(0)
            for what, f in (("fill", lambda: raw.fill(base, b"\\0\\0\\0\\0")),
                            ("read", lambda: raw.read(view))):
                try:
                    f()
                    out[what] = "done"
                except ValueError as e:
                    out[what] = str(e)
        """)
        self.assertIn("outside its storage", out["fill"])
        self.assertIn("outside its storage", out["read"])


class GuardInProcessTest(unittest.TestCase):
    """The guard's checks in this process, with thread-local modes only."""

    def test_modes_and_subclasses(self):
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode
        g = guard.Guard(torch)
        self.assertEqual(g.full(), "")

        class FM(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        class DM(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        def entered(mode):
            with mode:
                yield
        it = entered(FM())
        next(it)
        try:
            self.assertIn("torch function mode", g.quick())
        finally:
            it.close()
        self.assertEqual(g.quick(), "")
        it = entered(DM())
        next(it)
        try:
            self.assertIn("dispatch", g.quick())
        finally:
            it.close()
        self.assertEqual(g.quick(), "")

        # torch 1.13 also installs a dispatch mode below the mode stack
        # (_set_torch_dispatch_mode): seen through the Python dispatch key.
        if hasattr(torch._C, "_set_torch_dispatch_mode"):
            torch._C._set_torch_dispatch_mode(DM())
            try:
                self.assertIn("dispatch", g.quick())
            finally:
                torch._C._set_torch_dispatch_mode(None)
            self.assertEqual(g.quick(), "")

        class Sub(torch.Tensor):
            pass
        t = torch.zeros(2)
        self.assertEqual(g.quick({"x": t}), "")
        t.__class__ = Sub
        self.assertIn("Sub", g.quick({"x": t}))

    def test_abc_registration(self):
        import numbers
        g = guard.Guard(torch)
        self.assertEqual(g.full(), "")

        class Scalarish:
            pass

        numbers.Integral.register(Scalarish)  # process-wide, as a candidate's would be
        self.assertIn("registered with numbers.Integral", g.full())
        self.assertEqual(guard.Guard(torch).full(), "")  # a new snapshot sees it as the start

    def test_patterns(self):
        nan = float("nan")
        for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            want = torch.full((1,), nan, dtype=dt)
            got = torch.empty(1, dtype=dt)
            rawmem.RawMem(torch).fill(got, rawmem.pattern(torch, dt, nan))
            self.assertTrue(torch.isnan(got).all())
            self.assertEqual(stio.dumps({"a": got}), stio.dumps({"a": want}), dt)  # torch's own NaN bits
        for dt in (torch.int32, torch.int64, torch.uint8):
            v = torch.iinfo(dt).min
            got = torch.empty(5, dtype=dt)
            rawmem.RawMem(torch).fill(got, rawmem.pattern(torch, dt, v))
            self.assertTrue(bool((got == v).all()), dt)
        got = torch.ones(3, dtype=torch.bool)
        rawmem.RawMem(torch).fill(got, rawmem.pattern(torch, torch.bool, False))
        self.assertFalse(bool(got.any()))

    def test_strided_reads(self):
        raw = rawmem.RawMem(torch)
        x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
        for v in (x, x[:, 1:], x[..., ::2], x.transpose(1, 3), x[1, :, 2], x[:, :, :0], x[0:1, 0:1]):
            t, _ = stio.loads(stio.dumps({"v": v}))
            self.assertTrue(torch.equal(t["v"], v.contiguous()), v.shape)
        b = torch.tensor([[True, False], [False, True]])
        t, _ = stio.loads(stio.dumps({"b": b.t()}))
        self.assertTrue(torch.equal(t["b"], b.t().contiguous()))
        self.assertEqual(raw.read(x[0, 0, 0, :0]), b"")


class RngStateTest(unittest.TestCase):
    """A draw from torch's default generator is a finding of the full
    check; a draw from a generator of one's own is not."""

    def test_default_generator_draws(self):
        out = child("""
            out["start"] = g.full()
            own = torch.Generator()
            own.manual_seed(7)
            torch.rand(5, generator=own)
            torch.empty(3).normal_(generator=own)
            out["own"] = g.full()
            torch.randn(2)
            out["default"] = g.full()
            """)
        self.assertEqual(out["start"], "")
        self.assertEqual(out["own"], "")
        self.assertIn("default CPU random generator advanced", out["default"])


class _FakeGen:
    def __init__(self, state):
        self.state = state

    def get_state(self):
        return self.state


class _FakeCuda:
    def __init__(self, initialized, gens):
        self.initialized, self.default_generators = initialized, gens

    def is_initialized(self):
        return self.initialized


class _FakeTorch:
    """Just what RngState reads: generators whose state is an int."""

    def __init__(self, cuda):
        self.default_generator = _FakeGen(1)
        self.cuda = cuda

    @staticmethod
    def equal(a, b):
        return a == b


class CudaRngStateTest(unittest.TestCase):
    """A CUDA device's default generator is watched like the CPU one:
    from start when CUDA is initialised then, else from the first check
    that finds it initialised."""

    def test_initialised_at_start(self):
        gens = [_FakeGen(10), _FakeGen(20)]
        torch = _FakeTorch(_FakeCuda(True, gens))
        from cacheon_runtime import rngstate
        r = rngstate.RngState(torch)
        self.assertEqual(r.changed(), "")
        gens[1].state = 21
        self.assertIn("CUDA random generator of device 1 advanced", r.changed())

    def test_initialised_later(self):
        cuda = _FakeCuda(False, [_FakeGen(10)])
        from cacheon_runtime import rngstate
        r = rngstate.RngState(_FakeTorch(cuda))
        self.assertEqual(r.changed(), "")  # not initialised: nothing read
        cuda.initialized = True
        self.assertEqual(r.changed(), "")  # first sight: the baseline
        cuda.default_generators[0].state = 11
        self.assertIn("device 0 advanced", r.changed())

    def test_cuda_watched_without_a_cpu_generator(self):
        gens = [_FakeGen(10)]
        torch = _FakeTorch(_FakeCuda(True, gens))
        del torch.default_generator  # a torch whose CPU generator cannot be read
        from cacheon_runtime import rngstate
        r = rngstate.RngState(torch)
        gens[0].state = 11
        self.assertIn("device 0 advanced", r.changed())

    def test_no_cuda(self):
        from cacheon_runtime import rngstate
        r = rngstate.RngState(_FakeTorch(None))
        self.assertEqual(r.changed(), "")


class AbcStateTest(unittest.TestCase):
    """abcstate.AbcState (through Guard.full): what an ABC answers and what
    typing's caches hold, changed without a store into a foreign object;
    each attack in a child process (they change the process for good)."""

    ATTACKS = {
        "register": ("class S(numbers.Real):\n    pass\nS.register(torch.Tensor)", "a candidate ABC"),
        "hook": ("class S(numbers.Real):\n    @classmethod\n    def __subclasshook__(cls, c):\n"
                 "        return c is torch.Tensor", "defines __subclasshook__"),
        "subclasses": ("class S(abc.ABC):\n    @classmethod\n    def __subclasses__(cls):\n"
                       "        return [torch.Tensor]", "defines __subclasses__"),
        "below_own_abc": ("class A(abc.ABC):\n    pass\nclass B(A):\n    pass\nB.register(torch.Tensor)",
                          "a candidate ABC"),
        "direct": ("numbers.Integral.register(torch.Tensor)", "a class was registered with numbers.Integral (torch.Tensor"),
        "transient": ("def f():\n    class S(numbers.Real):\n        pass\n    S.register(torch.Tensor)\n"
                      "    return isinstance(torch.zeros(1), numbers.Real)\nassert f()\nimport gc\ngc.collect()",
                      "isinstance cache of numbers.Real held torch.Tensor"),
        "typing": ("class L:\n    def __hash__(self):\n        return hash(int)\n    def __eq__(self, o):\n"
                   "        return o is int\n    def __call__(self):\n        pass\n"
                   "for i in range(300):\n    typing.Optional[(lambda: i, i)[0]]\nq = typing.Optional[L()]",
                   "typing's subscription cache"),
    }

    def test_attacks_and_honest_use(self):
        body = "import abc, numbers, typing, collections.abc, dataclasses, enum\n"
        body += "out['start'] = g.full()\n"
        # honest use first: none of it is a finding
        body += textwrap.dedent("""
            class Strategy(abc.ABC):
                @abc.abstractmethod
                def run(self): ...
            class Impl(Strategy):
                def run(self):
                    return 1
            class Runner(typing.Protocol):
                def run(self): ...
            @dataclasses.dataclass(frozen=True)
            class Tile:
                n: int = 16
            class Mode(enum.Enum):
                FAST = 1
            ann = typing.Annotated[torch.Tensor, Tile(32)]
            lit = typing.Literal[Mode.FAST]
            opt = typing.Optional[Impl]
            ok = isinstance(Impl(), Strategy) and isinstance((1,), collections.abc.Sequence)
            ok = ok and isinstance(2.0, numbers.Real) and not isinstance(torch.zeros(1), numbers.Real)
            out['honest'] = g.full() if ok else 'isinstance'
        """)
        body += "import sys\nexec(sys.argv[1] if len(sys.argv) > 1 else '')\n"
        for name, (attack, want) in self.ATTACKS.items():
            code = CHILD % {"parent": PARENT, "body": body + "out['after'] = g.full()\n"}
            p = subprocess.run([sys.executable, "-I", "-B", "-c", code, attack], capture_output=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr.decode("utf-8", "replace"))
            got = json.loads(p.stdout.decode().strip().splitlines()[-1])
            self.assertEqual(got["start"], "", name)
            self.assertEqual(got["honest"], "", name)
            self.assertIn(want, got["after"], name)


class OpTablesTest(unittest.TestCase):
    """optables.OpTables: an operator's Python kernel table cleared,
    overwritten or replaced is seen by objects(), however the operator was
    reached; one that only grew is not."""

    def test_tables(self):
        out = child("""
            out["start"] = g.objects()
            ops = [torch.ops.aten.mul.Tensor]
            x = torch.ones(3) * 2  # the operator runs: nothing changes
            out["after_call"] = g.objects()
            saved = dict(ops[0].py_kernels)
            ops[0].py_kernels.clear()
            out["cleared"] = g.objects()
            ops[0].py_kernels.update(saved)
            out["restored"] = g.objects()
            key = next(iter(saved))
            ops[0].py_kernels[key] = lambda *a, **k: None
            out["overwritten"] = g.objects()
            ops[0].py_kernels[key] = saved[key]
            ops[0].py_kernels["lazily registered"] = len
            out["grown"] = g.objects()
            ops[0].py_kernels = dict(saved)
            out["replaced"] = g.objects()
            out["n"] = len(g.op_tables_at_start.saved)
        """)
        packets = child("""
            _ = torch.ops.aten.sub.out  # an overload materialized later
            out["materialized"] = g.objects()
            torch.ops.aten.mul._op = lambda *a, **k: a[0]
            out["op_set"] = g.objects()
        """)
        self.assertEqual(packets["materialized"], "")
        self.assertIn("an attribute of operator aten::mul was set or replaced", packets["op_set"])
        self.assertEqual(out["start"], "")
        self.assertEqual(out["after_call"], "")
        self.assertIn("py_kernels table of operator aten::mul.Tensor changed", out["cleared"])
        self.assertEqual(out["restored"], "")
        self.assertIn("py_kernels table of operator aten::mul.Tensor changed", out["overwritten"])
        # torch's own modules register kernels when first imported.
        self.assertEqual(out["grown"], "")
        # a new table object is an attribute of the overload replaced
        self.assertIn("operator aten::mul.Tensor was set or replaced", out["replaced"])
        self.assertGreater(out["n"], 100)


class PoisonCostTest(unittest.TestCase):
    """Class 6: the engine poisons every candidate output in every call.
    Informational: what one raw NaN fill costs next to the call itself on
    this CPU (no timed assertion on a shared machine)."""

    def test_poison_cost(self):
        raw = rawmem.RawMem(torch)
        pat = rawmem.pattern(torch, torch.float32, float("nan"))
        for n, h in ((1, 64), (8, 2048), (512, 4096)):
            out = torch.empty(n * h)
            x = torch.randn(n, 2 * h)
            t0 = time.perf_counter()
            for _ in range(200):
                raw.fill(out, pat)
            fill = (time.perf_counter() - t0) / 200
            t0 = time.perf_counter()
            for _ in range(200):
                torch.nn.functional.silu(x[:, :h]) * x[:, h:]
            call = (time.perf_counter() - t0) / 200
            sys.stderr.write("\n[guard] poison %dx%d fp32: %.1f us; a torch silu_and_mul of it: %.1f us\n"
                             % (n, h, fill * 1e6, call * 1e6))



class Headroom(unittest.TestCase):
    """guard.no_grad gives a candidate the same stack headroom whatever the
    depth it is called from (the verify worker and the engine differ)."""

    def test_same_room_at_any_depth(self):
        import torch
        from cacheon_runtime import guard

        def room(n):
            try:
                return room(n + 1)
            except RecursionError:
                return n

        def call():
            with guard.no_grad(torch):
                return room(0)

        def deeper(k):
            return call() if k == 0 else deeper(k - 1)

        limit = sys.getrecursionlimit()
        shallow, deep = call(), deeper(60)
        self.assertEqual(shallow, deep)
        self.assertGreater(shallow, guard.HEADROOM - 50)
        self.assertEqual(sys.getrecursionlimit(), limit)


if __name__ == "__main__":
    unittest.main()


class RetainedTest(unittest.TestCase):
    """retention.retained: a storage kept past the grace is named; one that
    torch's own thread drops a little after the case (gloo's worker after
    a collective) is not."""

    def watch(self, holder):
        from torch.multiprocessing.reductions import StorageWeakRef
        t = torch.zeros(16)
        holder.append(t)
        return [("output out", StorageWeakRef(t.storage()))]

    def test_kept_reference_is_named(self):
        from cacheon_runtime import retention
        holder = []
        w = self.watch(holder)
        self.assertEqual(retention.retained(w, grace=0.05), ["output out"])

    def test_freed_reference_is_not(self):
        from cacheon_runtime import retention
        holder = []
        w = self.watch(holder)
        holder.clear()
        self.assertEqual(retention.retained(w, grace=0.05), [])

    def test_late_release_within_grace_is_not_kept(self):
        import threading
        from cacheon_runtime import retention
        holder = []
        w = self.watch(holder)
        th = threading.Timer(0.05, holder.clear)
        th.start()
        try:
            self.assertEqual(retention.retained(w, grace=5.0), [])
        finally:
            th.join()
