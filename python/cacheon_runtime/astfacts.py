"""astfacts: raw syntax facts about bundle sources, for the Go scanner.

Run as ``python3 -I -S -W ignore astfacts.py``. It reads one JSON object
from stdin::

    {"files": [{"path": "kernels/silu.py", "source": "..."}]}

where ``source`` carries the file's bytes, each byte as the code point of
the same value (latin-1), so that ``ast.parse`` decodes the bytes exactly as
``import`` would (BOM, PEP 263 coding cookie). It writes JSON lines to
stdout: first a header (interpreter version, standard-library module names),
then one line per file in input order with either a parse error or lists of
facts. Each line is flushed before the next file is parsed, so that when the
parser itself crashes on a hostile file the caller knows which file it was.

This script never opens a file, never imports or executes candidate code and
decides nothing: it only calls ``ast.parse`` and walks the tree. The policy
lives in Go (internal/scan), which treats this output as untrusted input.
It must run on Python 3.9 to 3.12 with the standard library only.
"""

import ast
import json
import sys

_DEF_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _pos(node):
    """Return (line, col) with a 1-based column, 0 when unknown."""
    line = getattr(node, "lineno", 0) or 0
    col = getattr(node, "col_offset", -1)
    if col is None:
        col = -1
    return line, col + 1


def _name_chain(node):
    """Dotted name of a Name/Attribute chain rooted at a Name, else ""."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    parts.reverse()
    return ".".join(parts)


def _target(node):
    """Root name and display form of an attribute/subscript store target."""
    parts = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            parts.append("." + node.attr)
        else:
            parts.append("[...]")
        node = node.value
    parts.reverse()
    if isinstance(node, ast.Name):
        return node.id, node.id + "".join(parts)
    return "", "<expr>" + "".join(parts)


def _ctx(node):
    ctx = getattr(node, "ctx", None)
    if isinstance(ctx, ast.Store):
        return "store"
    if isinstance(ctx, ast.Del):
        return "del"
    return "load"


def _call(node, module_level):
    args = node.args
    starred = any(isinstance(a, ast.Starred) for a in args) or any(
        k.arg is None for k in node.keywords
    )
    name_literal = False
    name_arg = ""
    if len(args) >= 2 and not starred:
        second = args[1]
        if isinstance(second, ast.Constant) and isinstance(second.value, str):
            name_literal = True
            name_arg = second.value
    target = ""
    if args and not isinstance(args[0], ast.Starred):
        target = _name_chain(args[0])
    line, col = _pos(node)
    return {
        "func": node.func.id,
        "nargs": len(args),
        "nkeywords": len(node.keywords),
        "starred": starred,
        "target": target,
        "name_literal": name_literal,
        "name_arg": name_arg,
        "module_level": module_level,
        "line": line,
        "col": col,
    }


def _facts(tree):
    imports, calls, attributes, stores, names = [], [], [], [], []
    consumed = set()  # ids of Name/Attribute nodes already reported as part of a chain
    stack = [(tree, True)]
    while stack:
        node, module_level = stack.pop()
        line, col = _pos(node)
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports.append({
                    "module": alias.name, "level": 0, "from": False,
                    "names": [], "asname": alias.asname or "",
                    "line": line, "col": col,
                })
        elif isinstance(node, ast.ImportFrom):
            imports.append({
                "module": node.module or "", "level": node.level or 0,
                "from": True, "asname": "",
                "names": [{"name": a.name, "asname": a.asname or ""} for a in node.names],
                "line": line, "col": col,
            })
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                consumed.add(id(node.func))
                calls.append(_call(node, module_level))
        elif isinstance(node, ast.Attribute):
            if id(node) not in consumed:
                attrs = [node.attr]
                inner = node.value
                while isinstance(inner, ast.Attribute):
                    consumed.add(id(inner))
                    attrs.append(inner.attr)
                    inner = inner.value
                base = ""
                if isinstance(inner, ast.Name):
                    consumed.add(id(inner))
                    base = inner.id
                attrs.reverse()
                attributes.append({
                    "base": base, "attrs": attrs, "ctx": _ctx(node),
                    "module_level": module_level, "line": line, "col": col,
                })
        elif isinstance(node, ast.Name):
            if id(node) not in consumed:
                names.append({"name": node.id, "ctx": _ctx(node), "line": line, "col": col})
        if isinstance(node, (ast.Attribute, ast.Subscript)) and _ctx(node) != "load":
            root, shown = _target(node)
            stores.append({"root": root, "target": shown, "ctx": _ctx(node), "line": line, "col": col})
        inner_level = module_level and not isinstance(node, _DEF_NODES)
        children = list(ast.iter_child_nodes(node))
        for child in reversed(children):
            stack.append((child, inner_level))
    return {
        "imports": imports, "calls": calls, "attributes": attributes,
        "stores": stores, "names": names,
    }


def _one(entry):
    path = entry.get("path", "")
    out = {"path": path, "error": None, "imports": [], "calls": [],
           "attributes": [], "stores": [], "names": []}
    try:
        data = entry.get("source", "").encode("latin-1")
        tree = ast.parse(data, filename=path, mode="exec")
    except SyntaxError as exc:
        out["error"] = {"line": max(exc.lineno or 0, 0), "col": max(exc.offset or 0, 0),
                        "msg": str(exc.msg or exc.__class__.__name__)}
        return out
    except (ValueError, RecursionError, MemoryError, OverflowError, UnicodeError) as exc:
        out["error"] = {"line": 0, "col": 0, "msg": "%s: %s" % (exc.__class__.__name__, exc)}
        return out
    try:
        out.update(_facts(tree))
    except (RecursionError, MemoryError) as exc:
        out["error"] = {"line": 0, "col": 0, "msg": "%s: %s" % (exc.__class__.__name__, exc)}
    return out


def _emit(obj):
    out = sys.stdout.buffer
    out.write(json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii"))
    out.write(b"\n")
    out.flush()


def main():
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    stdlib.update(sys.builtin_module_names)
    _emit({"python": "%d.%d.%d" % tuple(sys.version_info[:3]), "stdlib": sorted(stdlib)})
    for entry in request.get("files", []):
        _emit(_one(entry))


if __name__ == "__main__":
    main()
