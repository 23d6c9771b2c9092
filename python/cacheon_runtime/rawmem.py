"""rawmem: tensor memory moved as raw bytes, outside torch's dispatcher.

The worker poisons outputs, refreshes inputs in place and reads back what
it dumps without calling a single torch operator on the data: a torch
function mode, a dispatch mode, a Tensor subclass or a kernel registered
over an ATen operator (``torch.library``) that the candidate left behind
can rewrite what ``fill_``, ``copy_``, ``clone`` or ``.to("cpu")`` do, but
not what these functions do.

- CPU: ``ctypes.memmove`` / ``ctypes.string_at`` on ``data_ptr()``.
- CUDA: the driver API of ``libcuda.so.1`` (already loaded by torch):
  ``cuMemsetD8/D16/D32Async`` and ``cuMemsetD2D32Async`` on torch's current
  stream (so a fill inside a CUDA graph capture becomes a memset node of the
  graph), ``cuMemcpyDtoH_v2`` / ``cuMemcpyHtoD_v2`` after
  ``cuCtxSynchronize``. torch has no raw device memset of its own
  (``torch.cuda.cudart()`` exposes no ``cudaMemset``), so the driver is the
  raw path on CUDA.

Only tensor *metadata* is read through torch (``data_ptr``, ``size``,
``stride``, ``element_size``, ``device``, ``dtype``: C getters bound before
any candidate import, called under ``torch._C.DisableTorchFunction`` so a
subclass's ``__torch_function__`` is not consulted; on torch >= 2 that also
disables torch function modes, and the worker's guard refuses any mode
before it trusts these values on torch 1.13).

Works with torch 1.13 and torch 2.x; standard library only besides torch.
"""

import contextlib
import ctypes
import struct
import sys

if sys.byteorder != "little":  # pragma: no cover - every supported host is LE
    raise ImportError("cacheon_runtime.rawmem needs a little-endian host")

_FORMATS = {1: "B", 2: "H", 4: "I", 8: "Q"}
_SEED = 1 << 16  # a CPU fill writes up to this many bytes from Python, then doubles in place
_STAGE_MAX = 32 << 20  # the page-locked read buffer's largest size (device reads go in chunks)


class RawError(RuntimeError):
    """Raw memory access failed (a driver call returned an error)."""


def pattern(torch, dtype, value):
    """The little-endian bytes of one element of dtype holding value (pure
    Python: no torch operator computes it). NaN has the bit pattern torch's
    own fill_ writes (0x7fc0... / 0x7e00)."""
    if dtype is torch.float32:
        return struct.pack("<f", value)
    if dtype is torch.float64:
        return struct.pack("<d", value)
    if dtype is torch.float16:
        return struct.pack("<e", value)
    if dtype is torch.bfloat16:
        return struct.pack("<f", value)[2:]  # NaN and the poisons are exact in bf16
    if dtype is torch.bool:
        return b"\x01" if value else b"\x00"
    fmt = {torch.uint8: "<B", torch.int8: "<b", torch.int16: "<h",
           torch.int32: "<i", torch.int64: "<q"}.get(dtype)
    if fmt is None:
        raise ValueError("no raw pattern for dtype %s" % (dtype,))
    return struct.pack(fmt, int(value))


class _Driver:
    """The few CUDA driver entry points the raw path needs."""

    def __init__(self):
        lib = ctypes.CDLL("libcuda.so.1")
        u64, sz, vp, ui = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_uint

        def fn(name, args):
            f = getattr(lib, name)
            f.argtypes = args
            f.restype = ctypes.c_int
            return f
        self.memset8 = fn("cuMemsetD8Async", [u64, ctypes.c_ubyte, sz, vp])
        self.memset16 = fn("cuMemsetD16Async", [u64, ctypes.c_ushort, sz, vp])
        self.memset32 = fn("cuMemsetD32Async", [u64, ui, sz, vp])
        self.memset2d32 = fn("cuMemsetD2D32Async", [u64, sz, ui, sz, sz, vp])
        self.dtoh = fn("cuMemcpyDtoH_v2", [vp, u64, sz])
        self.alloc_host = fn("cuMemAllocHost_v2", [ctypes.POINTER(vp), sz])
        self.free_host = fn("cuMemFreeHost", [vp])
        self.htod = fn("cuMemcpyHtoD_v2", [u64, vp, sz])
        self.ctx_sync = fn("cuCtxSynchronize", [])

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise RawError("%s failed with CUDA driver error %d" % (what, rc))


