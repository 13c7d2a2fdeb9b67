"""The sections of bench/run.py for issue #9's networks: BERT-base, ViT-B/16 and ResNet-50
(samples/bert.nest, vit.nest, resnet50.nest against ONNX Runtime on the same weights,
bench/models.py's plain-PyTorch twins exported to ONNX), and single 3x3 convolutions
at ResNet shapes (bench/conv3x3.nest); and (issue #11) `nestc build` of those models'
ONNX exports against the samples. Every table gives % of the FMA peak that
bench/peak.c measured in this run, and the max relative difference (max |a - b| /
max |b|) from the model in float64 PyTorch."""
import os
import re

from common import BENCH, GPT2_SMALL, ROOT, Unavailable, background_note, cell, gpt2_flop, measure, sh

BERT = dict(N=2, T=128, L=12, D=768, H=12, FF=3072, V=30522)
VIT = dict(N=2, IMG=224, PATCH=16, L=12, D=768, H=12, FF=3072)
RESNET50 = dict(BATCH=1, IMG=224, C0=64, CLASSES=1000)
CONV3X3 = [(64, 56), (128, 28), (256, 14), (512, 7)]     # channels in = out, height = width
RATIO_GOAL, PEAK_GOAL, REL_GOAL, CONV_SPEEDUP_GOAL = 0.9, 0.8, 1e-4, 1.1


def encoder_flop(M, S, L, D, FF, B):
    """L transformer layers over B sequences of S tokens, M = B*S rows: the four D x D
    projections, the two FF ones, and attention's QK^T and AV."""
    return float(L * (2 * M * D * D * 4 + 2 * M * D * FF * 2 + 2 * 2 * B * S * S * D))


def bert_flop(N, T, L, D, H, FF, V):
    return encoder_flop(N * T, T, L, D, FF, N)


def vit_flop(N, IMG, PATCH, L, D, H, FF):
    g = IMG // PATCH
    S = g * g + 1
    return encoder_flop(N * S, S, L, D, FF, N) + 2.0 * N * D * 3 * PATCH * PATCH * g * g


def vit_computed_flop(N, IMG, PATCH, L, D, H, FF):
    """What nestc computes of vit_flop: the last layer narrowed to the CLS token (src/rows.c:
    only x[:, 0] is returned) computes its query and output projections, MLP and
    attention rows for one token per image; the keys and values of every token."""
    g = IMG // PATCH
    S = g * g + 1
    gone = N * (S - 1)
    return vit_flop(N, IMG, PATCH, L, D, H, FF) - (2 * gone * D * D * 2 + 2 * gone * D * FF * 2 + 2 * 2 * N * (S - 1) * S * D)


def resnet50_flop(BATCH, IMG, C0, CLASSES):
    def conv(o, i, k, hw):
        return 2 * o * i * k * k * hw * hw
    hw = (IMG + 1) // 2
    total = conv(C0, 3, 7, hw)
    hw = (hw + 1) // 2
    c = C0
    for s, n in enumerate((3, 4, 6, 3)):
        w = C0 << s
        out_hw = hw if s == 0 else (hw + 1) // 2
        total += conv(w, c, 1, hw) + conv(w, w, 3, out_hw) + conv(4 * w, w, 1, out_hw) + conv(4 * w, c, 1, out_hw)
        total += (n - 1) * (conv(w, 4 * w, 1, out_hw) + conv(w, w, 3, out_hw) + conv(4 * w, w, 1, out_hw))
        hw, c = out_hw, 4 * w
    return float(BATCH * (total + 2 * c * CLASSES))


def fmt(x, spec="%.2g"):
    return spec % x if isinstance(x, float) else cell(x)


