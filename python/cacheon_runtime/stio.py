"""stio: safetensors read/write with torch alone (no numpy, no safetensors).

The layout matches the Go package internal/safetensors exactly, so that the
strict Go reader accepts every file written here and equal tensors give
byte-identical files on both sides:

- 8-byte little-endian header length N, then N bytes of compact JSON;
- top-level keys sorted bytewise (tensor names and, if present,
  "__metadata__"); each entry is {"data_offsets":[b,e],"dtype":D,"shape":[..]};
- strings keep UTF-8 raw and escape only '"', '\\' and control characters;
- the header is padded with spaces to a multiple of 8 bytes;
- the tensors' bytes follow contiguously, without holes, ordered by element
  size (largest first) and then by name bytewise, so every tensor starts at
  an offset aligned to its element size.

The reader is defensive although Go wrote the file: bounds, exact spans, no
overlap or hole, no trailing bytes, no duplicate keys, no unknown fields.
Every tensor ``loads`` returns owns fresh, suitably aligned CPU memory;
``load`` returns views of a private mapping of the file, aligned as the
layout aligns each tensor (``torch.frombuffer``).

Works with torch 1.13 and torch 2.x. Tensor bytes move with ctypes.memmove
and ctypes arrays over ``data_ptr()``, so no dtype reinterpretation API
(``Tensor.view(dtype)``) is needed.

No torch operator touches the data: the writer reads every tensor's
logical view as raw bytes from its memory (``rawmem.RawMem.read``: CPU
memory through ctypes, CUDA memory through the driver's device-to-host
copy), so a torch function or dispatch mode, a Tensor subclass or a kernel
registered over ``clone``/``copy_``/``_to_copy`` cannot change what a dump
says; ``loads`` fills fresh ``torch.empty`` tensors with memmove and
``load`` maps the file.
"""

import ctypes
import io
import json
import mmap
import os
import sys

import torch

from . import rawmem

# Safetensors dtype name <-> torch dtype, element size.
_DTYPES = {
    "BOOL": (torch.bool, 1),
    "U8": (torch.uint8, 1),
    "I32": (torch.int32, 4),
    "I64": (torch.int64, 8),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "F32": (torch.float32, 4),
    "F64": (torch.float64, 8),
}
_NAMES = {dt: (name, size) for name, (dt, size) in _DTYPES.items()}

METADATA_KEY = "__metadata__"
MAX_HEADER_BYTES = 100 << 20
MAX_RANK = 64
MAX_BYTES = 1 << 40

# Bound early, so that a candidate that later patches torch.Tensor methods
# cannot change how the worker reads and writes tensor memory.
_empty = torch.empty
_frombuffer = torch.frombuffer
_data_ptr = torch.Tensor.data_ptr
_RAW = rawmem.RawMem(torch)
_BOOL01 = bytes([0] + [1] * 255)  # bool bytes normalized to 0/1

if sys.byteorder != "little":  # pragma: no cover - every supported host is LE
    raise ImportError("cacheon_runtime.stio needs a little-endian host")


class FormatError(ValueError):
    """A safetensors file violates the format or the reader's limits."""


def dtype_name(dt):
    """Return the safetensors name ("BF16", ...) of a torch dtype."""
    try:
        return _NAMES[dt][0]
    except KeyError:
        raise ValueError("unsupported dtype %s" % (dt,)) from None


def torch_dtype(name):
    """Return the torch dtype for a safetensors dtype name."""
    try:
        return _DTYPES[name][0]
    except KeyError:
        raise ValueError("unsupported safetensors dtype %r" % (name,)) from None


# ---------------------------------------------------------------------------
# Reading


