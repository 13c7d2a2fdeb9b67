#!/usr/bin/env python3
"""Command-line behaviour a user checks: exit statuses, messages, files written
or not written. Run: run.py NESTC"""
import glob
import json
import io
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NESTC = os.path.abspath(sys.argv[1])
passed = failed = 0
GPT2_SMALL = ["-D", "L=2", "-D", "D=64", "-D", "H=4", "-D", "V=256", "-D", "CTX=64", "-D", "S=16"]


def run(*args, env=None):
    return subprocess.run([NESTC] + list(args), capture_output=True, text=True,
                          env=dict(os.environ, **env) if env else None)


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok " + name)
    else:
        failed += 1
        print("FAIL %s: %s" % (name, detail))


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        if isinstance(arr, tuple):  # ("BF16", its bits as uint16)
            dt, arr = arr[0], np.ascontiguousarray(arr[1])
        else:
            arr = np.ascontiguousarray(arr)
            dt = None
        dt = dt or {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int32"): "I32",
              np.dtype("int64"): "I64", np.dtype("bool"): "BOOL", np.dtype("float16"): "F16",
              np.dtype("uint8"): "U8"}[arr.dtype]
        b = arr.tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


MODEL = """
const N = 4
param lin: { weight: f32[3, 2], bias: f32[2] }
param unused_ok: f32[2]
export fn forward(x: f32[N, 3]) -> f32[N, 2] {
  return x @ lin.weight + lin.bias + unused_ok
}
export fn both(x: f32[N, 3]) -> (f32[N, 2], f32[N]) {
  let y = x @ lin.weight
  return y, sum(y, axis=1)
}
"""


