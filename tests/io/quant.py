#!/usr/bin/python3
"""The weight formats of runtime/quant.c (nestc build --weights-format) against a NumPy
implementation of their definitions, written here from the formulas alone (issue 36, ggml's
quantize_row_q8_0_ref / quantize_row_q4_0_ref / quantize_row_q4_K_ref / quantize_row_q6_K_ref /
dequantize_row_*), byte for byte:

  bf16, f16  round to nearest, ties to even (f16: NumPy's cast; bf16: the nearer of the two
             neighbours, chosen in float64)
  q8_0       blocks of 32: f16 d, 32 int8. d = max|x| / 127, id = d ? 1/d : 0 (float32),
             q = roundf(x * id): halves away from zero
  q4_0       blocks of 32: f16 d, 16 bytes. m = the first element of largest magnitude (+0 for
             an all-zero block), d = m / -8, id = d ? 1/d : 0, q = min(15, trunc(x * id + 8.5)),
             element j in the low nibble of byte j, j + 16 in the high one
  a block where 1/d overflows float32 has every q 0 (ggml's x86 result of an undefined
  conversion); a weight means d * q (q8_0), d * (q - 8) (q4_0) with d widened from f16.
  q4_k       super-blocks of 256, 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit sc and m for
             each 32 (get_scale_min_k4's packing), 128 bytes: byte 32c + l holds element
             64c + l (low nibble) and 64c + 32 + l (high). Each 32 gets a scale and a min from
             make_qkx2_quants (nmax 15, rmin -1, rdelta 0.1, nstep 20, weights
             sqrt(mean x^2) + |x|); sc, m = nearest_int(63 * scale / max scale) (the same for
             mins), d = max scale / 63, dmin = max min / 63; then q = nearest_int((x + dmin * m)
             / (d * sc)) in 0..15, except where d * sc is 0 (q stays make_qkx2_quants's).
             A weight means (d * sc) * q - (dmin * m).
  q6_k       super-blocks of 256, 210 bytes: 128 bytes of low nibbles, 64 of 2-bit highs, 16
             int8 sc (one for each 16), f16 d last. Each 16 gets a scale from make_qx_quants
             (nmax 32, rmse_type 1: weights x^2; 0 and q 0 below GROUP_MAX_EPS 1e-15); the
             scale of largest magnitude s gives iscale = -128 / s, d = 1 / iscale, sc =
             min(127, nearest_int(iscale * scale)); q - 32 = nearest_int(x / (d * sc)) in
             -32..31, except where d * sc is 0. A block whose |s| < 1e-15 is all zero bytes.
             A weight means (d * sc) * (q - 32).
  nearest_int is ggml's: the low bits of x + 1.5 * 2^23, ties to even. Both follow ggml's C
  statement for statement, overflows and NaNs included (of x86's default NaN, which 0 * inf,
  inf - inf and 0 / 0 give, nearest_int is 0).

Every quantity ggml computes in float is a float32 here, each operation in C's order (NumPy
float32 arrays; a Python int or float with a float32 scalar would give a float64, hence the
f32(...) constants). The C side is tests/io/quant_driver.c, compiled against libnestrt.a beside
NESTC (argv[1]). Prints "ok NAME" or "FAIL NAME ...", then "N passed, N failed".

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

F32, BF16, F16, Q8_0, Q4_0, Q4_K, Q6_K = range(7)
NFORMATS = 7
NAMES = ["f32", "bf16", "f16", "q8_0", "q4_0", "q4_k", "q6_k"]
BLOCK = [1, 1, 1, 32, 32, 256, 256]
BLOCK_BYTES = [4, 2, 2, 34, 18, 144, 210]
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


# ------------------------------------------------------------ the k-quants
# ggml's make_qkx2_quants, make_qx_quants (rmse_type 1) and the two block quantizers,
# statement for statement. Each float is a float32 and each C expression is evaluated in
# C's order, one rounding per operation; the work is vectorised across sub-blocks (every
# lane takes the same steps), and a sum over a sub-block's elements is a loop over them, as
# the C sum is. A branch of C is computed on every lane and selected with np.where.

def nearest(v):
    """ggml's nearest_int: the low 23 bits of v + 1.5 * 2^23, less 2^22 (ties to even for
    |v| <= 4194303; beyond that, and for inf and NaN, whatever those bits say, as in C)."""
    s = np.asarray(v, np.float32) + f32(12582912)
    return (bits32(s) & 0x7FFFFF).astype(np.int64) - 0x400000


def qkx2(x, w, nmax, rmin, rdelta, nstep):
    """make_qkx2_quants for each row of x (weights w): the scale, the min to subtract (its
    -min) and L in 0..nmax."""
    n = x.shape[1]
    lo, hi = x[:, 0].copy(), x[:, 0].copy()
    sum_w = w[:, 0].copy()
    sum_x = sum_w * x[:, 0]
    for i in range(1, n):
        lo = np.where(x[:, i] < lo, x[:, i], lo)
        hi = np.where(x[:, i] > hi, x[:, i], hi)
        sum_w = sum_w + w[:, i]
        sum_x = sum_x + w[:, i] * x[:, i]
    lo = np.where(lo > 0, f32(0), lo)
    flat = hi == lo                      # the early return: L all 0, scale 0
    iscale = f32(nmax) / (hi - lo)
    scale = f32(1) / iscale
    L = np.clip(nearest(iscale[:, None] * (x - lo[:, None])), 0, nmax)
    best = np.zeros(len(x), np.float32)
    for i in range(n):
        diff = scale * L[:, i].astype(np.float32) + lo - x[:, i]
        best = best + w[:, i] * (diff * diff)
    for step in range(nstep + 1):
        # lo is the best min so far: later trials start from it, as ggml's do
        iscale = (rmin + rdelta * f32(step) + f32(nmax)) / (hi - lo)
        aux = np.clip(nearest(iscale[:, None] * (x - lo[:, None])), 0, nmax)
        la = aux.astype(np.float32)
        sum_l = np.zeros(len(x), np.float32)
        sum_l2, sum_xl = sum_l.copy(), sum_l.copy()
        for i in range(n):
            sum_l = sum_l + w[:, i] * la[:, i]
            sum_l2 = sum_l2 + w[:, i] * la[:, i] * la[:, i]
            sum_xl = sum_xl + w[:, i] * la[:, i] * x[:, i]
        D = sum_w * sum_l2 - sum_l * sum_l
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
        pos = this_min > 0
        this_min = np.where(pos, f32(0), this_min)
        this_scale = np.where(pos, sum_xl / sum_l2, this_scale)
        err = np.zeros(len(x), np.float32)
        for i in range(n):
            diff = this_scale * la[:, i] + this_min - x[:, i]
            err = err + w[:, i] * (diff * diff)
        take = (D > 0) & (err < best)
        L = np.where(take[:, None], aux, L)
        best = np.where(take, err, best)
        scale = np.where(take, this_scale, scale)
        lo = np.where(take, this_min, lo)
    L = np.where(flat[:, None], 0, L)
    scale = np.where(flat, f32(0), scale)
    return scale, -lo, L


def qx(x, nmax):
    """make_qx_quants(n, nmax, x, L, 1, NULL) for each row of x: the scale and L (l + nmax;
    0 for a row below GROUP_MAX_EPS)."""
    n = x.shape[1]
    amax = np.zeros(len(x), np.float32)
    top = amax.copy()                    # the first element of largest magnitude
    for i in range(n):
        ax = np.abs(x[:, i])
        more = ax > amax
        amax = np.where(more, ax, amax)
        top = np.where(more, x[:, i], top)
    zero = amax < f32(1e-15)

    def trial(iscale):
        l = np.clip(nearest(iscale[:, None] * x), -nmax, nmax - 1)
        lf = l.astype(np.float32)
        sumlx = np.zeros(len(x), np.float32)
        suml2 = sumlx.copy()
        for i in range(n):
            w = x[:, i] * x[:, i]
            sumlx = sumlx + w * x[:, i] * lf[:, i]
            suml2 = suml2 + w * lf[:, i] * lf[:, i]
        return l, sumlx, suml2

    L, sumlx, suml2 = trial(f32(-nmax) / top)
    scale = np.where(suml2 != 0, sumlx / suml2, f32(0))
    best = scale * sumlx
    for step in range(-9, 10):
        if step == 0:
            continue
        l, sumlx, suml2 = trial(-(f32(nmax) + f32(0.1) * f32(step)) / top)
        take = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        L = np.where(take[:, None], l, L)
        scale = np.where(take, sumlx / suml2, scale)
        best = np.where(take, scale * sumlx, best)
    return np.where(zero, f32(0), scale), np.where(zero[:, None], 0, L + nmax)


def pack_scale_min_k4(ls, lm):
    """q4_K's 12 bytes from 8 6-bit scales and mins (rows of ls, lm), as
    quantize_row_q4_K_ref packs them: the inverse of get_scale_min_k4."""
    sc = np.zeros((len(ls), 12), np.int64)
    for j in range(8):
        if j < 4:
            sc[:, j] = ls[:, j]
            sc[:, j + 4] = lm[:, j]
        else:
            sc[:, j + 4] = (ls[:, j] & 15) | (lm[:, j] & 15) << 4
            sc[:, j - 4] |= (ls[:, j] >> 4) << 6
            sc[:, j] |= (lm[:, j] >> 4) << 6
    return sc.astype(np.uint8)


def get_scale_min_k4(j, q):
    """Sub-block j's scale and min out of rows of 12 bytes q."""
    q = q.astype(np.int64)
    if j < 4:
        return q[:, j] & 63, q[:, j + 4] & 63
    return (q[:, j + 4] & 15) | (q[:, j - 4] >> 6) << 4, (q[:, j + 4] >> 4) | (q[:, j] >> 6) << 4


