"""astfacts: raw syntax facts about bundle sources, for the Go scanner.

Run as ``python3 -I -S -W ignore astfacts.py``. It reads one JSON object
from stdin::

    {"files": [{"path": "kernels/silu.py", "source": "..."}],
     "packages": ["torch", "triton"]}

where ``source`` carries the file's bytes, each byte as the code point of
the same value (latin-1), so that ``ast.parse`` decodes the bytes exactly as
``import`` would (BOM, PEP 263 coding cookie). It writes JSON lines to
stdout: first a header (interpreter version, standard-library module names,
every importable top-level module name, the submodules of ``packages``:
see astenv), then one line per file in input order with either a parse
error or lists of facts: imports, calls of bare names, attribute chains
(also those a literal format string reaches), store targets, bare names,
classes and methods (astscope), aliases (a name bound to what a name chain
holds) and flows (a name chain whose object goes where no name follows it:
astflow). Each line is flushed before the next file is parsed, so that when
the parser itself crashes on a hostile file the caller knows which file it
was.

This script never opens a bundle file, never imports or executes candidate
code and decides nothing: it only calls ``ast.parse`` and walks the tree.
The policy lives in Go (internal/scan), which treats this output as
untrusted input. It must run on Python 3.9 to 3.13 with the standard
library only; its helper modules (astflow, astscope, astenv) sit next to it
in the parser's private directory.
"""

import ast
import builtins
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(globals().get("__file__") or sys.argv[0])))

import astenv  # noqa: E402
import astmangle  # noqa: E402
from astflow import (  # noqa: E402
    _DEF_NODES, _DEFINING, _MATCH, _Collector, _captures_all, _chain, _ctx,
    _pos, _reachable, _roots, _stray_flows, _target, _unchain,
)
from astscope import Scopes, _decorator, free_names  # noqa: E402
import asttyping  # noqa: E402

_MATCH_CLASS = getattr(ast, "MatchClass", None)
# Builtin names whose uses the policy judges; for these a bare name says
# whether an enclosing function binds it ("local": def f(input): ...).
_BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("_"))
_ALL_BUILTINS = frozenset(dir(builtins))
# A string constant or keyword argument that is exactly a dunder name.
_DUNDER = re.compile(r"\A__[A-Za-z0-9_]+__\Z")
_ATTR_BUILTINS = frozenset(("getattr", "setattr", "delattr", "hasattr"))
# String constants longer than this are not searched for format fields.
_MAX_FORMAT = 1 << 16
# Triton's inline assembly builders, and the longest assembly text reported.
_ASM_NAMES = frozenset(("inline_asm_elementwise", "inline_asm"))
_MAX_ASM = 1 << 16
_LITERALS = (ast.Constant, ast.Dict, ast.List, ast.Set, ast.Tuple, ast.ListComp,
             ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.JoinedStr, ast.Lambda)
_KINDS = {ast.FunctionDef: "function", ast.AsyncFunctionDef: "function",
          ast.ClassDef: "class", ast.arg: "param"}


def _object_setattr(node):
    """Whether call node is object.__setattr__(x, "name", v): three
    positional arguments, a literal name, no keywords."""
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "__setattr__" and isinstance(f.value, ast.Name)
            and f.value.id == "object" and len(node.args) == 3 and not node.keywords
            and not any(isinstance(a, ast.Starred) for a in node.args)
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str))


def _call(node, module_level, scopes, func=None):
    """The fact of a call of a name (func: the builtin it is judged as,
    for object.__setattr__)."""
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
    target_roots = []
    receiver = 0
    if args and isinstance(args[0], ast.Name):
        receiver = scopes.receiver(args[0])
    if args and not isinstance(args[0], ast.Starred):
        target = _chain(args[0])
        if not target:
            target_roots = _roots(args[0])
    line, col = _pos(node)
    fact = {
        "func": func or node.func.id,
        "nargs": len(args),
        "nkeywords": len(node.keywords),
        "starred": starred,
        "target": target,
        "target_roots": target_roots,
        "name_literal": name_literal,
        "name_arg": name_arg,
        "module_level": module_level,
        "line": line,
        "col": col,
    }
    _set(fact, "target_receiver", receiver)
    if func is None and node.func.id in _BUILTIN_NAMES:
        _set(fact, "local", scopes.local(node.func))
    _set(fact, "decorator", _decorates(node, scopes))
    return fact