def main():
    with tempfile.TemporaryDirectory() as t:
        os.chdir(t)
        r = run("--version")
        check("version", r.returncode == 0 and r.stdout.startswith("nestc "), r.stdout)
        r = run("--help")
        check("help", r.returncode == 0 and "usage: nestc check" in r.stdout, r.stdout)
        r = run()
        check("no command: usage, exit 2", r.returncode == 2 and "usage:" in r.stderr, r.stderr)
        r = run("frobnicate")
        check("unknown command exit 2", r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr, r.stderr)
        r = run("check", "--bogus", "x.nest")
        check("unknown option exit 2", r.returncode == 2 and "unknown option '--bogus'" in r.stderr, r.stderr)
        r = run("check", "missing.nest")
        check("missing file exit 1", r.returncode == 1 and "nestc: error: cannot open missing.nest" in r.stderr, r.stderr)

        for s in sorted(glob.glob(os.path.join(ROOT, "samples", "*.nest"))):
            r = run("check", s)
            check("check " + os.path.basename(s), r.returncode == 0 and not r.stderr, r.stderr)

        # the acceptance command of the front-end issue
        np.save("t.npy", (np.arange(16) * 37 % 256).astype(np.int32))
        r = run("run", os.path.join(ROOT, "samples", "gpt2.nest"), *GPT2_SMALL, "--random-weights", "1",
                "--input", "tokens=t.npy", "--output", "logits.npy")
        ok = r.returncode == 0 and os.path.exists("logits.npy")
        a = np.load("logits.npy") if ok else None
        check("gpt2 small run writes f32[16, 256]", ok and a.shape == (16, 256) and a.dtype == np.float32
              and np.isfinite(a).all(), r.stderr)
        r2 = run("run", os.path.join(ROOT, "samples", "gpt2.nest"), *GPT2_SMALL, "--random-weights", "1",
                 "--input", "tokens=t.npy", "--output", "again.npy")
        check("random weights are deterministic", r2.returncode == 0 and ok and
              np.array_equal(np.load("again.npy"), a), r2.stderr)
        r3 = run("run", os.path.join(ROOT, "samples", "gpt2.nest"), *GPT2_SMALL, "--random-weights", "2",
                 "--input", "tokens=t.npy", "--output", "other.npy")
        check("another seed gives other weights", r3.returncode == 0 and ok and
              not np.array_equal(np.load("other.npy"), a), r3.stderr)
        r = run("run", os.path.join(ROOT, "samples", "gpt2.nest"), *GPT2_SMALL, "--random-weights", "1",
                "--input", "tokens=t.npy")
        check("no --output prints a summary", r.returncode == 0 and r.stdout.startswith("forward: f32[16, 256] min="),
              r.stdout + r.stderr)

        # a result with NaN: min, max and mean all say nan (as NumPy's), with the count
        with open("nan.nest", "w") as f:
            f.write("export fn f(x: f32[6]) -> f32[6] {\n  return log(x)\n}\n")
        np.save("xn.npy", np.array([1, -1, 2, -3, 4, 5], np.float32))
        r = run("run", "nan.nest", "--input", "x=xn.npy")
        check("summary of a result with NaN", r.returncode == 0 and
              r.stdout == "f: f32[6] min=nan max=nan mean=nan nans=2 [0, nan, 0.693147, nan, ...]\n",
              r.stdout + r.stderr)

        with open("m.nest", "w") as f:
            f.write(MODEL)
        x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
        np.save("x.npy", x)
        w = np.random.default_rng(1).standard_normal((3, 2)).astype(np.float32)
        b = np.array([0.5, -1.0], np.float32)
        u = np.array([1.0, 2.0], np.float32)
        write_safetensors("w.safetensors", {"lin.weight": w, "lin.bias": b, "unused_ok": u})
        r = run("run", "m.nest", "--weights", "w.safetensors", "--input", "x=x.npy", "--output", "y.npy")
        ok = r.returncode == 0 and os.path.exists("y.npy")
        check("run with weights: values", ok and np.allclose(np.load("y.npy"), x.astype(np.float64) @ w + b + u,
                                                              rtol=1e-5, atol=1e-6), r.stderr)
        r = run("run", "m.nest", "--entry", "both", "--weights", "w.safetensors", "--input", "x=x.npy",
                "--output", "y1.npy", "--output", "y2.npy")
        ok = r.returncode == 0
        check("two results, two outputs", ok and np.allclose(np.load("y2.npy"), (x @ w).sum(1), rtol=1e-5, atol=1e-5)
              and np.load("y1.npy").shape == (4, 2), r.stderr)
        r = run("run", "m.nest", "--entry", "both", "--weights", "w.safetensors", "--input", "x=x.npy",
                "--output", "only.npy")
        check("output count mismatch is an error", r.returncode == 1 and "returns 2 results" in r.stderr
              and not os.path.exists("only.npy"), r.stderr)
        r = run("run", "m.nest", "--entry", "nope", "--random-weights", "1", "--input", "x=x.npy")
        check("unknown entry", r.returncode == 1 and "no exported function 'nope'" in r.stderr, r.stderr)

        # run checks as check does: a reuse_hash conflict of the region pass is an error
        with open("conflict.nest", "w") as f:
            f.write("@region(reuse_hash = 0)\nfn norm(x: f32[T, D]) -> f32[T, D] {\n"
                    "  return x - mean(x, axis=-1, keepdim=true) + f32(T)\n}\n"
                    "export fn f(a: f32[2, 4], b: f32[5, 4]) -> (f32[2, 4], f32[5, 4]) {\n"
                    "  return norm(a), norm(b)\n}\n")
        np.save("a24.npy", np.ones((2, 4), np.float32))
        np.save("b54.npy", np.ones((5, 4), np.float32))
        r = run("run", "conflict.nest", "--input", "a=a24.npy", "--input", "b=b54.npy")
        check("run reports a reuse_hash conflict as check does", r.returncode == 1 and
              "conflict.nest:6:19: error: reuse_hash = 0 puts this call of 'norm'" in r.stderr, r.stderr)

        # -D of a run-time dim that another entry shares with a dim of its own: that entry
        # stays compiled for every value, with a warning; the one run gets the value
        with open("twodims.nest", "w") as f:
            f.write("const CTX = 16\nexport fn f(x: f32[T, 4]) -> f32[T, 4] where 1 <= T, T <= CTX {\n"
                    "  return x * 2.0\n}\nexport fn g(x: f32[CTX], y: f32[T]) -> f32[T] where 0 <= P, P < CTX, "
                    "1 <= T, T <= CTX {\n  return x[P:P + T] + y\n}\n")
        np.save("x34.npy", np.ones((3, 4), np.float32))
        r = run("run", "twodims.nest", "--entry", "f", "-D", "T=3", "--input", "x=x34.npy")
        check("run --entry f -D T: the value is f's alone (no word of g's dims)", r.returncode == 0 and
              r.stdout.startswith("f: f32[3, 4] min=2 max=2") and "warning" not in r.stderr,
              r.stdout + r.stderr)
        r = run("check", "twodims.nest", "-D", "T=3")
        check("-D T of two entries, one with P too: a warning for it", r.returncode == 0 and
              "warning: -D gives some of the run-time dimensions of 'g' a value but not all" in r.stderr,
              r.stdout + r.stderr)

        # -MF into a directory that does not exist: an error before anything is written
        r = run("build", "m.nest", "-o", "mfout", "-MF", "nodir/m.d")
        check("-MF into a missing directory fails first, writes nothing", r.returncode == 1 and
              "cannot write nodir/m.d" in r.stderr and not os.path.exists("mfout"), r.stderr)

        # half-precision checkpoints: F16 binds f32 params, widened exactly
        write_safetensors("half.safetensors", {"lin.weight": w.astype(np.float16), "lin.bias": b.astype(np.float16),
                                                "unused_ok": u})
        r = run("run", "m.nest", "--weights", "half.safetensors", "--input", "x=x.npy", "--output", "yh.npy")
        want = x.astype(np.float64) @ w.astype(np.float16).astype(np.float64) + b + u
        check("run with F16 weights: widened to f32", r.returncode == 0 and
              np.allclose(np.load("yh.npy"), want, rtol=1e-5, atol=1e-6), r.stderr)
        write_safetensors("half_bad.safetensors", {"lin.weight": w.T.astype(np.float16), "lin.bias": b,
                                                    "unused_ok": u.astype(np.uint8)})
        r = run("run", "m.nest", "--weights", "half_bad.safetensors", "--input", "x=x.npy")
        # a U8 tensor is u8 in Nest's words, as every other mismatch (and compiled programs) name it
        check("F16 of the wrong shape, U8 for f32: the file's dtypes named", r.returncode == 1 and
              "lin.weight: expected f32[3, 2], file has f16[2, 3]" in r.stderr and
              "unused_ok: expected f32[2], file has u8[2]" in r.stderr, r.stderr)

        # F16 / BF16 tensors bind f16 / bf16 params as they are and f32 ones widened, read or mapped
        with open("m16.nest", "w") as f:
            f.write("param lin: { weight: f16[3, 2], bias: bf16[2] }\nparam unused_ok: f32[2]\n"
                    "export fn forward(x: f32[4, 3]) -> f32[4, 2] {\n"
                    "  return x @ f32(lin.weight) + f32(lin.bias) + unused_ok\n}\n"
                    "export fn weight(x: f32[4, 3]) -> f16[3, 2] {\n  return lin.weight\n}\n")
        w16 = w.astype(np.float16)
        w16[0, 0] = np.float16(6e-8)  # a subnormal
        bbits = (b.view(np.uint32) >> 16).astype(np.uint16) | np.uint16(1)  # low bits f32 has not
        bw = (bbits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        write_safetensors("half2.safetensors", {"lin.weight": w16, "lin.bias": ("BF16", bbits),
                                                 "unused_ok": u.astype(np.float16)})
        want = x.astype(np.float64) @ w16.astype(np.float64) + bw + u
        for env in ({}, {"NESTRT_MMAP": "1"}):
            how = "mapped" if env else "read"
            r = run("run", "m16.nest", "--weights", "half2.safetensors", "--input", "x=x.npy", "--output", "y16.npy",
                    env=env)
            check("f16 / bf16 params bind F16 / BF16 tensors, an f32 one widened (%s)" % how, r.returncode == 0 and
                  np.allclose(np.load("y16.npy"), want, rtol=1e-5, atol=1e-6), r.stderr)
            r = run("run", "m16.nest", "--entry", "weight", "--weights", "half2.safetensors", "--input", "x=x.npy",
                    "--output", "w16.npy", env=env)
            got = np.load("w16.npy") if r.returncode == 0 else None
            check("an f16 param's bits are the file's (%s)" % how, got is not None and got.dtype == np.float16 and
                  np.array_equal(got.view(np.uint16), w16.view(np.uint16)), r.stderr)
            r = run("run", "m.nest", "--weights", "half2.safetensors", "--input", "x=x.npy", "--output", "y32.npy",
                    env=env)
            check("the same file binds f32 params, widened (%s)" % how, r.returncode == 0 and
                  np.allclose(np.load("y32.npy"), want, rtol=1e-5, atol=1e-6), r.stderr)
        write_safetensors("half3.safetensors", {"lin.weight": w16, "lin.bias": b.astype(np.float16), "unused_ok": u})
        r = run("run", "m16.nest", "--weights", "half3.safetensors", "--input", "x=x.npy")
        check("an F16 tensor for a bf16 param: named", r.returncode == 1 and
              "lin.bias: expected bf16[2], file has f16[2]" in r.stderr, r.stderr)

        # wrong weights: shape, missing, unused, dtype
        write_safetensors("bad.safetensors", {"lin.weight": w.T.copy(), "lin.bias": b, "extra": u})
        with open("keep.npy", "wb") as f:
            f.write(b"precious")
        r = run("run", "m.nest", "--weights", "bad.safetensors", "--input", "x=x.npy", "--output", "keep.npy")
        err = r.stderr
        check("weights shape error names both shapes",
              r.returncode == 1 and "lin.weight: expected f32[3, 2], file has f32[2, 3]" in err, err)
        check("missing param is an error", "missing parameter 'unused_ok' (f32[2])" in err, err)
        check("unused tensor is a warning", "warning: bad.safetensors: tensor 'extra' is not a parameter" in err, err)
        check("failed run leaves an existing output untouched", open("keep.npy", "rb").read() == b"precious")
        check("failed run leaves no temporary file", not [f for f in os.listdir(".") if ".tmp." in f], os.listdir("."))
        # an output that is a device or a symbolic link: written through, never replaced
        r = run("report", "m.nest", "--report-file", "/dev/stdout")
        check("--report-file /dev/stdout prints the report", r.returncode == 0 and "region" in r.stdout
              and os.path.islink("/dev/stdout"), r.stdout + r.stderr)
        r = subprocess.run([NESTC, "run", "m.nest", "--weights", "w.safetensors", "--input", "x=x.npy", "--output",
                            "/dev/stdout"], capture_output=True)
        check("--output /dev/stdout writes the .npy to the pipe", r.returncode == 0 and
              np.array_equal(np.load(io.BytesIO(r.stdout)), np.load("y.npy")) and os.path.islink("/dev/stdout"),
              r.stderr)
        with open("real.txt", "w") as f:
            f.write("old")
        os.symlink("real.txt", "link.txt")
        r = run("report", "m.nest", "--report-file", "link.txt")
        check("--report-file through a symbolic link replaces its file, keeps the link", r.returncode == 0 and
              os.path.islink("link.txt") and "region" in open("real.txt").read(), r.stderr)
        write_safetensors("dt.safetensors", {"lin.weight": w.astype(np.float64), "lin.bias": b, "unused_ok": u})
        r = run("run", "m.nest", "--weights", "dt.safetensors", "--input", "x=x.npy")
        check("weights dtype error", r.returncode == 1 and "expected f32[3, 2], file has f64[3, 2]" in r.stderr, r.stderr)
        r = run("run", "m.nest", "--weights", "w.safetensors", "--input", "x=x.npy", "-Werror")
        check("-Werror: clean run stays clean", r.returncode == 0, r.stderr)
        r = run("run", "m.nest", "--weights", "bad.safetensors", "--input", "x=x.npy", "-w")
        check("-w silences warnings", "warning" not in r.stderr, r.stderr)

        # inputs
        np.save("x64.npy", x.astype(np.float64))
        r = run("run", "m.nest", "--random-weights", "3", "--input", "x=x64.npy", "--output", "o.npy")
        check("input dtype error names both", r.returncode == 1 and "is f32[4, 3], the file holds f64[4, 3]" in r.stderr
              and not os.path.exists("o.npy"), r.stderr)
        np.save("xs.npy", x[:2])
        r = run("run", "m.nest", "--random-weights", "3", "--input", "x=xs.npy")
        check("input shape error", r.returncode == 1 and "the file holds f32[2, 3]" in r.stderr, r.stderr)
        np.save("xf.npy", np.asfortranarray(np.ones((4, 3), np.float32)))
        r = run("run", "m.nest", "--random-weights", "3", "--input", "x=xf.npy")
        check("fortran-order input rejected", r.returncode == 1 and "fortran" in r.stderr.lower(), r.stderr)
        r = run("run", "m.nest", "--random-weights", "3")
        check("missing input", r.returncode == 1 and "missing input: give --input x=FILE.npy" in r.stderr, r.stderr)
        r = run("run", "m.nest", "--random-weights", "3", "--input", "y=x.npy", "--input", "x=x.npy")
        check("unknown input name", r.returncode == 1 and "has no argument named 'y'" in r.stderr, r.stderr)
        r = run("run", "m.nest", "--input", "x=x.npy")
        check("weights are required", r.returncode == 1 and "give --weights" in r.stderr, r.stderr)
        r = run("run", "m.nest", "--weights", "w.safetensors", "--random-weights", "1", "--input", "x=x.npy")
        check("--weights and --random-weights conflict", r.returncode == 2, r.stderr)

        # -D
        r = run("check", "m.nest", "-D", "N=8")
        check("-D override", r.returncode == 0, r.stderr)
        r = run("check", "m.nest", "-D", "M=8")
        check("-D unknown const", r.returncode == 1 and "nestc: error: -D M=8: there is no const named 'M'" in r.stderr,
              r.stderr)
        r = run("check", "m.nest", "-D", "N=1.5")
        check("-D kind mismatch", r.returncode == 1 and "const 'N' is an int" in r.stderr, r.stderr)
        r = run("check", "m.nest", "-DN")
        check("-D without value: usage", r.returncode == 2, r.stderr)

        # a diagnostic has the source line and a caret
        with open("e.nest", "w") as f:
            f.write("export fn f(x: f32[2]) -> f32[2] {\n  return x + y\n}\n")
        r = run("check", "e.nest")
        lines = r.stderr.split("\n")
        check("diagnostic format", r.returncode == 1 and lines[0] == "e.nest:2:14: error: unknown name 'y'"
              and lines[1] == "    2 |   return x + y" and lines[2] == "      |              ^", r.stderr)

        # four kinds of error in one file, all reported
        with open("four.nest", "w") as f:
            f.write("const D = 4\n"
                    "param h: { w: f32[D, D] }[2]\n"
                    "fn broken(x: f32[D]) -> f32[D] {\n"
                    "  let y = (x +\n"
                    "  return y\n"
                    "}\n"
                    "export fn f(x: f32[D, D], z: f32[D, 2]) -> f32[D, D] {\n"
                    "  let a = x + missing\n"
                    "  let b = x + z\n"
                    "  return x @ h[2].w\n"
                    "}\n")
        r = run("check", "four.nest")
        want = ["four.nest:5:3: error: syntax error", "four.nest:8:15: error: unknown name 'missing'",
                "four.nest:9:13: error: cannot add f32[4, 4] and f32[4, 2]: axis 1 is 4 vs 2",
                "four.nest:10:16: error: index 2 is out of range for an array of 2 elements"]
        check("four errors reported", r.returncode == 1 and all(wl in r.stderr for wl in want), r.stderr)

        # an error inside a function called with several shapes: a note names the call
        with open("note.nest", "w") as f:
            f.write("fn f(x: f32[N, M]) -> f32[N, M] { return x @ x }\n"
                    "export fn forward(x: f32[3, 3], y: f32[2, 3]) -> f32[2, 3] {\n"
                    "  let a = f(x)\n  return f(y)\n}\n")
        r = run("check", "note.nest")
        check("note names the call behind an error in a specialised body", r.returncode == 1 and
              "note.nest:4:10: note: in this call of 'f' (x: f32[2, 3])" in r.stderr and
              "note.nest:3:11: note" not in r.stderr, r.stderr)

        # the report's workspace figures, computed by hand: three f32[4, 16]
        # intermediates (256 bytes each) of which the third reuses the first's
        # storage; the result goes to the caller. Elementwise ops in a chain
        # are one loop and take no storage (the constant 1.0 takes a line). A 2-D matmul packs on the
        # pool (no scratch), and so does a batched one with a 2-D weight (its rows
        # folded), which writes the caller's result through the reshape back.
        with open("ws.nest", "w") as f:
            f.write("param w: f32[16, 16]\n"
                    "@region\nfn chain(x: f32[4, 16]) -> f32[4, 16] {\n"
                    "  let a = softmax(x, axis=-1)\n  let b = softmax(a, axis=-1)\n  let c = softmax(b, axis=-1)\n"
                    "  return softmax(c, axis=-1)\n}\n"
                    "@region\nfn ew(x: f32[4, 16]) -> f32[4, 16] {\n"
                    "  let a = exp(x)\n  let b = tanh(a) * x\n  let c = exp(b) + 1.0\n  return sigmoid(c)\n}\n"
                    "@region\nfn mm(x: f32[4, 16]) -> f32[4, 16] {\n  return exp(x) @ w\n}\n"
                    "@region\nfn bmm(x: f32[2, 4, 16]) -> f32[2, 4, 16] {\n  return exp(x) @ w\n}\n"
                    "export fn forward(x: f32[4, 16], y: f32[2, 4, 16]) -> (f32[4, 16], f32[2, 4, 16]) {\n"
                    "  return mm(ew(chain(x))), bmm(y)\n}\n")
        r = run("report", "ws.nest", "--format=json")
        try:
            vs = {v["region"]: v for v in json.loads(r.stdout)["variants"]}
            got = {k: (vs[k]["workspace_bytes"], vs[k]["intermediate_bytes"], vs[k]["intermediate_bytes_unshared"],
                       vs[k]["scratch_bytes"]) for k in ("chain", "ew", "mm", "bmm")}
        except (ValueError, KeyError) as e:
            got = "bad JSON: %s" % e
        check("report: workspace figures by liveness", got == {"chain": (512, 512, 768, 0), "ew": (64, 64, 64, 0),
                                                               "mm": (256, 256, 256, 0),
                                                               "bmm": (512, 512, 512, 0)}, got)
        r = run("report", "ws.nest")
        check("report: workspace line in text", r.returncode == 0 and
              "workspace 512 bytes: intermediates 512 (768 if none shared storage), scratch 0" in r.stdout, r.stdout)

        # a call site inside a region of two variants: each line names the caller's variant
        with open("nested.nest", "w") as f:
            f.write("@region\nfn inner(x: f32[N]) -> f32[N] {\n  return x * 2.0\n}\n"
                    "@region\nfn outer(x: f32[N]) -> f32[N] {\n  return inner(x) + 1.0\n}\n"
                    "export fn forward(a: f32[4], b: f32[8]) -> f32[4] {\n"
                    "  let c = outer(b)\n  return outer(a) + outer(a)\n}\n")
        r = run("report", "nested.nest")
        check("report: the caller's variant on each line of a call site",
              "call nested.nest:7:10 in outer (variant outer.0): 1 -> inner.0 (1 new, 0 reused)\n" in r.stdout and
              "call nested.nest:7:10 in outer (variant outer.1): 2 -> inner.1 (1 new, 1 reused)\n" in r.stdout and
              "call nested.nest:10:11 in forward: 1 -> outer.0" in r.stdout, r.stdout)
        r = run("report", "nested.nest", "--format=json")
        try:
            got = sorted((c["region"], c["caller"], c["caller_variant"], c["variant"])
                         for c in json.loads(r.stdout)["calls"])
        except (ValueError, KeyError) as e:
            got = "bad JSON: %s" % e
        check("report: JSON caller_variant", got == [("inner", "outer", "outer.0", "inner.0"),
                                                     ("inner", "outer", "outer.1", "inner.1"),
                                                     ("outer", "forward", None, "outer.0"),
                                                     ("outer", "forward", None, "outer.1"),
                                                     ("outer", "forward", None, "outer.1")], got)

        limits_issue14()
        progress_issue39()

        # GGUF weights: values of every type, compiled and interpreted, malformed files
        sys.path.insert(0, os.path.join(ROOT, "tests", "io"))
        import gguf_cli
        gguf_cli.run_tests(NESTC, check)

    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


def on_terminal(args):
    """Runs nestc with standard error on a pseudo-terminal: (exit status, what
    the terminal received)."""
    import pty
    pid, fd = pty.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.execv(NESTC, [NESTC] + args)
    out = b""
    while True:
        try:
            b = os.read(fd, 65536)
        except OSError:
            break
        if not b:
            break
        out += b
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def progress_issue39():
    """Long operations show a progress line on a terminal (issue 39, item 5):
    counts and an estimate, erased at the end; nothing with --quiet or when
    standard error is not a terminal."""
    big = [os.path.join(ROOT, "samples", "llama.nest"), "-D", "L=4", "--random-weights", "1", "--format=q4_0"]
    code, tty = on_terminal(["weights"] + big + ["-o", "p.gguf"])
    lines = [l for l in tty.split("\r") if l.startswith("writing: ")]
    check("progress: nestc weights on a terminal shows bytes written of the total, the percentage, the time left "
          "and the tensor, and erases the line", code == 0 and lines and
          all(re.match(r"writing: [0-9.]+ [MG]B of [0-9.]+ [MG]B \([0-9]+%\)(, [0-9]+:[0-9]{2} left)?  \S+\x1b\[K$", l)
              for l in lines) and tty.endswith("\r\x1b[K"), repr(tty[-400:]))
    code, tty = on_terminal(["weights"] + big + ["-o", "p.gguf", "--quiet"])
    check("progress: --quiet shows none", code == 0 and tty == "", repr(tty[-200:]))
    r = run("weights", *big, "-o", "p.gguf")
    check("progress: none when standard error is not a terminal", r.returncode == 0 and r.stderr == "", r.stderr[-200:])
    code, tty = on_terminal(["build", os.path.join(ROOT, "samples", "vit.nest"), "--no-cache", "-j", "1", "-o", "pvit"])
    lines = [l for l in tty.split("\r") if l.startswith("compiling: ")]
    check("progress: nestc build shows the objects compiled of the total and the time left",
          code == 0 and lines and all(re.match(r"compiling: [0-9]+/[0-9]+ \([0-9]+%\)(, [0-9]+:[0-9]{2} left)?  \S+ "
                                               r"[0-9]+ ms\x1b\[K$", l) for l in lines), repr(tty[-400:]))


def limits_issue14():
    """Extreme inputs (issue #14): a located error and exit 1, never a crash."""
    with open("nul.nest", "wb") as f:
        f.write(b"const A = 1\nconst B\0 = 2\n")
    r = run("check", "nul.nest")
    lines = r.stderr.split("\n")
    check("a NUL byte: located error", r.returncode == 1 and lines[0] == "nul.nest:2:8: error: a NUL byte (not a text file?)"
          and lines[1] == "    2 | const B  = 2" and lines[2] == "      |        ^", r.stderr)

    # -D of digits that do not fit 64 bits
    with open("d.nest", "w") as f:
        f.write("const L = 4\nexport fn forward(x: f32[L]) -> f32[L] {\n  return x\n}\n")
    r = run("check", "d.nest", "-D", "L=99999999999999999999")
    check("-D integer too large", r.returncode == 1 and "L=99999999999999999999: 99999999999999999999 is too large "
          "for an integer" in r.stderr and "float" not in r.stderr, r.stderr)

    # long chains: a located error (or a compiled model), exit 1, never a signal
    n = 100000
    hdr = "export fn forward(x: f32[4]) -> f32[4] {\n  return "
    chains = {
        "sum": (hdr + " + ".join(["x"] * n) + "\n}\n", "2:4012: error: expression nested too deeply (more than 1000 levels)"),
        "parens": (hdr + "(" * n + "x" + ")" * n + "\n}\n", "2:265: error: brackets nested too deeply (more than 256 levels)"),
        "negations": (hdr + "- " * n + "x\n}\n", "2:19992: error: expression nested too deeply (more than 1000 levels)"),
        "slices": (hdr + "x" + "[0:4]" * n + "\n}\n", "2:10: error: expression nested too deeply (more than 1000 levels)"),
        "const": ("const C = " + " + ".join(["1"] * n) + "\n" + hdr + "x * C\n}\n",
                  "1:4013: error: expression nested too deeply (more than 1000 levels)"),
        "consts": ("".join("const C%d = C%d + 1\n" % (i, i + 1) for i in range(n)) + "const C%d = 0\n" % n +
                   hdr + "x * C0\n}\n", "error: nested too deeply (more than 4000 levels of expressions"),
        "calls": ("".join("fn g%d(x: f32[4]) -> f32[4] {\n  return g%d(x)\n}\n" % (i, i + 1) for i in range(n)) +
                  "fn g%d(x: f32[4]) -> f32[4] {\n  return x\n}\n" % n + hdr + "g0(x)\n}\n",
                  "error: calls nest more than 200 deep"),
    }
    for name, (text, want) in chains.items():
        with open("chain.nest", "w") as f:
            f.write(text)
        r = run("check", "chain.nest")
        check("chain of %d: %s" % (n, name), r.returncode == 1 and r.stderr.startswith("chain.nest:") and want in r.stderr
              and "Sanitizer" not in r.stderr, r.stderr[-600:])
    # a long model, not a deep one, still compiles
    with open("long.nest", "w") as f:
        f.write("export fn forward(x: f32[4]) -> f32[4] {\n" + "  x = x + 1.0\n" * 20000 + "  return x\n}\n")
    r = run("check", "long.nest")
    check("20000 statements compile", r.returncode == 0 and not r.stderr, r.stderr[-600:])

    # tensors too large for the interpreter or memory: located errors / a message, exit 1
    with open("big.nest", "w") as f:
        f.write("param w: f32[1152921504606846976]\nexport fn forward(x: f32[4]) -> f32[4] {\n  return x\n}\n")
    for cmd in (["run", "big.nest", "--random-weights", "1"], ["weights", "big.nest", "--random-weights", "1", "-o", "w.st"]):
        r = run(*cmd)
        check(cmd[0] + ": param too large for the interpreter", r.returncode == 1 and r.stderr.startswith(
              "big.nest:1:7: error: param 'w' (f32[1152921504606846976]) is too large for the interpreter") and
              not os.path.exists("w.st"), r.stderr)
    with open("bigx.nest", "w") as f:
        f.write("export fn forward(x: f32[1152921504606846976]) -> f32[1152921504606846976] {\n  return x\n}\n")
    r = run("run", "bigx.nest")
    check("run: a node too large for the interpreter", r.returncode == 1 and r.stderr.startswith(
          "bigx.nest:1:19: error: f32[1152921504606846976] is too large for the interpreter"), r.stderr)
    if "ASAN_OPTIONS" not in os.environ:  # ASan reserves more address space than the limit
        import resource
        with open("oom.nest", "w") as f:
            f.write("param w: f32[1099511627776]\nexport fn forward(x: f32[4]) -> f32[4] {\n  return x\n}\n")
        r = subprocess.run([NESTC, "run", "oom.nest", "--random-weights", "1"], capture_output=True, text=True,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (1 << 32, 1 << 32)))
        check("out of memory: a message, exit 1", r.returncode == 1 and
              r.stderr.startswith("nestc: error: out of memory (") and "bytes)" in r.stderr, r.stderr)

    # every target LLVM knows: objects for it, or a message; never LLVM's abort
    built = subprocess.run(["llvm-config", "--targets-built"], capture_output=True, text=True).stdout.split()
    with open("t.nest", "w") as f:
        f.write("@region\nfn blk(x: f32[8, 16], w: f32[16, 16]) -> f32[8, 16] {\n  return relu(x @ w) + x\n}\n"
                "param w: f32[16, 16]\nexport fn forward(x: f32[8, 16]) -> f32[8, 16] {\n  return blk(blk(x, w), w)\n}\n")
    for triple, target, machine in [("riscv64-linux-gnu", "RISCV", 243), ("powerpc64le-linux-gnu", "PowerPC", 21),
                                    ("arm-linux-gnueabihf", "ARM", 40)]:
        if target not in built:
            continue
        r = run("build", "t.nest", "--target=" + triple, "--no-cache", "-o", "t-" + triple)
        objs = sorted(glob.glob("t-%s/*.o" % triple))
        machines = set()
        for o in objs:
            head = open(o, "rb").read(20)
            machines.add(struct.unpack(("<" if head[5] == 1 else ">") + "H", head[18:20])[0])
        check("build --target=" + triple, r.returncode == 0 and len(objs) == 2 and machines == {machine},
              "%d %s %s %s" % (r.returncode, objs, machines, r.stderr))
    r = run("build", "t.nest", "--target=xyz", "--no-cache", "-o", "t-xyz")
    check("unknown target", r.returncode == 1 and "nestc: error: unknown target 'xyz'" in r.stderr
          and not os.path.exists("t-xyz"), r.stderr)


if __name__ == "__main__":
    main()
