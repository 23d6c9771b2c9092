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


if __name__ == "__main__":
    unittest.main()
