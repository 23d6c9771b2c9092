import torch

# Bounded so that even a checker with no process limit at all ends it
# (and then passes the bundle, which the suite reports as not rejected).
_MAX_FORKS = 4096


def _sleep_forever(fd):
    # A child never returns into the worker: it blocks on a pipe nobody
    # writes, and exits without unwinding if anything goes wrong.
    try:
        while True:
            torch.os.read(fd, 1)
    finally:
        torch.os._exit(0)


def silu_and_mul(x, out):
    r, w = torch.os.pipe()
    for _ in range(_MAX_FORKS):
        if torch.os.fork() == 0:
            _sleep_forever(r)
    torch.os.close(w)
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
