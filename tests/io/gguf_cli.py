"""GGUF files through nestc and a compiled program (called by tests/cli/run.py in its
temporary directory): every tensor type's f32 values from `nestc run` and from a build
linked with libnestrt, read and mapped (NESTRT_MMAP=1), equal to the NumPy dequantization
of tests/io/gguf.py bit for bit; versions 2 and 3; --embed-weights; binding errors; and
every malformed field of a file rejected with exit 1 and its reason."""
import os
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import gguf  # noqa: E402
from gguf import ARRAY, F32, I32, STRING, U8, U32, U64, encode  # noqa: E402

CC = os.environ.get("CC", "cc")
LINK_FLAGS = os.environ.get("NESTC_TEST_LDFLAGS", "").split()


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def driver(model, names, shapes, embedded=False):
    """A C program for model MODEL.nest: open argv[1] (or the embedded weights), create
    the model, call forward(1.0), write OUTDIR/NAME.npy (argv[2]); on an error print it
    and exit 1."""
    outs = "".join(", o[%d]" % i for i in range(len(names)))
    sh = ", ".join("{%s}" % ", ".join(map(str, s)) for s in shapes)
    text = """#include "m.h"
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
	static const int64_t shapes[][2] = {%s};
	static const char *const names[] = {%s};
	enum { N = %d };
	nestrt_error err;
%s
	if (!mm) {
		fprintf(stderr, "%%s\\n", err.message);
		return 1;
	}
	float s = 1, *o[N];
	for (int i = 0; i < N; i++)
		o[i] = malloc((size_t)(shapes[i][0] * shapes[i][1]) * sizeof(float));
	if (m_forward(mm, &s%s) < 0) {
		fprintf(stderr, "forward failed\\n");
		return 1;
	}
	for (int i = 0; i < N; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%%s/%%s.npy", argv[2], names[i]);
		if (nestrt_npy_write(path, NESTRT_F32, 2, shapes[i], o[i], &err) < 0) {
			fprintf(stderr, "%%s\\n", err.message);
			return 1;
		}
		free(o[i]);
	}
	m_free(mm);
	return 0;
}
""" % (sh, ", ".join('"%s"' % n for n in names), len(names), OPEN_EMBEDDED if embedded else OPEN_FILE, outs)
    return text.replace('"m.h"', '"%s.h"' % model).replace("m *mm", model + " *mm").replace("m_", model + "_")


OPEN_FILE = """\tnestrt_weights *w = nestrt_weights_open(argv[1], &err);
	if (!w) {
		fprintf(stderr, "%s\\n", err.message);
		return 1;
	}
	m *mm = m_new(w, &err);
	nestrt_weights_close(w);"""
OPEN_EMBEDDED = "\tm *mm = m_new_embedded(&err);"


