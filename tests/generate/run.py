#!/usr/bin/python3
"""Run-time dims, state and generation (issue #13), compiled and checked:

- GPT-2 and LLaMA samples at small configs: scripts/generate.c greedily
  generates 32 tokens from a 16-token prompt (prefill + decode over the KV
  cache); check_generate.py compares ids and every step's logits with the
  interpreter's whole-sequence recomputation (nestc run -D S=n forward).
- prefill at T = 1, 7 and the maximum from one binary against static builds
  of the same T (-D T=n), within 1e-5 relative.
- bad dims at run time: error codes and messages, nothing written, the
  instance still usable (driver.c).
- compile-time diagnostics of where clauses, states and stores.

    /usr/bin/python3 tests/generate/run.py NESTC_PATH
Prints ok/FAIL lines and `N passed, N failed`.
"""
import os, re, subprocess, sys, tempfile
import numpy as np

NESTC = os.path.abspath(sys.argv[1])
B = os.path.dirname(NESTC)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(B, "libnestrt.a")
passed = failed = 0


def result(ok, name, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok " + name + (": " + detail if detail else ""))
    else:
        failed += 1
        print("FAIL " + name + (": " + detail if detail else ""))


def sh(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def build(model, cfg, out, extra=()):
    r = sh([NESTC, "build", model, "-o", out, "--no-cache"] + cfg + list(extra))
    if r.returncode != 0:
        raise RuntimeError("nestc build failed: " + r.stderr)


# check-asan links the test programs with the sanitizers' runtime
LINK_FLAGS = os.environ.get("NESTC_TEST_LDFLAGS", "").split()


def link(src, objdir, exe, defs=()):
    r = sh(["cc", "-O1", "-I" + os.path.join(ROOT, "runtime"), "-I" + objdir] + list(defs) + [src] +
           sorted(os.path.join(objdir, f) for f in os.listdir(objdir) if f.endswith(".o")) +
           [LIB, "-lm", "-lpthread", "-ldl"] + LINK_FLAGS + ["-o", exe])
    if r.returncode != 0:
        raise RuntimeError("cc failed: " + r.stderr)


GPT2 = os.path.join(ROOT, "samples", "gpt2.nest")
LLAMA = os.path.join(ROOT, "samples", "llama.nest")
GCFG = "-D L=2 -D D=64 -D H=2 -D V=256 -D CTX=64 -D S=16".split()
LCFG = "-D L=2 -D D=64 -D H=4 -D KVH=2 -D F=128 -D V=256 -D CTX=64".split()
PROMPT = [str(t) for t in [5, 17, 3, 99, 42, 7, 7, 200, 13, 1, 0, 255, 64, 31, 8, 150]]

with tempfile.TemporaryDirectory() as work:
    # the long ones decode at positions where a step's attention rows are
    # 61..68 and 251..260 long: the row kernels' 4-vector tiles, their tails,
    # and the rows of 256 and more streamed through memory (codegen/matmul.c)
    GMAC = ["-DMODEL=gpt2", "-DMODEL_UP=GPT2"]
    LONG = "-D L=1 -D D=64 -D H=2 -D V=256 -D CTX=320 -D S=16".split()
    for name, model, cfg, mac, prompt, steps in (
            ("gpt2", GPT2, GCFG, GMAC, PROMPT, 32),
            ("llama", LLAMA, LCFG, ["-DMODEL=llama", "-DMODEL_UP=LLAMA"], PROMPT, 32),
            ("gpt2_ctx320_p60", GPT2, LONG, GMAC, [str((i * 37 + 11) % 256) for i in range(60)], 8),
            ("gpt2_ctx320_p250", GPT2, LONG, GMAC, [str((i * 53 + 5) % 256) for i in range(250)], 10),
            # weights in formats (issue #36): each model in each of them
            ("gpt2_q8_0", GPT2, GCFG + ["--weights-format=q8_0"], GMAC, PROMPT, 32),
            ("gpt2_q4_0", GPT2, GCFG + ["--weights-format=q4_0"], GMAC, PROMPT, 32),
            ("gpt2_bf16", GPT2, GCFG + ["--weights-format=bf16"], GMAC, PROMPT, 32),
            ("gpt2_f16", GPT2, GCFG + ["--weights-format=f16"], GMAC, PROMPT, 32),
            ("llama_q8_0", LLAMA, LCFG + ["--weights-format=q8_0"], ["-DMODEL=llama", "-DMODEL_UP=LLAMA"], PROMPT, 32),
            ("llama_q4_0", LLAMA, LCFG + ["--weights-format=q4_0"], ["-DMODEL=llama", "-DMODEL_UP=LLAMA"], PROMPT, 32),
            ("llama_bf16", LLAMA, LCFG + ["--weights-format=bf16"], ["-DMODEL=llama", "-DMODEL_UP=LLAMA"], PROMPT, 32),
            ("llama_f16", LLAMA, LCFG + ["--weights-format=f16"], ["-DMODEL=llama", "-DMODEL_UP=LLAMA"], PROMPT, 32)):
        d = os.path.join(work, name)
        os.mkdir(d)
        try:
            build(model, cfg, os.path.join(d, "out"))
            w = os.path.join(d, "w.safetensors")
            r = sh([NESTC, "weights", model] + [c for c in cfg if not c.startswith("--weights-format")] +
                   ["--random-weights", "11", "-o", w])
            assert r.returncode == 0, r.stderr
            exe = os.path.join(d, "generate")
            link(os.path.join(ROOT, "scripts", "generate.c"), os.path.join(d, "out"), exe, mac)
            r = sh(["/usr/bin/python3", os.path.join(HERE, "check_generate.py"), NESTC, model, exe, w, d, str(steps),
                    " ".join(cfg)] + prompt)
            result(r.returncode == 0, name + ".generate_vs_interpreter", (r.stdout + r.stderr).strip())
        except Exception as e:  # a failed build is this check's failure
            result(False, name + ".generate_vs_interpreter", str(e))

    # the cache in 16 bits (-D CACHE=bf16 / f16, issue #36): rounded as it is written, so
    # the reference is the same model with an f32 cache, compiled: the same 32 ids, the
    # logits close (each step's keys and values lose their low bits)
    for name, model, cfg, mac, half in (("gpt2", GPT2, GCFG, GMAC, "bf16"),
                                        ("llama", LLAMA, LCFG, ["-DMODEL=llama", "-DMODEL_UP=LLAMA"], "f16")):
        d = os.path.join(work, name + "_cache_" + half)
        os.mkdir(d)
        try:
            w = os.path.join(d, "w.safetensors")
            r = sh([NESTC, "weights", model] + cfg + ["--random-weights", "11", "-o", w])
            assert r.returncode == 0, r.stderr
            got = {}
            for dt in ("f32", half):
                out = os.path.join(d, "out_" + dt)
                build(model, cfg + ["-D", "CACHE=" + dt], out)
                exe = os.path.join(d, "generate_" + dt)
                link(os.path.join(ROOT, "scripts", "generate.c"), out, exe, mac)
                lg = os.path.join(d, "logits_%s.bin" % dt)
                r = sh([exe, w, "32"] + PROMPT + ["--logits", lg])
                assert r.returncode == 0, r.stderr
                ids = [l for l in r.stdout.splitlines() if l.startswith("ids:")][0]
                got[dt] = (ids, np.fromfile(lg, dtype=np.float32).reshape(32, -1).astype(np.float64))
            rel = float(np.abs(got[half][1] - got["f32"][1]).max() / np.abs(got["f32"][1]).max())
            ok = got[half][0] == got["f32"][0] and 0 < rel < 2e-2
            result(ok, "%s.cache_%s_vs_f32" % (name, half),
                   "32 ids %s, logits within %.2g relative%s" % ("identical" if got[half][0] == got["f32"][0] else "DIFFER",
                                                               rel, "" if rel > 0 else " (no rounding at all?)"))
        except Exception as e:  # a failed build is this check's failure
            result(False, "%s.cache_%s_vs_f32" % (name, half), str(e))

    # prefill at several T from one binary against static builds of that T
    d = os.path.join(work, "prefill")
    os.mkdir(d)
    try:
        build(GPT2, GCFG, os.path.join(d, "dyn"))
        w = os.path.join(d, "w.safetensors")
        sh([NESTC, "weights", GPT2] + GCFG + ["--random-weights", "3", "-o", w])
        link(os.path.join(HERE, "driver.c"), os.path.join(d, "dyn"), os.path.join(d, "driver"))
        for T in (1, 7, 64):
            got_path = os.path.join(d, "got%d.bin" % T)
            r = sh([os.path.join(d, "driver"), w, "prefill", str(T), got_path])
            got = np.fromfile(got_path, dtype=np.float32).reshape(T, 256)
            # the static build: -D T=n makes prefill a fixed-shape entry
            sd = os.path.join(d, "static%d" % T)
            build(GPT2, GCFG + ["-D", "T=%d" % T], sd)
            hdr = open(os.path.join(sd, "gpt2.h")).read()
            ok_sig = "int gpt2_prefill(gpt2 *m, gpt2_seq *s, const int32_t *tokens, float *out);" in hdr
            drv = os.path.join(sd, "s.c")
            with open(drv, "w") as f:
                f.write('#include "gpt2.h"\n#include <stdio.h>\n#include <stdlib.h>\n'
                        'int main(int c, char **v) { nestrt_error e; nestrt_weights *w = nestrt_weights_open(v[1], &e);\n'
                        ' gpt2 *m = gpt2_new(w, &e); gpt2_seq *s = gpt2_seq_new(m, &e);\n'
                        ' int32_t t[%d]; for (int i = 0; i < %d; i++) t[i] = (i * 7 + 1) %% 256;\n'
                        ' static float o[%d]; if (gpt2_prefill(m, s, t, o)) return 1;\n'
                        ' FILE *f = fopen(v[2], "wb"); fwrite(o, 4, %d, f); fclose(f);\n'
                        ' gpt2_seq_free(s); gpt2_free(m); nestrt_weights_close(w); return 0; }\n'
                        % (T, T, T * 256, T * 256))
            link(drv, sd, os.path.join(sd, "s"))
            ref_path = os.path.join(sd, "ref.bin")
            rr = sh([os.path.join(sd, "s"), w, ref_path])
            ref = np.fromfile(ref_path, dtype=np.float32).reshape(T, 256)
            rel = float(np.abs(got - ref).max() / np.abs(ref).max())
            result(r.returncode == 0 and rr.returncode == 0 and ok_sig and rel <= 1e-5,
                   "gpt2.prefill_T%d_vs_static_build" % T, "max rel diff %.2g" % rel)
        # the variant specialised for T == 1 serves prefill at T = 1, the general one the rest
        for T, want in ((1, "block_kv.1 [when T == 1]"), (7, "block_kv.0")):
            r = sh([os.path.join(d, "driver"), w, "prefill", str(T), os.path.join(d, "p.bin")],
                   env=dict(os.environ, NESTRT_PROFILE="1"))
            calls = {}
            for line in r.stderr.splitlines():
                mm = re.match(r"^  (\S+(?: \[when [^]]*\])?)\s+(\d+) calls", line)
                if mm:
                    calls[mm.group(1)] = int(mm.group(2))
            other = "block_kv.0" if T == 1 else "block_kv.1 [when T == 1]"
            result(calls.get(want) == 2 and calls.get(other) == 0, "specialize.profile_T%d" % T,
                   "%s: %s calls, %s: %s" % (want, calls.get(want), other, calls.get(other)))
        rep = sh([NESTC, "report", GPT2] + GCFG).stdout
        result("variant block_kv.1" in rep and "; when T == 1" in rep and "run-time T" in rep,
               "specialize.report_guards", "")
        r = sh([os.path.join(d, "driver"), w, "bad"])
        for line in r.stdout.splitlines():
            if line.startswith("ok "):
                result(True, "runtime_errors." + line[3:])
            elif line.startswith("FAIL "):
                result(False, "runtime_errors." + line[5:])
        result(r.returncode == 0, "runtime_errors.exit_status", str(r.returncode))
    except Exception as e:
        result(False, "gpt2.prefill", str(e))

    # a slice whose end passes its axis for some values of the dims: the call fails with
    # the bound as a condition, where the slice is, and writes nothing
    d = os.path.join(work, "slicebound")
    os.mkdir(d)
    try:
        src = os.path.join(d, "sb.nest")
        with open(src, "w") as f:
            f.write("const CTX = 16\nexport fn g(x: f32[CTX], y: f32[T]) -> f32[T] where 0 <= P, P < CTX, 1 <= T, "
                    "T <= CTX {\n  return x[P:P + T] + y\n}\n")
        build(src, [], os.path.join(d, "out"))
        with open(os.path.join(d, "drv.c"), "w") as f:
            f.write('#include <stdio.h>\n#include "sb.h"\nint main(void)\n{\n\tnestrt_error err;\n'
                    '\tsb *m = sb_new(NULL, &err);\n\tfloat x[16] = {0}, y[16] = {0}, out[16];\n'
                    '\tfor (int i = 0; i < 16; i++) out[i] = 7;\n'
                    '\tint ok = sb_g(m, 9, 7, x, y, out) == 0, bad = sb_g(m, 10, 7, x, y, out) == -1;\n'
                    '\tprintf("%d %d %g|%s\\n", ok, bad, out[0], sb_error(m));\n\tfflush(stdout);\n\tsb_free(m);\n\treturn 0;\n}\n')
        link(os.path.join(d, "drv.c"), os.path.join(d, "out"), os.path.join(d, "drv"))
        r = sh([os.path.join(d, "drv")])
        want = "1 1 0|sb_g: P = 10, T = 7: P + T <= 16 (the end of the slice at sb.nest:3:10, on axis 0) does not hold"
        result(r.stdout.strip() == want, "runtime_errors.slice_end_as_a_condition", r.stdout.strip() + r.stderr)
    except Exception as e:
        result(False, "runtime_errors.slice_end_as_a_condition", str(e))

    # a slice of T + 1 elements from P: its end is P + T + 1, so the call checks
    # P + T <= 15 (P = 9, T = 6 runs and P = 9, T = 7 fails, writing nothing); the header
    # lists the where clause and that bound, not the conditions that hold for every value
    # of the dims (the slice's start, the sizes)
    d = os.path.join(work, "slicebound2")
    os.mkdir(d)
    try:
        src = os.path.join(d, "sb2.nest")
        with open(src, "w") as f:
            f.write("const CTX = 16\nexport fn g(x: f32[CTX]) -> f32[T + 1] where 0 <= P, P < CTX, 1 <= T, "
                    "T <= CTX {\n  return x[P:P + T + 1] * 2.0\n}\n")
        build(src, [], os.path.join(d, "out"))
        hdr = open(os.path.join(d, "out", "sb2.h")).read()
        want_h = ("   where 0 <= P, P < CTX, 1 <= T, T <= CTX, P + T <= 15 (the end of the slice at sb2.nest:3:10, "
                  "on axis 0)\n")
        result(want_h in hdr, "header.slice_end_condition_only", "".join(l + "\n" for l in hdr.splitlines()
                                                                         if "where" in l))
        with open(os.path.join(d, "drv.c"), "w") as f:
            f.write('#include <stdio.h>\n#include "sb2.h"\nint main(void)\n{\n\tnestrt_error err;\n'
                    '\tsb2 *m = sb2_new(NULL, &err);\n\tfloat x[16], out[17];\n'
                    '\tfor (int i = 0; i < 16; i++) x[i] = (float)i;\n\tfor (int i = 0; i < 17; i++) out[i] = -1;\n'
                    '\tint ok = sb2_g(m, 9, 6, x, out) == 0;\n\tprintf("%d %g %g %g|", ok, out[0], out[6], out[7]);\n'
                    '\tfor (int i = 0; i < 17; i++) out[i] = -1;\n\tint bad = sb2_g(m, 9, 7, x, out) == -1;\n'
                    '\tprintf("%d %g|%s\\n", bad, out[0], sb2_error(m));\n\tfflush(stdout);\n\tsb2_free(m);\n'
                    '\treturn 0;\n}\n')
        link(os.path.join(d, "drv.c"), os.path.join(d, "out"), os.path.join(d, "drv"))
        r = sh([os.path.join(d, "drv")])
        want = ("1 18 30 -1|1 -1|sb2_g: P = 9, T = 7: P + T <= 15 (the end of the slice at sb2.nest:3:10, on axis 0) "
                "does not hold")
        result(r.stdout.strip() == want, "runtime_errors.slice_end_with_a_constant", r.stdout.strip() + r.stderr)
    except Exception as e:
        result(False, "runtime_errors.slice_end_with_a_constant", str(e))

    # bounds.nest: a strict bound and one with a coefficient, compiled (bounds.c, the
    # header's _MIN/_MAX too) and interpreted; the state read only where it was
    # written, after a reset and in boxes
    d = os.path.join(work, "bounds")
    os.mkdir(d)
    bsrc = os.path.join(HERE, "bounds.nest")
    try:
        build(bsrc, [], os.path.join(d, "out"))
        link(os.path.join(HERE, "bounds.c"), os.path.join(d, "out"), os.path.join(d, "drv"))
        r = sh([os.path.join(d, "drv")])
        for line in r.stdout.splitlines():
            if line.startswith("ok ") or line.startswith("FAIL "):
                ok, rest = line.split(" ", 1)
                result(ok == "ok", "bounds_compiled." + rest)
        result(r.returncode == 0 and r.stdout.count("\nok ") >= 81, "bounds_compiled.exit_status",
               "%d %s" % (r.returncode, r.stderr[-300:]))
    except Exception as e:
        result(False, "bounds_compiled", str(e))
    x2 = os.path.join(d, "x2.npy")
    np.save(x2, np.array([1.5, -2.0], np.float32))
    ab = [os.path.join(d, n + ".npy") for n in ("a", "b")]
    np.save(ab[0], np.ones((4, 4), np.float32))
    np.save(ab[1], np.ones((1, 8), np.float32))
    out = os.path.join(d, "o.npy")
    for name, entry, T, want in (("strict_T1", "strict", "1", "bounds.nest:5:45: error: -D: T > 1 does not hold"),
                                 ("strict_T9", "strict", "9", "bounds.nest:5:52: error: -D: T < 9 does not hold"),
                                 ("coef_T9", "coef", "9", "bounds.nest:9:51: error: -D: 2 * T <= 16 does not hold"),
                                 ("coef_T_huge", "coef", str((1 << 62) + 4), "error: -D: 2 * T <= 16 does not hold"),
                                 ("neg_T_minus1", "neg", "-1", "bounds.nest:38:36: error: -D: 0 <= T does not hold"),
                                 ("nolo_T_minus1", "nolo", "-1", "bounds.nest:42:37: error: -D: 0 <= T does not hold"),
                                 ("lower_T3", "lower", "3", "bounds.nest:34:65: error: -D: 4 <= T does not hold")):
        r = sh([NESTC, "run", bsrc, "--entry", entry, "-D", "T=" + T, "-D", "P=0", "--input", "x=" + x2, "--output", out])
        result(r.returncode == 1 and want in r.stderr and not os.path.exists(out), "bounds_run." + name,
               r.stderr.strip().splitlines()[0] if r.stderr else "(no message)")
    for entry, T, f in (("strict", "2", lambda v: v * 2), ("coef", "2", lambda v: v + 1), ("coef", "8", None)):
        xin = x2 if T == "2" else os.path.join(d, "x8.npy")
        if T == "8":
            np.save(xin, np.arange(8, dtype=np.float32))
            f = lambda v: v + 1
        r = sh([NESTC, "run", bsrc, "--entry", entry, "-D", "T=" + T, "--input", "x=" + xin, "--output", out])
        ok = r.returncode == 0 and os.path.exists(out) and np.array_equal(np.load(out), f(np.load(xin)))
        result(ok, "bounds_run.%s_T%s" % (entry, T), r.stderr.strip())
        if os.path.exists(out):
            os.remove(out)
    r = sh([NESTC, "run", bsrc, "--entry", "boxy", "--input", "a=" + ab[0], "--input", "b=" + ab[1]])
    result(r.returncode == 1 and "bounds.nest:27:10: error: reads state s at 0:8 on axis 1 before it was written "
           "there (written: 0:4)" in r.stderr, "bounds_run.boxy_reads_unwritten", r.stderr.strip())

    # compile-time diagnostics
    cases = [
        ("where_not_export", "const C = 8\nfn f(x: f32[T]) -> f32[T] where T <= C {\n  return x\n}\n"
         "export fn g(x: f32[4]) -> f32[4] { return f(x) }\n", "only an exported function has run-time dimensions"),
        ("no_upper_bound", "export fn g(x: f32[T]) -> f32[T] where 1 <= T {\n  return x * 2.0\n}\n",
         "needs an upper bound"),
        ("not_linear", "export fn g(x: f32[T]) -> f32[T * T] where 1 <= T, T <= 64 {\n"
         "  return zeros([T * T])\n}\n", "not a linear function"),
        ("nonlinear_condition", "export fn g(x: f32[T]) -> f32[T] where 1 <= T, T * T <= 64 {\n  return x\n}\n",
         "must be linear"),
        ("store_into_param", "param w: f32[8]\nexport fn g(x: f32[4]) -> f32[4] {\n  w[0:4] = x\n  return x\n}\n",
         "only a state can be written in place; this is a param"),
        ("store_shape", "state s: f32[8]\nexport fn g(x: f32[4]) -> f32[4] {\n  s[0:3] = x\n  return x\n}\n",
         "cannot store f32[4] into f32[8]: the part written is f32[3]"),
        ("unknown_dim_in_shape", "export fn g(x: f32[N]) -> f32[N] {\n  return x\n}\n",
         "a run-time dimension is named in a where clause"),
        ("reuse_hash_runtime_and_own_dims", "@region(reuse_hash = 0)\nfn r(x: f32[N, K]) -> f32[N, K] {\n"
         "  return x * 2.0\n}\nexport fn f(a: f32[T, 4], b: f32[T, 8]) -> (f32[T, 4], f32[T, 8]) where 1 <= T <= 16 {\n"
         "  return r(a), r(b)\n}\n", "their sizes differ beyond the run-time dims of their exported functions"),
    ]
    for name, src, want in cases:
        p = os.path.join(work, name + ".nest")
        open(p, "w").write(src)
        r = sh([NESTC, "check", p])
        ok = r.returncode == 1 and want in r.stderr and ":" in r.stderr.split("error:")[0]
        result(ok, "diagnostics." + name, r.stderr.strip().splitlines()[0] if r.stderr else "(no message)")
    # a reuse_hash group with a call of fixed rows and one of run-time rows: a variant
    # each (tests/diff/findings/reuse_hash_static_and_runtime_rows.nest runs them)
    p = os.path.join(work, "rh.nest")
    open(p, "w").write("@region(reuse_hash = 0)\nfn r(x: f32[N, 8]) -> f32[N, 8] {\n  return x * 2.0\n}\n"
                       "export fn g(x: f32[2, 8]) -> f32[2, 8] {\n  return r(x)\n}\n"
                       "export fn f(x: f32[T, 8]) -> f32[T, 8] where 1 <= T <= 16 {\n  return r(x)\n}\n")
    r = sh([NESTC, "report", p])
    result(r.returncode == 0 and "2 calls -> 2 variants" in r.stdout and "new variant r.1 because run-time dims of the "
           "exported function, variant 0: fixed dims" in r.stdout, "report.reuse_hash_fixed_and_runtime_rows",
           r.stdout[-400:] + r.stderr)
    # a reuse_hash group of rows 2, 1 and 5: the call of 1 row (a size-1 axis, which
    # broadcasts) gets a variant of its own, the others share one; values right
    p = os.path.join(work, "rh2.nest")
    open(p, "w").write("@region(reuse_hash = 0)\nfn r(x: f32[N, 8], b: f32[M, 8]) -> f32[N, 8] {\n  return x * 2.0 + b\n}\n"
                       "export fn g(a: f32[2, 8], b: f32[1, 8], c: f32[5, 8]) -> (f32[2, 8], f32[1, 8], f32[5, 8]) {\n"
                       "  return r(a, a), r(b, b), r(c, c)\n}\n")
    r = sh([NESTC, "report", p])
    result(r.returncode == 0 and "3 calls -> 2 variants" in r.stdout and "new variant r.1 because arg x dim 0 is 1 here "
           "and 2 there (broadcasting a size-1 axis cannot be decided at run time); variant 0's code cannot take it "
           "(reuse_hash = 0)" in r.stdout, "report.reuse_hash_size1_axis_own_variant", r.stdout[-500:] + r.stderr)
    ins = {k: np.random.default_rng(5).standard_normal(s).astype(np.float32) for k, s in (("a", (2, 8)), ("b", (1, 8)),
                                                                                          ("c", (5, 8)))}
    args = []
    for k, v in ins.items():
        np.save(os.path.join(work, "rh2_%s.npy" % k), v)
        args += ["--input", "%s=%s" % (k, os.path.join(work, "rh2_%s.npy" % k))]
    outs = [os.path.join(work, "rh2_o%d.npy" % i) for i in range(3)]
    r = sh([NESTC, "run", p] + args + sum((["--output", o] for o in outs), []))
    want = [ins["a"] * 3, ins["b"] * 3, ins["c"] * 3]
    result(r.returncode == 0 and all(np.allclose(np.load(o), w, rtol=1e-6) for o, w in zip(outs, want)),
           "run.reuse_hash_size1_axis_values", r.stderr)
    # the variants and their guards in words, run-time and specialised
    r = sh([NESTC, "report", bsrc])
    want = ["region mix  (defined at", "  2 calls -> 2 variants", "guards: a: f32[T]; b: f32[P + 1]; run-time P, T",
            "guards: a: f32[1]; b: f32[P + 1]; when T == 1",
            "new variant mix.1 because arg a: f32[1], variant 0 has f32[T]"]
    result(r.returncode == 0 and all(w in r.stdout for w in want) and r.stdout.count("variant mix.") == 3,
           "report.specialized_guards", r.stdout[-600:] + r.stderr)
    # a specialised region called three times from one entry: all three calls have their
    # alternative in the one variant for N == 1; a region of fixed shapes called from that
    # entry and from a static one: one variant serves both (it takes no run-time dim)
    p = os.path.join(work, "spec3.nest")
    open(p, "w").write("@region(specialize = [N == 1])\nfn mix(a: f32[N]) -> f32[N] {\n  return a * 2.0 + 1.0\n}\n"
                       "@region\nfn fixed(a: f32[4]) -> f32[4] {\n  return a * 3.0\n}\n"
                       "export fn three(x: f32[16], z: f32[4]) -> (f32[T], f32[T], f32[T], f32[4]) where 1 <= T <= 8 {\n"
                       "  return mix(x[0:T]), mix(x[1:T + 1]), mix(x[2:T + 2]), fixed(z)\n}\n"
                       "export fn plain(z: f32[4]) -> f32[4] {\n  return fixed(z)\n}\n")
    r = sh([NESTC, "report", p])
    want = ["region mix ", "  6 calls -> 2 variants", "guards: a: f32[1]; when T == 1",
            "region fixed ", "  2 calls -> 1 variant\n", "in plain: 1 -> fixed.0 (reused)"]
    ok = (r.returncode == 0 and all(w in r.stdout for w in want)
          and len(re.findall(r"in three: 1 -> mix\.1", r.stdout)) == 3
          and re.search(r"variant mix\.1 +fingerprint \w+ +3 calls", r.stdout) is not None)
    result(ok, "report.specialized_three_calls_and_a_fixed_region", r.stdout[-900:] + r.stderr)
    # a region specialised for N == 1 whose result has another shape than its argument:
    # called from an entry where T may be 1 (a variant for T == 1 whose guards are its
    # argument's shape, f32[1, 4]), from a static entry with f32[1, 4] (that same variant:
    # its shapes are all fixed), and from an entry where T >= 2 (no alternative: never true)
    p = os.path.join(work, "spec4.nest")
    open(p, "w").write("@region(specialize = [N == 1])\nfn head(a: f32[N, 4]) -> f32[4] {\n"
                       "  return sum(a, axis=0) * 2.0\n}\n"
                       "export fn dyn(x: f32[T, 4]) -> f32[4] where 1 <= T <= 8 {\n  return head(x)\n}\n"
                       "export fn one(x: f32[1, 4]) -> f32[4] {\n  return head(x)\n}\n"
                       "export fn never(x: f32[T, 4]) -> f32[4] where 2 <= T <= 8 {\n  return head(x)\n}\n")
    r = sh([NESTC, "report", p])
    guards = [l.strip() for l in r.stdout.splitlines() if l.strip().startswith("guards:")]
    ok = (r.returncode == 0 and "  4 calls -> 3 variants" in r.stdout
          and re.search(r"variant head\.1 +fingerprint \w+ +2 calls", r.stdout) is not None
          and "in one: 1 -> head.1 (reused)" in r.stdout and r.stdout.count(" in never: ") == 1
          and guards == ["guards: a: f32[T, 4]; run-time T", "guards: a: f32[1, 4]; when T == 1",
                         "guards: a: f32[T, 4]; run-time T"])
    result(ok, "report.specialized_shared_with_a_static_call_and_never_true", r.stdout[-1200:] + r.stderr)
    # an entry with the most run-time dims (4), T the last: the variant for T == 1
    p = os.path.join(work, "spec5.nest")
    open(p, "w").write("@region(specialize = [N == 1])\nfn mix(a: f32[N]) -> f32[N] {\n  return a * 2.0\n}\n"
                       "export fn four(x: f32[64]) -> f32[T] where 0 <= A <= 8, 0 <= B <= 8, 0 <= C <= 8, 1 <= T <= 8 {\n"
                       "  return mix(x[A + 2 * B + 3 * C:A + 2 * B + 3 * C + T])\n}\n")
    r = sh([NESTC, "report", p])
    ok = (r.returncode == 0 and "  2 calls -> 2 variants" in r.stdout and "guards: a: f32[1]; when T == 1" in r.stdout
          and "guards: a: f32[T]; run-time A, B, C, T\n" in r.stdout)
    result(ok, "report.specialized_in_an_entry_of_four_dims", r.stdout[-900:] + r.stderr)
    # a specialised region calling another region of run-time shapes twice, called twice
    # itself: one copy of each for T == 1 (the second call of each reuses the first's), and
    # the copy of outer calls the copy of inner, never itself
    p = os.path.join(work, "spec6.nest")
    open(p, "w").write("@region\nfn inner(a: f32[N]) -> f32[N] {\n  return a * 2.0 + 1.0\n}\n"
                       "@region(specialize = [N == 1])\nfn outer(a: f32[N]) -> f32[N] {\n"
                       "  return inner(a) + inner(a * 3.0)\n}\n"
                       "export fn f(x: f32[16]) -> (f32[T], f32[T]) where 1 <= T <= 8 {\n"
                       "  return outer(x[0:T]), outer(x[2:T + 2])\n}\n")
    r = sh([NESTC, "report", p])
    want = ["region inner ", "  8 calls -> 2 variants", "variant inner.1  fingerprint",
            "in outer (variant outer.1): 2 -> inner.1 (1 new, 1 reused)", "in outer (variant outer.1): 2 -> inner.1 (reused)",
            "region outer ", "  4 calls -> 2 variants", "guards: a: f32[1]; when T == 1"]
    d = sh([NESTC, "check", p, "--dump=ir"])
    heads = [l.split(" (")[0] for l in d.stdout.splitlines() if l.startswith("region ")]
    ok = (r.returncode == 0 and all(w in r.stdout for w in want) and d.returncode == 0
          and heads == ["region outer [a: f32[T]; run-time T] dims T", "region inner [a: f32[T]; run-time T] dims T",
                        "region outer [a: f32[1]; when T == 1]", "region inner [a: f32[1]; when T == 1]"])
    result(ok, "report.specialized_nested_and_called_twice", r.stdout[-1200:] + r.stderr + "\n".join(heads))
    # the interpreter: the same semantics (a fresh sequence per run)
    np.save(os.path.join(work, "tok1.npy"), np.array([3], dtype=np.int32))
    np.save(os.path.join(work, "tok5.npy"), np.array([3, 1, 4, 1, 5], dtype=np.int32))
    r = sh([NESTC, "run", GPT2] + GCFG + ["-D", "P=5", "--entry", "decode", "--random-weights", "1",
                                           "--input", "token=" + os.path.join(work, "tok1.npy")])
    # the line of the sample that reads the cache: where the error points
    kline = [i + 1 for i, ln in enumerate(open(GPT2).read().split("\n")) if "f32(c.k[:, :, 0:P+T])" in ln][0]
    result(r.returncode == 1 and "gpt2.nest:%d:40: error: reads state cache.0.k at 0:6 on axis 2 before it was written "
           "there (written: 5:6)" % kline in r.stderr, "run.decode_reads_unwritten_state", r.stderr.strip().splitlines()[0] if r.stderr else "")
    r = sh([NESTC, "run", GPT2] + GCFG + ["-D", "T=5", "--entry", "prefill", "--random-weights", "1",
                                           "--input", "tokens=" + os.path.join(work, "tok5.npy")])
    result(r.returncode == 0 and r.stdout.startswith("prefill: f32[5, 256]"), "run.prefill_static_T", r.stdout.strip() + r.stderr.strip())
    # nestc run needs the dims' values
    r = sh([NESTC, "run", GPT2] + GCFG + ["--entry", "prefill", "--random-weights", "1"])
    result(r.returncode == 1 and "give their values to run it (-D T=N)" in r.stderr, "run.needs_dims", r.stderr.strip())
    # bounds written as a chain (1 <= T <= 16 is 1 <= T, T <= 16), and two entries that
    # share the name T with different bounds: run --entry gives -D to that entry alone
    p = os.path.join(work, "chain.nest")
    open(p, "w").write("export fn f(x: f32[T]) -> f32[T] where 1 <= T <= 16 {\n  return x * 2.0\n}\n"
                       "export fn g(x: f32[T]) -> f32[T] where 1 <= T && T <= 64 {\n  return x + 1.0\n}\n")
    np.save(os.path.join(work, "x40.npy"), np.arange(40, dtype=np.float32))
    np.save(os.path.join(work, "x5.npy"), np.arange(5, dtype=np.float32))
    out = os.path.join(work, "chain_out.npy")
    r = sh([NESTC, "run", p, "--entry", "g", "-D", "T=40", "--input", "x=" + os.path.join(work, "x40.npy"),
            "--output", out])
    result(r.returncode == 0 and os.path.exists(out) and np.array_equal(np.load(out), np.arange(40) + 1.0),
           "run.entry_takes_its_own_dims", r.stderr.strip())
    r = sh([NESTC, "run", p, "--entry", "f", "-D", "T=5", "--input", "x=" + os.path.join(work, "x5.npy"),
            "--output", out])
    result(r.returncode == 0 and np.array_equal(np.load(out), np.arange(5) * 2.0), "run.chained_bounds", r.stderr.strip())
    r = sh([NESTC, "run", p, "--entry", "f", "-D", "T=17", "--input", "x=" + os.path.join(work, "x5.npy")])
    result(r.returncode == 1 and "chain.nest:1:45: error: -D: T <= 16 does not hold" in r.stderr,
           "run.chained_bound_fails", r.stderr.strip())
    r = sh([NESTC, "build", p, "-o", os.path.join(work, "chain_obj")])
    result(r.returncode == 0 and os.path.exists(os.path.join(work, "chain_obj", "chain.h")),
           "build.chained_bounds", r.stderr.strip())
    # run without --entry runs forward (or the only export): -D goes to it alone too
    p = os.path.join(work, "chainfw.nest")
    open(p, "w").write("export fn forward(x: f32[T]) -> f32[T] where 1 <= T <= 64 {\n  return x * 2.0\n}\n"
                       "export fn g(x: f32[T]) -> f32[T] where 1 <= T <= 16 {\n  return x + 1.0\n}\n")
    r = sh([NESTC, "run", p, "-D", "T=40", "--input", "x=" + os.path.join(work, "x40.npy"), "--output", out])
    result(r.returncode == 0 and np.array_equal(np.load(out), np.arange(40) * 2.0), "run.forward_takes_its_own_dims",
           r.stderr.strip())
    # a chain's middle operand is evaluated once: a call that writes a state runs once
    # (0 < 1 < 1.5 holds; twice bumped, 2 < 1.5 did not), a product is one node
    p = os.path.join(work, "chainonce.nest")
    open(p, "w").write("state s: f32[4]\nfn bump(c: f32[4]) -> f32[4] {\n  c[0:4] = c[0:4] + 1.0\n  return c[0:4]\n}\n"
                       "export fn f(x: f32[4], w: f32[4, 4]) -> (bool[4], bool[4]) {\n  s[0:4] = x\n"
                       "  return 0.0 < bump(s) < 1.5, 0.0 <= x @ w < 1.0\n}\n")
    np.save(os.path.join(work, "z4.npy"), np.zeros(4, np.float32))
    np.save(os.path.join(work, "w44.npy"), np.eye(4, dtype=np.float32))
    outs = [os.path.join(work, "once%d.npy" % i) for i in range(2)]
    r = sh([NESTC, "run", p, "--input", "x=" + os.path.join(work, "z4.npy"), "--input", "w=" + os.path.join(work, "w44.npy"),
            "--output", outs[0], "--output", outs[1]])
    ok = r.returncode == 0 and all(os.path.exists(o) for o in outs)
    result(ok and np.load(outs[0]).all() and np.load(outs[1]).all(), "chain.middle_evaluated_once", r.stderr.strip())
    r = sh([NESTC, "check", "--dump=ir", p])
    result(r.returncode == 0 and r.stdout.count("matmul") == 1, "chain.middle_one_node", r.stdout[-300:] + r.stderr)
    p = os.path.join(work, "chain4.nest")
    open(p, "w").write("export fn f(x: f32[T]) -> f32[T] where 1 <= T <= 4 {\n  return x\n}\n")
    r = sh([NESTC, "check", p])
    result(r.returncode == 1 and "run-time dimension 'T' takes too few values (1 to 4;" in r.stderr,
           "diagnostics.chained_bounds_both_taken", r.stderr.strip())

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
