#!/usr/bin/python3
"""Compiled-code tests for `nestc build`: every model is compiled to objects, linked into a
small generated C program with libnestrt, run, and compared with the reference
interpreter (`nestc run`) on the same weights and inputs.

    /usr/bin/python3 tests/compiled/run.py NESTC_PATH [-k SUBSTRING]... [-j N] [--keep]

For each case: `nestc build FILE -o DIR ...` writes DIR/NAME.h, DIR/NAME.o and one
DIR/NAME.REGION.K.o per unique region variant. The entry's signature is read from the
generated header (the comment above the prototype gives dtypes and shapes, the prototype
the C types and argument order). A C driver is generated that opens the weights
(nestrt_weights_open), creates the model (NAME_new), reads the inputs with
nestrt_npy_read, fills the outputs with a sentinel byte, calls the entry and writes the
outputs with nestrt_npy_write; on failure it prints nestrt_model_error and exits 1 (and
says so if the failed call wrote into an output). It is compiled with
`cc -O1 -Iruntime -IDIR driver.c DIR/*.o build/libnestrt.a -lm -lpthread`.

Comparison with the interpreter's outputs: same dtype and shape; integers and bools
exactly; floats: the non-finite entries (nan, inf, -inf) exactly where the reference has
them, and max|out - ref| <= tol * max|ref| over the finite entries (tol 1e-4 for f32,
1e-9 for f64).

Cases: every case of tests/builtins/run.py (imported; a case whose build fails is also
built one result at a time, to tell which results fail; its run-time error cases must make
the entry return -1 with "gather index ... out of range" and write nothing into the
outputs); the samples at the small -D configs of tests/models/run.py and at odd sizes, with
random .safetensors weights (param names and shapes from `nestc check --dump=ir`); region
features (structural sharing, globals in the fingerprint, reuse_hash with run-time dims,
its groups and errors, max_reuse_entries and -Werror, three-level nesting, scalar
specialisation, unknown options, --no-regions, loops of calls, dtypes and several
results); the report's per-variant call counts (JSON, text, DOT), fingerprints (distinct for
one op, constant dtype, constant or attribute changed, equal for renamed copies, golden
values), options in the fingerprint of shared bodies, integer constants under reuse_hash;
f32 elementwise math against NumPy at a few ulp; GPT-2's object counts and report
(variant calls too); ResNet's variants and "differs"; several
models in one program; export arguments named like C names of the header; failed builds
leaving the output directory alone; --emit=llvm/asm (compiled and run) and archives;
NESTRT_PROFILE. Every compiled entry is called twice and must give the same bits.

Prints `ok NAME` or `FAIL NAME: details` per check and a last line `N passed, N failed`;
exits 1 if anything failed. Needs NumPy (Debian's /usr/bin/python3), cc, and
build/libnestrt.a beside NESTC_PATH (or in ./build).
"""

import glob
import importlib.util
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SAMPLES = os.path.join(ROOT, "samples")
RUNTIME = os.path.join(ROOT, "runtime")
# seconds for one subprocess: a hang, not a slow machine, should fail a test, and
# a sanitizer build (make check-asan) compiles several times slower
TIMEOUT = 360 if "sanitize" in os.environ.get("NESTC_TEST_LDFLAGS", "") else 120
CC = os.environ.get("CC", "cc")
# flags a program linked with this libnestrt needs (the sanitizers, under make check-asan)
LINK_FLAGS = os.environ.get("NESTC_TEST_LDFLAGS", "").split()

CTYPE = {"bool": "uint8_t", "i32": "int32_t", "i64": "int64_t", "f32": "float", "f64": "double",
         "f16": "uint16_t", "bf16": "uint16_t", "i8": "int8_t", "u8": "uint8_t", "i16": "int16_t",
         "u16": "uint16_t"}
NPDT = {"bool": np.bool_, "i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64,
        "f16": np.float16, "bf16": np.uint16, "i8": np.int8, "u8": np.uint8, "i16": np.int16,
        "u16": np.uint16}
RTDT = {"bool": "NESTRT_BOOL", "i32": "NESTRT_I32", "i64": "NESTRT_I64", "f32": "NESTRT_F32",
        "f64": "NESTRT_F64", "f16": "NESTRT_F16", "bf16": "NESTRT_BF16", "i8": "NESTRT_I8",
        "u8": "NESTRT_U8", "i16": "NESTRT_I16", "u16": "NESTRT_U16"}
TOL = {"f32": 1e-4, "f64": 1e-9, "f16": 0, "bf16": 0}

NESTC = None
LIBNESTRT = None
TMP = None


class Fail(Exception):
    """A check failed: the message says why."""


# ----------------------------------------------------------------------------- processes


def run(cmd, env=None, cwd=None, timeout=TIMEOUT):
    # The generated test drivers exit early on purpose without freeing, and
    # nestc's own leaks are checked by the other suites; here LeakSanitizer's
    # tracer has been seen to crash (signal 11) under load on multi-threaded builds.
    if cmd and "ASAN_OPTIONS" in os.environ:
        env = dict(env if env is not None else os.environ)
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd,
                           timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        raise Fail("timeout after %ds: %s" % (timeout, " ".join(cmd)))
    return r


def short(text, n=8):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    s = "\n    ".join(lines[:n])
    if len(lines) > n:
        s += "\n    ..."
    return s or "(no output)"


def crashed(r):
    return r.returncode < 0 or "internal compiler error" in r.stderr


def describe(cmd, r):
    what = "killed by signal %d" % -r.returncode if r.returncode < 0 else "exit %d" % r.returncode
    text = "%s: %s\n    %s" % (" ".join(cmd), what, short(r.stderr + r.stdout))
    return text.replace(TMP, "$TMP") if TMP else text


def nestc(*args, ok=True):
    cmd = [NESTC] + [str(a) for a in args]
    r = run(cmd)
    if ok and r.returncode != 0:
        raise Fail("nestc failed: " + describe(cmd, r))
    if crashed(r):
        raise Fail("nestc crashed: " + describe(cmd, r))
    return r


def defs(defines):
    out = []
    for k, v in (defines or {}).items():
        out += ["-D", "%s=%s" % (k, v)]
    return out


def objects(d):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "*.o")))


def listdir(d):
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def tmpdir(name):
    d = os.path.join(TMP, name)
    os.makedirs(d)
    return d


def write(path, text):
    with open(path, "w") as f:
        f.write(text.lstrip("\n"))
    return path


# ----------------------------------------------------------------------------- weights


def write_safetensors(path, tensors):
    """tensors: list of (name, ndarray). u64 LE header length, JSON header padded with
    spaces to 8 bytes, then the raw little-endian data (as tests/models/run.py)."""
    dtypes = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64", np.dtype("<i4"): "I32",
              np.dtype("<i8"): "I64", np.dtype("bool"): "BOOL", np.dtype("<f2"): "F16"}
    header, blobs, off = {}, [], 0
    for name, arr, *spelled in tensors:  # (name, uint16 bits, "BF16") for bfloat16
        arr = np.asarray(arr, order="C")
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        data = arr.tobytes()
        header[name] = {"dtype": spelled[0] if spelled else dtypes[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


PARAM_LINE = re.compile(r'^param \d+ "([^"]+)" (bool|i32|i64|f32|f64|f16|bf16|i8|u8|i16|u16)(?:\[([^\]]*)\])?\s*$')


def param_table(src, defines):
    """The model's params [(name, dtype, shape)] from `nestc check --dump=ir`."""
    r = nestc("check", src, "--dump=ir", "-w", *defs(defines))
    params = []
    for line in r.stdout.splitlines():
        m = PARAM_LINE.match(line)
        if m:
            shape = tuple(int(x) for x in m.group(3).split(",")) if m.group(3) else ()
            params.append((m.group(1), m.group(2), shape))
    return params


def random_weights(params, seed):
    """Uniform in [-s, s), s = 1/sqrt(fan-in) (fan-in shape[0] for rank 2-3, numel/shape[0]
    for rank 4); 1-d weights 1 + 0.1 U (norm scales), 1-d biases 0.1 U."""
    rng = np.random.default_rng(seed)
    out = []
    for name, dt, shape in params:
        if dt in ("f32", "f64"):
            if len(shape) <= 1:
                u = rng.uniform(-1, 1, shape)
                a = 1.0 + 0.1 * u if name.endswith("weight") else 0.5 * u
            else:
                n = shape[0] if len(shape) != 4 else int(np.prod(shape)) // shape[0]
                s = 1.0 / math.sqrt(max(n, 1))
                a = rng.uniform(-s, s, shape)
        elif dt == "bool":
            a = rng.random(shape) < 0.5
        else:
            a = rng.integers(0, 4, shape)
        out.append((name, np.asarray(a).astype(NPDT[dt])))
    return out


def make_weights(d, src, defines, seed):
    """Writes d/weights.safetensors for the model's params; returns its path (None if the
    model has no params)."""
    params = param_table(src, defines)
    if not params:
        return None
    path = os.path.join(d, "weights.safetensors")
    write_safetensors(path, random_weights(params, seed))
    return path


# ----------------------------------------------------------------------------- headers

SIG = re.compile(r"^/\* (\w+)\((.*)\) -> (.*)$", re.M)
TENSOR = r"(bool|i32|i64|f32|f64|f16|bf16|i8|u8|i16|u16)(?:\[([^\]]*)\])?"


def parse_shape(s):
    s = (s or "").strip()
    return tuple(int(x) for x in s.split(",")) if s else ()


class Entry:
    def __init__(self, model, name, inputs, outputs, c_args):
        self.model = model        # C prefix
        self.name = name
        self.inputs = inputs      # [(name, dtype, shape)]
        self.outputs = outputs    # [(c_name, dtype, shape)]
        self.c_args = c_args


def parse_header(path, model, strict_names=True):
    """Entries of a generated header: {entry: Entry}. Raises Fail if the comment and the
    prototype disagree (with strict_names, also if an argument is not named as in the
    model)."""
    text = open(path).read()
    entries = {}
    for m in SIG.finditer(text):
        ename = m.group(1)
        if re.search(r"^int %s_%s\(%s \*m, (%s_seq \*s|int64_t \w)" % (model, ename, model, model), text, re.M):
            continue  # run-time dims or state: tests/generate/run.py calls those
        ins = [(n, dt, parse_shape(s)) for n, dt, s in
               re.findall(r"(\w+): " + TENSOR, m.group(2))]
        outs = [(dt, parse_shape(s)) for dt, s in re.findall(TENSOR, m.group(3))]
        pm = re.search(r"^int %s_%s\(%s \*m((?:, [^,)]+)*)\);$" % (model, ename, model), text, re.M)
        if not pm:
            raise Fail("%s: no prototype `int %s_%s(%s *m, ...)`" % (os.path.basename(path), model,
                                                                   ename, model))
        args = [a.strip() for a in pm.group(1).split(",") if a.strip()]
        if len(args) != len(ins) + len(outs):
            raise Fail("%s: prototype of %s has %d arguments, the comment %d inputs and %d results"
                       % (os.path.basename(path), ename, len(args), len(ins), len(outs)))
        # names that would clash in C (keywords, the handle m, the results' out/outN)
        # get a trailing underscore in the header
        C_RESERVED = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
                      "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
                      "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
                      "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool",
                      "true", "false", "m", "out"}
        for (n, dt, _), a in zip(ins, args):
            cn = n + "_" if n in C_RESERVED or re.fullmatch(r"out[0-9]+", n) else n
            want = "const %s *%s" % (CTYPE[dt], cn)
            if not strict_names and re.fullmatch(r"const %s \*\w+" % CTYPE[dt], a):
                continue
            if a != want:
                raise Fail("%s: argument `%s`, expected `%s`" % (os.path.basename(path), a, want))
        onames = []
        for j, ((dt, _), a) in enumerate(zip(outs, args[len(ins):])):
            want = "%s *%s" % (CTYPE[dt], "out" if len(outs) == 1 else "out%d" % j)
            if not strict_names and re.fullmatch(r"%s \*\w+" % CTYPE[dt], a):
                pass
            elif a != want:
                raise Fail("%s: result argument `%s`, expected `%s`" % (os.path.basename(path), a, want))
            onames.append(a.split("*")[1])
        entries[ename] = Entry(model, ename, ins, [(cn, dt, sh) for cn, (dt, sh) in zip(onames, outs)],
                               args)
    if not entries:
        raise Fail("%s: no entry point found" % os.path.basename(path))
    return entries


# ----------------------------------------------------------------------------- drivers

DRIVER_HEAD = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nestrt.h>
%(includes)s

static void *load(const char *path, int dtype, int rank, const int64_t *shape)
{
	int dt, rk;
	int64_t sh[NESTRT_MAX_RANK];
	void *data;
	nestrt_error err;
	if (nestrt_npy_read(path, &dt, &rk, sh, &data, &err)) {
		fprintf(stderr, "driver: %%s\n", err.message);
		exit(3);
	}
	int ok = (dt == dtype || (dt == NESTRT_U16 && dtype == NESTRT_BF16)) && rk == rank; /* bf16: its bits in <u2 */
	for (int i = 0; ok && i < rank; i++)
		ok = sh[i] == shape[i];
	if (!ok) {
		fprintf(stderr, "driver: %%s: unexpected dtype or shape\n", path);
		exit(3);
	}
	return data;
}

static void *output(size_t bytes)
{
	unsigned char *p = malloc(bytes + 16);
	memset(p, 0xA5, bytes + 16);
	return p;
}

static int touched(const void *p, size_t bytes)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < bytes + 16; i++)
		if (c[i] != 0xA5)
			return 1;
	return 0;
}

static void save(const char *path, int dtype, int rank, const int64_t *shape, const void *data, size_t bytes)
{
	nestrt_error err;
	const unsigned char *c = data;
	for (size_t i = bytes; i < bytes + 16; i++)
		if (c[i] != 0xA5) {
			fprintf(stderr, "driver: %%s: the entry wrote past the end of the output\n", path);
			exit(4);
		}
	if (nestrt_npy_write(path, dtype, rank, shape, data, &err)) {
		fprintf(stderr, "driver: %%s\n", err.message);
		exit(3);
	}
}

int main(void)
{
	nestrt_error err;
	memset(&err, 0, sizeof err);
"""


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def c_shape(shape):
    return "{" + ", ".join(str(x) for x in shape) + "}" if shape else "{0}"


class Call:
    """One entry call in a driver: weights path (or None), input npy paths by name, output
    npy paths in order."""

    def __init__(self, entry, weights, inputs, outputs, twice=True):
        self.entry, self.weights, self.inputs, self.outputs = entry, weights, inputs, outputs
        self.twice = twice   # call the entry a second time: the same results, bit for bit


def own_prototypes(e):
    """Declarations of a model's API written here instead of including its header (used to
    check values when the generated header itself does not compile)."""
    m = e.model
    args = ["const %s *" % CTYPE[dt] for _, dt, _ in e.inputs] + ["%s *" % CTYPE[dt] for _, dt, _ in e.outputs]
    return ("typedef struct %s %s;\n%s *%s_new(nestrt_weights *w, nestrt_error *err);\n"
            "void %s_free(%s *m);\nint %s_%s(%s *%s);\n"
            % (m, m, m, m, m, m, m, e.name, m, "".join(", " + a for a in args)))


def gen_driver(calls, includes):
    """includes: header names to include, or Entry objects whose API is declared here."""
    inc = [('#include "%s.h"' % h) if isinstance(h, str) else own_prototypes(h) for h in includes]
    out = [DRIVER_HEAD % {"includes": "\n".join(inc)}]
    for k, c in enumerate(calls):
        e = c.entry
        m = e.model
        out.append("\t{\n")
        out.append("\t\tnestrt_weights *w = nestrt_weights_open(%s, &err);\n"
                   % (c_str(c.weights) if c.weights else "NULL"))
        out.append('\t\tif (!w) { fprintf(stderr, "weights: %s\\n", err.message); return 2; }\n')
        out.append("\t\t%s *m = %s_new(w, &err);\n" % (m, m))
        out.append('\t\tif (!m) { fprintf(stderr, "%s_new: %%s\\n", err.message); return 2; }\n' % m)
        args = []
        for i, (n, dt, shape) in enumerate(e.inputs):
            out.append("\t\tstatic const int64_t is%d[] = %s;\n" % (i, c_shape(shape)))
            out.append("\t\t%s *in%d = load(%s, %s, %d, is%d);\n"
                       % (CTYPE[dt], i, c_str(c.inputs[n]), RTDT[dt], len(shape), i))
            args.append("in%d" % i)
        for j, (_, dt, shape) in enumerate(e.outputs):
            n = int(np.prod(shape)) if shape else 1
            out.append("\t\tstatic const int64_t os%d[] = %s;\n" % (j, c_shape(shape)))
            out.append("\t\tsize_t ob%d = %d * sizeof(%s);\n" % (j, n, CTYPE[dt]))
            out.append("\t\t%s *out%d = output(ob%d);\n" % (CTYPE[dt], j, j))
            args.append("out%d" % j)
        out.append("\t\tint rc = %s_%s(m%s);\n" % (m, e.name, "".join(", " + a for a in args)))
        out.append("\t\tif (rc != 0) {\n")
        out.append('\t\t\tif (rc != -1) fprintf(stderr, "driver: %s_%s returned %%d\\n", rc);\n'
                   % (m, e.name))
        out.append('\t\t\tfprintf(stderr, "%s\\n", nestrt_model_error((const nestrt_model *)m));\n')
        for j in range(len(e.outputs)):
            out.append('\t\t\tif (touched(out%d, ob%d)) fprintf(stderr, "driver: the failed call wrote '
                       'into output %d\\n");\n' % (j, j, j))
        out.append("\t\t\treturn 1;\n\t\t}\n")
        if c.twice:
            out.append("\t\t{\n")
            for j in range(len(e.outputs)):
                out.append("\t\t\tvoid *again%d = output(ob%d);\n" % (j, j))
            out.append("\t\t\tif (%s_%s(m%s)) {\n" % (m, e.name, "".join(
                ", " + a for a in args[:len(e.inputs)] + ["again%d" % j for j in range(len(e.outputs))])))
            out.append('\t\t\t\tfprintf(stderr, "driver: the second call failed: %s\\n", '
                       'nestrt_model_error((const nestrt_model *)m));\n\t\t\t\treturn 5;\n\t\t\t}\n')
            for j in range(len(e.outputs)):
                out.append("\t\t\tif (memcmp(again%d, out%d, ob%d)) {\n" % (j, j, j))
                out.append('\t\t\t\tfprintf(stderr, "driver: output %d of a second call differs from '
                           'the first\\n");\n\t\t\t\treturn 5;\n\t\t\t}\n' % j)
                out.append("\t\t\tfree(again%d);\n" % j)
            out.append("\t\t}\n")
        for j, (_, dt, shape) in enumerate(e.outputs):
            out.append("\t\tsave(%s, %s, %d, os%d, out%d, ob%d);\n"
                       % (c_str(c.outputs[j]), RTDT[dt], len(shape), j, j, j))
        for i in range(len(e.inputs)):
            out.append("\t\tfree(in%d);\n" % i)
        for j in range(len(e.outputs)):
            out.append("\t\tfree(out%d);\n" % j)
        out.append("\t\t%s_free(m);\n\t\tnestrt_weights_close(w);\n\t}\n" % m)
    out.append("\treturn 0;\n}\n")
    return "".join(out)


def compile_driver(d, calls, includes, inc_dirs, link, name="driver"):
    """Writes and compiles d/NAME.c; link: object files / archives. Returns the program."""
    src = os.path.join(d, name + ".c")
    with open(src, "w") as f:
        f.write(gen_driver(calls, includes))
    exe = os.path.join(d, name)
    cmd = [CC, "-O1", "-std=c11", "-Wall", "-Werror=incompatible-pointer-types",
           "-Werror=implicit-function-declaration", "-I" + RUNTIME]
    cmd += ["-I" + i for i in inc_dirs] + [src] + link + [LIBNESTRT, "-lm", "-lpthread", "-o", exe] + LINK_FLAGS
    r = run(cmd)
    if r.returncode != 0:
        raise Fail("driver does not compile or link: " + describe(cmd, r))
    return exe


# ----------------------------------------------------------------------------- comparing


def compare(got, ref, what):
    """None if got matches the reference, else a message."""
    if got.dtype != ref.dtype:
        return "%s: dtype %s, reference %s" % (what, got.dtype, ref.dtype)
    if got.shape != ref.shape:
        return "%s: shape %s, reference %s" % (what, list(got.shape), list(ref.shape))
    if ref.dtype.kind in "biu":
        if np.array_equal(got, ref):
            return None
        bad = np.argwhere(got != ref)
        idx = tuple(bad[0])
        return "%s: %d of %d differ; first at %s: got %s, reference %s" % (
            what, len(bad), got.size, list(idx), got[idx], ref[idx])
    g, r = got.astype(np.float64), ref.astype(np.float64)
    fin = np.isfinite(r)
    same_nf = (np.isnan(g) & np.isnan(r)) | (g == r)
    bad = ~fin & ~same_nf
    if bad.any():
        idx = tuple(np.argwhere(bad)[0])
        return "%s: at %s got %r, reference %r" % (what, list(idx), g[idx], r[idx])
    if not fin.any():
        return None
    if not np.isfinite(g[fin]).all():
        idx = tuple(np.argwhere(fin & ~np.isfinite(g))[0])
        return "%s: at %s got %r, reference %r" % (what, list(idx), g[idx], r[idx])
    err = np.where(fin, np.abs(g - np.where(fin, r, 0)), 0)
    scale = float(np.max(np.abs(r[fin])))
    tol = {np.float32: 1e-4, np.float16: 2e-3}.get(ref.dtype.type, 1e-9)  # f16: an ulp of f32 sums in another order
    if float(err.max()) <= tol * scale:
        return None
    idx = tuple(np.unravel_index(np.argmax(err), err.shape))
    return "%s: max abs err %.3g > %g * max|ref| %.3g at %s: got %r, reference %r" % (
        what, err.max(), tol, scale, list(idx), g[idx], r[idx])


# ----------------------------------------------------------------------------- the core check


class Model:
    """A model source with its -D config, inputs, weights: builds, runs the interpreter, and
    runs compiled code."""

    def __init__(self, d, src, defines=None, inputs=None, seed=1, entry=None, name=None,
                 weights="auto"):
        self.d, self.src, self.defines = d, src, dict(defines or {})
        self.stem = name or os.path.splitext(os.path.basename(src))[0]
        self.entry_name = entry
        self.inputs = {}
        for n, a in (inputs or {}).items():
            p = os.path.join(d, "in_%s.npy" % n)
            np.save(p, np.asarray(a))
            self.inputs[n] = p
        self._weights, self.seed = weights, seed

    @property
    def weights(self):
        """The weights file (written on first use; None for a model without params)."""
        if self._weights == "auto":
            self._weights = make_weights(self.d, self.src, self.defines, self.seed)
        return self._weights

    def build(self, out, *extra, ok=True):
        args = ["build", self.src, "-o", out] + defs(self.defines) + list(extra)
        if self.stem != os.path.splitext(os.path.basename(self.src))[0]:
            args += ["--name", self.stem]
        return nestc(*args, ok=ok)

    strict_names = True

    def entry(self, header_dir):
        es = parse_header(os.path.join(header_dir, self.stem + ".h"), self.stem, self.strict_names)
        if self.entry_name:
            if self.entry_name not in es:
                raise Fail("header has no entry %s" % self.entry_name)
            return es[self.entry_name]
        return es["forward"] if "forward" in es or len(es) != 1 else next(iter(es.values()))

    def reference(self, e, tag="ref"):
        """Runs `nestc run`; returns the output paths (or raises Fail)."""
        outs = [os.path.join(self.d, "%s_%s_%d.npy" % (tag, e.name, j)) for j in range(len(e.outputs))]
        if all(os.path.exists(p) for p in outs):
            return outs
        args = ["run", self.src] + defs(self.defines) + ["--entry", e.name]
        if self.weights:
            args += ["--weights", self.weights]
        for n, p in self.inputs.items():
            args += ["--input", "%s=%s" % (n, p)]
        for p in outs:
            args += ["--output", p]
        nestc(*args)
        return outs

    def call(self, e, tag, twice=True):
        outs = [os.path.join(self.d, "%s_%s_%d.npy" % (tag, e.name, j)) for j in range(len(e.outputs))]
        missing = [n for n, _, _ in e.inputs if n not in self.inputs]
        if missing:
            raise Fail("no input for %s" % ", ".join(missing))
        return Call(e, self.weights, self.inputs, outs, twice)

    def check_compiled(self, out, labels=None, link=None, tag="got", env=None):
        """Compiles a driver against the build in `out`, runs it, compares every output with
        the interpreter. Returns a list of (label, message-or-None)."""
        e = self.entry(out)
        refs = self.reference(e)
        c = self.call(e, tag)
        link = link if link is not None else sorted(glob.glob(os.path.join(out, "*.o")))
        res = []
        try:
            exe = compile_driver(self.d, [c], [self.stem], [out], link, name="driver_" + tag)
        except Fail as ex:
            if "%s.h:" % self.stem not in str(ex):
                raise
            # the generated header is broken: say so, and check the values through
            # declarations written here
            errs = [re.sub(r"^.*/", "", l) for l in str(ex).splitlines() if "error:" in l]
            res.append(("header", "the generated header does not compile: " + " | ".join(errs[:3])))
            exe = compile_driver(self.d, [c], [e], [out], link, name="driver_own_" + tag)
        r = run([exe], env=env)
        if r.returncode != 0:
            raise Fail("compiled program: " + describe([exe], r))
        labels = labels or ["out%d" % j for j in range(len(e.outputs))]
        for lab, rp, gp in zip(labels, refs, c.outputs):
            res.append((lab, compare(np.load(gp), np.load(rp), lab)))
        return res


def values_ok(results):
    bad = ["%s" % m for _, m in results if m]
    if bad:
        raise Fail("; ".join(bad))


# ----------------------------------------------------------------------------- checks registry

CHECKS = []   # (group name, function returning [(name, msg)])


def check(name):
    def deco(fn):
        CHECKS.append((name, fn))
        return fn
    return deco


def single(name, fn):
    """A check that is one line of output."""
    try:
        fn()
        return [(name, None)]
    except Fail as e:
        return [(name, str(e))]


# ----------------------------------------------------------------------------- 1. builtins


def load_builtins():
    path = os.path.join(ROOT, "tests", "builtins", "run.py")
    spec = importlib.util.spec_from_file_location("nest_builtin_cases", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def split_top(text):
    """Splits at commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def closing(text, i):
    """Index of the bracket closing the one at text[i]."""
    depth = 0
    for k in range(i, len(text)):
        if text[k] in "([{":
            depth += 1
        elif text[k] in ")]}":
            depth -= 1
            if depth == 0:
                return k
    raise ValueError("unbalanced")


def split_case_source(src, n):
    """The source of a builtin case with only result k, for k < n: [source] (None if the
    source does not have the expected form)."""
    i = src.find("export fn f(")
    if i < 0:
        return None
    a = closing(src, src.index("(", i))
    arrow = src.index("->", a)
    j = arrow + 2
    while src[j] in " \n":
        j += 1
    if src[j] == "(":
        te = closing(src, j)
        types = split_top(src[j + 1:te])
    else:
        te = src.index("{", j) - 1
        types = [src[j:te + 1].strip()]
    body = src.index("{", te)
    end = src.rindex("}")
    ret = src.rindex("return", body, end)
    exprs = split_top(src[ret + len("return"):end])
    if len(types) != n or len(exprs) != n:
        return None
    return [src[:arrow] + "-> " + types[k] + " " + src[body:ret] + "return " + exprs[k] + "\n}\n"
            for k in range(n)]


def builtin_split(c, pre, d, defines, why):
    """The whole case did not build: build each result on its own, to tell which fail."""
    parts = split_case_source(c.src.lstrip("\n"), len(c.outs))
    res = [(pre, "the case does not build: %s" % why)]
    if parts is None:
        return res
    for k, (o, text) in enumerate(zip(c.outs, parts)):
        name = "%s.%s" % (pre, o.label)
        try:
            sd = os.path.join(d, "part%d" % k)
            os.makedirs(sd)
            src = write(os.path.join(sd, c.name + ".nest"), text)
            m = Model(sd, src, defines, dict(c.inputs), weights=None)
            out = os.path.join(sd, "out")
            m.build(out)
            res += [(name if lab == o.label else "%s.%s" % (name, lab), msg)
                    for lab, msg in m.check_compiled(out, labels=[o.label])]
        except Fail as e:
            res.append((name, "(built alone) " + str(e)))
    return res


def builtin_case(c):
    pre = "builtin.%s" % c.name
    d = tmpdir(pre)
    try:
        src = write(os.path.join(d, c.name + ".nest"), c.src)
        defines = {}
        a = list(c.args)
        while a:
            if a[0] == "-D":
                k, v = a[1].split("=", 1)
                defines[k] = v
                a = a[2:]
            else:
                raise Fail("unsupported case arguments %s" % c.args)
        m = Model(d, src, defines, dict(c.inputs), weights=None)
        out = os.path.join(d, "out")
        try:
            m.build(out)
        except Fail as e:
            if c.error is None:
                return builtin_split(c, pre, d, defines, str(e))
            raise
        objs = objects(out)
        if objs != [c.name + ".o"]:
            raise Fail("objects %s, expected [%s.o]" % (objs, c.name))
        e = m.entry(out)
        if c.error is None:
            return [("%s.%s" % (pre, lab), msg) for lab, msg in
                    m.check_compiled(out, labels=[o.label for o in c.outs])]
        # a run-time error: the entry returns -1, says "gather index ... out of range", writes nothing
        call = m.call(e, "got")
        exe = compile_driver(d, [call], [m.stem], [out], sorted(glob.glob(os.path.join(out, "*.o"))))
        r = run([exe])
        problems = []
        if r.returncode != 1:
            problems.append("exit %d, expected 1 (%s)" % (r.returncode, c.error))
        if not re.search(r"gather index -?\d+ out of range", r.stderr):
            problems.append("no 'gather index N out of range' message")
        if "driver:" in r.stderr:
            problems.append("; ".join(l for l in r.stderr.splitlines() if l.startswith("driver:")))
        written = [os.path.basename(p) for p in call.outputs if os.path.exists(p)]
        if written:
            problems.append("outputs written: %s" % ", ".join(written))
        msg = "; ".join(problems) + (" [stderr: %s]" % short(r.stderr, 3) if problems else "")
        return [(pre, msg or None)]
    except Fail as e:
        return [(pre, str(e))]


# ----------------------------------------------------------------------------- 2. samples

GPT2_CFG = {"L": 2, "D": 64, "H": 4, "V": 256, "CTX": 64, "S": 16}
MLP_CFG = {"B": 4, "D_IN": 32, "D": 64, "D_OUT": 10, "L": 2}
LLAMA_CFG = {"L": 2, "D": 64, "H": 4, "KVH": 2, "F": 128, "V": 256, "S": 16}
RESNET_CFG = {"BATCH": 2, "IMG": 32, "C0": 8, "CLASSES": 10}


def sample_inputs(name, cfg, seed):
    rng = np.random.default_rng(seed)
    if name in ("gpt2", "llama"):
        return {"tokens": rng.integers(0, cfg["V"], size=(cfg["S"],)).astype(np.int32)}
    if name == "mlp":
        return {"x": rng.standard_normal((cfg["B"], cfg["D_IN"])).astype(np.float32)}
    if name == "resnet":
        return {"x": rng.standard_normal((cfg["BATCH"], 3, cfg["IMG"], cfg["IMG"])).astype(np.float32)}
    raise ValueError(name)


def sample_model(tag, sample, cfg, seed=7, **kw):
    d = tmpdir(tag)
    return Model(d, os.path.join(SAMPLES, sample + ".nest"), cfg, sample_inputs(sample, cfg, seed),
                 seed=seed, **kw)


# expected objects: model + regions (one variant each at these configs unless noted)
# (gpt2 and llama: forward's regions, and prefill's and decode's over the KV cache)
SAMPLE_OBJECTS = {"gpt2": ["gpt2.attention.0.o", "gpt2.attention_kv.0.o", "gpt2.attention_kv.1.o",
                           "gpt2.attention_kv.2.o", "gpt2.block.0.o", "gpt2.block_kv.0.o", "gpt2.block_kv.1.o",
                           "gpt2.block_kv.2.o", "gpt2.o"],
                  "mlp": ["mlp.layer.0.o", "mlp.o"],
                  "llama": ["llama.attention.0.o", "llama.attention_kv.0.o", "llama.attention_kv.1.o",
                            "llama.decoder_layer.0.o", "llama.decoder_layer_kv.0.o", "llama.decoder_layer_kv.1.o",
                            "llama.o"]}


def sample_case(name, cfg, tag=None):
    def fn():
        tag_ = tag or "sample.%s" % name
        return run_sample(name, cfg, tag_)
    return fn


def run_sample(name, cfg, tag):
    try:
        m = sample_model(tag, name, cfg)
        out = os.path.join(m.d, "out")
        m.build(out)
        res = [("%s.values" % tag, msg) for _, msg in m.check_compiled(out)]
        objs = objects(out)
        want = SAMPLE_OBJECTS.get(name)
        if want is None:   # resnet: from the JSON report
            rep = json.loads(nestc("report", m.src, "--format=json", *defs(cfg)).stdout)
            want = sorted([v["object"] for v in rep["variants"]] + ["resnet.o"])
        res.append(("%s.objects" % tag, None if objs == want else
                    "objects %s, expected %s" % (objs, want)))
        return res
    except Fail as e:
        return [(tag, str(e))]


for _n, _c in (("gpt2", GPT2_CFG), ("mlp", MLP_CFG), ("llama", LLAMA_CFG), ("resnet", RESNET_CFG)):
    CHECKS.append(("sample.%s" % _n, sample_case(_n, _c)))
# sizes that are not multiples of a vector width or a tile
ODD = (("gpt2", {"L": 2, "D": 96, "H": 3, "V": 301, "CTX": 40, "S": 33}),
       ("mlp", {"B": 5, "D_IN": 33, "D": 70, "D_OUT": 7, "L": 3}),
       ("llama", {"L": 2, "D": 96, "H": 6, "KVH": 3, "F": 200, "V": 301, "S": 33}),
       ("resnet", {"BATCH": 1, "IMG": 64, "C0": 6, "CLASSES": 7}))
