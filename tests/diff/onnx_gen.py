"""Random valid ONNX graphs (opset 17) for tests/diff/onnx_diff.py.

    g = Graph(seed, prefix="g0_"); g.generate(nnodes)
    g.nodes, g.inits, g.inputs [(name, f32 array)], g.outputs [names], g.vals {name: array}

Each node is evaluated as it is made, in the three modes of onnx_ref.py; a node whose
result is not finite, too large, or sensitive to float32 rounding (mode "r" or "p" far from
"x"), or a comparison, Floor or Cast to an integer too close to its edge, is dropped and
another drawn. So every graph kept is well-conditioned and nestc's float32 results can be
compared with the float64 reference at a tight tolerance.

About a third of the nodes take only initializers and Constant nodes (or values computed
from them alone), with broadcasting shapes, so that nestc's import folds them; their
results are constants in turn, for the next nodes to fold again or to meet run-time values.

The op families (Graph.FAMILIES, drawn by weight; each may add several nodes):
elementwise binary ops with broadcasting either way (Add Sub Mul Div Pow Max Min Sum),
unary math (Relu Sigmoid Tanh Exp Log Sqrt Abs Neg Erf Reciprocal LeakyRelu Softplus Clip
HardSigmoid Elu Floor Ceil Sin Softsign), comparisons with And/Or/Not into Where or Cast,
MatMul (1-d, batched, a weight on the left, odd sizes and vector tails), Gemm (transA,
transB, alpha, beta, every bias shape), reductions (Sum Mean Max Min L2 SumSquare, axes
negative or none, keepdims), Softmax / LogSoftmax on any axis, Reshape (0 and -1),
Transpose, Concat, Slice (negative starts and steps, ends past the end), Gather (known or
run-time indices, negative ones), Squeeze / Unsqueeze, Expand, Tile, Flatten, Pad
(constant, reflect, edge), Split, CumSum, Conv (groups, strides, dilations, pads that
differ per side, auto_pad, 1-d, 16 channels in for the vector-lane and Winograd kernels,
run-time weights) with Relu and MaxPool / AveragePool after it (ceil_mode,
count_include_pad, pads [1, 0, 1, 0]), Global pools, BatchNormalization,
LayerNormalization, InstanceNormalization, Cast to and from integers with integer
arithmetic, shape arithmetic as exporters write it (Shape, Gather, Unsqueeze, Concat,
ConstantOfShape, Range, Size), Einsum, Trilu, ArgMax / ArgMin, PRelu, Sign, Mod,
GatherElements, attention (Q K^T, scale, causal mask, Softmax, V), LayerNormalization
and GELU decomposed as older exporters write them (patterns.c fuses them), repeated
residual layers with dotted weight names (outline.c makes them a region), and, on demand,
a big convolution and pooling (g_bigconv) and a Gather whose index the feeds make out of
range (g_gather_err). Value names are plain, torch-like (/blk/Add_output_3, onnx::...),
or pairs that become one Nest identifier (v.3 and v_3).
"""
import os

import numpy as np
from onnx import TensorProto as TP
from onnx import helper as H
from onnx import numpy_helper as NH

import onnx_ref as R

MODES = ("x", "r", "p")
MAX_ELEMS = 5000
MAX_ABS = 1e4
CHECK_RTOL, CHECK_ATOL = 2e-5, 2e-6     # "r" and "p" against "x", relative and of max|x|


# ops never given only constants (to search past a known folding bug):
# ONNX_DIFF_AVOID_FOLDED=GreaterOrEqual,LessOrEqual
AVOID_FOLDED = set(filter(None, os.environ.get("ONNX_DIFF_AVOID_FOLDED", "").split(",")))
# ops whose results are never made extra outputs (past a known bug): ONNX_DIFF_AVOID_OUTPUT=Range
AVOID_OUTPUT = set(filter(None, os.environ.get("ONNX_DIFF_AVOID_OUTPUT", "").split(",")))
# the name styles used (fresh()), to search past a known naming bug: ONNX_DIFF_STYLES=plain,torch
STYLES = set(os.environ.get("ONNX_DIFF_STYLES", "plain,torch,clash").split(","))


class Reject(Exception):
    pass


class T:
    """A value of the graph: name, {mode: array}, whether known at import."""

    def __init__(self, name, v, const):
        self.name, self.v, self.const = name, v, const

    @property
    def x(self):
        return self.v["x"]

    @property
    def kind(self):
        return self.x.dtype.kind     # f, i, b

    @property
    def shape(self):
        return self.x.shape


def elem_type(a):
    return {"f": TP.FLOAT, "b": TP.BOOL}.get(a.dtype.kind, TP.INT64 if a.dtype == np.int64 else TP.INT32)


def np_of(a):
    """An array as the model holds it (float32 for floats)."""
    return a.astype(np.float32) if a.dtype.kind == "f" else a


