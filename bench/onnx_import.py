#!/usr/bin/python3
"""ONNX in, on models exported flat by torch.onnx.export (not a test; needs python3-torch,
which scripts/bench-deps.sh installs).

    /usr/bin/python3 bench/onnx_import.py NESTC [L D H V CTX S]

Exports the bench's own GPT-2 (bench/models.py, opset 14, static shapes) with L layers
and with 4 L layers, then for each: the repeated layers nestc finds (`nestc report
model.onnx`), the logits of `nestc run model.onnx` against PyTorch's float64 logits, and
the time of `nestc build model.onnx` (no cache, one job). Prints the ratio of the build
times, which hierarchical compilation keeps near 1 (issue #11 asks <= 1.2 for 48 layers
against 1).
Defaults: L=3 D=256 H=4 V=1024 CTX=128 S=32 (GPT-2 small is 12 768 12 50257 1024 128).
"""
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402


def one(nestc, d, L, D, H, V, CTX, S):
    os.makedirs(d, exist_ok=True)
    models.gpt2_files(d, L, D, H, V, CTX, S)
    m = os.path.join(d, "model.onnx")
    r = subprocess.run([nestc, "report", m], capture_output=True, text=True)
    if r.returncode:
        sys.exit("nestc report: " + r.stderr)
    found = re.findall(r"^region (\w+): (\d+) nodes, (\d+) occurrences", r.stdout, re.M)
    variants = re.findall(r"(\d+) calls -> (\d+) variant", r.stdout)
    out = os.path.join(d, "logits.npy")
    r = subprocess.run([nestc, "run", m, "--input", "tokens=" + os.path.join(d, "tokens.npy"), "--output", out],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit("nestc run: " + r.stderr)
    got, ref = np.load(out), np.load(os.path.join(d, "ref.npy"))
    rel = float(np.abs(got - ref).max() / np.abs(ref).max())
    t0 = time.time()
    r = subprocess.run([nestc, "build", m, "-o", os.path.join(d, "out"), "--no-cache", "-j1"],
                       capture_output=True, text=True)
    dt = time.time() - t0
    if r.returncode:
        sys.exit("nestc build: " + r.stderr)
    print("GPT-2 L=%d D=%d: regions %s, variants %s, logits max rel. error %.2e vs PyTorch float64, "
          "build %.2f s" % (L, D, ", ".join("%s (%s nodes) x%s" % f for f in found) or "none",
                             ", ".join("%s calls -> %s" % v for v in variants), rel, dt))
    return dt


def main():
    nestc = os.path.abspath(sys.argv[1])
    a = [int(x) for x in sys.argv[2:]] or [3, 256, 4, 1024, 128, 32]
    L, D, H, V, CTX, S = a
    with tempfile.TemporaryDirectory(prefix="nestc-onnx-bench-") as t:
        t1 = one(nestc, os.path.join(t, "a"), L, D, H, V, CTX, S)
        t4 = one(nestc, os.path.join(t, "b"), 4 * L, D, H, V, CTX, S)
    print("build time, %d layers / %d layers: %.2f" % (4 * L, L, t4 / t1))


if __name__ == "__main__":
    main()
