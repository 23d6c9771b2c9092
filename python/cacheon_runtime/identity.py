"""identity: storage-identity facts about tensors, and the tensor methods
the worker uses, bound before any candidate code runs.

A candidate that later monkeypatches ``torch.Tensor`` (``data_ptr``,
``fill_``, ``copy_``...) does not change what the worker measures, poisons,
refreshes or writes: the worker calls the method descriptors captured here.
Go believes none of it anyway; this only keeps honest facts honest.
"""


class Ops:
    """Tensor methods and torch functions captured at worker start."""

    def __init__(self, torch):
        T = torch.Tensor
        self.torch = torch
        self.data_ptr = T.data_ptr
        self.storage_offset = T.storage_offset
        self.size = T.size
        self.stride = T.stride
        self.fill = T.fill_
        self.copy = T.copy_
        self.as_strided = T.as_strided
        self.detach = T.detach
        self.contiguous = T.contiguous
        self.to = T.to
        self.element_size = T.element_size
        self.dtype_of = T.dtype.__get__
        self.device_of = T.device.__get__
        # torch >= 2.0: untyped_storage(); torch 1.13: storage() (a
        # TypedStorage whose data_ptr() is the storage's base address).
        us = getattr(T, "untyped_storage", None)
        self.storage = us if us is not None else T.storage
        self.empty = torch.empty
        self.iinfo = torch.iinfo
        self.dtypes = {
            "bool": torch.bool, "uint8": torch.uint8, "int32": torch.int32,
            "int64": torch.int64, "float16": torch.float16,
            "bfloat16": torch.bfloat16, "float32": torch.float32,
            "float64": torch.float64,
        }
        self.floats = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

    def fact(self, t):
        """Identity facts of one tensor object, as the protocol names them.

        A field that cannot be read (the candidate left the tensor in a
        broken state) is reported as 0 (pointers), -1 (offset), [] or ""
        rather than failing; pointers stay non-negative for Go's uint64.
        """
        def attempt(f, default):
            try:
                return f()
            except BaseException:  # noqa: B902
                return default
        return {
            "data_ptr": attempt(lambda: int(self.data_ptr(t)), 0),
            "storage_ptr": attempt(lambda: int(self.storage(t).data_ptr()), 0),
            "storage_offset": attempt(lambda: int(self.storage_offset(t)), -1),
            "shape": attempt(lambda: [int(d) for d in self.size(t)], []),
            "stride": attempt(lambda: [int(d) for d in self.stride(t)], []),
            "dtype": attempt(lambda: str(self.dtype_of(t)).replace("torch.", ""), ""),
            "device": attempt(lambda: str(self.device_of(t)), ""),
        }

    def facts(self, *groups):
        """Facts for every tensor of every name -> tensor dict in groups."""
        out = {}
        for g in groups:
            for name, t in g.items():
                out[name] = self.fact(t)
        return out
