"""Tests of cacheon_runtime.stio (safetensors with torch alone).

Run: python3 -m unittest discover -s python/tests   (from the repo root)
"""

import json
import os
import struct
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE)))

import torch  # noqa: E402

from cacheon_runtime import stio  # noqa: E402


def raw_file(header, data=b"", pad=True):
    """Build a safetensors file from a header (dict or str) and data bytes."""
    h = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    hb = h.encode("utf-8")
    if pad:
        hb += b" " * ((-len(hb)) % 8)
    return struct.pack("<Q", len(hb)) + hb + data


class RoundTrip(unittest.TestCase):
    def tensors(self):
        g = torch.Generator().manual_seed(1)
        return {
            "bf": torch.randn(3, 5, generator=g).to(torch.bfloat16),
            "f16": torch.randn(7, generator=g).to(torch.float16),
            "f32": torch.randn(2, 3, 4, generator=g),
            "f64": torch.tensor(3.25, dtype=torch.float64),  # rank 0
            "i32": torch.arange(6, dtype=torch.int32).reshape(2, 3).t(),  # not contiguous
            "i64": torch.tensor([-(2 ** 63), 2 ** 63 - 1, 0]),
            "u8": torch.arange(250, 255, dtype=torch.uint8),
            "b": torch.tensor([True, False, True]),
            "empty": torch.zeros(0, 4),
            "in.x": torch.ones(2),
            "ünï\"\\\n": torch.ones(1),
        }

    def test_round_trip_every_dtype(self):
        ts = self.tensors()
        data = stio.dumps(ts, {"k": "v"})
        back, md = stio.loads(data)
        self.assertEqual(md, {"k": "v"})
        self.assertEqual(set(back), set(ts))
        for name, t in ts.items():
            self.assertEqual(back[name].dtype, t.dtype, name)
            self.assertEqual(list(back[name].shape), list(t.shape), name)
            self.assertTrue(torch.equal(back[name], t), name)
            self.assertTrue(back[name].is_contiguous())

    def test_load_reads_what_loads_reads(self):
        ts = self.tensors()
        raw = stio.dumps(ts, {"k": "v"})
        a, b = stio.loads(raw), load_file(raw)
        self.assertEqual(a[1], b[1])
        self.assertEqual(list(a[0]), list(b[0]))  # header order
        for name in a[0]:
            self.assertTrue(torch.equal(a[0][name], b[0][name]), name)
        bools = raw_file({"b": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}}, b"\x00\x07\x01" + b"\x00" * 5)
        self.assertTrue(torch.equal(load_file(bools[:-5])[0]["b"], torch.tensor([False, True, True])))

    def test_save_load_file_matches_dumps(self):
        ts = self.tensors()
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "a.safetensors")
            n = stio.save(p, ts)
            with open(p, "rb") as f:
                raw = f.read()
            self.assertEqual(n, len(raw))
            self.assertEqual(raw, stio.dumps(ts))
            back, md = stio.load(p)
            self.assertIsNone(md)
            for name, t in ts.items():
                self.assertTrue(torch.equal(back[name], t), name)

    def test_layout_is_canonical(self):
        ts = {"b": torch.ones(3, dtype=torch.float16), "a": torch.ones(1, dtype=torch.int64),
              "c": torch.ones(2, dtype=torch.float16)}
        raw = stio.dumps(ts)
        n = struct.unpack("<Q", raw[:8])[0]
        self.assertEqual(n % 8, 0)
        hdr = raw[8:8 + n]
        text = hdr.decode("utf-8")
        self.assertEqual(text.rstrip(" "), text.rstrip(" ").strip())
        self.assertEqual(
            text.rstrip(" "),
            '{"a":{"data_offsets":[0,8],"dtype":"I64","shape":[1]},'
            '"b":{"data_offsets":[8,14],"dtype":"F16","shape":[3]},'
            '"c":{"data_offsets":[14,18],"dtype":"F16","shape":[2]}}')
        self.assertEqual(len(raw), 8 + n + 18)
        self.assertTrue(text.endswith(" ") or len(text.rstrip(" ")) % 8 == 0)

    def test_offsets_aligned_to_element_size(self):
        ts = {"a": torch.ones(3, dtype=torch.uint8), "b": torch.ones(3, dtype=torch.float32),
              "c": torch.ones(1, dtype=torch.float64), "d": torch.ones(3, dtype=torch.bfloat16)}
        raw = stio.dumps(ts)
        n = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + n])
        for name, ent in hdr.items():
            size = ts[name].element_size()
            self.assertEqual((8 + n + ent["data_offsets"][0]) % size, 0, name)

    def test_strided_and_bool_values(self):
        base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        view = base[:, 1:5:2]
        back, _ = stio.loads(stio.dumps({"v": view}))
        self.assertTrue(torch.equal(back["v"], view))
        # Bool bytes other than 0/1 normalize to True.
        f = raw_file({"b": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}}, b"\x00\x02\x01")
        back, _ = stio.loads(f)
        self.assertEqual(back["b"].tolist(), [False, True, True])

    def test_empty_file(self):
        raw = stio.dumps({})
        self.assertEqual(raw, struct.pack("<Q", 8) + b"{}      ")
        self.assertEqual(stio.loads(raw), ({}, None))

    def test_loaded_tensors_own_their_memory(self):
        buf = bytearray(stio.dumps({"x": torch.ones(4)}))
        back, _ = stio.loads(buf)
        buf[-4:] = b"\x00\x00\x00\x00"
        self.assertEqual(back["x"].tolist(), [1.0, 1.0, 1.0, 1.0])
        back2, _ = stio.loads(bytes(stio.dumps({"x": torch.ones(4)})))
        self.assertEqual(back2["x"].tolist(), [1.0] * 4)

    def test_load_maps_privately(self):
        # load's tensors are views of a private mapping: a write to one
        # stays in the process (the file keeps Go's bytes), and the file
        # may be removed while they live.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.safetensors")
            stio.save(path, {"x": torch.arange(6, dtype=torch.float32), "e": torch.zeros(0, 3)})
            back, _ = stio.load(path)
            os.remove(path)
            back["x"][0] = 42.0
            self.assertEqual(back["x"].tolist(), [42.0, 1.0, 2.0, 3.0, 4.0, 5.0])
            self.assertEqual(list(back["e"].shape), [0, 3])
            stio.save(path, {"x": torch.arange(6, dtype=torch.float32)})
            again, _ = stio.load(path)
            again["x"][1] = -1.0
            self.assertEqual(stio.load(path)[0]["x"].tolist(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])

    def test_later_tensors_write_the_same_bytes(self):
        # A dump that reads while it writes (stio.later) is byte for byte
        # what reading first gives: contiguous, strided, empty, every
        # device there is.
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        for dev in devices:
            base = torch.arange(48, dtype=torch.float32, device=dev).reshape(4, 12)
            ts = {"c": base, "v": base[:, 1:9:2], "e": torch.empty(0, 3, device=dev),
                  "h": torch.arange(7, dtype=torch.int32, device=dev)}
            want = stio.dumps(ts)
            self.assertEqual(stio.dumps({k: stio.later(t) for k, t in ts.items()}), want, dev)
            with tempfile.TemporaryDirectory() as d:
                p = os.path.join(d, "x.safetensors")
                stio.save(p, {k: stio.later(t) for k, t in ts.items()})
                with open(p, "rb") as f:
                    self.assertEqual(f.read(), want, dev)

    def test_later_refuses_a_resized_storage(self):
        t = torch.ones(64)
        view = t[8:]
        (t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()).resize_(0)
        with self.assertRaises(ValueError):
            stio.later(view)


