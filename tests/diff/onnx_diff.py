#!/usr/bin/python3
"""Random differential testing of nestc's ONNX import: random valid ONNX graphs
(tests/diff/onnx_gen.py), each imported and run by nestc interpreted (`nestc run
model.onnx`) and compiled (`nestc build model.onnx` and a C driver of tests/compiled/run.py),
against a float64 NumPy evaluation written from the operator definitions
(tests/diff/onnx_ref.py).

    /usr/bin/python3 tests/diff/onnx_diff.py NESTC                  the fixed batch (make check)
    /usr/bin/python3 tests/diff/onnx_diff.py NESTC --seed S [--count N] [--compiled-every K]
    /usr/bin/python3 tests/diff/onnx_diff.py NESTC --seconds N       fresh seeds until time is up
    /usr/bin/python3 tests/diff/onnx_diff.py NESTC --replay FILE.onnx
    options: -j N (models run at once, default 2), --per-model N (graphs per model, default 8),
             --nodes N (node groups per graph; default 3 to 12, from the seed), --keep (the
             work directory)

Graph seed S is the same alone or among others: its values are named gS_..., and
--per-model graphs side by side make one model (one import, one build, one driver), so
that compile work is shared (one model per opset: a graph in 5 is of opset 12, where
Softmax works on a 2-d view and axes are attributes, the others of opset 17). A graph with
repeated layers (outlined only where a single value passes between them) or with an
index error runs alone. One graph in 8 starts with a convolution and its pooling on a
64x64 image (nestc computes those together in bands); one in 16 is only repeated residual
layers (nestc's import outlines them as a region); one in 16 starts with a Gather of
run-time indices, which is also run with an index out of range: nestc must then fail with
"out of range", interpreted, and compiled with the entry returning -1 and no output
written.

Compiled code is built, model by model in turn, for the host's CPU, for haswell (AVX2) and
for x86-64 (SSE2), and each driver runs with 1 and with 3 threads (NESTRT_NUM_THREADS).

The fixed batch: seeds 1..64, every model interpreted and compiled, and the saved findings of
tests/diff/onnx_findings.py (interpreted and for each CPU). --seconds: seeds from the
clock, interpreted, and compiled for every --compiled-every'th model (default 2); only
failures are printed.

Comparison: floats |got - want| <= 1e-4 |want| + 1e-5 max|want| (per output), no NaN,
dtypes and shapes equal; integers and bools exactly. The generator keeps only
well-conditioned graphs (onnx_gen.py), so this holds for any correct float32 computation.

On a mismatch or a failing nestc, the seed is printed, and the graph alone with its inputs
and a minimized graph are saved in build/diff-findings/ (NAME.onnx, and NAME.inputs/
holding each input as its name, %-quoted, .npy):
for wrong values, the first node whose value differs alone, its inputs as initializers or
graph inputs (or its cone), else the cone of the fewest outputs that fail the same way.
--replay FILE.onnx reruns one (inputs from FILE.inputs/, else random). Once a finding is
understood it becomes a case of tests/diff/onnx_findings.py. To search past a known bug of
folding, ONNX_DIFF_AVOID_FOLDED=Op,Op keeps the generator from giving those ops only
constants, ONNX_DIFF_AVOID_OUTPUT=Op,Op never makes their results extra outputs, and
ONNX_DIFF_STYLES=plain,torch leaves out names that clash as Nest identifiers. Prints `ok NAME` or `FAIL NAME: why` per check and `N passed, N failed`; exit
status 1 on a failure.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import numpy as np
import onnx
from onnx import helper as H
from onnx import numpy_helper as NH

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import onnx_gen as G  # noqa: E402
import onnx_ref as R  # noqa: E402

_spec = importlib.util.spec_from_file_location("compiled_run", os.path.join(ROOT, "tests", "compiled", "run.py"))
cr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cr)

RTOL, ATOL = 1e-4, 1e-5
FIXED_SEEDS = range(1, 65)
FINDINGS = os.path.join(ROOT, "build", "diff-findings")
TIMEOUT = 120


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", "timed out after %d s" % TIMEOUT)


def short(s, n=3):
    return " | ".join([l for l in s.strip().splitlines() if l.strip()][:n])


def graph_of(seed, nodes=None):
    """Graph seed: 3 to 12 nodes; one in 8 starts with a convolution and pooling of a
    64x64 image (onnx_gen.py's g_bigconv), one in 16 with a Gather of run-time indices
    that are also run out of range (g_gather_err), one in 16 is only repeated layers."""
    g = G.Graph(seed, "g%d_" % seed)
    return g.generate(nodes if nodes else 3 + seed % 10, big=seed % 8 == 5, err=seed % 16 == 11,
                      layers=seed % 16 == 3)


def check_error(model, feeds, d, comp):
    """None if nestc refuses the feeds with a gather index out of range (run: exit 1;
    compiled: the entry returns -1, writing nothing into the outputs), else why."""
    why, _ = nestc_outputs(NESTC, model, feeds, d, comp)
    if why is None:
        return "no error for an index out of range"
    if "out of range" not in why or "wrote into output" in why or "exit 1:" not in why:
        return "not the expected error: %s" % why
    return None


def compare(got, want):
    """None if nestc's got matches the reference want, else why."""
    if got.shape != want.shape:
        return "shape %s, expected %s" % (list(got.shape), list(want.shape))
    if want.dtype.kind != "f":
        want_dt = {"b": np.bool_}.get(want.dtype.kind, want.dtype)
        if got.dtype != want_dt:
            return "dtype %s, expected %s" % (got.dtype, want_dt)
        if not np.array_equal(got, want):
            k = tuple(np.argwhere(got != want)[0])
            return "%d of %d differ; at %s got %s, expected %s" % (int((got != want).sum()), got.size, list(k),
                                                                  got[k], want[k])
        return None
    if got.dtype != np.float32:
        return "dtype %s, expected float32" % got.dtype
    g = got.astype(np.float64)
    scale = float(np.abs(want).max()) if want.size else 0.0
    with np.errstate(invalid="ignore"):
        err = np.abs(g - want)
        bad = ~(err <= RTOL * np.abs(want) + ATOL * max(scale, 1e-30))
    if bad.any():
        k = tuple(np.argwhere(bad)[0])
        return "%d of %d differ; at %s got %r, expected %r (max|expected| %.3g)" % (
            int(bad.sum()), got.size, list(k), float(g[k]), float(want[k]), scale)
    return None


def graph_inputs(m):
    inits = {t.name for t in m.graph.initializer}
    return [v for v in m.graph.input if v.name not in inits]


# compiled code: the models in turn for the host's CPU (AVX-512 here), AVX2 and SSE2, each
# run with 1 and 3 threads
CPUS = ["native", "haswell", "x86-64"]
CPUS_FINDINGS = CPUS             # saved findings and --replay: interpreted and every CPU
THREADS = ("1", "3")


def mode_name(comp):
    return "interpreted" if not comp else "compiled" if comp == "native" else "compiled --cpu=" + comp


def nestc_outputs(nestc, model, feeds, d, comp):
    """nestc's results for the graph's outputs: (None, [(label, {name: array})]) or
    (why, None). comp: False (the interpreter) or the CPU to build for ("native": the
    host's); compiled code runs once per thread count of THREADS."""
    compiled = bool(comp)
    cpu = None if comp in (False, "native") else comp
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "m.onnx")
    onnx.save(model, path)
    inp = {}
    for k, (n, a) in enumerate(feeds.items()):
        p = os.path.join(d, "in%d.npy" % k)
        np.save(p, a)
        inp[n] = p
    names = [o.name for o in model.graph.output]
    outs = [os.path.join(d, "%s%d.npy" % ("c" if compiled else "i", k)) for k in range(len(names))]
    if not compiled:
        cmd = [NESTC, "run", path]
        for n, p in inp.items():
            cmd += ["--input", "%s=%s" % (n, p)]
        for p in outs:
            cmd += ["--output", p]
        r = sh(cmd)
        if r.returncode:
            return "nestc run: exit %d: %s" % (r.returncode, short(r.stderr)), None
    else:
        od = os.path.join(d, "out")
        r = sh([NESTC, "build", path, "-o", od, "--name", "m", "-j1", "--no-cache"] +
               (["--cpu=" + cpu] if cpu else []))
        if r.returncode:
            return "nestc build: exit %d: %s" % (r.returncode, short(r.stderr)), None
        try:
            e = cr.parse_header(os.path.join(od, "m.h"), "m", strict_names=False)["forward"]
            if [n for n, _, _ in e.inputs] != list(feeds):
                # the entry's arguments are the graph's inputs, in order, as Nest names
                by_order = dict(zip([n for n, _, _ in e.inputs], inp.values()))
            else:
                by_order = inp
            call = cr.Call(e, od + ".safetensors", by_order, outs, twice=False)
            objs = sorted(os.path.join(od, f) for f in os.listdir(od) if f.endswith(".o"))
            exe = cr.compile_driver(d, [call], ["m"], [od], objs)
        except cr.Fail as ex:
            return "compiled: %s" % ex, None
        res = []
        for th in THREADS:
            try:
                env = dict(os.environ, NESTRT_NUM_THREADS=th)
                if "ASAN_OPTIONS" in env:
                    # tests/compiled's driver returns at a failed call without freeing
                    # (as its own suite runs it under check-asan): no leak report then
                    env["ASAN_OPTIONS"] += ":detect_leaks=0"
                r = subprocess.run([exe], capture_output=True, text=True, errors="replace", timeout=TIMEOUT,
                                   env=env)
            except subprocess.TimeoutExpired:
                return "%s threads: timed out" % th, None
            if r.returncode:
                return "compiled driver, %s thread(s): exit %d: %s" % (th, r.returncode, short(r.stderr)), None
            res.append(("%s thread%s" % (th, "s" if th != "1" else ""), {n: np.load(p) for n, p in zip(names, outs)}))
        return None, res
    return None, [("", {n: np.load(p) for n, p in zip(names, outs)})]


