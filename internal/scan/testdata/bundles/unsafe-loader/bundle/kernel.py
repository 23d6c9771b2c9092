import pickle
import marshal as m
import torch
import torch.utils.cpp_extension
from torch.utils.cpp_extension import load_inline
from torch.utils import cpp_extension as ext

weights = torch.load("w.pt")
script = torch.jit.load("m.pt")
torch.ops.load_library("libx.so")
torch.classes.load_library("liby.so")
mod = ext.load(name="k", sources=["k.cu"])
obj = pickle.loads(b"")
hub = torch.hub.load("a/b", "c")
