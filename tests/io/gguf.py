#!/usr/bin/python3
"""GGUF files for tests: a writer (versions 2 and 3, every metadata type, every tensor
type nestc reads), ggml's reference quantizers for Q8_0 and Q4_0 (as issue 36 defines
them), random raw blocks for the other block types, and a NumPy dequantization of every
type written from ggml's block definitions (ggml-common.h) alone: the reference the
runtime's f32 values must equal bit for bit.

    /usr/bin/python3 tests/io/gguf.py DIR     writes DIR/all.gguf, DIR/all.v2.gguf, DIR/meta.gguf
                                              and DIR/NAME.npy, the f32 values of each tensor

Imported by tests/cli/run.py (nestc run, compiled builds, malformed files) and run by
tests/runtime/test_runtime.c (the C API, the metadata accessors) through the command
line above. Needs NumPy (Debian's /usr/bin/python3).
"""
import os
import struct
import sys

import numpy as np

# value types, as GGUF numbers them
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
          U64: "<Q", I64: "<q", F64: "<d"}

# tensor types: ggml number, elements per block, bytes per block
TYPES = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q4_1": (3, 32, 20), "q5_0": (6, 32, 22),
         "q5_1": (7, 32, 24), "q8_0": (8, 32, 34), "q4_K": (12, 256, 144), "q5_K": (13, 256, 176),
         "q6_K": (14, 256, 210), "i8": (24, 1, 1), "i16": (25, 1, 2), "i32": (26, 1, 4), "i64": (27, 1, 8),
         "f64": (28, 1, 8), "bf16": (30, 1, 2)}


