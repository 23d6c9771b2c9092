import torch


def silu_and_mul(x, out):
    n = 0
    while True:
        n += 1
