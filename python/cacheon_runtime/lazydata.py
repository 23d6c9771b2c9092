"""lazydata: the class attributes a library makes on its first use.

The runtime guard (guard._Objects) refuses any entry added to a watched
class after its snapshot. Triton's classes are watched once the runtime
has imported Triton before the snapshot (host.triton_key), and Triton's
driver sets ``CudaUtils.instance`` at a kernel's first launch: a class
of Triton's may gain data on first use, never behaviour. Data is None, a
plain scalar or string, or an instance of the class itself (a singleton);
anything else (a function, a descriptor, a class, an object of another
class, whose methods would run in Triton's place) is still a change.
"""

_ROOTS = ("triton",)
_PLAIN = (type(None), bool, int, float, str)


def first_use_data(c, v):
    """True when v, newly set on the class c, is data c's library makes on
    first use (see above)."""
    try:
        mod = type.__dict__["__module__"].__get__(c)
    except Exception:  # noqa: BLE001 - not a class that says its module
        return False
    if not (isinstance(mod, str) and mod.split(".")[0] in _ROOTS):
        return False
    return type(v) in _PLAIN or type(v) is c
