"""A NumPy evaluation of ONNX graphs, written from the operator definitions of opset 17
(onnx.ai/onnx/operators), for the ops tests/diff/onnx_diff.py generates. It is the
oracle of that tester, so it shares nothing with nestc.

Floats are computed in float64. Three modes:
  "x"  exact: float64 throughout (the reference the tester compares against);
  "r"  every float result rounded to float32, as an f32 implementation rounds;
  "p"  every arithmetic result multiplied by 1 +- EPS (random signs): how sensitive
       the graph is to rounding anywhere.
The generator keeps a node only when "r" and "p" stay close to "x" (a well-conditioned
graph), so that nestc's float32 results can be held to a tight tolerance.

    run_model(model, feeds, mode="x", seed=0) -> {name: array} of every value
"""
import math

import numpy as np
from onnx import helper, numpy_helper

EPS = 1e-6
# ops that only move, select or compare values: exact in any precision, never perturbed
EXACT = {"Reshape", "Transpose", "Concat", "Slice", "Gather", "Squeeze", "Unsqueeze", "Expand",
         "Identity", "Flatten", "Max", "Min", "Relu", "Abs", "Neg", "Where", "MaxPool", "ReduceMax",
         "Constant", "Cast", "Floor", "Ceil", "Round", "Equal", "Less", "Greater", "LessOrEqual",
         "GreaterOrEqual", "And", "Or", "Not", "Clip", "Tile", "Shape", "Size", "ConstantOfShape", "Range",
         "Trilu", "ArgMax", "ArgMin", "Sign", "GatherElements", "Pad", "Split"}

TO_NP = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64}

_erf = np.vectorize(math.erf, otypes=[np.float64])


def attrs_of(node):
    a = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    a["_nout"] = len(node.output)
    return a


def is_float(a):
    return a.dtype.kind == "f"


def _pool_geometry(H, k, s, d, plo, phi, ceil):
    span = H + plo + phi - ((k - 1) * d + 1)
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= H + plo:
        out -= 1
    return out


def _windows(xp, kh, kw, sh, sw, dh, dw, oh, ow):
    """[.., oh, ow] views of xp for each kernel position (i, j)."""
    for i in range(kh):
        for j in range(kw):
            yield i, j, xp[..., i * dh: i * dh + (oh - 1) * sh + 1: sh, j * dw: j * dw + (ow - 1) * sw + 1: sw]


