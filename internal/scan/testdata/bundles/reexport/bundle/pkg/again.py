from . import fetch