class Graph:
    def __init__(self, seed, prefix="", opset=17):
        self.seed, self.p = seed, prefix
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs, self.pool = [], [], [], []
        self.n = 0
        self.ops = []
        # names drawn apart from the graph, which is the same in any style
        self.style = ["plain", "plain", "torch", "clash"][int(np.random.default_rng(seed + 7).integers(4))]
        if self.style not in STYLES:
            self.style = "plain"
        # opset 12 for a graph in 5 (Softmax over a 2-d view, axes as attributes)
        self.opset = 12 if np.random.default_rng(seed + 13).random() < 0.2 else opset
        # initializers also listed as graph inputs (IR version 3, older exporters)
        self.inits_as_inputs = np.random.default_rng(seed + 11).random() < 0.25
        self.private = set()    # values never made extra outputs (a repeated block's insides)
        self.solo = False
        self.max_elems = MAX_ELEMS

    # ------------------------------------------------------------------ basics

    def fresh(self, base):
        """A new value name in the graph's style: plain (g5_add7), as torch writes them
        (/g5_blk/Add_output_7, onnx::g5_Add_7), or in pairs that nestc's identifiers
        would make equal (g5_v_3 and g5_v.3)."""
        self.n += 1
        if self.style == "torch":
            return ("/%sblk/%s_output_%d" if self.n % 3 else "onnx::%s%s_%d") % (self.p, base.capitalize(), self.n)
        if self.style == "clash":
            return "%sv%s%d" % (self.p, "._"[self.n % 2], self.n // 2)
        return "%s%s%d" % (self.p, base, self.n)

    def chance(self, p):
        return self.rng.random() < p

    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def rand_shape(self, rank=None, lo=1, hi=5):
        rank = int(self.rng.integers(1, 5)) if rank is None else rank
        s = [int(self.rng.integers(lo, hi + 1)) for _ in range(rank)]
        # rows of whole vectors and of vectors and a tail
        if rank and self.chance(0.3):
            s[-1] = int(self.choice([7, 8, 9, 15, 16, 17, 31, 33]))
        if rank >= 2 and self.chance(0.15):
            s[-2] = int(self.choice([6, 9, 13]))
        return tuple(s)

    def rand_vals(self, shape, lo=-2.0, hi=2.0):
        return self.rng.uniform(lo, hi, size=shape).astype(np.float32)

    def new_input(self, shape, a=None):
        a = self.rand_vals(shape) if a is None else a
        name = self.fresh("in")
        self.inputs.append((name, a))
        v = a.astype(np.float64) if a.dtype.kind == "f" else a
        t = T(name, {m: v for m in MODES}, False)
        if a.dtype.kind == "f":
            self.pool.append(t)
        return t

    def const(self, a, pool=True):
        """An initializer or (a third of the time) a Constant node holding a."""
        a = np_of(np.asarray(a))
        name = self.fresh("c")
        if self.chance(0.3):
            if a.dtype == np.float32 and a.ndim == 0 and self.chance(0.5):
                self.nodes.append(H.make_node("Constant", [], [name], value_float=float(a)))
            else:
                self.nodes.append(H.make_node("Constant", [], [name], value=NH.from_array(a, name + "_v")))
        else:
            self.inits.append(NH.from_array(a, name))
        v = a.astype(np.float64) if a.dtype.kind == "f" else a
        t = T(name, {m: v for m in MODES}, True)
        if pool:
            self.pool.append(t)
        return t

    def ints(self, vals):
        return self.const(np.array(vals, np.int64), pool=False)

    def pick(self, kind="f", const=None, pred=None):
        """A value of the pool, recent ones more likely; None if none fits."""
        c = [t for t in self.pool if t.kind == kind and (const is None or t.const == const)
             and (pred is None or pred(t))]
        if not c:
            return None
        w = np.arange(1, len(c) + 1, dtype=np.float64) ** 1.5
        return c[int(self.rng.choice(len(c), p=w / w.sum()))]

    def operand(self, allconst, kind="f", pred=None, shape=None):
        """A float operand of rank 1 or more: from the pool (a constant one when allconst),
        else new."""
        p0 = pred
        pred = lambda t: t.x.ndim >= 1 and (p0 is None or p0(t))
        t = None if self.chance(0.25) else self.pick(kind, True if allconst else None, pred)
        if t is None:
            shape = shape or self.rand_shape()
            if kind != "f":
                raise Reject("no %s operand" % kind)
            t = self.const(self.rand_vals(shape)) if allconst or self.chance(0.3) else self.new_input(shape)
            if pred and not pred(t):
                raise Reject("new operand does not fit")
        return t

    def bcast_shape(self, s):
        """A shape that broadcasts with s (either way)."""
        s = list(s)
        out = []
        for d in s:
            r = self.rng.random()
            out.append(1 if r < 0.3 else (int(self.rng.integers(2, 4)) if d == 1 and r < 0.5 else d))
        drop = int(self.rng.integers(0, len(out) + 1)) if self.chance(0.4) else 0
        out = out[drop:]
        if drop == 0 and len(out) < 4 and self.chance(0.2):
            out = [int(self.rng.integers(1, 4))] + out
        return tuple(out)

    def partner(self, a, allconst, kind="f", lo=-2.0, hi=2.0, pred=None):
        """A second operand that broadcasts with a."""
        if self.chance(0.4):
            c = self.pick(kind, True if allconst else None,
                          lambda t: t is not a and _bcastable(t.shape, a.shape) and (pred is None or pred(t)))
            if c is not None:
                return c
        v = self.rng.uniform(lo, hi, size=self.bcast_shape(a.shape))
        if kind == "b":
            v = v > 0
        elif kind == "i":
            v = np.round(v).astype(np.int64)
        return self.const(v.astype(np.float32) if kind == "f" else v)

    # ------------------------------------------------------------------ nodes

    def add(self, op, ins, nout=1, **attrs):
        """Appends the node if its results are well-conditioned; its output values."""
        if self.opset < 13:
            # opset 12: axes and split are attributes; no LayerNormalization, Trilu, Shape start
            if op in ("LayerNormalization", "Trilu") or op == "Shape" and attrs:
                raise Reject("not in opset 12")
            if op in ("ReduceSum", "Squeeze", "Unsqueeze", "Split") and len(ins) > 1 and ins[1] is not None:
                attrs["split" if op == "Split" else "axes"] = [int(v) for v in ins[1].x]
                ins = ins[:1]
        outs = [self.fresh(op.lower()[:6]) for _ in range(nout)]
        node = H.make_node(op, [t.name if t else "" for t in ins], outs, name=outs[0] + "_n", **attrs)
        a = R.attrs_of(node)
        a["_opset"] = self.opset
        res = {}
        for m in MODES:
            try:
                xs = [t.v[m] if t else None for t in ins]
                while xs and xs[-1] is None:
                    xs.pop()
                with np.errstate(all="ignore"):
                    res[m] = R.finish(op, R.eval_node(op, a, xs), m, self.rng)
            except (ValueError, IndexError, ZeroDivisionError) as e:
                raise Reject("%s: %s" % (op, e))
        for k in range(nout):
            x = res["x"][k]
            if x.size == 0 or x.size > self.max_elems or x.ndim > 5:
                raise Reject("size")
            for m in ("r", "p"):
                y = res[m][k]
                if y.shape != x.shape or y.dtype.kind != x.dtype.kind:
                    raise Reject("modes disagree on shape")
                if x.dtype.kind == "f":
                    if not (np.isfinite(x).all() and np.isfinite(y).all()) or np.abs(x).max() > MAX_ABS:
                        raise Reject("not finite or too large")
                    tol = CHECK_RTOL * np.abs(x) + CHECK_ATOL * max(float(np.abs(x).max()), 1e-6)
                    if (np.abs(y - x) > tol).any():
                        raise Reject("ill-conditioned")
                elif not np.array_equal(x, y):
                    raise Reject("modes disagree")
        const = all(t is None or t.const for t in ins)
        if const and op in AVOID_FOLDED:
            raise Reject("avoided")
        self.nodes.append(node)
        self.ops.append(op)
        ts = [T(outs[k], {m: res[m][k] for m in MODES}, const) for k in range(nout)]
        self.pool += ts
        return ts[0] if nout == 1 else ts

    # ------------------------------------------------------------------ op families

    def g_binary(self, allconst):
        op = self.choice(["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Add", "Mul", "Sub"])
        a = self.operand(allconst)
        if op == "Div":
            b = self.partner(a, allconst, lo=0.5, hi=2.0) if self.chance(0.7) else self.partner(a, allconst)
            if self.chance(0.5):   # a constant divisor of either sign
                b = self.const(self.choice([-1, 1]) * self.rng.uniform(0.5, 2, size=self.bcast_shape(a.shape)).astype(np.float32))
        elif op == "Pow":
            a = self.operand(allconst, pred=lambda t: (t.x > 0.1).all() and t.x.max() < 20)
            if self.chance(0.5):
                b = self.const(np.float32(self.choice([2.0, 3.0, 0.5, -1.0, 1.5, 1.0])))
            else:
                b = self.partner(a, allconst, lo=-1.5, hi=2.5)
        else:
            b = self.partner(a, allconst)
        if op in ("Max", "Min", "Add") and self.chance(0.2):
            op = {"Add": "Sum"}.get(op, op)
            c = self.partner(a, allconst)
            return self.add(op, [a, b, c])
        if op not in ("Pow", "Div") and self.chance(0.5):
            a, b = b, a
        return self.add(op, [a, b])

    def g_unary(self, allconst):
        op = self.choice(["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "Erf", "Reciprocal",
                          "LeakyRelu", "Softplus", "Clip", "HardSigmoid", "Elu", "Floor", "Ceil", "Sin",
                          "Softsign", "Identity"])
        pred = None
        if op in ("Log", "Sqrt"):
            pred = lambda t: (t.x > 0.05).all()
        elif op in ("Exp", "Softplus"):
            pred = lambda t: t.x.max() < 6
        elif op == "Reciprocal":
            pred = lambda t: (np.abs(t.x) > 0.2).all()
        elif op in ("Floor", "Ceil"):
            pred = lambda t: (np.abs(t.x - np.round(t.x)) > 1e-3 * (1 + np.abs(t.x))).all()
        a = self.operand(allconst, pred=pred)
        if op == "LeakyRelu":
            return self.add(op, [a], alpha=float(self.choice([0.01, 0.2, 1.5])))
        if op == "Elu":
            return self.add(op, [a], alpha=float(self.choice([1.0, 0.5])))
        if op == "HardSigmoid":
            return self.add(op, [a], alpha=0.3, beta=0.4)
        if op == "Clip":
            lo = float(self.rng.uniform(-1.5, 0))
            hi = float(self.rng.uniform(0.1, 1.5))
            which = self.choice(["both", "min", "max"])
            mn = self.const(np.float32(lo), pool=False) if which != "max" else None
            mx = self.const(np.float32(hi), pool=False) if which != "min" else None
            return self.add(op, [a, mn, mx])
        return self.add(op, [a])

    def margin_ok(self, a, b):
        x, y = np.broadcast_arrays(a.x, b.x)
        return (np.abs(x - y) > 1e-4 * (np.abs(x) + np.abs(y)) + 1e-4).all()

    def g_compare(self, allconst):
        op = self.choice(["Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
        a = self.operand(allconst)
        b = self.partner(a, allconst)
        if not self.margin_ok(a, b):
            raise Reject("comparison too close")
        c = self.add(op, [a, b] if self.chance(0.5) else [b, a])
        r = self.rng.random()
        if r < 0.2:
            d = self.pick("b", True if allconst else None, lambda t: t is not c and _bcastable(t.shape, c.shape))
            if d is not None:
                c = self.add(self.choice(["And", "Or"]), [c, d])
        elif r < 0.3:
            c = self.add("Not", [c])
        if self.chance(0.2):
            return self.add("Cast", [c], to=TP.FLOAT)
        return self.g_where(allconst, c)

    def g_where(self, allconst, c=None):
        if c is None:
            c = self.pick("b", True if allconst else None)
            if c is None or self.chance(0.3):
                v = self.rng.random(self.rand_shape()) > 0.5
                c = self.new_input(v.shape, v) if not allconst and self.chance(0.5) else self.const(v)
        x = self.operand(allconst, pred=lambda t: _bcastable(t.shape, c.shape))
        y = self.partner(x, allconst)
        return self.add("Where", [c, x, y])

    def g_matmul(self, allconst):
        a = self.operand(allconst)
        K = a.shape[-1]
        N = int(self.rng.integers(1, 7)) if self.chance(0.7) else int(self.choice([8, 16, 17, 24, 33]))
        r = self.rng.random()
        if r < 0.15:
            bs = (K,)
        elif r < 0.3 and a.x.ndim >= 2:
            bs = self.bcast_shape(a.shape[:-2])[-2:] + (K, N)
        else:
            bs = (K, N)
        b = self.pick("f", True if allconst else None, lambda t: t.x.ndim >= 1 and (
            t.shape[0] == K if t.x.ndim == 1 else t.shape[-2] == K and _bcastable(t.shape[:-2], a.shape[:-2])))
        if b is None or self.chance(0.5):
            b = self.const(self.rand_vals(bs, -1, 1))
        if a.x.ndim == 1 and b.x.ndim == 1:
            raise Reject("1-d @ 1-d")
        if self.chance(0.2) and a.x.ndim >= 2:
            # a weight on the left: [M, rows of a] @ a
            w = self.const(self.rand_vals((int(self.rng.integers(1, 6)), a.shape[-2]), -1, 1))
            return self.add("MatMul", [w, a])
        return self.add("MatMul", [a, b])

    def g_gemm(self, allconst):
        a = self.pick("f", True if allconst else None, lambda t: t.x.ndim == 2)
        if a is None:
            s = self.rand_shape(2, 1, 7)
            a = self.const(self.rand_vals(s)) if allconst else self.new_input(s)
        ta, tb = int(self.chance(0.4)), int(self.chance(0.5))
        M, K = (a.shape[1], a.shape[0]) if ta else a.shape
        N = int(self.rng.integers(1, 8)) if self.chance(0.7) else int(self.choice([8, 16, 17, 33]))
        b = self.pick("f", True if allconst else None, lambda t: t.shape == ((N, K) if tb else (K, N)) and t is not a)
        if b is None or self.chance(0.6):
            b = self.const(self.rand_vals((N, K) if tb else (K, N), -1, 1))
        attrs = {}
        if ta:
            attrs["transA"] = 1
        if tb:
            attrs["transB"] = 1
        if self.chance(0.5):
            attrs["alpha"] = float(self.choice([0.5, -1.5, 2.0]))
        ins = [a, b]
        if self.chance(0.7):
            cs = self.choice([(M, N), (N,), (1, N), (M, 1), ()])
            ins.append(self.const(self.rand_vals(cs)))
            if self.chance(0.5):
                attrs["beta"] = float(self.choice([0.5, -1.0, 3.0]))
        return self.add("Gemm", ins, **attrs)

    def g_reduce(self, allconst):
        op = self.choice(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean",
                          "ReduceL2", "ReduceSumSquare"])
        a = self.operand(allconst)
        r = a.x.ndim
        k = int(self.rng.integers(1, r + 1))
        axes = sorted(self.rng.choice(r, size=k, replace=False).tolist())
        axes = [x - r if self.chance(0.3) else x for x in axes]
        attrs = {}
        if self.chance(0.5):
            attrs["keepdims"] = int(self.chance(0.5))
        if op == "ReduceSum":
            if self.chance(0.15):
                return self.add(op, [a], **attrs)
            return self.add(op, [a, self.ints(axes)], **attrs)
        if not self.chance(0.15):
            attrs["axes"] = axes
        return self.add(op, [a], **attrs)

    def g_softmax(self, allconst):
        a = self.operand(allconst, pred=lambda t: t.x.max() - t.x.min() < 30)
        r = a.x.ndim
        attrs = {} if self.chance(0.2) else {"axis": int(self.rng.integers(-r, r))}
        if self.opset < 13 and not attrs and r < 2:
            attrs["axis"] = 0   # opset 12's default axis 1 is out of range at rank 1
        return self.add(self.choice(["Softmax", "LogSoftmax"]), [a], **attrs)

    def g_reshape(self, allconst):
        a = self.operand(allconst)
        n = a.x.size
        dims = []
        while n > 1 and len(dims) < 4:
            ds = [d for d in range(2, n + 1) if n % d == 0]
            d = self.choice(ds[:4] + [n])
            dims.append(d)
            n //= d
        if self.chance(0.3):
            dims.insert(int(self.rng.integers(0, len(dims) + 1)), 1)
        if not dims:
            dims = [1]
        dims = [int(d) for d in self.rng.permutation(dims)]
        spec = list(dims)
        if self.chance(0.4):
            spec[int(self.rng.integers(len(spec)))] = -1
        for k in range(min(len(spec), a.x.ndim)):
            if spec[k] == a.shape[k] and self.chance(0.3):
                spec[k] = 0
        return self.add("Reshape", [a, self.ints(spec)])

    def g_transpose(self, allconst):
        a = self.operand(allconst, pred=lambda t: t.x.ndim >= 2)
        if self.chance(0.15):
            return self.add("Transpose", [a])
        return self.add("Transpose", [a], perm=[int(p) for p in self.rng.permutation(a.x.ndim)])

    def g_concat(self, allconst):
        a = self.operand(allconst)
        r = a.x.ndim
        ax = int(self.rng.integers(-r, r))
        parts = [a]
        for _ in range(int(self.rng.integers(1, 3))):
            s = list(a.shape)
            s[ax] = int(self.rng.integers(1, 4))
            c = self.pick("f", True if allconst else None,
                          lambda t: t.x.ndim == r and all(t.shape[k] == a.shape[k] for k in range(r) if k != ax % r))
            parts.append(c if c is not None and self.chance(0.5) else self.const(self.rand_vals(tuple(s))))
        self.rng.shuffle(parts)
        return self.add("Concat", parts, axis=ax)

    def g_slice(self, allconst):
        a = self.operand(allconst)
        r = a.x.ndim
        k = int(self.rng.integers(1, r + 1))
        axes = self.rng.choice(r, size=k, replace=False).tolist()
        st, en, sp = [], [], []
        for ax in axes:
            d = a.shape[ax]
            step = self.choice([1, 1, 2, -1, -2]) if d > 1 else 1
            s0 = int(self.rng.integers(0, d))
            if step > 0:
                e0 = int(self.rng.integers(s0 + 1, d + 1))
                e = self.choice([e0, e0 - d if e0 < d else 2 ** 62]) if self.chance(0.4) else e0
            else:
                e0 = int(self.rng.integers(-1, s0))
                e = -(2 ** 62) if e0 == -1 else (e0 - d if self.chance(0.4) else e0)
            s = s0 - d if self.chance(0.3) else s0
            st.append(s)
            en.append(e)
            sp.append(step)
        axes = [x - r if self.chance(0.3) else x for x in axes]
        ins = [a, self.ints(st), self.ints(en)]
        if self.chance(0.8) or any(s != 1 for s in sp):
            ins.append(self.ints(axes))
            if self.chance(0.5) or any(s != 1 for s in sp):
                ins.append(self.ints(sp))
        else:
            ins[1] = self.ints(st[:1] if axes[0] % r == 0 else [0])
            ins[2] = self.ints(en[:1] if axes[0] % r == 0 else [2 ** 62])
        return self.add("Slice", ins)

    def g_gather(self, allconst):
        a = self.operand(allconst)
        r = a.x.ndim
        ax = int(self.rng.integers(-r, r))
        d = a.shape[ax]
        ishape = self.choice([(), (int(self.rng.integers(1, 4)),), (2, 2), (1,)])
        idx = self.rng.integers(-d, d, size=ishape).astype(np.int64)
        # indices known at import, or (a run-time input) read at run time
        it = self.new_input(ishape, idx) if not allconst and self.chance(0.3) else self.const(idx, pool=False)
        return self.add("Gather", [a, it], **({"axis": ax} if ax or self.chance(0.5) else {}))

    def g_gather_err(self, allconst):
        """A Gather of indices read at run time, one of which the feeds will make out of
        range (bad_feed): nestc must fail with an error, interpreted and compiled."""
        a = self.operand(False)
        r = a.x.ndim
        ax = int(self.rng.integers(-r, r))
        d = a.shape[ax]
        ishape = self.choice([(int(self.rng.integers(1, 4)),), (2, 2), ()])
        idx = self.rng.integers(-d, d, size=ishape).astype(np.int64)
        it = self.new_input(ishape, idx)
        y = self.add("Gather", [a, it], axis=ax)
        bad = idx.copy()
        flat = bad.reshape(-1)
        flat[int(self.rng.integers(flat.size))] = self.choice([d, d + 3, -d - 1, -d - 5])
        self.bad_feed = (it.name, bad.reshape(ishape), d)
        self.solo = True
        self.errout = y
        return y

    def g_shapecalc(self, allconst):
        """Shapes computed in the graph as exporters write them (Shape, Gather, Unsqueeze,
        Concat, ConstantOfShape, Range, Size): known at import, folded."""
        a = self.operand(allconst)
        r = a.x.ndim
        k = self.rng.random()
        if k < 0.35:
            # Reshape(a, Concat(Unsqueeze(Gather(Shape(a), i)), [-1])): keep the first dims
            sh = self.add("Shape", [a]) if self.chance(0.7) else self.add("Shape", [a], start=0, end=int(self.rng.integers(1, r + 1)))
            keep = int(self.rng.integers(0, min(r, sh.x.size)))
            parts = []
            for i in range(keep):
                g = self.add("Gather", [sh, self.const(np.array(i, np.int64), pool=False)])
                parts.append(self.add("Unsqueeze", [g, self.ints([0])]))
            parts.append(self.ints([-1]))
            shp = self.add("Concat", parts, axis=0) if len(parts) > 1 else parts[0]
            return self.add("Reshape", [a, shp])
        if k < 0.55:
            v = NH.from_array(np.array([self.rng.uniform(-2, 2)], np.float32), "v")
            c = self.add("ConstantOfShape", [self.add("Shape", [a])], value=v)
            return self.add(self.choice(["Add", "Mul", "Max"]), [a, c])
        if k < 0.8:
            # a reversal along an axis: Gather(a, Range(d - 1, -1, -1)), d from the shape
            ax = int(self.rng.integers(0, r))
            d = self.add("Gather", [self.add("Shape", [a]), self.const(np.array(ax, np.int64), pool=False)])
            one = self.const(np.array(1, np.int64), pool=False)
            st = self.add("Sub", [d, one])
            rg = self.add("Range", [st, self.const(np.array(-1, np.int64), pool=False),
                                    self.const(np.array(-1, np.int64), pool=False)])
            return self.add("Gather", [a, rg], axis=ax)
        n = self.add("Cast", [self.add("Size", [a])], to=TP.FLOAT)
        return self.add("Div", [a, n])

    def g_more(self, allconst):
        """Einsum, Trilu, ArgMax / ArgMin, PRelu, Sign, Mod, GatherElements."""
        k = self.rng.random()
        if k < 0.2:
            a = self.operand(allconst, pred=lambda t: t.x.ndim in (2, 3))
            if a.x.ndim == 2:
                b = self.const(self.rand_vals((a.shape[1], int(self.rng.integers(1, 6))), -1, 1))
                eq = self.choice(["ij,jk->ik", "ij,jk->ki", "ij,jk->i"])
                return self.add("Einsum", [a, b], equation=eq)
            return self.add("Einsum", [a], equation=self.choice(["bij->bji", "bij->b", "bij->ij"]))
        if k < 0.35:
            a = self.operand(allconst, pred=lambda t: t.x.ndim >= 2)
            ins = [a] + ([self.const(np.array(int(self.rng.integers(-2, 3)), np.int64), pool=False)] if self.chance(0.6) else [])
            return self.add("Trilu", ins, **({"upper": 0} if self.chance(0.5) else {}))
        if k < 0.55:
            a = self.operand(allconst)
            r = a.x.ndim
            ax = int(self.rng.integers(-r, r))
            srt = np.sort(a.x, axis=ax)
            if a.shape[ax] > 1 and (np.abs(np.take(srt, -1, axis=ax) - np.take(srt, -2, axis=ax)) < 1e-3).any() or \
                    a.shape[ax] > 1 and (np.abs(np.take(srt, 0, axis=ax) - np.take(srt, 1, axis=ax)) < 1e-3).any():
                raise Reject("near ties")
            attrs = {"axis": ax}
            if self.chance(0.5):
                attrs["keepdims"] = 0
            i = self.add(self.choice(["ArgMax", "ArgMin"]), [a], **attrs)
            return self.add("Cast", [i], to=TP.FLOAT)
        if k < 0.65:
            a = self.operand(allconst)
            # a slope that broadcasts to a's shape (one way only)
            ss = [1 if self.chance(0.4) else d for d in a.shape][int(self.rng.integers(0, a.x.ndim)):]
            sl = self.const(self.rand_vals(tuple(ss), -1, 1))
            return self.add("PRelu", [a, sl])
        if k < 0.75:
            a = self.operand(allconst, pred=lambda t: (np.abs(t.x) > 1e-3).all())
            return self.add("Sign", [a])
        if k < 0.85:
            a = self.operand(allconst)
            b = self.const(self.rng.uniform(0.5, 2, size=self.bcast_shape(a.shape)).astype(np.float32) * self.choice([1, -1]))
            q = np.abs(a.x / np.broadcast_to(b.x, np.broadcast_shapes(a.shape, b.shape)))
            if (np.abs(q - np.round(q)) < 1e-3 * (1 + q)).any():
                raise Reject("near a multiple")
            return self.add("Mod", [a, b], fmod=1)
        a = self.operand(allconst)
        r = a.x.ndim
        ax = int(self.rng.integers(-r, r))
        ish = list(a.shape)
        ish[ax] = int(self.rng.integers(1, 4))
        d = a.shape[ax]
        idx = self.rng.integers(-d, d, size=ish).astype(np.int64)
        return self.add("GatherElements", [a, self.const(idx, pool=False)], axis=ax)

    def g_squeeze(self, allconst):
        a = self.operand(allconst)
        r = a.x.ndim
        ones = [k for k in range(r) if a.shape[k] == 1]
        if ones and self.chance(0.6) and r > 1:
            k = int(self.rng.integers(1, len(ones) + 1))
            ax = sorted(self.rng.choice(ones, size=k, replace=False).tolist())
            if len(ax) == r:
                ax = ax[:-1]
            if not ax:
                raise Reject("nothing to squeeze")
            ax = [x - r if self.chance(0.3) else x for x in ax]
            return self.add("Squeeze", [a, self.ints(ax)])
        if r >= 4:
            raise Reject("rank")
        n = int(self.rng.integers(1, 3))
        ax = sorted(self.rng.choice(r + n, size=n, replace=False).tolist())
        ax = [x - (r + n) if self.chance(0.3) else x for x in ax]
        return self.add("Unsqueeze", [a, self.ints(ax)])

    def g_expand(self, allconst):
        a = self.operand(allconst, pred=lambda t: 1 in t.shape or t.x.ndim < 3)
        s = [int(self.rng.integers(2, 4)) if d == 1 else (d if self.chance(0.7) else 1) for d in a.shape]
        if len(s) < 4 and self.chance(0.4):
            s = [int(self.rng.integers(1, 4))] + s
        if len(s) > 1 and self.chance(0.2):
            s = s[1:]
        return self.add("Expand", [a, self.ints(s)])

    def image(self, allconst):
        a = self.pick("f", True if allconst else None, lambda t: t.x.ndim == 4 and t.shape[2] >= 2 and t.shape[3] >= 2)
        if a is None or self.chance(0.3):
            s = (int(self.rng.integers(1, 3)), int(self.rng.integers(1, 5)), int(self.rng.integers(3, 9)),
                 int(self.rng.integers(3, 9)))
            if self.chance(0.15):
                # channels in 16s: the kernels with output channels in the lanes, Winograd
                s = (1, 16, int(self.rng.integers(5, 10)), int(self.rng.integers(5, 10)))
            a = self.const(self.rand_vals(s)) if allconst else self.new_input(s)
        return a

    def conv(self, a):
        N, C, Hh, W = a.shape
        g = self.choice([d for d in range(1, C + 1) if C % d == 0]) if self.chance(0.3) else 1
        M = g * int(self.rng.integers(1, 4))
        kh, kw = int(self.rng.integers(1, 4)), int(self.rng.integers(1, 4))
        attrs = {}
        wide = C % 16 == 0 and self.chance(0.7)
        if wide:
            g, M, kh, kw = 1, int(self.choice([48, 64])), 3, 3
        dil = [int(self.choice([1, 1, 2])), int(self.choice([1, 1, 2]))] if not wide else [1, 1]
        if dil != [1, 1]:
            attrs["dilations"] = dil
        st = [int(self.choice([1, 1, 2])), int(self.choice([1, 1, 2, 3]))] if not wide or self.chance(0.2) else [1, 1]
        if st != [1, 1]:
            attrs["strides"] = st
        if self.chance(0.7):
            attrs["pads"] = [int(self.rng.integers(0, kh)), int(self.rng.integers(0, kw)),
                             int(self.rng.integers(0, kh)), int(self.rng.integers(0, kw))]
            if wide and self.chance(0.5):
                attrs["pads"] = [1, 1, 1, 1]
        if g > 1:
            attrs["group"] = g
        if self.chance(0.5):
            attrs["kernel_shape"] = [kh, kw]
        if self.chance(0.15):
            attrs.pop("pads", None)
            attrs["auto_pad"] = self.choice(["SAME_UPPER", "SAME_LOWER", "VALID"])
            if attrs["auto_pad"] != "VALID":
                attrs.pop("dilations", None)
        wv = self.rand_vals((M, C // g, kh, kw), -1, 1)
        w = self.new_input(wv.shape, wv) if self.chance(0.1) else self.const(wv, pool=False)
        if w in self.pool:
            self.pool.remove(w)
        ins = [a, w] + ([self.const(self.rand_vals((M,)), pool=False)] if self.chance(0.6) else [])
        return self.add("Conv", ins, **attrs)

    def pool_op(self, a, kind=None):
        kind = kind or self.choice(["MaxPool", "AveragePool", "MaxPool"])
        if self.chance(0.1):
            attrs = {"kernel_shape": [int(self.rng.integers(1, 4)), int(self.rng.integers(1, 4))],
                     "auto_pad": self.choice(["SAME_UPPER", "SAME_LOWER", "VALID"])}
            if self.chance(0.5):
                attrs["strides"] = [int(self.rng.integers(1, 3)), int(self.rng.integers(1, 3))]
            return self.add(kind, [a], **attrs)
        kh, kw = int(self.rng.integers(1, 4)), int(self.rng.integers(1, 4))
        if kh * kw == 1:
            kw = 2
        attrs = {"kernel_shape": [kh, kw]}
        st = [int(self.choice([1, 2, 2])), int(self.choice([1, 2, 3]))]
        if st != [1, 1] or self.chance(0.3):
            attrs["strides"] = st
        if self.chance(0.7):
            # asymmetric, and differing between height and width
            attrs["pads"] = self.choice([[1, 0, 1, 0], [0, 1, 0, 1], [int(self.rng.integers(0, kh)), int(self.rng.integers(0, kw)),
                                                                        int(self.rng.integers(0, kh)), int(self.rng.integers(0, kw))]])
            p = attrs["pads"]
            if p[0] >= kh or p[2] >= kh or p[1] >= kw or p[3] >= kw:
                raise Reject("pad >= kernel")
        if kind == "MaxPool" and self.chance(0.15):
            attrs["dilations"] = [1, 2]
        if self.chance(0.25):
            # only where ONNX's formula (ceil, onnx 1.12's shape inference) and PyTorch's
            # (a last window must start inside the input or its left pad) agree
            p = attrs.get("pads", [0, 0, 0, 0])
            s = attrs.get("strides", [1, 1])
            dl = attrs.get("dilations", [1, 1])
            same = True
            for d, k in enumerate((kh, kw)):
                span = a.shape[2 + d] + p[d] + p[d + 2] - ((k - 1) * dl[d] + 1)
                same &= span >= 0 and R._pool_geometry(a.shape[2 + d], k, s[d], dl[d], p[d], p[d + 2], 1) == -(-span // s[d]) + 1
            if same:
                attrs["ceil_mode"] = 1
        if kind == "AveragePool" and self.chance(0.5):
            attrs["count_include_pad"] = 1
        return self.add(kind, [a], **attrs)

    def g_image(self, allconst):
        a = self.image(allconst)
        if self.chance(0.15):
            return self.g_1d(a)
        r = self.rng.random()
        if r < 0.45:
            h = self.conv(a)
            if self.chance(0.4):
                h = self.add("Relu", [h])
            if self.chance(0.5) and h.shape[2] >= 1:
                h = self.pool_op(h, "MaxPool" if self.chance(0.7) else None)
            return h
        if r < 0.8:
            return self.pool_op(a)
        if r < 0.9:
            return self.add(self.choice(["GlobalAveragePool", "GlobalMaxPool"]), [a])
        return self.batchnorm(a)

    def g_bigconv(self, allconst):
        """A convolution and the pooling that reads it on a 64x64 image: big enough for
        nestc to compute them together in several bands of rows (codegen/conv.c's
        k_conv2d_pool), with paddings that differ between height and width."""
        self.max_elems = 70000
        try:
            C, O = int(self.choice([8, 16])), int(self.choice([16, 32]))
            a = self.new_input((1, C, 64, int(self.choice([64, 48, 61]))))
            k = int(self.choice([3, 3, 1, 5]))
            attrs = {"pads": [k // 2] * 4} if k > 1 else {}
            ins = [a, self.const(self.rand_vals((O, C, k, k), -0.5, 0.5), pool=False)]
            if self.chance(0.5):
                ins.append(self.const(self.rand_vals((O,)), pool=False))
            h = self.add("Conv", ins, **attrs)
            self.private.add(h.name)
            if self.chance(0.5):
                h = self.add("Relu", [h])
                self.private.add(h.name)
            kind = self.choice(["MaxPool", "MaxPool", "AveragePool"])
            # 3x3 of stride 2 (ResNet's stem) half the time
            if self.chance(0.6):
                pk, st = [3, 3], [2, 2]
            else:
                pk, st = self.choice([[3, 3], [2, 2], [3, 2], [2, 3]]), self.choice([[2, 2], [1, 1], [2, 1]])
            pa = {"kernel_shape": pk, "strides": st}
            pads = self.choice([[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0], [1, 1, 1, 1], None])
            if pads and all(p < q for p, q in zip(pads, pk + pk)):
                pa["pads"] = pads
            if kind == "AveragePool" and self.chance(0.5):
                pa["count_include_pad"] = 1
            y = self.add(kind, [h], **pa)
            self.pool.remove(y)     # too big to go on
            self.bigout = y
            return y
        finally:
            self.max_elems = MAX_ELEMS

    def g_1d(self, a):
        """A 1-d convolution or pooling: [N, C, W], from a's last row."""
        x = self.add("Reshape", [a, self.ints([a.shape[0], a.shape[1], -1])])
        if self.chance(0.6):
            C = x.shape[1]
            k = int(self.rng.integers(1, 4))
            attrs = {}
            if self.chance(0.6):
                attrs["pads"] = [int(self.rng.integers(0, k)), int(self.rng.integers(0, k))]
            if self.chance(0.4):
                attrs["strides"] = [int(self.rng.integers(1, 3))]
            if self.chance(0.3):
                attrs["dilations"] = [2]
            w = self.const(self.rand_vals((int(self.rng.integers(1, 4)), C, k), -1, 1), pool=False)
            return self.add("Conv", [x, w], **attrs)
        k = int(self.rng.integers(2, 4))
        attrs = {"kernel_shape": [k]}
        if self.chance(0.6):
            attrs["pads"] = [int(self.rng.integers(0, k)), int(self.rng.integers(0, k))]
        if self.chance(0.5):
            attrs["strides"] = [int(self.rng.integers(1, 3))]
        return self.add(self.choice(["MaxPool", "AveragePool"]), [x], **attrs)

    def g_pad(self, allconst):
        a = self.operand(allconst, pred=lambda t: t.x.ndim <= 4)
        r = a.x.ndim
        mode = self.choice(["constant", "constant", "reflect", "edge"])
        pads = [int(self.rng.integers(0, 3)) for _ in range(2 * r)]
        if mode == "reflect":
            pads = [min(p, a.shape[k % r] - 1) for k, p in enumerate(pads)]
        ins = [a, self.ints(pads)]
        if mode == "constant" and self.chance(0.5):
            ins.append(self.const(np.float32(self.rng.uniform(-2, 2)), pool=False))
        return self.add("Pad", ins, **({"mode": mode} if mode != "constant" or self.chance(0.3) else {}))

    def g_split(self, allconst):
        a = self.operand(allconst, pred=lambda t: max(t.shape) >= 2)
        r = a.x.ndim
        ax = self.choice([k for k in range(r) if a.shape[k] >= 2])
        d = a.shape[ax]
        n = int(self.rng.integers(2, min(d, 3) + 1))
        if d % n == 0 and self.chance(0.4):
            outs = self.add("Split", [a], nout=n, axis=ax - r if self.chance(0.3) else ax)
        else:
            cuts = sorted(self.rng.choice(np.arange(1, d), size=n - 1, replace=False).tolist())
            sizes = np.diff([0] + cuts + [d]).tolist()
            outs = self.add("Split", [a, self.ints(sizes)], nout=n, axis=ax)
        # one of the parts goes on
        self.private.update(t.name for t in outs)
        return self.choice(outs)

    def g_cumsum(self, allconst):
        a = self.operand(allconst)
        r = a.x.ndim
        attrs = {}
        if self.chance(0.4):
            attrs["exclusive"] = 1
        if self.chance(0.4):
            attrs["reverse"] = 1
        ax = self.const(np.array(int(self.rng.integers(-r, r)), np.int64 if self.chance(0.7) else np.int32), pool=False)
        return self.add("CumSum", [a, ax], **attrs)

    def batchnorm(self, a):
        C = a.shape[1]
        sc = self.const(self.rand_vals((C,), 0.5, 1.5), pool=False)
        b = self.const(self.rand_vals((C,)), pool=False)
        mu = self.const(self.rand_vals((C,), -1, 1), pool=False)
        var = self.const(self.rand_vals((C,), 0.3, 2), pool=False)
        attrs = {"epsilon": 1e-3} if self.chance(0.5) else {}
        return self.add("BatchNormalization", [a, sc, b, mu, var], **attrs)

    def g_norm(self, allconst):
        a = self.operand(allconst, pred=lambda t: t.x.ndim >= 2 or t.x.size >= 2)
        if a.x.ndim >= 2 and self.chance(0.3):
            return self.batchnorm(a)
        if a.x.ndim >= 3 and self.chance(0.3):
            C = a.shape[1]
            if (a.x.reshape(a.shape[0], C, -1).std(axis=-1) < 0.05).any():
                raise Reject("flat planes")
            return self.add("InstanceNormalization", [a, self.const(self.rand_vals((C,), 0.5, 1.5), pool=False),
                                                      self.const(self.rand_vals((C,)), pool=False)])
        r = a.x.ndim
        ax = int(self.rng.integers(-r, r)) if self.chance(0.6) else -1
        ns = a.shape[ax % r:]
        if int(np.prod(ns)) < 2:
            raise Reject("one element normalized")
        # well away from a constant row: the normalization divides by its spread
        xa = a.x.reshape(a.x.shape[:ax % r] + (-1,))
        if (xa.std(axis=-1) < 0.05).any():
            raise Reject("flat rows")
        ins = [a, self.const(self.rand_vals(ns, 0.5, 1.5), pool=False)]
        if self.chance(0.7):
            ins.append(self.const(self.rand_vals(ns), pool=False))
        attrs = {"axis": ax} if ax != -1 or self.chance(0.5) else {}
        if self.chance(0.4):
            attrs["epsilon"] = 1e-3
        return self.add("LayerNormalization", ins, **attrs)

    def g_cast(self, allconst):
        r = self.rng.random()
        if r < 0.5:
            # to an integer: truncation, away from the edges; then integer arithmetic and back
            a = self.operand(allconst, pred=lambda t: (np.abs(t.x - np.round(t.x)) > 1e-3 * (1 + np.abs(t.x))).all()
                             and np.abs(t.x).max() < 1000)
            to = self.choice([TP.INT32, TP.INT64])
            c = self.add("Cast", [a], to=to)
            if self.chance(0.6):
                op = self.choice(["Add", "Sub", "Mul", "Max", "Div", "Equal", "Less"])
                bv = self.rng.integers(1, 4, size=self.bcast_shape(c.shape)) * self.choice([1, -1])
                b = self.const(bv.astype(c.x.dtype), pool=False)
                c = self.add(op, [c, b])
                if c.kind == "b":
                    return self.g_where(allconst, c)
            return self.add("Cast", [c], to=TP.FLOAT)
        if r < 0.7:
            a = self.operand(allconst)
            return self.add("Cast", [a], to=TP.FLOAT)
        a = self.pick("i", True if allconst else None)
        if a is None:
            raise Reject("no integer value")
        return self.add("Cast", [a], to=TP.FLOAT)

    def g_misc(self, allconst):
        a = self.operand(allconst)
        r = self.rng.random()
        if r < 0.4 and a.x.ndim >= 1:
            ax = int(self.rng.integers(-a.x.ndim, a.x.ndim + 1))
            return self.add("Flatten", [a], **({"axis": ax} if ax != 1 or self.chance(0.5) else {}))
        if r < 0.7:
            reps = [int(self.choice([1, 1, 2, 3])) for _ in a.shape]
            return self.add("Tile", [a, self.ints(reps)])
        return self.add("Identity", [a])

    def g_attention(self, allconst):
        """Q K^T scaled, masked and softmaxed, times V: the pattern nestc fuses."""
        T_, D = int(self.rng.integers(2, 9)), int(self.choice([2, 4, 8]))
        heads = self.chance(0.5)
        shp = (2, T_, D) if heads else (T_, D)
        q = self.operand(allconst, pred=lambda t: t.shape == shp, shape=shp)
        wk = self.const(self.rand_vals((D, D), -0.7, 0.7), pool=False)
        wv = self.const(self.rand_vals((D, D), -0.7, 0.7), pool=False)
        k = self.add("MatMul", [q, wk])
        v = self.add("MatMul", [q, wv])
        kt = self.add("Transpose", [k], perm=[0, 2, 1] if heads else [1, 0])
        s_ = self.add("MatMul", [q, kt])
        s_ = self.add(self.choice(["Mul", "Div"]), [s_, self.const(np.float32(self.choice([0.5, 2.0, 1 / np.sqrt(D)])), pool=False)])
        if self.chance(0.6):
            mask = np.triu(np.full((T_, T_), -1e4 if self.chance(0.5) else -np.float32(30), np.float32), 1)
            s_ = self.add("Add", [s_, self.const(mask, pool=False)])
        p = self.add("Softmax", [s_], axis=-1)
        return self.add("MatMul", [p, v])

    def g_pattern(self, allconst):
        """LayerNormalization and GELU as exporters before opset 17 write them, which
        nestc's import recognizes (patterns.c)."""
        a = self.operand(allconst, pred=lambda t: t.x.ndim >= 1 and t.shape[-1] >= 2 and (t.x.std(axis=-1) > 0.1).all())
        C = lambda v: self.const(np.float32(v), pool=False)
        r = self.rng.random()
        if r < 0.4:
            D = a.shape[-1]
            m = self.add("ReduceMean", [a], axes=[-1])
            d = self.add("Sub", [a, m])
            p = self.add("Pow", [d, C(2.0)]) if self.chance(0.7) else self.add("Mul", [d, d])
            v = self.add("ReduceMean", [p], axes=[-1])
            e = self.add("Add", [v, C(1e-5)])
            s_ = self.add("Sqrt", [e])
            q = self.add("Div", [d, s_])
            if self.chance(0.8):
                q = self.add("Mul", [q, self.const(self.rand_vals((D,), 0.5, 1.5), pool=False)])
                q = self.add("Add", [q, self.const(self.rand_vals((D,)), pool=False)])
            return q
        x = a
        if r < 0.7:   # exact: x * 0.5 * (1 + erf(x / sqrt 2)), in an exporter's order
            e = self.add("Div", [x, C(1.4142135381698608)]) if self.chance(0.5) else \
                self.add("Mul", [x, C(0.7071067690849304)])
            e = self.add("Erf", [e])
            e = self.add("Add", [e, C(1.0)])
            if self.chance(0.5):
                h = self.add("Mul", [x, e])
                return self.add("Mul", [h, C(0.5)])
            h = self.add("Mul", [x, C(0.5)])
            return self.add("Mul", [h, e])
        # tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        c = self.add("Pow", [x, C(3.0)]) if self.chance(0.5) else self.add("Mul", [self.add("Mul", [x, x]), x])
        c = self.add("Mul", [c, C(0.044715)])
        c = self.add("Add", [x, c])
        c = self.add("Mul", [c, C(0.7978845608028654)])
        c = self.add("Tanh", [c])
        c = self.add("Add", [c, C(1.0)])
        c = self.add("Mul", [x, c])
        return self.add("Mul", [c, C(0.5)])

    def g_layers(self, allconst):
        """The same block L times with its own weights named as exporters name them
        (layers.K.fc.weight): nestc outlines it as one region, the params as arrays."""
        D = int(self.rng.integers(2, 9))
        x = self.pick("f", False, lambda t: t.x.ndim == 2 and t.shape[1] == D and t.name in dict(self.inputs))
        if x is None:
            x = self.new_input((int(self.rng.integers(1, 5)), D))
        L = int(self.rng.integers(3, 6)) if not self.pool else int(self.rng.integers(2, 5))
        self.solo = True    # alone in its model: other graphs' values would cross its cuts
        act = self.choice(["Relu", "Tanh", "Sigmoid"])
        ln = self.chance(0.4)
        base = "%sblk%d.layers" % (self.p.replace("_", "."), self.n)
        for k in range(L):
            pre = "%s.%d." % (base, k)
            h = x
            if ln:
                h = self.add("LayerNormalization", [h, self.named(pre + "ln.weight", self.rand_vals((D,), 0.5, 1.5)),
                                                    self.named(pre + "ln.bias", self.rand_vals((D,)))])
            h = self.add("MatMul", [h, self.named(pre + "fc.weight", self.rand_vals((D, D), -0.6, 0.6))])
            h = self.add("Add", [h, self.named(pre + "fc.bias", self.rand_vals((D,), -0.3, 0.3))])
            h = self.add(act, [h])
            self.private.update(t.name for t in self.pool[-4 - ln:])
            x = self.add("Add", [x, h])
        return x

    def named(self, name, a):
        self.inits.append(NH.from_array(a, name))
        return T(name, {m: a.astype(np.float64) for m in MODES}, True)

    FAMILIES = [("g_shapecalc", 3), ("g_more", 4), ("g_pad", 2), ("g_split", 2), ("g_cumsum", 1), ("g_attention", 2), ("g_pattern", 3), ("g_layers", 2), ("g_binary", 14), ("g_unary", 10), ("g_compare", 5), ("g_where", 2), ("g_matmul", 6),
                ("g_gemm", 4), ("g_reduce", 6), ("g_softmax", 3), ("g_reshape", 4), ("g_transpose", 4),
                ("g_concat", 4), ("g_slice", 4), ("g_gather", 3), ("g_squeeze", 3), ("g_expand", 3),
                ("g_image", 8), ("g_norm", 4), ("g_cast", 4), ("g_misc", 2)]

    def attempt(self, fam, allconst):
        """1 if the family made its nodes, else 0 with the graph as it was."""
        snap = (len(self.nodes), len(self.inits), len(self.inputs), len(self.pool), list(self.ops), set(self.private),
                self.bigout, self.errout, self.bad_feed, self.solo)
        try:
            getattr(self, fam)(allconst)
            return 1
        except Reject:
            self.nodes[snap[0]:] = []
            self.inits[snap[1]:] = []
            self.inputs[snap[2]:] = []
            self.pool[snap[3]:] = []
            self.ops, self.private = snap[4], snap[5]
            self.bigout, self.errout, self.bad_feed, self.solo = snap[6:]
            return 0

    def generate(self, nnodes, big=False, err=False, layers=False):
        """nnodes nodes besides Constants; the graph's outputs: its values no node reads,
        and a few others. big: first a convolution and pooling on a 64x64 image; err:
        first a Gather whose run-time index is out of range in bad_feed (the graph
        values are those of its valid indices)."""
        self.bigout = self.errout = self.bad_feed = None
        while big and self.bigout is None:
            self.attempt("g_bigconv", False)
        while err and self.errout is None:
            self.attempt("g_gather_err", False)
        if layers:
            # the repeated layers alone, from the graph's input: outlined as a region
            while not self.attempt("g_layers", False):
                pass
            nnodes = 0
        self.new_input(self.rand_shape())
        names, weights = zip(*self.FAMILIES)
        w = np.array(weights, np.float64) / sum(weights)
        made = tries = 0
        while made < nnodes and tries < nnodes * 30:
            tries += 1
            fam = names[int(self.rng.choice(len(names), p=w))]
            made += self.attempt(fam, self.chance(0.35))
        read = {i for n in self.nodes for i in n.input}
        made_by_node = {o for n in self.nodes if n.op_type != "Constant" for o in n.output}
        outs = [t for t in self.pool if t.name in made_by_node and t.name not in read]
        avoid = {o for n in self.nodes if n.op_type in AVOID_OUTPUT for o in n.output}
        others = [t for t in self.pool if t.name in made_by_node and t.name in read and t.name not in self.private
                  and t.name not in avoid]
        if others and self.chance(0.6):
            for k in self.rng.choice(len(others), size=min(2, len(others)), replace=False):
                outs.append(others[int(k)])
        if len(outs) > 8:
            outs = outs[-8:]
        if self.bigout is not None:
            outs.append(self.bigout)
        if self.errout is not None and self.errout not in outs:
            outs.append(self.errout)
        self.outputs = [t.name for t in outs]
        self.inputs = [(n, a) for n, a in self.inputs if n in read]
        self.vals = {t.name: t.x for t in self.pool + ([self.bigout] if self.bigout else [])}
        return self


def _bcastable(s, t):
    try:
        np.broadcast_shapes(s, t)
        return True
    except ValueError:
        return False


def value_info(name, a):
    return H.make_tensor_value_info(name, elem_type(a), list(a.shape))


def make_model(graphs, name="diff"):
    """One ONNX model of several generated graphs side by side (disjoint names), all of
    one opset."""
    opset = graphs[0].opset
    assert all(g.opset == opset for g in graphs)
    nodes, inits, ins, outs = [], [], [], []
    for g in graphs:
        nodes += g.nodes
        inits += g.inits
        ins += [value_info(n, a) for n, a in g.inputs]
        if g.inits_as_inputs:
            ins += [value_info(t.name, NH.to_array(t)) for t in g.inits]
        outs += [value_info(n, g.vals[n]) for n in g.outputs]
    gr = H.make_graph(nodes, name, ins, outs, initializer=inits)
    return H.make_model(gr, opset_imports=[H.make_opsetid("", opset)], producer_name="onnx_diff")
