import torch as T

config = {}
