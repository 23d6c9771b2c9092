"""wire: protocol error objects and strict request-field helpers.

Shared by the verify worker's modules. Standard library only.
"""

import os
import sys
import traceback

MAX_TEXT_BYTES = 4096
_HERE = os.path.dirname(os.path.abspath(__file__))


class Failure(Exception):
    """A request failed; carries the protocol error object
    ({"class", "type", "message", "traceback"})."""

    def __init__(self, error):
        Exception.__init__(self, error.get("message", ""))
        self.error = error


def as_text(obj, fallback="<unprintable>"):
    """str(obj) as an exact str, fallback when that fails. What candidate
    code hands over (an exception's message, a class's name) may be a str
    subclass whose methods are the candidate's: one whose ``__radd__``
    raised broke the worker's own formatting of a failed load, which then
    read as the worker's failure (rt47)."""
    try:
        if not isinstance(obj, str):
            obj = str(obj)
        # str.__str__ of a subclass is a copy of its characters as an
        # exact str; of anything only claiming to be a str it raises
        return obj if type(obj) is str else str.__str__(obj)
    except BaseException:  # noqa: B902 - hostile __str__ or __class__
        return fallback


def clip(text, limit=MAX_TEXT_BYTES, tail=False):
    """Return text as valid UTF-8 of at most limit bytes (its head, or its
    tail when tail is true)."""
    b = as_text(text).encode("utf-8", "replace")
    if len(b) > limit:
        b = b[-limit:] if tail else b[:limit]
    return b.decode("utf-8", "ignore")


def exc_error(cls, exc, prefix=""):
    """Protocol error object for an exception (usually raised by candidate
    code, so every step of formatting it is guarded)."""
    try:
        name = as_text(type(exc).__name__, "BaseException")
    except BaseException:  # noqa: B902
        name = "BaseException"
    msg = as_text(exc, "<unprintable exception>")
    prefix = as_text(prefix)
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
    """Check that v is a list of non-negative ints (exactly int: no bools)."""
    if not isinstance(v, list) or (v and (not set(map(type, v)) <= {int} or min(v) < 0)):
        raise bad("%s must be a list of non-negative integers" % what)
    return v


def f32_base64(values):
    """values as little-endian IEEE float32, base64 (standard alphabet,
    padded): a wave's logprobs travel in ~1/15 of the time and a third of
    the bytes of JSON numbers, with the fp32 values exact."""
    import array
    import base64
    a = array.array("f", values)
    if sys.byteorder != "little":
        a.byteswap()
    return base64.b64encode(a.tobytes()).decode("ascii")


def i32_base64(values):
    """values (ints in int32 range) as little-endian int32, base64 (standard
    alphabet, padded): a batch-64 wave's 16 384 tokens encode in well under
    half the time of JSON numbers."""
    import array
    import base64
    import struct
    a = array.array("i", values)
    if a.itemsize != 4:  # (a platform whose C int is not 32 bits)
        return base64.b64encode(struct.pack("<%di" % len(values), *values)).decode("ascii")
    if sys.byteorder != "little":
        a.byteswap()
    return base64.b64encode(a.tobytes()).decode("ascii")


def send_line(fd, obj):
    """Write obj as one compact JSON line to fd (the private protocol fd).
    Non-ASCII text goes as \\u escapes: json's ASCII encoder is C all the
    way, three times faster than its UTF-8 path on a batch-64 generate reply."""
    import json
    line = json.dumps(obj, allow_nan=False, separators=(",", ":")).encode("ascii") + b"\n"
    view = memoryview(line)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def serve(inp, send, handlers, max_request_bytes, on_error):
    """Serve JSON-lines requests from inp until EOF or a shutdown request.

    handlers maps op -> function(request) -> dict merged into the ok reply.
    A Failure becomes an ok=false reply with its error; any other exception
    goes to on_error(rid, exc), which returns (reply, exit_code): exit_code
    None keeps serving. Returns the process exit code.
    """
    import json
    while True:
        line = inp.readline(max_request_bytes + 1)
        if not line:
            return 0
        if len(line) > max_request_bytes and not line.endswith(b"\n"):
            while True:  # discard the rest of the oversized line
                rest = inp.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            send({"id": "", "ok": False,
                  "error": plain_error("bad_request", "BadRequest", "request line too long")})
            continue
        if not line.strip():
            continue
        rid, code = "", None
        try:
            try:
                req = json.loads(line)
            except ValueError as e:
                raise bad("request is not JSON: %s" % e)
            if not isinstance(req, dict):
                raise bad("request is not a JSON object")
            rid = req.get("id", "")
            if not isinstance(rid, str):
                rid = ""
                raise bad("request id must be a string")
            op = req.get("op")
            if op == "shutdown":
                send({"id": rid, "ok": True})
                return 0
            h = handlers.get(op) if isinstance(op, str) else None
            if h is None:
                raise bad("unknown op %r" % (op,))
            reply = {"id": rid, "ok": True}
            reply.update(h(req) or {})
        except Failure as f:
            reply = {"id": rid, "ok": False, "error": f.error}
        except Exception as e:  # noqa: BLE001 - classified by the caller
            reply, code = on_error(rid, e)
        send(reply)
        if code is not None:
            return code