def check_model(model, feeds, d, comp, owners=None):
    """({owner: why or None}, whether nestc failed): the outputs of each owner (a graph's
    seed, or one name for the whole model) against the reference."""
    want = R.run_model(model, feeds)
    names = [o.name for o in model.graph.output]
    owners = owners or {n: None for n in names}
    why, runs = nestc_outputs(NESTC, model, feeds, d, comp)
    res = {o: None for o in owners.values()}
    if why:
        return {o: why for o in res}, True
    for label, got in runs:
        for n in names:
            w = compare(got[n], want[n])
            if w and res[owners[n]] is None:
                res[owners[n]] = "output %s%s: %s" % (n, " (%s)" % label if label else "", w)
    return res, False


def feeds_of(graphs):
    return {n: a for g in graphs for n, a in g.inputs}


# ----------------------------------------------------------------------------- findings


def save_case(name, model, feeds):
    os.makedirs(FINDINGS, exist_ok=True)
    path = os.path.join(FINDINGS, name + ".onnx")
    onnx.save(model, path)
    idir = os.path.join(FINDINGS, name + ".inputs")
    shutil.rmtree(idir, ignore_errors=True)
    os.makedirs(idir)
    for n, a in feeds.items():
        np.save(os.path.join(idir, quote(n, safe="") + ".npy"), a)
    return path


