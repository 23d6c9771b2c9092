"""Tests of the runtime guard (issue 16, classes 5 and 6 and the audit hook):
attacks on the worker's own poison, refresh and dumps through torch modes,
Tensor subclasses, replaced torch functions and kernels registered over
ATen operators, and operations the PEP 578 audit hook refuses.

The static scan is the first line and would refuse most of these bundles
before they run; these tests bypass it: candidate modules are loaded
through the worker's own loader (the worker process driven exactly as Go
drives it, or cacheon_runtime's modules in a child Python), so the runtime
guard, the second line, is what they exercise.

Attacks that change process-wide torch state (a kernel registered over
aten::fill_, a replaced torch.Tensor method) run in a child process; only
thread-local, context-managed state is touched in this process.

Run: python3 -B -m unittest discover -s python/tests
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PARENT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, PARENT)

import torch  # noqa: E402

from cacheon_runtime import guard, stio  # noqa: E402
from test_engine_main import AUDIT_OFF, Proc  # noqa: E402
from test_engine_model import tiny_arena, wave  # noqa: E402
from guardattacks import ATTACKS  # noqa: E402
from workerkit import Worker  # noqa: E402


def write_bundle(root):
    os.makedirs(os.path.join(root, "kern"), exist_ok=True)
    with open(os.path.join(root, "kern", "__init__.py"), "w") as f:
        f.write("")
    for name, src in ATTACKS.items():
        with open(os.path.join(root, "kern", name + ".py"), "w") as f:
            f.write(textwrap.dedent(src))
    with open(os.path.join(root, "json.py"), "w") as f:
        f.write("VALUE = 1\n")
    # Named like an extension module: importing it must be refused before
    # the loader would even open it.
    with open(os.path.join(root, "evil_native%s" % _ext_suffix()), "wb") as f:
        f.write(b"\x7fELF not really")


def _ext_suffix():
    import importlib.machinery
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def silu_ref(x):
    d = x.shape[-1] // 2
    return torch.nn.functional.silu(x[:, :d]) * x[:, d:]


class WorkerGuardTest(unittest.TestCase):
    """The worker, started as Go starts it, loading attack modules through
    its own loader (no scan)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cacheon-guard-test-")
        cls.bundle = os.path.join(cls.tmp, "bundle")
        write_bundle(cls.bundle)
        cls.job = os.path.join(cls.tmp, "job")
        os.makedirs(cls.job)
        cls.n = 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        # A fresh worker per test: an attack that succeeded would poison
        # the process for the next one.
        self.w = Worker(self.job)
        self.addCleanup(self.w.close)

    def load(self, name, entry="silu_and_mul"):
        return self.w.request({"op": "load", "module": name + "/" + entry, "bundle": self.bundle,
                               "source": "kern/%s.py" % name, "entry": entry})

    def run_case(self, name, entry="silu_and_mul", replays=1):
        rep = self.load(name, entry)
        self.assertTrue(rep["ok"], rep)
        type(self).n += 1
        d = os.path.join(self.job, "case-%d" % self.n)
        os.makedirs(d)
        g = torch.Generator().manual_seed(self.n)
        xs = [torch.randn(5, 64, generator=g) for _ in range(1 + replays)]
        stio.save(os.path.join(d, "in.safetensors"), {"x": xs[0]})
        names = []
        for i, x in enumerate(xs[1:]):
            names.append("r%d.safetensors" % (i + 1))
            stio.save(os.path.join(d, names[-1]), {"x": x})
        rep = self.w.request({
            "op": "run", "module": name + "/" + entry, "device": "cpu", "entry": entry, "prepare": "",
            "args": [{"name": "x", "kind": "input"}, {"name": "out", "kind": "output"}],
            "outputs": [{"name": "out", "dtype": "float32", "shape": [5, 32], "stride": [32, 1],
                         "alignment": 16}],
            "inputs": "in.safetensors", "replays": names, "graph": False, "dir": d})
        return rep, d, xs

    def assert_load_tamper(self, name, words):
        rep = self.load(name)
        self.assertFalse(rep["ok"], rep)
        self.assertEqual(rep["error"]["class"], "tamper", rep)
        self.assertIn(words, rep["error"]["message"])

    # -- class 5: modes, subclasses, replaced functions, registered kernels

    def test_mode_entered_at_import(self):
        self.assert_load_tamper("mode_at_import", "torch function mode is active")

    def test_dispatch_mode_entered_at_import(self):
        self.assert_load_tamper("dispatch_mode_at_import", "dispatch")

    def test_mode_left_active_by_a_call(self):
        rep, d, xs = self.run_case("mode_in_call")
        self.assertTrue(rep["ok"], rep)
        c0 = rep["calls"][0]
        self.assertEqual(c0["error"]["class"], "tamper", c0)
        self.assertIn("torch function mode is active", c0["error"]["message"])
        self.assertEqual(len(rep["calls"]), 1)  # the run stops there

    def test_dispatch_mode_cannot_fake_the_dump(self):
        rep, d, _xs = self.run_case("dispatch_mode_fakes_dump")
        self.assertTrue(rep["ok"], rep)
        c0 = rep["calls"][0]
        self.assertEqual(c0["error"]["class"], "tamper", c0)
        self.assertIn("dispatch", c0["error"]["message"])
        # What the dump says is what memory holds: the kernel wrote nothing,
        # so the output is the worker's NaN poison.
        t, _ = stio.load(os.path.join(d, c0["file"]))
        self.assertTrue(torch.isnan(t["out"]).all())

    def test_subclass_swapped_onto_an_output(self):
        rep, _d, _xs = self.run_case("subclass_swap")
        c0 = rep["calls"][0]
        self.assertEqual(c0["error"]["class"], "tamper", c0)
        self.assertIn("object.__setattr__", c0["error"]["message"])

    def test_torch_function_patched_onto_tensor(self):
        self.assert_load_tamper("tensor_torch_function_patched", "torch.Tensor.__torch_function__ was replaced")

    def test_fill_replaced(self):
        self.assert_load_tamper("fill_replaced", "torch.Tensor.fill_ was replaced")

    def test_synchronize_replaced(self):
        self.assert_load_tamper("synchronize_replaced", "torch.cuda.synchronize was replaced")

    # -- class 3 without a store: ABC state and typing's caches (abcstate)

    def test_abc_subclass_register(self):
        self.assert_load_tamper("abc_subclass_register", "a candidate ABC")

    def test_abc_subclasshook(self):
        self.assert_load_tamper("abc_subclasshook", "defines __subclasshook__")

    def test_abc_cache_left_by_a_dropped_subclass(self):
        rep, d, xs = self.run_case("abc_transient_cache")
        self.assertTrue(rep["ok"], rep)
        c0 = rep["calls"][0]
        self.assertEqual(c0["error"]["class"], "tamper", c0)
        self.assertIn("isinstance cache of numbers.Real held torch.Tensor", c0["error"]["message"])

    def test_typing_cache_poison(self):
        self.assert_load_tamper("typing_cache_poison", "typing's subscription cache")

    def test_honest_abc_and_typing_use_passes(self):
        rep, d, xs = self.run_case("honest_abc", replays=2)
        self.assertTrue(rep["ok"], rep)
        for c, x in zip(rep["calls"], xs):
            self.assertIsNone(c["error"], c)
            t, _ = stio.load(os.path.join(d, c["file"]))
            self.assertTrue(torch.allclose(t["out"], silu_ref(x), atol=1e-6))

    def test_kernel_registered_over_fill(self):
        self.assert_load_tamper("library_fill", "aten::fill_.Scalar")

    def test_freed_output_is_not_touched(self):
        rep, _d, _xs = self.run_case("frees_output")
        self.assertTrue(rep["ok"], rep)
        c0 = rep["calls"][0]
        self.assertEqual(c0["error"]["class"], "exception", c0)
        self.assertIn("outside its storage", c0["error"]["message"])
        self.assertTrue(self.w.request({"op": "hello"})["ok"])

    # -- the audit hook

    def test_honest_stdlib_use_passes(self):
        rep, d, xs = self.run_case("honest_stdlib", replays=2)
        self.assertTrue(rep["ok"], rep)
        for c, x in zip(rep["calls"], xs):
            self.assertIsNone(c["error"], c)
            t, _ = stio.load(os.path.join(d, c["file"]))
            self.assertTrue(torch.allclose(t["out"], silu_ref(x), atol=1e-6))
            self.assertTrue(torch.equal(t["in.x"], x))

    def test_hook_refusals_are_reported(self):
        cases = {"read_secret": "open /etc/passwd", "write_job": "forged.safetensors",
                 "spawn": "subprocess.Popen", "connect": "socket.__new__", "execs": "compile",
                 "typing_eval": "exec",
                 "dlopen": "ctypes.dlopen", "unpickle": "pickle.find_class",
                 "renames_type": "object.__setattr__", "frames": "sys._getframe",
                 "imports_native": "evil_native", "generated_read": "open /etc/passwd"}
        for entry, words in cases.items():
            with self.subTest(entry=entry):
                rep, d, _xs = self.run_case("hook_attempts", entry=entry, replays=0)
                self.assertTrue(rep["ok"], rep)
                c0 = rep["calls"][0]
                self.assertIsNotNone(c0["error"], (entry, c0))
                self.assertEqual(c0["error"]["class"], "tamper", (entry, c0))
                self.assertIn("audit hook refused", c0["error"]["message"])
                self.assertIn(words, c0["error"]["message"])
                self.assertFalse(os.path.exists(os.path.join(self.job, "forged.safetensors")))

    def test_worker_still_writes_its_dumps_after_arming(self):
        rep, d, xs = self.run_case("honest_stdlib", replays=1)
        self.assertTrue(rep["ok"], rep)
        self.assertTrue(all(os.path.exists(os.path.join(d, c["file"])) for c in rep["calls"]))

    # -- class 3, 4 and 5: what a library frame stores, modules bound elsewhere

    def test_dataclass_on_a_torch_class(self):
        self.assert_load_tamper("dataclass_on_linear", "torch.nn.modules.linear.Linear.__")

    def test_typing_final_on_a_torch_function(self):
        self.assert_load_tamper("typing_final_on_torch",
                                "the attributes of torch.nn.functional.silu changed (__final__ added")

    def test_code_of_a_torch_function_swapped(self):
        self.assert_load_tamper("code_swapped", "the code or defaults of torch.nn.functional.hardswish were replaced")

    def test_patch_in_a_call_fails_the_case(self):
        rep, _d, _xs = self.run_case("patches_in_call", replays=1)
        self.assertTrue(rep["ok"], rep)
        last = rep["calls"][-1]
        self.assertEqual(last["error"]["class"], "tamper", last)
        self.assertIn("during the case: ", last["error"]["message"])
        self.assertIn("Bilinear", last["error"]["message"])

    def test_grad_mode_left_on_at_import(self):
        self.assert_load_tamper("grad_left_on", "torch.is_grad_enabled() is True, not False as at start")

    def test_backend_switches_at_import(self):
        # rt50a's a3 reached torch.set_flush_denormal past the scan; the
        # guard compares the CPU's subnormal flush and the backends' switches.
        self.assert_load_tamper("flush_denormal_at_import", "flushing float32 subnormals to zero")
        self.assert_load_tamper("mkldnn_off_at_import", "torch._C._get_mkldnn_enabled() is False, not True")

    def test_bundle_module_rebound_in_a_call(self):
        rep, _d, _xs = self.run_case("modules_rebound_in_call", replays=1)
        self.assertTrue(rep["ok"], rep)
        last = rep["calls"][-1]
        self.assertEqual(last["error"]["class"], "tamper", last)
        self.assertIn("sys.modules['kern.helper_rebound'] is module 'operator'", last["error"]["message"])

    def test_import_bound_outside_the_bundle(self):
        self.assert_load_tamper("shadowed_import", "named like a module of the bundle")

    # -- class 6

    def test_conditions_in_verify(self):
        rep, _d, _xs = self.run_case("conditions", replays=0)
        msg = rep["calls"][0]["error"]["message"]
        self.assertIn("CONDITIONS grad=False inference=False threads=%d poisoned=True" % guard.THREADS, msg)


