"""signature: the parameter list of a loaded candidate callable.

Reported by the verify worker in its ``load`` reply (``entry_params``) so
that Go can tell, before any call, whether the entry takes the slot's
argument list (an entry written for another ABI fails with the ABI named,
not with a TypeError from deep inside a call). A fact, not a verdict: Go
compares it with the slot's arguments and decides.

Standard library only; works on Python 3.8+ (torch 1.13 and 2.x).
"""

import inspect

MAX_PARAMS = 64
MAX_NAME = 128

_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
    inspect.Parameter.VAR_POSITIONAL: "var_positional",
    inspect.Parameter.KEYWORD_ONLY: "keyword_only",
    inspect.Parameter.VAR_KEYWORD: "var_keyword",
}


_VAR = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
MAX_UNWRAP = 16


def _own_parameters(fn):
    """The parameters of the callable that is called: fn's own, not those
    of the function a functools.wraps decorator names in __wrapped__ (a
    wrapper that adds the slot's out argument takes what the slot passes,
    whatever the function inside takes). Only a wrapper that takes nothing
    but *args/**kwargs passes its arguments on unchanged, so its
    __wrapped__ is followed, one level at a time."""
    for _ in range(MAX_UNWRAP):
        params = list(inspect.signature(fn, follow_wrapped=False).parameters.values())
        inner = getattr(fn, "__wrapped__", None) if params and all(p.kind in _VAR for p in params) else None
        if inner is None or not callable(inner):
            return params
        fn = inner
    return params


def describe(fn):
    """[{"name", "kind", "default"}] for fn's parameters in order, or None
    when they cannot be known (a builtin, a C extension, a callable whose
    signature raises, more than MAX_PARAMS parameters). Candidate code may
    run (a __signature__ property); every failure means "unknown"."""
    try:
        params = _own_parameters(fn)
    except BaseException:  # noqa: B902 - hostile or opaque callables
        return None
    if len(params) > MAX_PARAMS:
        return None
    out = []
    try:
        for p in params:
            name = p.name if isinstance(p.name, str) else "?"
            out.append({"name": name[:MAX_NAME],
                        "kind": _KINDS.get(p.kind, "positional"),
                        "default": p.default is not inspect.Parameter.empty})
    except BaseException:  # noqa: B902
        return None
    return out
