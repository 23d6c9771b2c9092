"""audithook: the runtime's PEP 578 audit hook, the second line behind the
static scan (the sandbox's namespaces, Landlock and seccomp being the
third).

``install()`` adds one hook (``sys.addaudithook``; it cannot be removed)
at process start, before any candidate code is imported. It enforces
nothing until ``arm()``, which the candidate loader calls right before the
first candidate import; from then on it is on for the rest of the process,
with no way back (a one-way latch, not a toggle). Everything after that
point, the worker's and the engine's own work included, is held to the
same allow-list, which covers what the runtime itself does after a load:
reading request files and writing dumps in the job directory, importing
torch and Triton modules lazily, and Triton's JIT.

Who is acting is read from the Python stack at the event:

- candidate frames: code whose file lies in a loaded bundle root;
- the owner: the innermost frame that is not the standard library or
  generated code (``<string>``, ``<frozen ...>``): the candidate, torch,
  Triton, cacheon_runtime itself, or another installed package;
- the immediate caller: the very frame that raised the event.

Refused after arming (a refused operation raises ``GuardRefusal``, a
PermissionError, and is recorded; the worker reports every refusal as the
candidate's failure, class ``tamper``, even when the candidate caught the
exception):

- files: opening for writing, creating, removing or renaming outside the
  job directory (the working directory, and HOME, TMPDIR and
  TRITON_CACHE_DIR where they lie in it), and inside it too while a
  candidate frame is on the stack unless Triton is the owner (its cache
  and its temporary build directories); reading, while a candidate frame
  is on the stack, anything but the bundles, the Python installation
  (prefixes, site directories, the startup sys.path, the trusted bytecode
  cache of -X pycache_prefix), the runtime package,
  system library and CUDA directories, /dev/null, /dev/zero,
  /dev/urandom, /dev/random, /dev/nvidia*, /proc/<own pid>, a few /proc
  and /sys files NVIDIA and torch read (the job directory only with Triton
  as owner); re-opening a numeric file descriptor by the candidate itself;
  directory listings follow the read rule;
- code: ``compile``, ``exec``, ``code.__new__`` (CodeType, code.replace)
  and ``marshal.loads`` called directly by candidate code. Code generated
  by libraries on their own behalf (dataclasses, namedtuple, Triton's
  launcher and binder, the import system compiling a module's file) is
  allowed: those calls come from library frames. Triton 3.x compiles its
  argument binder with ``exec`` from ``triton/runtime/jit.py`` and
  dataclass methods from its own modules; that is this rule, and on the GPU
  machine it is exercised by the worker's Triton tests. An ``exec`` (eval
  or exec of code) called by the standard library while candidate code is
  on the stack is refused too, unless it is dataclasses' or namedtuple's
  own code generator: typing's ``ForwardRef._evaluate`` runs a string the
  candidate wrote;
- native code: ``ctypes.dlopen`` by the candidate or of a path outside the
  Python installation and the system library directories; any other
  ``ctypes.*`` event owned by the candidate; importing an extension module
  from outside the Python installation, except Triton loading the
  launcher and utility modules it just built in the job directory;
- processes: ``subprocess.Popen``, ``os.system``, ``os.exec*``,
  ``os.spawn*``, ``os.posix_spawn``, ``os.fork``, ``os.forkpty``, except
  Triton (the owner) running its tools: ldconfig, file, a C compiler,
  ptxas, cuobjdump, nvdisasm;
- network: every ``socket.*`` event and the standard library's network
  clients (the collective group is created by the worker before any
  candidate import: the worker refuses ``group`` after ``load``);
- introspection and tampering: ``pickle.find_class``, ``sys.settrace``,
  ``sys.setprofile``, ``sys.monitoring``, ``sys.addaudithook`` while a
  candidate frame is on the stack; ``os.putenv``/``os.unsetenv``,
  ``os.kill``, ``resource.setrlimit``, ``os.chdir`` owned by candidate
  code; ``gc.get_objects``/
  ``get_referrers``/``get_referents``, ``sys._getframe``,
  ``sys._current_frames`` and reading ``tb_frame``/``gi_frame``/
  ``cr_frame``/``ag_frame`` directly from candidate code;
  ``object.__setattr__``/``__delattr__`` events (CPython raises them for
  ``__class__`` assignment, ``__code__``, and a type's ``__name__``,
  ``__qualname__``, ``__module__``, ``__bases__``, ``__doc__``) directly
  from candidate code on an object the bundle did not define. CPython
  raises no event for ordinary attribute assignment on a type
  (``torch.Tensor.fill_ = f``): the torch guard (guard.py) sees those by
  identity.

Not covered (the sandbox is the line there): anything C code does
(torch's and NCCL's own sockets, files, dlopen), ``os.write`` to a
descriptor (no audit event), code reached through a library that calls
back or generates code on request (``traceback.walk_stack``,
``timeit``, Triton's build helpers), callbacks that run with no candidate
frame on the stack (a ``weakref.finalize`` target), and everything on
Python < 3.8.
"""

