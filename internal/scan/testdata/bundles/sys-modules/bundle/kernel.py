import sys
import importlib
from importlib import import_module
from sys import modules as loaded

torch = sys.modules["torch"]
sys.path.insert(0, "/tmp")
mod = importlib.import_module("torch")
