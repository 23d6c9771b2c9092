import torch as T
from torch import load as fetch
import pickle as serializer
