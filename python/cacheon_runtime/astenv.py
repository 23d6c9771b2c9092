"""astenv: what the interpreter can import, for the header of astfacts.

The scanner needs two lists it cannot know by itself:

- every top-level module name the interpreter can import (its standard
  library, built-in modules, and every module or package found in the
  directories of sys.path, the site directories and the paths their .pth
  files add), so that no bundle module takes one of those names: a bundle's
  ``six.py`` would look bundle-local to the scan while ``import six`` binds
  the installed package at run time;
- the real submodules of the packages the policy allows (``torch.utils``,
  ``torch.hub``, ...), so that a module the attribute allow-list does not
  name is refused even in a torch version that adds it.

Everything here only lists directories and reads .pth files of the
installation (never a bundle file); nothing is imported or executed: a
package is located with ``PathFinder.find_spec``, which looks at the file
system without running the package. The parser runs with ``-S``, so the site
directories are computed with ``site.getsitepackages()`` (importing ``site``
under ``-S`` does not run ``site.main()``). Import lines of .pth files and
import hooks they install cannot be listed without running them; the
worker's run-time audit covers those.
"""

import os
import sys

# Bounds on what the header may carry (the Go side checks them again).
MAX_NAMES = 65536
MAX_DEPTH = 8
_PTH_BYTES = 1 << 16


def _suffixes():
    try:
        import importlib.machinery as machinery
        return tuple(machinery.all_suffixes())
    except Exception:  # pragma: no cover - a broken interpreter
        return (".py",)


def _module_name(entry, suffixes):
    """The module name a directory entry provides, or None."""
    name = entry.name
    try:
        is_dir = entry.is_dir()
    except OSError:
        return None
    if is_dir:
        return name if name.isidentifier() and name != "__pycache__" else None
    for suffix in suffixes:
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            return stem if stem.isidentifier() else None
    return None


def _site_dirs():
    """The site directories the worker's interpreter adds, and the paths
    their .pth files name (import lines are not run)."""
    dirs = []
    try:
        import site
        dirs.extend(site.getsitepackages())
    except Exception:
        return dirs
    extra = []
    for d in dirs:
        try:
            names = sorted(n for n in os.listdir(d) if n.endswith(".pth"))
        except OSError:
            continue
        for n in names:
            try:
                with open(os.path.join(d, n), "rb") as fh:
                    data = fh.read(_PTH_BYTES)
            except OSError:
                continue
            for raw in data.decode("utf-8", "replace").splitlines():
                line = raw.strip()
                if not line or line.startswith("#") or line.startswith(("import ", "import\t")):
                    continue
                path = os.path.join(d, line)
                if os.path.isdir(path):
                    extra.append(path)
    return dirs + extra


def search_path():
    """sys.path as the worker's interpreter sees it, without the script's
    own directory (the parser's private directory)."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    for p in list(sys.path) + _site_dirs():
        if isinstance(p, str) and p and p != here and p not in out:
            out.append(p)
    return out


def importable(path):
    """Every top-level module name the interpreter can import, sorted."""
    names = set(sys.builtin_module_names)
    names.update(getattr(sys, "stdlib_module_names", ()))
    suffixes = _suffixes()
    for d in path:
        if len(names) >= MAX_NAMES:
            break
        try:
            it = os.scandir(d)
        except OSError:
            continue  # a zip file or a missing directory
        with it:
            for entry in it:
                name = _module_name(entry, suffixes)
                if name is not None:
                    names.add(name)
                    if len(names) >= MAX_NAMES:
                        break
    return sorted(n for n in names if n.isidentifier())[:MAX_NAMES]


def submodules(packages, path):
    """Dotted names of the modules inside each package (found on path
    without importing it), sorted; at most MAX_NAMES, MAX_DEPTH deep."""
    try:
        from importlib.machinery import PathFinder
    except Exception:  # pragma: no cover
        return []
    suffixes = _suffixes()
    out = set()
    for pkg in packages:
        if not (isinstance(pkg, str) and pkg.isidentifier()):
            continue
        try:
            spec = PathFinder.find_spec(pkg, path)
        except Exception:
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        stack = [(pkg, list(spec.submodule_search_locations), 1)]
        while stack and len(out) < MAX_NAMES:
            prefix, dirs, depth = stack.pop()
            for d in dirs:
                try:
                    it = os.scandir(d)
                except OSError:
                    continue
                with it:
                    for entry in it:
                        name = _module_name(entry, suffixes)
                        if name is None or name == "__init__" or name == "__main__":
                            continue
                        full = prefix + "." + name
                        out.add(full)
                        if len(out) >= MAX_NAMES:
                            break
                        try:
                            sub = entry.is_dir()
                        except OSError:
                            sub = False
                        if sub and depth < MAX_DEPTH:
                            stack.append((full, [entry.path], depth + 1))
                if len(out) >= MAX_NAMES:
                    break
    return sorted(out)[:MAX_NAMES]
