"""layout: where a run case's inputs lie, as serving hands them.

Packed views (``packed``): the engine's prefill hands a sequence's inputs
as views at one row offset of packed batch buffers, other sequences'
rows before and after them (the rooms). Go draws the rooms' rows and
sends them in the inputs file as ``room_before.NAME`` and
``room_after.NAME``; the worker dumps them after every call and Go checks
them unchanged.

The residual chain (``chain``: output -> input): serving's next layer
reads, as its residual, the output this call wrote, in that memory; each
eager replay passes the input so (runcase._Case.pass_on). Go chooses the
pairs; they are checked here.
"""

from .wire import bad, field

# The most rows a packed input's rooms may hold (Go draws up to 1 024).
MAX_PACK_ROOM = 1 << 16

_ROOMS = ("room_before.", "room_after.")


def packing(packed, host_in):
    """(names, before, after) of a request's "packed" object, checked."""
    names = packed.get("names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise bad("packed.names must be a list of strings")
    rooms = []
    for key in ("before", "after"):
        v = field(packed, key, int)
        if not 0 <= v <= MAX_PACK_ROOM:
            raise bad("packed.%s %d outside [0, %d]" % (key, v, MAX_PACK_ROOM))
        rooms.append(v)
    for n in names:
        if n not in host_in:
            raise bad("packed input %r is not in the inputs file" % n)
    return frozenset(names), rooms[0], rooms[1]


def take_rooms(host_in, pack):
    """The rooms' rows Go sent (other sequences of the packed batch),
    removed from host_in, by name; bad_request without packing."""
    rooms = {k: host_in.pop(k) for k in list(host_in) if k.startswith(_ROOMS)}
    if rooms and pack is None:
        raise bad("room tensors given without packed")
    return rooms


def packed_place(ops, raw, dev, pack, room_data, name, t):
    """(view, rooms): the view of rows [before, before+n) of a fresh buffer
    of before+n+after rows holding t, the rooms around it Go's rows
    (room_data), and the room views by dump name (room_before.NAME,
    room_after.NAME)."""
    _names, before, after = pack
    size = list(ops.size(t))
    n, rest = size[0], size[1:]
    row = 1
    for d in rest:
        row *= d
    total = before + n + after
    buf = ops.empty([total] + rest, dtype=ops.dtype_of(t), device=dev)
    stride = contiguous_strides(rest)

    def rows(x, lo, hi):
        return ops.as_strided(x, [hi - lo] + rest, [row] + stride, lo * row)
    parts = []
    for key, count in (("room_before." + name, before), (None, n), ("room_after." + name, after)):
        if key is None:
            parts.append(raw.read(t))
        elif count:
            r = room_data.get(key)
            if r is None or list(ops.size(r)) != [count] + rest or ops.dtype_of(r) != ops.dtype_of(t):
                raise bad("%s must hold %d rows shaped and typed as %s's" % (key, count, name))
            parts.append(raw.read(r))
    raw.write_bytes(buf, b"".join(parts))
    rooms = {}
    if before:
        rooms["room_before." + name] = rows(buf, 0, before)
    if after:
        rooms["room_after." + name] = rows(buf, before + n, total)
    return rows(buf, before, before + n), rooms


def check_chain(ops, chain, specs, host_in):
    """bad_request unless every chain pair maps an output to an input of
    its shape and dtype, the output contiguous."""
    by_name = {s.name: s for s in specs}
    for o, i in chain.items():
        if o not in by_name or not isinstance(i, str) or i not in host_in:
            raise bad("chain %r -> %r must map an output to an input" % (o, i))
        s, t = by_name[o], host_in[i]
        if (list(s.shape) != list(ops.size(t)) or s.dtype != ops.dtype_of(t)
                or list(s.stride) != contiguous_strides(s.shape)):
            raise bad("chain %r -> %r: the output must be contiguous and of the input's shape and dtype" % (o, i))


def contiguous_strides(shape):
    """Row-major strides (in elements) of shape."""
    out, acc = [], 1
    for d in reversed(list(shape)):
        out.insert(0, acc)
        acc *= max(d, 1)
    return out
