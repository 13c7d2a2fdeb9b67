"""The python section of bench/run.py (issue 39): GPT-2 small's forward called from
Python through the nestrt package (runtime/python, over the model built as a shared
library) against the same forward called from C (bench/harness.c, the model's
objects linked statically), side by side at one thread; and the resident memory
10,000 Python calls of a small model add."""
import os
import re

from common import BENCH, GPT2_SMALL, ROOT, Unavailable, background_note, log, measure, sh

PY = "/usr/bin/python3"   # Debian's, with NumPy
OVERHEAD_GOAL = 1.02      # Python's time / C's
RSS_CALLS, RSS_GOAL_KB = 10000, 1024
TINY = dict(L=2, D=64, H=4, V=256, CTX=64, S=16)


class PythonSections:
    def shared_build(self, cfg, out):
        """samples/gpt2.nest at cfg as the shared library out."""
        if "nestc" in self.why_not:
            raise Unavailable(self.why_not["nestc"])
        os.makedirs(os.path.dirname(out), exist_ok=True)
        cmd = [self.nestc, "build", os.path.join(ROOT, "samples", "gpt2.nest"), "-o", out]
        for k, v in cfg.items():
            cmd += ["-D", "%s=%s" % (k, v)]
        sh(cmd, env=dict(self.base_env(), CC=self.cc))
        return out

    def python(self):
        cfg = GPT2_SMALL
        print("\n## Python: GPT-2 small's forward through the nestrt package, against the same call from C "
              "(issue 39)\n")
        print("GPT-2 small (L=%d, D=%d, H=%d, V=%d, S=%d), one thread. C: bench/harness.c linked with the model's "
              "objects (nestc build -o DIR) and libnestrt.a, timing gpt2_forward. Python: bench/py_server.py over "
              "the same model built as a shared library (nestc build -o libgpt2.so), timing m.forward(tokens) "
              "(the argument checks, the result array it allocates, the ctypes call). Both servers interleaved in "
              "the same rounds; medians." % tuple(cfg[k] for k in ("L", "D", "H", "V", "S")))
        d = os.path.join(self.work, "gpt2-small")
        vals = [cfg[k] for k in ("L", "D", "H", "V", "CTX", "S")]
        try:
            self.files("gpt2", d, vals, os.path.join(ROOT, "samples", "gpt2.nest"), cfg)
            harness = self.nestc_build(os.path.join(ROOT, "samples", "gpt2.nest"), cfg, os.path.join(d, "nestc-c"),
                                       "gpt2")
            lib = self.shared_build(cfg, os.path.join(d, "nestc-so", "libgpt2.so"))
        except Unavailable as e:
            print("unavailable: %s" % e)
            return
        w, tok = os.path.join(d, "weights.safetensors"), os.path.join(d, "tokens.npy")
        out = lambda n: os.path.join(d, "py-%s.npy" % n)
        env = self.nestc_env(1)
        specs = [dict(label="C", threads=1, out=out("c"), log=out("c") + ".log", env=env,
                      cmd=[harness, w, out("c"), "3", tok]),
                 dict(label="Python", threads=1, out=out("py"), log=out("py") + ".log", env=env,
                      cmd=[PY, os.path.join(BENCH, "py_server.py"), lib, w, out("py"), "3", tok])]
        res, bg = measure(specs, self.rounds, budget=self.budget(20))
        by = {r["label"]: r for r in res}
        print("\n| caller | median ms | min ms | runs |\n| --- | ---: | ---: | ---: |")
        for r in res:
            print("| %s | %s | %s | %s |" % (r["label"], "%.2f" % r["ms"] if r["ms"] else r["error"],
                                             "%.2f" % r["min"] if r["ms"] else "-", r.get("n", "-")))
        c, p = by["C"], by["Python"]
        if c["ms"] and p["ms"]:
            import numpy as np
            same = np.array_equal(np.load(out("c")), np.load(out("py")))
            ratio = p["ms"] / c["ms"]
            print("\nPython's time / C's: %.3f (goal <= %.2f: %s); the outputs are %s." % (
                ratio, OVERHEAD_GOAL, "met" if ratio <= OVERHEAD_GOAL else "not met",
                "bit-identical" if same else "DIFFERENT"))
        background_note(bg)
        self.python_rss()

    def python_rss(self):
        print("\n### Memory over %d calls\n" % RSS_CALLS)
        d = os.path.join(self.work, "python-rss")
        os.makedirs(d, exist_ok=True)
        try:
            lib = self.shared_build(TINY, os.path.join(d, "libgpt2.so"))
        except Unavailable as e:
            print("unavailable: %s" % e)
            return
        w = os.path.join(d, "weights.safetensors")
        cmd = [self.nestc, "weights", os.path.join(ROOT, "samples", "gpt2.nest"), "--random-weights", "1", "-o", w]
        for k, v in TINY.items():
            cmd += ["-D", "%s=%s" % (k, v)]
        log("python: %d calls" % RSS_CALLS)
        try:
            sh(cmd)
            o = sh([PY, os.path.join(BENCH, "py_rss.py"), lib, w, str(RSS_CALLS)], env=self.nestc_env(1))
        except Unavailable as e:
            print("unavailable: %s" % e)
            return
        m = re.search(r"rss_kb (\d+) (\d+)", o)
        if not m:
            print("the measurement failed: %s" % o[-300:])
            return
        before, after = int(m.group(1)), int(m.group(2))
        print("GPT-2 at L=%d, D=%d, S=%d (a small model: the calls' own cost shows), bench/py_rss.py: the process's "
              "VmRSS after 200 warm-up calls %d KiB, after %d more %d KiB: %+d KiB (goal < %d KiB: %s). Each call "
              "passes a new input array and gets a new result array." % (
                  TINY["L"], TINY["D"], TINY["S"], before, RSS_CALLS, after, after - before, RSS_GOAL_KB,
                  "met" if after - before < RSS_GOAL_KB else "not met"))
