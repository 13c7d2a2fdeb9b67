#!/usr/bin/python3
"""The benchmark's models in plain PyTorch (no transformers, no torchvision), and the
files every runtime of bench/run.py reads: written once, the same for all of them.

  models.py gpt2 DIR L D H V CTX S     DIR/weights.safetensors, DIR/tokens.npy (i32[S]),
                                       DIR/model.onnx (opset 14, static shapes),
                                       DIR/ref.npy (logits of the model in float64)
  models.py resnet DIR IMG C0 CLASSES  DIR/weights.safetensors, DIR/x.npy (f32[1, 3, IMG, IMG]),
                                       DIR/ref.npy (float64)
  models.py resnet18 DIR IMG           DIR/weights.safetensors (torchvision's state dict,
                                       num_batches_tracked included), DIR/x.npy,
                                       DIR/model.onnx (opset 14, static shapes), DIR/ref.npy
  models.py matmul DIR M N K           DIR/a.npy, DIR/b.npy, DIR/ref.npy (float64)
  models.py bert DIR N T L D H FF V    DIR/weights.safetensors (Hugging Face BertModel's names),
                                       DIR/x.npy (i32[N, T] token ids), DIR/ref.npy (float64
                                       last hidden state), DIR/model.onnx (opset 14, static)
  models.py vit DIR N IMG PATCH L D H FF     the same for ViTModel: x.npy f32[N, 3, IMG, IMG],
                                       ref.npy the final-normed CLS features [N, D]
  models.py resnet50 DIR BATCH IMG C0 CLASSES   the same for torchvision's resnet50
  models.py conv DIR C HW              one 3x3 convolution C -> C (stride 1, padding 1) on
                                       x.npy f32[1, C, HW, HW]; weight conv.weight
  models.py gpt2-decode DIR L D H V CTX P,P.. N,N..
                                       DIR/weights.safetensors (gpt2's), DIR/tokens.npy (i32[CTX]),
                                       DIR/decode.onnx (one decode step, opset 14, P dynamic),
                                       DIR/token-P.npy, DIR/past_k-P.npy, DIR/past_v-P.npy per P,
                                       DIR/ref-N.npy (float64 logits of position N) per N

GPT2 matches samples/gpt2.nest exactly: HF parameter names (wte.weight, wpe.weight,
h.N.ln_1.weight, h.N.attn.c_attn.weight [D, 3D] in Conv1D layout, ..., ln_f.bias),
LayerNorm eps 1e-5, scores scaled by rsqrt(D/H) then causally masked with -inf,
gelu_tanh, and the LM head tied to wte (logits = x @ wte.weight.T). ResNet18 matches
samples/resnet.nest: torchvision's names, batch norm folded into conv biases.
GPT2Decode is one decode step of the same model over past keys/values [L, H, P, D/H]
(samples/gpt2.nest's decode; ONNX Runtime and PyTorch eager run it in the gpt2-decode
section), gpt2_kv the whole-sequence forward that also returns the cache. ResNet18BN matches samples/resnet18.nest: torchvision's resnet18 module tree
(written out here, no torchvision) with its batch norms, in eval mode.
Bert, ViT and ResNet50BN match samples/bert.nest, samples/vit.nest and
samples/resnet50.nest (Hugging Face BertModel and ViTModel without poolers, LayerNorm
eps 1e-12, exact GELU; torchvision's resnet50, v1.5).
Weights are random with a fixed seed. The .safetensors writer is our own (JSON
header padded to 8 bytes, tensors in name order, little-endian F32).
"""
import json
import math
import os
import struct
import sys

import numpy as np

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:            # matmul files need NumPy only
    torch = None


# ------------------------------------------------------------------ files

