"""An honest-looking helper module of the bundle."""


def scale():
    return 1.0
