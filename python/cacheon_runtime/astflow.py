"""astflow: syntax helpers and the alias and flow facts of astfacts.

Name chains (``a.b.c``, with ``getattr(obj, "name")`` links), store targets,
and where the object of a name chain goes: aliases (a name bound to what a
chain holds) and flows (a chain whose object goes where no name follows it).
Syntax only; the rules are in Go (internal/scan).
"""

import ast

_DEF_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SEQ_NODES = (ast.List, ast.Tuple, ast.Set)
_COMP_NODES = (ast.ListComp, ast.SetComp, ast.GeneratorExp)
# Statement and pattern nodes of Python 3.10+ (absent on 3.9).
_MATCH = getattr(ast, "Match", None)
_MATCH_AS = getattr(ast, "MatchAs", None)
_MATCH_STAR = getattr(ast, "MatchStar", None)
_MATCH_MAPPING = getattr(ast, "MatchMapping", None)
# Nodes that bind the name they carry (type parameters: Python 3.12+).
_DEFINING = tuple([ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.arg] + [
    getattr(ast, n) for n in ("TypeVar", "ParamSpec", "TypeVarTuple") if hasattr(ast, n)])
# A getattr literal longer than this is not merged into a chain.
_MAX_LITERAL = 1024


def _pos(node):
    """Return (line, col) with a 1-based column, 0 when unknown."""
    line = getattr(node, "lineno", 0) or 0
    col = getattr(node, "col_offset", -1)
    if col is None:
        col = -1
    return line, col + 1


def _getattr_literal(node):
    """(object, name) of ``getattr(obj, "name"[, default])``, else None.

    Only the syntax is matched: whether ``getattr`` is the builtin is for the
    rules to judge. Such a call reads the attribute like ``obj.name`` does.
    """
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "getattr" and not node.keywords
            and len(node.args) in (2, 3)):
        return None
    if any(isinstance(a, ast.Starred) for a in node.args):
        return None
    name = node.args[1]
    if (isinstance(name, ast.Constant) and isinstance(name.value, str)
            and len(name.value) <= _MAX_LITERAL and name.value.isidentifier()):
        return node.args[0], name.value
    return None


def _unchain(node, consumed=None):
    """Follow a chain of Attribute links and ``getattr(obj, "name")`` calls
    down to its root: returns (root, attrs) with attrs root-side first.
    With consumed, every Attribute node walked is added to it by id."""
    attrs = []
    while True:
        if isinstance(node, ast.Attribute):
            if consumed is not None:
                consumed.add(id(node))
            attrs.append(node.attr)
            node = node.value
            continue
        lit = _getattr_literal(node)
        if lit is None:
            break
        node, attr = lit
        attrs.append(attr)
    attrs.reverse()
    return node, attrs


def _chain(node):
    """Dotted name of a Name/Attribute chain rooted at a Name, else "".

    A ``getattr(obj, "name")`` link counts as ``obj.name``.
    """
    root, attrs = _unchain(node)
    if not isinstance(root, ast.Name):
        return ""
    return ".".join([root.id] + attrs)


def _leaves(node):
    """Name chains whose object the value of node may be, in source order.

    Follows conditional and boolean operators and assignment expressions;
    a call result, a subscript or a container literal is not one of its
    parts' objects (containers are reported as flows instead).
    """
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.IfExp):
            stack.append(n.orelse)
            stack.append(n.body)
        elif isinstance(n, ast.BoolOp):
            # a and b is a when a is false, never a module (always true):
            # of an and, only the last operand may be the value
            stack.extend(reversed(n.values) if isinstance(n.op, ast.Or) else n.values[-1:])
        elif isinstance(n, (ast.NamedExpr, ast.Starred)):
            stack.append(n.value)
        else:
            chain = _chain(n)
            if chain:
                out.append(chain)
    return out


