#!/usr/bin/python3
"""Interpreter tests for every builtin and operator of the Nest language, against NumPy.

    /usr/bin/python3 tests/builtins/run.py NESTC [-k SUBSTRING]... [--keep] [-j N]

Each case is a small .nest source with one `export fn f(...)` (several results are checked
separately), input arrays (random with a fixed seed plus edge values), and references
written here from the math in float64. Sources and .npy inputs are written to a temporary
directory, `NESTC run SRC --input NAME=IN.npy ... --output OUT.npy ...` is run, and every
output must have exactly the expected dtype and shape and:

  - float results: max|out - ref| <= tol * max(1, max|ref|) over the finite reference
    entries (tol 1e-4 by default, 1e-6 for exactly rounded operations, 3e-7 for the f32 math
    of elementwise_f32_tight, smaller for f64),
    and the non-finite entries (inf, -inf, nan) exactly where the reference, converted to
    the result dtype, has them;
  - integer and bool results: exactly equal.

Error cases run a program that must fail at run time: exit status 1, a message on stderr,
and no output file written.

Prints `ok NAME` or `FAIL NAME: ...` per checked result and a last line
`N passed, N failed`; exits 1 if anything failed. Uses NumPy only (Debian's
/usr/bin/python3).
"""

import math
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

TIMEOUT = 60  # seconds for one nestc run

F = 1e-4       # default tolerance for f32 results
EXACT = 1e-6   # f32 results of exactly rounded (or data movement) operations
D64 = 1e-9     # f64 results
D64X = 1e-12   # f64 results of exactly rounded operations
INT = None     # integer / bool results are compared exactly (tol ignored)

rng = np.random.default_rng(20240611)

# ----------------------------------------------------------------------------- helpers


def uni(shape, lo=-1.0, hi=1.0, dtype=np.float32):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def randn(shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def ints(shape, lo, hi, dtype=np.int32):
    """Integers in [lo, hi] inclusive."""
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def d(a):
    """float64 copy of an input, for references."""
    return np.asarray(a, dtype=np.float64)


def vec_math(fn, x):
    return np.vectorize(fn, otypes=[np.float64])(d(x))


def erf_ref(x):
    return vec_math(math.erf, x)


def sigmoid_ref(x):
    x = d(x)
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def gelu_ref(x):
    x = d(x)
    return 0.5 * x * (1.0 + erf_ref(x / math.sqrt(2.0)))


def gelu_tanh_ref(x):
    x = d(x)
    with np.errstate(over="ignore"):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def norm_axis(axis, ndim):
    return axis + ndim if axis < 0 else axis


def softmax_ref(x, axis=-1):
    x = d(x)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax_ref(x, axis=-1):
    x = d(x)
    m = np.max(x, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):
        z = x - m
    return z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


def layernorm_ref(x, w, b, eps=1e-5):
    x = d(x)
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)  # biased
    return (x - mu) / np.sqrt(var + eps) * d(w) + d(b)


def rmsnorm_ref(x, w, eps=1e-6):
    x = d(x)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * d(w)


def argmax_ref(x, axis=-1, keepdim=False):
    """First position of the maximum, by an explicit scan (not np.argmax)."""
    x = np.asarray(x)
    axis = norm_axis(axis, x.ndim)
    xm = np.moveaxis(x, axis, -1)
    out = np.zeros(xm.shape[:-1], dtype=np.int64)
    for idx in np.ndindex(*xm.shape[:-1]):
        row = xm[idx]
        best = 0
        for j in range(1, row.shape[0]):
            if row[j] > row[best]:
                best = j
        out[idx] = best
    if keepdim:
        out = np.expand_dims(out, axis)
    return out


def causal_ref(s):
    s = d(s)
    r, c = s.shape[-2:]
    above = np.triu(np.ones((r, c), dtype=bool), k=1)
    return np.where(above, -np.inf, s)


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def conv2d_ref(x, w, b=None, stride=1, padding=0, groups=1):
    """Direct loop over output positions (cross-correlation, zero padding)."""
    x, w = d(x), d(w)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    assert cg * groups == c and o % groups == 0
    sh, sw = pair(stride)
    ph, pw = pair(padding)
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (wd + 2 * pw - kw) // sw + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow))
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * sh:i * sh + kh, j * sw:j * sw + kw]
                out[:, oc, i, j] = np.einsum("nchw,chw->n", patch, w[oc])
    if b is not None:
        out += d(b)[None, :, None, None]
    return out


def pool_ref(x, k, stride=None, padding=0, kind="max"):
    x = d(x)
    n, c, h, wd = x.shape
    kh, kw = pair(k)
    sh, sw = pair(stride if stride is not None else k)
    ph, pw = pair(padding)
    fill = -np.inf if kind == "max" else 0.0
    xp = np.full((n, c, h + 2 * ph, wd + 2 * pw), fill)
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (wd + 2 * pw - kw) // sw + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            if kind == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                out[:, :, i, j] = win.sum(axis=(2, 3)) / (kh * kw)  # count_include_pad
    return out


def floordiv_ref(a, b):
    """Integer floor division from the definition, 0 where b == 0."""
    out = np.zeros(np.broadcast(a, b).shape, dtype=np.int64)
    for idx in np.ndindex(*out.shape):
        x = int(np.broadcast_to(a, out.shape)[idx])
        y = int(np.broadcast_to(b, out.shape)[idx])
        out[idx] = 0 if y == 0 else math.floor(x / y) if abs(x) < 2 ** 52 else x // y
    return out


