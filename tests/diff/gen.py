"""Random valid Nest programs for tests/diff/nest_diff.py.

gen_program(seed) returns (source text, plan). The plan lists the tests: each is a
sequence of compiled calls (an entry, its run-time dimensions, its inputs) and the one
interpreter run (`nestc run --entry E -D ...`) that must give the same results or the same
error. Inputs are described, not stored: (dtype, shape, kind, seed), made by make_input().

Values are kept well conditioned (log of |x| + 0.5, division by |y| + 1, exp of bounded
values), and discrete operations (comparisons, floor, round, %, casts to integers, argmax,
topk, round_bf16) are applied only to exact values: inputs, params and what is computed from
them without rounding, so that f32 reordering cannot flip them.
"""
import json
import random

import numpy as np

SIZES = [1, 2, 3, 4, 5, 7, 8, 16, 17, 33]
FLOAT = ("f32", "f64")
INT = ("i32", "i64")
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "bool": np.bool_}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def make_input(spec):
    """spec: {dtype, shape, kind, seed, lo, hi, bad}: the array it describes."""
    rng = np.random.default_rng(spec["seed"])
    shape = tuple(spec["shape"])
    dt = spec["dtype"]
    if spec.get("kind") == "index":
        a = rng.integers(spec["lo"], spec["hi"], size=shape).astype(NP[dt])
        if spec.get("bad") is not None and a.size:
            a.reshape(-1)[spec["bad"][0] % a.size] = spec["bad"][1]
        return a
    if dt in FLOAT:
        return rng.uniform(-2.0, 2.0, size=shape).astype(NP[dt])
    if dt in INT:
        return rng.integers(-20, 21, size=shape).astype(NP[dt])
    return rng.integers(0, 2, size=shape).astype(np.bool_)


class V:
    """A value in a body: its expression (a name), dtype, shape (ints, or strings for
    symbolic sizes), whether it is exact (no rounding on its way) and a bound of |x|."""

    def __init__(self, name, dtype, shape, exact, mag):
        self.name, self.dtype, self.shape, self.exact, self.mag = name, dtype, tuple(shape), exact, mag

    @property
    def rank(self):
        return len(self.shape)

    def concrete(self):
        return all(isinstance(d, int) for d in self.shape)


def tstr(dtype, shape):
    return "%s[%s]" % (dtype, ", ".join(str(d) for d in shape))


def bcast(a, b):
    """NumPy broadcast of two shapes (symbolic sizes match themselves or 1), or None."""
    ra, rb = list(a)[::-1], list(b)[::-1]
    out = []
    for i in range(max(len(ra), len(rb))):
        x = ra[i] if i < len(ra) else 1
        y = rb[i] if i < len(rb) else 1
        if x == y:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            return None
    return tuple(out[::-1])


class Body:
    """Statements of one function body over a pool of values."""

    def __init__(self, prog, rng, indent="  "):
        self.p, self.r, self.lines, self.pool, self.ind = prog, rng, [], [], indent
        self.n = 0

    def let(self, expr, dtype, shape, exact, mag, keep=True):
        self.n += 1
        name = "v%d" % self.n
        self.lines.append("%slet %s = %s" % (self.ind, name, expr))
        v = V(name, dtype, shape, exact, min(mag, 1e6))
        if keep:
            self.pool.append(v)
        return v

    def pick(self, pred=lambda v: True, recent=True):
        c = [v for v in self.pool if pred(v)]
        if not c:
            return None
        if recent and self.r.random() < 0.6:
            c = c[-4:]
        return self.r.choice(c)

    # ---------------------------------------------------------------- helpers
    def tame(self, v):
        """v, or tanh(v) when it has grown large."""
        if v.mag > 8 and v.dtype in FLOAT:
            return self.let("tanh(%s)" % v.name, v.dtype, v.shape, False, 1)
        return v

    def fparam(self, shape, kind="w"):
        return self.p.param("f32", shape, kind)


# ------------------------------------------------------------------ operations
# Each takes a Body and returns a new value or None (not applicable).

UNARY = ["exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos", "asin", "acos", "atan", "sigmoid",
         "gelu", "gelu_tanh", "silu", "relu", "abs", "neg", "hardswish"]


def op_unary(b):
    v = b.pick(lambda v: v.dtype in FLOAT)
    if v is None:
        return None
    f = b.r.choice(UNARY)
    x, m = v.name, v.mag
    if f == "exp":
        v = b.tame(v)
        e, mag = "exp(%s)" % v.name, 2.72 ** min(v.mag, 8)
    elif f == "log":
        e, mag = "log(abs(%s) + 0.5)" % x, max(0.7, m)
    elif f == "sqrt":
        e, mag = "sqrt(abs(%s))" % x, max(1, m ** 0.5)
    elif f == "rsqrt":
        e, mag = "rsqrt(abs(%s) + 0.5)" % x, 1.5
    elif f in ("asin", "acos"):
        e, mag = "%s(tanh(%s) * 0.9)" % (f, x), 3.2
    elif f in ("tanh", "erf", "sin", "cos", "atan", "sigmoid"):
        e, mag = "%s(%s)" % (f, x), 1.6
    elif f == "neg":
        e, mag = "-%s" % x, m
    else:
        e, mag = "%s(%s)" % (f, x), m + 1
    exact = v.exact and f in ("relu", "abs", "neg")
    return b.let(e, v.dtype, v.shape, exact, mag)


def op_discrete(b):
    """floor/ceil/round/round_bf16, comparisons, casts to integers and bool: exact inputs only."""
    v = b.pick(lambda v: v.exact and v.dtype in FLOAT)
    if v is None:
        return None
    k = b.r.randrange(5)
    if k == 0:
        f = b.r.choice(["floor", "ceil", "round"])
        return b.let("%s(%s * 2.0)" % (f, v.name), v.dtype, v.shape, True, v.mag * 2 + 1)
    if k == 1 and v.dtype == "f32":
        return b.let("round_bf16(%s)" % v.name, "f32", v.shape, True, v.mag * 1.01)
    if k == 2:
        dt = b.r.choice(INT)
        return b.let("%s(%s * 4.0)" % (dt, v.name), dt, v.shape, True, v.mag * 4 + 1)
    w = b.pick(lambda w: w.exact and w.dtype == v.dtype and bcast(v.shape, w.shape) is not None)
    sh = bcast(v.shape, w.shape)
    if b.r.random() < 0.3:
        # a chained comparison
        return b.let("-0.5 < %s <= %s" % (v.name, w.name), "bool", sh, True, 1)
    op = b.r.choice(["==", "!=", "<", "<=", ">", ">="])
    return b.let("%s %s %s" % (v.name, op, w.name), "bool", sh, True, 1)


