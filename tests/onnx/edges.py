"""Edge cases of the translated ops that ONNX's node tests do not reach, each against a NumPy
value or an expected error (tests/onnx/run.py --check runs these among its cli checks):

- Pad edge, reflect and wrap with negative pads: they crop first, then the positive pads pad
  what is left;
- an int8 zero point reaching QLinearMatMul through Identity and Reshape: int8 saturation
  (not uint8's);
- Mean whose output name plus ".sum" is another tensor's name: no mix-up;
- ArgMin of integers holding the smallest value (no overflow), with and without
  select_last_index;
- Shrink of NaN is 0;
- OneHot of rank-8 indices and GatherND whose output passes rank 8: a clear error; so is
  an axis out of range (Softmax's 100, Gather's -3 and 100 of a rank-2 input);
- ScatterElements on axis 2 of a 3-d tensor with the max and min reductions and duplicate
  indices, and ScatterND with mul on int32, against NumPy loops;
- a Reshape to the product of a Shape's slice (ReduceProd of known values folds);
- Cast of int32 to uint8, int8, uint16 and int16 keeps the low bits, as NumPy's astype;
- Sum of three whose temporary's name is another tensor's (<output>.1);
- an RNN of 70 steps asked for Y (concat takes 64 tensors at most);
- NegativeLogLikelihoodLoss with weights and an ignore_index outside the classes (-100, as
  PyTorch's), its mean divided by the weights of the targets not ignored; a target out of
  range that is not ignored: a run-time error, no output; SoftmaxCrossEntropyLoss of a 4-d
  input with its log_prob output and no reduction; an unknown reduction: a clear error;
- a 1-d Conv (as a 2-d one of height 1) with pads, strides, dilation and groups, and with
  auto_pad SAME_UPPER, against a NumPy loop;
- Concat of 150 inputs (concat() takes 64: nested) and Sum of 20;
- Einsum of three and four operands, with an ellipsis and an implicit output;
- If whose condition is known at import (torch's squeeze of an inferred dimension): the
  branch taken, reading the outer graph's values; a run-time condition: a clear error;
- GridSample in every mode, padding mode and align_corners, with points outside the input
  (reflected more than once) and halves for nearest, against loops written from ONNX's
  reference;
- ReverseSequence with batch_axis 0 and time_axis 1 on rank 3, lengths 0, 1 and T;
- GatherElements with indices shorter than the data on the other axes (as PyTorch's gather
  allows), known and not, and longer ones: a clear error;
- Dropout in training mode at ratio 0 (torch's dropout(p=0.0)): the identity, its mask all
  true; at another ratio, given or the default: a clear error."""
import os

import numpy as np
from onnx import TensorProto as TP
from onnx import helper as H
from onnx import numpy_helper as NH


