import torch

subclasses = ().__class__.__bases__[0].__subclasses__()
here = __file__
spec = __spec__
loader = __loader__.name


class Kernel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.name = type(self).__name__
        self.doc = self.__doc__

    def __repr__(self):
        return "Kernel()"


def leak(fn):
    g = fn.__globals__
    c = fn.__code__.co_consts
    d = torch.__dict__
    m = type.__mro__
    return g, c, d, m, torch.__version__, fn.__qualname__


if __name__ == "__main__":
    pass
