#!/usr/bin/python3
"""A compiled model from other languages (issue 39): shared libraries, the API
description, the Python package, make install.

- `nestc build -o libgpt2.so`: a library that exports the model's API, the
  runtime's public one and nestc_model_api, nothing else; its soname; no
  dependency on libnestrt; C through dlopen computes the bytes the statically
  linked program computes (tests/api/driver.c both ways);
- the errors of -o FILE.so (--emit=asm, --only-variant, --target, a C compiler
  that fails or is not there): exit 1, the reason, no file left;
- NAME.api.json of every sample agrees with its header: a C file made from the
  JSON alone checks the header's macros and prototypes (-Werror) and runs;
- the Python package (runtime/python/nestrt): forward, prefill and decode
  bit-identical to the C program's, a bad shape, a bad dtype, an unknown or
  missing argument, a missing weights file, a run-time error, two threads on one
  instance, out=, a closed model, the API read from the library and from a file,
  a library with the weights compiled in;
- make install (DESTDIR): libnestrt.so versioned with its soname and versioned
  symbols, nestrt.pc, the package; a program linked with the installed
  libnestrt.so and the package from the install tree.

    /usr/bin/python3 tests/api/run.py NESTC_PATH
Prints ok/FAIL lines and `N passed, N failed`. Under the sanitizers
(NESTC_TEST_LDFLAGS), libraries are linked with them and Python preloads their
runtimes.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NESTC = os.path.abspath(sys.argv[1])
B = os.path.dirname(NESTC)
LIB = os.path.join(B, "libnestrt.a")
LINK_FLAGS = os.environ.get("NESTC_TEST_LDFLAGS", "").split()
GPT2 = os.path.join(ROOT, "samples", "gpt2.nest")
CFG = "-D L=2 -D D=64 -D H=4 -D V=256 -D CTX=64 -D S=16".split()
# builds compared with each other take the same flags; -O1 compiles in half the time
BUILD = CFG + ["-O1"]
S, V = 16, 256
passed = failed = 0


def result(ok, name, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok api." + name)
    else:
        failed += 1
        print("FAIL api." + name + (": " + str(detail)[-3000:] if detail else ""))


def env_linked():
    """nestc's link of a .so: with the sanitizers' flags when the runtime has them."""
    e = dict(os.environ)
    if LINK_FLAGS:
        e["CC"] = "cc " + " ".join(LINK_FLAGS)
    return e


def env_python():
    """Python loading such a library: the sanitizers' runtimes preloaded."""
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "runtime", "python"))
    if LINK_FLAGS:
        pre = []
        for lib in ("libasan.so", "libubsan.so"):
            p = subprocess.run(["cc", "-print-file-name=" + lib], capture_output=True, text=True).stdout.strip()
            if os.path.isabs(p):
                pre.append(p)
        e["LD_PRELOAD"] = " ".join(pre)
        e["ASAN_OPTIONS"] = e.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    return e


def run(args, env=None, cwd=None, stdin=None):
    r = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, input=stdin)
    return r.returncode, r.stdout, r.stderr


def cc(srcs, out, extra=(), libs=()):
    code, _, err = run(["cc", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "runtime")] +
                       list(extra) + srcs + list(libs) + ["-lm", "-lpthread", "-ldl"] + LINK_FLAGS + ["-o", out])
    if code != 0:
        raise RuntimeError("cc failed: " + err)


def public_api():
    """The functions nestrt.h declares: the runtime's public API."""
    text = open(os.path.join(ROOT, "runtime", "nestrt.h")).read()
    return set(re.findall(r"\b(nestrt_[a-z][a-z0-9_]*)\s*\(", text))


def defined_dynamic(path):
    code, out, _ = run(["nm", "-D", "--defined-only", path])
    return {l.split()[-1].split("@")[0] for l in out.splitlines() if l.split() and l.split()[-1] != "NESTRT_0"}