def auto_pads(a, shape, kernel, strides, dil):
    """Explicit pads [t, l, b, r] for auto_pad (SAME_UPPER puts the odd one at the end)."""
    ap = a.get("auto_pad", b"NOTSET")
    ap = ap.decode() if isinstance(ap, bytes) else ap
    if ap in ("NOTSET", ""):
        return a.get("pads", [0] * (2 * len(kernel)))
    if ap == "VALID":
        return [0] * (2 * len(kernel))
    lo, hi = [], []
    for n, k, s, d in zip(shape, kernel, strides, dil):
        out = -(-n // s)
        tot = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        small, big = tot // 2, tot - tot // 2
        lo.append(small if ap == "SAME_UPPER" else big)
        hi.append(big if ap == "SAME_UPPER" else small)
    return lo + hi


def as2d(f):
    """A 1-d conv or pool ([N, C, W]) as a 2-d one of height 1."""
    def g(x, *rest):
        a = rest[-1]
        if x.ndim == 4:
            return f(x, *rest)
        a = dict(a)
        for k, one in (("strides", 1), ("dilations", 1), ("kernel_shape", 1)):
            if k in a:
                a[k] = [one] + list(a[k])
        if "pads" in a:
            a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
        ws = [w.reshape(w.shape[:2] + (1,) + w.shape[2:]) if w is not None and w.ndim == 3 else w for w in rest[:-1]]
        return f(x[:, :, None, :], *ws, a)[:, :, 0, :]
    return g


@as2d
def conv(x, w, b, a):
    N, C, H, W = x.shape
    M, Cg, kh, kw = w.shape
    g = a.get("group", 1)
    sh, sw = a.get("strides", [1, 1])
    dh, dw = a.get("dilations", [1, 1])
    t, l, bo, r = auto_pads(a, (H, W), (kh, kw), (sh, sw), (dh, dw))
    oh = _pool_geometry(H, kh, sh, dh, t, bo, 0)
    ow = _pool_geometry(W, kw, sw, dw, l, r, 0)
    xp = np.zeros((N, C, H + t + bo, W + l + r))
    xp[:, :, t:t + H, l:l + W] = x
    y = np.zeros((N, M, oh, ow))
    Mg = M // g
    for gi in range(g):
        xs = xp[:, gi * Cg:(gi + 1) * Cg]
        ws = w[gi * Mg:(gi + 1) * Mg]
        for i, j, win in _windows(xs, kh, kw, sh, sw, dh, dw, oh, ow):
            # win [N, Cg, oh, ow], ws[:, :, i, j] [Mg, Cg]
            y[:, gi * Mg:(gi + 1) * Mg] += np.einsum("nchw,mc->nmhw", win, ws[:, :, i, j])
    if b is not None:
        y += b.reshape(1, M, 1, 1)
    return y


@as2d
def pool(x, a):
    kind = a["_kind"]
    N, C, H, W = x.shape
    kh, kw = a["kernel_shape"]
    sh, sw = a.get("strides", [1, 1])
    dh, dw = a.get("dilations", [1, 1])
    t, l, bo, r = auto_pads(a, (H, W), (kh, kw), (sh, sw), (dh, dw))
    ceil = a.get("ceil_mode", 0)
    oh = _pool_geometry(H, kh, sh, dh, t, bo, ceil)
    ow = _pool_geometry(W, kw, sw, dw, l, r, ceil)
    # room for windows that run past the padded input (ceil_mode)
    PH = max(H + t + bo, (oh - 1) * sh + (kh - 1) * dh + 1)
    PW = max(W + l + r, (ow - 1) * sw + (kw - 1) * dw + 1)
    fill = -np.inf if kind == "max" else 0.0
    xp = np.full((N, C, PH, PW), fill)
    xp[:, :, t:t + H, l:l + W] = x
    if kind == "max":
        y = np.full((N, C, oh, ow), -np.inf)
        for _, _, win in _windows(xp, kh, kw, sh, sw, dh, dw, oh, ow):
            y = np.maximum(y, win)
        return y
    # average: count_include_pad counts the explicit pads, never what lies past them
    cnt_mask = np.zeros((PH, PW))
    if a.get("count_include_pad", 0):
        cnt_mask[:H + t + bo, :W + l + r] = 1
    else:
        cnt_mask[t:t + H, l:l + W] = 1
    s = np.zeros((N, C, oh, ow))
    cnt = np.zeros((oh, ow))
    for _, _, win in _windows(xp, kh, kw, sh, sw, dh, dw, oh, ow):
        s += win
    for _, _, win in _windows(cnt_mask, kh, kw, sh, sw, dh, dw, oh, ow):
        cnt += win
    return s / cnt


def _axes(v, r):
    return sorted(int(k) % r for k in v)


def _reduce(fn, x, axes, keep):
    if axes is None or len(axes) == 0:
        axes = list(range(x.ndim))
    ax = tuple(_axes(axes, x.ndim)) if x.ndim else None
    return fn(x, axis=ax, keepdims=bool(keep))


def slice_(x, starts, ends, axes, steps):
    r = x.ndim
    axes = list(range(len(starts))) if axes is None else [int(k) % r for k in axes]
    steps = [1] * len(starts) if steps is None else steps
    sl = [slice(None)] * r
    for s, e, ax, st in zip(starts, ends, axes, steps):
        dim = x.shape[ax]
        s, e, st = int(s), int(e), int(st)
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
            sl[ax] = slice(s, e, st)
        else:
            s, e = min(max(s, -1), dim - 1), min(max(e, -1), dim - 1)
            # python's slice cannot say "stop before index 0" with -1: None does
            sl[ax] = slice(s if s >= 0 else 0, e if e >= 0 else None, st) if s >= 0 else slice(0, 0)
    return x[tuple(sl)]


def eval_node(op, a, ins):
    """The outputs of one node in float64 (or the integer / bool dtypes of ONNX)."""
    I = lambda k: ins[k] if k < len(ins) else None
    x = I(0)
    if op == "Constant":
        if "value" in a:
            return [numpy_helper.to_array(a["value"]).astype(np.float64) if a["value"].data_type == 1
                    else numpy_helper.to_array(a["value"])]
        if "value_float" in a:
            return [np.array(a["value_float"], np.float64)]
        if "value_floats" in a:
            return [np.array(a["value_floats"], np.float64)]
        if "value_int" in a:
            return [np.array(a["value_int"], np.int64)]
        return [np.array(a["value_ints"], np.int64)]
    bins = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Pow": np.power,
            "Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
            "GreaterOrEqual": np.greater_equal, "And": np.logical_and, "Or": np.logical_or}
    if op in bins:
        with np.errstate(all="ignore"):
            y = bins[op](x, I(1))
        if op == "Pow" and not is_float(x):
            y = y.astype(x.dtype)
        return [y]
    if op == "Div":
        if is_float(x):
            with np.errstate(all="ignore"):
                return [x / I(1)]
        b = np.broadcast_to(I(1), np.broadcast_shapes(x.shape, I(1).shape))
        q = np.trunc(x.astype(np.float64) / b)       # integer division truncates
        return [q.astype(x.dtype)]
    if op in ("Max", "Min", "Sum", "Mean"):
        f = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add, "Mean": np.add}[op]
        y = ins[0]
        for z in ins[1:]:
            y = f(y, z)
        return [y / len(ins) if op == "Mean" else y]
    un = {"Relu": lambda v: np.maximum(v, 0).astype(v.dtype), "Sigmoid": lambda v: 1 / (1 + np.exp(-v)),
          "Tanh": np.tanh, "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt, "Abs": np.abs, "Neg": np.negative,
          "Erf": _erf, "Reciprocal": lambda v: 1 / v, "Floor": np.floor, "Ceil": np.ceil,
          "Round": np.round, "Not": np.logical_not, "Identity": lambda v: v,
          "Softplus": lambda v: np.log(np.exp(v) + 1), "Sin": np.sin, "Cos": np.cos,
          "Softsign": lambda v: v / (1 + np.abs(v))}
    if op in un:
        with np.errstate(all="ignore"):
            return [un[op](x)]
    if op == "LeakyRelu":
        al = a.get("alpha", 0.01)
        return [np.where(x >= 0, x, x * al)]
    if op == "Elu":
        al = a.get("alpha", 1.0)
        with np.errstate(all="ignore"):
            return [np.where(x > 0, x, al * (np.exp(x) - 1))]
    if op == "HardSigmoid":
        return [np.maximum(0, np.minimum(1, a.get("alpha", 0.2) * x + a.get("beta", 0.5)))]
    if op == "Clip":
        y = x
        if I(1) is not None:
            y = np.maximum(y, I(1))
        if I(2) is not None:
            y = np.minimum(y, I(2))
        return [y]
    if op == "Where":
        return [np.where(x, I(1), I(2))]
    if op == "Cast":
        to = TO_NP[a["to"]]
        if np.dtype(to).kind in "iu" and is_float(x):
            return [np.trunc(x).astype(to)]
        if np.dtype(to).kind == "f":
            return [x.astype(np.float64)]
        return [x.astype(to)]
    if op == "MatMul":
        return [np.matmul(x, I(1))]
    if op == "Gemm":
        A = x.T if a.get("transA", 0) else x
        B = I(1).T if a.get("transB", 0) else I(1)
        y = a.get("alpha", 1.0) * (A @ B)
        if I(2) is not None:
            y = y + a.get("beta", 1.0) * I(2)
        return [y]
    if op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
              "ReduceL1", "ReduceL2", "ReduceLogSumExp"):
        axes = [int(v) for v in I(1)] if I(1) is not None else a.get("axes")
        keep = a.get("keepdims", 1)
        if op == "ReduceSum" and (axes is None or len(axes) == 0) and a.get("noop_with_empty_axes", 0):
            return [x]
        f = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max, "ReduceMin": np.min,
             "ReduceProd": np.prod}
        if op in f:
            return [_reduce(f[op], x, axes, keep)]
        if op == "ReduceSumSquare":
            return [_reduce(np.sum, x * x, axes, keep)]
        if op == "ReduceL1":
            return [_reduce(np.sum, np.abs(x), axes, keep)]
        if op == "ReduceL2":
            return [np.sqrt(_reduce(np.sum, x * x, axes, keep))]
        return [np.log(_reduce(np.sum, np.exp(x), axes, keep))]
    if op in ("Softmax", "LogSoftmax") and a.get("_opset", 17) < 13:
        # before opset 13: over the 2-d view [prod(shape[:axis]), prod(shape[axis:])]
        ax = a.get("axis", 1) % max(x.ndim, 1)
        x2 = x.reshape(int(np.prod(x.shape[:ax])), -1)
        return [eval_node(op, {"axis": 1}, [x2])[0].reshape(x.shape)]
    if op in ("Softmax", "LogSoftmax"):
        ax = a.get("axis", -1)
        m = x.max(axis=ax, keepdims=True)
        e = np.exp(x - m)
        s = e.sum(axis=ax, keepdims=True)
        return [e / s if op == "Softmax" else x - m - np.log(s)]
    if op == "Reshape":
        shape = [int(v) for v in I(1)]
        shape = [x.shape[k] if v == 0 and not a.get("allowzero", 0) else v for k, v in enumerate(shape)]
        return [x.reshape(shape)]
    if op == "Transpose":
        return [np.transpose(x, a.get("perm"))]
    if op == "Concat":
        return [np.concatenate(ins, axis=a["axis"])]
    if op == "Slice":
        return [slice_(x, I(1), I(2), I(3), I(4))]
    if op == "Gather":
        ax = a.get("axis", 0) % x.ndim
        idx = np.where(I(1) < 0, I(1) + x.shape[ax], I(1))
        return [np.take(x, idx, axis=ax)]
    if op in ("Squeeze", "Unsqueeze", "Split") and "axes" in a or "split" in a:
        ins = list(ins) + [np.array(a.get("axes", a.get("split")), np.int64)]   # opset 12's attributes
        I = lambda k: ins[k] if k < len(ins) else None
    if op == "Squeeze":
        axes = _axes(I(1), x.ndim) if I(1) is not None else [k for k, d in enumerate(x.shape) if d == 1]
        return [np.squeeze(x, axis=tuple(axes))]
    if op == "Unsqueeze":
        r = x.ndim + len(I(1))
        y = x
        for ax in _axes(I(1), r):
            y = np.expand_dims(y, ax)
        return [y]
    if op == "Expand":
        return [np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(int(v) for v in I(1)))).copy()]
    if op == "Flatten":
        ax = a.get("axis", 1)
        ax = ax + x.ndim if ax < 0 else ax
        return [x.reshape(int(np.prod(x.shape[:ax])), -1)]
    if op == "Tile":
        return [np.tile(x, [int(v) for v in I(1)])]
    if op == "Shape":
        r = x.ndim
        st, en = a.get("start", 0), a.get("end", r)
        st, en = (st + r if st < 0 else st), (en + r if en < 0 else en)
        st, en = min(max(st, 0), r), min(max(en, 0), r)
        return [np.array(x.shape[st:en], np.int64)]
    if op == "Size":
        return [np.array(x.size, np.int64)]
    if op == "ConstantOfShape":
        v = numpy_helper.to_array(a["value"]) if "value" in a else np.zeros(1, np.float32)
        y = np.full(tuple(int(d) for d in x), v.reshape(-1)[0])
        return [y.astype(np.float64) if v.dtype.kind == "f" else y]
    if op == "Range":
        st, lim, dl = x.reshape(()), I(1).reshape(()), I(2).reshape(())
        n = max(int(np.ceil((lim - st) / dl)), 0)
        return [(st + dl * np.arange(n)).astype(x.dtype)]
    if op == "Trilu":
        k = int(I(1).reshape(())) if I(1) is not None else 0
        return [np.triu(x, k) if a.get("upper", 1) else np.tril(x, k)]
    if op == "Einsum":
        eq = a["equation"]
        eq = eq.decode() if isinstance(eq, bytes) else eq
        return [np.einsum(eq, *ins)]
    if op in ("ArgMax", "ArgMin"):
        ax = a.get("axis", 0)
        f = np.argmax if op == "ArgMax" else np.argmin
        y = f(x, axis=ax)
        if a.get("keepdims", 1):
            y = np.expand_dims(y, ax)
        return [y.astype(np.int64)]
    if op == "PRelu":
        return [np.where(x < 0, x * I(1), x)]
    if op == "Sign":
        return [np.sign(x)]
    if op == "Mod":
        return [np.fmod(x, I(1))]
    if op == "GatherElements":
        ax = a.get("axis", 0) % x.ndim
        idx = np.where(I(1) < 0, I(1) + x.shape[ax], I(1))
        return [np.take_along_axis(x, idx, axis=ax)]
    if op == "Pad":
        pads = [int(v) for v in I(1)]
        r = x.ndim
        width = [(pads[k], pads[k + r]) for k in range(r)]
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode == "constant":
            cv = I(2).reshape(()) if I(2) is not None else 0
            return [np.pad(x, width, mode="constant", constant_values=cv)]
        return [np.pad(x, width, mode=mode)]
    if op == "Split":
        ax = a.get("axis", 0) % x.ndim
        sp = [int(v) for v in I(1)] if I(1) is not None else [x.shape[ax] // a["_nout"]] * a["_nout"]
        return np.split(x, np.cumsum(sp)[:-1], axis=ax)
    if op == "CumSum":
        ax = int(I(1).reshape(())) % x.ndim
        y = np.flip(x, ax) if a.get("reverse", 0) else x
        c = np.cumsum(y, axis=ax)
        if a.get("exclusive", 0):
            c = c - y
        return [np.flip(c, ax) if a.get("reverse", 0) else c]
    if op == "InstanceNormalization":
        axes = tuple(range(2, x.ndim))
        m = x.mean(axis=axes, keepdims=True)
        v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
        sh = (1, -1) + (1,) * (x.ndim - 2)
        return [(x - m) / np.sqrt(v + a.get("epsilon", 1e-5)) * I(1).reshape(sh) + I(2).reshape(sh)]
    if op == "Conv":
        return [conv(x, I(1), I(2), a)]
    if op == "MaxPool":
        return [pool(x, dict(a, _kind="max"))]
    if op == "AveragePool":
        return [pool(x, dict(a, _kind="avg"))]
    if op == "GlobalAveragePool":
        return [x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)]
    if op == "GlobalMaxPool":
        return [x.max(axis=tuple(range(2, x.ndim)), keepdims=True)]
    if op == "LayerNormalization":
        ax = a.get("axis", -1) % x.ndim
        axes = tuple(range(ax, x.ndim))
        m = x.mean(axis=axes, keepdims=True)
        v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
        y = (x - m) / np.sqrt(v + a.get("epsilon", 1e-5)) * I(1)
        if I(2) is not None:
            y = y + I(2)
        return [y]
    if op == "BatchNormalization":
        sh = (1, -1) + (1,) * (x.ndim - 2)
        sc, b, mean, var = (ins[k].reshape(sh) for k in range(1, 5))
        return [(x - mean) / np.sqrt(var + a.get("epsilon", 1e-5)) * sc + b]
    raise NotImplementedError("reference has no %s" % op)


