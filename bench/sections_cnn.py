"""The matrix product and ResNet sections of bench/run.py (matmul, resnet, resnet18)."""
import os
import statistics

import numpy as np

from common import (BENCH, MATMULS, RESNET, RESNET18, ROOT, TORCH_PY, Unavailable, background_note, cell,
                    max_diff, measure, resnet_flop)


class CNNSections:
    def matmul(self):
        print("\n## Matrix product alone: nestc against OpenBLAS cblas_sgemm (row-major, C = A B)\n")
        if "sgemm" not in self.why_not:
            print("OpenBLAS core: %s (OPENBLAS_CORETYPE=%s)\n" % (self.facts.get("openblas_core"), self.blas_core or "unset"))
        print("| M x N x K | GFLOP | threads | nestc ms | nestc GFLOP/s | nestc % of peak | sgemm ms | sgemm GFLOP/s "
              "| nestc / sgemm (GFLOP/s) | max abs diff nestc, sgemm vs fp64 |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        bgs, sg_threads = [], set()
        for (M, N, K) in MATMULS:
            flop = 2.0 * M * N * K
            d = os.path.join(self.work, "matmul-%dx%dx%d" % (M, N, K))
            try:
                self.files("matmul", d, [M, N, K])
            except Unavailable as e:
                print("| %dx%dx%d | | | unavailable: %s |" % (M, N, K, cell(e)))
                continue
            a, b = os.path.join(d, "a.npy"), os.path.join(d, "b.npy")
            try:
                harness = self.nestc_build(os.path.join(BENCH, "matmul.nest"), dict(M=M, N=N, K=K),
                                           os.path.join(d, "nestc"), "matmul")
                nerr = None
            except Unavailable as e:
                nerr = "nestc: %s" % e
            specs = []
            for t in (1, 2):
                specs.append(dict(label="nestc", threads=t, error=nerr, out=os.path.join(d, "nestc-%d.npy" % t),
                                  log=os.path.join(d, "nestc-%d.log" % t), env=self.nestc_env(t),
                                  cmd=None if nerr else [harness, "-", os.path.join(d, "nestc-%d.npy" % t), "20", a, b]))
                specs.append(dict(label="sgemm", threads=t, error=self.why_not.get("sgemm"),
                                  out=os.path.join(d, "sgemm-%d.npy" % t), log=os.path.join(d, "sgemm-%d.log" % t),
                                  env=self.blas_env(t),
                                  cmd=[self.sgemm, a, b, os.path.join(d, "sgemm-%d.npy" % t), "20"]))
            res, bg = measure(specs, self.rounds, budget=self.budget(10))
            if bg is not None:
                bgs.append(bg)
            ref = np.load(os.path.join(d, "ref.npy"))
            for t in (1, 2):
                n = next(r for r in res if r["label"] == "nestc" and r["threads"] == t)
                s = next(r for r in res if r["label"] == "sgemm" and r["threads"] == t)
                cells = []
                for r in (n, s):
                    if r["ms"] is None:
                        cells.append(["unavailable: %s" % cell(r["error"]), "", ""] if r is n else ["unavailable: %s" % cell(r["error"]), ""])
                    else:
                        g = flop / r["ms"] / 1e6
                        cells.append(["%.3f" % r["ms"], "%.1f" % g, self.pct(g, t)] if r is n else ["%.3f" % r["ms"], "%.1f" % g])
                ratio = "%.2f" % (s["ms"] / n["ms"]) if n["ms"] and s["ms"] else "-"
                diffs = ", ".join(("%.2g" % x if isinstance(x, float) else x)
                                  for x in (max_diff(r["out"], ref) if r["ms"] else "-" for r in (n, s)))
                print("| %dx%dx%d | %.3g | %d | %s | %s | %s |" % (M, N, K, flop / 1e9, t, " | ".join(cells[0]),
                                                                  " | ".join(cells[1]), ratio + " | " + diffs))
                for r in (s,):
                    if r["ms"] and r.get("info"):
                        sg_threads.add("%s thread%s: openblas_get_num_threads() = %s" % (
                            t, "s" if t > 1 else "", r["info"].split()[1]))
        if sg_threads:
            print("\nsgemm processes: %s." % "; ".join(sorted(sg_threads)))
        if bgs:
            background_note(statistics.mean(bgs))

    def resnet(self):
        cfg = RESNET
        flop = resnet_flop(**cfg)
        print("\n## samples/resnet.nest (ResNet-18, batch norm folded): 1x3x%dx%d image, C0=%d, %d classes "
              "(%.3g GFLOP per forward)\n" % (cfg["IMG"], cfg["IMG"], cfg["C0"], cfg["CLASSES"], flop / 1e9))
        d = os.path.join(self.work, "resnet")
        try:
            self.files("resnet", d, [cfg["IMG"], cfg["C0"], cfg["CLASSES"]], os.path.join(ROOT, "samples", "resnet.nest"), cfg)
        except Unavailable as e:
            print("unavailable: the model files: %s" % e)
            return
        w, x = os.path.join(d, "weights.safetensors"), os.path.join(d, "x.npy")
        try:
            harness = self.nestc_build(os.path.join(ROOT, "samples", "resnet.nest"), cfg, os.path.join(d, "nestc"), "resnet")
            nerr = None
        except Unavailable as e:
            nerr = "nestc: %s" % e
        specs = []
        for t in (1, 2):
            specs.append(dict(label="nestc", threads=t, error=nerr, out=os.path.join(d, "nestc-%d.npy" % t),
                              log=os.path.join(d, "nestc-%d.log" % t), env=self.nestc_env(t),
                              cmd=None if nerr else [harness, w, os.path.join(d, "nestc-%d.npy" % t), "3", x]))
            specs.append(dict(label="PyTorch eager", threads=t, error=self.why_not.get("torch"),
                              out=os.path.join(d, "torch-%d.npy" % t), log=os.path.join(d, "torch-%d.log" % t),
                              env=self.torch_env(t),
                              cmd=[TORCH_PY, os.path.join(BENCH, "torch_server.py"), str(t),
                                   os.path.join(d, "torch-%d.npy" % t), "3", "resnet", w, str(cfg["C0"]),
                                   str(cfg["CLASSES"]), x]))
        res, bg = measure(specs, self.rounds, budget=self.budget(30))
        self.model_table(res, flop, self.reference(d), base="PyTorch eager")
        background_note(bg)

    def resnet18(self):
        """samples/resnet18.nest, batch norms unfolded, against ONNX Runtime and PyTorch
        on torchvision's state dict (bench/models.py ResNet18BN, exported to ONNX)."""
        cfg = RESNET18
        flop = resnet_flop(cfg["IMG"], 64, 1000)
        print("\n## samples/resnet18.nest (torchvision ResNet-18 with batch norm): 1x3x%dx%d image "
              "(%.3g GFLOP per forward)\n" % (cfg["IMG"], cfg["IMG"], flop / 1e9))
        d = os.path.join(self.work, "resnet18-%d" % cfg["IMG"])
        src = os.path.join(ROOT, "samples", "resnet18.nest")
        try:
            self.files("resnet18", d, [cfg["IMG"]], src, cfg)
        except Unavailable as e:
            print("unavailable: the model files: %s" % e)
            return
        w, x, onnx = (os.path.join(d, f) for f in ("weights.safetensors", "x.npy", "model.onnx"))
        try:
            harness = self.nestc_build(src, cfg, os.path.join(d, "nestc"), "resnet18")
            nerr = None
        except Unavailable as e:
            nerr = "nestc: %s" % e
        specs = []
        for t in (1, 2):
            out = lambda name: os.path.join(d, "%s-%d.npy" % (name, t))
            lg = lambda name: os.path.join(d, "%s-%d.log" % (name, t))
            specs.append(dict(label="nestc", threads=t, error=nerr, out=out("nestc"), log=lg("nestc"),
                              env=self.nestc_env(t), cmd=None if nerr else [harness, w, out("nestc"), "3", x]))
            oenv = self.base_env()
            oenv["NODE_PATH"] = self.node_path
            oerr = self.why_not.get("ort") or (None if os.path.exists(onnx) else "no ONNX file (PyTorch exports it)")
            specs.append(dict(label="ONNX Runtime", threads=t, error=oerr, out=out("ort"), log=lg("ort"), env=oenv,
                              cmd=["node", os.path.join(BENCH, "ort_server.js"), onnx, str(t), out("ort"), "3", x]))
            specs.append(dict(label="PyTorch eager", threads=t, error=self.why_not.get("torch"), out=out("torch"),
                              log=lg("torch"), env=self.torch_env(t),
                              cmd=[TORCH_PY, os.path.join(BENCH, "torch_server.py"), str(t), out("torch"), "3",
                                   "resnet18", w, x]))
        res, bg = measure(specs, self.rounds, budget=self.budget(0))
        self.model_table(res, flop, self.reference(d), base="ONNX Runtime")
        background_note(bg)