def shared_library(d):
    lib = os.path.join(d, "lib", "libgpt2.so")
    os.makedirs(os.path.dirname(lib))
    code, _, err = run([NESTC, "build", GPT2, "-o", lib, "--no-cache"] + BUILD, env=env_linked())
    result(code == 0 and sorted(os.listdir(os.path.dirname(lib))) == ["gpt2.api.json", "gpt2.h", "libgpt2.so"],
           "shared_build: -o libgpt2.so writes the library, its header and gpt2.api.json",
           "exit %d, %s: %s" % (code, os.listdir(os.path.dirname(lib)), err))
    if code != 0:
        return None
    model = {"gpt2_new", "gpt2_free", "gpt2_workspace_size", "gpt2_forward", "gpt2_prefill", "gpt2_decode",
             "gpt2_seq_new", "gpt2_seq_reset", "gpt2_seq_free"}
    want = model | public_api() | {"nestc_model_api"}
    got = defined_dynamic(lib)
    result(got == want, "shared_exports: the model's API, the runtime's public API, nestc_model_api; nothing else",
           "extra %s, missing %s" % (sorted(got - want)[:20], sorted(want - got)))
    _, dyn, _ = run(["readelf", "-d", lib])
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", dyn)
    result("Library soname: [libgpt2.so]" in dyn and not [n for n in needed if "nestrt" in n],
           "shared_soname: soname libgpt2.so, self-contained (no libnestrt dependency)", dyn)
    text = subprocess.run(["strings", "-n", "8", lib], capture_output=True, text=True).stdout
    api = json.load(open(os.path.join(d, "lib", "gpt2.api.json")))
    result('"schema": "nestc-api"' in text and api["model"] == "gpt2",
           "shared_api_inside: the library holds the API description", "")
    return lib


def dlopen_identical(d, lib, w):
    st = os.path.join(d, "st")
    code, _, err = run([NESTC, "build", GPT2, "-o", st, "--no-cache"] + BUILD)
    assert code == 0, err
    objs = sorted(os.path.join(st, f) for f in os.listdir(st) if f.endswith(".o"))
    drv = os.path.join(HERE, "driver.c")
    cc([drv] + objs, os.path.join(d, "drv_st"), ["-I" + st], [LIB])
    cc([drv], os.path.join(d, "drv_so"), ["-DUSE_DLOPEN", "-I" + os.path.dirname(lib)])
    a, b = os.path.join(d, "static.bin"), os.path.join(d, "dlopen.bin")
    c1 = run([os.path.join(d, "drv_st"), w, a])
    c2 = run([os.path.join(d, "drv_so"), lib, w, b])
    same = os.path.exists(b) and open(a, "rb").read() == open(b, "rb").read()
    result(c1[0] == 0 and c2[0] == 0 and same and os.path.getsize(a) == 4 * (S * V + 5 * V + 4 * V),
           "dlopen_identical: forward, prefill and 4 decode steps through dlopen, bit for bit the static program's",
           "%s %s" % (c1, c2))
    result(c2[1] == c1[1] and "1 <= P does not hold" in c2[1],
           "dlopen_error: the library's run-time error message reaches the caller", c2)
    return a


def link_errors(d, w):
    base = [NESTC, "build", GPT2] + BUILD
    out = os.path.join(d, "e", "libx.so")
    os.makedirs(os.path.dirname(out))
    cases = [
        ("emit_asm", ["--emit=asm"], None, "a shared library is linked from objects; --emit=asm and --emit=llvm"),
        ("only_variant", ["--only-variant", "model"], None, "a shared library is linked from every object"),
        ("target", ["--target", "aarch64-linux-gnu"], None, "a shared library is linked by the host's C compiler"),
        ("cc_fails", ["--no-cache"], "false", "linking failed: 'false' exited with status 1"),
        ("cc_missing", ["--no-cache"], "/nonexistent/cc", "cannot run the C compiler '/nonexistent/cc'"),
    ]
    for name, extra, ccv, msg in cases:
        e = env_linked()
        if ccv:
            e["CC"] = ccv
        code, _, err = run(base + ["-o", out] + extra, env=e)
        left = sorted(os.listdir(os.path.dirname(out)))
        result(code == 1 and msg in err and "libx.so" in err and not left,
               "link_error_" + name + ": exit 1, the reason, no file left", "exit %d, files %s: %s" % (code, left, err))


