"""Tests of the arena runtime's JSON-lines server (docs/engine-protocol.md),
started as Go starts it, on the CPU.

Run: python3 -m unittest discover -s python/tests -p 'test_engine*.py'
"""

import array
import base64
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

from test_engine_model import tiny_arena, wave  # noqa: E402

START = ("import sys; sys.path.insert(0, %r); from cacheon_runtime.engine import main; main.main()" % PARENT)


class Proc:
    def __init__(self):
        # As Go starts it: a job directory as the working directory, HOME,
        # TMPDIR and the Triton cache in it (worker.CandidateEnv).
        self.job = tempfile.mkdtemp(prefix="cacheon-engine-test-")
        env = dict(os.environ, HOME=self.job, TMPDIR=self.job, OMP_NUM_THREADS="1",
                   TRITON_CACHE_DIR=os.path.join(self.job, "triton-cache"))
        self.p = subprocess.Popen([sys.executable, "-I", "-B", "-c", START], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.job, env=env)
        self.n = 0

    def call(self, obj):
        self.n += 1
        obj = dict(obj, id=str(self.n))
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        reply = json.loads(line)
        assert reply["id"] == str(self.n), (reply, self.n)
        return reply

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait(30)
        err = self.p.stderr.read().decode()
        self.p.stdout.close()
        self.p.stderr.close()
        shutil.rmtree(self.job, ignore_errors=True)
        return self.p.returncode, err


def bundle(d, name, body):
    os.makedirs(os.path.join(d, name), exist_ok=True)
    with open(os.path.join(d, name, "k.py"), "w") as f:
        f.write(textwrap.dedent(body))
    return {"bundle": os.path.join(d, name), "source": "k.py", "entry": "silu_and_mul", "prepare": "",
            "variant": "default", "domain": {"capabilities": {}}}


AUDIT_OFF = {"every": 0, "share": "0", "seed": 0, "dir": "", "max_dumps": 0}


