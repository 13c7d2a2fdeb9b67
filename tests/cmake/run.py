#!/usr/bin/python3
"""The CMake package (issue 39, item 4): find_package(nestc) and nestc_add_model.

make install into a staging directory (DESTDIR), then tests/cmake/project (a C
program linking GPT-2 at a small size as a static archive and, in bf16, as a
shared library) configured and built with Debian's cmake, once with Ninja and
once with Unix Makefiles:

- the build compiles the three models (a static archive, a shared library in
  bf16, a static archive with the weights compiled in: EMBED_WEIGHTS) and links
  their programs, which run; the archives' print what the same program linked
  by hand with `nestc build -o DIR`'s objects prints;
- a second build does nothing; touching the .nest file reruns nestc and relinks
  (and recompiles no C file: the header, unchanged, keeps its time); touching
  the embedded weights rebuilds that model alone; an edit
  that changes the header recompiles the C file that includes it; an edit that
  breaks the model fails the build with nestc's diagnostic and leaves the last
  good library in place;
- nestc_add_model without MODEL, or with a model file that is not there, is a
  configure error that says so.

    /usr/bin/python3 tests/cmake/run.py NESTC_PATH
Prints ok/FAIL lines and `N passed, N failed`.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NESTC = os.path.abspath(sys.argv[1])
B = os.path.dirname(NESTC)
LINK_FLAGS = os.environ.get("NESTC_TEST_LDFLAGS", "").split()
CFG = "-D L=2 -D D=64 -D H=4 -D V=256 -D CTX=64 -D S=16".split()
passed = failed = 0


def result(ok, name, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok cmake." + name)
    else:
        failed += 1
        print("FAIL cmake." + name + (": " + str(detail)[-3000:] if detail else ""))


def run(args, cwd=None, env=None):
    r = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env)
    return r.returncode, r.stdout + r.stderr


def env():
    e = dict(os.environ)
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CMAKE_GENERATOR"):
        e.pop(k, None)
    if LINK_FLAGS:   # a runtime built with the sanitizers links with them
        flags = " ".join(LINK_FLAGS)
        e.update(CC="cc " + flags, LDFLAGS=flags)
    return e


def configure(src, bdir, gen, prefix, weights=""):
    return run(["cmake", "-S", src, "-B", bdir, "-G", gen, "-DCMAKE_PREFIX_PATH=" + prefix, "-DWEIGHTS=" + weights,
                "-DCMAKE_BUILD_TYPE=Release"] + (["-DCMAKE_EXE_LINKER_FLAGS=" + " ".join(LINK_FLAGS)]
                                                 if LINK_FLAGS else []), env=env())


def build(bdir):
    return run(["cmake", "--build", bdir], env=env())


def touch_later(path):
    """Touch path a second after the last build (later than every output it
    wrote, whatever the file system's time resolution; not in the future, or
    what the next build writes would be older than it)."""
    time.sleep(1.1)
    os.utime(path)


def generator(d, gen, tag, prefix, w, want):
    src = os.path.join(d, "src-" + tag)
    shutil.copytree(os.path.join(HERE, "project"), src)
    os.makedirs(os.path.join(src, "model"))
    model = os.path.join(src, "model", "gpt2.nest")
    shutil.copy(os.path.join(ROOT, "samples", "gpt2.nest"), model)
    bdir = os.path.join(d, "build-" + tag)
    code, out = configure(src, bdir, gen, prefix, w)
    if code != 0:
        result(False, tag + "_configure", out)
        return
    code, out = build(bdir)
    apps = [run([os.path.join(bdir, a), w]) for a in ("app", "app_so")] + [run([os.path.join(bdir, "app_emb")])]
    result(code == 0 and out.count("nestc: compiling") == 3 and apps[0] == (0, want) and apps[1][0] == 0 and
           apps[1][1].startswith("next ") and apps[2] == (0, want),
           "%s_build: the three models compiled, their programs linked; the archive's and the embedded "
           "weights' programs print what the program linked by hand prints" % tag,
           "%s\n%s\nwant %s" % (out, apps, want))
    code, out = build(bdir)
    result(code == 0 and "nestc: compiling" not in out and "Linking" not in out and "Building C" not in out,
           "%s_noop: a second build does nothing" % tag, out)
    touch_later(model)
    code, out = build(bdir)
    ok = code == 0 and out.count("nestc: compiling") == 3 and "Linking C executable app" in out and \
        "Building C object" not in out
    result(ok, "%s_touch: touching the model reruns nestc and relinks, and compiles no C file (the header kept "
           "its time)" % tag, out)
    # new weights to embed: only that model is compiled again
    touch_later(w)
    code, out = build(bdir)
    result(code == 0 and out.count("nestc: compiling") == 1 and "(gpt2emb)" in out and
           "Linking C executable app_emb" in out and "Linking C executable app\n" not in out + "\n",
           "%s_weights: touching the embedded weights rebuilds that model alone" % tag, out)
    # an edit that changes the header: the C file that includes it is compiled again
    with open(model, "a") as f:
        f.write("\nexport fn twice(x: f32[4]) -> f32[4] { return x * 2.0 }\n")
    touch_later(model)
    code, out = build(bdir)
    hdr = open(os.path.join(bdir, "gpt2.nestc", "gpt2.h")).read()
    result(code == 0 and "gpt2_twice" in hdr and "Building C object CMakeFiles/app.dir/app.c.o" in out and
           run([os.path.join(bdir, "app"), w]) == (0, want),
           "%s_edit: an edit that changes the header recompiles app.c; the program still runs" % tag, out)
    # a broken model: nestc's diagnostic, the build fails, the last library stays
    lib = os.path.join(bdir, "gpt2.nestc", "libgpt2.a")
    before = open(lib, "rb").read()
    with open(model, "a") as f:
        f.write("\nexport fn broken(x: f32[4]) -> f32[4] { return x * y }\n")
    touch_later(model)
    code, out = build(bdir)
    result(code != 0 and "gpt2.nest:" in out and "error:" in out and "'y'" in out and
           open(lib, "rb").read() == before,
           "%s_broken: a broken model fails the build with nestc's diagnostic; the last library stays" % tag, out)


def misuse(d, prefix):
    for name, call, msg in (
            ("no_model", "nestc_add_model(m DEFINES L=2)", "nestc_add_model(m): MODEL <file.nest> is required"),
            ("missing_model", "nestc_add_model(m MODEL nothere.nest)", "/nothere.nest does not exist"),
            ("unknown_arg", "nestc_add_model(m MODEL x.nest WEIGHT_FORMAT q8_0)",
             "nestc_add_model(m): unknown arguments WEIGHT_FORMAT;q8_0")):
        src = os.path.join(d, "bad-" + name)
        os.makedirs(src)
        open(os.path.join(src, "x.nest"), "w").write("export fn f(x: f32[4]) -> f32[4] { return x }\n")
        open(os.path.join(src, "CMakeLists.txt"), "w").write(
            "cmake_minimum_required(VERSION 3.20)\nproject(bad C)\nfind_package(nestc REQUIRED)\n%s\n" % call)
        code, out = configure(src, os.path.join(src, "b"), "Ninja", prefix)
        # CMake wraps its messages' lines
        result(code != 0 and msg in " ".join(out.split()), "misuse_%s: a configure error that says %r" % (name, msg), out)


def main():
    if not shutil.which("cmake"):
        result(False, "cmake", "cmake is not installed (scripts/deps.sh installs it)")
        return
    with tempfile.TemporaryDirectory() as d:
        dest, prefix = os.path.join(d, "dest"), "/opt/nestc-cmake"
        code, out = run(["make", "-s", "--no-print-directory", "-C", ROOT, "B=" + os.path.relpath(B, ROOT), "install",
                         "DESTDIR=" + dest, "PREFIX=" + prefix] +
                        (["LDFLAGS=" + " ".join(LINK_FLAGS)] if LINK_FLAGS else []), env=env())
        if code != 0:
            result(False, "install", out)
            return
        staged = dest + prefix
        w = os.path.join(d, "w.safetensors")
        code, out = run([NESTC, "weights", os.path.join(ROOT, "samples", "gpt2.nest")] + CFG +
                        ["--random-weights", "1", "-o", w])
        assert code == 0, out
        # the reference: app.c linked by hand with the objects of nestc build -o DIR
        ref = os.path.join(d, "ref")
        code, out = run([NESTC, "build", os.path.join(ROOT, "samples", "gpt2.nest"), "-o", ref] + CFG)
        assert code == 0, out
        objs = sorted(os.path.join(ref, f) for f in os.listdir(ref) if f.endswith(".o"))
        code, out = run(["cc", "-O2", "-I" + os.path.join(ROOT, "runtime"), "-I" + ref, "-o", os.path.join(d, "app"),
                         os.path.join(HERE, "project", "app.c")] + objs +
                        [os.path.join(B, "libnestrt.a"), "-lm", "-lpthread"] + LINK_FLAGS)
        assert code == 0, out
        code, want = run([os.path.join(d, "app"), w])
        assert code == 0 and want.startswith("next "), want
        for gen, tag in (("Ninja", "ninja"), ("Unix Makefiles", "make")):
            generator(d, gen, tag, staged, w, want)
        misuse(d, staged)


main()
print("%d passed, %d failed" % (passed, failed))
sys.exit(0 if failed == 0 else 1)
