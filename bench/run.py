#!/usr/bin/python3
"""Run-time benchmark of code compiled by nestc against its peers (make bench).

Run: run.py NESTC [--rounds N] [--only SECTION,...] [--skip PEER,...] [--work DIR] [--peak1 G] [--peak2 G]
     SECTION: gpt2-shape, gpt2-small, coldstart, gpt2-decode, gpt2-prefill, matmul, resnet, resnet18
     (all by default); PEER: ort, torch, sgemm

Peers (installed by scripts/bench-deps.sh; a missing one is reported as
"unavailable: reason" and skipped): ONNX Runtime (onnxruntime-node in bench/.node),
PyTorch eager (Debian's python3-torch, under /usr/bin/python3), OpenBLAS cblas_sgemm.

Method. Every model's weights and inputs are written once (bench/models.py: a plain
PyTorch model, saved as .safetensors and exported to ONNX) and read by every runtime.
Each runtime at each thread count runs in a server process of its own (bench/harness.c
for nestc, bench/ort_server.js, bench/torch_server.py, bench/sgemm.c) that loads the
model, runs it once (writing its output for the cross-check against float64 PyTorch),
warms up, and then runs K forwards per request. The servers are started one after
the other and then asked in turn, A B C D A B C D ..., for --rounds rounds (>= 20;
the quick sections go on for more rounds within a time budget, up to 5 times as many),
so that the machine's drift hits all of them alike; each forward is timed inside its
server (clock_gettime, process.hrtime, perf_counter_ns) and the median is quoted.
K is chosen per server so that a turn lasts about TURN_S seconds. Between turns the
driver waits until the previous server uses no more CPU (its spinning threads have
gone idle; OpenBLAS's spin for about 0.1 s).
"cpu/wall" is the CPU time of the server process over the wall time of its turns
(from /proc): how many cores it kept busy (spin-waiting counts). Under each table: how
many cores other processes on the machine kept busy meanwhile (from /proc/stat).
FLOPs count 2*M*N*K for every matrix product (for GPT-2 including attention's
QK^T and AV and the LM head) and 2*O*I*k*k*OH*OW for every convolution.

Generation (issue 13; samples/gpt2.nest's prefill and decode entries over a per-sequence
key/value cache, GPT-2 small L=12 D=768 H=12 V=50257 CTX=1024, the weights of gpt2-small;
bench/models.py gpt2-decode writes 1024 random tokens and, from one float64 whole-sequence
forward, the cache a prefill of the first P tokens fills and the logits of each position):
- gpt2-decode: one decode step at P = 127 and 1023 past positions, 1 and 2 threads. nestc
  runs bench/decode.c (prefills P tokens, then every run decodes token P at position P:
  rewriting the same position is the same work each time); ONNX Runtime and PyTorch eager
  run models.GPT2Decode (inputs token, past_k and past_v [L, H, P, D/H] from PyTorch;
  outputs logits, present_k, present_v; exported to ONNX with P a dynamic axis). Each
  runtime's logits go against the float64 logits and against each other. The memory-read
  bandwidth (bench/stream.c, 1 GiB, 1 and 2 threads, before and after the decode runs, the
  higher figure) gives the limit: a step reads every weight once, so limit time = bytes of
  weights per token (every parameter but wpe, of which one row: 494.6 MB) / bandwidth;
  printed as the percentage of the limit each time reaches, with time / ORT, against the
  issue's goals (>= 75% of the limit at 1 thread, >= 85% at 2; <= 0.85x ORT at 1 thread,
  <= 1.0x at 2). All its servers run with glibc malloc keeping freed memory
  (DECODE_MALLOC_ENV): the peers allocate present_k/present_v, the whole cache, at every
  step, and first touches of fresh pages are slow on these virtual machines.
- gpt2-prefill: prefill at T = 1, 7, 64 and 1024, 1 and 2 threads: nestc's one build with
  T a run-time dimension against a static build of each T (nestc build -D T=n), the ratio
  dynamic / static (goal <= 1.1) and the two outputs' last row against each other and
  float64. T = 1024 runs a quarter of the rounds (at least 3).

The report goes to standard output; progress to standard error.
"""
import argparse
import os
import platform
import re
import select
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
TORCH_PY = os.environ.get("BENCH_TORCH_PYTHON", "/usr/bin/python3")   # Debian's python3-torch: system Python
TURN_S = 0.1                       # target length of one turn (K forwards)
K_MAX = 10
PAUSE_S = 0.02
SETTLE_MAX_S = 0.5                 # longest wait for a server's threads to go idle after its turn
START_TIMEOUT = 900
RUN_TIMEOUT = 900

GPT2_SHAPE = dict(L=4, D=256, H=4, V=1024, CTX=1024, S=64)
GPT2_SMALL = dict(L=12, D=768, H=12, V=50257, CTX=1024, S=128)
MATMULS = [(128, 768, 768), (128, 2304, 768), (128, 3072, 768), (128, 768, 3072), (1024, 1024, 1024)]
RESNET = dict(IMG=64, C0=64, CLASSES=1000)
RESNET18 = dict(IMG=224, BATCH=1)    # samples/resnet18.nest, torchvision's ImageNet ResNet-18
GPT2_GEN = dict(L=12, D=768, H=12, V=50257, CTX=1024)   # gpt2-decode, gpt2-prefill: GPT-2 small's weights
DECODE_P = (127, 1023)             # decode steps after P cached positions
PREFILL_T = (1, 7, 64, 1024)       # prefill lengths, dynamic build against static builds
STREAM_MIB = 1024                  # the memory-read bandwidth's buffer
# glibc malloc keeps freed memory for reuse instead of returning it to the kernel: on these
# virtual machines a first touch of a fresh page costs ~20 us (75 MB of new memory: ~0.5 s),
# and the peers' decode step allocates its present_k/present_v (the whole cache) every step
DECODE_MALLOC_ENV = dict(MALLOC_MMAP_THRESHOLD_="4294967296", MALLOC_TRIM_THRESHOLD_="68719476736",
                         MALLOC_TOP_PAD_="268435456")


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


class Unavailable(Exception):
    pass


def cell(msg):
    """A message fit for a Markdown table cell."""
    return " ".join(str(msg).replace("|", "/").split())