for _n, _c in ODD:
    CHECKS.append(("sample.%s_odd" % _n, sample_case(_n, _c, "sample.%s_odd" % _n)))


# samples/resnet18.nest, torchvision's names and batch norms: compiled code and the
# interpreter against the NumPy ResNet-18 of tests/models/run.py at 1e-4, on a
# checkpoint that also holds torchvision's num_batches_tracked counters (ignored,
# without a warning); and on nestc's random weights, whose variances must be
# drawn positive (else NaN).


def load_models():
    path = os.path.join(ROOT, "tests", "models", "run.py")
    spec = importlib.util.spec_from_file_location("nest_model_refs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def close_to(got, ref, what, rtol=1e-4):
    err = float(np.max(np.abs(got.astype(np.float64) - ref))) if np.all(np.isfinite(got)) else float("inf")
    scale = float(np.max(np.abs(ref)))
    if got.shape != ref.shape or not err <= rtol * scale:
        raise Fail("%s: shape %s vs %s, max abs err %.3g > %g * max|ref| %.3g" %
                   (what, got.shape, ref.shape, err, rtol, scale))


def resnet18_case(tag, cfg, seed):
    def fn():
        mod = load_models()
        weights, inputs = mod.make_case("resnet18", cfg, mod.resnet18_params, mod.resnet18_inputs, seed)
        counters = [(n[:-len("running_var")] + "num_batches_tracked", np.array(100, np.int64))
                    for n, _ in weights if n.endswith(".running_var")]
        d = tmpdir(tag)
        wpath = os.path.join(d, "torchvision.safetensors")
        write_safetensors(wpath, weights + counters)
        src = os.path.join(SAMPLES, "resnet18.nest")
        m = Model(d, src, cfg, inputs, weights=wpath)
        out = os.path.join(m.d, "out")
        m.build(out)
        W, I = mod.as64(weights, inputs)
        ref = mod.resnet18_ref(cfg, W, I)
        close_to(run_compiled(m, out)[0], ref, "compiled")
        opath = os.path.join(d, "interp.npy")
        r = nestc("run", src, *defs(cfg), "--weights", wpath, "--input", "x=" + m.inputs["x"], "--output", opath)
        if r.stderr.strip():
            raise Fail("nestc run printed: %s" % short(r.stderr, 3))
        close_to(np.load(opath), ref, "nestc run")
    return lambda: single(tag, fn)


CHECKS.append(("sample.resnet18", resnet18_case("sample.resnet18", {"BATCH": 2, "IMG": 32, "CLASSES": 1000}, 31)))
CHECKS.append(("sample.resnet18_odd", resnet18_case("sample.resnet18_odd", {"BATCH": 1, "IMG": 40, "CLASSES": 10}, 32)))


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    dt = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8"}
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             dtype=dt[v["dtype"]]).reshape(v["shape"])
            for k, v in hdr.items() if k != "__metadata__"}


@check("sample.resnet18_random")
def resnet18_random():
    def fn():
        cfg = {"BATCH": 1, "IMG": 32, "CLASSES": 10}
        d = tmpdir("sample.resnet18_random")
        src = os.path.join(SAMPLES, "resnet18.nest")
        wpath = os.path.join(d, "random.safetensors")
        nestc("weights", src, *defs(cfg), "--random-weights", "5", "-o", wpath)
        w = read_safetensors(wpath)
        var = {k: a for k, a in w.items() if k.endswith(".running_var")}
        if len(var) != 20 or not all(np.all(a > 0) for a in var.values()):
            raise Fail("running_var: %d tensors, min %s" % (len(var), min(float(a.min()) for a in var.values())))
        # the other 1-d params stay symmetric around zero
        if not min(float(a.min()) for k, a in w.items() if k.endswith(".running_mean")) < 0:
            raise Fail("running_mean drawn positive too")
        m = Model(d, src, cfg, sample_inputs("resnet", {"BATCH": 1, "IMG": 32}, 3), weights=wpath)
        out = os.path.join(d, "out")
        m.build(out)
        got = run_compiled(m, out)[0]
        if not np.all(np.isfinite(got)):
            raise Fail("compiled output on random weights is not finite")
        opath = os.path.join(d, "interp.npy")
        nestc("run", src, *defs(cfg), "--random-weights", "5", "--input", "x=" + m.inputs["x"], "--output", opath)
        interp = np.load(opath)
        if not np.all(np.isfinite(interp)):
            raise Fail("nestc run --random-weights output is not finite")
        close_to(got, interp.astype(np.float64), "compiled vs nestc run --random-weights")
    return single("sample.resnet18_random", fn)


# ----------------------------------------------------------------------------- 3. regions


def rng_inputs(seed, **shapes):
    rng = np.random.default_rng(seed)
    return {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in shapes.items()}


def region_model(tag, src_text, inputs, defines=None, stem=None):
    d = tmpdir(tag)
    src = write(os.path.join(d, (stem or "m") + ".nest"), src_text)
    return Model(d, src, defines, inputs)


def expect_objects(out, want):
    got = objects(out)
    if got != sorted(want):
        raise Fail("objects %s, expected %s" % (got, sorted(want)))


def line_of(text, needle, nth=1):
    """1-based (line, column) of the nth occurrence of needle in text."""
    pos = -1
    for _ in range(nth):
        pos = text.index(needle, pos + 1)
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


SRC_A = """
const D = 16
param w: f32[D, D]
param v: f32[D]

@region
fn first(x: f32[T, D]) -> f32[T, D] {
  return x + relu(x @ w) * v
}

@region
fn second(y: f32[T, D]) -> f32[T, D] {
  return y + relu(y @ w) * v
}

export fn forward(a: f32[8, D]) -> f32[8, D] {
  return second(first(a))
}
"""


@check("region.a_structural_sharing")
def region_a():
    def fn():
        m = region_model("region.a", SRC_A, rng_inputs(1, a=(8, 16)))
        out = os.path.join(m.d, "out")
        m.build(out)
        got = objects(out)
        if len(got) != 2 or "m.o" not in got:
            raise Fail("objects %s: expected m.o and ONE variant object for the two "
                       "structurally identical regions" % got)
        values_ok(m.check_compiled(out))
    return single("region.a_structural_sharing", fn)


SRC_B = """
const D = 16
param w1: f32[D, D]
param w2: f32[D, D]

@region
fn first(x: f32[T, D]) -> f32[T, D] {
  return x + tanh(x @ w1)
}

@region
fn second(x: f32[T, D]) -> f32[T, D] {
  return x + tanh(x @ w2)
}

export fn forward(a: f32[8, D]) -> f32[8, D] {
  return second(first(a)) + first(a)
}
"""


@check("region.b_globals_in_fingerprint")
def region_b():
    def fn():
        m = region_model("region.b", SRC_B, rng_inputs(2, a=(8, 16)))
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.first.0.o", "m.second.0.o"])
        values_ok(m.check_compiled(out))
    return single("region.b_globals_in_fingerprint", fn)


SRC_C = """
const D = 8
param w: f32[D, D]
param g: { weight: f32[D], bias: f32[D] }

@region(reuse_hash = 0)
fn mix(x: f32[T, D]) -> f32[T, D] {
  let h = layernorm(x @ w, g.weight, g.bias)
  let s = causal_mask(h @ transpose(x, [1, 0]) * 0.5)
  let a = softmax(s, axis=-1) @ h
  let c = concat([a, x], axis=0)
  let t = reshape(c, [2, T, D])
  let u = c[T:2 * T] - c[0:T] + expand(x[T - 1], [T, D])
  return t[0] + t[1] * mean(x, axis=0) + sum(a, axis=0, keepdim=true) + softmax(x, axis=0) + u
}

export fn forward(a: f32[8, D], b: f32[16, D]) -> (f32[8, D], f32[16, D]) {
  return mix(a), mix(b)
}
"""


@check("region.c_reuse_hash_runtime_dims")
def region_c():
    def fn():
        m = region_model("region.c", SRC_C, rng_inputs(3, a=(8, 8), b=(16, 8)))
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.mix.0.o"])
        values_ok(m.check_compiled(out, labels=["T=8", "T=16"]))
    return single("region.c_reuse_hash_runtime_dims", fn)


SRC_C3 = """
const D = 16
const H = 4
type Linear(I, O) = { weight: f32[I, O], bias: f32[O] }
param attn: { c_attn: Linear(D, 3*D), c_proj: Linear(D, D) }

@region(reuse_hash = T / 16, options = { opt_level: 3 })
fn attention(x: f32[T, D], p: { c_attn: Linear(D, 3*D), c_proj: Linear(D, D) }) -> f32[T, D] {
  let q, k, v = split(x @ p.c_attn.weight + p.c_attn.bias, 3, axis=-1)
  let qh = transpose(reshape(q, [T, H, D/H]), [1, 0, 2])
  let kh = transpose(reshape(k, [T, H, D/H]), [1, 2, 0])
  let vh = transpose(reshape(v, [T, H, D/H]), [1, 0, 2])
  let a = softmax(causal_mask(qh @ kh * rsqrt(f32(D/H))), axis=-1)
  let o = reshape(transpose(a @ vh, [1, 0, 2]), [T, D])
  return o @ p.c_proj.weight + p.c_proj.bias
}

export fn forward(a: f32[5, D], b: f32[8, D], c: f32[13, D], d: f32[16, D], e: f32[20, D]) -> (
    f32[5, D], f32[8, D], f32[13, D], f32[16, D], f32[20, D]) {
  return attention(a, attn), attention(b, attn), attention(c, attn), attention(d, attn),
         attention(e, attn)
}
"""


@check("region.c_reuse_hash_groups_attention")
def region_c3():
    # reuse_hash = T / 16: T = 5, 8, 13 share variant 0, T = 16, 20 share variant 1
    def fn():
        m = region_model("region.c3", SRC_C3, rng_inputs(12, a=(5, 16), b=(8, 16), c=(13, 16),
                                                         d=(16, 16), e=(20, 16)))
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.attention.0.o", "m.attention.1.o"])
        values_ok(m.check_compiled(out, labels=["T=5", "T=8", "T=13", "T=16", "T=20"]))
    return single("region.c_reuse_hash_groups_attention", fn)


SRC_C4 = """
const D = 8
param w: f32[D, D]

@region(reuse_hash = 0)
fn inner(x: f32[T, D]) -> f32[T, D] {
  return tanh(x @ w)
}

@region(reuse_hash = 0)
fn outer(x: f32[T, D]) -> f32[T, D] {
  return inner(x) + x
}

export fn forward(a: f32[4, D], b: f32[8, D]) -> (f32[4, D], f32[8, D]) {
  return outer(a), outer(b)
}
"""


@check("region.c_reuse_hash_nested")
def region_c4():
    # Both regions group every call (reuse_hash = 0) and the calls differ only in T: one
    # variant each, T taken at run time by both (outer passes its run-time T on to inner).
    def fn():
        m = region_model("region.c4", SRC_C4, rng_inputs(13, a=(4, 8), b=(8, 8)))
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.inner.0.o", "m.outer.0.o"])
        values_ok(m.check_compiled(out, labels=["T=4", "T=8"]))
    return single("region.c_reuse_hash_nested", fn)


SRC_C2 = """
const D = 8

@region(reuse_hash = 0)
fn f(x: f32[T, D]) -> f32[T, D] {
  return x * f32(T) + f32(T * D)
}

export fn forward(a: f32[8, D], b: f32[16, D]) -> (f32[8, D], f32[16, D]) {
  return f(a), f(b)
}
"""


@check("region.c_reuse_hash_dim_as_value")
def region_c2():
    # A shape variable used as a number in a reuse_hash group: an error naming both call
    # sites, or one object and right values (never wrong values).
    def fn():
        m = region_model("region.c2", SRC_C2, rng_inputs(3, a=(8, 8), b=(16, 8)))
        out = os.path.join(m.d, "out")
        r = m.build(out, ok=False)
        if r.returncode == 0:
            expect_objects(out, ["m.o", "m.f.0.o"])
            values_ok(m.check_compiled(out, labels=["T=8", "T=16"]))
            return
        text = open(m.src).read()
        expect_build_error(m, out, [line_of(text, "f(a)"), line_of(text, "f(b)")], ["'f'"])
    return single("region.c_reuse_hash_dim_as_value", fn)


SRC_NAMES = """
export fn f(m: f32[4], out: f32[4], double: f32[4], out0: i32[4], w: f32[4]) -> (f32[4], i32[4]) {
  return m * out + double - w, out0 * 2
}
"""


@check("header.argument_names")
def header_names():
    # Export arguments named like the handle (m), the result pointers (out, out0), the
    # weights (w) or a C keyword (double): the header must still compile and work.
    def fn():
        d = tmpdir("header.names")
        src = write(os.path.join(d, "names.nest"), SRC_NAMES)
        rng = np.random.default_rng(3)
        m = Model(d, src, None, {"m": rng.uniform(-1, 1, 4).astype(np.float32),
                                 "out": rng.uniform(-1, 1, 4).astype(np.float32),
                                 "double": rng.uniform(-1, 1, 4).astype(np.float32),
                                 "out0": rng.integers(-5, 5, 4).astype(np.int32),
                                 "w": rng.uniform(-1, 1, 4).astype(np.float32)}, weights=None)
        m.strict_names = False
        out = os.path.join(m.d, "out")
        m.build(out)
        values_ok(m.check_compiled(out))
    return single("header.argument_names", fn)


SRC_NAMES_STATE = """
state st: f32[8]
export fn g(s: f32[2]) -> f32[2] {
  st[0:2] = s
  return st[0:2]
}
export fn a(x: f32[m]) -> f32[m] where 1 <= m, m <= 8 {
  return x
}
export fn b(x: f32[out]) -> f32[out] where 1 <= out, out <= 8 {
  return x * 2.0
}
export fn c(x: f32[int]) -> f32[int] where 1 <= int, int <= 8 {
  return x + 1.0
}
"""


@check("header.dim_and_sequence_names")
def header_names_state():
    # An argument named s beside the sequence, run-time dims named m, out or int: the
    # header still compiles (-Wall -Werror), and calls through it work.
    def fn():
        d = tmpdir("header.names_state")
        write(os.path.join(d, "ns.nest"), SRC_NAMES_STATE)
        out = os.path.join(d, "out")
        nestc("build", os.path.join(d, "ns.nest"), "-o", out)
        drv = write(os.path.join(d, "drv.c"), """#include <stdio.h>
#include "ns.h"
int main(void)
{
    nestrt_error err;
    ns *m = ns_new(NULL, &err);
    ns_seq *q = m ? ns_seq_new(m, &err) : NULL;
    float x[3] = {1, 2, 3}, y[3], s2[2] = {4, 5}, y2[2];
    if (!q || ns_b(m, 3, x, y) || y[2] != 6 || ns_c(m, 2, x, y) || y[1] != 3 || ns_a(m, 1, x, y) || y[0] != 1 ||
        ns_g(m, q, s2, y2) || y2[1] != 5)
        return printf("%s\\n", m ? ns_error(m) : err.message), 1;
    ns_seq_free(q);
    ns_free(m);
    return 0;
}
""")
        exe = os.path.join(d, "drv")
        r = run(["cc", "-Wall", "-Werror", "-I" + os.path.join(ROOT, "runtime"), "-I" + out, drv]
                + sorted(glob.glob(os.path.join(out, "*.o"))) + [LIBNESTRT, "-lm", "-lpthread", "-o", exe]
                + os.environ.get("NESTC_TEST_LDFLAGS", "").split())
        if r.returncode:
            raise Fail("the header does not compile: " + short(r.stderr))
        r = run([exe])
        if r.returncode:
            raise Fail("calls through the header: " + describe([exe], r))
    return single("header.dim_and_sequence_names", fn)


SRC_D = """
const D = 8
param ln: { weight: f32[D], bias: f32[D] }

@region(reuse_hash = 0)
fn norm(x: f32[*]) -> f32[*] {
  return layernorm(x, ln.weight, ln.bias)
}

export fn forward(tokens: f32[4, D], batch: f32[2, 4, D]) -> (f32[4, D], f32[2, 4, D]) {
  let t = norm(tokens)
  return t, norm(batch)
}
"""


def expect_build_error(m, out, sites, words, extra=()):
    """The build exits 1, prints an error naming every FILE:LINE:COL in sites (or FILE:LINE
    when COL is None) and every word, and writes nothing."""
    r = m.build(out, *extra, ok=False)
    problems = []
    if r.returncode != 1:
        problems.append("exit %d, expected 1" % r.returncode)
    if "error" not in r.stderr:
        problems.append("no error message")
    base = os.path.basename(m.src)
    for line, col in sites:
        pat = r"%s:%d:%s" % (re.escape(base), line, col if col else r"\d+")
        if not re.search(pat, r.stderr):
            problems.append("message does not name %s:%d%s" % (base, line, ":%d" % col if col else ""))
    for w in words:
        if w not in r.stderr:
            problems.append("message does not mention %r" % w)
    if listdir(out):
        problems.append("files written: %s" % listdir(out))
    if problems:
        raise Fail("; ".join(problems) + " [stderr: %s]" % short(r.stderr, 4))
    return r


@check("region.d_reuse_hash_conflict")
def region_d():
    # The language has no dtype-generic tensor argument (a region's argument dtypes are
    # declared), so calls grouped by reuse_hash can only differ in something code cannot
    # take at run time through the rank (f32[*]) or a compile-time scalar.
    def fn():
        m = region_model("region.d", SRC_D, {}, )
        text = open(m.src).read()
        l1, c1 = line_of(text, "norm(tokens)")
        l2, c2 = line_of(text, "norm(batch)")
        out = os.path.join(m.d, "out")
        expect_build_error(m, out, [(l1, c1), (l2, c2)], ["norm"])
    return single("region.d_reuse_hash_conflict_rank", fn)


SRC_D2 = """
const D = 8

@region(reuse_hash = 0)
fn scale(x: f32[T, D], k: int) -> f32[T, D] {
  return x * k
}

export fn forward(a: f32[4, D]) -> (f32[4, D], f32[4, D]) {
  return scale(a, 2), scale(a, 3)
}
"""


@check("region.d_reuse_hash_conflict_scalar")
def region_d2():
    # Two calls in one reuse_hash group that differ in a compile-time scalar: either an
    # error naming both call sites or correct values (never wrong values).
    def fn():
        m = region_model("region.d2", SRC_D2, rng_inputs(4, a=(4, 8)))
        out = os.path.join(m.d, "out")
        r = m.build(out, ok=False)
        if r.returncode == 0:
            values_ok(m.check_compiled(out))
            return
        text = open(m.src).read()
        l1, c1 = line_of(text, "scale(a, 2)")
        l2, c2 = line_of(text, "scale(a, 3)")
        expect_build_error(m, out, [(l1, c1), (l2, c2)], ["scale"])
    return single("region.d_reuse_hash_conflict_scalar", fn)


SRC_E = """
const D = 8

@region(reuse_hash = x)
fn f(x: f32[T, D]) -> f32[T, D] {
  return x + 1.0
}

export fn forward(a: f32[4, D]) -> f32[4, D] {
  return f(a)
}
"""


@check("region.e_reuse_hash_not_constant")
def region_e():
    def fn():
        m = region_model("region.e", SRC_E, {})
        text = open(m.src).read()
        l, c = line_of(text, "= x)")
        expect_build_error(m, os.path.join(m.d, "out"), [(l, c + 2)], ["reuse_hash"])
    return single("region.e_reuse_hash_not_constant", fn)


SRC_F = """
const D = 8
param w: f32[D, D]

@region(max_reuse_entries = 2)
fn block(x: f32[T, D]) -> f32[T, D] {
  return x + relu(x @ w)
}

export fn forward(a: f32[4, D], b: f32[8, D], c: f32[16, D]) -> (f32[4, D], f32[8, D], f32[16, D]) {
  let ya = block(a)
  let yb = block(b)
  let yc = block(c)
  return ya, yb, yc
}
"""


@check("region.f_max_reuse_entries")
def region_f():
    m = region_model("region.f", SRC_F, rng_inputs(5, a=(4, 8), b=(8, 8), c=(16, 8)))
    text = open(m.src).read()
    line, col = line_of(text, "block(c)")
    res = []

    def warn():
        out = os.path.join(m.d, "out")
        r = m.build(out)
        problems = []
        pat = r"m\.nest:%d:%d: warning: .*" % (line, col)
        w = re.search(pat, r.stderr)
        if not w:
            problems.append("no warning at m.nest:%d:%d" % (line, col))
        else:
            msg = w.group(0)
            if "block" not in msg or "2" not in msg.split("warning:", 1)[1]:
                problems.append("warning does not name the region and the limit: %s" % msg)
        objs = objects(out)
        if objs != ["m.block.0.o", "m.block.1.o", "m.o"]:
            problems.append("objects %s, expected two variant objects and m.o" % objs)
        if problems:
            raise Fail("; ".join(problems) + " [stderr: %s]" % short(r.stderr, 4))
        j = json.loads(nestc("report", m.src, "--format=json", "-w").stdout)
        inl = j.get("totals", {}).get("inlined_calls")
        if inl != 1:
            raise Fail("JSON report: inlined_calls %r, expected 1" % inl)
        values_ok(m.check_compiled(out, labels=["T=4", "T=8", "T=16_inline"]))
    res += single("region.f_max_reuse_entries.warning_and_values", warn)

    def werror():
        out = os.path.join(m.d, "out_werror")
        expect_build_error(m, out, [(line, col)], ["block"], extra=["-Werror"])
    res += single("region.f_max_reuse_entries.werror_no_files", werror)
    return res


SRC_G = """
const D = 8
param w: f32[D, D]
param v: f32[D]

@region
fn inner(x: f32[T, D]) -> f32[T, D] {
  return tanh(x @ w) + v
}

@region
fn middle(x: f32[T, D]) -> f32[T, D] {
  return inner(x) * 0.5 + inner(x * 2.0)
}

@region
fn outer(x: f32[T, D]) -> f32[T, D] {
  let a = middle(x)
  let b = middle(concat([x, a], axis=0))
  return a + b[0:T] - b[T:2 * T]
}

export fn forward(x: f32[4, D], y: f32[6, D]) -> (f32[4, D], f32[6, D]) {
  return outer(outer(x)), outer(y)
}
"""


@check("region.g_three_levels")
def region_g():
    def fn():
        m = region_model("region.g", SRC_G, rng_inputs(6, x=(4, 8), y=(6, 8)))
        out = os.path.join(m.d, "out")
        m.build(out, "--report=json", "--report-file", os.path.join(m.d, "report.json"))
        rep = json.load(open(os.path.join(m.d, "report.json")))
        nvar = {r["name"]: len(r["variants"]) for r in rep["regions"]}
        # outer: T=4, 6; middle: T=4, 8, 6, 12; inner: the same four
        if nvar != {"inner": 4, "middle": 4, "outer": 2}:
            raise Fail("variants per region %s, expected inner 4, middle 4, outer 2" % nvar)
        want = sorted(["m.o"] + ["m.%s.%d.o" % (r, k) for r, n in nvar.items() for k in range(n)])
        expect_objects(out, want)
        reported = sorted(["m.o"] + [v["object"] for v in rep["variants"]])
        if reported != want:
            raise Fail("report's objects %s, expected %s" % (reported, want))
        values_ok(m.check_compiled(out))
    return single("region.g_three_levels", fn)


SRC_H = """
const D = 8

@region
fn scale(x: f32[T, D], k: int, s: float) -> f32[T, D] {
  return x * k + f32(k) * s
}

export fn forward(a: f32[4, D]) -> f32[4, D] {
  return scale(a, 2, 0.5) + scale(a, 3, 0.5) + scale(a, 2, 0.5) + scale(a, 2, 0.25) + scale(a, 3, 0.5)
}
"""


@check("region.h_scalar_specialisation")
def region_h():
    def fn():
        m = region_model("region.h", SRC_H, rng_inputs(7, a=(4, 8)))
        out = os.path.join(m.d, "out")
        m.build(out)
        # distinct (k, s): (2, .5), (3, .5), (2, .25)
        expect_objects(out, ["m.o", "m.scale.0.o", "m.scale.1.o", "m.scale.2.o"])
        values_ok(m.check_compiled(out))
    return single("region.h_scalar_specialisation", fn)


SRC_I = """
const D = 8

@region(options = { opt_level: 2, unroll: true })
fn f(x: f32[T, D]) -> f32[T, D] {
  return x + 1.0
}

export fn forward(a: f32[4, D]) -> f32[4, D] {
  return f(a)
}
"""


@check("region.i_unknown_option")
def region_i():
    def fn():
        m = region_model("region.i", SRC_I, {})
        text = open(m.src).read()
        l, c = line_of(text, "unroll")
        expect_build_error(m, os.path.join(m.d, "out"), [(l, c)], ["unroll"])
    return single("region.i_unknown_option", fn)


@check("region.j_no_regions")
def region_j():
    def fn():
        m = region_model("region.j", SRC_G, rng_inputs(8, x=(4, 8), y=(6, 8)))
        out = os.path.join(m.d, "out")
        m.build(out, "--no-regions")
        expect_objects(out, ["m.o"])
        values_ok(m.check_compiled(out))
    return single("region.j_no_regions", fn)


SRC_HALF = """
param w1: f32[64, 96]
param b1: f32[96]
param w2: f32[96, 32]

export fn forward(x: f32[8, 64]) -> f32[8, 32] {
  return relu(x @ w1 + b1) @ w2
}
"""