def _roots(node):
    """Every name the object of node may have been reached from, sorted.

    Used for a store target that does not start at a name: a call result
    counts as reached from its callee (``getattr(o, "x")``: from o), an item
    from its container, a container literal from its elements.
    """
    out = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, (ast.Attribute, ast.Subscript, ast.NamedExpr, ast.Starred, ast.Await)):
            stack.append(n.value)
        elif isinstance(n, ast.Call):
            lit = _getattr_literal(n)
            stack.append(lit[0] if lit is not None else n.func)
        elif isinstance(n, ast.IfExp):
            stack.extend((n.body, n.orelse))
        elif isinstance(n, ast.BoolOp):
            stack.extend(n.values)
        elif isinstance(n, _SEQ_NODES):
            stack.extend(n.elts)
        elif isinstance(n, ast.Dict):
            stack.extend(k for k in n.keys if k is not None)
            stack.extend(n.values)
        elif isinstance(n, ast.Lambda):
            stack.append(n.body)
        elif isinstance(n, _COMP_NODES):
            stack.append(n.elt)
        elif isinstance(n, ast.DictComp):
            stack.extend((n.key, n.value))
    return sorted(out)


def _target(node):
    """Root node, root name, display form, fallback roots and links of a
    store target. links are the attribute names and subscripts ("[]")
    from the root to the stored place, root side first."""
    parts = []
    links = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append("." + node.attr)
            links.append(node.attr)
            node = node.value
            continue
        if isinstance(node, ast.Subscript):
            parts.append("[...]")
            links.append("[]")
            node = node.value
            continue
        lit = _getattr_literal(node)
        if lit is None:
            break
        node, attr = lit
        parts.append("." + attr)
        links.append(attr)
    parts.reverse()
    links.reverse()
    if isinstance(node, ast.Name):
        return node, node.id, node.id + "".join(parts), [], links
    return node, "", "<expr>" + "".join(parts), _roots(node), links


def _ctx(node):
    ctx = getattr(node, "ctx", None)
    if isinstance(ctx, ast.Store):
        return "store"
    if isinstance(ctx, ast.Del):
        return "del"
    return "load"