def floormod_ref(a, b):
    out = np.zeros(np.broadcast(a, b).shape, dtype=np.int64)
    for idx in np.ndindex(*out.shape):
        x = int(np.broadcast_to(a, out.shape)[idx])
        y = int(np.broadcast_to(b, out.shape)[idx])
        out[idx] = 0 if y == 0 else x - y * (x // y)  # Python's // floors: sign of divisor
    return out


def fmod_floor_ref(a, b):
    """Float floor remainder (sign of the divisor), nan where b == 0, as NumPy's %."""
    a, b = d(a), d(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.fmod(a, b)
        fix = (r != 0) & ((r < 0) != (b < 0))
        return np.where(b == 0, np.nan, np.where(fix, r + b, r))


# ----------------------------------------------------------------------------- cases


class Out:
    def __init__(self, label, ref, dtype, tol=F):
        self.label = label
        self.dtype = np.dtype(dtype)
        self.ref = np.asarray(ref)
        self.tol = tol


class Case:
    def __init__(self, name, src, inputs, outs, args=(), error=None):
        self.name = name
        self.src = src
        self.inputs = inputs  # list of (name, ndarray)
        self.outs = outs      # list of Out
        self.args = list(args)
        self.error = error    # for error cases: a description of the expected failure


CASES = []


def case(name, src, inputs, outs, args=()):
    CASES.append(Case(name, src, list(inputs.items()), outs, args))


def error_case(name, src, inputs, n_outputs, why):
    CASES.append(Case(name, src, list(inputs.items()), [Out(f"out{i}", 0, np.float32)
                                                         for i in range(n_outputs)],
                      error=why))


def O(label, ref, dtype="f32", tol=None):
    if dtype == "f32" and np.asarray(ref).dtype == np.float16:
        dtype = "f16"  # a NumPy float16 reference is an f16 result
    dt = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64,
          "bool": np.bool_, "f16": np.float16, "bf16": np.uint16, "i8": np.int8, "u8": np.uint8,
          "i16": np.int16, "u16": np.uint16}[dtype]  # bf16: its bits, as nestc writes it
    if dtype == "f16" and tol is None:
        tol = 0.0
    if tol is None:
        tol = F if dtype == "f32" else D64 if dtype == "f64" else INT
    return Out(label, ref, dt, tol)


# --- arithmetic ---------------------------------------------------------------------

a = uni((3, 5), -10, 10)
b = uni((3, 5), 0.5, 5) * np.where(rng.random((3, 5)) < 0.5, -1, 1).astype(np.float32)
a[0, :4] = [7.0, -7.0, 7.0, -7.0]
b[0, :4] = [2.0, 2.0, -2.0, -2.0]
a[1, 0], b[1, 0] = 6.0, 3.0      # exact multiple: remainder 0
a[1, 1], b[1, 1] = -6.0, 3.0
a[1, 2] = 0.0
case("arith_f32", """
export fn f(a: f32[3, 5], b: f32[3, 5]) -> (f32[3, 5], f32[3, 5], f32[3, 5], f32[3, 5],
                                            f32[3, 5], f32[3, 5], f32[3, 5]) {
  return a + b, a - b, a * b, a / b, a % b, -a, a - b * a + b / 2.0
}
""", dict(a=a, b=b), [
    O("add", d(a) + d(b), tol=EXACT), O("sub", d(a) - d(b), tol=EXACT),
    O("mul", d(a) * d(b), tol=EXACT), O("div", d(a) / d(b), tol=EXACT),
    O("mod", fmod_floor_ref(a, b), tol=EXACT), O("neg", -d(a), tol=EXACT),
    O("precedence", d(a) - d(b) * d(a) + d(b) / 2.0),
])

z = np.array([1.0, -1.0, 0.0, 5.5], np.float32)
zb = np.zeros(4, np.float32)
case("float_div_zero", """
export fn f(a: f32[4], b: f32[4]) -> (f32[4], f32[4]) {
  return a / b, a % b
}
""", dict(a=z, b=zb), [
    O("div_by_zero_ieee", np.array([np.inf, -np.inf, np.nan, np.inf]), tol=EXACT),
    O("mod_by_zero_nan", fmod_floor_ref(z, zb), tol=EXACT),
])

for dt, npdt in (("i32", np.int32), ("i64", np.int64)):
    ia = ints((4, 6), -9, 9, npdt)
    ib = ints((4, 6), -4, 4, npdt)
    ia[0, :6] = [7, -7, 7, -7, 0, 5]
    ib[0, :6] = [2, 2, -2, -2, 3, 0]   # all sign combinations, 0 / 3, 5 / 0
    ib[1, :3] = 0
    big = 3_000_000_000 if dt == "i64" else 2_000_000_000
    ia[3, 0], ib[3, 0] = big, 7
    ia[3, 1], ib[3, 1] = -big, 7
    A, B = ia.astype(np.int64), ib.astype(np.int64)
    case(f"arith_{dt}", f"""
export fn f(a: {dt}[4, 6], b: {dt}[4, 6]) -> ({dt}[4, 6], {dt}[4, 6], {dt}[4, 6], {dt}[4, 6],
                                            {dt}[4, 6], {dt}[4, 6]) {{
  return a + b, a - b, a * b, a / b, a % b, -a
}}
""", dict(a=ia, b=ib), [
        O("add", (A + B).astype(npdt), dt), O("sub", (A - B).astype(npdt), dt),
        O("mul", (A * B).astype(npdt), dt),
        O("floordiv", floordiv_ref(A, B).astype(npdt), dt),
        O("floormod", floormod_ref(A, B).astype(npdt), dt), O("neg", (-A).astype(npdt), dt),
    ])

# INT_MIN / -1 overflows (x86 idiv traps on it); NumPy wraps to INT_MIN with remainder 0 and
# the language says integer division never traps.
ov32 = np.array([-2 ** 31, 7, -2 ** 31, 2 ** 31 - 1], np.int32)
ovd32 = np.array([-1, -1, 1, -1], np.int32)
ov64 = np.array([-2 ** 63, 7, -2 ** 63, 2 ** 63 - 1], np.int64)
ovd64 = np.array([-1, -1, 1, -1], np.int64)
case("int_div_overflow", """
export fn f(a: i32[4], b: i32[4], c: i64[4], d: i64[4]) -> (i32[4], i32[4], i64[4], i64[4]) {
  return a / b, a % b, c / d, c % d
}
""", dict(a=ov32, b=ovd32, c=ov64, d=ovd64), [
    O("i32_floordiv", np.array([-2 ** 31, -7, -2 ** 31, -(2 ** 31 - 1)], np.int32), "i32"),
    O("i32_floormod", np.zeros(4, np.int32), "i32"),
    O("i64_floordiv", np.array([-2 ** 63, -7, -2 ** 63, -(2 ** 63 - 1)], np.int64), "i64"),
    O("i64_floormod", np.zeros(4, np.int64), "i64"),
])

# --- comparisons and logic ------------------------------------------------------------

ca = np.round(uni((3, 4), -3, 3))
cb = np.round(uni((3, 4), -3, 3))
cb[0] = ca[0]  # ties
cv = np.round(uni((4,), -3, 3))
case("compare_f32", """
export fn f(a: f32[3, 4], b: f32[3, 4], v: f32[4]) -> (bool[3, 4], bool[3, 4], bool[3, 4],
                                                      bool[3, 4], bool[3, 4], bool[3, 4],
                                                      bool[3, 4]) {
  return a == b, a != b, a < b, a <= b, a > b, a >= b, a < v
}
""", dict(a=ca, b=cb, v=cv), [
    O("eq", ca == cb, "bool"), O("ne", ca != cb, "bool"), O("lt", ca < cb, "bool"),
    O("le", ca <= cb, "bool"), O("gt", ca > cb, "bool"), O("ge", ca >= cb, "bool"),
    O("lt_broadcast", ca < cv, "bool"),
])
ci = ints((3, 4), -3, 3, np.int64)
cj = ints((3, 4), -3, 3, np.int64)
cj[1] = ci[1]
case("compare_i64", """
export fn f(a: i64[3, 4], b: i64[3, 4]) -> (bool[3, 4], bool[3, 4], bool[3, 4], bool[3, 4],
                                            bool[3, 4], bool[3, 4], bool[3, 4]) {
  return a == b, a != b, a < b, a <= b, a > b, a >= b, a > 0
}
""", dict(a=ci, b=cj), [
    O("eq", ci == cj, "bool"), O("ne", ci != cj, "bool"), O("lt", ci < cj, "bool"),
    O("le", ci <= cj, "bool"), O("gt", ci > cj, "bool"), O("ge", ci >= cj, "bool"),
    O("gt_literal", ci > 0, "bool"),
])
# chained comparisons: a < b <= c is a < b && b <= c, elementwise (ties at both ends)
ch = np.round(uni((3, 4), -3, 3))
ch[0] = [-1.0, 0.0, 1.0, 2.0]
chi = ints((3, 4), -4, 4, np.int64)
case("compare_chained", """
export fn f(x: f32[3, 4], lo: f32[4], i: i64[3, 4]) -> (bool[3, 4], bool[3, 4], bool[3, 4], bool[3, 4]) {
  return lo <= x < 1.0, -2.0 < x <= lo, -2 <= i < 0 <= 1, 0 == i == 0
}
""", dict(x=ch, lo=cv, i=chi), [
    O("le_lt", (cv <= ch) & (ch < 1.0), "bool"), O("lt_le", (-2.0 < ch) & (ch <= cv), "bool"),
    O("three_ops_int", (-2 <= chi) & (chi < 0), "bool"), O("eq_eq", chi == 0, "bool"),
])
p = rng.random((2, 4)) < 0.5
q = rng.random((2, 4)) < 0.5
p[0], q[0] = [True, True, False, False], [True, False, True, False]
pv = np.array([True, False, True, True])
lx = uni((2, 4), -1, 1)
case("logic", """
export fn f(p: bool[2, 4], q: bool[2, 4], v: bool[4], x: f32[2, 4]) -> (bool[2, 4], bool[2, 4],
    bool[2, 4], bool[2, 4], bool[2, 4], bool[2, 4]) {
  return p && q, p || q, !p, (x > 0.0) && !q, p || q && v, !(p && v)
}
""", dict(p=p, q=q, v=pv, x=lx), [
    O("and", p & q, "bool"), O("or", p | q, "bool"), O("not", ~p, "bool"),
    O("and_not_cmp", (lx > 0) & ~q, "bool"), O("or_and_precedence", p | (q & pv), "bool"),
    O("not_broadcast", ~(p & pv), "bool"),
])

# --- broadcasting ---------------------------------------------------------------------

ba, bb, bc = uni((2, 3)), uni((3,)), np.float32(1.75)
bd, be = uni((2, 1)), uni((1, 3))
bg, bh = uni((4, 1, 3)), uni((5, 1))
bk, bm, b1 = uni((2, 3, 4)), uni((4,)), uni((1,))
bi, bj = ints((2, 3), -5, 5), ints((3,), -5, 5)
case("broadcast", """
export fn f(a: f32[2, 3], b: f32[3], c: f32, d: f32[2, 1], e: f32[1, 3], g: f32[4, 1, 3],
            h: f32[5, 1], k: f32[2, 3, 4], m: f32[4], o: f32[1], i: i32[2, 3], j: i32[3]) -> (f32[2, 3], f32[2, 3], f32[2, 3], f32[2, 3], f32[4, 5, 3], f32[2, 3, 4], f32[2, 3, 4],
        f32[2, 3], f32, i32[2, 3], f32[2, 3, 4], f32[2, 3]) {
  return a + b, a * c, c - a, d - e, g + h, k * m, m - k, o + a, c * c, i - j, k / c, b * d
}
""", dict(a=ba, b=bb, c=bc, d=bd, e=be, g=bg, h=bh, k=bk, m=bm, o=b1, i=bi, j=bj), [
    O("2x3+3", d(ba) + d(bb), tol=EXACT), O("2x3*0d", d(ba) * d(bc), tol=EXACT),
    O("0d-2x3", d(bc) - d(ba), tol=EXACT), O("2x1-1x3", d(bd) - d(be), tol=EXACT),
    O("4x1x3+5x1", d(bg) + d(bh), tol=EXACT), O("rank3*rank1", d(bk) * d(bm), tol=EXACT),
    O("rank1-rank3", d(bm) - d(bk), tol=EXACT), O("1+2x3", d(b1) + d(ba), tol=EXACT),
    O("0d*0d", d(bc) * d(bc), tol=EXACT), O("int_2x3-3", (bi - bj).astype(np.int32), "i32"),
    O("rank3/0d", d(bk) / d(bc), tol=EXACT), O("3*2x1", d(bb) * d(bd), tol=EXACT),
])

# --- matmul ---------------------------------------------------------------------------

ma, mb = uni((3, 4)), uni((4, 5))
mc, md = uni((2, 3, 4)), uni((2, 4, 5))
me = uni((2, 1, 3, 4))
mv, mw = uni((4,)), uni((4,))
case("matmul", """
export fn f(a: f32[3, 4], b: f32[4, 5], c: f32[2, 3, 4], d: f32[2, 4, 5], e: f32[2, 1, 3, 4],
            v: f32[4], w: f32[4]) -> (f32[3, 5], f32[2, 3, 5], f32[2, 2, 3, 5], f32[2, 3, 5], f32[2, 3, 5], f32[5], f32[3],
        f32, f32[2, 3], f32[2, 5], f32[3, 5]) {
  return a @ b, c @ d, e @ d, a @ d, c @ b, v @ b, a @ v, v @ w, c @ v, v @ d, a @ b * 2.0
}
""", dict(a=ma, b=mb, c=mc, d=md, e=me, v=mv, w=mw), [
    O("2d", d(ma) @ d(mb)), O("batched_3d", d(mc) @ d(md)),
    O("broadcast_batch_4d_3d", d(me) @ d(md)), O("2d@3d", d(ma) @ d(md)),
    O("3d@2d", d(mc) @ d(mb)), O("1d@2d", d(mv) @ d(mb)), O("2d@1d", d(ma) @ d(mv)),
    O("1d@1d", np.dot(d(mv), d(mw))), O("3d@1d", d(mc) @ d(mv)), O("1d@3d", d(mv) @ d(md)),
    O("precedence_matmul_mul", (d(ma) @ d(mb)) * 2.0),
])

# --- elementwise math -----------------------------------------------------------------

# Moderate values (|x| <= 3, so the tolerance 1e-4 * max(1, max|ref|) separates gelu from
# gelu_tanh, whose largest difference 4.7e-4 is near |x| = 2.7) and large magnitudes in a
# separate input so that they do not inflate the tolerance of the others.
xs = np.concatenate([np.array([-3, -2.7, -1, -0.5, 0, 0.5, 1, 2.7, 3], np.float32),
                     uni((23,), -3, 3)]).astype(np.float32)
xl = np.array([-1000, -100, -50, -20, -10, -5, 5, 10, 20, 50, 100, 1000], np.float32)
xw = uni((16,), -10, 10)
pos = np.concatenate([np.array([0, 1e-6, 0.25, 1, 2, 1e6, 3e30], np.float32),
                      uni((9,), 0.01, 50)]).astype(np.float32)
ex = np.concatenate([np.array([-100, -20, -1, 0, 1, 20, 80, 100], np.float32),
                     uni((8,), -10, 10)]).astype(np.float32)
case("elementwise_f32", """
export fn f(x: f32[32], p: f32[16], e: f32[16], w: f32[16]) -> (f32[16], f32[16], f32[16],
    f32[16], f32[32], f32[32], f32[32], f32[32], f32[32], f32[32], f32[32], f32[32], f32[16],
    f32[16]) {
  return exp(e), log(p), sqrt(p), rsqrt(p), tanh(x), sigmoid(x), relu(x), gelu(x),
         gelu_tanh(x), silu(x), erf(x), abs(x), sin(w), cos(w)
}
""", dict(x=xs, p=pos, e=ex, w=xw), [
    O("exp", np.exp(d(ex))),
    O("log", np.where(pos == 0, -np.inf, np.log(np.maximum(d(pos), 1e-300)))),
    O("sqrt", np.sqrt(d(pos)), tol=EXACT),
    O("rsqrt", np.where(pos == 0, np.inf, 1.0 / np.sqrt(np.maximum(d(pos), 1e-300)))),
    O("tanh", np.tanh(d(xs))), O("sigmoid", sigmoid_ref(xs)),
    O("relu", np.where(d(xs) > 0, d(xs), 0.0), tol=EXACT), O("gelu", gelu_ref(xs)),
    O("gelu_tanh", gelu_tanh_ref(xs)), O("silu", d(xs) * sigmoid_ref(xs)),
    O("erf", erf_ref(xs)), O("abs", np.abs(d(xs)), tol=EXACT),
    O("sin", np.sin(d(xw))), O("cos", np.cos(d(xw))),
])
case("elementwise_f32_large", """
export fn f(x: f32[12]) -> (f32[12], f32[12], f32[12], f32[12], f32[12], f32[12], f32[12],
    f32[12], f32[12], f32[12], f32[12]) {
  return tanh(x), sigmoid(x), relu(x), gelu(x), gelu_tanh(x), silu(x), erf(x), abs(x),
         sin(x), cos(x), exp(x * 0.1)
}
""", dict(x=xl), [
    O("tanh", np.tanh(d(xl))), O("sigmoid", sigmoid_ref(xl)),
    O("relu", np.where(d(xl) > 0, d(xl), 0.0), tol=EXACT), O("gelu", gelu_ref(xl)),
    O("gelu_tanh", gelu_tanh_ref(xl)), O("silu", d(xl) * sigmoid_ref(xl)),
    O("erf", erf_ref(xl)), O("abs", np.abs(d(xl)), tol=EXACT),
    O("sin", np.sin(d(xl))), O("cos", np.cos(d(xl))),
    O("exp_overflow_to_inf", np.exp(d(xl) * np.float32(0.1).astype(np.float64))),
])

# The same functions at a tolerance of a few ulp (the interpreter computes in double and
# rounds once): tight enough that a constant wrong in its fourth digit fails (gelu_tanh
# with 0.044725 for 0.044715 is off by up to 6e-6 near |x| = 1.84). Also folded at compile
# time on scalar literals.
TIGHT = 3e-7
xt = np.concatenate([np.linspace(-4, 4, 81), np.array([-1.84, -1.5, 1.5, 1.84])]).astype(np.float32)
zt = np.zeros(1, np.float32)
case("elementwise_f32_tight", """
export fn f(x: f32[85], z: f32[1]) -> (f32[85], f32[85], f32[85], f32[85], f32[85], f32[85],
    f32[1], f32[1], f32[1], f32[1], f32[1], f32[1]) {
  return gelu_tanh(x), gelu(x), erf(x), silu(x), sigmoid(x), tanh(x),
         z + gelu_tanh(-1.84), z + gelu(-1.84), z + erf(-1.84), z + silu(-1.84),
         z + sigmoid(-1.84), z + tanh(-1.84)
}
""", dict(x=xt, z=zt), [
    O("gelu_tanh", gelu_tanh_ref(xt), tol=TIGHT), O("gelu", gelu_ref(xt), tol=TIGHT),
    O("erf", erf_ref(xt), tol=TIGHT), O("silu", d(xt) * sigmoid_ref(xt), tol=TIGHT),
    O("sigmoid", sigmoid_ref(xt), tol=TIGHT), O("tanh", np.tanh(d(xt)), tol=TIGHT),
    O("const_gelu_tanh", gelu_tanh_ref(np.array([-1.84])), tol=TIGHT),
    O("const_gelu", gelu_ref(np.array([-1.84])), tol=TIGHT),
    O("const_erf", erf_ref(np.array([-1.84])), tol=TIGHT),
    O("const_silu", -1.84 * sigmoid_ref(np.array([-1.84])), tol=TIGHT),
    O("const_sigmoid", sigmoid_ref(np.array([-1.84])), tol=TIGHT),
    O("const_tanh", np.tanh(np.array([-1.84])), tol=TIGHT),
])

x64 = np.concatenate([np.array([-40, -5, -1, 0, 1, 5, 40], np.float64),
                      rng.uniform(-6, 6, 9)])
p64 = np.concatenate([np.array([0, 1e-300, 1e300]), rng.uniform(0.01, 50, 5)])
case("elementwise_f64", """
export fn f(x: f64[16], p: f64[8]) -> (f64[16], f64[8], f64[8], f64[8], f64[16], f64[16],
    f64[16], f64[16], f64[16], f64[16], f64[16], f64[16], f64[16], f64[16]) {
  return exp(x), log(p), sqrt(p), rsqrt(p), tanh(x), sigmoid(x), relu(x), gelu(x),
         gelu_tanh(x), silu(x), erf(x), abs(x), sin(x), cos(x)
}
""", dict(x=x64, p=p64), [
    O("exp", np.exp(x64), "f64"),
    O("log", np.where(p64 == 0, -np.inf, np.log(np.maximum(p64, 1e-310))), "f64"),
    O("sqrt", np.sqrt(p64), "f64", D64X),
    O("rsqrt", np.where(p64 == 0, np.inf, 1.0 / np.sqrt(np.maximum(p64, 1e-310))), "f64"),
    O("tanh", np.tanh(x64), "f64"), O("sigmoid", sigmoid_ref(x64), "f64"),
    O("relu", np.where(x64 > 0, x64, 0.0), "f64", D64X), O("gelu", gelu_ref(x64), "f64"),
    O("gelu_tanh", gelu_tanh_ref(x64), "f64"), O("silu", x64 * sigmoid_ref(x64), "f64"),
    O("erf", erf_ref(x64), "f64"), O("abs", np.abs(x64), "f64", D64X),
    O("sin", np.sin(x64), "f64"), O("cos", np.cos(x64), "f64"),
])

# hardswish: x * min(max(x + 3, 0), 6) / 6 across both bends (-3, 3), NaN
# and the infinities (inf * 6 / 6 is inf; -inf * 0 is NaN, as PyTorch's),
# f32 and f64, and folded on a scalar literal.
xh = np.concatenate([np.linspace(-5, 5, 41), [-3.0, 3.0, np.nan, np.inf]]).astype(np.float32)
case("hardswish", """
export fn f(x: f32[45], y: f64[45], z: f32[1]) -> (f32[45], f64[45], f32[1]) {
  return hardswish(x), hardswish(y), z + hardswish(1.5)
}
""", dict(x=xh, y=xh.astype(np.float64), z=np.zeros(1, np.float32)), [
    O("f32", d(xh) * np.clip(d(xh) + 3, 0, 6) / 6, tol=TIGHT),
    O("f64", d(xh) * np.clip(d(xh) + 3, 0, 6) / 6, "f64"),
    O("const", np.array([1.5 * 4.5 / 6])),
])

ii = ints((10,), -50, 50)
ii[:3] = [0, -1, 1]
il = ints((10,), -50, 50, np.int64)
il[0] = -(2 ** 40)
case("elementwise_int", """
export fn f(a: i32[10], b: i64[10]) -> (i32[10], i32[10], i64[10], i64[10]) {
  return abs(a), relu(a), abs(b), relu(b)
}
""", dict(a=ii, b=il), [
    O("abs_i32", np.abs(ii), "i32"), O("relu_i32", np.maximum(ii, 0), "i32"),
    O("abs_i64", np.abs(il), "i64"), O("relu_i64", np.maximum(il, 0), "i64"),
])

# --- pow maximum minimum where ------------------------------------------------------------

wa = uni((3, 4), 0.1, 5)
wb = uni((4,), -2, 3)
wn = uni((3, 4), -4, 4)
wn[0, 0] = 0.0
wc = rng.random((3, 4)) < 0.5
wv = np.array([True, False, False, True])
wk = uni((3, 1), -1, 1)
wi, wj = ints((3, 4), -9, 9), ints((4,), -9, 9)
case("pow_max_min_where", """
export fn f(a: f32[3, 4], b: f32[4], n: f32[3, 4], c: bool[3, 4], v: bool[4], k: f32[3, 1],
            i: i32[3, 4], j: i32[4]) -> (f32[3, 4], f32[3, 4], f32[3, 4], f32[3, 4], f32[3, 4], f32[3, 4], i32[3, 4], i32[3, 4],
        f32[3, 4], f32[3, 4], f32[3, 4], i32[3, 4], f32[3, 4]) {
  return pow(a, b), pow(n, 3.0), pow(n, 2), pow(a, 0.5), maximum(a, n), minimum(n, b),
         maximum(i, j), minimum(i, 0), where(c, a, n), where(c, n, 0.0), where(v, n, k),
         where(c, i, j), maximum(n, 0.0)
}
""", dict(a=wa, b=wb, n=wn, c=wc, v=wv, k=wk, i=wi, j=wj), [
    O("pow", d(wa) ** d(wb)), O("pow_cube_negative_base", d(wn) ** 3),
    O("pow_int_literal", d(wn) ** 2), O("pow_half", np.sqrt(d(wa))),
    O("maximum", np.maximum(d(wa), d(wn)), tol=EXACT),
    O("minimum_broadcast", np.minimum(d(wn), d(wb)), tol=EXACT),
    O("maximum_i32", np.maximum(wi, wj), "i32"), O("minimum_i32_literal", np.minimum(wi, 0), "i32"),
    O("where", np.where(wc, d(wa), d(wn)), tol=EXACT),
    O("where_literal", np.where(wc, d(wn), 0.0), tol=EXACT),
    O("where_broadcast_cond", np.where(wv, d(wn), d(wk)), tol=EXACT),
    O("where_i32", np.where(wc, wi, wj), "i32"),
    O("maximum_literal", np.maximum(d(wn), 0.0), tol=EXACT),
])

# where() between two numbers (issue #10: it crashed the lowering): two ints give i32,
# an int and a float f32, and the result then meets tensors as usual
case("where_two_numbers", """
export fn f(x: f32[3, 4], i: i32[3, 4]) -> (f32[3, 4], i32[3, 4], f32[3, 4], i32[3, 4]) {
  return x + where(x > 0.0, 0.0, 1.0), i * where(i > 0, 0, 1), where(i < 0, 2, 0.5),
         where(i == 0, 7, -3)
}
""", dict(x=wn, i=wi), [
    O("where_floats", d(wn) + np.where(d(wn) > 0, 0.0, 1.0), tol=EXACT),
    O("where_ints", wi * np.where(wi > 0, 0, 1).astype(np.int32), "i32"),
    O("where_int_and_float", np.where(wi < 0, 2.0, 0.5), tol=EXACT),
    O("where_ints_alone", np.where(wi == 0, 7, -3).astype(np.int32), "i32"),
])

# --- casts ----------------------------------------------------------------------------

cx = np.array([-2.7, -2.5, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.9, 2.5, 100.7, -100.7],
              np.float32)
cxi = np.array([-3, 0, 1, 7, -100, 2 ** 24 + 1, 5, 0, -1, 9, 2, 3], np.int32)
cxl = np.array([-3, 0, 1, 2 ** 33 + 5, -(2 ** 33) - 1, 7, 6, 5, 4, 3, 2, 1], np.int64)
cxb = np.array([True, False] * 6)
cxd = np.array([1e-10, -1.5, 1 / 3, 2.5e10, -7.9, 0.0, 1e300, -1e-300, 3.0, -3.0, 0.1, 9.99])
case("casts", """
export fn f(x: f32[12], i: i32[12], l: i64[12], b: bool[12], g: f64[12]) -> (i32[12], i64[12], f64[12], bool[12], f32[12], i64[12], bool[12], f32[12], i32[12],
        f32[12], i32[12], f64[12], i32[12], i32[12], f32[12], bool[12], i64[12], f64[12]) {
  return i32(x), i64(x), f64(x), bool(x), f32(i), i64(i), bool(i), f32(b), i32(b), f32(g),
         i32(l), f64(l), i32(g), i32(i), f32(x), bool(l), i64(g), f64(b)
}
""", dict(x=cx, i=cxi, l=cxl, b=cxb, g=np.where(np.abs(cxd) < 1e9, cxd, 0.0)), [
    O("f32_to_i32_trunc", np.trunc(d(cx)).astype(np.int32), "i32"),
    O("f32_to_i64_trunc", np.trunc(d(cx)).astype(np.int64), "i64"),
    O("f32_to_f64", d(cx), "f64", 0.0),
    O("f32_to_bool", cx != 0, "bool"),
    O("i32_to_f32", cxi.astype(np.float32).astype(np.float64), tol=0.0),
    O("i32_to_i64", cxi.astype(np.int64), "i64"),
    O("i32_to_bool", cxi != 0, "bool"),
    O("bool_to_f32", cxb.astype(np.float64), tol=0.0),
    O("bool_to_i32", cxb.astype(np.int32), "i32"),
    O("f64_to_f32", np.where(np.abs(cxd) < 1e9, cxd, 0.0).astype(np.float32).astype(np.float64),
      tol=0.0),
    O("i64_to_i32_wrap", cxl.astype(np.int32), "i32"),
    O("i64_to_f64", cxl.astype(np.float64), "f64", 0.0),
    O("f64_to_i32_trunc", np.trunc(np.where(np.abs(cxd) < 1e9, cxd, 0.0)).astype(np.int32), "i32"),
    O("i32_to_i32", cxi, "i32"),
    O("f32_to_f32", d(cx), tol=0.0),
    O("i64_to_bool", cxl != 0, "bool"),
    O("f64_to_i64_trunc", np.trunc(np.where(np.abs(cxd) < 1e9, cxd, 0.0)).astype(np.int64), "i64"),
    O("bool_to_f64", cxb.astype(np.float64), "f64", 0.0),
])

# --- reductions -------------------------------------------------------------------------

rx = uni((2, 3, 4), -5, 5)
ri = ints((3, 4), -20, 20)
rl = ints((3, 4), -20, 20, np.int64)
rl[0, 0] = 2 ** 40
case("reductions", """
export fn f(x: f32[2, 3, 4], i: i32[3, 4], l: i64[3, 4]) -> (f32, f32[2, 4], f32[3], f32[2, 3, 1], f32[1, 1, 1], f32, f32[3], f32[2, 1, 4],
        f32[2, 3], f32, f32[1, 1, 4], f32[3, 4], i32, i32[4], i32[3], i32[1, 4], i64[3], i64,
        f32[2, 3], f32[4]) {
  return sum(x), sum(x, axis=1), sum(x, axis=[0, 2]), sum(x, axis=-1, keepdim=true),
         sum(x, keepdim=true), mean(x), mean(x, axis=[-1, 0]), mean(x, axis=1, keepdim=true),
         amax(x, axis=-1), amax(x), amin(x, axis=[0, 1], keepdim=true), amin(x, axis=0),
         sum(i), sum(i, axis=0), amax(i, axis=1), amin(i, axis=-2, keepdim=true),
         sum(l, axis=-1), amin(l), mean(x, axis=2), amax(x, axis=[0, 1])
}
""", dict(x=rx, i=ri, l=rl), [
    O("sum_all", d(rx).sum()), O("sum_axis1", d(rx).sum(1)), O("sum_list", d(rx).sum((0, 2))),
    O("sum_neg_keepdim", d(rx).sum(-1, keepdims=True)),
    O("sum_all_keepdim", d(rx).sum(keepdims=True)),
    O("mean_all", d(rx).mean()), O("mean_list_neg", d(rx).mean((2, 0))),
    O("mean_keepdim", d(rx).mean(1, keepdims=True)),
    O("amax_neg", d(rx).max(-1), tol=0.0), O("amax_all", d(rx).max(), tol=0.0),
    O("amin_list_keepdim", d(rx).min((0, 1), keepdims=True), tol=0.0),
    O("amin_axis0", d(rx).min(0), tol=0.0),
    O("sum_i32_all", np.int32(ri.sum()), "i32"), O("sum_i32_axis0", ri.sum(0).astype(np.int32), "i32"),
    O("amax_i32", ri.max(1), "i32"), O("amin_i32_keepdim", ri.min(0, keepdims=True), "i32"),
    O("sum_i64", rl.sum(-1), "i64"), O("amin_i64_all", np.int64(rl.min()), "i64"),
    O("mean_axis2", d(rx).mean(2)), O("amax_list", d(rx).max((0, 1)), tol=0.0),
])

at = np.array([[1, 3, 3, 0, 3], [-1, -1, -1, -1, -1], [0, 0, 5, 5, 2],
               [-np.inf, -np.inf, -7, -7, -np.inf], [1, 3, 5, 5, 3]], np.float32)
ai = np.array([[4, 1, 4], [2, 9, 9], [-3, -5, -3]], np.int32)
a3 = np.round(uni((2, 3, 4), -2, 2))
case("argmax", """
export fn f(t: f32[5, 5], i: i32[3, 3], u: f32[2, 3, 4]) -> (i64[5], i64[5], i64[5, 1], i64[3], i64[3], i64[2, 4], i64[2, 1, 4], i64[1, 5]) {
  return argmax(t), argmax(t, axis=0), argmax(t, axis=1, keepdim=true), argmax(i),
         argmax(i, axis=0), argmax(u, axis=1), argmax(u, axis=-2, keepdim=true),
         argmax(t, axis=-2, keepdim=true)
}
""", dict(t=at, i=ai, u=a3), [
    O("default_axis_ties", argmax_ref(at), "i64"), O("axis0", argmax_ref(at, 0), "i64"),
    O("keepdim", argmax_ref(at, 1, True), "i64"), O("i32", argmax_ref(ai), "i64"),
    O("i32_axis0", argmax_ref(ai, 0), "i64"), O("rank3_axis1", argmax_ref(a3, 1), "i64"),
    O("rank3_neg_keepdim", argmax_ref(a3, -2, True), "i64"),
    O("neg_axis_keepdim", argmax_ref(at, -2, True), "i64"),
])

# --- softmax --------------------------------------------------------------------------

sx = uni((2, 3, 5), -3, 3)
sx[0, 0] = [1000, 999, 998, -1000, 0]
sx[0, 1] = [-1000, -1000, -1000, -1000, -1000]
sx[1, 2] = [88, 89, 90, 100, 300]
sm = uni((3, 4), -2, 2)
sm[0, 1:] = -np.inf
sm[1, 2] = -np.inf
case("softmax", """
export fn f(x: f32[2, 3, 5], m: f32[3, 4]) -> (f32[2, 3, 5], f32[2, 3, 5], f32[2, 3, 5], f32[2, 3, 5], f32[2, 3, 5], f32[2, 3, 5],
        f32[3, 4], f32[3, 4], f32[2, 3, 5]) {
  return softmax(x), softmax(x, axis=0), softmax(x, axis=1), log_softmax(x),
         log_softmax(x, axis=-2), log_softmax(x, axis=0), softmax(m), log_softmax(m),
         softmax(x, axis=-1)
}
""", dict(x=sx, m=sm), [
    O("softmax_default_large", softmax_ref(sx)), O("softmax_axis0", softmax_ref(sx, 0)),
    O("softmax_axis1", softmax_ref(sx, 1)), O("log_softmax_default_large", log_softmax_ref(sx)),
    O("log_softmax_axis_neg2", log_softmax_ref(sx, -2)),
    O("log_softmax_axis0", log_softmax_ref(sx, 0)),
    O("softmax_neg_inf", softmax_ref(sm)), O("log_softmax_neg_inf", log_softmax_ref(sm)),
    O("softmax_axis_neg1", softmax_ref(sx, -1)),
])

# Rows longer than a vector (16 f32 on AVX-512): the maximum and the sum run in
# vectors, folded lane by lane in halves, then the tail. A NaN inside a vector
# or in the tail makes its row NaN; -inf entries give 0; a row whose maximum is
# in the tail or in the last lane of a vector still subtracts it.
lx = uni((6, 40), -4, 4)
lx[0, 5] = np.nan                              # in the first vector
lx[1, 37] = np.nan                             # in the tail
lx[2, ::3] = -np.inf
lx[3, 38] = 300.0                              # the maximum in the tail
lx[4, 31] = 90.0                               # the maximum in a vector's last lane
lx[5, :] = -1000.0
lx[5, 17] = -999.0
case("softmax_long_rows", """
export fn f(x: f32[6, 40]) -> (f32[6, 40], f32[6, 40]) {
  return softmax(x), log_softmax(x)
}
""", dict(x=lx), [
    O("softmax", softmax_ref(lx)), O("log_softmax", log_softmax_ref(lx)),
])

# Rows of any length: whole vectors, then the last elements under a mask (197 keys, ViT's
# attention: 12 vectors of 16 and 5 over), exactly vectors long (16, 32), shorter than a
# vector, and of one element. Extremes in the masked part: the maximum in the row's last
# element, -inf there, a NaN there.
tx = uni((4, 197), -5, 5)
tx[0, 196] = 60.0
tx[1, 192:] = -np.inf
tx[2, 194] = np.nan
tx[3, :] = -700.0
tx[3, 193] = -699.0
ux = uni((3, 32), -5, 5)
vx = uni((3, 7), -5, 5)
case("softmax_vector_tails", """
export fn f(t: f32[4, 197], u: f32[3, 32], v: f32[3, 7], w: f32[2, 1]) -> (f32[4, 197], f32[3, 32], f32[3, 16], f32[3, 7],
        f32[2, 1]) {
  return softmax(t), softmax(u), softmax(u[:, 0:16]), softmax(v), softmax(w)
}
""", dict(t=tx, u=ux, v=vx, w=uni((2, 1), -5, 5)), [
    O("row_197", softmax_ref(tx)), O("row_32", softmax_ref(ux)), O("row_16", softmax_ref(ux[:, 0:16])),
    O("row_7", softmax_ref(vx)), O("row_1", np.ones((2, 1))),
])

# --- normalisation --------------------------------------------------------------------

nx = randn((5, 8))
nx[1] = 0.75                                   # zero variance: result is the bias
nx[2] = randn((8,)) * 1e-3                     # variance ~1e-6: eps matters
nx[3] = randn((8,)) * 1e-3                     # mean square ~1e-6: rmsnorm eps matters
nw, nb = 1 + 0.1 * randn((8,)), 0.1 * randn((8,))
n3 = randn((2, 3, 8)) * 2 + 0.5
case("norms", """
export fn f(x: f32[5, 8], w: f32[8], b: f32[8], y: f32[2, 3, 8]) -> (f32[5, 8], f32[5, 8], f32[5, 8], f32[5, 8], f32[2, 3, 8], f32[2, 3, 8], f32[5, 8]) {
  return layernorm(x, w, b), layernorm(x, w, b, eps=0.1), rmsnorm(x, w), rmsnorm(x, w, eps=0.1),
         layernorm(y, w, b), rmsnorm(y, w), layernorm(x, w, b, 1e-3)
}
""", dict(x=nx, w=nw, b=nb, y=n3), [
    O("layernorm_default_eps", layernorm_ref(nx, nw, nb)),
    O("layernorm_eps", layernorm_ref(nx, nw, nb, 0.1)),
    O("rmsnorm_default_eps", rmsnorm_ref(nx, nw)), O("rmsnorm_eps", rmsnorm_ref(nx, nw, 0.1)),
    O("layernorm_rank3", layernorm_ref(n3, nw, nb)), O("rmsnorm_rank3", rmsnorm_ref(n3, nw)),
    O("layernorm_positional_eps", layernorm_ref(nx, nw, nb, 1e-3)),
])
no = (100 + randn((4, 64))).astype(np.float32)
now, nob = np.ones(64, np.float32), np.zeros(64, np.float32)
case("layernorm_offset", """
export fn f(x: f32[4, 64], w: f32[64], b: f32[64]) -> f32[4, 64] {
  return layernorm(x, w, b)
}
""", dict(x=no, w=now, b=nob), [O("mean_100_std_1", layernorm_ref(no, now, nob))])

# --- PyTorch's nn layers (issue #10): linear, flatten, group_norm -----------------------
# Their own generator, so that the data of the cases after them stays as it was.

nn_rng = np.random.default_rng(1010)


def nn_randn(shape, dtype=np.float32):
    return nn_rng.standard_normal(shape).astype(dtype)


def linear_ref(x, w, b=None):
    y = d(x) @ d(w).T
    return y if b is None else y + d(b)


def group_norm_ref(x, groups, w, b, eps=1e-5):
    x = d(x)
    xr = x.reshape(x.shape[0], groups, -1)
    mu = xr.mean(axis=-1, keepdims=True)
    var = ((xr - mu) ** 2).mean(axis=-1, keepdims=True)  # biased, as PyTorch
    y = ((xr - mu) / np.sqrt(var + eps)).reshape(x.shape)
    per_channel = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    return y * d(w).reshape(per_channel) + d(b).reshape(per_channel)


NN_TOL = 1e-5
lx2, lx3, lx1, lx4 = nn_randn((4, 8)), nn_randn((3, 5, 8)), nn_randn((8,)), nn_randn((2, 3, 1, 8))
lw, lb = nn_randn((5, 8)), nn_randn((5,))
case("nn_linear", """
export fn f(x: f32[4, 8], y: f32[3, 5, 8], z: f32[8], v: f32[2, 3, 1, 8], w: f32[5, 8], b: f32[5]) -> (f32[4, 5], f32[3, 5, 5], f32[5], f32[2, 3, 1, 5], f32[4, 5], f32[3, 5, 5]) {
  return linear(x, w, b), linear(y, w, b), linear(z, w), linear(v, w, bias=b), linear(x, w),
         linear(y, weight=w, bias=b)
}
""", dict(x=lx2, y=lx3, z=lx1, v=lx4, w=lw, b=lb), [
    O("rank2_bias", linear_ref(lx2, lw, lb), tol=NN_TOL), O("rank3_bias", linear_ref(lx3, lw, lb), tol=NN_TOL),
    O("rank1_no_bias", linear_ref(lx1, lw), tol=NN_TOL), O("rank4_named_bias", linear_ref(lx4, lw, lb), tol=NN_TOL),
    O("rank2_no_bias", linear_ref(lx2, lw), tol=NN_TOL), O("rank3_named", linear_ref(lx3, lw, lb), tol=NN_TOL),
])
ld, ldw, ldb = nn_randn((7, 3, 11), np.float64), nn_randn((13, 11), np.float64), nn_randn((13,), np.float64)
case("nn_linear_f64", """
export fn f(x: f64[7, 3, 11], w: f64[13, 11], b: f64[13]) -> f64[7, 3, 13] {
  return linear(x, w, b)
}
""", dict(x=ld, w=ldw, b=ldb), [O("rank3_odd", linear_ref(ld, ldw, ldb), "f64")])

fx = nn_randn((2, 3, 4, 5))
fi = nn_rng.integers(-9, 9, (2, 3, 4)).astype(np.int32)
case("nn_flatten", """
export fn f(x: f32[2, 3, 4, 5], i: i32[2, 3, 4], s: f32[]) -> (f32[120], f32[2, 60], f32[2, 12, 5], f32[2, 3, 20],
                                                                f32[2, 3, 4, 5], i32[2, 12], f32[1], f32[6, 4, 5]) {
  return flatten(x), flatten(x, 1), flatten(x, 1, 2), flatten(x, start_dim=-2), flatten(x, 2, 2),
         flatten(i, end_dim=-1, start_dim=1), flatten(s), flatten(x, 0, -3)
}
""", dict(x=fx, i=fi, s=np.float32(2.5)), [
    O("all", fx.reshape(120), tol=EXACT), O("from_1", fx.reshape(2, 60), tol=EXACT),
    O("1_to_2", fx.reshape(2, 12, 5), tol=EXACT), O("negative_start", fx.reshape(2, 3, 20), tol=EXACT),
    O("one_axis", fx, tol=EXACT), O("i32_named", fi.reshape(2, 12), "i32"),
    O("scalar", np.array([2.5]), tol=EXACT), O("negative_end", fx.reshape(6, 4, 5), tol=EXACT),
])

gx = nn_randn((2, 6, 5, 7)) * 2 + 0.5
gx[1, 2:4] = 0.25                              # one group constant: the result is the bias
gy = nn_randn((3, 8, 9))
gz = nn_randn((5, 12))
gw, gb = 1 + 0.1 * nn_randn((12,)), 0.1 * nn_randn((12,))
case("nn_group_norm", """
export fn f(x: f32[2, 6, 5, 7], y: f32[3, 8, 9], z: f32[5, 12], w: f32[12], b: f32[12]) -> (f32[2, 6, 5, 7], f32[2, 6, 5, 7], f32[2, 6, 5, 7], f32[3, 8, 9], f32[5, 12], f32[5, 12]) {
  let w6 = w[0:6]
  let b6 = b[0:6]
  return group_norm(x, 3, w6, b6), group_norm(x, 1, w6, b6, eps=0.1), group_norm(x, 6, w6, b6),
         group_norm(y, num_groups=4, weight=w[0:8], bias=b[0:8]), group_norm(z, 4, w, b), group_norm(z, 12, w, b, 1e-3)
}
""", dict(x=gx, y=gy, z=gz, w=gw, b=gb), [
    O("c6_g3_5x7", group_norm_ref(gx, 3, gw[:6], gb[:6]), tol=NN_TOL),
    O("one_group_eps", group_norm_ref(gx, 1, gw[:6], gb[:6], 0.1), tol=NN_TOL),
    O("instance", group_norm_ref(gx, 6, gw[:6], gb[:6]), tol=NN_TOL),
    O("rank3_named", group_norm_ref(gy, 4, gw[:8], gb[:8]), tol=NN_TOL),
    O("rank2", group_norm_ref(gz, 4, gw, gb), tol=NN_TOL),
    O("rank2_positional_eps", group_norm_ref(gz, 12, gw, gb, 1e-3), tol=NN_TOL),
])
# a model's own fn linear (written before the builtin, as samples/mlp.nest's) takes
# its place: here [in, out] weights, not the builtin's [out, in]
sx, sw = nn_randn((3, 4)), nn_randn((4, 6))
case("nn_own_linear_shadows", """
fn linear(x: f32[N, I], w: f32[I, O]) -> f32[N, O] {
  return x @ w
}

export fn f(x: f32[3, 4], w: f32[4, 6]) -> f32[3, 6] {
  return linear(x, w)
}
""", dict(x=sx, w=sw), [O("own_fn", d(sx) @ d(sw), tol=NN_TOL)])
go = (100 + nn_randn((2, 4, 3, 5))).astype(np.float32)
gd = nn_randn((3, 10, 3, 3), np.float64) * 3 - 1
gdw, gdb = nn_randn((10,), np.float64), nn_randn((10,), np.float64)
case("nn_group_norm_offset_f64", """
export fn f(x: f32[2, 4, 3, 5], w: f32[4], b: f32[4], y: f64[3, 10, 3, 3], v: f64[10], c: f64[10]) -> (f32[2, 4, 3, 5], f64[3, 10, 3, 3]) {
  return group_norm(x, 2, w, b), group_norm(y, 5, v, c)
}
""", dict(x=go, w=np.ones(4, np.float32), b=np.zeros(4, np.float32), y=gd, v=gdw, c=gdb), [
    O("mean_100_std_1", group_norm_ref(go, 2, np.ones(4), np.zeros(4)), tol=NN_TOL),
    O("f64_c10_g5_3x3", group_norm_ref(gd, 5, gdw, gdb), "f64"),
])


def batch_norm_ref(x, mean, var, w, b, eps=1e-5):
    """F.batch_norm(training=False) over axis 1, straight from the formula in float64."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    r = lambda v: d(v).reshape(shape)
    return (d(x) - r(mean)) / np.sqrt(r(var) + eps) * r(w) + r(b)


def bn_stats(c):
    """running_mean, running_var (positive, some tiny so eps matters), weight, bias."""
    var = uni((c,), 0.05, 3.0)
    var[0] = 1e-6
    return uni((c,), -1, 1), var, uni((c,), 0.5, 1.5), uni((c,), -0.5, 0.5)


bx4, bx2, bx3 = randn((2, 3, 5, 7)) * 2 + 0.3, randn((3, 4)), randn((1, 5, 9)) * 3
bs3, bs4, bs5 = bn_stats(3), bn_stats(4), bn_stats(5)
case("batch_norm", """
export fn f(x: f32[2, 3, 5, 7], m3: f32[3], v3: f32[3], w3: f32[3], b3: f32[3],
            y: f32[3, 4], m4: f32[4], v4: f32[4], w4: f32[4], b4: f32[4],
            z: f32[1, 5, 9], m5: f32[5], v5: f32[5], w5: f32[5], b5: f32[5]) ->
    (f32[2, 3, 5, 7], f32[2, 3, 5, 7], f32[3, 4], f32[1, 5, 9]) {
  return batch_norm(x, m3, v3, w3, b3), batch_norm(x, m3, v3, w3, b3, eps=1e-3),
         batch_norm(y, m4, v4, w4, b4), relu(batch_norm(z, m5, v5, w5, b5, 0.1))
}
""", dict(x=bx4, m3=bs3[0], v3=bs3[1], w3=bs3[2], b3=bs3[3], y=bx2, m4=bs4[0], v4=bs4[1],
          w4=bs4[2], b4=bs4[3], z=bx3, m5=bs5[0], v5=bs5[1], w5=bs5[2], b5=bs5[3]), [
    O("batch_norm_nchw_odd", batch_norm_ref(bx4, *bs3), tol=1e-5),
    O("batch_norm_eps", batch_norm_ref(bx4, *bs3, eps=1e-3), tol=1e-5),
    O("batch_norm_rank2", batch_norm_ref(bx2, *bs4), tol=1e-5),
    O("batch_norm_rank3_relu", np.maximum(batch_norm_ref(bx3, *bs5, eps=0.1), 0), tol=1e-5),
])

# --- shape ----------------------------------------------------------------------------

hx = uni((2, 3, 4))
ha, hb, hc = uni((2, 3)), uni((1, 3)), uni((2, 2))
h6 = uni((2, 6))
h4 = uni((4, 3))
h1 = uni((1, 3))
hv = uni((3,))
hz = uni((2, 1, 3))
case("shape", """
export fn f(x: f32[2, 3, 4], a: f32[2, 3], b: f32[1, 3], c: f32[2, 2], v: f32[3],
            z: f32[2, 1, 3]) -> (f32[6, 4], f32[24], f32[4, 3, 2], f32[4, 2, 3], f32[3, 2], f32[3, 3], f32[2, 5],
        f32[2, 8], f32[4, 3], f32[2, 6, 4], f32[4, 3], f32[2, 4, 3], f32[2, 4, 3],
        f32[1, 2, 3], f32[2, 3, 1], f32[2, 3], f32[3], f32[2, 1, 3, 4]) {
  return reshape(x, [6, -1]), reshape(x, [-1]), reshape(x, [4, 3, 2]), transpose(x, [2, 0, 1]),
         transpose(a, [1, 0]), concat([a, b], axis=0), concat([a, c], axis=1),
         concat([a, c, a], axis=-1), concat([a, b, b]), concat([x, x], axis=1),
         expand(b, [4, 3]), expand(v, [2, 4, 3]), expand(z, [-1, 4, -1]), unsqueeze(a, 0),
         unsqueeze(a, 2), squeeze(z, 1), squeeze(b, 0), unsqueeze(x, 1)
}
""", dict(x=hx, a=ha, b=hb, c=hc, v=hv, z=hz), [
    O("reshape_neg1", hx.reshape(6, 4), tol=0.0), O("reshape_flat", hx.reshape(-1), tol=0.0),
    O("reshape_432", hx.reshape(4, 3, 2), tol=0.0),
    O("transpose_201", hx.transpose(2, 0, 1), tol=0.0), O("transpose_2d", ha.T, tol=0.0),
    O("concat_axis0", np.concatenate([ha, hb], 0), tol=0.0),
    O("concat_axis1", np.concatenate([ha, hc], 1), tol=0.0),
    O("concat_three_neg1", np.concatenate([ha, hc, ha], -1), tol=0.0),
    O("concat_default_axis", np.concatenate([ha, hb, hb], 0), tol=0.0),
    O("concat_rank3_axis1", np.concatenate([hx, hx], 1), tol=0.0),
    O("expand_2d", np.broadcast_to(hb, (4, 3)), tol=0.0),
    O("expand_rank_up", np.broadcast_to(hv, (2, 4, 3)), tol=0.0),
    O("expand_keep_neg1", np.broadcast_to(hz, (2, 4, 3)), tol=0.0),
    O("unsqueeze0", ha[None], tol=0.0), O("unsqueeze_last", ha[:, :, None], tol=0.0),
    O("squeeze1", hz[:, 0], tol=0.0), O("squeeze0", hb[0], tol=0.0),
    O("unsqueeze_rank3", hx[:, None], tol=0.0),
])
case("shape_negative_axes", """
export fn f(a: f32[2, 3], z: f32[2, 1, 3]) -> (f32[2, 3, 1], f32[2, 1, 3], f32[2, 3]) {
  return unsqueeze(a, -1), unsqueeze(a, -2), squeeze(z, -2)
}
""", dict(a=ha, z=hz), [
    O("unsqueeze_neg1", np.expand_dims(ha, -1), tol=0.0),
    O("unsqueeze_neg2", np.expand_dims(ha, -2), tol=0.0),
    O("squeeze_neg2", np.squeeze(hz, -2), tol=0.0),
])
case("split", """
export fn f(x: f32[2, 6], y: f32[4, 3], u: f32[2, 3, 4]) -> (f32[2, 2], f32[2, 2], f32[2, 2],
    f32[2, 3], f32[2, 3], f32[2, 3, 2], f32[2, 3, 2], f32[2, 2]) {
  let a, b, c = split(x, 3, axis=-1)
  let p, q = split(y, 2)
  let s, t = split(u, 2, axis=2)
  return a, b, c, p, q, s, t, b + c
}
""", dict(x=h6, y=h4, u=hx), [
    O("split3_a", h6[:, 0:2], tol=0.0), O("split3_b", h6[:, 2:4], tol=0.0),
    O("split3_c", h6[:, 4:6], tol=0.0), O("split2_default_axis_p", h4[0:2], tol=0.0),
    O("split2_default_axis_q", h4[2:4], tol=0.0), O("split_rank3_s", hx[:, :, 0:2], tol=0.0),
    O("split_rank3_t", hx[:, :, 2:4], tol=0.0),
    O("split_use", d(h6[:, 2:4]) + d(h6[:, 4:6]), tol=EXACT),
])

# --- creation -------------------------------------------------------------------------

cr = uni((2, 3))
case("creation", """
const N = 6
export fn f(x: f32[2, 3]) -> (i64[5], f32[2, 3], f32[2, 3], f32[3, 2], f32[2, 2], f32[4],
                              i32[2], f32[2, 3], i64[6], f32[2, 3], f64[2]) {
  return arange(5), zeros([2, 3]), ones([2, 3]), full([3, 2], 3.5), full([2, 2], -1),
         f32(arange(4)) * 0.5, i32(ones([2])), x + full([2, 3], 2.0), arange(N) * 2,
         x * zeros([2, 3]) + ones([3]), f64(full([2], 0.1))
}
""", dict(x=cr), [
    O("arange", np.arange(5), "i64"), O("zeros", np.zeros((2, 3)), tol=0.0),
    O("ones", np.ones((2, 3)), tol=0.0), O("full", np.full((3, 2), 3.5), tol=0.0),
    O("full_int_value", np.full((2, 2), -1.0), tol=0.0),
    O("arange_cast", np.arange(4) * 0.5, tol=0.0), O("ones_cast_i32", np.ones(2), "i32"),
    O("full_add", d(cr) + 2.0, tol=EXACT), O("arange_const_times_int", np.arange(6) * 2, "i64"),
    O("zeros_ones_broadcast", d(cr) * 0 + 1.0, tol=0.0),
    O("full_cast_f64", np.full(2, float(np.float32(0.1))), "f64", 0.0),
])
case("creation_no_args", """
export fn f() -> (i64[3], f32[2]) {
  return arange(3), full([2], 7.25)
}
""", {}, [O("arange", np.arange(3), "i64"), O("full", np.full(2, 7.25), tol=0.0)])

# --- causal mask ----------------------------------------------------------------------

q4, q3, qt = uni((4, 4), -3, 3), uni((2, 3, 5), -3, 3), uni((5, 3), -3, 3)
q64 = rng.uniform(-3, 3, (3, 3))
case("causal_mask", """
export fn f(a: f32[4, 4], b: f32[2, 3, 5], c: f32[5, 3], g: f64[3, 3]) -> (f32[4, 4], f32[2, 3, 5], f32[5, 3], f32[4, 4], f64[3, 3]) {
  return causal_mask(a), causal_mask(b), causal_mask(c), softmax(causal_mask(a * 0.5)),
         causal_mask(g)
}
""", dict(a=q4, b=q3, c=qt, g=q64), [
    O("square", causal_ref(q4), tol=0.0), O("rank3_wide", causal_ref(q3), tol=0.0),
    O("tall", causal_ref(qt), tol=0.0), O("softmax_of_mask", softmax_ref(causal_ref(d(q4) * 0.5))),
    O("f64", causal_ref(q64), "f64", 0.0),
])

# --- convolution and pooling -----------------------------------------------------------

kx = uni((2, 3, 7, 6), -2, 2)
kw, kb = uni((4, 3, 3, 3), -1, 1), uni((4,), -1, 1)
kw1 = uni((5, 3, 1, 1), -1, 1)
kwr = uni((4, 3, 3, 2), -1, 1)
case("conv2d", """
export fn f(x: f32[2, 3, 7, 6], w: f32[4, 3, 3, 3], b: f32[4], w1: f32[5, 3, 1, 1],
            wr: f32[4, 3, 3, 2]) -> (f32[2, 4, 5, 4], f32[2, 4, 4, 3], f32[2, 4, 7, 6], f32[2, 5, 7, 6], f32[2, 4, 4, 7],
        f32[2, 4, 3, 2]) {
  return conv2d(x, w, b), conv2d(x, w, b, stride=2, padding=1), conv2d(x, w, padding=1),
         conv2d(x, w1), conv2d(x, wr, b, stride=[2, 1], padding=[1, 1]),
         conv2d(x, w, b, stride=2)
}
""", dict(x=kx, w=kw, b=kb, w1=kw1, wr=kwr), [
    O("basic_bias", conv2d_ref(kx, kw, kb)),
    O("stride2_pad1", conv2d_ref(kx, kw, kb, 2, 1)),
    O("no_bias_pad1", conv2d_ref(kx, kw, None, 1, 1)),
    O("1x1_no_bias", conv2d_ref(kx, kw1)),
    O("rect_kernel_list_stride_pad", conv2d_ref(kx, kwr, kb, (2, 1), (1, 1))),
    O("named_stride_only", conv2d_ref(kx, kw, kb, 2)),
])
gx = uni((2, 4, 6, 5), -2, 2)
gw2, gb6 = uni((6, 2, 3, 3), -1, 1), uni((6,), -1, 1)
gdw, gdb = uni((4, 1, 3, 3), -1, 1), uni((4,), -1, 1)
gdm = uni((8, 1, 3, 3), -1, 1)
case("conv2d_groups", """
export fn f(x: f32[2, 4, 6, 5], w2: f32[6, 2, 3, 3], b6: f32[6], dw: f32[4, 1, 3, 3],
            db: f32[4], dm: f32[8, 1, 3, 3]) -> (f32[2, 6, 4, 3], f32[2, 4, 6, 5], f32[2, 8, 3, 3], f32[2, 4, 3, 3], f32[2, 6, 2, 2]) {
  return conv2d(x, w2, b6, groups=2), conv2d(x, dw, db, padding=1, groups=4),
         conv2d(x, dm, stride=2, padding=1, groups=4), conv2d(x, dw, db, groups=4, padding=1, stride=2),
         conv2d(x, w2, b6, stride=2, groups=2)
}
""", dict(x=gx, w2=gw2, b6=gb6, dw=gdw, db=gdb, dm=gdm), [
    O("groups2", conv2d_ref(gx, gw2, gb6, 1, 0, 2)),
    O("depthwise_pad1", conv2d_ref(gx, gdw, gdb, 1, 1, 4)),
    O("depthwise_multiplier2_no_bias", conv2d_ref(gx, gdm, None, 2, 1, 4)),
    O("depthwise_named_any_order", conv2d_ref(gx, gdw, gdb, 2, 1, 4)),
    O("groups2_stride2", conv2d_ref(gx, gw2, gb6, 2, 0, 2)),
])
# The signatures `conv2d x w b stride=1 padding=0 groups=1` and `max_pool2d x k stride=k
# padding=0` list stride etc. as ordinary parameters with defaults, and a call takes
# positional arguments, then named ones (man/nest.7), so all-positional calls are valid.
case("conv2d_positional_args", """
export fn f(x: f32[2, 4, 6, 5], w: f32[4, 1, 3, 3], b: f32[4]) -> f32[2, 4, 3, 3] {
  return conv2d(x, w, b, 2, 1, 4)
}
""", dict(x=gx, w=gdw, b=gdb), [
    O("stride_padding_groups", conv2d_ref(gx, gdw, gdb, 2, 1, 4)),
])
case("pool2d_positional_args", """
export fn f(x: f32[2, 4, 6, 5]) -> (f32[2, 4, 3, 3], f32[2, 4, 3, 3]) {
  return max_pool2d(x, 3, 2, 1), avg_pool2d(x, 3, 2, 1)
}
""", dict(x=gx), [
    O("max_pool2d_stride_padding", pool_ref(gx, 3, 2, 1), tol=0.0),
    O("avg_pool2d_stride_padding", pool_ref(gx, 3, 2, 1, "avg")),
])
px = uni((2, 3, 7, 6), -3, 3)
pn = -uni((1, 2, 5, 5), 1, 3)   # all negative: -inf padding differs from zero padding
case("pool2d", """
export fn f(x: f32[2, 3, 7, 6], n: f32[1, 2, 5, 5]) -> (f32[2, 3, 3, 3], f32[1, 2, 3, 3], f32[2, 3, 3, 2], f32[2, 3, 5, 4], f32[2, 3, 3, 3],
        f32[1, 2, 3, 3], f32[2, 3, 3, 2], f32[2, 3, 1, 1], f32[1, 2, 1, 1], f32[2, 3, 4, 3],
        f32[2, 3, 4, 5]) {
  return max_pool2d(x, 2), max_pool2d(n, 3, stride=2, padding=1), max_pool2d(x, [2, 3]),
         max_pool2d(x, 3, stride=1), avg_pool2d(x, 2), avg_pool2d(n, 3, stride=2, padding=1),
         avg_pool2d(x, [2, 3]), global_avg_pool2d(x), global_avg_pool2d(n),
         max_pool2d(x, 3, stride=2, padding=1), avg_pool2d(x, [3, 2], stride=[2, 1], padding=[1, 0])
}
""", dict(x=px, n=pn), [
    O("max_k2", pool_ref(px, 2), tol=0.0),
    O("max_pad_neg_inf", pool_ref(pn, 3, 2, 1), tol=0.0),
    O("max_rect_kernel", pool_ref(px, (2, 3)), tol=0.0),
    O("max_stride1", pool_ref(px, 3, 1), tol=0.0),
    O("avg_k2", pool_ref(px, 2, kind="avg")),
    O("avg_pad_count_include", pool_ref(pn, 3, 2, 1, "avg")),
    O("avg_rect_kernel", pool_ref(px, (2, 3), kind="avg")),
    O("global_avg", d(px).mean((2, 3), keepdims=True)),
    O("global_avg_neg", d(pn).mean((2, 3), keepdims=True)),
    O("max_pad1_stride2", pool_ref(px, 3, 2, 1), tol=0.0),
    O("avg_list_args", pool_ref(px, (3, 2), (2, 1), (1, 0), "avg")),
])

# Rows wider than a vector (16 lanes with AVX-512): the compiled pools keep a row's outputs in
# vectors, with the columns that read padding at either end filled lane by lane.
wx = uni((1, 3, 9, 75), -3, 3)
wn = -uni((1, 2, 8, 112), 1, 3)
case("pool2d_wide_rows", """
export fn f(x: f32[1, 3, 9, 75], n: f32[1, 2, 8, 112]) -> (f32[1, 3, 5, 38], f32[1, 3, 4, 37], f32[1, 3, 9, 75],
        f32[1, 2, 4, 56], f32[1, 3, 5, 38], f32[1, 2, 4, 56], f32[1, 3, 7, 38]) {
  return max_pool2d(x, 3, stride=2, padding=1), max_pool2d(x, 2), max_pool2d(x, 3, stride=1, padding=1),
         max_pool2d(n, 3, stride=2, padding=1), avg_pool2d(x, 3, stride=2, padding=1),
         avg_pool2d(n, 3, stride=2, padding=1), max_pool2d(x, [3, 5], stride=[1, 2], padding=[0, 2])
}
""", dict(x=wx, n=wn), [
    O("max_k3_s2_p1", pool_ref(wx, 3, 2, 1), tol=0.0),
    O("max_k2", pool_ref(wx, 2), tol=0.0),
    O("max_k3_s1_p1", pool_ref(wx, 3, 1, 1), tol=0.0),
    O("max_resnet_row_neg", pool_ref(wn, 3, 2, 1), tol=0.0),
    O("avg_k3_s2_p1", pool_ref(wx, 3, 2, 1, "avg")),
    O("avg_resnet_row_neg", pool_ref(wn, 3, 2, 1, "avg")),
    O("max_rect_k3x5", pool_ref(wx, (3, 5), (1, 2), (0, 2)), tol=0.0),
])

# --- indexing and gather ---------------------------------------------------------------

ix = uni((5, 4))
iy = uni((2, 3, 4))
case("indexing", """
export fn f(x: f32[5, 4], y: f32[2, 3, 4]) -> (f32[4], f32[4], f32[2, 4], f32[5, 2], f32[5], f32[2, 4], f32[2, 4], f32[2, 4], f32[2],
        f32[3, 4], f32[2, 2], f32, f32[5, 4], f32[3, 3], f32[2, 3, 2]) {
  return x[2], x[-1], x[1:3], x[:, 0:2], x[:, -1], x[:2], x[3:], x[-2:], x[1:3, 1], y[1],
         y[:, 1:3, -1], y[-1, -1, -1], x[:], x[1:-1, -3:], y[:, :, 1:3]
}
""", dict(x=ix, y=iy), [
    O("int", ix[2], tol=0.0), O("neg_int", ix[-1], tol=0.0), O("slice", ix[1:3], tol=0.0),
    O("second_axis_slice", ix[:, 0:2], tol=0.0), O("second_axis_neg_int", ix[:, -1], tol=0.0),
    O("slice_to", ix[:2], tol=0.0), O("slice_from", ix[3:], tol=0.0),
    O("slice_neg_from", ix[-2:], tol=0.0), O("slice_int", ix[1:3, 1], tol=0.0),
    O("rank3_int", iy[1], tol=0.0), O("rank3_mixed", iy[:, 1:3, -1], tol=0.0),
    O("all_ints_0d", iy[-1, -1, -1], tol=0.0), O("full_slice", ix[:], tol=0.0),
    O("neg_bounds", ix[1:-1, -3:], tol=0.0), O("rank3_last_axis_slice", iy[:, :, 1:3], tol=0.0),
])

gt = uni((10, 4))
gi = np.array([0, 9, 3, 3, 5, 0], np.int32)
gl = np.array([[9, 8, 7], [0, 0, 1]], np.int64)
gv = uni((10,))
case("gather", """
export fn f(t: f32[10, 4], i: i32[6], l: i64[2, 3], v: f32[10], s: i32) -> (f32[6, 4], f32[2, 3, 4], f32[6], f32[2, 3], f32[4], f32[6, 4]) {
  return t[i], t[l], v[i], v[l], t[s], t[i] * 2.0
}
""", dict(t=gt, i=gi, l=gl, v=gv, s=np.int32(7)), [
    O("i32_rows", gt[gi], tol=0.0), O("i64_2d_index", gt[gl], tol=0.0),
    O("1d_table", gv[gi], tol=0.0), O("1d_table_2d_index", gv[gl], tol=0.0),
    O("0d_index", gt[7], tol=0.0), O("gather_then_mul", d(gt[gi]) * 2.0, tol=EXACT),
])
error_case("gather_out_of_range", """
export fn f(t: f32[10, 4], i: i32[3]) -> f32[3, 4] {
  return t[i]
}
""", dict(t=gt, i=np.array([0, 10, 2], np.int32)), 1, "index 10 >= 10")
error_case("gather_negative_index", """
export fn f(t: f32[10, 4], i: i64[3]) -> (f32[3, 4], f32[10, 4]) {
  return t[i], t * 2.0
}
""", dict(t=gt, i=np.array([0, -1, 2], np.int64)), 2, "index -1 < 0")

# --- compile-time numbers ---------------------------------------------------------------

sx8 = uni((8,), -4, 4)
sx8[0] = 0.0
sx8[1] = 3.0
si8 = ints((8,), -10, 10)
SCALAR_SRC = """
const D = 8
const H = 2
const EPS = 0.25
const FLAG = true
fn scale(x: f32[N], s: float) -> f32[N] { return x * s }
fn addk(x: f32[N], k: int) -> f32[N] { return x + k }
fn pick(x: f32[N], b: bool) -> f32[N] { return where(x > 0.0, x, x * 0.0) * f32(b) }
export fn f(x: f32[8], i: i32[8]) -> (f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], i32[8],
    i32[8], i32[8], i32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32,
    i32, f32[8], f32[8], f32[8], f32[8], f32[8]) {
  return x * 2.0, x / D, x * f32(D / H), 2.0 * x, 1.0 - x, x + 1, i * 3, i / 2, i % 3, i + D,
         scale(x, 0.5), addk(x, 3), x * rsqrt(f32(D / H)), x * pi, x / (D / 3), x + EPS,
         x * (D % 3), f32(D / H), i32(-2.7), maximum(x, -inf), pick(x, FLAG), x * (D - H * 3),
         x - D / H, minimum(x, inf)
}
"""
SX, SI = d(sx8), sx8.astype(np.int64)
scalar_outs = [
    O("mul_float_literal", SX * 2.0, tol=EXACT), O("div_const", SX / 8, tol=EXACT),
    O("f32_of_const_div", SX * 4.0, tol=EXACT), O("literal_left", 2.0 * SX, tol=EXACT),
    O("literal_minus", 1.0 - SX, tol=EXACT), O("int_literal_float_tensor", SX + 1, tol=EXACT),
    O("i32_mul", si8 * 3, "i32"), O("i32_floordiv_literal", np.floor_divide(si8, 2), "i32"),
    O("i32_mod_literal", np.mod(si8, 3), "i32"), O("i32_plus_const", si8 + 8, "i32"),
    O("float_scalar_arg", SX * 0.5, tol=EXACT), O("int_scalar_arg", SX + 3, tol=EXACT),
    O("rsqrt_of_cast_const", SX / 2.0),
    O("pi", SX * math.pi), O("const_int_div_truncates", SX / 2, tol=EXACT),
    O("float_const", SX + 0.25, tol=EXACT), O("const_mod", SX * 2, tol=EXACT),
    O("cast_const_0d", np.float64(4.0), tol=0.0), O("cast_literal_trunc", np.int32(-2), "i32"),
    O("maximum_neg_inf", SX, tol=0.0), O("bool_scalar_arg_where", np.maximum(SX, 0), tol=EXACT),
    O("const_arith_neg", SX * (8 - 6), tol=EXACT), O("minus_const_div", SX - 4, tol=EXACT),
    O("minimum_inf", SX, tol=0.0),
]
case("scalars_consts", SCALAR_SRC, dict(x=sx8, i=si8), scalar_outs)
case("const_override", """
const D = 8
export fn f(x: f32[4]) -> (f32[4], f32[D]) {
  return x / D, full([D], 1.0) * f32(D)
}
""", dict(x=sx8[:4]), [O("x_div_D_16", SX[:4] / 16, tol=EXACT),
                       O("full_D_16", np.full(16, 16.0), tol=0.0)], args=["-D", "D=16"])

# --- f64 ------------------------------------------------------------------------------

fa, fb = rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (4, 5))
fw, fbias = 1 + 0.1 * rng.standard_normal(4), 0.1 * rng.standard_normal(4)
fx4 = rng.uniform(-3, 3, (1, 2, 5, 5))
fk = rng.uniform(-1, 1, (3, 2, 3, 3))
case("f64_tensors", """
export fn f(a: f64[3, 4], b: f64[4, 5], w: f64[4], c: f64[4], x: f64[1, 2, 5, 5],
            k: f64[3, 2, 3, 3]) -> (f64[3, 5], f64[3, 4], f64[3], f64[3, 4], f64[3, 4], f64[3, 4], f64[3, 4], f64[3, 4],
        f64[3, 4], f64, i64[3], f64[1, 3, 3, 3], f64[1, 2, 2, 2], f64[3, 4]) {
  return a @ b, exp(a), sum(a, axis=1), softmax(a), log_softmax(a, axis=0), a * 2.0 + 1,
         layernorm(a, w, c), rmsnorm(a, w), a / c % 0.75, mean(a), argmax(a),
         conv2d(x, k, padding=0), avg_pool2d(x, 2), pow(abs(a), c)
}
""", dict(a=fa, b=fb, w=fw, c=fbias, x=fx4, k=fk), [
    O("matmul", fa @ fb, "f64"), O("exp", np.exp(fa), "f64"), O("sum", fa.sum(1), "f64"),
    O("softmax", softmax_ref(fa), "f64"), O("log_softmax_axis0", log_softmax_ref(fa, 0), "f64"),
    O("scalar_arith", fa * 2.0 + 1, "f64", D64X), O("layernorm", layernorm_ref(fa, fw, fbias), "f64"),
    O("rmsnorm", rmsnorm_ref(fa, fw), "f64"), O("div_mod", fmod_floor_ref(fa / fbias, 0.75), "f64"),
    O("mean", np.float64(fa.mean()), "f64"), O("argmax", argmax_ref(fa), "i64"),
    O("conv2d", conv2d_ref(fx4, fk), "f64"), O("avg_pool2d", pool_ref(fx4, 2, kind="avg"), "f64"),
    O("pow", np.abs(fa) ** fbias, "f64"),
])

# --- topk, take_along_axis, cumsum (PyTorch / NumPy semantics, issue #10) ----------------


def topk_ref(x, k, axis=-1, largest=True):
    """torch.topk's positions by an explicit ordering: value (NaN above every number),
    then the lower position first on ties; not np.argsort's own tie rule."""
    x = np.asarray(x)
    xm = np.moveaxis(x, norm_axis(axis, x.ndim), -1)
    out = np.zeros(xm.shape[:-1] + (k,), dtype=np.int64)
    for idx in np.ndindex(*xm.shape[:-1]):
        row = [float(v) for v in xm[idx]]
        def key(j):
            v = row[j]
            nan = math.isnan(v)
            if largest:
                return (0 if nan else 1, 0.0 if nan else -v, j)
            return (1 if nan else 0, 0.0 if nan else v, j)
        out[idx] = sorted(range(len(row)), key=key)[:k]
    return np.moveaxis(out, -1, norm_axis(axis, x.ndim))


