"""A BERT-style encoder layer as torch.onnx.export (opset 14) writes it, built here with
onnx.helper node for node in the exporter's order (so no PyTorch is needed): Add(bias,
MatMul) projections, the heads split by Reshape + Transpose, an additive padding mask,
Softmax, LayerNormalization decomposed into ReduceMean .. Add, and the exact GELU as
Div / Erf / Add / Mul / Mul. Two more outputs carry the other GELU spellings exporters
write (Hugging Face's x * 0.5 first, with Mul by 1/sqrt 2), and one near-GELU that must
not be taken for one (1.5 where the 1 is).

Checked (tests/onnx/run.py --check runs these among its cli checks): `nestc import` writes
gelu(...) and layernorm(...) for the patterns and erf only for the near-GELU; `nestc run`
and the compiled model give NumPy's float64 values (max |got - want| <= 1e-4 max |want|);
the compiled layer applies its GELU in the FF matmul's epilogue (NESTRT_PROFILE=2 lists
no gelu kernel)."""
import math
import os
import re
import subprocess

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as H
from onnx import numpy_helper

B, T, D, NH, FF, EPS = 2, 5, 8, 2, 16, 1e-12
erf = np.vectorize(math.erf)


def build(path, seed=11):
    """Writes the model; returns (x, mask, weights) for the reference."""
    rng = np.random.default_rng(seed)
    hd = D // NH
    w = {}
    for name, shape, s in (("q", (D, D), 0.5), ("k", (D, D), 0.5), ("v", (D, D), 0.5), ("o", (D, D), 0.5),
                           ("f1", (D, FF), 0.5), ("f2", (FF, D), 0.3)):
        w[name + ".w"] = (rng.standard_normal(shape) * s).astype(np.float32)
        w[name + ".b"] = (rng.standard_normal(shape[1]) * 0.1).astype(np.float32)
    for ln in ("ln1", "ln2"):
        w[ln + ".weight"] = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
        w[ln + ".bias"] = (0.1 * rng.standard_normal(D)).astype(np.float32)
    mask = np.zeros((B, 1, 1, T), np.float32)
    mask[1, 0, 0, T - 2:] = -10000.0  # the second sequence is padded
    w["mask"] = mask
    nodes = []
    cn = [0]

    def C(v, dt=np.float32):
        cn[0] += 1
        name = "/Constant_%d_output_0" % cn[0]
        nodes.append(H.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, dt))))
        return name

    def n(op, ins, out=None, **kw):
        out = out or "/%s_%d_output_0" % (op, len(nodes))
        nodes.append(H.make_node(op, ins, [out], **kw))
        return out

    def linear(x, p):
        return n("Add", [p + ".b", n("MatMul", [x, p + ".w"])])

    def layernorm(x, p):
        m = n("ReduceMean", [x], axes=[-1])
        d = n("Sub", [x, m])
        v = n("ReduceMean", [n("Pow", [d, C(2.0)])], axes=[-1])
        s = n("Sqrt", [n("Add", [v, C(EPS)])])
        return n("Add", [n("Mul", [n("Div", [d, s]), p + ".weight"]), p + ".bias"])

    heads = C(np.array([B, T, NH, hd], np.int64), np.int64)
    q = n("Transpose", [n("Reshape", [linear("x", "q"), heads])], perm=[0, 2, 1, 3])
    k = n("Transpose", [n("Reshape", [linear("x", "k"), heads])], perm=[0, 2, 3, 1])
    v = n("Transpose", [n("Reshape", [linear("x", "v"), heads])], perm=[0, 2, 1, 3])
    s = n("Add", [n("Mul", [n("MatMul", [q, k]), C(1.0 / np.sqrt(hd))]), "mask"])
    a = n("MatMul", [n("Softmax", [s], axis=-1), v])
    a = n("Reshape", [n("Transpose", [a], perm=[0, 2, 1, 3]), C(np.array([B, T, D], np.int64), np.int64)])
    h = layernorm(n("Add", ["x", linear(a, "o")]), "ln1")
    f = linear(h, "f1")
    # torch's F.gelu: x / sqrt 2, erf, + 1, x *, * 0.5
    g = n("Mul", [n("Mul", [f, n("Add", [n("Erf", [n("Div", [f, C(1.4142135623730951)])]), C(1.0)])]), C(0.5)])
    layernorm(n("Add", [h, linear(g, "f2")]), "ln2")
    y = nodes[-1].output[0] = "y"
    # Hugging Face's gelu: x * 0.5 first, then * (1 + erf(x * 1/sqrt 2))
    hh = n("Mul", [y, C(0.5)])
    n("Mul", [hh, n("Add", [C(1.0), n("Erf", [n("Mul", [y, C(0.7071067811865476)])])])], "z")
    # not a GELU: 1.5 + erf
    n("Mul", [n("Mul", [y, n("Add", [n("Erf", [n("Div", [y, C(1.4142135623730951)])]), C(1.5)])]), C(0.5)], "u")
    inits = [numpy_helper.from_array(a_, k_) for k_, a_ in w.items()]
    outs = [H.make_tensor_value_info(o, TP.FLOAT, [B, T, D]) for o in ("y", "z", "u")]
    g_ = H.make_graph(nodes, "bert_layer", [H.make_tensor_value_info("x", TP.FLOAT, [B, T, D])], outs,
                      initializer=inits)
    onnx.save(H.make_model(g_, opset_imports=[H.make_opsetid("", 14)]), path)
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    return x, w


