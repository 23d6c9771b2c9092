from torch import *
from .helpers import *
from math import pi
