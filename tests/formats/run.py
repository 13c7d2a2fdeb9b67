#!/usr/bin/python3
"""Weight formats (nestc build/run --weights-format, issue #36).

    /usr/bin/python3 tests/formats/run.py NESTC_PATH [-k FILTER]...

For each of bf16, f16, q8_0 and q4_0, one model with a matmul of odd sizes (the
last panel partial), a transposed one (the tied LM head's form), a matrix-vector
product, a batch of rows times a weight, a gather of rows (an embedding), and a
region called with two weights, built with --weights-format=FMT and linked: each
output of the compiled program and of `nestc run --weights-format=FMT` is checked
against NumPy in float64 over the dequantized weights (tests/io/quant.py's
quantizers, written from the formulas, not from the C code): the largest error
at most 1e-5 of the largest |reference|. The build's report must say which
params took the format (biases and norms' weights stay f32). Then the errors a
user meets: a format a param cannot take (its axis not a multiple of the block,
a reader that is not a matmul or a gather, an unknown name), a NaN or an
infinity in the file, f16's range, and a pattern matching nothing. The k-quants q4_k and q6_k (super-blocks of 256) on a
model of their own (check_kquant).

Prints `ok NAME` / `FAIL NAME: why` and a last line `N passed, N failed`.
"""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


C = load("nest_compiled_checks", os.path.join(ROOT, "tests", "compiled", "run.py"))
Q = load("nest_quant_reference", os.path.join(ROOT, "tests", "io", "quant.py"))
GG = load("nest_gguf_writer", os.path.join(ROOT, "tests", "io", "gguf.py"))
Fail = C.Fail
FORMATS = ["bf16", "f16", "q8_0", "q4_0"]
FMT_CODE = {"f32": 0, "bf16": 1, "f16": 2, "q8_0": 3, "q4_0": 4}
TOL = 1e-5

MODEL = """
param w1: f32[64, 37]
param b1: f32[37]
param w2: f32[45, 96]
param w3: f32[64, 40]
param wb: f32[64, 37]
param emb: f32[50, 64]
param wr: f32[64, 37]
param odd: f32[100, 8]
param wo: f32[33, 24]

@region
fn lin(x: f32[T, 64], w: f32[64, 37]) -> f32[T, 37] {
  return x @ w
}

export fn mm(x: f32[5, 64]) -> f32[5, 37] {
  return x @ w1 + b1
}

export fn mmt(x: f32[7, 96]) -> f32[7, 45] {
  return x @ transpose(w2, [1, 0])
}

export fn mv(x: f32[64]) -> f32[40] {
  return x @ w3
}

export fn bmm(x: f32[3, 5, 64]) -> f32[3, 5, 37] {
  return x @ wb
}

export fn gather(i: i32[6]) -> f32[6, 64] {
  return emb[i]
}

export fn two(x: f32[9, 64]) -> f32[9, 37] {
  return lin(x, w1) + lin(x, wr)
}

export fn oddk(x: f32[2, 100]) -> f32[2, 8] {
  return x @ odd
}

export fn oddv(x: f32[33]) -> f32[24] {
  return x @ wo
}
"""

AXIS = {"w1": 0, "w2": 1, "w3": 0, "wb": 0, "emb": 1, "wr": 0, "odd": 0, "wo": 0}


def formatted(fmt):
    """The params the default rule gives fmt: every matrix a matmul or a gather reads,
    but for q8_0 and q4_0 odd and wo (their reduced axes, 100 and 33, are not
    multiples of the 32 of a block)."""
    return [n for n in AXIS if n not in ("odd", "wo") or fmt in ("bf16", "f16")]


def round_trip(fmt, w, axis):
    """w as fmt holds it: each line along `axis` quantized and dequantized by the
    NumPy reference."""
    lines = w.T if axis == 0 else w
    out = np.empty_like(lines, dtype=np.float32)
    for r in range(lines.shape[0]):
        x = np.ascontiguousarray(lines[r], dtype=np.float32)
        code = Q.NAMES.index(fmt)
        out[r] = Q.dequantize(code, Q.quantize(code, x), x.size)
    return out.T if axis == 0 else out


def reference(entry, W, ins):
    """The entry's value in float64 over the weights W (already round-tripped)."""
    f = {k: v.astype(np.float64) for k, v in W.items()}
    x = ins.get("x")
    x = None if x is None else x.astype(np.float64)
    if entry == "mm":
        return x @ f["w1"] + f["b1"]
    if entry == "mmt":
        return x @ f["w2"].T
    if entry == "mv":
        return x @ f["w3"]
    if entry == "bmm":
        return x @ f["wb"]
    if entry == "gather":
        return f["emb"][ins["i"]]
    if entry == "two":
        return x @ f["w1"] + x @ f["wr"]
    if entry == "oddk":
        return x @ f["odd"]
    if entry == "oddv":
        return x @ f["wo"]
    raise ValueError(entry)


