import torch
import helper
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    import os
helper.restore()
X: helper.keep(os.getcwd()) = 0


def silu_and_mul(x, out):
    raise RuntimeError("TYPE_CHECKING block ran; os.getcwd()=%r" % (helper.KEPT,))