def finish(op, ys, mode, rng):
    """A node's float64 results in the given mode."""
    out = []
    for y in ys:
        y = np.asarray(y)
        if is_float(y):
            y = y.astype(np.float64)
            if mode == "r":
                with np.errstate(all="ignore"):
                    y = y.astype(np.float32).astype(np.float64)
            elif mode == "p" and op not in EXACT:
                y = y * (1 + EPS * rng.choice([-1.0, 1.0], size=y.shape))
        out.append(y)
    return out


def run_model(model, feeds, mode="x", seed=0):
    """Every value of the graph: feeds (graph inputs), initializers, node outputs."""
    rng = np.random.default_rng(seed)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    vals = {}
    for t in model.graph.initializer:
        v = numpy_helper.to_array(t)
        vals[t.name] = v.astype(np.float64) if is_float(v) else v
    for k, v in feeds.items():
        vals[k] = v.astype(np.float64) if is_float(v) else v
    for n in model.graph.node:
        ins = [vals[i] if i else None for i in n.input]
        while ins and ins[-1] is None:
            ins.pop()
        ys = finish(n.op_type, eval_node(n.op_type, dict(attrs_of(n), _opset=opset), ins), mode, rng)
        for name, y in zip(n.output, ys):
            vals[name] = y
    return vals
