"""The llama.cpp section of bench/run.py (issue 37): a TinyLlama-1.1B-shaped LLaMA in one
GGUF file per format, written by `nestc weights` in llama.cpp's layout, run by both
runtimes from that same file: llama.cpp through node-llama-cpp (its prebuilt CPU
libraries), nestc built with --consts-from FILE --weights-format=FMT and bound to it
without conversion. Decode step at 127 past positions and a 128-token prefill, 1 and 2
threads, interleaved; then the agreement of their next-token distributions and of 32
greedy tokens."""
import json
import os
import shutil
import statistics
import subprocess

import numpy as np

from common import BENCH, DECODE_MALLOC_ENV, ROOT, TORCH_PY, background_note, log, measure, sh

SHAPE = dict(L=22, D=2048, H=32, KVH=4, F=5632, V=32000, CTX=256)
FORMATS = ("f16", "q8_0", "q4_0", "q4_k_m")
# a format's --format / --weights-format spec: q4_k_m is a mix in the manner of
# llama.cpp's Q4_K_M (q6_K for the value projections and the output, where llama.cpp
# gives q6_K to some layers' attn_v and ffn_down; q4_K elsewhere)
SPEC = {"q4_k_m": "q4_k,*v_proj*=q6_k,lm_head*=q6_k"}
P = 127          # the decode step's past positions
T = 128          # the prefill's tokens
GREEDY = 32
GOAL_DECODE, GOAL_PREFILL = 1.1, 1.2
# nestc's activations per format: f32 (the default numerics) and, for the block
# formats, int8 (--activations=int8, llama.cpp's numerics); the goals take the last
ACTS = {"f16": ("f32",), "q8_0": ("f32", "int8"), "q4_0": ("f32", "int8"), "q4_k_m": ("f32", "int8")}
VERSION = "3.21.1"


def prompt_tokens(n, v):
    """n token ids, none of the placeholder vocabulary's three specials."""
    return [int(3 + (i * 7919 + 11) % (v - 3)) for i in range(n)]


