import torch


def silu_and_mul(x, out):
    return None
