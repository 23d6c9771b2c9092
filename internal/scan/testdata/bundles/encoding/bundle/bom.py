import torch
import ctypes