def checks(nestc, d, run, short, make_model):
    out = []
    f32 = lambda n, s: H.make_tensor_value_info(n, TP.FLOAT, s)

    def run_model(name, nodes, inputs, outputs, inits, feeds, opset=13):
        path = os.path.join(d, "edge_%s.onnx" % name)
        make_model(path, nodes, inputs, outputs, inits=inits, opset=opset)
        args = [nestc, "run", path]
        for k, v in feeds.items():
            p = os.path.join(d, "edge_%s_%s.npy" % (name, k))
            np.save(p, v)
            args += ["--input", "%s=%s" % (k, p)]
        outs = [os.path.join(d, "edge_%s_out%d.npy" % (name, j)) for j in range(len(outputs))]
        r = run(args + sum((["--output", o] for o in outs), []))
        if r.returncode:
            return None, "exit %d: %s" % (r.returncode, short(r.stderr))
        return [np.load(o) for o in outs], None

    def expect(name, got, want, rtol=1e-6, atol=0):
        why = got[1]
        if not why:
            for g, w in zip(got[0], want):
                if g.shape != np.shape(w) or not np.allclose(g.astype(np.float64), w, rtol=rtol, atol=atol, equal_nan=True):
                    why = "got %s, expected %s" % (np.array2string(g.ravel()[:12]), np.array2string(np.ravel(w)[:12]))
                    break
        out.append((name, why))

    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    for mode, pads in (("edge", [1, -1, -2, 3]), ("reflect", [1, -1, -2, 3]), ("wrap", [-1, 0, 1, 0]),
                       ("reflect", [0, -2, 0, 2])):
        lo, hi = pads[:2], pads[2:]
        xc = x[max(-lo[0], 0):4 - max(-hi[0], 0), max(-lo[1], 0):5 - max(-hi[1], 0)]
        want = np.pad(xc, [(max(lo[0], 0), max(hi[0], 0)), (max(lo[1], 0), max(hi[1], 0))], mode=mode)
        got = run_model("pad_%s" % mode, [H.make_node("Pad", ["x", "p"], ["y"], mode=mode)], [f32("x", [4, 5])],
                        [f32("y", list(want.shape))], [NH.from_array(np.array(pads, np.int64), "p")], dict(x=x))
        expect("Pad %s with pads %s: crop, then pad" % (mode, pads), got, [want])

    # a node that lists fewer outputs than its op makes (DynamicQuantizeLinear's
    # y alone, as a hand-edited graph has it): the others are never named
    x = np.array([[0, 1, 2], [-1, 3, 2.55]], np.float32)
    lo, hi = np.float32(min(0.0, x.min())), np.float32(max(0.0, x.max()))
    sc = np.float32((hi - lo) / np.float32(255))
    zp = np.clip(np.round(np.float32(0 - lo) / sc), 0, 255)
    want = np.clip(np.round(x / sc) + zp, 0, 255).astype(np.uint8)
    got = run_model("dql_y_only", [H.make_node("DynamicQuantizeLinear", ["x"], ["y"])], [f32("x", [2, 3])],
                    [H.make_tensor_value_info("y", TP.UINT8, None)], [], dict(x=x))
    expect("DynamicQuantizeLinear listing y alone: its values", got, [want])

    # an integer initializer of one repeated value past f32's exact integers
    # (2^24 + 1): written out, not as full(), whose fill would round it
    for v in (2 ** 24 + 1, -(2 ** 24 + 3), 2 ** 40 + 1):
        x = np.array([1, -2, 3], np.int64)
        c = np.full([3], v, np.int64)
        got = run_model("isplat_%d" % len(out), [H.make_node("Add", ["x", "c"], ["y"])],
                        [H.make_tensor_value_info("x", TP.INT64, [3])], [H.make_tensor_value_info("y", TP.INT64, [3])],
                        [NH.from_array(c, "c")], dict(x=x))
        want = x + c
        why = got[1]
        if not why and got[0][0].tolist() != want.tolist():
            why = "got %s, expected %s" % (got[0][0], want)
        out.append(("an int64 initializer of 3 x %d plus an input: every integer exact" % v, why))

    # initializers folded at import into a value too large to write inline
    # (a weight of the model, its bytes written by the import) in each dtype
    # whose bytes are copied as they are
    rng = np.random.default_rng(7)
    for dt, tp in ((np.float64, TP.DOUBLE), (np.int32, TP.INT32), (np.int64, TP.INT64), (np.float32, TP.FLOAT)):
        a = (rng.standard_normal([50, 4]) * 100).astype(dt)
        b = (rng.standard_normal([4]) * 100).astype(dt)
        x = (rng.standard_normal([50, 4]) * 10).astype(dt)
        got = run_model("foldw_%s" % np.dtype(dt).name,
                        [H.make_node("Add", ["a", "b"], ["c"]), H.make_node("Mul", ["x", "c"], ["y"])],
                        [H.make_tensor_value_info("x", tp, [50, 4])], [H.make_tensor_value_info("y", tp, [50, 4])],
                        [NH.from_array(a, "a"), NH.from_array(b, "b")], dict(x=x))
        expect("a folded [50, 4] %s initializer sum as a weight" % np.dtype(dt).name, got, [x * (a + b)],
               rtol=1e-6 if dt == np.float32 else 1e-12)

    # int8 zero point through Identity and Reshape
    a = np.array([[100, -100, 50, 7]], np.int8)
    b = np.array([[3], [2], [1], [5]], np.int8)
    nodes = [H.make_node("Identity", ["yz0"], ["yz1"]), H.make_node("Reshape", ["yz1", "shp"], ["yz"]),
             H.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])]
    inits = [NH.from_array(v, n) for v, n in ((b, "b"), (np.array(0.05, np.float32), "as"), (np.array(0, np.int8), "az"),
                                             (np.array(0.1, np.float32), "bs"), (np.array(0, np.int8), "bz"),
                                             (np.array(0.02, np.float32), "ys"), (np.array([-5], np.int8), "yz0"),
                                             (np.array([], np.int64), "shp"))]
    acc = a.astype(np.int64) @ b.astype(np.int64)
    want = np.clip(np.rint(acc * (0.05 * 0.1 / 0.02)) - 5, -128, 127)
    got = run_model("qzp", nodes, [H.make_tensor_value_info("a", TP.INT8, [1, 4])],
                    [H.make_tensor_value_info("y", TP.INT8, [1, 1])], inits, dict(a=a.astype(np.int8)))
    expect("QLinearMatMul with an int8 zero point through Identity and Reshape: int8 range", got, [want])

    # Mean next to a tensor named like its sum
    av, bv = np.array([1, 2], np.float32), np.array([3, 5], np.float32)
    nodes = [H.make_node("Mul", ["a", "b"], ["y.sum"]), H.make_node("Mean", ["a", "b"], ["y"]),
             H.make_node("Identity", ["y.sum"], ["z"])]
    got = run_model("mean", nodes, [f32("a", [2]), f32("b", [2])], [f32("y", [2]), f32("z", [2])], [], dict(a=av, b=bv))
    expect("Mean beside a tensor named <output>.sum", got, [(av + bv) / 2, av * bv])

    # ArgMin of integers with the smallest value
    m = np.iinfo(np.int64).min
    xi = np.array([[m, 0, 5, m]], np.int64)
    nodes = [H.make_node("ArgMin", ["x"], ["y0"], axis=1), H.make_node("ArgMin", ["x"], ["y1"], axis=1,
                                                                       select_last_index=1)]
    got = run_model("argmin", nodes, [H.make_tensor_value_info("x", TP.INT64, [1, 4])],
                    [H.make_tensor_value_info("y0", TP.INT64, [1, 1]), H.make_tensor_value_info("y1", TP.INT64, [1, 1])],
                    [], dict(x=xi))
    expect("ArgMin of int64 holding the smallest value, first and last", got, [[[0]], [[3]]])

    xs = np.array([np.nan, -0.2, 2.0, -2.0], np.float32)
    got = run_model("shrink", [H.make_node("Shrink", ["x"], ["y"], lambd=0.5, bias=0.1)], [f32("x", [4])],
                    [f32("y", [4])], [], dict(x=xs))
    expect("Shrink of NaN is 0", got, [[0, 0, 1.9, -1.9]])

    rng = np.random.default_rng(4)
    data = rng.standard_normal((2, 3, 4)).astype(np.float32)
    idx = np.array([[[0, 3, 0], [1, 1, 2], [3, 3, 3]], [[2, -1, 0], [0, 0, 0], [1, 2, -4]]], np.int64)
    upd = rng.standard_normal((2, 3, 3)).astype(np.float32)
    for red in ("max", "min"):
        want = data.copy()
        for p in np.ndindex(*idx.shape):
            t = (p[0], p[1], idx[p] % 4)
            want[t] = max(want[t], upd[p]) if red == "max" else min(want[t], upd[p])
        got = run_model("scatter_" + red, [H.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=2, reduction=red)],
                        [f32("x", [2, 3, 4])], [f32("y", [2, 3, 4])],
                        [NH.from_array(idx, "i"), NH.from_array(upd, "u")], dict(x=data), opset=18)
        expect("ScatterElements axis 2, reduction %s, duplicates" % red, got, [want])
    di = rng.integers(-5, 6, (3, 4)).astype(np.int32)
    ni = np.array([[1], [1], [2]], np.int64)
    nu = rng.integers(-3, 4, (3, 4)).astype(np.int32)
    want = di.astype(np.int64).copy()
    for t in range(3):
        want[ni[t, 0]] *= nu[t]
    got = run_model("scatternd_mul", [H.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="mul")],
                    [H.make_tensor_value_info("x", TP.INT32, [3, 4])], [H.make_tensor_value_info("y", TP.INT32, [3, 4])],
                    [NH.from_array(ni, "i"), NH.from_array(nu, "u")], dict(x=di), opset=16)
    expect("ScatterND on int32, reduction mul, a row twice", got, [want])
    xr = rng.standard_normal((2, 3, 4)).astype(np.float32)
    nodes = [H.make_node("Shape", ["x"], ["s"]), H.make_node("Slice", ["s", "st", "en"], ["s12"]),
             H.make_node("ReduceProd", ["s12"], ["p"], keepdims=1), H.make_node("Concat", ["one", "p"], ["ns"], axis=0),
             H.make_node("Reshape", ["x", "ns"], ["y"])]
    got = run_model("shapeprod", nodes, [f32("x", [2, 3, 4])], [f32("y", [2, 12])],
                    [NH.from_array(np.array([1], np.int64), "st"), NH.from_array(np.array([3], np.int64), "en"),
                     NH.from_array(np.array([2], np.int64), "one")], dict(x=xr))
    expect("Reshape to a ReduceProd of a Shape's slice (folded)", got, [xr.reshape(2, 12)])
    ci = np.array([300, -1, 200, 127, -129, 65541, 2 ** 31 - 1, -2 ** 31], np.int32)
    for to, npt in ((TP.UINT8, np.uint8), (TP.INT8, np.int8), (TP.UINT16, np.uint16), (TP.INT16, np.int16)):
        nodes = [H.make_node("Cast", ["x"], ["c"], to=to), H.make_node("Cast", ["c"], ["y"], to=TP.DOUBLE)]
        got = run_model("cast%d" % to, nodes, [H.make_tensor_value_info("x", TP.INT32, [8])],
                        [H.make_tensor_value_info("y", TP.DOUBLE, [8])], [], dict(x=ci))
        expect("Cast int32 to %s keeps the low bits" % np.dtype(npt).name, got, [ci.astype(npt).astype(np.float64)])
    a3 = [np.array([1, 2], np.float32) * 10 ** k for k in range(4)]
    nodes = [H.make_node("Neg", ["d"], ["y.1"]), H.make_node("Sum", ["a", "b", "c"], ["y"]),
             H.make_node("Mul", ["y", "y.1"], ["z"])]
    got = run_model("sum3", nodes, [f32(n, [2]) for n in "abcd"], [f32("z", [2])], [],
                    dict(a=a3[0], b=a3[1], c=a3[2], d=a3[3]))
    expect("Sum of three beside a tensor named <output>.1", got, [(a3[0] + a3[1] + a3[2]) * -a3[3]])
    T = 70
    xs = (rng.standard_normal((T, 1, 3)) * 0.5).astype(np.float32)
    w, rr = (rng.standard_normal((1, 4, 3)) * 0.5).astype(np.float32), (rng.standard_normal((1, 4, 4)) * 0.5).astype(np.float32)
    h = np.zeros((1, 4))
    ys = []
    for t in range(T):
        h = np.tanh(xs[t].astype(np.float64) @ w[0].T.astype(np.float64) + h @ rr[0].T.astype(np.float64))
        ys.append(h)
    got = run_model("rnn70", [H.make_node("RNN", ["x", "w", "r"], ["y", "yh"], hidden_size=4)], [f32("x", [T, 1, 3])],
                    [f32("y", [T, 1, 1, 4]), f32("yh", [1, 1, 4])], [NH.from_array(w, "w"), NH.from_array(rr, "r")],
                    dict(x=xs), opset=14)
    expect("RNN of 70 steps with Y", got, [np.array(ys).reshape(T, 1, 1, 4), h.reshape(1, 1, 4)], rtol=0, atol=1e-5)
    # the losses, against loops written from ONNX's definition
    xs = rng.standard_normal((3, 5, 2)).astype(np.float32)
    tg = np.array([[1, -100], [4, 0], [-100, 3]], np.int64)
    wc = np.array([0.5, 1, 2, 3, 4], np.float32)
    num = den = 0.0
    for n in range(3):
        for j in range(2):
            if tg[n, j] != -100:
                num -= float(xs[n, tg[n, j], j]) * wc[tg[n, j]]
                den += wc[tg[n, j]]
    nll = lambda name, **kw: run_model(name, [H.make_node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"], **kw)],
                                       [f32("x", [3, 5, 2]), H.make_tensor_value_info("t", TP.INT64, [3, 2])],
                                       [f32("y", [])], [NH.from_array(wc, "w")], dict(x=xs, t=tg))
    expect("NegativeLogLikelihoodLoss, weights, ignore_index -100, mean", nll("nll", ignore_index=-100),
           [np.float32(num / den)], rtol=1e-5)
    got = nll("nll_range", ignore_index=1)
    out.append(("NegativeLogLikelihoodLoss with a target out of range: a run-time error",
                None if got[0] is None and "out of range" in (got[1] or "") else "no error: %s" % (got,)))
    # an ignored target whose class-0 score is -inf: its loss is 0, not -inf * 0
    xinf = np.array([[-np.inf, 0.0], [0.0, -1.0]], np.float32)
    got = run_model("nll_inf", [H.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction="none",
                                            ignore_index=1)],
                    [f32("x", [2, 2]), H.make_tensor_value_info("t", TP.INT64, [2])], [f32("y", [2])], [],
                    dict(x=xinf, t=np.array([1, 1], np.int64)))
    expect("NegativeLogLikelihoodLoss: ignored targets are 0 even beside -inf scores", got, [np.zeros(2)])
    x4 = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    t4 = rng.integers(0, 3, (2, 2, 2)).astype(np.int64)
    lp = x4.astype(np.float64) - x4.max(axis=1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(axis=1, keepdims=True))
    want = -np.take_along_axis(lp, t4[:, None], axis=1)[:, 0]
    got = run_model("sce4", [H.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y", "lp"], reduction="none")],
                    [f32("x", [2, 3, 2, 2]), H.make_tensor_value_info("t", TP.INT64, [2, 2, 2])],
                    [f32("y", [2, 2, 2]), f32("lp", [2, 3, 2, 2])], [], dict(x=x4, t=t4))
    expect("SoftmaxCrossEntropyLoss of a 4-d input, no reduction, with log_prob", got, [want, lp], rtol=1e-5, atol=1e-6)
    # 1-d Conv
    def conv1d_ref(x, w, b, stride, dil, pads, groups):
        n, ci, L = x.shape
        co, cig, k = w.shape
        xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pads[0], pads[1])])
        lo = (xp.shape[2] - dil * (k - 1) - 1) // stride + 1
        y = np.zeros((n, co, lo))
        per = co // groups
        for o in range(co):
            g = o // per
            for t in range(lo):
                seg = xp[:, g * cig:(g + 1) * cig, t * stride:t * stride + dil * (k - 1) + 1:dil]
                y[:, o, t] = (seg * w[o]).sum(axis=(1, 2)) + b[o]
        return y
    x1 = rng.standard_normal((2, 4, 11)).astype(np.float32)
    w1 = rng.standard_normal((6, 2, 3)).astype(np.float32)
    b1 = rng.standard_normal(6).astype(np.float32)
    got = run_model("conv1d", [H.make_node("Conv", ["x", "w", "b"], ["y"], strides=[2], dilations=[2], pads=[3, 1],
                                           group=2, kernel_shape=[3])],
                    [f32("x", [2, 4, 11])], [f32("y", None)], [NH.from_array(w1, "w"), NH.from_array(b1, "b")], dict(x=x1))
    expect("1-d Conv: pads 3 and 1, stride 2, dilation 2, 2 groups", got, [conv1d_ref(x1, w1, b1, 2, 2, (3, 1), 2)],
           rtol=1e-5, atol=1e-5)
    w2 = rng.standard_normal((5, 4, 4)).astype(np.float32)
    got = run_model("conv1d_same", [H.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER")],
                    [f32("x", [2, 4, 11])], [f32("y", None)], [NH.from_array(w2, "w")], dict(x=x1))
    expect("1-d Conv with auto_pad SAME_UPPER (kernel 4: pads 1 and 2)", got,
           [conv1d_ref(x1, w2, np.zeros(5), 1, 1, (1, 2), 1)], rtol=1e-5, atol=1e-5)

    # many inputs
    parts = [rng.standard_normal((2, 1 + k % 3)).astype(np.float32) for k in range(150)]
    got = run_model("concat150", [H.make_node("Concat", ["x%d" % k for k in range(150)], ["y"], axis=1)],
                    [f32("x%d" % k, list(p.shape)) for k, p in enumerate(parts)], [f32("y", None)], [],
                    {"x%d" % k: p for k, p in enumerate(parts)})
    expect("Concat of 150 inputs", got, [np.concatenate(parts, axis=1)])
    got = run_model("sum20", [H.make_node("Sum", ["x%d" % k for k in range(20)], ["y"])],
                    [f32("x%d" % k, [3]) for k in range(20)], [f32("y", [3])], [],
                    {"x%d" % k: np.full(3, k, np.float32) for k in range(20)})
    expect("Sum of 20 inputs", got, [np.full(3, 190.0)])

    # Einsum of three and four operands
    ea, eb, ec, ed = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 4), (4, 5), (5, 3), (3, 2)))
    for eq, ops, shapes in (("...ij,jk,kl->...il", ["a", "b", "c"], None), ("bij,jk,ki", ["a", "b", "c"], None),
                            ("bij,jk,kl,lm->bim", ["a", "b", "c", "d"], None)):
        vals = dict(a=ea, b=eb, c=ec, d=ed)
        want = np.einsum(eq, *[vals[o].astype(np.float64) for o in ops])
        got = run_model("einsum%d_%d" % (len(ops), len(eq)), [H.make_node("Einsum", ops, ["y"], equation=eq)],
                        [f32(o, list(vals[o].shape)) for o in ops], [f32("y", None)], [], {o: vals[o] for o in ops},
                        opset=13)
        expect("Einsum %s" % eq, got, [want], rtol=1e-5, atol=1e-5)

    # If with a known condition, as torch writes it for a squeeze
    xs3 = rng.standard_normal((1, 3, 4)).astype(np.float32)
    then_g = H.make_graph([H.make_node("Squeeze", ["x", "ax0"], ["sq"])], "then", [], [f32("sq", None)])
    else_g = H.make_graph([H.make_node("Identity", ["x"], ["id"])], "else", [], [f32("id", None)])
    nodes = [H.make_node("Shape", ["x"], ["s"]), H.make_node("Gather", ["s", "zero"], ["d0"], axis=0),
             H.make_node("Equal", ["d0", "one"], ["c"]),
             H.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    inits = [NH.from_array(np.array(0, np.int64), "zero"), NH.from_array(np.array(1, np.int64), "one"),
             NH.from_array(np.array([0], np.int64), "ax0")]
    got = run_model("if_known", nodes, [f32("x", [1, 3, 4])], [f32("y", None)], inits, dict(x=xs3))
    expect("If with a condition known at import: the then branch", got, [xs3[0]])
    # GridSample, against the reference's loops
    def gs_ref(X, G, mode, pad, align):
        N, C, Hh, Ww = X.shape
        _, Ho, Wo, _ = G.shape
        dims = (Ww, Hh)
        lo = [0.0 if align else -0.5] * 2
        hi = [d - 1.0 if align else d - 0.5 for d in dims]

        def reflect(v, a, b):
            rng = b - a
            if v < a:
                dx = a - v
                n = int(dx / rng)
                r = dx - n * rng
                return a + r if n % 2 == 0 else b - r
            if v > b:
                dx = v - b
                n = int(dx / rng)
                r = dx - n * rng
                return b - r if n % 2 == 0 else a + r
            return v

        def pix(plane, iy, ix):
            idx = []
            for i, k in ((iy, 1), (ix, 0)):
                d = dims[k]
                if pad == "zeros":
                    if not 0 <= i < d:
                        return 0.0
                elif pad == "border":
                    i = min(max(i, 0), d - 1)
                else:
                    i = int(reflect(i, lo[k], hi[k]))
                idx.append(i)
            return float(plane[idx[0], idx[1]])

        def cubic(t):
            a = -0.75
            return [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                    ((a + 2) * t - (a + 3)) * t * t + 1,
                    ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                    ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]

        Y = np.zeros((N, C, Ho, Wo))
        for n in range(N):
            for oh in range(Ho):
                for ow in range(Wo):
                    p = []
                    for k in range(2):
                        # in float32, as the reference (a half stays a half for nearest)
                        g, one, two, dk = G[n, oh, ow, k], np.float32(1), np.float32(2), np.float32(dims[k])
                        v = float((g + one) / two * (dk - one) if align else ((g + one) * dk - one) / two)
                        if mode == "nearest":
                            v = float(np.rint(v))
                        if v < lo[k] or v > hi[k]:
                            if pad == "border":
                                v = min(max(v, 0), dims[k] - 1)
                            elif pad == "reflection":
                                v = reflect(v, lo[k], hi[k])
                        p.append(v)
                    for c in range(C):
                        plane = X[n, c]
                        if mode == "nearest":
                            Y[n, c, oh, ow] = pix(plane, int(p[1]), int(p[0]))
                            continue
                        x0, y0 = int(np.floor(p[0])), int(np.floor(p[1]))
                        fx, fy = p[0] - x0, p[1] - y0
                        if mode == "bilinear":
                            wx, wy, offs = [1 - fx, fx], [1 - fy, fy], [0, 1]
                        else:
                            wx, wy, offs = cubic(fx), cubic(fy), [-1, 0, 1, 2]
                        Y[n, c, oh, ow] = sum(wy[a] * wx[b] * pix(plane, y0 + offs[a], x0 + offs[b])
                                              for a in range(len(offs)) for b in range(len(offs)))
        return Y
    Xg = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    Gg = rng.uniform(-2.6, 2.6, (1, 3, 4, 2)).astype(np.float32)
    Gg[0, 0, 0] = [0.0, 0.0]
    Gg[0, 0, 1] = [-1.0, 1.0]
    Gg[0, 0, 2] = [0.2, -0.25]      # x = 0.5 * 5 - 0.5 + ... halves for nearest at align 0
    Gg[0, 0, 3] = [-4.1, 5.3]       # reflected more than once
    for mode in ("bilinear", "nearest", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            for align in (0, 1):
                got = run_model("gs_%s_%s_%d" % (mode, pad, align),
                                [H.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=pad,
                                             align_corners=align)],
                                [f32("x", [1, 2, 4, 5]), f32("g", [1, 3, 4, 2])], [f32("y", None)], [],
                                dict(x=Xg, g=Gg), opset=16)
                expect("GridSample %s, %s padding, align_corners=%d" % (mode, pad, align), got,
                       [gs_ref(Xg, Gg, mode, pad, align)], rtol=1e-4, atol=1e-5)
    xr3 = rng.standard_normal((3, 5, 2)).astype(np.float32)
    lens = np.array([0, 5, 1], np.int64)
    want = xr3.copy()
    for b in range(3):
        want[b, :lens[b]] = xr3[b, :lens[b]][::-1]
    got = run_model("revseq", [H.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=0, time_axis=1)],
                    [f32("x", [3, 5, 2]), H.make_tensor_value_info("l", TP.INT64, [3])], [f32("y", [3, 5, 2])], [],
                    dict(x=xr3, l=lens), opset=10)
    expect("ReverseSequence, batch axis 0, lengths 0, 5 and 1", got, [want])
    # GatherElements with indices shorter than the data on the other axes (PyTorch's gather,
    # which exports to it): the output has the indices' shape, the data cut to them
    xg = rng.standard_normal((4, 5, 3)).astype(np.float32)
    for case, (ax, ishape, known) in enumerate(((1, (2, 6, 1), False), (0, (3, 2, 3), False), (2, (4, 1, 2), True),
                                                (1, (3, 5, 3), False), (2, (4, 5, 1), False))):
        ig = rng.integers(-xg.shape[ax], xg.shape[ax], ishape).astype(np.int64)
        cut = tuple(slice(None) if k == ax else slice(0, ishape[k]) for k in range(3))
        want = np.take_along_axis(xg[cut], np.where(ig < 0, ig + xg.shape[ax], ig), axis=ax)
        ins = [f32("x", [4, 5, 3])] + ([] if known else [H.make_tensor_value_info("i", TP.INT64, list(ishape))])
        got = run_model("gather_el_%d" % case, [H.make_node("GatherElements", ["x", "i"], ["y"], axis=ax)], ins,
                        [f32("y", list(ishape))], [NH.from_array(ig, "i")] if known else [],
                        dict(x=xg) if known else dict(x=xg, i=ig), opset=13)
        expect("GatherElements on axis %d of f32[4, 5, 3], indices %s%s" % (ax, list(ishape), " (known)" if known else ""),
               got, [want])
    # and its text, as `nestc import` writes it: the cut and the wrapped indices are
    # temporaries named in order
    nest = os.path.join(d, "edge_gather_el_0.nest")
    r = run([nestc, "import", os.path.join(d, "edge_gather_el_0.onnx"), "-o", nest])
    text = open(nest).read() if r.returncode == 0 else ""
    body = ("export fn forward(x: f32[4, 5, 3], i: i64[2, 6, 1]) -> f32[2, 6, 1] {\n"
            "  let t0 = x[0:2, :, 0:1]\n"
            "  let t1 = where(i < 0, i + 5, i)\n"
            "  let y = take_along_axis(t0, t1, 1)\n"
            "  return y\n"
            "}\n")
    out.append(("GatherElements with shorter indices: the import's text",
                None if r.returncode == 0 and text.endswith("\n\n" + body)
                else "exit %d: %s%s" % (r.returncode, short(r.stderr), text)))
    # indices as long as the data on the other axes: nothing to cut, no slice in the text
    nest = os.path.join(d, "edge_gather_el_4.nest")
    r = run([nestc, "import", os.path.join(d, "edge_gather_el_4.onnx"), "-o", nest])
    text = open(nest).read() if r.returncode == 0 else ""
    out.append(("GatherElements with indices as long as the data on the other axes: no cut in the import's text",
                None if r.returncode == 0 and "take_along_axis(x, t0, 2)" in text and "[" not in text.split("{", 1)[1]
                else "exit %d: %s%s" % (r.returncode, short(r.stderr), text)))
    # binary ops of initializers alone are folded at import (fold.c): each with NumPy's
    # broadcasting, [2, 3] with [3], [3, 1] with [1, 4], [2, 1, 3] with [4, 1], scalars;
    # then added to an input so that the folded value is what the model computes with
    rng = np.random.default_rng(42)
    for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide),
                   ("Max", np.maximum), ("Min", np.minimum), ("Pow", np.power)):
        for sa, sb in (((2, 3), (3,)), ((3,), (2, 3)), ((3, 1), (1, 4)), ((2, 1, 3), (4, 1)), ((2, 3), ()),
                       ((1, 3), (2, 1))):
            a = rng.uniform(0.5, 2.0, sa).astype(np.float32)
            b = rng.uniform(0.5, 2.0, sb).astype(np.float32)
            want_c = fn(a.astype(np.float64), b.astype(np.float64))
            shp = list(want_c.shape)
            xin = rng.uniform(-1, 1, shp).astype(np.float32)
            nodes = [H.make_node(op, ["a", "b"], ["c"]), H.make_node("Add", ["c", "x"], ["y"])]
            got = run_model("fold_%s_%s_%s" % (op, "x".join(map(str, sa)) or "s", "x".join(map(str, sb)) or "s"), nodes,
                            [f32("x", shp)], [f32("y", shp)], [NH.from_array(a, "a"), NH.from_array(b, "b")], dict(x=xin))
            expect("%s of initializers %s and %s folded with broadcasting" % (op, list(sa), list(sb)), got,
                   [want_c + xin], rtol=1e-5, atol=1e-6)
    # and Where of three initializers, the condition broadcast along rows
    cnd = np.array([True, False, True])
    a, b = rng.uniform(-1, 1, (2, 3)).astype(np.float32), rng.uniform(-1, 1, (2, 1)).astype(np.float32)
    xin = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    got = run_model("fold_where", [H.make_node("Where", ["k", "a", "b"], ["c"]), H.make_node("Add", ["c", "x"], ["y"])],
                    [f32("x", [2, 3])], [f32("y", [2, 3])],
                    [NH.from_array(cnd, "k"), NH.from_array(a, "a"), NH.from_array(b, "b")], dict(x=xin))
    expect("Where of initializers [3], [2, 3] and [2, 1] folded with broadcasting", got,
           [np.where(cnd, a, b).astype(np.float64) + xin], rtol=1e-6)
    # SiLU as torch exports it (Sigmoid, then Mul by x, in either order) after a
    # Conv: imported as silu(...), which the convolution's epilogue applies;
    # a Sigmoid also read elsewhere, or a Mul by another tensor, stays as it is.
    # Values against NumPy (nestc run of the .onnx); the import's text.
    rs = np.random.default_rng(41)
    xin = rs.uniform(-1, 1, (1, 8, 6, 5)).astype(np.float32)
    wc = rs.uniform(-0.5, 0.5, (12, 8, 3, 3)).astype(np.float32)
    nodes = [H.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             H.make_node("Sigmoid", ["c"], ["s"]), H.make_node("Mul", ["c", "s"], ["y"]),
             H.make_node("Sigmoid", ["c"], ["s2"]), H.make_node("Mul", ["s2", "c"], ["y2"]),
             H.make_node("Sigmoid", ["c"], ["s3"]), H.make_node("Mul", ["c", "s3"], ["y3"]),
             H.make_node("Add", ["s3", "c"], ["y4"]),
             H.make_node("Sigmoid", ["c"], ["s5"]), H.make_node("Mul", ["x2", "s5"], ["y5"])]
    outs = [f32(n, [1, 12, 6, 5]) for n in ("y", "y2", "y3", "y4", "y5")]
    got = run_model("silu", nodes, [f32("x", [1, 8, 6, 5]), f32("x2", [1, 12, 6, 5])], outs,
                    [NH.from_array(wc, "w")], dict(x=xin, x2=xin[:, :1].repeat(12, 1) * 2))
    cref = np.zeros((1, 12, 6, 5))
    xp = np.pad(xin.astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    for i in range(3):
        for j in range(3):
            cref += np.einsum("oc,nchw->nohw", wc[:, :, i, j], xp[:, :, i:i + 6, j:j + 5])
    sg = 1 / (1 + np.exp(-cref))
    expect("SiLU as Sigmoid and Mul after a Conv: values", got,
           [cref * sg, cref * sg, cref * sg, sg + cref, xin[:, :1].repeat(12, 1) * 2 * sg], rtol=1e-5, atol=1e-6)
    nest = os.path.join(d, "edge_silu.nest")
    r = run([nestc, "import", os.path.join(d, "edge_silu.onnx"), "-o", nest])
    text = open(nest).read() if r.returncode == 0 else ""
    body = text[text.find("export fn"):]
    why = None if body.count("silu(") == 2 and body.count("sigmoid(") == 2 else \
        "expected 2 silu(...) (y, y2) and 2 sigmoid(...) (s3 read twice, s5 times x2): exit %d: %s%s" % (
            r.returncode, short(r.stderr), body)
    out.append(("SiLU as Sigmoid and Mul: imported as silu(...)", why))
    # Dropout in training mode at ratio 0 (torch's dropout(p=0.0) without
    # training=False, as swin_t's attention exports): the identity, its mask all true
    xin = np.array([[1.5, -2, 3], [0, 7, -0.25]], np.float32)
    got = run_model("dropout_p0", [H.make_node("Dropout", ["x", "r", "t"], ["y", "m"])], [f32("x", [2, 3])],
                    [f32("y", [2, 3]), H.make_tensor_value_info("m", TP.BOOL, [2, 3])],
                    [NH.from_array(np.array(0.0, np.float32), "r"), NH.from_array(np.array(True), "t")], dict(x=xin))
    expect("Dropout in training mode at ratio 0: the identity, its mask all true", got, [xin, np.ones([2, 3], bool)])
    for name, what, nodes, ins, inits, needle in (
            ("if_runtime", "If with a run-time condition: a clear error",
             [H.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
             [H.make_tensor_value_info("c", TP.BOOL, []), f32("x", [1, 3, 4])], [NH.from_array(np.array([0], np.int64), "ax0")],
             "condition is computed at run time is not supported"),
            ("loss_reduction", "NegativeLogLikelihoodLoss with reduction max: a clear error", [H.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction="max")],
             [f32("x", [2, 3]), H.make_tensor_value_info("t", TP.INT64, [2])], [], "reduction 'max' is not supported"),
            ("onehot", "onehot past rank 8: a clear error", [H.make_node("OneHot", ["i", "dep", "v"], ["y"])],
             [H.make_tensor_value_info("i", TP.INT64, [1] * 8)],
             [NH.from_array(np.array(3, np.int64), "dep"), NH.from_array(np.array([0, 1], np.float32), "v")], "rank"),
            ("gather_el_long", "GatherElements with indices longer than the data on another axis: a clear error",
             [H.make_node("GatherElements", ["x", "i"], ["y"], axis=1)],
             [f32("x", [2, 3]), H.make_tensor_value_info("i", TP.INT64, [3, 1])], [],
             "node #0 (GatherElements, opset 13): indices of 3 on axis 0, more than the data's 2\n1 error generated."),
            ("dropout_train", "Dropout in training mode at ratio 0.25: a clear error",
             [H.make_node("Dropout", ["x", "r", "t"], ["y"])], [f32("x", [2, 3])],
             [NH.from_array(np.array(0.25, np.float32), "r"), NH.from_array(np.array(True), "t")],
             "node #0 (Dropout, opset 13): Dropout in training mode is supported with a ratio of 0 only (the identity): "
             "this one's is 0.25\n1 error generated."),
            ("dropout_train_default", "Dropout in training mode at its default ratio: a clear error",
             [H.make_node("Dropout", ["x", "", "t"], ["y"])], [f32("x", [2, 3])], [NH.from_array(np.array(True), "t")],
             "this one's is 0.5, the default\n1 error generated."),
            ("dropout_mode_runtime", "Dropout whose training_mode is a graph input, at ratio 0.25: a clear error "
             "that does not call it training mode",
             [H.make_node("Dropout", ["x", "r", "t"], ["y"])], [f32("x", [2, 3]), H.make_tensor_value_info("t", TP.BOOL, [])],
             [NH.from_array(np.array(0.25, np.float32), "r")],
             "node #0 (Dropout, opset 13): Dropout whose training_mode is computed at run time is supported with a "
             "ratio of 0 only (the identity): this one's is 0.25\n1 error generated."),
            ("softmax_axis", "Softmax on axis 100 of a rank-2 input: a clear error",
             [H.make_node("Softmax", ["x"], ["y"], axis=100)], [f32("x", [2, 3])], [],
             "node #0 (Softmax, opset 13): axis 100 is out of range for rank 2\n1 error generated."),
            ("gather_axis", "Gather on axis -3 of a rank-2 input: a clear error",
             [H.make_node("Gather", ["x", "i"], ["y"], axis=-3)], [f32("x", [2, 3]), H.make_tensor_value_info("i", TP.INT64, [2])],
             [], "node #0 (Gather, opset 13): axis -3 is out of range for rank 2\n1 error generated."),
            ("gather_axis100", "Gather on axis 100 of a rank-2 input: a clear error",
             [H.make_node("Gather", ["x", "i"], ["y"], axis=100)], [f32("x", [2, 3]), H.make_tensor_value_info("i", TP.INT64, [2])],
             [], "node #0 (Gather, opset 13): axis 100 is out of range for rank 2\n1 error generated."),
            ("bcast_msg", "an Add of f32[2, 3] and f32[4]: shapes that do not broadcast, said with their axis",
             [H.make_node("Add", ["x", "z"], ["y"])], [f32("x", [2, 3]), f32("z", [4])], [],
             "node #0 (Add, opset 13): shapes do not broadcast: axis 1 is 3 vs 4\n1 error generated."),
            # the same folded at import: a Where of known values (2 MB of initializers)
            ("where_known_big", "a Where of known values whose broadcast passes 2^40 elements: a clear error",
             [H.make_node("Where", ["c", "a", "b"], ["y"])], [],
             [NH.from_array(np.ones((1 << 20, 1), bool), "c"), NH.from_array(np.ones((1, (1 << 20) + 1), np.uint8), "a"),
              NH.from_array(np.zeros((1,), np.uint8), "b")],
             "node #0 (Where, opset 13): dimension 1 is out of range (1048577)\n1 error generated."),
            ("gathernd", "gathernd past rank 8: a clear error", [H.make_node("GatherND", ["x", "i"], ["y"])],
             [f32("x", [1] * 8), H.make_tensor_value_info("i", TP.INT64, [1] * 8)], [], "rank"),
            ("unsqueeze9", "Unsqueeze to rank 9: a clear error", [H.make_node("Unsqueeze", ["x", "a"], ["y"])],
             [f32("x", [1] * 8)], [NH.from_array(np.array([0], np.int64), "a")],
             "node #0 (Unsqueeze, opset 13): rank 9 is more than nestc's 8\n1 error generated."),
            ("shape_2pow41", "a shape of 2^41 elements: a clear error",
             [H.make_node("ConstantOfShape", ["s"], ["y"], value=NH.from_array(np.array([1.0], np.float32), "v"))],
             [], [NH.from_array(np.array([1 << 41], np.int64), "s")],
             "node #0 (ConstantOfShape, opset 13): dimension 0 is out of range (2199023255552)\n1 error generated."),
            ("shape_product", "a shape whose product passes 2^40: a clear error",
             [H.make_node("ConstantOfShape", ["s"], ["y"], value=NH.from_array(np.array([1.0], np.float32), "v"))],
             [], [NH.from_array(np.array([1 << 30, 1 << 11], np.int64), "s")],
             "node #0 (ConstantOfShape, opset 13): dimension 1 is out of range (2048)\n1 error generated."),
            # inputs of 2^21 elements each whose broadcast has 2^42: refused where the output is made
            ("shape_bcast", "an Add whose broadcast passes 2^40 elements: a clear error",
             [H.make_node("Add", ["x", "z"], ["y"])], [f32("x", [1 << 21, 1]), f32("z", [1, 1 << 21])], [],
             "node #0 (Add, opset 13): dimension 1 is out of range (2097152)\n1 error generated.")):
        path = os.path.join(d, "edge_%s.onnx" % name)
        make_model(path, nodes, ins, [f32("y", None)], inits=inits, opset=13)
        r = run([nestc, "check", path])
        bad = r.returncode != 1 or "Sanitizer" in r.stderr or "runtime error" in r.stderr or needle not in r.stderr
        out.append((what, "exit %d: %s" % (r.returncode, short(r.stderr)) if bad else None))
    return out
