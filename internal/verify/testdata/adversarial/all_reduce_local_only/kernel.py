import torch


def all_reduce(x, out, group):
    out.copy_(x)