class _Collector:
    """Alias and flow facts: where the object of a name chain goes.

    An alias is a name bound, by an assignment, an assignment expression, a
    for target or a match capture, to what a name chain holds. A flow is a
    name chain whose object is put where a name no longer follows it: into
    a container literal, a call argument, a return value, a default, an
    attribute or item, a match subject.
    """

    def __init__(self):
        self.aliases = []
        self.flows = []
        self.unpacked = set()  # ids of literals assigned element-wise

    def alias(self, target, leaves):
        if leaves:
            line, col = _pos(target)
            self.aliases.append({"name": target.id, "chains": leaves, "line": line, "col": col})

    def flow(self, node, where, callee=""):
        leaves = _leaves(node)
        if leaves:
            line, col = _pos(node)
            for chain in leaves:
                self.flows.append({"chain": chain, "where": where, "callee": callee,
                                   "line": line, "col": col})

    def bind(self, target, value, unpack=True):
        """Facts of ``target = value``. A literal is paired element-wise
        with a target of the same shape only when unpack is set (the value
        goes nowhere else: ``x = a, b = torch, F`` keeps the tuple in x)."""
        stack = [(target, value)]
        while stack:
            t, v = stack.pop()
            if isinstance(t, ast.Name):
                self.alias(t, _leaves(v))
            elif isinstance(t, (ast.Attribute, ast.Subscript)):
                self.flow(v, "stored")
            elif isinstance(t, ast.Starred):
                stack.append((t.value, v))
            elif isinstance(t, (ast.Tuple, ast.List)):
                if (unpack and isinstance(v, (ast.Tuple, ast.List)) and len(v.elts) == len(t.elts)
                        and not any(isinstance(e, ast.Starred) for e in t.elts)
                        and not any(isinstance(e, ast.Starred) for e in v.elts)):
                    self.unpacked.add(id(v))
                    stack.extend(zip(t.elts, v.elts))
                else:
                    self.spread(t, v)

    def spread(self, target, value):
        """Facts of an assignment or loop whose elements do not pair up:
        every name of target may hold any part of value."""
        parts = [value]
        if isinstance(value, _SEQ_NODES):
            parts.extend(value.elts)
        leaves = []
        for p in parts:
            leaves.extend(_leaves(p))
        stack = [target]
        while stack:
            t = stack.pop()
            if isinstance(t, ast.Name):
                self.alias(t, leaves)
            elif isinstance(t, ast.Starred):
                stack.append(t.value)
            elif isinstance(t, (ast.Tuple, ast.List)):
                stack.extend(t.elts)
            elif isinstance(t, (ast.Attribute, ast.Subscript)):
                for p in parts:
                    self.flow(p, "stored")

    def visit(self, node):
        """Record the facts node itself gives (not those of its children)."""
        handler = _VISIT.get(type(node))
        if handler is not None:
            handler(self, node)

    def _assign(self, node):
        for t in node.targets:
            self.bind(t, node.value, len(node.targets) == 1)

    def _ann_assign(self, node):
        if node.value is not None:
            self.bind(node.target, node.value)

    def _aug_assign(self, node):
        if isinstance(node.target, (ast.Attribute, ast.Subscript)):
            self.flow(node.value, "stored")

    def _named_expr(self, node):
        self.bind(node.target, node.value)

    def _loop(self, node):
        self.spread(node.target, node.iter)

    def _sequence(self, node):
        if _ctx(node) == "load" and id(node) not in self.unpacked:
            for e in node.elts:
                self.flow(e, "container")

    def _dict(self, node):
        for k in node.keys:
            if k is not None:
                self.flow(k, "container")
        for v in node.values:
            self.flow(v, "container")

    def _call(self, node):
        for i, a in enumerate(node.args):
            callee = ""
            if i == 0 and isinstance(node.func, ast.Name) and not isinstance(a, ast.Starred):
                callee = node.func.id  # getattr(m, "x") only reads m, if the builtin
            self.flow(a, "argument", callee)
        for k in node.keywords:
            self.flow(k.value, "argument")

    def _class(self, node):
        for b in node.bases:
            self.flow(b, "argument")
        for k in node.keywords:
            self.flow(k.value, "argument")
        for stmt in node.body:
            # A class attribute (class C: m = torch) is an attribute.
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                self.flow(stmt.value, "stored")
        # Every other binding in the class's scope makes one too (rt50d:
        # an import in the class body, an assignment expression, an
        # assignment nested in if/try/with/for): C.torch.sys then was a
        # chain the scanner could not root.
        for n in _class_scope(node):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                for a in n.names:
                    if a.name != "*":
                        line, col = _pos(n)
                        bound = a.asname or (a.name.split(".", 1)[0] if isinstance(n, ast.Import) else a.name)
                        self.flows.append({"chain": bound, "where": "stored", "callee": "", "line": line, "col": col})
            elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
                self.flow(n.value, "stored")
            elif isinstance(n, ast.NamedExpr):
                self.flow(n.value, "stored")
            elif isinstance(n, (ast.For, ast.AsyncFor)):
                self.flow(n.iter, "stored")
            elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                self.flow(n.context_expr, "stored")

    def _comprehension(self, node):
        self.flow(node.elt, "container")

    def _dict_comprehension(self, node):
        self.flow(node.key, "container")
        self.flow(node.value, "container")

    def _return(self, node):
        if node.value is not None:
            self.flow(node.value, "return")

    def _lambda(self, node):
        self.flow(node.body, "return")
        self.defaults(node.args)

    def _function(self, node):
        self.defaults(node.args)

    def _subscript(self, node):
        self.flow(node.slice, "container")

    def _match(self, node):
        self.flow(node.subject, "match")
        leaves = _leaves(node.subject)
        for case in node.cases:
            for name, p in _captures(case.pattern):
                line, col = _pos(p)
                if leaves:
                    self.aliases.append({"name": name, "chains": leaves, "line": line, "col": col})

    def defaults(self, args):
        for d in args.defaults:
            self.flow(d, "default")
        for d in args.kw_defaults:
            if d is not None:
                self.flow(d, "default")