def f16_le(h):
    return np.asarray(h, np.uint16).astype("<u2").view(np.uint8).reshape(-1, 2)


def q4_k_group(xs):
    """make_qkx2_quants as quantize_row_q4_K_ref calls it, for rows of 32: weights
    sqrt(mean x^2) + |x|, nmax 15, rmin -1, rdelta 0.1, nstep 20."""
    sum_x2 = np.zeros(len(xs), np.float32)
    for l in range(32):
        sum_x2 = sum_x2 + xs[:, l] * xs[:, l]
    av_x = np.sqrt(sum_x2 / f32(32))
    w = av_x[:, None] + np.abs(xs)
    return qkx2(xs, w, 15, f32(-1), f32(0.1), 20)


def q4_k(x):
    b = np.asarray(x, np.float32).reshape(-1, 256)
    nb = len(b)
    scales, mins, L = q4_k_group(b.reshape(-1, 32))
    scales, mins, L = scales.reshape(nb, 8), mins.reshape(nb, 8), L.reshape(nb, 8, 32)
    max_scale, max_min = np.zeros(nb, np.float32), np.zeros(nb, np.float32)
    for j in range(8):
        max_scale = np.where(scales[:, j] > max_scale, scales[:, j], max_scale)
        max_min = np.where(mins[:, j] > max_min, mins[:, j], max_min)
    inv_scale = np.where(max_scale > 0, f32(63) / max_scale, f32(0))
    inv_min = np.where(max_min > 0, f32(63) / max_min, f32(0))
    # ggml keeps nearest_int's low byte (a uint8_t), then caps it at 63
    ls = np.minimum(63, nearest(inv_scale[:, None] * scales) & 0xFF)
    lm = np.minimum(63, nearest(inv_min[:, None] * mins) & 0xFF)
    sc = pack_scale_min_k4(ls, lm)
    dh, mh = f16_bits(max_scale / f32(63)), f16_bits(max_min / f32(63))
    d, dmin = f16_value(dh), f16_value(mh)
    for j in range(8):
        s, m = get_scale_min_k4(j, sc)
        dj = d * s.astype(np.float32)
        dm = dmin * m.astype(np.float32)
        l = np.clip(nearest((b[:, 32 * j:32 * j + 32] + dm[:, None]) / dj[:, None]), 0, 15)
        # a sub-block whose d * sc is 0 keeps make_qkx2_quants's L (NaN is not 0)
        L[:, j] = np.where((dj != 0)[:, None], l, L[:, j])
    L = L.reshape(nb, 4, 64)
    out = np.zeros((nb, 144), np.uint8)
    out[:, 0:2], out[:, 2:4], out[:, 4:16] = f16_le(dh), f16_le(mh), sc
    out[:, 16:] = (L[:, :, :32] | L[:, :, 32:] << 4).reshape(nb, 128).astype(np.uint8)
    return out.tobytes()


