import functools

from .shapes import half_width  # noqa: F401  (re-exported for callers)


@functools.lru_cache(maxsize=None)
def pick_block(d: int) -> int:
    block = 1
    while block < d and block < 4096:
        block *= 2
    return block
