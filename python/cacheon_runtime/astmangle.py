"""astmangle: CPython's private-name mangling, applied to a parsed tree.

Inside a class, the compiler rewrites every identifier of the form
``__name`` (two leading underscores, not two trailing ones) to
``_Class__name``, Class being the innermost enclosing class's name without
its leading underscores (no rewrite when nothing is left of it). The
scanner's facts are made of names and attributes as written, so ``__t``
in a method of ``class Probe`` looked free where the interpreter reads
the module global ``_Probe__t``, and ``helper.__t`` looked like a missing
attribute where it reads ``helper._Probe__t`` (rt51a). ``mangle`` rewrites
the tree in place, as the compiler would, before any fact is taken:

- names (load, store, delete), attribute names, parameters, the names of
  functions and classes defined in a class, ``global``/``nonlocal`` names,
  ``except ... as`` names, match captures and a mapping pattern's rest;
- imports: the bound name, and the module name when it has no dot
  (``import __m`` imports ``_C__m``; ``import __m.x`` imports ``__m.x``
  and binds ``_C__m``, kept as written here: such a module is refused
  whatever its name); ``from __m import __x`` (or ``from .__m``)
  imports ``__x`` as ``_C__x`` from ``_C__m``;
- not rewritten, as the compiler does not: keyword-argument names of a
  call and a class pattern's attribute names.

A class's decorators, bases and keywords are evaluated in the enclosing
scope and take its class name; its body, the functions in it and their
defaults take its own. Standard library only; Python 3.9 to 3.13.
"""

import ast

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def mangled(name, private):
    """name as the compiler spells it inside class private (None: outside
    any class)."""
    if (private is None or not name or not name.startswith("__") or name.endswith("__")
            or "." in name):
        return name
    stripped = private.lstrip("_")
    if not stripped:
        return name
    return "_" + stripped + name


def mangle(tree):
    """Rewrite tree's identifiers in place as the compiler mangles them."""
    stack = [(tree, None)]
    while stack:
        node, private = stack.pop()
        inner = private
        if isinstance(node, ast.ClassDef):
            own = node.name  # the body mangles with the name as written
            node.name = mangled(node.name, private)
            for child in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                stack.append((child, private))
            for child in getattr(node, "type_params", None) or []:
                stack.append((child, private))
            for child in node.body:
                stack.append((child, own))
            continue
        if private is not None:
            _rename(node, private)
        for child in ast.iter_child_nodes(node):
            stack.append((child, inner))
    return tree


def _rename(node, private):
    if isinstance(node, ast.Name):
        node.id = mangled(node.id, private)
    elif isinstance(node, ast.Attribute):
        node.attr = mangled(node.attr, private)
    elif isinstance(node, _FUNCS):
        node.name = mangled(node.name, private)
    elif isinstance(node, ast.arg):
        node.arg = mangled(node.arg, private)
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        node.names = [mangled(n, private) for n in node.names]
    elif isinstance(node, ast.ExceptHandler):
        if node.name:
            node.name = mangled(node.name, private)
    elif isinstance(node, ast.Import):
        for a in node.names:
            if a.asname:
                a.asname = mangled(a.asname, private)
            a.name = mangled(a.name, private)  # a dotted name stays
    elif isinstance(node, ast.ImportFrom):
        if node.module:  # relative or not: `from .__m import y` imports ._C__m
            node.module = mangled(node.module, private)
        for a in node.names:
            if a.name != "*":
                a.name = mangled(a.name, private)
            if a.asname:
                a.asname = mangled(a.asname, private)
    else:
        for field in ("name", "rest"):  # MatchAs, MatchStar; MatchMapping
            kind = type(node).__name__
            if kind in ("MatchAs", "MatchStar", "MatchMapping") and isinstance(getattr(node, field, None), str):
                setattr(node, field, mangled(getattr(node, field), private))
