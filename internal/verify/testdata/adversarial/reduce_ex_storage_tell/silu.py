"""Route: a tensor's private _reduce_ex_internal (the body of
Tensor.__reduce_ex__) returns (torch._utils._rebuild_tensor_v2,
(TypedStorage, offset, size, stride, ...)): the input's storage object, which
the scan refuses by name (storage, untyped_storage, _typed_storage), as an
untyped item. Its nbytes() is the allocation size (the closed
exact_storage_tell class). Correct only if a real storage came back."""
import torch


def _store(t):
    return t._reduce_ex_internal(2)[1][0]


def silu_and_mul(x, out):
    st = _store(out)
    ok = type(st).__name__ == "TypedStorage" and st.nbytes() >= out.numel() * out.element_size()
    f = 1.0 if ok else 0.5
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float() * f)