import os
import sys

try:
    import _thread
except ImportError:  # pragma: no cover
    _thread = None


class GuardRefusal(PermissionError):
    """An operation the runtime's audit hook refused."""


DETAIL = "python PEP 578: files, exec, dlopen, subprocess, sockets, pickle, type setattr"

_TOOLS = frozenset(("ldconfig", "ldconfig.real", "file", "ptxas", "ptxas-blackwell", "cuobjdump",
                    "nvdisasm", "nvcc", "gcc", "cc", "clang", "g++", "c++", "clang++"))

_FRAME_ATTRS = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"))

_SPECIAL_READ = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/full")
_SYSTEM_READ = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib", "/usr/local/cuda",
                "/usr/share", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
                "/sys", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/sys",
                "/proc/driver", "/dev/shm")

_MAX_RECORDS = 64

# Event -> rule name.
_EVENTS = {
    "open": "open", "os.listdir": "list", "os.scandir": "list",
    "os.mkdir": "w1", "os.rmdir": "w1", "os.remove": "w1", "os.chmod": "w1", "os.chown": "w1",
    "os.chflags": "w1", "os.lchflags": "w1", "os.utime": "w1", "os.truncate": "w1",
    "os.setxattr": "w1", "os.removexattr": "w1", "os.mkfifo": "w1", "os.mknod": "w1",
    "shutil.rmtree": "w1", "shutil.chown": "w1", "tempfile.mkstemp": "w1", "tempfile.mkdtemp": "w1",
    "sqlite3.connect": "w1",
    "os.rename": "w2", "os.link": "w2", "os.symlink": "w2", "shutil.copyfile": "w2",
    "shutil.copymode": "w2", "shutil.copystat": "w2", "shutil.copytree": "w2", "shutil.move": "w2",
    "shutil.unpack_archive": "wunpack", "shutil.make_archive": "wmake",
    "subprocess.Popen": "proc", "os.system": "proc", "os.exec": "proc", "os.spawn": "proc",
    "os.posix_spawn": "proc", "os.fork": "proc", "os.forkpty": "proc", "os.startfile": "proc",
    "pty.spawn": "proc",
    "ctypes.dlopen": "dlopen", "import": "import",
    "compile": "code", "exec": "code", "code.__new__": "code", "marshal.loads": "code",
    "marshal.load": "code",
    "object.__setattr__": "setattr", "object.__delattr__": "setattr",
    "object.__getattr__": "getattr",
    "sys._getframe": "introspect", "sys._getframemodulename": "introspect",
    "sys._current_frames": "introspect", "sys._current_exceptions": "introspect",
    "gc.get_objects": "introspect", "gc.get_referrers": "introspect", "gc.get_referents": "introspect",
    "pickle.find_class": "cand",
    "sys.settrace": "cand", "sys.setprofile": "cand", "sys.addaudithook": "cand",
    "sys.monitoring.register_callback": "cand", "os.putenv": "owner", "os.unsetenv": "owner",
    "os.kill": "owner", "os.killpg": "owner", "signal.pthread_kill": "owner",
    "resource.setrlimit": "owner", "resource.prlimit": "owner", "os.chdir": "owner",
    "urllib.Request": "net", "http.client.connect": "net", "http.client.send": "net",
    "ftplib.connect": "net", "smtplib.connect": "net", "poplib.connect": "net",
    "imaplib.open": "net", "nntplib.connect": "net", "telnetlib.Telnet.open": "net",
    "webbrowser.open": "proc",
}
_PREFIXES = {"socket": "net", "ctypes": "ctypes"}