def _decorates(node, scopes):
    """Whether a call, a name or an attribute chain is a whole decorator
    expression of a def or class (@wraps(f), @final above a def): it, or
    what it returns, is applied to that statement's own function or class,
    nothing else."""
    owner = scopes.parent.get(id(node))
    return isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and any(
        d is node for d in owner.decorator_list)


def _value(node):
    """What a name is assigned: a call (with its callee chain), a literal
    (display, comprehension, constant, lambda) or anything else ("other",
    left out of the facts)."""
    if isinstance(node, ast.Call):
        return {"kind": "call", "callee": _chain(node.func)}
    if isinstance(node, _LITERALS):
        return {"kind": "literal", "callee": ""}
    return {"kind": "other", "callee": ""}


def _format_attrs(text):
    """Attribute names the replacement fields of a format string read
    (``"{0.__class__}".format(x)`` reads x.__class__), one list per field."""
    try:
        import _string
    except ImportError:  # pragma: no cover
        return []
    out = []
    pending = [text]
    while pending and len(out) < 256:
        try:
            fields = list(_string.formatter_parser(pending.pop()))
        except (ValueError, TypeError):
            continue
        for _, field, spec, _ in fields:
            if spec and "{" in spec:
                pending.append(spec)
            if not field:
                continue
            try:
                _, rest = _string.formatter_field_name_split(field)
                attrs = [key for is_attr, key in rest if is_attr]
            except (ValueError, TypeError):
                continue
            attrs = [a for a in attrs if isinstance(a, str) and a.isidentifier()]
            if attrs:
                out.append(attrs)
    return out


def _docstrings(tree):
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _slot_names(tree):
    """ids of the string constants that a class body's ``__slots__ = ...``
    lists (the value a string or a tuple, list or set literal of them)."""
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for st in node.body:
            if isinstance(st, ast.Assign):
                targets, value = st.targets, st.value
            elif isinstance(st, ast.AnnAssign) and st.value is not None:
                targets, value = [st.target], st.value
            else:
                continue
            if len(targets) != 1 or not isinstance(targets[0], ast.Name) or targets[0].id != "__slots__":
                continue
            items = value.elts if isinstance(value, (ast.Tuple, ast.List, ast.Set)) else [value]
            for e in items:
                if isinstance(e, ast.Constant) and isinstance(e.value, str):
                    out.add(id(e))
    return out


def _attribute(node, scopes, consumed, module_level):
    """The fact of a maximal attribute chain ending at node."""
    line, col = _pos(node)
    inner, attrs = _unchain(node, consumed)
    fact = {"base": "", "attrs": attrs, "ctx": _ctx(node), "module_level": module_level,
            "line": line, "col": col}
    if isinstance(inner, ast.Name):
        consumed.add(id(inner))
        fact["base"] = inner.id
        if inner.id in _BUILTIN_NAMES:
            _set(fact, "local", scopes.local(inner))
        _set(fact, "receiver", scopes.receiver(inner))
    elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name):
        fact["root_call"] = inner.func.id
        if inner.func.id == "super" and not inner.args:
            _set(fact, "root_arg", scopes.enclosing_method(inner))
        elif len(inner.args) == 2 and isinstance(inner.args[1], ast.Name):
            _set(fact, "root_arg", scopes.receiver(inner.args[1]))
    parent = scopes.parent.get(id(node))
    if isinstance(parent, ast.Call) and parent.func is node:
        fact["called"] = True
        _set(fact, "nargs", len(parent.args))
        _set(fact, "nkeywords", len(parent.keywords))
        _set(fact, "starred", any(isinstance(a, ast.Starred) for a in parent.args)
             or any(k.arg is None for k in parent.keywords))
        if parent.args and isinstance(parent.args[0], ast.Name):
            _set(fact, "arg0", scopes.receiver(parent.args[0]))
        if parent.args and not isinstance(parent.args[0], ast.Starred):
            # typing.final(f): what a library function that stores into
            # its argument is applied to
            _set(fact, "target", _chain(parent.args[0]))
        _set(fact, "decorator", _decorates(parent, scopes))
    else:
        # @typing.final above a def: the chain itself is the decorator
        _set(fact, "decorator", _decorates(node, scopes))
    return fact


