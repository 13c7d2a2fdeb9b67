#!/usr/bin/env python3
"""Compile time beyond one process: -j, the persistent cache, depfiles, nestc plan,
--only-variant, --embed-weights. Run: run.py NESTC (needs cc, make, ninja)."""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NESTC = os.path.abspath(sys.argv[1])
# the inner makes count the commands they echo: `make -s check` (or -j2, or a
# MAKEFLAGS of the caller's) must not reach them through the environment
MAKE_ENV = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEFILES",
                                                             "MAKEOVERRIDES", "GNUMAKEFLAGS")}
LIB = os.path.join(os.path.dirname(NESTC), "libnestrt.a")
RESNET = ["-D", "IMG=32", "-D", "C0=8", "-D", "CLASSES=10"]
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok " + name)
    else:
        failed += 1
        print("FAIL %s: %s" % (name, detail))


def nestc(*args, env=None):
    return subprocess.run([NESTC] + list(args), capture_output=True, text=True, env=env)


def objects(d):
    return {os.path.basename(f): open(f, "rb").read() for f in sorted(glob.glob(os.path.join(d, "*.o")))}


def report(r):
    return json.loads(r.stdout)


def main():
    t = tempfile.mkdtemp()
    try:
        os.chdir(t)
        model = os.path.join(ROOT, "samples", "resnet.nest")
        # -j1 and -j2 give the same bytes
        a = nestc("build", model, *RESNET, "-o", "j1", "-j1", "--no-cache")
        b = nestc("build", model, *RESNET, "-o", "j2", "-j2", "--no-cache")
        oa, ob = objects("j1"), objects("j2")
        check("-j1 and -j2: same objects, byte for byte", a.returncode == 0 and b.returncode == 0 and oa == ob
              and len(oa) >= 6, a.stderr + b.stderr)

        # cold, then warm: nothing compiled
        cache = os.path.join(t, "cache")
        r = nestc("build", model, *RESNET, "-o", "c1", "--cache-dir", cache, "--report=json")
        cold = report(r)
        check("cold build compiles every variant", r.returncode == 0 and
              not any(v["cached"] for v in cold["variants"]), r.stderr)
        r = nestc("build", model, *RESNET, "-o", "c2", "--cache-dir", cache, "--report=json")
        warm = report(r)
        check("warm rebuild compiles nothing", r.returncode == 0 and all(v["cached"] for v in warm["variants"]),
              r.stdout[:500])
        check("cached objects are the same bytes", objects("c1") == objects("c2") == oa)
        r = nestc("build", model, *RESNET, "-o", "c3", "--cache-dir", cache, "--report")
        check("text report says 'taken from the cache'", "taken from the cache" in r.stdout, r.stdout[:400])

        # edit one region: only its variants (and callers and the model object) recompile
        src = open(model).read()
        edited = os.path.join(t, "resnet.nest")
        marker = "fn down_block("
        i = src.index(marker)
        body_start = src.index("{", i) + 1
        # a change to the downsampling block only: add zero to its result
        ret = src.index("return", body_start)
        end = src.index("\n", ret)
        line = src[ret:end]
        new_src = src[:ret] + line + " + 0.0" + src[end:]
        open(edited, "w").write(new_src)
        r = nestc("build", edited, *RESNET, "-o", "c4", "--cache-dir", cache, "--report=json")
        rep = report(r) if r.returncode == 0 else {"variants": []}
        fresh = sorted(v["name"] for v in rep["variants"] if not v["cached"])
        check("editing down_block recompiles only its variants", r.returncode == 0 and fresh and
              all(n.startswith("down_block.") for n in fresh) and
              len(fresh) == len([v for v in rep["variants"] if v["region"] == "down_block"]),
              "recompiled: %s %s" % (fresh, r.stderr))

        # a corrupted entry is detected and rebuilt (a cache of this build alone)
        cache = os.path.join(t, "cache-corrupt")
        nestc("build", model, *RESNET, "-o", "c5", "--cache-dir", cache)
        entries = sorted(glob.glob(os.path.join(cache, "*", "*.o")))
        victim = entries[0]
        data = bytearray(open(victim, "rb").read())
        data[len(data) // 2] ^= 0xFF
        open(victim, "wb").write(bytes(data))
        r = nestc("build", model, *RESNET, "-o", "c5", "--cache-dir", cache, "--report=json")
        rep = report(r)
        check("a corrupted entry is rebuilt", r.returncode == 0 and objects("c5") == oa and
              sum(1 for v in rep["variants"] if not v["cached"]) <= 1 and open(victim, "rb").read() != bytes(data),
              r.stderr)

        # SIGKILL halfway: the next build succeeds, the cache holds no partial entry
        big = os.path.join(ROOT, "samples", "gpt2.nest")
        kcache = os.path.join(t, "kcache")
        p = subprocess.Popen([NESTC, "build", big, "-D", "L=12", "--no-regions", "-o", "k", "--cache-dir", kcache],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        p.send_signal(signal.SIGKILL)
        p.wait()
        r = nestc("build", big, "-D", "L=2", "-D", "D=64", "-D", "H=4", "-D", "V=256", "-D", "CTX=64", "-D", "S=16",
                  "-o", "k", "--cache-dir", kcache)
        partial = [f for f in glob.glob(os.path.join(kcache, "**", "*"), recursive=True)
                   if os.path.isfile(f) and not f.endswith(".o")]
        good = True
        for f in glob.glob(os.path.join(kcache, "*", "*.o")):
            d = open(f, "rb").read()
            good &= d.startswith(b"NESTC-CACHE-2\n")
        check("after SIGKILL: next build succeeds, no partial cache entry", r.returncode == 0 and good,
              "%s %s" % (r.stderr, partial))
        st = nestc("cache", "stats", "--cache-dir", kcache)
        check("nestc cache stats", st.returncode == 0 and "entries" in st.stdout, st.stdout + st.stderr)
        cl = nestc("cache", "clear", "--cache-dir", kcache)
        check("nestc cache clear", cl.returncode == 0 and not glob.glob(os.path.join(kcache, "*", "*.o")), cl.stdout)

        # a rebuild with fewer variants removes the objects of the old ones
        open("two.nest", "w").write("@region\nfn f(x: f32[T]) -> f32[T] { return x * 2.0 }\n"
                                    "export fn g(a: f32[4], b: f32[8]) -> (f32[4], f32[8]) { return f(a), f(b) }\n")
        r1 = nestc("build", "two.nest", "-o", "two", "--no-cache")
        had = sorted(os.listdir("two"))
        open("two.nest", "w").write("@region\nfn f(x: f32[T]) -> f32[T] { return x * 2.0 }\n"
                                    "export fn g(a: f32[4], b: f32[4]) -> (f32[4], f32[4]) { return f(a), f(b) }\n")
        open("two/two.helper.o", "w").write("not ours")
        r2 = nestc("build", "two.nest", "-o", "two", "--no-cache")
        check("a rebuild removes stale variant objects and nothing else",
              r1.returncode == 0 and r2.returncode == 0 and "two.f.1.o" in had and
              sorted(os.listdir("two")) == ["two.api.json", "two.f.0.o", "two.h", "two.helper.o", "two.o"], os.listdir("two"))

        # -MD: make reads the depfile
        r = nestc("build", model, *RESNET, "-o", "dep", "--no-cache", "-MD")
        d = open(os.path.join("dep", "resnet.d")).read() if r.returncode == 0 else ""
        check("-MD writes a depfile naming the model", model in d and d.split(":")[0].endswith("resnet.o"), d + r.stderr)
        with open("Makefile.t", "w") as f:
            f.write("dep/resnet.o:\n\t@echo rebuilt\ninclude dep/resnet.d\n")
        os.utime(model, None)
        time.sleep(0.01)
        mk = subprocess.run(["make", "-f", "Makefile.t", "-q", "dep/resnet.o"], capture_output=True, text=True,
                            env=MAKE_ENV)
        check("make sees the model as a prerequisite (out of date after touching it)", mk.returncode == 1,
              mk.stdout + mk.stderr)
        m = nestc("build", model, *RESNET, "-o", "dep", "-M")
        check("-M prints the depfile", m.returncode == 0 and m.stdout.startswith("dep/resnet.o:"), m.stdout + m.stderr)

        # nestc plan: ninja builds every object through --only-variant, and records deps
        pl = nestc("plan", model, *RESNET, "-o", "ninjaout")
        open("build.ninja", "w").write(pl.stdout)
        nj = subprocess.run(["ninja", "-j2"], capture_output=True, text=True,
                            env=dict(os.environ, XDG_CACHE_HOME=os.path.join(t, "xdg")))
        check("nestc plan + ninja builds the same objects", pl.returncode == 0 and nj.returncode == 0 and
              objects("ninjaout") == oa and os.path.exists("ninjaout/resnet.h"), pl.stderr + nj.stdout + nj.stderr)
        deps = subprocess.run(["ninja", "-t", "deps"], capture_output=True, text=True)
        check("ninja -t deps reads nestc's depfiles", model in deps.stdout, deps.stdout[:300] + deps.stderr)
        again = subprocess.run(["ninja"], capture_output=True, text=True)
        check("ninja: nothing to do after a build", "no work to do" in again.stdout, again.stdout)
        bad = nestc("build", model, *RESNET, "-o", "x", "--only-variant", "nope.3")
        check("--only-variant of an unknown variant", bad.returncode == 1 and "no such variant" in bad.stderr,
              bad.stderr)

        # --embed-weights: a program that needs no file at run time
        mlp = os.path.join(ROOT, "samples", "mlp.nest")
        cfg = ["-D", "B=4", "-D", "D_IN=32", "-D", "D=64", "-D", "D_OUT=10", "-D", "L=2"]
        nestc("weights", mlp, *cfg, "--random-weights", "5", "-o", "mlp.safetensors")
        r = nestc("build", mlp, *cfg, "-o", "emb", "--embed-weights", "mlp.safetensors", "--no-cache")
        x = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
        np.save("x.npy", x)
        with open("emb.c", "w") as f:
            f.write('#include <stdio.h>\n#include "mlp.h"\nint main(void) {\n nestrt_error err;\n'
                    ' mlp *m = mlp_new_embedded(&err);\n if (!m) { fprintf(stderr, "%s\\n", err.message); return 1; }\n'
                    ' int dt, rank; int64_t shape[8]; void *x;\n'
                    ' if (nestrt_npy_read("x.npy", &dt, &rank, shape, &x, &err)) return 1;\n'
                    ' static float out[MLP_FORWARD_OUT_NUMEL];\n if (mlp_forward(m, x, out)) return 1;\n'
                    ' int64_t os[2] = {4, 10};\n return nestrt_npy_write("y.npy", NESTRT_F32, 2, os, out, &err) ? 1 : 0;\n}\n')
        cc = subprocess.run(["cc", "-O1", "-I" + os.path.join(ROOT, "runtime"), "-Iemb", "emb.c"] +
                            sorted(glob.glob("emb/*.o")) + [LIB, "-lm", "-lpthread", "-o", "emb.bin"] +
                            os.environ.get("NESTC_TEST_LDFLAGS", "").split(),
                            capture_output=True, text=True)
        os.rename("mlp.safetensors", "moved.safetensors")
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"  # the program exits without freeing
        run = subprocess.run(["./emb.bin"], capture_output=True, text=True, env=env) if cc.returncode == 0 else cc
        ref = nestc("run", mlp, *cfg, "--weights", "moved.safetensors", "--input", "x=x.npy", "--output", "ref.npy")
        ok = r.returncode == 0 and run.returncode == 0 and ref.returncode == 0
        err = np.abs(np.load("y.npy") - np.load("ref.npy")).max() if ok else None
        check("--embed-weights: runs with no weights file, right values",
              ok and os.path.exists("emb/mlp.weights.o") and err <= 1e-4 * np.abs(np.load("ref.npy")).max(),
              r.stderr + cc.stderr + run.stderr + ref.stderr)
        r = nestc("build", mlp, "-o", "emb2", "--embed-weights", "moved.safetensors", "--no-cache")
        check("--embed-weights checks the params at compile time", r.returncode == 1 and "moved.safetensors" in r.stderr
              and not os.path.exists("emb2"), r.stderr)
        # samples/Makefile.example: one build per object, nothing more, and nothing when
        # nothing changed (make's built-in rules must not try to remake the .d files)
        os.makedirs("mk")
        shutil.copy(os.path.join(ROOT, "samples", "Makefile.example"), "mk/Makefile")
        shutil.copy(os.path.join(ROOT, "samples", "gpt2.nest"), "mk/gpt2.nest")
        rep = nestc("report", "mk/gpt2.nest", "-D", "L=2", "-D", "D=64", "-D", "H=4", "-D", "V=256", "-D", "CTX=64",
                    "-D", "S=16", "--format=json")
        objs = ["out/gpt2.o"] + ["out/" + v["object"] for v in json.loads(rep.stdout)["variants"]]
        mk = lambda: subprocess.run(["make", "-C", "mk", "NESTC=" + NESTC] + objs, capture_output=True, text=True,
                                    env=MAKE_ENV)
        m1 = mk()
        m2 = mk()
        os.utime("mk/gpt2.nest", (time.time() + 2, time.time() + 2))
        m3 = mk()
        builds = lambda m: m.stdout.count(NESTC + " build")
        check("Makefile.example: one build per object, none when up to date, all again after the model changes",
              m1.returncode == 0 and builds(m1) == len(objs) and builds(m2) == 0 and m3.returncode == 0 and
              builds(m3) == len(objs) and "no such variant" not in m1.stderr + m3.stderr,
              "%d objects; builds %d, %d, %d: %s" % (len(objs), builds(m1), builds(m2), builds(m3),
                                                      (m1.stdout + m1.stderr + m3.stdout + m3.stderr)[-600:]))
    finally:
        os.chdir("/")
        shutil.rmtree(t, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