# ---------------------------------------------------------------- the API description vs the header

def c_check_of(api):
    """A C program that holds the header to what the JSON says: every macro,
    every prototype (assigned to a pointer of the type the JSON gives)."""
    name, up = api["model"], api["model"].upper()
    L = ["#include <stddef.h>", "#include <stdio.h>", '#include "%s"' % api["header"], "", "int main(void)", "{",
         "\tint bad = 0;"]

    def eq(expr, val):
        L.append("\tif ((long long)(%s) != %dLL) { printf(\"%%s = %%lld, the JSON says %d\\n\", \"%s\", "
                 "(long long)(%s)); bad = 1; }" % (expr, val, val, expr.replace('"', ''), expr))

    fns = api["functions"]
    L.append("\t%s *(*p_new)(nestrt_weights *, nestrt_error *) = %s; (void)p_new;" % (name, fns["new"]))
    L.append("\tvoid (*p_free)(%s *) = %s; (void)p_free;" % (name, fns["free"]))
    L.append("\tsize_t (*p_ws)(void) = %s; (void)p_ws;" % fns["workspace_size"])
    if "seq_new" in fns:
        L.append("\t%s_seq *(*p_sn)(%s *, nestrt_error *) = %s; (void)p_sn;" % (name, name, fns["seq_new"]))
        L.append("\tvoid (*p_sr)(%s_seq *) = %s; (void)p_sr;" % (name, fns["seq_reset"]))
        L.append("\tvoid (*p_sf)(%s_seq *) = %s; (void)p_sf;" % (name, fns["seq_free"]))
    for e in api["entries"]:
        params = ["%s *" % name] + (["%s_seq *" % name] if e["sequence"] else []) + ["int64_t"] * len(e["dims"]) + \
            ["const %s *" % t["c_type"] for t in e["inputs"]] + ["%s *" % t["c_type"] for t in e["outputs"]]
        L.append("\tint (*p_%s)(%s) = %s; (void)p_%s;" % (e["name"], ", ".join(params), e["symbol"], e["name"]))
        pre = "%s_%s_" % (up, e["name"].upper())
        for d in e["dims"]:
            eq(pre + d["name"].upper() + "_MIN", d["min"])
            eq(pre + d["name"].upper() + "_MAX", d["max"])
        # the dims' values at their maxima: the macros of run-time shapes are functions of them
        at = {d["name"]: d["max"] for d in e["dims"]}
        args = ", ".join(str(at[d["name"]]) for d in e["dims"])
        tensors = [(t, t["c_name"].upper()) for t in e["inputs"]] + \
            [(t, "OUT" if len(e["outputs"]) == 1 else "OUT%d" % j) for j, t in enumerate(e["outputs"])]
        for t, tag in tensors:
            eq(pre + tag + "_RANK", t["rank"])
            numel = 1
            dyn = False
            for i, x in enumerate(t["shape"]):
                if isinstance(x, int):
                    v = x
                else:
                    v = x["const"] + sum(c * at[n] for n, c in x["dims"].items())
                    dyn = True
                numel *= v
                eq(pre + tag + "_DIM%d%s" % (i, "(%s)" % args if not isinstance(x, int) else ""), v)
            eq(pre + tag + "_NUMEL" + ("(%s)" % args if dyn else ""), numel)
    L += ["\tif (!bad)", "\t\tputs(\"agree\");", "\treturn bad;", "}"]
    return "\n".join(L) + "\n"


