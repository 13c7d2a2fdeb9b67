#!/usr/bin/env python3
"""No input crashes nestc.

1. Every .nest model under tests/ and samples/ is cut at many points and has
   bytes flipped; `nestc check` must exit 0 or 1, never die by a signal or
   report a sanitizer error.
2. The malformed .safetensors and .npy corpus (tests/io/make_corpus.py) is fed
   to `nestc run`: each must be rejected (exit 1) naming the file, and no output
   file may appear.
3. Every .onnx file of tests/fuzz/corpus/onnx/ (the seeds of fuzz_onnx and the
   inputs it found crashing the importer, crash-*.onnx, or exhausting memory,
   oom-*.onnx) goes through `nestc check`: exit 0 or 1, no sanitizer report;
   those of ONNX_EXPECT exit 1 with their message.
Run: run.py NESTC
"""
import glob
import os
import random
import resource
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
passed = failed = 0


def verdict(ok, name, why=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL %s: %s" % (name, why))


def bad_run(r):
    """A crash, a sanitizer report, or an exit status other than 0 and 1."""
    if r.returncode not in (0, 1):
        return "exit status %d" % r.returncode
    if "Sanitizer" in r.stderr or "runtime error:" in r.stderr:
        return "sanitizer report:\n" + r.stderr[-2000:]
    return None


def fuzz_models(nestc, tmp):
    rng = random.Random(1234)
    files = sorted(glob.glob(os.path.join(ROOT, "samples", "*.nest")) +
                   glob.glob(os.path.join(ROOT, "tests", "**", "*.nest"), recursive=True))
    path = os.path.join(tmp, "cut.nest")
    budget = int(os.environ.get("NEST_FUZZ_CASES", "1500"))
    per_file = max(8, budget // max(1, len(files)))
    for f in files:
        data = open(f, "rb").read()
        cases = []
        n = len(data)
        for k in range(per_file // 2):
            cases.append(data[: (n * k) // (per_file // 2)])
        for k in range(per_file - per_file // 2):
            b = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                if not b:
                    break
                i = rng.randrange(len(b))
                op = rng.randrange(3)
                if op == 0:
                    b[i] = rng.choice(b"(){}[],:;=@.+-*/\n\"#0123456789abcdefxyz \x00\xff")
                elif op == 1:
                    del b[i]
                else:
                    b[i:i] = bytes([rng.randrange(256)])
            cases.append(bytes(b))
        worst = None
        for c in cases:
            with open(path, "wb") as out:
                out.write(c)
            r = subprocess.run([nestc, "check", path], capture_output=True, text=True, errors="replace")
            why = bad_run(r)
            if why:
                keep = os.path.join(tmp, "..", "nestc-fuzz-crash.nest")
                worst = "%s (input kept in %s)" % (why, os.path.abspath(keep))
                with open(keep, "wb") as out:
                    out.write(c)
                break
        verdict(worst is None, "mutations of " + os.path.relpath(f, ROOT), worst or "")


MODEL = """
param w: f32[2, 3]
param b: { bias: f32[3] }
export fn f(x: f32[4, 2]) -> f32[4, 3] {
  return x @ w + b.bias
}
"""


def corpus(nestc, tmp):
    cdir = os.path.join(tmp, "corpus")
    os.mkdir(cdir)
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "io", "make_corpus.py"), cdir], check=True)
    model = os.path.join(tmp, "m.nest")
    with open(model, "w") as f:
        f.write(MODEL)
    good_x = os.path.join(tmp, "x.npy")
    import struct
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }"
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    with open(good_x, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<8f", *range(8)))
    out = os.path.join(tmp, "out.npy")
    for name in sorted(os.listdir(cdir)):
        p = os.path.join(cdir, name)
        if name.endswith(".safetensors"):
            cmd = [nestc, "run", model, "--weights", p, "--input", "x=" + good_x, "--output", out]
        elif name.endswith(".npy"):
            cmd = [nestc, "run", model, "--random-weights", "1", "--input", "x=" + p, "--output", out]
        else:
            continue
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        why = bad_run(r)
        if not why and name.startswith("bad-"):
            if r.returncode != 1:
                why = "malformed file accepted (exit 0)"
            elif p not in r.stderr:
                why = "the message does not name the file: " + r.stderr
            elif os.path.exists(out):
                why = "an output file was written"
        if os.path.exists(out):
            os.unlink(out)
        verdict(why is None, "corpus " + name, why or "")


def extremes(nestc, tmp):
    """Hand-made extreme inputs (issue #14): 100,000-term chains of every kind,
    counts and sizes past 64 bits. Each compiles or is refused: exit 0 or 1."""
    n = 100000
    hdr = "export fn forward(x: f32[4]) -> f32[4] {\n  return "
    fns = "".join("fn g%d(x: f32[4]) -> f32[4] {\n  return g%d(x)\n}\n" % (i, i + 1) for i in range(n))
    cases = {
        "sum": hdr + " + ".join(["x"] * n) + "\n}\n",
        "products of matmuls": hdr + " @ ".join(["x"] * n) + "\n}\n",
        "parens": hdr + "(" * n + "x" + ")" * n + "\n}\n",
        "lists": hdr + "x + len(" + "[" * n + "1" + "]" * n + ")\n}\n",
        "records": hdr + "{a: " * n + "x" + "}" * n + "\n}\n",
        "negations": hdr + "-" * n + "x\n}\n",
        "nots": hdr + "!" * n + "x\n}\n",
        "slices": hdr + "x" + "[0:4]" * n + "\n}\n",
        "fields": hdr + "x" + ".a" * n + "\n}\n",
        "calls": hdr + "relu(" * n + "x" + ")" * n + "\n}\n",
        "const": "const C = " + " * ".join(["1"] * n) + "\n" + hdr + "x * C\n}\n",
        "consts": "".join("const C%d = C%d + 1\n" % (i, i + 1) for i in range(n)) + "const C%d = 0\n" % n +
                  hdr + "x * C0\n}\n",
        "functions": fns + "fn g%d(x: f32[4]) -> f32[4] {\n  return x\n}\n" % n + hdr + "g0(x)\n}\n",
        "for loops": "export fn forward(x: f32[4]) -> f32[4] {\n" + "for i in 0..1 {\n" * n + "}\n" * n + "return x\n}\n",
        "record types": "param p: " + "{a: " * n + "f32[2]" + "}" * n + "\n" + hdr + "x\n}\n",
        "statements": "export fn forward(x: f32[4]) -> f32[4] {\n" + "  x = x + x\n" * n + "  return x\n}\n",
        "elements": "export fn forward(x: f32[4294967296, 4294967296]) -> f32[4] {\n  return x\n}\n",
        "bytes": "export fn forward(x: f32[4611686018427387904]) -> f32[4] {\n  return x\n}\n",
        "dims": hdr + "reshape(x, [9223372036854775807, 9223372036854775807, 0])\n}\n",
        # found by make fuzz: a negative dimension (reported) made the program's
        # byte count overflow in mk_node (UBSan)
        "negative dims": "const D = -4\nparam w: f32[D, D]\n@region\nfn block(x: f32[T, D]) -> f32[T, D] {\n"
                         "  return x + relu(x @ w)\n}\nexport fn forward(x: f32[8, D]) -> f32[8, D] {\n"
                         "  return block(x)\n}\n",
        # found by make fuzz FUZZ_SECONDS=600: the type of a param that is an array of
        # length 0 (it has no element) in a message crashed ptree_str
        "empty param array in a message": "type B = { w: f32[2] }\nparam p: B[0]\n"
                                          "export fn forward(x: f32[4]) -> f32[4] {\n  return x + relu(p)\n}\n",
        # found by make fuzz FUZZ_SECONDS=600: split() with its axis named and no parts read
        # a missing second argument
        "split without parts": "export fn forward(x: f32[4]) -> f32[4] {\n  let a, b = split(x, axis=-1)\n"
                               "  return a\n}\n",
    }
    path = os.path.join(tmp, "extreme.nest")
    for name, text in cases.items():
        with open(path, "w") as f:
            f.write(text)
        r = subprocess.run([nestc, "check", path], capture_output=True, text=True, errors="replace")
        why = bad_run(r)
        verdict(why is None, "extreme: " + name, why or "")


# Inputs found by fuzz_onnx whose rejection is known: the message it must give.
ONNX_EXPECT = {
    # make fuzz FUZZ_SECONDS=600: an initializer declaring 2^31 elements with 288
    # bytes of data made a dry pass allocate 17 GB before its data was checked
    "oom-declared-shape.onnx": "tensor '0' has 288 bytes of data, not the 8572886992 its shape needs",
}


def limit_memory():
    """4 GiB of address space: an input-sized allocation fails instead of being
    given untouched pages (not under a sanitizer, whose shadow memory needs more)."""
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def onnx_files(nestc, tmp):
    sanitized = "sanitize" in os.environ.get("NESTC_TEST_LDFLAGS", "")
    for f in sorted(glob.glob(os.path.join(HERE, "corpus", "onnx", "*.onnx"))):
        want = ONNX_EXPECT.get(os.path.basename(f))
        r = subprocess.run([nestc, "check", f], capture_output=True, text=True, errors="replace",
                           preexec_fn=limit_memory if want and not sanitized else None)
        why = bad_run(r)
        if why is None and want and (r.returncode != 1 or want not in r.stderr):
            why = "expected exit 1 and %r, got exit %d: %s" % (want, r.returncode, r.stderr.strip()[-300:])
        verdict(why is None, "onnx " + os.path.basename(f), why or "")


def main():
    nestc = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        fuzz_models(nestc, tmp)
        corpus(nestc, tmp)
        extremes(nestc, tmp)
        onnx_files(nestc, tmp)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