class NetSections:
    def net_specs(self, d, harness, nerr, warm):
        """nestc and ONNX Runtime at 1 and 2 threads on d's x.npy and model.onnx."""
        w, x, onnx = (os.path.join(d, f) for f in ("weights.safetensors", "x.npy", "model.onnx"))
        specs = []
        for t in (1, 2):
            out = lambda name: os.path.join(d, "%s-%d.npy" % (name, t))
            lg = lambda name: os.path.join(d, "%s-%d.log" % (name, t))
            specs.append(dict(label="nestc", threads=t, error=nerr, out=out("nestc"), log=lg("nestc"),
                              env=self.nestc_env(t), cmd=None if nerr else [harness, w, out("nestc"), str(warm), x]))
            oenv = self.base_env()
            oenv["NODE_PATH"] = self.node_path
            oerr = self.why_not.get("ort") or (None if os.path.exists(onnx) else "no ONNX file (PyTorch exports it)")
            specs.append(dict(label="ONNX Runtime", threads=t, error=oerr, out=out("ort"), log=lg("ort"), env=oenv,
                              cmd=["node", os.path.join(BENCH, "ort_server.js"), onnx, str(t), out("ort"), str(warm), x]))
        return specs

    def net(self, title, kind, src, cfg, values, flop, peak_goal, computed=None):
        """One network: nestc against ONNX Runtime, the table, and the issue's goals. The
        table's GFLOP/s count the model's FLOPs (flop), the same for every runtime;
        computed, when nestc leaves some out, is what it computes, and its % of the peak
        is judged on that."""
        print("\n## %s (%.3g GFLOP per forward)\n" % (title, flop / 1e9))
        computed = computed or flop
        d = os.path.join(self.work, kind)
        try:
            if "torch" in self.why_not:
                raise Unavailable("PyTorch writes these models' weights, reference and ONNX file: "
                                  + self.why_not["torch"])
            self.files(kind, d, values, src, cfg)
        except Unavailable as e:
            print("unavailable: the model files: %s" % e)
            return
        try:
            harness = self.nestc_build(src, cfg, os.path.join(d, "nestc"), os.path.splitext(os.path.basename(src))[0])
            nerr = None
        except Unavailable as e:
            nerr = "nestc: %s" % e
        res, bg = measure(self.net_specs(d, harness if not nerr else None, nerr, 2), self.rounds,
                          budget=self.budget(0))
        ref = self.reference(d)
        ort = {r["threads"]: r["ms"] for r in res if r["label"] == "ONNX Runtime" and r["ms"]}
        print("| runtime | threads | median ms | min ms | GFLOP/s | % of FMA peak | time / ORT | cpu/wall "
              "| % of peak per CPU time | runs | max rel diff vs fp64 |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        nest = {}
        for r in sorted(res, key=lambda r: r["threads"]):
            if r["ms"] is None:
                print("| %s | %d | unavailable: %s | | | | | | | | |" % (r["label"], r["threads"], cell(r["error"])))
                continue
            t, g = r["threads"], flop / r["ms"] / 1e6
            # GFLOP per CPU-second against one core's share of the peak: the speed while
            # the process had its cores, when other processes take turns on them
            cpu_pct = ("%.0f%%" % (100 * g / r["cpu"] / (self.peak[t] / t))
                       if r.get("cpu") and self.peak.get(t) else "-")
            rel = self.rel_diff(r["out"], ref) if ref is not None else "no reference"
            if r["label"] == "nestc":
                gc = computed / r["ms"] / 1e6
                nest[t] = (r["ms"] / ort[t] if t in ort else None, gc / self.peak[t] if self.peak.get(t) else None, rel)
            print("| %s | %d | %.2f | %.2f | %.1f | %s | %s | %s | %s | %d | %s |"
                  % (r["label"], t, r["ms"], r["min"], g, self.pct(g, t),
                     "%.2f" % (r["ms"] / ort[t]) if t in ort else "-",
                     "%.2f" % r["cpu"] if r.get("cpu") is not None else "-", cpu_pct, r["n"], fmt(rel)))
        if computed != flop:
            print("\nnestc computes %.3g GFLOP of the %.3g (the rest is never read: the last layer computes "
                  "the CLS token's rows only); the goal's %% of the FMA peak counts those." % (computed / 1e9, flop / 1e9))
        goals = []
        for t in (1, 2):
            ratio, frac, rel = nest.get(t, (None, None, None))
            goals.append("%d thread%s: nestc / ORT %s (goal <= %.2f: %s)" % (
                t, "s" if t > 1 else "", "%.2fx" % ratio if ratio else "?", RATIO_GOAL,
                ("met" if ratio <= RATIO_GOAL else "not met") if ratio else "?"))
            if t == 1 and peak_goal:
                goals.append("1 thread: nestc at %s of the FMA peak%s (goal >= %.0f%%: %s)" % (
                    "%.0f%%" % (100 * frac) if frac else "?",
                    ", counting the FLOPs it computes" if computed != flop else "", 100 * PEAK_GOAL,
                    ("met" if frac >= PEAK_GOAL else "not met") if frac else "?"))
            if isinstance(rel, float):
                goals.append("%d thread%s: nestc's output within %.2g relative of fp64 PyTorch (goal <= %g: %s)"
                             % (t, "s" if t > 1 else "", rel, REL_GOAL, "met" if rel <= REL_GOAL else "not met"))
        print("\nGoals (issue #9):\n" + "\n".join("- " + g for g in goals))
        background_note(bg)

    def bert(self):
        c = BERT
        self.net("samples/bert.nest (BERT-base, last hidden state): batch %d, %d tokens, L=%d, D=%d, H=%d, FF=%d, "
                 "V=%d" % tuple(c[k] for k in ("N", "T", "L", "D", "H", "FF", "V")), "bert",
                 os.path.join(ROOT, "samples", "bert.nest"), c, [c[k] for k in ("N", "T", "L", "D", "H", "FF", "V")],
                 bert_flop(**c), True)

    def vit(self):
        c = VIT
        self.net("samples/vit.nest (ViT-B/%d, final-normed CLS features): batch %d, %dx%d images, L=%d, D=%d, "
                 "H=%d, FF=%d" % (c["PATCH"], c["N"], c["IMG"], c["IMG"], c["L"], c["D"], c["H"], c["FF"]), "vit",
                 os.path.join(ROOT, "samples", "vit.nest"), c,
                 [c[k] for k in ("N", "IMG", "PATCH", "L", "D", "H", "FF")], vit_flop(**c), True,
                 computed=vit_computed_flop(**c))

    def resnet50(self):
        c = RESNET50
        self.net("samples/resnet50.nest (torchvision ResNet-50 with batch norm): %dx3x%dx%d image, %d classes"
                 % (c["BATCH"], c["IMG"], c["IMG"], c["CLASSES"]), "resnet50",
                 os.path.join(ROOT, "samples", "resnet50.nest"), c, [c[k] for k in ("BATCH", "IMG", "C0", "CLASSES")],
                 resnet50_flop(**c), False)

    def conv3x3(self):
        print("\n## 3x3 convolutions at ResNet shapes: C -> C channels, stride 1, padding 1, batch 1, no bias "
              "(bench/conv3x3.nest against a one-node ONNX model)\n")
        print("| C, HxW | GFLOP | threads | nestc ms | nestc GFLOP/s | nestc % of peak | ORT ms | ORT GFLOP/s "
              "| ORT % of peak | ORT time / nestc | max rel diff nestc, ORT vs fp64 |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        bgs, goals = [], []
        for C, HW in CONV3X3:
            flop = 2.0 * C * C * 9 * HW * HW
            d = os.path.join(self.work, "conv3x3-%d-%d" % (C, HW))
            try:
                if "torch" in self.why_not:
                    raise Unavailable(self.why_not["torch"])
                self.files("conv", d, [C, HW], os.path.join(BENCH, "conv3x3.nest"), dict(C=C, HW=HW))
            except Unavailable as e:
                print("| %d, %dx%d | | | unavailable: %s |" % (C, HW, HW, cell(e)))
                continue
            try:
                harness = self.nestc_build(os.path.join(BENCH, "conv3x3.nest"), dict(C=C, HW=HW),
                                           os.path.join(d, "nestc"), "conv3x3")
                nerr = None
            except Unavailable as e:
                harness, nerr = None, "nestc: %s" % e
            res, bg = measure(self.net_specs(d, harness, nerr, 10), self.rounds, budget=self.budget(10))
            if bg is not None:
                bgs.append(bg)
            ref = self.reference(d)
            for t in (1, 2):
                n = next(r for r in res if r["label"] == "nestc" and r["threads"] == t)
                o = next(r for r in res if r["label"] == "ONNX Runtime" and r["threads"] == t)
                cells = []
                for r in (n, o):
                    if r["ms"] is None:
                        cells += ["unavailable: %s" % cell(r["error"]), "", ""]
                    else:
                        g = flop / r["ms"] / 1e6
                        cells += ["%.3f" % r["ms"], "%.1f" % g, self.pct(g, t)]
                speed = o["ms"] / n["ms"] if n["ms"] and o["ms"] else None
                diffs = ", ".join(fmt(self.rel_diff(r["out"], ref)) if r["ms"] and ref is not None else "-"
                                  for r in (n, o))
                print("| %d, %dx%d | %.3g | %d | %s | %s | %s |" % (C, HW, HW, flop / 1e9, t, " | ".join(cells),
                                                                 "%.2f" % speed if speed else "-", diffs))
                if n["ms"] and self.peak.get(t):
                    frac = flop / n["ms"] / 1e6 / self.peak[t]
                    goals.append("%d, %dx%d, %d thread%s: %.0f%% of the peak (goal >= %.0f%%: %s), %s ORT's speed "
                                 "(goal >= %.1fx: %s)" % (
                                     C, HW, HW, t, "s" if t > 1 else "", 100 * frac, 100 * PEAK_GOAL,
                                     "met" if frac >= PEAK_GOAL else "not met",
                                     "%.2fx" % speed if speed else "?", CONV_SPEEDUP_GOAL,
                                     ("met" if speed >= CONV_SPEEDUP_GOAL else "not met") if speed else "?"))
        if goals:
            print("\nGoals (issue #9), nestc's convolutions:\n" + "\n".join("- " + g for g in goals))
        if bgs:
            background_note(sum(bgs) / len(bgs))

    def onnx(self):
        """Issue #11: nestc building the ONNX exports of the sections above (GPT-2 small,
        BERT-base, ResNet-50) against the hand-written samples and ONNX Runtime."""
        print("\n## ONNX import: `nestc build model.onnx` against the hand-written sample and ONNX Runtime, "
              "on the same file and weights\n")
        cases = [("GPT-2 small", "gpt2-small", "gpt2", os.path.join(ROOT, "samples", "gpt2.nest"), GPT2_SMALL,
                  [GPT2_SMALL[k] for k in ("L", "D", "H", "V", "CTX", "S")], "tokens.npy", gpt2_flop(**GPT2_SMALL)),
                 ("BERT-base", "bert", "bert", os.path.join(ROOT, "samples", "bert.nest"), BERT,
                  [BERT[k] for k in ("N", "T", "L", "D", "H", "FF", "V")], "x.npy", bert_flop(**BERT)),
                 ("ResNet-50", "resnet50", "resnet50", os.path.join(ROOT, "samples", "resnet50.nest"), RESNET50,
                  [RESNET50[k] for k in ("BATCH", "IMG", "C0", "CLASSES")], "x.npy", resnet50_flop(**RESNET50))]
        print("| model | threads | sample ms | imported ms | imported / sample | goal <= 1.05 | ORT ms | imported / ORT "
              "| imported % of peak | regions found (nodes x occurrences) | region calls -> variants "
              "| max rel diff imported, sample vs fp64 |")
        print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- | --- |")
        bgs = []
        for title, tag, kind, src, cfg, values, xname, flop in cases:
            d = os.path.join(self.work, tag)
            try:
                if "torch" in self.why_not:
                    raise Unavailable(self.why_not["torch"])
                self.files(kind, d, values, src, cfg)
                onnx = os.path.join(d, "model.onnx")
                # the file's name names the model's C symbols: "model" would meet the harness's variable
                imported = os.path.join(d, "imported.onnx")
                if not os.path.islink(imported):
                    os.symlink("model.onnx", imported)
                rep = sh([self.nestc, "report", imported], timeout=1800)
            except Unavailable as e:
                print("| %s | | unavailable: %s |" % (title, cell(e)))
                continue
            found = re.findall(r"^region (\S+): (\d+) nodes, (\d+) occurrences", rep, re.M)
            tot = re.search(r"totals: (\d+) region calls?, (\d+) unique variants?", rep)
            regions = "; ".join("%s (%s x %s)" % f for f in found) or "none"
            variants = "%s -> %s" % tot.groups() if tot else "?"
            w = os.path.join(d, "weights.safetensors")
            x = os.path.join(d, xname)
            builds = {}
            for label, s, outdir, name in (("sample", src, os.path.join(d, "nestc"), kind),
                                           ("imported", imported, os.path.join(d, "nestc-onnx"), "imported")):
                try:
                    builds[label] = (self.nestc_build(s, cfg if label == "sample" else {}, outdir, name), None)
                except Unavailable as e:
                    builds[label] = (None, "nestc: %s" % e)
            wi = os.path.join(d, "nestc-onnx.safetensors")    # nestc build X.onnx -o DIR writes DIR.safetensors
            specs = []
            for t in (1, 2):
                for label, weights in (("sample", w), ("imported", wi)):
                    exe, err = builds[label]
                    o = os.path.join(d, "onnx-%s-%d.npy" % (label, t))
                    specs.append(dict(label=label, threads=t, error=err, out=o, env=self.nestc_env(t),
                                      log=os.path.join(d, "onnx-%s-%d.log" % (label, t)),
                                      cmd=None if err else [exe, weights, o, "2", x]))
                specs.append(self.ort_spec(onnx, t, os.path.join(d, "onnx-ort-%d.npy" % t),
                                           os.path.join(d, "onnx-ort-%d.log" % t), 2, x))
            res, bg = measure(specs, self.rounds, budget=self.budget(0))
            if bg is not None:
                bgs.append(bg)
            ref = self.reference(d)
            for t in (1, 2):
                r = {q["label"]: q for q in res if q["threads"] == t}
                ms = {k: v["ms"] for k, v in r.items()}
                ratio = ms["imported"] / ms["sample"] if ms["imported"] and ms["sample"] else None
                vs_ort = ms["imported"] / ms["ONNX Runtime"] if ms["imported"] and ms["ONNX Runtime"] else None
                diffs = ", ".join(fmt(self.rel_diff(r[k]["out"], ref)) if ms[k] and ref is not None else "-"
                                  for k in ("imported", "sample"))
                why = "; ".join("%s: %s" % (k, cell(v["error"])) for k, v in r.items() if v["ms"] is None)
                print("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    title, t, "%.2f" % ms["sample"] if ms["sample"] else "-",
                    "%.2f" % ms["imported"] if ms["imported"] else "-", "%.2f" % ratio if ratio else "-",
                    ("met" if ratio <= 1.05 else "not met") if ratio else "?",
                    "%.2f" % ms["ONNX Runtime"] if ms["ONNX Runtime"] else "-", "%.2f" % vs_ort if vs_ort else "-",
                    self.pct(flop / ms["imported"] / 1e6, t) if ms["imported"] else "-", regions, variants,
                    diffs + ("; unavailable: " + why if why else "")))
        if bgs:
            background_note(sum(bgs) / len(bgs))