def api_vs_header(d):
    samples = sorted(f for f in os.listdir(os.path.join(ROOT, "samples")) if f.endswith(".nest"))
    for f in samples:
        out = os.path.join(d, "api_" + f[:-5])
        code, _, err = run([NESTC, "build", os.path.join(ROOT, "samples", f), "-o", out, "-O0"])
        if code != 0:
            result(False, "json_header_" + f[:-5], err)
            continue
        try:
            api = json.load(open([os.path.join(out, x) for x in os.listdir(out) if x.endswith(".api.json")][0]))
        except (IndexError, ValueError) as e:
            result(False, "json_header_" + f[:-5], "no readable .api.json: %s" % e)
            continue
        src = os.path.join(out, "check.c")
        open(src, "w").write(c_check_of(api))
        exe = os.path.join(out, "check")
        objs = sorted(os.path.join(out, x) for x in os.listdir(out) if x.endswith(".o"))
        try:
            cc([src] + objs, exe, ["-I" + out, "-Wno-unused-variable"], [LIB])
            code, o, err = run([exe])
        except RuntimeError as e:
            code, o, err = 1, "", str(e)
        ok = code == 0 and o.strip() == "agree" and api["schema"] == "nestc-api" and api["version"] == 1 and \
            len(api["entries"]) >= 1 and api["weights"] and all(
                {"name", "dtype", "shape", "format", "bytes"} <= set(w) for w in api["weights"])
        result(ok, "json_header_%s: %s.api.json agrees with %s (%d entries, %d weights)" % (
            f[:-5], api["model"], api["header"], len(api["entries"]), len(api["weights"])), o + err)


