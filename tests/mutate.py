#!/usr/bin/python3
"""Mutation testing: plant one small bug at a time in nestc's C sources, rebuild,
run the tests that cover the file, and report the bugs no test noticed.

    /usr/bin/python3 tests/mutate.py [--base COMMIT] [FILE...] [--max N] [--seed S]
                                     [-j N] [--fail-under PCT] [--list] [--keep] [--no-sanitize]
                                     [--only A-B]

  FILE...          C files under src/ or runtime/ to mutate (all of their code);
  --base COMMIT    only the lines `git diff -U0 COMMIT` adds or changes (working tree
                   against COMMIT) in C files under src/ and runtime/; with FILEs, only
                   theirs;
  --max N          at most N mutants per file (default 50), a seeded sample spread
                   over the file (or over its changed lines);
  --seed S         the sample's seed (default 1): the same seed, the same mutants;
  -j N             N private copies mutated side by side (default 1); the tests
                   inside a mutant run with -j 1;
  --fail-under PCT exit status 1 if fewer than PCT percent of the mutants that compile
                   are killed (default: exit 0 whatever survives);
  --list           print the chosen mutants (file:line, operator, diff) and stop;
  --keep           keep the private copies (their paths are printed);
  --no-sanitize    skip the second pass below;
  --only A-B       try only the chosen mutants A to B (numbered from 1 as --list and
                   the run print them, over all files): a long run split in parts.
  kill -USR1 PID   stop after the mutants under test and print the report so far.

The working tree is never written: the tracked and untracked (not ignored) files are
copied to a private directory with the build directory's top-level files (their
times kept, so make rebuilds only what is out of date), built once with
`make B=build`, the covering tests run once there (a baseline: a command that fails
unmutated is dropped, with a warning; its time sets its timeout). Then per mutant:
the file is written mutated, make rebuilds what depends on it (with -O1: faster
than -O2 -g, the same code but for undefined behaviour; incompatible pointer types,
int-conversion, printf arguments that do not fit their format and a non-void
function's end reached without a return (the tree builds without these warnings)
are errors; a mutant that does not compile is counted apart), the covering commands run fastest first, with
XDG_CACHE_HOME private, each with a timeout (3 times its baseline plus 30 s), until
one fails: the mutant is killed (or timed out: counted as killed, reported apart).
A mutant every command passes is tried again with the copy built and the commands
run as `make check-asan` does (AddressSanitizer, UBSan, LeakSanitizer): CI runs the
suite so too, and a mutant that only leaks or reads out of bounds is caught there.
One that passes both survived: its diff is printed. The file is restored.

Mutations (standard ones; comments, string literals, preprocessor lines, top-level
declarations, array sizes in declarations and case labels are left alone):
  cmp      < <= > >= == != changed to their neighbour (< to <=, == to !=, ...)
  arith    binary + - * / % and += -= swapped (+ for -, * for /, % for /)
  const    an integer constant plus or minus 1
  index    an array index plus or minus 1 (a[i] to a[(i) + 1])
  logic    && for || and back
  cond     an if's condition made 0 or 1
  not      a ! removed
  stmt     a call, assignment or return statement dropped (made `;`)
  swap     two neighbouring arguments of a call swapped (not those of calloc, iadd,
           imul, LLVMBuildAdd and the like that commute)

Not planted, because no behaviour can differ (rules that hold for any file):
  - dropping a call of va_end (a no-op wherever GCC and Clang run: NO_EFFECT_CALLS);
  - a constant alignment given to LLVMSetAlignment changed by one: one more than a
    power of two is taken as that power (LLVM stores its log2, rounded down), one
    less promises a smaller alignment, which every address that met the larger meets;
  - < <= > >= turned into its neighbour where the comparison only chooses between its
    own two operands x and y (equal_choice): `x < y ? x : y` (the arms in either order;
    or x and -x when y is 0, an absolute value) and `if (x < y) y = x;` (the if's only
    statement, no else; other terms of its condition joined by && or ||, without
    calls). The neighbour decides otherwise only where x == y, and there both choices
    are the same value. So too an integer constant c that is one of those operands
    changed by one the way that moves the comparison's boundary onto x == c alone
    (x < c to x < c + 1, x <= c to x <= c - 1, x > c to x > c - 1, x >= c to
    x >= c + 1; equal_choice_const). Only for operands without calls or side effects
    that hold no floating-point value (a name declared float or double in its
    function, or for a member or global in the file or a header under src/ or
    runtime/, keeps its mutants: +0.0 and -0.0 compare equal and differ).

Not tried, because a note in the source says why no test can tell them apart: a
comment holding `equivalent mutant [KIND WHAT]: reason` (KIND and WHAT as --list
prints them, e.g. `[cmp < -> <=]`; `[KIND]` alone for every mutant of that kind),
at the end of the mutated line or in the comment just above it. The sample is drawn
before the notes are read, so a note changes no other mutant chosen; the report
counts noted mutants apart (not in kill%) and prints each with its reason. A note
that matches no mutant of its line is reported, so notes do not outlive their code;
`tests/mutate.py --check-notes` (in make check) checks every note of src/ and runtime/.

The files each suite covers, fastest first, are in COVER below; a file not in it is
covered by the whole tests/check.sh (slow).
"""
import difflib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