@check("weights.half_precision")
def weights_half():
    """F16 and BF16 tensors bind f32 params, widened exactly at open: the interpreter
    against NumPy on the widened values, compiled code (its matrices packed from the
    widened copies) against the interpreter, read and mapped (NESTRT_MMAP=1)."""
    def fn():
        rng = np.random.default_rng(16)
        w1 = (rng.standard_normal((64, 96)) * 0.2).astype(np.float16)
        b1 = (rng.standard_normal(96).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        w2 = (rng.standard_normal((96, 32)) * 0.2).astype(np.float16)
        x = rng.standard_normal((8, 64)).astype(np.float32)
        m = region_model("weights.half", SRC_HALF, {"x": x})
        path = os.path.join(m.d, "half.safetensors")
        write_safetensors(path, [("w1", w1), ("b1", b1, "BF16"), ("w2", w2)])
        m._weights = path
        b1f = (b1.astype(np.uint32) << 16).view(np.float32)
        want = np.maximum(x.astype(np.float64) @ w1.astype(np.float64) + b1f, 0) @ w2.astype(np.float64)
        e = type("E", (), {"name": "forward", "outputs": [None]})
        ref = np.load(m.reference(e)[0])
        if not np.allclose(ref, want, rtol=1e-5, atol=1e-5):
            raise Fail("interpreter: max |diff| %g from NumPy" % np.abs(ref - want).max())
        out = os.path.join(m.d, "out")
        m.build(out)
        values_ok(m.check_compiled(out))
        values_ok(m.check_compiled(out, tag="mapped", env=dict(os.environ, NESTRT_MMAP="1")))
    return single("weights.half_precision", fn)


SRC_HALF_PARAMS = """
param w1: f16[64, 96]
param b1: bf16[96]
param w2: f32[96, 32]

export fn forward(x: f32[8, 64]) -> f32[8, 32] {
  return relu(x @ f32(w1) + f32(b1)) @ w2
}
"""


@check("weights.half_params")
def weights_half_params():
    """F16 and BF16 tensors bind f16 and bf16 params as they are, and an f32 param
    (w2, an F16 tensor) widened: the interpreter against NumPy, compiled code against
    the interpreter, read and mapped (NESTRT_MMAP=1)."""
    def fn():
        rng = np.random.default_rng(17)
        w1 = (rng.standard_normal((64, 96)) * 0.2).astype(np.float16)
        b1 = (rng.standard_normal(96).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        w2 = (rng.standard_normal((96, 32)) * 0.2).astype(np.float16)
        x = rng.standard_normal((8, 64)).astype(np.float32)
        m = region_model("weights.half_params", SRC_HALF_PARAMS, {"x": x})
        path = os.path.join(m.d, "half.safetensors")
        write_safetensors(path, [("w1", w1), ("b1", b1, "BF16"), ("w2", w2)])
        m._weights = path
        b1f = (b1.astype(np.uint32) << 16).view(np.float32)
        want = np.maximum(x.astype(np.float64) @ w1.astype(np.float64) + b1f, 0) @ w2.astype(np.float64)
        e = type("E", (), {"name": "forward", "outputs": [None]})
        ref = np.load(m.reference(e)[0])
        if not np.allclose(ref, want, rtol=1e-5, atol=1e-5):
            raise Fail("interpreter: max |diff| %g from NumPy" % np.abs(ref - want).max())
        out = os.path.join(m.d, "out")
        m.build(out)
        values_ok(m.check_compiled(out))
        values_ok(m.check_compiled(out, tag="mapped", env=dict(os.environ, NESTRT_MMAP="1")))
    return single("weights.half_params", fn)


# One model built for three CPUs (native, AVX2's panels of another width, SSE2's)
# under three names, linked into one program over one weights object: each build
# packs its matrices in its own panel width, and a copy packed for one is never
# read by another. In both orders of creation, and called again after all exist.
SRC_CPUS = """
param w1: f32[40, 100]
param w2: f32[100, 37]
export fn forward(x: f32[5, 40]) -> f32[5, 37] {
  return relu(x @ w1) @ w2
}
"""

DRV_CPUS = r"""
#include <stdio.h>
#include <string.h>
#include "mna.h"
#include "mhw.h"
#include "mss.h"
#include "nestrt.h"
#define MAKE(kind) static int run_##kind(nestrt_weights *w, const float *x, float *out, kind **keep) { \
	nestrt_error err; kind *m = kind##_new(w, &err); \
	if (!m) { fprintf(stderr, #kind "_new: %s\n", err.message); return 1; } \
	*keep = m; return kind##_forward(m, x, out); }
MAKE(mna) MAKE(mhw) MAKE(mss)
static int save(const char *tag, const char *kind, const float *out)
{
	char p[256]; nestrt_error err; int64_t shape[2] = {5, 37};
	snprintf(p, sizeof p, "%s_%s.npy", tag, kind);
	return nestrt_npy_write(p, NESTRT_F32, 2, shape, out, &err);
}
int main(int argc, char **argv)
{
	nestrt_error err; int dt, rank; int64_t shape[8]; void *xv;
	if (nestrt_npy_read(argv[2], &dt, &rank, shape, &xv, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
	const float *x = xv;
	static float out[5 * 37];
	for (int order = 0; order < 2; order++) {
		nestrt_weights *w = nestrt_weights_open(argv[1], &err);
		if (!w) { fprintf(stderr, "%s\n", err.message); return 1; }
		mna *a = NULL; mhw *h = NULL; mss *s = NULL;
		const char *tag = order ? "rev" : "fwd";
		int rc = 0;
		if (order == 0) {
			rc |= run_mna(w, x, out, &a) || save(tag, "na", out);
			rc |= run_mhw(w, x, out, &h) || save(tag, "hw", out);
			rc |= run_mss(w, x, out, &s) || save(tag, "ss", out);
		} else {
			rc |= run_mss(w, x, out, &s) || save(tag, "ss", out);
			rc |= run_mhw(w, x, out, &h) || save(tag, "hw", out);
			rc |= run_mna(w, x, out, &a) || save(tag, "na", out);
		}
		/* all three alive: each again */
		rc |= !a || mna_forward(a, x, out) || save(tag, "na2", out);
		rc |= !h || mhw_forward(h, x, out) || save(tag, "hw2", out);
		rc |= !s || mss_forward(s, x, out) || save(tag, "ss2", out);
		if (rc) { fprintf(stderr, "a call failed: %s\n", nestrt_model_error(NULL)); return 1; }
		mna_free(a); mhw_free(h); mss_free(s);
		nestrt_weights_close(w);
	}
	return 0;
}
"""


@check("weights.shared_across_cpu_builds")
def weights_shared_cpus():
    def fn():
        m = region_model("weights.cpus", SRC_CPUS, rng_inputs(41, x=(5, 40)))
        objs = []
        for name, cpu in (("mna", None), ("mhw", "haswell"), ("mss", "x86-64")):
            out = os.path.join(m.d, name)
            nestc("build", m.src, "-o", out, "--name", name, *(("--cpu", cpu) if cpu else ()))
            objs += sorted(glob.glob(os.path.join(out, "*.o")))
        e = type("E", (), {"name": "forward", "outputs": [None]})
        ref = np.load(m.reference(e)[0])
        src = write(os.path.join(m.d, "cpus.c"), DRV_CPUS)
        exe = os.path.join(m.d, "cpus")
        cmd = [CC, "-O1", "-std=c11", "-I" + RUNTIME] + ["-I" + os.path.join(m.d, n) for n in ("mna", "mhw", "mss")]
        cmd += [src] + objs + [LIBNESTRT, "-lm", "-lpthread", "-o", exe] + LINK_FLAGS
        r = run(cmd)
        if r.returncode != 0:
            raise Fail("driver does not compile or link: " + describe(cmd, r))
        r = run([exe, m.weights, m.inputs["x"]], cwd=m.d)
        if r.returncode != 0:
            raise Fail("program: " + describe([exe], r))
        bad = []
        for tag in ("fwd", "rev"):
            for kind in ("na", "hw", "ss", "na2", "hw2", "ss2"):
                got = np.load(os.path.join(m.d, "%s_%s.npy" % (tag, kind)))
                msg = compare(got, ref, "%s %s" % (tag, kind))
                if msg:
                    bad.append(msg)
        if bad:
            raise Fail("; ".join(bad))
    return single("weights.shared_across_cpu_builds", fn)


SRC_LOOP = """
const L = 5
const D = 8
type Lin = { weight: f32[D, D], bias: f32[D] }
param layers: Lin[L]
param extra: Lin

@region
fn layer(x: f32[T, D], p: Lin) -> f32[T, D] {
  return x + tanh(x @ p.weight + p.bias)
}

export fn forward(a: f32[4, D]) -> (f32[4, D], f32[4, D], f32[4, D], f32[4, D]) {
  let x = a
  for i in 0..L {
    x = layer(x, layers[i])
  }
  let y = a
  for i in 0..L {
    y = layer(y, layers[L - 1 - i])
  }
  let z = a
  for i in 0..L {
    z = layer(z, layers[i % 2]) * 0.5
  }
  let u = layer(layer(layer(a, extra), layers[2]), extra)
  return x, y, z, u
}
"""


@check("region.loop_chains")
def region_loop():
    # chains of calls of one variant with params in order, reversed, repeated, mixed
    def fn():
        m = region_model("region.loop", SRC_LOOP, rng_inputs(10, a=(4, 8)))
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.layer.0.o"])
        values_ok(m.check_compiled(out, labels=["in_order", "reversed", "repeated", "mixed"]))
    return single("region.loop_chains", fn)


SRC_DTYPES = """
const D = 6

@region
fn stats(x: f64[T, D], k: i32[T], m: bool[T, D]) -> (f64[T], i64[T], i32[T], bool[T, D]) {
  let s = sum(x * f64(m), axis=1)
  return s, argmax(x, axis=1), k * 2 + i32(sum(i64(m), axis=1)), m && (x > 0.0)
}

export fn forward(x: f64[5, D], k: i32[5], mask: bool[5, D]) -> (f64[5], i64[5], i32[5], bool[5, D]) {
  let a, b, c, d = stats(x, k, mask)
  return a, b, c, d
}
"""


@check("region.dtypes_and_results")
def region_dtypes():
    def fn():
        rng = np.random.default_rng(11)
        m = region_model("region.dtypes", SRC_DTYPES,
                         {"x": rng.uniform(-1, 1, (5, 6)), "k": rng.integers(-9, 9, 5).astype(np.int32),
                          "mask": rng.random((5, 6)) < 0.5})
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.stats.0.o"])
        values_ok(m.check_compiled(out, labels=["f64", "i64", "i32", "bool"]))
    return single("region.dtypes_and_results", fn)


SRC_OPTS = """
const D = 8
param w: f32[D, D]

@region(options = { opt_level: 0 })
fn a0(x: f32[T, D]) -> f32[T, D] {
  return gelu(x @ w) + softmax(x)
}

@region(options = { opt_level: 3, fast_math: true })
fn a3(x: f32[T, D]) -> f32[T, D] {
  return gelu(x @ w) - softmax(x)
}

export fn forward(a: f32[4, D]) -> f32[4, D] {
  return a3(a0(a))
}
"""


@check("region.options_values")
def region_opts():
    def fn():
        m = region_model("region.options", SRC_OPTS, rng_inputs(9, a=(4, 8)))
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.a0.0.o", "m.a3.0.o"])
        values_ok(m.check_compiled(out))
    return single("region.options_values", fn)


# ----------------------------------------------------------------------------- 3b. report figures and fingerprints
# (issue #12: values the report shows, compared exactly, so that moving code between files
# cannot change them unnoticed)


def run_compiled(m, out, tag="np", env=None, stderr=False):
    """Runs the compiled entry of the build in `out` (no interpreter); returns its outputs
    (and what it printed on stderr, with stderr=True)."""
    e = m.entry(out)
    c = m.call(e, tag)
    exe = compile_driver(m.d, [c], [m.stem], [out], sorted(glob.glob(os.path.join(out, "*.o"))),
                         name="driver_" + tag)
    r = run([exe], env=env)
    if r.returncode != 0:
        raise Fail("compiled program: " + describe([exe], r))
    got = [np.load(p) for p in c.outputs]
    return (got, r.stderr) if stderr else got


def report_json(m, *extra):
    r = nestc("report", m.src, "--format=json", *defs(m.defines), *extra)
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        raise Fail("the JSON report does not parse: %s" % e)


SRC_CALLS = """
const D = 8
param w: f32[D, D]

@region
fn inner(x: f32[T, D]) -> f32[T, D] {
  return tanh(x @ w)
}

@region
fn outer(x: f32[T, D]) -> f32[T, D] {
  return inner(x) + inner(x * 0.5)
}

export fn forward(a: f32[4, D], b: f32[2, D]) -> (f32[4, D], f32[2, D]) {
  let x = a
  for i in 0..3 {
    x = outer(x)
  }
  return outer(x) + inner(x), inner(b)
}
"""


@check("report.variant_calls")
def report_variant_calls():
    # outer: 3 calls in a loop + 1 = 4 (2 call sites); inner: 2 sites inside outer (4 runs
    # each) + 1 in forward = 9 calls of inner.0 (3 call sites), and inner(b) for inner.1.
    # variants[].calls counts calls, not call sites.
    want = {"outer.0": 4, "inner.0": 9, "inner.1": 1}

    def json_calls():
        m = region_model("report.calls", SRC_CALLS, rng_inputs(21, a=(4, 8), b=(2, 8)))
        j = report_json(m)
        got = {v["name"]: v["calls"] for v in j["variants"]}
        if got != want:
            raise Fail("JSON variants[].calls %s, expected %s" % (got, want))
        regs = {r["name"]: r["calls"] for r in j["regions"]}
        if regs != {"inner": 10, "outer": 4}:
            raise Fail("JSON regions[].calls %s, expected {'inner': 10, 'outer': 4}" % regs)
        sites = {}
        for c in j["calls"]:
            site = os.path.basename(c["site"])
            sites[site] = sites.get(site, 0) + c["count"]
        text = open(m.src).read()
        exp = {}
        for needle, n, count in (("outer(x)", 1, 3), ("outer(x)", 2, 1), ("inner(x)", 1, 4),
                                 ("inner(x * 0.5)", 1, 4), ("inner(x)", 2, 1), ("inner(b)", 1, 1)):
            l, c = line_of(text, needle, n)
            exp["m.nest:%d:%d" % (l, c)] = count
        if sites != exp:
            raise Fail("JSON calls[] counts by site %s, expected %s" % (sites, exp))
        tot = j["totals"]
        if (tot["region_calls"], tot["unique_variants"], tot["inlined_calls"]) != (14, 3, 0):
            raise Fail("JSON totals %s, expected 14 region calls, 3 unique variants, 0 inlined" % tot)

    def text_calls():
        m = region_model("report.calls_text", SRC_CALLS, {})
        t = nestc("report", m.src).stdout
        problems = []
        for name, n in sorted(want.items()):
            mm = re.search(r"^  variant %s  fingerprint [0-9a-f]{16}  (\d+) calls?$" % re.escape(name), t, re.M)
            if not mm or int(mm.group(1)) != n:
                problems.append("text: variant %s shows %s calls, expected %d"
                                % (name, mm and mm.group(1), n))
        for region, line in (("inner", "10 calls -> 2 variants"), ("outer", "4 calls -> 1 variant")):
            blk = re.search(r"^region %s\b.*?(?=^region |^totals|\Z)" % region, t, re.M | re.S)
            if not blk or ("\n  %s\n" % line) not in blk.group(0):
                problems.append("text: no '%s' for region %s" % (line, region))
        if "totals: 14 region calls, 3 unique variants, 0 inlined, reuse ratio 4.67" not in t:
            problems.append("text: totals line missing or wrong")
        dot = nestc("report", m.src, "--format=dot").stdout
        for name, n in sorted(want.items()):
            if '"%s" [label="%s\\n%d calls"];' % (name, name, n) not in dot:
                problems.append("dot: no node %s with %d calls" % (name, n))
        if problems:
            raise Fail("; ".join(problems) + "\n    " + short(t, 40))

    def values():
        m = region_model("report.calls_values", SRC_CALLS, rng_inputs(21, a=(4, 8), b=(2, 8)))
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.outer.0.o", "m.inner.0.o", "m.inner.1.o"])
        values_ok(m.check_compiled(out))

    return (single("report.variant_calls_json", json_calls) + single("report.variant_calls_text", text_calls)
            + single("report.variant_calls_values", values))


SRC_FAST = """
const D = 8
param w: f32[D, D]

@region
fn plain(x: f32[T, D]) -> f32[T, D] {
  return x + tanh(x @ w) * sigmoid(x)
}

@region(options = { fast_math: true })
fn fast(x: f32[T, D]) -> f32[T, D] {
  return x + tanh(x @ w) * sigmoid(x)
}

@region
fn again(x: f32[T, D]) -> f32[T, D] {
  return x + tanh(x @ w) * sigmoid(x)
}

export fn forward(a: f32[4, D]) -> (f32[4, D], f32[4, D], f32[4, D], f32[4, D]) {
  return plain(a), fast(a), again(a), fast(a * 2.0)
}
"""


@check("region.options_and_shared_bodies")
def region_fast_shared():
    # Three regions with one body: plain and again share a variant, fast (fast_math) must
    # not: the options are part of the fingerprint.
    def fn():
        m = region_model("region.fast_shared", SRC_FAST, rng_inputs(22, a=(4, 8)))
        j = report_json(m)
        vs = {v["name"]: v for v in j["variants"]}
        if sorted(vs) != ["fast.0", "plain.0"]:
            raise Fail("variants %s, expected fast.0 and plain.0 (fast_math makes fast's code "
                       "differ from plain's)" % sorted(vs))
        if vs["fast.0"]["fingerprint"] == vs["plain.0"]["fingerprint"]:
            raise Fail("fast.0 and plain.0 have the same fingerprint %s" % vs["fast.0"]["fingerprint"])
        if (vs["plain.0"]["calls"], vs["fast.0"]["calls"]) != (2, 2):
            raise Fail("calls plain.0 %s, fast.0 %s, expected 2 and 2"
                       % (vs["plain.0"]["calls"], vs["fast.0"]["calls"]))
        regs = {r["name"]: r for r in j["regions"]}
        got = {n: (r["variants"], r["options"]["fast_math"]) for n, r in regs.items()}
        want = {"plain": (["plain.0"], False), "fast": (["fast.0"], True), "again": (["plain.0"], False)}
        if got != want:
            raise Fail("regions (variants, fast_math) %s, expected %s" % (got, want))
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.plain.0.o", "m.fast.0.o"])
        values_ok(m.check_compiled(out, labels=["plain", "fast", "again", "fast2"]))
    return single("region.options_and_shared_bodies", fn)


# A region's option winograd: false: its 3x3 convolutions are summed directly,
# another region with the same body keeps Winograd; the option is part of the
# fingerprint (two variants), shown in the reports, and both give the values
# (check_compiled: the interpreter's, at the usual tolerance).
SRC_WINO_OPT = """
param w: f32[64, 32, 3, 3]

@region
fn wino(x: f32[1, 32, 20, 20]) -> f32[1, 64, 20, 20] {
  return relu(conv2d(x, w, padding=1))
}

@region(options = { winograd: false })
fn direct(x: f32[1, 32, 20, 20]) -> f32[1, 64, 20, 20] {
  return relu(conv2d(x, w, padding=1))
}

export fn forward(a: f32[1, 32, 20, 20]) -> (f32[1, 64, 20, 20], f32[1, 64, 20, 20]) {
  return wino(a), direct(a)
}
"""


@check("region.option_winograd")
def region_option_winograd():
    def fn():
        m = region_model("region.option_winograd", SRC_WINO_OPT, rng_inputs(41, a=(1, 32, 20, 20)))
        j = report_json(m)
        vs = sorted(v["name"] for v in j["variants"])
        if vs != ["direct.0", "wino.0"]:
            raise Fail("variants %s, expected direct.0 and wino.0 (the option changes the code)" % vs)
        got = {r["name"]: r["options"]["winograd"] for r in j["regions"]}
        if got != {"wino": True, "direct": False}:
            raise Fail("options.winograd %s, expected wino true, direct false" % got)
        text = nestc("report", m.src, *defs(m.defines)).stdout
        if not re.search(r"^region direct .*, no winograd\)$", text, re.M) or ", no winograd" in text.split("region direct")[0]:
            raise Fail("the text report should mark region direct, and only it, 'no winograd':\n" + text)
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.wino.0.o", "m.direct.0.o"])
        for obj, want in (("m.wino.0.o", True), ("m.direct.0.o", False)):
            syms = subprocess.run(["nm", "--defined-only", os.path.join(out, obj)], capture_output=True, text=True,
                                  check=True).stdout
            if bool(re.search(r" wg\.task\.\d+$", syms, re.M)) != want:
                raise Fail("%s %s a Winograd convolution" % (obj, "lacks" if want else "has"))
        values_ok(m.check_compiled(out, labels=["wino", "direct"]))
    return single("region.option_winograd", fn)


SRC_SHIFT = """
const D = 8

@region(reuse_hash = 0)
fn shift(x: i32[T, D], k: int) -> i32[T, D] {
  return x * 3 + k
}

export fn forward(a: i32[4, D]) -> (i32[4, D], i32[4, D]) {
  return shift(a, 2), shift(a, 3)
}
"""

SRC_SHIFT_OK = """
const D = 8

@region(reuse_hash = k)
fn shift(x: i32[T, D], k: int) -> i32[T, D] {
  return x * 3 + k
}

export fn forward(a: i32[4, D], b: i32[6, D]) -> (i32[4, D], i32[6, D], i32[4, D], i32[6, D]) {
  return shift(a, 2), shift(b, 2), shift(a, 3), shift(b, 3) - shift(b, 2)
}
"""


def shift_inputs(seed, **shapes):
    rng = np.random.default_rng(seed)
    return {n: rng.integers(-1000, 1000, s).astype(np.int32) for n, s in shapes.items()}


@check("region.reuse_hash_int_constants")
def region_shift():
    def grouped():
        # reuse_hash = 0 groups shift(a, 2) with shift(a, 3): an integer constant cannot be
        # taken at run time, so an error naming both calls, or (were it supported) the right
        # values; never one variant adding the same constant twice.
        ins = shift_inputs(23, a=(4, 8))
        m = region_model("region.shift", SRC_SHIFT, ins)
        out = os.path.join(m.d, "out")
        r = m.build(out, ok=False)
        if r.returncode == 0:
            a = ins["a"].astype(np.int64)
            got = run_compiled(m, out)
            for k, g in zip((2, 3), got):
                if g.dtype != np.int32 or not np.array_equal(g, (a * 3 + k).astype(np.int32)):
                    raise Fail("shift(a, %d) computes %s, expected %s (objects %s)"
                               % (k, g.ravel()[:4], (a * 3 + k).ravel()[:4], objects(out)))
            return
        text = open(m.src).read()
        l1, c1 = line_of(text, "shift(a, 2)")
        l2, c2 = line_of(text, "shift(a, 3)")
        expect_build_error(m, out, [(l1, c1), (l2, c2)], ["shift", "constant"])

    def separate():
        # reuse_hash = k: one variant per constant, T taken at run time; values against NumPy
        ins = shift_inputs(24, a=(4, 8), b=(6, 8))
        m = region_model("region.shift_ok", SRC_SHIFT_OK, ins)
        j = report_json(m)
        vs = {v["name"]: (v["reuse_hash"], v["calls"], v["runtime_dims"] > 0) for v in j["variants"]}
        if vs != {"shift.0": (2, 3, True), "shift.1": (3, 2, True)}:
            raise Fail("variants (reuse_hash, calls, has run-time dims) %s, expected shift.0 (2, 3, "
                       "True) and shift.1 (3, 2, True)" % vs)
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.shift.0.o", "m.shift.1.o"])
        a, b = ins["a"].astype(np.int64), ins["b"].astype(np.int64)
        want = [a * 3 + 2, b * 3 + 2, a * 3 + 3, (b * 3 + 3) - (b * 3 + 2)]
        got = run_compiled(m, out)
        for lab, g, w in zip(["a+2", "b+2", "a+3", "b+3-(b+2)"], got, want):
            if g.dtype != np.int32 or not np.array_equal(g, w.astype(np.int32)):
                raise Fail("%s: %s %s, expected %s" % (lab, g.dtype, g.ravel()[:6], w.ravel()[:6]))
        values_ok(m.check_compiled(out))

    return (single("region.reuse_hash_int_constants_grouped", grouped)
            + single("region.reuse_hash_int_constants_separate", separate))


SRC_FP = """
const D = 8
param w: f32[D, D]

@region
fn base(x: f32[4, D]) -> f32[4, D] {
  return softmax(tanh(x @ w) * f32(i32(3)), axis=0)
}

@region
fn same(y: f32[4, D]) -> f32[4, D] {
  return softmax(tanh(y @ w) * f32(i32(3)), axis=0)
}

@region
fn op(x: f32[4, D]) -> f32[4, D] {
  return softmax(sigmoid(x @ w) * f32(i32(3)), axis=0)
}

@region
fn cdtype(x: f32[4, D]) -> f32[4, D] {
  return softmax(tanh(x @ w) * f32(i64(3)), axis=0)
}

@region
fn attr(x: f32[4, D]) -> f32[4, D] {
  return softmax(tanh(x @ w) * f32(i32(3)), axis=1)
}

@region
fn cvalue(x: f32[4, D]) -> f32[4, D] {
  return softmax(tanh(x @ w) * f32(i32(4)), axis=0)
}

export fn forward(a: f32[4, D]) -> (f32[4, D], f32[4, D], f32[4, D], f32[4, D], f32[4, D],
                                    f32[4, D]) {
  return base(a), same(a), op(a), cdtype(a), attr(a), cvalue(a)
}
"""

# the same region as `base`, alone, under other names
SRC_FP_ALONE = """
const D = 8
param w: f32[D, D]

@region
fn renamed(z: f32[4, D]) -> f32[4, D] {
  return softmax(tanh(z @ w) * f32(i32(3)), axis=0)
}

export fn main(q: f32[4, D]) -> f32[4, D] {
  return renamed(q)
}
"""

# XXH3-128 of each variant's canonical text (src/regions.c serialise, src/ir.c node_text)
# for FP_TARGET: a change of these is a change of every compile-cache key.
FP_TARGET = "x86_64-linux-gnu"
FP_GOLDEN = {
    "base.0": "3c99959bf1ed82d3a7bfb860c21ccc0f",
    "op.0": "5a151d4114e774546b177007cdbc2422",
    "cdtype.0": "e429a750c10ce928518f68b5fb438b87",
    "attr.0": "99d6f1eb237afba9dcd166744374ee32",
    "cvalue.0": "3e6f9c2f27b6c51cece63743efc4f3f1",
}
# the variants of SRC_CALLS (a fingerprint covers the variants a region calls)
FP_GOLDEN_CALLS = {
    "inner.0": "49bc7cee1fdc2a0cc348274ea5753438",
    "inner.1": "760d2b1db214abcd60cb3b4d295454a3",
    "outer.0": "a420f114e4b3a7e35e5cdc402a981108",
}


@check("region.fingerprints")
def region_fingerprints():
    def differ():
        m = region_model("region.fp", SRC_FP, rng_inputs(25, a=(4, 8)))
        j = report_json(m)
        regs = {r["name"]: r["variants"] for r in j["regions"]}
        want = {"base": ["base.0"], "same": ["base.0"], "op": ["op.0"], "cdtype": ["cdtype.0"],
                "attr": ["attr.0"], "cvalue": ["cvalue.0"]}
        if regs != want:
            raise Fail("regions' variants %s, expected %s" % (regs, want))
        fps = {v["name"]: v["fingerprint"] for v in j["variants"]}
        if len(set(fps.values())) != len(fps):
            raise Fail("fingerprints not distinct: %s" % fps)
        for n, f in fps.items():
            if not re.fullmatch(r"[0-9a-f]{32}", f):
                raise Fail("fingerprint of %s is %r, not 32 hex digits" % (n, f))
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o"] + ["m.%s.o" % v for v in FP_GOLDEN])
        values_ok(m.check_compiled(out, labels=["base", "same", "op", "cdtype", "attr", "cvalue"]))

    def identical():
        a = report_json(region_model("region.fp_base", SRC_FP, {}))
        b = report_json(region_model("region.fp_alone", SRC_FP_ALONE, {}, stem="other"))
        fa = {v["name"]: v["fingerprint"] for v in a["variants"]}["base.0"]
        fb = [v["fingerprint"] for v in b["variants"]]
        if fb != [fa]:
            raise Fail("the same region under other names (region, argument, model, entry) has "
                       "fingerprints %s, expected [%s] as base.0" % (fb, fa))

    def golden():
        # for a named target: the host's fingerprints hash its /proc/cpuinfo (host_id)
        tgt = "--target=" + FP_TARGET
        got = {v["name"]: v["fingerprint"]
               for v in report_json(region_model("region.fp_golden", SRC_FP, {}), tgt)["variants"]}
        if got != FP_GOLDEN:
            raise Fail("fingerprints %s, expected %s" % (got, FP_GOLDEN))
        got = {v["name"]: v["fingerprint"]
               for v in report_json(region_model("region.fp_golden2", SRC_CALLS, {}), tgt)["variants"]}
        if got != FP_GOLDEN_CALLS:
            raise Fail("fingerprints %s, expected %s" % (got, FP_GOLDEN_CALLS))
        # a build for that target has the same ones
        out = os.path.join(TMP, "region.fp_golden", "out")
        r = nestc("build", os.path.join(TMP, "region.fp_golden", "m.nest"), tgt, "--no-cache", "-o", out,
                  "--report=json", "--report-file", os.path.join(TMP, "region.fp_golden", "build.json"))
        with open(os.path.join(TMP, "region.fp_golden", "build.json")) as f:
            got = {v["name"]: v["fingerprint"] for v in json.load(f)["variants"]}
        if got != FP_GOLDEN:
            raise Fail("build --target's fingerprints %s, expected %s" % (got, FP_GOLDEN))
        # the host's differ from them
        host = {v["name"]: v["fingerprint"]
                for v in report_json(region_model("region.fp_golden_host", SRC_FP, {}))["variants"]}
        if set(host.values()) & set(FP_GOLDEN.values()):
            raise Fail("the host's fingerprints %s share some with %s's" % (host, FP_TARGET))
        # an unknown target is an error
        r = nestc("report", os.path.join(TMP, "region.fp_golden", "m.nest"), "--target=nosuch-none", ok=False)
        if r.returncode != 1 or "unknown target 'nosuch-none'" not in r.stderr:
            raise Fail("report --target=nosuch-none: exit %d, stderr %r" % (r.returncode, r.stderr))
        # the text report shows the first 16 hex digits
        t = nestc("report", os.path.join(TMP, "region.fp_golden", "m.nest"), tgt).stdout
        for name, f in FP_GOLDEN.items():
            if "  variant %s  fingerprint %s  " % (name, f[:16]) not in t:
                raise Fail("text report: no 'variant %s  fingerprint %s'" % (name, f[:16]))

    return (single("region.fingerprints_differ", differ) + single("region.fingerprints_identical", identical)
            + single("region.fingerprints_golden", golden))


# Elementwise math in f32, compiled, against float64 NumPy at a tolerance of a few ulp:
# tight enough that a constant wrong in its fourth digit (gelu_tanh's 0.044715 changes the
# result by up to 6e-6) fails. x covers [-4, 4] densely, with a tail that is not a
# multiple of the vector width.
X_MATH = np.concatenate([np.linspace(-4, 4, 161), np.array([-1.84, -1.5, 1.5, 1.84, 0.0, -0.0])]).astype(np.float32)

SRC_MATH = """
const N = %d

@region
fn acts(x: f32[N]) -> (f32[N], f32[N], f32[N], f32[N], f32[N], f32[N]) {
  return gelu_tanh(x), gelu(x), erf(x), silu(x), sigmoid(x), tanh(x)
}

export fn forward(x: f32[N]) -> (f32[N], f32[N], f32[N], f32[N], f32[N], f32[N],
                                 f32[N], f32[N], f32[N], f32[N], f32[N], f32[N]) {
  let a, b, c, d, e, f = acts(x)
  return a, b, c, d, e, f, gelu_tanh(x), gelu(x), erf(x), silu(x), sigmoid(x), tanh(x)
}
""" % len(X_MATH)


def math_refs(x):
    x = x.astype(np.float64)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    sig = 1.0 / (1.0 + np.exp(-x))
    return [("gelu_tanh", 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))),
            ("gelu", 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))), ("erf", erf(x)), ("silu", x * sig),
            ("sigmoid", sig), ("tanh", np.tanh(x))]


MATH_TOL = 1e-6   # |out - ref| <= MATH_TOL * max(1, |ref|), entry by entry


@check("math.f32_tight")
def math_f32_tight():
    def fn():
        m = region_model("math.f32", SRC_MATH, {"x": X_MATH})
        out = os.path.join(m.d, "out")
        m.build(out)
        got = run_compiled(m, out)
        refs = math_refs(X_MATH)
        bad = []
        for k, g in enumerate(got):
            name, ref = refs[k % len(refs)]
            where = "region" if k < len(refs) else "entry"
            if g.dtype != np.float32 or g.shape != ref.shape:
                bad.append("%s (%s): %s%s" % (name, where, g.dtype, g.shape))
                continue
            err = np.abs(g.astype(np.float64) - ref) / np.maximum(1.0, np.abs(ref))
            i = int(np.argmax(err))
            if not err[i] <= MATH_TOL:
                bad.append("%s (%s): error %.3g at x=%r (got %r, NumPy %r)"
                           % (name, where, err[i], float(X_MATH[i]), float(g[i]), float(ref[i])))
        if bad:
            raise Fail("; ".join(bad))
    return single("math.f32_tight_vs_numpy", fn)


# erf in f32 (a polynomial and exp_fast, codegen/elementwise.c) over the whole float range:
# every 4093rd bit pattern and the special values, against math.erf in float64, at most
# ERF_ULP units in the last place of the f32 result (2^-149 at the least); NaN stays NaN,
# +-inf give +-1 and -0 stays -0. Measured: 0.94 ulp (libm's erff: 0.81).
ERF_ULP = 2.0


def erf_sweep_inputs():
    bits = np.arange(0, 1 << 32, 4093, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    special = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 1.4e-45, -1.4e-45, 1.17549435e-38, 1.1754942e-38,
                        -1.1754942e-38, 0.927734375, np.nextafter(np.float32(0.927734375), np.float32(1)),
                        -0.927734375, 3.92, 3.93, -3.93, 9.0, 3.4028235e38], np.float32)
    return np.concatenate([x, special])


@check("math.erf_sweep")
def math_erf_sweep():
    def fn():
        x = erf_sweep_inputs()
        src = "export fn forward(x: f32[%d]) -> f32[%d] {\n  return erf(x)\n}\n" % (len(x), len(x))
        m = region_model("math.erf_sweep", src, {"x": x})
        out = os.path.join(m.d, "out")
        m.build(out)
        g = run_compiled(m, out)[0].astype(np.float64)
        with np.errstate(invalid="ignore"):  # signalling NaN bit patterns
            xd = x.astype(np.float64)
        fin = ~np.isnan(xd)
        ref = np.full(len(x), np.nan)
        ref[fin] = np.vectorize(math.erf, otypes=[np.float64])(xd[fin])
        if not np.array_equal(np.isnan(g), ~fin):
            raise Fail("NaN where the input is %s" % ("not NaN" if np.isnan(g[fin]).any() else "NaN but not out"))
        _, e = np.frexp(ref[fin])
        ulp = np.maximum(np.ldexp(1.0, e - 24), 2.0 ** -149)
        err = np.abs(g[fin] - ref[fin]) / ulp
        i = int(np.argmax(err))
        if not err[i] <= ERF_ULP:
            raise Fail("%.3f ulp at x=%r (got %r, math.erf %r)" % (err[i], float(x[fin][i]), float(g[fin][i]), ref[fin][i]))
        if not (np.signbit(g[x == 0]) == np.signbit(x[x == 0])).all():
            raise Fail("erf(-0) is not -0")
    return single("math.erf_sweep_ulp", fn)


# exp in f32 (codegen/elementwise.c, exp_fast: Cephes' reduction and polynomial in fused
# multiply-adds; softmax, sigmoid, tanh and erf are built on it) against NumPy's float64
# exp: every 4093rd bit pattern whose result is a normal f32 ([-87.3, 88.3]) and a dense
# grid of the same range, at most EXP_ULP units in the last place of the f32 result.
# Beyond it: below the range, a result in [0, FLT_MIN] (subnormals may flush to 0); -inf
# gives 0, +inf and 100 give +inf, NaN stays NaN, exp(0) is exactly 1. Measured: 0.97 ulp.
EXP_ULP = 1.5


@check("math.exp_sweep")
def math_exp_sweep():
    def fn():
        bits = np.arange(0, 1 << 32, 4093, dtype=np.uint64).astype(np.uint32)
        x = bits.view(np.float32)
        x = x[np.isfinite(x) & (x > -87.3) & (x < 88.3)]
        x = np.concatenate([x, np.linspace(-87.3, 88.3, 100001, dtype=np.float32)]).astype(np.float32)
        special = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, 100.0, -100.0, -87.5, -88.0, -1000.0], np.float32)
        xs = np.concatenate([x, special])
        src = "export fn forward(x: f32[%d]) -> f32[%d] {\n  return exp(x)\n}\n" % (len(xs), len(xs))
        m = region_model("math.exp_sweep", src, {"x": xs})
        out = os.path.join(m.d, "out")
        m.build(out)
        g = run_compiled(m, out)[0]
        gx, gs = g[:len(x)].astype(np.float64), g[len(x):]
        ref = np.exp(x.astype(np.float64))
        _, e = np.frexp(ref)
        err = np.abs(gx - ref) / np.ldexp(1.0, e - 24)
        i = int(np.argmax(err))
        if not err[i] <= EXP_ULP:
            raise Fail("%.3f ulp at x=%r (got %r, NumPy %r)" % (err[i], float(x[i]), float(gx[i]), ref[i]))
        tiny = float(np.finfo(np.float32).tiny)
        want = [(0, lambda v: v == 0), (1, lambda v: v == np.inf), (2, np.isnan), (3, lambda v: v == 1),
                (4, lambda v: v == 1), (5, lambda v: v == np.inf), (6, lambda v: 0 <= v <= tiny),
                (7, lambda v: 0 <= v <= tiny), (8, lambda v: 0 <= v <= tiny), (9, lambda v: v == 0)]
        bad = ["exp(%r) = %r" % (float(special[k]), float(gs[k])) for k, ok in want if not ok(gs[k])]
        if bad:
            raise Fail("; ".join(bad))
    return single("math.exp_sweep_ulp", fn)


# round_bf16 compiled (an integer add and mask on the bits, codegen/elementwise.c) over the
# whole float range: every 4093rd bit pattern and the special values, bit for bit against
# NumPy's nearest bfloat16, ties to even; NaN stays NaN.
@check("math.round_bf16_sweep")
def math_round_bf16_sweep():
    def fn():
        x = np.concatenate([erf_sweep_inputs(), np.array([1.00390625, 1.01171875, -1.00390625, 3.3961e38, 3.3895314e38],
                                                          np.float32)])
        src = "export fn forward(x: f32[%d]) -> f32[%d] {\n  return round_bf16(x)\n}\n" % (len(x), len(x))
        m = region_model("math.round_bf16", src, {"x": x})
        out = os.path.join(m.d, "out")
        m.build(out)
        g = run_compiled(m, out)[0]
        u = x.view(np.uint32).astype(np.uint64)
        want = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32)
        nan = np.isnan(x)
        if not np.array_equal(np.isnan(g), nan):
            raise Fail("NaN where the input is %s" % ("not NaN" if np.isnan(g[~nan]).any() else "NaN but not out"))
        bad = np.flatnonzero(g.view(np.uint32)[~nan] != want[~nan])
        if len(bad):
            i = bad[0]
            raise Fail("%d differ; x=%r: got %r, expected %r" % (len(bad), float(x[~nan][i]), float(g[~nan][i]),
                                                                float(want[~nan][i:i + 1].view(np.float32)[0])))
    return single("math.round_bf16_sweep_bits", fn)


# ----------------------------------------------------------------------------- 3c. upsampling (issue #10)


def upsample_numpy_case(c):
    """Compiled code against the NumPy references of a builtins case, with the case's own
    tolerance (1e-5 relative): the comparison with the interpreter alone allows 1e-4."""
    bi = load_builtins()
    m = region_model("upsample." + c.name, c.src, dict(c.inputs), stem=c.name)
    out = os.path.join(m.d, "out")
    m.build(out)
    got = run_compiled(m, out)
    return [("upsample.numpy.%s.%s" % (c.name, o.label), bi.compare(o, g)) for o, g in zip(c.outs, got)]


def upsample_numpy_checks():
    for c in load_builtins().CASES:
        if c.name.startswith("i10_"):
            CHECKS.append(("upsample.numpy.%s" % c.name, (lambda c=c: upsample_numpy_case(c))))


upsample_numpy_checks()

SRC_UPSAMPLE_DYN = """
@region(reuse_hash = 0)
fn up(x: f32[1, 4, H, W], w: f32[4, 3, 3, 3], b: f32[6], s: int) -> (f32[1, 6, 2 * H, 2 * W], f32[1, 4, 2 * H, 3 * W], f32[1, 4, 2 * H + 1, 2 * W - 1], f32[1, 4, H, W], f32[1, 4, H, W]) {
  let wg = conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2, dilation=1)
  let near = interpolate(x, size=[2 * H, 3 * W])
  let bil = interpolate(x, size=[2 * H + 1, 2 * W - 1], mode="bilinear", align_corners=s > 1)
  let dil = conv2d(x, w[0:4, 0:1, :, :], padding=s, groups=4, dilation=s)
  let asym = conv2d(x, w[0:4, 0:1, :, 0:1], padding=[1, 0], groups=4)
  return wg, near, bil, dil, asym
}

export fn forward(a: f32[1, 4, 5, 3], b: f32[1, 4, 4, 6], w: f32[4, 3, 3, 3], bias: f32[6]) -> (f32[1, 6, 10, 6], f32[1, 4, 10, 9], f32[1, 4, 11, 5], f32[1, 4, 5, 3],
        f32[1, 4, 5, 3], f32[1, 6, 8, 12], f32[1, 4, 8, 18], f32[1, 4, 9, 11], f32[1, 4, 4, 6], f32[1, 4, 4, 6]) {
  let p, q, r, t, u = up(a, w, bias, 1)
  let e, f, g, h, v = up(b, w, bias, 2)
  return p, q, r, t, u, e, f, g, h, v
}
"""


