"""Stores into objects the bundle did not create patch the engine."""
import torch


def patch(cls):
    cls.add = torch.sub


type(torch.ones(1)).mul = torch.sub
tensor_type = type(torch.ones(1))
tensor_type.div = torch.sub
classes = [torch.Tensor]
classes[0].neg = torch.sub
setattr(type(torch.ones(1)), "abs", torch.sub)


class Helper:
    def m(self, value):
        self.add = value

    def n(self):
        return self


Helper.m(torch.Tensor, torch.sub)
unbound = Helper.m
type(Helper()).m(torch.Tensor, torch.sub)


def decorate(fn):
    fn(torch.Tensor, torch.sub)
    return fn


class Decorated:
    @decorate
    def m(self, value):
        self.add = value


def kernel(x, out):
    out.data = x
    x.grad = None
    out[...] = x
    out.view(-1)[0] = 0
    helper = Helper()
    helper.calls = 1
    helper.n().calls = 2
