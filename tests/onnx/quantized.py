"""Quantized ONNX models at sizes the node tests do not reach, against NumPy's integer
arithmetic: a QLinearConv of 128 input channels and 3x3 kernels (1152 taps an output; one
output channel's sums pass 2^24, past float32's exact integers) with a per-channel weight
scale and an int32 bias, then a
QLinearMatMul of K = 640, then DequantizeLinear; and the same convolution as
QuantizeLinear -> ConvInteger on uint8 and int8.

Checked (tests/onnx/run.py --check runs these among its cli checks): `nestc run` and the
compiled model give NumPy's values exactly (the requantized uint8 outputs and the int32
ones), and the dequantized output within 1e-6 of NumPy's."""
import os

import numpy as np
from onnx import TensorProto as TP
from onnx import helper as H
from onnx import numpy_helper as NH

import onnx_build

N, C, HW, O, K, M2 = 1, 128, 6, 10, 3, 5


def conv_int(x, w):
    """int64 convolution, stride 1, padding 1."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0], x.shape[2], x.shape[3]), np.int64)
    for i in range(K):
        for j in range(K):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + x.shape[2], j:j + x.shape[3]], w[:, :, i, j])
    return out


def requant(acc, scale, zp):
    return np.clip(np.rint(acc * scale) + zp, 0, 255).astype(np.int64)


def build(path, make_model, seed=9):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (N, C, HW, HW)).astype(np.uint8)
    x[:, :, 2:5, 2:5] = 255 - rng.integers(0, 3, (N, C, 3, 3))  # with w[0] = 127: sums past 2^24
    w = rng.integers(-128, 128, (O, C, K, K)).astype(np.int8)
    w[0] = 127
    xs, xz = np.float32(0.02), np.uint8(128)
    ws = (rng.random(O) * 0.01 + 0.001).astype(np.float32)
    wz = np.zeros(O, np.int8)
    ys, yz = np.float32(2.5), np.uint8(100)
    bias = rng.integers(-5000, 5000, O).astype(np.int32)
    m2 = rng.integers(-128, 128, (O * HW * HW, M2)).astype(np.int8)
    bs, bz = np.float32(0.003), np.int8(0)
    zs, zz = np.float32(0.5), np.uint8(7)
    inits = [NH.from_array(v, n) for v, n in ((np.array(xs), "xs"), (np.array(xz), "xz"), (w, "w"), (ws, "ws"),
                                             (wz, "wz"), (np.array(ys), "ys"), (np.array(yz), "yz"), (bias, "bias"),
                                             (m2, "m2"), (np.array(bs), "bs"), (np.array(bz), "bz"),
                                             (np.array(zs), "zs"), (np.array(zz), "zz"),
                                             (np.array([1, O * HW * HW], np.int64), "flat"))]
    nodes = [H.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"], ["c"], pads=[1, 1, 1, 1]),
             H.make_node("Reshape", ["c", "flat"], ["cf"]),
             H.make_node("QLinearMatMul", ["cf", "ys", "yz", "m2", "bs", "bz", "zs", "zz"], ["q"]),
             H.make_node("DequantizeLinear", ["q", "zs", "zz"], ["y"]),
             H.make_node("ConvInteger", ["x", "w", "xz"], ["ci"], pads=[1, 1, 1, 1])]
    make_model(path, nodes, [H.make_tensor_value_info("x", TP.UINT8, [N, C, HW, HW])],
               [H.make_tensor_value_info("c", TP.UINT8, [N, O, HW, HW]), H.make_tensor_value_info("q", TP.UINT8, [1, M2]),
                H.make_tensor_value_info("y", TP.FLOAT, [1, M2]),
                H.make_tensor_value_info("ci", TP.INT32, [N, O, HW, HW])], inits=inits, opset=13)
    acc = conv_int(x.astype(np.int64) - int(xz), w.astype(np.int64) - wz.astype(np.int64)[:, None, None, None])
    ci = acc
    cq = requant((acc + bias[None, :, None, None]).astype(np.float64),
                 (np.float64(xs) * ws.astype(np.float64) / np.float64(ys))[None, :, None, None], int(yz))
    mm = (cq.reshape(1, -1) - int(yz)) @ (m2.astype(np.int64) - int(bz))
    q = requant(mm.astype(np.float64), np.float64(ys) * np.float64(bs) / np.float64(zs), int(zz))
    y = (q.astype(np.float32) - np.float32(zz)) * zs
    return x, dict(c=cq, q=q, y=y, ci=ci)


def checks(nestc, d, run, short, cr, make_model):
    out = []
    path = os.path.join(d, "quantized.onnx")
    x, want = build(path, make_model)
    xp = os.path.join(d, "qx.npy")
    np.save(xp, x.astype(np.uint8))  # passed as u8
    names = ("c", "q", "y", "ci")

    def compare(got):
        for n in names:
            g, w = got[n], want[n]
            if g.shape != w.shape:
                return "%s: shape %s, expected %s" % (n, g.shape, w.shape)
            if n == "y":
                if np.max(np.abs(g - w)) > 1e-6 * max(np.max(np.abs(w)), 1):
                    return "y: max diff %g" % np.max(np.abs(g - w))
            elif not np.array_equal(g.astype(np.int64), w):
                k = int(np.flatnonzero(g.astype(np.int64).ravel() != w.ravel())[0])
                return "%s: %d of %d differ, first at %d: %d, expected %d" % (
                    n, int(np.sum(g.astype(np.int64) != w)), w.size, k, int(g.ravel()[k]), int(w.ravel()[k]))
        return None

    outs = [os.path.join(d, "q_%s.npy" % n) for n in names]
    r = run([nestc, "run", path, "--input", "x=" + xp] + sum((["--output", o] for o in outs), []))
    why = "exit %d: %s" % (r.returncode, short(r.stderr)) if r.returncode else compare(
        {n: np.load(o) for n, o in zip(names, outs)})
    out.append(("quantized conv (1152 taps) and matmul: interpreted values", why))
    couts = [os.path.join(d, "qc_%s.npy" % n) for n in names]
    why = onnx_build.build_and_run(nestc, d, run, short, cr, path, "qz", xp, couts)
    if not why:
        why = compare({n: np.load(o) for n, o in zip(names, couts)})
    out.append(("quantized conv (1152 taps) and matmul: compiled values", why))
    return out
