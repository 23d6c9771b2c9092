import torch

from pkg.sub import helper
from pkg import sibling
from . import local_mod
