import torch


def half_width(x: torch.Tensor) -> int:
    if x.dim() != 2 or x.shape[-1] % 2:
        raise ValueError("x must be (N, 2d)")
    return x.shape[-1] // 2
