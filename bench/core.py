"""BenchCore: the environment of each runtime, what is installed, building with nestc,
the model files and the report helpers every section of bench/run.py uses."""
import os
import platform
import re
import shutil
import subprocess
import sys

import numpy as np

from common import BENCH, ROOT, TORCH_PY, Unavailable, cell, first_line, log, max_diff, sh


class BenchCore:
    def __init__(self, args):
        self.nestc = os.path.abspath(args.nestc)
        bdir = os.path.dirname(self.nestc)
        self.lib = os.path.join(bdir, "libnestrt.a")
        self.work = os.path.abspath(args.work or os.path.join(bdir, "bench"))
        self.rounds = args.rounds
        self.peak = {1: args.peak1, 2: args.peak2}
        self.peak_note = None
        self.cc = os.environ.get("CC", "cc")
        os.makedirs(self.work, exist_ok=True)
        self.avx512 = "avx512f" in open("/proc/cpuinfo").read()
        self.blas_core = os.environ.get("OPENBLAS_CORETYPE") or ("SkylakeX" if self.avx512 else None)
        self.node_path = os.path.join(BENCH, ".node", "node_modules")
        self.why_not = {}
        self.facts = {}
        self.skip = [p for p in args.skip.split(",") if p]
        self.nets = [n for n in (args.nets or "").split(",") if n]

    # --- environment of each runtime
    def base_env(self):
        env = dict(os.environ)
        for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "NESTRT_NUM_THREADS",
                  "MKL_NUM_THREADS", "OPENBLAS_CORETYPE"):
            env.pop(k, None)
        return env

    def blas_env(self, threads):
        env = self.base_env()
        env["OPENBLAS_NUM_THREADS"] = str(threads)
        if self.blas_core:
            env["OPENBLAS_CORETYPE"] = self.blas_core
        return env

    def torch_env(self, threads):
        env = self.blas_env(threads)
        env["OMP_WAIT_POLICY"] = "PASSIVE"
        env["OMP_NUM_THREADS"] = str(threads)
        return env

    def nestc_env(self, threads):
        env = self.base_env()
        env["NESTRT_NUM_THREADS"] = str(threads)
        return env

    # --- what is there
    def probe(self):
        f = self.facts
        for p in self.skip:
            self.why_not[p] = "left out (--skip %s)" % p
        cpu = {}
        for line in open("/proc/cpuinfo"):
            k, _, v = line.partition(":")
            cpu.setdefault(k.strip(), v.strip())
        f["cpu"] = "%s (family %s, model %s, stepping %s)" % (cpu.get("model name", "?"), cpu.get("cpu family", "?"),
                                                               cpu.get("model", "?"), cpu.get("stepping", "?"))
        f["cores"] = os.cpu_count()
        try:
            mem = int(re.search(r"MemTotal:\s+(\d+)", open("/proc/meminfo").read()).group(1))
            f["mem"] = "%.0f GiB" % (mem / 2**20)
        except (OSError, AttributeError):
            f["mem"] = "?"
        f["kernel"] = platform.release()
        f["nestc"] = first_line([self.nestc, "--version"]) or "?"
        f["cc"] = first_line([self.cc, "--version"]) or "?"
        f["numpy"] = np.__version__
        if not (os.path.exists(self.nestc) and os.path.exists(self.lib)):
            self.why_not["nestc"] = "%s or %s missing (run make)" % (self.nestc, self.lib)

        # PyTorch (also needed to write the models and their ONNX files)
        v = None if "torch" in self.why_not else first_line([TORCH_PY, "-c", "import torch, numpy; print(torch.__version__)"])
        if "torch" in self.why_not:
            pass
        elif v:
            f["torch"] = v
            f["onnx"] = first_line([TORCH_PY, "-c", "import onnx; print(onnx.__version__)"]) or "not installed"
        else:
            self.why_not["torch"] = "PyTorch is not importable by %s (scripts/bench-deps.sh installs python3-torch)" % TORCH_PY

        # ONNX Runtime
        env = self.base_env()
        env["NODE_PATH"] = self.node_path
        node = first_line(["node", "--version"])
        if "ort" in self.why_not:
            pass
        elif not node:
            self.why_not["ort"] = "node is not installed"
        else:
            f["node"] = node
            v = first_line(["node", "-e", "console.log(require('onnxruntime-node/package.json').version);"
                            "require('onnxruntime-node')"], env=env)
            if v:
                f["ort"] = v
            else:
                self.why_not["ort"] = "onnxruntime-node does not load from bench/.node (run scripts/bench-deps.sh)"

        # OpenBLAS
        self.sgemm = os.path.join(self.work, "sgemm")
        if "sgemm" in self.why_not:
            return
        try:
            sh([self.cc, "-O2", "-Wall", "-o", self.sgemm, os.path.join(BENCH, "sgemm.c"), "-lopenblas"])
            d = os.path.join(self.work, "probe")
            os.makedirs(d, exist_ok=True)
            np.save(os.path.join(d, "a.npy"), np.ones((2, 2), np.float32))
            out = subprocess.run([self.sgemm, os.path.join(d, "a.npy"), os.path.join(d, "a.npy"),
                                  os.path.join(d, "c.npy"), "0"], input="quit\n", capture_output=True, text=True,
                                 env=self.blas_env(1), timeout=60)
            ready = out.stdout.split()
            if out.returncode != 0 or not ready or ready[0] != "ready":
                raise Unavailable("sgemm probe failed: %s" % out.stderr.strip()[-200:])
            f["openblas_core"] = ready[1]
            f["openblas"] = " ".join(ready[3:])
        except (Unavailable, subprocess.TimeoutExpired, OSError) as e:
            self.why_not["sgemm"] = "OpenBLAS: %s" % e


    def measure_peak(self, repeats=3):
        """The fp32 FMA peak at 1 and 2 threads from bench/peak.c (the widest FMA the CPU
        has, chosen by its features; FLOPs over the threads' CPU time, so that other
        processes on this shared machine do not lower it), the best of `repeats` runs of
        it. --peak1/--peak2 override it."""
        exe = os.path.join(self.work, "peak")
        measured, isa = {}, None
        try:
            sh([self.cc, "-O2", "-Wall", "-o", exe, os.path.join(BENCH, "peak.c"), "-lpthread"])
            for t in (1, 2):
                for _ in range(repeats):
                    isa, g = sh([exe, str(t)], timeout=300).split()[1:3]
                    measured[t] = max(measured.get(t, 0.0), float(g))
        except (Unavailable, ValueError) as e:
            log("peak: %s" % e)
        for t in (1, 2):
            if self.peak.get(t) is None:
                self.peak[t] = measured.get(t)
        given = [t for t in (1, 2) if t not in measured or self.peak[t] != measured[t]]
        self.peak_note = "%s GFLOP/s at 1 thread, %s at 2 (%s)" % (
            "%.0f" % self.peak[1] if self.peak[1] else "?", "%.0f" % self.peak[2] if self.peak[2] else "?",
            ("measured in this run by bench/peak.c: %s FMA, independent accumulators, FLOPs over each thread's "
             "CPU time, best of %d x 20 runs" % (isa, repeats)
             if measured else "bench/peak.c failed") + ("; given with --peak%s" % "/".join(map(str, given))
                                                          if given and measured else ""))

    # --- building
    def nestc_build(self, src, defines, outdir, name):
        """Build src with nestc and link bench/harness.c; the harness path."""
        if "nestc" in self.why_not:
            raise Unavailable(self.why_not["nestc"])
        shutil.rmtree(outdir, ignore_errors=True)
        cmd = [self.nestc, "build", src, "-o", outdir]
        for k, v in defines.items():
            cmd += ["-D", "%s=%s" % (k, v)]
        sh(cmd)
        return self.link_harness(outdir, name)

    def ort_spec(self, onnx, threads, out, log, warm, *inputs):
        """A measure() spec of ONNX Runtime serving onnx (bench/ort_server.js)."""
        env = self.base_env()
        env["NODE_PATH"] = self.node_path
        return dict(label="ONNX Runtime", threads=threads, error=self.why_not.get("ort"), out=out, log=log, env=env,
                    cmd=["node", os.path.join(BENCH, "ort_server.js"), onnx, str(threads), out, str(warm)]
                    + list(inputs))

    def link_harness(self, outdir, name):
        """bench/harness.c linked with the objects nestc wrote in outdir for model name."""
        inputs = len(re.findall(r"NUMEL = ", open(os.path.join(outdir, name + ".h")).read())) - 1
        exe = os.path.join(outdir, "harness")
        objs = sorted(os.path.join(outdir, o) for o in os.listdir(outdir) if o.endswith(".o"))
        sh([self.cc, "-O2", "-I" + os.path.join(ROOT, "runtime"), "-I" + outdir, "-DMODEL=" + name,
            '-DMODEL_H="%s.h"' % name, "-DOUT_NUMEL=%s_FORWARD_OUT_NUMEL" % name.upper(), "-DNINPUTS=%d" % inputs,
            "-o", exe, os.path.join(BENCH, "harness.c")] + objs + [self.lib, "-lm", "-lpthread"])
        return exe

    def files(self, kind, d, values, nest=None, defines=None):
        """bench/models.py KIND D VALUES..., unless D already has them from this models.py.
        Without PyTorch: random weights from `nestc weights` and inputs from NumPy, no
        reference (and so no ONNX file and no cross-check)."""
        stamp = os.path.join(d, "stamp")
        key = "%s %s %d" % (kind, " ".join(map(str, values)), os.path.getmtime(os.path.join(BENCH, "models.py")))
        have = open(stamp).read() if os.path.exists(stamp) else None
        if have == key or (have == key + " nestc" and "torch" in self.why_not):
            return
        os.makedirs(d, exist_ok=True)
        for f in ("ref.npy", "model.onnx", "stamp"):
            if os.path.exists(os.path.join(d, f)):
                os.remove(os.path.join(d, f))
        if kind != "matmul" and "torch" in self.why_not:
            if "nestc" in self.why_not:
                raise Unavailable(self.why_not["torch"])
            log("writing the %s files in %s with nestc weights (no PyTorch)" % (kind, d))
            cmd = [self.nestc, "weights", nest, "--random-weights", "1", "-o", os.path.join(d, "weights.safetensors")]
            for k, v in defines.items():
                cmd += ["-D", "%s=%s" % (k, v)]
            sh(cmd)
            rng = np.random.default_rng(1)
            if kind.startswith("gpt2"):
                np.save(os.path.join(d, "tokens.npy"), rng.integers(0, defines["V"], size=defines.get("S", defines["CTX"]),
                                                                    dtype=np.int32))
            else:
                np.save(os.path.join(d, "x.npy"), rng.standard_normal((1, 3, defines["IMG"], defines["IMG"])).astype(np.float32))
            key += " nestc"
        else:
            log("writing the %s files in %s" % (kind, d))
            sh([TORCH_PY if kind != "matmul" else sys.executable, os.path.join(BENCH, "models.py"), kind, d]
               + [str(v) for v in values], timeout=3600)
        with open(stamp, "w") as f:
            f.write(key)

    def reference(self, d):
        path = os.path.join(d, "ref.npy")
        return np.load(path) if os.path.exists(path) else None

    def budget(self, seconds):
        """Extra rounds are for a full run only: --rounds below 20 is a quick look."""
        return seconds if self.rounds >= 20 else 0.0

    # --- report helpers
    def pct(self, gflops, threads):
        p = self.peak.get(threads)
        return "%.0f%%" % (100 * gflops / p) if p else "-"


    def rel_diff(self, a_path, b):
        """max |a - b| / max |b|, or a message."""
        try:
            a = np.load(a_path).astype(np.float64).reshape(-1)
            b = np.asarray(b, np.float64).reshape(-1)
            if a.shape != b.shape:
                return "shape %s, expected %s" % (a.shape, b.shape)
            return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))
        except (OSError, ValueError) as e:
            return "unreadable: %s" % e

    def reference_row(self, d, n):
        path = os.path.join(d, "ref-%d.npy" % n)
        return np.load(path) if os.path.exists(path) else None

    def model_table(self, res, flop, ref, base):
        basems = {r["threads"]: r["ms"] for r in res if r["label"] == base and r["ms"]}
        col = "time / " + ("ORT" if base == "ONNX Runtime" else base)
        print("| runtime | threads | median ms | min ms | GFLOP/s | %% of FMA peak | %s | cpu/wall | runs | max abs diff vs fp64 |" % col)
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in sorted(res, key=lambda r: r["threads"]):
            if r["ms"] is None:
                print("| %s | %d | unavailable: %s | | | | | | | |" % (r["label"], r["threads"], cell(r["error"])))
                continue
            g = flop / r["ms"] / 1e6
            b = basems.get(r["threads"])
            diff = max_diff(r["out"], ref)
            print("| %s | %d | %.2f | %.2f | %.1f | %s | %s | %s | %d | %s |"
                  % (r["label"], r["threads"], r["ms"], r["min"], g, self.pct(g, r["threads"]),
                     "%.2f" % (r["ms"] / b) if b else "-", "%.2f" % r["cpu"] if r.get("cpu") is not None else "-",
                     r["n"], "%.2g" % diff if isinstance(diff, float) else cell(diff)))
        cores = sorted({r["info"].split()[1] for r in res if r["label"] == "PyTorch eager" and r["ms"]
                        and len(r.get("info", "").split()) > 1})
        if cores:
            print("\nPyTorch's BLAS: openblas_get_corename() in its process = %s" % ", ".join(cores))
        for t in (1, 2):
            n = [r for r in res if r["label"] == "nestc" and r["threads"] == t and r["ms"]]
            if n and t in basems:
                print("\nnestc / %s at %d thread%s: %.2fx the time (nestc runs at %.0f%% of its speed)"
                      % (base, t, "s" if t > 1 else "", n[0]["ms"] / basems[t], 100 * basems[t] / n[0]["ms"]), end="")
        print()