def take_ref(x, i, axis):
    """numpy.take_along_axis written out: out[..., j, ...] = x[..., i[..., j, ...], ...],
    with size-1 axes of x and i broadcast."""
    x, i = np.asarray(x), np.asarray(i)
    axis = norm_axis(axis, x.ndim)
    shape = [i.shape[d] if d == axis else max(x.shape[d], i.shape[d]) for d in range(x.ndim)]
    out = np.zeros(shape, dtype=x.dtype)
    for at in np.ndindex(*shape):
        ia = tuple(0 if i.shape[d] == 1 else at[d] for d in range(x.ndim))
        xa = [0 if x.shape[d] == 1 else at[d] for d in range(x.ndim)]
        xa[axis] = int(i[ia])
        out[at] = x[tuple(xa)]
    return out


def cumsum_ref(x, axis):
    """A running sum along axis, one rounding (or int32 wrap) per step in x's dtype."""
    x = np.asarray(x)
    xm = np.moveaxis(x, norm_axis(axis, x.ndim), 0)
    out = np.empty_like(xm)
    acc = np.zeros(xm.shape[1:], dtype=x.dtype)
    with np.errstate(over="ignore"):
        for j in range(xm.shape[0]):
            acc = (acc + xm[j]).astype(x.dtype)
            out[j] = acc
    return np.moveaxis(out, 0, norm_axis(axis, x.ndim))


