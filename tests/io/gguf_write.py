#!/usr/bin/python3
"""`nestc weights ... -o OUT.gguf` (issue 36 item 5): the GGUF v3 file nestc writes, read
back by a parser of its own (below, from the GGUF format alone): header, metadata, tensor
infos (names, types, dims, offsets, alignment) and data. The data are checked against
tests/io/quant.py's NumPy implementation of the formats (quantize()), applied to the f32
values `nestc weights --random-weights SEED -o X.safetensors` writes (the same seed), or to
those of the file converted; transposed where nestc.transposed lists the tensor.
Prints "ok NAME" or "FAIL NAME ...", then "N passed, N failed".

    /usr/bin/python3 tests/io/gguf_write.py build/nestc
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import quant  # noqa: E402  (the reference: quantize(fmt, x))

NESTC = None
npass = nfail = 0

# ggml's tensor types nestc writes: number -> (name, elements per block, bytes per block)
GGML = {0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 8: ("q8_0", 32, 34), 24: ("i8", 1, 1),
        25: ("i16", 1, 2), 26: ("i32", 1, 4), 27: ("i64", 1, 8), 28: ("f64", 1, 8), 30: ("bf16", 1, 2)}
FMT = {"f32": quant.F32, "bf16": quant.BF16, "f16": quant.F16, "q8_0": quant.Q8_0, "q4_0": quant.Q4_0}


def result(name, ok, detail=""):
    global npass, nfail
    if ok:
        npass += 1
        print("ok %s" % name)
    else:
        nfail += 1
        print("FAIL %s %s" % (name, detail))


def nestc(*args, env=None):
    return subprocess.run([NESTC] + [str(a) for a in args], capture_output=True, text=True,
                          env=dict(os.environ, **env) if env else None)


# ------------------------------------------------------------ a GGUF parser

class Bad(Exception):
    pass


def parse_gguf(path):
    """The file as a dict: version, kv {key: (type, value)} in order, tensors [{name, ne,
    type, offset, data}], data_start, size. Raises Bad on anything malformed."""
    raw = open(path, "rb").read()
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(raw):
            raise Bad("truncated at %d (+%d)" % (pos, n))
        b = raw[pos:pos + n]
        pos += n
        return b

    def u32():
        return struct.unpack("<I", take(4))[0]

    def u64():
        return struct.unpack("<Q", take(8))[0]

    def gstr():
        return take(u64()).decode()

    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def val(t):
        if t == 8:
            return gstr()
        if t == 9:
            et, n = u32(), u64()
            return (et, [val(et) for _ in range(n)])
        f = scalar[t]
        return struct.unpack(f, take(struct.calcsize(f)))[0]

    if take(4) != b"GGUF":
        raise Bad("magic")
    version = u32()
    nt, nkv = u64(), u64()
    kv = {}
    for _ in range(nkv):
        k = gstr()
        t = u32()
        kv[k] = (t, val(t))
    tensors = []
    for _ in range(nt):
        name = gstr()
        nd = u32()
        ne = [u64() for _ in range(nd)]
        ty, off = u32(), u64()
        tensors.append({"name": name, "ne": ne, "type": ty, "offset": off})
    align = kv["general.alignment"][1] if "general.alignment" in kv else 32
    start = (pos + align - 1) // align * align
    if raw[pos:start] != b"\0" * (start - pos):
        raise Bad("padding before the data is not zeros")
    for t in tensors:
        if t["type"] not in GGML:
            raise Bad("%s: type %d" % (t["name"], t["type"]))
        _, blk, size = GGML[t["type"]]
        n = int(np.prod(t["ne"], dtype=np.int64)) if t["ne"] else 1
        if t["ne"] and t["ne"][0] % blk:
            raise Bad("%s: ne[0] %d not whole blocks" % (t["name"], t["ne"][0]))
        nb = n // blk * size
        a, b = start + t["offset"], start + t["offset"] + nb
        if b > len(raw):
            raise Bad("%s: data past the end" % t["name"])
        t["data"] = raw[a:b]
        t["nbytes"] = nb
    return {"version": version, "kv": kv, "tensors": tensors, "data_start": start, "size": len(raw),
            "header_end": pos, "raw": raw}


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    out = {}
    dt = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "F16": "<u2", "BF16": "<u2", "I8": "<i1",
          "I16": "<i2"}
    for k, e in h.items():
        if k == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[k] = np.frombuffer(raw[8 + n + a:8 + n + b], dt[e["dtype"]]).reshape(e["shape"])
    return out


def write_safetensors(path, tensors):
    """tensors: name -> ndarray (float32 / int32 ...), or (DTYPE, uint16 bits) for F16 / BF16."""
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        if isinstance(arr, tuple):
            dt, arr = arr[0], np.ascontiguousarray(arr[1])
        else:
            arr = np.ascontiguousarray(arr)
            dt = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int32"): "I32",
                  np.dtype("float16"): "F16"}[arr.dtype]
        b = arr.tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def bf16_bits(x):
    return quant.bf16_bits(np.asarray(x, np.float32))


# ------------------------------------------------------------ the models

# a matmul weight read as x @ w (blocks along axis 0: stored transposed), one read as
# x @ transpose(w, [1, 0]) (axis 1), an embedding gathered (axis 1), a bias, a norm
# weight, and a K = 100 matrix (x @ w) that no block format takes by default
MODEL = """
param emb: f32[64, 96]
param up: f32[96, 64]
param down: { weight: f32[32, 64] }
param lin: { bias: f32[32] }
param norm: { weight: f32[32] }
param odd: f32[100, 32]
param count: i32[3]
param scale: f64[2, 2]

