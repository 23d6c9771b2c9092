"""The attack modules of test_guard: candidate sources, one module each,
loaded through the runtime's own loader so that the runtime guard (not the
static scan) is what they meet.
"""

# Candidate sources, one module each, in one bundle (kern/<name>.py).
ATTACKS = {
    # 5. A mode entered at import by a module-level generator advanced once:
    # it makes the worker's NaN fill a no-op, so an output the kernel never
    # wrote would keep whatever the kernel's previous call left there.
    "mode_at_import": """
        import torch
        from torch.overrides import TorchFunctionMode

        class SkipPoison(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if getattr(func, "__name__", "") == "fill_":
                    return args[0]
                return func(*args, **(kwargs or {}))

        def _enter():
            with SkipPoison():
                yield
        _g = _enter()
        next(_g)

        def silu_and_mul(x, out):
            pass
    """,
    # A dispatch mode entered at import that fakes the worker's dump path:
    # any clone / _to_copy / copy_ / fill_ of a tensor shaped like the
    # output returns the right answer computed from the last input seen.
    "dispatch_mode_at_import": """
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        class FakeDump(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        def _enter():
            with FakeDump():
                yield
        _g = _enter()
        next(_g)

        def silu_and_mul(x, out):
            pass
    """,
    # A dispatch mode entered inside the call, left active: it fakes what
    # the worker's dump would read through torch (clone/_to_copy/copy_/
    # contiguous of the output: the right values) while the kernel wrote
    # nothing.
    "dispatch_mode_fakes_dump": """
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        _state = {}
        _gens = []

        class FakeDump(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = str(func)
                if "fill_" in name:
                    return args[0]
                r = func(*args, **(kwargs or {}))
                if any(k in name for k in ("clone", "_to_copy", "copy_", "contiguous")) and \\
                        tuple(getattr(r, "shape", ())) == _state.get("shape"):
                    return _state["right"]
                return r

        def _enter():
            with FakeDump():
                yield

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            _state["shape"] = tuple(out.shape)
            _state["right"] = torch.nn.functional.silu(x[:, :d]) * x[:, d:]
            if not _gens:
                g = _enter()
                next(g)
                _gens.append(g)
    """,
    # A function mode entered during the first call and left active.
    "mode_in_call": """
        import torch
        from torch.overrides import TorchFunctionMode

        class Watch(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        _gens = []

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
            if not _gens:
                def g():
                    with Watch():
                        yield
                it = g()
                next(it)
                _gens.append(it)
    """,
    # A Tensor subclass with __torch_function__ swapped onto the output the
    # worker handed over (t.__class__ = ...): refused by the audit hook;
    # the kernel catches the refusal and computes honestly, and is still
    # reported.
    "subclass_swap": """
        import torch

        class Evil(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return super().__torch_function__(func, types, args, kwargs)

        def silu_and_mul(x, out):
            try:
                out.__class__ = Evil
            except PermissionError:
                pass
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    # __torch_function__ patched onto torch.Tensor itself at import.
    "tensor_torch_function_patched": """
        import torch

        def _tf(cls, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
        torch.Tensor.__torch_function__ = classmethod(_tf)

        def silu_and_mul(x, out):
            pass
    """,
    # torch.Tensor.fill_ replaced at import (the worker's poison).
    "fill_replaced": """
        import torch
        torch.Tensor.fill_ = lambda self, value: self

        def silu_and_mul(x, out):
            pass
    """,
    # torch.cuda.synchronize replaced at import (the worker's wait).
    "synchronize_replaced": """
        import torch
        torch.cuda.synchronize = lambda device=None: None

        def silu_and_mul(x, out):
            pass
    """,
    # A kernel registered over aten::fill_.Scalar for CPU (torch.library):
    # the worker's fill_ would do nothing.
    "library_fill": """
        import torch
        _lib = torch.library.Library("aten", "IMPL")
        _lib.impl("fill_.Scalar", lambda self, value: self, "CPU")

        def silu_and_mul(x, out):
            pass
    """,
    # Honest code the audit hook must let through: dataclasses and
    # namedtuples at import and in the call, reading its own file.
    "honest_stdlib": """
        import collections
        import dataclasses
        import torch

        P = collections.namedtuple("P", "a b")

        @dataclasses.dataclass
        class Cfg:
            d: int = 0

        with open(__file__) as _f:
            _SRC = _f.read()

        def silu_and_mul(x, out):
            c = Cfg(x.shape[-1] // 2)
            q = collections.namedtuple("Q", "d")(c.d)
            out.copy_(torch.nn.functional.silu(x[:, :q.d]) * x[:, q.d:])
    """,
    # Each entry tries one thing the audit hook refuses, catches the
    # refusal and then computes honestly: the refusal is still reported.
    "hook_attempts": """
        import ctypes
        import os
        import pickle
        import socket
        import subprocess
        import sys
        import torch

        def _honest(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])

        def _attempt(f):
            try:
                f()
            except PermissionError:
                pass

        def read_secret(x, out):
            _attempt(lambda: open("/etc/passwd").read())
            _honest(x, out)

        def write_job(x, out):
            _attempt(lambda: open(os.path.join(os.getcwd(), "forged.safetensors"), "wb").write(b"x"))
            _honest(x, out)

        def spawn(x, out):
            _attempt(lambda: subprocess.run(["true"]))
            _honest(x, out)

        def connect(x, out):
            _attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            _honest(x, out)

        def execs(x, out):
            _attempt(lambda: exec("y = 1"))
            _honest(x, out)

        def dlopen(x, out):
            _attempt(lambda: ctypes.CDLL("libc.so.6"))
            _honest(x, out)

        def typing_eval(x, out):
            import typing
            ref = typing.get_args(typing.Optional["__import__('sys').modules"])[0]
            _attempt(lambda: ref._evaluate({}, {}, frozenset()) if hasattr(ref, "_evaluate") else exec("y = 1"))
            _honest(x, out)

        def unpickle(x, out):
            _attempt(lambda: pickle.loads(pickle.dumps(torch.nn.Module)))
            _honest(x, out)

        def renames_type(x, out):
            _attempt(lambda: setattr(torch.Tensor, "__qualname__", "Tensor2"))
            _honest(x, out)

        def frames(x, out):
            _attempt(lambda: sys._getframe(1).f_locals)
            _honest(x, out)

        # rt50a's a2: an entry compiled from the bundle's text by the
        # standard library's code generator has no bundle file; called by
        # the worker directly, no bundle frame is on the stack.
        import dataclasses
        if hasattr(dataclasses, "_create_fn"):  # Python < 3.13
            generated_read = dataclasses._create_fn(
                "generated_read", ["x", "out"],
                ["try:", "    open('/etc/passwd').read()", "except PermissionError:", "    pass",
                 "d = x.shape[-1] // 2", "out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])"],
                globals={"torch": torch})
        else:
            generated_read = read_secret

        def imports_native(x, out):
            def imp():
                import evil_native  # a file named like an extension module in the bundle
            try:
                imp()
            except (PermissionError, ImportError):
                pass
            _honest(x, out)
    """,
    # Frees the validator's output memory: the raw path must not touch it.
    "frees_output": """
        def silu_and_mul(x, out):
            s = out.untyped_storage() if hasattr(out, "untyped_storage") else out.storage()
            s.resize_(0)
    """,
    # Class 6: what a kernel can observe of its conditions, said in an
    # exception message so that verify and serving can be compared.
    "conditions": """
        import torch

        def silu_and_mul(x, out):
            seen = "grad=%s inference=%s threads=%d poisoned=%s" % (
                torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.get_num_threads(),
                bool(torch.isnan(out).all()))
            raise RuntimeError("CONDITIONS " + seen)
    """,
    # Red-team pass (session 9): stores and state no syntax shows.
    "dataclass_on_linear": """
        import dataclasses
        import torch
        dataclasses.dataclass(torch.nn.Linear)

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    # Session 15 (red team of session 14, typing_decorator_store_fn):
    # typing.final and typing.no_type_check store into torch's own functions,
    # one by a call, one through a decorator stack whose lower decorator
    # hands back torch.nn.functional.mish; the guard compares the
    # functions' __dict__ entries.
    "typing_final_on_torch": """
        import typing
        import torch

        F = torch.nn.functional
        typing.final(F.silu)

        def _as_mish(fn):
            return F.mish

        @typing.no_type_check
        @_as_mish
        def _marked():
            pass

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(F.silu(x[:, :d]) * x[:, d:])
    """,
    "code_swapped": """
        import functools
        import torch

        def _fake(t, inplace=False):
            return t * 0.5

        functools.wraps(_fake, assigned=("__code__",), updated=())(torch.nn.functional.hardswish)

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    "patches_in_call": """
        import dataclasses
        import torch

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
            dataclasses.dataclass(torch.nn.Bilinear)
    """,
    "flush_denormal_at_import": """
        import torch

        torch.set_flush_denormal(True)

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    "mkldnn_off_at_import": """
        import torch

        torch.backends.mkldnn.enabled = False

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    # rt50a's a6: an entry of sys.modules named like a module of the
    # bundle, stored before the entry imports it, binds another module.
    "modules_rebound_in_call": """
        import sys
        import operator
        import torch

        def silu_and_mul(x, out):
            sys.modules["kern.helper_rebound"] = operator
            import kern.helper_rebound as h
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:] * (1.0 if h.add else 0.0))
    """,
    "grad_left_on": """
        import torch

        def _hold():
            with torch.enable_grad():
                yield

        _G = _hold()
        next(_G)

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    # The bundle has a top-level json.py; "import json" binds the worker's.
    "shadowed_import": """
        import json
        import torch

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    # Class 3 without a store (red team, session 14): a candidate subclass
    # of a standard-library ABC registers torch.Tensor, so every tensor is
    # a numbers.Real for the whole process (abcstate).
    "abc_subclass_register": """
        import numbers
        import torch

        class Scalarish(numbers.Real):
            pass

        Scalarish.register(torch.Tensor)

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    # The same through a __subclasshook__ of the candidate's subclass.
    "abc_subclasshook": """
        import numbers
        import torch

        class Scalarish(numbers.Real):
            @classmethod
            def __subclasshook__(cls, c):
                return c is torch.Tensor

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    # In the call: the subclass is made, registers, fills numbers.Real's
    # cache and is dropped; the cached answer stays.
    "abc_transient_cache": """
        import gc
        import numbers
        import torch

        def silu_and_mul(x, out):
            class Scalarish(numbers.Real):
                pass
            Scalarish.register(torch.Tensor)
            isinstance(x, numbers.Real)
            del Scalarish
            gc.collect()
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    # typing's lru caches flooded, then typing.Optional[int] made to
    # return an object whose __eq__/__hash__ lie.
    "typing_cache_poison": """
        import typing
        import torch

        class Liar:
            def __hash__(self):
                return hash(int)

            def __eq__(self, other):
                return other is int

            def __call__(self):
                return None

        class _Fresh:
            def __init__(self, i):
                self.i = i

            def __call__(self):
                return None

        for _i in range(512):
            typing.Optional[_Fresh(_i)]
        _p = typing.Optional[Liar()]

        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    # Honest ABC and typing use the guard must let through: a bundle ABC
    # with abstract methods and subclasses, a Protocol, isinstance against
    # collections.abc and numbers, annotations, a frozen dataclass (its
    # generated __eq__/__hash__) and an Enum in typing subscriptions, a
    # class with its own __eq__/__hash__ used as a dict key.
    "honest_abc": """
        import abc
        import collections.abc
        import dataclasses
        import enum
        import numbers
        import typing
        import torch

        class Strategy(abc.ABC):
            @abc.abstractmethod
            def run(self, x: torch.Tensor) -> torch.Tensor:
                ...

        class Silu(Strategy):
            def run(self, x: typing.Optional[torch.Tensor]) -> torch.Tensor:
                d = x.shape[-1] // 2
                return torch.nn.functional.silu(x[:, :d]) * x[:, d:]

        class Runner(typing.Protocol):
            def run(self, x: torch.Tensor) -> torch.Tensor:
                ...

        @dataclasses.dataclass(frozen=True)
        class Tile:
            n: int = 16

        class Mode(enum.Enum):
            FAST = 1

        class Key:
            def __init__(self, v):
                self.v = v

            def __eq__(self, other):
                return isinstance(other, Key) and other.v == self.v

            def __hash__(self):
                return hash(self.v)

        Shaped = typing.Annotated[torch.Tensor, Tile(32)]
        M = typing.Literal[Mode.FAST]
        _PLANS = {Key(1): Silu()}

        def silu_and_mul(x: Shaped, out: torch.Tensor) -> None:
            assert isinstance(tuple(x.shape), collections.abc.Sequence)
            assert isinstance(1e-5, numbers.Real) and isinstance(_PLANS[Key(1)], Strategy)
            assert typing.get_args(typing.Optional[int])[0] is int
            out.copy_(_PLANS[Key(1)].run(x))
    """,
}