def int8_rows(x):
    """x's rows (the last axis) as --activations=int8 holds them: per block of 32, d =
    max|x| / 127 in f32, q = x * (1 / d) in f32 rounded to nearest, ties to even; the
    values d * q (float64)."""
    x = np.asarray(x, np.float32)
    b = x.reshape(-1, 32)
    d = (np.abs(b).max(axis=1) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.rint((b * inv[:, None]).astype(np.float32))
    return (q.astype(np.float64) * d[:, None].astype(np.float64)).reshape(x.shape)


def reference_int8(entry, fmt, W, ins):
    """reference() with the activations of matmuls over q8_0 / q4_0 weights quantized."""
    if fmt not in ("q8_0", "q4_0") or entry in ("gather", "oddk", "oddv"):
        return reference(entry, W, ins)
    return reference(entry, W, dict(ins, x=int8_rows(ins["x"])))


def close(got, ref, what):
    err = float(np.max(np.abs(got.astype(np.float64) - ref)))
    scale = float(np.max(np.abs(ref)))
    if not np.isfinite(got).all() or err > TOL * scale:
        raise Fail("%s: max abs err %.3g > %g * max|ref| %.3g" % (what, err, TOL, scale))


ENTRIES = ["mm", "mmt", "mv", "bmm", "gather", "two", "oddk", "oddv"]


def inputs(rng):
    return {"mm": {"x": rng.standard_normal((5, 64)).astype(np.float32)},
            "mmt": {"x": rng.standard_normal((7, 96)).astype(np.float32)},
            "mv": {"x": rng.standard_normal(64).astype(np.float32)},
            "bmm": {"x": rng.standard_normal((3, 5, 64)).astype(np.float32)},
            "gather": {"i": np.array([3, 0, 49, 7, 7, 20], dtype=np.int32)},
            "two": {"x": rng.standard_normal((9, 64)).astype(np.float32)},
            "oddk": {"x": rng.standard_normal((2, 100)).astype(np.float32)},
            "oddv": {"x": rng.standard_normal(33).astype(np.float32)}}


def weights(rng):
    W = {}
    for name, shape in [("w1", (64, 37)), ("b1", (37,)), ("w2", (45, 96)), ("w3", (64, 40)), ("wb", (64, 37)),
                        ("emb", (50, 64)), ("wr", (64, 37)), ("odd", (100, 8)), ("wo", (33, 24))]:
        W[name] = rng.uniform(-1, 1, shape).astype(np.float32)
    # blocks that test the quantizers' edges in place: an all-zero block, one
    # huge element among small ones, a negative extreme
    W["w1"][0:32, 0] = 0
    W["w1"][32:64, 1] = 1e-3
    W["w1"][40, 1] = 50.0
    W["w1"][0:32, 2] = np.linspace(-2, 1, 32)
    return W


def check_format(tmp, fmt, W, ins, wpath, src, cpu=None, threads=None, act=None):
    """One format: report, compiled and interpreted values (built for cpu, run on that
    many threads, with --activations=act, when given: then compiled only, against the
    activations quantized as int8_rows says)."""
    res = []
    tag = fmt + ("." + cpu if cpu else "") + (".threads%d" % threads if threads else "") + ("." + act if act else "")
    d = os.path.join(tmp, tag)
    os.makedirs(d)
    out = os.path.join(d, "out")
    r = C.nestc("build", src, "-o", out, "--weights-format=" + fmt, "--report", "-j", "2",
                *(["--cpu=" + cpu] if cpu else []), *(["--activations=" + act] if act else []))
    env = dict(os.environ, NESTRT_NUM_THREADS=str(threads)) if threads else None
    held = {m.group(1): m.group(2) for m in re.finditer(r"^  (\w+): f32\[[^\]]*\], (\w+), blocks along", r.stdout, re.M)}
    want = {n: fmt for n in formatted(fmt)}
    res.append(("%s.report" % tag, None if held == want else "report says %s, want %s" % (held, want)))
    Wf = dict(W)
    for n in formatted(fmt):
        Wf[n] = round_trip(fmt, W[n], AXIS[n])
    hdr = C.parse_header(os.path.join(out, "fm.h"), "fm")
    for entry in ENTRIES:
        name = "%s.%s" % (tag, entry)
        try:
            e = hdr[entry]
            model_in = {}
            for k, a in ins[entry].items():
                p = os.path.join(d, "in_%s_%s.npy" % (entry, k))
                np.save(p, a)
                model_in[k] = p
            ref = reference_int8(entry, fmt, Wf, ins[entry]) if act else reference(entry, Wf, ins[entry])
            # compiled
            outp = os.path.join(d, "got_%s.npy" % entry)
            call = C.Call(e, wpath, model_in, [outp])
            exe = C.compile_driver(d, [call], ["fm"], [out], sorted(C.glob.glob(os.path.join(out, "*.o"))),
                                   name="driver_" + entry)
            rr = C.run([exe], env=env)
            if rr.returncode != 0:
                raise Fail("compiled program: " + C.describe([exe], rr))
            close(np.load(outp), ref, "compiled")
            if entry == "mm" and not (cpu or threads or act):
                # NESTRT_PROFILE=2: the weight's format, its bytes a call as held, and the GB/s
                rp = C.run([exe], env=dict(os.environ, NESTRT_PROFILE="2"))
                per = {"bf16": 64, "f16": 64, "q8_0": 34, "q4_0": 18}[fmt]
                want = r"matmul .*  %s weights %.1f KB a call, \d+\.\d GB/s" % (fmt, 64 * 37 * per / 32 / 1e3)
                if not re.search(want, rp.stderr):
                    raise Fail("NESTRT_PROFILE=2 does not say /%s/: %s" % (want, rp.stderr[-600:]))
            if cpu or threads or act:
                res.append((name, None))
                continue   # the interpreter's values do not depend on them
            # interpreted
            refp = os.path.join(d, "run_%s.npy" % entry)
            args = ["run", src, "--entry", entry, "--weights", wpath, "--weights-format=" + fmt, "--output", refp]
            for k, p in model_in.items():
                args += ["--input", "%s=%s" % (k, p)]
            C.nestc(*args)
            close(np.load(refp), ref, "nestc run")
            res.append((name, None))
        except Fail as ex:
            res.append((name, str(ex)))
    return res


def expect_error(name, args, want, code=1):
    r = C.nestc(*args, ok=False)
    if r.returncode != code or not re.search(want, r.stderr):
        return (name, "exit %d, stderr %r; want exit %d and /%s/" % (r.returncode, r.stderr.strip()[:300], code, want))
    return (name, None)


def check_errors(tmp, src, W, wpath):
    res = []
    out = os.path.join(tmp, "err_out")
    res.append(expect_error("error.axis_not_block", ["build", src, "-o", out, "--weights-format=odd=q8_0"],
                            r"param 'odd' cannot be q8_0: its axis 0 \(100 long.*not a multiple of q8_0's block of 32"))
    res.append(expect_error("error.reader", ["build", src, "-o", out, "--weights-format=b1=q4_0"],
                            r"fm.nest:\d+:\d+: error: .*param 'b1' cannot be q4_0: it has rank 1"))
    res.append(expect_error("error.unknown_format", ["build", src, "-o", out, "--weights-format=q5_9"],
                            r"'q5_9' is not FMT or PATTERN=FMT", code=2))
    res.append(expect_error("error.activations", ["build", src, "-o", out, "--activations=int4"],
                            r"--activations takes f32 \(the default\) or int8, not 'int4'", code=2))
    res.append(expect_error("error.run_reader", ["run", src, "--entry", "mv", "--random-weights", "1",
                                                 "--weights-format=odd=bf16,b1=f16", "--input", "x=/dev/null"],
                            r"param 'odd' cannot be bf16|param 'b1' cannot be f16"))
    if os.path.exists(out):
        res.append(("error.no_output", "a failed build wrote %s" % out))
    else:
        res.append(("error.no_output", None))
    r = C.nestc("build", src, "-o", os.path.join(tmp, "warn_out"), "--weights-format=q8_0,nothing.*=bf16")
    res.append(("error.pattern_matches_nothing",
                None if "warning: --weights-format 'nothing.*=bf16': the pattern matches no param" in r.stderr
                else "no warning: %r" % r.stderr[:300]))
    # a NaN, an infinity, f16's range: the compiled model refuses to be made, nestc run
    # refuses to run; both name the tensor (and the element: the first one too)
    for tag, fmt, value, at, want in [("nan", "q8_0", np.nan, (3, 4), r"w1.*nan.*q8_0|w1.*q8_0.*nan"),
                                      ("inf", "q4_0", np.inf, (3, 4), r"w1.*inf"),
                                      ("f16_range", "f16", 70000.0, (0, 0), r"w1.*element 0 is 70000.*f16")]:
        Wb = dict(W)
        Wb["w1"] = W["w1"].copy()
        Wb["w1"][at] = value
        p = os.path.join(tmp, "bad_%s.safetensors" % tag)
        C.write_safetensors(p, sorted(Wb.items()))
        d = os.path.join(tmp, "bad_" + tag)
        os.makedirs(d)
        bout = os.path.join(d, "out")
        C.nestc("build", src, "-o", bout, "--weights-format=" + fmt)
        hdr = C.parse_header(os.path.join(bout, "fm.h"), "fm")
        xin = os.path.join(d, "x.npy")
        np.save(xin, np.zeros((5, 64), np.float32))
        call = C.Call(hdr["mm"], p, {"x": xin}, [os.path.join(d, "o.npy")])
        exe = C.compile_driver(d, [call], ["fm"], [bout], sorted(C.glob.glob(os.path.join(bout, "*.o"))))
        rr = C.run([exe])
        ok = rr.returncode == 2 and re.search(want, rr.stderr, re.I)
        res.append(("error.%s.compiled" % tag, None if ok else "exit %d: %r" % (rr.returncode, rr.stderr[:300])))
        res.append(expect_error("error.%s.run" % tag, ["run", src, "--entry", "mm", "--weights", p,
                                                       "--weights-format=" + fmt, "--input", "x=" + xin], want))
    return res


def check_half_file(tmp, src, W, ins):
    """A file of F16 or BF16 tensors binds a build of any format: each formatted tensor
    converted from its 16-bit values while the model is made (never widened to f32 whole),
    the same values as NumPy's rounding of those 16-bit values. A NaN (0x7c01, whose payload
    is the lowest bit alone; bf16's 0x7f81) or an infinity among them: the model is not
    made, "element N is nan" (or inf) of the tensor named."""
    res = []
    for sdt, fmt in (("f16", "q4_0"), ("bf16", "bf16"), ("f16", "q8_0"), ("bf16", "f16"), ("bf16", "q4_0")):
        name = "%s_file.%s" % (sdt, fmt)
        try:
            scode = Q.NAMES.index(sdt)
            tensors, Wf = [], {}
            for n, a in sorted(W.items()):
                bits = np.frombuffer(Q.quantize(scode, a.reshape(-1)), "<u2").reshape(a.shape)
                tensors.append((n, bits, sdt.upper()) if sdt == "bf16" else (n, bits.view(np.float16)))
                Wf[n] = Q.dequantize(scode, bits.tobytes(), a.size).reshape(a.shape)
            p = os.path.join(tmp, "half_%s_%s.safetensors" % (sdt, fmt))
            C.write_safetensors(p, tensors)
            d = os.path.join(tmp, "half_%s_%s" % (sdt, fmt))
            os.makedirs(d)
            out = os.path.join(d, "out")
            C.nestc("build", src, "-o", out, "--weights-format=" + fmt)
            hdr = C.parse_header(os.path.join(out, "fm.h"), "fm")
            for n in formatted(fmt):
                Wf[n] = round_trip(fmt, Wf[n], AXIS[n])
            for entry in ("mm", "mmt", "gather"):
                xin = {}
                for k, a in ins[entry].items():
                    xin[k] = os.path.join(d, "in_%s_%s.npy" % (entry, k))
                    np.save(xin[k], a)
                outp = os.path.join(d, "o_%s.npy" % entry)
                exe = C.compile_driver(d, [C.Call(hdr[entry], p, xin, [outp])], ["fm"], [out],
                                       sorted(C.glob.glob(os.path.join(out, "*.o"))), name="driver_" + entry)
                rr = C.run([exe])
                if rr.returncode != 0:
                    raise Fail("compiled program: " + C.describe([exe], rr))
                close(np.load(outp), reference(entry, Wf, ins[entry]), "compiled %s" % entry)
            res.append((name, None))
        except Fail as ex:
            res.append((name, str(ex)))
    # a NaN or an infinity among the 16-bit values: the model is not made, and the message
    # names the tensor and says which (a NaN whose payload is the lowest bit alone too)
    d = os.path.join(tmp, "half_bad")
    os.makedirs(d)
    out = os.path.join(d, "out")
    C.nestc("build", src, "-o", out, "--weights-format=q8_0")
    hdr = C.parse_header(os.path.join(out, "fm.h"), "fm")
    xin = os.path.join(d, "x.npy")
    np.save(xin, np.zeros((5, 64), np.float32))
    # inside the tensor, its first element, its last
    for sdt, word, what, at in (("f16", 0x7c01, "nan", (3, 4)), ("f16", 0xfc00, "inf", (0, 0)),
                                ("bf16", 0x7f81, "nan", (-1, -1))):
        name = "%s_file.%s_%04x" % (sdt, what, word)
        tensors = []
        for n, a in sorted(W.items()):
            bits = np.frombuffer(Q.quantize(Q.NAMES.index(sdt), a.reshape(-1)), "<u2").reshape(a.shape).copy()
            if n == "w1":
                bits[at] = word
                elem = np.ravel_multi_index(tuple(i % d for i, d in zip(at, a.shape)), a.shape)
            tensors.append((n, bits, sdt.upper()) if sdt == "bf16" else (n, bits.view(np.float16)))
        p = os.path.join(d, "%s.safetensors" % name)
        C.write_safetensors(p, tensors)
        exe = C.compile_driver(d, [C.Call(hdr["mm"], p, {"x": xin}, [os.path.join(d, "o.npy")])], ["fm"], [out],
                               sorted(C.glob.glob(os.path.join(out, "*.o"))), name="driver_" + name)
        rr = C.run([exe])
        want = r"tensor 'w1': element %d is %s, which a weight format cannot hold" % (elem, what)
        ok = rr.returncode == 2 and re.search(want, rr.stderr)
        res.append((name, None if ok else "exit %d: %r" % (rr.returncode, rr.stderr[:300])))
    return res


def check_gguf(tmp, src, W, ins, fmt):
    """A GGUF file whose matrices are already in fmt: w2 and emb read along their rows,
    w1 (read as x @ w1, along its columns) stored transposed and named in
    nestc.transposed, as `nestc weights --format` writes it. The build binds them as
    they are (their panels made from the file's blocks, no f32 form), so the values
    are the blocks' own, as NumPy dequantizes them. Row 0's first block of emb is one
    no quantizer makes, and quantizing its values again gives others: q8_0's has d = 0.5
    and every q 1 (each 0.5); q4_0's d = 0.5, q 1 in the low nibbles and 9 in the high
    ones (-3.5 then 0.5, which ggml's quantizer would make d = 0.4375 and 0.4375): its
    values come out as they are.
    An f32 build of the same file converts the blocks (w1 transposed back)."""
    code = Q.NAMES.index(fmt)
    gtype = {"q8_0": 8, "q4_0": 2}[fmt]
    blocks = {}
    stored = {"w2": W["w2"], "emb": W["emb"], "w1": W["w1"].T}   # the rows the file holds
    for n, a in stored.items():
        blocks[n] = bytearray(b"".join(Q.quantize(code, np.ascontiguousarray(r)) for r in a))
    bb = Q.BLOCK_BYTES[code]
    odd = np.float16(0.5).tobytes() + (bytes([1] * 32) if fmt == "q8_0" else bytes([0x91] * 16))
    odd_values = np.full(32, 0.5, np.float32) if fmt == "q8_0" else np.repeat(np.float32([-3.5, 0.5]), 16)
    blocks["emb"][0:bb] = odd
    ts = []
    for n, a in sorted(W.items()):
        if n in blocks:
            ts.append(dict(name=n, ne=list(reversed(stored[n].shape)), type=gtype, data=bytes(blocks[n])))
        else:
            ts.append(dict(name=n, ne=list(reversed(a.shape)), type=0, data=np.ascontiguousarray(a, "<f4").tobytes()))
    d = os.path.join(tmp, "gguf_" + fmt)
    os.makedirs(d)
    path = os.path.join(d, "w.gguf")
    with open(path, "wb") as f:
        f.write(GG.encode(kv=[("general.alignment", 4, 32), ("nestc.transposed", 9, (8, ["w1"]))], tensors=ts))
    Wf = dict(W)
    for n, a in stored.items():
        rb = bb * (a.shape[1] // 32)
        v = np.stack([Q.dequantize(code, bytes(blocks[n][r * rb:(r + 1) * rb]), a.shape[1]) for r in range(a.shape[0])])
        Wf[n] = v.T if n == "w1" else v
    W32 = dict(Wf)   # what an f32 build computes with: the file's values
    for n in ("w3", "wb", "wr"):
        Wf[n] = round_trip(fmt, W[n], AXIS[n])
    res = []
    for build, entry, Wref in [(fmt, "mmt", Wf), (fmt, "gather", Wf), (fmt, "mm", Wf), (fmt, "two", Wf),
                               ("f32", "mm", W32), ("f32", "mmt", W32), ("f32", "gather", W32)]:
        name = "gguf.%s.%s%s" % (fmt, entry, "" if build == fmt else ".f32_build")
        out = os.path.join(d, "out_" + build)
        if not os.path.isdir(out):
            C.nestc("build", src, "-o", out, *(["--weights-format=" + fmt] if build == fmt else []))
        hdr = C.parse_header(os.path.join(out, "fm.h"), "fm")
        try:
            model_in = {}
            for k, a in ins[entry].items():
                p = os.path.join(d, "in_%s_%s.npy" % (entry, k))
                np.save(p, a)
                model_in[k] = p
            outp = os.path.join(d, "got_%s_%s.npy" % (build, entry))
            exe = C.compile_driver(d, [C.Call(hdr[entry], path, model_in, [outp])], ["fm"], [out],
                                   sorted(C.glob.glob(os.path.join(out, "*.o"))), name="driver_%s_%s" % (build, entry))
            rr = C.run([exe])
            if rr.returncode != 0:
                raise Fail("compiled program: " + C.describe([exe], rr))
            got = np.load(outp)
            close(got, reference(entry, Wref, ins[entry]), "compiled")
            if entry == "gather" and not np.array_equal(got[1, :32], odd_values):
                raise Fail("row 0's block read as %r, want its own values %r" % (got[1, :32], odd_values))
            res.append((name, None))
        except Fail as ex:
            res.append((name, str(ex)))
    return res


def check_gguf_errors(tmp, src, W):
    """nestc.transposed that does not name a block or 16-bit matrix of the file: the
    file is refused with the reason."""
    res = []
    base = [dict(name=n, ne=list(reversed(a.shape)), type=0, data=np.ascontiguousarray(a, "<f4").tobytes())
            for n, a in sorted(W.items())]
    for tag, kv, want in [("missing", ("nestc.transposed", 9, (8, ["nope"])), r"nestc.transposed names 'nope', which is not a tensor"),
                          ("f32", ("nestc.transposed", 9, (8, ["w1"])), r"nestc.transposed names 'w1', whose type is not stored transposed"),
                          ("type", ("nestc.transposed", 8, "w1"), r"nestc.transposed is string, not an array of strings")]:
        p = os.path.join(tmp, "bad_%s.gguf" % tag)
        with open(p, "wb") as f:
            f.write(GG.encode(kv=[kv], tensors=base))
        xin = os.path.join(tmp, "x_%s.npy" % tag)
        np.save(xin, np.zeros((5, 64), np.float32))
        res.append(expect_error("gguf.transposed_error.%s" % tag,
                                ["run", src, "--entry", "mm", "--weights", p, "--input", "x=" + xin],
                                re.escape(p) + ": " + want))
    return res


KMODEL = """
param w1: f32[512, 37]
param w2: f32[45, 256]
param w3: f32[256, 40]
param emb: f32[50, 512]
param wf: f32[288, 24]
param wo: f32[100, 8]

@region
fn lin(x: f32[T, 512], w: f32[512, 37]) -> f32[T, 37] {
  return x @ w
}

export fn mm(x: f32[29, 512]) -> f32[29, 37] {
  return x @ w1
}

export fn mmt(x: f32[7, 256]) -> f32[7, 45] {
  return x @ transpose(w2, [1, 0])
}

export fn mv(x: f32[256]) -> f32[40] {
  return x @ w3
}

export fn bmm(x: f32[3, 5, 512]) -> f32[3, 5, 37] {
  return x @ w1
}

export fn gather(i: i32[6]) -> f32[6, 512] {
  return emb[i]
}

export fn two(x: f32[9, 512]) -> f32[9, 37] {
  return lin(x, w1) * 0.5 + lin(x, w1)
}

export fn fb(x: f32[3, 288]) -> f32[3, 24] {
  return x @ wf
}

export fn oddk(x: f32[2, 100]) -> f32[2, 8] {
  return x @ wo
}
"""
KAXIS = {"w1": 0, "w2": 1, "w3": 0, "emb": 1, "wf": 0}


def check_kquant(tmp, fmt, configs, int8_cpus=()):
    """The k-quants (q4_k, q6_k: super-blocks of 256) on a model whose matrices reduce
    axes of 256 and 512: a product of 29 rows (register tiles and the rows left), one
    of odd width (a partial panel), transposed, a matrix-vector product, a batch of
    rows, a gather, a region; wf's axis of 288 is not whole super-blocks, so a bare
    k-quant gives it q8_0 (as llama.cpp's quantizer falls back), and wo's 100 not even
    q8_0's blocks: f32. Built for each of configs ((cpu, threads): SSE2's and AVX2's
    lanes, several threads) and checked against NumPy over the weights round-tripped
    by tests/io/quant.py's reference of ggml's quantizers; then from a GGUF file that
    `nestc weights --format` wrote (the build binds its blocks as they are, also
    mapped with NESTRT_MMAP=1), and an f32 build of that file. With --activations=int8
    (for each of int8_cpus): the products over q4_k and q8_0 weights (dot products) against
    NumPy with their activations quantized as int8_rows says."""
    res = []
    d = os.path.join(tmp, "k_" + fmt)
    os.makedirs(d)
    src = os.path.join(d, "km.nest")
    with open(src, "w") as f:
        f.write(KMODEL.lstrip("\n"))
    rng = np.random.default_rng(256)
    W = {n: rng.uniform(-1, 1, shape).astype(np.float32) for n, shape in
         [("w1", (512, 37)), ("w2", (45, 256)), ("w3", (256, 40)), ("emb", (50, 512)), ("wf", (288, 24)), ("wo", (100, 8))]}
    W["w1"][0:256, 0] = 0          # an all-zero super-block
    W["w1"][256:512, 1] = np.abs(W["w1"][256:512, 1]) + 3   # only positive values: a min of 0
    W["w1"][0:32, 2] *= 1e-4        # sub-blocks far apart in scale
    wpath = os.path.join(d, "w.safetensors")
    C.write_safetensors(wpath, sorted(W.items()))
    held = {"w1": fmt, "w2": fmt, "w3": fmt, "emb": fmt, "wf": "q8_0"}
    Wf = dict(W)
    for n, f in held.items():
        Wf[n] = round_trip(f, W[n], KAXIS[n])
    ins = {"mm": {"x": rng.standard_normal((29, 512))}, "mmt": {"x": rng.standard_normal((7, 256))},
           "mv": {"x": rng.standard_normal(256)}, "bmm": {"x": rng.standard_normal((3, 5, 512))},
           "gather": {"i": np.array([3, 0, 49, 7, 7, 20], np.int32)}, "two": {"x": rng.standard_normal((9, 512))},
           "fb": {"x": rng.standard_normal((3, 288))}, "oddk": {"x": rng.standard_normal((2, 100))}}
    ins = {e: {k: (a if a.dtype == np.int32 else a.astype(np.float32)) for k, a in v.items()} for e, v in ins.items()}

    def ref(entry, F, int8=False):
        f = {k: v.astype(np.float64) for k, v in F.items()}
        x = ins[entry].get("x")
        dot = entry == "fb" or (fmt == "q4_k" and entry in ("mm", "mmt", "mv", "bmm", "two"))
        x = None if x is None else int8_rows(x) if int8 and dot else x.astype(np.float64)
        return {"mm": lambda: x @ f["w1"], "mmt": lambda: x @ f["w2"].T, "mv": lambda: x @ f["w3"],
                "bmm": lambda: x @ f["w1"], "gather": lambda: f["emb"][ins["gather"]["i"]],
                "two": lambda: 1.5 * (x @ f["w1"]), "fb": lambda: x @ f["wf"], "oddk": lambda: x @ f["wo"]}[entry]()

    def run_all(tag, out, weights, F, envs=(None,), int8=False):
        hdr = C.parse_header(os.path.join(out, "km.h"), "km")
        for entry in ins:
            name = "%s.%s" % (tag, entry)
            try:
                model_in = {}
                for k, a in ins[entry].items():
                    model_in[k] = os.path.join(d, "in_%s_%s.npy" % (entry, k))
                    np.save(model_in[k], a)
                outp = os.path.join(d, "got_%s_%s.npy" % (tag, entry))
                exe = C.compile_driver(d, [C.Call(hdr[entry], weights, model_in, [outp])], ["km"], [out],
                                       sorted(C.glob.glob(os.path.join(out, "*.o"))), name="drv_%s_%s" % (tag, entry))
                for env in envs:
                    rr = C.run([exe], env=env)
                    if rr.returncode != 0:
                        raise Fail("compiled program: " + C.describe([exe], rr))
                    close(np.load(outp), ref(entry, F, int8), "compiled" + (" (%s)" % env.get("_what") if env else ""))
                res.append((name, None))
            except Fail as ex:
                res.append((name, str(ex)))

    for cpu, threads in configs:
        tag = "%s%s%s" % (fmt, "." + cpu if cpu else "", ".threads%d" % threads if threads else "")
        out = os.path.join(d, "out_" + tag)
        r = C.nestc("build", src, "-o", out, "--weights-format=" + fmt, "--report", *(["--cpu=" + cpu] if cpu else []))
        got = {m.group(1): m.group(2) for m in re.finditer(r"^  (\w+): f32\[[^\]]*\], (\w+), blocks along", r.stdout, re.M)}
        res.append(("%s.report" % tag, None if got == held else "report says %s, want %s" % (got, held)))
        envs = (dict(os.environ, NESTRT_NUM_THREADS=str(threads), _what="%d threads" % threads),) if threads else (None,)
        run_all(tag, out, wpath, Wf, envs)
        if cpu or threads:
            continue
        for entry in ("mm", "gather", "fb"):
            name = "%s.run.%s" % (tag, entry)
            try:
                refp = os.path.join(d, "run_%s.npy" % entry)
                args = ["run", src, "--entry", entry, "--weights", wpath, "--weights-format=" + fmt, "--output", refp]
                for k, a in ins[entry].items():
                    args += ["--input", "%s=%s" % (k, os.path.join(d, "in_%s_%s.npy" % (entry, k)))]
                C.nestc(*args)
                close(np.load(refp), ref(entry, Wf), "nestc run")
                res.append((name, None))
            except Fail as ex:
                res.append((name, str(ex)))
    for cpu in int8_cpus:
        tag = "%s%s.int8" % (fmt, "." + cpu if cpu else "")
        out = os.path.join(d, "out_" + tag)
        C.nestc("build", src, "-o", out, "--weights-format=" + fmt, "--activations=int8", *(["--cpu=" + cpu] if cpu else []))
        run_all(tag, out, wpath, Wf, int8=True)
    # the same weights from a GGUF file in fmt: bound as the file holds them
    g = os.path.join(d, "w.gguf")
    C.nestc("weights", src, "--weights", wpath, "--format=" + fmt, "-o", g)
    out = os.path.join(d, "out_%s" % fmt)
    mm = dict(os.environ, NESTRT_MMAP="1", _what="NESTRT_MMAP=1")
    run_all("gguf." + fmt, out, g, Wf, (None, mm))
    out32 = os.path.join(d, "out_f32")
    C.nestc("build", src, "-o", out32)
    run_all("gguf.%s.f32_build" % fmt, out32, g, Wf, (None, mm))
    if int8_cpus:
        run_all("gguf.%s.int8" % fmt, os.path.join(d, "out_%s.int8" % fmt), g, Wf, (None, mm), int8=True)
    return res


STATE_MODEL = """
const CACHE = f32
state acc: { k: CACHE[8, 40] }

export fn put(x: f32[3, 40]) -> f32[3, 40] where 0 <= P <= 5 {
  acc.k[P:P+3] = CACHE(x * 3.0)
  return f32(acc.k[P:P+3]) + 0.25
}
"""

STATE_DRIVER = r"""
#include "st.h"
#include <stdio.h>
int main(void)
{
	nestrt_error e;
	st *m = st_new(NULL, &e);
	st_seq *s = m ? st_seq_new(m, &e) : NULL;
	if (!s) { fprintf(stderr, "%s\n", e.message); return 2; }
	static float x[3 * 40], y[3 * 40];
	for (int i = 0; i < 3 * 40; i++) x[i] = (float)i / 7.0f - 5.0f;
	if (st_put(m, s, 1, x, y)) { fprintf(stderr, "put failed\n"); return 1; }
	fwrite(y, sizeof y, 1, stdout);
	st_seq_free(s);
	st_free(m);
	return 0;
}
"""


def check_state(tmp):
    """A state in 16 bits (const CACHE = f32 and -D CACHE=bf16 / f16, as the samples' key/value
    caches take it): written rounded to nearest even, read back widened: compiled,
    interpreted and NumPy equal, bit for bit; and the errors of a dtype const."""
    res = []
    src = os.path.join(tmp, "st.nest")
    with open(src, "w") as f:
        f.write(STATE_MODEL.lstrip("\n"))
    x = (np.arange(120, dtype=np.float32).reshape(3, 40) / np.float32(7.0) - np.float32(5.0)).astype(np.float32)
    xin = os.path.join(tmp, "st_x.npy")
    np.save(xin, x)
    for dt in ("bf16", "f16"):
        name = "state.%s" % dt
        try:
            d = os.path.join(tmp, "state_" + dt)
            os.makedirs(d)
            out = os.path.join(d, "out")
            C.nestc("build", src, "-o", out, "-D", "CACHE=" + dt)
            y = (x * np.float32(3.0)).astype(np.float32)
            code = Q.NAMES.index(dt)
            held = Q.dequantize(code, Q.quantize(code, y.reshape(-1)), y.size).reshape(y.shape)
            want = (held + np.float32(0.25)).astype(np.float32)
            refp = os.path.join(d, "ref.npy")
            C.nestc("run", src, "-D", "CACHE=" + dt, "-D", "P=1", "--input", "x=" + xin, "--output", refp)
            got_run = np.load(refp)
            if not np.array_equal(got_run, want):
                raise Fail("nestc run: %r, want %r" % (got_run.reshape(-1)[:4], want.reshape(-1)[:4]))
            drv = os.path.join(d, "drv.c")
            with open(drv, "w") as f:
                f.write(STATE_DRIVER)
            exe = os.path.join(d, "drv")
            cmd = [C.CC, "-O1", "-I" + C.RUNTIME, "-I" + out, drv] + sorted(C.glob.glob(os.path.join(out, "*.o"))) + \
                [C.LIBNESTRT, "-lm", "-lpthread", "-o", exe] + C.LINK_FLAGS
            rr = C.run(cmd)
            if rr.returncode != 0:
                raise Fail("driver: " + C.describe(cmd, rr))
            rr = subprocess.run([exe], capture_output=True)
            got = np.frombuffer(rr.stdout, dtype=np.float32).reshape(3, 40) if rr.returncode == 0 else None
            if got is None or not np.array_equal(got, want):
                raise Fail("compiled: exit %d, %r, want %r" % (rr.returncode, None if got is None else got.reshape(-1)[:4],
                                                              want.reshape(-1)[:4]))
            res.append((name, None))
        except Fail as ex:
            res.append((name, str(ex)))
    res.append(expect_error("state.define_not_dtype", ["check", src, "-D", "CACHE=7"],
                            r"-D CACHE=7: const 'CACHE' names a dtype: give one of f32"))
    bad = os.path.join(tmp, "st_bad.nest")
    with open(bad, "w") as f:
        f.write("const CACHE = bf16\nexport fn f(x: f32[2]) -> f32[2] {\n  return x * CACHE\n}\n")
    res.append(expect_error("state.dtype_as_value", ["check", bad],
                            r"st_bad.nest:3:14: error: const 'CACHE' names a dtype \(bf16\): write it as a type"))
    bad2 = os.path.join(tmp, "st_bad2.nest")
    with open(bad2, "w") as f:
        f.write("type R = { a: f32[2] }\nparam p: R[2, 3]\n")
    res.append(expect_error("state.array_two_lengths", ["check", bad2],
                            r"st_bad2.nest:2:10: error: an array of 'R' has one length: write R\[a\]\[b\]"))
    return res


def main(argv):
    args = argv[1:]
    filters = []
    nestc = None
    i = 0
    while i < len(args):
        if args[i] == "-k":
            filters.append(args[i + 1])
            i += 1
        elif nestc is None:
            nestc = os.path.abspath(args[i])
        i += 1
    if not nestc:
        print(__doc__, file=sys.stderr)
        return 2
    C.NESTC = nestc
    for cand in (os.path.join(os.path.dirname(nestc), "libnestrt.a"), os.path.join(ROOT, "build", "libnestrt.a")):
        if os.path.exists(cand):
            C.LIBNESTRT = cand
            break
    tmp = tempfile.mkdtemp(prefix="nestc-formats-")
    C.TMP = tmp
    results = []
    try:
        src = os.path.join(tmp, "fm.nest")
        with open(src, "w") as f:
            f.write(MODEL.lstrip("\n"))
        rng = np.random.default_rng(36)
        W = weights(rng)
        ins = inputs(rng)
        wpath = os.path.join(tmp, "w.safetensors")
        C.write_safetensors(wpath, sorted(W.items()))
        want = lambda n: not filters or any(s in n for s in filters)  # noqa: E731
        # native; SSE2 (4 lanes) and AVX2 (8) builds; three threads
        configs = [(f, None, None, None) for f in FORMATS] + [(f, "x86-64", None, None) for f in FORMATS] + \
            [("q4_0", "haswell", None, None), ("bf16", "haswell", None, None), ("q8_0", None, 3, None),
             ("f16", None, 3, None)]
        # int8 activations: native (vpdpbusd where the CPU has it), AVX2 and SSE2
        # without it (the same sums in plain vector code), three threads
        configs += [("q8_0", None, None, "int8"), ("q4_0", None, None, "int8"), ("q4_0", "x86-64", None, "int8"),
                    ("q8_0", "haswell", None, "int8"), ("q4_0", "cascadelake", None, "int8"),
                    ("q8_0", None, 3, "int8")]
        for fmt, cpu, threads, act in configs:
            if want(fmt) or (act and want(act)):
                try:
                    results += check_format(tmp, fmt, W, ins, wpath, src, cpu, threads, act)
                except Fail as ex:
                    results.append((fmt, str(ex)))
        if want("error"):
            try:
                results += check_errors(tmp, src, W, wpath)
            except Fail as ex:
                results.append(("error", str(ex)))
        for fmt in ("q8_0", "q4_0"):
            if want("gguf"):
                try:
                    results += check_gguf(tmp, src, W, ins, fmt)
                except Fail as ex:
                    results.append(("gguf." + fmt, str(ex)))
        for fmt in ("q4_k", "q6_k"):
            if want(fmt):
                try:
                    results += check_kquant(tmp, fmt, [(None, None), ("x86-64", None), ("haswell", None), (None, 3)],
                                            int8_cpus=(None, "x86-64", "cascadelake") if fmt == "q4_k" else (None,))
                except Fail as ex:
                    results.append((fmt, str(ex)))
        if want("gguf"):
            try:
                results += check_gguf_errors(tmp, src, W)
            except Fail as ex:
                results.append(("gguf.transposed_error", str(ex)))
        if want("state"):
            try:
                results += check_state(tmp)
            except Fail as ex:
                results.append(("state", str(ex)))
        if want("f16_file"):
            try:
                results += check_half_file(tmp, src, W, ins)
            except Fail as ex:
                results.append(("f16_file", str(ex)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    passed = failed = 0
    for n, msg in results:
        if msg is None:
            passed += 1
            print("ok %s" % n)
        else:
            failed += 1
            print("FAIL %s: %s" % (n, msg))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
