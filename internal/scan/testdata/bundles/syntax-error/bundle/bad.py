import torch

x = = 1