def sh(cmd, env=None, timeout=1800, cwd=None):
    """Run cmd; its stdout, or Unavailable with the tail of its output."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    except FileNotFoundError as e:
        raise Unavailable("%s not found" % e.filename)
    except subprocess.TimeoutExpired:
        raise Unavailable("%s timed out after %d s" % (os.path.basename(cmd[0]), timeout))
    if r.returncode != 0:
        tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-3:]
        raise Unavailable("%s failed (exit %d): %s" % (os.path.basename(cmd[0]), r.returncode, " / ".join(tail)))
    return r.stdout


def first_line(cmd, env=None):
    try:
        return sh(cmd, env=env, timeout=120).strip().splitlines()[0]
    except (Unavailable, IndexError):
        return None


# ------------------------------------------------------------------ servers

def cpu_seconds(pid):
    """utime + stime of a process (all its threads), seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def settle(pid):
    """Waits, after a server's turn, until its threads stop using the CPU: thread
    pools spin after their last loop (nestc's about 2 ms, OpenBLAS's about 0.1 s by
    default), and a spinning pool would take a core from the next runtime. Polls the
    process's CPU time every PAUSE_S (at least one clock tick) for at most SETTLE_MAX_S."""
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    end = time.perf_counter() + SETTLE_MAX_S
    last = cpu_seconds(pid)
    while True:
        time.sleep(max(PAUSE_S, 2 * tick))
        cur = cpu_seconds(pid)
        if cur is None or last is None or cur - last < tick / 2 or time.perf_counter() > end:
            return
        last = cur


