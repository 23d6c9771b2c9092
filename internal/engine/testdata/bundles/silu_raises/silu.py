"""DELIBERATELY BROKEN: raises on every call, after dispatch selected it.
The engine must abort in strict mode and fall back with a receipt otherwise."""


def silu_and_mul(x, out):
    raise RuntimeError("silu kernel exploded")