class LlamaCppSections:
    def llamacpp_available(self):
        pkg = os.path.join(self.node_path, "node-llama-cpp", "package.json")
        try:
            v = json.load(open(pkg))["version"]
        except (OSError, ValueError, KeyError):
            return None, "node-llama-cpp is not in bench/.node (run scripts/bench-deps.sh)"
        if v != VERSION:
            return None, "bench/.node has node-llama-cpp %s, not %s (run scripts/bench-deps.sh)" % (v, VERSION)
        return v, None

    def llamacpp_build(self, d, gguf, fmt, act="f32"):
        out = os.path.join(d, "nestc-%s-%s" % (fmt, act))
        shutil.rmtree(out, ignore_errors=True)
        log("building llama.nest from %s, --activations=%s" % (os.path.basename(gguf), act))
        sh([self.nestc, "build", os.path.join(ROOT, "samples", "llama.nest"), "--consts-from", gguf,
            "-D", "CTX=%d" % SHAPE["CTX"], "--weights-format=" + SPEC.get(fmt, fmt), "--activations=" + act, "-o", out])
        objs = sorted(os.path.join(out, o) for o in os.listdir(out) if o.endswith(".o"))
        exes = {}
        for name, src in (("decode", os.path.join(BENCH, "decode.c")), ("generate", os.path.join(ROOT, "scripts", "generate.c"))):
            exes[name] = os.path.join(out, name)
            sh([self.cc, "-O2", "-I" + os.path.join(ROOT, "runtime"), "-I" + out, "-DMODEL=llama", "-DMODEL_UP=LLAMA",
                "-o", exes[name], src] + objs + [self.lib, "-lm", "-lpthread"])
        return exes

    def llamacpp(self):
        print("\n## llama.cpp: a TinyLlama-1.1B-shaped LLaMA from the same GGUF files (issue 37)\n")
        print("One GGUF file per format (%s), written by `nestc weights samples/llama.nest --random-weights 1 "
              "--format=FMT` in llama.cpp's layout (its names, metadata, rotary rows, a placeholder vocabulary), "
              "loaded by llama.cpp (node-llama-cpp %s, prebuilt CPU libraries: the variant for this CPU chosen at load; "
              "F32 key/value cache, flash attention off) and by nestc (`nestc build --consts-from FILE "
              "--weights-format=FMT`, bound without conversion; for q8_0, q4_0 and q4_k_m both with its default numerics, f32 "
              "activations, and with --activations=int8, llama.cpp's: activations quantized per block of 32, integer "
              "dot products; the goals take the int8 rows). Decode: one token at "
              "%d past positions; prefill: %d tokens. Ratios are llama.cpp's time over nestc's (above 1: nestc is "
              "faster). The distributions of the next token are compared as log-probabilities (llama.cpp gives "
              "probabilities, not logits). q4_k_m is the file and build of `--format=%s`, a mix in the manner of "
              "llama.cpp's Q4_K_M.\n" % (", ".join(FORMATS), VERSION, P, T, SPEC["q4_k_m"]))
        if "nestc" in self.why_not:
            print("unavailable: %s" % self.why_not["nestc"])
            return
        ver, why = self.llamacpp_available()
        if why:
            print("unavailable: %s" % why)
            return
        server = os.path.join(BENCH, "llamacpp_server.mjs")
        d = os.path.join(self.work, "llamacpp")
        os.makedirs(d, exist_ok=True)
        defs = []
        for k, v in SHAPE.items():
            defs += ["-D", "%s=%s" % (k, v)]
        toks = prompt_tokens(max(P + 1, T), SHAPE["V"])
        tok_npy, tok_json = os.path.join(d, "tokens.npy"), os.path.join(d, "tokens.json")
        np.save(tok_npy, np.array(toks, np.int32))
        with open(tok_json, "w") as f:
            json.dump(toks, f)
        files, exes = {}, {}
        for fmt in FORMATS:
            g = os.path.join(d, "tinyllama-%s.gguf" % fmt)
            try:
                if not os.path.exists(g):
                    log("writing %s" % os.path.basename(g))
                    sh([self.nestc, "weights", os.path.join(ROOT, "samples", "llama.nest")] + defs +
                       ["--random-weights", "1", "--format=" + SPEC.get(fmt, fmt), "-o", g])
                files[fmt] = g
                for act in ACTS[fmt]:
                    exes[(fmt, act)] = self.llamacpp_build(d, g, fmt, act)
            except Exception as e:  # noqa: BLE001 - a failed build is this row's result
                log("llamacpp %s: %s" % (fmt, e))
        env_node = self.base_env()
        bgs, goals = [], []
        for mode, n, rounds, budget in (("decode", P, self.rounds, self.budget(20)), ("prefill", T, max(3, self.rounds // 5), 0)):
            specs = []
            for t in (1, 2):
                for fmt in FORMATS:
                    for act in ACTS[fmt]:
                        err = None if (fmt, act) in exes else "the build failed"
                        o = os.path.join(d, "nestc-%s-%s-%s-%d.npy" % (mode, fmt, act, t))
                        specs.append(dict(label="nestc %s %s" % (fmt, act), threads=t, error=err, out=o,
                                          log=o[:-4] + ".log", env=dict(self.nestc_env(t), **DECODE_MALLOC_ENV),
                                          cmd=[exes.get((fmt, act), {}).get("decode", "false"), files.get(fmt, ""), o,
                                               "2", tok_npy, mode, str(n)]))
                    o = os.path.join(d, "llama-%s-%s-%d.npy" % (mode, fmt, t))
                    specs.append(dict(label="llama.cpp " + fmt, threads=t, error=None if fmt in files else "no file",
                                      out=o, log=o[:-4] + ".log", env=env_node,
                                      cmd=["node", server, files.get(fmt, ""), str(t), o, "2", tok_json, mode, str(n)]))
            # a thread count at a time: 16 servers of the 1.1B model at once came near 24 GB
            res = []
            for t in (1, 2):
                res_t, bg = measure([x for x in specs if x["threads"] == t], rounds, budget=budget / 2)
                res += res_t
                if bg is not None:
                    bgs.append(bg)
            by = {(r["label"], r["threads"]): r for r in res}
            what = "decode step at P=%d" % P if mode == "decode" else "prefill of %d tokens" % T
            print("\n### %s\n" % what)
            print("| format | nestc activations | threads | nestc ms | llama.cpp ms | nestc tok/s | llama.cpp tok/s "
                  "| llama.cpp / nestc | next-token log-prob: max abs diff | same top token | runs |")
            print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            ntok = 1 if mode == "decode" else T
            for t in (1, 2):
                for fmt in FORMATS:
                    for act in ACTS[fmt]:
                        a, b = by.get(("nestc %s %s" % (fmt, act), t)), by.get(("llama.cpp " + fmt, t))
                        if not a or not b or a["ms"] is None or b["ms"] is None:
                            why_row = (a or {}).get("error") or (b or {}).get("error") or "?"
                            print("| %s | %s | %d | unavailable: %s | | | | | | | |" % (fmt, act, t, why_row))
                            continue
                        ratio = b["ms"] / a["ms"]
                        diff, top = "-", "-"
                        try:
                            lg = np.load(a["out"]).astype(np.float64)
                            lp = lg - lg.max() - np.log(np.exp(lg - lg.max()).sum())
                            lq = np.load(b["out"]).astype(np.float64)
                            keep = np.isfinite(lq) & (lq > -20)
                            diff = "%.3g" % np.abs(lp[keep] - lq[keep]).max()
                            top = "yes" if int(lp.argmax()) == int(lq.argmax()) else "no"
                        except (OSError, ValueError) as e:
                            log("compare %s %s: %s" % (mode, fmt, e))
                        print("| %s | %s | %d | %.2f | %.2f | %.1f | %.1f | %.2fx | %s | %s | %d+%d |" % (
                            fmt, act, t, a["ms"], b["ms"], ntok * 1e3 / a["ms"], ntok * 1e3 / b["ms"], ratio, diff, top,
                            a["n"], b["n"]))
                        if act == ACTS[fmt][-1]:
                            g = GOAL_DECODE if mode == "decode" else GOAL_PREFILL
                            goals.append("%s %s, %d thread%s (nestc --activations=%s): nestc %.2fx llama.cpp's tokens/s "
                                         "(goal >= %.1fx: %s)" % (mode, fmt, t, "s" if t > 1 else "", act, ratio, g,
                                                                  "met" if ratio >= g else "not met"))
            info = sorted(set(r.get("info", "") for r in res if r["label"].startswith("llama.cpp") and r.get("info")))
            if info:
                print("\nllama.cpp reported: %s" % "; ".join(info))
        # 32 greedy tokens from the first 16 of the prompt, one thread
        print("\n### Greedy generation: %d tokens after a %d-token prompt\n" % (GREEDY, 16))
        print("| format | nestc activations | tokens equal (from the first) | nestc | llama.cpp |")
        print("| --- | --- | ---: | --- | --- |")
        for fmt in FORMATS:
            act = ACTS[fmt][-1]
            if (fmt, act) not in exes:
                continue
            try:
                out, p16 = os.path.join(d, "greedy-%s.json" % fmt), os.path.join(d, "tokens16.json")
                with open(p16, "w") as f:
                    json.dump(toks[:16], f)
                sh(["node", server, files[fmt], "1", out, "0", p16, "greedy", str(GREEDY)], env=env_node)
                theirs = json.load(open(out))
                r = sh([exes[(fmt, act)]["generate"], files[fmt], str(GREEDY)] + [str(x) for x in toks[:16]],
                       env=self.nestc_env(1))
                line = [x for x in r.split("\n") if x.startswith("ids:")][0]
                ours = [int(x) for x in line[4:].split()][:GREEDY]
                same = 0
                while same < min(len(ours), len(theirs)) and ours[same] == theirs[same]:
                    same += 1
                print("| %s | %s | %d of %d | %s ... | %s ... |" % (fmt, act, same, GREEDY, " ".join(map(str, ours[:8])),
                                                                    " ".join(map(str, theirs[:8]))))
            except Exception as e:  # noqa: BLE001
                print("| %s | %s | unavailable: %s | | |" % (fmt, act, str(e).split("\n")[0][:200]))
        self.llamacpp_samples(d, server, env_node)
        self.llamacpp_tokenizer(d, files, env_node)
        if goals:
            print("\nGoals (issue 37):\n" + "\n".join("- " + g for g in goals))
        if bgs:
            background_note(statistics.mean(bgs))


    def llamacpp_tokenizer(self, d, files, env_node):
        """libnestrt's tokenizer against llama.cpp's, live, on the strings of the
        tokenizer suite (tests/tokenize): with the TinyLlama files' vocabulary, and
        with the suite's five vocabularies (tests/tokenize/vocab.py writes them)."""
        print("\n### Tokenizer: libnestrt's ids against llama.cpp's, live\n")
        print("The strings of the tokenizer suite (tests/tokenize: ASCII, accents, CJK, emoji, digits, runs of "
              "whitespace, special tokens), tokenized by both without BOS and without parsing special tokens "
              "(llama.cpp's llama_tokenize(text, false, false)).\n")
        try:
            tdir = os.path.join(ROOT, "tests", "tokenize")
            strings = [c["text"] for c in json.load(open(os.path.join(tdir, "expected_llama.json")))["cases"]]
            sp = os.path.join(d, "strings.json")
            with open(sp, "w") as f:
                json.dump(strings, f)
            drv = os.path.join(d, "tokdriver")
            sh([self.cc, "-O1", "-I" + os.path.join(ROOT, "runtime"), "-o", drv, os.path.join(tdir, "driver.c"),
                self.lib, "-lm", "-lpthread"])
            vocabs = []
            if files:
                vocabs.append(("TinyLlama files' (placeholder llama)", files[sorted(files)[0]]))
            vd = os.path.join(d, "vocabs")
            os.makedirs(vd, exist_ok=True)
            sh([TORCH_PY, os.path.join(tdir, "vocab.py"), vd])
            for name in ("llama", "llama_nospace", "gpt2", "llama3", "default"):
                vocabs.append((name, os.path.join(vd, name + ".gguf")))
        except Exception as e:  # noqa: BLE001
            print("unavailable: %s" % str(e).split("\n")[0][:300])
            return
        print("| vocabulary | strings | ids equal |")
        print("| --- | ---: | ---: |")
        for name, g in vocabs:
            try:
                theirs = json.loads(sh(["node", os.path.join(BENCH, "llamacpp_tokenize.mjs"), g, sp], env=env_node))
                cases = "".join("0 %s\n" % (s.encode().hex() or "-") for s in strings)
                r = subprocess.run([drv, "tokenize", g], input=cases, capture_output=True, text=True, timeout=600)
                ours = []
                for line in r.stdout.splitlines():
                    ours.append([int(x) for x in line[4:].split("|")[0].split()] if line.startswith("ids") else None)
                same = sum(1 for a, b in zip(ours, theirs["cases"]) if a is not None and a == b["ids"])
                print("| %s | %d | %d |" % (name, len(strings), same))
            except Exception as e:  # noqa: BLE001
                print("| %s | unavailable: %s | |" % (name, str(e).split("\n")[0][:200]))

    def llamacpp_samples(self, d, server, env_node):
        """Both samples, written by nestc weights in llama.cpp's layout, loaded by
        llama.cpp: 16 greedy tokens after 8 against nestc's from the same file."""
        print("\n### The samples' files in llama.cpp\n")
        print("`nestc weights SAMPLE --random-weights 1 --format=q8_0 -o FILE.gguf` at a small size, loaded by "
              "llama.cpp; 16 greedy tokens after an 8-token prompt, against nestc's build from the same file "
              "(--consts-from FILE --weights-format=q8_0 --activations=int8).\n")
        print("| sample | llama.cpp loads it | tokens equal (from the first) | llama.cpp's |")
        print("| --- | --- | ---: | --- |")
        cfgs = (("gpt2", "gpt2.nest", "GPT2", ["-D", "L=2", "-D", "D=128", "-D", "H=4", "-D", "V=256", "-D", "CTX=64",
                                               "-D", "S=16"]),
                ("llama", "llama.nest", "LLAMA", ["-D", "L=2", "-D", "D=256", "-D", "H=8", "-D", "KVH=4", "-D", "F=704",
                                                   "-D", "V=512", "-D", "CTX=64"]))
        prompt = [5, 17, 3, 99, 42, 7, 7, 200]
        for tag, sample, up, cfg in cfgs:
            try:
                g = os.path.join(d, "sample-%s.gguf" % tag)
                sh([self.nestc, "weights", os.path.join(ROOT, "samples", sample)] + cfg +
                   ["--random-weights", "1", "--format=q8_0", "-o", g])
                out = os.path.join(d, "sample-%s" % tag)
                shutil.rmtree(out, ignore_errors=True)
                sh([self.nestc, "build", os.path.join(ROOT, "samples", sample), "--consts-from", g, "-D", "S=16",
                    "--weights-format=q8_0", "--activations=int8", "-o", out])
                objs = sorted(os.path.join(out, o) for o in os.listdir(out) if o.endswith(".o"))
                exe = os.path.join(out, "generate")
                sh([self.cc, "-O2", "-I" + os.path.join(ROOT, "runtime"), "-I" + out, "-DMODEL=" + tag,
                    "-DMODEL_UP=" + up, "-o", exe, os.path.join(ROOT, "scripts", "generate.c")] + objs +
                   [self.lib, "-lm", "-lpthread"])
                pj, gj = os.path.join(d, "sample-%s-prompt.json" % tag), os.path.join(d, "sample-%s-greedy.json" % tag)
                with open(pj, "w") as f:
                    json.dump(prompt, f)
                sh(["node", server, g, "1", gj, "0", pj, "greedy", "16"], env=env_node)
                theirs = json.load(open(gj))
                r = sh([exe, g, "16"] + [str(x) for x in prompt], env=self.nestc_env(1))
                ours = [int(x) for x in [ln for ln in r.split("\n") if ln.startswith("ids:")][0][4:].split()]
                same = 0
                while same < min(len(ours), len(theirs)) and ours[same] == theirs[same]:
                    same += 1
                # llama.cpp stops at an end-of-generation token; nestc's id mode goes on
                stop = " (then llama.cpp stopped at EOS, nestc's next: %d)" % ours[len(theirs)] \
                    if len(theirs) < 16 and len(ours) > len(theirs) else ""
                print("| %s | yes | %d of %d%s | %s |" % (tag, same, len(theirs), stop, " ".join(map(str, theirs))))
            except Exception as e:  # noqa: BLE001
                print("| %s | unavailable: %s | | |" % (tag, str(e).split("\n")[0][:200]))