def busy_seconds():
    """CPU time all processes on the machine have used (from /proc/stat), seconds."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Server:
    """A runtime in a process of its own, speaking the protocol of bench/harness.c."""

    def __init__(self, label, threads, cmd, env, out, logpath):
        self.label, self.threads, self.out, self.logpath = label, threads, out, logpath
        self.samples, self.cpu, self.wall, self.k = [], 0.0, 0.0, 1
        self.info, self.error, self.proc = "", None, None
        if os.path.exists(out):
            os.remove(out)
        self.logf = open(logpath, "w")
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.logf,
                                         text=True, bufsize=1, env=env)
        except OSError as e:
            raise Unavailable("cannot start %s: %s" % (cmd[0], e))
        line = self._readline(START_TIMEOUT)
        if not line.startswith("ready"):
            raise Unavailable("did not start: %s" % line)
        self.info = line[len("ready"):].strip()

    def _tail(self):
        try:
            self.logf.flush()
            with open(self.logpath) as f:
                lines = [l.strip() for l in f if l.strip()]
            return " / ".join(l[:200] for l in lines[-1:]) or "no message"
        except OSError:
            return "no message"

    def _readline(self, timeout):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            self.stop()
            raise Unavailable("no answer within %d s" % timeout)
        line = self.proc.stdout.readline()
        if not line:
            raise Unavailable(self._exited())
        return line.strip()

    def _exited(self):
        rc = self.proc.wait()
        how = "was killed by signal %d" % -rc if rc < 0 else "exited with status %d" % rc
        return "%s: %s" % (how, self._tail())

    def run(self, k, record=True):
        c0, t0 = cpu_seconds(self.proc.pid), time.perf_counter()
        try:
            self.proc.stdin.write("run %d\n" % k)
            self.proc.stdin.flush()
        except OSError:
            raise Unavailable(self._exited())
        line = self._readline(RUN_TIMEOUT)
        t1, c1 = time.perf_counter(), cpu_seconds(self.proc.pid)
        times = [int(x) / 1e6 for x in line.split()]
        if len(times) != k:
            raise Unavailable("bad answer %r" % line[:80])
        if record:
            self.samples += times
            self.wall += t1 - t0
            if c0 is not None and c1 is not None:
                self.cpu += c1 - c0
        return times

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        if not self.logf.closed:
            self.logf.close()


def measure(specs, rounds, budget=0.0):
    """specs: list of dicts (label, threads, cmd, env, out, log, or error). Starts the
    servers one after the other, then interleaves their turns: `rounds` rounds, and
    more (up to 5 times as many) while the rounds so far took less than `budget`
    seconds. Returns the result dicts and the load of other processes (cores)."""
    results, servers = [], []
    for s in specs:
        res = {"label": s["label"], "threads": s["threads"], "error": s.get("error"), "ms": None}
        results.append(res)
        if res["error"]:
            continue
        log("starting %s, %d thread%s" % (s["label"], s["threads"], "s" if s["threads"] > 1 else ""))
        try:
            srv = Server(s["label"], s["threads"], s["cmd"], s["env"], s["out"], s["log"])
            t = statistics.median(srv.run(3, record=False))
            srv.k = max(1, min(K_MAX, int(round(TURN_S * 1e3 / max(t, 1e-3)))))
            servers.append((srv, res))
            res["info"] = srv.info
            res["out"] = s["out"]
        except Unavailable as e:
            res["error"] = str(e)
    if servers:
        est = sum(statistics.median(srv.run(1, record=False)) * srv.k for srv, _ in servers) * rounds / 1e3
        log("%d servers, %d rounds: about %.0f s%s" % (len(servers), rounds, est + len(servers) * rounds * PAUSE_S,
                                                    ", then more rounds for up to %.0f s" % budget if budget else ""))
    ours0 = [cpu_seconds(srv.proc.pid) for srv, _ in servers]
    busy0, me0, wall0 = busy_seconds(), sum(os.times()[:2]), time.perf_counter()
    r = 0
    while r < rounds or (time.perf_counter() - wall0 < budget and r < 5 * rounds):
        r += 1
        for srv, res in servers:
            if res["error"]:
                continue
            try:
                srv.run(srv.k)
            except Unavailable as e:
                res["error"] = "failed during the runs: %s" % e
            settle(srv.proc.pid)
    ours1 = [cpu_seconds(srv.proc.pid) for srv, _ in servers]
    busy1, me1, wall1 = busy_seconds(), sum(os.times()[:2]), time.perf_counter()
    background = None
    if servers and busy0 is not None and busy1 is not None and wall1 > wall0:
        # a server that died takes its CPU time along: counted as other processes'
        ours = sum(b - a for a, b in zip(ours0, ours1) if a is not None and b is not None) + (me1 - me0)
        background = max(0.0, (busy1 - busy0 - ours) / (wall1 - wall0))
    for srv, res in servers:
        srv.stop()
        if not res["error"] and srv.samples:
            res["ms"] = statistics.median(srv.samples)
            res["min"] = min(srv.samples)
            res["n"] = len(srv.samples)
            res["k"] = srv.k
            res["rounds"] = r
            res["cpu"] = srv.cpu / srv.wall if srv.wall > 0 else None
    return results, background


def background_note(bg):
    if bg is not None:
        print("\nOther processes on the machine kept about %.2f of its %d cores busy during these runs."
              % (bg, os.cpu_count()))


def max_diff(out, ref):
    if ref is None:
        return "no reference (PyTorch unavailable)"
    try:
        a = np.load(out).astype(np.float64).reshape(-1)
        b = ref.reshape(-1)
        if a.shape != b.shape:
            return "shape %s, expected %s" % (a.shape, b.shape)
        return float(np.max(np.abs(a - b)))
    except (OSError, ValueError) as e:
        return "unreadable: %s" % e


# ------------------------------------------------------------------ the runtimes

class Bench:
    def __init__(self, args):
        self.nestc = os.path.abspath(args.nestc)
        bdir = os.path.dirname(self.nestc)
        self.lib = os.path.join(bdir, "libnestrt.a")
        self.work = os.path.abspath(args.work or os.path.join(bdir, "bench"))
        self.rounds = args.rounds
        self.peak = {1: args.peak1, 2: args.peak2}
        self.cc = os.environ.get("CC", "cc")
        os.makedirs(self.work, exist_ok=True)
        self.avx512 = "avx512f" in open("/proc/cpuinfo").read()
        self.blas_core = os.environ.get("OPENBLAS_CORETYPE") or ("SkylakeX" if self.avx512 else None)
        self.node_path = os.path.join(BENCH, ".node", "node_modules")
        self.why_not = {}
        self.facts = {}
        self.skip = [p for p in args.skip.split(",") if p]

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

    # --- sections
    def gpt2(self, title, cfg, tag):
        flop = gpt2_flop(**cfg)
        print("\n## %s: L=%d, D=%d, H=%d, V=%d, S=%d (%.3g GFLOP per forward)\n"
              % (title, cfg["L"], cfg["D"], cfg["H"], cfg["V"], cfg["S"], flop / 1e9))
        d = os.path.join(self.work, tag)
        vals = [cfg[k] for k in ("L", "D", "H", "V", "CTX", "S")]
        try:
            self.files("gpt2", d, vals, os.path.join(ROOT, "samples", "gpt2.nest"), cfg)
        except Unavailable as e:
            print("unavailable: the model files: %s" % e)
            return
        w, tok, onnx = (os.path.join(d, f) for f in ("weights.safetensors", "tokens.npy", "model.onnx"))
        specs = []
        try:
            harness = self.nestc_build(os.path.join(ROOT, "samples", "gpt2.nest"), cfg, os.path.join(d, "nestc"), "gpt2")
            nerr = None
        except Unavailable as e:
            nerr = "nestc: %s" % e
        warm = 10 if flop < 2e9 else 2
        for t in (1, 2):
            out = lambda name: os.path.join(d, "%s-%d.npy" % (name, t))
            lg = lambda name: os.path.join(d, "%s-%d.log" % (name, t))
            specs.append(dict(label="nestc", threads=t, error=nerr, out=out("nestc"), log=lg("nestc"),
                              cmd=None if nerr else [harness, w, out("nestc"), str(warm), tok], env=self.nestc_env(t)))
            oenv = self.base_env()
            oenv["NODE_PATH"] = self.node_path
            oerr = self.why_not.get("ort") or (None if os.path.exists(onnx) else "no ONNX file (PyTorch exports it)")
            specs.append(dict(label="ONNX Runtime", threads=t, error=oerr, out=out("ort"),
                              log=lg("ort"), env=oenv,
                              cmd=["node", os.path.join(BENCH, "ort_server.js"), onnx, str(t), out("ort"), str(warm), tok]))
            specs.append(dict(label="PyTorch eager", threads=t, error=self.why_not.get("torch"), out=out("torch"),
                              log=lg("torch"), env=self.torch_env(t),
                              cmd=[TORCH_PY, os.path.join(BENCH, "torch_server.py"), str(t), out("torch"), str(warm),
                                   "gpt2", w] + [str(v) for v in vals] + [tok]))
        res, bg = measure(specs, self.rounds, budget=self.budget(30 if flop < 2e9 else 0))
        self.model_table(res, flop, self.reference(d), base="ONNX Runtime")
        background_note(bg)

    # --- generation: prefill and decode over the KV cache (issue 13)
    def gen_files(self):
        """bench/models.py gpt2-decode: GPT-2 small's weights (those of gpt2-small), 1024
        tokens, the ONNX decode step, the past k/v of each P and the float64 logits."""
        cfg = GPT2_GEN
        d = os.path.join(self.work, "gpt2-gen")
        rows = sorted(set(DECODE_P) | {t - 1 for t in PREFILL_T})
        vals = [cfg[k] for k in ("L", "D", "H", "V", "CTX")] + [",".join(map(str, DECODE_P)), ",".join(map(str, rows))]
        self.files("gpt2-decode", d, vals, os.path.join(ROOT, "samples", "gpt2.nest"), cfg)
        return d

    def gen_build(self, d, static_t=None):
        """samples/gpt2.nest at GPT2_GEN (with -D T=static_t: prefill a static entry),
        linked with bench/decode.c; the harness path. The dynamic build is made once."""
        builds = self.__dict__.setdefault("gen_builds", {})
        if static_t in builds:
            return builds[static_t]
        if "nestc" in self.why_not:
            raise Unavailable(self.why_not["nestc"])
        outdir = os.path.join(d, "nestc-" + ("dynamic" if static_t is None else "T%d" % static_t))
        shutil.rmtree(outdir, ignore_errors=True)
        cmd = [self.nestc, "build", os.path.join(ROOT, "samples", "gpt2.nest"), "-o", outdir]
        for k, v in list(GPT2_GEN.items()) + ([("T", static_t)] if static_t is not None else []):
            cmd += ["-D", "%s=%s" % (k, v)]
        log("building %s" % " ".join(cmd[2:3] + cmd[5:]))
        sh(cmd)
        exe = os.path.join(outdir, "decode")
        objs = sorted(os.path.join(outdir, o) for o in os.listdir(outdir) if o.endswith(".o"))
        sh([self.cc, "-O2", "-I" + os.path.join(ROOT, "runtime"), "-I" + outdir]
           + (["-DSTATIC_T=%d" % static_t] if static_t is not None else [])
           + ["-o", exe, os.path.join(BENCH, "decode.c")] + objs + [self.lib, "-lm", "-lpthread"])
        builds[static_t] = exe
        return exe

    def bandwidth(self):
        """{threads: read GB/s} from bench/stream.c over a STREAM_MIB buffer, 1 and 2 threads."""
        exe = os.path.join(self.work, "stream")
        if not os.path.exists(exe):
            sh([self.cc, "-O3", "-march=native", "-o", exe, os.path.join(BENCH, "stream.c"), "-lpthread"])
        out = {}
        for t in (1, 2):
            m = re.search(r"read GB/s:\s*([0-9.]+)", sh([exe, str(t), str(STREAM_MIB)], timeout=600))
            out[t] = float(m.group(1)) if m else None
        return out

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

    def gpt2_decode(self):
        cfg = GPT2_GEN
        L, D, H, V, CTX = (cfg[k] for k in ("L", "D", "H", "V", "CTX"))
        hd = D // H
        # every parameter once (wte twice in use, embedding row and LM head, read once), wpe one row
        params = V * D + CTX * D + L * (12 * D * D + 13 * D) + 2 * D
        wbytes = 4 * (params - CTX * D + D)
        print("\n## GPT-2 small decode step: L=%d, D=%d, H=%d, V=%d, one token at position P after P cached ones\n"
              % (L, D, H, V))
        print("A decode step reads every weight once: its limit is the memory-read bandwidth. Weights read per "
              "token: %d floats = %.1f MB (every parameter, wte once for the LM head, wpe one row of %d); "
              "limit time = %.1f MB / read bandwidth at that thread count. The cache read (K and V, "
              "2*L*H*(P+1)*D/H floats: %s) is not in the limit; the last column adds it.\n"
              % (wbytes // 4, wbytes / 1e6, D, wbytes / 1e6,
                 ", ".join("%.1f MB at P=%d" % (8 * L * H * (P + 1) * hd / 1e6, P) for P in DECODE_P)))
        print("Every runtime here runs with glibc's %s: freed memory is kept for reuse, not returned to the "
              "kernel (a first touch of a fresh page is slow on these virtual machines, and ONNX Runtime's and "
              "PyTorch's decode step allocates present_k/present_v, the whole cache, at every step; without it "
              "their P=1023 step took 4-8x longer).\n" % " ".join("%s=%s" % kv for kv in DECODE_MALLOC_ENV.items()))
        try:
            d = self.gen_files()
        except Unavailable as e:
            print("unavailable: the model files: %s" % e)
            return
        w, tokens, onnx = (os.path.join(d, f) for f in ("weights.safetensors", "tokens.npy", "decode.onnx"))
        try:
            harness = self.gen_build(d)
            nerr = None
        except Unavailable as e:
            nerr = "nestc: %s" % e
        try:
            bw0 = self.bandwidth()
        except Unavailable as e:
            bw0 = {}
            log("bandwidth: %s" % e)
        runs, bgs = {}, []
        for P in DECODE_P:
            tok, pk, pv = (os.path.join(d, "%s-%d.npy" % (f, P)) for f in ("token", "past_k", "past_v"))
            specs = []
            for t in (1, 2):
                out = lambda name: os.path.join(d, "%s-P%d-%d.npy" % (name, P, t))
                lg = lambda name: os.path.join(d, "%s-P%d-%d.log" % (name, P, t))
                specs.append(dict(label="nestc", threads=t, error=nerr, out=out("nestc"), log=lg("nestc"),
                                  env=dict(self.nestc_env(t), **DECODE_MALLOC_ENV),
                                  cmd=None if nerr else [harness, w, out("nestc"), "5", tokens, "decode", str(P)]))
                oenv = dict(self.base_env(), **DECODE_MALLOC_ENV)
                oenv["NODE_PATH"] = self.node_path
                oerr = self.why_not.get("ort") or (None if os.path.exists(onnx) else "no ONNX file (PyTorch exports it)")
                specs.append(dict(label="ONNX Runtime", threads=t, error=oerr, out=out("ort"), log=lg("ort"), env=oenv,
                                  cmd=["node", os.path.join(BENCH, "ort_server.js"), onnx, str(t), out("ort"), "5",
                                       tok, pk, pv]))
                specs.append(dict(label="PyTorch eager", threads=t, error=self.why_not.get("torch"), out=out("torch"),
                                  log=lg("torch"), env=dict(self.torch_env(t), **DECODE_MALLOC_ENV),
                                  cmd=[TORCH_PY, os.path.join(BENCH, "torch_server.py"), str(t), out("torch"), "5",
                                       "gpt2-decode", w] + [str(cfg[k]) for k in ("L", "D", "H", "V", "CTX")]
                                      + [tok, pk, pv]))
            res, bg = measure(specs, self.rounds, budget=self.budget(20))
            runs[P] = res
            if bg is not None:
                bgs.append(bg)
        try:
            bw1 = self.bandwidth()
        except Unavailable as e:
            bw1 = {}
            log("bandwidth: %s" % e)
        bw = {t: max([x for x in (bw0.get(t), bw1.get(t)) if x] or [None]) for t in (1, 2)}
        print("Memory-read bandwidth (bench/stream.c, %d MiB, best of 5 reads; measured before and after the "
              "decode runs, the higher is used): %s\n" % (STREAM_MIB, "; ".join(
                  "%d thread%s: %s GB/s (before %s, after %s)%s" % (
                      t, "s" if t > 1 else "", "%.1f" % bw[t] if bw[t] else "?",
                      bw0.get(t) or "?", bw1.get(t) or "?",
                      ", limit %.2f ms" % (wbytes / bw[t] / 1e6) if bw[t] else "") for t in (1, 2))))
        print("| P | runtime | threads | median ms | min ms | weights GB/s | % of read limit | time / ORT | "
              "cpu/wall | runs | max abs diff vs fp64 | rel. diff vs fp64 | % of limit with cache |")
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        goal = {}
        for P in DECODE_P:
            res = runs[P]
            ref = self.reference_row(d, P)
            ort = {r["threads"]: r["ms"] for r in res if r["label"] == "ONNX Runtime" and r["ms"]}
            cbytes = 8 * L * H * (P + 1) * hd
            for r in sorted(res, key=lambda r: r["threads"]):
                if r["ms"] is None:
                    print("| %d | %s | %d | unavailable: %s | | | | | | | | | |" % (P, r["label"], r["threads"], cell(r["error"])))
                    continue
                t = r["threads"]
                frac = (wbytes / bw[t] / 1e6) / r["ms"] if bw[t] else None
                fracc = ((wbytes + cbytes) / bw[t] / 1e6) / r["ms"] if bw[t] else None
                diff = max_diff(r["out"], ref)
                rel = self.rel_diff(r["out"], ref) if ref is not None else "-"
                ratio = r["ms"] / ort[t] if t in ort else None
                if r["label"] == "nestc":
                    goal[(P, t)] = (frac, ratio)
                print("| %d | %s | %d | %.2f | %.2f | %.1f | %s | %s | %s | %d | %s | %s | %s |"
                      % (P, r["label"], t, r["ms"], r["min"], wbytes / r["ms"] / 1e6,
                         "%.0f%%" % (100 * frac) if frac else "-", "%.2f" % ratio if ratio else "-",
                         "%.2f" % r["cpu"] if r.get("cpu") is not None else "-", r["n"],
                         "%.2g" % diff if isinstance(diff, float) else cell(diff),
                         "%.2g" % rel if isinstance(rel, float) else cell(rel),
                         "%.0f%%" % (100 * fracc) if fracc else "-"))
        # the three runtimes against each other (same weights, same past)
        pairs = []
        for P in DECODE_P:
            outs = {(r["label"], r["threads"]): r["out"] for r in runs[P] if r["ms"]}
            for t in (1, 2):
                n = outs.get(("nestc", t))
                for other in ("ONNX Runtime", "PyTorch eager"):
                    o = outs.get((other, t))
                    if n and o:
                        x = self.rel_diff(n, np.load(o))
                        pairs.append("P=%d, %d thread%s, nestc vs %s %s" % (P, t, "s" if t > 1 else "", other,
                                                                            "%.2g" % x if isinstance(x, float) else x))
        if pairs:
            print("\nLogits of one step against each other (max |a - b| / max |b|; goal within ~1e-4): %s."
                  % "; ".join(pairs))
        for t in (1, 2):
            for P in DECODE_P:
                fr = goal.get((P, t))
                if fr and fr[1]:
                    print("\nnestc / ONNX Runtime at P=%d, %d thread%s: %.2fx the time (nestc runs at %.0f%% of its speed)"
                          % (P, t, "s" if t > 1 else "", fr[1], 100 / fr[1]), end="")
        print()
        lines = []
        for t, lim, orat in ((1, 0.75, 0.85), (2, 0.85, 1.0)):
            for P in DECODE_P:
                fr = goal.get((P, t))
                if not fr:
                    lines.append("P=%d, %d thread%s: nestc unavailable" % (P, t, "s" if t > 1 else ""))
                    continue
                frac, ratio = fr
                lines.append("P=%d, %d thread%s: %s of the read limit (goal >= %.0f%%: %s), %s ORT's time "
                             "(goal <= %.2fx: %s)" % (
                                 P, t, "s" if t > 1 else "", "%.0f%%" % (100 * frac) if frac else "?", 100 * lim,
                                 ("met" if frac >= lim else "not met") if frac else "?",
                                 "%.2fx" % ratio if ratio else "?", orat,
                                 ("met" if ratio <= orat else "not met") if ratio else "?"))
        print("\nGoals (issue 13), nestc's decode step:\n" + "\n".join("- " + l for l in lines))
        if bgs:
            background_note(statistics.mean(bgs))

    def reference_row(self, d, n):
        path = os.path.join(d, "ref-%d.npy" % n)
        return np.load(path) if os.path.exists(path) else None

    def gpt2_prefill(self):
        cfg = GPT2_GEN
        print("\n## GPT-2 small prefill: one build for any T (prefill(tokens: i32[T]) where 1 <= T <= %d) against "
              "static builds of each T (nestc build -D T=n)\n" % cfg["CTX"])
        try:
            d = self.gen_files()
        except Unavailable as e:
            print("unavailable: the model files: %s" % e)
            return
        w, tokens = os.path.join(d, "weights.safetensors"), os.path.join(d, "tokens.npy")
        try:
            dyn = self.gen_build(d)
            derr = None
        except Unavailable as e:
            derr = "nestc: %s" % e
        print("| T | threads | dynamic ms | static ms | dynamic / static | goal <= 1.1 | runs | rel. diff dynamic vs static "
              "| rel. diff vs fp64 (dynamic, static) |")
        print("| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |")
        bgs = []
        for T in PREFILL_T:
            try:
                st = self.gen_build(d, T)
                serr = None
            except Unavailable as e:
                serr = "nestc -D T=%d: %s" % (T, e)
            warm = "1" if T >= 256 else "3"
            specs = []
            for t in (1, 2):
                for label, exe, err in (("dynamic", dyn if not derr else None, derr), ("static", st if not serr else None, serr)):
                    o = os.path.join(d, "prefill-%s-T%d-%d.npy" % (label, T, t))
                    specs.append(dict(label=label, threads=t, error=err, out=o,
                                      log=os.path.join(d, "prefill-%s-T%d-%d.log" % (label, T, t)),
                                      env=self.nestc_env(t),
                                      cmd=None if err else [exe, w, o, warm, tokens, "prefill", str(T)]))
            rounds = self.rounds if T <= 128 else max(3, self.rounds // 4)
            res, bg = measure(specs, rounds, budget=self.budget(10 if T <= 128 else 0))
            if bg is not None:
                bgs.append(bg)
            ref = self.reference_row(d, T - 1)
            for t in (1, 2):
                dr = next(r for r in res if r["label"] == "dynamic" and r["threads"] == t)
                sr = next(r for r in res if r["label"] == "static" and r["threads"] == t)
                if dr["ms"] is None or sr["ms"] is None:
                    why = "; ".join("%s: %s" % (r["label"], cell(r["error"])) for r in (dr, sr) if r["ms"] is None)
                    print("| %d | %d | unavailable: %s | | | | | | |" % (T, t, why))
                    continue
                ratio = dr["ms"] / sr["ms"]
                x = self.rel_diff(dr["out"], np.load(sr["out"]))
                fp = ", ".join(("%.2g" % v if isinstance(v, float) else cell(v))
                               for v in ((self.rel_diff(r["out"], ref) if ref is not None else "-") for r in (dr, sr)))
                print("| %d | %d | %.2f | %.2f | %.3f | %s | %d | %s | %s |"
                      % (T, t, dr["ms"], sr["ms"], ratio, "met" if ratio <= 1.1 else "not met", min(dr["n"], sr["n"]),
                         "%.2g" % x if isinstance(x, float) else cell(x), fp))
        print("\nDiffs: the logits of the last position, max |a - b| / max |b|.")
        if bgs:
            background_note(statistics.mean(bgs))

    def coldstart(self, runs=7):
        """Issue #14: a process that opens GPT-2 small's weights (in the page cache),
        creates 1 or 4 instances and calls each once (bench/coldstart.c), at 2 threads;
        and the same program with the weights linked in (--embed-weights)."""
        cfg = GPT2_SMALL
        print("\n## Cold start and memory: GPT-2 small (L=%d, D=%d, V=%d, S=%d), NESTRT_NUM_THREADS=2\n"
              % (cfg["L"], cfg["D"], cfg["V"], cfg["S"]))
        d = os.path.join(self.work, "gpt2-small")
        vals = [cfg[k] for k in ("L", "D", "H", "V", "CTX", "S")]
        try:
            self.files("gpt2", d, vals, os.path.join(ROOT, "samples", "gpt2.nest"), cfg)
            if "nestc" in self.why_not:
                raise Unavailable(self.why_not["nestc"])
        except Unavailable as e:
            print("unavailable: %s" % e)
            return
        w = os.path.join(d, "weights.safetensors")
        exes = {}
        for kind in ("file", "embedded"):
            out = os.path.join(d, "coldstart-" + kind)
            shutil.rmtree(out, ignore_errors=True)
            cmd = [self.nestc, "build", os.path.join(ROOT, "samples", "gpt2.nest"), "-o", out]
            for k, v in cfg.items():
                cmd += ["-D", "%s=%s" % (k, v)]
            if kind == "embedded":
                cmd += ["--embed-weights", w]
            sh(cmd)
            objs = sorted(os.path.join(out, o) for o in os.listdir(out) if o.endswith(".o"))
            exe = os.path.join(out, "coldstart")
            sh([self.cc, "-O2", "-I" + os.path.join(ROOT, "runtime"), "-I" + out]
               + (["-DEMBEDDED"] if kind == "embedded" else [])
               + ["-o", exe, os.path.join(BENCH, "coldstart.c")] + objs + [self.lib, "-lm", "-lpthread"])
            exes[kind] = exe
        env = self.nestc_env(2)
        with open(w, "rb") as f:   # into the page cache
            while f.read(1 << 24):
                pass
        with open(exes["embedded"], "rb") as f:
            while f.read(1 << 24):
                pass
        pat = re.compile(r"first call ([\d.]+) s \(open ([\d.]+), new ([\d.]+), call ([\d.]+)\), all ([\d.]+) s; "
                         r"peak RSS (\d+) MiB = ([\d.]+)x the (\d+) MiB weights; checksum (\S+)")
        rows = []
        busy0, kids0, wall0 = busy_seconds(), sum(os.times()[2:4]), time.perf_counter()
        for kind, n in (("file", 1), ("file", 4), ("embedded", 1), ("embedded", 4)):
            res = []
            for r in range(runs):
                p = subprocess.run([exes[kind], w, str(n)], capture_output=True,
                                   text=True, env=env, timeout=600)
                m = pat.search(p.stdout)
                if p.returncode != 0 or not m:
                    res = "failed: %s" % (p.stderr.strip() or p.stdout.strip())[-300:]
                    break
                res.append([float(x) for x in m.groups()[:8]] + [m.group(9)])
            rows.append((kind, n, res))
        busy1, kids1, wall1 = busy_seconds(), sum(os.times()[2:4]), time.perf_counter()
        print("| weights | instances | open to end of first call, median s | open | new | first call | all instances s "
              "| peak RSS MiB | RSS / weights | runs |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        sums = set()
        for kind, n, res in rows:
            if isinstance(res, str):
                print("| %s | %d | %s | | | | | | | |" % (kind, n, cell(res)))
                continue
            med = lambda i: statistics.median(x[i] for x in res)
            sums.update(x[8] for x in res)
            print("| %s | %d | %.3f (min %.3f, max %.3f) | %.3f | %.3f | %.3f | %.3f | %.0f | %.2fx | %d |"
                  % ("file" if kind == "file" else "embedded", n, med(0), min(x[0] for x in res),
                     max(x[0] for x in res), med(1), med(2), med(3), med(4), med(5), med(6), len(res)))
        print("\nOutput checksums of the first calls: %s (one value: every run computed the same logits)."
              % ", ".join(sorted(sums)))
        print("Goals (issue #14): open to end of first call <= 0.2 s; peak RSS <= 1.15x the weights with one "
              "instance, <= 1.25x with four. `embedded`: nestc build --embed-weights, matrices linked in packed "
              "(its \"open\" is 0: the clock starts at the first NAME_new_embedded).")
        if busy0 is not None and busy1 is not None and wall1 > wall0:
            print("Other processes on the machine kept about %.2f of its %d cores busy during these runs."
                  % (max(0.0, (busy1 - busy0 - (kids1 - kids0)) / (wall1 - wall0)), os.cpu_count()))

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

    def matmul(self):
        print("\n## Matrix product alone: nestc against OpenBLAS cblas_sgemm (row-major, C = A B)\n")
        if "sgemm" not in self.why_not:
            print("OpenBLAS core: %s (OPENBLAS_CORETYPE=%s)\n" % (self.facts.get("openblas_core"), self.blas_core or "unset"))
        print("| M x N x K | GFLOP | threads | nestc ms | nestc GFLOP/s | nestc % of peak | sgemm ms | sgemm GFLOP/s "
              "| nestc / sgemm (GFLOP/s) | max abs diff nestc, sgemm vs fp64 |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        bgs, sg_threads = [], set()
        for (M, N, K) in MATMULS:
            flop = 2.0 * M * N * K
            d = os.path.join(self.work, "matmul-%dx%dx%d" % (M, N, K))
            try:
                self.files("matmul", d, [M, N, K])
            except Unavailable as e:
                print("| %dx%dx%d | | | unavailable: %s |" % (M, N, K, cell(e)))
                continue
            a, b = os.path.join(d, "a.npy"), os.path.join(d, "b.npy")
            try:
                harness = self.nestc_build(os.path.join(BENCH, "matmul.nest"), dict(M=M, N=N, K=K),
                                           os.path.join(d, "nestc"), "matmul")
                nerr = None
            except Unavailable as e:
                nerr = "nestc: %s" % e
            specs = []
            for t in (1, 2):
                specs.append(dict(label="nestc", threads=t, error=nerr, out=os.path.join(d, "nestc-%d.npy" % t),
                                  log=os.path.join(d, "nestc-%d.log" % t), env=self.nestc_env(t),
                                  cmd=None if nerr else [harness, "-", os.path.join(d, "nestc-%d.npy" % t), "20", a, b]))
                specs.append(dict(label="sgemm", threads=t, error=self.why_not.get("sgemm"),
                                  out=os.path.join(d, "sgemm-%d.npy" % t), log=os.path.join(d, "sgemm-%d.log" % t),
                                  env=self.blas_env(t),
                                  cmd=[self.sgemm, a, b, os.path.join(d, "sgemm-%d.npy" % t), "20"]))
            res, bg = measure(specs, self.rounds, budget=self.budget(10))
            if bg is not None:
                bgs.append(bg)
            ref = np.load(os.path.join(d, "ref.npy"))
            for t in (1, 2):
                n = next(r for r in res if r["label"] == "nestc" and r["threads"] == t)
                s = next(r for r in res if r["label"] == "sgemm" and r["threads"] == t)
                cells = []
                for r in (n, s):
                    if r["ms"] is None:
                        cells.append(["unavailable: %s" % cell(r["error"]), "", ""] if r is n else ["unavailable: %s" % cell(r["error"]), ""])
                    else:
                        g = flop / r["ms"] / 1e6
                        cells.append(["%.3f" % r["ms"], "%.1f" % g, self.pct(g, t)] if r is n else ["%.3f" % r["ms"], "%.1f" % g])
                ratio = "%.2f" % (s["ms"] / n["ms"]) if n["ms"] and s["ms"] else "-"
                diffs = ", ".join(("%.2g" % x if isinstance(x, float) else x)
                                  for x in (max_diff(r["out"], ref) if r["ms"] else "-" for r in (n, s)))
                print("| %dx%dx%d | %.3g | %d | %s | %s | %s |" % (M, N, K, flop / 1e9, t, " | ".join(cells[0]),
                                                                  " | ".join(cells[1]), ratio + " | " + diffs))
                for r in (s,):
                    if r["ms"] and r.get("info"):
                        sg_threads.add("%s thread%s: openblas_get_num_threads() = %s" % (
                            t, "s" if t > 1 else "", r["info"].split()[1]))
        if sg_threads:
            print("\nsgemm processes: %s." % "; ".join(sorted(sg_threads)))
        if bgs:
            background_note(statistics.mean(bgs))

    def resnet(self):
        cfg = RESNET
        flop = resnet_flop(**cfg)
        print("\n## samples/resnet.nest (ResNet-18, batch norm folded): 1x3x%dx%d image, C0=%d, %d classes "
              "(%.3g GFLOP per forward)\n" % (cfg["IMG"], cfg["IMG"], cfg["C0"], cfg["CLASSES"], flop / 1e9))
        d = os.path.join(self.work, "resnet")
        try:
            self.files("resnet", d, [cfg["IMG"], cfg["C0"], cfg["CLASSES"]], os.path.join(ROOT, "samples", "resnet.nest"), cfg)
        except Unavailable as e:
            print("unavailable: the model files: %s" % e)
            return
        w, x = os.path.join(d, "weights.safetensors"), os.path.join(d, "x.npy")
        try:
            harness = self.nestc_build(os.path.join(ROOT, "samples", "resnet.nest"), cfg, os.path.join(d, "nestc"), "resnet")
            nerr = None
        except Unavailable as e:
            nerr = "nestc: %s" % e
        specs = []
        for t in (1, 2):
            specs.append(dict(label="nestc", threads=t, error=nerr, out=os.path.join(d, "nestc-%d.npy" % t),
                              log=os.path.join(d, "nestc-%d.log" % t), env=self.nestc_env(t),
                              cmd=None if nerr else [harness, w, os.path.join(d, "nestc-%d.npy" % t), "3", x]))
            specs.append(dict(label="PyTorch eager", threads=t, error=self.why_not.get("torch"),
                              out=os.path.join(d, "torch-%d.npy" % t), log=os.path.join(d, "torch-%d.log" % t),
                              env=self.torch_env(t),
                              cmd=[TORCH_PY, os.path.join(BENCH, "torch_server.py"), str(t),
                                   os.path.join(d, "torch-%d.npy" % t), "3", "resnet", w, str(cfg["C0"]),
                                   str(cfg["CLASSES"]), x]))
        res, bg = measure(specs, self.rounds, budget=self.budget(30))
        self.model_table(res, flop, self.reference(d), base="PyTorch eager")
        background_note(bg)

    def resnet18(self):
        """samples/resnet18.nest, batch norms unfolded, against ONNX Runtime and PyTorch
        on torchvision's state dict (bench/models.py ResNet18BN, exported to ONNX)."""
        cfg = RESNET18
        flop = resnet_flop(cfg["IMG"], 64, 1000)
        print("\n## samples/resnet18.nest (torchvision ResNet-18 with batch norm): 1x3x%dx%d image "
              "(%.3g GFLOP per forward)\n" % (cfg["IMG"], cfg["IMG"], flop / 1e9))
        d = os.path.join(self.work, "resnet18-%d" % cfg["IMG"])
        src = os.path.join(ROOT, "samples", "resnet18.nest")
        try:
            self.files("resnet18", d, [cfg["IMG"]], src, cfg)
        except Unavailable as e:
            print("unavailable: the model files: %s" % e)
            return
        w, x, onnx = (os.path.join(d, f) for f in ("weights.safetensors", "x.npy", "model.onnx"))
        try:
            harness = self.nestc_build(src, cfg, os.path.join(d, "nestc"), "resnet18")
            nerr = None
        except Unavailable as e:
            nerr = "nestc: %s" % e
        specs = []
        for t in (1, 2):
            out = lambda name: os.path.join(d, "%s-%d.npy" % (name, t))
            lg = lambda name: os.path.join(d, "%s-%d.log" % (name, t))
            specs.append(dict(label="nestc", threads=t, error=nerr, out=out("nestc"), log=lg("nestc"),
                              env=self.nestc_env(t), cmd=None if nerr else [harness, w, out("nestc"), "3", x]))
            oenv = self.base_env()
            oenv["NODE_PATH"] = self.node_path
            oerr = self.why_not.get("ort") or (None if os.path.exists(onnx) else "no ONNX file (PyTorch exports it)")
            specs.append(dict(label="ONNX Runtime", threads=t, error=oerr, out=out("ort"), log=lg("ort"), env=oenv,
                              cmd=["node", os.path.join(BENCH, "ort_server.js"), onnx, str(t), out("ort"), "3", x]))
            specs.append(dict(label="PyTorch eager", threads=t, error=self.why_not.get("torch"), out=out("torch"),
                              log=lg("torch"), env=self.torch_env(t),
                              cmd=[TORCH_PY, os.path.join(BENCH, "torch_server.py"), str(t), out("torch"), "3",
                                   "resnet18", w, x]))
        res, bg = measure(specs, self.rounds, budget=self.budget(0))
        self.model_table(res, flop, self.reference(d), base="ONNX Runtime")
        background_note(bg)