# a mutant's objects: faster to build than the tree's -O2 -g; a swap of arguments of
# unrelated pointer types, or of a pointer and an integer, is a mutant that does not
# compile, and so are a dropped return that leaves a non-void function without a value
# and swapped printf-style arguments that no longer fit their format (-Wall reports
# both: a program that reads that value, or prints so, has no meaning in C)
CFLAGS = "-O1 -Werror=incompatible-pointer-types -Werror=int-conversion -Werror=return-type -Werror=format"
# The survivors again, built and run as make check-asan does (CI runs the suite so
# too): a mutant that only leaks, or reads or writes out of bounds, is caught there.
ASAN_FLAGS = "-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
ASAN_ENV = {"ASAN_OPTIONS": "exitcode=86:detect_leaks=1", "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
            "LSAN_OPTIONS": "use_tls=0", "NESTC_TEST_LDFLAGS": "-fsanitize=address,undefined"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"

# ----------------------------------------------------------------------------- coverage

# Test commands, run in the private copy's root. {NESTC} is build/nestc there, {PY}
# /usr/bin/python3, {SELF} this script. Each is (name, argv).
T = {
    "runtime": ("test_runtime", ["build/test_runtime"]),
    "unit-io": ("test_io", ["build/test_io"]),
    "threads": ("run_threads", ["{PY}", "tests/runtime/run_threads.py", "{NESTC}"]),
    "generate": ("generate", ["{PY}", "tests/generate/run.py", "{NESTC}"]),
    "cli": ("cli", ["{PY}", "tests/cli/run.py", "{NESTC}"]),
    "diag": ("diag", ["{PY}", "tests/diag/run.py", "{NESTC}"]),
    "onnx-cli": ("onnx cli checks", ["{PY}", "{SELF}", "--onnx-cli", "{NESTC}"]),
    "onnx": ("onnx node tests", ["{PY}", "tests/onnx/run.py", "{NESTC}", "--check", "-j", "1"]),
    "builtins": ("builtins", ["{PY}", "tests/builtins/run.py", "{NESTC}", "-j", "1"]),
    "models": ("models", ["{PY}", "tests/models/run.py", "{NESTC}"]),
    "nets": ("nets", ["{PY}", "tests/nets/run.py", "{NESTC}"]),
    "compiled": ("compiled", ["{PY}", "tests/compiled/run.py", "{NESTC}", "-j", "1"]),
    "formats": ("formats", ["{PY}", "tests/formats/run.py", "{NESTC}"]),
}


def subset(key, *filters, name=None):
    """A runner that takes -k, on the tests whose names hold one of filters."""
    nm, argv = T[key]
    args = list(argv)
    for f in filters:
        args += ["-k", f]
    return (name or "%s -k %s" % (nm, ",".join(filters)), args)


# The ONNX node tests whose imports go through fold.c's helpers the most (inputs,
# axes, broadcasting, shapes, constants), a few seconds in all.
ONNX_FOLD_NODES = ("test_add_bcast", "test_sub_bcast", "test_mul_bcast", "test_div_bcast", "test_reshape_",
                   "test_slice", "test_squeeze", "test_unsqueeze", "test_expand", "test_concat_",
                   "test_gather_", "test_transpose_", "test_reduce_sum_", "test_where_", "test_pow_bcast",
                   "test_constant", "test_split_", "test_tile", "test_range_")

# wpack.c and the files split from it (panel.c, prepacked.c): the runtime's unit
# tests, the threads, the compiled matmul and conv kernels over packed weights,
# generation and every weight format.
WPACK_COVER = [
    T["runtime"], T["unit-io"], T["threads"],
    subset("compiled", "kernels.matmul", "weights.half", "link.", "narrow.", "kernels.conv2d_lanes",
           "kernels.conv2d_winograd"),
    T["generate"],
    T["formats"],  # weights in a format: packed from f32, F16/BF16 bytes or GGUF blocks
]

# conv.c and conv_lanes.c: the compiled convolutions and poolings, ONNX's conv and pool node tests.
CONV_COVER = [
    subset("compiled", "nn.layers", name="compiled -k nn.layers"),
    subset("compiled", "builtin.conv", "builtin.pool", "builtin.max_pool", "builtin.avg_pool", "builtin.i10_conv"),
    subset("compiled", "kernels.conv2d", "region.option_winograd", "sample.resnet18_odd",
           "upsample.reuse_hash_runtime_dims"),
    subset("onnx", "test_conv_", "test_maxpool", "test_averagepool", name="onnx node tests -k conv,pool"),
]

# file -> test commands covering it, the fastest (and likeliest to fail) first.
COVER = {
    "src/dims.c": [
        T["diag"], T["cli"],
        subset("compiled", "header.dims", "runtime_dims", "header.dim_and_sequence", "kernels.conv2d_pool_state",
               "narrow."),
        T["generate"],
        subset("builtins", "where", "dim", name="builtins -k where,dim"),
    ],
    "runtime/seq.c": [
        T["runtime"], T["generate"], T["threads"],
        subset("compiled", "header.dim_and_sequence", "kernels.conv2d_pool_state", "narrow."),
    ],
    "runtime/wpack.c": WPACK_COVER,
    "runtime/panel.c": WPACK_COVER,  # split from wpack.c: the same cases reach it
    "runtime/prepacked.c": WPACK_COVER,
    "src/onnx/fold.c": [
        subset("onnx", *ONNX_FOLD_NODES, name="onnx node tests (fold's ops)"),
        T["onnx-cli"],
    ],
    "src/codegen/matmul_fmt.c": [
        T["formats"],  # every format's tiles, int8 activations, SSE2 / AVX2 / VNNI builds, threads
        ("gguf_llama", ["{PY}", "tests/io/gguf_llama.py", "{NESTC}"]),
        T["generate"],
    ],
    "src/codegen/matmul.c": [
        subset("compiled", "kernels.matmul", "kernels.shared", "builtin.matmul", "region.", "sample.",
               name="compiled -k kernels.matmul,builtin.matmul,region.,sample."),
        T["generate"],
        T["formats"],
    ],
    # this session's (#38): reductions, activations, ONNX patterns, kernel sharing
    "src/codegen/reduce.c": [
        T["builtins"],
        subset("compiled", "kernels.reduce", "builtin.", "nn.layers", "kernels.conv2d_fused",
               name="compiled -k kernels.reduce,builtin.,nn.layers,kernels.conv2d_fused"),
    ],
    "src/codegen/elementwise.c": [
        T["builtins"],
        subset("compiled", "kernels.conv2d_fused", "kernels.o1", "builtin.", "kernels.reduce",
               name="compiled -k kernels.conv2d_fused,kernels.o1,builtin.,kernels.reduce"),
    ],
    "src/interp/elementwise.c": [T["builtins"]],
    "src/onnx/patterns.c": [T["onnx-cli"]],
    "src/codegen/build.c": [
        subset("compiled", "kernels.shared", "kernels.model_in_parts", "kernels.o1", "kernels.conv2d_large",
               "region.a_"),
        ("incremental", ["{PY}", "tests/incremental/run.py", "{NESTC}"]),
        T["cli"],
    ],
    "src/codegen/cache.c": [
        subset("compiled", "kernels.shared", "kernels.model_in_parts"),
        ("incremental", ["{PY}", "tests/incremental/run.py", "{NESTC}"]),
    ],
    "src/report.c": [
        subset("compiled", "kernels.shared", "kernels.model_in_parts", "kernels.conv2d_large", "region."),
        T["cli"],
        ("dump", ["{PY}", "tests/dump/run.py", "{NESTC}"]),
    ],
    "src/codegen/conv.c": CONV_COVER,
    "src/codegen/conv_lanes.c": CONV_COVER,  # split from conv.c
    "src/codegen/conv_dw.c": [subset("compiled", "kernels.conv2d_depthwise", "kernels.conv2d",
                                     name="compiled -k kernels.conv2d")] + CONV_COVER[:1],
    # issue 38 (8th session): copies as runs, elementwise runs and batch-1 channels, the model's parts
    "src/codegen/movement.c": [
        subset("compiled", "kernels.copies_as_runs", "kernels.concat_in_place", "builtin.concat", "builtin.slice",
               "builtin.transpose",
               "builtin.take", "builtin.expand", "builtin.broadcast", "kernels.model_in_parts",
               name="compiled -k kernels.copies_as_runs,kernels.model_in_parts,builtin.(movement)"),
        subset("onnx", "test_concat", "test_slice", "test_gather", "test_transpose", "test_expand",
               name="onnx node tests -k concat,slice,gather,transpose,expand"),
    ],
    "src/plan.c": [
        subset("compiled", "kernels.concat_in_place", "kernels.copies_as_runs", "kernels.model_in_parts",
               "builtin.concat", "sample.", name="compiled -k kernels.concat_in_place,...,builtin.concat,sample."),
    ],
    "src/codegen/builder.c": [
        subset("compiled", "kernels.copies_as_runs", "kernels.model_in_parts", "kernels.conv2d_fused", "builtin.",
               name="compiled -k kernels.copies_as_runs,kernels.model_in_parts,kernels.conv2d_fused,builtin."),
    ],
    "src/codegen/graph.c": [
        subset("compiled", "kernels.copies_as_runs", "kernels.model_in_parts", "kernels.shared", "builtin.",
               name="compiled -k kernels.copies_as_runs,kernels.model_in_parts,kernels.shared,builtin."),
    ],
    # issue 39: shared libraries, the API description, the header they agree with
    "src/codegen/api.c": [("api", ["{PY}", "tests/api/run.py", "{NESTC}"])],
    "src/codegen/link.c": [("api", ["{PY}", "tests/api/run.py", "{NESTC}"]),
                           ("cmake", ["{PY}", "tests/cmake/run.py", "{NESTC}"])],
    "src/codegen/header.c": [("api", ["{PY}", "tests/api/run.py", "{NESTC}"]),
                             subset("compiled", "header.", name="compiled -k header.")],
}
FALLBACK = [("tests/check.sh", ["sh", "tests/check.sh", "build"])]
BUILD_TARGETS = ["build/nestc", "build/libnestrt.a", "build/test_runtime", "build/test_io", "build/nestrt.pc"]
FALLBACK_TARGETS = ["build/test_interp"]


def covering(path):
    return COVER.get(path, FALLBACK)


# ----------------------------------------------------------------------------- C lexing

TYPE_WORDS = set("""void char short int long float double signed unsigned const static struct union enum
volatile register extern inline _Bool bool restrict""".split())
KEYWORDS = set("""if else while for do switch case default return break continue goto sizeof typedef
_Alignof alignof _Static_assert""".split()) | TYPE_WORDS
TOKEN_RE = re.compile(r"""
    (?P<num>(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[uUlLfF]*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op><<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||\+=|-=|\*=|/=|%=|&=|\|=|\^=|\.\.\.|[-+*/%<>=!&|^~?:;,.(){}\[\]#])
""", re.X)


def mask(text):
    """text with comments, string and character literals (all but their quotes) and
    preprocessor lines blanked out, newlines kept: offsets stay those of text."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":
            # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out[i] = " "
                    i += 2
                    continue
                if text[i:i + 2] == "/*":
                    j = text.find("*/", i + 2)
                    j = n if j < 0 else j + 2
                    for k in range(i, j):
                        if out[k] != "\n":
                            out[k] = " "
                    i = j
                    continue
                out[i] = " "
                i += 1
            continue
        line_start = False
        if c == "\n":
            line_start = True
            i += 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = "S" if c == '"' else "0"
            i = j + 1
        else:
            i += 1
    return "".join(out)


class Tok:
    __slots__ = ("kind", "s", "a", "b", "fn")

    def __init__(self, kind, s, a, b):
        self.kind, self.s, self.a, self.b, self.fn = kind, s, a, b, False

    def __repr__(self):
        return self.s


def tokens(masked):
    out = []
    pos = 0
    n = len(masked)
    while pos < n:
        if masked[pos].isspace():
            pos += 1
            continue
        if masked[pos] in "\"'":
            j = masked.index(masked[pos], pos + 1) if masked.find(masked[pos], pos + 1) >= 0 else n - 1
            out.append(Tok("str", masked[pos:j + 1], pos, j + 1))
            pos = j + 1
            continue
        m = TOKEN_RE.match(masked, pos)
        if not m:
            pos += 1
            continue
        kind = m.lastgroup
        out.append(Tok(kind, m.group(), m.start(), m.end()))
        pos = m.end()
    # mark the tokens inside function bodies: a top-level { after a )
    depth = 0
    infn = False
    for k, t in enumerate(out):
        if t.s == "{":
            if depth == 0:
                infn = k > 0 and out[k - 1].s == ")"
            depth += 1
        elif t.s == "}":
            depth -= 1
            if depth == 0:
                t.fn = infn
                infn = False
                continue
        t.fn = infn and depth > 0
    return out


def is_type_tok(t):
    if t.kind != "id":
        return False
    s = t.s
    return s in TYPE_WORDS or s.endswith("_t") or (s[0].isupper() and any(ch.islower() for ch in s))


def match_close(toks, k):
    """index of the bracket closing toks[k]"""
    op = toks[k].s
    cl = {"(": ")", "[": "]", "{": "}"}[op]
    d = 0
    for j in range(k, len(toks)):
        if toks[j].s == op:
            d += 1
        elif toks[j].s == cl:
            d -= 1
            if d == 0:
                return j
    return len(toks) - 1


class Mutant:
    def __init__(self, path, op, a, b, new, line, what):
        self.path, self.op, self.a, self.b, self.new, self.line, self.what = path, op, a, b, new, line, what

    def apply(self, text):
        return text[:self.a] + self.new + text[self.b:]

    def diff(self, text):
        old = text.splitlines(keepends=True)
        new = self.apply(text).splitlines(keepends=True)
        d = difflib.unified_diff(old, new, "a/" + self.path, "b/" + self.path, n=1)
        return "".join(x if x.endswith("\n") else x + "\n" for x in d)


def statements(toks):
    """(start, end) index ranges of the simple statements in function bodies: from a
    token after ; { } or a control header (if/while/for/switch (...), else, do,
    labels) to the ; ending it at depth 0."""
    out = []
    k = 0
    n = len(toks)
    start = None
    while k < n:
        t = toks[k]
        if not t.fn or t.s in ("{", "}"):
            start = None
            k += 1
            continue
        if start is None:
            if t.s in ("if", "while", "for", "switch") and k + 1 < n and toks[k + 1].s == "(":
                out.append(("ctl", k, match_close(toks, k + 1)))
                k = match_close(toks, k + 1) + 1
                continue
            if t.s in ("else", "do", ";"):
                k += 1
                continue
            if t.s in ("case", "default"):
                while k < n and toks[k].s != ":":
                    k += 1
                k += 1
                continue
            if t.kind == "id" and k + 1 < n and toks[k + 1].s == ":" :
                k += 2
                continue
            start = k
        j = k
        while j < n and toks[j].s != ";":
            if toks[j].s in ("(", "[", "{"):
                if toks[j].s == "{" and toks[j - 1].s != "=" and toks[j - 1].s != ",":
                    break  # a block, not an initializer
                j = match_close(toks, j)
            j += 1
        if j < n and toks[j].s == ";":
            out.append(("stmt", start, j))
            k = j + 1
        else:
            k = j
        start = None
    return out


def is_declaration(toks, a, b):
    t0 = toks[a]
    if t0.kind != "id":
        return False
    if t0.s in TYPE_WORDS or t0.s == "typedef":
        return True
    if t0.s in KEYWORDS:
        return False
    if a + 1 > b:
        return False
    if toks[a + 1].kind == "id":
        return True  # Type name
    j = a + 1
    while j <= b and toks[j].s == "*":
        j += 1
    return j > a + 1 and j <= b and toks[j].kind == "id"  # Type *name


# calls whose two neighbouring arguments i, i+1 commute: swapping them is no bug
COMMUTE = {"calloc": 0, "fmax": 0, "fmin": 0, "fmaxf": 0, "fminf": 0, "MAX": 0, "MIN": 0, "iadd": 1, "imul": 1,
           "LLVMBuildAdd": 1, "LLVMBuildMul": 1, "LLVMBuildFAdd": 1, "LLVMBuildFMul": 1, "LLVMBuildNSWAdd": 1,
           "LLVMBuildNSWMul": 1, "LLVMBuildAnd": 1, "LLVMBuildOr": 1, "LLVMBuildXor": 1}


def alignment_arg(toks, k):
    """Is the number toks[k] the alignment argument of LLVMSetAlignment (its last)?"""
    if k + 1 >= len(toks) or toks[k + 1].s != ")" or not k or toks[k - 1].s != ",":
        return False
    depth = 0
    for j in range(k - 1, 0, -1):
        if toks[j].s == ")":
            depth += 1
        elif toks[j].s == "(":
            if depth == 0:
                return toks[j - 1].s == "LLVMSetAlignment"
            depth -= 1
    return False


def const_text(s, d):
    m = re.match(r"(0[xX][0-9a-fA-F]+|\d+)([uUlL]*)$", s)
    if not m:
        return None
    lit, suf = m.groups()
    if lit.lower().startswith("0x"):
        v = int(lit, 16) + d
        body = ("0x%x" % v) if v >= 0 else None
    elif len(lit) > 1 and lit.startswith("0"):
        return None  # octal: rare, leave it
    else:
        v = int(lit) + d
        body = str(v)
    if body is None:
        return None
    if v < 0:
        return "(%s%s)" % (body, suf)
    return body + suf


# calls with no effect a program could observe: dropping one is no bug (va_end is a
# no-op wherever GCC and Clang run)
NO_EFFECT_CALLS = {"va_end"}

FLOAT_DECL = r"\b(?:float|double|_Float16|__fp16|__bf16)\b[^;{}]*?\b%s\b"
INT_DECL = (r"\b(?:int|long|short|char|unsigned|signed|size_t|ssize_t|u?int(?:8|16|32|64)_t|u?intptr_t|ptrdiff_t"
            r"|__int128|bool|_Bool)\b[^;{}]*?\b%s\b")
_header_text = None


def float_names(masked, toks):
    """A test: may the identifier toks[q] hold a floating-point value? A member (after
    -> or .) or a name its function does not declare: yes when the file or a header
    under src/ or runtime/ declares that name with a floating-point type anywhere (or
    #defines it as a number with a point or an exponent). A name its function declares
    (a parameter or a local): yes unless the function declares it with an integer type
    and nowhere with a floating-point one."""
    global _header_text
    if _header_text is None:
        parts = []
        for d in ("src", "runtime"):
            for dp, _, fs in os.walk(os.path.join(ROOT, d)):
                for f in fs:
                    if f.endswith(".h"):
                        with open(os.path.join(dp, f), errors="replace") as fh:
                            parts.append(fh.read())
        _header_text = "\n".join(parts)
    # where the function around each token begins (its return type), by offset
    starts = []
    depth, boundary = 0, 0
    for k, t in enumerate(toks):
        if t.s == "{":
            if depth == 0:
                starts.append((t.a, boundary))
            depth += 1
        elif t.s == "}":
            depth -= 1
            if depth == 0:
                boundary = t.b
        elif t.s == ";" and depth == 0:
            boundary = t.b
    memo = {}

    def globally(name):
        if name not in memo:
            memo[name] = any(re.search(FLOAT_DECL % re.escape(name), t) or
                             re.search(r"#\s*define\s+%s\s+[-+(]*\d*\.\d|#\s*define\s+%s\s+[-+(]*\d+[eE]"
                                       % (re.escape(name), re.escape(name)), t) for t in (masked, _header_text))
        return memo[name]

    def may_be_float(q):
        name = toks[q].s
        if q > 0 and toks[q - 1].s in ("->", "."):
            return globally(name)
        import bisect
        i = bisect.bisect_right(starts, (toks[q].a, 1 << 62)) - 1
        if i >= 0:
            fn = masked[starts[i][1]:toks[q].a]
            if re.search(FLOAT_DECL % re.escape(name), fn):
                return True
            if re.search(INT_DECL % re.escape(name), fn):
                return False
        return globally(name)
    return may_be_float


def _plain(toks, a, b, floats):
    """toks[a..b] (inclusive) as text without spaces, if it is an expression without
    side effects, calls or floating-point values (integers and pointers only: floats,
    float_names' test); else None."""
    if a > b:
        return None
    for q in range(a, b + 1):
        t = toks[q]
        if t.s in ("++", "--", "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "?", ":", ",",
                   "sizeof") or t.kind == "str":
            return None
        if t.kind == "num" and re.search(r"[.eEfF]", t.s) and not t.s.lower().startswith("0x"):
            return None
        if t.kind == "id" and q + 1 <= b and toks[q + 1].s == "(" and not is_type_tok(t):
            return None  # a call
        if t.kind == "id" and t.s not in KEYWORDS and floats(q):
            return None
    return "".join(toks[q].s for q in range(a, b + 1))


LOWER = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", ",", ";", "{", "}", "?", ":", "&&", "||",
         "==", "!=", "&", "|", "^", "<", "<=", ">", ">=", "return"}


def _operands(toks, k):
    """The index ranges of the two operands of the comparison toks[k]: (a0, a1, b0, b1)."""
    j, d = k - 1, 0
    while j >= 0:
        s = toks[j].s
        if s in (")", "]"):
            d += 1
        elif s in ("(", "["):
            if d == 0:
                break
            d -= 1
        elif d == 0 and s in LOWER:
            break
        j -= 1
    a0 = j + 1
    j, d = k + 1, 0
    while j < len(toks):
        s = toks[j].s
        if s in ("(", "["):
            d += 1
        elif s in (")", "]"):
            if d == 0:
                break
            d -= 1
        elif d == 0 and s in LOWER:
            break
        j += 1
    return a0, k - 1, k + 1, j - 1


def equal_choice(toks, k, floats):
    """Is the comparison toks[k] (< <= > >=) between integers x and y that only chooses
    between x and y, so that its neighbour (< for <=, ...) decides otherwise only where
    x == y, and there both choices are the same value? Two forms:
        x < y ? x : y    (either arm first; the condition parenthesised or not; or
                          x < 0 ? -x : x, the arms x and -x of an absolute value)
        if (x < y) y = x;   if (... || x < y) x = y;   (the only statement, no else;
                          other terms of the condition joined by && or ||, without calls)
    x and y have no calls or side effects and hold no floating-point value (+0.0 and
    -0.0 compare equal and differ)."""
    a0, a1, b0, b1 = _operands(toks, k)
    x, y = _plain(toks, a0, a1, floats), _plain(toks, b0, b1, floats)
    if x is None or y is None:
        return False
    n = len(toks)
    # the ternary form
    q = b1 + 1
    lp = a0 - 1
    if q < n and toks[q].s == ")" and lp >= 0 and toks[lp].s == "(" and match_close(toks, lp) == q and \
            q + 1 < n and toks[q + 1].s == "?" and (lp == 0 or toks[lp - 1].kind != "id" or toks[lp - 1].s == "return"):
        q += 1
        lp -= 1
    if q < n and toks[q].s == "?" and (lp < 0 or toks[lp].s in LOWER or toks[lp].s == "("):
        c = q + 1
        d = 0
        while c < n and not (d == 0 and toks[c].s == ":"):
            if toks[c].s in ("(", "["):
                d += 1
            elif toks[c].s in (")", "]"):
                d -= 1
            if toks[c].s == "?" or d < 0:
                return False
            c += 1
        e = c + 1
        d = 0
        while e < n and not (d == 0 and toks[e].s in (";", ",", ")", "]", "}", ":", "?")):
            if toks[e].s in ("(", "["):
                d += 1
            elif toks[e].s in (")", "]"):
                d -= 1
            e += 1
        if e < n and toks[e].s in ("?", ":"):
            return False
        u, v = _plain(toks, q + 1, c - 1, floats), _plain(toks, c + 1, e - 1, floats)
        if u is None or v is None:
            return False
        if {u, v} == {x, y} and u != v:
            return True
        if "0" not in (x, y) or x == y:
            return False
        var = y if x == "0" else x
        return {u, v} in ({var, "-" + var}, {var, "-(" + var + ")"})
    # the if form: the comparison is a term of the if's condition
    j, d = k - 1, 0
    while j >= 0:
        s = toks[j].s
        if s == ")":
            d += 1
        elif s == "(":
            if d == 0:
                break
            d -= 1
        j -= 1
    if j < 1 or toks[j - 1].s != "if":
        return False
    close = match_close(toks, j)
    terms, d, start = [], 0, j + 1
    for q in range(j + 1, close + 1):
        s = toks[q].s
        if q == close or (d == 0 and s in ("&&", "||")):
            terms.append((start, q - 1))
            start = q + 1
        elif s in ("(", "["):
            d += 1
        elif s in (")", "]"):
            d -= 1
    if (a0, b1) not in terms:
        return False
    for t0, t1 in terms:
        if (t0, t1) != (a0, b1):
            for q in range(t0, t1 + 1):
                if toks[q].s in ("++", "--", "=", "+=", "-=") or (toks[q].kind == "id" and q < t1 and
                                                                 toks[q + 1].s == "(" and not is_type_tok(toks[q])):
                    return False
    body = close + 1
    if body < n and toks[body].s == "{":
        if match_close(toks, body) == body + 1:
            return False
        body += 1
    semi = body
    while semi < n and toks[semi].s != ";":
        if toks[semi].s in ("{", "}", "?"):
            return False
        semi += 1
    eq = [q for q in range(body, semi) if toks[q].s == "="]
    if len(eq) != 1:
        return False
    lhs, rhs = _plain(toks, body, eq[0] - 1, floats), _plain(toks, eq[0] + 1, semi - 1, floats)
    if {lhs, rhs} != {x, y}:
        return False
    after = semi + 1
    if toks[close + 1].s == "{":
        if after >= n or toks[after].s != "}":
            return False
        after += 1
    return not (after < n and toks[after].s == "else")



def equal_choice_const(toks, k, d, floats):
    """Is the integer constant toks[k] an operand of a comparison equal_choice accepts,
    changed by d (+1 or -1) in the direction that flips the comparison only where its
    operands are equal (x < c to x < c + 1, x <= c to x <= c - 1, ...)?"""
    flips_at_c = {("<", 1), ("<=", -1), (">", -1), (">=", 1)}
    mirror = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
    for cmp, right in ((k - 1, True), (k + 1, False)):
        if not (0 <= cmp < len(toks)) or toks[cmp].s not in mirror:
            continue
        a0, a1, b0, b1 = _operands(toks, cmp)
        if ((b0, b1) if right else (a0, a1)) != (k, k):
            continue
        op = toks[cmp].s if right else mirror[toks[cmp].s]
        return (op, d) in flips_at_c and equal_choice(toks, cmp, floats)
    return False


def mutants_of(path, text):
    masked = mask(text)
    toks = tokens(masked)
    lines_at = [0]
    for i, c in enumerate(text):
        if c == "\n":
            lines_at.append(i + 1)
    import bisect

    def line(off):
        return bisect.bisect_right(lines_at, off)

    out = []
    floats = float_names(masked, toks)

    def add(op, a, b, new, what):
        out.append(Mutant(path, op, a, b, new, line(a), what))

    # which tokens are in the declarator part of a declaration (not mutated), which in
    # case labels; statements for dropping
    nodecl = set()
    stmts = statements(toks)
    for kind, a, b in stmts:
        if kind != "stmt":
            continue
        if toks[a].s == "case":
            nodecl.update(range(a, b + 1))
        elif is_declaration(toks, a, b):
            # up to the first = at depth 0 of each declarator
            j = a
            d = 0
            decl = True
            while j <= b:
                s = toks[j].s
                if s in "([{":
                    d += 1
                elif s in ")]}":
                    d -= 1
                if d == 0 and s == "=":
                    decl = False
                elif d == 0 and s == ",":
                    decl = True
                if decl:
                    nodecl.add(j)
                j += 1
        else:
            first = toks[a].s
            if first == "return" or (first not in KEYWORDS and any(
                    toks[j].s in ("=", "+=", "-=", "*=", "/=", "%=", "|=", "&=", "^=", "<<=", ">>=", "++", "--", "(")
                    for j in range(a, b + 1))):
                if first in ("break", "continue", "goto"):
                    continue
                if first in NO_EFFECT_CALLS and toks[a + 1].s == "(" and match_close(toks, a + 1) == b - 1:
                    continue  # a call that changes nothing observable: dropping it is no bug
                new = ";" + "\n" * text.count("\n", toks[a].a, toks[b].b)
                add("stmt", toks[a].a, toks[b].b, new, "statement dropped")
    # case labels outside simple statements
    for k, t in enumerate(toks):
        if t.s == "case":
            j = k
            while j < len(toks) and toks[j].s != ":":
                nodecl.add(j)
                j += 1

    CMP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
    ARITH = {"+": "-", "-": "+", "*": "/", "/": "*", "%": "/", "+=": "-=", "-=": "+="}
    for k, t in enumerate(toks):
        if not t.fn or k in nodecl:
            continue
        prev = toks[k - 1] if k else None
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        valueish = prev is not None and (prev.kind == "num" or prev.s in (")", "]") or
                                         (prev.kind == "id" and prev.s not in KEYWORDS))
        if t.s in CMP:
            if t.s in ("<", "<=", ">", ">=") and equal_choice(toks, k, floats):
                continue  # differs only where both choices are the same integer
            add("cmp", t.a, t.b, CMP[t.s], "%s -> %s" % (t.s, CMP[t.s]))
        elif t.s in ("+=", "-="):
            add("arith", t.a, t.b, ARITH[t.s], "%s -> %s" % (t.s, ARITH[t.s]))
        elif t.s in ("+", "-", "*", "/", "%") and valueish:
            if t.s == "*" and (is_type_tok(prev) or nxt is None or nxt.s in (")", ",", "*")):
                continue
            add("arith", t.a, t.b, ARITH[t.s], "%s -> %s" % (t.s, ARITH[t.s]))
        elif t.s in ("&&", "||"):
            o = "||" if t.s == "&&" else "&&"
            add("logic", t.a, t.b, o, "%s -> %s" % (t.s, o))
        elif t.s == "!":
            add("not", t.a, t.b, "", "! removed")
        elif t.kind == "num":
            if alignment_arg(toks, k):
                continue  # the same code, or a weaker promise of alignment: see the docstring
            for d in (1, -1):
                c = const_text(t.s, d)
                if c is not None and not equal_choice_const(toks, k, d, floats):
                    add("const", t.a, t.b, c, "%s -> %s" % (t.s, c))
        elif t.s == "[" and valueish:
            j = match_close(toks, k)
            if j == k + 2 and toks[k + 1].kind == "num":
                continue
            if j <= k + 1:
                continue
            inner = text[toks[k + 1].a:toks[j - 1].b]
            if "\n" in inner:
                continue
            for d in ("+ 1", "- 1"):
                add("index", toks[k + 1].a, toks[j - 1].b, "(%s) %s" % (inner, d), "index %s" % d)
        elif t.s == "if" and nxt is not None and nxt.s == "(":
            j = match_close(toks, k + 1)
            if j > k + 2:
                for v in ("0", "1"):
                    add("cond", toks[k + 2].a, toks[j - 1].b, v, "if (...) -> if (%s)" % v)
        elif (t.kind == "id" and t.s not in KEYWORDS and nxt is not None and nxt.s == "("
              and not (prev is not None and (is_type_tok(prev) or prev.s == "*" and k >= 2 and is_type_tok(toks[k - 2])))):
            j = match_close(toks, k + 1)
            args = []
            s = k + 2
            d = 0
            for q in range(k + 2, j + 1):
                qs = toks[q].s
                if qs in "([{":
                    d += 1
                elif qs in ")]}" and q != j:
                    d -= 1
                if (qs == "," and d == 0) or q == j:
                    if q > s:
                        args.append((s, q - 1))
                    s = q + 1
            for i in range(len(args) - 1):
                (a1, b1), (a2, b2) = args[i], args[i + 1]
                x = text[toks[a1].a:toks[b1].b]
                y = text[toks[a2].a:toks[b2].b]
                if x == y or COMMUTE.get(t.s) == i or any(toks[q].kind == "str" for q in range(a1, b2 + 1)):
                    continue
                mid = text[toks[b1].b:toks[a2].a]
                add("swap", toks[a1].a, toks[b2].b, y + mid + x, "arguments %d and %d of %s swapped" % (i + 1, i + 2, t.s))
    # one mutant per distinct result
    seen = set()
    uniq = []
    for m in sorted(out, key=lambda m: (m.a, m.b, m.new)):
        key = (m.a, m.b, m.new)
        if key not in seen and text[m.a:m.b] != m.new:
            seen.add(key)
            uniq.append(m)
    return uniq


def sample(muts, n, seed, path):
    """n of muts, one from each of n equal runs of them in file order (seeded)."""
    if len(muts) <= n:
        return list(muts)
    rng = random.Random("%s:%s" % (seed, path))
    out = []
    for i in range(n):
        lo = i * len(muts) // n
        hi = (i + 1) * len(muts) // n
        out.append(muts[rng.randrange(lo, hi)])
    return out


NOTE_RE = re.compile(r"equivalent mutant \[(\w+)(?: ([^\]]*))?\]:")


def notes_of(path, text):
    """{line: [(kind, what or None, reason, note's line)]} from the comments of text: a
    note on a line with code is for that line, one in a comment alone on its lines is
    for the next line with code. A note without a reason is an error."""
    masked = mask(text)
    code = [bool(ln.strip()) for ln in masked.split("\n")]
    out = {}
    bad = []
    for m in NOTE_RE.finditer(text):
        if masked[m.start()] != " ":
            continue  # not in a comment
        ln = text.count("\n", 0, m.start())  # 0-based
        # the reason: the rest of its comment (a block comment's lines joined)
        in_block = text.rfind("/*", 0, m.start()) > text.rfind("*/", 0, m.start())
        end = text.find("*/", m.end()) if in_block else text.find("\n", m.end())
        rest = text[m.end():end if end >= 0 else len(text)]
        why = " ".join(" ".join(r.strip().lstrip("*").split()) for r in rest.split("\n")).strip()
        kind, what = m.group(1), m.group(2)
        if not why:
            bad.append("%s:%d: equivalent mutant note without a reason" % (path, ln + 1))
            continue
        target = ln
        while target < len(code) and not code[target]:
            target += 1
        out.setdefault(target + 1, []).append((kind, what, why, ln + 1))
    return out, bad


def noted(m, notes):
    """the reason of the note that m is, or None"""
    for kind, what, why, _ in notes.get(m.line, []):
        if kind == m.op and (what is None or what == m.what):
            return why
    return None


def stale_notes(path, text, notes):
    """the notes of text that match no mutant of their line, as messages"""
    every = mutants_of(path, text)
    return ["%s:%d: the note [%s%s] matches no mutant of line %d" % (path, at, kind, " " + what if what else "", line)
            for line, ns in sorted(notes.items()) for kind, what, _, at in ns
            if not any(m.line == line and m.op == kind and what in (None, m.what) for m in every)]


def check_notes():
    """make check's suite for the notes: how they are read (on snippets), and every
    note in src/ and runtime/ has a reason and matches a mutant of its line."""
    res = []

    def check(name, got, want):
        res.append(("ok " if got == want else "FAIL ") + name + ("" if got == want else ": %r, not %r" % (got, want)))

    snip = ("int f(int *a, int n)\n"
            "{\n"
            "\tint s = 0;\n"
            "\t/* equivalent mutant [cmp < -> <=]: a[n] is a zero\n"
            "\t * slot */\n"
            "\tfor (int i = 0; i < n; i++)\n"
            "\t\ts += a[i];\n"
            "\treturn s + 1; // equivalent mutant [const]: callers test s > 0\n"
            "}\n")
    notes, bad = notes_of("t.c", snip)
    ms = mutants_of("t.c", snip)
    check("notes.above_joined", [(n[0], n[1], n[2]) for n in notes.get(6, [])], [("cmp", "< -> <=", "a[n] is a zero slot")])
    check("notes.trailing_any_what", [(n[0], n[1], n[2]) for n in notes.get(8, [])],
          [("const", None, "callers test s > 0")])
    check("notes.match", sorted((m.line, m.what) for m in ms if noted(m, notes)),
          [(6, "< -> <="), (8, "1 -> 0"), (8, "1 -> 2")])
    check("notes.only_their_line_and_kind", any(noted(m, notes) for m in ms if m.line == 7 or m.op == "stmt"), False)
    check("notes.stale", stale_notes("t.c", snip.replace("i < n", "i != n"), notes),
          ["t.c:4: the note [cmp < -> <=] matches no mutant of line 6"])
    check("notes.no_reason", notes_of("t.c", snip.replace("callers test s > 0", ""))[1],
          ["t.c:8: equivalent mutant note without a reason"])
    check("notes.not_in_strings", notes_of("t.c", 'const char *s = "equivalent mutant [cmp]: x";\n')[0], {})
    n = 0
    tree_bad = len(res)
    for d in ("src", "runtime"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, d)):
            for nm in sorted(names):
                if not nm.endswith(".c"):
                    continue
                path = os.path.relpath(os.path.join(dirpath, nm), ROOT)
                with open(os.path.join(ROOT, path)) as fh:
                    text = fh.read()
                if "equivalent mutant" not in text:
                    continue
                notes, bad = notes_of(path, text)
                n += sum(len(v) for v in notes.values())
                for msg in bad + stale_notes(path, text, notes):
                    res.append("FAIL tree: " + msg)
    if not any(r.startswith("FAIL tree") for r in res[tree_bad:]):
        res.append("ok tree: %d notes in src/ and runtime/, each with a reason and a mutant" % n)
    print("\n".join(res))
    f = sum(r.startswith("FAIL") for r in res)
    print("%d passed, %d failed" % (len(res) - f, f))
    return 1 if f else 0


# ----------------------------------------------------------------------------- the private copy

def sh(cmd, cwd, timeout=None, env=None):
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, env=env)


