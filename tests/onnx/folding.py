"""Constants at import (src/onnx/fold.c): what the import makes of known values, each as a
user's model would meet it, against NumPy or an expected message (tests/onnx/run.py --check
runs these among its cli checks):

- float constants: pi as float32 and as float64, each exactly (its literal reads back as
  the same number in its own dtype), 0.1 + 0.2 as float64 (17 digits: 0.30000000000000004),
  -0.0 as float32 dividing (its sign kept: -inf and inf), and a NaN constant (which has no
  literal) filling what a mask leaves out;
- a causal mask folded at import (LessOrEqual of two constant ranges: a bool tensor, a
  param) with Where(mask, scores, -inf) and Softmax: the masked scores are exactly 0, and
  the -inf constant is a literal;
- an initializer of more than 64 Ki elements in external data, through Identity, then a
  Transpose folded at import: values (the import's dry pass holds it as zeros);
- Expand to exactly 2^40 elements (one axis, and two of 2^20) is accepted, 2^40 + 1 is
  "out of range";
- a Reshape whose shape is computed at run time by a node (not a graph input): the error
  says so, and does not ask to freeze an input; a MatMul of one input: "needs two inputs";
- Pad (edge, reflect) of a tensor with an empty axis: an empty result of the padded shape;
- a Concat of 1024 constants (the most inputs a node may have), folded at import;
- an empty initializer (f32[0]) added to an input of shape [3, 0], and returned alone:
  empty results of the right shapes, and `nestc import` writes it as zeros([0]), no param;
- i64 constants of one value: 2^24 and -2^24 written as full() of a literal, 2^24 + 1 as a
  param (a literal past 2^24 would round through f32), each exact; two elements (the fewest
  written as full()) as a literal;
- a graph that reads a value inside a local function's call (blocks.1/m, as the expanded
  call names it) after the call: the plan that makes each call a region cannot hold, and
  the import tries again without regions (values against NumPy), never reading an
  unknown value as a constant;
- 16 repeated layers each scaled by a weight of one element (shape [1], a value per layer,
  as LayerScale): the weights stay params, so the layers are still one region called once
  per layer (nestc report; 32 weights passed to the calls), and the values are right."""
import os

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as H
from onnx import numpy_helper as NH


