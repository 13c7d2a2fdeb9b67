#!/usr/bin/python3
"""The networks of `make bench` (issue #9): samples/bert.nest, samples/vit.nest and
samples/resnet50.nest at small configurations (-D overrides), run by `nestc run` on random
weights and compared with NumPy (float64) implementations written here from the models'
definitions (Hugging Face BertModel and ViTModel, torchvision's resnet50), and each sample
at its full size through `nestc check`.

    /usr/bin/python3 tests/nets/run.py NESTC_PATH [NAME...]

Weights names and shapes are derived here, not read from nestc; a run passes when
max|out - ref| <= 1e-4 * max|ref|. The helpers (safetensors writer, weight draws,
layernorm, gelu, conv2d, ...) are those of tests/models/run.py. Prints `ok NAME ...` or
`FAIL NAME ...` per case and a last line `N passed, N failed`. NumPy only.
"""
import importlib.util
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("model_tests", os.path.join(HERE, "..", "models", "run.py"))
mt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mt)

# ----------------------------------------------------------------------------- bert

BERT_CFG = {"N": 2, "T": 8, "L": 2, "D": 32, "H": 4, "FF": 64, "V": 50, "MAXPOS": 16}
EPS = 1e-12


def _lin(name, o, i):
    return [(name + ".weight", (o, i), "w", i), (name + ".bias", (o,), "bias", 0)]


def _ln(name, d):
    return [(name + ".weight", (d,), "scale", 0), (name + ".bias", (d,), "bias", 0)]


def bert_params(c):
    D, FF = c["D"], c["FF"]
    p = [("embeddings.word_embeddings.weight", (c["V"], D), "emb", 0),
         ("embeddings.position_embeddings.weight", (c["MAXPOS"], D), "emb", 0),
         ("embeddings.token_type_embeddings.weight", (2, D), "emb", 0)] + _ln("embeddings.LayerNorm", D)
    for i in range(c["L"]):
        n = "encoder.layer.%d." % i
        for q in ("query", "key", "value"):
            p += _lin(n + "attention.self." + q, D, D)
        p += _lin(n + "attention.output.dense", D, D) + _ln(n + "attention.output.LayerNorm", D)
        p += _lin(n + "intermediate.dense", FF, D) + _lin(n + "output.dense", D, FF) + _ln(n + "output.LayerNorm", D)
    return p


def bert_inputs(c, rng):
    return {"tokens": rng.integers(0, c["V"], size=(c["N"], c["T"]), dtype=np.int32)}


def attention(x, W, n, H):
    """Bidirectional multi-head self-attention of one sequence x [S, D], weights n.query etc."""
    S, D = x.shape
    hd = D // H
    lin = lambda y, m: y @ W[n + m + ".weight"].T + W[n + m + ".bias"]
    q, k, v = (lin(x, m).reshape(S, H, hd).transpose(1, 0, 2) for m in ("query", "key", "value"))
    a = mt.softmax(np.einsum("hsd,htd->hst", q, k) / math.sqrt(hd))
    return np.einsum("hst,htd->shd", a, v).reshape(S, D)


def bert_ref(c, W, inp):
    out = []
    lin = lambda y, m: y @ W[m + ".weight"].T + W[m + ".bias"]
    ln = lambda y, m: mt.layernorm(y, W[m + ".weight"], W[m + ".bias"], EPS)
    for toks in inp["tokens"]:
        T = len(toks)
        x = (W["embeddings.word_embeddings.weight"][toks] + W["embeddings.position_embeddings.weight"][:T]
             + W["embeddings.token_type_embeddings.weight"][0])
        x = ln(x, "embeddings.LayerNorm")
        for i in range(c["L"]):
            n = "encoder.layer.%d." % i
            x = ln(x + lin(attention(x, W, n + "attention.self.", c["H"]), n + "attention.output.dense"),
                   n + "attention.output.LayerNorm")
            m = mt.gelu(lin(x, n + "intermediate.dense"))
            x = ln(x + lin(m, n + "output.dense"), n + "output.LayerNorm")
        out.append(x)
    return np.stack(out)

# ----------------------------------------------------------------------------- vit

VIT_CFG = {"N": 2, "IMG": 16, "PATCH": 4, "L": 2, "D": 32, "H": 4, "FF": 64}


