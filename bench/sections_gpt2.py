"""The GPT-2 sections of bench/run.py: whole forwards, the decode step and prefill over the
key/value cache (issue 13), cold start and memory (issue 14)."""
import os
import re
import shutil
import statistics
import subprocess
import time

import numpy as np

from common import (BENCH, DECODE_MALLOC_ENV, DECODE_P, GPT2_GEN, GPT2_SMALL, PREFILL_T, ROOT, STREAM_MIB,
                    TORCH_PY, Unavailable, background_note, busy_seconds, cell, gpt2_flop, log, max_diff,
                    measure, sh)

# the decode section's memory read in the rounds of the runtimes (bench/stream.c serve)
SAME_ROUND = "memory read"


class GPT2Sections:
    def gpt2(self, title, cfg, tag):
        flop = gpt2_flop(**cfg)
        print("\n## %s: L=%d, D=%d, H=%d, V=%d, S=%d (%.3g GFLOP per forward)\n"
              % (title, cfg["L"], cfg["D"], cfg["H"], cfg["V"], cfg["S"], flop / 1e9))
        d = os.path.join(self.work, tag)
        vals = [cfg[k] for k in ("L", "D", "H", "V", "CTX", "S")]
        try:
            self.files("gpt2", d, vals, os.path.join(ROOT, "samples", "gpt2.nest"), cfg)
        except Unavailable as e:
            print("unavailable: the model files: %s" % e)
            return
        w, tok, onnx = (os.path.join(d, f) for f in ("weights.safetensors", "tokens.npy", "model.onnx"))
        specs = []
        try:
            harness = self.nestc_build(os.path.join(ROOT, "samples", "gpt2.nest"), cfg, os.path.join(d, "nestc"), "gpt2")
            nerr = None
        except Unavailable as e:
            nerr = "nestc: %s" % e
        warm = 10 if flop < 2e9 else 2
        for t in (1, 2):
            out = lambda name: os.path.join(d, "%s-%d.npy" % (name, t))
            lg = lambda name: os.path.join(d, "%s-%d.log" % (name, t))
            specs.append(dict(label="nestc", threads=t, error=nerr, out=out("nestc"), log=lg("nestc"),
                              cmd=None if nerr else [harness, w, out("nestc"), str(warm), tok], env=self.nestc_env(t)))
            oenv = self.base_env()
            oenv["NODE_PATH"] = self.node_path
            oerr = self.why_not.get("ort") or (None if os.path.exists(onnx) else "no ONNX file (PyTorch exports it)")
            specs.append(dict(label="ONNX Runtime", threads=t, error=oerr, out=out("ort"),
                              log=lg("ort"), env=oenv,
                              cmd=["node", os.path.join(BENCH, "ort_server.js"), onnx, str(t), out("ort"), str(warm), tok]))
            specs.append(dict(label="PyTorch eager", threads=t, error=self.why_not.get("torch"), out=out("torch"),
                              log=lg("torch"), env=self.torch_env(t),
                              cmd=[TORCH_PY, os.path.join(BENCH, "torch_server.py"), str(t), out("torch"), str(warm),
                                   "gpt2", w] + [str(v) for v in vals] + [tok]))
        res, bg = measure(specs, self.rounds, budget=self.budget(30 if flop < 2e9 else 0))
        self.model_table(res, flop, self.reference(d), base="ONNX Runtime")
        background_note(bg)

    # --- generation: prefill and decode over the KV cache (issue 13)
    def gen_files(self):
        """bench/models.py gpt2-decode: GPT-2 small's weights (those of gpt2-small), 1024
        tokens, the ONNX decode step, the past k/v of each P and the float64 logits."""
        cfg = GPT2_GEN
        d = os.path.join(self.work, "gpt2-gen")
        rows = sorted(set(DECODE_P) | {t - 1 for t in PREFILL_T})
        vals = [cfg[k] for k in ("L", "D", "H", "V", "CTX")] + [",".join(map(str, DECODE_P)), ",".join(map(str, rows))]
        self.files("gpt2-decode", d, vals, os.path.join(ROOT, "samples", "gpt2.nest"), cfg)
        return d

    def gen_build(self, d, static_t=None):
        """samples/gpt2.nest at GPT2_GEN (with -D T=static_t: prefill a static entry),
        linked with bench/decode.c; the harness path. The dynamic build is made once."""
        builds = self.__dict__.setdefault("gen_builds", {})
        if static_t in builds:
            return builds[static_t]
        if "nestc" in self.why_not:
            raise Unavailable(self.why_not["nestc"])
        outdir = os.path.join(d, "nestc-" + ("dynamic" if static_t is None else "T%d" % static_t))
        shutil.rmtree(outdir, ignore_errors=True)
        cmd = [self.nestc, "build", os.path.join(ROOT, "samples", "gpt2.nest"), "-o", outdir]
        for k, v in list(GPT2_GEN.items()) + ([("T", static_t)] if static_t is not None else []):
            cmd += ["-D", "%s=%s" % (k, v)]
        log("building %s" % " ".join(cmd[2:3] + cmd[5:]))
        sh(cmd)
        exe = os.path.join(outdir, "decode")
        objs = sorted(os.path.join(outdir, o) for o in os.listdir(outdir) if o.endswith(".o"))
        sh([self.cc, "-O2", "-I" + os.path.join(ROOT, "runtime"), "-I" + outdir]
           + (["-DSTATIC_T=%d" % static_t] if static_t is not None else [])
           + ["-o", exe, os.path.join(BENCH, "decode.c")] + objs + [self.lib, "-lm", "-lpthread"])
        builds[static_t] = exe
        return exe

    def stream_exe(self):
        return os.path.join(self.work, "stream")

    def bandwidth(self):
        """{threads: read GB/s} from bench/stream.c over a STREAM_MIB buffer, 1 and 2 threads."""
        exe, src = self.stream_exe(), os.path.join(BENCH, "stream.c")
        if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
            sh([self.cc, "-O3", "-march=native", "-o", exe, src, "-lpthread"])
        out = {}
        for t in (1, 2):
            m = re.search(r"read GB/s:\s*([0-9.]+)", sh([exe, str(t), str(STREAM_MIB)], timeout=600))
            out[t] = float(m.group(1)) if m else None
        return out

    def gpt2_decode(self):
        cfg = GPT2_GEN
        L, D, H, V, CTX = (cfg[k] for k in ("L", "D", "H", "V", "CTX"))
        hd = D // H
        # every parameter once (wte twice in use, embedding row and LM head, read once), wpe one row
        params = V * D + CTX * D + L * (12 * D * D + 13 * D) + 2 * D
        wbytes = 4 * (params - CTX * D + D)
        print("\n## GPT-2 small decode step: L=%d, D=%d, H=%d, V=%d, one token at position P after P cached ones\n"
              % (L, D, H, V))
        print("A decode step reads every weight once: its limit is the memory-read bandwidth. Weights read per "
              "token: %d floats = %.1f MB (every parameter, wte once for the LM head, wpe one row of %d); "
              "limit time = %.1f MB / read bandwidth at that thread count. The cache read (K and V, "
              "2*L*H*(P+1)*D/H floats: %s) is not in the limit; the last column adds it.\n"
              % (wbytes // 4, wbytes / 1e6, D, wbytes / 1e6,
                 ", ".join("%.1f MB at P=%d" % (8 * L * H * (P + 1) * hd / 1e6, P) for P in DECODE_P)))
        print("Every runtime here runs with glibc's %s: freed memory is kept for reuse, not returned to the "
              "kernel (a first touch of a fresh page is slow on these virtual machines, and ONNX Runtime's and "
              "PyTorch's decode step allocates present_k/present_v, the whole cache, at every step; without it "
              "their P=1023 step took 4-8x longer).\n" % " ".join("%s=%s" % kv for kv in DECODE_MALLOC_ENV.items()))
        try:
            d = self.gen_files()
        except Unavailable as e:
            print("unavailable: the model files: %s" % e)
            return
        w, tokens, onnx = (os.path.join(d, f) for f in ("weights.safetensors", "tokens.npy", "decode.onnx"))
        try:
            harness = self.gen_build(d)
            nerr = None
        except Unavailable as e:
            nerr = "nestc: %s" % e
        try:
            bw0 = self.bandwidth()
        except Unavailable as e:
            bw0 = {}
            log("bandwidth: %s" % e)
        runs, bgs = {}, []
        for P in DECODE_P:
            tok, pk, pv = (os.path.join(d, "%s-%d.npy" % (f, P)) for f in ("token", "past_k", "past_v"))
            specs = []
            for t in (1, 2):
                out = lambda name: os.path.join(d, "%s-P%d-%d.npy" % (name, P, t))
                lg = lambda name: os.path.join(d, "%s-P%d-%d.log" % (name, P, t))
                specs.append(dict(label="nestc", threads=t, error=nerr, out=out("nestc"), log=lg("nestc"),
                                  env=dict(self.nestc_env(t), **DECODE_MALLOC_ENV),
                                  cmd=None if nerr else [harness, w, out("nestc"), "5", tokens, "decode", str(P)]))
                # the bandwidth in the same rounds, its turn right after nestc's: the step's medians
                # moved by half between runs of the same tree on the AMD kind, and the read with them
                # (within one run, 29 to 66 GB/s at two threads seconds apart): the memory system's,
                # not the code's
                specs.append(dict(label=SAME_ROUND, threads=t, out=out("stream"), log=lg("stream"),
                                  env=self.base_env(), error=None if os.path.exists(self.stream_exe()) else "no bench/stream",
                                  cmd=[self.stream_exe(), str(t), str(STREAM_MIB), "serve"]))
                oenv = dict(self.base_env(), **DECODE_MALLOC_ENV)
                oenv["NODE_PATH"] = self.node_path
                oerr = self.why_not.get("ort") or (None if os.path.exists(onnx) else "no ONNX file (PyTorch exports it)")
                specs.append(dict(label="ONNX Runtime", threads=t, error=oerr, out=out("ort"), log=lg("ort"), env=oenv,
                                  cmd=["node", os.path.join(BENCH, "ort_server.js"), onnx, str(t), out("ort"), "5",
                                       tok, pk, pv]))
                specs.append(dict(label="PyTorch eager", threads=t, error=self.why_not.get("torch"), out=out("torch"),
                                  log=lg("torch"), env=dict(self.torch_env(t), **DECODE_MALLOC_ENV),
                                  cmd=[TORCH_PY, os.path.join(BENCH, "torch_server.py"), str(t), out("torch"), "5",
                                       "gpt2-decode", w] + [str(cfg[k]) for k in ("L", "D", "H", "V", "CTX")]
                                      + [tok, pk, pv]))
            res, bg = measure(specs, self.rounds, budget=self.budget(20))
            runs[P] = res
            if bg is not None:
                bgs.append(bg)
        try:
            bw1 = self.bandwidth()
        except Unavailable as e:
            bw1 = {}
            log("bandwidth: %s" % e)
        bw = {t: max([x for x in (bw0.get(t), bw1.get(t)) if x] or [None]) for t in (1, 2)}
        print("Memory-read bandwidth (bench/stream.c, %d MiB, best of 10 reads, 5 of them prefetching; measured before and after the "
              "decode runs, the higher is used): %s\n" % (STREAM_MIB, "; ".join(
                  "%d thread%s: %s GB/s (before %s, after %s)%s" % (
                      t, "s" if t > 1 else "", "%.1f" % bw[t] if bw[t] else "?",
                      bw0.get(t) or "?", bw1.get(t) or "?",
                      ", limit %.2f ms" % (wbytes / bw[t] / 1e6) if bw[t] else "") for t in (1, 2))))
        # the reads of the same rounds: per P and thread count, the read's turns (round -> times)
        # and its median GB/s
        reads, same = {}, {}
        for P in DECODE_P:
            for r in runs[P]:
                if r["label"] == SAME_ROUND and r["ms"]:
                    reads[(P, r["threads"])] = r.get("turns") or {}
                    same[(P, r["threads"])] = (STREAM_MIB << 20) / r["ms"] / 1e6
        if same:
            print("The same memory read in the rounds of the decode runs (bench/stream.c serve: the faster of a plain and a prefetching read of "
                  "the %d MiB buffer as one more runtime, its turn right after nestc's; median of its reads): %s.\n"
                  % (STREAM_MIB, "; ".join("P=%d, %d thread%s: %.1f GB/s" % (P, t, "s" if t > 1 else "", same[(P, t)])
                                           for P in DECODE_P for t in (1, 2) if (P, t) in same)))
            print("The goal's measure is the round's read limit: in each round, the limit from that round's read "
                  "(bytes of weights / the read's median GB/s in its turn) over the runtime's median time in its "
                  "turn of the round; the median of these over the rounds. The read's turn follows the step's within a "
                  "second, so a change of the memory system's speed from one minute to the next (the step's medians "
                  "moved by half between runs of one tree here) moves both. \"% of best read's limit\" sets the step's median "
                  "against the best of stream.c's reads before and after the runs, as before.\n")

        def paired(r, P, nbytes):
            """The median over rounds of (limit from the round's read) / (the round's time), the limit
            being the time to read nbytes at the round's read speed."""
            rd = reads.get((P, r["threads"])) or {}
            turns = r.get("turns") or {}
            v = [nbytes * statistics.median(rd[k]) / (STREAM_MIB << 20) / statistics.median(turns[k])
                 for k in turns if k in rd]
            return statistics.median(v) if v else None

        print("| P | runtime | threads | median ms | min ms | weights GB/s | % of best read's limit | time / ORT | "
              "cpu/wall | runs | max abs diff vs fp64 | rel. diff vs fp64 | % of best read's limit with cache | "
              "% of the round's read limit | the same, with cache |")
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        goal = {}
        for P in DECODE_P:
            res = [r for r in runs[P] if r["label"] != SAME_ROUND]
            ref = self.reference_row(d, P)
            ort = {r["threads"]: r["ms"] for r in res if r["label"] == "ONNX Runtime" and r["ms"]}
            cbytes = 8 * L * H * (P + 1) * hd
            for r in sorted(res, key=lambda r: r["threads"]):
                if r["ms"] is None:
                    print("| %d | %s | %d | unavailable: %s | | | | | | | | | | | |" % (P, r["label"], r["threads"], cell(r["error"])))
                    continue
                t = r["threads"]
                frac = (wbytes / bw[t] / 1e6) / r["ms"] if bw[t] else None
                fracc = ((wbytes + cbytes) / bw[t] / 1e6) / r["ms"] if bw[t] else None
                fracp = paired(r, P, wbytes)
                fracpc = paired(r, P, wbytes + cbytes)
                diff = max_diff(r["out"], ref)
                rel = self.rel_diff(r["out"], ref) if ref is not None else "-"
                ratio = r["ms"] / ort[t] if t in ort else None
                if r["label"] == "nestc":
                    goal[(P, t)] = (fracp, ratio, frac)
                pct = lambda x: "%.0f%%" % (100 * x) if x else "-"
                print("| %d | %s | %d | %.2f | %.2f | %.1f | %s | %s | %s | %d | %s | %s | %s | %s | %s |"
                      % (P, r["label"], t, r["ms"], r["min"], wbytes / r["ms"] / 1e6,
                         pct(frac), "%.2f" % ratio if ratio else "-",
                         "%.2f" % r["cpu"] if r.get("cpu") is not None else "-", r["n"],
                         "%.2g" % diff if isinstance(diff, float) else cell(diff),
                         "%.2g" % rel if isinstance(rel, float) else cell(rel),
                         pct(fracc), pct(fracp), pct(fracpc)))
        # the three runtimes against each other (same weights, same past)
        pairs = []
        for P in DECODE_P:
            outs = {(r["label"], r["threads"]): r["out"] for r in runs[P] if r["ms"]}
            for t in (1, 2):
                n = outs.get(("nestc", t))
                for other in ("ONNX Runtime", "PyTorch eager"):
                    o = outs.get((other, t))
                    if n and o:
                        x = self.rel_diff(n, np.load(o))
                        pairs.append("P=%d, %d thread%s, nestc vs %s %s" % (P, t, "s" if t > 1 else "", other,
                                                                            "%.2g" % x if isinstance(x, float) else x))
        if pairs:
            print("\nLogits of one step against each other (max |a - b| / max |b|; goal within ~1e-4): %s."
                  % "; ".join(pairs))
        for t in (1, 2):
            for P in DECODE_P:
                fr = goal.get((P, t))
                if fr and fr[1]:
                    print("\nnestc / ONNX Runtime at P=%d, %d thread%s: %.2fx the time (nestc runs at %.0f%% of its speed)"
                          % (P, t, "s" if t > 1 else "", fr[1], 100 / fr[1]), end="")
        print()
        lines = []
        for t, lim, orat in ((1, 0.75, 0.85), (2, 0.85, 1.0)):
            for P in DECODE_P:
                fr = goal.get((P, t))
                if not fr:
                    lines.append("P=%d, %d thread%s: nestc unavailable" % (P, t, "s" if t > 1 else ""))
                    continue
                fracp, ratio, frac = fr
                lines.append("P=%d, %d thread%s: %s of the round's read limit (goal >= %.0f%%: %s), %s ORT's time "
                             "(goal <= %.2fx: %s); %s of the best read's limit" % (
                                 P, t, "s" if t > 1 else "", "%.0f%%" % (100 * fracp) if fracp else "?", 100 * lim,
                                 ("met" if fracp >= lim else "not met") if fracp else "?",
                                 "%.2fx" % ratio if ratio else "?", orat,
                                 ("met" if ratio <= orat else "not met") if ratio else "?",
                                 "%.0f%%" % (100 * frac) if frac else "?"))
        print("\nGoals (issue 13), nestc's decode step:\n" + "\n".join("- " + l for l in lines))
        if bgs:
            background_note(statistics.mean(bgs))

    def gpt2_prefill(self):
        cfg = GPT2_GEN
        print("\n## GPT-2 small prefill: one build for any T (prefill(tokens: i32[T]) where 1 <= T <= %d) against "
              "static builds of each T (nestc build -D T=n)\n" % cfg["CTX"])
        try:
            d = self.gen_files()
        except Unavailable as e:
            print("unavailable: the model files: %s" % e)
            return
        w, tokens = os.path.join(d, "weights.safetensors"), os.path.join(d, "tokens.npy")
        try:
            dyn = self.gen_build(d)
            derr = None
        except Unavailable as e:
            derr = "nestc: %s" % e
        print("| T | threads | dynamic ms | static ms | dynamic / static | goal <= 1.1 | runs | rel. diff dynamic vs static "
              "| rel. diff vs fp64 (dynamic, static) |")
        print("| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |")
        bgs = []
        for T in PREFILL_T:
            try:
                st = self.gen_build(d, T)
                serr = None
            except Unavailable as e:
                serr = "nestc -D T=%d: %s" % (T, e)
            warm = "1" if T >= 256 else "3"
            specs = []
            for t in (1, 2):
                for label, exe, err in (("dynamic", dyn if not derr else None, derr), ("static", st if not serr else None, serr)):
                    o = os.path.join(d, "prefill-%s-T%d-%d.npy" % (label, T, t))
                    specs.append(dict(label=label, threads=t, error=err, out=o,
                                      log=os.path.join(d, "prefill-%s-T%d-%d.log" % (label, T, t)),
                                      env=self.nestc_env(t),
                                      cmd=None if err else [exe, w, o, warm, tokens, "prefill", str(T)]))
            rounds = self.rounds if T <= 128 else max(3, self.rounds // 4)
            res, bg = measure(specs, rounds, budget=self.budget(10 if T <= 128 else 0))
            if bg is not None:
                bgs.append(bg)
            ref = self.reference_row(d, T - 1)
            for t in (1, 2):
                dr = next(r for r in res if r["label"] == "dynamic" and r["threads"] == t)
                sr = next(r for r in res if r["label"] == "static" and r["threads"] == t)
                if dr["ms"] is None or sr["ms"] is None:
                    why = "; ".join("%s: %s" % (r["label"], cell(r["error"])) for r in (dr, sr) if r["ms"] is None)
                    print("| %d | %d | unavailable: %s | | | | | | |" % (T, t, why))
                    continue
                ratio = dr["ms"] / sr["ms"]
                x = self.rel_diff(dr["out"], np.load(sr["out"]))
                fp = ", ".join(("%.2g" % v if isinstance(v, float) else cell(v))
                               for v in ((self.rel_diff(r["out"], ref) if ref is not None else "-") for r in (dr, sr)))
                print("| %d | %d | %.2f | %.2f | %.3f | %s | %d | %s | %s |"
                      % (T, t, dr["ms"], sr["ms"], ratio, "met" if ratio <= 1.1 else "not met", min(dr["n"], sr["n"]),
                         "%.2g" % x if isinstance(x, float) else cell(x), fp))
        print("\nDiffs: the logits of the last position, max |a - b| / max |b|.")
        if bgs:
            background_note(statistics.mean(bgs))

    def coldstart(self, runs=7):
        """Issue #14: a process that opens GPT-2 small's weights (in the page cache),
        creates 1 or 4 instances and calls each once (bench/coldstart.c), at 2 threads;
        and the same program with the weights linked in (--embed-weights)."""
        cfg = GPT2_SMALL
        print("\n## Cold start and memory: GPT-2 small (L=%d, D=%d, V=%d, S=%d), NESTRT_NUM_THREADS=2\n"
              % (cfg["L"], cfg["D"], cfg["V"], cfg["S"]))
        d = os.path.join(self.work, "gpt2-small")
        vals = [cfg[k] for k in ("L", "D", "H", "V", "CTX", "S")]
        try:
            self.files("gpt2", d, vals, os.path.join(ROOT, "samples", "gpt2.nest"), cfg)
            if "nestc" in self.why_not:
                raise Unavailable(self.why_not["nestc"])
        except Unavailable as e:
            print("unavailable: %s" % e)
            return
        w = os.path.join(d, "weights.safetensors")
        exes = {}
        for kind in ("file", "embedded"):
            out = os.path.join(d, "coldstart-" + kind)
            shutil.rmtree(out, ignore_errors=True)
            cmd = [self.nestc, "build", os.path.join(ROOT, "samples", "gpt2.nest"), "-o", out]
            for k, v in cfg.items():
                cmd += ["-D", "%s=%s" % (k, v)]
            if kind == "embedded":
                cmd += ["--embed-weights", w]
            sh(cmd)
            objs = sorted(os.path.join(out, o) for o in os.listdir(out) if o.endswith(".o"))
            exe = os.path.join(out, "coldstart")
            sh([self.cc, "-O2", "-I" + os.path.join(ROOT, "runtime"), "-I" + out]
               + (["-DEMBEDDED"] if kind == "embedded" else [])
               + ["-o", exe, os.path.join(BENCH, "coldstart.c")] + objs + [self.lib, "-lm", "-lpthread"])
            exes[kind] = exe
        env = self.nestc_env(2)
        with open(w, "rb") as f:   # into the page cache
            while f.read(1 << 24):
                pass
        with open(exes["embedded"], "rb") as f:
            while f.read(1 << 24):
                pass
        pat = re.compile(r"first call ([\d.]+) s \(open ([\d.]+), new ([\d.]+), call ([\d.]+)\), all ([\d.]+) s; "
                         r"peak RSS (\d+) MiB = ([\d.]+)x the (\d+) MiB weights; checksum (\S+)")
        rows = []
        busy0, kids0, wall0 = busy_seconds(), sum(os.times()[2:4]), time.perf_counter()
        for kind, n in (("file", 1), ("file", 4), ("embedded", 1), ("embedded", 4)):
            res = []
            for r in range(runs):
                p = subprocess.run([exes[kind], w, str(n)], capture_output=True,
                                   text=True, env=env, timeout=600)
                m = pat.search(p.stdout)
                if p.returncode != 0 or not m:
                    res = "failed: %s" % (p.stderr.strip() or p.stdout.strip())[-300:]
                    break
                res.append([float(x) for x in m.groups()[:8]] + [m.group(9)])
            rows.append((kind, n, res))
        busy1, kids1, wall1 = busy_seconds(), sum(os.times()[2:4]), time.perf_counter()
        print("| weights | instances | open to end of first call, median s | open | new | first call | all instances s "
              "| peak RSS MiB | RSS / weights | runs |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        sums = set()
        for kind, n, res in rows:
            if isinstance(res, str):
                print("| %s | %d | %s | | | | | | | |" % (kind, n, cell(res)))
                continue
            med = lambda i: statistics.median(x[i] for x in res)
            sums.update(x[8] for x in res)
            print("| %s | %d | %.3f (min %.3f, max %.3f) | %.3f | %.3f | %.3f | %.3f | %.0f | %.2fx | %d |"
                  % ("file" if kind == "file" else "embedded", n, med(0), min(x[0] for x in res),
                     max(x[0] for x in res), med(1), med(2), med(3), med(4), med(5), med(6), len(res)))
        print("\nOutput checksums of the first calls: %s (one value: every run computed the same logits)."
              % ", ".join(sorted(sums)))
        print("Goals (issue #14): open to end of first call <= 0.2 s; peak RSS <= 1.15x the weights with one "
              "instance, <= 1.25x with four. `embedded`: nestc build --embed-weights, matrices linked in packed "
              "(its \"open\" is 0: the clock starts at the first NAME_new_embedded).")
        if busy0 is not None and busy1 is not None and wall1 > wall0:
            print("Other processes on the machine kept about %.2f of its %d cores busy during these runs."
                  % (max(0.0, (busy1 - busy0 - (kids1 - kids0)) / (wall1 - wall0)), os.cpu_count()))

