"""silu_and_mul with a frozen dataclass config that derives a field in __post_init__."""
import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class SiluConfig:
    row_block: int = 256
    compute: torch.dtype = torch.float32
    wide: torch.dtype = dataclasses.field(init=False, default=torch.float32)

    def __post_init__(self) -> None:
        # frozen: derived fields are set through object.__setattr__ (dataclasses docs)
        object.__setattr__(self, "wide", torch.float64 if self.compute == torch.float64 else torch.float32)


CONFIG = SiluConfig()


def silu_and_mul(x: torch.Tensor, out: torch.Tensor) -> None:
    d = x.shape[-1] // 2
    for r0 in range(0, x.shape[0], CONFIG.row_block):
        xs = x[r0:r0 + CONFIG.row_block]
        g = xs[:, :d].to(CONFIG.wide)
        out[r0:r0 + CONFIG.row_block] = torch.nn.functional.silu(g) * xs[:, d:].to(CONFIG.wide)