def vit_params(c):
    D, FF, P = c["D"], c["FF"], c["PATCH"]
    S = (c["IMG"] // P) ** 2 + 1
    p = [("embeddings.cls_token", (1, 1, D), "emb", 0), ("embeddings.position_embeddings", (1, S, D), "emb", 0),
         ("embeddings.patch_embeddings.projection.weight", (D, 3, P, P), "w", 3 * P * P),
         ("embeddings.patch_embeddings.projection.bias", (D,), "bias", 0)]
    for i in range(c["L"]):
        n = "encoder.layer.%d." % i
        p += _ln(n + "layernorm_before", D)
        for q in ("query", "key", "value"):
            p += _lin(n + "attention.attention." + q, D, D)
        p += _lin(n + "attention.output.dense", D, D) + _ln(n + "layernorm_after", D)
        p += _lin(n + "intermediate.dense", FF, D) + _lin(n + "output.dense", D, FF)
    return p + _ln("layernorm", D)


def vit_inputs(c, rng):
    return {"images": rng.standard_normal((c["N"], 3, c["IMG"], c["IMG"])).astype(np.float32)}


def vit_ref(c, W, inp):
    P, D = c["PATCH"], c["D"]
    lin = lambda y, m: y @ W[m + ".weight"].T + W[m + ".bias"]
    ln = lambda y, m: mt.layernorm(y, W[m + ".weight"], W[m + ".bias"], EPS)
    pe = mt.conv2d(inp["images"], W["embeddings.patch_embeddings.projection.weight"],
                   W["embeddings.patch_embeddings.projection.bias"], stride=P)
    out = []
    for img in pe:                                   # [D, G, G] -> patches row by row
        x = np.concatenate([W["embeddings.cls_token"][0], img.reshape(D, -1).T]) + W["embeddings.position_embeddings"][0]
        for i in range(c["L"]):
            n = "encoder.layer.%d." % i
            x = x + lin(attention(ln(x, n + "layernorm_before"), W, n + "attention.attention.", c["H"]),
                        n + "attention.output.dense")
            x = x + lin(mt.gelu(lin(ln(x, n + "layernorm_after"), n + "intermediate.dense")), n + "output.dense")
        out.append(ln(x, "layernorm")[0])
    return np.stack(out)

# ----------------------------------------------------------------------------- resnet50

RESNET50_CFG = {"BATCH": 2, "IMG": 32, "C0": 4, "CLASSES": 10}


def resnet50_params(c):
    C0 = c["C0"]
    p = [("conv1.weight", (C0, 3, 7, 7), "he", 3 * 49)] + mt._bn("bn1", C0)
    i = C0
    for s, nblocks in enumerate((3, 4, 6, 3)):
        w = C0 << s
        for b in range(nblocks):
            blk = "layer%d.%d" % (s + 1, b)
            cin = i if b == 0 else 4 * w
            p += mt._cbn(blk, w, cin, 1, n="1") + mt._cbn(blk, w, w, 3, n="2") + mt._cbn(blk, 4 * w, w, 1, n="3")
            if b == 0:
                p += mt._cbn(blk, 4 * w, i, 1, "downsample.0", "downsample.1")
        i = 4 * w
    return p + [("fc.weight", (c["CLASSES"], i), "w", i), ("fc.bias", (c["CLASSES"],), "bias", 0)]


def resnet50_inputs(c, rng):
    return {"x": rng.standard_normal((c["BATCH"], 3, c["IMG"], c["IMG"])).astype(np.float32)}


def resnet50_ref(c, W, inp):
    """torchvision's ResNet-50 in eval mode: bottlenecks, the stride on the 3x3 (v1.5)."""
    zero = np.zeros(1)
    cv = lambda x, n, s, p: mt.conv2d(x, W[n + ".weight"], zero, s, p)
    bn = lambda x, n: mt.batch_norm(x, W[n + ".running_mean"], W[n + ".running_var"], W[n + ".weight"],
                                    W[n + ".bias"])
    h = mt.max_pool2d(mt.relu(bn(cv(inp["x"], "conv1", 2, 3), "bn1")), 3, 2, 1)
    for s, nblocks in enumerate((3, 4, 6, 3)):
        for b in range(nblocks):
            n = "layer%d.%d" % (s + 1, b)
            stride = 2 if (s > 0 and b == 0) else 1
            y = mt.relu(bn(cv(h, n + ".conv1", 1, 0), n + ".bn1"))
            y = mt.relu(bn(cv(y, n + ".conv2", stride, 1), n + ".bn2"))
            y = bn(cv(y, n + ".conv3", 1, 0), n + ".bn3")
            short = bn(cv(h, n + ".downsample.0", stride, 0), n + ".downsample.1") if b == 0 else h
            h = mt.relu(y + short)
    return h.mean(axis=(2, 3)) @ W["fc.weight"].T + W["fc.bias"]

# ----------------------------------------------------------------------------- driver

MODELS = [
    ("bert", "bert.nest", BERT_CFG, bert_params, bert_inputs, bert_ref),
    ("vit", "vit.nest", VIT_CFG, vit_params, vit_inputs, vit_ref),
    ("resnet50", "resnet50.nest", RESNET50_CFG, resnet50_params, resnet50_inputs, resnet50_ref),
]


def check_full(nestc, sample):
    """`nestc check` of the sample at its default (full) size."""
    r = subprocess.run([nestc, "check", os.path.join(mt.SAMPLES, sample)], capture_output=True, text=True,
                       timeout=mt.TIMEOUT)
    if r.returncode != 0:
        return False, "nestc check exit %d: %s" % (r.returncode, (r.stderr or r.stdout).strip()[-400:])
    if r.stderr.strip():
        return False, "nestc check printed: %s" % r.stderr.strip()[-400:]
    return True, ""


def main(argv):
    if len(argv) < 2 or argv[1].startswith("-"):
        print("usage: %s NESTC_PATH [NAME...]" % argv[0], file=sys.stderr)
        return 2
    nestc, only = os.path.abspath(argv[1]), argv[2:]
    passed = failed = 0
    tmp = tempfile.mkdtemp(prefix="nestc-nets-")
    try:
        for idx, m in enumerate(MODELS):
            if only and m[0] not in only:
                continue
            for case, fn in (("small", lambda: mt.run_model(nestc, tmp, 50 + idx, m)),
                             ("full-check", lambda: check_full(nestc, m[1]))):
                try:
                    ok, info = fn()
                except Exception as e:  # a broken output file and the like
                    ok, info = False, "%s: %s" % (type(e).__name__, e)
                print("%s %s.%s %s" % ("ok" if ok else "FAIL", m[0], case, info), flush=True)
                passed += ok
                failed += not ok
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
