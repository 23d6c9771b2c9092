import torch

T = torch
functional = torch.nn.functional