def q6_k(x):
    b = np.asarray(x, np.float32).reshape(-1, 256)
    nb = len(b)
    scales, L = qx(b.reshape(-1, 16), 32)
    scales, L = scales.reshape(nb, 16), L.reshape(nb, 16, 16)
    max_scale, max_abs = np.zeros(nb, np.float32), np.zeros(nb, np.float32)
    for ib in range(16):
        a = np.abs(scales[:, ib])
        more = a > max_abs
        max_abs = np.where(more, a, max_abs)
        max_scale = np.where(more, scales[:, ib], max_scale)
    zero = max_abs < f32(1e-15)          # the whole block 0, d 0
    iscale = f32(-128) / max_scale
    dh = f16_bits(f32(1) / iscale)
    sc = np.minimum(127, nearest(iscale[:, None] * scales))
    sc = ((sc + 128) & 0xFF) - 128       # stored as int8_t
    d = f16_value(dh)
    for j in range(16):
        dj = d * sc[:, j].astype(np.float32)
        l = np.clip(nearest(b[:, 16 * j:16 * j + 16] / dj[:, None]), -32, 31) + 32
        L[:, j] = np.where((dj != 0)[:, None], l, L[:, j])
    L = L.reshape(nb, 2, 4, 32)          # halves of 128, quarters of 32
    out = np.zeros((nb, 210), np.uint8)
    ql = (L[:, :, [0, 1]] & 15) | (L[:, :, [2, 3]] & 15) << 4      # (nb, 2, 2, 32)
    qh = L[:, :, 0] >> 4 | (L[:, :, 1] >> 4) << 2 | (L[:, :, 2] >> 4) << 4 | (L[:, :, 3] >> 4) << 6
    out[:, :128] = ql.reshape(nb, 128)
    out[:, 128:192] = qh.reshape(nb, 64)
    out[:, 192:208] = (sc & 0xFF).astype(np.uint8)
    out[:, 208:210] = f16_le(dh)
    out[zero] = 0
    return out.tobytes()


