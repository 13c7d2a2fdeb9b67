#!/usr/bin/env python3
"""Compile-time benchmark of hierarchical compilation (make bench-compile).

Builds samples/gpt2.nest at GPT-2-small width (D=768, H=12, V=50257, S=128) with
L = 1, 12, 48 layers, hierarchically and with --no-regions, measured side by
side in one run (runs interleaved, medians), and prints wall time, peak RSS,
objects, .text bytes and the ratios the issue sets as goals.
Then the same goal for models that arrive flat, exported by torch.onnx with L = 1,
12, 48 layers (bench/models.py; needs python3-torch, skipped without it): GPT-2
(D=256 H=4 V=1000 CTX=128 S=32), a BERT-style encoder and a ResNet (L identity
bottlenecks in its third stage after the downsampling one). `nestc import` and `nestc build model.onnx` (import in
memory + build, no cache, one job) are timed side by side, the build both as a
rebuild (the weights file beside the output there from the run before, left alone
when unchanged) and as a first build (no weights file), with the regions and
variants the import finds.
Run: compile.py NESTC [--repeat N] [--onnx-only]
"""
import os
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "samples", "gpt2.nest")


def text_bytes(path):
    """Size of the .text* sections of an ELF64 object."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return 0
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def sec(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
    stroff = sec(shstrndx)[4]
    total = 0
    for i in range(shnum):
        name_off, _, _, _, _, size = sec(i)[:6]
        end = data.index(b"\0", stroff + name_off)
        if data[stroff + name_off:end].startswith(b".text"):
            total += size
    return total


def one_build(nestc, layers, flat, out):
    """Wall seconds and peak RSS (KiB) of one build, in a child of a child so
    that RUSAGE_CHILDREN measures this build alone."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [nestc, "build", MODEL, "-D", "L=%d" % layers, "-o", out, "--no-cache", "-j1"] + (["--no-regions"] if flat else [])
    probe = ("import resource, subprocess, sys, time\n"
             "t = time.perf_counter(); r = subprocess.run(sys.argv[1:]); t = time.perf_counter() - t\n"
             "print(r.returncode, t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    r = subprocess.run([sys.executable, "-c", probe] + cmd, capture_output=True, text=True)
    rc, secs, rss = r.stdout.split()
    if rc != "0":
        sys.exit("build failed: %s\n%s" % (" ".join(cmd), r.stderr))
    objs = [f for f in os.listdir(out) if f.endswith(".o")]
    text = sum(text_bytes(os.path.join(out, f)) for f in objs)
    return float(secs), int(rss), len(objs), text


def timed(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr))
    return time.perf_counter() - t


def edit_region(src, fn):
    """The model with one region changed: `+ 0.0` on its return value."""
    i = src.index("fn %s(" % fn)
    ret = src.index("return", i)
    end = src.index("\n", ret)
    return src[:end] + " + 0.0" + src[end:]


def incremental(nestc, repeat, tmp):
    """Cold -j1, cold -j2, warm (every variant cached) and one region edited."""
    models = [("gpt2 L=12", os.path.join(ROOT, "samples", "gpt2.nest"), ["-D", "L=12"], "block"),
              ("resnet", os.path.join(ROOT, "samples", "resnet.nest"), [], "down_block")]
    print()
    print("%-12s %12s %12s %12s %14s" % ("model", "cold -j1 ms", "cold -j2 ms", "warm ms", "1 region ms"))
    rows = {}
    for label, model, flags, region in models:
        # same file name, so the same model name and symbols
        os.makedirs(os.path.join(tmp, "edited"), exist_ok=True)
        edited = os.path.join(tmp, "edited", os.path.basename(model))
        with open(edited, "w") as f:
            f.write(edit_region(open(model).read(), region))
        out = os.path.join(tmp, "o")
        t = {"j1": [], "j2": [], "warm": [], "edit": []}
        for rep in range(repeat):
            cache = os.path.join(tmp, "cache%d" % rep)
            t["j1"].append(timed([nestc, "build", model] + flags + ["-o", out, "-j1", "--no-cache"]))
            t["j2"].append(timed([nestc, "build", model] + flags + ["-o", out, "-j2", "--no-cache"]))
            timed([nestc, "build", model] + flags + ["-o", out, "-j2", "--cache-dir", cache])
            t["warm"].append(timed([nestc, "build", model] + flags + ["-o", out, "-j2", "--cache-dir", cache]))
            t["edit"].append(timed([nestc, "build", edited] + flags + ["-o", out, "-j2", "--cache-dir", cache]))
            shutil.rmtree(cache)
        m = {k: statistics.median(v) for k, v in t.items()}
        rows[label] = m
        print("%-12s %12.0f %12.0f %12.1f %14.0f" % (label, m["j1"] * 1e3, m["j2"] * 1e3, m["warm"] * 1e3,
                                                     m["edit"] * 1e3))
    r = rows["resnet"]
    g = rows["gpt2 L=12"]
    print()
    print("resnet cold -j1 / cold -j2: %.2fx   (goal: >= 1.7x)" % (r["j1"] / r["j2"]))
    print("warm / cold -j1: resnet %.1f%%, gpt2 %.1f%%   (goal: <= 5%%)" % (100 * r["warm"] / r["j1"],
                                                                         100 * g["warm"] / g["j1"]))
    print("resnet, down_block edited / cold -j1: %.0f%%   (goal: <= 50%%)" % (100 * r["edit"] / r["j1"]))


