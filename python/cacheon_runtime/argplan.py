"""argplan: a run request's "args", as the entry is called with them.

plan lists, in order, what each positional argument is: an input or an
output by name, a scalar's Python value, the prepared state, or the
process group the request names. scalar turns Go's JSON value into the
scalar's Python type. Anything malformed is a bad_request. Scalars hands
every scalar value to candidate code as one object per process.
"""

from .wire import bad, field


class Scalars:
    """One object per scalar value and slot for the life of the process, in
    the verify worker and in the engine alike (rt52). The engine hands its
    model's own float (model.eps, the softmax scale) to every call of
    every slot, and a worker decoded a new one for every case, so that
    `eps is last_eps` with another shape, or the same object in two slots,
    happened only in serving. Through one table an object's identity says
    no more than its value (a float by its bits: -0.0 apart from 0.0) and
    its slot, and its address stays fixed (the table keeps it alive)
    wherever it is handed; two slots never share one."""

    def __init__(self):
        self._objs = {}

    def get(self, slot, v):
        t = type(v)
        if t is float:
            key = (slot, t, v.hex())
        elif t is int or t is str:
            key = (slot, t, v)
        else:
            return v  # bool and None are singletons already
        o = self._objs.get(key)
        if o is None:
            # The table's own copy, never the caller's object (the
            # engine's model.eps; the worker's request value).
            o = self._objs[key] = _copy(v)
        return o


def _copy(v):
    """A new object equal to the scalar v (a float bit for bit)."""
    if type(v) is float:
        return float.fromhex(v.hex())
    if type(v) is int:
        return int(str(v)) if not -5 <= v <= 256 else v
    return "".join(list(v))


def plan(worker, args, host_in, out_names, has_prepare, process_group="world", slot=""):
    out = []
    for a in args:
        if not isinstance(a, dict):
            raise bad("arg must be an object")
        name = field(a, "name", str)
        kind = field(a, "kind", str)
        if kind == "input":
            if name not in host_in:
                raise bad("input %r is not in the inputs file" % name)
            out.append(("input", name))
        elif kind == "output":
            if name not in out_names:
                raise bad("output arg %r has no output spec" % name)
            out.append(("output", name))
        elif kind == "scalar":
            out.append(("scalar", worker.scalars.get(slot, scalar(a, name))))
        elif kind == "prepared":
            if not has_prepare:
                raise bad("arg %r is prepared state but no prepare is named" % name)
            out.append(("prepared", None))
        elif kind == "group":
            if worker.group is None:
                raise bad("arg %r needs a process group; send group first" % name)
            out.append(("group", worker.subgroup if process_group == "sub" else worker.group))
        else:
            raise bad("arg %r: unknown kind %r" % (name, kind))
    return out


def scalar(a, name):
    """The Python value of a scalar arg. Go may send every scalar as a JSON
    number (int 16 as 16 or 16.0, bool as 0/1), so integral numbers are
    accepted for int and 0/1 for bool."""
    typ = field(a, "type", str)
    v = a.get("value")
    number = isinstance(v, (int, float)) and not isinstance(v, bool)
    if typ == "float":
        if isinstance(v, str) and v in ("inf", "-inf", "nan"):
            return float(v)
        if not number:
            raise bad("scalar %r: float value expected" % name)
        return float(v)
    if typ == "int":
        if number and float(v).is_integer():
            return int(v)
        raise bad("scalar %r: integer value expected, got %r" % (name, v))
    if typ == "bool":
        if isinstance(v, bool):
            return v
        if number and v in (0, 1):
            return bool(v)
        raise bad("scalar %r: bool value (true/false or 0/1) expected, got %r" % (name, v))
    if typ == "str":
        if not isinstance(v, str):
            raise bad("scalar %r: string value expected" % name)
        return v
    if typ == "none":
        return None
    raise bad("scalar %r: unknown type %r" % (name, typ))
