"""Helpers of the rmsnorm kernel, in a sub-package."""
from .norm.scale import Config, rms_scale

__all__ = ["Config", "rms_scale"]