def make_copy(dest):
    files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           stdout=subprocess.PIPE).stdout.split(b"\0")
    os.makedirs(dest, exist_ok=True)
    for f in files:
        if not f:
            continue
        f = f.decode()
        src = os.path.join(ROOT, f)
        if not os.path.isfile(src) or f.startswith("build"):
            continue
        dst = os.path.join(dest, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)
    # the build directory's top-level files, times kept: make rebuilds what is stale
    b = os.path.join(ROOT, "build")
    os.makedirs(os.path.join(dest, "build"), exist_ok=True)
    if os.path.isdir(b):
        for f in os.listdir(b):
            p = os.path.join(b, f)
            if os.path.isfile(p):
                shutil.copy2(p, os.path.join(dest, "build", f))


class Worker:
    def __init__(self, wid, base, fallback):
        self.dir = os.path.join(base, "w%d" % wid)
        self.cache = os.path.join(base, "cache%d" % wid)
        self.targets = BUILD_TARGETS + (FALLBACK_TARGETS if fallback else [])
        self.env = dict(os.environ, XDG_CACHE_HOME=self.cache, MAKEFLAGS="", MAKELEVEL="",
                        PYTHON=PY)
        self.env.pop("MFLAGS", None)
        self.env.pop("MAKEFILES", None)

    def build(self, cflags=None, asan=False, jobs=1):
        if asan:
            extra = ["B=build-asan", "CFLAGS=" + ASAN_FLAGS, "LDFLAGS=" + ASAN_FLAGS]
            targets = [t.replace("build/", "build-asan/") for t in self.targets if not t.endswith(".pc")]
        else:
            extra = ["B=build"] + (["CFLAGS=" + cflags] if cflags else [])
            targets = self.targets
        r = sh(["make", "-j%d" % jobs, "--no-print-directory"] + extra + targets, self.dir, env=self.env)
        return r.returncode == 0, r.stdout

    def run(self, argv, timeout, asan=False):
        me = os.path.join(self.dir, "tests", "mutate.py")
        me = me if os.path.isfile(me) else os.path.abspath(__file__)
        b = "build-asan/" if asan else "build/"
        argv = [a.replace("{NESTC}", b + "nestc").replace("{PY}", PY).replace("{SELF}", me) for a in argv]
        argv = [b + a[len("build/"):] if a.startswith("build/") else a for a in argv]
        env = dict(self.env, **ASAN_ENV) if asan else self.env
        t0 = time.time()
        p = subprocess.Popen(argv, cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
            status = p.returncode
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, _ = p.communicate()
            status = None
        return status, out or "", time.time() - t0


def first_failure(out):
    for ln in out.splitlines():
        if ln.startswith("FAIL"):
            return ln[:200]
    tail = [ln for ln in out.splitlines() if ln.strip()][-3:]
    return " | ".join(tail)[:200]


# ----------------------------------------------------------------------------- --base

def changed_lines(base):
    r = subprocess.run(["git", "diff", "-U0", "--no-color", base, "--", "src", "runtime"], cwd=ROOT,
                       stdout=subprocess.PIPE, text=True, check=True)
    out = {}
    cur = None
    for ln in r.stdout.splitlines():
        if ln.startswith("+++ "):
            p = ln[4:]
            cur = p[2:] if p.startswith("b/") else None
            if cur and not cur.endswith(".c"):
                cur = None
        elif ln.startswith("@@") and cur:
            m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", ln)
            a, n = int(m.group(1)), int(m.group(2) or "1")
            if n:
                out.setdefault(cur, []).append((a, a + n - 1))
    return out


# ----------------------------------------------------------------------------- main

def onnx_cli(nestc):
    """tests/onnx/run.py's cli checks alone (run.py runs them only without -k)."""
    import importlib.util
    here = os.path.join(os.getcwd(), "tests", "onnx")
    sys.path.insert(0, here)
    spec = importlib.util.spec_from_file_location("onnx_run", os.path.join(here, "run.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    nestc = os.path.abspath(nestc)
    m.cr.NESTC = nestc
    m.cr.LIBNESTRT = os.path.join(os.path.dirname(nestc), "libnestrt.a")
    cw = tempfile.mkdtemp(prefix="nestc-onnx-cli-")
    try:
        res = m.cli_checks(nestc, cw)
    finally:
        shutil.rmtree(cw, ignore_errors=True)
    p = f = 0
    for name, why in res:
        if why:
            print("FAIL cli.%s: %s" % (name, why))
            f += 1
        else:
            print("ok cli.%s" % name)
            p += 1
    print("%d passed, %d failed" % (p, f))
    return 1 if f else 0


def sanitized(w, files, texts, results, survivors, good):
    """The survivors again in w, built with ASan and UBSan (build-asan/, as make
    check-asan), each covering command run as check-asan runs it."""
    for f in files:
        with open(os.path.join(w.dir, f), "w") as fh:
            fh.write(texts[f])
    print("\n%d survivors: again with AddressSanitizer and UBSan (build-asan/)" % len(survivors), flush=True)
    ok, log = w.build(asan=True, jobs=2)
    if not ok:
        print("mutate: the unmutated copy does not build with the sanitizers:\n" + log[-2000:])
        return
    timeouts = {}
    for f, _ in survivors:
        for name, argv in covering(f):
            if name in good and name not in timeouts:
                status, out, dt = w.run(argv, 3600, asan=True)
                if status == 0:
                    timeouts[name] = 3 * dt + 60
                    print("baseline (sanitizers): %-40s ok in %5.1f s" % (name, dt), flush=True)
                else:
                    timeouts[name] = None
                    print("baseline (sanitizers): %-40s FAILS unmutated (dropped): %s" % (name, first_failure(out)),
                          flush=True)
    for n, (f, k) in enumerate(survivors):
        m, _ = results[f][k]
        with open(os.path.join(w.dir, f), "w") as fh:
            fh.write(m.apply(texts[f]))
        t0 = time.time()
        res = ("survived", None, "")
        ok, _ = w.build(asan=True)
        if ok:
            for name, argv in covering(f):
                if timeouts.get(name) is None:
                    continue
                status, out, dt = w.run(argv, timeouts[name], asan=True)
                if status is None:
                    res = ("timeout", name + " (sanitizers)", "no result in %.0f s" % timeouts[name])
                    break
                if status != 0:
                    res = ("killed", name + " (sanitizers)", first_failure(out))
                    break
        with open(os.path.join(w.dir, f), "w") as fh:
            fh.write(texts[f])
        results[f][k] = (m, res)
        print("[%d/%d %4.0fs] %s:%d %-6s %-40s %s%s" % (
            n + 1, len(survivors), time.time() - t0, f, m.line, m.op, m.what[:40], res[0].upper(),
            (" by %s: %s" % (res[1], res[2])) if res[1] else ""), flush=True)


def usage():
    print(__doc__, file=sys.stderr)
    return 2


def main(argv):
    if len(argv) == 3 and argv[1] == "--onnx-cli":
        return onnx_cli(argv[2])
    if argv[1:] == ["--check-notes"]:
        return check_notes()
    base, files, nmax, seed, jobs, fail_under, list_only, keep = None, [], 50, 1, 1, None, False, False
    sanitize, only = True, None
    i = 1
    try:
        while i < len(argv):
            a = argv[i]
            if a == "--base":
                i += 1
                base = argv[i]
            elif a == "--max":
                i += 1
                nmax = int(argv[i])
            elif a == "--seed":
                i += 1
                seed = argv[i]
            elif a == "-j":
                i += 1
                jobs = max(1, int(argv[i]))
            elif a == "--fail-under":
                i += 1
                fail_under = float(argv[i])
            elif a == "--list":
                list_only = True
            elif a == "--keep":
                keep = True
            elif a == "--no-sanitize":
                sanitize = False
            elif a == "--only":
                i += 1
                lo, hi = argv[i].split("-")
                only = (int(lo), int(hi))
                if only[0] < 1 or only[1] < only[0]:
                    return usage()
            elif a in ("-h", "--help"):
                return usage()
            elif a.startswith("-"):
                return usage()
            else:
                files.append(os.path.relpath(os.path.abspath(a), ROOT))
            i += 1
    except (IndexError, ValueError):
        return usage()
    if base is None and not files:
        return usage()
    ranges = None
    if base is not None:
        ranges = changed_lines(base)
        if files:
            ranges = {f: r for f, r in ranges.items() if f in files}
        files = sorted(ranges)
        if not files:
            print("mutate: no C lines under src/ or runtime/ changed since %s" % base)
            return 0
    texts = {}
    chosen = {}
    notes = {}
    for f in files:
        p = os.path.join(ROOT, f)
        if not f.endswith(".c") or not os.path.isfile(p):
            print("mutate: %s: not a C file of the tree" % f, file=sys.stderr)
            return 2
        with open(p) as fh:
            texts[f] = fh.read()
        ms = mutants_of(f, texts[f])
        if ranges is not None:
            rs = ranges.get(f, [])
            ms = [m for m in ms if any(lo <= m.line + k <= hi for lo, hi in rs
                                       for k in range(texts[f].count("\n", m.a, m.b) + 1))]
        notes[f], bad = notes_of(f, texts[f])
        if bad:
            print("\n".join("mutate: " + b for b in bad), file=sys.stderr)
            return 2
        for msg in stale_notes(f, texts[f], notes[f]):
            print("mutate: " + msg, flush=True)
        chosen[f] = sample(ms, nmax, seed, f)
        nn = sum(noted(m, notes[f]) is not None for m in chosen[f])
        print("%s: %d candidate mutants, %d chosen (seed %s)%s" % (
            f, len(ms), len(chosen[f]), seed, ", %d of them noted as equivalent" % nn if nn else ""), flush=True)
    files = [f for f in files if chosen[f]]
    if not files:
        print("mutate: no mutants to try")
        return 0
    if list_only:
        for f in files:
            for m in chosen[f]:
                why = noted(m, notes[f])
                print("== %s:%d %s: %s%s" % (f, m.line, m.op, m.what, " (noted as equivalent: %s)" % why if why else ""))
                sys.stdout.write(m.diff(texts[f]))
        return 0

    base_dir = tempfile.mkdtemp(prefix="nestc-mutate-")
    print("private copies in %s" % base_dir, flush=True)
    fallback = any(f not in COVER for f in files)
    workers = [Worker(w, base_dir, fallback) for w in range(jobs)]
    lock = threading.Lock()
    results = {f: [] for f in files}
    timeouts = {}
    t_start = time.time()
    try:
        # one copy, built; the others copied from it
        make_copy(workers[0].dir)
        ok, log = workers[0].build()
        if not ok:
            print("mutate: the unmutated copy does not build:\n" + log[-3000:])
            return 2
        for w in workers[1:]:
            shutil.copytree(workers[0].dir, w.dir, symlinks=True, copy_function=shutil.copy2)
        # the baseline: every covering command once, unmutated
        cmds = {}
        for f in files:
            for name, argv in covering(f):
                cmds.setdefault(name, argv)
        good = {}
        for name, argv in cmds.items():
            status, out, dt = workers[0].run(argv, 3600)
            if status == 0:
                good[name] = dt
                timeouts[name] = 3 * dt + 30
                print("baseline: %-40s ok in %5.1f s (timeout %.0f s)" % (name, dt, timeouts[name]), flush=True)
            else:
                print("baseline: %-40s FAILS unmutated (dropped): %s" % (name, first_failure(out)), flush=True)
        queue = [(f, m) for f in files for m in chosen[f]]
        total = len(queue)
        done = [0]
        if only:
            queue = queue[only[0] - 1:only[1]]
            done[0] = only[0] - 1  # numbered as --list numbers them

        def work(w):
            cur_file = None
            while True:
                with lock:
                    if not queue:
                        break
                    f, m = queue.pop(0)
                    why = noted(m, notes[f])
                    if why is not None:
                        results[f].append((m, ("noted", None, why)))
                        done[0] += 1
                        print("[%d/%d    0s] %s:%d %-6s %-40s NOTED AS EQUIVALENT" % (
                            done[0], total, f, m.line, m.op, m.what[:40]), flush=True)
                        continue
                path = os.path.join(w.dir, f)
                if cur_file and cur_file != f:
                    with open(os.path.join(w.dir, cur_file), "w") as fh:
                        fh.write(texts[cur_file])
                cur_file = f
                with open(path, "w") as fh:
                    fh.write(m.apply(texts[f]))
                t0 = time.time()
                ok, log = w.build(CFLAGS)
                if not ok:
                    res = ("nocompile", None, "")
                else:
                    res = ("survived", None, "")
                    for name, argv in covering(f):
                        if name not in good:
                            continue
                        status, out, dt = w.run(argv, timeouts[name])
                        if status is None:
                            res = ("timeout", name, "no result in %.0f s" % timeouts[name])
                            break
                        if status != 0:
                            res = ("killed", name, first_failure(out))
                            break
                dt = time.time() - t0
                with lock:
                    results[f].append((m, res))
                    done[0] += 1
                    print("[%d/%d %4.0fs] %s:%d %-6s %-40s %s%s" % (
                        done[0], total, dt, f, m.line, m.op, m.what[:40], res[0].upper(),
                        (" by %s: %s" % (res[1], res[2])) if res[1] else ""), flush=True)
            if cur_file:
                with open(os.path.join(w.dir, cur_file), "w") as fh:
                    fh.write(texts[cur_file])

        # kill -USR1: finish the mutants under test, then report
        signal.signal(signal.SIGUSR1, lambda *_: queue.clear())
        threads = [threading.Thread(target=work, args=(w,)) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        survivors = [(f, k) for f in files for k, (m, r) in enumerate(results[f]) if r[0] == "survived"]
        if sanitize and survivors:
            sanitized(workers[0], files, texts, results, survivors, good)
    finally:
        if keep:
            print("kept %s" % base_dir)
        else:
            shutil.rmtree(base_dir, ignore_errors=True)

    # ---- the report
    print()
    print("mutation testing: %d files, seed %s, %.0f s" % (len(files), seed, time.time() - t_start))
    print("%-24s %6s %6s %10s %7s %9s %9s %7s" % ("file", "chosen", "noted", "no-compile", "killed", "timed-out",
                                                  "survived", "kill%"))
    tk = tc = tn = 0
    for f in files:
        rs = [r for _, r in results[f]]
        nt = sum(r[0] == "noted" for r in rs)
        nc = sum(r[0] == "nocompile" for r in rs)
        k = sum(r[0] == "killed" for r in rs)
        to = sum(r[0] == "timeout" for r in rs)
        sv = sum(r[0] == "survived" for r in rs)
        comp = len(rs) - nc - nt
        tk += k + to
        tc += comp
        tn += nt
        pct = "%.1f" % (100.0 * (k + to) / comp) if comp else "-"
        print("%-24s %6d %6d %10d %7d %9d %9d %7s" % (f, len(rs), nt, nc, k, to, sv, pct))
    pct_all = 100.0 * tk / tc if tc else 100.0
    print("total: %d of %d compiling mutants tried killed (%.1f%%; timed out counted as killed)%s" % (
        tk, tc, pct_all, "; %d more noted as equivalent in the source, not tried" % tn if tn else ""))
    for f in files:
        nts = [(m, r) for m, r in results[f] if r[0] == "noted"]
        if nts:
            print("\n== noted as equivalent in %s: %d" % (f, len(nts)))
            for m, r in sorted(nts, key=lambda x: x[0].line):
                print("   %s:%d %s: %s: %s" % (f, m.line, m.op, m.what, r[2]))
    for f in files:
        sv = [m for m, r in results[f] if r[0] == "survived"]
        to = [(m, r) for m, r in results[f] if r[0] == "timeout"]
        for m, r in to:
            print("\ntimed out (counted killed): %s:%d %s (%s): %s" % (f, m.line, m.op, m.what, r[2]))
        if sv:
            print("\n== survivors in %s: %d" % (f, len(sv)))
            for m in sorted(sv, key=lambda m: m.line):
                print("\n-- %s:%d %s: %s" % (f, m.line, m.op, m.what))
                sys.stdout.write(m.diff(texts[f]))
    if fail_under is not None and pct_all < fail_under:
        print("\nmutate: %.1f%% killed, under --fail-under %g" % (pct_all, fail_under))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