tk_a = randn((5, 37))
tk_b = randn((6, 5, 3))
tk_c = randn((4, 9, 2))
tk_t = ints((3, 11), 0, 3)                     # many ties
tk_n = randn((2, 8))
tk_n[0, [1, 5]] = np.nan
tk_n[0, 2] = np.inf
tk_n[1, [0, 3, 6]] = np.nan
tk_n[1, 4] = -np.inf
tk_f = rng.uniform(-1, 1, (3, 6))
tk_f[1, :] = 0.25                              # a row of equal values
case("topk", """
export fn f(a: f32[5, 37], b: f32[6, 5, 3], c: f32[4, 9, 2], t: i32[3, 11], n: f32[2, 8], g: f64[3, 6]) -> (
    f32[5, 4], i64[5, 4], f32[6, 5, 3], i64[6, 5, 3], f32[1, 9, 2], i64[1, 9, 2], i32[3, 6], i64[3, 6],
        i32[3, 5], i64[3, 5], f32[2, 5], i64[2, 5], f32[2, 5], i64[2, 5], f64[3, 6], i64[3, 6],
        f32[4, 2, 2], i64[4, 2, 2]) {
  let v1, i1 = topk(a, 4)
  let v2, i2 = topk(b, 5, axis=1, largest=false)
  let v3, i3 = topk(c, 1, 0)
  let v4, i4 = topk(t, 6, axis=-1)
  let v5, i5 = topk(t, k=5, largest=false, sorted=false)
  let v6, i6 = topk(n, 5)
  let v7, i7 = topk(n, 5, largest=false)
  let v8, j8 = topk(g, 6, axis=1)
  let v9, i9 = topk(c, 2, axis=-2)
  return v1, i1, v2, i2, v3, i3, v4, i4, v5, i5, v6, i6, v7, i7, v8, j8, v9, i9
}
""", dict(a=tk_a, b=tk_b, c=tk_c, t=tk_t, n=tk_n, g=tk_f), [
    O("largest_last_axis", take_ref(tk_a, topk_ref(tk_a, 4), 1), tol=0.0),
    O("largest_last_axis_idx", topk_ref(tk_a, 4), "i64"),
    O("smallest_mid_axis_k_eq_len", take_ref(tk_b, topk_ref(tk_b, 5, 1, False), 1), tol=0.0),
    O("smallest_mid_axis_k_eq_len_idx", topk_ref(tk_b, 5, 1, False), "i64"),
    O("k1_axis0", take_ref(tk_c, topk_ref(tk_c, 1, 0), 0), tol=0.0),
    O("k1_axis0_idx", topk_ref(tk_c, 1, 0), "i64"),
    O("ties_i32", take_ref(tk_t, topk_ref(tk_t, 6), 1), "i32"),
    O("ties_i32_lower_index_first", topk_ref(tk_t, 6), "i64"),
    O("ties_i32_smallest", take_ref(tk_t, topk_ref(tk_t, 5, largest=False), 1), "i32"),
    O("ties_i32_smallest_idx", topk_ref(tk_t, 5, largest=False), "i64"),
    O("nan_inf_largest", take_ref(tk_n, topk_ref(tk_n, 5), 1), tol=0.0),
    O("nan_inf_largest_idx", topk_ref(tk_n, 5), "i64"),
    O("nan_inf_smallest", take_ref(tk_n, topk_ref(tk_n, 5, largest=False), 1), tol=0.0),
    O("nan_inf_smallest_idx", topk_ref(tk_n, 5, largest=False), "i64"),
    O("f64_equal_row", take_ref(tk_f, topk_ref(tk_f, 6), 1), "f64", tol=0.0),
    O("f64_equal_row_idx", topk_ref(tk_f, 6), "i64"),
    O("neg_axis_k2", take_ref(tk_c, topk_ref(tk_c, 2, 1), 1), tol=0.0),
    O("neg_axis_k2_idx", topk_ref(tk_c, 2, 1), "i64"),
])

