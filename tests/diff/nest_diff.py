#!/usr/bin/python3
"""Random differential testing of nestc: random valid Nest programs (tests/diff/gen.py),
compiled, against the reference interpreter (`nestc run`).

    /usr/bin/python3 tests/diff/nest_diff.py NESTC                    the make-check batch
    /usr/bin/python3 tests/diff/nest_diff.py NESTC --seed S --count N programs S .. S+N-1
    /usr/bin/python3 tests/diff/nest_diff.py NESTC --seconds N        fresh seeds for N seconds
    /usr/bin/python3 tests/diff/nest_diff.py NESTC --replay FILE.nest one saved program

Each program has many exported entries: static ones over every op class, a loop of nested
regions (reuse_hash, specialize, max_reuse_entries, options) at several row counts and at a
run-time row count whose bounds are spelled every way (<, <=, >, >=, ==, chains, && and
coefficients), and a state written in boxes on two axes by several entries and read by
another, with one-call forms of each sequence for the interpreter (which runs every entry
on a fresh sequence). The program is built three times, for the native CPU, for haswell
(AVX2) and for x86-64 (SSE2), linked into one C driver that runs every test on the three
instances over one shared weights object and over a weights object each, at 1 and at 3
threads (NESTRT_NUM_THREADS). Values: floats within 1e-4 of the largest magnitude (plus
1e-5), non-finite entries where the interpreter has them, integers and bools exactly.
Errors: a run-time dimension out of its bounds, a state read before it was written, a
gather or take_along_axis index out of range must fail in both, with the same condition,
state or index in the message, and a failed call must write nothing.

Programs the front end rejects are generator bugs and fail with their seed. A failing
program is written to build/diff-findings/ (with its plan in #@plan lines) for --replay;
checked-in findings (tests/diff/findings/*.nest) are replayed by every fixed batch.
Prints `ok NAME` / `FAIL NAME: detail` per check and `N passed, N failed`.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import gen  # noqa: E402

CONFIGS = [("dn", []), ("dh", ["--cpu=haswell"]), ("ds", ["--cpu=x86-64"])]
CPUNAME = {"dn": "native", "dh": "haswell", "ds": "x86-64"}
THREADS = [1, 3]
CTYPE = {"uint8_t": "bool", "int32_t": "i32", "int64_t": "i64", "float": "f32", "double": "f64"}
NPDT = {"bool": np.uint8, "i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}
DEFAULT_SEED, DEFAULT_COUNT = 1, 2
TIMEOUT = 300
LINK_FLAGS = os.environ.get("NESTC_TEST_LDFLAGS", "").split()

passed = failed = 0


def result(ok, name, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok " + name, flush=True)
    else:
        failed += 1
        print("FAIL %s: %s" % (name, detail), flush=True)
    return ok


def sh(cmd, env=None, timeout=TIMEOUT):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, -999, "", "timeout after %ds" % timeout)


def first_lines(text, n=4):
    return " | ".join([l for l in text.strip().splitlines() if l.strip()][:n])


# ------------------------------------------------------------------ header


PROTO = re.compile(r"^int (\w+)\((.*)\);$")
COMMENT = re.compile(r"^/\* (\w+)\((.*)\) -> (.*)$")
TYPE = re.compile(r"(bool|i32|i64|f32|f64)(?:\[([^\]]*)\])?")


def parse_header(path, prefix):
    """{entry: {"seq": bool, "dims": [names], "ins": [(name, dtype)], "outs": [(dtype, [dim exprs])]}}"""
    text = open(path).read().splitlines()
    out, pending = {}, None
    for line in text:
        m = COMMENT.match(line)
        if m:
            res = m.group(3).strip()
            outs = [(t.group(1), [d.strip() for d in (t.group(2) or "").split(",") if d.strip()])
                    for t in TYPE.finditer(res)]
            pending = (m.group(1), outs)
            continue
        m = PROTO.match(line)
        if m and m.group(1).startswith(prefix + "_") and pending:
            name = m.group(1)[len(prefix) + 1:]
            if name != pending[0]:
                continue
            e = {"seq": False, "dims": [], "ins": [], "outs": pending[1]}
            for a in [a.strip() for a in m.group(2).split(",")][1:]:
                if a.startswith(prefix + "_seq"):
                    e["seq"] = True
                elif a.startswith("int64_t ") and "*" not in a:
                    e["dims"].append(a.split()[-1])
                elif a.startswith("const "):
                    t, n = a[len("const "):].split("*")
                    e["ins"].append((n.strip(), CTYPE[t.strip()]))
            out[name] = e
            pending = None
    return out


def eval_dim(expr, dims):
    return int(eval(expr, {"__builtins__": {}}, dict(dims)))


# ------------------------------------------------------------------ driver


def c_driver(plan, hdr, prefixes, has_state, inputs_index):
    """One C program: every test on every build, over shared or separate weights."""
    L = ['#include <stdio.h>', '#include <stdlib.h>', '#include <string.h>', '#include <stdint.h>']
    L += ['#include "%s.h"' % p for p in prefixes]
    L.append("""