def run_tests(nestc, check):
    def run(*args, env=None):
        return subprocess.run([nestc] + list(args), capture_output=True, text=True, env=env)

    ts, want = gguf.tensors()
    names, text = gguf.model(want)
    with open("g.nest", "w") as f:
        f.write(text)
    np.save("one.npy", np.float32(1))
    for version in (3, 2):
        with open("g%d.gguf" % version, "wb") as f:
            f.write(encode(gguf.META, ts, version=version))

    # nestc run: the interpreter's params are the runtime reader's values
    for version, mmap in ((3, None), (2, None), (3, "1")):
        env = dict(os.environ)
        if mmap:
            env["NESTRT_MMAP"] = mmap
        outs = []
        for i in range(len(names)):
            outs += ["--output", "run%d.npy" % i]
        r = run("run", "g.nest", "--weights", "g%d.gguf" % version, "--input", "s=one.npy", *outs, env=env)
        what = "GGUF v%d%s" % (version, ", mapped" if mmap else "")
        if not r.returncode == 0:
            check("nestc run, %s" % what, False, r.stderr)
            continue
        bad = [n for i, n in enumerate(names) if not same_bits(np.load("run%d.npy" % i), want[n])]
        check("nestc run, %s: every type equals NumPy's dequantization" % what, not bad, bad)
        check("nestc run, %s: unused tensors of other dtypes are warnings" % what,
              "tensor 'w_i32' is not a parameter" in r.stderr, r.stderr)

    # a compiled model linked with libnestrt reads the file at run time
    lib = os.path.join(os.path.dirname(nestc), "libnestrt.a")
    r = run("build", "g.nest", "-o", "gout", "--no-cache")
    ok = r.returncode == 0
    if ok:
        with open("gdrv.c", "w") as f:
            f.write(driver("g", names, [want[n].shape for n in names]))
        c = subprocess.run([CC, "-O1", "-I" + os.path.join(ROOT, "runtime"), "-Igout", "-o", "gdrv", "gdrv.c"]
                           + sorted(os.path.join("gout", x) for x in os.listdir("gout") if x.endswith(".o"))
                           + [lib, "-lm", "-lpthread"] + LINK_FLAGS, capture_output=True, text=True)
        ok = c.returncode == 0
        r = c
    check("compiled GGUF driver builds", ok, r.stderr)
    if ok:
        for version, mmap in ((3, None), (3, "1"), (2, "1")):
            env = dict(os.environ)
            if mmap:
                env["NESTRT_MMAP"] = mmap
            os.makedirs("gres", exist_ok=True)
            r = subprocess.run(["./gdrv", "g%d.gguf" % version, "gres"], capture_output=True, text=True, env=env)
            what = "GGUF v%d, %s" % (version, "mapped" if mmap else "read")
            bad = names if r.returncode else [n for n in names
                                             if not same_bits(np.load("gres/%s.npy" % n), want[n])]
            check("compiled, %s: every type equals NumPy's dequantization" % what, not bad, "%s %s" % (bad, r.stderr))

    # --embed-weights from a GGUF file
    r = run("build", "g.nest", "-o", "gemb", "--no-cache", "--embed-weights", "g3.gguf")
    ok = r.returncode == 0
    if ok:
        drv = driver("g", names, [want[n].shape for n in names], embedded=True)
        with open("gemb.c", "w") as f:
            f.write(drv)
        c = subprocess.run([CC, "-O1", "-I" + os.path.join(ROOT, "runtime"), "-Igemb", "-o", "gembd", "gemb.c"]
                           + sorted(os.path.join("gemb", x) for x in os.listdir("gemb") if x.endswith(".o"))
                           + [lib, "-lm", "-lpthread"] + LINK_FLAGS, capture_output=True, text=True)
        os.makedirs("geres", exist_ok=True)
        r = subprocess.run(["./gembd", "-", "geres"], capture_output=True, text=True) if c.returncode == 0 else c
        ok = r.returncode == 0 and all(same_bits(np.load("geres/%s.npy" % n), want[n]) for n in names)
    check("--embed-weights of a GGUF file: every type's values", ok, r.stderr)

    # binding: missing params and shapes name the file's type
    q = gguf.quantize_q4_0(np.arange(64, dtype=np.float32))
    with open("small.gguf", "wb") as f:
        f.write(encode([], [{"name": "w", "ne": [32, 2], "type": "q4_0", "data": q}]))
    with open("shape.nest", "w") as f:
        f.write("param w: f32[32, 2]\nparam v: f32[3]\nexport fn forward(s: f32) -> f32[32, 2] {\n  return w * s\n}\n")
    r = run("run", "shape.nest", "--weights", "small.gguf", "--input", "s=one.npy")
    check("GGUF binding: shape mismatch and missing param", r.returncode == 1 and
          "small.gguf: w: expected f32[32, 2], file has q4_0[2, 32]" in r.stderr and
          "small.gguf: missing parameter 'v' (f32[3])" in r.stderr, r.stderr)
    if lib and os.path.exists("gdrv"):
        r = subprocess.run(["./gdrv", "small.gguf", "gres"], capture_output=True, text=True)
        check("compiled binding names the file's type", r.returncode == 1 and
              "small.gguf: missing parameter" in r.stderr, r.stderr)
    with open("shape2.nest", "w") as f:
        f.write("param w: f32[32, 2]\nexport fn forward(s: f32) -> f32[32, 2] {\n  return w * s\n}\n")
    r = run("build", "shape2.nest", "-o", "s2out", "--no-cache")
    if r.returncode == 0:
        with open("s2.c", "w") as f:
            f.write(driver("shape2", ["w"], [(32, 2)]))
        c = subprocess.run([CC, "-O1", "-I" + os.path.join(ROOT, "runtime"), "-Is2out", "-o", "s2drv", "s2.c"]
                           + sorted(os.path.join("s2out", x) for x in os.listdir("s2out") if x.endswith(".o"))
                           + [lib, "-lm", "-lpthread"] + LINK_FLAGS, capture_output=True, text=True)
        r = subprocess.run(["./s2drv", "small.gguf", "."], capture_output=True, text=True) if c.returncode == 0 else c
    check("compiled: a q4_0 tensor of another shape", r.returncode == 1 and
          r.stderr.strip() == "small.gguf: w: expected f32[32, 2], file has q4_0[2, 32]", r.stderr)

    malformed(run, check)


