"""copyarena: the memory an auditing engine copies a call's inputs and the
engine state into, kept out of the candidate's sight.

An auditing engine (the referee's A) copies every counted call's inputs
and the engine state before the call (auditcalls); C, the timed engine
with the same candidate, copies nothing. Copies allocated per call sit in
the allocator's pools beside the call's own tensors, so a kernel saw A
in its addresses: the memory right after ``x`` was free in 5 to 49 of
192 timed calls in C and in none in A (rt47d, session 47).

An arena holds one flat buffer per dtype and device, made at the first
copy and grown only when a call needs more, of at least MIN_BYTES: on
the CPU an allocation that large is mapped on its own (glibc's
threshold for that rises to 32 MiB at most), and on CUDA it comes from
the caching allocator's large pool, apart from the small blocks of the
calls' activations. A call's copies are views carved from it, in order,
and are overwritten by the next call's, which is when an engine is done
with them (a dump is written, and the state compared, right after the
call).
"""

MIN_BYTES = 40 << 20

# Each copy starts at a multiple of ALIGN elements (a vector load's
# alignment for every dtype).
ALIGN = 64


def _numel(size):
    n = 1
    for d in size:
        n *= d
    return n


def _strides(size):
    """The contiguous strides of size."""
    out, s = [], 1
    for d in reversed(size):
        out.append(s)
        s *= max(d, 1)
    return list(reversed(out))


def _room(n):
    return -(-n // ALIGN) * ALIGN


class Arena:
    """Flat buffers per (dtype, device), grown on demand; ops is the
    worker's captured tensor methods (identity.Ops)."""

    def __init__(self, ops):
        self.ops = ops
        self.bufs = {}

    def copies(self, tensors):
        """Contiguous copies of the (name, tensor) pairs, in order, as a
        list of (name, copy): views of the arena's buffers, valid until the
        next call of copies."""
        ops = self.ops
        items = [(name, t, ops.dtype_of(t), ops.device_of(t), list(ops.size(t))) for name, t in tensors]
        need = {}
        for _name, _t, dt, dev, size in items:
            need[(dt, dev)] = need.get((dt, dev), 0) + _room(_numel(size))
        for key, n in need.items():
            buf = self.bufs.get(key)
            if buf is None or ops.size(buf)[0] < n:
                elems = max(n + n // 4, -(-MIN_BYTES // self._itemsize(key[0])))
                self.bufs[key] = None  # the old buffer goes before the new one is made
                self.bufs[key] = ops.empty([elems], dtype=key[0], device=key[1])
        at = dict.fromkeys(need, 0)
        out = []
        for name, t, dt, dev, size in items:
            key = (dt, dev)
            c = ops.as_strided(self.bufs[key], size, _strides(size), at[key])
            ops.copy(c, t)
            at[key] += _room(_numel(size))
            out.append((name, c))
        return out

    def _itemsize(self, dt):
        """Bytes per element of dtype dt (no tensor made: torch 1.13 has no
        dtype.itemsize)."""
        torch = self.ops.torch
        if dt == torch.bool:
            return 1
        info = torch.finfo(dt) if dt.is_floating_point else torch.iinfo(dt)
        return info.bits // 8