def load_case(path):
    m = onnx.load(path)
    idir = path[:-5] + ".inputs"
    feeds = {}
    rng = np.random.default_rng(0)
    for v in graph_inputs(m):
        p = os.path.join(idir, quote(v.name, safe="") + ".npy")
        if os.path.exists(p):
            feeds[v.name] = np.load(p)
        else:
            shp = [x.dim_value for x in v.type.tensor_type.shape.dim]
            feeds[v.name] = rng.uniform(-2, 2, size=shp).astype(np.float32)
    return m, feeds


def known_at_import(model):
    """Names of the values nestc knows at import: initializers, Constants, and what nodes
    of only those compute."""
    k = {t.name for t in model.graph.initializer}
    for n in model.graph.node:
        if all(i == "" or i in k for i in n.input):
            k.update(n.output)
    return k


def cone(model, outs):
    """The model reduced to what the outputs need."""
    need, nodes = set(outs), []
    for n in reversed(model.graph.node):
        if any(o in need for o in n.output):
            nodes.append(n)
            need.update(i for i in n.input if i)
    nodes.reverse()
    return nodes, need


def rebuild(model, nodes, inputs, inits, outs, want):
    vi = lambda n, a: H.make_tensor_value_info(n, G.elem_type(a), list(a.shape))
    g = H.make_graph(nodes, "minimized", [vi(n, a) for n, a in inputs], [vi(o, want[o]) for o in outs],
                     initializer=inits)
    return H.make_model(g, opset_imports=model.opset_import, producer_name="onnx_diff")