def save_safetensors(path, tensors):
    """tensors: {name: float32 ndarray}."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        integer = np.asarray(tensors[name]).dtype.kind in "iu"    # num_batches_tracked
        a = np.ascontiguousarray(tensors[name], dtype="<i8" if integer else "<f4")
        header[name] = {"dtype": "I64" if integer else "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for a in blobs:
            f.write(a.tobytes())
    os.replace(tmp, path)


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
    data = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] in ("F32", "I64"), (name, e["dtype"])
        b, end = e["data_offsets"]
        dt = "<f4" if e["dtype"] == "F32" else "<i8"
        out[name] = np.frombuffer(data[base + b:base + end], dtype=dt).reshape(e["shape"]).copy()
    return out


def save_npy(path, a):
    tmp = path + ".tmp.npy"
    np.save(tmp, a)
    os.replace(tmp, path)


# ------------------------------------------------------------------ GPT-2

if torch is not None:
    class Conv1D(nn.Module):
        """HF GPT-2's Conv1D: weight [in, out], y = x @ weight + bias."""
        def __init__(self, i, o):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(i, o))
            self.bias = nn.Parameter(torch.empty(o))

        def forward(self, x):
            return torch.addmm(self.bias, x, self.weight)

    class Attention(nn.Module):
        def __init__(self, D, H, S):
            super().__init__()
            self.D, self.H = D, H
            self.c_attn = Conv1D(D, 3 * D)
            self.c_proj = Conv1D(D, D)
            self.register_buffer("mask", torch.ones(S, S).triu(1).bool(), persistent=False)

        def forward(self, x):
            T, D, H = x.shape[0], self.D, self.H
            q, k, v = self.c_attn(x).split(D, dim=-1)
            q = q.reshape(T, H, D // H).transpose(0, 1)
            k = k.reshape(T, H, D // H).permute(1, 2, 0)
            v = v.reshape(T, H, D // H).transpose(0, 1)
            a = (q @ k) * (1.0 / math.sqrt(D // H))
            a = a.masked_fill(self.mask[:T, :T], float("-inf"))
            a = torch.softmax(a, dim=-1)
            o = (a @ v).transpose(0, 1).reshape(T, D)
            return self.c_proj(o)

    class MLP(nn.Module):
        def __init__(self, D):
            super().__init__()
            self.c_fc = Conv1D(D, 4 * D)
            self.c_proj = Conv1D(4 * D, D)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self, D, H, S):
            super().__init__()
            self.ln_1 = nn.LayerNorm(D, eps=1e-5)
            self.attn = Attention(D, H, S)
            self.ln_2 = nn.LayerNorm(D, eps=1e-5)
            self.mlp = MLP(D)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT2(nn.Module):
        """forward(tokens: int32[S]) -> logits [S, V]"""
        def __init__(self, L, D, H, V, CTX, S):
            super().__init__()
            self.S = S
            self.wte = nn.Embedding(V, D)
            self.wpe = nn.Embedding(CTX, D)
            self.h = nn.ModuleList([Block(D, H, S) for _ in range(L)])
            self.ln_f = nn.LayerNorm(D, eps=1e-5)

        def forward(self, tokens):
            x = self.wte(tokens) + self.wpe.weight[:tokens.shape[0]]
            for b in self.h:
                x = b(x)
            x = self.ln_f(x)
            return F.linear(x, self.wte.weight)

    class GPT2Decode(GPT2):
        """One decode step over a key/value cache, GPT2's parameters (the same state dict):
        forward(token: int32[1], past_k: [L, H, P, D/H], past_v) -> (logits [1, V],
        present_k [L, H, P+1, D/H], present_v): the token at position P attends to the
        P cached positions and itself (samples/gpt2.nest's decode)."""
        def forward(self, token, past_k, past_v):
            P = past_k.shape[2]
            D, H = self.h[0].attn.D, self.h[0].attn.H
            hd = D // H
            x = self.wte(token) + self.wpe.weight[P:P + 1]
            ks, vs = [], []
            for i, b in enumerate(self.h):
                q, k, v = b.attn.c_attn(b.ln_1(x)).split(D, dim=-1)
                k = torch.cat([past_k[i], k.reshape(H, 1, hd)], dim=1)
                v = torch.cat([past_v[i], v.reshape(H, 1, hd)], dim=1)
                ks.append(k)
                vs.append(v)
                a = torch.softmax((q.reshape(H, 1, hd) @ k.transpose(1, 2)) * (1.0 / math.sqrt(hd)), dim=-1)
                x = x + b.attn.c_proj((a @ v).reshape(1, D))
                x = x + b.mlp(b.ln_2(x))
            return F.linear(self.ln_f(x), self.wte.weight), torch.stack(ks), torch.stack(vs)

    def gpt2_kv(model, tokens):
        """The whole-sequence forward of a GPT2, also returning every layer's keys and
        values: logits [T, V], K and V [L, H, T, D/H] (what a prefill of tokens caches)."""
        T, ks, vs = tokens.shape[0], [], []
        x = model.wte(tokens) + model.wpe.weight[:T]
        for b in model.h:
            D, H = b.attn.D, b.attn.H
            h = b.ln_1(x)
            _, k, v = b.attn.c_attn(h).split(D, dim=-1)
            ks.append(k.reshape(T, H, D // H).transpose(0, 1))
            vs.append(v.reshape(T, H, D // H).transpose(0, 1))
            x = b(x)
        return F.linear(model.ln_f(x), model.wte.weight), torch.stack(ks), torch.stack(vs)

    def gpt2_init(model, seed):
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
                elif name.endswith(".bias"):
                    p.copy_(0.02 * torch.randn(p.shape, generator=g))
                else:
                    p.copy_(0.02 * torch.randn(p.shape, generator=g))

    # -------------------------------------------------------------- ResNet-18

    class ResNet18(nn.Module):
        """samples/resnet.nest: batch norm folded into each conv's bias."""
        def __init__(self, C0, classes, in_c=3):
            super().__init__()
            def conv(o, i, k):
                m = nn.Conv2d(i, o, k, bias=True)
                return m
            self.conv1 = conv(C0, in_c, 7)
            self.layers = []
            widths = [C0, 2 * C0, 4 * C0, 8 * C0]
            prev = C0
            for s, c in enumerate(widths):
                for j in range(2):
                    blk = nn.Module()
                    blk.conv1 = conv(c, prev if j == 0 else c, 3)
                    blk.conv2 = conv(c, c, 3)
                    if s > 0 and j == 0:
                        blk.downsample = nn.ModuleList([conv(c, prev, 1)])
                    self.add_module("layer%d_%d" % (s + 1, j), blk)
                    self.layers.append((blk, s > 0 and j == 0))
                prev = c
            self.fc = nn.Linear(8 * C0, classes)

        def forward(self, x):
            x = F.relu(F.conv2d(x, self.conv1.weight, self.conv1.bias, stride=2, padding=3))
            x = F.max_pool2d(x, 3, stride=2, padding=1)
            for blk, down in self.layers:
                s = 2 if down else 1
                h = F.relu(F.conv2d(x, blk.conv1.weight, blk.conv1.bias, stride=s, padding=1))
                h = F.conv2d(h, blk.conv2.weight, blk.conv2.bias, padding=1)
                sc = F.conv2d(x, blk.downsample[0].weight, blk.downsample[0].bias, stride=2) if down else x
                x = F.relu(h + sc)
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return self.fc(x)

        def hf_state(self):
            """torchvision names: layer1.0.conv1.weight, layer2.0.downsample.0.bias, ..."""
            out = {}
            for k, v in self.state_dict().items():
                if k.startswith("layer"):
                    head, rest = k.split(".", 1)
                    s, j = head[len("layer"):].split("_")
                    k = "layer%s.%s.%s" % (s, j, rest)
                out[k] = v
            return out

        def load_hf_state(self, state):
            mine = {}
            for k, v in state.items():
                if k.startswith("layer"):
                    parts = k.split(".")
                    k = "layer%s_%s.%s" % (parts[0][len("layer"):], parts[1], ".".join(parts[2:]))
                mine[k] = torch.from_numpy(v)
            self.load_state_dict(mine)

    def resnet_init(model, seed):
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith(".bias"):
                    p.copy_(0.05 * torch.randn(p.shape, generator=g))
                else:
                    fan_in = p[0].numel()
                    std = math.sqrt(2.0 / fan_in) * (0.5 if name.endswith("conv2.weight") else 1.0)
                    p.copy_(std * torch.randn(p.shape, generator=g))


    # ---------------------------------------------- ResNet-18 with batch norm

    class BasicBlock(nn.Module):
        """torchvision's BasicBlock: conv1, bn1, conv2, bn2, downsample = Sequential(conv, bn)."""
        def __init__(self, i, o, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(i, o, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(o)
            self.conv2 = nn.Conv2d(o, o, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(o)
            self.downsample = None
            if stride != 1 or i != o:
                self.downsample = nn.Sequential(nn.Conv2d(i, o, 1, stride, bias=False), nn.BatchNorm2d(o))

        def forward(self, x):
            h = F.relu(self.bn1(self.conv1(x)))
            h = self.bn2(self.conv2(h))
            return F.relu(h + (self.downsample(x) if self.downsample is not None else x))

    class ResNet18BN(nn.Module):
        """torchvision.models.resnet18: its state dict names (conv1.weight, bn1.running_var,
        layer2.0.downsample.1.weight, ..., fc.bias) come from this module tree."""
        def __init__(self, classes=1000):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            w = [64, 128, 256, 512]
            for s in range(4):
                i = w[max(s - 1, 0)]
                self.add_module("layer%d" % (s + 1), nn.Sequential(BasicBlock(i, w[s], 1 if s == 0 else 2),
                                                                   BasicBlock(w[s], w[s], 1)))
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    def resnet18_init(model, seed, last="conv2.weight"):
        """He-normal convolutions (the second of each block halved, so the residual sum
        stays in range), batch-norm statistics that matter: means around 0, variances
        in [0.5, 1.5), scales around 1; num_batches_tracked as after some training."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, t in model.state_dict().items():
                if name.endswith("num_batches_tracked"):
                    t.fill_(1000)
                elif name.endswith("running_var"):
                    t.copy_(0.5 + torch.rand(t.shape, generator=g))
                elif name.endswith("running_mean") or name.endswith(".bias"):
                    t.copy_(0.1 * torch.randn(t.shape, generator=g))
                elif t.dim() == 1:
                    t.copy_(1.0 + 0.1 * torch.randn(t.shape, generator=g))
                else:
                    std = math.sqrt(2.0 / t[0].numel()) * (0.5 if name.endswith(last) else 1.0)
                    t.copy_(std * torch.randn(t.shape, generator=g))


    # ------------------------------------------------------- BERT-base, ViT-B/16

    class BertSelf(nn.Module):
        def __init__(self, D, H):
            super().__init__()
            self.H = H
            self.query, self.key, self.value = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)

        def forward(self, x):
            N, T, D = x.shape
            H = self.H
            q = self.query(x).reshape(N, T, H, D // H).transpose(1, 2)
            k = self.key(x).reshape(N, T, H, D // H).permute(0, 2, 3, 1)
            v = self.value(x).reshape(N, T, H, D // H).transpose(1, 2)
            a = torch.softmax((q @ k) * (1.0 / math.sqrt(D // H)), dim=-1)
            return (a @ v).transpose(1, 2).reshape(N, T, D)

    class BertLayer(nn.Module):
        """Hugging Face's BertLayer: attention.self.{query,key,value}, attention.output.{dense,
        LayerNorm}, intermediate.dense, output.{dense,LayerNorm}; post-norm, exact GELU."""
        def __init__(self, D, H, FF, eps):
            super().__init__()
            self.attention = nn.Module()
            self.attention.self = BertSelf(D, H)
            self.attention.output = nn.Module()
            self.attention.output.dense = nn.Linear(D, D)
            self.attention.output.LayerNorm = nn.LayerNorm(D, eps=eps)
            self.intermediate = nn.Module()
            self.intermediate.dense = nn.Linear(D, FF)
            self.output = nn.Module()
            self.output.dense = nn.Linear(FF, D)
            self.output.LayerNorm = nn.LayerNorm(D, eps=eps)

        def forward(self, x):
            ao = self.attention.output
            x = ao.LayerNorm(x + ao.dense(self.attention.self(x)))
            m = F.gelu(self.intermediate.dense(x))
            return self.output.LayerNorm(x + self.output.dense(m))

    class Bert(nn.Module):
        """samples/bert.nest: Hugging Face BertModel without the pooler, token ids [N, T] in
        (token type 0, no padding mask), last hidden state [N, T, D] out."""
        def __init__(self, L, D, H, FF, V, MAXPOS=512, TYPES=2, eps=1e-12):
            super().__init__()
            self.embeddings = nn.Module()
            self.embeddings.word_embeddings = nn.Embedding(V, D)
            self.embeddings.position_embeddings = nn.Embedding(MAXPOS, D)
            self.embeddings.token_type_embeddings = nn.Embedding(TYPES, D)
            self.embeddings.LayerNorm = nn.LayerNorm(D, eps=eps)
            self.encoder = nn.Module()
            self.encoder.layer = nn.ModuleList([BertLayer(D, H, FF, eps) for _ in range(L)])

        def forward(self, tokens):
            e = self.embeddings
            T = tokens.shape[1]
            x = e.word_embeddings(tokens) + e.position_embeddings.weight[:T] + e.token_type_embeddings.weight[0]
            x = e.LayerNorm(x)
            for layer in self.encoder.layer:
                x = layer(x)
            return x

    class ViTLayer(nn.Module):
        """Hugging Face's ViTLayer: layernorm_before, attention.attention.{query,key,value},
        attention.output.dense, layernorm_after, intermediate.dense, output.dense; pre-norm."""
        def __init__(self, D, H, FF, eps):
            super().__init__()
            self.layernorm_before = nn.LayerNorm(D, eps=eps)
            self.attention = nn.Module()
            self.attention.attention = BertSelf(D, H)
            self.attention.output = nn.Module()
            self.attention.output.dense = nn.Linear(D, D)
            self.layernorm_after = nn.LayerNorm(D, eps=eps)
            self.intermediate = nn.Module()
            self.intermediate.dense = nn.Linear(D, FF)
            self.output = nn.Module()
            self.output.dense = nn.Linear(FF, D)

        def forward(self, x):
            x = x + self.attention.output.dense(self.attention.attention(self.layernorm_before(x)))
            return x + self.output.dense(F.gelu(self.intermediate.dense(self.layernorm_after(x))))

    class ViT(nn.Module):
        """samples/vit.nest: Hugging Face ViTModel without the pooler, images [N, 3, IMG, IMG]
        in, the final-normed CLS features [N, D] out."""
        def __init__(self, IMG, PATCH, L, D, H, FF, eps=1e-12):
            super().__init__()
            S = (IMG // PATCH) ** 2 + 1
            self.embeddings = nn.Module()
            self.embeddings.cls_token = nn.Parameter(torch.empty(1, 1, D))
            self.embeddings.position_embeddings = nn.Parameter(torch.empty(1, S, D))
            self.embeddings.patch_embeddings = nn.Module()
            self.embeddings.patch_embeddings.projection = nn.Conv2d(3, D, PATCH, PATCH)
            self.encoder = nn.Module()
            self.encoder.layer = nn.ModuleList([ViTLayer(D, H, FF, eps) for _ in range(L)])
            self.layernorm = nn.LayerNorm(D, eps=eps)

        def forward(self, images):
            e = self.embeddings
            p = e.patch_embeddings.projection(images).flatten(2).transpose(1, 2)
            x = torch.cat([e.cls_token.expand(images.shape[0], -1, -1), p], dim=1) + e.position_embeddings
            for layer in self.encoder.layer:
                x = layer(x)
            return self.layernorm(x[:, 0])

    class Conv3x3(nn.Module):
        """bench/conv3x3.nest: one 3x3 convolution C -> C, stride 1, padding 1, no bias."""
        def __init__(self, C):
            super().__init__()
            self.conv = nn.Conv2d(C, C, 3, 1, 1, bias=False)

        def forward(self, x):
            return self.conv(x)

    def transformer_init(model, seed):
        """Weights and embeddings ~ 0.02 N(0, 1), biases 0.02 N(0, 1), LayerNorm scales
        1 + 0.1 N(0, 1): a trained model's scale, with every parameter mattering."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "LayerNorm.weight" in name or ("layernorm" in name and name.endswith(".weight")):
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
                else:
                    p.copy_(0.02 * torch.randn(p.shape, generator=g))

    # -------------------------------------------------------------- ResNet-50

    class Bottleneck(nn.Module):
        """torchvision's Bottleneck (v1.5: the stride on conv2): conv1 1x1, conv2 3x3,
        conv3 1x1 to 4x the width, each with a batch norm; downsample = Sequential(conv, bn)."""
        def __init__(self, i, w, stride, down):
            super().__init__()
            self.conv1 = nn.Conv2d(i, w, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(w)
            self.conv2 = nn.Conv2d(w, w, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(w)
            self.conv3 = nn.Conv2d(w, 4 * w, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(4 * w)
            self.downsample = None
            if down:
                self.downsample = nn.Sequential(nn.Conv2d(i, 4 * w, 1, stride, bias=False), nn.BatchNorm2d(4 * w))

        def forward(self, x):
            h = F.relu(self.bn1(self.conv1(x)))
            h = F.relu(self.bn2(self.conv2(h)))
            h = self.bn3(self.conv3(h))
            return F.relu(h + (self.downsample(x) if self.downsample is not None else x))

    class ResNet50BN(nn.Module):
        """torchvision.models.resnet50's module tree (so its state dict names), C0 the
        first stage's width (64; smaller for tests), in eval mode: samples/resnet50.nest.
        stages: the blocks per stage (deeper ResNets grow the third: 101 has 23, 152 36)."""
        def __init__(self, classes=1000, C0=64, stages=(3, 4, 6, 3)):
            super().__init__()
            self.conv1 = nn.Conv2d(3, C0, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(C0)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            i = C0
            for s, n in enumerate(stages):
                w = C0 << s
                blocks = [Bottleneck(i, w, 1 if s == 0 else 2, True)] + [Bottleneck(4 * w, w, 1, False)
                                                                         for _ in range(n - 1)]
                self.add_module("layer%d" % (s + 1), nn.Sequential(*blocks))
                i = 4 * w
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(i, classes)

        def forward(self, x):
            x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))


def gpt2_files(d, L, D, H, V, CTX, S, seed=1):
    torch.manual_seed(seed)
    model = GPT2(L, D, H, V, CTX, S).eval()
    gpt2_init(model, seed)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    save_safetensors(os.path.join(d, "weights.safetensors"), state)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, V, size=S, dtype=np.int32)
    save_npy(os.path.join(d, "tokens.npy"), tokens)
    t = torch.from_numpy(tokens)
    with torch.no_grad():
        ref = model.double()(t).numpy()
    save_npy(os.path.join(d, "ref.npy"), ref)
    model.float()
    tmp = os.path.join(d, "model.tmp.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (t,), tmp, opset_version=14, input_names=["tokens"],
                          output_names=["logits"], do_constant_folding=True)
    os.replace(tmp, os.path.join(d, "model.onnx"))


def gpt2_decode_files(d, L, D, H, V, CTX, past, rows, seed=1):
    """The decode-step files: the weights of gpt2_files (the same seed, so the same values),
    DIR/tokens.npy (i32[CTX]), DIR/decode.onnx (GPT2Decode, P a dynamic axis), and from one
    float64 whole-sequence forward over the CTX tokens: for each P in past, DIR/token-P.npy
    (tokens[P:P+1]), DIR/past_k-P.npy and DIR/past_v-P.npy (f32 [L, H, P, D/H], the cache a
    prefill of tokens[0:P] fills); for each N in rows, DIR/ref-N.npy (float64 logits of
    position N: a decode at P=N, or the last row of a prefill of N+1 tokens)."""
    torch.manual_seed(seed)
    model = GPT2Decode(L, D, H, V, CTX, CTX).eval()     # S = CTX: the causal mask of gpt2_kv
    gpt2_init(model, seed)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    save_safetensors(os.path.join(d, "weights.safetensors"), state)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, V, size=CTX, dtype=np.int32)
    save_npy(os.path.join(d, "tokens.npy"), tokens)
    n = max(list(past) + list(rows)) + 1
    with torch.no_grad():
        logits, K, Vc = gpt2_kv(model.double(), torch.from_numpy(tokens[:n]))
    for P in past:
        save_npy(os.path.join(d, "token-%d.npy" % P), tokens[P:P + 1].copy())
        save_npy(os.path.join(d, "past_k-%d.npy" % P), np.ascontiguousarray(K[:, :, :P].numpy().astype(np.float32)))
        save_npy(os.path.join(d, "past_v-%d.npy" % P), np.ascontiguousarray(Vc[:, :, :P].numpy().astype(np.float32)))
    for N in rows:
        save_npy(os.path.join(d, "ref-%d.npy" % N), logits[N].numpy())
    del logits, K, Vc
    model.float()
    P0 = 5
    ex = (torch.from_numpy(tokens[P0:P0 + 1].copy()), torch.zeros(L, H, P0, D // H), torch.zeros(L, H, P0, D // H))
    tmp = os.path.join(d, "decode.tmp.onnx")
    with torch.no_grad():
        torch.onnx.export(model, ex, tmp, opset_version=14, input_names=["token", "past_k", "past_v"],
                          output_names=["logits", "present_k", "present_v"], do_constant_folding=True,
                          dynamic_axes={"past_k": {2: "P"}, "past_v": {2: "P"},
                                        "present_k": {2: "P1"}, "present_v": {2: "P1"}})
    os.replace(tmp, os.path.join(d, "decode.onnx"))


def resnet_files(d, IMG, C0, CLASSES, seed=1):
    torch.manual_seed(seed)
    model = ResNet18(C0, CLASSES).eval()
    resnet_init(model, seed)
    state = {k: v.detach().numpy() for k, v in model.hf_state().items()}
    save_safetensors(os.path.join(d, "weights.safetensors"), state)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 3, IMG, IMG)).astype(np.float32)
    save_npy(os.path.join(d, "x.npy"), x)
    with torch.no_grad():
        ref = model.double()(torch.from_numpy(x).double()).numpy()
    save_npy(os.path.join(d, "ref.npy"), ref)


def resnet18_files(d, IMG, seed=1):
    torch.manual_seed(seed)
    model = ResNet18BN().eval()
    resnet18_init(model, seed)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    save_safetensors(os.path.join(d, "weights.safetensors"), state)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 3, IMG, IMG)).astype(np.float32)
    save_npy(os.path.join(d, "x.npy"), x)
    with torch.no_grad():
        ref = model.double()(torch.from_numpy(x).double()).numpy()
    save_npy(os.path.join(d, "ref.npy"), ref)
    model.float()
    tmp = os.path.join(d, "model.tmp.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x),), tmp, opset_version=14, input_names=["x"],
                          output_names=["logits"], do_constant_folding=True)
    os.replace(tmp, os.path.join(d, "model.onnx"))


def export_onnx(model, args, path, inputs, outputs):
    """model (float32) to ONNX, opset 14, static shapes, written atomically."""
    tmp = path + ".tmp.onnx"
    with torch.no_grad():
        torch.onnx.export(model, args, tmp, opset_version=14, input_names=inputs, output_names=outputs,
                          do_constant_folding=True)
    os.replace(tmp, path)


def model_files(d, model, x, seed, init):
    """The files of one model: weights (its state dict), x.npy, ref.npy (float64), model.onnx."""
    init(model, seed)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    save_safetensors(os.path.join(d, "weights.safetensors"), state)
    save_npy(os.path.join(d, "x.npy"), x)
    with torch.no_grad():
        xt = torch.from_numpy(x)
        ref = model.double()(xt.double() if x.dtype.kind == "f" else xt).numpy()
    save_npy(os.path.join(d, "ref.npy"), ref)
    export_onnx(model.float(), (torch.from_numpy(x),), os.path.join(d, "model.onnx"), ["x"], ["y"])


def bert_files(d, N, T, L, D, H, FF, V, seed=1):
    torch.manual_seed(seed)
    tokens = np.random.default_rng(seed).integers(0, V, size=(N, T), dtype=np.int32)
    model_files(d, Bert(L, D, H, FF, V).eval(), tokens, seed, transformer_init)


def vit_files(d, N, IMG, PATCH, L, D, H, FF, seed=1):
    torch.manual_seed(seed)
    x = np.random.default_rng(seed).standard_normal((N, 3, IMG, IMG)).astype(np.float32)
    model_files(d, ViT(IMG, PATCH, L, D, H, FF).eval(), x, seed, transformer_init)


def resnet50_files(d, BATCH, IMG, C0, CLASSES, seed=1):
    torch.manual_seed(seed)
    x = np.random.default_rng(seed).standard_normal((BATCH, 3, IMG, IMG)).astype(np.float32)
    model_files(d, ResNet50BN(CLASSES, C0).eval(), x, seed, lambda m, s: resnet18_init(m, s, "conv3.weight"))


def resnet_deep_onnx(path, L, BATCH, IMG, C0, CLASSES, seed=1):
    """Only model.onnx of ResNet50BN with L identity bottlenecks after the downsampling one
    in its third stage (blocks 1, 1, 1 + L, 1): the depth a ResNet grows by (101 has 22 there,
    152 35), L the number of equal layers as in GPT-2's L, for bench/compile.py."""
    torch.manual_seed(seed)
    x = np.random.default_rng(seed).standard_normal((BATCH, 3, IMG, IMG)).astype(np.float32)
    model = ResNet50BN(CLASSES, C0, (1, 1, 1 + L, 1)).eval()
    resnet18_init(model, seed, "conv3.weight")
    export_onnx(model, (torch.from_numpy(x),), path, ["x"], ["y"])


def bert_onnx(path, N, T, L, D, H, FF, V, seed=1):
    """Only model.onnx of Bert (bench/compile.py)."""
    torch.manual_seed(seed)
    tokens = np.random.default_rng(seed).integers(0, V, size=(N, T), dtype=np.int32)
    model = Bert(L, D, H, FF, V).eval()
    transformer_init(model, seed)
    export_onnx(model, (torch.from_numpy(tokens),), path, ["x"], ["y"])


def conv_files(d, C, HW, seed=1):
    """One 3x3 convolution, C -> C channels, stride 1, padding 1, no bias, on [1, C, HW, HW]
    (bench/conv3x3.nest): its weight is conv.weight."""
    torch.manual_seed(seed)
    x = np.random.default_rng(seed).standard_normal((1, C, HW, HW)).astype(np.float32)
    model_files(d, Conv3x3(C).eval(), x, seed, resnet18_init)


def matmul_files(d, M, N, K, seed=1):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    save_npy(os.path.join(d, "a.npy"), a)
    save_npy(os.path.join(d, "b.npy"), b)
    save_npy(os.path.join(d, "ref.npy"), a.astype(np.float64) @ b.astype(np.float64))


def main():
    kind, d = sys.argv[1], sys.argv[2]
    os.makedirs(d, exist_ok=True)
    if kind != "matmul" and torch is None:
        sys.exit("models.py: PyTorch is not installed")
    if kind == "gpt2-decode":
        ints = lambda s: [int(x) for x in s.split(",") if x]
        return gpt2_decode_files(d, *[int(x) for x in sys.argv[3:8]], ints(sys.argv[8]), ints(sys.argv[9]))
    args = [int(x) for x in sys.argv[3:]]
    {"gpt2": gpt2_files, "resnet": resnet_files, "resnet18": resnet18_files, "matmul": matmul_files,
     "bert": bert_files, "vit": vit_files, "resnet50": resnet50_files, "conv": conv_files}[kind](d, *args)


if __name__ == "__main__":
    main()
