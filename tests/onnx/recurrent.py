"""RNN, GRU and LSTM with the options ONNX's node tests leave out (both directions, reverse,
layout 1, initial states, peepholes, clip, input_forget, linear_before_reset, per-direction
activations), against a float64 NumPy implementation of the operators' equations written
here from ONNX's operator definitions (gate orders: GRU z r h, LSTM i o f c; clip bounds the
gates' inputs; input_forget makes f = 1 - i).

Checked (tests/onnx/run.py --check runs these among its cli checks): `nestc run` gives the
reference's Y, Y_h (and Y_c) within 1e-5 relative; one model with every kind is also
compiled and run."""
import os

import numpy as np
from onnx import TensorProto as TP
from onnx import helper as H
from onnx import numpy_helper as NH

import onnx_build

ACT = {"Sigmoid": lambda v: 1 / (1 + np.exp(-v)), "Tanh": np.tanh, "Relu": lambda v: np.maximum(v, 0)}
DEFAULT = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def reference(kind, X, W, R, B=None, h0=None, c0=None, P=None, direction="forward", layout=0, clip=None,
              acts=None, lbr=0, input_forget=0):
    X, W, R = (a.astype(np.float64) for a in (X, W, R))
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    T, Bn, _ = X.shape
    D = 2 if direction == "bidirectional" else 1
    Hs = R.shape[2]
    G = GATES[kind]
    na = len(DEFAULT[kind])
    acts = acts or DEFAULT[kind] * D
    cl = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)
    Y = np.zeros((T, D, Bn, Hs))
    Yh, Yc = np.zeros((D, Bn, Hs)), np.zeros((D, Bn, Hs))
    for d in range(D):
        f, g, hf = [ACT[a] for a in (acts[d * na:(d + 1) * na] + ["Tanh", "Tanh"])[:3]]
        Ws, Rs = np.split(W[d], G), np.split(R[d], G)
        bb = B[d].astype(np.float64) if B is not None else np.zeros(2 * G * Hs)
        Wb, Rb = np.split(bb[:G * Hs], G), np.split(bb[G * Hs:], G)
        h = h0[d].astype(np.float64) if h0 is not None else np.zeros((Bn, Hs))
        c = c0[d].astype(np.float64) if c0 is not None else np.zeros((Bn, Hs))
        Ps = np.split(P[d].astype(np.float64), 3) if P is not None else [0, 0, 0]
        steps = range(T) if direction == "forward" or (direction == "bidirectional" and d == 0) else range(T - 1, -1, -1)
        for t in steps:
            x = X[t]
            lin = lambda k: x @ Ws[k].T + Wb[k]
            rec = lambda k, hv: hv @ Rs[k].T + Rb[k]
            if kind == "RNN":
                h = f(cl(lin(0) + rec(0, h)))
            elif kind == "GRU":
                z = f(cl(lin(0) + rec(0, h)))
                r = f(cl(lin(1) + rec(1, h)))
                hh = g(cl(lin(2) + r * rec(2, h))) if lbr else g(cl(lin(2) + rec(2, r * h)))
                h = (1 - z) * hh + z * h
            else:
                i = f(cl(lin(0) + rec(0, h) + Ps[0] * c))
                fg = 1 - i if input_forget else f(cl(lin(2) + rec(2, h) + Ps[2] * c))
                cc = g(cl(lin(3) + rec(3, h)))
                c = fg * c + i * cc
                o = f(cl(lin(1) + rec(1, h) + Ps[1] * c))
                h = o * hf(c)
            Y[t, d] = h
        Yh[d], Yc[d] = h, c
    if layout:
        return Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return Y, Yh, Yc


CASES = [
    dict(kind="LSTM", direction="bidirectional", bias=1, h0=1, c0=1, peep=1, clip=1.5),
    dict(kind="LSTM", direction="reverse", layout=1, h0=1, input_forget=1),
    dict(kind="GRU", direction="bidirectional", bias=1, h0=1, lbr=1, acts=["Sigmoid", "Relu", "Sigmoid", "Tanh"]),
    dict(kind="GRU", direction="reverse", bias=1, clip=0.8),
    dict(kind="RNN", direction="bidirectional", bias=1, h0=1, layout=1, acts=["Relu", "Tanh"]),
]