def quantize(fmt, x):
    x = np.asarray(x, np.float32)
    if fmt == F32:
        return x.astype("<f4").tobytes()
    if fmt == BF16:
        return bf16_bits(x).astype("<u2").tobytes()
    if fmt == F16:
        return f16_bits(x).astype("<u2").tobytes()
    if fmt in (Q4_K, Q6_K):
        with np.errstate(all="ignore"):    # ggml's own overflows and 0/0s, bit for bit
            return q4_k(x) if fmt == Q4_K else q6_k(x)
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
    if fmt in (Q4_K, Q6_K):
        with np.errstate(invalid="ignore"):
            return (dequantize_q4_k if fmt == Q4_K else dequantize_q6_k)(blk)
    d = f16_value(blk[:, :2].copy().view("<u2").reshape(-1))[:, None]
    if fmt == Q8_0:
        q = blk[:, 2:].view(np.int8).astype(np.float32)
    else:
        lo, hi = (blk[:, 2:] & 15).astype(np.int64), (blk[:, 2:] >> 4).astype(np.int64)
        q = (np.concatenate([lo, hi], axis=1) - 8).astype(np.float32)
    with np.errstate(invalid="ignore"):
        return (q * d).astype(np.float32).reshape(-1)


def dequantize_q4_k(blk):
    """dequantize_row_q4_K: (d * sc) * q - (dmin * m), each product and the difference
    rounded to float32."""
    d = f16_value(blk[:, 0:2].copy().view("<u2").reshape(-1))
    dmin = f16_value(blk[:, 2:4].copy().view("<u2").reshape(-1))
    q = blk[:, 16:].reshape(-1, 4, 32).astype(np.int64)
    q = np.stack([q & 15, q >> 4], axis=2).reshape(-1, 8, 32)   # sub-block 2c, 2c + 1
    y = np.zeros(q.shape, np.float32)
    for j in range(8):
        s, m = get_scale_min_k4(j, blk[:, 4:16])
        dj, mj = d * s.astype(np.float32), dmin * m.astype(np.float32)
        y[:, j] = dj[:, None] * q[:, j].astype(np.float32) - mj[:, None]
    return y.reshape(-1)


def dequantize_q6_k(blk):
    """dequantize_row_q6_K: (d * sc) * (q - 32), rounded to float32 twice."""
    d = f16_value(blk[:, 208:210].copy().view("<u2").reshape(-1))
    ql = blk[:, :128].reshape(-1, 2, 2, 32).astype(np.int64)
    qh = blk[:, 128:192].reshape(-1, 2, 1, 32).astype(np.int64)
    lo = np.concatenate([ql & 15, ql >> 4], axis=2)              # quarters 0 1 2 3 of each half
    hi = (qh >> (2 * np.arange(4))[None, None, :, None]) & 3
    q = (lo | hi << 4).reshape(-1, 16, 16) - 32                   # by scale: 16 of 16
    sc = blk[:, 192:208].view(np.int8).astype(np.float32)
    return ((d[:, None] * sc)[:, :, None] * q.astype(np.float32)).astype(np.float32).reshape(-1)


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
    for f in range(-2, NFORMATS + 2):
        lines += ["name %d" % f, "block %d" % f, "bbytes %d" % f]
    want = []
    for f in range(-2, NFORMATS + 2):
        known = 0 <= f < NFORMATS
        want += [NAMES[f] if known else "(null)", str(BLOCK[f] if known else 0), str(BLOCK_BYTES[f] if known else 0)]
    got = info(lines)
    result("formats.names", got == want, "got %s" % got)
    # parse(name(f)) == f, and name(parse(s)) == s
    got = info(["parse %s" % s for s in NAMES] + ["name %d" % f for f in range(NFORMATS)])
    result("formats.parse_round_trip", got == [str(f) for f in range(NFORMATS)] + NAMES, "got %s" % got)
    # names are exact: not GGUF's "q4_K", nor llama.cpp's file types
    probe = ["F32", "Q8_0", "q8", "q4_1", "q8_0x", "bf", "f64", "q4_K", "Q6_K", "q5_k", "q4_k_m", "q6"]
    got = info(["parse %s" % s for s in probe] + ["parse"])
    result("formats.parse_unknown", got == ["-1"] * (len(probe) + 1), "got %s" % got)