class RawMem:
    """Raw reads, writes and fills of tensor memory. Build it before any
    candidate code is imported: it binds the tensor getters it uses then,
    and on a machine with CUDA loads the driver library then."""

    def __init__(self, torch):
        T = torch.Tensor
        self.torch = torch
        self._data_ptr = T.data_ptr
        self._size = T.size
        self._stride = T.stride
        self._element_size = T.element_size
        self._is_cuda = T.is_cuda.__get__
        self._device = T.device.__get__
        self._dtype = T.dtype.__get__
        self._numel = T.numel
        self._disable = getattr(torch._C, "DisableTorchFunction", None)
        # The untyped storage behind a tensor, for bounds: torch >= 2
        # untyped_storage(); torch 1.13 storage()._storage. Its nbytes and
        # data_ptr are C methods, bound here.
        us = getattr(T, "untyped_storage", None)
        if us is None:
            typed = T.storage

            def us(t, _typed=typed):
                return _typed(t)._storage
        self._ustorage = us
        probe = us(torch.empty(1))
        self._s_nbytes = type(probe).nbytes
        self._s_ptr = type(probe).data_ptr
        self._current_stream = None
        self._drv = None
        # A page-locked host buffer reused for every read from the device
        # (address, capacity): the copy then runs at the link's speed with
        # no fresh host memory to fault in.
        self._stage = (None, 0)
        try:
            if torch.cuda.is_available():
                self._cuda_init()
        except Exception:  # noqa: BLE001 - no driver: CUDA paths fail when used
            self._drv = None

    def _cuda_init(self):
        if self._drv is None:
            self._drv = _Driver()
            self._current_stream = self.torch.cuda.current_stream
        return self._drv

    def dtype_shape(self, t):
        """(dtype, shape list) of t, read without __torch_function__."""
        with self._guard():
            return self._dtype(t), [int(d) for d in self._size(t)]

    def _guard(self):
        return self._disable() if self._disable is not None else contextlib.nullcontext()

    def meta(self, t):
        """(address, sizes, strides, element size, is_cuda, device) of t,
        after checking that the memory its view reaches lies inside its
        storage as that storage is now (a candidate may have resized or
        freed it: then nothing is read or written)."""
        with self._guard():
            m = (int(self._data_ptr(t)), [int(d) for d in self._size(t)],
                 [int(s) for s in self._stride(t)], int(self._element_size(t)),
                 bool(self._is_cuda(t)), self._device(t))
            addr, sizes, strides, es = m[0], m[1], m[2], m[3]
            if _numel(sizes):
                if any(st < 0 for st in strides):
                    raise ValueError("negative strides")
                span = (1 + sum((d - 1) * st for d, st in zip(sizes, strides))) * es
                us = self._ustorage(t)
                lo, n = int(self._s_ptr(us)), int(self._s_nbytes(us))
                if addr < lo or addr + span > lo + n:
                    raise ValueError("the tensor's view [%#x, +%d) lies outside its storage [%#x, +%d): "
                                     "the storage was resized or freed" % (addr, span, lo, n))
        return m

    # -- synchronization ---------------------------------------------------

    def sync(self):
        """Wait for every stream of the current CUDA context (the driver's
        cuCtxSynchronize; nothing on CPU)."""
        if self._drv is not None:
            self._drv.check(self._drv.ctx_sync(), "cuCtxSynchronize")

    # -- fill ----------------------------------------------------------------

    def fill(self, t, pat):
        """Fill every element of the contiguous tensor t (a whole
        allocation) with the element bytes pat."""
        addr, sizes, strides, es, cuda, dev = self.meta(t)
        if len(pat) != es:
            raise ValueError("pattern of %d bytes for %d-byte elements" % (len(pat), es))
        n = 1
        for d in sizes:
            n *= d
        if n == 0:
            return
        if not _contiguous(sizes, strides):
            raise ValueError("raw fill needs a contiguous tensor")
        self.fill_range(addr, n * es, pat, dev if cuda else None)

    def fill_range(self, addr, nbytes, pat, device=None):
        """Fill nbytes at addr (a multiple of the pattern's size) with the
        element bytes pat: CPU memory, or memory of the CUDA device device.
        No bounds check: for memory the caller allocated and no candidate
        code has touched since (fill checks a tensor's storage first)."""
        es = len(pat)
        n = nbytes // es
        if n <= 0:
            return
        cuda = device is not None
        dev = device
        if not cuda:
            if nbytes <= _SEED:
                ctypes.memmove(addr, pat * n, nbytes)
                return
            ctypes.memmove(addr, pat * (_SEED // es), _SEED)
            done = _SEED
            while done < nbytes:
                k = min(done, nbytes - done)
                ctypes.memmove(addr + done, addr, k)
                done += k
            return
        drv = self._cuda_init()
        stream = self._current_stream(dev).cuda_stream
        if es == 1:
            drv.check(drv.memset8(addr, pat[0], n, stream), "cuMemsetD8Async")
        elif es == 2:
            drv.check(drv.memset16(addr, struct.unpack("<H", pat)[0], n, stream), "cuMemsetD16Async")
        elif es == 4:
            drv.check(drv.memset32(addr, struct.unpack("<I", pat)[0], n, stream), "cuMemsetD32Async")
        elif es == 8:
            lo, hi = struct.unpack("<II", pat)
            if lo == hi:
                drv.check(drv.memset32(addr, lo, 2 * n, stream), "cuMemsetD32Async")
            else:  # two strided 32-bit fills: the low and the high words
                drv.check(drv.memset2d32(addr, 8, lo, 1, n, stream), "cuMemsetD2D32Async")
                drv.check(drv.memset2d32(addr + 4, 8, hi, 1, n, stream), "cuMemsetD2D32Async")
        else:
            raise ValueError("no raw fill for %d-byte elements" % es)

    # -- write ---------------------------------------------------------------

    def write(self, dst, src):
        """Copy the bytes of the contiguous CPU tensor src into the
        contiguous tensor dst (same byte size; CPU or CUDA)."""
        saddr, ssz, sst, ses, scuda, _ = self.meta(src)
        daddr, dsz, dst_st, des, dcuda, _dev = self.meta(dst)
        if scuda or not _contiguous(ssz, sst) or not _contiguous(dsz, dst_st):
            raise ValueError("raw write needs a contiguous CPU source and a contiguous destination")
        n = _numel(ssz) * ses
        if n != _numel(dsz) * des:
            raise ValueError("raw write of %d bytes into %d" % (n, _numel(dsz) * des))
        self._put(daddr, dcuda, saddr, n)

    def write_bytes(self, dst, data):
        """Copy data (bytes, exactly dst's size) into the contiguous tensor
        dst (CPU or CUDA)."""
        daddr, dsz, dst_st, des, dcuda, _dev = self.meta(dst)
        n = _numel(dsz) * des
        if not _contiguous(dsz, dst_st) or len(data) != n:
            raise ValueError("raw write of %d bytes into a %s tensor of %d" % (
                len(data), "contiguous" if _contiguous(dsz, dst_st) else "strided", n))
        self._put(daddr, dcuda, data, n)

    def write_rows(self, dst, src, at, row):
        """Copy the rows of the contiguous CPU tensor src (row bytes each,
        in order) into the contiguous tensor dst at row offsets at (a list
        of row indices of dst seen as rows of row bytes)."""
        saddr, ssz, sst, ses, scuda, _ = self.meta(src)
        daddr, dsz, dst_st, des, dcuda, _dev = self.meta(dst)
        if scuda or not _contiguous(ssz, sst) or not _contiguous(dsz, dst_st):
            raise ValueError("raw row write needs a contiguous CPU source and a contiguous destination")
        if _numel(ssz) * ses != len(at) * row:
            raise ValueError("raw row write of %d rows of %d bytes from %d" % (len(at), row, _numel(ssz) * ses))
        size = _numel(dsz) * des
        for k, i in enumerate(at):
            if i < 0 or (i + 1) * row > size:
                raise ValueError("raw row write: row %d outside %d bytes" % (i, size))
            self._put(daddr + i * row, dcuda, saddr + k * row, row)

    def _put(self, daddr, cuda, src, n):
        """Copy n bytes from host memory src (an address or bytes) to daddr,
        CPU memory or, with cuda, device memory after the device is idle."""
        if n == 0:
            return
        if not cuda:
            ctypes.memmove(daddr, src, n)
            return
        drv = self._cuda_init()
        drv.check(drv.ctx_sync(), "cuCtxSynchronize")
        drv.check(drv.htod(daddr, src, n), "cuMemcpyHtoD_v2")
        drv.check(drv.ctx_sync(), "cuCtxSynchronize")

    # -- read ----------------------------------------------------------------

    def read(self, t):
        """The bytes of t's logical view in row-major order (what a
        contiguous CPU copy would hold), read from its memory as it is."""
        addr, sizes, strides, es, cuda, _dev = self.meta(t)
        n = _numel(sizes)
        if n == 0:
            return b""
        span = (1 + sum((d - 1) * s for d, s in zip(sizes, strides))) * es
        if cuda:
            drv = self._cuda_init()
            drv.check(drv.ctx_sync(), "cuCtxSynchronize")
            buf, cap = self._staging(span)
            if buf is not None and cap >= span:
                host = None
            else:
                host = ctypes.create_string_buffer(span)
                buf = ctypes.addressof(host)
            drv.check(drv.dtoh(buf, addr, span), "cuMemcpyDtoH_v2")
            addr = buf
        else:
            host = None
        if _contiguous(sizes, strides):
            return ctypes.string_at(addr, n * es)
        out = _gather(addr, span, sizes, strides, es)
        del host
        return out


    def write_to(self, t, f):
        """Write the bytes of t's logical view in row-major order (what
        read returns) to the binary file f, without an intermediate copy
        where t is contiguous: CPU memory is written from where it is,
        device memory goes through the reused page-locked buffer in
        chunks. Returns the number of bytes written."""
        addr, sizes, strides, es, cuda, _dev = self.meta(t)
        nbytes = _numel(sizes) * es
        if nbytes == 0:
            return 0
        if not _contiguous(sizes, strides):
            data = self.read(t)
            f.write(data)
            return len(data)
        if not cuda:
            f.write(_view(addr, nbytes))
            return nbytes
        drv = self._cuda_init()
        drv.check(drv.ctx_sync(), "cuCtxSynchronize")
        buf, cap = self._staging(nbytes)
        if buf is None:
            data = self.read(t)
            f.write(data)
            return len(data)
        done = 0
        while done < nbytes:
            k = min(cap, nbytes - done)
            drv.check(drv.dtoh(buf, addr + done, k), "cuMemcpyDtoH_v2")
            f.write(_view(buf, k))
            done += k
        return nbytes

    def _staging(self, nbytes):
        """The page-locked buffer (address, capacity), grown towards nbytes
        up to _STAGE_MAX; (None, 0) where the driver gives none."""
        addr, cap = self._stage
        want = min(max(nbytes, 1 << 20), _STAGE_MAX)
        if addr is not None and cap >= want:
            return addr, cap
        drv = self._cuda_init()
        size = 1 << (want - 1).bit_length()
        p = ctypes.c_void_p()
        if drv.alloc_host(ctypes.byref(p), size) != 0 or not p.value:
            return (addr, cap) if addr is not None else (None, 0)
        if addr is not None:
            drv.free_host(addr)
        self._stage = (p.value, size)
        return self._stage

    def read_rows(self, t, rows):
        """The bytes of rows t[r] for r in rows (ints), in that order, for a
        tensor whose every row is one contiguous block (a paged KV cache:
        the pages a dump keeps), without an indexing operator."""
        addr, sizes, strides, es, cuda, _dev = self.meta(t)
        if not sizes or not _contiguous(sizes[1:], strides[1:]):
            raise ValueError("read_rows needs rows that are contiguous blocks")
        row = _numel(sizes[1:]) * es
        out = []
        for r in rows:
            if not 0 <= r < sizes[0]:
                raise ValueError("row %d outside [0, %d)" % (r, sizes[0]))
            a = addr + r * strides[0] * es
            if not row:
                continue
            if cuda:
                drv = self._cuda_init()
                host = ctypes.create_string_buffer(row)
                drv.check(drv.ctx_sync(), "cuCtxSynchronize")
                drv.check(drv.dtoh(host, a, row), "cuMemcpyDtoH_v2")
                out.append(host.raw)
            else:
                out.append(ctypes.string_at(a, row))
        return b"".join(out)


def _view(addr, n):
    """A byte view of n bytes of memory at addr (no copy)."""
    return memoryview((ctypes.c_char * n).from_address(addr)).cast("B")


def _numel(sizes):
    n = 1
    for d in sizes:
        n *= d
    return n


def _contiguous(sizes, strides):
    want = 1
    for d, s in zip(reversed(sizes), reversed(strides)):
        if d != 1 and s != want:
            return False
        want *= d
    return True


def _gather(addr, span, sizes, strides, es):
    """Row-major bytes of the strided view at host address addr (span bytes
    reachable from it)."""
    dims = [(d, s) for d, s in zip(sizes, strides) if d != 1]
    # Merge trailing dimensions that are contiguous with each other.
    while len(dims) >= 2 and dims[-2][1] == dims[-1][0] * dims[-1][1]:
        d1, s1 = dims.pop()
        d0, _s0 = dims.pop()
        dims.append((d0 * d1, s1))
    fmt = _FORMATS[es]
    mv = memoryview((ctypes.c_char * span).from_address(addr)).cast("B").cast(fmt)
    last_d, last_s = dims[-1]
    outer = dims[:-1]
    parts = []
    idx = [0] * len(outer)
    while True:
        base = sum(i * s for i, (_d, s) in zip(idx, outer))
        parts.append(mv[base:base + (last_d - 1) * last_s + 1:last_s].tobytes())
        k = len(outer) - 1
        while k >= 0:
            idx[k] += 1
            if idx[k] < outer[k][0]:
                break
            idx[k] = 0
            k -= 1
        if k < 0:
            break
    mv.release()
    return b"".join(parts)
