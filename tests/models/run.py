#!/usr/bin/python3
"""End-to-end model tests: run each sample in samples/ with `nestc run` on random weights
and compare with an independent NumPy (float64) implementation written from the math.

    /usr/bin/python3 tests/models/run.py NESTC_PATH [MODEL...]
    /usr/bin/python3 tests/models/run.py --self-test      # check the NumPy references only

For each model: the parameter names and shapes are derived here (mirroring the model's
declarations, not read from nestc), random weights are written as .safetensors, inputs as
.npy, `nestc run FILE -D ... --weights W --input NAME=IN.npy --output OUT.npy` is run and
its output must satisfy max|out - ref| <= 1e-4 * max|ref|.

Prints one line per model (`ok NAME max_err=... ref_max=...` or `FAIL NAME ...`) and a
last line `N passed, N failed`; exits 1 if anything failed. NumPy only: no torch.
"""

import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
RTOL = 1e-4
TIMEOUT = 300  # seconds for one nestc run

# ----------------------------------------------------------------------------- files


def write_safetensors(path, tensors):
    """tensors: list of (name, ndarray). Writes the safetensors format: u64 LE header
    length, JSON header (padded with spaces to 8 bytes), then the raw little-endian data."""
    dtypes = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64", np.dtype("<i4"): "I32",
              np.dtype("<i8"): "I64", np.dtype("bool"): "BOOL"}
    header, blobs, off = {}, [], 0
    for name, arr in tensors:
        arr = np.asarray(arr, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        data = arr.tobytes()
        header[name] = {"dtype": dtypes[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def make_weights(specs, rng):
    """specs: list of (name, shape, kind, fan_in). kind: 'w' (normal, std 1/sqrt(fan_in)),
    'he' (std sqrt(2/fan_in)), 'emb' (std 0.3: GPT-2's tied logits stay small enough that
    gelu vs gelu_tanh exceeds the tolerance), 'scale' (1 + 0.1 N), 'bias' (0.1 N)."""
    out = []
    for name, shape, kind, fan_in in specs:
        z = rng.standard_normal(shape)
        if kind == "w":
            a = z / math.sqrt(fan_in)
        elif kind == "he":
            a = z * math.sqrt(2.0 / fan_in)
        elif kind == "emb":
            a = 0.3 * z
        elif kind == "scale":
            a = 1.0 + 0.1 * z
        elif kind == "bias":
            a = 0.1 * z
        else:
            raise ValueError(kind)
        out.append((name, a.astype(np.float32)))
    return out


# ----------------------------------------------------------------------------- shared math

_erf = np.vectorize(math.erf, otypes=[np.float64])


def layernorm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def softmax(x):
    m = x.max(-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(-1, keepdims=True)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def relu(x):
    return np.maximum(x, 0.0)


def causal_attention_probs(q, k):
    """q, k: [heads, T, hd] -> softmax(q k^T / sqrt(hd)) with j > i masked: [heads, T, T]."""
    t, hd = q.shape[1], q.shape[2]
    s = np.einsum("htd,hsd->hts", q, k) / math.sqrt(hd)
    s = np.where(np.triu(np.ones((t, t), dtype=bool), 1), -np.inf, s)
    return softmax(s)


def conv2d(x, w, b, stride=1, pad=0):
    n, c, hh, ww = x.shape
    o, ci, kh, kw = w.shape
    assert ci == c
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho = (hh + 2 * pad - kh) // stride + 1
    wo = (ww + 2 * pad - kw) // stride + 1
    cols = np.empty((n, c, kh, kw, ho, wo))
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i:i + stride * (ho - 1) + 1:stride,
                                  j:j + stride * (wo - 1) + 1:stride]
    return np.einsum("ncijyx,ocij->noyx", cols, w) + b[None, :, None, None]


def max_pool2d(x, k, stride, pad):
    n, c, hh, ww = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    ho = (hh + 2 * pad - k) // stride + 1
    wo = (ww + 2 * pad - k) // stride + 1
    out = np.full((n, c, ho, wo), -np.inf)
    for i in range(k):
        for j in range(k):
            out = np.maximum(out, xp[:, :, i:i + stride * (ho - 1) + 1:stride,
                                     j:j + stride * (wo - 1) + 1:stride])
    return out


# ----------------------------------------------------------------------------- gpt2

GPT2_CFG = {"L": 2, "D": 64, "H": 4, "V": 256, "CTX": 64, "S": 16}


def gpt2_params(c):
    L, D, V, CTX = c["L"], c["D"], c["V"], c["CTX"]
    p = [("wte.weight", (V, D), "emb", 0), ("wpe.weight", (CTX, D), "emb", 0)]
    for i in range(L):
        h = "h.%d." % i
        p += [(h + "ln_1.weight", (D,), "scale", 0), (h + "ln_1.bias", (D,), "bias", 0),
              (h + "attn.c_attn.weight", (D, 3 * D), "w", D), (h + "attn.c_attn.bias", (3 * D,), "bias", 0),
              (h + "attn.c_proj.weight", (D, D), "w", D), (h + "attn.c_proj.bias", (D,), "bias", 0),
              (h + "ln_2.weight", (D,), "scale", 0), (h + "ln_2.bias", (D,), "bias", 0),
              (h + "mlp.c_fc.weight", (D, 4 * D), "w", D), (h + "mlp.c_fc.bias", (4 * D,), "bias", 0),
              (h + "mlp.c_proj.weight", (4 * D, D), "w", 4 * D), (h + "mlp.c_proj.bias", (D,), "bias", 0)]
    p += [("ln_f.weight", (D,), "scale", 0), ("ln_f.bias", (D,), "bias", 0)]
    return p


def gpt2_inputs(c, rng):
    return {"tokens": rng.integers(0, c["V"], size=(c["S"],)).astype(np.int32)}


def gpt2_ref(c, W, inp, probs_out=None):
    L, D, H, S = c["L"], c["D"], c["H"], c["S"]
    hd = D // H
    tok = inp["tokens"]
    x = W["wte.weight"][tok] + W["wpe.weight"][:S]
    for i in range(L):
        g = lambda n: W["h.%d.%s" % (i, n)]
        a = layernorm(x, g("ln_1.weight"), g("ln_1.bias"))
        qkv = a @ g("attn.c_attn.weight") + g("attn.c_attn.bias")
        q, k, v = qkv[:, :D], qkv[:, D:2 * D], qkv[:, 2 * D:]
        heads = lambda t: t.reshape(S, H, hd).transpose(1, 0, 2)  # [H, S, hd]
        pr = causal_attention_probs(heads(q), heads(k))
        if probs_out is not None:
            probs_out.append(pr)
        o = (pr @ heads(v)).transpose(1, 0, 2).reshape(S, D)
        x = x + (o @ g("attn.c_proj.weight") + g("attn.c_proj.bias"))
        m = gelu_tanh(layernorm(x, g("ln_2.weight"), g("ln_2.bias")) @ g("mlp.c_fc.weight") + g("mlp.c_fc.bias"))
        x = x + (m @ g("mlp.c_proj.weight") + g("mlp.c_proj.bias"))
    x = layernorm(x, W["ln_f.weight"], W["ln_f.bias"])
    return x @ W["wte.weight"].T


# ----------------------------------------------------------------------------- mlp

MLP_CFG = {"B": 4, "D_IN": 32, "D": 64, "D_OUT": 10, "L": 2}


def mlp_params(c):
    D = c["D"]
    p = [("fc_in.weight", (c["D_IN"], D), "w", c["D_IN"]), ("fc_in.bias", (D,), "bias", 0)]
    for i in range(c["L"]):
        p += [("layers.%d.weight" % i, (D, D), "w", D), ("layers.%d.bias" % i, (D,), "bias", 0)]
    p += [("fc_out.weight", (D, c["D_OUT"]), "w", D), ("fc_out.bias", (c["D_OUT"],), "bias", 0)]
    return p


def mlp_inputs(c, rng):
    return {"x": rng.standard_normal((c["B"], c["D_IN"])).astype(np.float32)}


def mlp_ref(c, W, inp):
    h = relu(inp["x"] @ W["fc_in.weight"] + W["fc_in.bias"])
    for i in range(c["L"]):
        h = h + gelu(h @ W["layers.%d.weight" % i] + W["layers.%d.bias" % i])
    return h @ W["fc_out.weight"] + W["fc_out.bias"]


# ----------------------------------------------------------------------------- llama

LLAMA_CFG = {"L": 2, "D": 64, "H": 4, "KVH": 2, "F": 128, "V": 256, "S": 16}
LLAMA_THETA = 10000.0  # the model's defaults, not overridden
LLAMA_EPS = 1e-5


def llama_params(c):
    L, D, H, KVH, F, V = c["L"], c["D"], c["H"], c["KVH"], c["F"], c["V"]
    kvd = KVH * (D // H)
    # Hugging Face nn.Linear layout: weight [out, in]
    p = [("model.embed_tokens.weight", (V, D), "emb", 0)]
    for i in range(L):
        l = "model.layers.%d." % i
        p += [(l + "input_layernorm.weight", (D,), "scale", 0),
              (l + "self_attn.q_proj.weight", (D, D), "w", D),
              (l + "self_attn.k_proj.weight", (kvd, D), "w", D),
              (l + "self_attn.v_proj.weight", (kvd, D), "w", D),
              (l + "self_attn.o_proj.weight", (D, D), "w", D),
              (l + "post_attention_layernorm.weight", (D,), "scale", 0),
              (l + "mlp.gate_proj.weight", (F, D), "w", D),
              (l + "mlp.up_proj.weight", (F, D), "w", D),
              (l + "mlp.down_proj.weight", (D, F), "w", F)]
    p += [("model.norm.weight", (D,), "scale", 0), ("lm_head.weight", (V, D), "w", D)]
    return p


llama_inputs = gpt2_inputs


def rope_cos_sin(S, hd, theta):
    inv_freq = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)  # [hd/2]
    ang = np.outer(np.arange(S, dtype=np.float64), inv_freq)               # [S, hd/2]
    emb = np.concatenate([ang, ang], axis=-1)                               # [S, hd]
    return np.cos(emb), np.sin(emb)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def llama_ref(c, W, inp, probs_out=None):
    L, D, H, KVH, S = c["L"], c["D"], c["H"], c["KVH"], c["S"]
    hd = D // H
    cos, sin = rope_cos_sin(S, hd, LLAMA_THETA)
    rope = lambda t: t * cos + rotate_half(t) * sin
    x = W["model.embed_tokens.weight"][inp["tokens"]]
    for i in range(L):
        g = lambda n: W["model.layers.%d.%s" % (i, n)]
        a = rmsnorm(x, g("input_layernorm.weight"), LLAMA_EPS)
        q = (a @ g("self_attn.q_proj.weight").T).reshape(S, H, hd).transpose(1, 0, 2)
        k = (a @ g("self_attn.k_proj.weight").T).reshape(S, KVH, hd).transpose(1, 0, 2)
        v = (a @ g("self_attn.v_proj.weight").T).reshape(S, KVH, hd).transpose(1, 0, 2)
        q, k = rope(q), rope(k)
        # repeat_kv: kv head j serves query heads j*n_rep .. (j+1)*n_rep - 1
        k = np.repeat(k, H // KVH, axis=0)
        v = np.repeat(v, H // KVH, axis=0)
        pr = causal_attention_probs(q, k)
        if probs_out is not None:
            probs_out.append(pr)
        o = (pr @ v).transpose(1, 0, 2).reshape(S, D)
        x = x + o @ g("self_attn.o_proj.weight").T
        m = rmsnorm(x, g("post_attention_layernorm.weight"), LLAMA_EPS)
        m = (silu(m @ g("mlp.gate_proj.weight").T) * (m @ g("mlp.up_proj.weight").T)) @ g("mlp.down_proj.weight").T
        x = x + m
    x = rmsnorm(x, W["model.norm.weight"], LLAMA_EPS)
    return x @ W["lm_head.weight"].T


# ----------------------------------------------------------------------------- resnet

RESNET_CFG = {"BATCH": 2, "IMG": 32, "C0": 8, "CLASSES": 10}
RESNET_IN_C = 3  # the model's default, not overridden


def _conv(name, o, i, k):
    return [(name + ".weight", (o, i, k, k), "he", i * k * k), (name + ".bias", (o,), "bias", 0)]


def resnet_params(c):
    C0 = c["C0"]
    p = _conv("conv1", C0, RESNET_IN_C, 7)
    for b in range(2):
        p += _conv("layer1.%d.conv1" % b, C0, C0, 3) + _conv("layer1.%d.conv2" % b, C0, C0, 3)
    for s in range(2, 5):
        ci, co = C0 * 2 ** (s - 2), C0 * 2 ** (s - 1)
        p += _conv("layer%d.0.conv1" % s, co, ci, 3) + _conv("layer%d.0.conv2" % s, co, co, 3)
        p += _conv("layer%d.0.downsample.0" % s, co, ci, 1)
        p += _conv("layer%d.1.conv1" % s, co, co, 3) + _conv("layer%d.1.conv2" % s, co, co, 3)
    p += [("fc.weight", (c["CLASSES"], 8 * C0), "w", 8 * C0), ("fc.bias", (c["CLASSES"],), "bias", 0)]
    return p


def resnet_inputs(c, rng):
    return {"x": rng.standard_normal((c["BATCH"], RESNET_IN_C, c["IMG"], c["IMG"])).astype(np.float32)}


def resnet_ref(c, W, inp):
    cv = lambda x, n, s, p: conv2d(x, W[n + ".weight"], W[n + ".bias"], s, p)
    h = relu(cv(inp["x"], "conv1", 2, 3))
    h = max_pool2d(h, 3, 2, 1)
    for s in range(1, 5):
        for b in range(2):
            n = "layer%d.%d" % (s, b)
            stride = 2 if (s > 1 and b == 0) else 1
            y = relu(cv(h, n + ".conv1", stride, 1))
            y = cv(y, n + ".conv2", 1, 1)
            short = cv(h, n + ".downsample.0", stride, 0) if stride == 2 else h
            h = relu(y + short)
    pooled = h.mean(axis=(2, 3))
    return pooled @ W["fc.weight"].T + W["fc.bias"]


# ----------------------------------------------------------------------------- resnet18

# samples/resnet18.nest: torchvision's layout and names, batch norm in inference form.
RESNET18_CFG = {"BATCH": 2, "IMG": 32, "CLASSES": 1000}
RESNET18_C0 = 64   # the model's default, not overridden


def batch_norm(x, mean, var, w, b, eps=1e-5):
    sh = (1, -1, 1, 1)
    return (x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + eps) * w.reshape(sh) + b.reshape(sh)


def _bn(name, c):
    # running_var: 1 + 0.1 N, positive as a variance is
    return [(name + ".weight", (c,), "scale", 0), (name + ".bias", (c,), "bias", 0),
            (name + ".running_mean", (c,), "bias", 0), (name + ".running_var", (c,), "scale", 0)]


def _cbn(block, o, i, k, conv="conv", bn="bn", n=""):
    return [("%s.%s%s.weight" % (block, conv, n), (o, i, k, k), "he", i * k * k)] + _bn("%s.%s%s" % (block, bn, n), o)


def resnet18_params(c):
    C0 = RESNET18_C0
    p = [("conv1.weight", (C0, 3, 7, 7), "he", 3 * 49)] + _bn("bn1", C0)
    for s in range(1, 5):
        co = C0 * 2 ** (s - 1)
        for b in range(2):
            ci = co // 2 if (s > 1 and b == 0) else co
            blk = "layer%d.%d" % (s, b)
            p += _cbn(blk, co, ci, 3, n="1") + _cbn(blk, co, co, 3, n="2")
            if ci != co:
                p += _cbn(blk, co, ci, 1, "downsample.0", "downsample.1")
    p += [("fc.weight", (c["CLASSES"], 8 * C0), "w", 8 * C0), ("fc.bias", (c["CLASSES"],), "bias", 0)]
    return p


def resnet18_inputs(c, rng):
    return {"x": rng.standard_normal((c["BATCH"], 3, c["IMG"], c["IMG"])).astype(np.float32)}


def resnet18_ref(c, W, inp):
    """torchvision's ResNet-18 forward in eval mode, from its definition."""
    zero = np.zeros(1)
    cv = lambda x, n, s, p: conv2d(x, W[n + ".weight"], zero, s, p)
    bn = lambda x, n: batch_norm(x, W[n + ".running_mean"], W[n + ".running_var"], W[n + ".weight"], W[n + ".bias"])
    h = max_pool2d(relu(bn(cv(inp["x"], "conv1", 2, 3), "bn1")), 3, 2, 1)
    for s in range(1, 5):
        for b in range(2):
            n = "layer%d.%d" % (s, b)
            stride = 2 if (s > 1 and b == 0) else 1
            y = relu(bn(cv(h, n + ".conv1", stride, 1), n + ".bn1"))
            y = bn(cv(y, n + ".conv2", 1, 1), n + ".bn2")
            short = bn(cv(h, n + ".downsample.0", stride, 0), n + ".downsample.1") if stride == 2 else h
            h = relu(y + short)
    pooled = h.mean(axis=(2, 3))   # adaptive average pooling to 1x1
    return pooled @ W["fc.weight"].T + W["fc.bias"]


# ----------------------------------------------------------------------------- driver

MODELS = [
    # name, sample file, config (-> -D overrides), params, inputs, reference
    ("gpt2", "gpt2.nest", GPT2_CFG, gpt2_params, gpt2_inputs, gpt2_ref),
    ("mlp", "mlp.nest", MLP_CFG, mlp_params, mlp_inputs, mlp_ref),
    ("llama", "llama.nest", LLAMA_CFG, llama_params, llama_inputs, llama_ref),
    ("resnet", "resnet.nest", RESNET_CFG, resnet_params, resnet_inputs, resnet_ref),
    ("resnet18", "resnet18.nest", RESNET18_CFG, resnet18_params, resnet18_inputs, resnet18_ref),
]


def make_case(name, cfg, params_fn, inputs_fn, seed):
    rng = np.random.default_rng(seed)
    weights = make_weights(params_fn(cfg), rng)
    inputs = inputs_fn(cfg, rng)
    return weights, inputs


def as64(weights, inputs):
    W = {n: a.astype(np.float64) for n, a in weights}
    I = {n: (a.astype(np.float64) if a.dtype.kind == "f" else a) for n, a in inputs.items()}
    return W, I


def run_model(nestc, tmp, idx, model):
    name, sample, cfg, params_fn, inputs_fn, ref_fn = model
    weights, inputs = make_case(name, cfg, params_fn, inputs_fn, 1000 + idx)
    d = os.path.join(tmp, name)
    os.mkdir(d)
    wpath = os.path.join(d, "weights.safetensors")
    write_safetensors(wpath, weights)
    cmd = [nestc, "run", os.path.join(SAMPLES, sample)]
    for k, v in cfg.items():
        cmd += ["-D", "%s=%s" % (k, v)]
    cmd += ["--weights", wpath]
    for n, a in inputs.items():
        p = os.path.join(d, "in_%s.npy" % n)
        np.save(p, a)
        cmd += ["--input", "%s=%s" % (n, p)]
    opath = os.path.join(d, "out.npy")
    cmd += ["--output", opath]
    t0 = time.time()
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return False, "timed out after %ds: %s" % (TIMEOUT, " ".join(cmd))
    dt = time.time() - t0
    if r.returncode != 0:
        msg = (r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace")).strip()
        msg = "\n    ".join(msg.splitlines()[:12])
        return False, "nestc exit %d (%s)\n    %s" % (r.returncode, " ".join(cmd), msg)
    if not os.path.exists(opath):
        return False, "no output written (%s)" % " ".join(cmd)
    out = np.load(opath)
    W, I = as64(weights, inputs)
    ref = ref_fn(cfg, W, I)
    if out.shape != ref.shape:
        return False, "output shape %s, expected %s" % (out.shape, ref.shape)
    if out.dtype != np.float32:
        return False, "output dtype %s, expected float32" % out.dtype
    err = np.abs(out.astype(np.float64) - ref)
    max_err = float(np.max(err)) if np.all(np.isfinite(out)) else float("inf")
    ref_max = float(np.max(np.abs(ref)))
    info = "max_err=%.3g ref_max=%.3g time=%.1fs" % (max_err, ref_max, dt)
    return max_err <= RTOL * ref_max, info


def main_nestc(nestc, only):
    nestc = os.path.abspath(nestc)
    models = [m for m in MODELS if not only or m[0] in only]
    unknown = set(only) - {m[0] for m in MODELS}
    if unknown:
        print("unknown model(s): %s" % ", ".join(sorted(unknown)), file=sys.stderr)
        return 2
    passed = failed = 0
    tmp = tempfile.mkdtemp(prefix="nestc-models-")
    try:
        for idx, m in enumerate(MODELS):
            if m not in models:
                continue
            try:
                ok, info = run_model(nestc, tmp, idx, m)
            except Exception as e:  # a broken output file and the like
                ok, info = False, "%s: %s" % (type(e).__name__, e)
            print("%s %s %s" % ("ok" if ok else "FAIL", m[0], info), flush=True)
            passed += ok
            failed += not ok
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


# ----------------------------------------------------------------------------- self-test

def self_test():
    """Checks of the NumPy references on their own (no nestc)."""
    checks = []

    def check(what, cond):
        checks.append((what, bool(cond)))
        print("%s %s" % ("ok" if cond else "FAIL", what), flush=True)

    # Shapes of every model's output, and the param lists have no duplicates.
    for idx, (name, _, cfg, pf, inf, rf) in enumerate(MODELS):
        weights, inputs = make_case(name, cfg, pf, inf, 1000 + idx)
        names = [n for n, _ in weights]
        W, I = as64(weights, inputs)
        out = rf(cfg, W, I)
        lead = cfg.get("S", cfg.get("B", cfg.get("BATCH")))
        last = cfg.get("V", cfg.get("D_OUT", cfg.get("CLASSES")))
        check("%s: output shape %s, finite, %d unique params" % (name, out.shape, len(names)),
              out.shape == (lead, last) and np.all(np.isfinite(out)) and len(set(names)) == len(names))

    # GPT-2 and LLaMA: causal attention rows sum to 1 and are zero above the diagonal.
    for name, cfg, pf, inf, rf, seed in [("gpt2", GPT2_CFG, gpt2_params, gpt2_inputs, gpt2_ref, 1),
                                         ("llama", LLAMA_CFG, llama_params, llama_inputs, llama_ref, 2)]:
        W, I = as64(*make_case(name, cfg, pf, inf, seed))
        probs = []
        out = rf(cfg, W, I, probs_out=probs)
        S = cfg["S"]
        upper = np.triu(np.ones((S, S), dtype=bool), 1)
        check("%s: attention rows sum to 1, zero above the diagonal" % name,
              len(probs) == cfg["L"] and all(np.allclose(p.sum(-1), 1.0, atol=1e-12) and
                                             np.all(p[:, upper] == 0.0) for p in probs))
        # Causality: changing the last token changes no earlier position's logits.
        I2 = dict(I)
        I2["tokens"] = I["tokens"].copy()
        I2["tokens"][-1] = (I["tokens"][-1] + 1) % cfg["V"]
        out2 = rf(cfg, W, I2)
        check("%s: causal (last token affects only the last row)" % name,
              np.array_equal(out[:-1], out2[:-1]) and not np.allclose(out[-1], out2[-1]))

    # GPT-2 attention against a per-head, per-row loop written from the formula.
    rng = np.random.default_rng(5)
    q, k = rng.standard_normal((2, 3, 5, 4))
    pr = causal_attention_probs(q, k)
    loop = np.zeros_like(pr)
    for h in range(3):
        for i in range(5):
            s = np.array([q[h, i] @ k[h, j] / 2.0 for j in range(i + 1)])
            e = np.exp(s - s.max())
            loop[h, i, :i + 1] = e / e.sum()
    check("attention matches a loop implementation", np.allclose(pr, loop, atol=1e-14))

    # LLaMA rotary embeddings: a rotation (keeps norms), and scores depend only on m - n.
    hd, S = 8, 12
    cos, sin = rope_cos_sin(S, hd, LLAMA_THETA)
    rope = lambda t, pos: t * cos[pos] + rotate_half(t) * sin[pos]
    a, b = rng.standard_normal((2, hd))
    check("rope keeps norms", all(np.isclose(np.linalg.norm(rope(a, m)), np.linalg.norm(a)) for m in range(S)))
    check("rope scores depend only on relative position",
          np.isclose(rope(a, 7) @ rope(b, 3), rope(a, 4) @ rope(b, 0)) and
          np.isclose(rope(a, 11) @ rope(b, 11), a @ b))
    # Pairwise form: dims (i, i + hd/2) rotate by angle pos * theta^(-2i/hd).
    m, i = 5, 1
    ang = m * LLAMA_THETA ** (-2.0 * i / hd)
    r = rope(a, m)
    check("rope rotates pairs (i, i + hd/2)",
          np.isclose(r[i], a[i] * math.cos(ang) - a[i + hd // 2] * math.sin(ang)) and
          np.isclose(r[i + hd // 2], a[i + hd // 2] * math.cos(ang) + a[i] * math.sin(ang)))

    # LLaMA grouped-query attention equals multi-head attention with k/v heads duplicated.
    cfg = dict(LLAMA_CFG)
    W, I = as64(*make_case("llama", cfg, llama_params, llama_inputs, 3))
    out = llama_ref(cfg, W, I)
    cfg_mha = dict(cfg, KVH=cfg["H"])
    W2 = dict(W)
    hd, rep = cfg["D"] // cfg["H"], cfg["H"] // cfg["KVH"]
    for n in list(W2):
        if n.endswith(("k_proj.weight", "v_proj.weight")):
            w = W2[n].reshape(cfg["KVH"], hd, cfg["D"])
            W2[n] = np.repeat(w, rep, axis=0).reshape(cfg["H"] * hd, cfg["D"])
    check("llama GQA equals MHA with repeated k/v heads", np.allclose(out, llama_ref(cfg_mha, W2, I), atol=1e-12))

    # Convolution and pooling against direct loops.
    x = rng.standard_normal((2, 3, 7, 6))
    w = rng.standard_normal((4, 3, 3, 3))
    bias = rng.standard_normal(4)
    for stride, pad in [(1, 1), (2, 1), (2, 3), (2, 0)]:
        got = conv2d(x, w, bias, stride, pad)
        xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        ho, wo = (7 + 2 * pad - 3) // stride + 1, (6 + 2 * pad - 3) // stride + 1
        want = np.zeros((2, 4, ho, wo))
        for n in range(2):
            for o in range(4):
                for y in range(ho):
                    for xx in range(wo):
                        want[n, o, y, xx] = bias[o] + np.sum(
                            xp[n, :, y * stride:y * stride + 3, xx * stride:xx * stride + 3] * w[o])
        check("conv2d stride=%d padding=%d matches loops" % (stride, pad), got.shape == want.shape and np.allclose(got, want))
    got = max_pool2d(x, 3, 2, 1)
    want = np.zeros((2, 3, 4, 3))
    for y in range(4):
        for xx in range(3):
            ys, xs = max(0, 2 * y - 1), max(0, 2 * xx - 1)
            want[:, :, y, xx] = x[:, :, ys:2 * y + 2, xs:2 * xx + 2].max(axis=(2, 3))
    check("max_pool2d 3/2/1 matches loops", got.shape == want.shape and np.allclose(got, want))

    # Activations and norms at known values.
    check("gelu(1) = 0.8413447460685429", abs(gelu(np.array(1.0)) - 0.8413447460685429) < 1e-15)
    check("gelu_tanh(1) = 0.8411919906082768", abs(gelu_tanh(np.array(1.0)) - 0.8411919906082768) < 1e-12)
    v = np.array([[1.0, 2.0, 3.0, 4.0]])
    check("layernorm zero mean, unit variance",
          np.allclose(layernorm(v, 1.0, 0.0, 0.0).mean(), 0) and np.allclose(layernorm(v, 1.0, 0.0, 0.0).var(), 1))
    check("rmsnorm unit rms", np.allclose(np.sqrt((rmsnorm(v, 1.0, 0.0) ** 2).mean()), 1.0))

    # The safetensors writer round-trips.
    tmp = tempfile.mkdtemp(prefix="nestc-models-")
    try:
        p = os.path.join(tmp, "t.safetensors")
        arrs = [("a.weight", np.arange(6, dtype=np.float32).reshape(2, 3)), ("b", np.array(1.5, dtype=np.float32))]
        write_safetensors(p, arrs)
        raw = open(p, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + n])
        ok = n % 8 == 0
        for name, a in arrs:
            s, e = hdr[name]["data_offsets"]
            back = np.frombuffer(raw[8 + n + s:8 + n + e], dtype="<f4").reshape(hdr[name]["shape"])
            ok = ok and hdr[name]["dtype"] == "F32" and np.array_equal(back, a)
        check("safetensors writer round-trips", ok and len(raw) == 8 + n + 28)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    nfail = sum(not c for _, c in checks)
    print("%d passed, %d failed" % (len(checks) - nfail, nfail))
    return 1 if nfail else 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) < 2 or argv[1].startswith("-"):
        print("usage: %s NESTC_PATH [MODEL...] | --self-test" % argv[0], file=sys.stderr)
        return 2
    return main_nestc(argv[1], argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
