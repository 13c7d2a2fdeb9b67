"""The onnx-vision section of bench/run.py (issue #38): networks as a new user brings them,
exported by torch.onnx from torchvision 0.14 and torch.nn (bench/vision.py), built by
`nestc build NET.onnx` and run side by side with ONNX Runtime on the same file, at 1 and
2 threads. Per network: the build's wall time (--no-cache, default -j; goal <= 10 s), the
model object's kernels and how many of them were identical to another and compiled once
(`--report`), each runtime's median time, nestc / ORT (goal <= 1.0) and each output's max
relative difference from the network in float64 PyTorch (goal <= 1e-4)."""
import os
import re
import time

from common import BENCH, TORCH_PY, Unavailable, background_note, cell, log, measure, sh

VISION_NETS = ("mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x1_0", "densenet121",
               "vit_b_16", "lstm_lm", "swin_t")
VISION_RATIO_GOAL, VISION_BUILD_GOAL, VISION_REL_GOAL = 1.0, 10.0, 1e-4


class VisionSections:
    def vision_files(self, name, d):
        """bench/vision.py NAME D, unless D holds this vision.py's files already."""
        stamp = os.path.join(d, "stamp")
        key = "%s %d" % (name, os.path.getmtime(os.path.join(BENCH, "vision.py")))
        if os.path.exists(stamp) and open(stamp).read() == key:
            return
        os.makedirs(d, exist_ok=True)
        for f in ("ref.npy", "model.onnx", "stamp"):
            if os.path.exists(os.path.join(d, f)):
                os.remove(os.path.join(d, f))
        log("exporting %s to %s" % (name, d))
        sh([TORCH_PY, os.path.join(BENCH, "vision.py"), name, d], timeout=3600)
        with open(stamp, "w") as f:
            f.write(key)

    def vision_build(self, name, d):
        """`nestc build NAME.onnx --no-cache --report` timed, then the harness linked:
        (harness, build seconds, "K kernels, S shared")."""
        onnx = os.path.join(d, name + ".onnx")     # the file's name is the model's C name
        if not os.path.islink(onnx):
            os.symlink("model.onnx", onnx)
        out = os.path.join(d, "nestc")
        t0 = time.monotonic()
        rep = sh([self.nestc, "build", onnx, "-o", out, "--no-cache", "-q", "--report"], timeout=1800)
        secs = time.monotonic() - t0
        m = re.search(r"^model object .*?; (\d+) kernels?(?:, (\d+) shared)?", rep, re.M)
        kernels = "%s kernels, %s shared" % (m.group(1), m.group(2) or 0) if m else "?"
        return self.link_harness(out, name), secs, kernels

    def onnx_vision(self):
        print("\n## ONNX networks as exported (issue #38): `nestc build NET.onnx` against ONNX Runtime on the "
              "same file\n")
        print("torchvision 0.14's networks and a 2-layer LSTM language model (hidden 256, 32 steps, vocabulary "
              "1000), batch 1 (swin_t as exported: its Dropout nodes of ratio 0 in training mode), random weights with randomised norms (bench/vision.py); build: wall time of "
              "`nestc build --no-cache` at the default -j (the weights' file included).\n")
        if "torch" in self.why_not:
            print("unavailable: PyTorch exports the networks: %s" % self.why_not["torch"])
            return
        print("| network | build s | model object's kernels | threads | nestc ms | ORT ms | nestc / ORT "
              "| max rel diff nestc, ORT vs fp64 PyTorch |")
        print("| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |")
        goals, bgs = [], []
        for name in self.nets or VISION_NETS:
            d = os.path.join(self.work, "vision-" + name)
            try:
                self.vision_files(name, d)
            except Unavailable as e:
                print("| %s | unavailable: %s |" % (name, cell(e)))
                continue
            try:
                harness, secs, kernels = self.vision_build(name, d)
                nerr = None
            except Unavailable as e:
                harness, secs, kernels, nerr = None, None, "-", "nestc: %s" % e
            w, x, onnx = (os.path.join(d, f) for f in ("nestc.safetensors", "x.npy", "model.onnx"))
            specs = []
            for t in (1, 2):
                o = os.path.join(d, "nestc-%d.npy" % t)
                specs.append(dict(label="nestc", threads=t, error=nerr, out=o, env=self.nestc_env(t),
                                  log=os.path.join(d, "nestc-%d.log" % t),
                                  cmd=None if nerr else [harness, w, o, "3", x]))
                specs.append(self.ort_spec(onnx, t, os.path.join(d, "ort-%d.npy" % t),
                                           os.path.join(d, "ort-%d.log" % t), 3, x))
            res, bg = measure(specs, self.rounds, budget=self.budget(0))
            if bg is not None:
                bgs.append(bg)
            ref = self.reference(d)
            for t in (1, 2):
                r = {q["label"]: q for q in res if q["threads"] == t}
                ms = {k: v["ms"] for k, v in r.items()}
                ratio = ms["nestc"] / ms["ONNX Runtime"] if ms["nestc"] and ms["ONNX Runtime"] else None
                rels = {k: self.rel_diff(r[k]["out"], ref) if ms[k] and ref is not None else "-" for k in r}
                why = "; ".join("%s: %s" % (k, cell(v["error"])) for k, v in r.items() if v["ms"] is None)
                print("| %s | %s | %s | %d | %s | %s | %s | %s |" % (
                    name, "%.1f" % secs if secs is not None and t == 1 else "", kernels if t == 1 else "", t,
                    "%.2f" % ms["nestc"] if ms["nestc"] else "-",
                    "%.2f" % ms["ONNX Runtime"] if ms["ONNX Runtime"] else "-", "%.2f" % ratio if ratio else "-",
                    ", ".join(fmt_rel(rels[k]) for k in ("nestc", "ONNX Runtime"))
                    + ("; unavailable: " + why if why else "")))
                goals.append("%s, %d thread%s: nestc / ORT %s (goal <= %.1f: %s); output within %s of PyTorch's "
                             "(goal <= %g: %s)" % (
                                 name, t, "s" if t > 1 else "", "%.3f" % ratio if ratio else "?", VISION_RATIO_GOAL,
                                 ("met" if ratio <= VISION_RATIO_GOAL else "not met") if ratio else "?",
                                 fmt_rel(rels["nestc"]), VISION_REL_GOAL,
                                 ("met" if rels["nestc"] <= VISION_REL_GOAL else "not met")
                                 if isinstance(rels["nestc"], float) else "?"))
            if secs is not None:
                goals.append("%s: build %.1f s (goal <= %.0f s: %s)" % (
                    name, secs, VISION_BUILD_GOAL, "met" if secs <= VISION_BUILD_GOAL else "not met"))
        print("\nGoals (issue #38):\n" + "\n".join("- " + g for g in goals))
        if bgs:
            background_note(sum(bgs) / len(bgs))


def fmt_rel(x):
    return "%.2g" % x if isinstance(x, float) else cell(x)