_VISIT = {
    ast.Assign: _Collector._assign,
    ast.AnnAssign: _Collector._ann_assign,
    ast.AugAssign: _Collector._aug_assign,
    ast.NamedExpr: _Collector._named_expr,
    ast.For: _Collector._loop,
    ast.AsyncFor: _Collector._loop,
    ast.comprehension: _Collector._loop,
    ast.List: _Collector._sequence,
    ast.Tuple: _Collector._sequence,
    ast.Set: _Collector._sequence,
    ast.Dict: _Collector._dict,
    ast.Call: _Collector._call,
    ast.ClassDef: _Collector._class,
    ast.ListComp: _Collector._comprehension,
    ast.SetComp: _Collector._comprehension,
    ast.GeneratorExp: _Collector._comprehension,
    ast.DictComp: _Collector._dict_comprehension,
    ast.Return: _Collector._return,
    ast.Yield: _Collector._return,
    ast.YieldFrom: _Collector._return,
    ast.Lambda: _Collector._lambda,
    ast.FunctionDef: _Collector._function,
    ast.AsyncFunctionDef: _Collector._function,
    ast.Subscript: _Collector._subscript,
}
if _MATCH is not None:
    _VISIT[_MATCH] = _Collector._match


# Where the object of a name chain may go without a flow fact: the chain
# is called, subscripted, tested for truth or identity, evaluated as a
# statement or names an exception class to catch; or the place is one the
# collector reports itself (an alias or one of its flows). Every other
# place is a stray flow (_stray_flows): an allow-list, so that an operand,
# an annotation, a slice bound or an assert message (rt50b: each handed a
# module to code the bundle wrote, or kept it where a library returns it)
# is reported, as is any syntax a later Python adds.
_ALLOWED = {
    (ast.Call, "func"), (ast.Expr, "value"), (ast.If, "test"), (ast.While, "test"),
    (ast.IfExp, "test"), (ast.Assert, "test"), (ast.comprehension, "ifs"),
    (ast.Subscript, "value"), (ast.ExceptHandler, "type"),
    (ast.FunctionDef, "decorator_list"), (ast.AsyncFunctionDef, "decorator_list"),
    (ast.ClassDef, "decorator_list"),
}
_HANDLED = {
    (ast.Call, "args"), (ast.keyword, "value"), (ast.ClassDef, "bases"),
    (ast.List, "elts"), (ast.Tuple, "elts"), (ast.Set, "elts"), (ast.Dict, "keys"), (ast.Dict, "values"),
    (ast.ListComp, "elt"), (ast.SetComp, "elt"), (ast.GeneratorExp, "elt"),
    (ast.DictComp, "key"), (ast.DictComp, "value"),
    (ast.Return, "value"), (ast.Yield, "value"), (ast.YieldFrom, "value"), (ast.Lambda, "body"),
    (ast.arguments, "defaults"), (ast.arguments, "kw_defaults"), (ast.Subscript, "slice"),
    (ast.Assign, "value"), (ast.AnnAssign, "value"), (ast.NamedExpr, "value"),
    (ast.For, "iter"), (ast.AsyncFor, "iter"), (ast.comprehension, "iter"),
}
if _MATCH is not None:
    _HANDLED.add((_MATCH, "subject"))
# What a stray place is called (flowPlaces in internal/scan/facts.go).
_STRAY = {
    (ast.Compare, "left"): "operand", (ast.Compare, "comparators"): "operand",
    (ast.BinOp, "left"): "operand", (ast.BinOp, "right"): "operand",
    (ast.UnaryOp, "operand"): "operand", (ast.AugAssign, "value"): "operand",
    (ast.Await, "value"): "operand",
    (ast.arg, "annotation"): "annotation", (ast.AnnAssign, "annotation"): "annotation",
    (ast.FunctionDef, "returns"): "annotation", (ast.AsyncFunctionDef, "returns"): "annotation",
    (ast.Slice, "lower"): "slice", (ast.Slice, "upper"): "slice", (ast.Slice, "step"): "slice",
    (ast.Assert, "msg"): "message", (ast.Raise, "exc"): "message", (ast.Raise, "cause"): "message",
    (ast.FormattedValue, "value"): "format",
    # (torch.nn.functional or 0).torch.load: a chain read past a
    # conditional, a boolean operator or an assignment expression
    (ast.Attribute, "value"): "base",
}
for _n in ("MatchValue", "MatchClass"):
    if hasattr(ast, _n):
        _STRAY[(getattr(ast, _n), "value" if _n == "MatchValue" else "cls")] = "pattern"


