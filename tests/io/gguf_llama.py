#!/usr/bin/python3
"""GGUF files of llama.cpp bind samples/llama.nest (issue #37, "the model from the file").

    /usr/bin/python3 tests/io/gguf_llama.py NESTC_PATH

A tiny LLaMA (L=2, D=256, H=8, KVH=4, F=688, V=512) is made in Hugging Face's layout
with NumPy, then written as llama.cpp's converter writes it: llama.cpp's tensor names
(token_embd.weight, blk.N.attn_q.weight, ...), q and k rows permuted into GGML's rotary
order, its hyper-parameters and a `llama` vocabulary in the metadata, matrices in F32,
F16, Q8_0 or Q4_0 (ffn_down's rows of 688 are not whole blocks: F16, as llama.cpp's
quantizer falls back) or a Q4_K_M-style mix of Q4_K, Q6_K and Q8_0 (Q4_K_M below),
norms in F32. `--consts-from FILE` takes the consts from the
file; `nestc run` and a compiled build (in the file's format, bound without
conversion) give the logits of 8 tokens, checked against a float64 NumPy forward
over the dequantized weights put back in Hugging Face's order: at most 1e-4 of the
largest |logit|. One file leaves output.weight out: lm_head is then the embedding, as
in llama.cpp. Then the errors: a key missing, of the wrong kind, a file that is not
GGUF, a model without @gguf consts, q rows that are not whole heads; -D wins over the
file.

Prints `ok NAME` / `FAIL NAME: why` and a last line `N passed, N failed`.
"""
import importlib.util
import itertools
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LLAMA = os.path.join(ROOT, "samples", "llama.nest")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


C = load("nest_compiled_checks", os.path.join(ROOT, "tests", "compiled", "run.py"))
GG = load("nest_gguf_writer", os.path.join(HERE, "gguf.py"))

L, D, H, KVH, F, V, CTX = 2, 256, 8, 4, 688, 512, 64
HD = D // H
S = 8
THETA, EPS = 10000.0, 1e-5
TOL = 1e-4
passed = failed = 0


def result(name, err):
    global passed, failed
    if err is None:
        passed += 1
        print("ok " + name)
    else:
        failed += 1
        print("FAIL %s: %s" % (name, err))


def nestc(*args):
    return subprocess.run([C.NESTC] + list(args), capture_output=True, text=True, timeout=600)


# ----------------------------------------------------------------------------- the model

def vocab():
    """A `llama` vocabulary of V pieces: <unk> <s> </s>, the 256 byte pieces, then
    letters and pairs with and without the space mark, scored by their order."""
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    letters = "etaoinshrdlucmfwypvbgkqjxz"
    for n in itertools.count(1):
        for p in itertools.product(letters, repeat=n):
            for w in ("\u2581" + "".join(p), "".join(p)):
                if len(toks) < V:
                    toks.append(w)
        if len(toks) >= V:
            break
    types = [2, 3, 3] + [6] * 256 + [1] * (V - 259)
    scores = [0.0] * 259 + [-float(i) for i in range(V - 259)]
    return toks, scores, types


