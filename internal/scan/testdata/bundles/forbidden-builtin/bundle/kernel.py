import torch

code = compile("1 + 1", "<x>", "eval")
value = eval(code)
exec("x = 1")
handle = open("/etc/passwd")
name = input()
breakpoint()
g = globals()
v = vars(torch)
l = locals()
os = __import__("os")
run = eval
ns = __builtins__
ns2 = __builtins__.__dict__
f = exec.__call__
__builtins__ = {}


def shadowed(open=None):
    return open


from torch import compile
from torch import __builtins__ as b
from torch.nn import __loader__

fast = compile(shadowed)
