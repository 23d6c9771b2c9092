"""wire: protocol error objects and strict request-field helpers.

Shared by the verify worker's modules. Standard library only.
"""

import os
import traceback

MAX_TEXT_BYTES = 4096
_HERE = os.path.dirname(os.path.abspath(__file__))


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
        # Each chunk (a frame, a chained-exception header, the exception line)
        # is clipped on its own so that a huge message cannot push the frames
        # out of the 4 KiB tail that is kept.
        tb = exc.__traceback__
        # Leading frames of the worker itself say nothing to a miner.
        while tb is not None and tb.tb_next is not None and \
                os.path.dirname(os.path.abspath(tb.tb_frame.f_code.co_filename)) == _HERE:
            tb = tb.tb_next
        chunks = traceback.TracebackException(type(exc), exc, tb, limit=None).format()
        tb = "".join(_clip_chunk(c) for c in chunks)
    except BaseException:  # noqa: B902
        tb = ""
    return {"class": cls, "type": clip(name, 256), "message": clip(prefix + msg),
            "traceback": clip(tb, tail=True)}


def _clip_chunk(c, limit=512):
    c = clip(c, limit)
    return c if c.endswith("\n") else c + "...\n"


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
