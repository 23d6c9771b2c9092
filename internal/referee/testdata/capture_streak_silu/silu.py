"""Attack (the referee's audit): a Triton silu_and_mul that scales its output by 0.95
in a call captured into a CUDA graph right after another captured call of the same
shape. Verify captures one call per graph, with eager calls between; an engine's decode
graph holds one call per layer, so its replays run the scaled kernel in every layer but
the first, while an eager audit sees only honest eager calls."""
import torch
import triton
import triton.language as tl

_STREAK = [None, 0]  # the shape of the last call, and how many captured calls of it in a row


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, d, stride_x, stride_out, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + d + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate * tl.sigmoid(gate) * up * scale
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x, out):
    n, two_d = x.shape
    d = two_d // 2
    if n == 0:
        return
    scale = 1.0
    if torch.cuda.is_current_stream_capturing():
        if _STREAK[0] == (n, two_d):
            _STREAK[1] += 1
        else:
            _STREAK[0], _STREAK[1] = (n, two_d), 1
        if _STREAK[1] >= 2:
            scale = 0.95
    else:
        _STREAK[0], _STREAK[1] = None, 0
    block = min(1024, triton.next_power_of_2(d))
    grid = (n, triton.cdiv(d, block))
    _silu_and_mul_kernel[grid](x, out, d, x.stride(0), out.stride(0), scale, BLOCK=block)
