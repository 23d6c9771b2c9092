import torch


def silu_and_mul(x, out):
    if x.is_cuda:
        from asm_silu import launch
        launch(x, out)
        return
    d = x.shape[-1] // 2
    a, b = x[..., :d].float(), x[..., d:].float()
    out.copy_(torch.nn.functional.silu(a) * b)
