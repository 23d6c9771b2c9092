"""silu_and_mul as a callable object: the module binds the entry name to an
instance whose __call__ does the work, keeping state of its own."""
import torch.nn.functional as F


class SiluAndMul:
    """out = silu(x[:, :d]) * x[:, d:], in row chunks."""

    def __init__(self, chunk: int = 64) -> None:
        self.chunk = chunk
        self.calls = 0
        self.widths = {}

    def __call__(self, x, out):
        self.calls += 1
        d = x.shape[-1] // 2
        self.widths[d] = self.widths.get(d, 0) + 1
        match x.dim():
            case 2:
                for начало in range(0, x.shape[0], self.chunk):
                    строки = slice(начало, начало + self.chunk)
                    out[строки] = F.silu(x[строки, :d].float()) * x[строки, d:].float()
            case _:
                raise ValueError("x must be (N, 2d)")


silu_and_mul = SiluAndMul()
