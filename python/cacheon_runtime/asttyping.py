"""asttyping: facts of the typing idioms honest kernels use, added to each
file's facts by astfacts.py (the scan's parse script):

- ``type_names``: each bare name ``type`` (load) that stands where only
  its identity counts: inside an annotation (a parameter's, a return's or
  an annotated assignment's), reached from the annotation's root through
  nothing but subscript slices of name chains (``Callable[[type], type]``:
  the chains are listed in ``generics``), list and tuple displays; or as
  the class argument of a two-argument call of the bare name
  ``isinstance``/``issubclass``, alone or inside tuple displays there
  (``call`` is the call's position, to find its call fact). A ``type``
  anywhere else (an argument of another call, an operand, a default, a
  base) is not listed.
- ``type_checking``: each ``if`` directly in the module body with no else
  branch, whose test is a bare name or a name's attribute (``test``, the
  dotted chain) and whose body holds only import statements, ``pass`` and
  string constants; ``imports`` are the positions of those imports.
- ``type_calls``: the calls ``type(x)`` whose result is used for its
  identity alone (``_type_calls``), in the form of ``type_names``.
- ``annotations``: the spans (line, col, end line, end col; columns
  1-based, end exclusive) of every annotation.

Like astfacts.py it only calls ``ast.parse`` and walks the tree; the Go
side decides and treats this output as untrusted input.
"""

import ast

from astflow import _pos
from astscope import _chain as _plain_chain

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_CLASSINFO = ("isinstance", "issubclass")


def _is_type(node):
    return isinstance(node, ast.Name) and node.id == "type" and isinstance(node.ctx, ast.Load)


def _annotation_roots(tree):
    """(annotation, place) for every annotation; place is "param",
    "return", or for an annotated assignment the scope it sits in:
    "module", "class" or "function"."""
    out = []
    stack = [(tree, "module")]
    while stack:
        node, scope = stack.pop()
        if isinstance(node, _FUNCS):
            a = node.args
            params = list(getattr(a, "posonlyargs", [])) + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
            out.extend((p.annotation, "param") for p in params if p is not None and p.annotation is not None)
            if node.returns is not None:
                out.append((node.returns, "return"))
        elif isinstance(node, ast.AnnAssign):
            out.append((node.annotation, scope))
        inner = scope
        if isinstance(node, ast.ClassDef):
            inner = "class"
        elif isinstance(node, _FUNCS + (ast.Lambda,)):
            inner = "function"
        for child in ast.iter_child_nodes(node):
            stack.append((child, inner))
    return out


def _annotation_types(root, place, out):
    stack = [(root, [])]
    while stack:
        node, generics = stack.pop()
        if _is_type(node):
            line, col = _pos(node)
            out.append({"line": line, "col": col, "where": "annotation", "place": place,
                        "generics": generics})
        elif isinstance(node, (ast.List, ast.Tuple)):
            stack.extend((e, generics) for e in node.elts)
        elif isinstance(node, ast.Subscript):
            chain = _plain_chain(node.value)
            inner = node.slice
            if type(inner).__name__ == "Index":  # Python 3.8's wrapper
                inner = inner.value
            if chain:
                stack.append((inner, generics + [chain]))


def _classinfo_types(tree, out):
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _CLASSINFO and len(node.args) == 2 and not node.keywords
                and not any(isinstance(a, ast.Starred) for a in node.args)):
            continue
        cline, ccol = _pos(node)
        stack = [node.args[1]]
        while stack:
            n = stack.pop()
            if _is_type(n):
                line, col = _pos(n)
                out.append({"line": line, "col": col, "where": "classinfo", "callee": node.func.id,
                            "call_line": cline, "call_col": ccol})
            elif isinstance(n, ast.Tuple):
                stack.extend(n.elts)


def _import_only(stmt):
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
        return True
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _type_checking(tree):
    out = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.If) or stmt.orelse:
            continue
        test = stmt.test
        if not (isinstance(test, ast.Name) or (isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name))):
            continue
        if not all(_import_only(s) for s in stmt.body):
            continue
        line, col = _pos(stmt)
        out.append({"test": _plain_chain(test), "line": line, "col": col,
                    "imports": [list(_pos(s)) for s in stmt.body if isinstance(s, (ast.Import, ast.ImportFrom))]})
    return out


