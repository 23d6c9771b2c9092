"""abcstate: process-wide state that the standard library keeps for every
caller and that candidate code can change without a store into an object
it did not create (issue 16, class 3), as the runtime guard compares it.

- **ABCs.** ``ABCMeta`` answers ``isinstance``/``issubclass`` for an ABC
  from its own cache, its registry, its ``__subclasshook__`` and,
  recursively, from every subclass it has. A candidate class deriving from
  ``numbers.Real`` that registers ``torch.Tensor``, or that defines a
  ``__subclasshook__`` saying yes to it, makes every tensor a
  ``numbers.Real`` for the whole process, and the answer stays in Real's
  cache even after the subclass is gone. So, for every ABC that existed at
  start and every ABC below one since: a start ABC's registry may gain only
  classes that library code defined since (not ``torch.Tensor``, not a
  candidate class); a candidate ABC (a new class whose module is not a
  library file) may register nothing, may define no ``__subclasshook__`` of
  its own (a library one, like the hook ``typing.Protocol`` installs, is
  fine) and must have a library metaclass; and every class an ABC's cache
  gained since the last check must still be a subclass when asked afresh
  (the changed caches are cleared and ``issubclass`` recomputed with the
  state just checked).
- **typing's caches.** ``typing`` caches every subscription
  (``Optional[int]``, ``List[X]``, ``Literal[...]``, a Generic's
  ``C[T]``) in ``functools.lru_cache`` tables shared by the process. A key
  object whose ``__eq__``/``__hash__`` lie (equal to ``int``, hashing like
  it) makes ``typing.Optional[int]`` return the candidate's object
  everywhere. So every object reachable from those tables (keys and
  results, through tuples, lists, dicts and typing's alias objects) must
  take its ``__eq__`` and ``__hash__`` from a class that existed at start
  or that library code defined, or from what ``dataclasses`` generates
  (equal only to instances of the same class). Checked when a table's
  miss count changed (nothing is inserted without a miss).

Neither check runs candidate code: class dictionaries and MROs are read
directly, and the recomputed ``issubclass`` runs the standard library's
hooks and the ABCs' state just found clean.
"""

import abc
import gc
import os
import sys
import sysconfig
import types

_FN = types.FunctionType
_SLOT_TYPES = (type(object.__eq__), type(None))  # wrapper_descriptor; None (unhashable)
_WALK_LIMIT = 50000
# The class attributes ABCMeta's subclass check looks up on the class (a
# candidate ABC's own: its hook, and the subclasses it says it has).
_ABC_HOOKS = ("__subclasshook__", "__subclasses__")


def _all_classes():
    """Every class reachable from object by __subclasses__ (a set of ids
    and the list holding them)."""
    seen, out, stack = set(), [], [object]
    subclasses = type.__subclasses__
    while stack:
        c = stack.pop()
        try:
            subs = subclasses(c)
        except TypeError:
            subs = []
        for s in subs:
            if id(s) not in seen:
                seen.add(id(s))
                out.append(s)
                stack.append(s)
    return seen, out


def _library_dirs():
    """Directories of library code: the Python installation, site
    directories and the packages loaded at start (torch, Triton, the
    runtime)."""
    dirs = set()
    paths = sysconfig.get_paths()
    for k in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(k):
            dirs.add(paths[k])
    try:
        import site
        dirs.update(site.getsitepackages())
    except Exception:  # noqa: BLE001
        pass
    for name in ("torch", "triton", "numpy", "cacheon_runtime"):
        m = sys.modules.get(name)
        f = getattr(m, "__file__", None)
        if f:
            dirs.add(os.path.dirname(f))
    return tuple(sorted(os.path.realpath(d) + os.sep for d in dirs))


def module_file(c):
    """The file of the module that defined class c, read without running
    candidate code (None where there is none: a builtin, a module
    without a file, a class whose __module__ is not a loaded module)."""
    try:
        mod = type.__dict__["__module__"].__get__(c)
    except Exception:  # noqa: BLE001
        return None
    f = getattr(sys.modules.get(mod), "__file__", None) if isinstance(mod, str) else None
    return f if isinstance(f, str) else None