def kind_of(why):
    """What kind of failure: wrong values, or nestc's error message (without paths and
    positions), so that a smaller model counts only if it fails the same way."""
    if why.startswith("output "):
        return "values"
    import re
    m = re.search(r"error: (.*)", why)
    return re.sub(r"'[^']*'|\d+|/\S*", "_", m.group(1).split(" | ")[0]) if m else why.split(":")[0]


def minimize(model, feeds, d, compiled):
    """A smaller model that fails the same way (model, feeds), or None. Wrong values: the
    first node whose value differs, alone with its inputs as initializers (those known at
    import) and graph inputs (the others), or with them all as graph inputs, or with its
    cone. Else (an error, or values inside that are right once they are outputs, being
    no longer fused): the cone of the fewest outputs that still fail, outputs dropped one
    at a time."""
    want = R.run_model(model, feeds)
    ints = {t.name for t in model.graph.initializer}
    outs = [o.name for o in model.graph.output]
    res, _ = check_model(model, feeds, d + "_outs", compiled, {o: o for o in outs})
    bad = [o for o in outs if res[o]]
    if not bad:
        return None
    kind = kind_of(res[bad[0]])
    same = lambda r: any(w and kind_of(w) == kind for w in r.values())

    def cone_model(names):
        nodes, need = cone(model, names)
        m = rebuild(model, nodes, [(v.name, feeds[v.name]) for v in graph_inputs(model) if v.name in need],
                    [t for t in model.graph.initializer if t.name in need], names, want)
        return m, {v.name: feeds[v.name] for v in graph_inputs(m)}

    def fails(m, f, tag):
        r, _ = check_model(m, f, d + tag, compiled)
        return same(r)

    if kind == "values":
        comp = [o for n in model.graph.node if n.op_type != "Constant" for o in n.output if o not in ints]
        probe = rebuild(model, list(model.graph.node), [(v.name, feeds[v.name]) for v in graph_inputs(model)],
                        list(model.graph.initializer), comp, want)
        res, _ = check_model(probe, feeds, d, compiled, {o: o for o in comp})
        first = next((o for o in comp if res[o] and kind_of(res[o]) == kind), None)
        if first is not None:
            node = next(n for n in model.graph.node if first in n.output)
            known = known_at_import(model)
            cands = []
            for mode in ("inits", "inputs"):
                ins, inits = [], []
                for i in dict.fromkeys(x for x in node.input if x):
                    a = G.np_of(want[i])
                    if mode == "inits" and i in known:
                        inits.append(NH.from_array(a, i))
                    else:
                        ins.append((i, a))
                m = rebuild(model, [node], ins, inits, [first], want)
                cands.append((m, {v.name: G.np_of(want[v.name]) for v in graph_inputs(m)}))
            cands.append(cone_model([first]))
            for k, (m, f) in enumerate(cands):
                if fails(m, f, "_c%d" % k):
                    return m, f
    keep = list(bad)
    for o in list(bad):
        if len(keep) > 1:
            trial = [x for x in keep if x != o]
            if fails(*cone_model(trial), "_drop"):
                keep = trial
    m, f = cone_model(keep)
    return (m, f) if len(m.graph.node) < len(model.graph.node) and fails(m, f, "_cone") else None


