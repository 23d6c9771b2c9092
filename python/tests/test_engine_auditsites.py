"""Tests of the graph audit (auditsites): sites captured beside candidate
calls and dumped after the replays that cover a drawn position.

Run: python3 -m unittest discover -s python/tests -p 'test_engine*.py'
"""

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402

from cacheon_runtime import stio  # noqa: E402
from cacheon_runtime.wire import Failure  # noqa: E402
from test_engine_dispatch import Bundles, check_dump  # noqa: E402
from test_engine_model import make, tiny_arena  # noqa: E402


class AuditSitesTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.b = Bundles()

    @classmethod
    def tearDownClass(cls):
        cls.b.tmp.cleanup()

    def test_audit_graph_sites(self):
        # A capture on the CPU (no CUDA graph: its copies run once, during
        # the capture, as they would in every replay): the drawn positions
        # a "replay" covers are dumped from the sites' copies, numbered as
        # the engine counts selected calls, and only those; an engine
        # without audit.graph keeps no site.
        with tempfile.TemporaryDirectory() as d:
            eng = make(tiny_arena("llama"), stack=self.b.stack("rms_good", "decode_good"), audit={"dir": d, "graph": True})
            dd = eng.d
            gen = torch.Generator().manual_seed(3)
            x, w = torch.randn(3, 64, generator=gen), torch.randn(64, generator=gen)
            b, hq, hkv, dim, ps, npages = 2, 4, 2, 16, 4, 6
            q = torch.randn(b, hq, dim, generator=gen)
            kc, vc = torch.randn(npages, ps, hkv, dim, generator=gen), torch.randn(npages, ps, hkv, dim, generator=gen)
            bt = torch.tensor([[4, 1], [2, 0]], dtype=torch.int32)
            sl = torch.tensor([7, 3], dtype=torch.int32)
            dd.set_mode("decode", True)
            dd.begin_capture()
            for _ in range(3):
                dd.rmsnorm(x, w, 1e-5)
            dd.decode(q, kc, vc, bt, sl, 0.25)
            log = dd.end_capture()
            self.assertEqual(sorted(log.sites["norm.rmsnorm"]), [0, 1, 2])
            self.assertEqual(sorted(log.sites["attention.decode"]), [0])
            self.assertEqual(os.listdir(d), [])
            base = dd.counts["norm.rmsnorm"]["selected"]
            dbase = dd.counts["attention.decode"]["selected"]
            dd.set_audit_calls({"norm.rmsnorm": [base + 1, base + 5], "attention.decode": [dbase + 1]})
            dd.add_log(log)  # the first replay: rmsnorm base..base+2, decode dbase
            self.assertEqual(os.listdir(d), ["norm.rmsnorm-%d.safetensors" % (base + 1)])
            dd.add_log(log)  # the second: rmsnorm base+3..base+5, decode dbase+1
            want = {"norm.rmsnorm-%d.safetensors" % (base + 1), "norm.rmsnorm-%d.safetensors" % (base + 5),
                    "attention.decode-%d.safetensors" % (dbase + 1)}
            self.assertEqual(set(os.listdir(d)), want)
            for f in want:
                t, meta = stio.load(os.path.join(d, f))
                self.assertEqual(meta["graph_mode"], "graph")
                check_dump(self, meta["slot"], t, meta)
            self.assertEqual(dd.counts["norm.rmsnorm"]["selected"], base + 6)
            self.assertEqual(dd.counts["norm.rmsnorm"]["audited"], 2)
            plain = make(tiny_arena("llama"), stack=self.b.stack("rms_good"), audit={"dir": d})
            plain.d.set_mode("decode", True)
            plain.d.begin_capture()
            plain.d.rmsnorm(x, w, 1e-5)
            self.assertEqual(plain.d.end_capture().sites, {})
            with self.assertRaises(Failure):
                make(tiny_arena("llama"), stack=self.b.stack("rms_good"), audit={"dir": d, "graph": "yes"})


if __name__ == "__main__":
    unittest.main()
