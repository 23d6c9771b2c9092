"""astnorm: a normalized dump of bundle sources, for the Go copy fingerprint.

Run as ``python3 -I -S -W ignore astnorm.py``. It reads one JSON object from
stdin::

    {"files": [{"path": "kernels/silu.py", "source": "..."}]}

where ``source`` carries the file's bytes, each byte as the code point of
the same value (latin-1), so that ``ast.parse`` decodes them exactly as
``import`` would. It writes one JSON line per file, in input order::

    {"path": "kernels/silu.py", "norm": "Module(body=[...])"}
    {"path": "bad.py", "error": "SyntaxError: invalid syntax (line 3)"}

The normalized dump is insensitive to what does not change the code:

- comments and formatting (they never reach the tree);
- string-constant expression statements, docstrings included (removed; a
  body left empty becomes ``pass``);
- local names: function parameters, names a function, lambda or
  comprehension binds (assignment, for, with, except, match, walrus,
  nested def/class names), renamed to ``$depth.index`` in order of first
  occurrence within their scope (nonlocal references follow them; global
  declarations keep the name). Module-level names, class-level names,
  attribute names, keyword-argument names and names bound by ``import``
  are kept: entries, imports and APIs are made of them.

and sensitive to everything else: every node type, operator, constant
(typed: ``True`` is not ``1``) and kept name. The dump is independent of the
interpreter version among those supported: it is written here, not by
``ast.dump``, and leaves out empty fields (``type_params=[]`` exists only
from 3.12), ``type_comment`` and ``Constant.kind``.

This script never opens a bundle file, never imports or executes candidate
code and decides nothing. The Go side (internal/fingerprint) treats this
output as untrusted input. Standard library only; Python 3.9 to 3.13.
"""

import ast
import json
import sys

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_SKIP_FIELDS = ("type_comment", "kind")
_MATCH_AS = getattr(ast, "MatchAs", None)
_MATCH_STAR = getattr(ast, "MatchStar", None)
_MATCH_MAPPING = getattr(ast, "MatchMapping", None)