def load_file(raw):
    """stio.load of raw written to a file (it maps the file)."""
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "f.safetensors")
        with open(p, "wb") as f:
            f.write(raw)
        return stio.load(p)


class Rejects(unittest.TestCase):
    ENT = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}

    def bad(self, raw):
        with self.assertRaises(stio.FormatError):
            stio.loads(raw)
        with self.assertRaises(stio.FormatError):
            load_file(raw)

    def test_ok_baseline(self):
        stio.loads(raw_file({"x": self.ENT}, b"\x00" * 8))

    def test_short_and_lengths(self):
        self.bad(b"")
        self.bad(b"\x01\x00")
        self.bad(struct.pack("<Q", 100) + b"{}")
        self.bad(struct.pack("<Q", 1 << 40) + b"{}")
        self.bad(struct.pack("<Q", 1) + b"{")

    def test_header_syntax(self):
        self.bad(raw_file("[]"))
        self.bad(raw_file("not json"))
        self.bad(raw_file('{"x":' + json.dumps(self.ENT) + ',"x":' + json.dumps(self.ENT) + "}",
                          b"\x00" * 8))
        self.bad(struct.pack("<Q", 4) + b"{}\x00\x00")
        self.bad(struct.pack("<Q", 8) + b"{\"\xff\":1} ")
        self.bad(raw_file('{"x":{"dtype":"F32","shape":[NaN],"data_offsets":[0,8]}}', b"\x00" * 8))

    def test_entries(self):
        def one(ent, data=b"\x00" * 8):
            self.bad(raw_file({"x": ent}, data))
        one({"dtype": "F32", "shape": [2]})
        one(dict(self.ENT, extra=1))
        one(dict(self.ENT, dtype="C64"))
        one(dict(self.ENT, shape=[2.0]))
        one(dict(self.ENT, shape=[-2]))
        one(dict(self.ENT, shape=[True, True]))
        one(dict(self.ENT, data_offsets=[0]))
        one(dict(self.ENT, data_offsets=[8, 0]))
        one(dict(self.ENT, data_offsets=[0, 4]), b"\x00" * 4)   # wrong span
        one(dict(self.ENT, data_offsets=[0, 16]))               # beyond buffer
        one(self.ENT, b"\x00" * 9)                               # trailing byte
        self.bad(raw_file({"": self.ENT}, b"\x00" * 8))
        self.bad(raw_file({"__metadata__": {"a": 1}}))

    def test_holes_and_overlaps(self):
        a = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
        self.bad(raw_file({"a": a, "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}},
                          b"\x00" * 12))
        self.bad(raw_file({"a": a, "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}},
                          b"\x00" * 6))
        # Non-name data order is fine as long as the buffer is tiled exactly.
        back, _ = stio.loads(raw_file(
            {"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
             "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
            struct.pack("<ff", 2.0, 1.0)))
        self.assertEqual((back["a"].item(), back["b"].item()), (1.0, 2.0))

    def test_writer_rejects(self):
        with self.assertRaises(ValueError):
            stio.dumps({"x": torch.zeros(2, dtype=torch.complex64)})
        with self.assertRaises(ValueError):
            stio.dumps({"": torch.zeros(2)})
        with self.assertRaises(ValueError):
            stio.dumps({"__metadata__": torch.zeros(2)})


class Mutations(unittest.TestCase):
    """A seeded stand-in for fuzzing: corrupted files either load or raise
    FormatError, never another exception (the worker would die with a
    traceback instead of reporting a bad file)."""

    def test_mutated_files_raise_format_error_only(self):
        import random
        rnd = random.Random(20261129)
        base = bytes(stio.dumps({"a": torch.ones(2, 3), "b": torch.arange(4, dtype=torch.int64)},
                                {"k": "v"}))
        n = int.from_bytes(base[:8], "little")
        tokens = [b"[", b"]", b"{", b"}", b'"', b",", b":", b"-1", b"1e999", b"NaN", b"\xff",
                  b"null", b"true", b"99999999999999999999999", b"\\u0000"]
        for i in range(3000):
            # Mostly mutate the header and keep the length prefix right, so
            # the JSON and layout checks are reached, not only the prefix's.
            hdr, body = bytearray(base[8:8 + n]), bytearray(base[8 + n:])
            for _ in range(rnd.randint(1, 4)):
                a, b = sorted((rnd.randrange(len(hdr) + 1), rnd.randrange(len(hdr) + 1)))
                op = rnd.randrange(4)
                if op == 0 and hdr:
                    hdr[min(a, len(hdr) - 1)] = rnd.randrange(256)
                elif op == 1:
                    hdr[a:b] = rnd.choice(tokens)
                elif op == 2:
                    hdr[a:b] = b""
                else:
                    body = body[:rnd.randrange(len(body) + 1)]
            raw = bytearray(len(hdr).to_bytes(8, "little")) + hdr + body
            if rnd.random() < 0.2:
                raw = raw[:rnd.randrange(len(raw) + 1)]
            if rnd.random() < 0.1 and raw:
                raw[rnd.randrange(len(raw))] = rnd.randrange(256)
            outcomes = []
            for read in (stio.loads, load_file):
                try:
                    outcomes.append(read(bytes(raw)))
                except stio.FormatError:
                    outcomes.append(None)
                except Exception as e:  # noqa: BLE001 - the point of the test
                    self.fail("mutation %d: %r raised %s: %s" % (i, bytes(raw)[:200], type(e).__name__, e))
            if i % 10 == 0 or outcomes[0] is not None or outcomes[1] is not None:
                # the file reader agrees with the buffer reader
                a, b = outcomes
                self.assertEqual(a is None, b is None, "mutation %d" % i)
                if a is not None:
                    self.assertEqual(a[1], b[1])
                    self.assertEqual(list(a[0]), list(b[0]))
                    for name in a[0]:
                        self.assertTrue(torch.equal(a[0][name], b[0][name]), name)

    def test_deeply_nested_header(self):
        with self.assertRaises(stio.FormatError):
            stio.loads(raw_file("{" + '"x":' + "[" * 100000 + "]" * 100000 + "}"))


if __name__ == "__main__":
    unittest.main()
