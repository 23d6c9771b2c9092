"""importstate: whether the process's import machinery changed.

``sys.meta_path`` and ``sys.path_hooks`` decide what every later
``import`` of the process binds, in verify and in serving alike, and
``builtins.__import__`` is what the import statement calls. Candidate code
cannot name ``sys`` or ``builtins`` (the scan), but library code it calls
may change them: on torch 1.13, ``torch.torch_version.Version`` imports
``pkg_resources``, which adds finders of its own (red team, session 18).
So an entry added since start must be a library object (its class, or
the entry itself when it is a class, defined in a file of the Python
installation, the site directories or the packages loaded at start:
abcstate's library directories), no entry present at start may go, and
``builtins.__import__`` must be the one at start. The runtime guard asks
at each load and whenever verify asks for the objects check.
"""

import builtins
import os
import sys

from . import abcstate


class ImportState:
    """The import machinery at start, and the check."""

    def __init__(self):
        self.lists = [("sys.meta_path", sys.meta_path, list(sys.meta_path)),
                      ("sys.path_hooks", sys.path_hooks, list(sys.path_hooks))]
        self.import_fn = builtins.__import__
        self.lib = abcstate._library_dirs()

    def _library(self, obj):
        f = abcstate.module_file(obj if isinstance(obj, type) else type(obj))
        return f is not None and os.path.realpath(f).startswith(self.lib)

    def changed(self):
        """'' when the import machinery holds only what it held at start
        and what library code added, else a reason."""
        if builtins.__import__ is not self.import_fn:
            return "builtins.__import__ was replaced"
        for name, now, was in self.lists:
            cur = getattr(sys, name.split(".")[1], None)
            if cur is not now:
                return "%s was rebound" % name
            ids = set(map(id, was))
            for x in was:
                if not any(y is x for y in now):
                    return "an entry of %s present at start was removed" % name
            for x in now:
                if id(x) not in ids and not self._library(x):
                    return "%s gained %r, which no library file defines" % (name, type(x))
        return ""