def op_binary(b):
    v = b.pick()
    if v is None or v.dtype == "bool":
        return op_bool(b)
    w = b.pick(lambda w: w.dtype == v.dtype and bcast(v.shape, w.shape) is not None and w is not v, recent=False)
    if w is None:
        w = v
    sh = bcast(v.shape, w.shape)
    numel_ok = all(not isinstance(d, int) or d <= 64 for d in sh)
    if not numel_ok:
        return None
    ex = v.exact and w.exact
    if v.dtype in INT:
        op = b.r.choice(["+", "-", "*", "/", "%", "maximum", "minimum", "fmod"])
        if op in ("maximum", "minimum", "fmod"):
            e = "%s(%s, %s)" % (op, v.name, w.name)
        else:
            e = "%s %s %s" % (v.name, op, w.name)
        return b.let(e, v.dtype, sh, True, min(1e6, v.mag * max(w.mag, 1) + w.mag))
    op = b.r.choice(["+", "-", "*", "/", "maximum", "minimum", "pow", "%", "fmod", "scalar"])
    if op in ("%", "fmod") and not ex:
        op = "-"
    if op == "/":
        return b.let("%s / (abs(%s) + 1.0)" % (v.name, w.name), v.dtype, sh, False, v.mag)
    if op == "pow":
        return b.let("pow(abs(%s) + 0.5, tanh(%s))" % (v.name, w.name), v.dtype, sh, False, max(2, v.mag + 0.5))
    if op in ("maximum", "minimum"):
        return b.let("%s(%s, %s)" % (op, v.name, w.name), v.dtype, sh, ex, max(v.mag, w.mag))
    if op == "%":
        return b.let("%s %% (abs(%s) + 0.5)" % (v.name, w.name), v.dtype, sh, False, w.mag + 0.5)
    if op == "fmod":
        return b.let("fmod(%s, abs(%s) + 0.5)" % (v.name, w.name), v.dtype, sh, False, v.mag)
    if op == "scalar":
        c = b.r.choice(["2", "0.5", "3.0", "D1"])
        o = b.r.choice(["*", "+", "-"])
        return b.let("%s %s %s" % (v.name, o, c), v.dtype, v.shape, False, v.mag * 3 + 3)
    mag = v.mag * w.mag if op == "*" else v.mag + w.mag
    return b.let("%s %s %s" % (v.name, op, w.name), v.dtype, sh, False, mag)


def op_bool(b):
    v = b.pick(lambda v: v.dtype == "bool")
    if v is None:
        return None
    k = b.r.randrange(4)
    if k == 0:
        w = b.pick(lambda w: w.dtype == "bool" and bcast(v.shape, w.shape) is not None)
        op = b.r.choice(["&&", "||"])
        return b.let("%s %s !%s" % (v.name, op, w.name), "bool", bcast(v.shape, w.shape), True, 1)
    # where(c, a, b)
    a = b.pick(lambda a: a.dtype != "bool" and bcast(v.shape, a.shape) is not None)
    if a is None:
        return b.let("f32(%s)" % v.name, "f32", v.shape, True, 1)
    o = b.pick(lambda o: o.dtype == a.dtype and bcast(bcast(v.shape, a.shape), o.shape) is not None)
    if b.r.random() < 0.3 or o is None:
        lit = "1" if a.dtype in INT else "0.25"
        return b.let("where(%s, %s, %s)" % (v.name, a.name, lit), a.dtype, bcast(v.shape, a.shape), a.exact,
                     max(a.mag, 1))
    return b.let("where(%s, %s, %s)" % (v.name, a.name, o.name), a.dtype,
                 bcast(bcast(v.shape, a.shape), o.shape), a.exact and o.exact, max(a.mag, o.mag))


def op_cast(b):
    v = b.pick(lambda v: v.dtype != "bool")
    if v is None:
        return None
    if v.dtype in INT:
        dt = b.r.choice(["f32", "f64", "i32", "i64", "bool"])
        return b.let("%s(%s)" % (dt, v.name), dt, v.shape, True, v.mag)
    dt = "f64" if v.dtype == "f32" else "f32"
    return b.let("%s(%s)" % (dt, v.name), dt, v.shape, v.exact and dt == "f64", v.mag)


def op_reduce(b):
    v = b.pick(lambda v: v.rank >= 1 and v.dtype != "bool")
    if v is None:
        return None
    f = b.r.choice(["sum", "mean", "amax", "amin", "prod", "softmax", "log_softmax", "cumsum", "argmax"])
    if 0 in v.shape and f in ("mean", "amax", "amin", "argmax"):
        f = "sum"  # of no elements: a compile-time error by design
    if v.dtype in INT and f in ("mean", "softmax", "log_softmax"):
        f = "sum"
    axes = [i for i in range(v.rank)]
    ax = b.r.choice(axes)
    axs = ax - v.rank if b.r.random() < 0.3 else ax
    n = v.shape[ax]
    if f in ("softmax", "log_softmax"):
        return b.let("%s(%s, axis=%d)" % (f, v.name, axs), v.dtype, v.shape, False, 1 if f == "softmax" else v.mag * 2 + 5)
    if f == "cumsum":
        return b.let("cumsum(%s, %d)" % (v.name, axs), v.dtype, v.shape, v.dtype in INT,
                     v.mag * (n if isinstance(n, int) else 20))
    if f == "argmax":
        if not v.exact:
            return None
        keep = b.r.random() < 0.3
        sh = tuple(d for i, d in enumerate(v.shape) if i != ax or keep)
        sh = tuple(1 if (i == ax and keep) else d for i, d in enumerate(v.shape) if i != ax or keep)
        return b.let("argmax(%s, axis=%d%s)" % (v.name, axs, ", keepdim=true" if keep else ""), "i64", sh, True, 40)
    if f == "prod":
        if not isinstance(n, int) or n > 8:
            return None
        v = b.tame(v)
    keep = b.r.random() < 0.4
    if b.r.random() < 0.25 and v.rank >= 2:
        ax2 = b.r.choice([a for a in axes if a != ax])
        red = sorted([ax, ax2])
        axtext = "[%d, %d]" % (red[0], red[1] - v.rank)
    elif b.r.random() < 0.1:
        red, axtext = axes, None
    else:
        red, axtext = [ax], str(axs)
    if f in ("amax", "amin", "mean") and any(not isinstance(v.shape[a], int) and False for a in red):
        return None
    sh = tuple((1 if i in red else d) for i, d in enumerate(v.shape) if keep or i not in red)
    args = v.name
    if axtext is not None:
        args += ", axis=" + axtext
    if keep:
        args += ", keepdim=true"
    exact = v.exact and (f in ("amax", "amin") or v.dtype in INT)
    cnt = 1
    for a in red:
        cnt *= v.shape[a] if isinstance(v.shape[a], int) else 20
    mag = v.mag * cnt if f == "sum" else (v.mag ** min(cnt, 8) if f == "prod" else v.mag)
    return b.let("%s(%s)" % (f, args), v.dtype, sh, exact, mag)


