"""The weight-format section of bench/run.py (issue 36): the decode step of GPT-2 small
and of a TinyLlama-1.1B-shaped LLaMA with their weights held in f32, bf16, q8_0, q4_0 and the
k-quants q4_k and q6_k
(nestc build --weights-format), each against the memory-read limit counted in the bytes
of its own format."""
import json
import os
import re
import shutil
import statistics
import struct

import numpy as np

from common import BENCH, DECODE_MALLOC_ENV, GPT2_GEN, ROOT, STREAM_MIB, background_note, log, measure, sh

FORMATS = ("f32", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q8_0+int8", "q4_0+int8", "q4_k+int8")   # +int8: --activations=int8
TINYLLAMA = dict(L=22, D=2048, H=32, KVH=4, F=5632, V=32000, CTX=256)
FMT_P = 127
READ = "memory read"
# (model tag, title, sample, config, C macros for bench/decode.c, the tables a decode step
# gathers one row of: every other weight is read whole once a step)
MODELS = (
    ("gpt2", "GPT-2 small", "gpt2.nest", GPT2_GEN, [], ("wpe.weight",)),
    ("tinyllama", "TinyLlama-1.1B shape", "llama.nest", TINYLLAMA, ["-DMODEL=llama", "-DMODEL_UP=LLAMA"],
     ("model.embed_tokens.weight",)),
)
# goals on TinyLlama's shape: % of the read limit in the format's own bytes
GOAL = {"bf16": 0.85, "q8_0": 0.85, "q4_0": 0.75, "q8_0+int8": 0.85, "q4_0+int8": 0.75}


def tensor_bytes(path):
    """{name: (bytes, shape)} of a safetensors file's tensors (its header)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    return {k: (v["data_offsets"][1] - v["data_offsets"][0], v["shape"]) for k, v in h.items() if k != "__metadata__"}


class FormatSections:
    def fmt_build(self, d, sample, cfg, macros, fmt, act="f32"):
        """The sample built with --weights-format=fmt (f32: none) and --activations=act,
        linked with bench/decode.c; returns the program and {param: bytes held} from its
        report."""
        out = os.path.join(d, "nestc-" + fmt + ("" if act == "f32" else "-" + act))
        shutil.rmtree(out, ignore_errors=True)
        cmd = [self.nestc, "build", os.path.join(ROOT, "samples", sample), "-o", out, "--report"]
        for k, v in cfg.items():
            cmd += ["-D", "%s=%s" % (k, v)]
        if fmt != "f32":
            cmd.append("--weights-format=" + fmt)
        if act != "f32":
            cmd.append("--activations=" + act)
        log("building %s %s %s" % (sample, fmt, act))
        rep = sh(cmd)
        held = {m.group(1): int(m.group(2)) for m in
                re.finditer(r"^  (\S+): f32\[[^\]]*\], \w+, blocks along axis \d, (\d+) bytes$", rep, re.M)}
        exe = os.path.join(out, "decode")
        objs = sorted(os.path.join(out, o) for o in os.listdir(out) if o.endswith(".o"))
        sh([self.cc, "-O2", "-I" + os.path.join(ROOT, "runtime"), "-I" + out] + macros +
           ["-o", exe, os.path.join(BENCH, "decode.c")] + objs + [self.lib, "-lm", "-lpthread"])
        return exe, held

    def formats_decode(self):
        print("\n## Weight formats: the decode step at P=%d with weights in f32, bf16, q8_0, q4_0, q4_k and q6_k "
              "(issue 36)\n" % FMT_P)
        print("Each model is built once per format (nestc build --weights-format=FMT: every matrix that only "
              "matmuls and gathers read; norms and biases stay f32) over one file of random f32 weights "
              "(nestc weights --random-weights 1), converted when the instance is made. A decode step reads every "
              "weight once but the gathered tables (one row): \"step MB\" is those bytes in the format's own "
              "size, and the limit is the time to read them at the memory-read speed of the same round (bench/"
              "stream.c serve, %d MiB, its turn right after the formats' turns). The key/value cache (f32) is not "
              "in the limit. Logits against the f32 build's: max |a - b| / max |b| (reported, not a goal). "
              "q8_0+int8, q4_0+int8 and q4_k+int8 are built with --activations=int8 (integer dot products).\n"
              % STREAM_MIB)
        if "nestc" in self.why_not:
            print("unavailable: %s" % self.why_not["nestc"])
            return
        goals, bgs = [], []
        for tag, title, sample, cfg, macros, gathered in MODELS:
            d = os.path.join(self.work, "formats-" + tag)
            os.makedirs(d, exist_ok=True)
            w = os.path.join(d, "weights.safetensors")
            defs = []
            for k, v in cfg.items():
                defs += ["-D", "%s=%s" % (k, v)]
            if not os.path.exists(w):
                log("writing %s random weights" % title)
                sh([self.nestc, "weights", os.path.join(ROOT, "samples", sample)] + defs +
                   ["--random-weights", "1", "-o", w + ".tmp"])
                os.replace(w + ".tmp", w)
            tok = os.path.join(d, "tokens.npy")
            np.save(tok, (np.arange(cfg["CTX"]) * 7919 % cfg["V"]).astype(np.int32))
            f32 = tensor_bytes(w)
            builds, step = {}, {}
            for fmt in FORMATS:
                try:
                    wf, _, act = fmt.partition("+")
                    builds[fmt], held = self.fmt_build(d, sample, cfg, macros, wf, act or "f32")
                except Exception as e:  # noqa: BLE001 - a failed build is this row's result
                    builds[fmt] = None
                    log("build %s %s: %s" % (tag, fmt, e))
                    continue
                total = 0
                for name, (nb, shape) in f32.items():
                    b = held.get(name, nb)
                    total += b // shape[0] if name in gathered else b
                step[fmt] = total
            specs = []
            for t in (1, 2):
                for fmt in FORMATS:
                    out = os.path.join(d, "%s-%d.npy" % (fmt, t))
                    specs.append(dict(label=fmt, threads=t, out=out, log=os.path.join(d, "%s-%d.log" % (fmt, t)),
                                      env=dict(self.nestc_env(t), **DECODE_MALLOC_ENV),
                                      error=None if builds.get(fmt) else "the build failed",
                                      cmd=[builds.get(fmt) or "false", w, out, "3", tok, "decode", str(FMT_P)]))
                specs.append(dict(label=READ, threads=t, out=os.path.join(d, "stream-%d.npy" % t),
                                  log=os.path.join(d, "stream-%d.log" % t), env=self.base_env(),
                                  error=None if os.path.exists(self.stream_exe()) else "no bench/stream",
                                  cmd=[self.stream_exe(), str(t), str(STREAM_MIB), "serve"]))
            if not os.path.exists(self.stream_exe()):
                try:
                    self.bandwidth()   # builds bench/stream
                    for s in specs:
                        if s["label"] == READ:
                            s["error"] = None
                except Exception as e:  # noqa: BLE001
                    log("bandwidth: %s" % e)
            # one thread count at a time: all of TinyLlama's builds at once (two of them
            # f32, 4.4 GB each) and a server of each for both counts outgrew 24 GB
            res = []
            for t in (1, 2):
                res_t, bg = measure([x for x in specs if x["threads"] == t], self.rounds, budget=self.budget(10))
                res += res_t
                if bg is not None:
                    bgs.append(bg)
            reads = {r["threads"]: (r.get("turns") or {}) for r in res if r["label"] == READ and r["ms"]}

            def paired(r, nbytes):
                rd = reads.get(r["threads"]) or {}
                turns = r.get("turns") or {}
                v = [nbytes * statistics.median(rd[k]) / (STREAM_MIB << 20) / statistics.median(turns[k])
                     for k in turns if k in rd]
                return statistics.median(v) if v else None

            print("\n### %s: %s, P=%d\n" % (title, ", ".join("%s=%d" % kv for kv in cfg.items()), FMT_P))
            print("| format | threads | step MB | median ms | min ms | GB/s (format's bytes) | % of the round's read limit "
                  "| logits vs f32 | runs |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            ref = {r["threads"]: r["out"] for r in res if r["label"] == "f32" and r["ms"]}
            for r in sorted([r for r in res if r["label"] != READ], key=lambda r: (r["threads"], FORMATS.index(r["label"]))):
                if r["ms"] is None:
                    print("| %s | %d | unavailable: %s | | | | | | |" % (r["label"], r["threads"], r["error"]))
                    continue
                nb = step.get(r["label"], 0)
                frac = paired(r, nb)
                diff = "-"
                if r["label"] != "f32" and r["threads"] in ref and os.path.exists(ref[r["threads"]]):
                    a, b = np.load(r["out"]).astype(np.float64), np.load(ref[r["threads"]]).astype(np.float64)
                    diff = "%.2g" % (np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
                print("| %s | %d | %.1f | %.2f | %.2f | %.1f | %s | %s | %d |" % (
                    r["label"], r["threads"], nb / 1e6, r["ms"], r["min"], nb / r["ms"] / 1e6,
                    "%.0f%%" % (100 * frac) if frac else "-", diff, r["n"]))
                if tag == "tinyllama" and r["label"] in GOAL:
                    g = GOAL[r["label"]]
                    goals.append("%s, %d thread%s: %s of the round's read limit (goal >= %.0f%%: %s)" % (
                        r["label"], r["threads"], "s" if r["threads"] > 1 else "",
                        "%.0f%%" % (100 * frac) if frac else "?", 100 * g,
                        ("met" if frac >= g else "not met") if frac else "?"))
            rd = {t: "%.1f GB/s" % ((STREAM_MIB << 20) / r["ms"] / 1e6) for r in res if r["label"] == READ and r["ms"]
                  for t in [r["threads"]]}
            if rd:
                print("\nThe memory read in the same rounds (median): %s." % "; ".join(
                    "%d thread%s: %s" % (t, "s" if t > 1 else "", rd[t]) for t in sorted(rd)))
        if goals:
            print("\nGoals (issue 36), TinyLlama's decode step:\n" + "\n".join("- " + g for g in goals))
        if bgs:
            background_note(statistics.mean(bgs))

    def formats_prefill(self):
        """Issue 36's prefill goal: TinyLlama's 128-token prefill with q8_0 and q4_0 weights
        and int8 activations against the f32 build's."""
        print("\n## Weight formats: a 128-token prefill with int8 activations (issue 36)\n")
        print("TinyLlama's shape (%s), one file of random f32 weights; the f32 build against q8_0 and q4_0 builds "
              "with their default numerics (f32 activations) and with --activations=int8 (each matmul over a q8_0 "
              "or q4_0 weight quantizes its activations per block of 32 and takes integer dot products: vpdpbusd "
              "where the CPU has AVX512-VNNI or AVX-VNNI). Ratio: the f32 build's time over the build's. Logits of "
              "the last position against the f32 build's: max |a - b| / max |b|.\n"
              % ", ".join("%s=%d" % kv for kv in TINYLLAMA.items()))
        if "nestc" in self.why_not:
            print("unavailable: %s" % self.why_not["nestc"])
            return
        tag, title, sample, cfg, macros, _ = MODELS[1]
        d = os.path.join(self.work, "formats-" + tag)
        os.makedirs(d, exist_ok=True)
        w = os.path.join(d, "weights.safetensors")
        defs = []
        for k, v in cfg.items():
            defs += ["-D", "%s=%s" % (k, v)]
        if not os.path.exists(w):
            log("writing %s random weights" % title)
            sh([self.nestc, "weights", os.path.join(ROOT, "samples", sample)] + defs +
               ["--random-weights", "1", "-o", w + ".tmp"])
            os.replace(w + ".tmp", w)
        tok = os.path.join(d, "tokens.npy")
        np.save(tok, (np.arange(cfg["CTX"]) * 7919 % cfg["V"]).astype(np.int32))
        variants = [("f32", "f32"), ("q8_0", "f32"), ("q8_0", "int8"), ("q4_0", "f32"), ("q4_0", "int8")]
        builds = {}
        for fmt, act in variants:
            try:
                builds[(fmt, act)], _ = self.fmt_build(d, sample, cfg, macros, fmt, act)
            except Exception as e:  # noqa: BLE001
                log("build %s %s: %s" % (fmt, act, e))
        specs = []
        for t in (1, 2):
            for fmt, act in variants:
                o = os.path.join(d, "prefill-%s-%s-%d.npy" % (fmt, act, t))
                specs.append(dict(label="%s %s" % (fmt, act), threads=t, out=o, log=o[:-4] + ".log",
                                  env=dict(self.nestc_env(t), **DECODE_MALLOC_ENV),
                                  error=None if (fmt, act) in builds else "the build failed",
                                  cmd=[builds.get((fmt, act)) or "false", w, o, "1", tok, "prefill", "128"]))
        res, bg = measure(specs, max(3, self.rounds // 5))
        by = {(r["label"], r["threads"]): r for r in res}
        print("| weights | activations | threads | median ms | tokens/s | f32 build / this | logits vs f32 | runs |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        goals = []
        for t in (1, 2):
            ref = by.get(("f32 f32", t))
            for fmt, act in variants:
                r = by.get(("%s %s" % (fmt, act), t))
                if not r or r["ms"] is None:
                    print("| %s | %s | %d | unavailable: %s | | | | |" % (fmt, act, t, (r or {}).get("error")))
                    continue
                ratio = ref["ms"] / r["ms"] if ref and ref["ms"] else None
                diff = "-"
                if ref and ref["ms"] and fmt != "f32":
                    a, b = np.load(r["out"]).astype(np.float64), np.load(ref["out"]).astype(np.float64)
                    diff = "%.2g" % (np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
                print("| %s | %s | %d | %.1f | %.1f | %s | %s | %d |" % (
                    fmt, act, t, r["ms"], 128e3 / r["ms"], "%.2fx" % ratio if ratio else "-", diff, r["n"]))
                if act == "int8" and ratio:
                    goals.append("%s with int8 activations, %d thread%s: %.2fx the f32 prefill (goal >= 2x: %s)" % (
                        fmt, t, "s" if t > 1 else "", ratio, "met" if ratio >= 2 else "not met"))
        if goals:
            print("\nGoals (issue 36), TinyLlama's prefill:\n" + "\n".join("- " + g for g in goals))
        if bg is not None:
            background_note(bg)
