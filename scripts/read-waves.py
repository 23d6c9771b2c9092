#!/usr/bin/env python3
"""Per-attempt, per-read wave rates of a `qualify --repeat` run, from its
progress lines (stderr), with the GPU clocks while each read ran.

    read-waves.py REPEAT.err [CLOCKS.csv]

REPEAT.err is qualify's stderr with every line prefixed by the epoch
seconds it arrived at (scripts/gpu-run stamps them); CLOCKS.csv
nvidia-smi's `timestamp,clocks.sm,clocks.mem,temperature.gpu,power.draw`
log. A diagnostic of the measurement, never an input to a verdict: the
sealed evidence is what the referee decides on.
"""
import re
import statistics
import sys
import time

STAMP = re.compile(r"^\[\s*([0-9.]+)s\] (.*)$")
WAVE = re.compile(r"^(settle )?wave (\d+)/(\d+): (\d+) tokens in ([0-9.]+)s \(([0-9.]+) tok/s\)")
READ = re.compile(r"^(B′|B|C): (settling|timed) read")


def clocks(path):
    out = []
    try:
        for line in open(path):
            f = [x.strip() for x in line.split(",")]
            try:
                ts, frac = f[0].rsplit(".", 1)
                t = time.mktime(time.strptime(ts, "%Y/%m/%d %H:%M:%S")) + float("0." + frac)
                out.append((t, float(f[1].split()[0]), float(f[4].split()[0])))
            except (ValueError, IndexError):
                continue
    except OSError:
        pass
    return out


def main():
    clk = clocks(sys.argv[2]) if len(sys.argv) > 2 else []
    attempts, cur, read = [], None, None
    for line in open(sys.argv[1], errors="replace"):
        epoch, _, line = line.rstrip("\n").partition(" ")
        try:
            now = float(epoch)
        except ValueError:
            continue
        m = STAMP.match(line)
        if m:
            msg = m.group(2)
            if read is not None and "t1" not in read:
                read["t1"] = now  # a read ends at the next stamped line
            read = None
            if msg.startswith("repeat: attempt"):
                cur = {"title": msg, "reads": [], "t": now}
                attempts.append(cur)
            elif cur is not None:
                m2 = READ.match(msg)
                if m2:
                    read = {"role": m2.group(1) + ("~" if m2.group(2) == "settling" else ""), "t0": now, "rates": []}
                    cur["reads"].append(read)
            continue
        m = WAVE.match(line)
        if m and read is not None:
            read["rates"].append(float(m.group(6)))
    print("\nper read: median tok/s of its waves (X~ = settling reads, untimed, oldest first), "
          "s after the engine's first settling read; SM MHz (mean, min), W while it ran")
    for a in attempts:
        print(a["title"])
        born, settles = {}, {}
        for rd in a["reads"]:
            role = rd["role"].rstrip("~")
            if rd["role"].endswith("~"):
                born.setdefault(role, rd["t0"])
                settles.setdefault(role, []).append(rd)
                continue
            eng = "B" if role == "B′" else role
            if role in settles:
                s = settles[role]
                print("  %-3s %s" % (role + "~", " ".join("%.0f@%.0f" % (statistics.median(x["rates"]), x["t0"] - born[role]) for x in s if x["rates"])))
            win = [c for c in clk if rd["t0"] <= c[0] <= rd.get("t1", rd["t0"] + 4)]
            cs = ""
            if win:
                cs = "  sm %.0f (min %.0f)  %.0f W" % (statistics.mean(c[1] for c in win), min(c[1] for c in win), statistics.mean(c[2] for c in win))
            med = statistics.median(rd["rates"]) if rd["rates"] else 0
            rd["med"] = med
            print("  %-3s at %5.1fs: %s  median %.0f%s" % (role, rd["t0"] - born.get(eng, rd["t0"]), " ".join("%.0f" % r for r in rd["rates"]), med, cs))
        med = {rd["role"]: rd["med"] for rd in a["reads"] if "med" in rd}
        if all(med.get(k) for k in ("B", "C", "B′")):
            b, c, bp = med["B"], med["C"], med["B′"]
            a["r"], a["bb"] = c / max(b, bp), bp / b
            print("  r %.4f  B′/B %.4f  C/B %.4f  C/B′ %.4f" % (a["r"], bp / b, c / b, c / bp))
    for order in ("incumbent-placed-first", "candidate-placed-first"):
        rs = [a for a in attempts if order in a["title"] and "r" in a]
        if rs:
            print("%s: %d attempts, mean r %.4f (%.4f-%.4f), mean B′/B %.4f" % (
                order, len(rs), statistics.mean(a["r"] for a in rs), min(a["r"] for a in rs),
                max(a["r"] for a in rs), statistics.mean(a["bb"] for a in rs)))


if __name__ == "__main__":
    main()
