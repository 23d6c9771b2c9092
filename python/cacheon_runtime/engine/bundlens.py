"""bundlens: one bundle's import namespace in an engine whose stack holds
several bundles that use the same top-level package names (dispatch loads
each bundle's sources inside a Namespace)."""

import os
import sys

from .. import host

_BUNDLE_ROOTS = set()  # every bundle root this process imported candidate code from


class Namespace:
    """Import one bundle's sources with the loader (host.Loader) although
    other bundles of the stack (or an earlier load) use the same top-level
    package names: their modules step out of sys.modules while this bundle
    imports, and step back in afterwards (the first bundle keeps the global
    names; later bundles' modules stay reachable through their functions).
    Only modules imported from another bundle root move: a name taken by the
    standard library or torch still fails the loader's own check."""

    def __init__(self, bundle, sources):
        self.root = os.path.realpath(bundle)
        self.tops = set()
        for src in sources:
            if isinstance(src, str) and src.endswith(".py"):
                self.tops.add(src[:-3].split("/")[0])

    def _ours(self, name, roots):
        if not any(name == t or name.startswith(t + ".") for t in self.tops):
            return False
        mod = sys.modules.get(name)
        paths = host.module_paths(mod) if mod is not None else []
        return bool(paths) and any(host.path_under(p, r) for p in paths for r in roots)

    def __enter__(self):
        others = [r for r in _BUNDLE_ROOTS if r != self.root]
        self.stash = {k: sys.modules.pop(k) for k in list(sys.modules) if self._ours(k, others)}
        return self

    def __exit__(self, *exc):
        _BUNDLE_ROOTS.add(self.root)
        if self.stash:
            for k in [k for k in list(sys.modules) if self._ours(k, [self.root])]:
                del sys.modules[k]
            sys.modules.update(self.stash)
        return False
