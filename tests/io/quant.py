#!/usr/bin/python3
"""The weight formats of runtime/quant.c (nestc build --weights-format) against a NumPy
implementation of their definitions, written here from the formulas alone (issue 36, ggml's
quantize_row_q8_0_ref / quantize_row_q4_0_ref / dequantize_row_*), byte for byte:

  bf16, f16  round to nearest, ties to even (f16: NumPy's cast; bf16: the nearer of the two
             neighbours, chosen in float64)
  q8_0       blocks of 32: f16 d, 32 int8. d = max|x| / 127, id = d ? 1/d : 0 (float32),
             q = roundf(x * id): halves away from zero
  q4_0       blocks of 32: f16 d, 16 bytes. m = the first element of largest magnitude (+0 for
             an all-zero block), d = m / -8, id = d ? 1/d : 0, q = min(15, trunc(x * id + 8.5)),
             element j in the low nibble of byte j, j + 16 in the high one
  a block where 1/d overflows float32 has every q 0 (ggml's x86 result of an undefined
  conversion); a weight means d * q (q8_0), d * (q - 8) (q4_0) with d widened from f16.

Every quantity ggml computes in float is a float32 here. The C side is tests/io/quant_driver.c,
compiled against libnestrt.a beside NESTC (argv[1]). Prints "ok NAME" or "FAIL NAME ...", then
"N passed, N failed".

    /usr/bin/python3 tests/io/quant.py build/nestc
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CC = os.environ.get("CC", "cc")
LINK_FLAGS = os.environ.get("NESTC_TEST_LDFLAGS", "").split()

F32, BF16, F16, Q8_0, Q4_0 = range(5)
NAMES = ["f32", "bf16", "f16", "q8_0", "q4_0"]
BLOCK = [1, 1, 1, 32, 32]
BLOCK_BYTES = [4, 2, 2, 34, 18]
f32 = np.float32

npass = nfail = 0
DRIVER = None


def result(name, ok, detail=""):
    global npass, nfail
    if ok:
        npass += 1
        print("ok %s" % name)
    else:
        nfail += 1
        print("FAIL %s %s" % (name, detail))


# ------------------------------------------------------------ the reference

def bits32(x):
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


def from_bits32(u):
    return np.ascontiguousarray(u, dtype=np.uint32).view(np.float32)


def f16_bits(x):
    """NumPy's float32 -> float16 cast: round to nearest even, inf past 65504 + 16."""
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float32).astype(np.float16).view(np.uint16)


def magnitude(b):
    """The value of float32 bit patterns b (no sign) in float64, with an exponent field of
    255 read as 2^128 (the power an unbounded exponent would give)."""
    b = b.astype(np.int64)
    e, m = b >> 23, (b & 0x7FFFFF).astype(np.float64)
    return np.where(e == 0, np.ldexp(m, -149), np.ldexp(m + 2.0 ** 23, (e - 150).astype(np.int32)))


def bf16_bits(x):
    """The bfloat16 nearest to each finite x, ties to the even one: of the two bfloat16
    values around |x| (its bits cut to 16, and the next), the nearer, in float64."""
    u = bits32(x).astype(np.int64)
    sign, a = u >> 31, u & 0x7FFFFFFF
    lo = a & 0x7FFF0000
    below, above = magnitude(lo), magnitude(lo + 0x10000)
    v = magnitude(a)
    up = (v - below > above - v) | ((v - below == above - v) & ((lo >> 16) & 1 == 1))
    h = (lo >> 16) + up.astype(np.int64)
    return (h | sign << 15).astype(np.uint16)