def _strip_strings(tree):
    """Remove string-constant expression statements (docstrings included)."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            kept = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                            and isinstance(s.value.value, str))]
            if not kept and field == "body":
                kept = [ast.Pass()]
            setattr(node, field, kept)
    return tree


class _Scope:
    """One scope: what it binds and the canonical names given so far."""

    def __init__(self, parent, kind, binds, globals_, nonlocals):
        self.parent = parent
        self.kind = kind  # "module", "class" or "function" (function, lambda, comprehension)
        self.depth = (parent.depth if parent else 0) + (kind == "function")
        self.binds = binds - globals_ - nonlocals
        self.globals = globals_
        self.nonlocals = nonlocals
        self.names = {}

    def resolve(self, name):
        """The name a reference to ``name`` in this scope is written as."""
        scope, first = self, True
        while scope is not None:
            if scope.kind == "module":
                return name
            if scope.kind == "class":
                if first and name in scope.binds:
                    return name  # a class-level name: an attribute
            elif name in scope.globals:
                return name
            elif name in scope.binds:
                canon = scope.names.get(name)
                if canon is None:
                    canon = "$%d.%d" % (scope.depth, len(scope.names))
                    scope.names[name] = canon
                return canon
            scope, first = scope.parent, False
        return name


def _bindings(node):
    """The names a function, lambda, comprehension or class body binds, and
    its global and nonlocal declarations. Nested scopes are not entered,
    except for the walrus targets of comprehensions (they bind here)."""
    binds, globals_, nonlocals = set(), set(), set()
    if isinstance(node, _FUNCS + (ast.Lambda,)):
        a = node.args
        for arg in list(getattr(a, "posonlyargs", [])) + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
            if arg is not None:
                binds.add(arg.arg)
        roots = node.body if isinstance(node.body, list) else [node.body]
    elif isinstance(node, ast.ClassDef):
        roots = node.body
    else:  # a comprehension
        for gen in node.generators:
            for sub in ast.walk(gen.target):
                if isinstance(sub, ast.Name):
                    binds.add(sub.id)
        return binds, globals_, nonlocals
    stack = list(reversed(roots))
    while stack:
        sub = stack.pop()
        if isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load):
            binds.add(sub.id)
        elif isinstance(sub, ast.Global):
            globals_.update(sub.names)
        elif isinstance(sub, ast.Nonlocal):
            nonlocals.update(sub.names)
        elif isinstance(sub, ast.ExceptHandler) and sub.name:
            binds.add(sub.name)
        elif _MATCH_AS is not None and isinstance(sub, (_MATCH_AS, _MATCH_STAR)) and sub.name:
            binds.add(sub.name)
        elif _MATCH_MAPPING is not None and isinstance(sub, _MATCH_MAPPING) and sub.rest:
            binds.add(sub.rest)
        if isinstance(sub, _FUNCS + (ast.ClassDef,)):
            binds.add(sub.name)
            # decorators, defaults, annotations and bases belong to this scope
            outer = list(sub.decorator_list)
            if isinstance(sub, ast.ClassDef):
                outer += sub.bases + [k.value for k in sub.keywords]
            else:
                outer += _arg_outer(sub)
            stack.extend(reversed(outer))
            continue
        if isinstance(sub, ast.Lambda):
            stack.extend(reversed(sub.args.defaults + [d for d in sub.args.kw_defaults if d is not None]))
            continue
        if isinstance(sub, _COMPS):
            stack.append(sub.generators[0].iter)
            for inner in ast.walk(sub):
                if isinstance(inner, ast.NamedExpr) and isinstance(inner.target, ast.Name):
                    binds.add(inner.target.id)
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(sub))))
    return binds, globals_, nonlocals


def _arg_outer(fn):
    """What a def evaluates in its enclosing scope besides decorators:
    defaults and annotations."""
    a = fn.args
    out = list(a.defaults) + [d for d in a.kw_defaults if d is not None]
    for arg in list(getattr(a, "posonlyargs", [])) + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
        if arg is not None and arg.annotation is not None:
            out.append(arg.annotation)
    if fn.returns is not None:
        out.append(fn.returns)
    return out


class _Writer:
    """Writes the canonical dump, renaming local names through the scopes."""

    def __init__(self):
        self.parts = []

    def dump(self, tree):
        self.node(tree, _Scope(None, "module", set(), set(), set()))
        return "".join(self.parts)

    def value(self, v, scope):
        if isinstance(v, ast.AST):
            self.node(v, scope)
        elif isinstance(v, list):
            self.parts.append("[")
            for i, item in enumerate(v):
                if i:
                    self.parts.append(",")
                self.value(item, scope)
            self.parts.append("]")
        else:
            self.parts.append("%s:%r" % (type(v).__name__, v))

    def fields(self, node, scope, rename=None):
        """Write node's fields in order; empty fields are left out. rename
        maps a field to the value written instead."""
        self.parts.append(type(node).__name__ + "(")
        first = True
        for name in node._fields:
            if name in _SKIP_FIELDS:
                continue
            v = getattr(node, name, None)
            if v is None or (isinstance(v, list) and not v):
                continue
            if not first:
                self.parts.append(",")
            first = False
            self.parts.append(name + "=")
            if rename and name in rename:
                self.value(rename[name], scope)
            else:
                self.value(v, scope)
        self.parts.append(")")

    def node(self, node, scope):
        if isinstance(node, ast.Name):
            self.fields(node, scope, rename={"id": scope.resolve(node.id)})
        elif isinstance(node, ast.arg):
            self.fields(node, scope, rename={"arg": scope.resolve(node.arg)})
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            self.fields(node, scope, rename={"names": [scope.resolve(n) for n in node.names]})
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self.fields(node, scope, rename={"name": scope.resolve(node.name)})
        elif _MATCH_AS is not None and isinstance(node, (_MATCH_AS, _MATCH_STAR)) and node.name:
            self.fields(node, scope, rename={"name": scope.resolve(node.name)})
        elif _MATCH_MAPPING is not None and isinstance(node, _MATCH_MAPPING) and node.rest:
            self.fields(node, scope, rename={"rest": scope.resolve(node.rest)})
        elif isinstance(node, _FUNCS + (ast.ClassDef,)):
            self.definition(node, scope)
        elif isinstance(node, ast.Lambda):
            inner = _Scope(scope, "function", *_bindings(node))
            self.parts.append("Lambda(args=")
            self.arguments(node.args, scope, inner)
            self.parts.append(",body=")
            self.node(node.body, inner)
            self.parts.append(")")
        elif isinstance(node, _COMPS):
            self.comprehension(node, scope)
        else:
            self.fields(node, scope)

    def definition(self, node, scope):
        """A def or class: its name binds in scope, decorators, defaults,
        annotations and bases are written in scope, the body in its own."""
        kind = "class" if isinstance(node, ast.ClassDef) else "function"
        inner = _Scope(scope, kind, *_bindings(node))
        self.parts.append("%s(name=" % type(node).__name__)
        self.value(scope.resolve(node.name), scope)
        if node.decorator_list:
            self.parts.append(",decorator_list=")
            self.value(node.decorator_list, scope)
        if kind == "class":
            for field in ("bases", "keywords"):
                if getattr(node, field):
                    self.parts.append("," + field + "=")
                    self.value(getattr(node, field), scope)
        else:
            self.parts.append(",args=")
            self.arguments(node.args, scope, inner)
            if node.returns is not None:
                self.parts.append(",returns=")
                self.node(node.returns, scope)
        tp = getattr(node, "type_params", None)
        if tp:
            self.parts.append(",type_params=")
            self.value(tp, scope)
        self.parts.append(",body=")
        self.value(node.body, inner)
        self.parts.append(")")

    def arguments(self, a, outer, inner):
        """Parameters (renamed in the inner scope, in order, so they take
        the first canonical names) with their annotations and defaults
        written in the outer scope."""
        self.parts.append("arguments(")
        for field in ("posonlyargs", "args", "vararg", "kwonlyargs", "kwarg"):
            v = getattr(a, field, None)
            items = v if isinstance(v, list) else ([v] if v is not None else [])
            self.parts.append(field + "=[")
            for i, arg in enumerate(items):
                if i:
                    self.parts.append(",")
                self.parts.append("arg(arg=")
                self.value(inner.resolve(arg.arg), inner)
                if arg.annotation is not None:
                    self.parts.append(",annotation=")
                    self.node(arg.annotation, outer)
                self.parts.append(")")
            self.parts.append("],")
        self.parts.append("kw_defaults=")
        self.parts.append("[")
        for i, d in enumerate(a.kw_defaults):
            if i:
                self.parts.append(",")
            if d is None:
                self.parts.append("-")
            else:
                self.node(d, outer)
        self.parts.append("],defaults=")
        self.value(a.defaults, outer)
        self.parts.append(")")

    def comprehension(self, node, scope):
        """The first iterable is evaluated in the enclosing scope, the rest
        in the comprehension's own."""
        inner = _Scope(scope, "function", *_bindings(node))
        self.parts.append(type(node).__name__ + "(")
        for field in ("elt", "key", "value"):
            v = getattr(node, field, None)
            if v is not None:
                self.parts.append(field + "=")
                self.node(v, inner)
                self.parts.append(",")
        self.parts.append("generators=[")
        for i, gen in enumerate(node.generators):
            if i:
                self.parts.append(",")
            self.parts.append("comprehension(target=")
            self.node(gen.target, inner)
            self.parts.append(",iter=")
            self.node(gen.iter, scope if i == 0 else inner)
            self.parts.append(",ifs=")
            self.value(gen.ifs, inner)
            self.parts.append(",is_async=%d)" % gen.is_async)
        self.parts.append("])")


def normalize(data, path="<bundle>"):
    """The normalized dump of one source given as bytes."""
    tree = ast.parse(data, filename=path, mode="exec")
    return _Writer().dump(_strip_strings(tree))


def _one(entry):
    path = entry.get("path", "")
    try:
        return {"path": path, "norm": normalize(entry.get("source", "").encode("latin-1"), path)}
    except SyntaxError as exc:
        return {"path": path, "error": "SyntaxError: %s (line %d)" % (exc.msg or "invalid syntax", max(exc.lineno or 0, 0))}
    except (ValueError, RecursionError, MemoryError, OverflowError, UnicodeError) as exc:
        return {"path": path, "error": exc.__class__.__name__}


def _emit(obj):
    out = sys.stdout.buffer
    out.write(json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii"))
    out.write(b"\n")
    out.flush()


def main():
    # The dump recurses along the tree; ast.parse bounds its depth.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    for entry in request.get("files", []):
        _emit(_one(entry))


if __name__ == "__main__":
    main()