static void *IN[%d];
static FILE *BLOB;
static long OFF;
#define SENT 0xA5
static void *obuf(size_t n) { void *p = malloc(n ? n : 1); memset(p, SENT, n ? n : 1); return p; }
static int wrote(const void *p, size_t n) { const unsigned char *c = p; for (size_t i = 0; i < n; i++) if (c[i] != SENT) return 1; return 0; }
static void res(const char *cfg, int wm, int t, int c, int rc, const char *msg, int w)
{
	char m[600]; snprintf(m, sizeof m, "%%s", msg ? msg : "(null)");
	for (char *q = m; *q; q++) if (*q == '\\n') *q = ' ';
	printf("R %%s %%d %%d %%d %%d %%d %%s\\n", cfg, wm, t, c, rc, w, m);
}
static void out(const char *cfg, int wm, int t, int c, int k, const void *p, size_t n)
{
	fwrite(p, 1, n, BLOB); fflush(BLOB);
	printf("O %%s %%d %%d %%d %%d %%ld %%zu\\n", cfg, wm, t, c, k, OFF, n);
	OFF += (long)n;
}
""" % max(1, len(inputs_index)))
    esize = {"bool": 1, "i32": 4, "i64": 8, "f32": 4, "f64": 8}
    for p in prefixes:
        L.append("static void run_%s(%s *m, int wm)\n{\n\tnestrt_error err; (void)err;" % (p, p))
        for ti, t in enumerate(plan["tests"]):
            L.append("\t{ /* %s */" % t["name"])
            if has_state:
                L.append("\t\t%s_seq *s = %s_seq_new(m, &err);" % (p, p))
                L.append('\t\tif (!s) { res("%s", wm, %d, 0, -2, err.message, 0); goto end%d; }' % (p, ti, ti))
            for ci, c in enumerate(t["calls"]):
                if c.get("reset"):
                    L.append("\t\t%s_seq_reset(s);" % p)
                    continue
                e = hdr[c["entry"]]
                args = ["m"] + (["s"] if e["seq"] else [])
                args += ["INT64_C(%d)" % c["dims"][d] for d in e["dims"]]
                for n, dt in e["ins"]:
                    args.append("IN[%d]" % inputs_index[gen_key(c["inputs"][n])])
                sizes = []
                for k, (dt, shp) in enumerate(e["outs"]):
                    n = 1
                    for d in shp:
                        n *= eval_dim(d, c["dims"])
                    n = max(0, min(n, 1 << 20)) * esize[dt]
                    sizes.append(n)
                    L.append("\t\tvoid *o%d_%d = obuf(%d);" % (ci, k, n))
                    args.append("o%d_%d" % (ci, k))
                L.append("\t\t{ int rc = %s_%s(%s);" % (p, c["entry"], ", ".join(args)))
                L.append("\t\t  int w = rc ? (%s) : 0;" % (" || ".join("wrote(o%d_%d, %d)" % (ci, k, n) for k, n in enumerate(sizes)) or "0"))
                L.append('\t\t  res("%s", wm, %d, %d, rc, rc ? %s_error(m) : "", w);' % (p, ti, ci, p))
                for k, n in enumerate(sizes):
                    L.append('\t\t  if (!rc) out("%s", wm, %d, %d, %d, o%d_%d, %d);' % (p, ti, ci, k, ci, k, n))
                L.append("\t\t  %s" % " ".join("free(o%d_%d);" % (ci, k) for k in range(len(sizes))))
                L.append("\t\t  if (rc) goto end%d; }" % ti)
            L.append("\tend%d:;" % ti)
            if has_state:
                L.append("\t\tif (s) %s_seq_free(s);" % p)
            L.append("\t}")
        L.append("}")
    L.append("""