def onnx_layers(nestc, repeat, tmp):
    """Issue #11 on flat ONNX exports: build time of 48 layers against 1, for GPT-2,
    a BERT-style encoder and a ResNet (L identity bottlenecks in its third stage, after the
    one that downsamples: the blocks that repeat)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import models
    print()
    if models.torch is None:
        print("onnx: skipped (no python3-torch; sh scripts/bench-deps.sh installs it)")
        return
    D, H, V, CTX, S = 256, 4, 1000, 128, 32
    nets = [("gpt2", "GPT-2 (D=%d H=%d V=%d CTX=%d S=%d)" % (D, H, V, CTX, S),
             lambda d, L: models.gpt2_files(d, L, D, H, V, CTX, S)),
            ("bert", "BERT-style encoder (N=1 T=32 D=256 H=4 FF=1024 V=1000)",
             lambda d, L: models.bert_onnx(os.path.join(d, "model.onnx"), 1, 32, L, 256, 4, 1024, 1000)),
            ("resnet", "ResNet (bottlenecks 1, 1, 1+L, 1; C0=32, 1x3x64x64, 100 classes)",
             lambda d, L: models.resnet_deep_onnx(os.path.join(d, "model.onnx"), L, 1, 64, 32, 100))]
    layers = (1, 12, 48)
    summary = []
    for key, title, make in nets:
        found = {}
        for L in layers:
            d = os.path.join(tmp, "%s%d" % (key, L))
            os.makedirs(d)
            make(d, L)
            r = subprocess.run([nestc, "report", os.path.join(d, "model.onnx")], capture_output=True, text=True)
            if r.returncode:
                sys.exit("nestc report failed:\n" + r.stderr)
            regions = re.findall(r"^region (\w+): (\d+) nodes, (\d+) occurrences", r.stdout, re.M)
            variants = re.findall(r"^region (\w+) .*\n\s+(\d+) calls -> (\d+) variant", r.stdout, re.M)
            found[L] = (regions, variants)
        # build: the weights file beside the output is there from the run before
        # (a rebuild: left alone when unchanged); first: it is not (written)
        t = {(L, k): [] for L in layers for k in ("import", "build", "first")}
        for _ in range(repeat):
            for L in layers:
                d = os.path.join(tmp, "%s%d" % (key, L))
                m = os.path.join(d, "model.onnx")
                out = os.path.join(d, "out")
                t[(L, "import")].append(timed([nestc, "import", m, "-o", os.path.join(d, "m.nest"), "-w",
                                               os.path.join(d, "m.safetensors")]))
                for k in ("first", "build"):
                    shutil.rmtree(out, ignore_errors=True)
                    if k == "first" and os.path.exists(out + ".safetensors"):
                        os.unlink(out + ".safetensors")
                    t[(L, k)].append(timed([nestc, "build", m, "-o", out, "--no-cache", "-j1"]))
        med = {k: statistics.median(v) for k, v in t.items()}
        print("%s exported flat by torch.onnx, medians of %d runs:" % (title, repeat))
        print("%-6s %10s %10s %10s %8s  %s" % ("layers", "import ms", "build ms", "first ms", "regions",
                                               "occurrences, variants"))
        for L in layers:
            regions, variants = found[L]
            occ = ", ".join("%s x%s (%s nodes)" % (n, k, nn) for n, nn, k in regions) or "none"
            var = ", ".join("%s: %s calls -> %s" % v for v in variants) or "none"
            print("%-6d %10.0f %10.0f %10.0f %8d  %s; %s" % (L, med[(L, "import")] * 1e3, med[(L, "build")] * 1e3,
                                                            med[(L, "first")] * 1e3, len(regions), occ, var))
        summary.append("%-7s build L=48 / L=1: %.2f (first build %.2f), L=12 / L=1: %.2f" %
                       (key, med[(48, "build")] / med[(1, "build")], med[(48, "first")] / med[(1, "first")],
                        med[(12, "build")] / med[(1, "build")]))
        print()
    print("onnx (goal: build L=48 / L=1 <= 1.2; load average %.2f):" % os.getloadavg()[0])
    for line in summary:
        print("  " + line)


def main():
    nestc = os.path.abspath(sys.argv[1])
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 5
    if "--onnx-only" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            onnx_layers(nestc, repeat, tmp)
        return
    configs = [(1, False), (12, False), (48, False), (1, True), (12, True), (48, True)]
    res = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(repeat):
            for c in configs:
                # the flat builds are slow: fewer of them
                if c[1] and c[0] == 48 and rep >= max(1, repeat // 3):
                    continue
                res[c].append(one_build(nestc, c[0], c[1], os.path.join(tmp, "out")))
    med = {}
    print("nestc compile-time benchmark: samples/gpt2.nest, D=768 H=12 V=50257 S=128, %d cores" % os.cpu_count())
    print("%-22s %10s %12s %8s %12s %6s" % ("build", "wall ms", "peak RSS MiB", "objects", ".text bytes", "runs"))
    for c in configs:
        runs = res[c]
        m = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[0][2], runs[0][3])
        med[c] = m
        name = "L=%d %s" % (c[0], "--no-regions" if c[1] else "hierarchical")
        print("%-22s %10.0f %12.1f %8d %12d %6d" % (name, m[0] * 1e3, m[1] / 1024, m[2], m[3], len(runs)))
    h1, h48, f48 = med[(1, False)], med[(48, False)], med[(48, True)]
    print()
    print("hierarchical L=48 / L=1: time %.2f, RSS %.2f, .text %.2f   (goal: each <= 1.15)" %
          (h48[0] / h1[0], h48[1] / h1[1], h48[3] / h1[3]))
    print("--no-regions L=48 / hierarchical L=48: time %.1fx   (goal: >= 30x)" % (f48[0] / h48[0]))
    with tempfile.TemporaryDirectory() as tmp:
        incremental(nestc, repeat, tmp)
    with tempfile.TemporaryDirectory() as tmp:
        onnx_layers(nestc, repeat, tmp)


if __name__ == "__main__":
    main()