# mixture-of-experts routing: the top 2 of 8 experts per token, weights renormalised
moe = randn((16, 8))
moe_p = softmax_ref(moe)
moe_i = topk_ref(moe_p, 2)
moe_w = take_ref(moe_p, moe_i, 1)
case("topk_moe_routing", """
export fn f(logits: f32[16, 8]) -> (f32[16, 2], i64[16, 2]) {
  let w, e = topk(softmax(logits), 2)
  return w / sum(w, axis=-1, keepdim=true), e
}
""", dict(logits=moe), [
    O("weights", moe_w / moe_w.sum(-1, keepdims=True), tol=1e-5), O("experts", moe_i, "i64"),
])

ta_x = randn((5, 7))
ta_i = ints((5, 3), 0, 6, np.int64)
ta_y = randn((4, 6, 3))
ta_j = ints((4, 2, 3), 0, 5, np.int32)
ta_k = ints((4, 6, 2), 0, 2, np.int32)
ta_l = ints((3, 6, 3), 0, 3, np.int64)
ta_b = randn((1, 6))
ta_bi = ints((4, 3), 0, 5, np.int64)
ta_c = randn((4, 6, 5))
ta_ci = ints((4, 2, 1), 0, 5, np.int32)
ta_n = ints((3, 5), -100, 100, np.int32)
ta_ni = ints((3, 9), 0, 4, np.int32)
case("take_along_axis", """
export fn f(x: f32[5, 7], i: i64[5, 3], y: f32[4, 6, 3], j: i32[4, 2, 3], k: i32[4, 6, 2], l: i64[3, 6, 3],
            b: f32[1, 6], bi: i64[4, 3], c: f32[4, 6, 5], ci: i32[4, 2, 1], n: i32[3, 5], ni: i32[3, 9]) -> (
    f32[5, 3], f32[4, 2, 3], f32[4, 6, 2], f32[3, 6, 3], f32[4, 3], f32[4, 2, 5], i32[3, 9], f32[5, 3]) {
  return take_along_axis(x, i, 1), take_along_axis(y, j, axis=1), take_along_axis(y, k, -1),
         take_along_axis(y, l, 0), take_along_axis(b, bi, 1), take_along_axis(c, ci, 1),
         take_along_axis(n, ni, -1), take_along_axis(x, i, 1) * 2.0
}
""", dict(x=ta_x, i=ta_i, y=ta_y, j=ta_j, k=ta_k, l=ta_l, b=ta_b, bi=ta_bi, c=ta_c, ci=ta_ci,
          n=ta_n, ni=ta_ni), [
    O("last_axis_i64", take_ref(ta_x, ta_i, 1), tol=0.0),
    O("mid_axis_i32", take_ref(ta_y, ta_j, 1), tol=0.0),
    O("neg_axis_rank3", take_ref(ta_y, ta_k, -1), tol=0.0),
    O("axis0_rank3", take_ref(ta_y, ta_l, 0), tol=0.0),
    O("broadcast_x_rows", take_ref(ta_b, ta_bi, 1), tol=0.0),
    O("broadcast_index_last", take_ref(ta_c, ta_ci, 1), tol=0.0),
    O("i32_values", take_ref(ta_n, ta_ni, -1), "i32"),
    O("then_mul", d(take_ref(ta_x, ta_i, 1)) * 2.0, tol=EXACT),
])