# The standard library's own code generators: the methods dataclasses
# writes and namedtuple's __new__ (typing.NamedTuple goes through it) are
# compiled from text the library makes from identifiers.
_CODE_GENERATORS = (os.sep + "dataclasses.py", os.sep + "collections" + os.sep + "__init__.py")


def _code_generator(path):
    return isinstance(path, str) and path.endswith(_CODE_GENERATORS)


def _real(p):
    try:
        return os.path.realpath(os.fsdecode(p))
    except Exception:  # noqa: BLE001
        return None


def _under(p, roots):
    for r in roots:
        if p == r or p.startswith(r if r.endswith("/") else r + "/"):
            return True
    return False


def _roots(paths):
    out = []
    for p in paths:
        if p:
            r = _real(p)
            if r and r != "/" and r not in out:
                out.append(r)
    return tuple(out)


class Hook:
    """The handle the runtime keeps: arm(), add_bundle(), refusals()."""

    __slots__ = ("arm", "add_bundle", "refusals", "installed")


def install(job_dir=None):
    """Install the hook (once per process) and return its Hook handle, or
    None when this Python has no sys.addaudithook. job_dir defaults to the
    working directory."""
    if not hasattr(sys, "addaudithook"):
        return None
    import sysconfig
    import site
    import importlib.util

    job = _real(job_dir or os.getcwd())
    writable = [job]
    for k in ("HOME", "TMPDIR", "TRITON_CACHE_DIR"):
        v = os.environ.get(k)
        r = _real(v) if v else None
        if r and _under(r, (job,)):
            writable.append(r)
    writable = _roots(writable)

    paths = sysconfig.get_paths()
    stdlib = _roots([paths.get("stdlib"), paths.get("platstdlib")])
    py = [sys.prefix, sys.base_prefix, sys.exec_prefix, getattr(sys, "base_exec_prefix", None)]
    try:
        py += list(site.getsitepackages())
    except Exception:  # noqa: BLE001
        pass
    for p in sys.path:
        r = _real(p) if p else None
        if r and not _under(r, writable) and not _under(job, (r,)):
            py.append(r)
    # The trusted bytecode cache (-X pycache_prefix, read-only in the
    # sandbox): imports read compiled installed modules from it.
    prefix = getattr(sys, "pycache_prefix", None)
    r = _real(prefix) if prefix else None
    if r and not _under(r, writable) and not _under(job, (r,)):
        py.append(r)
    pyroots = _roots(py)

    here = _real(os.path.dirname(os.path.abspath(__file__)))
    runtime = _roots([os.path.dirname(here)]) if here else ()

    def pkg_dir(name):
        try:
            spec = importlib.util.find_spec(name)
        except Exception:  # noqa: BLE001
            return ()
        if spec is None or not spec.submodule_search_locations:
            return ()
        return _roots(list(spec.submodule_search_locations))
    torch_dirs = pkg_dir("torch")
    triton_dirs = pkg_dir("triton")

    libs = list(_SYSTEM_READ)
    for k in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"):
        for p in os.environ.get(k, "").split(":"):
            if p:
                libs.append(p)
    libroots = _roots(libs)
    special = _SPECIAL_READ

    bundles = []
    state = {"armed": False, "n": 0, "records": []}
    kinds = {}
    # Code the standard library's generators (dataclasses, namedtuple)
    # compiled for candidate code (the owner of the exec), by id (the objects
    # kept, so that no id is reused): it runs as the candidate's own, not
    # as generated library code ("gen"). A bundle that hands dataclasses'
    # private helper its own text gets a function with no bundle file
    # (rt50a's a2); its frames count as the bundle's.
    made_for_cand = {}
    code_type = type(install.__code__)
    busy = set()
    get_ident = _thread.get_ident if _thread is not None else (lambda: 0)
    getframe = sys._getframe
    Refusal = GuardRefusal
    pid = os.getpid

    def kind_of(fn):
        k = kinds.get(fn)
        if k is not None:
            return k
        if not fn or fn[0] == "<":
            k = "gen"
        else:
            p = _real(fn) or fn
            if bundles and _under(p, bundles):
                k = "cand"
            elif _under(p, runtime):
                k = "runtime"
            elif triton_dirs and _under(p, triton_dirs):
                k = "triton"
            elif torch_dirs and _under(p, torch_dirs):
                k = "torch"
            elif _under(p, stdlib) and "-packages" not in p:
                k = "std"
            else:
                k = "other"
        kinds[fn] = k
        return k

    def stack(f):
        """(immediate kind, owner kind, candidate frame anywhere, owner
        file, immediate file)."""
        immediate = owner = None
        owner_file = caller_file = ""
        cand = False
        while f is not None:
            code = f.f_code
            fn = code.co_filename
            k = kind_of(fn)
            if k == "gen" and made_for_cand and id(code) in made_for_cand:
                k = "cand"
            if immediate is None:
                immediate, caller_file = k, fn
            if owner is None and k not in ("std", "gen"):
                owner, owner_file = k, fn
            if k == "cand":
                cand = True
                break
            f = f.f_back
        return immediate or "gen", owner or "std", cand, owner_file, caller_file

    def refuse(event, detail, why, quiet=False):
        msg = "%s %s refused: %s" % (event, detail, why)
        if not quiet:
            state["n"] += 1
            if len(state["records"]) < _MAX_RECORDS:
                state["records"].append(msg)
        raise Refusal("cacheon runtime guard: " + msg)

    def readable(p, cand, owner):
        if not cand:
            return True
        if _under(p, special) or p.startswith("/dev/nvidia") or \
                (p.startswith("/proc/") and p[6:].split("/")[0] == str(pid())):
            return True
        if _under(p, bundles) or _under(p, pyroots) or _under(p, runtime) or _under(p, libroots):
            return True
        return owner == "triton" and _under(p, writable)

    def writable_path(p, cand, owner):
        if p in ("/dev/null",):
            return True
        if not _under(p, writable):
            return False
        return not cand or owner == "triton"

    def is_write(mode, flags):
        if isinstance(mode, str):
            return any(c in mode for c in "wax+")
        if isinstance(flags, int):
            return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
                                 | getattr(os, "O_TMPFILE", 0)))
        return False

    def owned_by_bundle(obj):
        """True for a function, type or instance the bundle defined."""
        try:
            if type(obj).__name__ == "function":
                code = obj.__code__
                return kind_of(code.co_filename) == "cand" or id(code) in made_for_cand
            t = obj if isinstance(obj, type) else type(obj)
            name = t.__dict__.get("__module__")
            mod = sys.modules.get(name) if isinstance(name, str) else None
            f = getattr(mod, "__file__", None) if mod is not None else None
            return isinstance(f, str) and kind_of(f) == "cand"
        except Exception:  # noqa: BLE001
            return False

    def path_rule(event, p, dir_fd, cand, owner, write, immediate=None):
        if isinstance(p, int):
            if owner == "cand" or (write and cand and owner != "triton"):
                refuse(event, "fd %d" % p, "candidate code re-opening a file descriptor")
            return
        if p is None:
            p = "."
        rp = _real(p)
        if rp is None:
            refuse(event, repr(p)[:200], "unreadable path")
        if dir_fd not in (None, -1) and not os.path.isabs(os.fsdecode(p)):
            # Relative to a directory descriptor: only Triton's own cleanup
            # (shutil.rmtree) and the runtime do that.
            if cand and owner != "triton":
                refuse(event, repr(p)[:200], "a path relative to a directory descriptor")
            return
        if write:
            if not writable_path(rp, cand, owner):
                # The import system caching bytecode next to a module (a
                # Python run without -B) ignores the refusal: not recorded.
                quiet = immediate == "gen" and "/__pycache__" in rp
                refuse(event, rp, "writes are allowed only in the job directory, by the runtime or Triton", quiet)
        elif not readable(rp, cand, owner):
            refuse(event, rp, "outside the bundle, the Python installation and the system libraries")

    def tool_ok(args, event):
        exe = None
        if event == "subprocess.Popen":
            exe = args[0] if args and args[0] else (args[1][0] if len(args) > 1 and args[1] else None)
        elif event in ("os.exec", "os.posix_spawn"):
            exe = args[0] if args else None
        elif event == "os.spawn":
            exe = args[1] if len(args) > 1 else None
        if exe is None:
            return False
        try:
            base = os.path.basename(os.fsdecode(exe))
        except Exception:  # noqa: BLE001
            return False
        if base in _TOOLS:
            return True
        # versioned or triplet compilers: x86_64-linux-gnu-gcc-12, gcc-13, clang-17
        stem = base.rsplit("-", 1)[0] if base.rsplit("-", 1)[-1].replace(".", "").isdigit() else base
        return stem.split("-")[-1] in ("gcc", "cc", "clang", "g++", "c++", "clang++")

    def hook(event, args):
        if not state["armed"]:
            return
        rule = _EVENTS.get(event)
        if rule is None:
            rule = _PREFIXES.get(event.split(".", 1)[0])
            if rule is None:
                return
        if rule == "getattr" and (len(args) < 2 or args[1] not in _FRAME_ATTRS):
            return
        tid = get_ident()
        if tid in busy:
            return
        busy.add(tid)
        try:
            immediate, owner, cand, owner_file, caller_file = stack(getframe(1))
            check(event, args, rule, immediate, owner, cand, caller_file)
        finally:
            busy.discard(tid)

    def check(event, args, rule, immediate, owner, cand, caller_file):
        if rule == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            path_rule(event, path, None, cand, owner, is_write(mode, flags), immediate)
        elif rule == "list":
            path_rule(event, args[0] if args else None, None, cand, owner, False)
        elif rule == "w1":
            dir_fd = args[-1] if event in ("os.mkdir", "os.rmdir", "os.remove", "os.chmod", "os.chown",
                                           "os.utime", "shutil.rmtree") and len(args) > 1 else None
            path_rule(event, args[0] if args else None, dir_fd, cand, owner, True, immediate)
        elif rule == "w2":
            dst = args[1] if len(args) > 1 else None
            dfd = args[3] if event in ("os.rename", "os.link") and len(args) > 3 else (
                args[2] if event == "os.symlink" and len(args) > 2 else None)
            if event not in ("os.symlink",):
                sfd = args[2] if event in ("os.rename", "os.link") and len(args) > 2 else None
                path_rule(event, args[0] if args else None, sfd, cand, owner, event in ("os.rename", "shutil.move"))
            path_rule(event, dst, dfd, cand, owner, True)
        elif rule == "wunpack":
            path_rule(event, args[0] if args else None, None, cand, owner, False)
            path_rule(event, args[1] if len(args) > 1 else None, None, cand, owner, True)
        elif rule == "wmake":
            path_rule(event, args[0] if args else None, None, cand, owner, True)
        elif rule == "proc":
            if not (owner == "triton" and tool_ok(args, event)):
                refuse(event, repr(args[:2])[:200], "no process may be started (only Triton's compiler tools)")
        elif rule == "dlopen":
            name = args[0] if args else None
            if owner == "cand":
                refuse(event, repr(name)[:200], "candidate code may not load native libraries")
            if name is not None:
                s = os.fsdecode(name) if isinstance(name, (str, bytes)) else ""
                if "/" in s:
                    rp = _real(s)
                    if rp is None or not (_under(rp, pyroots) or _under(rp, libroots)):
                        refuse(event, s[:200], "a library outside the Python installation and the system libraries")
        elif rule == "import":
            fn = args[1] if len(args) > 1 else None
            if fn is not None and isinstance(fn, (str, bytes)):
                rp = _real(fn)
                ok = rp is not None and (_under(rp, pyroots) or _under(rp, runtime))
                if not ok and owner == "triton" and rp is not None and _under(rp, writable):
                    ok = True  # Triton's freshly built launcher / utility modules
                if not ok:
                    refuse(event, "%s from %s" % (args[0], rp), "extension modules load only from the Python installation")
        elif rule == "code":
            if immediate == "cand":
                refuse(event, "", "candidate code may not compile or execute code it makes")
            elif event == "exec" and cand and immediate == "std" and not _code_generator(caller_file):
                # eval/exec by the standard library on the candidate's
                # behalf: typing's ForwardRef._evaluate runs a string the
                # candidate wrote as an annotation.
                refuse(event, os.path.basename(caller_file), "the standard library may not evaluate code for candidate code")
            elif event == "exec" and owner == "cand" and immediate == "std" and args and type(args[0]) is code_type:
                # dataclasses' or namedtuple's methods made for the
                # candidate (owner: no torch, Triton or runtime frame
                # between; a library module torch imports lazily during a
                # call makes its own dataclasses, which stay library code)
                mark_for_cand(args[0])
        elif rule == "ctypes":
            if owner == "cand":
                refuse(event, "", "candidate code may not use ctypes")
        elif rule == "setattr":
            if immediate == "cand" and args and not owned_by_bundle(args[0]):
                try:
                    what = "%s.%s" % (getattr(args[0], "__name__", type(args[0]).__name__), args[1])
                except Exception:  # noqa: BLE001
                    what = "?"
                refuse(event, what, "candidate code may not change objects it did not define")
        elif rule in ("getattr", "introspect"):
            if immediate == "cand":
                refuse(event, str(args[1]) if rule == "getattr" else "", "candidate code may not inspect the runtime's frames or objects")
        elif rule == "cand":
            if cand:
                refuse(event, "", "not allowed while candidate code runs")
        elif rule == "owner":
            if owner == "cand":
                refuse(event, repr(args[:1])[:200], "not allowed to candidate code")
        elif rule == "net":
            refuse(event, "", "no network access after a candidate is loaded")

    def mark_for_cand(code):
        """Record code and the code objects it holds (the functions it
        defines) as run on the candidate's behalf."""
        todo = [code]
        while todo:
            c = todo.pop()
            if id(c) in made_for_cand:
                continue
            made_for_cand[id(c)] = c
            todo.extend(k for k in c.co_consts if type(k) is code_type)

    def arm():
        state["armed"] = True

    def add_bundle(root):
        r = _real(root)
        if r and r not in bundles:
            bundles.append(r)
            kinds.clear()

    def refusals(since=0):
        """(how many refusals so far, the text of refusal number since (0:
        the first), "" when that one is not kept)."""
        recs = state["records"]
        return state["n"], (recs[since] if 0 <= since < len(recs) else "")

    sys.addaudithook(hook)
    h = Hook()
    h.arm, h.add_bundle, h.refusals, h.installed = arm, add_bundle, refusals, True
    return h
