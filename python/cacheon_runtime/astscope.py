"""astscope: class, method and receiver facts for astfacts.

Syntax only, like the rest of the parse script: which classes a file
defines (bases, keywords, the method names its body uses as plain names),
which functions are methods (their decorators), and, for a bare name at a
given place, whether it is the receiver of a method: the first positional
parameter of a function defined directly in a class body, seen through
Python's scoping rules (nested functions, lambdas and comprehensions see
it; default values and decorators do not), never bound anywhere else in
that method. What those facts permit is decided in Go (internal/scan).
"""

import ast

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_MATCH_AS = getattr(ast, "MatchAs", None)
_MATCH_STAR = getattr(ast, "MatchStar", None)
_MATCH_MAPPING = getattr(ast, "MatchMapping", None)
_TYPE_PARAMS = tuple(getattr(ast, n) for n in ("TypeVar", "ParamSpec", "TypeVarTuple") if hasattr(ast, n))
_PROPERTY_PARTS = ("setter", "getter", "deleter")


def _chain(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


def _bound_names(node):
    """Names node itself binds (not those of its children)."""
    if isinstance(node, ast.Name):
        return (node.id,) if not isinstance(node.ctx, ast.Load) else ()
    if isinstance(node, ast.arg):
        return (node.arg,)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (node.name,)
    if isinstance(node, ast.ExceptHandler):
        return (node.name,) if node.name else ()
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return tuple((a.asname or a.name).split(".", 1)[0] for a in node.names)
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return tuple(node.names)
    if (_MATCH_AS is not None and isinstance(node, _MATCH_AS)) or (
            _MATCH_STAR is not None and isinstance(node, _MATCH_STAR)):
        return (node.name,) if node.name else ()
    if _MATCH_MAPPING is not None and isinstance(node, _MATCH_MAPPING):
        return (node.rest,) if node.rest else ()
    if _TYPE_PARAMS and isinstance(node, _TYPE_PARAMS):
        return (node.name,)
    return ()


def _positional(fn):
    args = fn.args
    return list(getattr(args, "posonlyargs", [])) + list(args.args)


class Scopes:
    """Parents, scope bindings, classes and methods of one module tree."""

    def __init__(self, tree):
        self.tree = tree
        self.parent = {}
        self.binds = {}  # id(function) -> {name: count} over its whole subtree
        self.classes = []
        self.methods = []
        self.method_of = {}  # id(FunctionDef) -> 1-based index into methods
        self._own = {}  # id(function or lambda) -> names local to its own scope
        class_index = {}
        stack = [(tree, ())]
        while stack:
            node, funcs = stack.pop()
            for name in _bound_names(node):
                for f in funcs:  # a def binds its own name outside itself
                    counts = self.binds.setdefault(id(f), {})
                    counts[name] = counts.get(name, 0) + 1
            parent = self.parent.get(id(node))
            if isinstance(node, ast.ClassDef):
                class_index[id(node)] = len(self.classes) + 1
                self.classes.append(_class(node, parent is tree))
            elif isinstance(node, _FUNCS) and isinstance(parent, ast.ClassDef):
                self.method_of[id(node)] = len(self.methods) + 1
                self.methods.append({
                    "class": class_index[id(parent)], "name": node.name,
                    "decorators": [_decorator(d) for d in node.decorator_list],
                    "required": _required(node.args),
                    "line": node.lineno, "col": node.col_offset + 1,
                })
            inner = funcs + (node,) if isinstance(node, _SCOPES) else funcs
            children = list(ast.iter_child_nodes(node))
            for child in children:
                self.parent[id(child)] = node
            for child in reversed(children):
                stack.append((child, inner))

    def receiver(self, name_node):
        """1-based index of the method whose receiver the bare name is, else 0."""
        name = name_node.id
        child = name_node
        node = self.parent.get(id(name_node))
        while node is not None:
            if isinstance(node, _SCOPES):
                if inside_body(node, child):
                    counts = self.binds.get(id(node), {})
                    params = [a.arg for a in _positional(node)] if isinstance(node, _FUNCS) else []
                    if counts.get(name, 0) > 0:
                        idx = self.method_of.get(id(node), 0)
                        if idx and params and params[0] == name and counts[name] == 1:
                            return idx
                        return 0
            elif isinstance(node, ast.Module):
                return 0
            child = node
            node = self.parent.get(id(node))
        return 0

    def local(self, name_node):
        """True when a bare name, where it stands, names a binding of an
        enclosing function (a parameter, or bound anywhere in that
        function's own scope and not declared global), so that it cannot be
        the builtin of that name (def f(input): input.shape). Class bodies
        never count (their names fall back to the builtins), nor names a
        comprehension binds; decorators, defaults and annotations are seen
        from outside the function."""
        name = name_node.id
        child = name_node
        node = self.parent.get(id(name_node))
        while node is not None:
            if isinstance(node, _SCOPES) and inside_body(node, child):
                own = self._own.get(id(node))
                if own is None:
                    own = self._own[id(node)] = _own_bindings(node)
                if name in own:
                    return True
            elif isinstance(node, ast.Module):
                return False
            child = node
            node = self.parent.get(id(node))
        return False

    def enclosing_method(self, node):
        """1-based index of the method a node is directly in (through
        nested blocks, not nested functions or lambdas), else 0."""
        cur = self.parent.get(id(node))
        while cur is not None:
            if isinstance(cur, _FUNCS):
                idx = self.method_of.get(id(cur), 0)
                if not idx:
                    return 0
                params = _positional(cur)
                if not params or self.binds.get(id(cur), {}).get(params[0].arg, 0) != 1:
                    return 0
                return idx
            if isinstance(cur, (ast.Lambda, ast.ClassDef, ast.Module)):
                return 0
            cur = self.parent.get(id(cur))
        return 0


def _own_bindings(fn):
    """The names local to a function's or lambda's own scope: its
    parameters and every name bound in its body outside nested scopes
    (nested def and class names included; comprehension targets not),
    less the names it declares global."""
    a = fn.args
    names = {x.arg for x in list(getattr(a, "posonlyargs", [])) + list(a.args) + list(a.kwonlyargs)}
    for x in (a.vararg, a.kwarg):
        if x is not None:
            names.add(x.arg)
    declared_global = set()
    stack = list(fn.body) if isinstance(fn.body, list) else [fn.body]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Global):
            declared_global.update(n.names)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            stack.extend(n.decorator_list)
            if not isinstance(n, ast.ClassDef):
                stack.extend(list(n.args.defaults) + [d for d in n.args.kw_defaults if d is not None])
            else:
                stack.extend(list(n.bases) + [k.value for k in n.keywords])
            continue
        elif isinstance(n, ast.Lambda):
            stack.extend(list(n.args.defaults) + [d for d in n.args.kw_defaults if d is not None])
            continue
        elif isinstance(n, ast.comprehension):
            # its targets are the comprehension's own; its iterables and
            # conditions may hold := targets, which bind here
            stack.extend([n.iter] + list(n.ifs))
            continue
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for al in n.names:
                if al.name != "*":
                    names.add((al.asname or al.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif type(n).__name__ in ("MatchAs", "MatchStar") and getattr(n, "name", None):
            names.add(n.name)
        elif type(n).__name__ == "MatchMapping" and getattr(n, "rest", None):
            names.add(n.rest)
        stack.extend(ast.iter_child_nodes(n))
    return names - declared_global


def _base(node):
    """A base's name chain; a subscripted one (Generic[T], Base[int]) by
    what is subscripted, which is the class it derives from."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return _chain(node)


def _required(args):
    """How many arguments a call must pass for a def's body to run: its
    positional parameters without a default (self included) and its
    keyword-only ones without one."""
    positional = len(args.posonlyargs) + len(args.args) if hasattr(args, "posonlyargs") else len(args.args)
    return (positional - len(args.defaults)) + sum(1 for d in args.kw_defaults if d is None)


def _class(node, top):
    methods = set(s.name for s in node.body if isinstance(s, _FUNCS))
    # metaclass=<name chain> is reported as such; any other keyword (or a
    # metaclass that is not a name chain) as keywords.
    meta = [k for k in node.keywords if k.arg == "metaclass" and _chain(k.value)]
    return {
        "name": node.name,
        "bases": [_base(b) for b in node.bases],
        "keywords": len(meta) != len(node.keywords),
        "metaclass": _chain(meta[0].value) if meta else "",
        "decorators": [_decorator(d) for d in node.decorator_list],
        "refs": sorted(_class_refs(node, methods)),
        "top": top, "line": node.lineno, "col": node.col_offset + 1,
    }


def inside_body(fn, child):
    """Whether child (a direct child of fn) is in the function's own scope:
    its body, not its arguments (defaults, annotations), decorators,
    return annotation or type parameters, which the enclosing scope
    evaluates. Constant time in the body's length."""
    if isinstance(fn, ast.Lambda):
        return child is fn.body
    if child is fn.args or child is fn.returns:
        return False
    return not any(child is d for d in fn.decorator_list) and not any(
        child is t for t in getattr(fn, "type_params", ()))


def _decorator(node):
    call = isinstance(node, ast.Call)
    target = node.func if call else node
    return {"chain": _chain(target), "call": call}


def _class_refs(cls, methods):
    """Method names of cls loaded as plain names in its own scope (the
    class body, not nested functions, lambdas or comprehensions), except
    the ``@prop.setter``-style decorators of properties."""
    out = set()
    stack = list(cls.body) + list(cls.decorator_list) + list(cls.bases)
    stack += [k.value for k in cls.keywords]
    while stack:
        node = stack.pop()
        if isinstance(node, _FUNCS):
            for d in node.decorator_list:
                if (isinstance(d, ast.Attribute) and d.attr in _PROPERTY_PARTS
                        and isinstance(d.value, ast.Name)):
                    continue
                stack.append(d)
            stack.extend(node.args.defaults)
            stack.extend(d for d in node.args.kw_defaults if d is not None)
            continue
        if isinstance(node, (ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
                             ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in methods:
            out.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return out


# Names every module has without a statement binding them, those a
# class body and its methods have (the implicit __class__ cell), and the
# builtins the site module adds (the parser runs without it; the forbidden
# ones have their own rule).
_IMPLICIT = frozenset((
    "help", "license", "credits", "copyright", "exit", "quit",
    "__name__", "__file__", "__doc__", "__package__", "__spec__", "__loader__", "__path__",
    "__builtins__", "__annotations__", "__cached__", "__module__", "__qualname__", "__class__",
    "__dict__", "__debug__"))


def free_names(tree, builtin_names):
    """Names the file reads that no statement of it binds, in any scope,
    and that are no builtin or implicit module name: [(name, node)], the
    first read of each. The interpreter finds such a name only through
    what the scanner does not see (a package's submodule set as an
    attribute of its __init__, rt51a). Names read only inside annotations
    are left out: an annotation is inert (its value lands in
    __annotations__, which bundles cannot read), and under
    ``from __future__ import annotations`` it is never evaluated."""
    bound = set()
    annotation_nodes = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(_bound_names(node))
        notes = []
        if isinstance(node, ast.arg) and node.annotation is not None:
            notes.append(node.annotation)
        if isinstance(node, _FUNCS) and node.returns is not None:
            notes.append(node.returns)
        if isinstance(node, ast.AnnAssign):
            notes.append(node.annotation)
        for n in notes:
            annotation_nodes.update(id(x) for x in ast.walk(n))
    out, seen = [], set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound
                and node.id not in builtin_names and node.id not in _IMPLICIT and node.id not in seen
                and id(node) not in annotation_nodes):
            seen.add(node.id)
            out.append((node.id, node))
    out.sort(key=lambda p: (p[1].lineno, p[1].col_offset))
    return out