def gstr(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    """The bytes of a value of type t; an array's v is (element type, [values])."""
    if t == STRING:
        return gstr(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def encode(kv=(), tensors=(), version=3, alignment=32, n_tensors=None, n_kv=None, magic=b"GGUF", tail=b""):
    """A GGUF file. kv: (key, type, value) or (key, type, value, raw bytes of the value);
    tensors: dicts with name, ne, type (a TYPES name or a number), data (bytes), and
    optionally offset (else laid out in order at the alignment) and n_dims. The data
    section starts at the next multiple of alignment; tail is appended."""
    out = bytearray(magic + struct.pack("<I", version))
    out += struct.pack("<QQ", len(tensors) if n_tensors is None else n_tensors, len(kv) if n_kv is None else n_kv)
    for e in kv:
        key, t, v = e[:3]
        out += gstr(key) + struct.pack("<I", t) + (e[3] if len(e) > 3 else value(t, v))
    off, offsets = 0, []
    for t in tensors:
        o = t.get("offset", off)
        offsets.append(o)
        if o < 1 << 32:
            off = max(off, (o + len(t["data"]) + alignment - 1) // alignment * alignment)
    for t, o in zip(tensors, offsets):
        ty = TYPES[t["type"]][0] if isinstance(t["type"], str) else t["type"]
        ne = list(t["ne"])
        out += gstr(t["name"]) + struct.pack("<I", t.get("n_dims", len(ne)))
        out += b"".join(struct.pack("<Q", d & (2 ** 64 - 1)) for d in ne)
        out += struct.pack("<IQ", ty, o)
    out += b"\0" * ((-len(out)) % alignment)
    data = bytearray()
    for t, o in zip(tensors, offsets):
        if o > 1 << 32:
            continue  # an offset past any file: nothing to place
        if len(data) < o + len(t["data"]):
            data += b"\0" * (o + len(t["data"]) - len(data))
        data[o:o + len(t["data"])] = t["data"]
    return bytes(out + data + tail)


# ----------------------------------------------------------------------------- quantizers

def f16(x):
    return np.asarray(x, np.float32).astype(np.float16)


def quantize_q8_0(x):
    """ggml's quantize_row_q8_0_ref: d = max|x| / 127, q = round(x / d) (half away from zero)."""
    x = np.asarray(x, np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = (x * idv[:, None]).astype(np.float32)
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)  # roundf
    out = np.zeros((x.shape[0], 34), np.uint8)
    out[:, 0:2] = f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def quantize_q4_0(x):
    """ggml's quantize_row_q4_0_ref: d = m / -8 (m the element of largest magnitude, the
    first such), q = min(15, (int8)(x / d + 8.5)); element j in the low nibble of byte j,
    j + 16 in its high nibble."""
    x = np.asarray(x, np.float32).reshape(-1, 32)
    m = x[np.arange(x.shape[0]), np.argmax(np.abs(x), axis=1)]
    d = (m / np.float32(-8)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = (x * idv[:, None] + np.float32(8.5)).astype(np.float32)
    q = np.minimum(15, np.trunc(v).astype(np.int8)).astype(np.uint8)
    out = np.zeros((x.shape[0], 18), np.uint8)
    out[:, 0:2] = f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def encode_q4_k(x):
    """Valid q4_K super-blocks for x (a plain min/max fit per sub-block, not ggml's search:
    a reader must take any valid block). Sub-block j of 32: scale (max - min) / 15 and
    min -min(0, min), as 6-bit multiples of the super-block's f16 d and dmin; q =
    round((x + dmin m) / (d sc)) in 0..15, sub-blocks 2c and 2c + 1 in the low and high
    nibbles of bytes 32c.."""
    x = np.asarray(x, np.float32).reshape(-1, 8, 32).astype(np.float64)
    lo = np.minimum(x.min(axis=2), 0)
    scale, mins = (x.max(axis=2) - lo) / 15, -lo
    d, dmin = f16(scale.max(axis=1) / 63), f16(mins.max(axis=1) / 63)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.clip(np.nan_to_num(np.rint(scale / d.astype(np.float64)[:, None])), 0, 63).astype(np.uint8)
        mn = np.clip(np.nan_to_num(np.rint(mins / dmin.astype(np.float64)[:, None])), 0, 63).astype(np.uint8)
        ds = d.astype(np.float64)[:, None] * sc
        dm = dmin.astype(np.float64)[:, None] * mn
        q = np.clip(np.nan_to_num(np.rint((x + dm[:, :, None]) / ds[:, :, None])), 0, 15).astype(np.uint8)
    out = np.zeros((x.shape[0], 144), np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = dmin.view(np.uint8).reshape(-1, 2)
    for j in range(8):   # get_scale_min_k4's inverse
        if j < 4:
            out[:, 4 + j] |= sc[:, j]
            out[:, 8 + j] |= mn[:, j]
        else:
            out[:, 8 + j] = (sc[:, j] & 15) | (mn[:, j] & 15) << 4
            out[:, j] |= (sc[:, j] >> 4) << 6
            out[:, 4 + j] |= (mn[:, j] >> 4) << 6
    q = q.reshape(-1, 4, 2, 32)
    out[:, 16:] = (q[:, :, 0] | q[:, :, 1] << 4).reshape(-1, 128)
    return out.tobytes()


def encode_q6_k(x):
    """Valid q6_K super-blocks for x (a plain fit, not ggml's search): sub-block j of 16 has
    scale max|x| / 31 as an int8 multiple of the f16 d = max scale / 127, q = round(x /
    (d sc)) + 32 in 0..63 laid out as ggml's ql, qh and scales."""
    x = np.asarray(x, np.float32).reshape(-1, 16, 16).astype(np.float64)
    scale = np.abs(x).max(axis=2) / 31
    d = f16(scale.max(axis=1) / 127)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.clip(np.nan_to_num(np.rint(scale / d.astype(np.float64)[:, None])), -128, 127).astype(np.int32)
        ds = d.astype(np.float64)[:, None] * sc
        q = (np.clip(np.nan_to_num(np.rint(x / ds[:, :, None])), -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 4, 32)
    out = np.zeros((x.shape[0], 210), np.uint8)
    for h in range(2):
        out[:, 64 * h:64 * h + 32] = (q[:, h, 0] & 15) | (q[:, h, 2] & 15) << 4
        out[:, 64 * h + 32:64 * h + 64] = (q[:, h, 1] & 15) | (q[:, h, 3] & 15) << 4
        out[:, 128 + 32 * h:160 + 32 * h] = (q[:, h, 0] >> 4) | (q[:, h, 1] >> 4) << 2 | (q[:, h, 2] >> 4) << 4 | \
            (q[:, h, 3] >> 4) << 6
    out[:, 192:208] = sc.astype(np.int8).view(np.uint8)
    out[:, 208:210] = d.view(np.uint8).reshape(-1, 2)
    return out.tobytes()


def random_blocks(type_name, nblocks, rng):
    """Random bytes with finite f16 scales where the block keeps them."""
    _, _, size = TYPES[type_name]
    b = rng.integers(0, 256, (nblocks, size), dtype=np.uint8)
    scales = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0], "q4_K": [0, 2],
              "q5_K": [0, 2], "q6_K": [208]}[type_name]
    for at in scales:
        s = f16(rng.standard_normal(nblocks) * 0.05)
        b[:, at:at + 2] = s.view(np.uint8).reshape(-1, 2)
    return b.tobytes()


# ----------------------------------------------------------------------------- dequantization

def _half(b, at):
    return b[:, at:at + 2].copy().view(np.float16).astype(np.float32)[:, 0]


def _scale_min_k4(s):
    """The 8 six-bit scales and mins of a k-quant super-block from its 12 bytes (s: [nb, 12])."""
    s = s.astype(np.int32)
    sc = np.zeros((s.shape[0], 8), np.int32)
    mn = np.zeros((s.shape[0], 8), np.int32)
    for j in range(8):
        if j < 4:
            sc[:, j] = s[:, j] & 63
            mn[:, j] = s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 15) | ((s[:, j - 4] >> 6) << 4)
            mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc, mn


def dequantize(type_name, raw, n):
    """The f32 values of n elements stored as type_name in raw (bytes), as ggml gives them."""
    f = np.float32
    if type_name in ("f32", "i32", "i64", "f64", "i8", "i16"):
        return np.frombuffer(raw, {"f32": "<f4", "i32": "<i4", "i64": "<i8", "f64": "<f8", "i8": "i1",
                                   "i16": "<i2"}[type_name], n)
    if type_name == "f16":
        return np.frombuffer(raw, "<f2", n).astype(f)
    if type_name == "bf16":
        return (np.frombuffer(raw, "<u2", n).astype(np.uint32) << 16).view(f)
    _, block, size = TYPES[type_name]
    b = np.frombuffer(raw, np.uint8, n // block * size).reshape(-1, size)
    if type_name in ("q4_0", "q4_1", "q5_0", "q5_1"):
        # 32 elements: element j in the low nibble of qs[j], j + 16 in the high nibble;
        # q5's fifth bit of element e is bit e of the 32-bit qh
        d = _half(b, 0)
        m = _half(b, 2) if type_name in ("q4_1", "q5_1") else None
        qs_at = {"q4_0": 2, "q4_1": 4, "q5_0": 6, "q5_1": 8}[type_name]
        qs = b[:, qs_at:qs_at + 16].astype(np.int32)
        q = np.concatenate([qs & 15, qs >> 4], axis=1)
        if type_name in ("q5_0", "q5_1"):
            qh_at = 2 if type_name == "q5_0" else 4
            qh = b[:, qh_at:qh_at + 4].copy().view("<u4")[:, 0].astype(np.int64)
            q = q | (((qh[:, None] >> np.arange(32)) & 1) << 4).astype(np.int32)
        if type_name == "q4_0":
            y = (q - 8).astype(f) * d[:, None]
        elif type_name == "q5_0":
            y = (q - 16).astype(f) * d[:, None]
        else:
            y = q.astype(f) * d[:, None] + m[:, None]
        return y.astype(f).reshape(-1)
    if type_name == "q8_0":
        return (b[:, 2:].view(np.int8).astype(f) * _half(b, 0)[:, None]).astype(f).reshape(-1)
    if type_name in ("q4_K", "q5_K"):
        # 8 sub-blocks of 32: sub-block 2c the low nibbles of qs[32c:32c+32], 2c+1 the high
        # ones; q5_K's fifth bit of sub-block s, element l is bit s of qh[l]
        d, dmin = _half(b, 0), _half(b, 2)
        sc, mn = _scale_min_k4(b[:, 4:16])
        qs_at = 16 if type_name == "q4_K" else 48
        qs = b[:, qs_at:qs_at + 128].astype(np.int32).reshape(-1, 4, 32)
        q = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 8, 32)
        if type_name == "q5_K":
            qh = b[:, 16:48].astype(np.int32)
            q = q + ((qh[:, None, :] >> np.arange(8)[None, :, None]) & 1) * 16
        d1 = (d[:, None] * sc.astype(f)).astype(f)
        m1 = (dmin[:, None] * mn.astype(f)).astype(f)
        return (d1[:, :, None] * q.astype(f) - m1[:, :, None]).astype(f).reshape(-1)
    if type_name == "q6_K":
        # two halves of 128: ql[64h:64h+64], qh[32h:32h+32], scales[8h:8h+8]; element
        # 32g + l (g = 0..3, l < 32) takes a nibble of ql[l + 32 (g & 1)] (low for g < 2)
        # and bits 2g, 2g+1 of qh[l]; scale scales[8h + 2g + l // 16]
        d = _half(b, 208)
        ql = b[:, 0:128].astype(np.int32).reshape(-1, 2, 64)
        qh = b[:, 128:192].astype(np.int32).reshape(-1, 2, 32)
        sc = b[:, 192:208].view(np.int8).astype(f).reshape(-1, 2, 8)
        y = np.zeros((b.shape[0], 2, 128), f)
        for g in range(4):
            low = ql[:, :, 32 * (g & 1):32 * (g & 1) + 32]
            nib = low & 15 if g < 2 else low >> 4
            q = (nib | (((qh >> (2 * g)) & 3) << 4)) - 32
            s = np.repeat(sc[:, :, 2 * g:2 * g + 2], 16, axis=2)
            y[:, :, 32 * g:32 * g + 32] = ((d[:, None, None] * s).astype(f) * q.astype(f)).astype(f)
        return y.reshape(-1)
    raise ValueError(type_name)


# ----------------------------------------------------------------------------- the test files

# every metadata type, arrays of each (strings and nested arrays too)
META = [
    ("general.architecture", STRING, "llama"),
    ("general.name", STRING, "tiny \u00e9\u4e2d\U0001F600"),
    ("t.u8", U8, 200), ("t.i8", I8, -100), ("t.u16", U16, 60000), ("t.i16", I16, -30000),
    ("t.u32", U32, 4000000000), ("t.i32", I32, -2000000000), ("t.f32", F32, 0.1), ("t.bool", BOOL, 1),
    ("t.u64", U64, 2 ** 64 - 1), ("t.i64", I64, -(2 ** 62)), ("t.f64", F64, 1e300),
    ("t.empty", STRING, ""),
    ("t.nul", STRING, "a\0b"),
    ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<unk>", "\u2581the", "", "\u00e9", "<0x0A>"])),
    ("tokenizer.ggml.scores", ARRAY, (F32, [0.0, -1.5, -2.25, 3.0, -0.5])),
    ("tokenizer.ggml.token_type", ARRAY, (I32, [2, 1, 1, 1, 6])),
    ("t.a.u8", ARRAY, (U8, [0, 255])), ("t.a.i8", ARRAY, (I8, [-128, 127])), ("t.a.u16", ARRAY, (U16, [65535])),
    ("t.a.i16", ARRAY, (I16, [-32768, 1])), ("t.a.u32", ARRAY, (U32, [1, 2, 3])),
    ("t.a.bool", ARRAY, (BOOL, [1, 0, 1])), ("t.a.u64", ARRAY, (U64, [2 ** 63])),
    ("t.a.i64", ARRAY, (I64, [-1, 2 ** 63 - 1])), ("t.a.f64", ARRAY, (F64, [0.5, -0.25])),
    ("t.a.empty", ARRAY, (F32, [])),
    ("t.a.nested", ARRAY, (ARRAY, [(I32, [1, 2]), (STRING, ["x"]), (ARRAY, [(U8, [7])])])),
    ("llama.block_count", U32, 2),
    ("llama.rope.freq_base", F32, 10000.0),
]

SHAPES = {"f32": [5, 3], "f16": [16, 4], "bf16": [8, 2], "q8_0": [64, 3], "q4_0": [64, 3], "q4_1": [32, 2],
          "q5_0": [96, 2], "q5_1": [32, 3], "q4_K": [256, 2], "q5_K": [512, 1], "q6_K": [256, 3],
          "i32": [3], "i64": [2, 2], "f64": [3, 1], "i8": [4], "i16": [2]}


def tensors(seed=0):
    """One tensor of every type, named w_TYPE (plus w_q8_0_ref and w_q4_0_ref quantized
    from known floats), and each one's f32 (or held) values, shaped [ne[1], ne[0]]."""
    rng = np.random.default_rng(seed)
    out, want = [], {}
    for name, ne in SHAPES.items():
        n = int(np.prod(ne))
        _, block, size = TYPES[name]
        if name == "f32":
            raw = rng.standard_normal(n).astype("<f4").tobytes()
        elif name == "f64":
            raw = rng.standard_normal(n).astype("<f8").tobytes()
        elif name in ("i32", "i64", "i8", "i16"):
            raw = rng.integers(-100, 100, n).astype({"i32": "<i4", "i64": "<i8", "i8": "i1", "i16": "<i2"}[name]).tobytes()
        elif name == "f16":
            bits = rng.integers(0, 0x7c00, n).astype(np.uint16) | (rng.integers(0, 2, n) << 15).astype(np.uint16)
            raw = bits.astype("<u2").tobytes()  # every finite half, subnormals included
        elif name == "bf16":
            raw = (rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            raw = random_blocks(name, n // block, rng)
        out.append({"name": "w_" + name, "ne": ne, "type": name, "data": raw})
        want["w_" + name] = dequantize(name, raw, n).reshape(list(reversed(ne)))
    x = (rng.standard_normal(3 * 64) * np.repeat([0.01, 1.0, 300.0], 64)).astype(np.float32)
    x[5] = 0  # a block of zeros, and one with a huge element
    x[64:96] = 0
    x[150] = 1e4
    for name, q in (("q8_0", quantize_q8_0), ("q4_0", quantize_q4_0)):
        raw = q(x)
        out.append({"name": "w_%s_ref" % name, "ne": [64, 3], "type": name, "data": raw})
        want["w_%s_ref" % name] = dequantize(name, raw, 192).reshape(3, 64)
    return out, want


def model(want):
    """A Nest model whose params are the f32 tensors of want and whose entry returns them
    (times 1.0), in the order of want."""
    names = [k for k, v in want.items() if v.dtype == np.float32]
    lines = ["param %s: f32[%s]" % (k, ", ".join(map(str, want[k].shape))) for k in names]
    ret = ", ".join("f32[%s]" % ", ".join(map(str, want[k].shape)) for k in names)
    body = ", ".join("%s * s" % k for k in names)
    return names, "\n".join(lines) + "\nexport fn forward(s: f32) -> (%s) {\n  return %s\n}\n" % (ret, body)


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    ts, want = tensors()
    for v in (3, 2):
        with open(os.path.join(d, "all.gguf" if v == 3 else "all.v2.gguf"), "wb") as f:
            f.write(encode(META, ts, version=v))
    with open(os.path.join(d, "meta.gguf"), "wb") as f:
        f.write(encode(META + [("general.alignment", U32, 64)], ts[:1], alignment=64))
    for k, v in want.items():
        np.save(os.path.join(d, k + ".npy"), v)


if __name__ == "__main__":
    main()