def op_norm(b):
    v = b.pick(lambda v: v.dtype == "f32" and v.rank >= 1 and isinstance(v.shape[-1], int))
    if v is None:
        return None
    v = b.tame(v)
    k = b.r.randrange(4)
    d = v.shape[-1]
    if k == 0:
        w, bb = b.fparam([d]), b.fparam([d])
        eps = b.r.choice(["", ", eps=1e-3"])
        return b.let("layernorm(%s, %s, %s%s)" % (v.name, w, bb, eps), "f32", v.shape, False, 8)
    if k == 1:
        w = b.fparam([d])
        return b.let("rmsnorm(%s, %s)" % (v.name, w), "f32", v.shape, False, 8)
    if v.rank < 2 or not isinstance(v.shape[1], int):
        return None
    c = v.shape[1]
    if c == 0 or numel(v.shape) == 0:
        return None
    if k == 2:
        rm, rv, w, bb = b.fparam([c]), b.p.param("f32", [c], "var"), b.fparam([c]), b.fparam([c])
        return b.let("batch_norm(%s, %s, %s, %s, %s)" % (v.name, rm, rv, w, bb), "f32", v.shape, False, v.mag * 2 + 1)
    gs = [g for g in range(1, c + 1) if c % g == 0]
    g = b.r.choice(gs)
    w, bb = b.fparam([c]), b.fparam([c])
    if numel(d for d in v.shape[1:] if isinstance(d, int)) // g <= 1:
        return None  # a group of one element: variance 0, (x - mean) is rounding noise
    return b.let("group_norm(%s, %d, %s, %s)" % (v.name, g, w, bb), "f32", v.shape, False, 8)


def op_matmul(b):
    k = b.r.randrange(5)
    if k <= 1:
        # by a param: x @ W (+ b), or linear(x, W, b)
        v = b.pick(lambda v: v.dtype in FLOAT and v.rank >= 1 and isinstance(v.shape[-1], int))
        if v is None:
            return None
        v = b.tame(v)
        kk = v.shape[-1]
        n = b.r.choice([1, 3, 5, 7, 8, 16, 17, 33])
        if v.dtype == "f64":
            w = b.p.param("f64", [kk, n], "w")
            return b.let("%s @ %s" % (v.name, w), "f64", v.shape[:-1] + (n,), False, v.mag * 3)
        if k == 0:
            w = b.fparam([kk, n])
            bias = " + %s" % b.fparam([n]) if b.r.random() < 0.6 else ""
            return b.let("%s @ %s%s" % (v.name, w, bias), "f32", v.shape[:-1] + (n,), False, v.mag * 3 + 1)
        w = b.fparam([n, kk])
        if b.r.random() < 0.5:
            return b.let("linear(%s, %s, %s)" % (v.name, w, b.fparam([n])), "f32", v.shape[:-1] + (n,), False, v.mag * 3 + 1)
        return b.let("linear(%s, %s)" % (v.name, w), "f32", v.shape[:-1] + (n,), False, v.mag * 3)
    if k == 2:
        # x @ transpose(x): batched, symbolic inner or outer sizes
        v = b.pick(lambda v: v.dtype in FLOAT and v.rank >= 2)
        if v is None:
            return None
        v = b.tame(v)
        perm = list(range(v.rank))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        sh = v.shape[:-1] + (v.shape[-2],)
        return b.let("%s @ transpose(%s, %s)" % (v.name, v.name, perm), v.dtype, sh, False,
                     v.mag * v.mag * (v.shape[-1] if isinstance(v.shape[-1], int) else 20))
    # two values of the pool whose shapes fit (1-d operands too)
    for _ in range(6):
        a = b.pick(lambda v: v.dtype in FLOAT and v.rank >= 1)
        c = b.pick(lambda v: v.dtype == (a.dtype if a else "") and v.rank >= 1, recent=False)
        if a is None or c is None:
            return None
        if a.shape[-1] != (c.shape[-2] if c.rank >= 2 else c.shape[0]):
            continue
        ab, cb = a.shape[:-2] if a.rank >= 2 else (), c.shape[:-2] if c.rank >= 2 else ()
        bb = bcast(ab, cb)
        if bb is None:
            continue
        sh = bb + ((a.shape[-2],) if a.rank >= 2 else ()) + ((c.shape[-1],) if c.rank >= 2 else ())
        a, c = b.tame(a), b.tame(c)
        inner = a.shape[-1] if isinstance(a.shape[-1], int) else 20
        return b.let("%s @ %s" % (a.name, c.name), a.dtype, sh, False, a.mag * c.mag * inner)
    return None


def factor(n, r):
    """n as a product of about r factors."""
    out = []
    for _ in range(r - 1):
        ds = [d for d in range(1, n + 1) if n % d == 0]
        d = r_choice(ds)
        out.append(d)
        n //= d
    out.append(n)
    return out


_R = random.Random(0)


def r_choice(x):
    return _R.choice(x)


