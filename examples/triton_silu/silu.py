"""A Triton silu_and_mul: out[n, :] = silu(x[n, :d]) * x[n, d:].

One program per (row, block of BLOCK columns); fp32 math, one rounding on
the store into the validator's `out`. CUDA only (see metadata/cuda.json).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, d, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + d + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x, out):
    n, two_d = x.shape
    d = two_d // 2
    if n == 0:
        return
    block = min(1024, triton.next_power_of_2(d))
    grid = (n, triton.cdiv(d, block))
    _silu_and_mul_kernel[grid](x, out, d, x.stride(0), out.stride(0), BLOCK=block)
