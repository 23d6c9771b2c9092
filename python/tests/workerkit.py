"""Helpers of the worker protocol tests (test_worker, test_worker_devices):
a bundle of candidate sources that exercise the protocol (BUNDLE_FILES,
write_bundle), a worker process driven exactly as Go drives it (Worker),
and a test base that starts one per test (WorkerTestBase).
"""
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME_PARENT = os.path.dirname(HERE)  # .../python
sys.path.insert(0, RUNTIME_PARENT)

import torch  # noqa: E402

from cacheon_runtime import stio  # noqa: E402

CUDA = torch.cuda.is_available()
REPLY_TIMEOUT = 120

BUNDLE_FILES = {
    "kernels/__init__.py": "",
    "kernels/helpers.py": """
        import torch.nn.functional as F

        def silu_mul(x):
            d = x.shape[-1] // 2
            return F.silu(x[..., :d].float()).to(x.dtype) * x[..., d:]
    """,
    "kernels/cands.py": """
        import os
        import sys

        import torch

        from .helpers import silu_mul   # relative import inside the bundle
        from kernels import helpers     # absolute import of the bundle's own package

        PREPARES = 0
        CALLS = []

        def silu_and_mul(x, out):
            out.copy_(silu_mul(x))

        def writes_nothing(x, out):
            pass

        def writes_half(x, out):
            out[: out.shape[0] // 2].copy_(silu_mul(x)[: out.shape[0] // 2])

        def rebind(x, out):
            out.set_(torch.empty(out.shape, dtype=out.dtype, device=out.device))
            out.copy_(silu_mul(x))

        def mutate_input(x, out):
            out.copy_(silu_mul(x))
            x.mul_(2)

        def raises(x, out):
            out.fill_(1)
            raise ValueError("boom " + "z" * 20000)

        def exits(x, out):
            sys.exit(7)

        def chatty(x, out):
            print('{"id":"forged","ok":true}')
            sys.stdout.flush()
            os.write(1, b'{"id":"forged-fd","ok":true}\\n')
            sys.__stdout__.write('{"id":"forged-dunder","ok":true}\\n')
            sys.__stdout__.flush()
            out.copy_(silu_mul(x))

        def reads_stdin(x, out):
            data = sys.stdin.read()
            out.fill_(float(len(data)))

        def prepare_scale(w):
            global PREPARES
            PREPARES += 1
            return {"w2": w * 2}

        def scaled(x, prepared, out, count):
            out.copy_(x * prepared["w2"])
            count.fill_(PREPARES)

        STATES = []

        def prepare_tag(w):
            STATES.append(1000 + float(w.flatten()[0]))  # the order of the prepares
            return {"w2": w * 2, "tag": float(w.flatten()[0])}

        def tagged(x, prepared, out, seen):
            STATES.append(prepared["tag"])
            out.copy_(x * prepared["w2"])
            tail = STATES[-seen.numel():]
            seen.fill_(-1)
            seen[:len(tail)] = torch.tensor(tail, dtype=seen.dtype)

        LAYERED = []

        def layered(x, w, out, seen):
            LAYERED.append(float(w[0, 0]) * 1000 + float(x[0, 0]))
            LAYERED.append(float(w[3, 5]))
            out.copy_(x * w)
            tail = LAYERED[-seen.numel():]
            seen.fill_(-1)
            seen[:len(tail)] = torch.tensor(tail, dtype=seen.dtype)

        def chained(x, residual, w, out, out_residual):
            out_residual.copy_(x + residual)
            out.copy_(out_residual * w)

        def chained_frees(x, residual, w, out, out_residual):
            # honest in its values; with the layer whose w[0, 0] is 7 it
            # then frees the memory of the stream it hands on, which the
            # next call in the chain reads
            out_residual.copy_(x + residual)
            out.copy_(out_residual * w)
            if float(w[0, 0]) == 7.0:
                out_residual.storage().resize_(0)

        def prepare_fails(w):
            raise RuntimeError("bad weights")

        def rmsnorm(x, weight, out, eps):
            xf = x.float()
            out.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(out.dtype))

        def scalars(x, out, a, b, c, d):
            out.fill_(a + b + (1.0 if c else 0.0) + (0.0 if d is None else 100.0))

        def syncs(x, out):
            out.fill_(float(x.float().sum().item()))   # host sync: not capturable

        def stream_busy(x, out):
            # 1 where the current stream still had work queued at entry
            out.fill_(0.0 if torch.cuda.current_stream().query() else 1.0)

        def ints_nothing(x, idx):
            pass

        def all_reduce(x, out, group):
            import torch.distributed as dist
            out.copy_(x)
            dist.all_reduce(out, group=group)

        NOT_CALLABLE = 3
    """,
    "kernels/tri.py": """
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def _silu_mul(x_ptr, out_ptr, d, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            row = offs // d
            col = offs % d
            a = tl.load(x_ptr + row * 2 * d + col, mask=mask).to(tl.float32)
            b = tl.load(x_ptr + row * 2 * d + d + col, mask=mask).to(tl.float32)
            y = a / (1.0 + tl.exp(-a)) * b
            tl.store(out_ptr + row * d + col, y.to(out_ptr.dtype.element_ty), mask=mask)

        def triton_silu_and_mul(x, out):
            n = out.numel()
            _silu_mul[(triton.cdiv(n, 256),)](x, out, out.shape[-1], n, BLOCK=256)
    """,
    "kernels/patcher.py": """
        import torch

        # Hostile import: patch the methods a naive harness would use to
        # poison outputs and to observe identity.
        torch.Tensor.fill_ = lambda self, value: self
        torch.Tensor.data_ptr = lambda self: 4096
        torch.Tensor.copy_ = lambda self, src, non_blocking=False: self

        def writes_nothing(x, out):
            pass
    """,
    "kernels/broken_syntax.py": "def f(:\n",
    "kernels/raises_on_import.py": "raise RuntimeError('import-time failure')\n",
    "kernels/exits_on_import.py": "import sys\nsys.exit(5)\n",
    "json.py": "def f(x, out):\n    pass\n",
}