class Server(unittest.TestCase):
    def test_session(self):
        p = Proc()
        try:
            h = p.call({"op": "hello"})
            self.assertTrue(h["ok"])
            self.assertEqual(set(h), {"id", "ok", "python", "torch", "cuda", "device_name", "triton", "pid",
                                      "audit_hook", "device_count"})
            self.assertIs(h["audit_hook"], True)
            r = p.call({"op": "generate", "requests": []})
            self.assertEqual(r["error"]["class"], "bad_request")
            for bad_group in ({"world_size": 1, "rank": 0, "backend": "gloo"}, {"world_size": 2, "rank": 2, "backend": "gloo"},
                              {"world_size": 2, "rank": 0, "backend": "mpi"}):
                g = dict(bad_group, op="group", init_method="tcp://127.0.0.1:1")
                self.assertEqual(p.call(g)["error"]["class"], "bad_request", g)
            load = p.call({"op": "load", "arena": tiny_arena("mixtral"), "checkpoint": "", "stack": {},
                           "graphs": True, "strict": True, "audit": AUDIT_OFF, "profile": True})
            self.assertTrue(load["ok"], load)
            self.assertEqual(set(load), {"id", "ok", "params", "layers", "device", "dtype", "kv_pages",
                                         "graph_buckets", "prefill_graph_tokens", "rank", "world_size"})
            self.assertEqual((load["rank"], load["world_size"]), (0, 1))
            # a process group comes before the first load, never after
            late = p.call({"op": "group", "backend": "gloo", "init_method": "tcp://127.0.0.1:1", "rank": 0,
                           "world_size": 2})
            self.assertEqual(late["error"]["class"], "bad_request", late)
            self.assertIn("before any load", late["error"]["message"])
            reqs = wave(3)
            g = p.call({"op": "generate", "requests": reqs, "arrivals": [0, 2, 2]})
            self.assertTrue(g["ok"], g)
            self.assertEqual([r["rid"] for r in g["results"]], [q["rid"] for q in reqs])
            for q, r in zip(reqs, g["results"]):
                self.assertEqual(set(r), {"rid", "tokens_i32", "logprobs_f32"})
                r["tokens"] = array.array("i", base64.b64decode(r.pop("tokens_i32"))).tolist()
                self.assertEqual(len(r["tokens"]), q["max_new_tokens"])
                r["logprobs"] = array.array("f", base64.b64decode(r.pop("logprobs_f32"))).tolist()
                self.assertEqual(len(r["logprobs"]), q["max_new_tokens"])
                self.assertTrue(all(lp <= 0 for lp in r["logprobs"]))
            self.assertGreater(g["steps"]["decode"], 0)
            seq = reqs[0]["prompt"] + g["results"][0]["tokens"]
            s = p.call({"op": "score", "sequences": [seq], "from": [len(reqs[0]["prompt"])]})
            self.assertEqual(len(s["nll"][0]), len(g["results"][0]["tokens"]))
            for nll, lp in zip(s["nll"][0], g["results"][0]["logprobs"]):
                self.assertAlmostEqual(nll, -lp, delta=1e-4)
            st = p.call({"op": "stats"})
            self.assertGreater(st["slots"]["moe.fused_experts"]["stock"], 0)
            self.assertEqual(st["receipts"], [])
            prof = st["profile"]
            self.assertGreater(prof["decode"]["count"], 0)
            self.assertEqual(set(prof["decode"]["split_ms"]),
                             {"attention", "mlp", "norm", "sampling", "collective", "other", "unattributed"})
            self.assertIn("moe.fused_experts", prof["decode"]["slots_ms"])
            for bad in ({"op": "nope"}, {"op": "generate", "requests": [{"rid": "x", "prompt": [1]}]},
                        {"op": "score", "sequences": [[1, 2]], "from": [0]}):
                r = p.call(bad)
                self.assertFalse(r["ok"])
                self.assertEqual(r["error"]["class"], "bad_request", r)
            self.assertTrue(p.call({"op": "shutdown"})["ok"])
        finally:
            code, err = p.close()
        self.assertEqual(code, 0, err)

    def test_prints_cannot_forge_and_strict_abort_exits(self):
        with tempfile.TemporaryDirectory() as d:
            printing = bundle(d, "printing", """
                import torch
                print('{"id":"2","ok":true,"forged":true}')
                def silu_and_mul(x, out):
                    print('{"id":"3","ok":true,"results":[]}')
                    d = x.shape[-1] // 2
                    out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
            """)
            raising = bundle(d, "raising", """
                def silu_and_mul(x, out):
                    raise RuntimeError("candidate blew up")
            """)
            p = Proc()
            try:
                r = p.call({"op": "load", "arena": tiny_arena(), "stack": {"activation.silu_and_mul": printing},
                            "strict": True, "audit": AUDIT_OFF})
                self.assertNotIn("forged", r)
                g = p.call({"op": "generate", "requests": wave(2)})
                self.assertTrue(g["ok"])
                self.assertGreater(p.call({"op": "stats"})["slots"]["activation.silu_and_mul"]["completed"], 0)
                r = p.call({"op": "load", "arena": tiny_arena(), "stack": {"activation.silu_and_mul": raising},
                            "strict": True, "audit": AUDIT_OFF})
                self.assertTrue(r["ok"], r)
                g = p.call({"op": "generate", "requests": wave(2)})
                self.assertFalse(g["ok"])
                self.assertEqual(g["error"]["class"], "candidate_error")
                self.assertIn("candidate blew up", g["error"]["message"])
            finally:
                code, err = p.close()
            self.assertEqual(code, 3)
            self.assertIn('"forged":true', err)

    def test_load_errors(self):
        with tempfile.TemporaryDirectory() as d:
            missing = bundle(d, "missing", "def other(x, out):\n    pass\n")
            p = Proc()
            try:
                r = p.call({"op": "load", "arena": tiny_arena(), "stack": {"activation.silu_and_mul": missing}})
                self.assertEqual(r["error"]["class"], "load_error")
                self.assertIn("missing_entry", r["error"]["message"])
                r = p.call({"op": "load", "arena": tiny_arena(), "checkpoint": "/nonexistent.safetensors"})
                self.assertEqual(r["error"]["class"], "load_error")
                a = tiny_arena()
                a["device"] = "cuda"
                r = p.call({"op": "load", "arena": a})
                if not r["ok"]:
                    self.assertEqual(r["error"]["class"], "load_error")
            finally:
                code, _err = p.close()
            self.assertEqual(code, 0)


if __name__ == "__main__":
    unittest.main()