def report_finding(tag, model, feeds, d, compiled):
    """Saves the failing model (and a minimized one; compiled None: not minimized); the
    lines to print."""
    path = save_case(tag, model, feeds)
    lines = ["   saved %s (--replay it)" % os.path.relpath(path, ROOT)]
    if compiled is None:
        return lines
    try:
        mm = minimize(model, feeds, os.path.join(d, "min"), compiled)
    except Exception as e:  # the minimizer's own trouble never hides the finding
        mm = None
        lines.append("   (minimizing failed: %s: %s)" % (type(e).__name__, e))
    if mm:
        p = save_case(tag + "-min", *mm)
        ops = [n.op_type for n in mm[0].graph.node]
        lines.append("   minimized to %d node(s) %s: %s" % (len(ops), " ".join(ops), os.path.relpath(p, ROOT)))
    return lines


# ----------------------------------------------------------------------------- batches


def run_group(seeds, work, compiled, nodes=None):
    """[(name, why or None, extra lines)] for the graphs of seeds, as one model (a failure
    of this script is a failed check too)."""
    try:
        return run_group1(seeds, work, compiled, nodes)
    except Exception as e:
        import traceback
        return [("onnx seeds %d..%d" % (seeds[0], seeds[-1]), "tester error: %s: %s" % (type(e).__name__, e),
                 ["   " + l for l in traceback.format_exc().splitlines()[-6:]])]


def run_group1(seeds, work, compiled, nodes=None):
    allg = [graph_of(s, nodes) for s in seeds]
    # one model per opset; alone, a graph with repeated layers (nestc outlines them only
    # where one value passes between them) or with an index error; the CPU in turn
    parts = [[g for g in allg if not g.solo and g.opset == o] for o in sorted({g.opset for g in allg})]
    parts += [[g] for g in allg if g.solo]
    out = []
    for graphs in parts:
        if graphs:
            out += run_part(graphs, work, CPUS[graphs[0].seed % len(CPUS)] if compiled else None)
    return out


def run_part(graphs, work, cpu):
    """cpu: None (interpreted only) or the CPU to build for."""
    seeds = [g.seed for g in graphs]
    model = G.make_model(graphs)
    feeds = feeds_of(graphs)
    owners = {o: g.seed for g in graphs for o in g.outputs}
    d = os.path.join(work, "grp%d" % seeds[0])
    out = []
    for comp in ([False, cpu] if cpu else [False]):
        mode = mode_name(comp)
        res, whole = check_model(model, feeds, os.path.join(d, mode), comp, owners)
        if whole and len(graphs) > 1:
            # nestc failed on the model: each graph alone says which
            res = {}
            for g in graphs:
                r, _ = check_model(G.make_model([g]), feeds_of([g]), os.path.join(d, mode, "s%d" % g.seed), comp)
                res[g.seed] = next(iter(r.values()))
        for g in graphs:
            why = res[g.seed]
            extra = []
            if why:
                extra.append("   seed %d (%s): %d nodes: %s" % (g.seed, mode, len(g.ops), " ".join(g.ops)))
                alone = G.make_model([g])
                r, _ = check_model(alone, feeds_of([g]), os.path.join(d, mode, "alone%d" % g.seed), comp)
                if any(r.values()):
                    extra += report_finding("onnx-seed%d-%s" % (g.seed, mode.replace(" --cpu=", "-")), alone, feeds_of([g]),
                                            os.path.join(d, mode, "f%d" % g.seed), comp)
                else:
                    extra.append("   alone it passes: saving the whole model")
                    extra += report_finding("onnx-seeds%d-%d-%s" % (seeds[0], seeds[-1], mode.replace(" --cpu=", "-")), model, feeds,
                                            os.path.join(d, mode, "fall"), comp)
            out.append(("onnx seed %d %s (%s)" % (g.seed, mode, ",".join(sorted(set(g.ops)))), why, extra))
            if g.bad_feed:
                name, bad, dim = g.bad_feed
                bf = dict(feeds, **{name: bad})
                why = check_error(model, bf, os.path.join(d, mode + "_err"), comp)
                extra = []
                if why:
                    extra = report_finding("onnx-seed%d-%s-error" % (g.seed, mode.replace(" --cpu=", "-")), model, bf,
                                           os.path.join(d, mode, "ferr"), None)
                out.append(("onnx seed %d %s: index %s of a dimension of %d is an error" % (
                    g.seed, mode, bad.tolist(), dim), why, extra))
    return out