def op_move(b):
    v = b.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    k = b.r.randrange(9)
    if k == 0 and v.concrete() and numel(v.shape) > 0:
        global _R
        _R = b.r
        r = b.r.randint(1, 4)
        sh = factor(numel(v.shape), r)
        txt = list(sh)
        if b.r.random() < 0.3:
            txt[b.r.randrange(len(txt))] = -1
        return b.let("reshape(%s, %s)" % (v.name, txt), v.dtype, sh, v.exact, v.mag)
    if k == 1 and v.rank >= 2:
        perm = list(range(v.rank))
        b.r.shuffle(perm)
        return b.let("transpose(%s, %s)" % (v.name, perm), v.dtype, tuple(v.shape[p] for p in perm), v.exact, v.mag)
    if k == 2:
        # slices and integer indices, negative ones too
        idx, sh = [], []
        for d in v.shape:
            if not isinstance(d, int) or d == 0 or b.r.random() < 0.4:
                idx.append(":")
                sh.append(d)
                continue
            if b.r.random() < 0.25:
                i = b.r.randrange(d)
                idx.append(str(i - d if b.r.random() < 0.3 else i))
                continue
            lo = b.r.randrange(d)
            hi = b.r.randint(lo, d)
            if b.r.random() < 0.2:
                hi = lo  # an empty slice
            s = "%s:%s" % (lo if lo else "", hi - d if (b.r.random() < 0.3 and hi < d) else (hi if hi < d else ""))
            idx.append(s)
            sh.append(hi - lo)
        return b.let("%s[%s]" % (v.name, ", ".join(idx)), v.dtype, sh, v.exact, v.mag)
    if k == 3:
        axs = [i for i, d in enumerate(v.shape) if isinstance(d, int)]
        if not axs:
            return None
        ax = b.r.choice(axs)
        w = b.pick(lambda w: w.dtype == v.dtype and w.rank == v.rank and
                   all(i == ax or w.shape[i] == v.shape[i] for i in range(v.rank)) and isinstance(w.shape[ax], int))
        parts = [v, w, v] if b.r.random() < 0.3 else [v, w]
        sh = list(v.shape)
        sh[ax] = sum(p.shape[ax] for p in parts)
        if sh[ax] > 80:
            return None
        return b.let("concat([%s], axis=%d)" % (", ".join(p.name for p in parts), ax), v.dtype, sh,
                     v.exact and w.exact, max(v.mag, w.mag))
    if k == 4:
        axs = [i for i, d in enumerate(v.shape) if isinstance(d, int) and d > 1 and d % 2 == 0 or d in (3, 33)]
        if not axs:
            return None
        ax = b.r.choice(axs)
        n = 3 if v.shape[ax] % 3 == 0 else 2
        names = ["v%d" % (b.n + 1 + i) for i in range(n)]
        b.n += n
        b.lines.append("%slet %s = split(%s, %d, axis=%d)" % (b.ind, ", ".join(names), v.name, n, ax))
        sh = list(v.shape)
        sh[ax] //= n
        out = None
        for nm in names:
            out = V(nm, v.dtype, sh, v.exact, v.mag)
            b.pool.append(out)
        return out
    if k == 5:
        ones = [i for i, d in enumerate(v.shape) if d == 1]
        if ones:
            ax = b.r.choice(ones)
            if b.r.random() < 0.5:
                sh = list(v.shape)
                sh[ax] = b.r.choice([2, 3, 7])
                txt = [-1 if (i != ax and b.r.random() < 0.5) else d for i, d in enumerate(sh)]
                return b.let("expand(%s, %s)" % (v.name, txt), v.dtype, sh, v.exact, v.mag)
            return b.let("squeeze(%s, %d)" % (v.name, ax), v.dtype, v.shape[:ax] + v.shape[ax + 1:], v.exact, v.mag)
        if v.rank >= 4:
            return None
        ax = b.r.randint(0, v.rank)
        return b.let("unsqueeze(%s, %d)" % (v.name, ax), v.dtype, v.shape[:ax] + (1,) + v.shape[ax:], v.exact, v.mag)
    if k == 6 and v.rank >= 2 and v.concrete():
        s = b.r.randrange(v.rank - 1)
        e = b.r.randrange(s + 1, v.rank)
        sh = v.shape[:s] + (numel(v.shape[s:e + 1]),) + v.shape[e + 1:]
        return b.let("flatten(%s, %d, %d)" % (v.name, s, e - v.rank if b.r.random() < 0.5 else e), v.dtype, sh,
                     v.exact, v.mag)
    if k == 7 and v.dtype in FLOAT and v.rank >= 2:
        off = b.r.choice([0, 0, 1, 2])
        sm = b.r.random() < 0.7
        e = "causal_mask(%s%s)" % (v.name, ", offset=%d" % off if off else "")
        if sm:
            return b.let("softmax(%s, axis=-1)" % e, v.dtype, v.shape, False, 1)
        return b.let(e, v.dtype, v.shape, v.exact, v.mag)
    if k == 8 and v.concrete():
        f = b.r.choice(["zeros", "ones", "full", "arange"])
        if f == "arange":
            n = v.shape[-1]
            return b.let("%s + %s(arange(%d))" % (v.name, v.dtype if v.dtype != "bool" else "i64", n) if v.dtype != "bool"
                         else "arange(%d)" % n, v.dtype if v.dtype != "bool" else "i64", v.shape if v.dtype != "bool" else (n,),
                         v.exact, v.mag + n)
        if v.dtype not in FLOAT:
            return None
        arg = "%s, 1.5" % list(v.shape[-2:]) if f == "full" else "%s" % list(v.shape[-2:])
        c = "%s(%s)" % (f, arg) if v.dtype == "f32" else "f64(%s(%s))" % (f, arg)
        return b.let("%s * %s" % (v.name, c), v.dtype, v.shape, v.exact, v.mag * 1.5)
    return None


def op_topk(b):
    v = b.pick(lambda v: v.exact and v.rank >= 1 and v.dtype != "bool" and isinstance(v.shape[-1], int))
    if v is None:
        return None
    ax = b.r.randrange(v.rank)
    if not isinstance(v.shape[ax], int):
        return None
    n = v.shape[ax]
    kk = b.r.randint(0, n)
    largest = b.r.random() < 0.6
    names = ["v%d" % (b.n + 1), "v%d" % (b.n + 2)]
    b.n += 2
    b.lines.append("%slet %s, %s = topk(%s, %d, axis=%d%s)" % (b.ind, names[0], names[1], v.name, kk, ax,
                                                              "" if largest else ", largest=false"))
    sh = list(v.shape)
    sh[ax] = kk
    b.pool.append(V(names[0], v.dtype, sh, True, v.mag))
    iv = V(names[1], "i64", sh, True, n)
    b.pool.append(iv)
    return iv