def _parents(tree):
    """id(child) -> (parent, field) of every node of tree."""
    out = {}
    for node in ast.walk(tree):
        for field, value in ast.iter_fields(node):
            for child in (value if isinstance(value, list) else (value,)):
                if isinstance(child, ast.AST):
                    out[id(child)] = (node, field)
    return out


def _stray_flows(tree):
    """Flow facts of the name chains whose object goes to a place neither
    allowed nor reported by the collector (_ALLOWED, _HANDLED): each
    chain read whole (not the base of a longer one), its place found
    through the conditional and boolean operators, assignment expressions
    and stars it passes (their value is the chain's object)."""
    parents = _parents(tree)
    flows = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Name, ast.Attribute, ast.Call)) or _ctx(node) != "load":
            continue
        chain = _chain(node)
        if not chain or (isinstance(node, ast.Call) and _getattr_literal(node) is None):
            continue
        at = parents.get(id(node))
        if at is None:
            continue
        parent, field = at
        if isinstance(parent, ast.Attribute) or (_getattr_literal(parent) is not None and field == "args"
                                                 and parent.args[0] is node):
            continue  # the base of a longer chain
        n = node
        if isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And) and parent.values[-1] is not node:
            continue  # tested for truth only (_leaves)
        while (isinstance(parent, (ast.BoolOp, ast.NamedExpr, ast.Starred))
               or (isinstance(parent, ast.IfExp) and field != "test")):
            n = parent
            at = parents.get(id(n))
            if at is None:
                break
            parent, field = at
        key = (type(parent), field)
        if key in _ALLOWED or key in _HANDLED:
            continue
        if key == (ast.Compare, "comparators") or key == (ast.Compare, "left"):
            if all(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops):
                continue  # identity: nothing of the object is handed over
        if key == (ast.UnaryOp, "operand") and isinstance(parent.op, ast.Not):
            continue
        line, col = _pos(node)
        flows.append({"chain": chain, "where": _STRAY.get(key, "expression"), "callee": "",
                      "line": line, "col": col})
    return flows


def _class_scope(cls):
    """The nodes in a class body's own scope but its direct assignments
    (which _Collector._class reports): nested statements, expressions,
    comprehensions (whose assignment expressions bind in the class), not
    the bodies of defs, lambdas or nested classes."""
    out = []
    stack = []
    for stmt in cls.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            stack.extend(ast.iter_child_nodes(stmt))
        else:
            stack.append(stmt)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        out.append(n)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _captures(pattern):
    """(name, node) of every name a match pattern binds."""
    out = []
    for p in ast.walk(pattern):
        name = None
        if _MATCH_AS is not None and isinstance(p, _MATCH_AS):
            name = p.name
        elif _MATCH_STAR is not None and isinstance(p, _MATCH_STAR):
            name = p.name
        elif _MATCH_MAPPING is not None and isinstance(p, _MATCH_MAPPING):
            name = p.rest
        if name:
            out.append((name, p))
    return out



def _root(chain):
    return chain.split(".", 1)[0]


def _reachable(imports, aliases, flows):
    """Keep the aliases and flows whose chains start at a name an import of
    the file binds, directly or through other aliases: no other chain can
    hold anything imported, so the rest is only volume."""
    bound = set()
    for im in imports:
        if not im["from"]:
            bound.add(im["asname"] or im["module"].split(".", 1)[0])
            continue
        for n in im["names"]:
            if n["name"] != "*":
                bound.add(n["asname"] or n["name"])
    users = {}
    for a in aliases:
        for chain in a["chains"]:
            users.setdefault(_root(chain), []).append(a["name"])
    work = list(bound)
    while work:
        for name in users.get(work.pop(), ()):
            if name not in bound:
                bound.add(name)
                work.append(name)
    kept = []
    for a in aliases:
        chains = [c for c in a["chains"] if _root(c) in bound]
        if chains:
            a["chains"] = chains
            kept.append(a)
    return kept, [f for f in flows if _root(f["chain"]) in bound]


def _captures_all(match):
    out = []
    for case in match.cases:
        out.extend(_captures(case.pattern))
    return out

