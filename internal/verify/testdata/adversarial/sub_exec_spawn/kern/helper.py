"""Shared constants."""
import torch

T = torch
SCALE = 1.0