def write_bundle(root):
    for rel, text in BUNDLE_FILES.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(textwrap.dedent(text))


def silu_ref(x):
    d = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :d].float()).to(x.dtype) * x[..., d:]


class Worker:
    """One worker process started exactly as Go starts it."""

    def __init__(self, jobdir):
        self.jobdir = jobdir
        self.err = tempfile.TemporaryFile()
        code = ("import sys; sys.path.insert(0, %r); "
                "from cacheon_runtime import worker; worker.main()" % RUNTIME_PARENT)
        # The job entries of the environment Go gives a worker
        # (worker.CandidateEnv): HOME, TMPDIR and the Triton cache in the
        # job directory, the only place the runtime's audit hook lets the
        # process write.
        env = dict(os.environ, HOME=jobdir, TMPDIR=jobdir, TRITON_CACHE_DIR=os.path.join(jobdir, "triton-cache"),
                   OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
        self.proc = subprocess.Popen([sys.executable, "-I", "-B", "-c", code], cwd=jobdir,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, env=env)
        self.lines = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.n = 0

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def reply(self):
        line = self.lines.get(timeout=REPLY_TIMEOUT)
        if line is None:
            raise AssertionError("worker exited; stderr:\n" + self.stderr())
        return json.loads(line)

    def request(self, req):
        self.n += 1
        req = dict(req)
        req.setdefault("id", "q%d" % self.n)
        self.send_raw((json.dumps(req) + "\n").encode())
        rep = self.reply()
        if rep.get("id") != req["id"]:
            raise AssertionError("reply %r to request %r" % (rep, req))
        return rep

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")

    def close(self):
        if self.proc.poll() is None:
            try:
                self.request({"op": "shutdown"})
                self.proc.wait(timeout=30)
            except Exception:  # noqa: BLE001
                self.proc.kill()
                self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.err.close()


class WorkerTestBase(unittest.TestCase):
    """One bundle, one job directory and one worker shared by the class."""

    device = "cpu"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cacheon-worker-test-")
        cls.bundle = os.path.join(cls.tmp, "bundle")
        write_bundle(cls.bundle)
        cls.job = os.path.join(cls.tmp, "job")
        os.makedirs(cls.job)
        cls.w = Worker(cls.job)
        cls.case_n = 0

    @classmethod
    def tearDownClass(cls):
        cls.w.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def load(self, entry, module=None, source="kernels/cands.py", prepare=""):
        module = module or "m-" + entry
        rep = self.w.request({"op": "load", "module": module, "bundle": self.bundle,
                              "source": source, "entry": entry, "prepare": prepare})
        return module, rep

    def case_dir(self):
        type(self).case_n += 1
        d = os.path.join(self.job, "case-%d" % self.case_n)
        os.makedirs(d)
        return d

    def run_case(self, entry, inputs, outputs, args=None, replays=(), prepare="",
                 prepare_args=(), graph=False, graph_replays=(), device=None,
                 source="kernels/cands.py", packed=None, decoys=(), decoy_calls=None,
                 layer_args=None, feeds=(), decoy_dumps=None, chain=None):
        """Write inputs/replays, send load + run; return (reply, case dir)."""
        module, rep = self.load(entry, prepare=prepare, source=source)
        self.assertTrue(rep["ok"], rep)
        d = self.case_dir()
        stio.save(os.path.join(d, "in.safetensors"), inputs)
        names = []
        for i, r in enumerate(replays):
            names.append("r%d.safetensors" % (i + 1))
            stio.save(os.path.join(d, names[-1]), r)
        gnames = []
        for i, r in enumerate(graph_replays):
            gnames.append("g%d.safetensors" % (i + 1))
            stio.save(os.path.join(d, gnames[-1]), r)
        dnames = []
        for i, r in enumerate(decoys):
            dnames.append("decoy%d.safetensors" % (i + 1))
            stio.save(os.path.join(d, dnames[-1]), r)
        fnames = []
        for i, r in enumerate(feeds):
            fnames.append("feed%d.safetensors" % i)
            stio.save(os.path.join(d, fnames[-1]), r)
        extra = {}
        if fnames:
            extra["decoy_feeds"] = fnames
        if layer_args is not None:
            extra["layer_args"] = list(layer_args)
        if packed is not None:
            extra["packed"] = packed
        if dnames:
            extra["decoys"] = dnames
        if decoy_calls is not None:
            extra["decoy_calls"] = decoy_calls
        if decoy_dumps is not None:
            extra["decoy_dumps"] = decoy_dumps
        if chain is not None:
            extra["chain"] = chain
        if args is None:
            args = [{"name": "x", "kind": "input"}, {"name": "out", "kind": "output"}]
        rep = self.w.request({
            "op": "run", "module": module, "device": device or self.device,
            "entry": entry, "prepare": prepare, "args": args,
            "prepare_args": list(prepare_args), "outputs": outputs,
            "inputs": "in.safetensors", "replays": names, "graph": graph,
            "graph_replays": gnames, "dir": d, **extra})
        return rep, d

    @staticmethod
    def out_spec(name="out", dtype="float32", shape=(7, 96), stride=None, alignment=16):
        if stride is None:
            stride = [shape[-1], 1] if len(shape) == 2 else None
        spec = {"name": name, "dtype": dtype, "shape": list(shape), "alignment": alignment}
        if stride is not None:
            spec["stride"] = list(stride)
        return spec

    def call_file(self, d, call):
        t, _ = stio.load(os.path.join(d, call["file"]))
        return t
