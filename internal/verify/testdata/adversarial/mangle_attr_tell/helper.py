import torch

_Q__t = torch
