"""wire: protocol error objects and strict request-field helpers.

Shared by the verify worker's modules. Standard library only.
"""

import traceback

MAX_TEXT_BYTES = 4096


class Failure(Exception):
    """A request failed; carries the protocol error object
    ({"class", "type", "message", "traceback"})."""

    def __init__(self, error):
        Exception.__init__(self, error.get("message", ""))
        self.error = error


def clip(text, limit=MAX_TEXT_BYTES, tail=False):
    """Return text as valid UTF-8 of at most limit bytes (its head, or its
    tail when tail is true)."""
    if not isinstance(text, str):
        try:
            text = str(text)
        except BaseException:  # noqa: B902 - hostile __str__
            text = "<unprintable>"
    b = text.encode("utf-8", "replace")
    if len(b) > limit:
        b = b[-limit:] if tail else b[:limit]
    return b.decode("utf-8", "ignore")


def exc_error(cls, exc, prefix=""):
    """Protocol error object for an exception (usually raised by candidate
    code, so every step of formatting it is guarded)."""
    try:
        name = type(exc).__name__
    except BaseException:  # noqa: B902
        name = "BaseException"
    try:
        msg = str(exc)
    except BaseException:  # noqa: B902
        msg = "<unprintable exception>"
    try:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except BaseException:  # noqa: B902
        tb = ""
    return {"class": cls, "type": clip(name, 256), "message": clip(prefix + msg),
            "traceback": clip(tb, tail=True)}


def plain_error(cls, typ, message):
    """Protocol error object without a traceback."""
    return {"class": cls, "type": typ, "message": clip(message), "traceback": ""}


def bad(message):
    """A bad_request failure: the worker could not understand Go's request."""
    return Failure(plain_error("bad_request", "BadRequest", message))


def field(req, key, kind, default=None, required=True):
    """Return req[key] checked to be of kind (str, int, float, bool, list,
    dict); bools are never ints or floats here."""
    if key not in req:
        if required:
            raise bad("missing field %r" % key)
        return default
    v = req[key]
    if kind is int:
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif kind is float:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    else:
        ok = isinstance(v, kind)
    if not ok:
        raise bad("field %r must be %s" % (key, getattr(kind, "__name__", kind)))
    return v


def str_list(req, key, required=False):
    """Return req[key] checked to be a list of strings (default [])."""
    v = field(req, key, list, [], required)
    if not all(isinstance(x, str) for x in v):
        raise bad("field %r must be a list of strings" % key)
    return v


def int_list(v, what):
    """Check that v is a list of non-negative ints."""
    if not isinstance(v, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        raise bad("%s must be a list of non-negative integers" % what)
    return v