def round_away(v):
    """C's roundf: halves away from zero (in float64, where |v| + 0.5 is exact)."""
    v = v.astype(np.float64)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def q8_0(x):
    b = np.asarray(x, np.float32).reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    d = amax / f32(127)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        idv = np.where(d != 0, f32(1) / d, f32(0)).astype(np.float32)
        v = b * idv[:, None]
    finite = np.isfinite(idv)
    q = np.where(finite[:, None], round_away(np.where(finite[:, None], v, 0)), 0).astype(np.int64)
    assert np.all(np.abs(q) <= 127)
    out = np.zeros((b.shape[0], 34), np.uint8)
    out[:, 0:2] = f16_bits(d).astype("<u2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = (q & 0xFF).astype(np.uint8)
    return out.tobytes()


def q4_0(x):
    b = np.asarray(x, np.float32).reshape(-1, 32)
    a = np.abs(b)
    amax = a.max(axis=1)
    m = b[np.arange(b.shape[0]), np.argmax(a, axis=1)]   # argmax: the first of equals
    m = np.where(amax == 0, f32(0.0), m).astype(np.float32)
    d = m / f32(-8)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        idv = np.where(d != 0, f32(1) / d, f32(0)).astype(np.float32)
        s = b * idv[:, None] + f32(8.5)
    finite = np.isfinite(idv)
    t = np.trunc(np.where(finite[:, None], s, 0).astype(np.float64))
    assert np.all((t >= 0) & (t <= 16))
    q = np.where(finite[:, None], np.minimum(15, t), 0).astype(np.int64)
    out = np.zeros((b.shape[0], 18), np.uint8)
    out[:, 0:2] = f16_bits(d).astype("<u2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = (q[:, :16] | q[:, 16:] << 4).astype(np.uint8)
    return out.tobytes()


def quantize(fmt, x):
    x = np.asarray(x, np.float32)
    if fmt == F32:
        return x.astype("<f4").tobytes()
    if fmt == BF16:
        return bf16_bits(x).astype("<u2").tobytes()
    if fmt == F16:
        return f16_bits(x).astype("<u2").tobytes()
    return q8_0(x) if fmt == Q8_0 else q4_0(x)


def f16_value(h):
    return np.asarray(h, np.uint16).view(np.float16).astype(np.float32)


def dequantize(fmt, data, n):
    raw = np.frombuffer(data, np.uint8)
    if fmt == F32:
        return raw.view("<f4").astype(np.float32)
    if fmt == BF16:
        return from_bits32(raw.view("<u2").astype(np.uint32) << 16)
    if fmt == F16:
        return f16_value(raw.view("<u2"))
    blk = raw.reshape(-1, BLOCK_BYTES[fmt])
    d = f16_value(blk[:, :2].copy().view("<u2").reshape(-1))[:, None]
    if fmt == Q8_0:
        q = blk[:, 2:].view(np.int8).astype(np.float32)
    else:
        lo, hi = (blk[:, 2:] & 15).astype(np.int64), (blk[:, 2:] >> 4).astype(np.int64)
        q = (np.concatenate([lo, hi], axis=1) - 8).astype(np.float32)
    with np.errstate(invalid="ignore"):
        return (q * d).astype(np.float32).reshape(-1)


# ------------------------------------------------------------ the driver

def run(args, data):
    p = subprocess.run([DRIVER] + [str(a) for a in args], input=data, capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace").strip()


def c_quantize(fmt, x, n=None):
    x = np.asarray(x, np.float32).reshape(-1)
    return run(["q", fmt, len(x) if n is None else n], x.astype("<f4").tobytes())


def c_dequantize(fmt, data, n):
    rc, out, err = run(["d", fmt, n], data)
    if rc != 0:
        return None
    return np.frombuffer(out, "<f4").astype(np.float32)


def same_values(a, b):
    """Equal as floats, bit for bit; NaNs (from an inf d times 0) equal as NaNs."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if a.shape != b.shape:
        return False
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b)) and np.array_equal(bits32(a[~nan]), bits32(b[~nan])))


def first_diff(want, got, size):
    for i in range(min(len(want), len(got))):
        if want[i] != got[i]:
            return "byte %d (block %d): want %02x, got %02x" % (i, i // size, want[i], got[i])
    return "lengths %d and %d" % (len(want), len(got))


def check_bytes(name, fmt, x):
    """nestrt_quantize's bytes equal the reference's, and nestrt_dequantize's values the
    reference's dequantization of them."""
    x = np.asarray(x, np.float32).reshape(-1)
    want = quantize(fmt, x)
    rc, got, err = c_quantize(fmt, x)
    if rc != 0:
        result(name, False, "quantize failed (%d): %s" % (rc, err))
        return
    if got != want:
        result(name, False, first_diff(want, got, BLOCK_BYTES[fmt]))
        return
    back = c_dequantize(fmt, got, len(x))
    ref = dequantize(fmt, got, len(x))
    if back is None or not same_values(back, ref):
        result(name, False, "dequantized values differ")
        return
    result(name, True)


def check_error(name, fmt, x, want, n=None):
    rc, out, err = c_quantize(fmt, x, n)
    result(name, rc == 1 and err == "error: " + want, "want exit 1 'error: %s', got %d '%s'" % (want, rc, err))


# ------------------------------------------------------------ inputs

rng = np.random.default_rng(36)


def blocks(*rows):
    return np.concatenate([np.asarray(r, np.float32).reshape(-1) for r in rows])


def random_blocks(nblocks, scale):
    return (rng.standard_normal(nblocks * 32) * scale).astype(np.float32)


def info(lines):
    rc, out, err = run(["info"], ("\n".join(lines) + "\n").encode())
    return out.decode().split("\n")[:-1] if rc == 0 else None


def test_names():
    lines = []
    for f in range(-2, 7):
        lines += ["name %d" % f, "block %d" % f, "bbytes %d" % f]
    want = []
    for f in range(-2, 7):
        known = 0 <= f < 5
        want += [NAMES[f] if known else "(null)", str(BLOCK[f] if known else 0), str(BLOCK_BYTES[f] if known else 0)]
    got = info(lines)
    result("formats.names", got == want, "got %s" % got)
    # parse(name(f)) == f, and name(parse(s)) == s
    got = info(["parse %s" % s for s in NAMES] + ["name %d" % f for f in range(5)])
    result("formats.parse_round_trip", got == [str(f) for f in range(5)] + NAMES, "got %s" % got)
    probe = ["F32", "Q8_0", "q8", "q4_1", "q8_0x", "bf", "f64"]
    got = info(["parse %s" % s for s in probe] + ["parse"])
    result("formats.parse_unknown", got == ["-1"] * (len(probe) + 1), "got %s" % got)


def test_bytes():
    cases = [(F32, 0, 0), (F32, 3, 12), (BF16, 5, 10), (F16, 7, 14), (Q8_0, 32, 34), (Q8_0, 64, 68),
             (Q4_0, 32, 18), (Q4_0, 320, 180), (Q8_0, 0, 0),
             (Q8_0, 100, 0), (Q4_0, 33, 0), (Q8_0, 31, 0), (F32, -1, 0), (Q8_0, -32, 0), (5, 32, 0), (-1, 4, 0),
             (F32, 2 ** 61, 2 ** 63), (F32, 2 ** 62, 0), (F32, 2 ** 63 - 1, 0), (F16, 2 ** 63 - 1, 2 ** 64 - 2),
             (Q8_0, (2 ** 63 - 1) // 32 * 32, (2 ** 63 - 1) // 32 * 34), (Q4_0, (2 ** 63 - 1) // 32 * 32, (2 ** 63 - 1) // 32 * 18)]
    got = info(["bytes %d %d" % (f, n) for f, n, _ in cases]) or []
    bad = [(c, g) for c, g in zip(cases, got) if str(c[2]) != g]
    result("formats.bytes", len(got) == len(cases) and not bad, "wrong: %s" % bad)


def test_blocks(fmt):
    n = NAMES[fmt]
    check_bytes(n + ".random", fmt, blocks(*[random_blocks(16, s) for s in (1e-6, 1e-3, 0.05, 1, 30, 1e3, 1e5)]))
    check_bytes(n + ".integers", fmt, rng.integers(-127, 128, 32 * 32).astype(np.float32))
    zero = np.zeros(32, np.float32)
    negzero = -zero
    mixed = np.where(rng.random(32) < 0.5, zero, negzero).astype(np.float32)
    check_bytes(n + ".zero", fmt, blocks(zero, negzero, mixed, zero))
    tiny = (rng.standard_normal((4, 32)) * 1e-4).astype(np.float32)
    tiny[0, 7], tiny[1, 0], tiny[2, 31], tiny[3, 16] = 1e4, -1e4, 3e4, -0.5
    check_bytes(n + ".one_huge", fmt, tiny)
    # negative maxima, and a magnitude held by two elements of opposite signs (the first wins)
    neg = random_blocks(8, 1.0).reshape(8, 32)
    neg[np.arange(8), rng.integers(0, 32, 8)] = -9.0
    pair = random_blocks(4, 0.1).reshape(4, 32)
    pair[0, 3], pair[0, 10] = -5, 5
    pair[1, 3], pair[1, 10] = 5, -5
    pair[2, 0], pair[2, 31] = -2, 2
    pair[3, 16], pair[3, 15] = 7, -7
    check_bytes(n + ".negative_max", fmt, blocks(neg, pair))
    if fmt == Q8_0:
        # d = 1 (max 127) and d = 1/2 (max 63.5): x * id lands on halves exactly
        t1 = rng.integers(-127, 127, (8, 32)) + 0.5
        t1[:, 0] = 127
        t2 = (rng.integers(-127, 127, (8, 32)) + 0.5) / 2
        t2[:, 5] = -63.5
        t3 = np.array([[(j - 16.5) * 2.0 ** -10 for j in range(32)]])
        t3[0, 0] = 127 * 2.0 ** -10
        ties = blocks(t1, t2, t3)
    else:
        # d = 1 (m = -8) and d = -1/4 (m = 2): x * id + 8.5 lands on integers and halves
        t1 = (rng.integers(-16, 16, (8, 32)) / 2).astype(np.float64)
        t1[:, 3] = -8
        t2 = rng.integers(-8, 8, (8, 32)) / 4 + 1 / 8
        t2[:, 0] = 2
        t3 = np.clip(np.array([[(j - 16) / 2 + (j % 2) / 2 for j in range(32)]]), -8, 7.5)
        t3[0, 0] = -8
        ties = blocks(t1, t2, t3)
    check_bytes(n + ".ties", fmt, ties)
    # x * id within an ulp or two of a rounding boundary (q8_0: halves; q4_0: x * id + 8.5
    # an integer, where the float sum's rounding decides), and a float32 step either side
    nb = 128
    top = (rng.random(nb) * 100 + 1).astype(np.float32)
    if fmt == Q8_0:
        d = (top / f32(127)).astype(np.float64)
        k = rng.integers(-126, 126, (nb, 32)) + 0.5
    else:
        top = np.where(rng.random(nb) < 0.5, top, -top).astype(np.float32)
        top[:32] *= f32(1e-39)   # |d| below 2^-126: a float32 subnormal, rounded
        d = (top / f32(-8)).astype(np.float64)
        k = rng.integers(1, 17, (nb, 32)) - 8.5
    near = (k * d[:, None]).astype(np.float32)
    near[:, 0] = top
    up, down = near.copy(), near.copy()
    up[:, 1:] = np.nextafter(near[:, 1:], np.float32(np.inf))
    down[:, 1:] = np.nextafter(near[:, 1:], np.float32(-np.inf))
    check_bytes(n + ".near_boundaries", fmt, blocks(near, up, down))
    # subnormal floats: all of a block (d underflows float32, or 1/d overflows it) and a few
    # among normal ones; d in the float32 subnormals with a finite 1/d
    sub = (rng.standard_normal((7, 32)) * 1e-40).astype(np.float32)
    sub[2] *= 1e3                    # max ~ 1e-37: d ~ 1e-39, 1/d inf
    sub[3] = rng.standard_normal(32) * 4e-37
    sub[3, 0] = 1.4e-36              # d ~ 1.1e-38 < 2^-126: subnormal, 1/d finite
    sub[4, 1:5] = [1.0, -2.0, 1e-38, 3e-45]
    sub[5] = 0
    sub[5, 9] = 1e-45                # the smallest subnormal: d rounds to 0
    sub[6] = rng.standard_normal(32) * 1e-38
    sub[6, 20] = -5e-38              # q4_0's d ~ 6e-39: subnormal, 1/d finite
    check_bytes(n + ".subnormal", fmt, sub)
    # d below f16's range (0 or subnormal) and at and above its top (inf)
    mags = np.exp(rng.uniform(np.log(1e-10), np.log(1e-3), 24))
    under = random_blocks(24, 1.0).reshape(24, 32) * mags[:, None].astype(np.float32)
    k = 127 if fmt == Q8_0 else 8
    top = []
    for amax in (65504 * k, 65519 * k, 65520 * k, 65536 * k, 1e7, 1e20, 3.4e38):
        b = random_blocks(1, amax / 4).reshape(32).clip(-amax, amax)
        b[11] = -amax if fmt == Q4_0 and amax > 1e6 else amax
        top.append(b)
    check_bytes(n + ".d_underflow", fmt, under)
    # d = max|x| / 127 (or m / -8) exactly halfway between two f16 values: rounded to the
    # even one; and the float division itself, not a product with 1/127
    h = rng.integers(0x0001, 0x7BFF, 64).astype(np.uint16)
    mid = (f16_value(h).astype(np.float64) + f16_value(h + 1).astype(np.float64)) / 2
    top = mid * (127 if fmt == Q8_0 else -8)
    assert np.all(top.astype(np.float32).astype(np.float64) == top)
    tied = random_blocks(64, 1.0).reshape(64, 32) * (np.abs(top)[:, None] / 4).astype(np.float32)
    tied = np.clip(tied, -np.abs(top)[:, None] * 0.99, np.abs(top)[:, None] * 0.99)
    tied[np.arange(64), rng.integers(0, 32, 64)] = top
    check_bytes(n + ".d_ties", fmt, tied)
    check_bytes(n + ".d_overflow", fmt, blocks(*top))
    # many blocks in a row, each of its own scale, over most of float32's range
    scales = np.exp(rng.uniform(np.log(1e-42), np.log(1e35), 4000)).astype(np.float32)
    many = random_blocks(4000, 1.0).reshape(4000, 32) * scales[:, None]
    check_bytes(n + ".many_blocks", fmt, many)


def test_dequantize(fmt):
    """Raw blocks: every finite f16 d pattern among them, any q bytes; then d = inf."""
    n = NAMES[fmt]
    nb = 4096
    raw = rng.integers(0, 256, (nb, BLOCK_BYTES[fmt]), dtype=np.uint8)
    d = rng.integers(0, 0x7C00, nb, dtype=np.uint16) | (rng.integers(0, 2, nb, dtype=np.uint16) << 15)
    d[:64] = np.arange(64)           # zero and subnormals
    raw[:, :2] = d.astype("<u2").view(np.uint8).reshape(-1, 2)
    got = c_dequantize(fmt, raw.tobytes(), nb * 32)
    result(n + ".dequantize_raw", got is not None and same_values(got, dequantize(fmt, raw.tobytes(), nb * 32)))
    raw[:8, :2] = np.array([[0, 0x7C], [0, 0xFC]] * 4, np.uint8)
    raw[0, 2:] = 0x88 if fmt == Q4_0 else 0
    got = c_dequantize(fmt, raw[:8].tobytes(), 8 * 32)
    result(n + ".dequantize_inf_d", got is not None and same_values(got, dequantize(fmt, raw[:8].tobytes(), 8 * 32)))


def test_half_formats():
    for fmt in (BF16, F16):
        n = NAMES[fmt]
        lim = 65504.0 if fmt == F16 else 3.3e38
        x = blocks(*[rng.standard_normal(512) * s for s in (1e-30, 1e-6, 1e-3, 1, 1e3, 1e4)])
        x = x[np.abs(x) < lim]
        check_bytes(n + ".random", fmt, x)
        # exact midpoints between neighbours (ties), and a float32 ulp either side
        if fmt == F16:
            h = rng.integers(0, 0x7BFF, 4096).astype(np.uint16)
            lo, hi = f16_value(h).astype(np.float64), f16_value(h + 1).astype(np.float64)
        else:
            h = rng.integers(0, 0x7F7F, 4096).astype(np.uint32)
            lo = from_bits32(h << 16).astype(np.float64)
            hi = from_bits32((h + 1) << 16).astype(np.float64)
        mid = ((lo + hi) / 2).astype(np.float32)
        assert np.all(mid.astype(np.float64) == (lo + hi) / 2)
        sgn = np.where(rng.random(mid.size) < 0.5, 1, -1).astype(np.float32)
        ties = mid * sgn
        near = np.concatenate([np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
        check_bytes(n + ".ties", fmt, np.concatenate([ties, near]))
        # subnormals of float32 and of f16, and zeros
        sub = np.concatenate([from_bits32(rng.integers(0, 0x800000, 512, dtype=np.uint32)),
                              (rng.random(512) * 2.0 ** -14).astype(np.float32),
                              from_bits32(np.arange(0x33000000 - 3, 0x33000000 + 4, dtype=np.uint32)),
                              np.float32([0.0, -0.0, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -14])])
        sub = sub * np.where(rng.random(sub.size) < 0.5, 1, -1).astype(np.float32)
        check_bytes(n + ".subnormal", fmt, sub)
        # every high half of a float32 with low halves at and around the rounding point
        hiw = np.arange(65536, dtype=np.uint32) << 16
        lows = np.uint32([0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x7FFF, 0x8000, 0x8001, 0xFFFF]
                         + list(rng.integers(0, 65536, 5)))
        sweep = from_bits32((hiw[:, None] | lows[None, :]).reshape(-1))
        keep = np.isfinite(sweep)
        if fmt == F16:
            keep &= np.abs(sweep) < 65520
        else:
            keep &= bits32(np.abs(sweep)) < 0x7F7F8000
        check_bytes(n + ".sweep", fmt, sweep[keep])
        # the top of the range: the largest numbers that round to a finite value
        if fmt == F16:
            top = np.float32([65504, -65504, 65519.996, -65519.996, 65519, 65505, 65512, 65488])
        else:
            top = from_bits32(np.uint32([0x7F7F7FFF, 0xFF7F7FFF, 0x7F7F0000, 0x7F7E8000, 0x7F7F7FFF]))
        check_bytes(n + ".range_top", fmt, top)
    check_bytes("f32.random", F32, blocks(rng.standard_normal(1000) * 1e3, from_bits32(np.uint32([1, 0x807FFFFF])),
                                          np.float32([3.4028235e38, -3.4028235e38, 0.0, -0.0])))


def test_errors():
    nan, inf = np.float32(np.nan), np.float32(np.inf)
    for fmt in range(5):
        n = NAMES[fmt]
        for what, val, at in (("nan", nan, 37), ("inf", inf, 0), ("-inf", -inf, 63)):
            x = rng.standard_normal(64).astype(np.float32)
            x[at] = val
            check_error("%s.error_%s" % (n, what), fmt, x,
                        "element %d is %s: %s weights must be finite numbers" % (at, what, n))
        # in a later pass of the converter, and the first of two
        x = rng.standard_normal(4096).astype(np.float32)
        x[3000], x[2500] = nan, -inf
        check_error(n + ".error_first", fmt, x, "element 2500 is -inf: %s weights must be finite numbers" % n)
        check_bytes(n + ".empty", fmt, np.zeros(0, np.float32))
    for fmt in (Q8_0, Q4_0):
        n = NAMES[fmt]
        check_error(n + ".error_not_whole_blocks", fmt, np.ones(100, np.float32),
                    "100 elements is not a multiple of %s's block of 32" % n)
        check_error(n + ".error_31", fmt, np.ones(31, np.float32), "31 elements is not a multiple of %s's block of 32" % n)
    check_error("f32.error_negative_count", F32, np.zeros(0, np.float32), "-1 elements: a count cannot be negative", n=-1)
    check_error("formats.error_unknown", 5, np.zeros(32, np.float32), "unknown weight format 5")
    check_error("formats.error_unknown_negative", -1, np.zeros(32, np.float32), "unknown weight format -1")
    x = np.ones(40, np.float32)
    for what, at, val, shown in (("above", 9, 70000.0, "70000"), ("tie", 3, -65520.0, "-65520"),
                                 ("huge", 39, 1e30, "1.00000002e+30")):
        y = x.copy()
        y[at] = val
        y[at + 1:] = nan
        check_error("f16.error_range_%s" % what, F16, y,
                    "element %d is %s, beyond f16's range (|x| >= 65520 rounds to inf)" % (at, shown))
    y = x.copy()
    y[2] = from_bits32(np.uint32([0xFF7F8000]))[0]
    check_error("bf16.error_range", BF16, y,
                "element 2 is -3.39617753e+38, beyond bf16's range (|x| >= 3.39617753e+38 rounds to inf)")
    y[2] = np.float32(3.4028235e38)
    check_error("bf16.error_range_max", BF16, y,
                "element 2 is 3.40282347e+38, beyond bf16's range (|x| >= 3.39617753e+38 rounds to inf)")


def test_half_source():
    """nestrt__quantize_half: the bytes and errors of widening to f32 then nestrt_quantize."""
    n = 32 * 70
    for src_bf16 in (0, 1):
        sname = "bf16" if src_bf16 else "f16"
        if src_bf16:
            pos = rng.integers(0, 0x7F80, n).astype(np.uint16)
        else:
            pos = rng.integers(0, 0x7C00, n).astype(np.uint16)
        h = pos | (rng.integers(0, 2, n).astype(np.uint16) << 15)
        h[:40] = np.arange(40)
        for fmt in range(5):
            hs = h.copy()
            if src_bf16 and fmt == F16:          # keep within f16's range here
                hs = (hs & 0x8000) | np.minimum(hs & 0x7FFF, 0x477F).astype(np.uint16)
            wide = from_bits32(hs.astype(np.uint32) << 16) if src_bf16 else f16_value(hs)
            rc1, out1, err1 = c_quantize(fmt, wide)
            rc2, out2, err2 = run(["h", fmt, src_bf16, n], hs.astype("<u2").tobytes())
            result("half.%s_to_%s" % (sname, NAMES[fmt]), rc1 == 0 and rc2 == 0 and out1 == out2
                   and out1 == quantize(fmt, wide), "%d %d %s %s" % (rc1, rc2, err1, err2))
            bad = hs.copy()
            bad[1500] = 0x7FC0 if src_bf16 else 0x7E00
            bad[1000] = 0xFF80 if src_bf16 else 0xFC00
            if src_bf16 and fmt == F16:
                bad[700] = 0x4780          # 65536
            wide = from_bits32(bad.astype(np.uint32) << 16) if src_bf16 else f16_value(bad)
            rc1, out1, err1 = c_quantize(fmt, wide)
            rc2, out2, err2 = run(["h", fmt, src_bf16, n], bad.astype("<u2").tobytes())
            result("half.%s_to_%s_error" % (sname, NAMES[fmt]), rc1 == 1 and rc2 == 1 and err1 == err2
                   and ("element 700" if src_bf16 and fmt == F16 else "element 1000") in err1, "%s | %s" % (err1, err2))
        rc, out, err = run(["h", Q8_0, src_bf16, 100], bytes(200))
        result("half.%s_not_whole_blocks" % sname,
               rc == 1 and err == "error: 100 elements is not a multiple of q8_0's block of 32", err)


def build(tmp, lib):
    global DRIVER
    DRIVER = os.path.join(tmp, "quant_driver")
    cmd = [CC, "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "runtime"),
           os.path.join(HERE, "quant_driver.c"), lib, "-lm", "-lpthread", "-o", DRIVER] + LINK_FLAGS
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print("FAIL build %s\n%s" % (" ".join(cmd), p.stderr))
        return False
    return True


def main():
    nestc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "nestc")
    lib = os.path.join(os.path.dirname(os.path.abspath(nestc)), "libnestrt.a")
    tmp = tempfile.mkdtemp(prefix="nestc-quant.")
    try:
        if build(tmp, lib):
            test_names()
            test_bytes()
            for fmt in (Q8_0, Q4_0):
                test_blocks(fmt)
                test_dequantize(fmt)
            test_half_formats()
            test_errors()
            test_half_source()
        else:
            global nfail
            nfail += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
