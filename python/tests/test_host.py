"""Tests of cacheon_runtime.host.cuda_preinit: the CUDA context created on a
thread of its own while torch imports (docs/worker-protocol.md).

Run: python3 -m unittest discover -s python/tests   (from the repo root)
"""

import os
import sys
import threading
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from cacheon_runtime import host  # noqa: E402


def preinit_threads():
    return [t for t in threading.enumerate() if t.name == "cacheon-cuda-preinit"]


class CudaPreinit(unittest.TestCase):
    def test_other_devices_start_nothing(self):
        for env in ({}, {"CACHEON_DEVICE": "cpu"}, {"CACHEON_DEVICE": "cuda", "CACHEON_RANK": "x"}):
            with self.subTest(env=env), mock.patch.dict(os.environ, env, clear=True):
                before = threading.active_count()
                wait = host.cuda_preinit()
                self.assertEqual(threading.active_count(), before)
                self.assertIsNone(wait())

    def test_cuda_thread_ends_by_the_wait(self):
        # Without a driver (CI) the thread finds no libcuda and ends; with
        # one it creates the context. Either way nothing is left running
        # once the caller waited, and torch still initialises the device.
        with mock.patch.dict(os.environ, {"CACHEON_DEVICE": "cuda", "CACHEON_RANK": "0"}, clear=True):
            wait = host.cuda_preinit()
            wait()
        self.assertEqual(preinit_threads(), [])
        import torch
        if torch.cuda.is_available():
            x = torch.ones(4, device="cuda")
            torch.cuda.synchronize()
            self.assertEqual(float(x.sum()), 4.0)

    def test_driver_errors_are_left_to_torch(self):
        # A driver that fails every call must not raise in the runtime.
        class Failing:
            def __getattr__(self, name):
                return lambda *a: 100  # CUDA_ERROR_NO_DEVICE

        with mock.patch.dict(os.environ, {"CACHEON_DEVICE": "cuda"}, clear=True), \
                mock.patch("ctypes.CDLL", return_value=Failing()):
            host.cuda_preinit()()
        self.assertEqual(preinit_threads(), [])


class TritonKey(unittest.TestCase):
    """host.triton_key computes Triton's cache key where Triton has one,
    and is silent where there is no Triton or it fails."""

    def _fake_triton(self, body):
        import tempfile
        root = tempfile.mkdtemp(prefix="fake-triton-")
        os.makedirs(os.path.join(root, "triton", "runtime"))
        for rel in ("triton/__init__.py", "triton/runtime/__init__.py"):
            open(os.path.join(root, rel), "w").close()
        with open(os.path.join(root, "triton", "runtime", "cache.py"), "w") as f:
            f.write(body)
        self.addCleanup(lambda: [sys.modules.pop(m) for m in list(sys.modules) if m.split(".")[0] == "triton"])
        return root

    def test_key_computed(self):
        root = self._fake_triton("calls = []\ndef triton_key():\n    calls.append(1)\n    return 'k'\n")
        with mock.patch.object(sys, "path", [root] + sys.path):
            host.triton_key()
            from triton.runtime import cache
            self.assertEqual(cache.calls, [1])

    def test_failure_is_left_to_triton(self):
        root = self._fake_triton("def triton_key():\n    raise OSError('unreadable')\n")
        with mock.patch.object(sys, "path", [root] + sys.path):
            host.triton_key()  # must not raise

    def test_no_triton(self):
        with mock.patch("importlib.util.find_spec", return_value=None):
            host.triton_key()

    def test_only_where_go_says_triton(self):
        # cuda_preinit's thread computes the key only under CACHEON_TRITON=1
        for flag, want in (("1", 1), ("0", 0), (None, 0)):
            env = {"CACHEON_DEVICE": "cuda", "CACHEON_RANK": "0"}
            if flag is not None:
                env["CACHEON_TRITON"] = flag
            with self.subTest(flag=flag), mock.patch.dict(os.environ, env, clear=True), \
                    mock.patch("ctypes.CDLL", side_effect=OSError("no driver")), \
                    mock.patch.object(host, "triton_key") as key:
                host.cuda_preinit()()
                self.assertEqual(key.call_count, want)


if __name__ == "__main__":
    unittest.main()