cs_a = randn((5, 9))
cs_b = randn((3, 4, 7))
cs_i = ints((4, 5), -(2 ** 30), 2 ** 30)      # i32 sums wrap, as torch's with dtype kept
cs_l = ints((3, 6), -(2 ** 40), 2 ** 40, np.int64)
cs_f = rng.uniform(-1, 1, (7, 3))
case("cumsum", """
export fn f(a: f32[5, 9], b: f32[3, 4, 7], i: i32[4, 5], l: i64[3, 6], g: f64[7, 3]) -> (
    f32[5, 9], f32[5, 9], f32[3, 4, 7], f32[3, 4, 7], f32[3, 4, 7], f32[3, 4, 7], i32[4, 5], i32[4, 5],
        i64[3, 6], f64[7, 3]) {
  return cumsum(a, 1), cumsum(a, axis=0), cumsum(b, 0), cumsum(b, 1), cumsum(b, 2), cumsum(b, -1),
         cumsum(i, 1), cumsum(i, 0), cumsum(l, -1), cumsum(g, 0)
}
""", dict(a=cs_a, b=cs_b, i=cs_i, l=cs_l, g=cs_f), [
    O("f32_axis1", cumsum_ref(cs_a, 1), tol=1e-5), O("f32_axis0", cumsum_ref(cs_a, 0), tol=1e-5),
    O("rank3_axis0", cumsum_ref(cs_b, 0), tol=1e-5), O("rank3_axis1", cumsum_ref(cs_b, 1), tol=1e-5),
    O("rank3_axis2", cumsum_ref(cs_b, 2), tol=1e-5), O("rank3_neg_axis", cumsum_ref(cs_b, -1), tol=1e-5),
    O("i32_wraps_axis1", cumsum_ref(cs_i, 1), "i32"), O("i32_axis0", cumsum_ref(cs_i, 0), "i32"),
    O("i64", cumsum_ref(cs_l, -1), "i64"), O("f64_axis0", cumsum_ref(cs_f, 0), "f64"),
])


# --- dilated and transposed convolution, interpolation (issue #10) -------------------
# Their own generator, so that the inputs of the cases above stay as they were.

urng = np.random.default_rng(1010)


def uu(shape, dtype=np.float32):
    return urng.uniform(-1, 1, size=shape).astype(dtype)


def conv2d_dil_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Direct loop over output positions; the kernel's taps dilation apart."""
    x, w = d(x), d(w)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    eh, ew = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    oh, ow = (h + 2 * ph - eh) // sh + 1, (wd + 2 * pw - ew) // sw + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow))
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * sh:i * sh + eh:dh, j * sw:j * sw + ew:dw]
                out[:, oc, i, j] = np.einsum("nchw,chw->n", patch, w[oc])
    if b is not None:
        out += d(b)[None, :, None, None]
    return out


def conv_transpose2d_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The gradient of conv2d with respect to its input: every input pixel scatters the
    kernel, weighted by it, into a full-size buffer, which is then cropped by the padding."""
    x, w = d(x), d(w)
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    (sh, sw), (ph, pw) = pair(stride), pair(padding)
    (oph, opw), (dh, dw) = pair(output_padding), pair(dilation)
    cg = c // groups
    full = np.zeros((n, og * groups, (h - 1) * sh + dh * (kh - 1) + 1 + oph,
                     (wd - 1) * sw + dw * (kw - 1) + 1 + opw))
    for g in range(groups):
        xs, ws = x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg]
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for e in range(kw):
                        full[:, g * og:(g + 1) * og, i * sh + a * dh, j * sw + e * dw] += \
                            xs[:, :, i, j] @ ws[:, :, a, e]
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    out = full[:, :, ph:ph + oh, pw:pw + ow]
    if b is not None:
        out = out + d(b)[None, :, None, None]
    return out


def nearest_src(n_in, n_out, sf=None):
    """PyTorch's legacy nearest: equal and double sizes are special cases, else
    floor(i * scale) in float32, scale = 1/scale_factor when given, else in/out."""
    i = np.arange(n_out)
    if n_out == n_in:
        return i
    if n_out == 2 * n_in:
        return i >> 1
    sc = np.float32(1.0 / sf) if sf else np.float32(n_in) / np.float32(n_out)
    return np.minimum(np.floor(i.astype(np.float32) * sc).astype(np.int64), n_in - 1)


def linear_src(n_in, n_out, align, sf=None, ft=np.float32):
    """PyTorch's bilinear source positions along one axis, in its arithmetic type ft:
    align_corners maps the corner pixels onto each other, else pixel centres (clamped at
    0); returns the two input positions and the weight of the second."""
    if align:
        sc = ft(n_in - 1) / ft(n_out - 1) if n_out > 1 else ft(0)
    else:
        sc = ft(1.0 / sf) if sf else ft(n_in) / ft(n_out)
    i = np.arange(n_out).astype(ft)
    real = sc * i if align else np.maximum(sc * (i + ft(0.5)) - ft(0.5), ft(0))
    i0 = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    lam = np.clip(real - i0.astype(ft), 0, 1).astype(np.float64)
    return i0, np.where(i0 < n_in - 1, i0 + 1, i0), lam


def interp_ref(x, size=None, sf=None, mode="nearest", align=False):
    x = np.asarray(x)
    h, w = x.shape[2:]
    sfh, sfw = (sf, sf) if not isinstance(sf, (list, tuple)) else sf
    oh, ow = pair(size) if size is not None else (int(math.floor(h * sfh)), int(math.floor(w * sfw)))
    xd = d(x)
    if mode == "nearest":
        return xd[:, :, nearest_src(h, oh, sfh if size is None else None)][
            :, :, :, nearest_src(w, ow, sfw if size is None else None)]
    ft = np.float64 if x.dtype == np.float64 else np.float32
    h0, h1, lh = linear_src(h, oh, align, sfh if size is None else None, ft)
    w0, w1, lw = linear_src(w, ow, align, sfw if size is None else None, ft)
    lh, lw = lh[:, None], lw[None, :]
    top = (1 - lw) * xd[:, :, h0][:, :, :, w0] + lw * xd[:, :, h0][:, :, :, w1]
    bot = (1 - lw) * xd[:, :, h1][:, :, :, w0] + lw * xd[:, :, h1][:, :, :, w1]
    return (1 - lh) * top + lh * bot


R5 = 1e-5   # these cases: 1e-5 relative to the largest reference value
dx, dwt, dwb = uu((2, 3, 9, 8)), uu((4, 3, 3, 2)), uu((4,))
dw5 = uu((5, 3, 3, 3))
dgx, dgw, ddw, ddb = uu((1, 4, 7, 7)), uu((6, 2, 3, 3)), uu((4, 1, 3, 3)), uu((4,))
case("i10_conv2d_dilation", """
export fn f(x: f32[2, 3, 9, 8], w: f32[4, 3, 3, 2], b: f32[4], w5: f32[5, 3, 3, 3], gx: f32[1, 4, 7, 7],
            gw: f32[6, 2, 3, 3], dw: f32[4, 1, 3, 3], db: f32[4]) -> (f32[2, 5, 5, 4], f32[2, 4, 5, 5], f32[1, 6, 7, 7], f32[1, 4, 7, 7], f32[2, 3, 9, 8], f32[2, 4, 7, 7]) {
  return conv2d(x, w5, dilation=2), conv2d(x, w, b, stride=2, padding=2, dilation=[2, 3]),
         conv2d(gx, gw, padding=3, groups=2, dilation=3), conv2d(gx, dw, db, 1, 2, 4, 2),
         conv2d(x, w5[0:3, :, 1:2, 1:2], dilation=3), conv2d(x, w, b, dilation=[1, 1])
}
""", dict(x=dx, w=dwt, b=dwb, w5=dw5, gx=dgx, gw=dgw, dw=ddw, db=ddb), [
    O("dilation2", conv2d_dil_ref(dx, dw5, None, 1, 0, 2), tol=R5),
    O("stride_padding_rect_dilation", conv2d_dil_ref(dx, dwt, dwb, 2, 2, (2, 3)), tol=R5),
    O("groups2_dilation3", conv2d_dil_ref(dgx, dgw, None, 1, 3, 3, 2), tol=R5),
    O("depthwise_positional_dilation", conv2d_dil_ref(dgx, ddw, ddb, 1, 2, 2, 4), tol=R5),
    O("1x1_dilation3", conv2d_dil_ref(dx, dw5[0:3, :, 1:2, 1:2], None, 1, 0, 3), tol=R5),
    O("dilation1_is_conv2d", conv2d_ref(dx, dwt, dwb), tol=R5),
])

tx, tw, tb = uu((2, 4, 5, 6)), uu((4, 3, 3, 2)), uu((6,))
tx2, tw2 = uu((1, 3, 4, 4)), uu((3, 2, 3, 3))
tx3, tw3, tb3 = uu((2, 3, 7, 5)), uu((3, 5, 4, 3)), uu((5,))
tdw = uu((3, 1, 3, 3))
tx64, tw64 = urng.uniform(-1, 1, (1, 2, 3, 4)), urng.uniform(-1, 1, (2, 3, 2, 3))
case("i10_conv_transpose2d", """
export fn f(x: f32[2, 4, 5, 6], w: f32[4, 3, 3, 2], b: f32[6], x2: f32[1, 3, 4, 4], w2: f32[3, 2, 3, 3],
            x3: f32[2, 3, 7, 5], w3: f32[3, 5, 4, 3], b3: f32[5], dw: f32[3, 1, 3, 3], x64: f64[1, 2, 3, 4],
            w64: f64[2, 3, 2, 3]) -> (f32[2, 6, 12, 11], f32[1, 2, 6, 6], f32[2, 5, 22, 11], f32[2, 3, 7, 9], f32[2, 6, 12, 11],
        f64[1, 3, 7, 8], f32[1, 2, 2, 2]) {
  return conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2, dilation=[2, 1]),
         conv_transpose2d(x2, w2),
         conv_transpose2d(x3, w3, b3, stride=[3, 2], padding=[2, 1], output_padding=[1, 0], dilation=2),
         conv_transpose2d(x3, dw, stride=[1, 2], padding=1, groups=3),
         conv_transpose2d(x, w, b, 2, 1, 1, 2, [2, 1]),
         conv_transpose2d(x64, w64, stride=2, padding=[0, 1], output_padding=1),
         conv_transpose2d(x2, w2, padding=2)
}
""", dict(x=tx, w=tw, b=tb, x2=tx2, w2=tw2, x3=tx3, w3=tw3, b3=tb3, dw=tdw, x64=tx64, w64=tw64), [
    O("stride_pad_outpad_groups_dilation", conv_transpose2d_ref(tx, tw, tb, 2, 1, 1, 2, (2, 1)), tol=R5),
    O("defaults", conv_transpose2d_ref(tx2, tw2), tol=R5),
    O("odd_rect_stride_dilation", conv_transpose2d_ref(tx3, tw3, tb3, (3, 2), (2, 1), (1, 0), 1, 2), tol=R5),
    O("depthwise_groups3", conv_transpose2d_ref(tx3, tdw, None, (1, 2), 1, 0, 3), tol=R5),
    O("positional_as_pytorch", conv_transpose2d_ref(tx, tw, tb, 2, 1, 1, 2, (2, 1)), tol=R5),
    O("f64", conv_transpose2d_ref(tx64, tw64, None, 2, (0, 1), 1), "f64"),
    O("padding_shrinks", conv_transpose2d_ref(tx2, tw2, None, 1, 2), tol=R5),
])

ix, ix10, ix64 = uu((2, 3, 5, 7)), uu((1, 2, 26, 6)), urng.uniform(-1, 1, (1, 2, 4, 5))
case("i10_interpolate_nearest", """
export fn f(x: f32[2, 3, 5, 7], y: f32[1, 2, 26, 6]) -> (f32[2, 3, 8, 3], f32[2, 3, 10, 14], f32[2, 3, 7, 14], f32[2, 3, 5, 7], f32[2, 3, 2, 3], f32[1, 2, 22, 4],
        f32[2, 3, 11, 16]) {
  return interpolate(x, size=[8, 3]), interpolate(x, scale_factor=2), interpolate(x, scale_factor=[1.5, 2.1]),
         interpolate(x, [5, 7]), interpolate(x, scale_factor=0.5, mode="nearest"), interpolate(y, size=[22, 4]),
         interpolate(x, scale_factor=2.3)
}
""", dict(x=ix, y=ix10), [
    O("size_odd", interp_ref(ix, (8, 3)), tol=0.0),
    O("scale2", interp_ref(ix, sf=2), tol=0.0),
    O("scale_pair_double_width_special_case", interp_ref(ix, sf=(1.5, 2.1)), tol=0.0),
    O("same_size_positional", interp_ref(ix, (5, 7)), tol=0.0),
    O("downsample_half", interp_ref(ix, sf=0.5), tol=0.0),
    # 26 -> 22 rows: floor(i * 26/22) in float32 is one less than in exact arithmetic
    # at some i, and PyTorch computes it in float32
    O("float32_scale_rounding", interp_ref(ix10, (22, 4)), tol=0.0),
    O("scale_2_3", interp_ref(ix, sf=2.3), tol=0.0),
])
case("i10_interpolate_bilinear", """
export fn f(x: f32[2, 3, 5, 7], z: f64[1, 2, 4, 5]) -> (f32[2, 3, 8, 11], f32[2, 3, 8, 11], f32[2, 3, 8, 11], f32[2, 3, 3, 4], f32[2, 3, 3, 4], f32[2, 3, 1, 1],
        f32[2, 3, 1, 1], f64[1, 2, 7, 9], f64[1, 2, 7, 9], f32[2, 3, 12, 8]) {
  return interpolate(x, size=[8, 11], mode="bilinear"), interpolate(x, size=[8, 11], mode="bilinear", align_corners=true),
         interpolate(x, scale_factor=1.7, mode="bilinear"), interpolate(x, size=[3, 4], mode="bilinear"),
         interpolate(x, [3, 4], mode="bilinear", align_corners=true), interpolate(x, size=1, mode="bilinear", align_corners=true),
         interpolate(x, size=1, mode="bilinear"), interpolate(z, size=[7, 9], mode="bilinear"),
         interpolate(z, size=[7, 9], mode="bilinear", align_corners=true),
         interpolate(x, scale_factor=[2.5, 1.2], mode="bilinear", align_corners=false)
}
""", dict(x=ix, z=ix64), [
    O("up_half_pixel", interp_ref(ix, (8, 11), mode="bilinear"), tol=R5),
    O("up_align_corners", interp_ref(ix, (8, 11), mode="bilinear", align=True), tol=R5),
    O("scale_factor_uses_its_inverse", interp_ref(ix, sf=1.7, mode="bilinear"), tol=R5),
    O("down_half_pixel", interp_ref(ix, (3, 4), mode="bilinear"), tol=R5),
    O("down_align_corners", interp_ref(ix, (3, 4), mode="bilinear", align=True), tol=R5),
    O("to_1x1_align_corners", interp_ref(ix, 1, mode="bilinear", align=True), tol=R5),
    O("to_1x1_half_pixel", interp_ref(ix, 1, mode="bilinear"), tol=R5),
    O("f64", interp_ref(ix64, (7, 9), mode="bilinear"), "f64"),
    O("f64_align_corners", interp_ref(ix64, (7, 9), mode="bilinear", align=True), "f64"),
    O("scale_pair", interp_ref(ix, sf=(2.5, 1.2), mode="bilinear"), tol=R5),
])
# Large enough (32768 output elements, 2 images) for compiled code to split the images
# among the thread pool's tasks.
lx = uu((2, 4, 32, 32))
case("i10_interpolate_pooled", """
export fn f(x: f32[2, 4, 32, 32]) -> (f32[2, 4, 64, 64], f32[2, 4, 64, 64]) {
  return interpolate(x, size=64, mode="bilinear"), interpolate(x, scale_factor=2)
}
""", dict(x=lx), [
    O("bilinear", interp_ref(lx, 64, mode="bilinear"), tol=R5),
    O("nearest", interp_ref(lx, sf=2), tol=0.0),
])
# Hand-worked values, independent of the coordinate code above: 2 -> 4 pixels.
hx = np.array([[[[0.0, 4.0]]]], dtype=np.float32)
case("i10_interpolate_known_values", """
export fn f(x: f32[1, 1, 1, 2]) -> (f32[1, 1, 1, 4], f32[1, 1, 1, 4], f32[1, 1, 1, 4]) {
  return interpolate(x, size=[1, 4], mode="bilinear"), interpolate(x, size=[1, 4], mode="bilinear", align_corners=true),
         interpolate(x, size=[1, 4])
}
""", dict(x=hx), [
    O("half_pixel", [[[[0.0, 1.0, 3.0, 4.0]]]], tol=R5),
    O("align_corners", [[[[0.0, 4.0 / 3, 8.0 / 3, 4.0]]]], tol=R5),
    O("nearest", [[[[0.0, 0.0, 4.0, 4.0]]]], tol=0.0),
])


# --- a batch of rows against one weight (issue #9) -------------------------------------
# [.., M, K] @ w[K, N] (or transpose(w, [1, 0])) is one 2-D matmul over the folded rows; the
# ops after it fuse through the reshape back when they fit. Its own generator.

fr_rng = np.random.default_rng(909)


def fr_uni(shape, dtype=np.float32):
    return fr_rng.uniform(-1, 1, size=shape).astype(dtype)


fx, fw, fw2, fb = fr_uni((2, 5, 24)), fr_uni((40, 24)), fr_uni((24, 40)), fr_uni((40,))
fr, fp, fx4, fwc = fr_uni((2, 5, 40)), fr_uni((5, 40)), fr_uni((2, 1, 5, 24)), fr_uni((24, 5))
fy, fwb, fbb = fr_uni((3, 37, 64)), fr_uni((100, 64)), fr_uni((100,))
fxi = fr_rng.integers(-9, 9, size=(2, 3, 4)).astype(np.int32)
fwi = fr_rng.integers(-9, 9, size=(4, 5)).astype(np.int32)
fxd, fwd = fr_uni((2, 3, 7), np.float64), fr_uni((9, 7), np.float64)
fcm = d(fx) @ d(fwc)
fcm[:, np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] = -np.inf
case("i9_fold_rows", """
export fn f(x: f32[2, 5, 24], w: f32[40, 24], w2: f32[24, 40], b: f32[40], r: f32[2, 5, 40], p: f32[5, 40],
            x4: f32[2, 1, 5, 24], wc: f32[24, 5], y: f32[3, 37, 64], wb: f32[100, 64], bb: f32[100],
            xi: i32[2, 3, 4], wi: i32[4, 5], xd: f64[2, 3, 7], wd: f64[9, 7]) ->
    (f32[2, 5, 40], f32[2, 5, 40], f32[2, 1, 5, 40], f32[2, 5, 40], f32[2, 5, 40], f32[2, 5, 40],
        f32[2, 5, 5], f32[3, 37, 100], i32[2, 3, 5], f64[2, 3, 9], f32[2, 5, 40]) {
  let t = x @ w2
  return gelu(x @ transpose(w, [1, 0]) + b), r + x @ w2, x4 @ w2 * 2.0, x @ transpose(w, [1, 0]) + p,
         t + b, t * 2.0, causal_mask(x @ wc), tanh(y @ transpose(wb, [1, 0]) + bb), xi @ wi,
         xd @ transpose(wd, [1, 0]), x @ w2
}
""", dict(x=fx, w=fw, w2=fw2, b=fb, r=fr, p=fp, x4=fx4, wc=fwc, y=fy, wb=fwb, bb=fbb, xi=fxi, wi=fwi,
          xd=fxd, wd=fwd), [
    O("gelu_bias_transposed", gelu_ref(d(fx) @ d(fw).T + d(fb))), O("residual_first", d(fr) + d(fx) @ d(fw2)),
    O("rank4_scaled", d(fx4) @ d(fw2) * 2.0), O("broadcast_rows", d(fx) @ d(fw).T + d(fp)),
    O("two_readers_bias", d(fx) @ d(fw2) + d(fb)), O("two_readers_scaled", d(fx) @ d(fw2) * 2.0),
    O("causal_mask_per_matrix", fcm), O("panels_tanh", np.tanh(d(fy) @ d(fwb).T + d(fbb))),
    O("int", (fxi.astype(np.int64) @ fwi).astype(np.int32), "i32"), O("f64", d(fxd) @ d(fwd).T, "f64"),
    O("plain", d(fx) @ d(fw2)),
])

# --- round_bf16: ONNX's Cast to bfloat16, held in f32 ------------------------------------


def bf16_ref(x):
    """The nearest bfloat16 of each float32, ties to even, from the bits; NaN stays."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), r)


