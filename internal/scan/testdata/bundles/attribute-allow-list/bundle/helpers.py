import torch

T = torch
jit = torch.jit