SECTIONS = ("gpt2-shape", "gpt2-small", "coldstart", "gpt2-decode", "gpt2-prefill", "matmul", "resnet", "resnet18")


def gpt2_flop(L, D, H, V, CTX, S):
    per_layer = 2 * S * D * (3 * D) + 2 * S * S * D * 2 + 2 * S * D * D + 2 * S * D * (4 * D) * 2
    return float(L * per_layer + 2 * S * D * V)


def resnet_flop(IMG, C0, CLASSES, IN_C=3):
    def conv(o, i, k, hw):
        return 2 * o * i * k * k * hw * hw
    hw = IMG // 2
    total = conv(C0, IN_C, 7, hw)
    hw //= 2
    total += 4 * conv(C0, C0, 3, hw)
    c = C0
    for _ in range(3):
        hw //= 2
        total += conv(2 * c, c, 3, hw) + conv(2 * c, 2 * c, 3, hw) + conv(2 * c, c, 1, hw) + 2 * conv(2 * c, 2 * c, 3, hw)
        c *= 2
    return float(total + 2 * c * CLASSES)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("nestc")
    ap.add_argument("--rounds", type=int, default=20, help="interleaved rounds (default 20)")
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--skip", default="", help="peers to leave out: ort,torch,sgemm")
    ap.add_argument("--work", help="folder for models and builds (default: NESTC's folder/bench)")
    ap.add_argument("--peak1", type=float, default=175.0, help="FMA peak GFLOP/s at 1 thread")
    ap.add_argument("--peak2", type=float, default=345.0, help="FMA peak GFLOP/s at 2 threads")
    args = ap.parse_args()
    sections = args.only.split(",")
    bad = set(p for p in args.skip.split(",") if p) - {"ort", "torch", "sgemm"}
    if bad:
        ap.error("unknown peer(s) for --skip: %s" % ", ".join(sorted(bad)))
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        ap.error("unknown section(s): %s" % ", ".join(sorted(unknown)))
    t0 = time.time()
    b = Bench(args)
    b.probe()
    f = b.facts
    print("# nestc run-time benchmark\n")
    print("- machine: %s, %s cores, %s memory, Linux %s" % (f["cpu"], f["cores"], f["mem"], f["kernel"]))
    print("- FMA peak (fp32, 512-bit FMA, measured on this machine kind): %g GFLOP/s at 1 thread, %g at 2"
          % (args.peak1, args.peak2))
    print("- nestc: %s (%s), NESTRT_NUM_THREADS=1 or 2; %s" % (f["nestc"], args.nestc, f["cc"]))
    print("- ONNX Runtime: %s" % ("onnxruntime-node %s on Node %s, intraOpNumThreads=1 or 2, graphOptimizationLevel all"
                                  % (f["ort"], f["node"]) if "ort" not in b.why_not else "unavailable: " + b.why_not["ort"]))
    print("- PyTorch: %s" % ("%s eager (inference_mode), torch.set_num_threads = OPENBLAS_NUM_THREADS = 1 or 2, "
                             "OMP_WAIT_POLICY=PASSIVE; onnx %s; NumPy %s" % (f["torch"], f["onnx"], f["numpy"])
                             if "torch" not in b.why_not else "unavailable: " + b.why_not["torch"]))
    print("- OpenBLAS: %s" % ("%s; openblas_get_corename() = %s (OPENBLAS_CORETYPE=%s)"
                              % (f["openblas"], f["openblas_core"], b.blas_core or "unset")
                              if "sgemm" not in b.why_not else "unavailable: " + b.why_not["sgemm"]))
    print("- method: every runtime in its own process, warmed up, then runs interleaved A B A B ... over at least "
          "%d rounds (the quick sections go on for up to 5 times as many within a time budget), K runs per turn, "
          "median of all runs; FLOPs = 2*M*N*K per matrix product (attention and LM head included), "
          "2*O*I*k*k*OH*OW per convolution; outputs against the model in float64 PyTorch" % args.rounds)
    sys.stdout.flush()
    for sec in sections:
        log("section %s" % sec)
        if sec == "gpt2-shape":
            b.gpt2("GPT-2 shape", GPT2_SHAPE, "gpt2-shape")
        elif sec == "gpt2-small":
            b.gpt2("GPT-2 small", GPT2_SMALL, "gpt2-small")
        elif sec == "coldstart":
            b.coldstart()
        elif sec == "matmul":
            b.matmul()
        elif sec == "resnet":
            b.resnet()
        elif sec == "resnet18":
            b.resnet18()
        elif sec == "gpt2-decode":
            b.gpt2_decode()
        elif sec == "gpt2-prefill":
            b.gpt2_prefill()
        sys.stdout.flush()
    print("\n(benchmark took %.0f s)" % (time.time() - t0))


if __name__ == "__main__":
    main()