bfx = np.concatenate([uni((40,), -4, 4), randn((20,)) * np.float32(1e-39), np.array([
    1.00390625, 1.01171875, -1.00390625, -1.01171875,  # ties: to even (down, up)
    1.0 + 2 ** -8 + 2 ** -20, 3.3895314e38, 3.3961e38, 3.4e38, -3.4e38,  # above a tie; the largest; to inf
    np.finfo(np.float32).max, 1e-45, -0.0, 0.0, np.inf, -np.inf, np.nan], np.float32)]).astype(np.float32)
with np.errstate(over="ignore"):  # 3 * 3.39e38 is inf, as in the program
    bfx3 = bf16_ref(bf16_ref(bfx) * np.float32(3.0))
case("round_bf16", """
export fn f(x: f32[76]) -> (f32[76], f32[76], f32) {
  return round_bf16(x), round_bf16(round_bf16(x) * 3.0), round_bf16(1.01171875)
}
""", dict(x=bfx), [
    O("values", bf16_ref(bfx), tol=0.0), O("twice", bfx3, tol=0.0),
    O("compile_time", np.float32(1.015625), tol=0.0),
])

# --- issue 36: the storage dtypes f16, bf16, i8, u8, i16, u16 --------------------------------
# f16 and bf16 compute in f32 and round each result (PyTorch's CPU semantics); bf16 arrays
# travel as their bits ('<u2'). References: NumPy's float16 and bf16_ref on f32 values.


def bf16_bits(x):
    return np.asarray(bf16_ref(np.asarray(x, np.float32)), np.float32).view(np.uint32) >> 16


def bf16_val(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32)


def f16r(x):
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float32).astype(np.float16)


cx = np.concatenate([uni((24,), -70000, 70000), uni((16,), -2, 2), np.array([
    1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 2049.0, 2051.0,  # f16 ties: to even
    1.00390625, 1.01171875, 65504.0, 65519.0, 65520.0, 1e5, -1e5,  # the largest f16; to inf
    2 ** -24, 2 ** -25, 3 * 2 ** -26, 1e-8, -0.0, np.inf, -np.inf, np.nan,
    127.9, 128.0, -128.5, -129.0, 300.0, 255.5, 256.0, -1.5, 40000.0, 70000.0, -40000.0], np.float32)]).astype(np.float32)
NC = len(cx)
with np.errstate(invalid="ignore"):
    def sat(x, lo, hi, dt):
        t = np.trunc(np.nan_to_num(np.asarray(x, np.float64), nan=0.0, posinf=hi, neginf=lo))
        return np.clip(t, lo, hi).astype(dt)
case("casts_16", f"""
export fn f(x: f32[{NC}]) -> (f16[{NC}], bf16[{NC}], f32[{NC}], f32[{NC}], i8[{NC}], u8[{NC}], i16[{NC}], u16[{NC}],
                            f16[{NC}], i8[{NC}]) {{
  let h = f16(x)
  return h, bf16(x), f32(h), f32(bf16(x)), i8(x), u8(x), i16(x), u16(x), f16(bf16(x)), i8(h)
}}
""", dict(x=cx), [
    O("f16", f16r(cx)), O("bf16", bf16_bits(cx), "bf16"),
    O("f16_f32", f16r(cx).astype(np.float32), tol=0.0), O("bf16_f32", bf16_ref(cx), tol=0.0),
    O("i8", sat(cx, -128, 127, np.int8), "i8"), O("u8", sat(cx, 0, 255, np.uint8), "u8"),
    O("i16", sat(cx, -32768, 32767, np.int16), "i16"), O("u16", sat(cx, 0, 65535, np.uint16), "u16"),
    O("bf16_f16", f16r(bf16_ref(cx))), O("f16_i8", sat(f16r(cx), -128, 127, np.int8), "i8"),
])

ha = uni((3, 5), -8, 8)
hb = uni((3, 5), -8, 8)
ha16, hb16 = f16r(ha), f16r(hb)
ba, bb = bf16_bits(ha), bf16_bits(hb)
af, bf_ = bf16_val(ba), bf16_val(bb)
case("arith_f16_bf16", """
export fn f(a: f16[3, 5], b: f16[3, 5], c: bf16[3, 5], e: bf16[3, 5]) -> (f16[3, 5], f16[3, 5], bf16[3, 5], bf16[3, 5],
                                                                     bool[3, 5], f16[3, 5]) {
  return a * b + a, exp(a / 4.0), c * e + c, maximum(c, e) - 0.5, a < b, -a
}
""", dict(a=ha16, b=hb16, c=ba.astype(np.uint16), e=bb.astype(np.uint16)), [
    O("f16_mul_add", f16r(f16r(ha16.astype(np.float32) * hb16.astype(np.float32)).astype(np.float32) + ha16.astype(np.float32))),
    O("f16_exp", f16r(np.exp(f16r(ha16.astype(np.float32) / np.float32(4)).astype(np.float64)).astype(np.float32)), "f16", tol=1e-3),
    O("bf16_mul_add", bf16_bits(bf16_val(bf16_bits(af * bf_)) + af), "bf16"),
    O("bf16_max_sub", bf16_bits(np.maximum(af, bf_) - np.float32(0.5)), "bf16"),
    O("f16_lt", ha16 < hb16, "bool"), O("f16_neg", -ha16),
])

# sums and products of multiples of 1/8 are exact in f32: the one rounding is at the end
qa = (ints((4, 33), -40, 40).astype(np.float32) / 8)
qb = (ints((33, 6), -40, 40).astype(np.float32) / 8)
case("reduce_matmul_16", """
export fn f(a: f16[4, 33], b: f16[33, 6], c: bf16[4, 33], e: bf16[33, 6]) -> (f16[4], f16[4, 6], bf16[33], bf16[4, 6], f16[4], bf16[4]) {
  return sum(a, axis=1), a @ b, sum(c, axis=0), c @ e, amax(a, axis=1), mean(c, axis=1)
}
""", dict(a=f16r(qa), b=f16r(qb), c=bf16_bits(qa).astype(np.uint16), e=bf16_bits(qb).astype(np.uint16)), [
    O("f16_sum", f16r(qa.astype(np.float64).sum(1))), O("f16_matmul", f16r(qa.astype(np.float64) @ qb)),
    O("bf16_sum", bf16_bits(qa.astype(np.float64).sum(0).astype(np.float32)), "bf16"),
    O("bf16_matmul", bf16_bits((qa.astype(np.float64) @ qb).astype(np.float32)), "bf16"),
    O("f16_amax", f16r(qa.max(1))),
    O("bf16_mean", bf16_bits((qa.astype(np.float64).sum(1) / 33).astype(np.float32)), "bf16"),
])

ia = np.array([100, -100, 127, -128, 50, 7, -1, 0], np.int8)
ib = np.array([100, -100, 1, -1, 3, -2, -1, 5], np.int8)
ua = np.array([200, 0, 255, 1, 17, 128, 3, 250], np.uint8)
sa = np.array([30000, -30000, 32767, -32768, 1000, 7, -1, 0], np.int16)
wa = np.array([60000, 0, 65535, 1, 1000, 32768, 3, 65000], np.uint16)


def wrap(x, dt):
    return np.asarray(x, np.int64).astype(dt)


I = ia.astype(np.int64)
case("ints_narrow", """
export fn f(a: i8[8], b: i8[8], u: u8[8], s: i16[8], w: u16[8]) -> (i8[8], i8[8], i8[8], u8[8], u8[8], i16[8], u16[8],
                                                                 i32[8], i8[8], u8[8], i8[8], i8[8], i8[], bool[8]) {
  return a + b, a * b, -a, u + u, u - 3, s * 3, w + w, i32(a) * 1000, i8(i32(u) * 3), u8(a), a / b, abs(a),
         sum(a), u > 100
}
""", dict(a=ia, b=ib, u=ua, s=sa, w=wa), [
    O("add", wrap(I + ib, np.int8), "i8"), O("mul", wrap(I * ib, np.int8), "i8"), O("neg", wrap(-I, np.int8), "i8"),
    O("u8_add", wrap(ua.astype(np.int64) * 2, np.uint8), "u8"), O("u8_sub", wrap(ua.astype(np.int64) - 3, np.uint8), "u8"),
    O("i16_mul", wrap(sa.astype(np.int64) * 3, np.int16), "i16"), O("u16_add", wrap(wa.astype(np.int64) * 2, np.uint16), "u16"),
    O("i32", I * 1000, "i32"), O("i8_from_i32", wrap(ua.astype(np.int64) * 3, np.int8), "i8"),
    O("u8_from_i8", wrap(I, np.uint8), "u8"),
    O("floordiv", wrap(np.floor_divide(I, ib.astype(np.int64)), np.int8), "i8"), O("abs", wrap(np.abs(I), np.int8), "i8"),
    O("sum", wrap(I.sum(), np.int8), "i8"), O("gt", ua > 100, "bool"),
])

# --- floor, ceil, round (ties to even) -----------------------------------------------------

rx = np.concatenate([uni((30,), -6, 6), np.array([
    0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997,  # ties go to the even neighbour
    8388607.5, -8388607.5, 8388609.0, 1e30, -1e30, 1e-40, -1e-40,  # the last fraction; integral; subnormal
    -0.0, 0.0, np.inf, -np.inf, np.nan], np.float32)]).astype(np.float32)
ry = np.array([0.5, 2.5, -2.5, 4503599627370495.5, -1e300, 1e-310, -0.25, np.nan])
case("floor_ceil_round", """
export fn f(x: f32[50], y: f64[8]) -> (f32[50], f32[50], f32[50], f64[8], f64[8], f64[8], f32[3], f32[2]) {
  return floor(x), ceil(x), round(x), floor(y), ceil(y), round(y),
         zeros([round(2.5) + ceil(0.25)]) + floor(-1.5), floor(x[0:2] * 0.0 + 7.9) + round(-3.5)
}
""", dict(x=rx, y=ry), [
    O("floor", np.floor(rx), tol=0.0), O("ceil", np.ceil(rx), tol=0.0), O("round", np.round(rx), tol=0.0),
    O("floor_f64", np.floor(ry), "f64", tol=0.0), O("ceil_f64", np.ceil(ry), "f64", tol=0.0),
    O("round_f64", np.round(ry), "f64", tol=0.0),
    O("compile_time_ints", np.full(3, -2.0, np.float32), tol=0.0),
    O("mixed", np.array([3.0, 3.0], np.float32), tol=0.0),
])
# --- fmod: C's remainder, the dividend's sign ---------------------------------------------

