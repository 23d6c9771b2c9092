import torch

T = torch