def hf_weights(rng):
    W = {"model.embed_tokens.weight": rng.standard_normal((V, D)) * 0.5,
         "model.norm.weight": 1 + 0.1 * rng.standard_normal(D),
         "lm_head.weight": rng.standard_normal((V, D)) * 0.06}
    for i in range(L):
        p = "model.layers.%d." % i
        W[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(D)
        W[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(D)
        for n, o, k in (("self_attn.q_proj", D, D), ("self_attn.k_proj", KVH * HD, D),
                        ("self_attn.v_proj", KVH * HD, D), ("self_attn.o_proj", D, D),
                        ("mlp.gate_proj", F, D), ("mlp.up_proj", F, D), ("mlp.down_proj", D, F)):
            W[p + n + ".weight"] = rng.standard_normal((o, k)) / np.sqrt(k)
    return {k: v.astype(np.float32) for k, v in W.items()}


def permute(w, n_head):
    """llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


GGUF_NAME = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
for _n, _g in (("input_layernorm", "attn_norm"), ("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"),
               ("self_attn.v_proj", "attn_v"), ("self_attn.o_proj", "attn_output"),
               ("post_attention_layernorm", "ffn_norm"), ("mlp.gate_proj", "ffn_gate"), ("mlp.up_proj", "ffn_up"),
               ("mlp.down_proj", "ffn_down")):
    for _i in range(L):
        GGUF_NAME["model.layers.%d.%s.weight" % (_i, _n)] = "blk.%d.%s.weight" % (_i, _g)


def encode_tensor(a, typ):
    if typ == "f32":
        return a.astype("<f4").tobytes()
    if typ == "f16":
        return GG.f16(a).tobytes()
    return {"q8_0": GG.quantize_q8_0, "q4_0": GG.quantize_q4_0, "q4_K": GG.encode_q4_k,
            "q6_K": GG.encode_q6_k}[typ](a.reshape(-1))


# A Q4_K_M-style file, as llama.cpp's quantizer mixes it: q6_K for the value projections
# and the output, q4_K elsewhere (llama.cpp gives q6_K to some layers' attn_v and ffn_down
# only; all of them here), q8_0 where rows are not whole super-blocks and f16 where they
# are not whole blocks either (ffn_down's 688), as its quantizer falls back. The build's
# --weights-format naming the same formats (a bare k-quant falls back the same way):
Q4_K_M = "q4_k,*v_proj*=q6_k,lm_head*=q6_k"


def file_type(hf, a, typ):
    """The type write_model stores Hugging Face tensor hf (values a) in."""
    if a.ndim == 1:
        return "f32"
    if typ == "q4_k_m":
        t = "q6_K" if "v_proj" in hf or hf == "lm_head.weight" else "q4_K"
        return t if a.shape[-1] % 256 == 0 else "q8_0" if a.shape[-1] % 32 == 0 else "f16"
    if typ in ("q8_0", "q4_0") and a.shape[-1] % 32:
        return "f16"
    return typ


def held(a, typ):
    """The values a tensor of type typ holds."""
    raw = encode_tensor(a, typ)
    return np.asarray(GG.dequantize(typ, raw, a.size), np.float32).reshape(a.shape)


def write_model(path, W, typ, tie=False, kv_over=None, drop_keys=()):
    """The file llama.cpp's converter and quantizer would write; returns the values it
    holds, in Hugging Face's order, by Hugging Face name."""
    toks, scores, types = vocab()
    kv = [("general.architecture", GG.STRING, "llama"), ("general.name", GG.STRING, "tiny"),
          ("llama.block_count", GG.U32, L), ("llama.context_length", GG.U32, CTX),
          ("llama.embedding_length", GG.U32, D), ("llama.feed_forward_length", GG.U32, F),
          ("llama.attention.head_count", GG.U32, H), ("llama.attention.head_count_kv", GG.U32, KVH),
          ("llama.rope.freq_base", GG.F32, THETA), ("llama.attention.layer_norm_rms_epsilon", GG.F32, EPS),
          ("llama.rope.dimension_count", GG.U32, HD), ("general.file_type", GG.U32, 0),
          ("tokenizer.ggml.model", GG.STRING, "llama"), ("tokenizer.ggml.tokens", GG.ARRAY, (GG.STRING, toks)),
          ("tokenizer.ggml.scores", GG.ARRAY, (GG.F32, scores)),
          ("tokenizer.ggml.token_type", GG.ARRAY, (GG.I32, types)),
          ("tokenizer.ggml.bos_token_id", GG.U32, 1), ("tokenizer.ggml.eos_token_id", GG.U32, 2)]
    for k, t, v in (kv_over or []):
        kv = [e for e in kv if e[0] != k] + [(k, t, v)]
    kv = [e for e in kv if e[0] not in drop_keys]
    tensors, values = [], {}
    for hf in sorted(W):
        if tie and hf == "lm_head.weight":
            continue
        a = W[hf]
        if hf.endswith("q_proj.weight"):
            a = permute(a, H)
        elif hf.endswith("k_proj.weight"):
            a = permute(a, KVH)
        t = file_type(hf, a, typ)
        tensors.append({"name": GGUF_NAME[hf], "ne": list(reversed(a.shape)), "type": t, "data": encode_tensor(a, t)})
        h = held(a, t)
        if hf.endswith("q_proj.weight"):
            h = unpermute(h, H)
        elif hf.endswith("k_proj.weight"):
            h = unpermute(h, KVH)
        values[hf] = h
    if tie:
        values["lm_head.weight"] = values["model.embed_tokens.weight"]
    with open(path, "wb") as f:
        f.write(GG.encode(kv, tensors))
    return values


def int8_rows(x):
    """x's rows as --activations=int8 holds them (tests/formats/run.py's formula): per
    block of 32, d = max|x| / 127 in f32, q = x * (1 / d) in f32 rounded to nearest
    even; the values d * q."""
    x = np.asarray(x, np.float32)
    b = x.reshape(-1, 32)
    d = (np.abs(b).max(axis=1) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.rint((b * inv[:, None]).astype(np.float32))
    return (q.astype(np.float64) * d[:, None].astype(np.float64)).reshape(x.shape)


def forward(W, tokens, int8=()):
    """samples/llama.nest's forward in float64; the left operands of the products with
    the weights named in int8 quantized as --activations=int8 does (in f32 first, as
    the compiled code holds them)."""
    W = {k: v.astype(np.float64) for k, v in W.items()}

    def mm(x, name):
        if name in int8:
            x = int8_rows(x.astype(np.float32))
        return x @ W[name].T

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w

    inv = 1.0 / THETA ** (np.arange(HD // 2) * 2.0 / HD)
    fr = np.arange(S)[:, None] * inv[None, :]
    emb = np.concatenate([fr, fr], -1)
    cos, sin = np.cos(emb), np.sin(emb)

    def rope(x):  # [n, S, hd]
        x1, x2 = x[..., :HD // 2], x[..., HD // 2:]
        return x * cos + np.concatenate([-x2, x1], -1) * sin

    x = W["model.embed_tokens.weight"][tokens]
    mask = np.triu(np.ones((S, S), bool), 1)
    for i in range(L):
        p = "model.layers.%d." % i
        h = rms(x, W[p + "input_layernorm.weight"])
        q = rope(mm(h, p + "self_attn.q_proj.weight").reshape(S, H, HD).transpose(1, 0, 2))
        k = rope(mm(h, p + "self_attn.k_proj.weight").reshape(S, KVH, HD).transpose(1, 0, 2))
        v = mm(h, p + "self_attn.v_proj.weight").reshape(S, KVH, HD).transpose(1, 0, 2)
        k, v = np.repeat(k, H // KVH, 0), np.repeat(v, H // KVH, 0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(HD)
        s[:, mask] = -np.inf
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(S, D)
        x = x + mm(o, p + "self_attn.o_proj.weight")
        h = rms(x, W[p + "post_attention_layernorm.weight"])
        g = mm(h, p + "mlp.gate_proj.weight")
        x = x + mm((g / (1 + np.exp(-g))) * mm(h, p + "mlp.up_proj.weight"), p + "mlp.down_proj.weight")
    x = rms(x, W["model.norm.weight"])
    return mm(x, "lm_head.weight")


def close(got, ref, what):
    if got.shape != ref.shape:
        raise C.Fail("%s: shape %s, want %s" % (what, got.shape, ref.shape))
    err = float(np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max())
    if not err <= TOL:
        raise C.Fail("%s: largest error %.3g of the largest |logit| (at most %g)" % (what, err, TOL))


# ----------------------------------------------------------------------------- checks

def check_file(tmp, typ, W, tokens, tie=False):
    tag = typ + (".tied" if tie else "")
    d = os.path.join(tmp, tag)
    os.makedirs(d)
    path = os.path.join(d, "m.gguf")
    held_w = write_model(path, W, typ, tie)
    ref = forward(held_w, tokens)
    tokp = os.path.join(d, "tokens.npy")
    np.save(tokp, tokens.astype(np.int32))
    try:
        outp = os.path.join(d, "run.npy")
        r = nestc("run", LLAMA, "--consts-from", path, "-D", "S=%d" % S, "--weights", path, "--entry", "forward",
                  "--input", "tokens=" + tokp, "--output", outp)
        if r.returncode != 0:
            raise C.Fail("nestc run: exit %d: %s" % (r.returncode, r.stderr.strip()[-400:]))
        close(np.load(outp), ref, "nestc run")
        result("%s.run" % tag, None)
    except C.Fail as e:
        result("%s.run" % tag, str(e))
    try:
        out = os.path.join(d, "out")
        fmt = [] if typ == "f32" else ["--weights-format=" + (Q4_K_M if typ == "q4_k_m" else typ)]
        r = nestc("build", LLAMA, "--consts-from=" + path, "-D", "S=%d" % S, "-o", out, "-O1", "--no-cache", *fmt)
        if r.returncode != 0:
            raise C.Fail("nestc build: exit %d: %s" % (r.returncode, r.stderr.strip()[-400:]))
        hdr = C.parse_header(os.path.join(out, "llama.h"), "llama")
        got = os.path.join(d, "got.npy")
        exe = C.compile_driver(d, [C.Call(hdr["forward"], path, {"tokens": tokp}, [got])], ["llama"], [out],
                               sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".o")))
        for env, what in ((None, "compiled"), (dict(os.environ, NESTRT_MMAP="1"), "compiled, NESTRT_MMAP=1")):
            rr = C.run([exe], env=env)
            if rr.returncode != 0:
                raise C.Fail("%s: %s" % (what, C.describe([exe], rr)))
            close(np.load(got), ref, what)
        result("%s.compiled" % tag, None)
    except C.Fail as e:
        result("%s.compiled" % tag, str(e))
    if typ not in ("q8_0", "q4_0", "q4_k_m") or tie:
        return
    # --activations=int8: the file's blocks packed for dot products, against NumPy's
    # emulation (the products over weights the build holds in typ: not ffn_down, f16)
    try:
        out = os.path.join(d, "out8")
        r = nestc("build", LLAMA, "--consts-from=" + path, "-D", "S=%d" % S, "-o", out, "-O1", "--no-cache",
                  "--weights-format=" + (Q4_K_M if typ == "q4_k_m" else typ), "--activations=int8")
        if r.returncode != 0:
            raise C.Fail("nestc build: exit %d: %s" % (r.returncode, r.stderr.strip()[-400:]))
        hdr = C.parse_header(os.path.join(out, "llama.h"), "llama")
        got = os.path.join(d, "got8.npy")
        exe = C.compile_driver(d, [C.Call(hdr["forward"], path, {"tokens": tokp}, [got])], ["llama"], [out],
                               sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".o")),
                               name="driver8")
        rr = C.run([exe])
        if rr.returncode != 0:
            raise C.Fail("compiled: %s" % C.describe([exe], rr))
        q = {n for n in held_w if file_type(n, held_w[n], typ) in ("q8_0", "q4_0", "q4_K")}
        close(np.load(got), forward(held_w, tokens, int8=q), "compiled, int8 activations")
        result("%s.compiled.int8" % tag, None)
    except C.Fail as e:
        result("%s.compiled.int8" % tag, str(e))


def expect(name, r, code, *want):
    out = r.stderr + r.stdout
    if r.returncode != code:
        result(name, "exit %d, want %d: %s" % (r.returncode, code, out.strip()[-300:]))
    elif any(w not in out for w in want):
        result(name, "message %r lacks %r" % (out.strip()[-300:], [w for w in want if w not in out]))
    else:
        result(name, None)


def check_errors(tmp, W):
    d = os.path.join(tmp, "errors")
    os.makedirs(d)
    small = {k: v for k, v in W.items()}
    p = os.path.join(d, "nolayers.gguf")
    write_model(p, small, "f32", drop_keys=("llama.block_count",))
    r = nestc("check", LLAMA, "--consts-from", p)
    expect("error.missing_key", r, 1, "llama.nest:", "error: const 'L' takes its value from 'llama.block_count', "
           "which %s does not have (its general.architecture is 'llama')" % p, "^")
    p = os.path.join(d, "nokv.gguf")
    write_model(p, small, "f32", drop_keys=("llama.attention.head_count_kv", "llama.rope.freq_base"))
    # optional keys keep the declared value: KVH = H, 8 heads of k against the file's 4
    r = nestc("run", LLAMA, "--consts-from", p, "-D", "S=4", "--weights", p, "--entry", "forward",
              "--input", "tokens=" + os.path.join(tmp, "f32", "tokens.npy"))
    expect("error.optional_key_keeps_default", r, 1, "model.layers.0.self_attn.k_proj.weight", "256")
    p = os.path.join(d, "floatL.gguf")
    write_model(p, small, "f32", kv_over=[("llama.block_count", GG.F32, 2.0)])
    expect("error.float_for_int", nestc("check", LLAMA, "--consts-from", p), 1,
           "error: const 'L' is an int, and %s: llama.block_count is a float" % p)
    p = os.path.join(d, "strD.gguf")
    write_model(p, small, "f32", kv_over=[("llama.embedding_length", GG.STRING, "256")])
    expect("error.string_for_int", nestc("check", LLAMA, "--consts-from", p), 1,
           "error: const 'D' takes its value from 'llama.embedding_length', a string in " + p)
    st = os.path.join(d, "w.safetensors")
    C.write_safetensors(st, [("a", np.zeros(2, np.float32))])
    expect("error.not_gguf", nestc("check", LLAMA, "--consts-from", st), 1,
           "error: --consts-from %s: not a GGUF file" % st)
    r = nestc("check", LLAMA, "--consts-from", os.path.join(d, "none.gguf"))
    expect("error.no_file", r, 1, "cannot open")
    if "does not have" in r.stderr:   # one error, not one more per const
        result("error.no_file_once", "the missing file's consts are reported too: " + r.stderr[-300:])
    else:
        result("error.no_file_once", None)
    plain = os.path.join(d, "plain.nest")
    C.write(plain, "const N = 4\nexport fn f(x: f32[N]) -> f32[N] { return x }\n")
    good = os.path.join(d, "good.gguf")
    write_model(good, small, "f32")
    expect("error.no_gguf_consts", nestc("check", plain, "--consts-from", good), 1,
           "--consts-from %s: the model has no const that takes a value from it" % good)
    ann = os.path.join(d, "ann.nest")
    C.write(ann, '@gguf("x.y", maybe) const N = 4\n@onnx("x") const M = 2\n')
    expect("error.annotation", nestc("check", ann), 1, "ann.nest:1:", "expected 'optional' after the key of @gguf, "
           "not 'maybe'", "ann.nest:2:2: error: unknown annotation '@onnx'")
    # -D wins over the file: D = 128 against the file's 256-wide tensors
    r = nestc("run", LLAMA, "--consts-from", good, "-D", "D=128", "-D", "S=4", "--weights", good, "--entry", "forward",
              "--input", "tokens=" + os.path.join(tmp, "f32", "tokens.npy"))
    expect("error.define_wins", r, 1, "model.embed_tokens.weight", "128")
    # q's rows are not whole heads of the file's head count
    p = os.path.join(d, "heads.gguf")
    write_model(p, small, "f32", kv_over=[("llama.attention.head_count", GG.U32, 7)])
    r = nestc("run", LLAMA, "-D", "L=2", "-D", "D=256", "-D", "H=8", "-D", "KVH=4", "-D", "F=688", "-D", "V=512",
              "-D", "S=4", "--weights", p, "--entry", "forward", "--input", "tokens=" + os.path.join(tmp, "f32", "tokens.npy"))
    expect("error.rotary_heads", r, 1, "blk.0.attn_q.weight' has 256 rows, not 7 heads (llama.attention.head_count)")


GW = None  # tests/io/gguf_write.py: its GGUF parser and safetensors reader


def gpt2_gguf_name(hf):
    m = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight", "ln_f.weight": "output_norm.weight",
         "ln_f.bias": "output_norm.bias"}
    if hf in m:
        return m[hf]
    parts = hf.split(".")
    rest = ".".join(parts[2:])
    sub = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
           "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    stem, leaf = rest.rsplit(".", 1)
    return "blk.%s.%s.%s" % (parts[1], sub[stem], leaf)


def llama_gguf_name(hf):
    if hf in GGUF_NAME:
        return GGUF_NAME[hf]
    return None


SAMPLES = {
    "llama": (LLAMA, "-D L=2 -D D=64 -D H=4 -D KVH=2 -D F=128 -D V=300 -D CTX=64 -D S=8".split(),
              {"llama.block_count": (4, 2), "llama.embedding_length": (4, 64), "llama.attention.head_count": (4, 4),
               "llama.attention.head_count_kv": (4, 2), "llama.feed_forward_length": (4, 128),
               "llama.context_length": (4, 64), "llama.rope.freq_base": (6, 10000.0),
               "llama.attention.layer_norm_rms_epsilon": (6, np.float32(1e-5))}, 300),
    "gpt2": (os.path.join(ROOT, "samples", "gpt2.nest"), "-D L=2 -D D=64 -D H=2 -D V=256 -D CTX=64 -D S=8".split(),
             {"gpt2.block_count": (4, 2), "gpt2.embedding_length": (4, 64), "gpt2.attention.head_count": (4, 2),
              "gpt2.context_length": (4, 64), "gpt2.feed_forward_length": (4, 256),
              "gpt2.attention.layer_norm_epsilon": (6, np.float32(1e-5))}, 256),
}


def check_writer(tmp, tokens):
    """nestc weights writes llama.cpp's layout for the samples: its names, its metadata
    (counts as u32, floats as f32), a vocabulary of V pieces, q and k rows in GGML's
    rotary order, GPT-2's matrices [out, in]; read back, the same logits as the values
    written."""
    d = os.path.join(tmp, "writer")
    os.makedirs(d)
    tokp = os.path.join(d, "tokens.npy")
    np.save(tokp, (tokens[:S] % 256).astype(np.int32))
    for name, (src, cfg, keys, v) in SAMPLES.items():
        st = os.path.join(d, name + ".safetensors")
        gg = os.path.join(d, name + ".f32.gguf")
        try:
            for out, extra in ((st, []), (gg, ["--format=f32"])):
                r = nestc("weights", src, *cfg, "--random-weights", "1", *extra, "-o", out)
                if r.returncode != 0 or r.stderr:
                    raise C.Fail("nestc weights -o %s: exit %d: %s" % (out, r.returncode, r.stderr.strip()))
            hf = GW.read_safetensors(st)
            g = GW.parse_gguf(gg)
            kv = g["kv"]
            errs = []
            if kv.get("general.architecture") != (8, name):
                errs.append("general.architecture %r" % (kv.get("general.architecture"),))
            for k, want in keys.items():
                if kv.get(k) != want:
                    errs.append("%s = %r, want %r" % (k, kv.get(k), want))
            if "nestc.transposed" in kv:
                errs.append("nestc.transposed in a file of llama.cpp's")
            toks = kv.get("tokenizer.ggml.tokens", (0, (0, [])))[1][1]
            if len(toks) != v or len(set(toks)) != v:
                errs.append("%d tokens (%d distinct), want %d" % (len(toks), len(set(toks)), v))
            model = kv.get("tokenizer.ggml.model", (0, ""))[1]
            if model != name:
                errs.append("tokenizer.ggml.model %r" % model)
            by = {t["name"]: t for t in g["tensors"]}
            heads = {"q_proj": 4, "k_proj": 2}
            for n, a in hf.items():
                gname = (llama_gguf_name if name == "llama" else gpt2_gguf_name)(n)
                t = by.get(gname)
                if t is None:
                    errs.append("no tensor %s for %s" % (gname, n))
                    continue
                got = np.frombuffer(t["data"], "<f4").reshape(list(reversed(t["ne"])))
                want = a
                if name == "llama" and n.split(".")[-2] in heads:
                    want = permute(a, heads[n.split(".")[-2]])
                if name == "gpt2" and a.ndim == 2 and n.startswith("h."):
                    want = a.T
                if got.shape != want.shape or not np.array_equal(got, want):
                    errs.append("%s: not %s's values in llama.cpp's layout" % (gname, n))
            if len(by) != len(hf):
                errs.append("%d tensors, want %d" % (len(by), len(hf)))
            result("writer.%s.layout" % name, "; ".join(errs[:4]) or None)
        except C.Fail as e:
            result("writer.%s.layout" % name, str(e))
        for fmt in ("q4_0", "bf16"):
            try:
                gq = os.path.join(d, "%s.%s.gguf" % (name, fmt))
                r = nestc("weights", src, *cfg, "--random-weights", "1", "--format=" + fmt, "-o", gq)
                if r.returncode != 0:
                    raise C.Fail("nestc weights: " + r.stderr.strip())
                a, b = os.path.join(d, "a.npy"), os.path.join(d, "b.npy")
                r1 = nestc("run", src, *cfg, "--random-weights", "1", "--weights-format=" + fmt, "--entry", "forward",
                           "--input", "tokens=" + tokp, "--output", a)
                r2 = nestc("run", src, "--consts-from", gq, "-D", "S=%d" % S, "--weights", gq,
                           "--weights-format=" + fmt, "--entry", "forward", "--input", "tokens=" + tokp, "--output", b)
                if r1.returncode or r2.returncode:
                    raise C.Fail("nestc run: %s %s" % (r1.stderr.strip(), r2.stderr.strip()))
                x, y = np.load(a), np.load(b)
                err = float(np.abs(x - y).max() / np.abs(x).max())
                result("writer.%s.%s.read_back" % (name, fmt), None if err <= 1e-6 else
                       "logits differ from the values written by %.3g" % err)
            except C.Fail as e:
                result("writer.%s.%s.read_back" % (name, fmt), str(e))
    # a file of llama.cpp's converted: its tokenizer goes along, and it binds
    src = os.path.join(tmp, "q8_0", "m.gguf")
    out = os.path.join(d, "requant.gguf")
    r = nestc("weights", LLAMA, "--consts-from", src, "--weights", src, "--format=q4_0", "-o", out)
    try:
        if r.returncode != 0:
            raise C.Fail("nestc weights: " + r.stderr.strip())
        a, b = GW.parse_gguf(src)["kv"], GW.parse_gguf(out)["kv"]
        same = [k for k in a if k.startswith("tokenizer.") and a[k] != b.get(k)]
        if same:
            raise C.Fail("tokenizer keys differ: %s" % same)
        outp = os.path.join(d, "requant.npy")
        r = nestc("run", LLAMA, "--consts-from", out, "-D", "S=%d" % S, "--weights", out, "--entry", "forward",
                  "--input", "tokens=" + os.path.join(tmp, "q8_0", "tokens.npy"), "--output", outp)
        if r.returncode != 0:
            raise C.Fail("nestc run: " + r.stderr.strip())
        result("writer.convert_keeps_tokenizer", None)
    except C.Fail as e:
        result("writer.convert_keeps_tokenizer", str(e))


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    C.NESTC = os.path.abspath(argv[1])
    global GW
    GW = load("nest_gguf_write_checks", os.path.join(HERE, "gguf_write.py"))
    for cand in (os.path.join(os.path.dirname(C.NESTC), "libnestrt.a"), os.path.join(ROOT, "build", "libnestrt.a")):
        if os.path.exists(cand):
            C.LIBNESTRT = cand
            break
    rng = np.random.default_rng(37)
    W = hf_weights(rng)
    tokens = rng.integers(0, V, S)
    with tempfile.TemporaryDirectory(prefix="nestc-gguf-llama-") as tmp:
        C.TMP = tmp
        for typ in ("f32", "f16", "q8_0", "q4_0", "q4_k_m"):
            check_file(tmp, typ, W, tokens)
        check_file(tmp, "q8_0", W, tokens, tie=True)
        check_errors(tmp, W)
        check_writer(tmp, tokens)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
