"""A small kernel class hierarchy; messages name the concrete class."""
import torch


class ActKernel:
    def check(self, x: torch.Tensor, out: torch.Tensor) -> None:
        if x.dim() != 2 or out.shape[-1] * 2 != x.shape[-1]:
            raise ValueError(f"{self.__class__.__name__}: bad shapes {tuple(x.shape)} -> {tuple(out.shape)}")

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"


class SiluAndMul(ActKernel):
    def __call__(self, x: torch.Tensor, out: torch.Tensor) -> None:
        self.check(x, out)
        d = x.shape[-1] // 2
        g = x[:, :d].float()
        out.copy_(torch.nn.functional.silu(g) * x[:, d:].float())


silu_and_mul = SiluAndMul()