class AbcState:
    """The ABCs and typing's caches as they were before any candidate
    import; changed() says what candidate code changed since."""

    def __init__(self):
        self._dump = getattr(abc, "_get_dump", None)
        self._lib = _library_dirs()
        self._lib_files = {}
        self.known, classes = _all_classes()
        self._keep = classes  # the known ids stay valid
        self.abcs = [c for c in classes if isinstance(c, abc.ABCMeta)]
        self.tracked = set(map(id, self.abcs))
        self.at_start = set(self.tracked)
        self.candidates = []  # candidate ABCs, checked again at every check
        self.registries = {id(c): self._registry(c) for c in self.abcs}
        self.subs = list(map(type.__subclasses__, self.abcs))
        self.caches = list(map(self._cache, self.abcs))
        self.token = abc.get_cache_token()
        self.dumps = self._dumps()
        self.typing = self._typing_tables()
        self.misses = self._misses()

    # -- reading ABC state -------------------------------------------------------

    def _registry(self, c):
        """{id: class} of the live classes registered with c."""
        try:
            if self._dump is not None:
                regs = [r() for r in self._dump(c)[0]]
            else:  # the pure-Python abc: a WeakSet
                regs = list(getattr(c, "_abc_registry", ()))
        except Exception:  # noqa: BLE001
            return {}
        return {id(x): x for x in regs if x is not None}

    def _cache(self, c):
        try:
            if self._dump is not None:
                return self._dump(c)[1]
            return set(getattr(c, "_abc_cache", ()))
        except Exception:  # noqa: BLE001
            return None

    def _library_file(self, f):
        if not f:
            return False
        ok = self._lib_files.get(f)
        if ok is None:
            ok = os.path.realpath(f).startswith(self._lib)
            self._lib_files[f] = ok
        return ok

    def _library_class(self, c):
        """True for a class that existed at start or that a library module
        (by its module's file) defined since."""
        return id(c) in self.known or self._library_file(module_file(c))

    @staticmethod
    def _name(c):
        try:
            return "%s.%s" % (type.__dict__["__module__"].__get__(c), type.__dict__["__qualname__"].__get__(c))
        except Exception:  # noqa: BLE001
            return "?"

    # -- the checks ------------------------------------------------------------

    def changed(self):
        """'' when the ABCs and typing's caches hold only what library code
        put there, else a reason."""
        return self.abc_changed() or self.typing_changed()

    def abc_changed(self):
        subs = list(map(type.__subclasses__, self.abcs))
        if subs != self.subs:
            why = self._new_classes(subs)
            if why:
                return why
        for c in self.candidates:
            why = self._candidate_abc(c)
            if why:
                return why
        dumps = self._dumps()
        if dumps is not None and dumps == self.dumps:
            return ""  # (a dump is registry, cache, negative cache, version)
        token = abc.get_cache_token()
        if token != self.token or dumps is None:  # (every register bumps the token)
            why = self._registries()
            if why:
                return why
            self.token = token
        caches = list(map(self._cache, self.abcs))
        if caches != self.caches:
            why = self._caches(caches)
            if why:
                return why
        self.dumps = self._dumps()
        return ""

    def _dumps(self):
        if self._dump is None:
            return None
        try:
            return list(map(self._dump, self.abcs))
        except Exception:  # noqa: BLE001
            return None

    def _new_classes(self, subs):
        """Follow the subclasses new since the last check; a new ABC is
        tracked from now on, a candidate one checked."""
        stack = []
        for got in subs:
            stack.extend(got)
        while stack:
            c = stack.pop()
            if not isinstance(c, abc.ABCMeta) or id(c) in self.tracked:
                continue
            if not self._library_class(c):
                why = self._candidate_abc(c)
                if why:
                    return why
                self.candidates.append(c)
            self.tracked.add(id(c))
            self.abcs.append(c)
            self._keep.append(c)
            self.registries[id(c)] = self._registry(c)
            self.caches.append(None)
            if self.dumps is not None:
                self.dumps.append(None)
            stack.extend(type.__subclasses__(c))
        self.subs = list(map(type.__subclasses__, self.abcs))
        return ""

    def _candidate_abc(self, c):
        """A reason when a candidate ABC can answer for its ancestors: a
        registered class, a __subclasshook__ of its own, a metaclass of its
        own."""
        name = self._name(c)
        if self._registry(c):
            return "a class was registered with %s, a candidate ABC (its registry answers isinstance for its ancestors, %s, process-wide)" % (
                name, self._ancestors(c))
        d = type.__dict__["__dict__"].__get__(c)
        for hook_name in _ABC_HOOKS:  # what ABCMeta looks up on the class itself
            hook = d.get(hook_name)
            if hook is None:
                continue
            f = hook.__func__ if isinstance(hook, (classmethod, staticmethod)) else hook
            if not (isinstance(f, _FN) and self._library_file(f.__code__.co_filename)):
                return "%s defines %s (ABCMeta asks it when answering issubclass for its ancestors, %s, process-wide)" % (
                    name, hook_name, self._ancestors(c))
        if not self._library_class(type(c)):
            return "%s has a metaclass of the candidate's (%s)" % (name, self._name(type(c)))
        return ""

    def _ancestors(self, c):
        try:
            names = [self._name(b) for b in type.__dict__["__mro__"].__get__(c)[1:]
                     if isinstance(b, abc.ABCMeta) and id(b) in self.at_start]
        except Exception:  # noqa: BLE001
            names = []
        return ", ".join(names[:3]) or "?"

    def _registries(self):
        """A start ABC may gain only classes library code defined since; a
        candidate ABC nothing."""
        for c in self.abcs:
            was = self.registries.get(id(c), {})
            now = self._registry(c)
            if now.keys() == was.keys():
                continue
            if id(c) not in self.at_start and not self._library_class(c):
                return "a class was registered with %s, a candidate ABC (its registry answers isinstance for its ancestors, %s, process-wide)" % (
                    self._name(c), self._ancestors(c))
            for k, x in now.items():
                if k not in was and (id(x) in self.known or not self._library_class(x)):
                    return "a class was registered with %s (%s; ABC.register changes isinstance process-wide)" % (
                        self._name(c), self._name(x))
            self.registries[id(c)] = now
        return ""

    def _caches(self, caches):
        """Every class a cache gained must still be a subclass when the
        changed caches are cleared and the question asked again."""
        gained = []
        for i, (c, was, now) in enumerate(zip(self.abcs, self.caches, caches)):
            if now == was or now is None:
                continue
            for r in list(now):
                x = r() if self._dump is not None else r
                if x is not None and (was is None or r not in was):
                    gained.append((c, x))
        changed = {id(c): c for c, _x in gained}
        for c in changed.values():
            try:
                abc.ABCMeta._abc_caches_clear(c)  # (not looked up on c: no candidate code)
            except Exception:  # noqa: BLE001
                pass
        for c, x in gained:
            try:
                ok = issubclass(x, c)
            except Exception:  # noqa: BLE001
                ok = False
            if not ok:
                return "the isinstance cache of %s held %s, which is not a subclass of it (an ABC's answer changed process-wide, then its cause removed)" % (
                    self._name(c), self._name(x))
        self.caches = list(map(self._cache, self.abcs))
        return ""

    # -- typing ------------------------------------------------------------------

    @staticmethod
    def _typing_tables():
        """The lru_cache objects behind typing's subscription caches."""
        typing = sys.modules.get("typing")
        out = []
        for clear in list(getattr(typing, "_cleanups", ()) or ()):
            w = getattr(clear, "__self__", None)
            if w is not None and hasattr(w, "cache_info") and w not in out:
                out.append(w)
        for w in list(getattr(typing, "_caches", {}).values()) if isinstance(getattr(typing, "_caches", None), dict) else ():
            if w not in out:
                out.append(w)
        return out

    def _misses(self):
        out = []
        for w in self.typing:
            try:
                info = w.cache_info()
                out.append((info.misses, info.currsize))
            except Exception:  # noqa: BLE001
                out.append(None)
        return out

    def typing_changed(self):
        misses = self._misses()
        if misses == self.misses:
            return ""
        for w, now, was in zip(self.typing, misses, self.misses):
            if now != was:
                why = self._typing_table(w)
                if why:
                    return why
        self.misses = misses
        return ""

    def _typing_table(self, w):
        """A reason when an object in one of typing's caches takes its
        equality from candidate code."""
        try:
            todo = [x for x in gc.get_referents(w) if x is not w]
        except Exception:  # noqa: BLE001
            return ""
        seen, n = set(), 0
        fn = getattr(w, "__wrapped__", None)
        while todo:
            o = todo.pop()
            if id(o) in seen or o is fn:
                continue
            seen.add(id(o))
            n += 1
            if n > _WALK_LIMIT:
                return "typing's caches hold too many objects to check"
            t = type(o)
            why = self._equality(t)
            if why:
                return "typing's subscription cache (%s) holds an object of %s, %s: typing.Optional[...] and the like would return the candidate's objects process-wide" % (
                    getattr(fn, "__qualname__", "?"), self._name(t), why)
            if t in (tuple, list, frozenset, set):
                todo.extend(o)
            elif t is dict:
                todo.extend(o.keys())
                todo.extend(o.values())
            elif isinstance(o, type):
                continue
            elif id(t) in self.known and t.__module__ in ("typing", "types"):
                try:
                    d = object.__getattribute__(o, "__dict__")
                    todo.extend(d.values())
                except AttributeError:
                    pass
                for a in ("__args__", "__origin__", "__metadata__"):
                    try:
                        todo.append(object.__getattribute__(o, a))
                    except AttributeError:
                        pass
        return ""

    def _equality(self, t):
        """'' when a class takes __eq__ and __hash__ from library code."""
        try:
            mro = type.__dict__["__mro__"].__get__(t)
        except Exception:  # noqa: BLE001
            return "whose MRO cannot be read"
        for slot in ("__eq__", "__hash__"):
            for k in mro:
                d = type.__dict__["__dict__"].__get__(k)
                if slot not in d:
                    continue
                if self._library_class(k):
                    break
                v = d[slot]
                if isinstance(v, _SLOT_TYPES):
                    break
                if (isinstance(v, _FN) and "__dataclass_params__" in d and v.__code__.co_filename == "<string>"
                        and v.__code__.co_name == slot):
                    break  # what dataclasses generated (equal only to the same class)
                return "whose %s is the candidate's code (%s)" % (slot, self._name(k))
        return ""


__all__ = ["AbcState"]