int main(int argc, char **argv)
{
	/* argv: WEIGHTS BLOB NIN IN... */
	setvbuf(stdout, NULL, _IOLBF, 0);
	nestrt_error err;
	int nin = atoi(argv[3]);
	for (int i = 0; i < nin; i++) {
		int dt, rank; int64_t shape[NESTRT_MAX_RANK];
		if (nestrt_npy_read(argv[4 + i], &dt, &rank, shape, &IN[i], &err)) { printf("X input %s\\n", err.message); return 2; }
	}
	BLOB = fopen(argv[2], "wb");
	/* shared: one weights object under every build's instance, all made first */
	{
		nestrt_weights *w = nestrt_weights_open(argv[1], &err);
		if (!w) { printf("X weights %s\\n", err.message); return 2; }""")
    for p in prefixes:
        L.append('\t\t%s *m_%s = %s_new(w, &err); if (!m_%s) { printf("X new %s %%s\\n", err.message); return 2; }' % (p, p, p, p, p))
    for p in prefixes:
        L.append("\t\trun_%s(m_%s, 0);" % (p, p))
    for p in prefixes:
        L.append("\t\t%s_free(m_%s);" % (p, p))
    L.append("\t\tnestrt_weights_close(w);\n\t}\n\t/* separate: a weights object each */\n\t{")
    for p in prefixes:
        L.append('\t\tnestrt_weights *w_%s = nestrt_weights_open(argv[1], &err); if (!w_%s) { printf("X weights %%s\\n", err.message); return 2; }' % (p, p))
        L.append('\t\t%s *m_%s = %s_new(w_%s, &err); if (!m_%s) { printf("X new %s %%s\\n", err.message); return 2; }' % (p, p, p, p, p, p))
        L.append("\t\tnestrt_weights_close(w_%s);" % p)
    for p in prefixes:
        L.append("\t\trun_%s(m_%s, 1);" % (p, p))
    for p in prefixes:
        L.append("\t\t%s_free(m_%s);" % (p, p))
    L.append("\t}\n\tfclose(BLOB);\n\tprintf(\"DONE\\n\");\n\treturn 0;\n}\n")
    return "\n".join(L)


def gen_key(spec):
    return repr(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in spec.items()))


# ------------------------------------------------------------------ comparison


ERR_KINDS = [
    # a slice's or a store's end past its axis: compiled code checks it as a condition
    # before anything runs, the interpreter where the slice is
    ("bounds", re.compile(r"\(the end of the (?:slice|store)|is out of range for axis")),
    ("dims", re.compile(r"(?:^|: )([^:]*?) (?:\(the [^)]*\) )?does not hold")),
    ("state", re.compile(r"reads state (\S+)")),
    ("gather", re.compile(r"gather index (-?\d+) out of range \[0, (\d+)\)")),
    ("take", re.compile(r"take_along_axis index (-?\d+) out of range \[0, (\d+)\)")),
]


def err_key(msg):
    for kind, rx in ERR_KINDS:
        m = rx.search(msg)
        if m:
            g = m.groups()
            if kind == "dims":
                g = (re.sub(r"\s+", " ", g[0]).strip(),)
            return (kind,) + tuple(g)
    return ("other", msg.strip())


def interp_error(stderr):
    for line in stderr.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    return stderr.strip()


def close(got, ref, dt):
    """'' when got matches ref (the interpreter's), else why not."""
    if got.size != ref.size:
        return "%d elements, the interpreter %d" % (got.size, ref.size)
    ref = ref.reshape(-1)
    got = got.reshape(-1)
    if dt in ("bool", "i32", "i64"):
        bad = np.nonzero(got.astype(np.int64) != ref.astype(np.int64))[0]
        return "" if not bad.size else "%d of %d differ, first at %d: %s vs %s" % (bad.size, ref.size, bad[0], got[bad[0]], ref[bad[0]])
    g, r = got.astype(np.float64), ref.astype(np.float64)
    fin = np.isfinite(r)
    nf = np.nonzero(~fin & ~((np.isnan(g) & np.isnan(r)) | (g == r)))[0]
    if nf.size:
        return "non-finite entries differ, first at %d: %s vs %s" % (nf[0], g[nf[0]], r[nf[0]])
    if not fin.any():
        return ""
    scale = np.abs(r[fin]).max()
    d = np.abs(g[fin] - r[fin])
    d[np.isnan(d)] = np.inf
    # f64 results are often f32 values widened (f64(x)): the f32 tolerance for both
    tol = 1e-4 * scale + 1e-5
    if d.max() > tol:
        i = int(np.argmax(d))
        idx = np.nonzero(fin)[0][i]
        return "max |diff| %.3g > %.2g (at %d: %r vs %r, max |ref| %.3g)" % (d.max(), tol, idx, g[idx], r[idx], scale)
    return ""


# ------------------------------------------------------------------ one program


class Ctx:
    def __init__(self, nestc, work, jobs, findings):
        self.nestc, self.work, self.jobs, self.findings = nestc, work, jobs, findings
        self.lib = os.path.join(os.path.dirname(nestc), "libnestrt.a")


def run_program(ctx, label, src, plan, keep_on_fail=True):
    """Builds, runs and compares one program; prints its checks; True when all passed."""
    d = os.path.join(ctx.work, label.replace("/", "_"))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model = os.path.join(d, "m.nest")
    with open(model, "w") as f:
        f.write(src)
        if "#@plan " not in src:
            f.write("\n" + gen.plan_comment(plan))
    fails = []

    def fail(name, detail):
        fails.append(name)
        result(False, "%s.%s" % (label, name), detail)

    r = sh([ctx.nestc, "check", model, "-w"])
    if r.returncode != 0:
        fail("front_end", "seed %s: nestc check rejects the program (a generator bug unless the compiler is wrong): %s"
             % (plan.get("seed"), first_lines(r.stderr)))
        return save(ctx, label, model, fails)
    result(True, label + ".front_end")
    w = os.path.join(d, "w.safetensors")
    r = sh([ctx.nestc, "weights", model, "--random-weights", str(plan.get("seed", 0) % 1000 + 1), "-o", w])
    if r.returncode != 0:
        fail("weights", first_lines(r.stderr))
        return save(ctx, label, model, fails)
    # inputs
    inputs_index, paths = {}, []
    for t in plan["tests"]:
        for c in t["calls"] + [t["interp"]]:
            for spec in c.get("inputs", {}).values():
                k = gen_key(spec)
                if k not in inputs_index:
                    inputs_index[k] = len(paths)
                    p = os.path.join(d, "in%d.npy" % len(paths))
                    np.save(p, gen.make_input(spec))
                    paths.append(p)
    # builds and interpreter runs, side by side
    pool = ThreadPoolExecutor(ctx.jobs)
    builds = {}
    for p, flags in CONFIGS:
        builds[p] = pool.submit(sh, [ctx.nestc, "build", model, "-o", os.path.join(d, p), "--name", p, "--no-cache",
                                     "-j1", "-w"] + flags)
    interp = []
    for ti, t in enumerate(plan["tests"]):
        it = t["interp"]
        outs = [os.path.join(d, "ref%d_%d.npy" % (ti, k)) for k in range(8)]
        cmd = [ctx.nestc, "run", model, "-w", "--weights", w, "--entry", it["entry"]]
        for k, v in it["dims"].items():
            cmd += ["-D", "%s=%d" % (k, v)]
        for n, spec in it["inputs"].items():
            cmd += ["--input", "%s=%s" % (n, paths[inputs_index[gen_key(spec)]])]
        interp.append((cmd, outs, pool.submit(sh, cmd)))
    for p, fut in builds.items():
        r = fut.result()
        if r.returncode != 0:
            fail("build_" + CPUNAME[p], first_lines(r.stderr))
    if fails:
        pool.shutdown()
        return save(ctx, label, model, fails)
    hdr = parse_header(os.path.join(d, "dn", "dn.h"), "dn")
    # the interpreter's outputs: run again with --output once the count is known
    refs = []
    for ti, (cmd, outs, fut) in enumerate(interp):
        r = fut.result()
        t = plan["tests"][ti]
        if r.returncode != 0:
            if r.returncode < 0 or "internal" in r.stderr:
                fail("interp_crash." + t["name"], first_lines(r.stderr))
            refs.append(("err", interp_error(r.stderr)))
            continue
        nres = len(hdr[t["interp"]["entry"]]["outs"])
        refs.append(("run", cmd + sum([["--output", o] for o in outs[:nres]], []), outs[:nres]))
    futs = {ti: pool.submit(sh, x[1]) for ti, x in enumerate(refs) if x[0] == "run"}
    # the driver
    has_state = any(e["seq"] for e in hdr.values())
    try:
        csrc = c_driver(plan, hdr, [p for p, _ in CONFIGS], has_state, inputs_index)
    except KeyError as e:
        fail("driver", "entry or input missing from the header: %s" % e)
        pool.shutdown()
        return save(ctx, label, model, fails)
    drv = os.path.join(d, "driver.c")
    open(drv, "w").write(csrc)
    objs = []
    for p, _ in CONFIGS:
        objs += sorted(os.path.join(d, p, f) for f in os.listdir(os.path.join(d, p)) if f.endswith(".o"))
    exe = os.path.join(d, "driver")
    r = sh(["cc", "-O0", "-w", "-I" + os.path.join(ROOT, "runtime")] + ["-I" + os.path.join(d, p) for p, _ in CONFIGS]
           + [drv] + objs + [ctx.lib, "-lm", "-lpthread", "-ldl"] + LINK_FLAGS + ["-o", exe])
    if r.returncode != 0:
        fail("driver_link", first_lines(r.stderr, 8))
        pool.shutdown()
        return save(ctx, label, model, fails)
    runs = {}
    for th in THREADS:
        env = dict(os.environ, NESTRT_NUM_THREADS=str(th))
        blob = os.path.join(d, "blob%d" % th)
        runs[th] = (blob, pool.submit(sh, [exe, w, blob, str(len(paths))] + paths, env))
    for ti, fut in futs.items():
        r = fut.result()
        if r.returncode != 0:
            refs[ti] = ("err", interp_error(r.stderr))
        else:
            refs[ti] = ("ok", [np.load(o) for o in refs[ti][2]])
    got = {}   # (th, cfg, wm, t) -> {"calls": {c: (rc, wrote, msg)}, "outs": {(c, k): bytes}}
    for th, (blob, fut) in runs.items():
        r = fut.result()
        data = open(blob, "rb").read() if os.path.exists(blob) else b""
        if r.returncode != 0 or "DONE" not in r.stdout:
            fail("driver_%dthreads" % th, "exit %d: %s" % (r.returncode, first_lines(r.stderr + "\n" + "\n".join(
                l for l in r.stdout.splitlines() if l.startswith("X")))))
        for line in r.stdout.splitlines():
            parts = line.split(" ", 7)
            if parts[0] == "R":
                key = (th, parts[1], int(parts[2]), int(parts[3]))
                got.setdefault(key, {"calls": {}, "outs": {}})["calls"][int(parts[4])] = (
                    int(parts[5]), int(parts[6]), parts[7] if len(parts) > 7 else "")
            elif parts[0] == "O":
                key = (th, parts[1], int(parts[2]), int(parts[3]))
                off, n = int(parts[6]), int(parts[7])
                got.setdefault(key, {"calls": {}, "outs": {}})["outs"][(int(parts[4]), int(parts[5]))] = data[off:off + n]
    pool.shutdown()
    # compare, one check per test
    for ti, t in enumerate(plan["tests"]):
        ref = refs[ti]
        probs = []
        for th in THREADS:
            for p, _ in CONFIGS:
                for wm in (0, 1):
                    where = "%s/%s/%d thread%s" % (CPUNAME[p], "shared" if wm == 0 else "own weights", th, "s" if th > 1 else "")
                    g = got.get((th, p, wm, ti))
                    if g is None:
                        probs.append("%s: no result (the driver crashed?)" % where)
                        continue
                    pr = compare_test(t, ref, g, hdr)
                    if pr:
                        probs.append("%s: %s" % (where, pr))
        if probs:
            uniq = sorted(set(x.split(": ", 1)[1] for x in probs))
            fail("t." + t["name"], "seed %s: %d of %d runs differ; %s; e.g. %s" % (
                plan.get("seed"), len(probs), len(THREADS) * len(CONFIGS) * 2,
                "; ".join(sorted(set(x.split(": ", 1)[0] for x in probs)))[:300], " || ".join(uniq[:2])))
        else:
            result(True, "%s.t.%s" % (label, t["name"]))
    return save(ctx, label, model, fails)


def compare_test(t, ref, g, hdr):
    calls = [c for c in t["calls"]]
    real = [i for i, c in enumerate(calls) if not c.get("reset")]
    if ref[0] == "err":
        # some call must fail with the same kind and detail; the ones before it succeed
        want = err_key(ref[1])
        for i in real:
            if i not in g["calls"]:
                return "call %d (%s) did not run; the interpreter: %s" % (i, calls[i]["entry"], ref[1])
            rc, wrote, msg = g["calls"][i]
            if rc != 0:
                if rc != -1:
                    return "call %d returned %d" % (i, rc)
                k = err_key(msg)
                # a where clause, a state read, a slice's bound: checked before anything
                # runs, nothing written; an index out of range fails where it is met,
                # and results written before it may be partial (nestc(1), the header)
                if wrote and k[0] not in ("gather", "take"):
                    return "call %d failed (%s) but wrote into its outputs" % (i, msg)
                if t.get("huge") and k[0] == "dims":
                    # a dimension near 2^62: the interpreter may report the size of a
                    # tensor of that many rows before the bound; both must fail
                    return ""
                if k != want:
                    return "error '%s', the interpreter '%s'" % (msg, ref[1])
                return ""
        return "every call succeeded; the interpreter: %s" % ref[1]
    for i in real:
        if i not in g["calls"]:
            return "call %d did not run" % i
        rc, wrote, msg = g["calls"][i]
        if rc != 0:
            return "call %d (%s) failed: %s; the interpreter succeeded" % (i, calls[i]["entry"], msg)
    for j, (ci, k) in enumerate(t["map"]):
        e = hdr[calls[ci]["entry"]]
        dt = e["outs"][k][0]
        b = g["outs"].get((ci, k))
        if b is None:
            return "no output %d of call %d" % (k, ci)
        arr = np.frombuffer(b, dtype=NPDT[dt])
        why = close(arr, ref[1][j], dt)
        if why:
            return "result %d (call %d %s output %d): %s" % (j, ci, calls[ci]["entry"], k, why)
    return ""


def save(ctx, label, model, fails):
    if not fails:
        return True
    os.makedirs(ctx.findings, exist_ok=True)
    dst = os.path.join(ctx.findings, label.replace("/", "_") + ".nest")
    shutil.copy(model, dst)
    print("# %s: failing program saved as %s (rerun: nest_diff.py NESTC --replay %s)" % (label, dst, dst), flush=True)
    return False


# ------------------------------------------------------------------ main


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("nestc")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--count", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--replay", action="append", default=[])
    ap.add_argument("--findings", default=os.path.join(ROOT, "build", "diff-findings"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    nestc = os.path.abspath(a.nestc)
    work = tempfile.mkdtemp(prefix="nest_diff.")
    ctx = Ctx(nestc, work, a.jobs, a.findings)
    t0 = time.time()
    try:
        if a.replay:
            for f in a.replay:
                text = open(f).read()
                plan = gen.read_plan(text)
                if plan is None:
                    result(False, os.path.basename(f), "no #@plan lines")
                    continue
                run_program(ctx, "replay_" + os.path.splitext(os.path.basename(f))[0], text, plan)
        elif a.seconds is not None:
            seed = a.seed if a.seed is not None else int(time.time() * 1000) % 10 ** 9
            n = 0
            while time.time() - t0 < a.seconds:
                src, plan = gen.gen_program(seed)
                run_program(ctx, "seed%d" % seed, src, plan)
                seed += 1
                n += 1
            print("# %d programs in %.0f s" % (n, time.time() - t0))
        else:
            # the fixed batch: the checked-in findings, then the seeds
            fdir = os.path.join(HERE, "findings")
            for f in sorted(os.listdir(fdir)) if os.path.isdir(fdir) else []:
                if f.endswith(".nest"):
                    text = open(os.path.join(fdir, f)).read()
                    plan = gen.read_plan(text)
                    if plan is None:
                        result(False, "finding." + f, "no #@plan lines")
                        continue
                    run_program(ctx, "finding_" + f[:-5], text, plan)
            seed = a.seed if a.seed is not None else DEFAULT_SEED
            count = a.count if a.count is not None else DEFAULT_COUNT
            for s in range(seed, seed + count):
                src, plan = gen.gen_program(s)
                run_program(ctx, "seed%d" % s, src, plan)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("# kept " + work)
    print("# %.1f s" % (time.time() - t0))
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