def _reject_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise FormatError("duplicate key %r in header" % (k,))
        d[k] = v
    return d


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def parse_header(raw):
    """Parse header bytes into (entries, metadata).

    entries is a list of (name, safetensors_dtype, shape, begin, end) in
    header order; metadata is a dict or None.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError("header is not valid UTF-8: %s" % e) from None
    stripped = text.rstrip(" ")
    if not stripped.startswith("{") or not stripped.endswith("}"):
        raise FormatError("header is not a JSON object padded with spaces")

    def bad_constant(c):
        raise FormatError("header contains %s" % c)

    try:
        obj = json.loads(stripped, object_pairs_hook=_reject_duplicates,
                         parse_constant=bad_constant)
    except FormatError:
        raise
    except ValueError as e:
        raise FormatError("header is not valid JSON: %s" % e) from None
    except RecursionError:
        raise FormatError("header nests too deeply") from None
    if not isinstance(obj, dict):
        raise FormatError("header is not a JSON object")
    metadata = None
    entries = []
    for name, ent in obj.items():
        if name == METADATA_KEY:
            if not isinstance(ent, dict) or not all(isinstance(v, str) for v in ent.values()):
                raise FormatError("__metadata__ must map strings to strings")
            metadata = ent
            continue
        if name == "":
            raise FormatError("empty tensor name")
        if not isinstance(ent, dict) or set(ent) != {"dtype", "shape", "data_offsets"}:
            raise FormatError("tensor %r: entry must have exactly dtype, shape, data_offsets" % (name,))
        dt = ent["dtype"]
        if not isinstance(dt, str) or dt not in _DTYPES:
            raise FormatError("tensor %r: unsupported dtype %r" % (name, dt))
        shape = ent["shape"]
        if not isinstance(shape, list) or len(shape) > MAX_RANK or not all(
                _is_int(d) and 0 <= d <= MAX_BYTES for d in shape):
            raise FormatError("tensor %r: bad shape %r" % (name, shape))
        offs = ent["data_offsets"]
        if not isinstance(offs, list) or len(offs) != 2 or not all(
                _is_int(o) and 0 <= o <= MAX_BYTES for o in offs):
            raise FormatError("tensor %r: bad data_offsets %r" % (name, offs))
        entries.append((name, dt, shape, offs[0], offs[1]))
    return entries, metadata


def _check_layout(entries, buf_len):
    for name, dt, shape, begin, end in entries:
        numel = 1
        for d in shape:
            numel *= d
        want = numel * _DTYPES[dt][1]
        if want > MAX_BYTES:
            raise FormatError("tensor %r: %d bytes exceeds the limit" % (name, want))
        if begin > end:
            raise FormatError("tensor %r: begin %d after end %d" % (name, begin, end))
        if end > buf_len:
            raise FormatError("tensor %r: end %d beyond the %d-byte data buffer" % (name, end, buf_len))
        if end - begin != want:
            raise FormatError("tensor %r: span of %d bytes does not match %s%r (%d bytes)"
                              % (name, end - begin, dt, shape, want))
    pos = 0
    for name, _dt, _shape, begin, end in sorted(entries, key=lambda e: (e[3], e[4], e[0])):
        if begin < pos:
            raise FormatError("tensor %r: [%d,%d] overlaps the previous tensor" % (name, begin, end))
        if begin > pos:
            raise FormatError("tensor %r: [%d,%d] leaves a hole at offset %d" % (name, begin, end, pos))
        pos = end
    if pos != buf_len:
        raise FormatError("%d trailing bytes after the last tensor" % (buf_len - pos))


def loads(data):
    """Decode a complete safetensors file held in a bytes-like object.

    Returns (tensors, metadata): tensors is a dict name -> CPU tensor, each
    owning fresh memory (a copy of the file's bytes).
    """
    mv = memoryview(data).cast("B")
    total = len(mv)
    if total < 8:
        raise FormatError("file of %d bytes is shorter than the 8-byte length prefix" % total)
    n = int.from_bytes(mv[:8], "little")
    if n < 2 or n > MAX_HEADER_BYTES:
        raise FormatError("header length %d out of range" % n)
    if n > total - 8:
        raise FormatError("header length %d exceeds the %d bytes after the prefix" % (n, total - 8))
    entries, metadata = parse_header(bytes(mv[8:8 + n]))
    data_len = total - 8 - n
    _check_layout(entries, data_len)
    if data_len and not mv.readonly:
        base = ctypes.addressof(ctypes.c_char.from_buffer(mv, 8 + n))
        keep = None
    elif data_len:
        keep = ctypes.create_string_buffer(bytes(mv[8 + n:]), data_len)
        base = ctypes.addressof(keep)
    else:
        base, keep = 0, None
    tensors = {}
    for name, dt, shape, begin, end in entries:
        tdt = _DTYPES[dt][0]
        t = _empty(shape, dtype=tdt)
        if end > begin:
            if tdt is torch.bool:
                # Normalize bytes to 0/1: torch assumes bool storage holds only those.
                b = ctypes.string_at(base + begin, end - begin).translate(_BOOL01)
                ctypes.memmove(_data_ptr(t), b, end - begin)
            else:
                ctypes.memmove(_data_ptr(t), base + begin, end - begin)
        tensors[name] = t
    del keep
    return tensors, metadata


def load(path):
    """Read the safetensors file at path; see loads. The header is read
    and checked first; the tensors are then views of a private mapping of
    the file (copy on write: what a reader writes stays its own), so their
    bytes are not copied here at all. The worker's input files live in
    memory (/dev/shm), where a copy into fresh memory cost more than the
    use that follows (the decode rows read gigabytes). Bool tensors are
    copied, normalized to 0/1. The file must not shrink while a tensor of
    it lives (Go writes each file once and never changes it)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_BYTES:
            raise FormatError("file of %d bytes is too large" % size)
        if size < 8:
            raise FormatError("file of %d bytes is shorter than the 8-byte length prefix" % size)
        n = int.from_bytes(_read_exact(f, 8), "little")
        if n < 2 or n > MAX_HEADER_BYTES:
            raise FormatError("header length %d out of range" % n)
        if n > size - 8:
            raise FormatError("header length %d exceeds the %d bytes after the prefix" % (n, size - 8))
        entries, metadata = parse_header(_read_exact(f, n))
        _check_layout(entries, size - 8 - n)
        base = 8 + n
        mm = None
        if size > base:
            # (no MAP_POPULATE: on a writable private mapping it copies
            # every page at once)
            mm = mmap.mmap(f.fileno(), size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    tensors = {}
    for name, dt, shape, begin, end in entries:
        tdt, es = _DTYPES[dt]
        if end == begin:
            t = _empty(shape, dtype=tdt)
        elif tdt is torch.bool:
            # Normalize bytes to 0/1: torch assumes bool storage holds only those.
            t = _empty(shape, dtype=tdt)
            b = mm[base + begin:base + end].translate(_BOOL01)
            ctypes.memmove(_data_ptr(t), b, end - begin)
        else:
            t = _frombuffer(mm, dtype=tdt, count=(end - begin) // es, offset=base + begin).view(shape)
        tensors[name] = t
    return tensors, metadata


def _read_exact(f, n):
    b = f.read(n)
    if len(b) != n:
        raise FormatError("file changed size while being read")
    return b


# ---------------------------------------------------------------------------
# Writing


def _json_string(s):
    """Canonical JSON string: UTF-8 raw, escape only '"', '\\', controls."""
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif c < 0x20:
            out.append("\\u%04x" % c)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class RawTensor:
    """A tensor already read as bytes: its dtype, shape and row-major data
    (what a dump holds for a value taken before a call)."""
    __slots__ = ("dtype", "shape", "data")

    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, [int(d) for d in shape], data


def raw(t):
    """A RawTensor snapshot of tensor t (its logical view, read raw)."""
    dt, shape = _RAW.dtype_shape(t)
    return RawTensor(dt, shape, _RAW.read(t))


class LaterTensor:
    """A tensor whose bytes a save reads while it writes the file (no copy
    of a contiguous view is held in between): for a dump taken right away,
    with no candidate code running until the save returns. Made by later(),
    which checks now that the view lies inside its storage."""
    __slots__ = ("dtype", "shape", "tensor")

    def __init__(self, dtype, shape, tensor):
        self.dtype, self.shape, self.tensor = dtype, shape, tensor


def later(t):
    """A LaterTensor for t; raises (ValueError, rawmem.RawError) now where
    its memory cannot be read (resized or freed storage)."""
    _RAW.meta(t)
    dt, shape = _RAW.dtype_shape(t)
    return LaterTensor(dt, shape, t)


def _host_bytes(t):
    """(dtype, shape, row-major bytes or a LaterTensor) of t, read raw from
    its memory."""
    if isinstance(t, RawTensor):
        return t.dtype, t.shape, t.data
    if isinstance(t, LaterTensor):
        return t.dtype, t.shape, t
    dt, shape = _RAW.dtype_shape(t)
    return dt, shape, _RAW.read(t)


def _size(data, dt, shape):
    if isinstance(data, LaterTensor):
        return _DTYPES[dt][1] * _count(shape)
    return len(data)


def _write(f, data, nbytes):
    if isinstance(data, LaterTensor):
        n = _RAW.write_to(data.tensor, f)
        if n != nbytes:
            raise ValueError("wrote %d bytes of a %d-byte tensor" % (n, nbytes))
    elif nbytes:
        f.write(data)


def header_bytes(specs, metadata=None):
    """Build the padded header for specs: list of (name, dtype_name, shape,
    nbytes) in data order. Header keys are sorted bytewise. Returns bytes."""
    keys = [(s[0].encode("utf-8"), s) for s in specs]
    if metadata:
        keys.append((METADATA_KEY.encode("utf-8"), None))
    keys.sort(key=lambda k: k[0])
    parts = []
    pos = 0
    offsets = {}
    for name, _dt, _shape, nbytes in specs:
        offsets[name] = (pos, pos + nbytes)
        pos += nbytes
    for _kb, spec in keys:
        if spec is None:
            items = sorted(metadata.items(), key=lambda kv: kv[0].encode("utf-8"))
            body = ",".join(_json_string(k) + ":" + _json_string(v) for k, v in items)
            parts.append(_json_string(METADATA_KEY) + ":{" + body + "}")
            continue
        name, dt, shape, _n = spec
        b, e = offsets[name]
        parts.append('%s:{"data_offsets":[%d,%d],"dtype":"%s","shape":[%s]}'
                     % (_json_string(name), b, e, dt, ",".join(str(int(d)) for d in shape)))
    hdr = ("{" + ",".join(parts) + "}").encode("utf-8")
    pad = (-len(hdr)) % 8
    return hdr + b" " * pad


def _prepare(tensors, metadata):
    """Validate and order tensors for writing: (header, items)."""
    items = []
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "" or name == METADATA_KEY:
            raise ValueError("bad tensor name %r" % (name,))
        key = name.encode("utf-8")  # raises on lone surrogates
        if not isinstance(t, (torch.Tensor, RawTensor, LaterTensor)):
            raise TypeError("tensor %r is not a torch.Tensor" % (name,))
        tdt, shape, data = _host_bytes(t)
        dt = dtype_name(tdt)
        n = _size(data, dt, shape)
        if n != _DTYPES[dt][1] * _count(shape):
            raise ValueError("tensor %r: %d bytes for %s%r" % (name, n, dt, shape))
        items.append((key, name, dt, shape, data, n))
    # Data order: element size, largest first, then name bytewise (as the Go
    # encoder), so that every tensor starts at an offset aligned to its
    # element size after the 8-byte-padded header.
    items.sort(key=lambda it: (-_DTYPES[it[2]][1], it[0]))
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str) or k == "":
                raise ValueError("metadata must map non-empty strings to strings")
    hdr = header_bytes([(it[1], it[2], it[3], it[5]) for it in items], metadata)
    return hdr, [(it[4], it[5]) for it in items]


def save(path, tensors, metadata=None):
    """Write tensors (dict name -> tensor, any device/layout, RawTensor or
    LaterTensor)
    to path.

    Each tensor is written as a contiguous copy of its logical view, read
    raw from its memory, in the data order described in the module
    docstring. Returns the number of bytes written.
    """
    hdr, items = _prepare(tensors, metadata)
    with open(path, "wb") as f:
        f.write(len(hdr).to_bytes(8, "little"))
        f.write(hdr)
        for data, nbytes in items:
            _write(f, data, nbytes)
    return 8 + len(hdr) + sum(n for _h, n in items)


def dumps(tensors, metadata=None):
    """Return the safetensors encoding of tensors as bytes (see save)."""
    hdr, items = _prepare(tensors, metadata)
    buf = io.BytesIO()
    buf.write(len(hdr).to_bytes(8, "little"))
    buf.write(hdr)
    for data, nbytes in items:
        _write(buf, data, nbytes)
    return buf.getvalue()


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n