def _asm(node, consts):
    """The fact of a call of an inline assembly builder (a callee named as
    one, bare or as an attribute), or None: whether its assembly text
    (the first positional argument, or asm=) can be read here, and every
    text it can be: a string literal, a conditional expression of such,
    or a name the module binds once, to a literal (consts)."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name not in _ASM_NAMES:
        return None
    arg = None
    if node.args:
        if not isinstance(node.args[0], ast.Starred):
            arg = node.args[0]
    else:
        arg = next((k.value for k in node.keywords if k.arg == "asm"), None)
    texts = _asm_texts(arg, consts)
    text = "\n".join(texts) if texts is not None else ""
    literal = texts is not None and len(text) <= _MAX_ASM
    line, col = _pos(node)
    return {"literal": literal, "text": text if literal else "", "line": line, "col": col}


def _asm_texts(node, consts):
    """The strings an assembly text argument can be, or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        a, b = _asm_texts(node.body, consts), _asm_texts(node.orelse, consts)
        return a + b if a is not None and b is not None else None
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    return None


def _literal_consts(tree):
    """Names the module binds exactly once, at its top level, to a string
    literal (NAME = "..."), and nowhere else stores, deletes or declares
    global or nonlocal: name -> [the string]."""
    found = {}
    for st in tree.body:
        if (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)):
            found.setdefault(st.targets[0].id, []).append(st.value.value)
    stores = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            stores[n.id] = stores.get(n.id, 0) + 1
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            for g in n.names:
                stores[g] = stores.get(g, 0) + 2
        elif isinstance(n, ast.arg):
            stores[n.arg] = stores.get(n.arg, 0) + 2
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler)):
            if n.name:
                stores[n.name] = stores.get(n.name, 0) + 2
        elif _MATCH is not None and type(n).__name__ in ("MatchAs", "MatchStar", "MatchMapping"):
            bound = getattr(n, "name", None) or getattr(n, "rest", None)
            if bound:
                stores[bound] = stores.get(bound, 0) + 2
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                local = a.asname or a.name.split(".")[0]
                stores[local] = stores.get(local, 0) + 2
    return {k: v for k, v in found.items() if len(v) == 1 and stores.get(k) == 1}


def _set(fact, key, value):
    """Set an optional fact field; zero values are left out (the Go side
    reads a missing field as zero), which keeps the output small."""
    if value:
        fact[key] = value