def reference(x, w):
    """float64 NumPy, from the math: the three outputs y, z, u."""
    f = {k: v.astype(np.float64) for k, v in w.items()}
    x = x.astype(np.float64)
    hd = D // NH

    def ln(x, p):
        m = x.mean(-1, keepdims=True)
        return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + EPS) * f[p + ".weight"] + f[p + ".bias"]

    def heads(t):
        return t.reshape(B, T, NH, hd).transpose(0, 2, 1, 3)

    def gelu(t):
        return 0.5 * t * (1 + erf(t / np.sqrt(2)))

    q, k, v = (heads(x @ f[p + ".w"] + f[p + ".b"]) for p in ("q", "k", "v"))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + f["mask"]
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    a = (p @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    h = ln(x + a @ f["o.w"] + f["o.b"], "ln1")
    y = ln(h + gelu(h @ f["f1.w"] + f["f1.b"]) @ f["f2.w"] + f["f2.b"], "ln2")
    return y, gelu(y), 0.5 * y * (1.5 + erf(y / np.sqrt(2)))


def max_rel(got, want):
    return float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())


def checks(nestc, d, run, short, cr):
    """(name, None or why) pairs; run/short/cr: tests/onnx/run.py's helpers and the
    compiled-driver module."""
    out = []
    path = os.path.join(d, "bert_layer.onnx")
    x, w = build(path)
    want = reference(x, w)
    xp = os.path.join(d, "bx.npy")
    np.save(xp, x)
    nest, wf = os.path.join(d, "bert_layer.nest"), os.path.join(d, "bert_layer.safetensors")
    r = run([nestc, "import", path, "-o", nest, "-w", wf])
    text = open(nest).read() if r.returncode == 0 else ""
    ok = (text.count("gelu(") == 2 and text.count("erf(") == 1 and text.count("layernorm(") == 2
          and "pow(" not in text and "sqrt(" not in text)
    out.append(("exported BERT layer: erf GELU and layernorm patterns fused",
                None if ok else "exit %d: %s%s" % (r.returncode, short(r.stderr), text)))
    outs = [os.path.join(d, "b%s.npy" % o) for o in "yzu"]
    r = run([nestc, "run", path, "--input", "x=" + xp] + sum((["--output", o] for o in outs), []))
    why = "exit %d: %s" % (r.returncode, short(r.stderr)) if r.returncode else None
    for o, wv in zip(outs, want):
        if not why and max_rel(np.load(o), wv) > 1e-4:
            why = "%s: max rel. error %.2e vs NumPy float64" % (os.path.basename(o), max_rel(np.load(o), wv))
    out.append(("exported BERT layer: values", why))
    od = os.path.join(d, "bout")
    r = run([nestc, "build", nest, "-o", od, "--name", "bl", "-j1", "--no-cache"])
    if r.returncode:
        out.append(("exported BERT layer compiled", "build: exit %d: %s" % (r.returncode, short(r.stderr))))
        return out
    try:
        e = cr.parse_header(os.path.join(od, "bl.h"), "bl", strict_names=False)["forward"]
        couts = [os.path.join(d, "bc%s.npy" % o) for o in "yzu"]
        call = cr.Call(e, wf, {e.inputs[0][0]: xp}, couts, twice=False)
        objs = sorted(os.path.join(od, f) for f in os.listdir(od) if f.endswith(".o"))
        exe = cr.compile_driver(d, [call], ["bl"], [od], objs, name="bdriver")
        r = subprocess.run([exe], capture_output=True, text=True, env=dict(os.environ, NESTRT_PROFILE="2"),
                           timeout=120)
        why = "exit %d: %s" % (r.returncode, short(r.stderr)) if r.returncode else None
        for o, wv in zip(couts, want):
            if not why and max_rel(np.load(o), wv) > 1e-4:
                why = "%s: max rel. error %.2e vs NumPy float64" % (os.path.basename(o), max_rel(np.load(o), wv))
        # the first GELU follows the FF matmul's bias: its epilogue, not a kernel of its own
        kernels = re.findall(r"^\s+(\w+)\s+\w+\[[^\]]*\]\s", r.stderr, re.M)
        if not why and ("matmul" not in kernels or kernels.count("gelu") != 1):
            why = "expected one gelu kernel (z's; y's in the matmul epilogue), profile:\n" + r.stderr
    except cr.Fail as ex:
        why = str(ex)
    out.append(("exported BERT layer compiled: values, GELU in the matmul epilogue", why))
    return out