@check("upsample.reuse_hash_runtime_dims")
def upsample_dyn():
    # One shared variant for two image sizes (and dilation, align_corners taken at run
    # time): the direct loops of conv_transpose2d and conv2d (padding [1, 0] too) and the resize kernels with
    # every dimension and attribute loaded at run time.
    def fn():
        m = region_model("upsample.dyn", SRC_UPSAMPLE_DYN,
                         rng_inputs(11, a=(1, 4, 5, 3), b=(1, 4, 4, 6), w=(4, 3, 3, 3), bias=(6,)))
        out = os.path.join(m.d, "out")
        m.build(out)
        expect_objects(out, ["m.o", "m.up.0.o"])
        values_ok(m.check_compiled(out))
    return single("upsample.reuse_hash_runtime_dims", fn)


# ----------------------------------------------------------------------------- 4. gpt2 counts


@check("gpt2.counts")
def gpt2_counts():
    res = []
    cfg = dict(GPT2_CFG)
    src = os.path.join(SAMPLES, "gpt2.nest")

    def at(L, extra, want, values=False):
        def fn():
            c = dict(cfg, L=L)
            tag = "gpt2.L%d%s" % (L, "".join(extra).replace("-", "_"))
            if values:
                m = sample_model(tag, "gpt2", c)
                out = os.path.join(m.d, "out")
                m.build(out, *extra)
            else:
                d = tmpdir(tag)
                out = os.path.join(d, "out")
                nestc("build", src, "-o", out, *defs(c), *extra)
            expect_objects(out, want)
            if values:
                values_ok(m.check_compiled(out))
        return fn

    # forward's block and attention, and prefill's (any T, and T == 1) and decode's over the KV cache
    three = ["gpt2.o", "gpt2.block.0.o", "gpt2.attention.0.o", "gpt2.block_kv.0.o", "gpt2.attention_kv.0.o",
             "gpt2.block_kv.1.o", "gpt2.attention_kv.1.o", "gpt2.block_kv.2.o", "gpt2.attention_kv.2.o"]
    res += single("gpt2.L12.three_objects_and_values", at(12, [], three, values=True))
    res += single("gpt2.L48.three_objects", at(48, [], three))
    # L=2: every call inlined into the model's own code, no variant object; its 51 matrix
    # products (forward, prefill and decode) make the model's object two parts
    res += single("gpt2.L2.no_regions_model_only", at(2, ["--no-regions"], ["gpt2.o", "gpt2.model-1.o"]))

    def report():
        c = dict(cfg, L=12)
        t = nestc("report", src, *defs(c)).stdout
        problems = []
        blk = re.search(r"^region block\b.*?(?=^region |\Z)", t, re.M | re.S)
        if not blk or not re.search(r"^\s*12 calls -> 1 variant\b", blk.group(0), re.M):
            problems.append("text report: no '12 calls -> 1 variant' for region block")
        j = json.loads(nestc("report", src, "--format=json", *defs(c)).stdout)
        regs = {r["name"]: r for r in j["regions"]}
        b = regs.get("block")
        if not b or len(b["variants"]) != 1 or b["calls"] != 12:
            problems.append("JSON report: block %s, expected 1 variant and 12 calls"
                            % (b and {"variants": b["variants"], "calls": b["calls"]}))
        a = regs.get("attention")
        if not a or len(a["variants"]) != 1 or a["calls"] != 12:
            problems.append("JSON report: attention %s, expected 1 variant and 12 calls"
                            % (a and {"variants": a["variants"], "calls": a["calls"]}))
        vcalls = {v["name"]: v["calls"] for v in j.get("variants", [])}
        want = {"block.0": 12, "attention.0": 12, "block_kv.0": 12, "attention_kv.0": 12, "block_kv.1": 12,
                "attention_kv.1": 12, "block_kv.2": 12, "attention_kv.2": 12}
        if vcalls != want:
            problems.append("JSON variants[].calls %s, expected %s" % (vcalls, want))
        for name in ("block.0", "attention.0"):
            if not re.search(r"^  variant %s  fingerprint [0-9a-f]{16}  12 calls$" % re.escape(name), t, re.M):
                problems.append("text report: no 'variant %s  fingerprint ...  12 calls'" % name)
        tot = j.get("totals", {})
        if tot.get("unique_variants") != 8 or tot.get("region_calls") != 96:
            problems.append("JSON totals %s, expected 96 region calls, 8 unique variants" % tot)
        if problems:
            raise Fail("; ".join(problems))
    res += single("gpt2.L12.report", report)
    return res


# ----------------------------------------------------------------------------- 5. resnet report