class EngineGuardTest(unittest.TestCase):
    """The engine process (main), as Go starts it, with candidates loaded
    through dispatch."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cacheon-guard-engine-")
        cls.bundle = os.path.join(cls.tmp, "bundle")
        write_bundle(cls.bundle)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def row(self, name, entry="silu_and_mul"):
        return {"bundle": self.bundle, "source": "kern/%s.py" % name, "entry": entry, "prepare": "",
                "variant": "default", "domain": {"capabilities": {}}}

    def serve(self, name, entry="silu_and_mul", strict=True):
        p = Proc()
        try:
            load = p.call({"op": "load", "arena": tiny_arena(), "stack": {"activation.silu_and_mul":
                                                                          self.row(name, entry)},
                           "strict": strict, "audit": AUDIT_OFF})
            gen = p.call({"op": "generate", "requests": wave(2)}) if load["ok"] else None
        finally:
            code, err = p.close()
        return load, gen, code, err

    def test_conditions_same_as_verify(self):
        load, gen, code, _err = self.serve("conditions")
        self.assertTrue(load["ok"], load)
        self.assertEqual(gen["error"]["class"], "candidate_error", gen)
        self.assertIn("CONDITIONS grad=False inference=False threads=%d poisoned=True" % guard.THREADS,
                      gen["error"]["message"])
        self.assertEqual(code, 3)

    def test_mode_at_import_fails_the_load_even_non_strict(self):
        load, _gen, _code, _err = self.serve("mode_at_import", strict=False)
        self.assertEqual(load["error"]["class"], "load_error", load)
        self.assertIn("tamper", load["error"]["message"])
        self.assertIn("torch function mode", load["error"]["message"])

    def test_mode_left_by_a_call_aborts_even_non_strict(self):
        load, gen, code, _err = self.serve("mode_in_call", strict=False)
        self.assertTrue(load["ok"], load)
        self.assertEqual(gen["error"]["class"], "candidate_error", gen)
        self.assertIn("runtime guard", gen["error"]["message"])
        self.assertEqual(code, 3)

    def test_hook_refusal_aborts(self):
        load, gen, code, _err = self.serve("hook_attempts", entry="read_secret")
        self.assertTrue(load["ok"], load)
        self.assertEqual(gen["error"]["class"], "candidate_error", gen)
        self.assertIn("audit hook refused", gen["error"]["message"])

    def test_honest_candidate_serves(self):
        load, gen, code, err = self.serve("honest_stdlib")
        self.assertTrue(load["ok"], load)
        self.assertTrue(gen["ok"], (gen, err))
        self.assertEqual(code, 0, err)


if __name__ == "__main__":
    unittest.main()