def json_content(d, w):
    """gpt2.api.json's values for the small GPT-2, written out by hand, and its
    weights against the weights file's own header."""
    api = json.load(open(os.path.join(d, "lib", "gpt2.api.json")))
    e = {x["name"]: x for x in api["entries"]}
    want_fns = {"new": "gpt2_new", "free": "gpt2_free", "workspace_size": "gpt2_workspace_size",
                "seq_new": "gpt2_seq_new", "seq_reset": "gpt2_seq_reset", "seq_free": "gpt2_seq_free",
                "error": "nestrt_model_error"}
    checks = [
        ("functions", api["functions"] == want_fns),
        ("entries", [(x["name"], x["symbol"], x["sequence"]) for x in api["entries"]] ==
         [("forward", "gpt2_forward", False), ("prefill", "gpt2_prefill", True), ("decode", "gpt2_decode", True)]),
        ("forward", e["forward"]["dims"] == [] and e["forward"]["checks"] == [] and
         [(t["name"], t["dtype"], t["c_type"], t["shape"]) for t in e["forward"]["inputs"]] ==
         [("tokens", "i32", "int32_t", [16])] and
         [(t["name"], t["dtype"], t["c_type"], t["shape"]) for t in e["forward"]["outputs"]] ==
         [("out", "f32", "float", [16, 256])]),
        ("prefill", e["prefill"]["dims"] == [{"name": "T", "c_name": "T", "min": 1, "max": 64}] and
         e["prefill"]["checks"] == ["1 <= T", "T <= CTX"] and
         e["prefill"]["inputs"][0]["shape"] == [{"const": 0, "dims": {"T": 1}}] and
         e["prefill"]["outputs"][0]["shape"] == [{"const": 0, "dims": {"T": 1}}, 256]),
        ("decode", e["decode"]["dims"] == [{"name": "P", "c_name": "P", "min": 1, "max": 63}] and
         e["decode"]["checks"] == ["1 <= P", "P < CTX"] and e["decode"]["inputs"][0]["shape"] == [1] and
         e["decode"]["outputs"][0]["shape"] == [1, 256]),
        ("state", api["state"] == [{"name": "cache.%d.%s" % (l, kv), "dtype": "f32",
                                    "shape": [4, 16, 64] if kv == "k" else [4, 64, 16]}
                                   for l in range(2) for kv in "kv"]),
    ]
    with open(w, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
    fw = [(k, v["shape"], v["data_offsets"][1] - v["data_offsets"][0]) for k, v in hdr.items() if k != "__metadata__"]
    mine = [(x["name"], x["shape"], x["bytes"]) for x in api["weights"]]
    checks.append(("weights", sorted(mine) == sorted(fw) and all(x["format"] == "f32" and x["dtype"] == "f32"
                                                                 for x in api["weights"])))
    bad = [name for name, ok in checks if not ok]
    result(not bad, "json_content: gpt2.api.json says what the model is (functions, entries, dims, checks, shapes, "
           "state, weights as the weights file has them)", "wrong: %s" % bad)


MULTI = """
export fn both(a: f32[T, 4], b: f32[U, 4]) -> (f32[T, 4], f32[T + U, 4], f32[U]) where 1 <= T <= 8, 2 <= U <= 6 {
  return a * 2.0, concat([a, b], axis=0), sum(b, axis=1)
}
"""


def multi_json(d):
    """An entry of two run-time dims and three results: the JSON's shapes as
    sums of dims, its results out0.., and a C program from it against the header."""
    src = os.path.join(d, "multi.nest")
    open(src, "w").write(MULTI)
    out = os.path.join(d, "multi")
    code, _, err = run([NESTC, "build", src, "-o", out, "-O0"])
    if code != 0:
        result(False, "json_multi", err)
        return
    api = json.load(open(os.path.join(out, "multi.api.json")))
    e = api["entries"][0]
    ok = (e["dims"] == [{"name": "T", "c_name": "T", "min": 1, "max": 8}, {"name": "U", "c_name": "U", "min": 2, "max": 6}]
          and [t["name"] for t in e["outputs"]] == ["out0", "out1", "out2"]
          and e["outputs"][1]["shape"] == [{"const": 0, "dims": {"T": 1, "U": 1}}, 4]
          and e["inputs"][1]["shape"] == [{"const": 0, "dims": {"U": 1}}, 4]
          and e["outputs"][2] == {"name": "out2", "c_name": "out2", "dtype": "f32", "c_type": "float", "rank": 1,
                                  "shape": [{"const": 0, "dims": {"U": 1}}]})
    srcc = os.path.join(out, "check.c")
    open(srcc, "w").write(c_check_of(api))
    objs = sorted(os.path.join(out, x) for x in os.listdir(out) if x.endswith(".o"))
    try:
        cc([srcc] + objs, os.path.join(out, "check"), ["-I" + out, "-Wno-unused-variable"], [LIB])
        code, o, err = run([os.path.join(out, "check")])
    except RuntimeError as ex:
        code, o, err = 1, "", str(ex)
    result(ok and code == 0 and o.strip() == "agree",
           "json_multi: two run-time dims, a shape of T + U, results out0..out2, and the header agrees",
           "%s %s %s" % (json.dumps(e)[:600], o, err))


def formats_in_json(d):
    out = os.path.join(d, "fmt")
    code, _, err = run([NESTC, "build", GPT2, "-o", out, "--weights-format=q8_0", "-O0"] + CFG)
    if code != 0:
        result(False, "json_formats", err)
        return
    api = json.load(open(os.path.join(out, "gpt2.api.json")))
    w = {x["name"]: x for x in api["weights"]}
    q = w.get("h.0.mlp.c_fc.weight", {})
    ln = w.get("h.0.ln_1.weight", {})
    n = 1
    for x in q.get("shape", [0]):
        n *= x
    result(q.get("format") == "q8_0" and q.get("bytes") == n // 32 * 34 and "block_axis" in q and
           ln.get("format") == "f32" and ln.get("bytes") == 4 * ln["shape"][0],
           "json_formats: each weight's format and bytes (--weights-format=q8_0)", "%s %s" % (q, ln))


# ---------------------------------------------------------------- Python

PY_CASES = r'''
import sys, threading, json
import numpy as np
import nestrt
lib, w, ref, api_file = sys.argv[1:5]
raw = np.fromfile(ref, np.float32)
S, V = 16, 256
res = {}
toks = (np.arange(S) * 7 % V).astype(np.int32)

def catch(f):
    try:
        f()
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)
    return "no exception"

with nestrt.load(lib, weights=w) as m:
    a = m.forward(toks)
    res["forward"] = a.shape == (S, V) and a.dtype == np.float32 and np.array_equal(a.ravel(), raw[:S * V])
    s = m.sequence()
    o = s.prefill(toks[:5])
    seq_ok = o.shape == (5, V) and np.array_equal(o.ravel(), raw[S * V:(S + 5) * V])
    tok, at = np.array([o[-1].argmax()], np.int32), (S + 5) * V
    for P in range(5, 9):
        o = s.decode(tok, P=P)
        seq_ok &= o.shape == (1, V) and np.array_equal(o.ravel(), raw[at:at + V])
        at += V
        tok = np.array([o.argmax()], np.int32)
    res["sequence"] = seq_ok
    res["bad_shape"] = catch(lambda: m.forward(toks[:3]))
    res["bad_dtype"] = catch(lambda: m.forward(toks.astype(np.int64)))
    res["unknown_arg"] = catch(lambda: m.forward(toks, tokenz=toks))
    res["missing_dim"] = catch(lambda: s.decode(tok))
    res["dim_range"] = catch(lambda: s.decode(tok, P=64))
    res["state_on_model"] = catch(lambda: m.decode(tok, P=1))
    big = toks.copy()
    big[3] = V + 5
    res["runtime_error"] = catch(lambda: m.forward(big))
    # out=: the results written where the caller says, nothing allocated
    buf = np.empty((S, V), np.float32)
    r = m.forward(toks, out=buf)
    res["out"] = r is buf and np.array_equal(buf.ravel(), raw[:S * V])
    res["bad_out"] = catch(lambda: m.forward(toks, out=np.empty((S, V), np.float64)))
    # two threads on one instance, each with its own inputs, many calls
    inputs = [(np.arange(S) * k % V).astype(np.int32) for k in (3, 5)]
    want = [m.forward(x) for x in inputs]
    errs = []

    def worker(i):
        for _ in range(25):
            if not np.array_equal(m.forward(inputs[i]), want[i]):
                errs.append(i)
    th = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    [t.start() for t in th]
    [t.join() for t in th]
    res["threads"] = not errs and not np.array_equal(want[0], want[1])
    s.close()
res["closed"] = catch(lambda: m.forward(toks))
res["missing_weights"] = catch(lambda: nestrt.load(lib, weights="/nonexistent/w.safetensors"))
with nestrt.load(lib, weights=w, api=api_file) as m2:
    res["api_file"] = np.array_equal(m2.forward(toks).ravel(), raw[:S * V]) and m2.api == json.load(open(api_file))
print(json.dumps(res))
'''


def python_package(d, lib, w, ref):
    script = os.path.join(d, "cases.py")
    open(script, "w").write(PY_CASES)
    api_file = os.path.join(os.path.dirname(lib), "gpt2.api.json")
    code, out, err = run([sys.executable, script, lib, w, ref, api_file], env=env_python())
    try:
        r = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        result(False, "python", "exit %d: %s %s" % (code, out, err))
        return
    result(r["forward"] is True, "python_forward: bit for bit the C program's logits", r)
    result(r["sequence"] is True, "python_sequence: prefill + 4 decode steps bit for bit the C program's", r)
    expect = {
        "bad_shape": "ValueError: forward(): tokens: expected shape (16,), got (3,)",
        "bad_dtype": "ValueError: forward(): tokens: expected dtype int32 (i32), got int64",
        "unknown_arg": "TypeError: forward(): unknown argument tokenz",
        "missing_dim": "TypeError: decode(): give P=..., a dim no input's shape determines (1 <= P <= 63)",
        "dim_range": "ValueError: decode(): P = 64 is out of its range [1, 63]",
        "state_on_model": "TypeError: decode() reads the model's state",
        "runtime_error": "Error: %s:42:11: gather index 261 out of range [0, 256)" % GPT2,
        "bad_out": "ValueError: forward(): out[0] must be a writable C-contiguous float32 array of shape (16, 256)",
        "closed": "ValueError: the gpt2 model is closed",
        "missing_weights": "Error: /nonexistent/w.safetensors: ",
    }
    for k, v in expect.items():
        result(r[k].startswith(v), "python_%s: %s" % (k, v), r[k])
    result(r["out"] is True, "python_out: out= receives the results, nothing else allocated", r)
    result(r["threads"] is True, "python_threads: two threads calling one instance get each its own results", r)
    result(r["api_file"] is True, "python_api_file: api= reads NAME.api.json instead of the library's copy", r)
    # the weights compiled in: load() needs no file
    emb = os.path.join(d, "emb", "libgpt2e.so")
    os.makedirs(os.path.dirname(emb))
    code, _, err = run([NESTC, "build", GPT2, "-o", emb, "--no-cache", "--embed-weights", w] + BUILD,
                       env=env_linked())
    prog = ("import sys, numpy as np, nestrt\n"
            "m = nestrt.load(sys.argv[1])\n"
            "a = m.forward((np.arange(16) * 7 % 256).astype(np.int32))\n"
            "print(np.array_equal(a.ravel(), np.fromfile(sys.argv[2], np.float32)[:16 * 256]), m.api['functions']"
            "['new_embedded'])\n")
    c2, out, err2 = run([sys.executable, "-c", prog, emb, ref], env=env_python()) if code == 0 else (code, "", err)
    result(c2 == 0 and out.split() == ["True", "gpt2_new_embedded"],
           "python_embedded: a library built with --embed-weights loads with no weights file, same logits",
           "exit %d: %s %s" % (c2, out, err2))
    # dtypes other than f32 and i32: bool (NumPy's bool_, one byte as nestc's),
    # f16, u8, f64 in and out
    src = os.path.join(d, "dt.nest")
    open(src, "w").write("export fn f(m: bool[4], h: f16[4], u: u8[4], x: f64[4]) -> (f64[4], f16[4], bool[4]) {\n"
                         "  return where(m, x, f64(u)), h * f16(2.0), u > u8(3)\n}\n")
    dlib = os.path.join(d, "dt", "libdt.so")
    os.makedirs(os.path.dirname(dlib))
    code, _, err = run([NESTC, "build", src, "-o", dlib, "--no-cache", "-O0"], env=env_linked())
    prog = ("import sys, json, numpy as np, nestrt\n"
            "m = nestrt.load(sys.argv[1])\n"
            "a, b, c = m.f(np.array([True, False, True, False]), np.array([1.5, -2, 0.25, 3], np.float16),\n"
            "              np.array([1, 2, 5, 255], np.uint8), np.array([0.5, 1, 2, 4], np.float64))\n"
            "print(json.dumps([a.dtype.str, a.tolist(), b.dtype.str, b.tolist(), c.dtype.str, c.tolist()]))\n")
    c2, out, err2 = run([sys.executable, "-c", prog, dlib], env=env_python()) if code == 0 else (code, "", err)
    want = ["<f8", [0.5, 2.0, 2.0, 255.0], "<f2", [3.0, -4.0, 0.5, 6.0], "|b1", [False, False, True, True]]
    try:
        got = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        got = None
    result(c2 == 0 and got == want, "python_dtypes: bool, f16, u8 and f64 in and out, as NumPy's own dtypes",
           "exit %d: %s %s" % (c2, out, err2))
    # a library nestc did not write
    code, out, err = run([sys.executable, "-c", "import nestrt; nestrt.load('libm.so.6')"], env=env_python())
    result(code == 1 and "not a model library of nestc" in err, "python_not_a_model: a clear ValueError", err)


# ---------------------------------------------------------------- make install

def install(d, w, ref):
    dest = os.path.join(d, "dest")
    prefix = "/opt/nestc-test"
    # the build directory's libraries (under the sanitizers, linked with them)
    code, out, err = run(["make", "-s", "--no-print-directory", "-C", ROOT, "B=" + os.path.relpath(B, ROOT),
                          "install", "DESTDIR=" + dest, "PREFIX=" + prefix] +
                         (["LDFLAGS=" + " ".join(LINK_FLAGS)] if LINK_FLAGS else []))
    libdir = dest + prefix + "/lib"
    if code != 0:
        result(False, "install", out + err)
        return
    so = os.path.join(libdir, "libnestrt.so.0.1.0")
    links = (os.path.realpath(os.path.join(libdir, "libnestrt.so")) == os.path.realpath(so) and
             os.readlink(os.path.join(libdir, "libnestrt.so.0")) == "libnestrt.so.0.1.0")
    _, dyn, _ = run(["readelf", "-d", so])
    _, syms, _ = run(["nm", "-D", "--defined-only", so])
    names = {l.split()[-1] for l in syms.splitlines()}
    versioned = {n.split("@")[0] for n in names if n.endswith("@@NESTRT_0")}
    result(links and "Library soname: [libnestrt.so.0]" in dyn and versioned == public_api() and
           len(names) == len(versioned) + 1,
           "install_libnestrt_so: libnestrt.so.0.1.0, its links, soname libnestrt.so.0, the public API versioned "
           "NESTRT_0 and nothing else", "%s %s" % (links, sorted(names)[:10]))
    pc = open(os.path.join(libdir, "pkgconfig", "nestrt.pc")).read()
    result("libdir=%s/lib" % prefix in pc and "includedir=%s/include" % prefix in pc and "-lnestrt" in pc,
           "install_pc: nestrt.pc names the installed directories", pc)
    # a program linked with the installed shared runtime: the same bytes
    st = os.path.join(d, "st")
    objs = sorted(os.path.join(st, f) for f in os.listdir(st) if f.endswith(".o"))
    exe = os.path.join(d, "drv_dyn")
    try:
        cc([os.path.join(HERE, "driver.c")] + objs, exe, ["-I" + st, "-I" + dest + prefix + "/include"],
           ["-L" + libdir, "-Wl,-rpath," + libdir, "-lnestrt"])
        code, out, err = run([exe, w, os.path.join(d, "dyn.bin")])
        _, ldd, _ = run(["ldd", exe])
        same = code == 0 and open(ref, "rb").read() == open(os.path.join(d, "dyn.bin"), "rb").read()
        result(same and libdir + "/libnestrt.so.0" in ldd,
               "install_linked: a program linked with the installed libnestrt.so computes the same bytes",
               "%s %s %s" % (code, err, ldd))
    except RuntimeError as e:
        result(False, "install_linked", e)
    pkg = dest + prefix + "/lib/python3/dist-packages"
    e = env_python()
    e["PYTHONPATH"] = pkg
    code, out, err = run([sys.executable, "-c", "import nestrt; print(nestrt.__file__)"], env=e)
    result(code == 0 and out.strip() == pkg + "/nestrt/__init__.py",
           "install_python: the package is installed where Debian's python3 finds it", out + err)


def main():
    with tempfile.TemporaryDirectory() as d:
        w = os.path.join(d, "w.safetensors")
        code, _, err = run([NESTC, "weights", GPT2] + CFG + ["--random-weights", "1", "-o", w])
        assert code == 0, err
        lib = shared_library(d)
        if lib:
            json_content(d, w)
            ref = dlopen_identical(d, lib, w)
            python_package(d, lib, w, ref)
            install(d, w, ref)
        link_errors(d, w)
        api_vs_header(d)
        multi_json(d)
        formats_in_json(d)
        shutil.rmtree(d, ignore_errors=True)


main()
print("%d passed, %d failed" % (passed, failed))
sys.exit(0 if failed == 0 else 1)