def run_findings(work):
    """The saved cases of tests/diff/onnx_findings.py, interpreted and compiled."""
    try:
        import onnx_findings
    except ImportError:
        return []
    out = []
    for name, build in onnx_findings.CASES:
        model, feeds = build()
        for comp in [False] + CPUS_FINDINGS:
            mode = mode_name(comp)
            r, _ = check_model(model, feeds, os.path.join(work, "find_" + name, mode.replace(" ", "_")), comp)
            out.append(("onnx finding %s %s" % (name, mode), next(iter(r.values())), []))
    return out


def replay(path, work):
    model, feeds = load_case(path)
    out = []
    for comp in [False] + CPUS_FINDINGS:
        mode = mode_name(comp)
        r, _ = check_model(model, feeds, os.path.join(work, mode.replace(" ", "_")), comp)
        out.append(("replay %s %s" % (os.path.basename(path), mode), next(iter(r.values())), []))
    return out


def main(argv):
    global NESTC
    args = argv[1:]
    opts = {"seed": None, "count": 8, "seconds": None, "replay": None, "j": 2, "per-model": 8,
            "compiled-every": None, "nodes": None}
    keep = False
    pos = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--keep":
            keep = True
        elif a.startswith("--") and a[2:] in opts or a == "-j":
            k = a.lstrip("-")
            i += 1
            opts[k] = args[i] if k == "replay" else int(args[i])
        else:
            pos.append(a)
        i += 1
    if len(pos) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    NESTC = os.path.abspath(pos[0])
    cr.NESTC = NESTC
    cr.LIBNESTRT = os.path.join(os.path.dirname(NESTC), "libnestrt.a")
    work = tempfile.mkdtemp(prefix="nestc-onnx-diff-")
    t0 = time.time()
    results = []
    per = max(1, opts["per-model"])
    try:
        if opts["replay"]:
            results = replay(opts["replay"], work)
        elif opts["seconds"] is not None:
            end = t0 + opts["seconds"]
            base = int(time.time() * 1000) % 100000000 * 1000
            every = opts["compiled-every"] or 2
            k = 0
            print("seeds from %d" % base, flush=True)
            with ThreadPoolExecutor(max_workers=opts["j"]) as ex:
                while time.time() < end:
                    futs = []
                    for _ in range(opts["j"]):
                        seeds = list(range(base + k * per, base + (k + 1) * per))
                        futs.append(ex.submit(run_group, seeds, work, k % every == 0, opts["nodes"]))
                        k += 1
                    for f in futs:
                        for r in f.result():
                            results.append(r)
                            emit(r)
        else:
            if opts["seed"] is not None:
                seeds = list(range(opts["seed"], opts["seed"] + opts["count"]))
                every = opts["compiled-every"] or 1
            else:
                seeds = list(FIXED_SEEDS)
                every = 1
            groups = [seeds[k:k + per] for k in range(0, len(seeds), per)]
            with ThreadPoolExecutor(max_workers=opts["j"]) as ex:
                futs = [ex.submit(run_group, grp, work, n % every == 0, opts["nodes"]) for n, grp in enumerate(groups)]
                if opts["seed"] is None:
                    futs.append(ex.submit(run_findings, work))
                for f in futs:
                    results += f.result()
    finally:
        if keep:
            print("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    npass = nfail = 0
    for r in results:
        if r is None:
            continue
        if opts["seconds"] is None:
            emit(r)
        npass += r[1] is None
        nfail += r[1] is not None
    print("onnx differential: %d checks in %.1f s" % (npass + nfail, time.time() - t0))
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


def emit(r):
    name, why, extra = r
    if why:
        print("FAIL %s: %s" % (name, why))
        for l in extra:
            print(l)
    elif not SEARCHING:
        print("ok %s" % name)
    sys.stdout.flush()


SEARCHING = False


if __name__ == "__main__":
    SEARCHING = "--seconds" in sys.argv
    sys.exit(main(sys.argv))
