import torch

_MSG = list(b"CACHEON-REDTEAM: raw write to fd 2 from candidate code, no open()/audit event\n")


def _emit(fd):
    # UntypedStorage._write_file(fd, is_real_file=True, save_size=False, element_size)
    # writes the storage's bytes with write(2) on any descriptor number
    s = torch.tensor(_MSG, dtype=torch.uint8)
    st = s.untyped_storage() if hasattr(s, "untyped_storage") else s.storage().untyped()
    st._write_file(fd, True, False, 1)


def silu_and_mul(x, out):
    _emit(2)
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    out.copy_(y)