def checks(nestc, d, run, short, make_model):
    out = []
    d = os.path.join(d, "folding")
    os.makedirs(d, exist_ok=True)
    f32 = lambda n, s: H.make_tensor_value_info(n, TP.FLOAT, s)

    def run_model(name, path, feeds, nout):
        args = [nestc, "run", path]
        for k, v in feeds.items():
            p = os.path.join(d, "%s_%s.npy" % (name, k))
            np.save(p, v)
            args += ["--input", "%s=%s" % (k, p)]
        outs = [os.path.join(d, "%s_out%d.npy" % (name, j)) for j in range(nout)]
        r = run(args + sum((["--output", o] for o in outs), []))
        if r.returncode:
            return None, "exit %d: %s" % (r.returncode, short(r.stderr))
        return [np.load(o) for o in outs], None

    # float constants: each literal reads back as the constant itself (pi in float32 and
    # in float64), and NaN (which has no literal) fills where a mask says
    nodes = [H.make_node("Constant", [], ["c"], value=NH.from_array(np.array(np.pi, np.float64))),
             H.make_node("Add", ["x", "c"], ["y"]),
             H.make_node("Constant", [], ["c32"], value=NH.from_array(np.array(np.pi, np.float32))),
             H.make_node("Mul", ["v", "c32"], ["z"]),
             H.make_node("Constant", [], ["nan"], value=NH.from_array(np.array(np.nan, np.float32))),
             H.make_node("Where", ["m", "v", "nan"], ["u"]),
             H.make_node("Constant", [], ["c17"], value=NH.from_array(np.array(0.1 + 0.2, np.float64))),
             H.make_node("Add", ["x", "c17"], ["y17"]),
             H.make_node("Constant", [], ["nz"], value=NH.from_array(np.array(-0.0, np.float32))),
             H.make_node("Div", ["v", "nz"], ["q"])]
    path = os.path.join(d, "consts.onnx")
    make_model(path, nodes, [H.make_tensor_value_info("x", TP.DOUBLE, [3]), f32("v", [3]),
                             H.make_tensor_value_info("m", TP.BOOL, [3])],
               [H.make_tensor_value_info("y", TP.DOUBLE, [3]), f32("z", [3]), f32("u", [3]),
                H.make_tensor_value_info("y17", TP.DOUBLE, [3]), f32("q", [3])], opset=13)
    xv, vv, mv = np.array([0.1, 1e-3, -2.5]), np.array([1, -0.5, 3], np.float32), np.array([True, False, True])
    with np.errstate(divide="ignore"):
        wants = [xv + np.pi, vv * np.float32(np.pi), np.where(mv, vv, np.float32(np.nan)),
                 xv + 0.30000000000000004, vv / np.float32(-0.0)]
    got, why = run_model("consts", path, dict(x=xv, v=vv, m=mv), 5)
    for g, w in zip(got if not why else [], wants):
        if g.dtype != w.dtype or not np.array_equal(g, w, equal_nan=True):
            why = "got %r, expected %r" % (g.tolist(), w.tolist())  # every digit
            break
    out.append(("constants pi (float32 and float64), 0.1 + 0.2 (float64) and -0.0 exactly, NaN where a mask says",
                why))

    # a causal mask folded at import, -inf where it is false, softmax
    nodes = [H.make_node("Constant", [], ["cols"], value=NH.from_array(np.arange(5, dtype=np.int64))),
             H.make_node("Constant", [], ["rows"], value=NH.from_array(np.array([[0], [2], [4]], np.int64))),
             H.make_node("LessOrEqual", ["cols", "rows"], ["mask"]),
             H.make_node("Constant", [], ["ninf"], value=NH.from_array(np.array(-np.inf, np.float32))),
             H.make_node("Where", ["mask", "s", "ninf"], ["w"]),
             H.make_node("Softmax", ["w"], ["z"], axis=-1)]
    path = os.path.join(d, "causal.onnx")
    make_model(path, nodes, [f32("s", [3, 5])], [f32("z", [3, 5])], opset=16)
    sv = (np.arange(15, dtype=np.float32).reshape(3, 5) - 7) / 3
    mask = np.arange(5)[None, :] <= np.array([[0], [2], [4]])
    e = np.where(mask, np.exp(sv.astype(np.float64) - sv.max(-1, keepdims=True)), 0)
    want = e / e.sum(-1, keepdims=True)
    got, why = run_model("causal", path, dict(s=sv), 1)
    if not why:
        g = got[0]
        if not np.array_equal(g == 0, ~mask) or not np.allclose(g, want, rtol=1e-5, atol=1e-7):
            why = "got %s, expected %s" % (np.array2string(g.ravel()), np.array2string(want.ravel()))
    out.append(("a causal mask folded at import, Where with -inf, Softmax", why))

    # a big initializer in external data, through Identity, then a folded Transpose
    rng = np.random.default_rng(8)
    K, N = 300, 256  # 76,800 elements: more than the 64 Ki a dry pass reads
    w = rng.standard_normal((N, K)).astype(np.float32)
    nodes = [H.make_node("Identity", ["w"], ["wi"]), H.make_node("Transpose", ["wi"], ["wt"], perm=[1, 0]),
             H.make_node("MatMul", ["x", "wt"], ["y"])]
    src = os.path.join(d, "tied_src.onnx")
    make_model(src, nodes, [f32("x", [2, K])], [f32("y", [2, N])], inits=[NH.from_array(w, "w")])
    os.makedirs(os.path.join(d, "tied"), exist_ok=True)
    path = os.path.join(d, "tied", "tied.onnx")
    onnx.save(onnx.load(src), path, save_as_external_data=True, all_tensors_to_one_file=True, location="tied.data",
              size_threshold=1024)
    xv = rng.standard_normal((2, K)).astype(np.float32)
    want = xv.astype(np.float64) @ w.T.astype(np.float64)
    got, why = run_model("tied", path, dict(x=xv), 1)
    if not why and not np.allclose(got[0], want, rtol=1e-4, atol=1e-4):
        why = "max error %g" % np.abs(got[0] - want).max()
    out.append(("a big initializer in external data through Identity, then a folded Transpose", why))

    # the import's size limit is 2^40 elements: at it, accepted; past it, an error
    for name, shape, ok in (("2^40", [1 << 40], True), ("2^20 x 2^20", [1 << 20, 1 << 20], True),
                            ("2^40 + 1", [(1 << 40) + 1], False)):
        path = os.path.join(d, "expand_%d.onnx" % len(out))
        make_model(path, [H.make_node("Expand", ["x", "s"], ["y"], name="ex")], [f32("x", [1])], [f32("y", None)],
                   inits=[NH.from_array(np.array(shape, np.int64), "s")], opset=13)
        r = run([nestc, "check", path])
        if ok:
            why = None if r.returncode == 0 else "exit %d: %s" % (r.returncode, short(r.stderr))
        else:
            why = None if r.returncode == 1 and "dimension 0 is out of range (%d)" % shape[0] in r.stderr \
                else "exit %d: %s" % (r.returncode, short(r.stderr))
        out.append(("Expand to %s elements: %s" % (name, "accepted" if ok else "out of range"), why))

    # a shape computed at run time by a node: said so, not "freeze it"
    path = os.path.join(d, "rt_shape.onnx")
    make_model(path, [H.make_node("Abs", ["s"], ["sa"], name="absolute"),
                      H.make_node("Reshape", ["x", "sa"], ["y"], name="rs")],
               [f32("x", [2, 3]), H.make_tensor_value_info("s", TP.INT64, [2])], [f32("y", [3, 2])])
    r = run([nestc, "check", path])
    needle = "node 'rs' (Reshape, opset 14): the shape ('sa') is computed at run time; nestc needs it at import"
    out.append(("Reshape to a shape computed at run time: a clear error",
                None if r.returncode == 1 and needle in r.stderr and "--freeze" not in r.stderr
                else "exit %d: %s" % (r.returncode, short(r.stderr))))
    # Pad in edge and reflect mode of a tensor with an empty axis: an empty result of the
    # padded shape (zeros of it: no gather reads an empty tensor)
    for name, mode, shape, pads, oshape in (("pad_empty_rows", "edge", [0, 3], [0, 1, 0, 1], [0, 5]),
                                            ("pad_empty_cols", "reflect", [3, 0], [1, 0, 1, 0], [5, 0])):
        path = os.path.join(d, name + ".onnx")
        make_model(path, [H.make_node("Pad", ["x", "p"], ["y"], mode=mode)], [f32("x", shape)], [f32("y", oshape)],
                   inits=[NH.from_array(np.array(pads, np.int64), "p")], opset=13)
        got, why = run_model(name, path, dict(x=np.zeros(shape, np.float32)), 1)
        if not why and got[0].shape != tuple(oshape):
            why = "shape %s, expected %s" % (got[0].shape, tuple(oshape))
        out.append(("Pad %s of f32%s: an empty f32%s" % (mode, shape, oshape), why))

    # a Concat of 1024 constants, the most inputs a node may have: folded at import
    n = 1024
    path = os.path.join(d, "concat1024.onnx")
    make_model(path, [H.make_node("Concat", ["c%d" % k for k in range(n)], ["y"], axis=0)], [], [f32("y", [n])],
               inits=[NH.from_array(np.array([k * 0.5], np.float32), "c%d" % k) for k in range(n)], opset=13)
    got, why = run_model("concat1024", path, {}, 1)
    if not why and not np.array_equal(got[0], np.arange(n, dtype=np.float32) * 0.5):
        why = "got %s" % np.array2string(got[0][:8])
    out.append(("Concat of 1024 constants (the most inputs of a node): folded", why))

    # an empty initializer (f32[0]) added to an input of shape [3, 0], and one returned as it
    # is: empty results of the right shapes, and the import writes each as zeros of its
    # shape, not as a param that the weights file would have to hold
    e0 = NH.from_array(np.zeros([0], np.float32), "e")
    for name, nodes, ins, oshape, feeds in (
            ("empty_add", [H.make_node("Add", ["x", "e"], ["y"])], [f32("x", [3, 0])], [3, 0],
             dict(x=np.zeros([3, 0], np.float32))),
            ("empty_alone", [H.make_node("Identity", ["e"], ["y"])], [], [0], {})):
        path = os.path.join(d, name + ".onnx")
        make_model(path, nodes, ins, [f32("y", oshape)], inits=[e0], opset=13)
        got, why = run_model(name, path, feeds, 1)
        if not why and got[0].shape != tuple(oshape):
            why = "shape %s, expected %s" % (got[0].shape, tuple(oshape))
        if not why:
            nest = os.path.join(d, name + ".nest")
            r = run([nestc, "import", path, "-o", nest, "-w", os.path.join(d, name + ".safetensors")])
            text = open(nest).read() if r.returncode == 0 else ""
            if r.returncode or "param " in text or "f32(zeros([0]))" not in text:
                why = "import: exit %d, %s%s" % (r.returncode, short(r.stderr), text[-300:])
        out.append(("an empty initializer (%s): f32%s, written as zeros, no param" % (name, oshape), why))

    # integer constants of one value: up to 2^24 in magnitude a literal (full(), exact
    # through f32), past it a param (a literal would round); values exact either way.
    # Two elements are the fewest a full() is written for (one is a weight: see the
    # one-element weights below)
    for v, lit, n in ((1 << 24, True, 4), (-(1 << 24), True, 4), ((1 << 24) + 1, False, 4), (7, True, 2)):
        name = "splat_%d" % len(out)
        path = os.path.join(d, name + ".onnx")
        make_model(path, [H.make_node("Add", ["x", "c"], ["y"])], [H.make_tensor_value_info("x", TP.INT64, [n])],
                   [H.make_tensor_value_info("y", TP.INT64, [n])], inits=[NH.from_array(np.full([n], v, np.int64), "c")],
                   opset=13)
        xv = np.array([0, 1, -1, 5][:n], np.int64)
        got, why = run_model(name, path, dict(x=xv), 1)
        if not why and not np.array_equal(got[0], xv + v):
            why = "got %s, expected %s" % (got[0], xv + v)
        if not why:
            nest = os.path.join(d, name + ".nest")
            r = run([nestc, "import", path, "-o", nest, "-w", os.path.join(d, name + ".safetensors")])
            text = open(nest).read() if r.returncode == 0 else ""
            if r.returncode or ("i64(full([%d], %s))" % (n, v if v > 0 else "(%d)" % v) in text) != lit \
                    or ("param c: i64[%d]" % n in text) == lit:
                why = "import: exit %d, %s%s" % (r.returncode, short(r.stderr), text[-300:])
        out.append(("an i64 constant of %d elements of one value %d: %s" % (n, v, "a literal" if lit else "a param"),
                    why))

    # a node without a required input: says which inputs it needs
    path = os.path.join(d, "one_input.onnx")
    make_model(path, [H.make_node("MatMul", ["x"], ["y"], name="mm")], [f32("x", [2, 2])], [f32("y", None)],
               opset=13)
    r = run([nestc, "check", path])
    out.append(("MatMul of one input: a clear error",
                None if r.returncode == 1 and "node 'mm' (MatMul, opset 13): needs two inputs" in r.stderr
                else "exit %d: %s" % (r.returncode, short(r.stderr))))

    # a value inside a function's call read after it: the import's plan of regions
    # fails, and it imports again without them
    fn = H.make_function("pkg", "Block", ["x", "w"], ["y"],
                         [H.make_node("MatMul", ["x", "w"], ["m"]), H.make_node("Relu", ["m"], ["r"]),
                          H.make_node("Add", ["x", "r"], ["y"])], [H.make_opsetid("", 14)])
    nodes, inits, ws, h = [], [], [], "x"
    for i in range(3):
        w = (rng.standard_normal((4, 4)) * 0.3).astype(np.float32)
        ws.append(w)
        inits.append(NH.from_array(w, "blocks.%d.w" % i))
        nodes.append(H.make_node("Block", [h, "blocks.%d.w" % i], ["h%d" % i], domain="pkg", name="blocks.%d" % i))
        h = "h%d" % i
    nodes.append(H.make_node("Add", [h, "blocks.1/m"], ["y"]))
    g = H.make_graph(nodes, "g", [f32("x", [2, 4])], [f32("y", [2, 4])], initializer=inits)
    path = os.path.join(d, "fn_inner.onnx")
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 14), H.make_opsetid("pkg", 1)], functions=[fn]), path)
    xv = rng.standard_normal((2, 4)).astype(np.float32)
    hv, ms = xv.astype(np.float64), []
    for w in ws:
        ms.append(hv @ w)
        hv = hv + np.maximum(ms[-1], 0)
    got, why = run_model("fn_inner", path, dict(x=xv), 1)
    if not why and not np.allclose(got[0], hv + ms[1], rtol=1e-5, atol=1e-6):
        why = "max error %g" % np.abs(got[0] - (hv + ms[1])).max()
    out.append(("a value inside a function's call read after it: imported without regions", why))
    # layers scaled by one-element weights: params (fields of the region's record), not
    # literals that would make each layer's body differ
    nodes, inits, ws, h = [], [], [], "x"
    for i in range(16):
        w = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)
        sc = np.array([0.5 + 0.0625 * i], np.float32)
        ws.append((w, sc))
        inits += [NH.from_array(w, "layers.%d.fc.weight" % i), NH.from_array(sc, "layers.%d.scale" % i)]
        nodes += [H.make_node("MatMul", [h, "layers.%d.fc.weight" % i], ["mm%d" % i], name="/layers.%d/mm" % i),
                  H.make_node("Mul", ["mm%d" % i, "layers.%d.scale" % i], ["sc%d" % i], name="/layers.%d/mul" % i),
                  H.make_node("Relu", ["sc%d" % i], ["re%d" % i], name="/layers.%d/relu" % i),
                  H.make_node("Add", [h, "re%d" % i], ["h%d" % i], name="/layers.%d/add" % i)]
        h = "h%d" % i
    nodes.append(H.make_node("Tanh", [h], ["y"]))
    path = os.path.join(d, "layer_scale.onnx")
    make_model(path, nodes, [f32("x", [4, 8])], [f32("y", [4, 8])], inits=inits, opset=17)
    r = run([nestc, "report", path])
    ok = r.returncode == 0 and "region layer: 4 nodes, 16 occurrences" in r.stdout
    out.append(("layers scaled by one-element weights: one region, one call per layer",
                None if ok else "exit %d: %s%s" % (r.returncode, r.stdout[:300], short(r.stderr))))
    xv = rng.standard_normal((4, 8)).astype(np.float32)
    hv = xv.astype(np.float64)
    for w, sc in ws:
        hv = hv + np.maximum(hv @ w * sc, 0)
    got, why = run_model("layer_scale", path, dict(x=xv), 1)
    if not why and not np.allclose(got[0], np.tanh(hv), rtol=1e-5, atol=1e-6):
        why = "max error %g" % np.abs(got[0] - np.tanh(hv)).max()
    out.append(("layers scaled by one-element weights: values", why))
    return out