def op_conv(b):
    """conv2d / conv_transpose2d / pooling / interpolate on a 4-d value."""
    v = b.pick(lambda v: v.dtype == "f32" and v.rank == 4 and v.concrete() and v.shape[2] >= 3 and v.shape[3] >= 3)
    if v is None:
        # make one: reshape a float value into [1, C, H, W]
        u = b.pick(lambda u: u.dtype == "f32" and u.concrete() and numel(u.shape) >= 9)
        if u is None:
            return None
        n = numel(u.shape)
        for c in (1, 2, 3, 4):
            for h in (3, 4, 5, 7, 8):
                if n % (c * h) == 0 and n // (c * h) >= 3:
                    v = b.let("reshape(%s, [1, %d, %d, %d])" % (u.name, c, h, n // (c * h)), "f32",
                              (1, c, h, n // (c * h)), u.exact, u.mag)
                    break
            if v:
                break
        if v is None:
            return None
    v = b.tame(v)
    N, C, H, W = v.shape
    k = b.r.randrange(6)
    if k <= 1:
        g = b.r.choice([g for g in (1, 2, 3) if C % g == 0])
        O = g * b.r.choice([1, 2, 3])
        kh, kw = b.r.choice([1, 2, 3]), b.r.choice([1, 3])
        st = b.r.choice([1, 1, 2])
        pad = b.r.choice([0, 1])
        dil = b.r.choice([1, 1, 2])
        if k == 0:
            oh = (H + 2 * pad - dil * (kh - 1) - 1) // st + 1
            ow = (W + 2 * pad - dil * (kw - 1) - 1) // st + 1
            if oh < 1 or ow < 1:
                return None
            w = b.p.param("f32", [O, C // g, kh, kw], "w")
            bias = ", %s" % b.fparam([O]) if b.r.random() < 0.7 else ""
            out = b.let("conv2d(%s, %s%s, stride=%d, padding=%d, groups=%d, dilation=%d)" % (v.name, w, bias, st, pad, g, dil),
                        "f32", (N, O, oh, ow), False, v.mag * 3 + 1)
            if b.r.random() < 0.5 and oh >= 2 and ow >= 2:
                # a pooling right after: the fused kernel, padding per axis
                pk = 2
                ph, pw = b.r.choice([(0, 0), (1, 0), (0, 1), (1, 1)])
                f = b.r.choice(["max_pool2d", "avg_pool2d"])
                ps = b.r.choice([1, 2])
                poh = (oh + 2 * ph - pk) // ps + 1
                pow_ = (ow + 2 * pw - pk) // ps + 1
                if poh >= 1 and pow_ >= 1:
                    out = b.let("%s(relu(%s), %d, stride=%d, padding=[%d, %d])" % (f, out.name, pk, ps, ph, pw), "f32",
                                (N, O, poh, pow_), False, out.mag)
            return out
        # transposed: w [C, O/g, kh, kw]
        op = b.r.choice([0, 1]) if st > 1 or dil > 1 else 0
        if op >= max(st, dil):
            op = 0
        oh = (H - 1) * st - 2 * pad + dil * (kh - 1) + op + 1
        ow = (W - 1) * st - 2 * pad + dil * (kw - 1) + op + 1
        if oh < 1 or ow < 1:
            return None
        w = b.p.param("f32", [C, O // g, kh, kw], "w")
        bias = ", %s" % b.fparam([O]) if b.r.random() < 0.5 else ""
        return b.let("conv_transpose2d(%s, %s%s, stride=%d, padding=%d, output_padding=%d, groups=%d, dilation=%d)"
                     % (v.name, w, bias, st, pad, op, g, dil), "f32", (N, O, oh, ow), False, v.mag * 3 + 1)
    if k == 2:
        f = b.r.choice(["max_pool2d", "avg_pool2d"])
        pk = b.r.choice([2, 3])
        st = b.r.choice([1, 2, pk])
        ph, pw = b.r.randint(0, pk // 2), b.r.randint(0, pk // 2)
        oh, ow = (H + 2 * ph - pk) // st + 1, (W + 2 * pw - pk) // st + 1
        if oh < 1 or ow < 1:
            return None
        pad = "%d" % ph if ph == pw else "[%d, %d]" % (ph, pw)
        return b.let("%s(%s, %d, stride=%d, padding=%s)" % (f, v.name, pk, st, pad), "f32", (N, C, oh, ow),
                     f == "max_pool2d" and v.exact, v.mag)
    if k == 3:
        return b.let("global_avg_pool2d(%s)" % v.name, "f32", (N, C, 1, 1), False, v.mag)
    mode = b.r.choice(["nearest", "bilinear"])
    if b.r.random() < 0.5:
        oh, ow = b.r.choice([1, 3, H, 2 * H, 5]), b.r.choice([2, W, 2 * W, 7])
        size = "size=[%d, %d]" % (oh, ow)
    else:
        s = b.r.choice([2, 0.5, 1.5, 3])
        oh, ow = int(H * s), int(W * s)
        if oh < 1 or ow < 1:
            return None
        size = "scale_factor=%s" % s
    ac = ", align_corners=true" if mode == "bilinear" and b.r.random() < 0.4 else ""
    return b.let('interpolate(%s, %s, mode="%s"%s)' % (v.name, size, mode, ac), "f32", (N, C, oh, ow),
                 mode == "nearest" and v.exact, v.mag)


STATIC_OPS = [(op_unary, 6), (op_binary, 8), (op_discrete, 3), (op_bool, 2), (op_cast, 2), (op_reduce, 5),
              (op_norm, 2), (op_matmul, 5), (op_move, 8), (op_topk, 1), (op_conv, 3)]
ROW_OPS = [(op_unary, 6), (op_binary, 6), (op_discrete, 2), (op_reduce, 4), (op_norm, 3), (op_matmul, 5)]


def choose_op(r, ops):
    tot = sum(w for _, w in ops)
    x = r.uniform(0, tot)
    for f, w in ops:
        x -= w
        if x <= 0:
            return f
    return ops[-1][0]


# ------------------------------------------------------------------ programs


class Program:
    def __init__(self, seed):
        self.seed = seed
        self.r = random.Random(seed)
        self.params = []          # (name, dtype, shape, kind)
        self.decls = []           # text of types, states, fns
        self.entries = []         # dicts: name, args [(name, dtype, shape)], dims [names], results [(dtype, shape)]
        self.tests = []
        self.nin = 0
        self.has_state = False

    def param(self, dtype, shape, kind):
        # reuse a param of the same shape sometimes: one weight read by several ops
        same = [p for p in self.params if p[1] == dtype and p[2] == list(shape) and p[3] == kind]
        if same and self.r.random() < 0.3:
            return same[0][0]
        name = "p%d" % len(self.params)
        self.params.append((name, dtype, list(shape), kind))
        return name

    def inspec(self, dtype, shape, **kw):
        self.nin += 1
        d = {"dtype": dtype, "shape": list(shape), "seed": self.seed * 1000 + self.nin}
        d.update(kw)
        return d

    # --------------------------------------------------------- static entries
    def static_entry(self, idx):
        r = self.r
        name = "s%d" % idx
        b = Body(self, r)
        args, specs = [], {}
        nargs = r.randint(1, 3)
        for i in range(nargs):
            rank = r.choice([0, 1, 1, 2, 2, 2, 3, 4])
            sh = []
            for _ in range(rank):
                sh.append(r.choice(SIZES))
            while numel(sh) > 600:
                sh[sh.index(max(sh))] = r.choice([1, 2, 3])
            dt = r.choice(["f32"] * 6 + ["f64", "i32", "i64", "bool"])
            an = "x%d" % i
            args.append((an, dt, sh))
            specs[an] = self.inspec(dt, sh)
            b.pool.append(V(an, dt, sh, True, 2 if dt in FLOAT else 20))
        gather = None
        if r.random() < 0.5:
            # a gather: an embedding table (param) or a value of the pool, by i32/i64 indices
            n = r.choice([3, 7, 17])
            d = r.choice([1, 4, 5])
            ish = [r.choice([1, 2, 5])] + ([r.choice([2, 3])] if r.random() < 0.3 else [])
            idt = r.choice(["i32", "i64"])
            args.append(("ix", idt, ish))
            specs["ix"] = self.inspec(idt, ish, kind="index", lo=0, hi=n)
            tab = self.param("f32", [n, d], "w")
            b.pool.append(b.let("%s[ix]" % tab, "f32", ish + [d], True, 0.6))
            gather = ("ix", n)
        take = None
        if r.random() < 0.3:
            v = b.pick(lambda v: v.rank >= 1 and v.concrete() and v.dtype != "bool")
            if v is not None:
                ax = r.randrange(v.rank)
                ish = [r.choice([1, d]) if i != ax else r.choice([1, 2, 3]) for i, d in enumerate(v.shape)]
                args.append(("tk", "i64", ish))
                specs["tk"] = self.inspec("i64", ish, kind="index", lo=0, hi=v.shape[ax])
                osh = [max(a, c) if i != ax else c for i, (a, c) in enumerate(zip(v.shape, ish))]
                b.let("take_along_axis(%s, tk, %d)" % (v.name, ax), v.dtype, osh, v.exact, v.mag)
                take = ("tk", v.shape[ax])
        nops = r.randint(5, 12)
        tries = 0
        while nops > 0 and tries < 60:
            tries += 1
            f = choose_op(r, STATIC_OPS)
            if f(b) is not None:
                nops -= 1
        outs = self.results(b)
        return self.finish_entry(name, b, args, [], "", outs, specs, gather, take)

    def results(self, b, n=None):
        r = self.r
        n = n or r.choice([1, 1, 2])
        cand = [v for v in b.pool if numel(d if isinstance(d, int) else 1 for d in v.shape) <= 4000]
        outs = [cand[-1]]
        if n == 2 and len(cand) > 1:
            outs.append(r.choice(cand[:-1]))
        return outs

    def finish_entry(self, name, b, args, dims, where, outs, specs, gather=None, take=None, state=False, static=True):
        res = [(v.dtype, v.shape) for v in outs]
        if len(res) == 1:
            rtxt = tstr(*res[0])
        else:
            rtxt = "(%s)" % ", ".join(tstr(*x) for x in res)
        sig = "export fn %s(%s) -> %s%s {" % (name, ", ".join("%s: %s" % (a, tstr(d, s)) for a, d, s in args), rtxt,
                                              (" where " + where) if where else "")
        text = "\n".join([sig] + b.lines + ["  return %s" % ", ".join(v.name for v in outs), "}"])
        e = {"name": name, "args": [[a, d, [x for x in s]] for a, d, s in args], "dims": dims,
             "results": [[d, list(s)] for d, s in res], "state": state}
        self.entries.append(e)
        self.decls.append(text)
        if static:
            self.tests.append({"name": name, "calls": [{"entry": name, "dims": {}, "inputs": specs}],
                               "interp": {"entry": name, "dims": {}, "inputs": specs}, "map": [[0, i] for i in range(len(res))]})
            for key, n in ((gather and gather[0], gather and gather[1]), (take and take[0], take and take[1])):
                if key and self.r.random() < 0.6:
                    bad = dict(specs)
                    bad[key] = dict(specs[key], bad=[self.r.randrange(64), self.r.choice([n, n + 5, -1])])
                    self.tests.append({"name": name + ".bad_" + key, "calls": [{"entry": name, "dims": {}, "inputs": bad}],
                                       "interp": {"entry": name, "dims": {}, "inputs": bad}, "map": [[0, i] for i in range(len(res))]})
        return e

    # --------------------------------------------------------- regions
    def region_fns(self):
        """Row-wise region functions over x: f32[N, K]: returns [(name, K)]."""
        r = self.r
        out = []
        K = r.choice([4, 5, 8, 12])
        self.K = K
        # a record type of weights for a block, and an array of them for a loop
        self.decls.append("type Blk = { w: f32[%d, %d], b: f32[%d], g: f32[%d] }" % (K, K, K, K))
        L = r.choice([1, 2, 3])
        self.L = L
        self.decls.append("param layers: Blk[%d]" % L)
        self.params_extra = [("layers.%d.%s" % (i, f)) for i in range(L) for f in ("w", "b", "g")]
        # inner region
        attrs_in = r.choice(["@region", "@region(reuse_hash = (N + 6) / 8)", "@region(reuse_hash = 0)",
                             "@region(max_reuse_entries = 2)", "@region(options = { opt_level: 1, fast_math: false })"])
        self.inner_hash = "reuse_hash" in attrs_in
        b = Body(self, r)
        b.pool.append(V("x", "f32", ("N", K), True, 8))
        b.let("x @ p.w + p.b", "f32", ("N", K), False, 8)
        for _ in range(r.randint(1, 4)):
            f = choose_op(r, ROW_OPS)
            f(b)
        last = self.rowify(b, K)
        self.decls.append("\n".join([attrs_in, "fn inner(x: f32[N, %d], p: Blk) -> f32[N, %d] {" % (K, K)] + b.lines +
                                    ["  return %s" % last, "}"]))
        # outer region: calls inner (nested regions), maybe specialised for N == 1
        attrs = r.choice(["@region", "@region(specialize = [N == 1])", "@region(specialize = [N == 1, N == 3])"])
        if self.inner_hash:
            # a reuse_hash group cannot mix a size-1 axis with others (an error by design)
            attrs = "@region"
        b = Body(self, r)
        b.pool.append(V("x", "f32", ("N", K), True, 8))
        b.let("inner(layernorm(x, p.g, p.b), p)", "f32", ("N", K), False, 8)
        if r.random() < 0.5:
            # attention over the rows: a run-time inner size when N is
            b.let("softmax(causal_mask(x @ transpose(x, [1, 0]) * 0.1), axis=-1) @ x", "f32", ("N", K), False, 8)
        for _ in range(r.randint(0, 3)):
            f = choose_op(r, ROW_OPS)
            f(b)
        last = self.rowify(b, K)
        self.decls.append("\n".join([attrs, "fn outer(x: f32[N, %d], p: Blk) -> f32[N, %d] {" % (K, K)] + b.lines +
                                    ["  return x + %s" % last, "}"]))
        # a plain function (expanded inline) that loops over the layers
        self.decls.append("fn net(x: f32[N, %d]) -> f32[N, %d] {\n  let h = x\n  for i in 0..%d {\n    h = outer(h, layers[i])\n  }\n"
                          "  return h\n}" % (K, K, L))

    def rowify(self, b, K):
        """A value of the body brought back to f32[N, K]: the result of a row function."""
        r = self.r
        for v in reversed(b.pool):
            if v.dtype != "f32":
                continue
            if v.shape == ("N", K):
                return v.name
            if v.rank == 2 and v.shape[0] == "N" and isinstance(v.shape[1], int):
                w = self.param("f32", [v.shape[1], K], "w")
                return "%s @ %s" % (v.name, w)
            if bcast(v.shape, ("N", K)) == ("N", K):
                return "x + %s" % v.name
        return "x"

    def region_entries(self):
        r = self.r
        K = self.K
        # static entry: the region at several row counts (variants), from a loop
        rows = sorted(set(r.sample([2, 3, 5, 7, 16, 17] + ([] if self.inner_hash else [1, 1]), 3)))
        args, specs = [], {}
        b = Body(self, r)
        outs = []
        for i, n in enumerate(rows):
            an = "x%d" % i
            args.append((an, "f32", [n, K]))
            specs[an] = self.inspec("f32", [n, K])
            b.pool.append(V(an, "f32", (n, K), True, 2))
            outs.append(b.let("net(%s)" % an, "f32", (n, K), False, 8))
        if self.inner_hash:
            # the inner region straight from the entry, at sizes that share one reuse_hash group
            outs.append(b.let("inner(x%d, layers[0])" % (len(rows) - 1), "f32", (rows[-1], K), False, 8))
        self.finish_entry("net_static", b, args, [], "", outs[:3], specs)
        # run-time dims: the loop of regions over T rows, bounds of every kind
        self.dim_entry("net_dyn", K)

    def bound(self, d, lo, hi):
        """Conditions giving lo <= d <= hi, in one of many spellings."""
        r = self.r
        lows = ["%d <= %s" % (lo, d), "%s >= %d" % (d, lo), "%s > %d" % (d, lo - 1), "%d < %s" % (lo - 1, d)]
        highs = ["%s <= %d" % (d, hi), "%s < %d" % (d, hi + 1), "%d >= %s" % (hi, d), "%d > %s" % (hi + 1, d)]
        if hi % 2 == 0:
            highs.append("2 * %s <= %d" % (d, 2 * hi))
        highs.append("3 * %s < %d" % (d, 3 * hi + 1))
        k = r.randrange(4)
        if k == 0:
            return ["%d <= %s <= %d" % (lo, d, hi)]
        if k == 1:
            return ["%d < %s < %d" % (lo - 1, d, hi + 1)]
        if k == 2:
            return ["%s && %s" % (r.choice(lows), r.choice(highs))]
        out = [r.choice(lows), r.choice(highs)]
        r.shuffle(out)
        return out

    def dim_tests(self, name, dims, bounds, specs_for, nres, coef=None):
        """Calls at the bounds and inside them, and calls outside them (errors)."""
        r = self.r
        vals = []
        for d in dims:
            lo, hi = bounds[d]
            vals.append(sorted(set([lo, hi, r.randint(lo, hi)])))
        combos = []
        for i in range(3):
            combos.append({d: vals[j][min(i, len(vals[j]) - 1)] for j, d in enumerate(dims)})
        for c in combos:
            spec = specs_for(c)
            self.tests.append({"name": "%s.%s" % (name, "_".join("%s%d" % kv for kv in c.items())),
                               "calls": [{"entry": name, "dims": c, "inputs": spec}],
                               "interp": {"entry": name, "dims": c, "inputs": spec},
                               "map": [[0, i] for i in range(nres)]})
        # out of bounds: below, above, and huge (a coefficient must not wrap)
        d = r.choice(dims)
        lo, hi = bounds[d]
        base = {x: bounds[x][0] for x in dims}
        for bad in (lo - 1, hi + 1, (1 << 62) + 1 if coef and d in coef else hi + 7):
            c = dict(base)
            c[d] = bad
            ok = {x: min(max(v, bounds[x][0]), bounds[x][1]) for x, v in c.items()}
            spec = specs_for(ok if bad > 1 << 40 else c) if bad >= 0 else specs_for(ok)
            self.tests.append({"name": "%s.bad_%s%d" % (name, d, bad), "calls": [{"entry": name, "dims": c, "inputs": spec}],
                               "interp": {"entry": name, "dims": c, "inputs": spec}, "map": [], "huge": bad > 1 << 40})

    def dim_entry(self, name, K):
        r = self.r
        hi = r.choice([16, 17, 20])
        lo = r.choice([0, 1, 1, 2]) if False else r.choice([1, 1, 2])
        conds = self.bound("T", lo, hi)
        coef = {"T"} if any("* T" in c for c in conds) else set()
        if r.random() < 0.4:
            conds.append("K1 == %d" % K)
        b = Body(self, r)
        b.pool.append(V("x", "f32", ("T", K), True, 2))
        b.let("net(x)", "f32", ("T", K), False, 8)
        for _ in range(r.randint(1, 4)):
            choose_op(r, ROW_OPS)(b)
        outs = [b.pool[-1]] if b.pool[-1].dtype != "bool" else [b.pool[1]]
        outs = [v for v in outs if all(d == "T" or isinstance(d, int) for d in v.shape)] or [b.pool[1]]
        self.finish_entry(name, b, [("x", "f32", ["T", K])], ["T"], ", ".join(conds), outs, {}, static=False)
        self.dim_tests(name, ["T"], {"T": (lo, hi)}, lambda c: {"x": self.inspec("f32", [c["T"], K])}, 1, coef)

    # --------------------------------------------------------- state
    def state_group(self):
        r = self.r
        R = r.choice([9, 12, 16])
        C = r.choice([5, 8, 9])
        cw = r.randint(2, C)          # columns written by w1
        cr = r.randint(1, C)          # columns read by rd
        row = r.randrange(R)          # the row w2 writes
        self.has_state = True
        self.decls.append("state st: f32[%d, %d]" % (R, C))
        self.decls.append("state st2: f32[%d]" % C)
        in_region = r.random() < 0.5
        # w1: rows P:P+T, columns 0:cw, of a value computed from x
        body = "  s[P:P+T, 0:%d] = x * 2.0 + 1.0\n  return sum(x, axis=-1)" % cw
        if in_region:
            self.decls.append("@region\nfn w1(x: f32[T, %d], s: f32[%d, %d], P: int) -> f32[T] {\n%s\n}" % (cw, R, C, body))
        else:
            self.decls.append("fn w1(x: f32[T, %d], s: f32[%d, %d], P: int) -> f32[T] {\n%s\n}" % (cw, R, C, body))
        # w2: one row, all columns (the box of the issue: rows x cols, then a row x more cols)
        self.decls.append("fn w2(y: f32[%d]) -> f32[%d] {\n  st[%d, :] = y\n  st2[0:%d] = y * y\n  return st2[0:%d] + 1.0\n}"
                          % (C, C, row, C, C))
        # rd: rows P:P+T (or 0:P+T), columns 0:cr
        kv = r.random() < 0.4 and R >= 12  # (R = 9: see the note in nest_diff.py)
        Kp = self.K if hasattr(self, "K") else 4
        wq = self.param("f32", [cr, cr], "w")
        if kv:
            rbody = ("  let q = st[P:P+T, 0:%d] @ %s\n  let kk = st[0:P+T, 0:%d]\n"
                     "  return softmax(causal_mask(q @ transpose(kk, [1, 0]), offset=P), axis=-1) @ kk" % (cr, wq, cr))
        else:
            rbody = "  return tanh(st[P:P+T, 0:%d] @ %s) + st2[0:%d]" % (cr, wq, cr) if cr <= C else ""
        self.decls.append("fn rd(P: int, T: int) -> f32[T, %d] {\n%s\n}" % (cr, rbody))
        sum_bound = r.random() < 0.8

        def where(p, t, tlo=1):
            c = ["0 <= %s" % p, "%s < %d" % (p, R)] + self.bound(t, tlo, R)
            if sum_bound:
                c.append("%s + %s <= %d" % (p, t, R))
            return ", ".join(c)
        self.decls.append("export fn e_w1(x: f32[T, %d]) -> f32[T] where %s {\n  return w1(x, st, P)\n}" % (cw, where("P", "T")))
        self.decls.append("export fn e_w2(y: f32[%d]) -> f32[%d] {\n  return w2(y)\n}" % (C, C))
        self.decls.append("export fn e_rd() -> f32[T, %d] where %s {\n  return rd(P, T)\n}" % (cr, where("P", "T")))
        # the sequences as one call each, for the interpreter (a fresh sequence per run)
        self.decls.append("export fn c_w1_w2_rd(x: f32[T, %d], y: f32[%d]) -> (f32[T], f32[%d], f32[U, %d]) where %s, %s {\n"
                          "  let a = w1(x, st, P)\n  let b = w2(y)\n  return a, b, rd(Q, U)\n}"
                          % (cw, C, C, cr, where("P", "T"), where("Q", "U")))
        self.decls.append("export fn c_w1_rd(x: f32[T, %d]) -> (f32[T], f32[U, %d]) where %s, %s {\n"
                          "  let a = w1(x, st, P)\n  return a, rd(Q, U)\n}" % (cw, cr, where("P", "T"), where("Q", "U")))
        for n, dims in (("e_w1", ["P", "T"]), ("e_w2", []), ("e_rd", ["P", "T"]), ("c_w1_w2_rd", ["P", "T", "Q", "U"]),
                        ("c_w1_rd", ["P", "T", "Q", "U"])):
            self.entries.append({"name": n, "dims": dims, "state": True})

        def covered(writes, p, t, rowsfrom0):
            cells = set()
            for (a, bnd, cols) in writes:
                for i in range(a, bnd):
                    for j in range(cols):
                        cells.add((i, j))
            r0 = 0 if rowsfrom0 else p
            return all((i, j) in cells for i in range(r0, p + t) for j in range(cr))

        def pt():
            t = r.randint(1, R)
            p = r.randint(0, R - t)
            return p, t
        specs_y = self.inspec("f32", [C])
        made = {True: 0, False: 0}
        for i in range(6):
            p1, t1 = pt()
            with_w2 = r.random() < 0.6
            # a read inside what was written, half the time
            if r.random() < 0.5:
                q = r.randint(p1, p1 + t1 - 1)
                u = r.randint(1, p1 + t1 - q)
            else:
                q, u = pt()
            writes = [(p1, p1 + t1, cw)] + ([(row, row + 1, C)] if with_w2 else [])
            cov = covered(writes, q, u, kv)
            made[cov] += 1
            xs = self.inspec("f32", [t1, cw])
            calls = [{"entry": "e_w1", "dims": {"P": p1, "T": t1}, "inputs": {"x": xs}}]
            if with_w2:
                calls.append({"entry": "e_w2", "dims": {}, "inputs": {"y": specs_y}})
            calls.append({"entry": "e_rd", "dims": {"P": q, "T": u}, "inputs": {}})
            dims = {"P": p1, "T": t1, "Q": q, "U": u}
            if with_w2:
                it = {"entry": "c_w1_w2_rd", "dims": dims, "inputs": {"x": xs, "y": specs_y}}
                mp = [[0, 0], [1, 0], [2, 0]]
            else:
                it = {"entry": "c_w1_rd", "dims": dims, "inputs": {"x": xs}}
                mp = [[0, 0], [1, 0]]
            self.tests.append({"name": "seq%d" % i, "calls": calls, "interp": it, "map": mp})
            # the one-call form, compiled too
            self.tests.append({"name": "seq%d.one_call" % i, "calls": [dict(it)], "interp": it,
                               "map": [[0, k] for k in range(len(mp))]})
        # written, reset, read: the read must fail as on a fresh sequence
        p1, t1 = pt()
        xs = self.inspec("f32", [t1, cw])
        self.tests.append({"name": "seq_reset", "calls": [{"entry": "e_w1", "dims": {"P": p1, "T": t1}, "inputs": {"x": xs}},
                                                           {"reset": True},
                                                           {"entry": "e_rd", "dims": {"P": p1, "T": t1}, "inputs": {}}],
                           "interp": {"entry": "e_rd", "dims": {"P": p1, "T": t1}, "inputs": {}}, "map": [[2, 0]]})
        # bad dims of a state entry: the sum bound (or the slice's end when it is left out)
        xb = {"x": self.inspec("f32", [2, cw])}
        self.tests.append({"name": "seq_bad_dims", "calls": [{"entry": "e_w1", "dims": {"P": R - 1, "T": 2}, "inputs": xb}],
                           "interp": {"entry": "e_w1", "dims": {"P": R - 1, "T": 2}, "inputs": xb},
                           "map": [[0, 0]]})

    # --------------------------------------------------------- assembly
    def source(self):
        lines = ["# nest_diff program, seed %d" % self.seed, "const D1 = 3", "const K1 = %d" % getattr(self, "K", 4)]
        for name, dt, sh, kind in self.params:
            lines.append("param %s: %s" % (name, tstr(dt, sh)))
        return "\n".join(lines) + "\n\n" + "\n\n".join(self.decls) + "\n"


def gen_program(seed, n_static=6):
    p = Program(seed)
    r = p.r
    try_region = True
    if try_region:
        p.region_fns()
        p.region_entries()
    for i in range(n_static):
        p.static_entry(i)
    if r.random() < 0.9:
        p.state_group()
    # the plan must be complete for the results of state entries: fill them from the text
    src = p.source()
    plan = {"seed": seed, "tests": p.tests, "has_state": p.has_state,
            "entries": p.entries}
    return src, plan


def plan_comment(plan):
    return "\n".join("#@plan " + line for line in json.dumps(plan, separators=(",", ":")).split("\n")) + "\n"


def read_plan(text):
    js = "".join(line[len("#@plan "):] for line in text.splitlines() if line.startswith("#@plan "))
    return json.loads(js) if js else None