def _facts(tree):
    imports, calls, attributes, stores, names, asms = [], [], [], [], [], []
    consts = _literal_consts(tree)
    scopes = Scopes(tree)
    docs = _docstrings(tree)
    slots = _slot_names(tree)
    extra = _Collector()
    consumed = set()  # ids of Name/Attribute nodes already reported as part of a chain
    name_args = set()  # ids of getattr/setattr/delattr/hasattr name arguments
    values = {}  # id(Name target) -> what an assignment binds it to
    stored = []  # (index into names, id(Name node)) of names with a store context
    top = set(id(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))
    stack = [(tree, True)]
    while stack:
        node, module_level = stack.pop()
        line, col = _pos(node)
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports.append({
                    "module": alias.name, "level": 0, "from": False,
                    "names": [], "asname": alias.asname or "", "top": id(node) in top,
                    "line": line, "col": col,
                })
        elif isinstance(node, ast.ImportFrom):
            imports.append({
                "module": node.module or "", "level": node.level or 0,
                "from": True, "asname": "", "top": id(node) in top,
                "names": [{"name": a.name, "asname": a.asname or ""} for a in node.names],
                "line": line, "col": col,
            })
        elif isinstance(node, ast.Call):
            asm = _asm(node, consts)
            if asm is not None:
                asms.append(asm)
            inner = node.func
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name):
                # f(a)(b, c, d): the result of a call called at once
                # (type(x)(name, bases, namespace) builds a class).
                fact = {"func": inner.func.id, "nargs": len(node.args), "nkeywords": len(node.keywords),
                        "starred": any(isinstance(a, ast.Starred) for a in node.args)
                        or any(k.arg is None for k in node.keywords),
                        "target": "", "target_roots": [], "name_literal": False, "name_arg": "",
                        "module_level": module_level, "of_result": True, "line": line, "col": col}
                if inner.func.id in _BUILTIN_NAMES:
                    _set(fact, "local", scopes.local(inner.func))
                calls.append(fact)
            if isinstance(node.func, ast.Name):
                consumed.add(id(node.func))
                calls.append(_call(node, module_level, scopes))
                if node.func.id in _ATTR_BUILTINS and len(node.args) >= 2:
                    # getattr(x, "__name__"): the call's own rules judge it
                    name_args.add(id(node.args[1]))
            elif _object_setattr(node):
                # object.__setattr__(self, "name", v), the frozen
                # dataclass's own store in __post_init__: judged as
                # setattr(self, "name", v) is (ownership, dotted names).
                consumed.add(id(node.func))
                consumed.add(id(node.func.value))
                fact = _call(node, module_level, scopes, "setattr")
                _set(fact, "local", scopes.local(node.func.value))
                calls.append(fact)
                name_args.add(id(node.args[1]))
            elif isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "format_map") and not (
                    isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
                # A format string the scanner cannot read: its fields may
                # read any attribute ("{0.__glo" + "bals__}").
                attributes.append({"base": "", "attrs": [node.func.attr], "ctx": "load",
                                   "module_level": module_level, "format": True, "dynamic": True,
                                   "line": line, "col": col})
        elif isinstance(node, ast.Attribute):
            if id(node) not in consumed:
                attributes.append(_attribute(node, scopes, consumed, module_level))
        elif isinstance(node, ast.Name):
            if id(node) not in consumed:
                if _ctx(node) == "store":
                    stored.append((len(names), id(node)))
                names.append({"name": node.id, "ctx": _ctx(node), "line": line, "col": col})
                if _ctx(node) == "load" and node.id in _BUILTIN_NAMES:
                    _set(names[-1], "local", scopes.local(node))
                if _ctx(node) == "load":
                    # @final above a def: the name itself is the decorator
                    _set(names[-1], "decorator", _decorates(node, scopes))
        elif isinstance(node, _DEFINING):
            # A def, class, parameter or type parameter binds its name.
            name = node.arg if isinstance(node, ast.arg) else node.name
            if name:
                fact = {"name": name, "ctx": "def", "kind": _KINDS.get(type(node), "typeparam"),
                        "line": line, "col": col}
                if getattr(node, "decorator_list", None):
                    fact["decorators"] = [_decorator(d) for d in node.decorator_list]
                names.append(fact)
        elif isinstance(node, ast.ExceptHandler):
            if node.name:
                # "except E as n" unbinds n when the handler ends.
                names.append({"name": node.name, "ctx": "del", "line": line, "col": col})
        elif _MATCH_CLASS is not None and isinstance(node, _MATCH_CLASS):
            # case C(name=pattern) reads subject.name like an attribute.
            for attr in node.kwd_attrs:
                attributes.append({"base": "", "attrs": [attr], "ctx": "load",
                                   "module_level": module_level, "line": line, "col": col})
        elif _MATCH is not None and isinstance(node, _MATCH):
            for name, p in _captures_all(node):
                pline, pcol = _pos(p)
                names.append({"name": name, "ctx": "store", "line": pline, "col": pcol})
        elif isinstance(node, ast.keyword):
            if node.arg and _DUNDER.match(node.arg):
                # f(__reduce_ex__=...): a class namespace built by dict()
                attributes.append({"base": "", "attrs": [node.arg], "ctx": "load", "module_level": module_level,
                                   "string": True, "line": line, "col": col})
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docs and id(node) not in name_args and _DUNDER.match(node.value):
                # "__globals__" as data: a class namespace dict, __match_args__
                fact = {"base": "", "attrs": [node.value], "ctx": "load", "module_level": module_level,
                        "string": True, "line": line, "col": col}
                _set(fact, "slots", id(node) in slots)
                attributes.append(fact)
            if id(node) not in docs and "{" in node.value and len(node.value) <= _MAX_FORMAT:
                for attrs in _format_attrs(node.value):
                    attributes.append({"base": "", "attrs": attrs, "ctx": "load", "module_level": module_level,
                                       "format": True, "line": line, "col": col})
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    values[id(t)] = _value(node.value)
        if isinstance(node, (ast.Attribute, ast.Subscript)) and _ctx(node) != "load":
            root_node, root, shown, roots, links = _target(node)
            fact = {"root": root, "target": shown, "roots": roots, "links": links,
                    "ctx": _ctx(node), "line": line, "col": col}
            if root:
                _set(fact, "receiver", scopes.receiver(root_node))
            stores.append(fact)
        extra.visit(node)
        inner_level = module_level and not isinstance(node, _DEF_NODES)
        children = list(ast.iter_child_nodes(node))
        for child in reversed(children):
            stack.append((child, inner_level))
    # What the names used as objects (roots of attribute chains and
    # stores, getattr/setattr/delattr targets) are assigned, when it is a
    # call or a literal (only theirs: the rest is only volume).
    roots = set(s["root"] for s in stores if s["root"])
    roots.update(a["base"] for a in attributes if a["base"])
    roots.update(c["target"].split(".", 1)[0] for c in calls
                 if c["func"] in ("getattr", "setattr", "delattr") and c["target"])
    # Names called with a class's signature (name, bases, namespace): what
    # they hold decides whether the call builds a class.
    # (the same test as the Go side's: two or more arguments, a star or a
    # keyword).
    roots.update(c["func"] for c in calls
                 if not c.get("of_result") and (c["nargs"] >= 2 or c["starred"] or c["nkeywords"] > 0))
    # Names a call takes as its one argument: an argument-mutating callable
    # (typing.final, dataclasses.dataclass) may be applied to a name the
    # file rebinds to that call's result (Cfg = dataclasses.dataclass(Cfg)).
    roots.update(x["target"].split(".", 1)[0] for x in calls + attributes
                 if x.get("target") and x.get("nargs") == 1)
    for i, nid in stored:
        value = values.get(nid)
        if names[i]["name"] in roots and value is not None and value["kind"] != "other":
            names[i]["value"] = value
    aliases, flows = _reachable(imports, extra.aliases, extra.flows + _stray_flows(tree))
    return {
        "imports": imports, "calls": calls, "attributes": attributes,
        "stores": stores, "names": names, "aliases": aliases,
        "flows": flows, "classes": scopes.classes, "methods": scopes.methods,
        "free": [_free(n, node) for n, node in free_names(tree, _ALL_BUILTINS)], "asm": asms,
        **asttyping.facts(tree),
    }


def _free(name, node):
    line, col = _pos(node)
    return {"name": name, "line": line, "col": col}


def _one(entry):
    path = entry.get("path", "")
    out = {"path": path, "error": None, "imports": [], "calls": [],
           "attributes": [], "stores": [], "names": [], "aliases": [], "flows": [],
           "classes": [], "methods": [], "free": [], "asm": []}
    try:
        data = entry.get("source", "").encode("latin-1")
        tree = ast.parse(data, filename=path, mode="exec")
        # names as the compiler spells them inside classes (astmangle)
        astmangle.mangle(tree)
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
    path = astenv.search_path()
    packages = request.get("packages") or []
    _emit({"python": "%d.%d.%d" % tuple(sys.version_info[:3]), "stdlib": sorted(stdlib),
           "importable": astenv.importable(path), "submodules": astenv.submodules(packages, path)})
    for entry in request.get("files", []):
        _emit(_one(entry))


if __name__ == "__main__":
    main()