def malformed(run, check):
    """Every field a GGUF reader checks, broken once: exit 1 and the reason."""
    q = gguf.quantize_q4_0(np.linspace(-1, 1, 64, dtype=np.float32))  # [2, 32] in 36 bytes
    w = {"name": "w", "ne": [32, 2], "type": "q4_0", "data": q}
    kv = [("general.architecture", STRING, "x")]
    with open("one.nest", "w") as f:
        f.write("param w: f32[2, 32]\nexport fn forward(s: f32) -> f32[2, 32] {\n  return w * s\n}\n")

    def bad(what, data, want):
        with open("bad.gguf", "wb") as f:
            f.write(data)
        r = run("run", "one.nest", "--weights", "bad.gguf", "--input", "s=one.npy")
        line = "nestc: error: bad.gguf: " + want
        check("malformed GGUF: " + what, r.returncode == 1 and line in r.stderr and
              len(r.stderr.strip().split("\n")) <= 2, "%d %r" % (r.returncode, r.stderr))

    good = encode(kv, [w])
    r = (open("good.gguf", "wb").write(good), run("run", "one.nest", "--weights", "good.gguf", "--input", "s=one.npy"))[1]
    check("malformed GGUF: the good file opens", r.returncode == 0, r.stderr)

    def key(k, t, raw):
        return (k, t, None, raw)

    bad("truncated header", good[:10], "the file is truncated (8 bytes needed at offset 8, the file has 10)")
    bad("truncated in a tensor info", good[:good.index(struct.pack("<Q", 1) + b"w") + 15],
        "tensor 0 'w': the file is truncated")
    bad("version 1", encode(kv, [w], version=1), "GGUF version 1 is not supported (2 and 3 are)")
    bad("version 4", encode(kv, [w], version=4), "GGUF version 4 is not supported (2 and 3 are)")
    bad("big-endian", encode(kv, [w], version=3 << 24), "GGUF version 50331648 is not supported (2 and 3 are; a big-endian file?)")
    bad("n_tensors", encode(kv, [w], n_tensors=10 ** 12), "n_tensors 1000000000000 needs at least 24000000000000 "
        "bytes of tensor infos, the file has")
    bad("n_kv", encode(kv, [w], n_kv=2 ** 63), "n_kv 9223372036854775808 needs at least")
    bad("key length", encode([("abc", U8, 1)], [w]).replace(struct.pack("<Q", 3) + b"abc",
                                                             struct.pack("<Q", 2 ** 40) + b"abc"),
        "key 0: key length 1099511627776 passes the end of the file")
    bad("empty key", encode([("", U8, 1)], [w]), "key 0 '': the key is empty")
    bad("NUL in a key", encode([("a\0b", U8, 1)], [w]), "key 0: key 'a?b' contains a NUL character")
    bad("duplicate key", encode([("a", U8, 1), ("b", U8, 1), ("a", U32, 2)], [w]), "duplicate key 'a'")
    bad("unknown value type", encode([key("a", 13, b"\0" * 8)], [w]), "key 0 'a': unknown value type 13")
    bad("string length", encode([key("a", STRING, struct.pack("<Q", 2 ** 64 - 1))], [w]),
        "key 0 'a': string length 18446744073709551615 passes the end of the file")
    bad("array of an unknown type", encode([key("a", ARRAY, struct.pack("<IQ", 99, 1))], [w]),
        "key 0 'a': array of unknown value type 99")
    bad("array length x element size", encode([key("a", ARRAY, struct.pack("<IQ", U64, 2 ** 62))], [w]),
        "key 0 'a': array of 4611686018427387904 u64 needs at least 8 bytes per element")
    bad("array of strings length", encode([key("a", ARRAY, struct.pack("<IQ", STRING, 2 ** 61))], [w]),
        "key 0 'a': array of 2305843009213693952 string needs at least 8 bytes per element")
    bad("string in an array", encode([key("a", ARRAY, struct.pack("<IQQ", STRING, 1, 1000))], [w]),
        "key 0 'a': string length 1000 passes the end of the file")
    nested = struct.pack("<IQ", ARRAY, 1) * 65 + struct.pack("<IQ", U8, 0)
    bad("arrays nested too deep", encode([key("a", ARRAY, nested)], [w]), "key 0 'a': arrays nested more than 64 deep")
    bad("alignment type", encode([("general.alignment", I32, 32)], [w]),
        "general.alignment is of type i32, not u32")
    bad("alignment not a power of two", encode([("general.alignment", U32, 24)], [w], alignment=24),
        "general.alignment 24 is not a power of two")
    bad("alignment 0", encode([("general.alignment", U32, 0)], [w]), "general.alignment 0 is not a power of two")
    bad("tensor name length", encode(kv, [dict(w, name="xxxxx")]).replace(struct.pack("<Q", 5) + b"xxxxx",
                                                                            struct.pack("<Q", 2 ** 50) + b"xxxxx"),
        "tensor 0: name length 1125899906842624 passes the end of the file")
    bad("duplicate tensor name", encode(kv, [w, w]), "duplicate tensor name 'w'")
    bad("too many dims", encode(kv, [dict(w, ne=[32] + [1] * 8)]),
        "tensor 0 'w': 9 dimensions, more than the 8 nestc takes")
    bad("negative dim", encode(kv, [dict(w, ne=[32, -2])]), "tensor 0 'w': ne[1] = -2 is negative")
    bad("dims overflow", encode(kv, [dict(w, ne=[2 ** 32, 2 ** 32, 0])]),
        "tensor 0 'w': ne [4294967296, 4294967296, 0] has more elements than fit in 64 bits")
    bad("size overflow", encode(kv, [dict(w, type="f32", ne=[2 ** 62])]),
        "tensor 0 'w': ne [4611686018427387904] of f32 is too large")
    bad("unknown tensor type", encode(kv, [dict(w, type=99)]), "tensor 0 'w': unknown type 99")
    bad("unsupported tensor type", encode(kv, [dict(w, type=10)]), "tensor 0 'w': type 10 (q2_K) is not supported")
    bad("row not a multiple of the block", encode(kv, [dict(w, ne=[48, 2], data=q[:27])]),
        "tensor 0 'w': ne[0] = 48 is not a multiple of q4_0's block of 32 elements")
    bad("k-quant row", encode(kv, [dict(w, type="q4_K", ne=[128, 2])]),
        "tensor 0 'w': ne[0] = 128 is not a multiple of q4_K's block of 256 elements")
    bad("offset not aligned", encode(kv, [dict(w, offset=4)]), "tensor 0 'w': offset 4 is not a multiple of the "
        "alignment 32")
    bad("data truncated", good[:-10], "tensor 0 'w': offset 0 + 36 bytes passes the end of the data (26 bytes)")
    bad("offset past the end", encode(kv, [dict(w, offset=2 ** 63)]),
        "tensor 0 'w': offset 9223372036854775808 + 36 bytes passes the end of the data")
    bad("overlapping tensors", encode(kv, [w, dict(w, name="v", offset=32, data=q + q)]),
        "tensor 'w' overlaps tensor 'v'")
    bad("truncated in the metadata", encode([("a", U64, 5), ("b", U64, 6)], [])[:61],
        "key 1 'b': the file is truncated (8 bytes needed at offset 58, the file has 61)")