export fn forward(ids: i32[4], y: f32[4, 100]) -> f32[4, 32] {
  let x = emb[ids]
  let h = x @ up
  let o = h @ transpose(down.weight, [1, 0]) + lin.bias
  let n = o * norm.weight + y @ odd
  return n + f32(sum(count)) + f32(sum(scale))
}
"""
# the same params declared in another order, with one more: the values depend on names only
MODEL_REORDERED = """
param extra: f32[7, 5]
param norm: { weight: f32[32] }
param odd: f32[100, 32]
param down: { weight: f32[32, 64] }
param up: f32[96, 64]
param emb: f32[64, 96]
param lin: { bias: f32[32] }
param scale: f64[2, 2]
param count: i32[3]

export fn forward(ids: i32[4], y: f32[4, 100]) -> f32[4, 32] {
  let x = emb[ids]
  let h = x @ up
  let o = h @ transpose(down.weight, [1, 0]) + lin.bias
  let n = o * norm.weight + y @ odd + f32(sum(extra))
  return n + f32(sum(count)) + f32(sum(scale))
}
"""
PARAMS = ["emb", "up", "down.weight", "lin.bias", "norm.weight", "odd", "count", "scale"]
# the matrices a bare format takes, and the axis their blocks run along
MATRICES = {"emb": 1, "up": 0, "down.weight": 1}
GGML_OF = {"f32": 0, "f16": 1, "bf16": 30, "q8_0": 8, "q4_0": 2}


def check_file(name, path, model_params, values, fmts, want_name):
    """The GGUF file at path: header and metadata, then each param (model_params: name ->
    (dtype, shape)) in order; fmts: name -> (format, axis) for formatted params; values:
    name -> the f32 (or other dtype) elements the data must hold."""
    try:
        g = parse_gguf(path)
    except (Bad, OSError) as e:
        result(name + ".parse", False, str(e))
        return None
    kv = g["kv"]
    want_trans = [n for n, (f, ax) in fmts.items() if ax == 0]
    want_trans = [n for n in model_params if n in want_trans]
    result(name + ".header", g["version"] == 3 and list(kv) == ["general.architecture", "general.name",
                                                                "general.alignment", "nestc.transposed"]
           and kv["general.architecture"] == (8, "nestc") and kv["general.name"] == (8, want_name)
           and kv["general.alignment"] == (4, 32) and kv["nestc.transposed"] == (9, (8, want_trans)),
           "version %d kv %s" % (g["version"], {k: v for k, v in kv.items()}))
    ts = g["tensors"]
    result(name + ".names", [t["name"] for t in ts] == list(model_params), [t["name"] for t in ts])
    ok_layout = g["data_start"] % 32 == 0 and g["size"] % 32 == 0
    end = 0
    for t in ts:
        ok_layout &= t["offset"] % 32 == 0 and t["offset"] >= end
        ok_layout &= g["raw"][g["data_start"] + end:g["data_start"] + t["offset"]] == b"\0" * (t["offset"] - end)
        end = t["offset"] + t["nbytes"]
    ok_layout &= g["size"] == g["data_start"] + (end + 31) // 32 * 32
    result(name + ".layout", ok_layout, "data at %d, size %d, offsets %s" % (g["data_start"], g["size"],
                                                                          [t["offset"] for t in ts]))
    bad = []
    for t in ts:
        n = t["name"]
        if n not in model_params:
            continue
        dtype, shape = model_params[n]
        fmt, ax = fmts.get(n, (None, None))
        want_type = GGML_OF[fmt] if fmt else {"f32": 0, "f64": 28, "i32": 26, "f16": 1, "bf16": 30}[dtype]
        want_ne = list(shape) if ax == 0 else list(reversed(shape))
        if t["type"] != want_type or t["ne"] != want_ne:
            bad.append("%s: type %d ne %s, want %d %s" % (n, t["type"], t["ne"], want_type, want_ne))
            continue
        v = np.asarray(values[n])
        if fmt:
            x = v.astype(np.float32)
            rows = x.T if ax == 0 else x
            want = b"".join(quant.quantize(FMT[fmt], r) for r in np.ascontiguousarray(rows))
        else:
            want = np.ascontiguousarray(v).tobytes()
        if t["data"] != want:
            bad.append("%s: data differ (%d bytes, want %d)" % (n, len(t["data"]), len(want)))
    result(name + ".tensors", not bad, "; ".join(bad))
    return g


def test_random(tmp):
    m = os.path.join(tmp, "m.nest")
    with open(m, "w") as f:
        f.write(MODEL)
    st = os.path.join(tmp, "m.safetensors")
    r = nestc("weights", m, "--random-weights", 7, "-o", st)
    if r.returncode != 0:
        result("random.safetensors", False, r.stderr)
        return
    vals = read_safetensors(st)
    params = {"emb": ("f32", [64, 96]), "up": ("f32", [96, 64]), "down.weight": ("f32", [32, 64]),
              "lin.bias": ("f32", [32]), "norm.weight": ("f32", [32]), "odd": ("f32", [100, 32]),
              "count": ("i32", [3]), "scale": ("f64", [2, 2])}
    # no --format: the declared dtypes
    out = os.path.join(tmp, "plain.gguf")
    r = nestc("weights", m, "--random-weights", 7, "-o", out)
    result("random.plain.exit", r.returncode == 0 and not r.stderr, r.stderr)
    check_file("random.plain", out, params, vals, {}, "m")
    for fmt in ("f32", "bf16", "f16", "q8_0", "q4_0"):
        out = os.path.join(tmp, "m.%s.gguf" % fmt)
        r = nestc("weights", m, "--random-weights", 7, "--format=" + fmt, "-o", out)
        result("random.%s.exit" % fmt, r.returncode == 0 and not r.stderr, r.stderr)
        fm = {} if fmt == "f32" else {n: (fmt, ax) for n, ax in MATRICES.items()}
        # K = 100: f16 and bf16 take it (a block of 1), q8_0 and q4_0 do not
        if fmt in ("bf16", "f16"):
            fm["odd"] = (fmt, 0)
        check_file("random." + fmt, out, params, vals, fm, "m")
    # patterns: the last match wins; a param named that cannot take its format is an error
    out = os.path.join(tmp, "mixed.gguf")
    r = nestc("weights", m, "--random-weights", 7, "--format=q4_0,up=q8_0,d*=bf16", "--format", "emb=f32", "-o", out)
    result("random.patterns.exit", r.returncode == 0 and not r.stderr, r.stderr)
    check_file("random.patterns", out, params, vals, {"up": ("q8_0", 0), "down.weight": ("bf16", 1)}, "m")
    # the formats build --weights-format would give, as nestc report lists them
    rep = nestc("report", m, "--weights-format=q4_0,up=q8_0,d*=bf16,emb=f32")
    lines = [l.strip() for l in rep.stdout.split("\n") if ", blocks along axis" in l]
    result("random.same_as_build", lines == ["up: f32[96, 64], q8_0, blocks along axis 0, 6528 bytes",
                                             "down.weight: f32[32, 64], bf16, blocks along axis 1, 4096 bytes"],
           "%s %s" % (lines, rep.stderr))
    # seeded by name: the same values whatever the order of the params and whatever else
    m2 = os.path.join(tmp, "other_order.nest")
    with open(m2, "w") as f:
        f.write(MODEL_REORDERED)
    a = parse_gguf(os.path.join(tmp, "m.q8_0.gguf"))
    out = os.path.join(tmp, "other_order.q8_0.gguf")
    r = nestc("weights", m2, "--random-weights", 7, "--format=q8_0", "-o", out)
    b = parse_gguf(out) if r.returncode == 0 else None
    same = b is not None and all(
        ta["data"] == tb["data"] and ta["ne"] == tb["ne"] for ta in a["tensors"] for tb in b["tensors"]
        if ta["name"] == tb["name"])
    result("random.by_name", same and b["kv"]["general.name"] == (8, "other_order") and
           [t["name"] for t in b["tensors"]][:2] == ["extra", "norm.weight"], r.stderr)
    # another seed, other values
    out = os.path.join(tmp, "seed8.gguf")
    r = nestc("weights", m, "--random-weights", 8, "--format=q8_0", "-o", out)
    c = parse_gguf(out) if r.returncode == 0 else None
    result("random.seed", c is not None and c["tensors"][1]["data"] != a["tensors"][1]["data"], r.stderr)
    # and `nestc run --random-weights` computes with the values the f32 file holds
    ids = os.path.join(tmp, "ids.npy")
    y = os.path.join(tmp, "y.npy")
    np.save(ids, np.array([1, 5, 63, 0], np.int32))
    np.save(y, np.linspace(-1, 1, 400, dtype=np.float32).reshape(4, 100))
    o1, o2 = os.path.join(tmp, "o1.npy"), os.path.join(tmp, "o2.npy")
    r1 = nestc("run", m, "--random-weights", 7, "--input", "ids=" + ids, "--input", "y=" + y, "--output", o1)
    r2 = nestc("run", m, "--weights", os.path.join(tmp, "m.f32.gguf"), "--input", "ids=" + ids, "--input",
               "y=" + y, "--output", o2)
    result("random.run_same_values", r1.returncode == 0 and r2.returncode == 0 and
           np.array_equal(np.load(o1), np.load(o2)), r1.stderr + r2.stderr)


def test_convert(tmp):
    m = os.path.join(tmp, "m.nest")
    rng = np.random.default_rng(5)
    f32 = {"emb": rng.standard_normal((64, 96)), "up": rng.standard_normal((96, 64)),
           "down.weight": rng.standard_normal((32, 64)), "lin.bias": rng.standard_normal(32),
           "norm.weight": rng.standard_normal(32), "odd": rng.standard_normal((100, 32))}
    f32 = {k: (v * 0.3).astype(np.float32) for k, v in f32.items()}
    other = {"count": np.array([1, -2, 3], np.int32), "scale": np.array([[0.5, 1.5], [2.5, -1.0]])}
    params = {"emb": ("f32", [64, 96]), "up": ("f32", [96, 64]), "down.weight": ("f32", [32, 64]),
              "lin.bias": ("f32", [32]), "norm.weight": ("f32", [32]), "odd": ("f32", [100, 32]),
              "count": ("i32", [3]), "scale": ("f64", [2, 2])}
    # F32
    src = os.path.join(tmp, "in32.safetensors")
    write_safetensors(src, dict(f32, **other))
    for fmt in ("q8_0", "q4_0"):
        out = os.path.join(tmp, "c32.%s.gguf" % fmt)
        r = nestc("weights", m, "--weights", src, "--format=" + fmt, "-o", out)
        result("convert.f32.%s.exit" % fmt, r.returncode == 0 and not r.stderr, r.stderr)
        check_file("convert.f32." + fmt, out, params, dict(f32, **other),
                   {n: (fmt, ax) for n, ax in MATRICES.items()}, "m")
    # F16 and BF16: the widened values, quantized (and f32 params unformatted: widened)
    f16 = {k: v.astype(np.float16) for k, v in f32.items()}
    bf = {k: bf16_bits(v) for k, v in f32.items()}
    for kind, tens, wide in (("f16", f16, {k: v.astype(np.float32) for k, v in f16.items()}),
                             ("bf16", {k: ("BF16", v) for k, v in bf.items()},
                              {k: quant.from_bits32(v.astype(np.uint32) << 16).reshape(v.shape)
                               for k, v in bf.items()})):
        src = os.path.join(tmp, "in_%s.safetensors" % kind)
        write_safetensors(src, dict(tens, **other))
        for fmt in ("f32", "bf16", "f16", "q8_0", "q4_0"):
            out = os.path.join(tmp, "c_%s.%s.gguf" % (kind, fmt))
            r = nestc("weights", m, "--weights", src, "--format=" + fmt, "-o", out)
            result("convert.%s.%s.exit" % (kind, fmt), r.returncode == 0 and not r.stderr, r.stderr)
            fm = {} if fmt == "f32" else {n: (fmt, ax) for n, ax in MATRICES.items()}
            if fmt in ("bf16", "f16"):
                fm["odd"] = (fmt, 0)
            check_file("convert.%s.%s" % (kind, fmt), out, params, dict(wide, **other), fm, "m")
    # a GGUF input (F16 tensors, written by nestc itself unformatted) converts the same
    src = os.path.join(tmp, "in_f16.safetensors")
    plain = os.path.join(tmp, "c_f16_plain.gguf")
    r = nestc("weights", m, "--weights", src, "-o", plain)
    result("convert.to_plain.exit", r.returncode == 0 and not r.stderr, r.stderr)
    out = os.path.join(tmp, "c_gguf.q4_0.gguf")
    r2 = nestc("weights", m, "--weights", plain, "--format=q4_0", "-o", out)
    a = open(out, "rb").read() if r2.returncode == 0 else b""
    b = open(os.path.join(tmp, "c_f16.q4_0.gguf"), "rb").read()
    result("convert.gguf_input", r2.returncode == 0 and a == b, r2.stderr)
    # f32 tensors at offsets that are not a multiple of 4 (after 3 f16 elements)
    mis = os.path.join(tmp, "mis.nest")
    with open(mis, "w") as f:
        f.write("param h: f16[3]\nparam w: f32[32, 4]\nparam e: f32[4, 64]\nparam b: f32[5]\n"
                "export fn forward(x: f32[32], i: i32[2]) -> f32[2, 4] {\n"
                "  return unsqueeze(x @ w, 0) + f32(sum(f32(h))) + unsqueeze(sum(e[i], axis=1), 1) + sum(b)\n}\n")
    hv = np.array([1, -2, 0.5], np.float16)
    wv = rng.standard_normal((32, 4)).astype(np.float32)
    ev = rng.standard_normal((4, 64)).astype(np.float32)
    bv = rng.standard_normal(5).astype(np.float32)
    src = os.path.join(tmp, "mis.safetensors")
    write_safetensors(src, {"h": hv, "w": wv, "e": ev, "b": bv})
    out = os.path.join(tmp, "mis.gguf")
    r = nestc("weights", mis, "--weights", src, "--format=q8_0", "-o", out)
    result("convert.misaligned.exit", r.returncode == 0 and not r.stderr, r.stderr)
    check_file("convert.misaligned", out, {"h": ("f16", [3]), "w": ("f32", [32, 4]), "e": ("f32", [4, 64]),
                                           "b": ("f32", [5])}, {"h": hv, "w": wv, "e": ev, "b": bv},
               {"w": ("q8_0", 0), "e": ("q8_0", 1)}, "mis")
    # an f16 param from F16, a bf16 one from BF16: the bits as they are
    m16 = os.path.join(tmp, "m16.nest")
    with open(m16, "w") as f:
        f.write("param a: f16[3, 4]\nparam b: bf16[5]\nexport fn forward(x: f32[3]) -> f32[4] {\n"
                "  return x @ f32(a) + sum(f32(b))\n}\n")
    ah, bh = rng.standard_normal((3, 4)).astype(np.float16), bf16_bits(rng.standard_normal(5))
    src = os.path.join(tmp, "h16.safetensors")
    write_safetensors(src, {"a": ah, "b": ("BF16", bh)})
    out = os.path.join(tmp, "h16.gguf")
    r = nestc("weights", m16, "--weights", src, "--format=q8_0", "-o", out)
    g = parse_gguf(out) if r.returncode == 0 else None
    result("convert.half_params", g is not None and [(t["type"], t["ne"]) for t in g["tensors"]] ==
           [(1, [4, 3]), (30, [5])] and g["tensors"][0]["data"] == ah.tobytes() and
           g["tensors"][1]["data"] == bh.astype("<u2").tobytes(), r.stderr)


def no_output(tmp, out):
    left = [f for f in os.listdir(tmp) if f.startswith(os.path.basename(out))]
    return not left


def test_errors(tmp):
    m = os.path.join(tmp, "m.nest")
    # OUT not .gguf with --format, or with --weights: a usage error
    out = os.path.join(tmp, "e.safetensors")
    r = nestc("weights", m, "--random-weights", 1, "--format=q8_0", "-o", out)
    result("error.not_gguf_format", r.returncode == 2 and r.stderr.startswith(
        "nestc: weights --format writes a GGUF file: -o must name a .gguf file, not '%s'" % out)
        and not os.path.exists(out), r.stderr[:300])
    r = nestc("weights", m, "--weights", os.path.join(tmp, "in32.safetensors"), "-o", out)
    result("error.not_gguf_weights", r.returncode == 2 and r.stderr.startswith(
        "nestc: weights --weights converts into a GGUF file: -o must name a .gguf file") and not os.path.exists(out),
        r.stderr[:300])
    r = nestc("weights", m, "--random-weights", 1, "--weights", os.path.join(tmp, "in32.safetensors"), "-o", "x.gguf")
    result("error.both_sources", r.returncode == 2 and "--weights and --random-weights exclude each other" in r.stderr,
           r.stderr[:300])
    r = nestc("weights", m, "--random-weights", 1, "--format=q5_0", "-o", os.path.join(tmp, "e.gguf"))
    result("error.bad_format", r.returncode == 2 and r.stderr.startswith(
        "nestc: error: --format: 'q5_0' is not FMT or PATTERN=FMT, FMT one of f32, bf16, f16, q8_0, q4_0"), r.stderr)
    # named by a pattern, a param that cannot take its format: build's error
    out = os.path.join(tmp, "e.gguf")
    r = nestc("weights", m, "--random-weights", 1, "--format=odd=q8_0", "-o", out)
    result("error.cannot_take", r.returncode == 1 and "--weights-format 'odd=q8_0': param 'odd' cannot be q8_0: its "
           "axis 0 (100 long, the one its matmuls reduce) is not a multiple of q8_0's block of 32" in r.stderr
           and no_output(tmp, out), r.stderr)
    rng = np.random.default_rng(9)
    good = read_safetensors(os.path.join(tmp, "in32.safetensors"))
    good = {k: np.array(v) for k, v in good.items()}
    # missing, wrong shape, wrong dtype: as nestc run --weights says it
    bad = dict(good)
    del bad["up"]
    bad["odd"] = np.zeros((32, 100), np.float32)
    bad["count"] = np.zeros(3, np.float32)
    src = os.path.join(tmp, "bad.safetensors")
    write_safetensors(src, bad)
    r = nestc("weights", m, "--weights", src, "--format=q8_0", "-o", out)
    r_run = nestc("run", m, "--weights", src)
    want = ["nestc: error: %s: missing parameter 'up' (f32[96, 64])" % src,
            "nestc: error: %s: odd: expected f32[100, 32], file has f32[32, 100]" % src,
            "nestc: error: %s: count: expected i32[3], file has f32[3]" % src]
    lines = r.stderr.split("\n")
    result("error.missing_shape_dtype", r.returncode == 1 and lines[:3] == want and
           r_run.stderr.split("\n")[:3] == want and no_output(tmp, out), r.stderr)
    # an extra tensor: the warning run gives
    extra = dict(good, stray=np.zeros(2, np.float32))
    src = os.path.join(tmp, "extra.safetensors")
    write_safetensors(src, extra)
    r = nestc("weights", m, "--weights", src, "--format=q8_0", "-o", out)
    result("error.unused_warning", r.returncode == 0 and r.stderr ==
           "nestc: warning: %s: tensor 'stray' is not a parameter of the model\n" % src and os.path.exists(out), r.stderr)
    r = nestc("weights", m, "--weights", src, "--format=q8_0", "-o", os.path.join(tmp, "w.gguf"), "-Werror")
    result("error.unused_werror", r.returncode == 1 and no_output(tmp, os.path.join(tmp, "w.gguf")), r.stderr)
    os.unlink(out)
    # a NaN, an infinity (in a transposed param: named by its column), and a value beyond f16
    for what, key, at, val, fmt, want in (
            ("nan", "emb", (3, 40), np.nan, "q4_0", "param 'emb' in q4_0: row 3: element 40 is nan: q4_0 weights "
                                                   "must be finite numbers"),
            ("inf", "up", (70, 5), -np.inf, "q8_0", "param 'up' in q8_0: column 5: element 70 is -inf: q8_0 weights "
                                                    "must be finite numbers"),
            ("f16_range", "down.weight", (1, 2), 70000.0, "f16", "param 'down.weight' in f16: row 1: element 2 is "
                                                                 "70000, beyond f16's range (|x| >= 65520 rounds to inf)")):
        b = {k: v.copy() for k, v in good.items()}
        b[key][at] = val
        src = os.path.join(tmp, "bad_%s.safetensors" % what)
        write_safetensors(src, b)
        r = nestc("weights", m, "--weights", src, "--format=" + fmt, "-o", out)
        result("error." + what, r.returncode == 1 and r.stderr == "nestc: error: %s: %s\n1 error generated.\n" % (src, want)
               and no_output(tmp, out), r.stderr)
    # the same from BF16 (nestrt__quantize_half's message)
    b = {k: ("BF16", bf16_bits(v)) if v.dtype == np.float32 else v for k, v in good.items()}
    h = b["emb"][1].copy()
    h[10, 64] = 0x7FC0
    b["emb"] = ("BF16", h)
    src = os.path.join(tmp, "bad_bf16.safetensors")
    write_safetensors(src, b)
    r = nestc("weights", m, "--weights", src, "--format=q8_0", "-o", out)
    result("error.nan_bf16", r.returncode == 1 and "%s: param 'emb' in q8_0: row 10: element 64 is nan" % src in r.stderr
           and no_output(tmp, out), r.stderr)
    # an unformatted param keeps what the file holds, NaN too (as nestc run binds it)
    b = {k: v.copy() for k, v in good.items()}
    b["lin.bias"][4] = np.nan
    src = os.path.join(tmp, "nan_bias.safetensors")
    write_safetensors(src, b)
    r = nestc("weights", m, "--weights", src, "--format=q8_0", "-o", out)
    g = parse_gguf(out) if r.returncode == 0 else None
    result("error.nan_unformatted_kept", g is not None and np.isnan(np.frombuffer(g["tensors"][3]["data"], "<f4")[4]),
           r.stderr)
    os.unlink(out)
    # u8, bool and u16 params: GGUF has no type for them
    mu = os.path.join(tmp, "mu.nest")
    with open(mu, "w") as f:
        f.write("param w: f32[32, 4]\nparam mask: u8[4]\nparam flag: bool[2]\nparam half: u16[3]\n"
                "export fn forward(x: f32[32]) -> f32[4] {\n"
                "  return x @ w + f32(mask) + sum(f32(half)) + sum(f32(flag))\n}\n")
    r = nestc("weights", mu, "--random-weights", 1, "--format=q8_0", "-o", out)
    want = ["nestc: error: %s: param 'mask' is u8, which GGUF has no tensor type for" % out,
            "nestc: error: %s: param 'flag' is bool, which GGUF has no tensor type for" % out,
            "nestc: error: %s: param 'half' is u16, which GGUF has no tensor type for" % out]
    result("error.u8_param", r.returncode == 1 and r.stderr.split("\n")[:3] == want and no_output(tmp, out), r.stderr)
    # a directory that does not exist: the file named
    nowhere = os.path.join(tmp, "no", "such", "w.gguf")
    r = nestc("weights", m, "--random-weights", 1, "--format=q8_0", "-o", nowhere)
    result("error.cannot_write", r.returncode == 1 and
           r.stderr.startswith("nestc: error: cannot write %s: No such file or directory" % nowhere), r.stderr)
    # an input that is not there
    r = nestc("weights", m, "--weights", os.path.join(tmp, "none.safetensors"), "-o", out)
    result("error.no_input", r.returncode == 1 and "none.safetensors: cannot open: No such file" in r.stderr and
           no_output(tmp, out), r.stderr)
    # an existing OUT is replaced only on success
    with open(out, "wb") as f:
        f.write(b"old")
    r = nestc("weights", m, "--weights", os.path.join(tmp, "bad_nan.safetensors"), "--format=q4_0", "-o", out)
    result("error.keeps_old_out", r.returncode == 1 and open(out, "rb").read() == b"old" and
           [f for f in os.listdir(tmp) if ".tmp." in f] == [], r.stderr)
    os.unlink(out)


def test_gpt2(tmp):
    small = ["-D", "L=2", "-D", "D=64", "-D", "H=2", "-D", "V=256", "-D", "CTX=64", "-D", "S=16"]
    # without its @gguf consts: nestc's own layout (llama.cpp's: tests/io/gguf_llama.py)
    gpt2 = os.path.join(tmp, "gpt2_plain.nest")
    with open(os.path.join(ROOT, "samples", "gpt2.nest")) as f:
        plain = re.sub(r'@gguf\([^)]*\)\s*', "", f.read())
    with open(gpt2, "w") as f:
        f.write(plain)
    st = os.path.join(tmp, "gpt2.safetensors")
    r = nestc("weights", gpt2, *small, "--random-weights", 1, "-o", st)
    vals = read_safetensors(st) if r.returncode == 0 else {}
    for fmt in ("q8_0", "q4_0"):
        out = os.path.join(tmp, "gpt2.%s.gguf" % fmt)
        r = nestc("weights", gpt2, *small, "--random-weights", 1, "--format=" + fmt, "-o", out)
        ok = r.returncode == 0 and not r.stderr
        if ok:
            g = parse_gguf(out)
            rep = nestc("report", gpt2, *small, "--weights-format=" + fmt).stdout
            fm = {}
            for line in rep.split("\n"):
                if ", blocks along axis " in line:
                    nm = line.strip().split(":")[0]
                    fm[nm] = (fmt, int(line.split("blocks along axis ")[1][0]))
            trans = g["kv"]["nestc.transposed"][1][1]
            ok = (len(g["tensors"]) == len(vals) and "h.0.attn.c_attn.weight" in trans and "wte.weight" not in trans
                  and fm.get("wte.weight") == (fmt, 1) and trans == [n for n in vals if fm.get(n, (0, 1))[1] == 0])
            bad = []
            for t in g["tensors"]:
                n = t["name"]
                if n in fm:
                    x = vals[n].T if fm[n][1] == 0 else vals[n]
                    want = b"".join(quant.quantize(FMT[fmt], r) for r in np.ascontiguousarray(x))
                else:
                    want = vals[n].tobytes()
                if t["data"] != want:
                    bad.append(n)
            ok = ok and not bad
        result("gpt2." + fmt, ok, r.stderr)
    # a file nestc wrote with transposed tensors is not converted again
    out = os.path.join(tmp, "again.gguf")
    src = os.path.join(tmp, "gpt2.q8_0.gguf")
    r = nestc("weights", gpt2, *small, "--weights", src, "--format=q4_0", "-o", out)
    result("gpt2.no_second_conversion", r.returncode == 1 and r.stderr.startswith(
        "nestc: error: %s: h.0.attn.c_attn.weight: the tensor is stored transposed (nestc.transposed); a file in weight "
        "formats is not converted again\n" % src) and "expected" not in r.stderr and no_output(tmp, out), r.stderr)
    # the same bytes on one thread and on three
    want = open(os.path.join(tmp, "gpt2.q4_0.gguf"), "rb").read()
    for n in ("1", "3"):
        out = os.path.join(tmp, "gpt2.t%s.gguf" % n)
        r = nestc("weights", gpt2, *small, "--random-weights", 1, "--format=q4_0", "-o", out,
                  env={"NESTRT_NUM_THREADS": n})
        result("gpt2.threads_" + n, r.returncode == 0 and open(out, "rb").read() == want, r.stderr)
    # converted on one thread and on three: the same bytes too
    for n in ("1", "3"):
        out = os.path.join(tmp, "gpt2.c%s.gguf" % n)
        r = nestc("weights", gpt2, *small, "--weights", st, "--format=q8_0", "-o", out, env={"NESTRT_NUM_THREADS": n})
        result("gpt2.convert_threads_" + n, r.returncode == 0 and
               open(out, "rb").read() == open(os.path.join(tmp, "gpt2.q8_0.gguf"), "rb").read(), r.stderr)


def main():
    global NESTC
    NESTC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "nestc"))
    tmp = tempfile.mkdtemp(prefix="nestc-gguf-write.")
    try:
        test_random(tmp)
        test_convert(tmp)
        test_errors(tmp)
        test_gpt2(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
