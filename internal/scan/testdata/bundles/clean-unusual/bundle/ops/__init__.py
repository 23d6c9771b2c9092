"""A sub-package of helpers."""
from .softmax import online_softmax

__all__ = ["online_softmax"]
