"""Helpers for the silu kernel."""

import torch


def half_split(t, axis=-1):
    """Split t in two halves along axis."""
    n = t.shape[axis] // 2
    return t[..., :n], t[..., n:]
