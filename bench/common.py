"""Shared parts of bench/run.py: configuration, running commands, the runtime servers
and the interleaved measurement (see run.py for the method), FLOP counts."""
import os
import select
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
        self.turns = {}   # round -> that round's times, for figures paired by round
        self.round = 0
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
            self.turns[self.round] = times
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


# Processes per runtime (run.py --procs). One process's speed depends on where its
# memory landed: the same binary on the same inputs, three processes interleaved,
# ran GPT-2 small at 202, 203 and 239 ms (medians) on this machine. So the rounds are
# shared out over PROCS fresh processes of each runtime, and the medians are over all
# of their runs.
PROCS = 3


def measure(specs, rounds, budget=0.0):
    """specs: list of dicts (label, threads, cmd, env, out, log, or error). Runs
    measure_procs PROCS times (fresh servers each time), each with its share of the
    rounds and of the budget, and pools the runs. Returns the result dicts and the
    load of other processes (cores)."""
    procs = max(1, PROCS)
    per = max(1, -(-rounds // procs))
    pooled, bgs = None, []
    for p in range(procs):
        res, bg = measure_procs(specs, per, budget / procs)
        if bg is not None:
            bgs.append(bg)
        for a in res:   # turns keyed (process, round): two runtimes' turns of one round pair up
            a["turns"] = {(p, k): v for k, v in a.get("turns", {}).items()}
        if pooled is None:
            pooled = res
            continue
        for a, b in zip(pooled, res):
            if a["error"] or b["error"]:
                a["error"] = a["error"] or b["error"]
                a["ms"] = None
                continue
            a["samples"] += b["samples"]
            a["cpu_s"] += b["cpu_s"]
            a["wall_s"] += b["wall_s"]
            a["rounds"] += b["rounds"]
            a["procs"] += 1
            a["proc_ms"] += b["proc_ms"]
            a["turns"].update(b["turns"])
    for a in pooled:
        if not a["error"] and a.get("samples"):
            a["ms"] = statistics.median(a["samples"])
            a["min"] = min(a["samples"])
            a["n"] = len(a["samples"])
            a["cpu"] = a["cpu_s"] / a["wall_s"] if a["wall_s"] > 0 else None
    return pooled, (statistics.mean(bgs) if bgs else None)


def measure_procs(specs, rounds, budget=0.0):
    """One process per spec: starts the servers one after the other, then
    interleaves their turns: `rounds` rounds, and more (up to 5 times as many)
    while the rounds so far took less than `budget` seconds."""
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
        est = 0.0
        for srv, res in servers:
            try:
                est += statistics.median(srv.run(1, record=False)) * srv.k * rounds / 1e3
            except Unavailable as e:   # one that died since it started (out of memory): its row says so
                res["error"] = "failed before the runs: %s" % e
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
                srv.round = r
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
            res["samples"], res["cpu_s"], res["wall_s"] = list(srv.samples), srv.cpu, srv.wall
            res["procs"], res["proc_ms"] = 1, [res["ms"]]
            res["turns"] = dict(srv.turns)
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

