from ..helpers import fetch