def build(path, make_model, case, seed):
    rng = np.random.default_rng(seed)
    kind, direction, layout = case["kind"], case["direction"], case.get("layout", 0)
    D = 2 if direction == "bidirectional" else 1
    T, Bn, I, Hs = 4, 2, 3, 5
    G = GATES[kind]
    r = lambda *s: (rng.standard_normal(s) * 0.6).astype(np.float32)
    X = r(Bn, T, I) if layout else r(T, Bn, I)
    W, R = r(D, G * Hs, I), r(D, G * Hs, Hs)
    vals = dict(X=X, W=W, R=R)
    names = ["X", "W", "R"]
    if case.get("bias"):
        vals["B"] = r(D, 2 * G * Hs)
    st = (Bn, D, Hs) if layout else (D, Bn, Hs)
    if case.get("h0"):
        vals["initial_h"] = r(*st)
    if case.get("c0"):
        vals["initial_c"] = r(*st)
    if case.get("peep"):
        vals["P"] = r(D, 3 * Hs)
    order = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    last = max(order.index(k) for k in vals)
    ins = [k if k in vals else "" for k in order[:last + 1]]
    attrs = dict(hidden_size=Hs, direction=direction)
    if layout:
        attrs["layout"] = 1
    for k, a in (("clip", "clip"), ("lbr", "linear_before_reset"), ("input_forget", "input_forget"), ("acts", "activations")):
        if k in case:
            attrs[a] = case[k]
    outs = ["Y", "Y_h"] + (["Y_c"] if kind == "LSTM" else [])
    ysh = [Bn, T, D, Hs] if layout else [T, D, Bn, Hs]
    make_model(path, [H.make_node(kind, ins, outs, **attrs)], [H.make_tensor_value_info("X", TP.FLOAT, list(X.shape))],
               [H.make_tensor_value_info("Y", TP.FLOAT, ysh)] +
               [H.make_tensor_value_info(o, TP.FLOAT, list(st)) for o in outs[1:]],
               inits=[NH.from_array(v, k) for k, v in vals.items() if k != "X"], opset=14)
    want = reference(kind, X, W, R, vals.get("B"), vals.get("initial_h"), vals.get("initial_c"), vals.get("P"),
                     direction, layout, case.get("clip"), case.get("acts"), case.get("lbr", 0), case.get("input_forget", 0))
    return X, want[:len(outs)]


def max_rel(got, want):
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(np.max(np.abs(want)), 1e-30))


def checks(nestc, d, run, short, cr, make_model):
    out = []
    for k, case in enumerate(CASES):
        label = "%s %s%s" % (case["kind"], case["direction"], "".join(
            ", " + o for o in ("bias", "h0", "c0", "peep", "clip", "lbr", "input_forget", "acts", "layout") if o in case))
        path = os.path.join(d, "rec%d.onnx" % k)
        x, want = build(path, make_model, case, seed=20 + k)
        xp = os.path.join(d, "rec%d_x.npy" % k)
        np.save(xp, x)
        outs = [os.path.join(d, "rec%d_%d.npy" % (k, j)) for j in range(len(want))]
        r = run([nestc, "run", path, "--input", "X=" + xp] + sum((["--output", o] for o in outs), []))
        why = "exit %d: %s" % (r.returncode, short(r.stderr)) if r.returncode else None
        for o, w in zip(outs, want):
            if not why and max_rel(np.load(o), w) > 1e-5:
                why = "%s: max rel. error %.2e vs NumPy float64" % (os.path.basename(o), max_rel(np.load(o), w))
        out.append(("recurrent %s: interpreted values" % label, why))
        if k == 0:
            couts = [os.path.join(d, "rec%d_c%d.npy" % (k, j)) for j in range(len(want))]
            why = onnx_build.build_and_run(nestc, d, run, short, cr, path, "rec", xp, couts)
            for o, w in zip(couts, want):
                if not why and max_rel(np.load(o), w) > 1e-5:
                    why = "%s: max rel. error %.2e vs NumPy float64" % (os.path.basename(o), max_rel(np.load(o), w))
            out.append(("recurrent %s: compiled values" % label, why))
    return out
