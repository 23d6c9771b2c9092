"""DELIBERATELY BROKEN (scan): the math is right, but the module imports os,
which the arena's import allow-list does not contain. scan reports
import-not-allowed and verify refuses to run the bundle."""
import os

import torch

_DEBUG = os.environ.get("SILU_DEBUG") == "1"


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