_NAME_ATTRS = ("__name__", "__qualname__", "__module__")


def _type_calls(tree):
    """The calls type(x) (one positional argument) whose result is used
    for its identity alone: an operand of ``is``/``is not`` only, or read
    for its name (``where`` "identity"); or the class argument of a
    two-argument isinstance/issubclass call, alone or in a tuple display
    there (``where`` "classinfo", with the call's name and position: Go
    checks that the callee is the builtin, as for a bare ``type``). type(C)
    of a class C is its metaclass, type itself for most, so its result
    anywhere else (bound, passed, stored, returned, compared with ==,
    which calls the other operand's __eq__ with it) may build classes."""
    parents = {}
    for p in ast.walk(tree):
        for ch in ast.iter_child_nodes(p):
            parents[ch] = p
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type"
                and len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred)):
            continue
        line, col = _pos(node)
        p = parents.get(node)
        if isinstance(p, ast.Compare):
            if all(isinstance(op, (ast.Is, ast.IsNot)) for op in p.ops):
                out.append({"line": line, "col": col, "where": "identity"})
            continue
        if isinstance(p, ast.Attribute) and p.value is node:
            if p.attr in _NAME_ATTRS:
                out.append({"line": line, "col": col, "where": "identity"})
            continue
        if _formatted(node, p, parents):
            # formatted into a message (hs50b: f"expected a tensor, got
            # {type(x)}"): only its str() or repr() is taken, and a format
            # field's attribute reads have their own rules
            out.append({"line": line, "col": col, "where": "identity"})
            continue
        arg = node
        if isinstance(p, ast.Tuple):
            arg, p = p, parents.get(p)
        if (isinstance(p, ast.Call) and isinstance(p.func, ast.Name) and p.func.id in _CLASSINFO
                and len(p.args) == 2 and not p.keywords and p.args[1] is arg):
            cline, ccol = _pos(p)
            out.append({"line": line, "col": col, "where": "classinfo", "callee": p.func.id,
                        "call_line": cline, "call_col": ccol})
    return out


def _formatted(node, p, parents):
    """Whether the type(x) call node is only formatted into a string: an
    f-string's field, the right operand of % on a string literal (alone or
    in a tuple display), or an argument of a string literal's .format."""
    if isinstance(p, ast.FormattedValue) and p.value is node:
        return True
    arg = node
    if isinstance(p, ast.Tuple):
        arg, p = p, parents.get(p)
    if (isinstance(p, ast.BinOp) and isinstance(p.op, ast.Mod) and p.right is arg
            and isinstance(p.left, (ast.Constant, ast.JoinedStr)) and not isinstance(getattr(p.left, "value", ""), bytes)
            and (not isinstance(p.left, ast.Constant) or isinstance(p.left.value, str))):
        return True
    p = parents.get(node)
    return (isinstance(p, ast.Call) and node in p.args and isinstance(p.func, ast.Attribute)
            and p.func.attr == "format" and isinstance(p.func.value, ast.Constant)
            and isinstance(p.func.value.value, str))


def facts(tree):
    """The typing facts of a parsed file (empty lists left out)."""
    roots = _annotation_roots(tree)
    types = []
    for root, place in roots:
        _annotation_types(root, place, types)
    _classinfo_types(tree, types)
    spans = []
    for root, _ in roots:
        line, col = _pos(root)
        end_line = getattr(root, "end_lineno", None) or line
        end_col = getattr(root, "end_col_offset", None)
        spans.append([line, col, end_line, (end_col if end_col is not None else col) + 1])
    out = {}
    # Empty lists are left out (the Go side reads a missing list as empty).
    for key, value in (("type_names", types), ("type_checking", _type_checking(tree)), ("annotations", spans),
                       ("type_calls", _type_calls(tree))):
        if value:
            out[key] = value
    return out