@check("resnet.report")
def resnet_report():
    def fn():
        cfg = RESNET_CFG
        j = json.loads(nestc("report", os.path.join(SAMPLES, "resnet.nest"), "--format=json",
                             *defs(cfg)).stdout)
        C0, IMG = cfg["C0"], cfg["IMG"]
        # basic_block: (C, size) of layer1 (x2), layer2_1, layer3_1, layer4_1
        basic = {(C0, IMG // 4), (2 * C0, IMG // 8), (4 * C0, IMG // 16), (8 * C0, IMG // 32)}
        # down_block: (in channels, out channels, stride 2, input size)
        down = {(C0 * 2 ** (s - 2), C0 * 2 ** (s - 1), IMG // 2 ** s) for s in (2, 3, 4)}
        regs = {r["name"]: r for r in j["regions"]}
        problems = []
        for name, want, calls in (("basic_block", len(basic), 5), ("down_block", len(down), 3)):
            r = regs.get(name)
            if not r:
                problems.append("no region %s" % name)
                continue
            if len(r["variants"]) != want:
                problems.append("%s has %d variants, expected %d" % (name, len(r["variants"]), want))
            if r["calls"] != calls:
                problems.append("%s has %d calls, expected %d" % (name, r["calls"], calls))
        firsts = {}
        for c in j["calls"]:
            if c["region"] not in ("basic_block", "down_block") or c["status"] != "new":
                continue
            k = int(c["variant"].rsplit(".", 1)[1])
            if k == 0:
                continue
            dif = c.get("differs")
            if not dif or not re.search(r"\barg \w+\b.*\bdim \d+", dif):
                problems.append("call at %s (new %s) has differs %r, expected it to name an "
                                "argument dim" % (c["site"], c["variant"], dif))
            firsts[c["variant"]] = True
        for name in ("basic_block", "down_block"):
            for v in (regs.get(name) or {"variants": []})["variants"][1:]:
                if v not in firsts:
                    problems.append("no new call with 'differs' for %s" % v)
        if problems:
            raise Fail("; ".join(problems))
    return single("resnet.report_variants_and_differs", fn)


# ----------------------------------------------------------------------------- 5b. matmul kernels

# Odd sizes (partial panels, every remainder of the row tiles), weights packed
# once or as they go, a weight passed to a region and an activation in its
# place, and elementwise chains fused into the matmul (bias as a row, a
# [1, N] row, a scalar, a residual, unary ops, the chain's value on the
# right of a subtraction or a division).
SRC_MM = """
const M = 23
const K = 37
const N = 45
param w: f32[K, N]
param b: f32[N]
param wt: f32[N, K]
param r: f32[1, N]

@region
fn lin(x: f32[T, K], w: f32[K, N], b: f32[N]) -> f32[T, N] {
  return gelu_tanh(x @ w + b)
}

export fn forward(x: f32[M, K], res: f32[M, N], y: f32[K, N]) -> (f32[M, N], f32[M, N], f32[M, N], f32[M, N], f32[M, N], f32[M, N]) {
  let a = lin(x, w, b)
  let c = lin(x[0:M-1], y, b)
  let d = res - (x @ transpose(wt, [1, 0])) * 0.5
  let e = 2.0 / (1.0 + exp(x @ w + r)) + res
  let f = relu(x @ y) * b
  let g = sigmoid(x[0:1] @ w) + res
  return a, concat([c, a[0:1]], axis=0), d, e, f, g
}
"""


@check("kernels.matmul")
def kernels_matmul():
    def case(tag, sizes, env=None, extra=()):
        def fn():
            src = SRC_MM
            for k, v in sizes.items():
                src = re.sub(r"const %s = \d+" % k, "const %s = %d" % (k, v), src)
            m, k_, n = sizes.get("M", 23), sizes.get("K", 37), sizes.get("N", 45)
            mdl = region_model(tag, src, rng_inputs(3, x=(m, k_), res=(m, n), y=(k_, n)))
            out = os.path.join(mdl.d, "out")
            mdl.build(out, *extra)
            values_ok(mdl.check_compiled(out, env=env))
        return fn
    res = []
    for tag, sizes in (("odd", {}), ("wide", {"M": 30, "K": 64, "N": 96}), ("one", {"M": 2, "K": 1, "N": 1}),
                       ("tall", {"M": 131, "K": 5, "N": 33}), ("long", {"M": 13, "K": 20, "N": 1541})):
        res += single("kernels.matmul_%s" % tag, case("kernels.mm_" + tag, sizes))
    env = dict(os.environ, NESTRT_PREPACK="0", NESTRT_NUM_THREADS="1")
    res += single("kernels.matmul_no_prepack_one_thread", case("kernels.mm_noprepack", {}, env))
    # the narrower tiles: AVX2 (4 x 16) and SSE2 (4 x 8), which this machine also runs
    if "avx2" in open("/proc/cpuinfo").read():
        res += single("kernels.matmul_avx2_tiles", case("kernels.mm_avx2", {"M": 30, "N": 96}, extra=("--cpu", "haswell")))
    res += single("kernels.matmul_sse2_tiles", case("kernels.mm_sse2", {"M": 30, "N": 50}, extra=("--cpu", "x86-64")))
    return res


# Shapes past what a task's stack holds (8 MiB for the calling thread): a
# partial panel's tiles for 70000 rows (9 MB when they went through the stack
# at once; now MM_PART_ROWS rows at a time, with the fused epilogue at each
# chunk's rows), and a panel of 70000 rows of K (9 MB; now from malloc, for
# an activation and for a weight without its pre-packed copy).
SRC_MM_BIG = """
const M = 70000
const K = 8
const N = 40
const M2 = 3
const K2 = 70000
param w: f32[K, N]
param b: f32[N]
param w2: f32[K2, N]

export fn forward(x: f32[M, K], y: f32[K, N], x2: f32[M2, K2], y2: f32[K2, N]) -> (f32[M, N], f32[M, N], f32[M2, N], f32[M2, N]) {
  return relu(x @ w + b), x @ y - b, x2 @ y2, x2 @ w2 * 2.0
}
"""

# One query over 60000 keys: its scores fit an attention's limit, but the
# product with v packs a panel of 60000 rows (7.7 MB, on a task's stack when
# the attention ran fused).
SRC_ATTN_LONG = """
export fn forward(q: f32[2, 1, 64], kt: f32[2, 64, 60000], v: f32[2, 60000, 64]) -> f32[2, 1, 64] {
  return softmax(q @ kt * 0.125, axis=-1) @ v
}
"""


@check("kernels.matmul_large_shapes")
def kernels_matmul_large_shapes():
    def case(tag, env):
        def fn():
            mdl = region_model(tag, SRC_MM_BIG, rng_inputs(4, x=(70000, 8), y=(8, 40), x2=(3, 70000),
                                                                         y2=(70000, 40)))
            out = os.path.join(mdl.d, "out")
            mdl.build(out)
            values_ok(mdl.check_compiled(out, env=env))
        return fn
    def attention():
        mdl = region_model("kernels.attn_long", SRC_ATTN_LONG, rng_inputs(5, q=(2, 1, 64), kt=(2, 64, 60000),
                                                                          v=(2, 60000, 64)))
        out = os.path.join(mdl.d, "out")
        mdl.build(out)
        values_ok(mdl.check_compiled(out))
    return (single("kernels.attention_over_60000_keys", attention) +
            single("kernels.matmul_large_shapes", case("kernels.mm_big", None)) +
            single("kernels.matmul_large_shapes_no_prepack_one_thread",
                   case("kernels.mm_big1", dict(os.environ, NESTRT_PREPACK="0", NESTRT_NUM_THREADS="1"))))


# Narrowing (src/rows.c): a region whose result is read in part runs a
# variant computed for that part. A transformer layer with attention, read at
# token 0 after three calls (ViT's CLS), at tokens 1 and 4 (one variant for
# rows 1:5, two views of it), at the last token of a chain of two calls, and
# in ways that must not narrow: along the model axis (matmul columns) and
# after a softmax across tokens. f is shared by the queries (read in part,
# through a view of the fold [B*T, D]) and the keys and values (read whole).
SRC_NARROW = """
const B = 2
const T = 7
const D = 16
const H = 2

@region
fn layer(x: f32[B, T, D], wq: f32[D, D], wk: f32[D, D], wv: f32[D, D], w1: f32[D, 32], b1: f32[32], w2: f32[32, D], g: f32[D]) -> f32[B, T, D] {
  let f = reshape(layernorm(x, g, g * 0.5, eps=1e-5), [B * T, D])
  let q = transpose(reshape(f @ wq, [B, T, H, D / H]), [0, 2, 1, 3])
  let kt = transpose(reshape(f @ wk, [B, T, H, D / H]), [0, 2, 3, 1])
  let v = transpose(reshape(f @ wv, [B, T, H, D / H]), [0, 2, 1, 3])
  let a = reshape(transpose(softmax(q @ kt * 0.5, axis=-1) @ v, [0, 2, 1, 3]), [B, T, D])
  let y = x + a
  return y + relu(y @ w1 + b1) @ w2
}

export fn cls(x: f32[B, T, D], wq: f32[D, D], wk: f32[D, D], wv: f32[D, D], w1: f32[D, 32], b1: f32[32], w2: f32[32, D], g: f32[D]) -> f32[B, D] {
  for i in 0..3 {
    x = layer(x, wq, wk, wv, w1, b1, w2, g)
  }
  return x[:, 0]
}

export fn pair(x: f32[B, T, D], wq: f32[D, D], wk: f32[D, D], wv: f32[D, D], w1: f32[D, 32], b1: f32[32], w2: f32[32, D], g: f32[D]) -> f32[B, D] {
  let y = layer(x, wq, wk, wv, w1, b1, w2, g)
  return y[:, 1] * 2.0 + y[:, 4]
}

export fn last(x: f32[B, T, D], wq: f32[D, D], wk: f32[D, D], wv: f32[D, D], w1: f32[D, 32], b1: f32[32], w2: f32[32, D], g: f32[D]) -> f32[B, D] {
  return layer(layer(x, wq, wk, wv, w1, b1, w2, g) * 0.5, wq, wk, wv, w1, b1, w2, g)[:, T - 1]
}

export fn cols(x: f32[B, T, D], wq: f32[D, D], wk: f32[D, D], wv: f32[D, D], w1: f32[D, 32], b1: f32[32], w2: f32[32, D], g: f32[D]) -> f32[B, T, 4] {
  return layer(x, wq, wk, wv, w1, b1, w2, g)[:, :, 0:4]
}

# a slice in the region along the axis read in part: narrowed, its start moves to the part's
@region
fn inner_rows(x: f32[B, T, D], w: f32[D, D]) -> f32[B, T - 2, D] {
  return relu(x[:, 1:T - 1, 2:D] @ w[2:D])
}

export fn inner(x: f32[B, T, D], wq: f32[D, D], wk: f32[D, D], wv: f32[D, D], w1: f32[D, 32], b1: f32[32], w2: f32[32, D], g: f32[D]) -> f32[B, D] {
  return inner_rows(x, wk)[:, 2]
}

# causal attention read at one query (the next-token logits of a static forward): the mask's
# offset moves with the row
export fn causal(x: f32[B, T, D], wq: f32[D, D], wk: f32[D, D], wv: f32[D, D], w1: f32[D, 32], b1: f32[32], w2: f32[32, D], g: f32[D]) -> (f32[B, D], f32[B, 2, D]) {
  let a = softmax(causal_mask(x @ transpose(x @ wk, [0, 2, 1]) * 0.25), axis=-1) @ x
  let c = softmax(causal_mask(x @ transpose(x, [0, 2, 1]), offset=1), axis=-1) @ x
  return a[:, T - 3], c[:, 2:4]
}

export fn across(x: f32[B, T, D], wq: f32[D, D], wk: f32[D, D], wv: f32[D, D], w1: f32[D, 32], b1: f32[32], w2: f32[32, D], g: f32[D]) -> f32[B, D] {
  return softmax(layer(x, wq, wk, wv, w1, b1, w2, g), axis=1)[:, 0]
}
"""


def np_layer(x, wq, wk, wv, w1, b1, w2, g):
    B, T, D = x.shape
    H = 2
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    f = ((x - mu) / np.sqrt(var + 1e-5) * g + g * 0.5).reshape(B * T, D)
    heads = lambda m: m.reshape(B, T, H, D // H).transpose(0, 2, 1, 3)
    q, k, v = heads(f @ wq), heads(f @ wk), heads(f @ wv)
    s = q @ k.transpose(0, 1, 3, 2) * 0.5
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    y = x + (p @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    return y + np.maximum(y @ w1 + b1, 0) @ w2


def np_causal(s, offset, v):
    T = s.shape[-1]
    s = np.where(np.arange(T)[None, :] > np.arange(T)[:, None] + offset, -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@check("narrow.layer_read_in_part")
def narrow_layer_read_in_part():
    ins = rng_inputs(11, x=(2, 7, 16), wq=(16, 16), wk=(16, 16), wv=(16, 16), w1=(16, 32), b1=(32,), w2=(32, 16), g=(16,))
    a = {k: v.astype(np.float64) for k, v in ins.items()}
    w = [a[k] for k in ("wq", "wk", "wv", "w1", "b1", "w2", "g")]
    x = a["x"]
    y1 = np_layer(x, *w)
    e = np.exp(y1 - y1.max(1, keepdims=True))
    refs = {"cls": np_layer(np_layer(y1, *w), *w)[:, 0], "pair": y1[:, 1] * 2 + y1[:, 4],
            "last": np_layer(y1 * 0.5, *w)[:, 6], "cols": y1[:, :, 0:4],
            "inner": np.maximum(x[:, 1:6, 2:] @ a["wk"][2:], 0)[:, 2],
            "causal": (np_causal(x @ (x @ a["wk"]).transpose(0, 2, 1) * 0.25, 0, x)[:, 4],
                       np_causal(x @ x.transpose(0, 2, 1), 1, x)[:, 2:4]), "across": (e / e.sum(1, keepdims=True))[:, 0]}
    d = tmpdir("narrow.layer")
    src = write(os.path.join(d, "m.nest"), SRC_NARROW)
    res = []
    out = os.path.join(d, "out")
    nestc("build", src, "-o", out)
    whole = os.path.join(d, "whole")
    nestc("build", src, "-o", whole, "--no-narrow")
    for name, ref in refs.items():
        def fn(name=name, ref=ref):
            m = Model(d, src, None, ins, entry=name)
            # the build without narrowing gives the same values
            ref_whole = run_compiled(m, whole, tag="w_" + name)
            e = m.entry(out)
            refs_ = ref if isinstance(ref, tuple) else (ref,)
            got = run_compiled(m, out, tag="c_" + name)
            interp = m.reference(e)
            msgs = []
            for j, r in enumerate(refs_):
                msgs += [compare(got[j], r.astype(np.float32), "compiled %d" % j),
                         compare(ref_whole[j], r.astype(np.float32), "compiled with --no-narrow %d" % j),
                         compare(np.load(interp[j]), r.astype(np.float32), "interpreter %d" % j)]
            msgs = [x for x in msgs if x]
            if msgs:
                raise Fail("; ".join(msgs))
        res += single("narrow.%s_against_numpy" % name, fn)

    def report():
        txt = nestc("report", src).stdout
        layer = txt[txt.index("region layer "):].split("\nregion ")[0]
        guards = re.findall(r"guards: x: f32\[2, 7, 16\];[^\n]*?(; result: [^\n]*)?\n", layer)
        want = ["", "; result: rows 0:1 of axis 1 used", "; result: rows 1:5 of axis 1 used",
                "; result: rows 6:7 of axis 1 used"]
        if "result: rows 2:3 of axis 1 used" not in txt:
            raise Fail("inner_rows was not narrowed")
        # --no-narrow: the calls as written only, and the dump's graphs whole
        r = nestc("report", src, "--no-narrow")
        if "result: rows" in r.stdout or "1 -> layer.1" in r.stdout or r.stderr.strip():
            raise Fail("--no-narrow: a narrowed variant in the report, or stderr %r" % r.stderr)
        r = nestc("check", src, "--no-narrow", "--dump=ir")
        if re.search(r"offset=[34]\b|result f32\[2, 1, 16\]", r.stdout):
            raise Fail("--no-narrow: a narrowed node in --dump=ir")
        # a narrowed variant over the user's limit is compiled inline, without the warning
        # that the user's own calls over it get (-Werror would make it an error)
        one = write(os.path.join(d, "one.nest"), SRC_NARROW.replace("@region\nfn layer", "@region(max_reuse_entries = 1)\nfn layer"))
        r = nestc("report", one, "-Werror")
        lines = [l for l in r.stdout.splitlines() if l.startswith("  call") and "inlined" in l]
        if r.stderr.strip() or len(lines) != 3 or not all("inlined (narrowed, over max_reuse_entries)" in l for l in lines):
            raise Fail("max_reuse_entries = 1: stderr %r, inlined calls %s" % (r.stderr, lines))
        if sorted(guards) != want:
            raise Fail("layer's variants: %s, expected %s" % (guards, want))
        for why in ("new variant layer.1 because result: rows 0:1 of axis 1 used, variant 0 computes all of it",):
            if why not in txt:
                raise Fail("report lacks %r" % why)
    return res + single("narrow.report_variants", report)


# Found by review: a part of a rank-7 tensor viewed as [2, 3, 2] needs a view of rank 9
# (over MAX_RANK: computed whole instead), a part of an empty tensor (its factors divided
# by zero), and a narrowed variant made first took the max_reuse_entries slot that the
# calls as written needed (c's [5, 4] was compiled inline with a warning, an error under
# -Werror).
SRC_NARROW_EDGES = """
@region(max_reuse_entries = 2)
fn lin(x: f32[N, 4], w: f32[4, 4]) -> f32[N, 4] {
  return tanh(x @ w)
}

export fn forward(x: f32[12, 1, 1, 1, 1, 1, 1], e: f32[4, 0], y: f32[6, 4], z: f32[5, 4], w: f32[4, 4]) -> (f32[2, 1, 2, 1, 1, 1, 1], f32[2, 0], f32[4], f32[6, 4], f32[5, 4]) {
  return exp(reshape(x, [2, 3, 2, 1, 1, 1, 1]))[:, 0:1], reshape(exp(e), [2, 2, 0])[0], lin(y, w)[0], lin(y, w), lin(z, w)
}
"""


@check("narrow.edge_cases")
def narrow_edge_cases():
    def fn():
        ins = rng_inputs(12, x=(12, 1, 1, 1, 1, 1, 1), y=(6, 4), z=(5, 4), w=(4, 4))
        ins["e"] = np.zeros((4, 0), np.float32)
        mdl = region_model("narrow.edges", SRC_NARROW_EDGES, ins)
        out = os.path.join(mdl.d, "out")
        r = mdl.build(out, "-Werror", "--report")
        calls = [l for l in r.stdout.splitlines() if l.startswith("  call")]
        if r.stderr.strip() or len(calls) != 3 or "inlined (narrowed, over max_reuse_entries)" not in calls[0]:
            raise Fail("max_reuse_entries = 2: stderr %r, calls %s" % (r.stderr, calls))
        x, y, z, w = (ins[k].astype(np.float64) for k in ("x", "y", "z", "w"))
        refs = [np.exp(x.reshape(2, 3, 2, 1, 1, 1, 1))[:, 0:1], np.zeros((2, 0)), np.tanh(y @ w)[0], np.tanh(y @ w),
                np.tanh(z @ w)]
        got = run_compiled(mdl, out)
        e = mdl.entry(out)
        interp = mdl.reference(e)
        msgs = []
        for j, ref in enumerate(refs):
            msgs += [compare(got[j], ref.astype(np.float32), "compiled %d" % j),
                     compare(np.load(interp[j]), ref.astype(np.float32), "interpreter %d" % j)]
        values_ok([(None, m) for m in msgs])
    return single("narrow.edge_cases", fn)


# Elementwise trees computed in one loop: broadcasting leaves, where, a cast,
# a value read twice (kept in storage), and a chain longer than one loop may
# read (split).
SRC_EW = """
export fn forward(x: f32[6, 7], y: f32[7], z: f32[6, 1], m: bool[6, 7], i: i32[6, 7]) -> (f32[6, 7], f32[6, 7], f32[6, 7]) {
  let a = where(m, exp(x) * y, tanh(x) - z) + f32(i) * 0.5
  let b = sigmoid(a * a + x / (abs(y) + 1.0))
  let c = x + y + z + x * y + x * z + y * z + x - y - z + x * 2.0 + y * 3.0 + z * 4.0 + x - sin(x) + cos(y) * z
  return a, b, c
}
"""


@check("kernels.elementwise_trees")
def kernels_elementwise_trees():
    def fn():
        rng = np.random.default_rng(6)
        ins = rng_inputs(6, x=(6, 7), y=(7,), z=(6, 1))
        ins["m"] = rng.uniform(size=(6, 7)) < 0.5
        ins["i"] = rng.integers(-5, 5, size=(6, 7)).astype(np.int32)
        mdl = region_model("kernels.ew", SRC_EW, ins)
        out = os.path.join(mdl.d, "out")
        mdl.build(out)
        values_ok(mdl.check_compiled(out))
    return single("kernels.elementwise_trees", fn)


# Batched matmuls on the pool with a fused epilogue: attention's scale and
# causal mask, a full-shape operand, a row, and a chain the mask ends.
SRC_BMM = """
export fn forward(q: f32[3, 9, 8], kt: f32[3, 8, 9], e: f32[3, 9, 9], r: f32[9]) -> (f32[3, 9, 9], f32[3, 9, 9], f32[3, 9, 9]) {
  let a = softmax(causal_mask(q @ kt * 0.35), axis=-1)
  let b = tanh(q @ kt) - e
  let c = causal_mask(r + (q @ kt) / 2.0)
  return a, b, c
}
"""


@check("kernels.batched_epilogue")
def kernels_batched_epilogue():
    def fn():
        mdl = region_model("kernels.bmm", SRC_BMM, rng_inputs(5, q=(3, 9, 8), kt=(3, 8, 9), e=(3, 9, 9), r=(9,)))
        out = os.path.join(mdl.d, "out")
        mdl.build(out)
        values_ok(mdl.check_compiled(out))
    return single("kernels.batched_matmul_epilogue", fn)


# The same with whole panels (N past a panel's width) and several row tiles
# (M = 29: tiles of 12, 12, 4 and 1 rows), where each tile applies the epilogue
# (its rows' offset matters to the causal mask); and a plain matmul's bias and
# gelu at odd sizes.
SRC_BMM_WIDE = SRC_BMM.replace("[3, 9, 8]", "[2, 29, 8]").replace("[3, 8, 9]", "[2, 8, 100]") \
    .replace("[3, 9, 9]", "[2, 29, 100]").replace("r: f32[9]", "r: f32[100]")
SRC_LIN_GELU = """
param w: f32[100, 37]
param b: f32[100]
export fn forward(x: f32[29, 37], y: f32[29, 100]) -> f32[29, 100] {
  return y + gelu(linear(x, w, b))
}
"""


@check("kernels.batched_epilogue_wide")
def kernels_batched_epilogue_wide():
    def fn():
        mdl = region_model("kernels.bmmw", SRC_BMM_WIDE, rng_inputs(5, q=(2, 29, 8), kt=(2, 8, 100), e=(2, 29, 100), r=(100,)))
        out = os.path.join(mdl.d, "out")
        mdl.build(out)
        values_ok(mdl.check_compiled(out))
        mdl = region_model("kernels.lingelu", SRC_LIN_GELU, rng_inputs(6, x=(29, 37), y=(29, 100)))
        out = os.path.join(mdl.d, "out")
        mdl.build(out)
        values_ok(mdl.check_compiled(out))
    return single("kernels.batched_matmul_epilogue_wide", fn)


# batch_norm in compiled code against NumPy directly (not the interpreter), at
# 1e-5 relative: NCHW with odd sizes, rank 2, rank 3, and after a convolution in a
# region with a relu, where x * scale + shift + relu is one elementwise loop.
SRC_BN = """
@region
fn conv_bn(x: f32[N, C, Y, X], w: f32[O, C, 3, 3], s: f32[4, O]) -> f32[N, O, Y, X] {
  return relu(batch_norm(conv2d(x, w, padding=1), s[0], s[1], s[2], s[3]))
}

export fn forward(x: f32[2, 5, 7, 9], s5: f32[4, 5], y: f32[3, 6], s6: f32[4, 6], z: f32[2, 3, 33],
                  s3: f32[4, 3], w: f32[6, 5, 3, 3]) ->
    (f32[2, 5, 7, 9], f32[3, 6], f32[2, 3, 33], f32[2, 6, 7, 9]) {
  return batch_norm(x, s5[0], s5[1], s5[2], s5[3]), batch_norm(y, s6[0], s6[1], s6[2], s6[3], eps=1e-3),
         batch_norm(z, s3[0], s3[1], s3[2], s3[3], eps=0.5), conv_bn(x, w, s6)
}
"""


def bn_np(x, s, eps=1e-5):
    x, s = x.astype(np.float64), s.astype(np.float64)
    sh = (1, -1) + (1,) * (x.ndim - 2)
    m, v, w, b = (s[i].reshape(sh) for i in range(4))
    return (x - m) / np.sqrt(v + eps) * w + b


def conv_np(x, w):
    """3x3, padding 1, stride 1, by shifted windows."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, hh, ww = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], hh, ww))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + hh, j:j + ww], w[:, :, i, j])
    return out


@check("kernels.batch_norm")
def kernels_batch_norm():
    def fn():
        rng = np.random.default_rng(11)
        ins = rng_inputs(11, x=(2, 5, 7, 9), y=(3, 6), z=(2, 3, 33), w=(6, 5, 3, 3))
        for n, c in (("s5", 5), ("s6", 6), ("s3", 3)):
            s = rng.uniform(-1, 1, (4, c)).astype(np.float32)
            s[1] = rng.uniform(1e-4, 2.0, c)      # variances, one tiny: eps matters
            s[1, 0] = 1e-6
            ins[n] = s
        mdl = region_model("kernels.bn", SRC_BN, ins)
        out = os.path.join(mdl.d, "out")
        mdl.build(out)
        got = run_compiled(mdl, out)
        refs = [bn_np(ins["x"], ins["s5"]), bn_np(ins["y"], ins["s6"], 1e-3), bn_np(ins["z"], ins["s3"], 0.5),
                np.maximum(bn_np(conv_np(ins["x"], ins["w"]), ins["s6"]), 0)]
        for k, (g, r) in enumerate(zip(got, refs)):
            err = float(np.max(np.abs(g.astype(np.float64) - r)))
            if g.shape != r.shape or not err <= 1e-5 * max(1.0, float(np.max(np.abs(r)))):
                raise Fail("result %d: shape %s vs %s, max abs err %.3g, max|ref| %.3g" %
                           (k, g.shape, r.shape, err, float(np.max(np.abs(r)))))
    return single("kernels.batch_norm", fn)


# conv2d's register tiles (issue #9) against NumPy directly, at 1e-5 relative, at 1
# and 3 threads: 1x1 (read in place, also planes of 63 pixels whose last vector
# is read under a mask, and copied), 3x3 with batch norm, a residual and
# relu fused, 7x7 stride 2 on 3 channels with a bias, strided 1x1, dilation,
# groups and depthwise, rectangular strides and padding, planes of OW = 7, 5, 1,
# O not a multiple of 16, batch 2, the chain's value as the second operand, and
# f64; and shapes whose tasks (plan.c: conv_bands) are bands of pixels that end
# inside a row, with a shorter last band, split over shares of the channels (30x26
# and 7x7 planes, stride 2 to 15x13). The fused ops must not run as kernels of their
# own (NESTRT_PROFILE=2). Max and
# average pooling, strides 1, 2 and 3, wide enough for the vector loop of each row.
SRC_CONV = """
export fn forward(a: f32[2, 16, 9, 7], w3: f32[16, 16, 3, 3], s: f32[4, 16], x3: f32[1, 3, 23, 21],
                  w7: f32[20, 3, 7, 7], b20: f32[20], w1: f32[24, 16, 1, 1], wg: f32[18, 8, 3, 3],
                  wd: f32[16, 1, 3, 3], bd: f32[16], e: f32[2, 32, 4, 4], w1b: f32[40, 32, 1, 1],
                  r: f32[2, 40, 4, 4], w5: f32[8, 3, 5, 5], wr: f32[4, 3, 3, 21], big: f32[1, 32, 20, 20],
                  wb: f32[40, 32, 3, 3], pl: f32[2, 3, 37, 41], m: f32[2, 48, 30, 26], wm: f32[64, 48, 3, 3],
                  wm2: f32[96, 48, 3, 3], s7: f32[1, 128, 7, 7], w77: f32[128, 128, 3, 3],
                  w1c: f32[20, 16, 1, 1], wh: f32[4, 3, 23, 3], pc: f32[1, 4, 1, 1],
                  sq: f32[3, 4, 16]) ->
    (f32[2, 16, 9, 7], f32[1, 20, 12, 11], f32[2, 24, 5, 4], f32[2, 18, 9, 7], f32[2, 16, 9, 7],
     f32[2, 40, 4, 4], f32[1, 8, 5, 5], f32[1, 4, 23, 1], f32[1, 40, 20, 20], f64[1, 8, 5, 5],
     f32[2, 3, 19, 21], f32[2, 3, 36, 40], f32[2, 3, 12, 14], f32[2, 64, 30, 26], f32[2, 96, 15, 13],
     f32[1, 128, 7, 7], f32[2, 20, 9, 7], f32[1, 4, 1, 19],
     f32[2, 16, 9, 7]) {
  let c1 = relu(batch_norm(conv2d(a, w3, padding=1), s[0], s[1], s[2], s[3]) + a)
  let c2 = relu(conv2d(x3, w7, b20, stride=2, padding=3))
  let c3 = 1.0 - conv2d(a, w1, stride=2)
  let c4 = conv2d(a, wg, padding=2, dilation=2, groups=2)
  let c5 = maximum(conv2d(a, wd, bd, padding=1, groups=16), 0.25) * 2.0
  let c6 = relu(conv2d(e, w1b) + r)
  let c7 = conv2d(x3, w5, stride=4)
  let c8 = conv2d(x3, wr, padding=[1, 0])
  let c9 = relu(conv2d(big, wb, padding=1)) / 4.0
  let c10 = conv2d(f64(x3), f64(w5), stride=4)
  let p1 = max_pool2d(pl, 3, stride=2, padding=1)
  let p2 = avg_pool2d(pl, 2, stride=1)
  let p3 = max_pool2d(pl, [4, 5], stride=3, padding=[0, 2])
  let c11 = relu(conv2d(m, wm, padding=1))
  let c12 = conv2d(m, wm2, stride=2, padding=1)
  let c13 = conv2d(s7, w77, padding=1)
  let c14 = relu(conv2d(a, w1c, b20))
  let c15 = conv2d(x3, wh) + pc
  let st = sum(sq, axis=0)
  let c16 = batch_norm(conv2d(a, w3, padding=1), st[0], abs(st[1]) + 0.1, st[2], st[3])
  return c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, p1, p2, p3, c11, c12, c13, c14, c15, c16
}
"""


def conv_ref(x, w, b=None, stride=1, pad=0, dil=1, groups=1):
    """conv2d in float64, PyTorch's definition written out: a sum over kernel positions
    of strided windows of the zero-padded input, group by group."""
    pair = lambda v: (v, v) if isinstance(v, int) else v
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(pad), pair(dil)
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, hh, ww = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = (hh + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (ww + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs, ws = xp[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                win = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", win, ws[:, :, i, j])
    if b is not None:
        out += b.astype(np.float64).reshape(1, -1, 1, 1)
    return out


def pool_ref(x, k, s, p, how):
    """Max (padding -inf) or average (padding counted as zeros) pooling in float64."""
    fill = -np.inf if how is np.max else 0.0
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=fill)
    oh, ow = (xp.shape[2] - k[0]) // s[0] + 1, (xp.shape[3] - k[1]) // s[1] + 1
    wins = [xp[:, :, i:i + s[0] * (oh - 1) + 1:s[0], j:j + s[1] * (ow - 1) + 1:s[1]] for i in range(k[0]) for j in range(k[1])]
    return how(np.stack(wins), axis=0)


@check("kernels.conv2d")
def kernels_conv2d():
    def fn():
        shapes = dict(a=(2, 16, 9, 7), w3=(16, 16, 3, 3), s=(4, 16), x3=(1, 3, 23, 21), w7=(20, 3, 7, 7), b20=(20,),
                      w1=(24, 16, 1, 1), wg=(18, 8, 3, 3), wd=(16, 1, 3, 3), bd=(16,), e=(2, 32, 4, 4),
                      w1b=(40, 32, 1, 1), r=(2, 40, 4, 4), w5=(8, 3, 5, 5), wr=(4, 3, 3, 21), big=(1, 32, 20, 20),
                      wb=(40, 32, 3, 3), pl=(2, 3, 37, 41), m=(2, 48, 30, 26), wm=(64, 48, 3, 3),
                      wm2=(96, 48, 3, 3), s7=(1, 128, 7, 7), w77=(128, 128, 3, 3), w1c=(20, 16, 1, 1),
                      wh=(4, 3, 23, 3), pc=(1, 4, 1, 1), sq=(3, 4, 16))
        ins = rng_inputs(23, **shapes)
        ins["s"][1] = np.abs(ins["s"][1]) + 0.1   # variances
        i = {k: v.astype(np.float64) for k, v in ins.items()}
        sc = i["s"][2] / np.sqrt(i["s"][1] + 1e-5)
        bn = lambda y: y * sc.reshape(1, -1, 1, 1) + (i["s"][3] - i["s"][0] * sc).reshape(1, -1, 1, 1)

        def bn_rows(y, st):
            mean, var, wt, b = st[0], np.abs(st[1]) + 0.1, st[2], st[3]
            ch = lambda v: v.reshape(1, -1, 1, 1)  # noqa: E731
            return (y - ch(mean)) / np.sqrt(ch(var) + 1e-5) * ch(wt) + ch(b)
        refs = [np.maximum(bn(conv_ref(i["a"], i["w3"], pad=1)) + i["a"], 0),
                np.maximum(conv_ref(i["x3"], i["w7"], i["b20"], stride=2, pad=3), 0),
                1.0 - conv_ref(i["a"], i["w1"], stride=2),
                conv_ref(i["a"], i["wg"], pad=2, dil=2, groups=2),
                np.maximum(conv_ref(i["a"], i["wd"], i["bd"], pad=1, groups=16), 0.25) * 2.0,
                np.maximum(conv_ref(i["e"], i["w1b"]) + i["r"], 0),
                conv_ref(i["x3"], i["w5"], stride=4),
                conv_ref(i["x3"], i["wr"], pad=(1, 0)),
                np.maximum(conv_ref(i["big"], i["wb"], pad=1), 0) / 4.0,
                conv_ref(i["x3"], i["w5"], stride=4),
                pool_ref(i["pl"], (3, 3), (2, 2), (1, 1), np.max), pool_ref(i["pl"], (2, 2), (1, 1), (0, 0), np.mean),
                pool_ref(i["pl"], (4, 5), (3, 3), (0, 2), np.max),
                np.maximum(conv_ref(i["m"], i["wm"], pad=1), 0),
                conv_ref(i["m"], i["wm2"], stride=2, pad=1),
                conv_ref(i["s7"], i["w77"], pad=1),
                np.maximum(conv_ref(i["a"], i["w1c"], i["b20"]), 0),
                # one output row: a [1, C, 1, 1] operand is per channel though
                # its first three sizes are the output's
                conv_ref(i["x3"], i["wh"]) + i["pc"],
                # batch norm's statistics: rows of a tensor computed before it
                bn_rows(conv_ref(i["a"], i["w3"], pad=1), i["sq"].sum(axis=0))]
        mdl = region_model("kernels.conv2d", SRC_CONV, ins)
        out = os.path.join(mdl.d, "out")
        mdl.build(out)
        c = mdl.call(mdl.entry(out), "np")
        exe = compile_driver(mdl.d, [c], [mdl.stem], [out], sorted(glob.glob(os.path.join(out, "*.o"))),
                             name="driver_np")
        problems = []
        for threads in ("1", "3"):
            env = dict(os.environ, NESTRT_NUM_THREADS=threads, NESTRT_PROFILE="2")
            r = run([exe], env=env)
            if r.returncode != 0:
                raise Fail("compiled program at %s threads: %s" % (threads, describe([exe], r)))
            for k, (p, ref) in enumerate(zip(c.outputs, refs)):
                g = np.load(p)
                err = float(np.max(np.abs(g.astype(np.float64) - ref))) if np.all(np.isfinite(g)) else float("inf")
                tol = (1e-12 if g.dtype == np.float64 else 1e-5) * max(1.0, float(np.max(np.abs(ref))))
                if g.shape != ref.shape or not err <= tol:
                    problems.append("result %d at %s threads: shape %s vs %s, max abs err %.3g" %
                                    (k + 1, threads, g.shape, ref.shape, err))
            # relu, batch norm's mul and add, the residual's add, 1 - x, maximum, the
            # scalar mul and div: applied by the tiles, never a kernel over the result
            # (batch norm's [C] scale and shift are kernels of their own)
            ops = set(re.findall(r"^\s+(\w+)\s+f(?:32|64)\[\d+, \d+, \d+, \d+\]", r.stderr, re.M))
            if "conv2d" not in ops:
                problems.append("no conv2d kernel line at NESTRT_PROFILE=2")
            fused = ops & {"relu", "add", "sub", "mul", "div", "maximum"}
            if fused:
                problems.append("ops not fused into the convolutions: %s" % ", ".join(sorted(fused)))
        if problems:
            raise Fail("; ".join(problems))
    return single("kernels.conv2d", fn)


# Depthwise convolutions (issue 38: codegen/conv_dw.c, a plane a task, pixels of
# a row in the lanes) against NumPy at 1e-5 relative, at 1 and 3 threads, native
# and AVX2: 3x3 of strides 1 and 2 with a bias, batch norm and hardswish fused;
# 5x5 of stride 2 (EfficientNet's); dilation 2; rectangular padding; a plane of
# 7 columns (one short vector a row on AVX2; on AVX-512, half a vector or less:
# at stride 1 the plane as one run, 3x3 and 5x5, dilated, batch 2; at stride 2
# two rows a vector, odd and even row counts, 6 to 20 rows; 2 down and 1 across,
# a row a vector), of 70 (a group of
# four vectors, then a short one), of 1 row; a residual added (its last lanes
# one by one); batch 2. The kernel must be the one that runs (its task in the
# IR), and f64 keeps the general one.
SRC_DW = """
export fn forward(a: f32[2, 24, 14, 14], w3: f32[24, 1, 3, 3], b: f32[24], bn: f32[4, 24],
                  w5: f32[24, 1, 5, 5], wide: f32[1, 8, 9, 70], w8: f32[8, 1, 3, 3], s7: f32[1, 16, 7, 7],
                  w16: f32[16, 1, 3, 3], row: f32[1, 8, 1, 33], wr: f32[8, 1, 1, 5], w5b: f32[16, 1, 5, 5],
                  b16: f32[16], s65: f32[2, 16, 6, 5], s12: f32[1, 16, 12, 12], tall: f32[1, 8, 40, 14]) ->
    (f32[2, 24, 14, 14], f32[2, 24, 7, 7], f32[2, 24, 7, 7], f32[1, 8, 9, 70], f32[1, 8, 7, 70],
     f32[1, 16, 7, 7], f32[1, 8, 1, 29], f64[1, 16, 7, 7], f32[2, 24, 14, 14], f32[1, 16, 7, 7],
     f32[2, 16, 6, 5], f32[1, 16, 6, 6], f32[1, 8, 20, 7], f32[1, 16, 4, 7]) {
  let d1 = hardswish(batch_norm(conv2d(a, w3, b, padding=1, groups=24), bn[0], bn[1], bn[2], bn[3]))
  let d2 = relu(conv2d(a, w3, stride=2, padding=1, groups=24))
  let d3 = conv2d(a, w5, b, stride=2, padding=2, groups=24)
  let d4 = conv2d(wide, w8, padding=2, dilation=2, groups=8) + wide
  let d5 = conv2d(wide, w8, padding=[0, 1], groups=8)
  let d6 = minimum(maximum(conv2d(s7, w16, padding=1, groups=16), 0.0), 6.0)
  let d7 = conv2d(row, wr, groups=8)
  let d8 = conv2d(f64(s7), f64(w16), padding=1, groups=16)
  let d9 = sigmoid(conv2d(a, w3, padding=1, groups=24)) * a
  let d10 = hardswish(conv2d(s7, w5b, b16, padding=2, groups=16))
  let d11 = conv2d(s65, w16, padding=2, dilation=2, groups=16) * 0.5
  let d12 = relu(conv2d(s12, w16, b16, stride=2, padding=1, groups=16))
  let d13 = conv2d(tall, w8, stride=2, padding=1, groups=8)
  let d14 = conv2d(s7, w16, stride=[2, 1], padding=1, groups=16)
  return d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11, d12, d13, d14
}
"""


@check("kernels.conv2d_depthwise")
def kernels_conv2d_depthwise():
    def fn():
        shapes = dict(a=(2, 24, 14, 14), w3=(24, 1, 3, 3), b=(24,), bn=(4, 24), w5=(24, 1, 5, 5),
                      wide=(1, 8, 9, 70), w8=(8, 1, 3, 3), s7=(1, 16, 7, 7), w16=(16, 1, 3, 3), row=(1, 8, 1, 33),
                      wr=(8, 1, 1, 5), w5b=(16, 1, 5, 5), b16=(16,), s65=(2, 16, 6, 5), s12=(1, 16, 12, 12),
                      tall=(1, 8, 40, 14))
        ins = rng_inputs(38, **shapes)
        ins["bn"][1] = np.abs(ins["bn"][1]) + 0.1
        i = {k: v.astype(np.float64) for k, v in ins.items()}
        ch = lambda v: v.reshape(1, -1, 1, 1)  # noqa: E731
        st = i["bn"]
        bn = lambda y: (y - ch(st[0])) / np.sqrt(ch(st[1]) + 1e-5) * ch(st[2]) + ch(st[3])  # noqa: E731
        hsw = lambda y: y * np.clip(y + 3, 0, 6) / 6  # noqa: E731
        refs = [hsw(bn(conv_ref(i["a"], i["w3"], i["b"], pad=1, groups=24))),
                np.maximum(conv_ref(i["a"], i["w3"], stride=2, pad=1, groups=24), 0),
                conv_ref(i["a"], i["w5"], i["b"], stride=2, pad=2, groups=24),
                conv_ref(i["wide"], i["w8"], pad=2, dil=2, groups=8) + i["wide"],
                conv_ref(i["wide"], i["w8"], pad=(0, 1), groups=8),
                np.clip(conv_ref(i["s7"], i["w16"], pad=1, groups=16), 0, 6),
                conv_ref(i["row"], i["wr"], groups=8),
                conv_ref(i["s7"], i["w16"], pad=1, groups=16),
                1 / (1 + np.exp(-conv_ref(i["a"], i["w3"], pad=1, groups=24))) * i["a"],
                hsw(conv_ref(i["s7"], i["w5b"], i["b16"], pad=2, groups=16)),
                conv_ref(i["s65"], i["w16"], pad=2, dil=2, groups=16) * 0.5,
                np.maximum(conv_ref(i["s12"], i["w16"], i["b16"], stride=2, pad=1, groups=16), 0),
                conv_ref(i["tall"], i["w8"], stride=2, pad=1, groups=8),
                conv_ref(i["s7"], i["w16"], stride=(2, 1), pad=1, groups=16)]
        mdl = region_model("kernels.conv2d_depthwise", SRC_DW, ins)
        problems = []
        for cpu in (None, "haswell"):
            out = os.path.join(mdl.d, "out-" + (cpu or "native"))
            extra = ["--cpu=" + cpu] if cpu else []
            mdl.build(out, *extra)
            ll = os.path.join(mdl.d, "ll-" + (cpu or "native"))
            if cpu is None:   # the IR of one target is enough to see which kernels run
                mdl.build(ll, "--emit=llvm", *extra)
            ir = "".join(open(f).read() for f in glob.glob(os.path.join(ll, "*.ll")))
            # every f32 convolution here is depthwise: 12 of them, a task each;
            # the f64 one, the general tiles' task (on AVX-512, the short rows
            # of stride 1 run as one run of the plane, those of stride 2 in
            # pairs: d2, d3, d12, d13, odd and even row counts, one tile or a
            # loop of them)
            ntask = len(set(re.findall(r"define internal void @(cvdw\.task\.\d+)", ir)))
            ngen = len(set(re.findall(r"define internal void @(cv\.task\.\d+)", ir)))
            if cpu is None and (ntask, ngen) != (13, 1):
                problems.append("%s: %d depthwise tasks in the IR, %d general ones" % (cpu or "native", ntask, ngen))
            c = mdl.call(mdl.entry(out), "np-" + (cpu or "native"))
            exe = compile_driver(mdl.d, [c], [mdl.stem], [out], sorted(glob.glob(os.path.join(out, "*.o"))),
                                 name="driver_" + (cpu or "native"))
            for threads in ("1", "3"):
                r = run([exe], env=dict(os.environ, NESTRT_NUM_THREADS=threads))
                if r.returncode != 0:
                    raise Fail("compiled program at %s threads: %s" % (threads, describe([exe], r)))
                for k, (p, ref) in enumerate(zip(c.outputs, refs)):
                    g = np.load(p)
                    err = float(np.max(np.abs(g.astype(np.float64) - ref))) if np.all(np.isfinite(g)) else float("inf")
                    tol = (1e-12 if g.dtype == np.float64 else 1e-5) * max(1.0, float(np.max(np.abs(ref))))
                    if g.shape != ref.shape or not err <= tol:
                        problems.append("%s, result %d at %s threads: shape %s vs %s, max abs err %.3g" %
                                        (cpu or "native", k + 1, threads, g.shape, ref.shape, err))
        if problems:
            raise Fail("; ".join(problems[:6]))
    return single("kernels.conv2d_depthwise", fn)


# Attentions, softmax(q @ k ..., axis=-1) @ v, run a matrix of the batch at a
# time (codegen/attention.c): rank 4 with a scale, more keys than queries and
# value rows of another width; rank 3 with GPT-2's causal mask (rows not a
# multiple of a vector); an epilogue that reads a tensor of the scores' shape
# (relu, then a mask subtracted); and, not taken that way, a softmax that is
# also a result. Against NumPy at 1 and 3 threads; the profile names one
# attention kernel per attention taken, and the one softmax left.
SRC_ATTN = """
export fn forward(q: f32[2, 3, 37, 24], k: f32[2, 3, 24, 45], v: f32[2, 3, 45, 20], c: f32[3, 33, 16],
                  ck: f32[3, 16, 33], m: f32[2, 3, 37, 45]) ->
    (f32[2, 3, 37, 20], f32[3, 33, 16], f32[2, 3, 37, 20], f32[2, 3, 37, 45], f32[2, 3, 37, 20]) {
  let a = softmax(q @ k * 0.2, axis=-1) @ v
  let b = softmax(causal_mask(c @ ck * rsqrt(16.0)), axis=-1) @ c
  let s = softmax(q @ k, axis=-1)
  let d = softmax(relu(q @ k) - m, axis=-1) @ v
  return a, b, s @ v, s, d
}
"""


def softmax_np(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@check("kernels.attention")
def kernels_attention():
    def fn():
        ins = rng_inputs(41, q=(2, 3, 37, 24), k=(2, 3, 24, 45), v=(2, 3, 45, 20), c=(3, 33, 16), ck=(3, 16, 33),
                         m=(2, 3, 37, 45))
        i = {n: x.astype(np.float64) for n, x in ins.items()}
        cs = i["c"] @ i["ck"] / 4.0
        cs = np.where(np.triu(np.ones((33, 33), bool), 1), -np.inf, cs)
        s = softmax_np(i["q"] @ i["k"])
        refs = [softmax_np(i["q"] @ i["k"] * 0.2) @ i["v"], softmax_np(cs) @ i["c"], s @ i["v"], s,
                softmax_np(np.maximum(i["q"] @ i["k"], 0) - i["m"]) @ i["v"]]
        mdl = region_model("kernels.attention", SRC_ATTN, ins)
        out = os.path.join(mdl.d, "out")
        mdl.build(out)
        c = mdl.call(mdl.entry(out), "np")
        exe = compile_driver(mdl.d, [c], [mdl.stem], [out], sorted(glob.glob(os.path.join(out, "*.o"))),
                             name="driver_np")
        problems = []
        for threads in ("1", "3"):
            r = run([exe], env=dict(os.environ, NESTRT_NUM_THREADS=threads, NESTRT_PROFILE="2"))
            if r.returncode != 0:
                raise Fail("compiled program at %s threads: %s" % (threads, describe([exe], r)))
            for n, (p, ref) in enumerate(zip(c.outputs, refs)):
                g = np.load(p)
                err = float(np.max(np.abs(g.astype(np.float64) - ref))) if np.all(np.isfinite(g)) else float("inf")
                if g.shape != ref.shape or not err <= 1e-5 * max(1.0, float(np.max(np.abs(ref)))):
                    problems.append("result %d at %s threads: shape %s vs %s, max abs err %.3g"
                                    % (n + 1, threads, g.shape, ref.shape, err))
            lines = re.findall(r"^\s+(\w+)\s+(f32\[[\d, ]+\])", r.stderr, re.M)
            att = sorted(sh for op, sh in lines if op == "attention")
            if att != ["f32[2, 3, 37, 45]", "f32[2, 3, 37, 45]", "f32[3, 33, 33]"]:
                problems.append("attention kernels at %s threads: %s" % (threads, att or "none"))
            sm = sorted(sh for op, sh in lines if op == "softmax")
            if sm != ["f32[2, 3, 37, 45]"]:
                problems.append("softmax kernels at %s threads: %s (the one that is a result)" % (threads, sm))
        if problems:
            raise Fail("; ".join(problems))
    return single("kernels.attention", fn)


def values_at_threads(mdl, out, refs, rel):
    """The build in `out` run at 1 and 3 threads: every result within rel * max(1, max|ref|)
    of its reference (or Fail)."""
    for threads in (1, 3):
        env = dict(os.environ, NESTRT_NUM_THREADS=str(threads))
        got = run_compiled(mdl, out, tag="t%d" % threads, env=env)
        bad = output_errors(got, refs, lambda ref: rel * max(1.0, np.abs(ref).max()))
        if bad:
            raise Fail("at %d threads: %s" % (threads, "; ".join(bad)))


def ir_memmoves(path):
    """The byte counts of the memmove calls in an IR file (-O0: one call site each), sorted."""
    return sorted(int(m) for m in re.findall(r"call i8\* @memmove\([^)]*, i64 (\d+)\)", open(path).read()))


def output_errors(got, refs, tol):
    """What is wrong with each result against its reference: its shape, or a
    max abs error above tol(ref); a result missing or over."""
    bad = [] if len(got) == len(refs) else ["%d results, expected %d" % (len(got), len(refs))]
    for k, (g, ref) in enumerate(zip(got, refs)):
        if g.shape != ref.shape:
            bad.append("output %d: shape %s, expected %s" % (k, g.shape, ref.shape))
            continue
        err = np.abs(g.astype(np.float64) - ref).max()
        if not err <= tol(ref):
            bad.append("output %d: max abs err %.3g (largest value %.3g)" % (k, err, np.abs(ref).max()))
    return bad


# A convolution whose value only a pooling reads is computed with it, band
# by band (plan.c: conv_pool_geom, codegen/conv.c: k_conv2d_pool): ResNet's
# stem (7x7 of stride 2, bias, batch norm's scale and shift, relu, then max
# pooling 3/2/1) at batch 2 on planes that are not multiples of anything;
# average pooling 2/2 after a grouped 5x5; max pooling 3/1/1 (bands that
# share two rows) after a 3x3 of stride 2; f64; and, not fused, a convolution
# that is also a result. Against NumPy at 1 and 3 threads, and built for AVX2
# and SSE2; the profile names the fused kernels and no separate pooling for
# them.
SRC_CONV_POOL = """
export fn forward(x: f32[2, 3, 45, 39], w7: f32[24, 3, 7, 7], b: f32[24], sc: f32[24], sh: f32[24],
                  g: f32[1, 8, 30, 26], w5: f32[16, 4, 5, 5], y: f32[1, 16, 33, 29], w3: f32[32, 16, 3, 3]) ->
    (f32[2, 24, 12, 10], f32[1, 16, 15, 13], f32[1, 32, 17, 15], f64[1, 32, 8, 7], f32[1, 32, 17, 15],
     f32[1, 32, 9, 8]) {
  let stem = relu(conv2d(x, w7, b, stride=2, padding=3) * reshape(sc, [24, 1, 1]) + reshape(sh, [24, 1, 1]))
  let a = max_pool2d(stem, 3, stride=2, padding=1)
  let c = avg_pool2d(conv2d(g, w5, padding=2, groups=2) - 0.5, 2)
  let d = max_pool2d(conv2d(y, w3, stride=2, padding=1), 3, stride=1, padding=1)
  let e = max_pool2d(conv2d(f64(y), f64(w3), stride=2, padding=1), 2)
  let f = conv2d(y, w3, stride=2, padding=1) * 2.0
  return a, c, d, e, f, max_pool2d(f, 3, stride=2, padding=1)
}
"""


@check("kernels.conv2d_pool")
def kernels_conv2d_pool():
    ins = rng_inputs(43, x=(2, 3, 45, 39), w7=(24, 3, 7, 7), b=(24,), sc=(24,), sh=(24,), g=(1, 8, 30, 26),
                     w5=(16, 4, 5, 5), y=(1, 16, 33, 29), w3=(32, 16, 3, 3))
    mdl = region_model("kernels.conv2d_pool", SRC_CONV_POOL, ins)
    out = os.path.join(mdl.d, "out")
    state = {}

    def refs():
        i = {k: v.astype(np.float64) for k, v in ins.items()}
        col = lambda v: v.reshape(1, -1, 1, 1)
        stem = np.maximum(conv_ref(i["x"], i["w7"], i["b"], stride=2, pad=3) * col(i["sc"]) + col(i["sh"]), 0)
        d = conv_ref(i["y"], i["w3"], stride=2, pad=1)
        return [pool_ref(stem, (3, 3), (2, 2), (1, 1), np.max),
                pool_ref(conv_ref(i["g"], i["w5"], pad=2, groups=2) - 0.5, (2, 2), (2, 2), (0, 0), np.mean),
                pool_ref(d, (3, 3), (1, 1), (1, 1), np.max), pool_ref(d, (2, 2), (2, 2), (0, 0), np.max),
                d * 2.0, pool_ref(d * 2.0, (3, 3), (2, 2), (1, 1), np.max)]

    def case(threads, cpu=None):
        def fn():
            tag = "t%d%s" % (threads, "_" + cpu if cpu else "")
            o = out + ("_" + cpu if cpu else "")
            if o not in state:
                mdl.build(o, *(("--cpu", cpu) if cpu else ()))
                state[o] = True
            env = dict(os.environ, NESTRT_NUM_THREADS=str(threads), NESTRT_PROFILE="2")
            got, err = run_compiled(mdl, o, tag=tag, env=env, stderr=True)
            bad = output_errors(got, refs(), lambda ref: 1e-5 * max(1.0, np.abs(ref).max()))
            if got[3].dtype != np.float64:
                bad.append("output 3: %s, expected float64" % got[3].dtype)
            kinds = re.findall(r"^\s+(conv2d\+max_pool2d|conv2d\+avg_pool2d|conv2d|max_pool2d|avg_pool2d)\s+(f\d\d\[[^\]]*\])",
                               err, re.M)
            want = [("conv2d+max_pool2d", "f32[2, 24, 23, 20]"), ("conv2d+avg_pool2d", "f32[1, 16, 30, 26]"),
                    ("conv2d+max_pool2d", "f32[1, 32, 17, 15]"), ("conv2d+max_pool2d", "f64[1, 32, 17, 15]"),
                    ("conv2d", "f32[1, 32, 17, 15]"), ("max_pool2d", "f32[1, 32, 9, 8]")]
            if sorted(kinds) != sorted(want):
                bad.append("kernels at NESTRT_PROFILE=2: %s, expected %s" % (sorted(kinds), sorted(want)))
            if bad:
                raise Fail("; ".join(bad))
        return fn
    # also built for AVX2 (tiles of 12 sums) and SSE2 (vectors of 4 and 2: rows of 3 and 5 vectors)
    return (single("kernels.conv2d_pool_1_thread", case(1)) + single("kernels.conv2d_pool_3_threads", case(3))
            + single("kernels.conv2d_pool_avx2", case(2, "haswell")) + single("kernels.conv2d_pool_sse2", case(2, "x86-64"))
            + single("kernels.conv2d_pool_operands_live", conv_pool_operands_live)
            + single("kernels.conv2d_pool_state", conv_pool_state))


# Planes of 81 pixels (9x9): one past a multiple of every vector width (16, 8,
# 4), so the last vector of a plane holds one pixel, while the vectors (6 of
# 16) fill tiles of 2 or 3 evenly: the last column tile is unlike the others
# (a conv.c mutant that took it for one of them wrote 15 lanes past each
# plane, over the next channel's first pixels). 1x1 (the input read in
# place), 3x3 (copies), and 20 channels (row tiles with a shorter last);
# native, AVX2 and SSE2 builds, 1 and 3 threads, against NumPy.
SRC_CONV81 = """
export fn forward(x: f32[2, 16, 9, 9], w1: f32[20, 16, 1, 1], b: f32[20], w3: f32[20, 16, 3, 3]) ->
    (f32[2, 20, 9, 9], f32[2, 20, 9, 9]) {
  return conv2d(x, w1, b), relu(conv2d(x, w3, padding=1))
}
"""


@check("kernels.conv2d_plane_of_81")
def kernels_conv2d_81():
    ins = rng_inputs(53, x=(2, 16, 9, 9), w1=(20, 16, 1, 1), b=(20,), w3=(20, 16, 3, 3))
    mdl = region_model("kernels.conv2d_plane_of_81", SRC_CONV81, ins)
    i = {k: v.astype(np.float64) for k, v in ins.items()}
    refs = [conv_ref(i["x"], i["w1"], i["b"]), np.maximum(conv_ref(i["x"], i["w3"], pad=1), 0)]

    def case(cpu):
        def fn():
            o = os.path.join(mdl.d, "out_" + (cpu or "native"))
            mdl.build(o, *(("--cpu", cpu) if cpu else ()))
            for threads in (1, 3):
                env = dict(os.environ, NESTRT_NUM_THREADS=str(threads))
                got = run_compiled(mdl, o, tag="t%d_%s" % (threads, cpu or "native"), env=env)
                bad = output_errors(got, refs, lambda ref: 1e-5 * max(1.0, np.abs(ref).max()))
                if bad:
                    raise Fail("at %d threads: %s" % (threads, "; ".join(bad)))
        return fn
    return (single("kernels.conv2d_plane_of_81", case(None)) + single("kernels.conv2d_plane_of_81_avx2", case("haswell"))
            + single("kernels.conv2d_plane_of_81_sse2", case("x86-64")))


# Convolutions of large windows, whose kernel positions (more than 64) are
# reduced in a loop over runs of them and whose copies (more than 64 phases
# and columns) are made in a loop: a 16x16 patch embedding of stride 16 (its
# pixels' tiles; and with output channels in the lanes, on AVX-512), an
# 11x11 one of stride 4 (a run of 11) and a 1x67 one (67 positions, a prime:
# runs of 1). Unrolled, the patch embedding alone was 200,000 lines of IR
# and two minutes to build; no function may now pass 6,000. Against NumPy.
# The report gives the model object's code size and compile time.
SRC_CONV_LARGE = """
export fn forward(x: f32[1, 3, 64, 48], wp: f32[20, 3, 16, 16], bp: f32[20], y: f32[1, 3, 112, 112],
                  wl: f32[48, 3, 16, 16], z: f32[1, 3, 39, 39], w11: f32[8, 3, 11, 11], r: f32[1, 2, 3, 80],
                  w67: f32[5, 2, 1, 67]) ->
    (f32[1, 20, 4, 3], f32[1, 48, 7, 7], f32[1, 8, 9, 9], f32[1, 5, 3, 14]) {
  return conv2d(x, wp, bp, stride=16), relu(conv2d(y, wl, stride=16)), conv2d(z, w11, stride=4, padding=2),
         conv2d(r, w67)
}
"""


@check("kernels.conv2d_large_windows")
def kernels_conv2d_large():
    shapes = dict(x=(1, 3, 64, 48), wp=(20, 3, 16, 16), bp=(20,), y=(1, 3, 112, 112), wl=(48, 3, 16, 16),
                  z=(1, 3, 39, 39), w11=(8, 3, 11, 11), r=(1, 2, 3, 80), w67=(5, 2, 1, 67))
    ins = rng_inputs(61, **shapes)
    mdl = region_model("kernels.conv2d_large_windows", SRC_CONV_LARGE, ins)
    i = {k: v.astype(np.float64) for k, v in ins.items()}
    refs = [conv_ref(i["x"], i["wp"], i["bp"], stride=16), np.maximum(conv_ref(i["y"], i["wl"], stride=16), 0),
            conv_ref(i["z"], i["w11"], stride=4, pad=2), conv_ref(i["r"], i["w67"])]

    def case(cpu):
        def fn():
            tag = cpu or "native"
            ll = os.path.join(mdl.d, "ll_" + tag)
            mdl.build(ll, "--emit=llvm", *(("--cpu", cpu) if cpu else ()))
            sizes, name, n = {}, None, 0
            for path in glob.glob(os.path.join(ll, "*.ll")):
                for line in open(path):
                    if line.startswith("define "):
                        name, n = line.split("@", 1)[1].split("(", 1)[0], 0
                    n += 1
                    if line.startswith("}") and name:
                        sizes[name] = n
            big = {f: c for f, c in sizes.items() if c > 6000}
            if not sizes or big:
                raise Fail("functions of more than 6,000 lines of IR: %s" % (big or "no function found"))
            o = os.path.join(mdl.d, "out_" + tag)
            # the report gives the model's object's code size and compile time
            # (a graph without regions is all in it), in text and in JSON
            t = mdl.build(o, "--report", *(("--cpu", cpu) if cpu else ())).stdout
            mo = re.search(r"^model object m\.o, (\d+) bytes of code, (compiled in [\d.]+ ms|taken from the cache); "
                           r"\d+ kernels$", t, re.M)
            jpath = os.path.join(mdl.d, "report_%s.json" % tag)
            mdl.build(o, "--report=json", "--report-file", jpath, *(("--cpu", cpu) if cpu else ()))
            j = json.load(open(jpath)).get("model_object") or {}
            if not mo or int(mo.group(1)) < 1000 or j.get("object") != "m.o" or j.get("code_bytes") != int(mo.group(1)):
                raise Fail("report's model object: text %r, JSON %s" % (mo and mo.group(0), j))
            for threads in (1, 3):
                env = dict(os.environ, NESTRT_NUM_THREADS=str(threads))
                got = run_compiled(mdl, o, tag="t%d_%s" % (threads, tag), env=env)
                bad = output_errors(got, refs, lambda ref: 1e-5 * max(1.0, np.abs(ref).max()))
                if bad:
                    raise Fail("at %d threads: %s" % (threads, "; ".join(bad)))
        return fn
    return (single("kernels.conv2d_large_windows", case(None)) + single("kernels.conv2d_large_windows_avx2", case("haswell"))
            + single("kernels.conv2d_large_windows_sse2", case("x86-64")))


# Kernels compiled once (issue #38): three 3x3 16->16 convolutions with a
# ReLU over weights of their own are one kernel function, called three times;
# a fourth of 24 channels is another; two tanh(.) * 2 of [64, 1024] are one.
# The object has 3 task functions of 6, the report says so (text and JSON,
# and again when the object comes from the cache), and the values are
# NumPy's at 1 and 3 threads.
SRC_SHARED_KERNELS = """
export fn forward(x: f32[1, 16, 20, 20], w1: f32[16, 16, 3, 3], w2: f32[16, 16, 3, 3], w3: f32[16, 16, 3, 3],
                  w4: f32[24, 16, 3, 3], p: f32[64, 1024], q: f32[64, 1024]) ->
    (f32[1, 16, 20, 20], f32[1, 24, 20, 20], f32[64, 1024], f32[64, 1024]) {
  let a = relu(conv2d(x, w1, padding=1))
  let b = relu(conv2d(a, w2, padding=1))
  return relu(conv2d(b, w3, padding=1)), conv2d(x, w4, padding=1), tanh(p) * 2.0, tanh(q) * 2.0
}
"""


@check("kernels.shared_identical")
def kernels_shared_identical():
    shapes = dict(x=(1, 16, 20, 20), w1=(16, 16, 3, 3), w2=(16, 16, 3, 3), w3=(16, 16, 3, 3), w4=(24, 16, 3, 3),
                  p=(64, 1024), q=(64, 1024))
    ins = rng_inputs(67, **shapes)
    mdl = region_model("kernels.shared_identical", SRC_SHARED_KERNELS, ins)
    i = {k: v.astype(np.float64) for k, v in ins.items()}
    a = np.maximum(conv_ref(i["x"], i["w1"], pad=1), 0)
    b = np.maximum(conv_ref(a, i["w2"], pad=1), 0)
    refs = [np.maximum(conv_ref(b, i["w3"], pad=1), 0), conv_ref(i["x"], i["w4"], pad=1),
            np.tanh(i["p"]) * 2, np.tanh(i["q"]) * 2]

    def fn():
        ll = os.path.join(mdl.d, "ll")
        mdl.build(ll, "--emit=llvm", "--no-cache")
        tasks = [line.split("@", 1)[1].split("(", 1)[0] for line in open(os.path.join(ll, "m.ll"))
                 if line.startswith("define ") and ".task." in line]
        if len(tasks) != 3:
            raise Fail("the object defines %d kernel functions %s, expected 3 (6 kernels, 3 of them identical "
                       "to another)" % (len(tasks), tasks))
        cache = os.path.join(mdl.d, "cache")
        o = os.path.join(mdl.d, "out")
        for how in ("compiled in [\\d.]+ ms", "taken from the cache"):
            t = mdl.build(o, "--report", "--cache-dir", cache).stdout
            if not re.search(r"^model object m\.o, \d+ bytes of code, %s; 6 kernels, 3 shared$" % how, t, re.M):
                raise Fail("report, expected 'model object m.o, N bytes of code, %s; 6 kernels, 3 shared' in:\n%s"
                           % (how, t))
        jpath = os.path.join(mdl.d, "report.json")
        mdl.build(o, "--report=json", "--report-file", jpath, "--cache-dir", cache)
        j = json.load(open(jpath)).get("model_object") or {}
        if j.get("kernels") != 6 or j.get("kernels_shared") != 3:
            raise Fail("JSON model_object %s: expected kernels 6, kernels_shared 3" % j)
        values_at_threads(mdl, o, refs, 1e-5)
    return single("kernels.shared_identical", fn)


# The model's object in parts (issue #38): an entry point of many kernels
# (DenseNet-121's 124, no repeated layers) is compiled as NAME.o plus
# NAME.model-K.o, one object per 32 heavy kernels, so that -j builds it on
# every core. 36 convolutions of 8, 12 or 16 channels (33 kernels: 4 shared)
# make two parts; the values are NumPy's at 1 and 3 threads, linked from the
# objects and from an archive; the report names the parts; a smaller model
# built into the same directory removes the stale part. The image is [1, 8,
# 64, 64]: its ReLU of a sum is spread over the channels (batch 1), and a
# channel concat of nine tensors is nine copies.
PARTS_CH = [8] + [(8, 12, 16)[(k * 7) % 3] for k in range(1, 36)] + [8]


def parts_source(n, region=False):
    """n convolutions in forward, or (region) in a region function forward calls once."""
    ch = PARTS_CH[:n] + [8]
    ws = ", ".join("w%d: f32[%d, %d, 3, 3]" % (k, ch[k + 1], ch[k]) for k in range(n))
    args = ", ".join("w%d" % k for k in range(n))
    body = "".join("  let h%d = relu(conv2d(h%d, w%d, padding=1))\n" % (k + 1, k, k) for k in range(n))
    cat = ", ".join("h%d" % (n - j) for j in range(9))
    sig = "(f32[1, 8, 64, 64], f32[1, %d, 64, 64])" % sum(ch[n - j] for j in range(9))
    ret = "  return relu(h%d + x), concat([%s], axis=1)\n}\n" % (n, cat)
    if region:
        return ("@region\nfn body(x: f32[1, 8, 64, 64], %s) -> %s {\n  let h0 = x\n%s%s"
                "export fn forward(x: f32[1, 8, 64, 64], %s) -> %s {\n  return body(x, %s)\n}\n"
                % (ws, sig, body, ret, ws, sig, args))
    return "export fn forward(x: f32[1, 8, 64, 64], %s) -> %s {\n  let h0 = x\n%s%s" % (ws, sig, body, ret)


@check("kernels.model_in_parts")
def kernels_model_in_parts():
    n = 36
    ch = PARTS_CH[:n] + [8]
    shapes = dict(x=(1, 8, 64, 64))
    shapes.update({"w%d" % k: (ch[k + 1], ch[k], 3, 3) for k in range(n)})
    ins = rng_inputs(71, **shapes)
    for k in range(n):   # He-like scale: the values stay in range through 36 layers
        ins["w%d" % k] *= np.float32(np.sqrt(6.0 / (9 * ch[k])))
    mdl = region_model("kernels.model_in_parts", parts_source(n), ins)
    i = {k: v.astype(np.float64) for k, v in ins.items()}
    h = [i["x"]]
    for k in range(n):
        h.append(np.maximum(conv_ref(h[-1], i["w%d" % k], pad=1), 0))
    refs = [np.maximum(h[n] + i["x"], 0), np.concatenate([h[n - j] for j in range(9)], axis=1)]

    def fn():
        o = os.path.join(mdl.d, "out")
        t = mdl.build(o, "--report", "--no-cache").stdout
        expect_objects(o, ["m.o", "m.model-1.o"])
        if not re.search(r"^model object m\.o in 2 parts \(m\.o, m\.model-1\.o\), \d+ bytes of code, compiled in "
                         r"[\d.]+ ms; (3[6-9]|4\d) kernels, \d+ shared$", t, re.M):
            raise Fail("report, expected 'model object m.o in 2 parts (m.o, m.model-1.o), N bytes of code, "
                       "compiled in X ms; K kernels, S shared' (K from 36 to 49) in:\n%s" % t)
        jpath = os.path.join(mdl.d, "report.json")
        mdl.build(o, "--report=json", "--report-file", jpath)
        j = json.load(open(jpath)).get("model_object") or {}
        if j.get("parts") != ["m.o", "m.model-1.o"] or not 36 <= j.get("kernels", 0) < 50:
            raise Fail("JSON model_object %s: expected parts [m.o, m.model-1.o], kernels from 36 to 49" % j)
        # each part defines its own kernels, hidden, and the other declares them
        syms = {f: run(["nm", os.path.join(o, f)]).stdout for f in ("m.o", "m.model-1.o")}
        own = [set(re.findall(r" T (m__\w+\.task\.\d+)$", syms[f], re.M)) for f in ("m.o", "m.model-1.o")]
        if not own[1] or not own[0].isdisjoint(own[1]) or not own[1] <= set(re.findall(r" U (\S+)$", syms["m.o"], re.M)):
            raise Fail("kernels defined: m.o %s, m.model-1.o %s; m.o must call the second's" % (own[0], own[1]))
        for f in ("m.o", "m.model-1.o"):
            seen = re.findall(r"\b(DEFAULT|HIDDEN)\s+\S+\s+(m__\S+\.task\.\d+)$",
                              run(["readelf", "-sW", os.path.join(o, f)]).stdout, re.M)
            if not seen or any(v != "HIDDEN" for v, _ in seen):
                raise Fail("%s: the kernels' symbols %s, expected every one HIDDEN" % (f, seen))
        values_at_threads(mdl, o, refs, 1e-4)
        # relu(h36 + x), [1, 8, 64, 64], runs on the pool over its 8 channels
        ll = os.path.join(mdl.d, "ll")
        mdl.build(ll, "--emit=llvm", "--no-cache")
        text = "".join(open(os.path.join(ll, f)).read() for f in ("m.ll", "m.model-1.ll"))
        if not re.search(r"^define hidden void @m__par\.task\.\d+", text, re.M):
            raise Fail("no pool task for relu(h36 + x) of [1, 8, 64, 64] in the IR")
        # from an archive: the link takes the second part by its marker
        a = os.path.join(mdl.d, "lib", "libm.a")
        os.makedirs(os.path.dirname(a), exist_ok=True)
        mdl.build(a)
        e = mdl.entry(os.path.dirname(a))
        c = mdl.call(e, "ar")
        exe = compile_driver(mdl.d, [c], [mdl.stem], [os.path.dirname(a)], [a], name="driver_ar")
        r = run([exe])
        if r.returncode != 0:
            raise Fail("linked from the archive: " + describe([exe], r))
        bad = output_errors([np.load(p) for p in c.outputs], refs, lambda ref: 1e-4 * max(1.0, np.abs(ref).max()))
        if bad:
            raise Fail("linked from the archive: " + "; ".join(bad))
        # the convolutions of a region's call compiled inline count too
        inl = region_model("kernels.model_in_parts_inline", parts_source(n, region=True), {})
        oi = os.path.join(inl.d, "out")
        nestc("build", inl.src, "-o", oi, "--no-regions")
        expect_objects(oi, ["m.o", "m.model-1.o"])
        # a model of 9 layers is one object: the stale part goes, other files stay
        for f in ("m.handwritten.o", "m.model-x.o"):
            write(os.path.join(o, f), "")
        small = region_model("kernels.model_in_parts_small", parts_source(9), {})
        nestc("build", small.src, "-o", o)
        expect_objects(o, ["m.handwritten.o", "m.model-x.o", "m.o"])
    return single("kernels.model_in_parts", fn)


# Copies as runs (issue #38): a slice, a transpose that keeps the last axes,
# a gather of long rows and a concat whose pieces are runs of at least 1 KiB
# are memmoves of those runs; a concat of short runs and a slice of short
# rows stay loops; an elementwise op whose operands step alike through the
# last axes (a per-channel scale of a [1, C, H, W] image, a plane one loop)
# and one that does not (a per-column scale). Values against NumPy at 1 and
# 3 threads; the IR holds the memmoves (a constant loop of 9,408 floats was
# unrolled into a block of 4,000 instructions).
SRC_RUNS = """
export fn forward(x: f32[2, 40, 64], t: f32[10, 300], idx: i32[7], a: f32[3, 5, 100], b: f32[3, 2, 100],
                  img: f32[1, 6, 50, 70], s: f32[6, 1, 1], col: f32[1, 1, 1, 70]) ->
    (f32[2, 37, 64], f32[40, 2, 64], f32[7, 300], f32[3, 7, 100], f32[2, 40, 7], f32[3, 14, 100],
     f32[1, 6, 50, 70], f32[1, 6, 50, 70]) {
  return x[:, 3:, :], transpose(x, [1, 0, 2]), t[idx], concat([a, b], axis=1), x[:, :, 2:9],
         concat([a, b, a, b], axis=1) + 1.0, relu(img * s + 0.5), img * col
}
"""


@check("kernels.copies_as_runs")
def kernels_copies_as_runs():
    ins = rng_inputs(73, x=(2, 40, 64), t=(10, 300), a=(3, 5, 100), b=(3, 2, 100), img=(1, 6, 50, 70),
                     s=(6, 1, 1), col=(1, 1, 1, 70))
    ins["idx"] = np.array([3, 0, 9, 9, 4, 1, 7], np.int32)
    mdl = region_model("kernels.copies_as_runs", SRC_RUNS, ins)
    i = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in ins.items()}
    x, a, b = i["x"], i["a"], i["b"]
    refs = [x[:, 3:, :], x.transpose(1, 0, 2), i["t"][i["idx"]], np.concatenate([a, b], axis=1), x[:, :, 2:9],
            np.concatenate([a, b, a, b], axis=1) + 1.0, np.maximum(i["img"] * i["s"] + 0.5, 0), i["img"] * i["col"]]

    def fn():
        ll = os.path.join(mdl.d, "ll")
        mdl.build(ll, "--emit=llvm", "-O0", "--no-cache")
        moves = ir_memmoves(os.path.join(ll, "m.ll"))
        # the slice: 2 runs of 37 x 64 floats (one call in a loop); the transpose: 40 x 2
        # runs of 64 floats, 256 bytes each, stay a loop; the gather: rows of 1200 bytes;
        # each concat, per input, a run of 500 floats (a) or of 200 (b) in a loop over its
        # 3 rows, the second as concat([the first, a, b]) (plan.c's chains: a run of 700
        # floats for the first); the narrow slice x[:, :, 2:9] stays a loop
        want = sorted([37 * 64 * 4, 300 * 4] + [500 * 4, 200 * 4] * 2 + [700 * 4])
        if moves != want:
            raise Fail("memmoves of %s bytes, expected %s" % (moves, want))
        o = os.path.join(mdl.d, "out")
        mdl.build(o)
        values_at_threads(mdl, o, refs, 1e-6)
    return single("kernels.copies_as_runs", fn)


# Concats in place (issue #38): a dense block's torch.cat of every feature
# so far, one concat a layer, is a chain; each concat lives in the next
# one's storage and each feature is computed straight into its place, so
# only the block's input (a graph input) is copied, once. Where a piece's
# offset is not a multiple of 64 bytes (5x5 planes of 3 channels) the
# pieces after it are copied; concats along different axes do not chain.
# Values against NumPy at 1 and 3 threads; the IR's memmoves.
SRC_CONCAT_IN_PLACE = """
export fn forward(x: f32[1, 8, 16, 16], w1: f32[4, 8, 3, 3], w2: f32[4, 12, 3, 3], w3: f32[4, 16, 3, 3],
                  y: f32[1, 3, 5, 5], v: f32[3, 3, 1, 1], p: f32[2, 2], q: f32[2, 2], r: f32[2, 2]) ->
    (f32[1, 20, 16, 16], f32[1, 16, 16, 16], f32[1, 9, 5, 5], f32[4, 2], f32[2, 6]) {
  let f1 = relu(conv2d(x, w1, padding=1))
  let c1 = concat([x, f1], axis=1)
  let f2 = relu(conv2d(c1 * 0.5, w2, padding=1))
  let c2 = concat([x, f1, f2], axis=1)
  let f3 = relu(conv2d(c2, w3, padding=1))
  let c3 = concat([x, f1, f2, f3], axis=1)
  let g0 = relu(conv2d(y, v))
  let g1 = conv2d(g0, v)
  let g2 = conv2d(g1, v)
  return c3 * 2.0, c2 + 1.0, concat([g0, g1, g2], axis=1) - 1.0, concat([p, q], axis=0), concat([p, q, r], axis=1)
}
"""


@check("kernels.concat_in_place")
def kernels_concat_in_place():
    ins = rng_inputs(79, x=(1, 8, 16, 16), w1=(4, 8, 3, 3), w2=(4, 12, 3, 3), w3=(4, 16, 3, 3), y=(1, 3, 5, 5),
                     v=(3, 3, 1, 1), p=(2, 2), q=(2, 2), r=(2, 2))
    mdl = region_model("kernels.concat_in_place", SRC_CONCAT_IN_PLACE, ins)
    i = {k: v.astype(np.float64) for k, v in ins.items()}
    f1 = np.maximum(conv_ref(i["x"], i["w1"], pad=1), 0)
    c1 = np.concatenate([i["x"], f1], axis=1)
    f2 = np.maximum(conv_ref(c1 * 0.5, i["w2"], pad=1), 0)
    c2 = np.concatenate([i["x"], f1, f2], axis=1)
    f3 = np.maximum(conv_ref(c2, i["w3"], pad=1), 0)
    c3 = np.concatenate([c2, f3], axis=1)
    g0 = np.maximum(conv_ref(i["y"], i["v"]), 0)
    g1 = conv_ref(g0, i["v"])
    g2 = conv_ref(g1, i["v"])
    # a concat along another axis is no prefix of the next one's: no chain
    refs = [c3 * 2.0, c2 + 1.0, np.concatenate([g0, g1, g2], axis=1) - 1.0,
            np.concatenate([i["p"], i["q"]], axis=0), np.concatenate([i["p"], i["q"], i["r"]], axis=1)]

    def fn():
        ll = os.path.join(mdl.d, "ll")
        mdl.build(ll, "--emit=llvm", "-O0", "--no-cache")
        moves = ir_memmoves(os.path.join(ll, "m.ll"))
        # x into c1, once (c1 lives in c2, c2 in c3); g1 and g2 at 300 and 600 bytes
        if moves != [300, 300, 8 * 256 * 4]:
            raise Fail("memmoves of %s bytes, expected [300, 300, 8192] (x copied once, g1 and g2)" % moves)
        o = os.path.join(mdl.d, "out")
        mdl.build(o)
        values_at_threads(mdl, o, refs, 1e-5)
    return single("kernels.concat_in_place", fn)


# -O1, the level for quick builds, leaves LLVM's unrolling out: a rotary
# embedding's scalar loop of 256 elements a row was unrolled whole into one
# block of 3,078 lines of IR, whose instruction selection took 16 s of a tiny
# LLaMA's build. No block may now pass 400 lines; values against NumPy.
SRC_O1_ROPE = """
export fn forward(x: f32[8, 8, 32], c: f32[8, 32], s: f32[8, 32]) -> f32[8, 8, 32] {
  let x1, x2 = split(x, 2, axis=-1)
  return x * c + concat([-x2, x1], axis=-1) * s
}
"""


@check("kernels.o1_blocks_not_unrolled")
def kernels_o1_blocks():
    ins = rng_inputs(71, x=(8, 8, 32), c=(8, 32), s=(8, 32))
    mdl = region_model("kernels.o1_blocks_not_unrolled", SRC_O1_ROPE, ins)
    x = ins["x"].astype(np.float64)
    ref = x * ins["c"] + np.concatenate([-x[..., 16:], x[..., :16]], axis=-1) * ins["s"]

    def fn():
        ll = os.path.join(mdl.d, "ll")
        mdl.build(ll, "-O1", "--emit=llvm", "--no-cache")
        biggest, n, inside = 0, 0, False
        for line in open(os.path.join(ll, "m.ll")):
            if line.startswith("define "):
                inside, n = True, 0
            elif inside and (line.startswith("}") or re.match(r"^[\w.]+:", line)):
                biggest, n = max(biggest, n), 0
                inside = not line.startswith("}")
            elif inside:
                n += 1
        if biggest == 0 or biggest > 400:
            raise Fail("-O1: a basic block of %d lines of IR (at most 400)" % biggest)
        o = os.path.join(mdl.d, "out")
        mdl.build(o, "-O1", "--no-cache")
        bad = output_errors(run_compiled(mdl, o), [ref], lambda r: 1e-6 * max(1.0, np.abs(r).max()))
        if bad:
            raise Fail("; ".join(bad))
    return single("kernels.o1_blocks_not_unrolled", fn)


# A 1x1 convolution of a model's weights with output channels in the lanes
# (AVX-512) over a plane that is not square (5x7: 35 pixels): the input is
# read in place, channel
# after channel 35 elements apart (a conv.c mutant that took 7x7 for the
# plane passed make check, whose lanes planes were all square). Against NumPy.
SRC_LANES_1X1_RECT = """
param w: f32[48, 64, 1, 1]
param b: f32[48]
export fn forward(x: f32[2, 64, 5, 7]) -> f32[2, 48, 5, 7] {
  return relu(conv2d(x, w, b))
}
"""


@check("kernels.conv2d_lanes_1x1_not_square")
def kernels_conv2d_lanes_rect():
    def fn():
        ins = rng_inputs(71, x=(2, 64, 5, 7))
        mdl = region_model("kernels.conv2d_lanes_rect", SRC_LANES_1X1_RECT, ins)
        out = os.path.join(mdl.d, "out")
        mdl.build(out)
        w = read_safetensors(mdl.weights)
        ref = np.maximum(conv_ref(ins["x"], w["w"], w["b"]), 0)
        for threads in (1, 3):
            env = dict(os.environ, NESTRT_NUM_THREADS=str(threads))
            bad = output_errors(run_compiled(mdl, out, tag="t%d" % threads, env=env), [ref],
                                lambda r: 1e-5 * max(1.0, np.abs(r).max()))
            if bad:
                raise Fail("at %d threads: %s" % (threads, "; ".join(bad)))
    return single("kernels.conv2d_lanes_1x1_not_square", fn)


# Activations fused into a convolution's epilogue (issue #38): SiLU, sigmoid,
# tanh, GELU and its tanh form, hardswish (scaled by 4 so that both of its
# bends are crossed) applied to the tiles in registers, after a
# bias, a scale per channel, a scalar; a depthwise one; the weights as
# inputs (the pixels' tiles) and as params (a 1x1 with output channels in the
# lanes on AVX-512, a 3x3 of 32 to 64 channels in Winograd's tiles). Each
# convolution is one kernel with its activation (no kernel of its own), and
# the values are NumPy's in float64 in native, AVX2 and SSE2 builds, at 1 and
# 3 threads.
SRC_CONV_ACT = """
param pw1: f32[48, 64, 1, 1]
param pb1: f32[48]
param pw3: f32[64, 32, 3, 3]
export fn forward(x: f32[1, 24, 13, 11], w3: f32[20, 24, 3, 3], b3: f32[20], w1: f32[16, 24, 1, 1],
                  wd: f32[24, 1, 5, 5], s: f32[20, 1, 1], y: f32[2, 64, 5, 7], z: f32[1, 32, 20, 20]) ->
    (f32[1, 20, 13, 11], f32[1, 16, 13, 11], f32[1, 20, 6, 5], f32[1, 16, 13, 11], f32[1, 24, 13, 11],
     f32[1, 20, 13, 11], f32[2, 48, 5, 7], f32[1, 64, 20, 20], f32[1, 16, 13, 11], f32[2, 48, 5, 7]) {
  return silu(conv2d(x, w3, b3, padding=1)), sigmoid(conv2d(x, w1)), tanh(conv2d(x, w3, stride=2)),
         gelu(conv2d(x, w1) * 0.5), silu(conv2d(x, wd, padding=2, groups=24)),
         gelu_tanh(conv2d(x, w3, padding=1) * s) + 1.0, silu(conv2d(y, pw1, pb1)), sigmoid(conv2d(z, pw3, padding=1)),
         hardswish(conv2d(x, w1) * 4.0), hardswish(conv2d(y, pw1) * 4.0)
}
"""


@check("kernels.conv2d_fused_activations")
def kernels_conv2d_fused_activations():
    shapes = dict(x=(1, 24, 13, 11), w3=(20, 24, 3, 3), b3=(20,), w1=(16, 24, 1, 1), wd=(24, 1, 5, 5), s=(20, 1, 1),
                  y=(2, 64, 5, 7), z=(1, 32, 20, 20))
    ins = rng_inputs(73, **shapes)
    mdl = region_model("kernels.conv2d_fused_activations", SRC_CONV_ACT, ins)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    gelu_t = lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))  # noqa: E731
    hsw = lambda v: v * np.clip(v + 3, 0, 6) / 6  # noqa: E731

    def refs():
        i = {k: v.astype(np.float64) for k, v in ins.items()}
        w = {k: v.astype(np.float64) for k, v in read_safetensors(mdl.weights).items()}
        a = conv_ref(i["x"], i["w3"], i["b3"], pad=1)
        g = conv_ref(i["x"], i["w1"]) * 0.5
        d = conv_ref(i["x"], i["wd"], pad=2, groups=24)
        p = conv_ref(i["y"], w["pw1"], w["pb1"])
        return [a * sig(a), sig(conv_ref(i["x"], i["w1"])), np.tanh(conv_ref(i["x"], i["w3"], stride=2)),
                0.5 * g * (1 + erf(g / np.sqrt(2))), d * sig(d), gelu_t(conv_ref(i["x"], i["w3"], pad=1) * i["s"]) + 1,
                p * sig(p), sig(conv_ref(i["z"], w["pw3"], pad=1)), hsw(conv_ref(i["x"], i["w1"]) * 4),
                hsw(conv_ref(i["y"], w["pw1"]) * 4)]

    def case(cpu):
        def fn():
            tag = cpu or "native"
            ll = os.path.join(mdl.d, "ll_" + tag)
            mdl.build(ll, "--emit=llvm", "--no-cache", *(("--cpu", cpu) if cpu else ()))
            text = open(os.path.join(ll, "m.ll")).read()
            nk = text.count("call i64 @nestrt_kprof_begin")
            if nk != 14:  # 10 convolutions, the consts 0.5, 1.0, 4.0 and 4.0 filled: no activation of its own
                raise Fail("%d kernels in the entry, expected 14 (each activation in its convolution)" % nk)
            wino = "define internal void @wg.task" in text
            lanes = "define internal void @cl.task" in text
            if (cpu != "x86-64" and not wino) or (not cpu and " avx512f" in open("/proc/cpuinfo").read() and not lanes):
                raise Fail("the params' convolutions were to take Winograd's tiles (AVX2 and up) and the lanes "
                           "(AVX-512): Winograd %s, lanes %s" % (wino, lanes))
            o = os.path.join(mdl.d, "out_" + tag)
            mdl.build(o, *(("--cpu", cpu) if cpu else ()))
            want = refs()
            for threads in (1, 3):
                env = dict(os.environ, NESTRT_NUM_THREADS=str(threads))
                got = run_compiled(mdl, o, tag="t%d_%s" % (threads, tag), env=env)
                bad = output_errors(got, want, lambda ref: 1e-5 * max(1.0, np.abs(ref).max()))
                if bad:
                    raise Fail("%s at %d threads: %s" % (tag, threads, "; ".join(bad)))
        return fn
    return (single("kernels.conv2d_fused_activations", case(None))
            + single("kernels.conv2d_fused_activations_avx2", case("haswell"))
            + single("kernels.conv2d_fused_activations_sse2", case("x86-64")))


# The report's figures of a variant's object: one kernel is "1 kernel" (no
# shared count when none is); the totals' compile time is the sum of the
# variants', and with two calls of one variant the time saved by reuse is one
# compile of it (text and JSON).
SRC_ONE_KERNEL = """
param w: f32[8, 4, 3, 3]

@region
fn blk(x: f32[1, 4, 10, 10]) -> f32[1, 8, 10, 10] {
  return relu(conv2d(x, w, padding=1))
}

export fn forward(a: f32[1, 4, 10, 10]) -> (f32[1, 8, 10, 10], f32[1, 8, 10, 10]) {
  return blk(a), blk(a * 2.0)
}
"""


@check("report.object_figures")
def report_object_figures():
    def fn():
        m = region_model("report.object_figures", SRC_ONE_KERNEL, rng_inputs(89, a=(1, 4, 10, 10)))
        out = os.path.join(m.d, "out")
        t = m.build(out, "--report", "--no-cache").stdout
        obj = re.search(r"^    object m\.blk\.0\.o, \d+ bytes of code, compiled in ([\d.]+) ms; 1 kernel$", t, re.M)
        tot = re.search(r"^compile time: ([\d.]+) ms for the variants, about ([\d.]+) ms saved by reuse$", t, re.M)
        # two calls, one of them reused: the saving is one compile of it
        if not obj or not tot or abs(float(obj.group(1)) - float(tot.group(1))) > 0.051 or \
                abs(float(obj.group(1)) - float(tot.group(2))) > 0.051:
            raise Fail("expected the variant's object with '; 1 kernel', and the totals' compile time and the time "
                       "saved by reuse equal to its own:\n" + t)
        jpath = os.path.join(m.d, "report.json")
        m.build(out, "--report=json", "--report-file", jpath, "--no-cache")
        j = json.load(open(jpath))
        vs = j["variants"]
        if len(vs) != 1 or vs[0].get("kernels") != 1 or vs[0].get("kernels_shared") != 0 or \
                abs(j["totals"]["compile_ms"] - sum(v["compile_ms"] for v in vs)) > 1e-6 or vs[0]["compile_ms"] <= 0 or \
                abs(j["totals"]["compile_ms_saved"] - vs[0]["compile_ms"]) > 1e-6:
            raise Fail("JSON variants %s, totals %s" % (vs, j["totals"]))
        if report_json(m).get("model_object", 0) is not None:
            raise Fail("nestc report (no build): model_object should be null")
        values_ok(m.check_compiled(out))
    return single("report.object_figures", fn)


# A convolution whose activation (hardswish, SiLU) is fused, computed with
# the max or average pooling that reads it (one kernel: conv2d+pool): the
# pooling takes the activated values. Against NumPy.
SRC_CONV_POOL_ACT = """
export fn forward(x: f32[1, 8, 16, 16], w: f32[12, 8, 3, 3]) -> (f32[1, 12, 8, 8], f32[1, 12, 8, 8]) {
  return max_pool2d(hardswish(conv2d(x, w, padding=1) * 3.0), 2), avg_pool2d(silu(conv2d(x, w, padding=1)), 2)
}
"""


@check("kernels.conv2d_pool_activations")
def kernels_conv2d_pool_act():
    def fn():
        ins = rng_inputs(83, x=(1, 8, 16, 16), w=(12, 8, 3, 3))
        mdl = region_model("kernels.conv2d_pool_activations", SRC_CONV_POOL_ACT, ins)
        ll = os.path.join(mdl.d, "ll")
        mdl.build(ll, "--emit=llvm", "--no-cache")
        t = open(os.path.join(ll, "m.ll")).read()
        nk = t.count("call i64 @nestrt_kprof_begin")
        if t.count("define internal void @cvpool") != 2 or nk != 3:
            raise Fail("expected two conv2d+pool kernels and the const 3.0 (3 kernels), got %d kernels" % nk)
        o = os.path.join(mdl.d, "out")
        mdl.build(o)
        c = conv_ref(ins["x"].astype(np.float64), ins["w"].astype(np.float64), pad=1)
        h = c * 3
        h = h * np.clip(h + 3, 0, 6) / 6
        sl = c / (1 + np.exp(-c))
        refs = [h.reshape(1, 12, 8, 2, 8, 2).max(axis=(3, 5)), sl.reshape(1, 12, 8, 2, 8, 2).mean(axis=(3, 5))]
        bad = output_errors(run_compiled(mdl, o), refs, lambda r: 1e-5 * max(1.0, np.abs(r).max()))
        if bad:
            raise Fail("; ".join(bad))
    return single("kernels.conv2d_pool_activations", fn)


# Sums and means over the innermost axes (a global average pool, a
# squeeze-excite's mean over [H, W], a sum over the last axis) add each row
# in vectors: rows whose length is not a multiple of the vector (196, 7, 33),
# several leading axes, f32 and f64, keepdim; a sum over a middle axis keeps
# the loops in order. The f32 reductions' IR adds vectors of the target's
# width; the values are NumPy's in float64 in native, AVX2 and SSE2 builds.
SRC_ROW_REDUCE = """
export fn forward(x: f32[2, 96, 14, 14], y: f32[3, 5, 33], z: f64[4, 7], w: f32[6, 5, 4]) ->
    (f32[2, 96, 1, 1], f32[3, 5], f32[3], f64[4], f64[4, 1], f32[6, 4]) {
  return mean(x, axis=[2, 3], keepdim=true), sum(y, axis=-1), mean(y, axis=[1, 2]), sum(z, axis=1),
         mean(z, axis=-1, keepdim=true), sum(w, axis=1)
}
"""


@check("kernels.reduce_innermost_rows")
def kernels_reduce_rows():
    rng = np.random.default_rng(79)
    ins = {"x": rng.uniform(-1, 1, (2, 96, 14, 14)).astype(np.float32),
           "y": rng.uniform(-1, 1, (3, 5, 33)).astype(np.float32),
           "z": rng.uniform(-1, 1, (4, 7)), "w": rng.uniform(-1, 1, (6, 5, 4)).astype(np.float32)}
    mdl = region_model("kernels.reduce_innermost_rows", SRC_ROW_REDUCE, ins)
    i = {k: v.astype(np.float64) for k, v in ins.items()}
    refs = [i["x"].mean(axis=(2, 3), keepdims=True), i["y"].sum(axis=-1), i["y"].mean(axis=(1, 2)), i["z"].sum(axis=1),
            i["z"].mean(axis=-1, keepdims=True), i["w"].sum(axis=1)]

    def case(cpu, lanes):
        def fn():
            tag = cpu or "native"
            ll = os.path.join(mdl.d, "ll_" + tag)
            mdl.build(ll, "--emit=llvm", "--no-cache", *(("--cpu", cpu) if cpu else ()))
            if "fadd <%d x float>" % lanes not in open(os.path.join(ll, "m.ll")).read():
                raise Fail("no sum of <%d x float> vectors in the IR" % lanes)
            o = os.path.join(mdl.d, "out_" + tag)
            mdl.build(o, *(("--cpu", cpu) if cpu else ()))
            bad = output_errors(run_compiled(mdl, o, tag=tag), refs, lambda ref: 1e-6 * max(1.0, np.abs(ref).max()))
            if bad:
                raise Fail("; ".join(bad))
        return fn
    native = 16 if " avx512f" in open("/proc/cpuinfo").read() else 8 if " avx2" in open("/proc/cpuinfo").read() else 4
    return (single("kernels.reduce_innermost_rows", case(None, native))
            + single("kernels.reduce_innermost_rows_avx2", case("haswell", 8))
            + single("kernels.reduce_innermost_rows_sse2", case("x86-64", 4)))


# A recurrent cell as ONNX's LSTM gives it to nestc import: the weight a param
# of [1, 16, 8], read as [16, 8] through a reshape and transposed, times one
# row a step (M = 1). Its products read a copy packed when the instance is
# made, as a weight's do without the reshape: unpacked, each step's product
# packed the weight again (an LSTM's steps ran at 2-4 GFLOP/s, 10x the time).
# The build with --embed-weights packs r (m__npacked counts it; 0 before).
# w is also read as it is, through a reshape of its own outside the region:
# it keeps its elements. Against NumPy, at 1 and 3 threads, and with
# NESTRT_PREPACK=0.
SRC_RNN_RESHAPED = """
param w: f32[1, 16, 8]
param r: f32[1, 16, 8]

@region
fn cell(h: f32[1, 8], x: f32[1, 8], w: f32[1, 16, 8], r: f32[1, 16, 8]) -> f32[1, 8] {
  let g = x @ transpose(reshape(w, [16, 8]), [1, 0]) + h @ transpose(reshape(r, [16, 8]), [1, 0])
  return tanh(g[:, 0:8]) * sigmoid(g[:, 8:16])
}

export fn forward(xs: f32[4, 8]) -> (f32[1, 8], f32[16, 8]) {
  let h = f32(full([1, 8], 0.0))
  h = cell(h, xs[0:1], w, r)
  h = cell(h, xs[1:2], w, r)
  h = cell(h, xs[2:3], w, r)
  return cell(h, xs[3:4], w, r), reshape(w, [16, 8]) * 2.0
}
"""


@check("kernels.matmul_weight_through_reshape")
def kernels_mm_reshaped():
    def fn():
        ins = rng_inputs(67, xs=(4, 8))
        mdl = region_model("kernels.mm_reshaped", SRC_RNN_RESHAPED, ins)
        out = os.path.join(mdl.d, "out")
        mdl.build(out)
        wt = read_safetensors(mdl.weights)
        w, r = wt["w"].astype(np.float64).reshape(16, 8), wt["r"].astype(np.float64).reshape(16, 8)
        h = np.zeros((1, 8))
        for i in range(4):
            g = ins["xs"][i:i + 1].astype(np.float64) @ w.T + h @ r.T
            h = np.tanh(g[:, 0:8]) / (1 + np.exp(-g[:, 8:16]))
        bad = []
        for threads, prepack in ((1, "1"), (3, "1"), (1, "0")):
            env = dict(os.environ, NESTRT_NUM_THREADS=str(threads), NESTRT_PREPACK=prepack)
            got = run_compiled(mdl, out, tag="t%d_%s" % (threads, prepack), env=env)
            bad += ["%d threads, NESTRT_PREPACK=%s: %s" % (threads, prepack, e)
                    for e in output_errors(got, [h, 2 * w], lambda ref: 1e-6 * max(1.0, np.abs(ref).max()))]
        ll = os.path.join(mdl.d, "ll")
        mdl.build(ll, "--embed-weights", mdl.weights, "--emit=llvm")
        npacked = re.findall(r"^@m__npacked = constant i32 (\d+)", "".join(open(f).read() for f in glob.glob(os.path.join(ll, "*.ll"))), re.M)
        if npacked != ["1"]:
            bad.append("--embed-weights packs %s of the weights, expected r (w is also read as it is)" % (npacked or "none"))
        # and the cell's two products read their packed copies
        cell = "".join(open(f).read() for f in glob.glob(os.path.join(ll, "m.cell.*.ll")))
        if len(re.findall(r"call [^(]*@nestrt_packed\(", cell)) != 2:
            bad.append("the cell's code asks nestrt_packed %d times, expected 2 (one per product)"
                       % len(re.findall(r"call [^(]*@nestrt_packed\(", cell)))
        if bad:
            raise Fail("; ".join(bad))
    return single("kernels.matmul_weight_through_reshape", fn)


# A reuse_hash group whose calls differ in a convolution's dilation alone
# (height: 1, then 2; the input's height with it, so the output's is the
# same): the dilation is taken at run time though the first call's is none
# (a conv.c mutant that looked for it in the wrong entry of the variant's run-time
# fields used none for both). Two images: the direct loops' image stride is C*H*W
# (one that took H for C passed make check). Against NumPy.
SRC_CONV_DIL_DYN = """
@region(reuse_hash = 0)
fn dl(x: f32[2, 4, H, 6], w: f32[4, 1, 3, 1], s: int) -> f32[2, 4, 3, 6] {
  return conv2d(x, w, groups=4, dilation=[s, 1])
}

export fn forward(a: f32[2, 4, 5, 6], b: f32[2, 4, 7, 6], w: f32[4, 1, 3, 1]) -> (f32[2, 4, 3, 6], f32[2, 4, 3, 6]) {
  return dl(a, w, 1), dl(b, w, 2)
}
"""


@check("kernels.conv2d_dilation_alone_at_run_time")
def kernels_conv2d_dil_dyn():
    def fn():
        ins = rng_inputs(59, a=(2, 4, 5, 6), b=(2, 4, 7, 6), w=(4, 1, 3, 1))
        mdl = region_model("kernels.conv2d_dil_dyn", SRC_CONV_DIL_DYN, ins)
        out = os.path.join(mdl.d, "out")
        mdl.build(out)
        expect_objects(out, ["m.o", "m.dl.0.o"])
        i = {k: v.astype(np.float64) for k, v in ins.items()}
        refs = [conv_ref(i["a"], i["w"], groups=4), conv_ref(i["b"], i["w"], dil=(2, 1), groups=4)]
        bad = output_errors(run_compiled(mdl, out), refs, lambda ref: 1e-5 * max(1.0, np.abs(ref).max()))
        if bad:
            raise Fail("; ".join(bad))
    return single("kernels.conv2d_dilation_alone_at_run_time", fn)

# A convolution with output channels in the lanes (a 7x7 plane) and the
# longest epilogue fused (8 ops), four of them with an operand per channel,
# each taken into the task's buffer of channel values (a conv.c mutant that
# read one entry past those buffers passed make check; check-asan's UBSan
# names it). Against NumPy; the ops must not run as kernels of their own.
SRC_LANES_EPI8 = """
param ke: { weight: f32[48, 48, 3, 3], s: f32[4, 48] }
export fn forward(x: f32[1, 48, 7, 7]) -> f32[1, 48, 7, 7] {
  let c = conv2d(x, ke.weight, padding=1)
  let d = abs(reshape(ke.s[3], [48, 1, 1])) + 1.0
  let t = relu((c + reshape(ke.s[0], [48, 1, 1])) * reshape(ke.s[1], [48, 1, 1]) - reshape(ke.s[2], [48, 1, 1]))
  return maximum((t + 0.5) / d * 2.0, -1.0)
}
"""


@check("kernels.conv2d_lanes_epilogue_of_8")
def kernels_conv2d_lanes_epi8():
    def fn():
        ins = rng_inputs(61, x=(1, 48, 7, 7))
        mdl = region_model("kernels.conv2d_lanes_epi8", SRC_LANES_EPI8, ins)
        out = os.path.join(mdl.d, "out")
        mdl.build(out, "--no-winograd")
        w = read_safetensors(mdl.weights)
        s = w["ke.s"].astype(np.float64).reshape(4, 1, 48, 1, 1)
        t = np.maximum((conv_ref(ins["x"], w["ke.weight"], pad=1) + s[0]) * s[1] - s[2], 0)
        ref = np.maximum((t + 0.5) / (np.abs(s[3]) + 1.0) * 2.0, -1.0)
        got, err = run_compiled(mdl, out, env=dict(os.environ, NESTRT_PROFILE="2"), stderr=True)
        bad = output_errors(got, [ref], lambda r: 1e-5 * max(1.0, np.abs(r).max()))
        ops = set(re.findall(r"^\s+(\w+)\s+f32\[1, 48, 7, 7\]", err, re.M))
        if ops != {"conv2d"}:
            bad.append("kernels over the [1, 48, 7, 7] result at NESTRT_PROFILE=2: %s, expected conv2d alone" % sorted(ops))
        if bad:
            raise Fail("; ".join(bad))
    return single("kernels.conv2d_lanes_epilogue_of_8", fn)

# The fused convolution + pooling with windows, strides and padding that differ
# between height and width (padding=[1, 0] and [0, 1], kernels [3, 2], strides
# [2, 1]), and convolutions padded asymmetrically too; each pooling reads only
# its convolution, so each pair is fused (the profile says so). e has 13
# channels: one past a whole number of row tiles of any height (2, 3, 4, 6, 12).
SRC_CONV_POOL_HW = """
export fn forward(x: f32[2, 5, 19, 14], w: f32[12, 5, 3, 3], v: f32[8, 5, 3, 2], u: f32[13, 5, 3, 3]) ->
    (f32[2, 12, 10, 6], f32[2, 12, 9, 15], f32[2, 8, 10, 7], f32[2, 12, 6, 16], f32[2, 13, 9, 7]) {
  let a = max_pool2d(conv2d(x, w, padding=[1, 0]), [3, 2], stride=[2, 2], padding=[1, 0])
  let b = max_pool2d(conv2d(x, w, stride=[2, 1], padding=[0, 1]), [3, 2], stride=[1, 1], padding=[1, 1])
  let c = max_pool2d(conv2d(x, v, padding=[2, 0]) + 1.0, [2, 3], stride=[2, 2], padding=[0, 1])
  let d = avg_pool2d(conv2d(x, w, padding=[1, 2]), [3, 3], stride=[3, 1], padding=[0, 1])
  let e = max_pool2d(conv2d(x, u, padding=1), 2)
  return a, b, c, d, e
}
"""


@check("kernels.conv2d_pool_padding_hw")
def kernels_conv2d_pool_hw():
    ins = rng_inputs(47, x=(2, 5, 19, 14), w=(12, 5, 3, 3), v=(8, 5, 3, 2), u=(13, 5, 3, 3))
    mdl = region_model("kernels.conv2d_pool_hw", SRC_CONV_POOL_HW, ins)
    i = {k: v.astype(np.float64) for k, v in ins.items()}
    refs = [pool_ref(conv_ref(i["x"], i["w"], pad=(1, 0)), (3, 2), (2, 2), (1, 0), np.max),
            pool_ref(conv_ref(i["x"], i["w"], stride=(2, 1), pad=(0, 1)), (3, 2), (1, 1), (1, 1), np.max),
            pool_ref(conv_ref(i["x"], i["v"], pad=(2, 0)) + 1.0, (2, 3), (2, 2), (0, 1), np.max),
            pool_ref(conv_ref(i["x"], i["w"], pad=(1, 2)), (3, 3), (3, 1), (0, 1), np.mean),
            pool_ref(conv_ref(i["x"], i["u"], pad=(1, 1)), (2, 2), (2, 2), (0, 0), np.max)]

    def case(threads, cpu=None):
        def fn():
            o = os.path.join(mdl.d, "out_" + (cpu or "native"))
            if not os.path.isdir(o):
                mdl.build(o, *(("--cpu", cpu) if cpu else ()))
            env = dict(os.environ, NESTRT_NUM_THREADS=str(threads), NESTRT_PROFILE="2")
            got, err = run_compiled(mdl, o, tag="t%d_%s" % (threads, cpu or "native"), env=env, stderr=True)
            bad = output_errors(got, refs, lambda ref: 1e-5 * max(1.0, np.abs(ref).max()))
            fused = re.findall(r"^\s+(conv2d\+max_pool2d|conv2d\+avg_pool2d)\s", err, re.M)
            if sorted(fused) != ["conv2d+avg_pool2d"] + ["conv2d+max_pool2d"] * 4:
                bad.append("fused kernels at NESTRT_PROFILE=2: %s, expected 4 conv2d+max_pool2d and 1 "
                           "conv2d+avg_pool2d" % sorted(fused))
            if bad:
                raise Fail("; ".join(bad))
        return fn
    return (single("kernels.conv2d_pool_padding_hw_1_thread", case(1))
            + single("kernels.conv2d_pool_padding_hw_3_threads", case(3))
            + single("kernels.conv2d_pool_padding_hw_avx2", case(2, "haswell"))
            + single("kernels.conv2d_pool_padding_hw_sse2", case(2, "x86-64")))


# The fused kernel runs where the pooling is, and reads then what the
# convolution would have read: t, from which the epilogue computes its scale
# per channel, must not be overwritten by z between them (z took t's input's
# storage when only the convolution's own operands were kept alive).
SRC_CONV_POOL_LIVE = """
export fn forward(x: f32[1, 3, 12, 12], w: f32[8, 3, 3, 3], v: f32[8, 4]) -> (f32[1, 8, 5, 5], f32[8]) {
  let s = sum(v, axis=1)
  let t = s * 2.0
  let y = conv2d(x, w) * reshape(t, [8, 1, 1])
  let z = sum(v * 3.0, axis=1)
  let p = max_pool2d(y, 2)
  return p, z + 1.0
}
"""


def conv_pool_operands_live():
    ins = rng_inputs(47, x=(1, 3, 12, 12), w=(8, 3, 3, 3), v=(8, 4))
    mdl = region_model("kernels.conv2d_pool_operands_live", SRC_CONV_POOL_LIVE, ins)
    out = os.path.join(mdl.d, "out")
    mdl.build(out)
    i = {k: v.astype(np.float64) for k, v in ins.items()}
    y = conv_ref(i["x"], i["w"]) * (2.0 * i["v"].sum(axis=1)).reshape(1, -1, 1, 1)
    refs = [pool_ref(y, (2, 2), (2, 2), (0, 0), np.max), (3.0 * i["v"]).sum(axis=1) + 1.0]
    for threads in (1, 3):
        got = run_compiled(mdl, out, tag="t%d" % threads, env=dict(os.environ, NESTRT_NUM_THREADS=str(threads)))
        bad = output_errors(got, refs, lambda ref: 1e-5 * max(1.0, np.abs(ref).max()))
        if bad:
            raise Fail("at %d threads: %s" % (threads, "; ".join(bad)))


# A state written between a convolution that reads it and the pooling of the
# convolution: not computed together (the kernel, at the pooling, would read
# the new value). init sets s to -1; step's result is the convolution of -1
# by 0.1 over 3x3x3: -2.7.
SRC_CONV_POOL_STATE = """
state s: f32[1, 48]

export fn init(x: f32[48]) -> f32[48] {
  s[0] = x
  return x
}

export fn step(x: f32[1, 3, 4, 4], w: f32[4, 3, 3, 3]) -> f32[1, 4, 1, 1] {
  let y = conv2d(reshape(s, [1, 3, 4, 4]), w)
  s[0] = reshape(x, [48])
  return max_pool2d(y, 2)
}
"""

DRV_CONV_POOL_STATE = r"""
#include <stdio.h>
#include "m.h"
int main(void) {
	nestrt_error err;
	m *mm = m_new(NULL, &err);
	if (!mm) { fprintf(stderr, "new: %s\n", err.message); return 2; }
	m_seq *s = m_seq_new(mm, &err);
	if (!s) { fprintf(stderr, "seq_new: %s\n", err.message); return 2; }
	float x[48], s0[48], o48[48], w[108], out[4];
	for (int i = 0; i < 48; i++) x[i] = 1.0f + i * 0.01f, s0[i] = -1.0f;
	for (int i = 0; i < 108; i++) w[i] = 0.1f;
	if (m_init(mm, s, s0, o48) || m_step(mm, s, x, w, out)) { fprintf(stderr, "%s\n", m_error(mm)); return 1; }
	for (int i = 0; i < 4; i++) printf("%.6f\n", out[i]);
	return 0;
}
"""


def conv_pool_state():
    d = tmpdir("kernels.conv2d_pool_state")
    src = os.path.join(d, "m.nest")
    write(src, SRC_CONV_POOL_STATE)
    out = os.path.join(d, "out")
    nestc("build", src, "-o", out)
    drv = os.path.join(d, "drv.c")
    write(drv, DRV_CONV_POOL_STATE)
    exe = os.path.join(d, "drv")
    cmd = [CC, "-O1", "-std=c11", "-I" + RUNTIME, "-I" + out, drv] + sorted(glob.glob(os.path.join(out, "*.o")))
    cmd += [LIBNESTRT, "-lm", "-lpthread", "-o", exe] + LINK_FLAGS
    r = run(cmd)
    if r.returncode != 0:
        raise Fail("driver does not compile or link: " + describe(cmd, r))
    r = run([exe])
    if r.returncode != 0:
        raise Fail("driver: " + describe([exe], r))
    got = [float(v) for v in r.stdout.split()]
    if len(got) != 4 or any(abs(v + 2.7) > 1e-5 for v in got):
        raise Fail("step's result %s, expected -2.7 four times (the convolution of the state before the store)" % got)


# Convolutions of small planes with output channels in the lanes (codegen/
# conv.c, AVX-512 with pre-packed weights): 7x7 with bias, relu and a
# per-channel scale and shift; a reduction in two and in three blocks of
# channels; 80 output channels (a panel of 48, then one of 32); a 1x1 read in
# place with a residual; 1x1 and 3x3 of stride 2 onto 7x7; 5x5 and 9x9 planes
# (tiles of 5 pixels, and of 6 with 3 over). Against NumPy at 1 and 3
# threads, and with NESTRT_PREPACK=0 (the pixels' tiles instead).
SRC_LANES = """
param k3: { weight: f32[64, 48, 3, 3], bias: f32[64] }
param bn: { scale: f32[64], shift: f32[64] }
param kb: { weight: f32[80, 160, 3, 3] }
param kc: { weight: f32[48, 300, 3, 3] }
param k1: { weight: f32[96, 64, 1, 1] }
param ks: { weight: f32[64, 64, 1, 1] }
param k2: { weight: f32[48, 64, 3, 3] }
param k9: { weight: f32[48, 16, 3, 3] }
param kd: { weight: f32[48, 48, 3, 3], bias: f32[48] }
export fn forward(x7: f32[2, 48, 7, 7], x160: f32[1, 160, 7, 7], x5: f32[1, 300, 5, 5], r: f32[2, 96, 7, 7],
                  x14: f32[1, 64, 14, 14], x9: f32[1, 16, 9, 9]) ->
    (f32[2, 64, 7, 7], f32[1, 80, 7, 7], f32[1, 48, 5, 5], f32[2, 96, 7, 7], f32[1, 64, 7, 7], f32[1, 48, 7, 7],
     f32[1, 48, 9, 9], f32[2, 48, 7, 7]) {
  let a = relu(conv2d(x7, k3.weight, k3.bias, padding=1) * reshape(bn.scale, [64, 1, 1]) + reshape(bn.shift, [64, 1, 1]))
  let b = conv2d(x160, kb.weight, padding=1)
  let c = conv2d(x5, kc.weight, padding=1)
  let d = relu(conv2d(a, k1.weight) + r)
  let e = conv2d(x14, ks.weight, stride=2)
  let f = conv2d(x14, k2.weight, stride=2, padding=1)
  let g = conv2d(x9, k9.weight, padding=1) - 1.0
  let h = conv2d(x7, kd.weight, kd.bias, padding=1)  # 48 channels: no Winograd, the lanes' own bias
  return a, b, c, d, e, f, g, h
}
"""


@check("kernels.conv2d_lanes")
def kernels_conv2d_lanes():
    ins = rng_inputs(31, x7=(2, 48, 7, 7), x160=(1, 160, 7, 7), x5=(1, 300, 5, 5), r=(2, 96, 7, 7),
                     x14=(1, 64, 14, 14), x9=(1, 16, 9, 9))
    mdl = region_model("kernels.conv2d_lanes", SRC_LANES, ins)
    out = os.path.join(mdl.d, "out")
    state = {}

    def refs():
        if "refs" not in state:
            w = read_safetensors(mdl.weights)
            i = {k: v.astype(np.float64) for k, v in ins.items()}
            a = conv_ref(i["x7"], w["k3.weight"], w["k3.bias"], pad=1)
            a = np.maximum(a * w["bn.scale"].astype(np.float64).reshape(1, -1, 1, 1)
                           + w["bn.shift"].astype(np.float64).reshape(1, -1, 1, 1), 0)
            state["refs"] = [a, conv_ref(i["x160"], w["kb.weight"], pad=1), conv_ref(i["x5"], w["kc.weight"], pad=1),
                             np.maximum(conv_ref(a, w["k1.weight"]) + i["r"], 0), conv_ref(i["x14"], w["ks.weight"], stride=2),
                             conv_ref(i["x14"], w["k2.weight"], stride=2, pad=1), conv_ref(i["x9"], w["k9.weight"], pad=1) - 1.0,
                             conv_ref(i["x7"], w["kd.weight"], w["kd.bias"], pad=1)]
        return state["refs"]

    def case(threads, prepack):
        def fn():
            if "built" not in state:
                mdl.build(out, "--no-winograd")  # the 7x7 of 64 channels would be F(2x2, 3x3)
                state["built"] = True
            env = dict(os.environ, NESTRT_NUM_THREADS=str(threads))
            if not prepack:
                env["NESTRT_PREPACK"] = "0"
            got = run_compiled(mdl, out, tag="t%d%s" % (threads, "" if prepack else "np"), env=env)
            bad = output_errors(got, refs(), lambda ref: 1e-4 * max(1.0, np.abs(ref).max()))
            if bad:
                raise Fail("; ".join(bad))
        return fn
    return (single("kernels.conv2d_lanes_1_thread", case(1, True)) + single("kernels.conv2d_lanes_3_threads", case(3, True))
            + single("kernels.conv2d_lanes_not_prepacked", case(1, False)))


# 3x3 convolutions of stride 1 by Winograd's F(4x4, 3x3) and, on planes
# too small for 16 of its tiles (7x7, 9x9), F(2x2, 3x3) (codegen/conv.c,
# plan.c: conv_geom's wino): a bias, batch norm's scale and shift and relu
# fused; 128 output channels (two panels of 64 on AVX-512); planes whose
# sides are not multiples of the tile (the last tiles' pixels outside); a
# residual; padding 0 and 2; batch 2; a convolution of another's result; a
# weight that is also read as it is (its transforms are pre-packed beside
# it); 256 to 128 channels (transforms of 4.7 MB: the input's transforms
# are tasks of their own, the others' are made by the blocks' tasks). Against
# NumPy at 2e-5 of the largest magnitude (F(4x4, 3x3) in f32 is good to a
# few units of 1e-6 here; a wrong transform is off by the values' size), at
# 1 and 3 threads, with NESTRT_PREPACK=0 (the transforms made at each call),
# built for AVX2 (panels of 16 channels), and with --no-winograd (the same
# compile cache: its key tells them apart). Each of the 8 is a Winograd
# kernel (its tasks in the objects), none with --no-winograd.
SRC_WINO = """
param k1: { weight: f32[64, 32, 3, 3], bias: f32[64] }
param bn: { scale: f32[64], shift: f32[64] }
param k2: { weight: f32[128, 48, 3, 3] }
param k3: { weight: f32[64, 16, 3, 3] }
param k4: { weight: f32[64, 16, 3, 3] }
param k5: { weight: f32[64, 64, 3, 3] }
param k6: { weight: f32[64, 32, 3, 3], bias: f32[64] }
param k7: { weight: f32[128, 16, 3, 3] }
param k8: { weight: f32[128, 256, 3, 3] }
export fn forward(x: f32[2, 32, 20, 20], y: f32[1, 48, 18, 22], r: f32[1, 128, 18, 22], z: f32[1, 16, 26, 19],
                  u: f32[1, 16, 15, 15], s: f32[2, 32, 7, 7], r7: f32[2, 64, 7, 7], q: f32[1, 16, 11, 11],
                  v: f32[1, 256, 13, 14]) ->
    (f32[2, 64, 20, 20], f32[1, 128, 18, 22], f32[1, 64, 24, 17], f32[1, 64, 17, 17], f32[2, 64, 20, 20],
     f32[64, 16, 3, 3], f32[2, 64, 7, 7], f32[1, 128, 9, 9], f32[1, 128, 13, 14]) {
  let a = relu(conv2d(x, k1.weight, k1.bias, padding=1) * reshape(bn.scale, [64, 1, 1]) + reshape(bn.shift, [64, 1, 1]))
  let b = relu(conv2d(y, k2.weight, padding=1) + r)
  let c = conv2d(z, k3.weight) - 1.0
  let d = conv2d(u, k4.weight, padding=2)
  let e = conv2d(a, k5.weight, padding=1)
  let f = relu(conv2d(s, k6.weight, k6.bias, padding=1) + r7)
  let g = conv2d(q, k7.weight) * 0.5
  let h = conv2d(v, k8.weight, padding=1) + 0.25
  return a, b, c, d, e, k4.weight * 2.0, f, g, h
}
"""


@check("kernels.conv2d_winograd")
def kernels_conv2d_winograd():
    ins = rng_inputs(37, x=(2, 32, 20, 20), y=(1, 48, 18, 22), r=(1, 128, 18, 22), z=(1, 16, 26, 19),
                     u=(1, 16, 15, 15), s=(2, 32, 7, 7), r7=(2, 64, 7, 7), q=(1, 16, 11, 11), v=(1, 256, 13, 14))
    mdl = region_model("kernels.conv2d_winograd", SRC_WINO, ins)
    state = {}

    def refs():
        if "refs" not in state:
            w = {k: v.astype(np.float64) for k, v in read_safetensors(mdl.weights).items()}
            i = {k: v.astype(np.float64) for k, v in ins.items()}
            a = conv_ref(i["x"], w["k1.weight"], w["k1.bias"], pad=1)
            a = np.maximum(a * w["bn.scale"].reshape(1, -1, 1, 1) + w["bn.shift"].reshape(1, -1, 1, 1), 0)
            state["refs"] = [a, np.maximum(conv_ref(i["y"], w["k2.weight"], pad=1) + i["r"], 0),
                             conv_ref(i["z"], w["k3.weight"]) - 1.0, conv_ref(i["u"], w["k4.weight"], pad=2),
                             conv_ref(a, w["k5.weight"], pad=1), w["k4.weight"] * 2.0,
                             np.maximum(conv_ref(i["s"], w["k6.weight"], w["k6.bias"], pad=1) + i["r7"], 0),
                             conv_ref(i["q"], w["k7.weight"]) * 0.5, conv_ref(i["v"], w["k8.weight"], pad=1) + 0.25]
        return state["refs"]

    def case(threads, prepack, flags=()):
        def fn():
            tag = "".join(f.strip("-") for f in flags)
            out = os.path.join(mdl.d, "out" + tag)
            if out not in state:
                # one cache for all the builds: --no-winograd must not get the others' objects
                mdl.build(out, "--cache-dir", os.path.join(mdl.d, "cache"), *flags)
                syms = subprocess.run(["nm", "--defined-only"] + sorted(glob.glob(os.path.join(out, "*.o"))),
                                      capture_output=True, text=True, check=True).stdout
                n, want = len(re.findall(r" wg\.task\.\d+$", syms, re.M)), 0 if "--no-winograd" in flags else 8
                if n != want:
                    raise Fail("%d Winograd convolutions in the objects, expected %d" % (n, want))
                state[out] = True
            env = dict(os.environ, NESTRT_NUM_THREADS=str(threads))
            if not prepack:
                env["NESTRT_PREPACK"] = "0"
            got = run_compiled(mdl, out, tag="t%d%s%s" % (threads, "" if prepack else "np", tag), env=env)
            bad = output_errors(got, refs(), lambda ref: 2e-5 * np.abs(ref).max())
            if bad:
                raise Fail("; ".join(bad))
        return fn
    return (single("kernels.conv2d_winograd_1_thread", case(1, True))
            + single("kernels.conv2d_winograd_3_threads", case(3, True))
            + single("kernels.conv2d_winograd_not_prepacked", case(1, False))
            + single("kernels.conv2d_winograd_avx2", case(2, True, ("--cpu", "haswell")))
            + single("kernels.conv2d_winograd_off", case(2, True, ("--no-winograd",))))


# Kernels large enough (>= 32768 elements) to run on the thread pool, split
# over their outermost loop: at 1, 2 and 3 threads against the interpreter.
SRC_PAR = """
export fn forward(x: f32[64, 96, 8], y: f32[96, 8], g: f32[8], b: f32[8], c: f32[4, 96, 96]) -> (f32[64, 96, 8], f32[64, 96, 8], f32[64, 96, 8], f32[64, 96, 8], f32[96, 64, 8], f32[63, 96, 8], f32[4, 96, 96]) {
  let e = x * y + 1.0
  let s = softmax(x, axis=1)
  let t = softmax(x, axis=-1)
  let n = layernorm(x, g, b)
  let p = transpose(x, [1, 0, 2])
  let q = x[1:64]
  let m = softmax(causal_mask(c), axis=-1)
  return e, s, t, n, p, q, m
}
"""


@check("kernels.parallel")
def kernels_parallel():
    def case(threads):
        def fn():
            mdl = region_model("kernels.par%d" % threads, SRC_PAR,
                               rng_inputs(4, x=(64, 96, 8), y=(96, 8), g=(8,), b=(8,), c=(4, 96, 96)))
            out = os.path.join(mdl.d, "out")
            mdl.build(out)
            values_ok(mdl.check_compiled(out, env=dict(os.environ, NESTRT_NUM_THREADS=str(threads))))
        return fn
    return sum((single("kernels.parallel_%d_threads" % t, case(t)) for t in (1, 2, 3)), [])


# Transposes that move the input's contiguous axis (a key matrix turned for
# q @ k^T): blocks of a vector's width each way transposed in registers, the
# edges element by element. Shapes with full blocks and with edges on both
# axes, the contiguous axis becoming axis 0 (the axis the pool's tasks split)
# or a middle one, i32 as well as f32, and a transpose that keeps the last
# axis last (the plain copy); against NumPy, bit for bit, at 1 and 3 threads.
SRC_TRANSPOSE = """
export fn forward(k: f32[2, 37, 3, 35], a: f32[200, 170], b: f32[32, 48], i: i32[19, 33], c: f32[3, 40, 20]) ->
    (f32[2, 3, 35, 37], f32[170, 200], f32[48, 32], i32[33, 19], f32[40, 3, 20], f32[20, 3, 40]) {
  return transpose(k, [0, 2, 3, 1]), transpose(a, [1, 0]), transpose(b, [1, 0]), transpose(i, [1, 0]),
         transpose(c, [1, 0, 2]), transpose(c, [2, 0, 1])
}
"""


@check("kernels.transpose_blocks")
def kernels_transpose_blocks():
    rng = np.random.default_rng(12)
    ins = {"k": rng.standard_normal((2, 37, 3, 35)).astype(np.float32),
           "a": rng.standard_normal((200, 170)).astype(np.float32),
           "b": rng.standard_normal((32, 48)).astype(np.float32),
           "i": rng.integers(-1000, 1000, (19, 33)).astype(np.int32),
           "c": rng.standard_normal((3, 40, 20)).astype(np.float32)}
    refs = [ins["k"].transpose(0, 2, 3, 1), ins["a"].T, ins["b"].T, ins["i"].T, ins["c"].transpose(1, 0, 2),
            ins["c"].transpose(2, 0, 1)]

    def case(threads):
        def fn():
            mdl = region_model("kernels.transpose%d" % threads, SRC_TRANSPOSE, ins)
            out = os.path.join(mdl.d, "out")
            mdl.build(out)
            got = run_compiled(mdl, out, env=dict(os.environ, NESTRT_NUM_THREADS=str(threads)))
            bad = []
            for k, (g, r) in enumerate(zip(got, refs)):
                if g.dtype != r.dtype or g.shape != r.shape:
                    bad.append("output %d: %s%s, expected %s%s" % (k, g.dtype, g.shape, r.dtype, r.shape))
                elif not np.array_equal(g, r):
                    w = np.argwhere(g != r)
                    bad.append("output %d: %d of %d differ, first at %s" % (k, len(w), g.size, list(w[0])))
            if bad:
                raise Fail("; ".join(bad))
        return fn
    return sum((single("kernels.transpose_blocks_%d_threads" % t, case(t)) for t in (1, 3)), [])


# ----------------------------------------------------------------------------- 6. two models


@check("link.two_models")
def two_models():
    def link_models(tag, models):
        """Builds every model into its own directory and runs them all from one program."""
        calls, outs = [], []
        for m in models:
            out = os.path.join(m.d, "out")
            m.build(out)
            outs.append(out)
            calls.append(m.call(m.entry(out), "both"))
        d = tmpdir(tag)
        exe = compile_driver(d, calls, [m.stem for m in models], outs,
                             sorted(sum((glob.glob(os.path.join(o, "*.o")) for o in outs), [])))
        r = run([exe])
        if r.returncode != 0:
            raise Fail("program with %s: %s" % (", ".join(m.stem for m in models), describe([exe], r)))
        res = []
        for m, c in zip(models, calls):
            for rp, gp in zip(m.reference(c.entry), c.outputs):
                res.append(("", compare(np.load(gp), np.load(rp), m.stem)))
        values_ok(res)

    def mlp_gpt2():
        link_models("link.mlp_gpt2", [sample_model("link.gpt2", "gpt2", GPT2_CFG, seed=11),
                                      sample_model("link.mlp", "mlp", MLP_CFG, seed=12)])

    def three():
        # gpt2 and llama both have a region named attention; gpt2 once more as gpt2b
        link_models("link.three", [
            sample_model("link3.gpt2", "gpt2", GPT2_CFG, seed=15),
            sample_model("link3.llama", "llama", LLAMA_CFG, seed=16),
            sample_model("link3.gpt2b", "gpt2", dict(GPT2_CFG, L=3, S=8), seed=17, name="gpt2b")])
    return (single("link.two_models_one_program", mlp_gpt2)
            + single("link.gpt2_llama_and_gpt2_renamed_one_program", three))


# ----------------------------------------------------------------------------- 7. failed builds

SRC_TYPE_ERROR = """
const D = 8

@region
fn f(x: f32[T, D]) -> f32[T, D] {
  return x + 1.0
}

export fn forward(a: f32[4, D]) -> f32[4, D] {
  return f(a) + a[0:3]
}
"""


def snapshot(d):
    return {n: open(os.path.join(d, n), "rb").read() for n in listdir(d)}


def failed_build(tag, src_text, extra):
    def fn():
        d = tmpdir(tag)
        src = write(os.path.join(d, "m.nest"), src_text)
        out = os.path.join(d, "out")
        os.makedirs(out)
        olds = {"old.txt": b"an old file\n", "m.h": b"/* old header */\n",
                "m.o": b"old object", "m.f.0.o": b"old variant"}
        for n, b in olds.items():
            with open(os.path.join(out, n), "wb") as f:
                f.write(b)
        r = nestc("build", src, "-o", out, *extra, ok=False)
        problems = []
        if r.returncode != 1:
            problems.append("exit %d, expected 1" % r.returncode)
        after = snapshot(out)
        if after != olds:
            new = sorted(set(after) - set(olds))
            changed = sorted(n for n in olds if after.get(n) != olds[n])
            problems.append("output dir changed: new %s, changed or removed %s" % (new, changed))
        # a fresh directory is not left behind with files in it
        fresh = os.path.join(d, "fresh")
        nestc("build", src, "-o", fresh, *extra, ok=False)
        if listdir(fresh):
            problems.append("files in a new output dir: %s" % listdir(fresh))
        if glob.glob(os.path.join(d, "**", "*.tmp.*"), recursive=True):
            problems.append("temporary files left")
        if problems:
            raise Fail("; ".join(problems) + " [stderr: %s]" % short(r.stderr, 3))
    return fn


@check("failed_build")
def failed_builds():
    return (single("failed_build.type_error_leaves_dir", failed_build("failed.type", SRC_TYPE_ERROR, []))
            + single("failed_build.werror_leaves_dir",
                     failed_build("failed.werror", SRC_F.replace("max_reuse_entries = 2",
                                                                 "max_reuse_entries = 1"), ["-Werror"])))


# ----------------------------------------------------------------------------- 8. emit and archives


@check("emit")
def emit():
    res = []
    m = sample_model("emit", "gpt2", GPT2_CFG, seed=13)
    stems = ["gpt2", "gpt2.block.0", "gpt2.attention.0", "gpt2.block_kv.0", "gpt2.attention_kv.0", "gpt2.block_kv.1",
             "gpt2.attention_kv.1", "gpt2.block_kv.2", "gpt2.attention_kv.2"]

    def text_out(kind, ext, marker):
        def fn():
            out = os.path.join(m.d, "out_" + kind)
            m.build(out, "--emit=" + kind)
            got = sorted(n for n in listdir(out) if not n.endswith((".h", ".api.json")))
            want = sorted(s + "." + ext for s in stems)
            if got != want:
                raise Fail("files %s, expected %s" % (got, want))
            for n in got:
                t = open(os.path.join(out, n)).read()
                if not re.search(marker, t, re.M):
                    raise Fail("%s does not look like %s (no %r)" % (n, kind, marker))
            # assemble / compile them and run
            cc = CC if kind == "asm" else shutil.which("clang")
            if not cc:
                return
            objs = []
            for n in got:
                o = os.path.join(out, n + ".obj.o")
                cmd = [cc, "-c", "-O1", os.path.join(out, n), "-o", o]
                r = run(cmd)
                if r.returncode != 0:
                    raise Fail("cannot compile %s: %s" % (n, describe(cmd, r)))
                objs.append(o)
            values_ok(m.check_compiled(out, link=objs, tag="got_" + kind))
        return fn
    res += single("emit.llvm", text_out("llvm", "ll", r"^define "))
    res += single("emit.asm", text_out("asm", "s", r"^\s*\.text|\.section"))

    def archive():
        d = os.path.join(m.d, "lib")
        os.makedirs(d)
        a = os.path.join(d, "gpt2.a")
        m.build(a)
        if listdir(d) != ["gpt2.a", "gpt2.api.json", "gpt2.h"]:
            raise Fail("files %s, expected gpt2.a, gpt2.h and gpt2.api.json" % listdir(d))
        if open(a, "rb").read(8) != b"!<arch>\n":
            raise Fail("gpt2.a is not an ar archive")
        values_ok(m.check_compiled(d, link=[a], tag="got_ar"))
    res += single("emit.archive", archive)

    def archive_other_name():
        d = os.path.join(m.d, "lib2")
        os.makedirs(d)
        a = os.path.join(d, "libmodel.a")
        m.build(a)
        if listdir(d) != ["gpt2.api.json", "gpt2.h", "libmodel.a"]:
            raise Fail("files %s, expected libmodel.a, gpt2.h and gpt2.api.json" % listdir(d))
        values_ok(m.check_compiled(d, link=[a], tag="got_ar2"))
    res += single("emit.archive_named", archive_other_name)
    return res


# ----------------------------------------------------------------------------- indexing and scans


INDEX_SRC = """
const T = 1
const E = 1
const K = 1
const R = 1
const L = 1

@region
fn route(logits: f32[T, E]) -> (f32[T, K], i64[T, K]) {
  let w, e = topk(softmax(logits), K)
  return w / sum(w, axis=-1, keepdim=true), e
}

export fn forward(x: f32[T, E], r: f32[R, L], i: i32[R, 3], q: i64[2, L], c: f32[5, 3, 33], n: i32[6, 17]) -> (
    f32[T, K], i64[T, K], f32[R, 8], i64[R, 8], f32[3, L], i64[3, L], f32[R, 3], f32[2, L],
        f32[5, 3, 33], f32[5, 3, 33], f32[5, 3, 33], i32[6, 17]) {
  let w, e = route(x)
  let v1, i1 = topk(r, 8)
  let v2, i2 = topk(r, 3, axis=0, largest=false)
  return w, e, v1, i1, v2, i2, take_along_axis(r, i, 1), take_along_axis(r, q, axis=0),
         cumsum(c, 0), cumsum(c, 1), cumsum(c, -1), cumsum(n, 1)
}
"""


def close(got, ref, what, rtol=1e-5):
    """None when got has ref's dtype and shape and is within rtol * max|ref| (integers:
    equal), else a message."""
    ref = np.asarray(ref)
    if got.dtype != ref.dtype or got.shape != ref.shape:
        return "%s: %s%s, expected %s%s" % (what, got.dtype, list(got.shape), ref.dtype, list(ref.shape))
    if ref.dtype.kind in "iu":
        return None if np.array_equal(got, ref) else "%s: %d entries differ" % (what, int((got != ref).sum()))
    err = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    return None if err <= rtol * scale else "%s: max abs err %.3g > %g * %.3g" % (what, err, rtol, scale)


@check("index.numpy")
def index_numpy():
    """Compiled topk, take_along_axis and cumsum straight against NumPy references (the
    builtin cases compare compiled code with the interpreter)."""
    def fn():
        bi = load_builtins()
        cfg = {"T": 13, "E": 8, "K": 2, "R": 7, "L": 1999}
        g = np.random.default_rng(31)
        ins = {"x": g.standard_normal((13, 8)).astype(np.float32),
               "r": g.standard_normal((7, 1999)).astype(np.float32),
               "i": g.integers(0, 1999, (7, 3)).astype(np.int32),
               "q": g.integers(0, 7, (2, 1999)).astype(np.int64),
               "c": g.standard_normal((5, 3, 33)).astype(np.float32),
               "n": g.integers(-2 ** 30, 2 ** 30, (6, 17)).astype(np.int32)}
        ins["r"][2, 100:140] = 3.5    # ties among the largest
        m = region_model("index.numpy", INDEX_SRC, ins, cfg)
        out = os.path.join(m.d, "out")
        m.build(out)
        got = run_compiled(m, out)
        x, r, c = ins["x"], ins["r"], ins["c"]
        p = bi.softmax_ref(x)
        e = bi.topk_ref(p, 2)
        w = bi.take_ref(p, e, 1)
        i1 = bi.topk_ref(r, 8)
        i2 = bi.topk_ref(r, 3, 0, largest=False)
        refs = [("moe_weights", (w / w.sum(-1, keepdims=True)).astype(np.float32)), ("moe_experts", e),
                ("top8_values", bi.take_ref(r, i1, 1)), ("top8_indices", i1),
                ("bottom3_axis0_values", bi.take_ref(r, i2, 0)), ("bottom3_axis0_indices", i2),
                ("take_i32", bi.take_ref(r, ins["i"], 1)), ("take_i64_axis0", bi.take_ref(r, ins["q"], 0)),
                ("cumsum_axis0", np.cumsum(c, 0)), ("cumsum_axis1", np.cumsum(c, 1)),
                ("cumsum_last", np.cumsum(c, -1)), ("cumsum_i32", bi.cumsum_ref(ins["n"], 1))]
        values_ok([(n, close(gv, rv, n)) for (n, rv), gv in zip(refs, got)])
    return single("index.compiled_against_numpy", fn)


TAKE_OOB_SRC = """
export fn forward(x: f32[4, 7], i: i32[4, 2]) -> (f32[4, 2], f32[4, 7]) {
  return take_along_axis(x, i, 1), x * 2.0
}
"""


@check("index.take_along_axis_out_of_range")
def take_oob():
    """An index out of range: `nestc run` fails with the source position, the compiled
    entry returns -1 with the same message and writes no output."""
    def case(tag, bad, shown):
        def fn():
            i = np.array([[0, 6], [1, 1], [2, 3], [4, 5]], np.int32)
            i[2, 1] = bad
            m = region_model("index.oob_%s" % tag, TAKE_OOB_SRC,
                             {"x": np.ones((4, 7), np.float32), "i": i})
            msg = "take_along_axis index %d out of range [0, 7) on axis 1" % shown
            line, col = line_of(TAKE_OOB_SRC.lstrip("\n"), "take_along_axis(")
            ref = os.path.join(m.d, "ref.npy")
            r = nestc("run", m.src, "--input", "x=" + m.inputs["x"], "--input", "i=" + m.inputs["i"],
                      "--output", ref, "--output", ref + "2", ok=False)
            want = "%s:%d:%d: error: %s" % (m.src, line, col, msg)
            problems = []
            if r.returncode != 1 or want not in r.stderr:
                problems.append("nestc run: exit %d, expected 1 and %r" % (r.returncode, want))
            if os.path.exists(ref):
                problems.append("nestc run wrote an output")
            out = os.path.join(m.d, "out")
            m.build(out)
            call = m.call(m.entry(out), "got")
            exe = compile_driver(m.d, [call], [m.stem], [out], sorted(glob.glob(os.path.join(out, "*.o"))))
            r = run([exe])
            if r.returncode != 1 or msg not in r.stderr:
                problems.append("compiled: exit %d, expected 1 and %r" % (r.returncode, msg))
            if "driver:" in r.stderr or any(os.path.exists(p) for p in call.outputs):
                problems.append("compiled: an output was written")
            if problems:
                raise Fail("; ".join(problems) + " [stderr: %s]" % short(r.stderr, 3))
        return fn
    return single("index.take_oob_too_large", case("big", 7, 7)) + \
        single("index.take_oob_negative", case("neg", -1, -1))


# ----------------------------------------------------------------------------- 9. profile


@check("profile")
def profile():
    def fn():
        m = sample_model("profile", "gpt2", GPT2_CFG, seed=14)
        out = os.path.join(m.d, "out")
        m.build(out)
        e = m.entry(out)
        c = m.call(e, "prof", twice=False)
        exe = compile_driver(m.d, [c], ["gpt2"], [out], sorted(glob.glob(os.path.join(out, "*.o"))),
                             name="driver_prof")
        env = dict(os.environ, NESTRT_PROFILE="1")
        r = run([exe], env=env)
        if r.returncode != 0:
            raise Fail(describe([exe], r))
        problems = []
        if "nestrt profile: gpt2" not in r.stderr:
            problems.append("no 'nestrt profile: gpt2' line")
        for slot in ("block.0", "attention.0"):
            if not re.search(r"^\s*%s\s+2 calls\b" % re.escape(slot), r.stderr, re.M):
                problems.append("no '%s  2 calls' line" % slot)
        if not re.search(r"^\s*total\s+4 calls\b", r.stderr, re.M):
            problems.append("no 'total 4 calls' line")
        quiet = run([exe], env={k: v for k, v in os.environ.items() if k != "NESTRT_PROFILE"})
        if "nestrt profile" in quiet.stderr:
            problems.append("profile printed without NESTRT_PROFILE")
        if problems:
            raise Fail("; ".join(problems) + " [stderr: %s]" % short(r.stderr, 6))
        values_ok([(n, compare(np.load(g), np.load(p), "out"))
                   for n, g, p in zip("o", c.outputs, m.reference(e))])
    return single("profile.gpt2_L2_call_counts", fn)


# NESTRT_PROFILE=2 (issue #9): the kernels of each variant under its line, with op, result
# shape, source line, time, GFLOP/s and calls; nothing of that at level 1; the same bits.
SRC_KPROF = """
const T = 64
const D = 96
const F = 128
param w: f32[D, F]
param g: f32[F]
param b: f32[F]
param k: f32[8, 3, 3, 3]

@region
fn attn(x: f32[T, D], w: f32[D, F], g: f32[F], b: f32[F]) -> f32[T, F] {
  let s = softmax(x @ w, axis=-1)
  return layernorm(s, g, b)
}

@region
fn stem(img: f32[2, 3, 16, 16], k: f32[8, 3, 3, 3]) -> f32[2, 8, 16, 16] {
  return conv2d(img, k, padding=1)
}

export fn forward(x: f32[T, D], img: f32[2, 3, 16, 16]) -> (f32[T, F], f32[2, 8, 16, 16]) {
  let y = attn(x, w, g, b)
  let z = attn(x * 2.0, w, g, b)
  return y + z, relu(stem(img, k))
}
"""

KPROF_LINE = re.compile(r"^    (\S+) +(\S+\[[^\]]*\])\s+(\S*)\s+([\d.]+) ms\s+(\S+) GFLOP/s\s+\((\d+) calls\)"
                        r"(?:  \S+ weights [\d.]+ [KM]B a call, [\d.]+ GB/s)?$")


def kprof_groups(text):
    """{variant: (calls, ms, [(op, shape, where, ms, rate, calls)], kernels line)} of a profile."""
    groups, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^  (\S+)\s+(\d+) calls\s+([\d.]+) ms$", line)
        if m:
            cur = groups[m.group(1)] = (int(m.group(2)), float(m.group(3)), [], [None])
            continue
        if re.match(r"^  \S", line):
            cur = None   # an entry point's kernels ("  forward (entry point)")
            continue
        m = KPROF_LINE.match(line)
        if m and cur:
            g = m.groups()
            cur[2].append((g[0], g[1], g[2], float(g[3]), g[4], int(g[5])))
        elif line.startswith("    kernels ") and cur:
            cur[3][0] = line
    return groups


@check("profile.kernels")
def profile_kernels():
    def fn():
        d = tmpdir("kprof")
        src = write(os.path.join(d, "kp.nest"), SRC_KPROF)
        rng = np.random.default_rng(5)
        m = Model(d, src, None, {"x": rng.standard_normal((64, 96)).astype(np.float32),
                                 "img": rng.standard_normal((2, 3, 16, 16)).astype(np.float32)})
        out = os.path.join(d, "out")
        m.build(out)
        e = m.entry(out)
        c = m.call(e, "kprof")
        exe = compile_driver(d, [c], [m.stem], [out], sorted(glob.glob(os.path.join(out, "*.o"))),
                             name="driver_kprof")
        lines = SRC_KPROF.lstrip("\n").splitlines()

        def where(text):
            for i, l in enumerate(lines):
                if text in l:
                    return "%d:%d" % (i + 1, l.index(text) + 1 + (2 if text.startswith("x @") else 0))
            raise Fail("no %r in the source" % text)
        # (variant, op, shape, where, FLOPs per call)
        want = [("attn.0", "matmul", "f32[64, 128]", where("x @ w"), 2 * 64 * 128 * 96),
                ("attn.0", "softmax", "f32[64, 128]", where("softmax("), 64 * 128),
                ("attn.0", "layernorm", "f32[64, 128]", where("layernorm("), 64 * 128),
                ("stem.0", "conv2d", "f32[2, 8, 16, 16]", where("conv2d("), 2 * 8 * 3 * 3 * 3 * 16 * 16 * 2)]
        results = {}
        problems = []
        for level in ("2", "1", None):
            env = {k: v for k, v in os.environ.items() if k != "NESTRT_PROFILE"}
            if level:
                env["NESTRT_PROFILE"] = level
            r = run([exe], env=env)
            if r.returncode != 0:
                raise Fail("NESTRT_PROFILE=%s: %s" % (level, describe([exe], r)))
            results[level] = [np.load(p) for p in c.outputs]
            if level == "1" and ("GFLOP/s" in r.stderr or "kernels" in r.stderr):
                problems.append("kernel lines at NESTRT_PROFILE=1")
            if level != "2":
                continue
            prof = r.stderr
            groups = kprof_groups(prof)
            # a product over a weight: its format, bytes a call (w: 96 x 128 f32) and GB/s
            if not re.search(r"matmul +f32\[64, 128\] .*  f32 weights 49\.2 KB a call, \d+\.\d GB/s", prof):
                problems.append("no 'f32 weights 49.2 KB a call' on the matmul's line")
            for var, op, shape, wh, flops in want:
                if var not in groups:
                    problems.append("no %s line" % var)
                    continue
                calls, vms, ks, _ = groups[var]
                got = [k for k in ks if k[0] == op and k[1] == shape and k[2].endswith("kp.nest:" + wh)]
                if len(got) != 1:
                    problems.append("%s: no one line '%s %s kp.nest:%s'" % (var, op, shape, wh))
                    continue
                _, _, _, ms, rate, n = got[0]
                if n != calls:
                    problems.append("%s %s: %d calls, the variant %d" % (var, op, n, calls))
                # GFLOP/s = FLOPs * calls / ns, within the rounding of the printed ms
                lo = flops * n / ((ms + 0.0005) * 1e6) - 0.05
                hi = flops * n / ((ms - 0.0005) * 1e6) + 0.05 if ms > 0.0005 else float("inf")
                if rate != "-" and not lo <= float(rate) <= hi:
                    problems.append("%s %s: %s GFLOP/s, expected %.1f..%.1f" % (var, op, rate, lo, hi))
            for var, (calls, vms, ks, kline) in groups.items():
                if var == "total" or not ks:
                    continue
                total = sum(k[3] for k in ks)
                if total > vms + 0.0005 * (len(ks) + 1):
                    problems.append("%s: kernels %.3f ms > the variant's %.3f ms" % (var, total, vms))
                if not kline[0] or "of %.3f ms" % vms not in kline[0]:
                    problems.append("%s: no 'kernels ... of %.3f ms' line" % (var, vms))
            if groups.get("attn.0", (0,))[0] != 4 or groups.get("stem.0", (0,))[0] != 2:
                problems.append("variant calls: %s" % {k: v[0] for k, v in groups.items()})
        for level in ("2", "1"):
            if any(not np.array_equal(a, b) for a, b in zip(results[level], results[None])):
                problems.append("results with NESTRT_PROFILE=%s differ from those without" % level)
        if problems:
            raise Fail("; ".join(problems) + " [stderr: %s]" % short(prof, 14))
        values_ok([(n, compare(np.load(g), np.load(p), "out"))
                   for n, g, p in zip("oz", c.outputs, m.reference(e))])
    return single("profile.kernels_per_variant", fn)


# ----------------------------------------------------------------------------- 9b. nn layers (issue #10)

# linear, flatten and group_norm compiled, against NumPy (the references of
# tests/builtins/run.py) at 1e-5 of max|ref|, with the weights as params (packed
# panels, the bias as the matmul's epilogue); the large size runs group_norm's
# rows on the pool at 1 and 3 threads.
SRC_NN = """
const N = 2
const C = 6
const G = 3
const H = 5
const W = 7
const B = 3
const T = 5
const I = 37
const O = 45
param fc: { weight: f32[O, I], bias: f32[O] }
param gn: { weight: f32[C], bias: f32[C] }

export fn forward(x: f32[N, C, H, W], t: f32[B, T, I], u: f32[T, I], r: f32[B, T, O]) -> (f32[N, C, H, W], f32[B, T, O], f32[T, O], f32[N, C * H * W], f32[B, T, O]) {
  return group_norm(x, G, gn.weight, gn.bias), linear(t, fc.weight, fc.bias), linear(u, fc.weight), flatten(x, 1),
         r + gelu(linear(t, fc.weight, fc.bias))
}
"""


@check("nn.layers")
def nn_layers():
    bi = load_builtins()

    def case(tag, sizes, threads=None):
        def fn():
            src = SRC_NN
            for k, v in sizes.items():
                src = re.sub(r"const %s = \d+" % k, "const %s = %d" % (k, v), src)
            z = dict((k, int(re.search(r"const %s = (\d+)" % k, src).group(1))) for k in "NCGHWBTIO")
            rng = np.random.default_rng(11)
            x = (rng.standard_normal((z["N"], z["C"], z["H"], z["W"])) * 2 + 0.5).astype(np.float32)
            t = rng.standard_normal((z["B"], z["T"], z["I"])).astype(np.float32)
            u = rng.standard_normal((z["T"], z["I"])).astype(np.float32)
            fw = rng.uniform(-0.2, 0.2, (z["O"], z["I"])).astype(np.float32)
            fb = rng.uniform(-0.5, 0.5, z["O"]).astype(np.float32)
            gw = (1 + 0.1 * rng.standard_normal(z["C"])).astype(np.float32)
            gb = (0.1 * rng.standard_normal(z["C"])).astype(np.float32)
            resid = rng.standard_normal((z["B"], z["T"], z["O"])).astype(np.float32)
            d = tmpdir(tag)
            wpath = os.path.join(d, "w.safetensors")
            write_safetensors(wpath, [("fc.weight", fw), ("fc.bias", fb), ("gn.weight", gw), ("gn.bias", gb)])
            m = Model(d, write(os.path.join(d, "nn.nest"), src), None, {"x": x, "t": t, "u": u, "r": resid}, weights=wpath)
            out = os.path.join(d, "out")
            m.build(out)
            env = dict(os.environ, NESTRT_NUM_THREADS=str(threads)) if threads else None
            e = m.entry(out)
            c = m.call(e, "np")
            exe = compile_driver(d, [c], [m.stem], [out], sorted(glob.glob(os.path.join(out, "*.o"))), name="nn")
            r = run([exe], env=env)
            if r.returncode != 0:
                raise Fail("compiled program: " + describe([exe], r))
            # the bias, the exact GELU and the residual run in the matmul's
            # epilogue, after the reshape that unfolds the folded rows
            lin = bi.linear_ref(t, fw, fb)
            gelu = 0.5 * lin * (1 + np.vectorize(math.erf)(lin / math.sqrt(2)))
            refs = [bi.group_norm_ref(x, z["G"], gw, gb), lin, bi.linear_ref(u, fw),
                    x.reshape(z["N"], -1), resid + gelu]
            bad = []
            for lab, p, ref in zip(("group_norm", "linear", "linear_no_bias", "flatten", "residual_gelu_linear"),
                                   c.outputs, refs):
                got = np.load(p).astype(np.float64)
                if got.shape != ref.shape:
                    bad.append("%s: shape %s, expected %s" % (lab, got.shape, ref.shape))
                    continue
                err = float(np.max(np.abs(got - ref)))
                if not err <= 1e-5 * max(1.0, float(np.max(np.abs(ref)))):
                    bad.append("%s: max abs err %.3g" % (lab, err))
            if bad:
                raise Fail("; ".join(bad))
        return fn
    big = {"N": 2, "C": 64, "G": 32, "H": 16, "W": 17, "B": 2, "T": 33, "I": 96, "O": 130}
    res = single("nn.layers_odd", case("nn.odd", {}))
    res += single("nn.layers_one_group", case("nn.one", {"G": 1, "C": 4, "H": 3, "W": 1, "I": 1, "O": 1}))
    res += single("nn.layers_pool_1_thread", case("nn.big1", big, 1))
    res += single("nn.layers_pool_3_threads", case("nn.big3", big, 3))
    return res


# linear() makes the graph the hand-written form makes (so it takes the same
# fast path), for a 2-D x exactly, for other ranks between two reshapes.
SRC_LIN = """
param w: f32[45, 37]
param b: f32[45]
export fn forward(x: f32[23, 37], y: f32[3, 5, 37]) -> (f32[23, 45], f32[3, 5, 45]) {
  return %s
}
"""


@check("nn.linear_ir")
def nn_linear_ir():
    def fn():
        d = tmpdir("nn.linear_ir")
        dumps = []
        for k, body in enumerate(("linear(x, w, b), linear(y, w, b)",
                                  "x @ transpose(w, [1, 0]) + b, "
                                  "reshape(reshape(y, [15, 37]) @ transpose(w, [1, 0]) + b, [3, 5, 45])")):
            src = write(os.path.join(d, "l%d.nest" % k), SRC_LIN % body)
            dumps.append(nestc("check", src, "--dump=ir").stdout)
        if dumps[0] != dumps[1] or "matmul f32[23, 45]" not in dumps[0]:
            raise Fail("linear() IR differs from the hand-written form:\n%s\nvs\n%s" % tuple(dumps))
    return single("nn.linear_same_ir_as_hand_written", fn)


# The header's ranks and dims (and counts) as constants a C program can use at
# compile time: static assertions on their values and types, buffers sized by
# them; a count over INT_MAX is an INT64_C macro, not an enum constant.
SRC_HDIMS = """
export fn forward(x: f32[3, 5], k: i32[7]) -> (f32[5, 3], i32[7], f32[]) {
  return transpose(x, [1, 0]) * 2.0, k + 1, sum(x)
}
"""

HDIMS_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "hd.h"
#define IS_I64(e) _Generic((e), int64_t: 1, default: 0)
_Static_assert(HD_FORWARD_X_RANK == 2 && HD_FORWARD_X_DIM0 == 3 && HD_FORWARD_X_DIM1 == 5, "x");
_Static_assert(HD_FORWARD_K_RANK == 1 && HD_FORWARD_K_DIM0 == 7 && HD_FORWARD_K_NUMEL == 7, "k");
_Static_assert(HD_FORWARD_OUT0_RANK == 2 && HD_FORWARD_OUT0_DIM0 == 5 && HD_FORWARD_OUT0_DIM1 == 3, "out0");
_Static_assert(HD_FORWARD_OUT1_RANK == 1 && HD_FORWARD_OUT1_DIM0 == 7, "out1");
_Static_assert(HD_FORWARD_OUT2_RANK == 0 && HD_FORWARD_OUT2_NUMEL == 1, "out2");
_Static_assert(HD_FORWARD_X_NUMEL == HD_FORWARD_X_DIM0 * HD_FORWARD_X_DIM1, "numel");
_Static_assert(IS_I64(HD_FORWARD_X_DIM0) && IS_I64(HD_FORWARD_OUT1_DIM0), "dims are int64_t");
_Static_assert(IS_I64(BIG_FORWARD_X_NUMEL) && BIG_FORWARD_X_NUMEL == INT64_C(2147483648), "big numel");
_Static_assert(BIG_FORWARD_X_DIM0 * BIG_FORWARD_X_DIM1 == BIG_FORWARD_X_NUMEL, "big dims");
_Static_assert(BIG_FORWARD_OUT_NUMEL == INT64_C(1), "small numel beside a large one");

static float out0[HD_FORWARD_OUT0_DIM0][HD_FORWARD_OUT0_DIM1];

int main(void)
{
	nestrt_error err;
	hd *m = hd_new(NULL, &err);
	if (!m)
		return 2;
	float *x = malloc(HD_FORWARD_X_DIM0 * HD_FORWARD_X_DIM1 * sizeof *x);
	int32_t k[HD_FORWARD_K_DIM0], out1[HD_FORWARD_OUT1_NUMEL];
	float out2;
	for (int64_t i = 0; i < HD_FORWARD_X_DIM0; i++)
		for (int64_t j = 0; j < HD_FORWARD_X_DIM1; j++)
			x[i * HD_FORWARD_X_DIM1 + j] = (float)(i * 10 + j);
	for (int64_t i = 0; i < HD_FORWARD_K_DIM0; i++)
		k[i] = (int32_t)i;
	if (hd_forward(m, x, k, &out0[0][0], out1, &out2))
		return 3;
	for (int64_t i = 0; i < HD_FORWARD_OUT0_DIM0; i++)
		for (int64_t j = 0; j < HD_FORWARD_OUT0_DIM1; j++)
			if (out0[i][j] != 2.0f * (float)(j * 10 + i))
				return 4;
	printf("%d %d %g\n", out1[0], out1[HD_FORWARD_OUT1_DIM0 - 1], out2);
	free(x);
	hd_free(m);
	return 0;
}
"""


@check("header.dims")
def header_dims():
    def fn():
        d = tmpdir("header.dims")
        out = os.path.join(d, "out")
        nestc("build", write(os.path.join(d, "hd.nest"), SRC_HDIMS), "-o", out)
        big = write(os.path.join(d, "big.nest"), "export fn forward(x: f32[65536, 32768]) -> f32[] {\n"
                                                  "  return amax(x)\n}\n")
        nestc("build", big, "-o", out)
        h = open(os.path.join(out, "big.h")).read()
        if "#define BIG_FORWARD_X_NUMEL INT64_C(2147483648)" not in h or "enum { BIG_FORWARD_OUT_NUMEL = 1 };" not in h:
            raise Fail("big.h: the counts are not as expected:\n" + h)
        src = write(os.path.join(d, "main.c"), HDIMS_C.replace('#include "hd.h"', '#include "hd.h"\n#include "big.h"'))
        exe = os.path.join(d, "main")
        cmd = [CC, "-std=c11", "-pedantic-errors", "-Wall", "-Werror", "-I" + RUNTIME, "-I" + out, src,
               os.path.join(out, "hd.o"), LIBNESTRT, "-lm", "-lpthread", "-o", exe] + LINK_FLAGS
        r = run(cmd)
        if r.returncode != 0:
            raise Fail("the program does not compile: " + describe(cmd, r))
        r = run([exe])
        if r.returncode != 0 or r.stdout.strip() != "1 7 %g" % sum(i * 10 + j for i in range(3) for j in range(5)):
            raise Fail("program: " + describe([exe], r))
    return single("header.dims", fn)


SRC_GATHER_WHERE = """
param t: f32[4, 3]

@region
fn pick(a: f32[3, 3], j: i32[2]) -> f32[2, 3] {
  return a[j] * 2.0
}

export fn forward(i: i32[3], j: i32[2]) -> f32[2, 3] {
  let a = t[i]
  return pick(a, j)
}
"""


@check("gather_error_names_the_indexing")
def gather_error_where():
    """A gather out of range in compiled code names the indexing's FILE:LINE:COL, as the
    interpreter does: one in the entry, one in a region."""
    def fn():
        problems = []
        for tag, i, j, needle in (("entry", [0, 5, 1], [0, 1], "t[i]"), ("region", [0, 1, 2], [1, 3], "a[j]")):
            m = region_model("gather_where." + tag, SRC_GATHER_WHERE,
                             {"i": np.array(i, np.int32), "j": np.array(j, np.int32)})
            out = os.path.join(m.d, "out")
            m.build(out)
            e = m.entry(out)
            exe = compile_driver(m.d, [m.call(e, "got")], [m.stem], [out], sorted(glob.glob(os.path.join(out, "*.o"))))
            r = run([exe])
            line, col = line_of(open(m.src).read(), needle)
            bad, rows = (5, 4) if tag == "entry" else (3, 3)
            want = "%s:%d:%d: gather index %d out of range [0, %d)" % (m.src, line, col, bad, rows)
            if r.returncode != 1 or want not in r.stderr:
                problems.append("%s: exit %d, expected 1 and '%s' [stderr: %s]" % (tag, r.returncode, want,
                                                                                   short(r.stderr, 3)))
            ref = run([NESTC, "run", m.src, "--weights", m.weights] +
                      sum((["--input", "%s=%s" % kv] for kv in m.inputs.items()), []))
            if "%s:%d:%d: error: gather index %d" % (m.src, line, col, bad) not in ref.stderr:
                problems.append("%s: the interpreter names another place [stderr: %s]" % (tag, short(ref.stderr, 3)))
        if problems:
            raise Fail("; ".join(problems))
    return single("gather_error_names_the_indexing", fn)


# ----------------------------------------------------------------------------- main


def main(argv):
    global NESTC, LIBNESTRT, TMP
    args = argv[1:]
    keep, filters, jobs = False, [], (os.cpu_count() or 2) + 1
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--keep":
            keep = True
        elif a == "-k":
            i += 1
            filters.append(args[i])
        elif a == "-j":
            i += 1
            jobs = int(args[i])
        elif NESTC is None and not a.startswith("-"):
            NESTC = os.path.abspath(a)
        else:
            print(__doc__, file=sys.stderr)
            return 2
        i += 1
    if NESTC is None:
        print(__doc__, file=sys.stderr)
        return 2
    for cand in (os.path.join(os.path.dirname(NESTC), "libnestrt.a"),
                 os.path.join(ROOT, "build", "libnestrt.a")):
        if os.path.exists(cand):
            LIBNESTRT = cand
            break
    if not LIBNESTRT:
        print("run.py: no libnestrt.a beside %s or in build/" % NESTC, file=sys.stderr)
        return 2

    tasks = []
    bi = load_builtins()
    for c in bi.CASES:
        tasks.append(("builtin.%s" % c.name, (lambda c=c: builtin_case(c))))
    tasks += CHECKS
    if filters:
        tasks = [(n, f) for n, f in tasks if any(s in n for s in filters)]
    # the slowest first, so that the pool stays busy
    slow = ("sample.", "gpt2.", "emit", "link.", "profile")
    tasks.sort(key=lambda t: 0 if t[0].startswith(slow) else 1)

    TMP = tempfile.mkdtemp(prefix="nestc-build-tests-")
    try:
        def guarded(t):
            name, fn = t
            try:
                return fn()
            except Fail as e:
                return [(name, str(e))]
            except Exception as e:  # noqa: BLE001 - a bug in a check is a failure too
                return [(name, "%s: %s" % (type(e).__name__, e))]
        with ThreadPoolExecutor(max_workers=jobs) as ex:
            results = list(ex.map(guarded, tasks))
    finally:
        if keep:
            print("kept %s" % TMP, file=sys.stderr)
        else:
            shutil.rmtree(TMP, ignore_errors=True)
    order = {n: k for k, (n, _) in enumerate(sorted(tasks, key=lambda t: t[0]))}
    passed = failed = 0
    for (name, _), res in sorted(zip(tasks, results), key=lambda x: order[x[0][0]]):
        for n, msg in res:
            if msg is None:
                passed += 1
                print("ok %s" % n)
            else:
                failed += 1
                print("FAIL %s: %s" % (n, msg))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