fa = np.array([7.5, -7.5, 7.5, -7.5, -1e-8, 5.0, 0.0, -0.0, np.inf, 3.0, np.nan, 1e30], np.float32)
fb = np.array([2.0, 2.0, -2.0, -2.0, 1e8, 5.0, 3.0, 3.0, 2.0, np.inf, 1.0, 7.0], np.float32)
ia = np.array([7, -7, 7, -7, 5, -2147483648, 9, 0], np.int32)
ib = np.array([3, 3, -3, -3, 0, -1, 1, 4], np.int32)
with np.errstate(invalid="ignore"):  # fmod(inf, 2) and fmod(nan, 1) are NaN, as in the program
    fmod_f32, fmod_f64 = np.fmod(fa, fb), np.fmod(fa.astype(np.float64), 2.5)
case("fmod", """
export fn f(a: f32[12], b: f32[12], i: i32[8], j: i32[8], d: f64[12]) -> (f32[12], i32[8], i64[8], f64[12], f32[3], f32) {
  return fmod(a, b), fmod(i, j), fmod(i64(i), i64(j)), fmod(d, 2.5), fmod(a[0:3], 2.0), fmod(-7.5, 2.0) + f32(fmod(-7, 3))
}
""", dict(a=fa, b=fb, i=ia, j=ib, d=fa.astype(np.float64)), [
    O("f32", fmod_f32, tol=0.0),
    O("i32", np.where((ib == 0) | (ib == -1), 0, np.fmod(ia.astype(np.int64), np.where(ib == 0, 1, ib))).astype(np.int32), "i32"),
    O("i64", np.where((ib == 0) | (ib == -1), 0, np.fmod(ia.astype(np.int64), np.where(ib == 0, 1, ib))), "i64"),
    O("f64", fmod_f64, "f64", tol=0.0),
    O("broadcast", np.fmod(fa[0:3], np.float32(2.0)), tol=0.0),
    O("compile_time", np.float32(-1.5 - 1.0), tol=0.0),
])

# --- prod: the product over axes -----------------------------------------------------------

px = uni((3, 4, 5), 0.5, 1.5) * np.where(rng.random((3, 4, 5)) < 0.3, -1, 1).astype(np.float32)
pi = np.array([[3, -2, 7], [100000, 100000, 3]], np.int32)  # the second row's product wraps in i32
case("prod", """
export fn f(x: f32[3, 4, 5], i: i32[2, 3], e: f32[2, 0]) -> (f32[4], f32[3, 1, 5], f32, i32[2], i64[2], f32[2], f64[3]) {
  return prod(x, axis=[0, 2]), prod(x, axis=1, keepdim=true), prod(x), prod(i, axis=1), prod(i64(i), axis=1),
         prod(e, axis=1), prod(f64(x), axis=[1, 2])
}
""", dict(x=px, i=pi, e=np.zeros((2, 0), np.float32)), [
    O("axes_0_2", np.prod(d(px), axis=(0, 2))), O("keepdim", np.prod(d(px), axis=1, keepdims=True)),
    O("all", np.prod(d(px))),
    O("i32_wraps", np.array([-42, (100000 * 100000 * 3) % 2**32 - 2**32 * (((100000 * 100000 * 3) % 2**32) >= 2**31)],
                            np.int64).astype(np.int32), "i32"),
    O("i64", np.prod(pi.astype(np.int64), axis=1), "i64"),
    O("empty_is_one", np.ones(2)), O("f64", np.prod(px.astype(np.float64), axis=(1, 2)), "f64"),
])

# --- asin, acos, atan -----------------------------------------------------------------------

tx = np.concatenate([uni((20,), -1, 1), np.array([-1.0, 1.0, 0.0, 1.5, -2.0, np.inf, -np.inf, np.nan], np.float32)])
with np.errstate(invalid="ignore"):  # outside [-1, 1] asin and acos are NaN, as in the program
    tri = (np.arcsin(d(tx)), np.arccos(d(tx)), np.arctan(d(tx)), np.arctan(d(tx)) + np.arcsin(d(tx) * 0.5))
case("asin_acos_atan", """
export fn f(x: f32[28], y: f64[28]) -> (f32[28], f32[28], f32[28], f64[28], f32) {
  return asin(x), acos(x), atan(x), atan(y) + asin(y * 0.5), f32(atan(1.0) * 4.0)
}
""", dict(x=tx, y=tx.astype(np.float64)), [
    O("asin", tri[0]), O("acos", tri[1]), O("atan", tri[2]),
    O("f64", tri[3], "f64"), O("compile_time_pi", np.float32(np.pi)),
])

# --- where() with a compile-time bool condition (a scalar argument, a comparison of numbers) ---

twb = np.array([1, -2, 3], np.float32)
case("where_compile_time_bool", """
fn g(x: f32[3], neg: bool) -> f32[3] {
  return where(neg, -x, x)
}
export fn f(x: f32[3]) -> (f32[3], f32[3]) {
  return g(x, true), g(x, 2 > 3)
}
""", dict(x=twb), [O("neg", -twb), O("keep", twb)])

# --- tensors with no elements (a dimension of 0) -----------------------------------------

z03 = np.zeros((0, 3), np.float32)
w34 = uni((3, 4))
x30 = np.zeros((3, 0), np.float32)
y04 = np.zeros((0, 4), np.float32)
case("zero_size_elementwise_matmul", """
export fn f(x: f32[0, 3], w: f32[3, 4], a: f32[3, 0], b: f32[0, 4], v: f32[3]) -> (f32[0, 4], f32[3, 4], f32[0, 3], f32[0, 3], f32[0, 3], f32[3, 0], f32[0, 3]) {
  return x @ w, a @ b, exp(x) * 2.0 + 1.0, x + v, where(x > 0.0, x, v), transpose(x, [1, 0]), relu(x) - x
}
""", dict(x=z03, w=w34, a=x30, b=y04, v=uni((3,))), [
    O("matmul_m0", np.zeros((0, 4))), O("matmul_k0", np.zeros((3, 4)), tol=0.0),
    O("unary", np.zeros((0, 3))), O("broadcast", np.zeros((0, 3))), O("where", np.zeros((0, 3))),
    O("transpose", np.zeros((3, 0))), O("relu", np.zeros((0, 3))),
])
case("zero_size_reductions", """
export fn f(x: f32[0, 3], i: i32[4, 0]) -> (f32[3], f32[0], f32, f32[1, 3], i32[4], i32, f32[0, 3], f32[0, 3]) {
  return sum(x, axis=0), sum(x, axis=1), sum(x), sum(x, axis=0, keepdim=true), sum(i, axis=1), sum(i), softmax(x, axis=0), cumsum(x, 0)
}
""", dict(x=z03, i=np.zeros((4, 0), np.int32)), [
    O("sum_empty_axis", np.zeros(3), tol=0.0), O("sum_kept_axis", np.zeros(0)),
    O("sum_all", np.float32(0), tol=0.0), O("sum_keepdim", np.zeros((1, 3)), tol=0.0),
    O("sum_i32", np.zeros(4), "i32"), O("sum_i32_all", np.int32(0), "i32"),
    O("softmax", np.zeros((0, 3))), O("cumsum", np.zeros((0, 3))),
])
case("zero_size_no_output_elements", """
export fn f(x: f32[0, 3], y: f32[2, 0]) -> (f32[0], f32[0], f32[0], i64[0], f32[2, 0], f32[2, 0]) {
  return amax(x, axis=1), amin(x, axis=1), mean(x, axis=1), argmax(x, axis=1), layernorm(y, zeros([0]), zeros([0])), softmax(y)
}
""", dict(x=z03, y=np.zeros((2, 0), np.float32)), [
    O("amax", np.zeros(0)), O("amin", np.zeros(0)), O("mean", np.zeros(0)), O("argmax", np.zeros(0), "i64"),
    O("layernorm", np.zeros((2, 0))), O("softmax", np.zeros((2, 0))),
])
zx = uni((4, 3))
case("zero_size_shape_ops", """
export fn f(x: f32[4, 3], e: f32[0, 3]) -> (f32[0, 3], f32[4, 0], f32[4, 3], f32[0, 2, 3], f32[0], f32[3, 0], f32[0, 3], f32[0, 3], f32[0, 1, 3], i64[0], f32[2, 0]) {
  return x[2:2], x[:, 1:1], concat([x, e], axis=0), reshape(e, [-1, 2, 3]), reshape(e, [0]), transpose(e, [1, 0]), expand(x[0:1], [0, 3]), e[0:0] * 2.0, unsqueeze(e, 1), arange(0), zeros([2, 0])
}
""", dict(x=zx, e=z03), [
    O("slice_rows", np.zeros((0, 3))), O("slice_cols", np.zeros((4, 0))),
    O("concat_empty", zx, tol=0.0), O("reshape_infer", np.zeros((0, 2, 3))),
    O("reshape_flat", np.zeros(0)), O("transpose", np.zeros((3, 0))),
    O("expand_to_0", np.zeros((0, 3))), O("slice_empty", np.zeros((0, 3))),
    O("unsqueeze", np.zeros((0, 1, 3))), O("arange0", np.zeros(0), "i64"), O("zeros", np.zeros((2, 0))),
])
case("zero_size_index", """
export fn f(x: f32[4, 3], i: i32[0], e: f32[0, 3], j: i64[2, 0]) -> (f32[0, 3], f32[2, 0, 3], f32[0, 3], f32[0]) {
  return x[i], x[j], e[i], x[1][i]
}
""", dict(x=zx, i=np.zeros(0, np.int32), e=z03, j=np.zeros((2, 0), np.int64)), [
    O("gather_empty_index", np.zeros((0, 3))), O("gather_2d_empty_index", np.zeros((2, 0, 3))),
    O("gather_from_empty", np.zeros((0, 3))), O("gather_1d", np.zeros(0)),
])
case("zero_size_nn", """
export fn f(x: f32[0, 3, 4, 4], y: f32[0, 3], z: f32[2, 0], w: f32[5, 3, 3, 3]) -> (f32[0], f32[0, 0], i64[0, 0], f32[0, 3, 2, 2], f32[0, 3, 2, 2], f32[0, 5, 2, 2], f32[2, 0], f32[0, 3, 1, 1]) {
  let v, i = topk(y, 0, axis=1)
  return amax(y, axis=1), v, i, max_pool2d(x, 2), avg_pool2d(x, 2), conv2d(x, w, zeros([5])), rmsnorm(z, zeros([0])), global_avg_pool2d(x)
}
""", dict(x=np.zeros((0, 3, 4, 4), np.float32), y=z03, z=np.zeros((2, 0), np.float32), w=uni((5, 3, 3, 3))), [
    O("amax_no_rows", np.zeros(0)), O("topk_k0_values", np.zeros((0, 0))), O("topk_k0_indices", np.zeros((0, 0)), "i64"),
    O("max_pool_batch0", np.zeros((0, 3, 2, 2))), O("avg_pool_batch0", np.zeros((0, 3, 2, 2))),
    O("conv_batch0", np.zeros((0, 5, 2, 2))), O("rmsnorm", np.zeros((2, 0))), O("global_pool", np.zeros((0, 3, 1, 1))),
])
error_case("zero_size_gather_from_empty_table", """
export fn f(e: f32[0, 3], i: i32[1]) -> f32[1, 3] {
  return e[i]
}
""", dict(e=z03, i=np.zeros(1, np.int32)), 1, "index 0 >= 0")


# ----------------------------------------------------------------------------- running




def np_dtype_name(dt):
    return {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
            np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
            np.dtype(np.bool_): "bool"}.get(np.dtype(dt), str(dt))


def compare(out, got):
    """Returns None if got matches out, else a message."""
    ref = out.ref
    if got.dtype != out.dtype:
        return f"dtype {np_dtype_name(got.dtype)}, expected {np_dtype_name(out.dtype)}"
    if got.shape != ref.shape:
        return f"shape {list(got.shape)}, expected {list(ref.shape)}"
    if out.dtype.kind in "biu":
        want = ref.astype(out.dtype)
        if np.array_equal(got, want):
            return None
        bad = np.argwhere(got != want)
        idx = tuple(bad[0])
        return (f"{len(bad)} of {got.size} differ; first at {list(idx)}: got {got[idx]}, "
                f"expected {want[idx]}")
    ref64 = ref.astype(np.float64)
    with np.errstate(over="ignore"):
        ref_t = ref64.astype(out.dtype)  # where the result dtype overflows, expect inf
    got64 = got.astype(np.float64)
    fin = np.isfinite(ref_t)
    # non-finite entries must match exactly (nan with nan, inf with inf of the same sign)
    nf = ~fin
    if nf.any():
        g, r = got64[nf], ref_t[nf].astype(np.float64)
        same = (np.isnan(g) & np.isnan(r)) | (g == r)
        if not same.all():
            k = np.argwhere(nf)[np.argmin(same)]
            idx = tuple(k)
            return f"at {list(idx)}: got {got64[idx]!r}, expected {ref_t[idx]!r}"
    if not fin.any():
        return None
    gf, rf = got64[fin], ref64[fin]
    if not np.isfinite(gf).all():
        k = np.argwhere(fin)[np.argmin(np.isfinite(gf))]
        idx = tuple(k)
        return f"at {list(idx)}: got {got64[idx]!r}, expected {ref64[idx]!r}"
    err = np.abs(gf - rf)
    scale = max(1.0, float(np.max(np.abs(rf))))
    if float(err.max()) <= out.tol * scale:
        return None
    k = np.argwhere(fin)[np.argmax(err)]
    idx = tuple(k)
    return (f"max abs err {err.max():.3g} > {out.tol:g} * {scale:.3g} at {list(idx)}: "
            f"got {got64[idx]!r}, expected {ref64[idx]!r}")


def run_case(nestc, tmp, c):
    """Returns a list of (name, message-or-None) for each output of the case."""
    cdir = os.path.join(tmp, c.name)
    os.makedirs(cdir)
    src = os.path.join(cdir, c.name + ".nest")
    with open(src, "w") as f:
        f.write(c.src.lstrip("\n"))
    cmd = [nestc, "run", src] + c.args
    for name, arr in c.inputs:
        p = os.path.join(cdir, f"in_{name}.npy")
        np.save(p, np.asarray(arr))
        cmd += ["--input", f"{name}={p}"]
    outs = []
    for i, _ in enumerate(c.outs):
        p = os.path.join(cdir, f"out{i}.npy")
        outs.append(p)
        cmd += ["--output", p]
    names = [f"{c.name}.{o.label}" for o in c.outs]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return [(n, f"timeout after {TIMEOUT}s: {' '.join(cmd)}") for n in names]
    stderr = r.stderr.strip()
    if c.error is not None:
        problems = []
        if r.returncode != 1:
            problems.append(f"exit status {r.returncode}, expected 1 ({c.error})")
        if not stderr:
            problems.append("no message on stderr")
        written = [p for p in outs if os.path.exists(p)]
        if written:
            problems.append(f"output file written: {', '.join(os.path.basename(p) for p in written)}")
        msg = "; ".join(problems) if problems else None
        if msg and stderr:
            msg += f" [stderr: {stderr.splitlines()[0]}]"
        return [(c.name, msg)]
    if r.returncode != 0:
        first = "\n    ".join(stderr.splitlines()[:4]) or "(no stderr)"
        if r.returncode < 0:
            first = f"killed by signal {-r.returncode}; " + first
        msg = f"nestc exit {r.returncode}: {first}"
        short = f"nestc exit {r.returncode} (see {names[0]})"
        return [(n, msg if k == 0 else short) for k, n in enumerate(names)]
    res = []
    for n, o, p in zip(names, c.outs, outs):
        try:
            got = np.load(p)
        except Exception as e:  # noqa: BLE001
            res.append((n, f"cannot load output {os.path.basename(p)}: {e}"))
            continue
        res.append((n, compare(o, got)))
    return res


def main(argv):
    args = argv[1:]
    keep, filters, jobs = False, [], os.cpu_count() or 4
    nestc = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--keep":
            keep = True
        elif a == "-k":
            i += 1
            filters.append(args[i])
        elif a == "-j":
            i += 1
            jobs = int(args[i])
        elif nestc is None:
            nestc = a
        else:
            print(__doc__, file=sys.stderr)
            return 2
        i += 1
    if nestc is None:
        print(__doc__, file=sys.stderr)
        return 2
    nestc = os.path.abspath(nestc)
    cases = [c for c in CASES if not filters or any(f in c.name for f in filters)]
    tmp = tempfile.mkdtemp(prefix="nest_builtins_")
    try:
        with ThreadPoolExecutor(max_workers=jobs) as ex:
            results = list(ex.map(lambda c: run_case(nestc, tmp, c), cases))
    finally:
        if keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    passed = failed = 0
    for res in results:
        for name, msg in res:
            if msg is None:
                passed += 1
                print(f"ok {name}")
            else:
                failed += 1
                print(f"FAIL {name}: {msg}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
