"""Resize and Upsample as exporters write them, in a repeated layer (the import outlines it as
a region, its index and weight constants as the region's parameters), against ONNX's own
reference implementation (onnx.backend.test.case.node.resize.interpolate_nd, in float64).

The model: three times Resize x2 then AveragePool 2x2 (back to the input's size), Mul by a
per-channel weight and Relu; the first two layers resize bilinearly as torch.onnx.export
writes F.interpolate(mode="bilinear") (linear, pytorch_half_pixel), the third as it writes
mode="nearest" (nearest, asymmetric, floor), so that two occurrences share a region and
the third differs. Then a cubic align_corners Resize to an odd size given by `sizes`.

Checked (tests/onnx/run.py --check runs these among its cli checks): `nestc report` finds
the repeated layer; `nestc run` and the compiled model give the reference's values (max
|got - want| <= 1e-5 max |want|)."""
import os

import numpy as np
from onnx import TensorProto as TP
from onnx import helper as H
from onnx import numpy_helper
from onnx.backend.test.case.node.resize import cubic_coeffs, interpolate_nd, linear_coeffs, nearest_coeffs

import onnx_build


def build(path, make_model, seed=5):
    rng = np.random.default_rng(seed)
    nodes, inits, ws = [], [], []
    cur = "x"
    for i in range(3):
        inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales%d" % i))
        w = (rng.standard_normal((3, 1, 1)) + 1).astype(np.float32)
        ws.append(w)
        inits.append(numpy_helper.from_array(w, "layer%d.weight" % i))
        kw = (dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel") if i < 2 else
              dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
        nodes += [H.make_node("Resize", [cur, "", "scales%d" % i], ["r%d" % i], **kw),
                  H.make_node("AveragePool", ["r%d" % i], ["p%d" % i], kernel_shape=[2, 2], strides=[2, 2]),
                  H.make_node("Mul", ["p%d" % i, "layer%d.weight" % i], ["m%d" % i]),
                  H.make_node("Relu", ["m%d" % i], ["y%d" % i])]
        cur = "y%d" % i
    inits.append(numpy_helper.from_array(np.array([1, 3, 7, 9], np.int64), "sizes"))
    nodes.append(H.make_node("Resize", [cur, "", "", "sizes"], ["y"], mode="cubic",
                             coordinate_transformation_mode="align_corners"))
    f32 = lambda n, shape: H.make_tensor_value_info(n, TP.FLOAT, shape)
    make_model(path, nodes, [f32("x", [1, 3, 5, 6])], [f32("y", [1, 3, 7, 9])], inits=inits, opset=13)
    x = rng.standard_normal((1, 3, 5, 6)).astype(np.float32)
    return x, ws


def reference(x, ws):
    cur = x.astype(np.float64)
    for i, w in enumerate(ws):
        sc = np.array([1, 1, 2, 2], np.float32)
        if i < 2:
            r = interpolate_nd(cur, linear_coeffs, scale_factors=sc, coordinate_transformation_mode="pytorch_half_pixel")
        else:
            r = interpolate_nd(cur, lambda t: nearest_coeffs(t, mode="floor"), scale_factors=sc,
                               coordinate_transformation_mode="asymmetric")
        n, c, h, wd = cur.shape
        p = r.reshape(n, c, h, 2, wd, 2).mean(axis=(3, 5))
        cur = np.maximum(p * w.astype(np.float64), 0)
    return interpolate_nd(cur, cubic_coeffs, output_size=[1, 3, 7, 9], coordinate_transformation_mode="align_corners")


def max_rel(got, want):
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(np.max(np.abs(want)), 1e-30))


def checks(nestc, d, run, short, cr, make_model):
    out = []
    path = os.path.join(d, "resized.onnx")
    x, ws = build(path, make_model)
    want = reference(x, ws)
    xp = os.path.join(d, "rx.npy")
    np.save(xp, x)
    r = run([nestc, "report", path])
    ok = r.returncode == 0 and "2 occurrences" in r.stdout
    out.append(("resize in a repeated layer: outlined", None if ok else "exit %d: %s%s" % (r.returncode, short(r.stderr), r.stdout)))
    yp = os.path.join(d, "ry.npy")
    r = run([nestc, "run", path, "--input", "x=" + xp, "--output", yp])
    why = "exit %d: %s" % (r.returncode, short(r.stderr)) if r.returncode else None
    if not why and max_rel(np.load(yp), want) > 1e-5:
        why = "max rel. error %.2e vs ONNX's reference" % max_rel(np.load(yp), want)
    out.append(("resize (linear, nearest, cubic): interpreted values", why))
    cy = os.path.join(d, "rcy.npy")
    why = onnx_build.build_and_run(nestc, d, run, short, cr, path, "rz", xp, [cy])
    if not why and max_rel(np.load(cy), want) > 1e-5:
        why = "max rel. error %.2e vs ONNX's reference" % max_rel(np.load(cy), want)
    out.append(("resize (linear, nearest, cubic): compiled values", why))
    return out
