#!/usr/bin/python3
"""The networks of bench/run.py's onnx-vision section (issue #38): torchvision 0.14's
image classifiers and a torch.nn LSTM language model, as a new user would export them.

  vision.py NAME DIR     DIR/model.onnx (torch.onnx.export, opset 14, static shapes, batch 1),
                         DIR/x.npy (the input), DIR/ref.npy (the output of the same network
                         in float64 PyTorch)
  vision.py --list       the names, one a line

Weights are random with a fixed seed, and the norms are randomised too (batch-norm means
around 0, variances in [0.5, 1.5), scales around 1, shifts around 0): torchvision's own
initialisation leaves batch norms as identities and many of these networks' outputs
degenerate (values near 1e-9, heads of zeros), which would hide wrong arithmetic; a
parameter it starts at zero (vit_b_16's head and class token) is drawn too.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn

IMAGE = (1, 3, 224, 224)
# the LSTM language model: vocabulary, width (hidden = embedding), layers, steps
LSTM_V, LSTM_D, LSTM_L, LSTM_T = 1000, 256, 2, 32


class LSTMLM(nn.Module):
    """Token embedding, a 2-layer LSTM of width 256 over 32 steps, a linear head to the
    vocabulary: logits [1, T, V]. Each step multiplies one row by a 1024x256 weight."""
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(LSTM_V, LSTM_D)
        self.lstm = nn.LSTM(LSTM_D, LSTM_D, LSTM_L, batch_first=True)
        self.head = nn.Linear(LSTM_D, LSTM_V)

    def forward(self, tokens):
        h, _ = self.lstm(self.embed(tokens))
        return self.head(h)


def torchvision_net(name):
    import torchvision
    # googlenet's auxiliary classifiers only run in training
    kw = dict(aux_logits=False, init_weights=True) if name == "googlenet" else {}
    return lambda: getattr(torchvision.models, name)(**kw)


NETS = {n: torchvision_net(n) for n in ("mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
                                          "shufflenet_v2_x1_0", "densenet121", "vit_b_16", "swin_t", "googlenet",
                                          "regnet_y_400mf", "resnext50_32x4d", "mnasnet1_0", "squeezenet1_1",
                                          "convnext_tiny")}
NETS["lstm_lm"] = LSTMLM


def randomise(model, seed):
    """Norm statistics and affine parameters that matter (see the module's text); the
    LSTM's and the embedding's weights uniform in +-1/sqrt(D) as PyTorch's own."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                t.fill_(1000)
            elif name.endswith("running_var"):
                t.copy_(0.5 + torch.rand(t.shape, generator=g))
            elif name.endswith("running_mean"):
                t.copy_(0.1 * torch.randn(t.shape, generator=g))
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm)) and m.weight is not None:
                m.weight.copy_(1.0 + 0.1 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
            elif isinstance(m, nn.Linear) and m.bias is not None:
                m.bias.copy_(0.05 * torch.randn(m.bias.shape, generator=g))
            elif isinstance(m, nn.Embedding):
                m.weight.copy_(torch.randn(m.weight.shape, generator=g))
        # what torchvision starts at zero (vit_b_16's head and class token) would make
        # the output a constant
        for name, p in model.named_parameters():
            if not p.abs().max() > 0:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))


def save_npy(path, a):
    tmp = path + ".tmp.npy"
    np.save(tmp, a)
    os.replace(tmp, path)


def files(name, d, seed=1):
    torch.manual_seed(seed)
    model = NETS[name]().eval()
    randomise(model, seed)
    rng = np.random.default_rng(seed)
    if name == "lstm_lm":
        x = rng.integers(0, LSTM_V, size=(1, LSTM_T), dtype=np.int32)
        xt = torch.from_numpy(x).long()
    else:
        x = rng.standard_normal(IMAGE).astype(np.float32)
        xt = torch.from_numpy(x)
    os.makedirs(d, exist_ok=True)
    save_npy(os.path.join(d, "x.npy"), x)
    with torch.no_grad():
        ref = model.double()(xt if name == "lstm_lm" else xt.double()).numpy()
    save_npy(os.path.join(d, "ref.npy"), ref)
    model.float()
    tmp = os.path.join(d, "model.tmp.onnx")
    # with gradients on: torch 1.13's MultiheadAttention takes a fast path without an
    # ONNX symbolic when they are off (vit_b_16)
    arg = torch.from_numpy(x) if name == "lstm_lm" else xt
    torch.onnx.export(model, (arg,), tmp, opset_version=14, input_names=["x"], output_names=["y"],
                      do_constant_folding=True)
    os.replace(tmp, os.path.join(d, "model.onnx"))


def main():
    if sys.argv[1:] == ["--list"]:
        print("\n".join(NETS))
        return
    if len(sys.argv) != 3 or sys.argv[1] not in NETS:
        sys.exit("usage: vision.py NAME DIR (NAME: %s) | vision.py --list" % ", ".join(NETS))
    files(sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    main()