def test_bytes():
    cases = [(F32, 0, 0), (F32, 3, 12), (BF16, 5, 10), (F16, 7, 14), (Q8_0, 32, 34), (Q8_0, 64, 68),
             (Q4_0, 32, 18), (Q4_0, 320, 180), (Q8_0, 0, 0),
             (Q8_0, 100, 0), (Q4_0, 33, 0), (Q8_0, 31, 0), (F32, -1, 0), (Q8_0, -32, 0), (7, 32, 0), (-1, 4, 0),
             (Q4_K, 256, 144), (Q4_K, 2560, 1440), (Q6_K, 256, 210), (Q6_K, 768, 630), (Q4_K, 0, 0), (Q6_K, 0, 0),
             (Q4_K, 32, 0), (Q6_K, 255, 0), (Q4_K, 257, 0), (Q6_K, 288, 0), (Q4_K, -256, 0), (7, 256, 0), (8, 256, 0),
             (Q4_K, (2 ** 63 - 1) // 256 * 256, (2 ** 63 - 1) // 256 * 144),
             (Q6_K, (2 ** 63 - 1) // 256 * 256, (2 ** 63 - 1) // 256 * 210),
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


# where each format's f16 fields are: d (and q4_k's dmin)
F16_FIELDS = {Q8_0: (0,), Q4_0: (0,), Q4_K: (0, 2), Q6_K: (208,)}


def test_dequantize(fmt):
    """Raw blocks: every finite f16 d pattern among them (random ones for the k-quants, in d
    and in dmin apart), any q and scale bytes; then d (or dmin) = inf."""
    n = NAMES[fmt]
    nb = 4096 * 32 // BLOCK[fmt]
    raw = rng.integers(0, 256, (nb, BLOCK_BYTES[fmt]), dtype=np.uint8)
    for k, at in enumerate(F16_FIELDS[fmt]):
        d = rng.integers(0, 0x7C00, nb, dtype=np.uint16) | (rng.integers(0, 2, nb, dtype=np.uint16) << 15)
        d[64 * k:64 * k + 64] = np.arange(64)     # zero and subnormals (q4_k: d, then dmin)
        raw[:, at:at + 2] = d.astype("<u2").view(np.uint8).reshape(-1, 2)
    size = nb * BLOCK[fmt]
    got = c_dequantize(fmt, raw.tobytes(), size)
    result(n + ".dequantize_raw", got is not None and same_values(got, dequantize(fmt, raw.tobytes(), size)))
    # rows 0-7 get an infinite d; q4_k's rows 4-11 an infinite dmin (4-7: inf - inf)
    rows = 4 + 4 * len(F16_FIELDS[fmt])
    for k, at in enumerate(F16_FIELDS[fmt]):
        raw[4 * k:4 * k + 8, at:at + 2] = np.array([[0, 0x7C], [0, 0xFC]] * 4, np.uint8)
    if fmt == Q4_0:
        raw[0, 2:] = 0x88
    elif fmt == Q4_K:
        raw[[0, 8], 4:16] = 0        # scales and mins 0: inf * 0
    elif fmt == Q6_K:
        raw[0, 192:208] = 0
    else:
        raw[0, 2:] = 0
    size = rows * BLOCK[fmt]
    got = c_dequantize(fmt, raw[:rows].tobytes(), size)
    result(n + ".dequantize_inf_d", got is not None and same_values(got, dequantize(fmt, raw[:rows].tobytes(), size)))


def final_steps(fmt, blk):
    """Per element of blocks blk, the float32 d * sc and dmin * m of the quantizer's last
    nearest_int: q4_k's nearest_int((x + dmin * m) / (d * sc)), q6_k's x / (d * sc) (m 0)."""
    nb = len(blk)
    if fmt == Q4_K:
        d = f16_value(blk[:, 0:2].copy().view("<u2").reshape(-1))
        dmin = f16_value(blk[:, 2:4].copy().view("<u2").reshape(-1))
        dj, dm = np.zeros((nb, 8), np.float32), np.zeros((nb, 8), np.float32)
        for j in range(8):
            s, m = get_scale_min_k4(j, blk[:, 4:16])
            dj[:, j], dm[:, j] = d * s.astype(np.float32), dmin * m.astype(np.float32)
        return np.repeat(dj, 32, axis=1), np.repeat(dm, 32, axis=1)
    d = f16_value(blk[:, 208:210].copy().view("<u2").reshape(-1))
    dj = d[:, None] * blk[:, 192:208].view(np.int8).astype(np.float32)
    return np.repeat(dj, 16, axis=1), np.zeros((nb, 256), np.float32)


def count_last_step_ties(fmt, x):
    """How many elements of x the reference's last nearest_int sees at k + 1/2 exactly."""
    x = np.asarray(x, np.float32).reshape(-1, 256)
    dj, dm = final_steps(fmt, np.frombuffer(quantize(fmt, x), np.uint8).reshape(len(x), -1))
    with np.errstate(all="ignore"):
        v = (x + dm) / dj
    return np.count_nonzero((dj != 0) & (v - np.floor(v) == 0.5))


def last_step_ties(fmt, nb):
    """Super-blocks whose d, dmin and scales come out exact and as planned, with some elements
    halfway between two steps of the last nearest_int. Each scale group is a grid that its
    first scale fits exactly: q4_k's group j is -m_j 2^e' + s_j 2^e q (q 0..15, both ends
    present), group 0 with s = m = 63 so that d = 2^e and dmin = 2^e'; q6_k's group j is
    -sc_j 2^(E-7) l (l -32..31, -32 present), group 0 with sc = -128 so that d = -2^(E-7).
    A few elements of the other groups are moved by half a step: q6_k's small ones (their
    weight x^2 hardly moves the fit), q4_k's in groups of small sc and m (at most 20 and 40,
    which a fit moved by a few percent still rounds to)."""
    if fmt == Q4_K:
        out = np.zeros((nb, 8, 32))
        for b in range(nb):
            e = rng.integers(-10, 5)
            e2 = e + rng.integers(-2, 2)
            s, m = rng.integers(3, 21, 8), rng.integers(0, 41, 8)
            s[0], m[0] = 63, 63
            for j in range(8):
                q = rng.integers(0, 16, 32).astype(np.float64)
                q[rng.permutation(32)[:2]] = [0, 15]
                if j:
                    h = rng.permutation(32)[:6]
                    h = h[(q[h] > 0) & (q[h] < 15)]
                    q[h] -= 0.5
                out[b, j] = -m[j] * 2.0 ** e2 + s[j] * 2.0 ** e * q
    else:
        out = np.zeros((nb, 16, 16))
        for b in range(nb):
            E = rng.integers(-10, 10)
            sc = -rng.integers(1, 128, 16)
            sc[0] = -128
            for j in range(16):
                l = rng.integers(-32, 32, 16).astype(np.float64)
                l[rng.integers(0, 16)] = -32
                if j:
                    h = rng.permutation(16)[:5]
                    h = h[np.abs(l[h]) < 6]
                    l[h] += 0.5
                out[b, j] = -sc[j] * 2.0 ** (E - 7) * l
    x = out.reshape(nb, 256)
    assert np.all(x.astype(np.float32) == x)     # every element exact in float32
    return x.astype(np.float32)


def d_near_f16_ties(fmt, ncand):
    """Super-blocks whose float d (q4_k: max_scale / 63; q6_k: 1 / (-128 / max_scale)) is so
    near halfway between two f16 values that another way to compute it (q4_k: 1 / (63 /
    max_scale), max_scale * (1 / 63); q6_k: max_scale / -128) rounds to the other one. Group 0
    is a grid of step 63 or 128 times such a midpoint (give or take an ulp or two), and its
    scale, which the reference computes for candidates on their own, is the block's largest."""
    h = rng.integers(0x0400, 0x7800, ncand).astype(np.uint16)
    mid = (f16_value(h).astype(np.float64) + f16_value(h + 1).astype(np.float64)) / 2
    step = (mid * (63 if fmt == Q4_K else 128)).astype(np.float32)
    step = from_bits32((bits32(step).astype(np.int64) + rng.integers(-2, 3, ncand)).astype(np.uint32))
    with np.errstate(all="ignore"):
        if fmt == Q4_K:
            q = rng.integers(0, 16, (ncand, 32))
            q[:, 0], q[:, 1] = 0, 15
            grid = step[:, None] * q.astype(np.float32)
            s = q4_k_group(grid)[0]
            d, other = s / f32(63), [f32(1) / (f32(63) / s), s * (f32(1) / f32(63))]
        else:
            q = rng.integers(-32, 32, (ncand, 16))
            q[:, 0] = -32
            grid = step[:, None] * q.astype(np.float32)
            s = qx(grid, 32)[0]
            d, other = f32(1) / (f32(-128) / s), [s / f32(-128)]
    keep = np.any([f16_bits(o) != f16_bits(d) for o in other], axis=0)
    assert np.count_nonzero(keep) >= 8
    x = random_super_blocks(np.count_nonzero(keep), 1.0).reshape(-1, 256) * (step[keep, None] / 8)
    x[:, :grid.shape[1]] = grid[keep]
    return x


def random_super_blocks(nblocks, scale):
    return (rng.standard_normal(nblocks * 256) * scale).astype(np.float32)


def test_kquant(fmt):
    """q4_k and q6_k against quantize_row_q4_K_ref / quantize_row_q6_K_ref as written above.
    sub is the elements a scale covers: 32 (q4_k's sc and m) or 16 (q6_k's sc)."""
    n = NAMES[fmt]
    sub = 32 if fmt == Q4_K else 16
    check_bytes(n + ".random", fmt, blocks(*[random_super_blocks(6, s) for s in (1e-6, 1e-3, 0.05, 1, 30, 1e3, 1e5)]))
    check_bytes(n + ".integers", fmt, rng.integers(-127, 128, 256 * 6).astype(np.float32))
    # halves on a grid of 1/2 whose first trial scale is 1 (q4_k: 0 and 15 in each 32, so
    # 15 / (max - min) = 1; q6_k: -32 in each 16, so -32 / max = 1): the trials' ties
    if fmt == Q4_K:
        t = rng.integers(0, 31, (6, 8, 32)) / 2
        t[:, :, 3], t[:, :, 17] = 0, 15
        t[3:] -= 7.5                 # and shifted, with a negative min
    else:
        t = rng.integers(-64, 64, (6, 16, 16)) / 2
        t[:, :, 5] = -32
    check_bytes(n + ".halves", fmt, t)
    # halves at the last step, which decides the stored q
    x = last_step_ties(fmt, 16)
    assert count_last_step_ties(fmt, x) >= 50
    check_bytes(n + ".ties", fmt, x)
    zero = np.zeros(256, np.float32)
    mixed = np.where(rng.random(256) < 0.5, zero, -zero).astype(np.float32)
    # a zero scale-group among others: q4_k's sc 0 keeps make_qkx2_quants's L (all 0);
    # q6_k's make_qx_quants stores 0 (not 32) for it, and its sc is 0
    part = random_super_blocks(3, 1.0).reshape(3, 256)
    part[0, sub:2 * sub] = 0
    part[1, :sub] = -zero[:sub]
    part[1, 256 - sub:] = 0
    part[2, ::2 * sub] = 0
    check_bytes(n + ".zero", fmt, blocks(zero, -zero, mixed, part))
    # below GROUP_MAX_EPS (1e-15): q6_k's groups are zero there; and just above it
    eps = (rng.standard_normal((6, 256)) * 1e-16).astype(np.float32)
    eps[1, 40] = 1e-15
    eps[2, 7] = np.nextafter(np.float32(1e-15), np.float32(0))
    eps[3] *= 100
    eps[4, 96:112] = rng.standard_normal(16)    # q6_k: one group far above, the others' L 0
    eps[5, :32] *= 1e5
    check_bytes(n + ".group_max_eps", fmt, eps)
    tiny = rng.standard_normal((4, 256)) * 1e-4
    tiny[0, 7], tiny[1, 0], tiny[2, 255], tiny[3, 128] = 1e4, -1e4, 3e4, -0.5
    check_bytes(n + ".one_huge", fmt, tiny)
    # one sign only: q4_k's min is 0 for positive groups (make_qkx2_quants clamps it, and
    # this_min > 0 takes the other fit) and the whole offset for negative ones; and blocks of
    # one value (make_qkx2_quants's max == min: the negative one; q6_k: the third is zero)
    pos = np.abs(random_super_blocks(4, 1.0)).reshape(4, 256)
    pos[1] += 3
    pos[2] = 10 + rng.random(256)
    pos[3] = np.repeat(rng.random(256 // sub) * 5 + 0.1, sub)
    check_bytes(n + ".positive", fmt, pos)
    check_bytes(n + ".negative", fmt, -pos)
    check_bytes(n + ".one_value", fmt, blocks(np.full(256, 2.5), np.full(256, -0.75), np.full(256, 1e-20)))
    # groups 1e4 apart (and a ramp over 1e4): the small ones' sc and m round to 0 or a few
    k = 256 // sub
    spread = random_super_blocks(4, 1.0).reshape(4, k, sub)
    spread[0] *= np.where(np.arange(k) % 2 == 0, 1, 1e-4)[:, None]
    spread[1] *= np.where(np.arange(k) == k - 1, 1e4, 1)[:, None]
    spread[2] *= (10.0 ** np.linspace(-2, 2, k))[:, None]
    spread[3] *= (10.0 ** np.linspace(4, 0, k))[:, None]
    spread[3] = np.abs(spread[3]) - 1  # positive groups over a negative floor
    check_bytes(n + ".group_scales", fmt, spread)
    # subnormal floats: all of a block (q4_k: 15 / (max - min) overflows float32, and inf * 0
    # is NaN; q6_k: below GROUP_MAX_EPS), and a few among normal ones; squares that underflow
    subn = rng.standard_normal((6, 256)) * 1e-40
    subn[1] *= 1e3
    subn[2, ::7] = 1e-30
    subn[3, 1:5] = [1.0, -2.0, 1e-38, 3e-45]
    subn[4] = 0
    subn[4, 9] = 1e-45
    subn[5] = rng.standard_normal(256) * 1e-19
    check_bytes(n + ".subnormal", fmt, subn)
    # d past f16's top (inf) and below its bottom (0 or subnormal)
    big = random_super_blocks(6, 1.0).reshape(6, 256) * np.float32([1e6, 1e7, 1e8, 3e8, 1e9, 1e12])[:, None]
    small = random_super_blocks(6, 1.0).reshape(6, 256) * np.float32([1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-10])[:, None]
    check_bytes(n + ".d_range", fmt, blocks(big, small))
    check_bytes(n + ".d_ties", fmt, d_near_f16_ties(fmt, 1024))
    # many super-blocks, each of its own scale, over most of float32's range (where ggml's
    # sums overflow to inf and its divisions give NaN as well)
    scales = np.exp(rng.uniform(np.log(1e-42), np.log(1e36), 400))
    many = random_super_blocks(400, 1.0).reshape(400, 256) * scales[:, None].astype(np.float32)
    check_bytes(n + ".many_blocks", fmt, many)


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
    for fmt in range(NFORMATS):
        n = NAMES[fmt]
        size = max(64, 2 * BLOCK[fmt])  # whole blocks: that error comes first
        for what, val, at in (("nan", nan, 37), ("inf", inf, 0), ("-inf", -inf, size - 1)):
            x = rng.standard_normal(size).astype(np.float32)
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
    for fmt in (Q4_K, Q6_K):
        n = NAMES[fmt]
        for count in (100, 255, 257, 288, 32 * 70):     # 288 and 2240: whole blocks of 32
            check_error("%s.error_%d" % (n, count), fmt, np.ones(count, np.float32),
                        "%d elements is not a multiple of %s's block of 256" % (count, n))
        # a NaN in the second super-block of a pass, and one in a later pass
        x = rng.standard_normal(2048).astype(np.float32)
        x[300] = nan
        check_error(n + ".error_second_block", fmt, x, "element 300 is nan: %s weights must be finite numbers" % n)
        x[300], x[1800] = 1, -inf
        check_error(n + ".error_later_pass", fmt, x, "element 1800 is -inf: %s weights must be finite numbers" % n)
        # no range limit but finiteness: the largest floats are weights
        y = rng.standard_normal(256).astype(np.float32)
        y[[5, 200]] = np.float32([3.4028235e38, -3.4028235e38])
        check_bytes(n + ".float_max", fmt, y)
    check_error("f32.error_negative_count", F32, np.zeros(0, np.float32), "-1 elements: a count cannot be negative", n=-1)
    check_error("formats.error_unknown", 7, np.zeros(256, np.float32), "unknown weight format 7")
    check_error("formats.error_unknown_8", 8, np.zeros(32, np.float32), "unknown weight format 8")
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
    n = 256 * 9                          # whole blocks of every format, in 5 passes of 512
    for src_bf16 in (0, 1):
        sname = "bf16" if src_bf16 else "f16"
        if src_bf16:
            pos = rng.integers(0, 0x7F80, n).astype(np.uint16)
        else:
            pos = rng.integers(0, 0x7C00, n).astype(np.uint16)
        h = pos | (rng.integers(0, 2, n).astype(np.uint16) << 15)
        h[:40] = np.arange(40)
        for fmt in range(NFORMATS):
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
        for fmt in (Q4_K, Q6_K):
            rc, out, err = run(["h", fmt, src_bf16, 288], bytes(576))
            result("half.%s_to_%s_not_whole_blocks" % (sname, NAMES[fmt]), rc == 1 and err ==
                   "error: 288 elements is not a multiple of %s's block of 256" % NAMES[fmt], err)


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
            for fmt in (Q4_K, Q6_K):
                test_kquant(fmt)
                test_dequantize(fmt)
        else:
            global nfail
            nfail += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
