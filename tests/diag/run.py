#!/usr/bin/python3
"""Golden diagnostic tests for nestc, Jou-style: the expectations live in the tests.

    /usr/bin/python3 tests/diag/run.py NESTC [TEST.nest | NAME]...

Every tests/diag/*.nest (or only the ones named) is checked with `NESTC check FILE ARGS`.

Expectations, written in the test file:

  # Args: -D X=1 -Werror      (a comment line of its own, at the top) extra arguments,
                              split like a shell would split them
  # Ok                        (a line of its own) the file compiles: exit 0, no output
  CODE  # Error: MSG          a diagnostic `FILE:N:COL: error: MSG` on this line N
  CODE  # Warning: MSG        the same with `warning:`
  CODE  # Error@COL: MSG      ... and its column must be COL
  # Error(LINE:COL): MSG      (a line of its own) for lines that cannot carry a comment;
  # Warning(LINE:COL): MSG    `(LINE)` alone leaves the column free
  # Expect-plain: MSG         a diagnostic without a position: `nestc: error: MSG`
  # Note(LINE): MSG           (a line of its own) a note `FILE:LINE:COL: note: MSG` must be
                              printed too (other notes stay free)
  # Expect-plain-warning: MSG the same: `nestc: warning: MSG`

In an expected message `$FILE` stands for the test file's path as given to nestc.

A line may carry several expectations: `x  # Error: A  # Error@9: B`.

The test passes when
  - every expected diagnostic is printed (stderr) and no other error or warning is;
    (notes are allowed, and matched only against `# Note(LINE):` expectations);
  - each positioned diagnostic is followed by the source line (`%5d | TEXT`, TEXT the
    file's line, tabs kept) and a caret line (`      | ` then the same whitespace as the
    source up to the column, `^`, then `~` no further than the end of the line);
  - the exit status is 1 when an error is expected, else 0, and nestc did not crash;
  - nothing else is printed, except the summary `N error(s) generated.` (whose N must
    be the number of errors printed); stdout stays empty.

Prints `ok NAME` or `FAIL NAME: reasons` (followed by nestc's output) per test, then
`N passed, N failed`; exits 1 when any test failed. Plain Python 3, no packages.
"""

import glob
import os
import re
import shlex
import subprocess
import sys

TIMEOUT = 30  # seconds per nestc run

# Text is handled as latin-1 so that one character is one byte: nestc's columns count
# bytes, and a test with a stray non-ASCII byte still lines up.
ENC = "latin-1"

EXPECT_INLINE = re.compile(r"#\s*(Error|Warning)(?:@(\d+))?:[ \t]*")
EXPECT_OWNLINE = re.compile(r"^\s*#\s*(Error|Warning)\((\d+)(?::(\d+))?\):[ \t]*(.*?)\s*$")
ARGS_LINE = re.compile(r"^\s*#\s*Args:(.*)$")
OK_LINE = re.compile(r"^\s*#\s*Ok\s*$")
PLAIN_LINE = re.compile(r"^\s*#\s*Expect-plain(-warning)?:[ \t]*(.*?)\s*$")
COMMENT_ONLY = re.compile(r"^\s*#")
NOTE_OWNLINE = re.compile(r"^\s*#\s*Note\((\d+)\):[ \t]*(.*?)\s*$")

DIAG_OUT = re.compile(r"^(.*):(\d+):(\d+): (error|warning|note): (.*)$")
PLAIN_OUT = re.compile(r"^nestc: (error|warning): (.*)$")
SUMMARY_OUT = re.compile(r"^(\d+) errors? generated\.$")
SOURCE_OUT = re.compile(r"^( *)(\d+) \| (.*)$")


class Expect:
    def __init__(self, kind, line, col, msg, where):
        self.kind, self.line, self.col, self.msg, self.where = kind, line, col, msg, where

    def __str__(self):
        pos = "%d:%d" % (self.line, self.col) if self.col else "%d" % self.line
        return "%s at %s: %s" % (self.kind, pos, self.msg)


def parse_test(path):
    """Reads the expectations: returns (args, ok, expects, plains, problems, lines)."""
    with open(path, "rb") as f:
        lines = f.read().decode(ENC).split("\n")
    args, ok, expects, plains, problems = [], False, [], [], []
    in_header = True
    for n, text in enumerate(lines, 1):
        text = text.rstrip("\r")
        is_comment = bool(COMMENT_ONLY.match(text))
        m = ARGS_LINE.match(text)
        if m:
            if not in_header:
                problems.append("line %d: '# Args:' must be in the comment block at the top" % n)
            try:
                args += shlex.split(m.group(1))
            except ValueError as e:
                problems.append("line %d: bad '# Args:' line: %s" % (n, e))
            continue
        if text.strip() and not is_comment:
            in_header = False
        if OK_LINE.match(text):
            ok = True
            continue
        m = PLAIN_LINE.match(text)
        if m:
            plains.append(("warning" if m.group(1) else "error", m.group(2), n))
            continue
        m = EXPECT_OWNLINE.match(text)
        if m:
            expects.append(Expect(m.group(1).lower(), int(m.group(2)),
                                  int(m.group(3)) if m.group(3) else None, m.group(4), n))
            continue
        hits = list(EXPECT_INLINE.finditer(text))
        if not hits:
            continue
        if is_comment and hits[0].start() == text.index("#"):
            problems.append("line %d: an expectation on a line of its own needs "
                            "'# Error(LINE:COL): ...'" % n)
            continue
        for i, h in enumerate(hits):
            end = hits[i + 1].start() if i + 1 < len(hits) else len(text)
            msg = text[h.end():end].strip()
            if not msg:
                problems.append("line %d: empty expected message" % n)
            expects.append(Expect(h.group(1).lower(), n,
                                  int(h.group(2)) if h.group(2) else None, msg, n))
    if ok and (expects or plains):
        problems.append("'# Ok' together with expected diagnostics")
    if not ok and not expects and not plains:
        problems.append("no expectations (write '# Ok' for a file that must compile)")
    return args, ok, expects, plains, problems, lines


def parse_notes(lines):
    """The `# Note(LINE): MSG` expectations: a list of (line, msg)."""
    return [(int(m.group(1)), m.group(2)) for m in (NOTE_OWNLINE.match(t.rstrip("\r")) for t in lines) if m]


def check_caret(srclines, line, col, out, i, problems, what):
    """out[i] is the line after diagnostic `what`: it must show source line `line` and
    out[i+1] a caret under column `col`. Returns the index after what was consumed."""
    if line < 1 or line > len(srclines):
        problems.append("%s: line %d is not in the file (%d lines)" % (what, line, len(srclines)))
        return i
    src = srclines[line - 1]
    if i >= len(out):
        problems.append("%s: not followed by the source line" % what)
        return i
    m = SOURCE_OUT.match(out[i])
    if not m:
        problems.append("%s: next line should be the source line %r, got %r"
                        % (what, "%5d | %s" % (line, src), out[i]))
        return i
    if int(m.group(2)) != line or m.group(3) != src:
        problems.append("%s: next line should be the source line %r, got %r"
                        % (what, "%5d | %s" % (line, src), out[i]))
    width = len(m.group(1)) + len(m.group(2))
    i += 1
    if i >= len(out):
        problems.append("%s: no caret line" % what)
        return i
    caret = out[i]
    prefix = " " * width + " | "
    if not caret.startswith(prefix):
        problems.append("%s: caret line %r does not start with %r" % (what, caret, prefix))
        return i + 1
    body = caret[len(prefix):]
    cm = re.match(r"^([ \t]*)\^(~*)$", body)
    if not cm:
        problems.append("%s: malformed caret line %r" % (what, caret))
        return i + 1
    pad, tildes = cm.group(1), cm.group(2)
    if len(pad) != col - 1:
        problems.append("%s: the caret is under column %d, not %d" % (what, len(pad) + 1, col))
    elif col - 1 > len(src):
        problems.append("%s: column %d is past the end of line %d (%d characters)"
                        % (what, col, line, len(src)))
    else:
        want = "".join("\t" if c == "\t" else " " for c in src[:col - 1])
        if pad != want:
            problems.append("%s: caret indentation %r does not keep the tabs of the source (%r)"
                            % (what, pad, want))
        if tildes and col - 1 + 1 + len(tildes) > len(src):
            problems.append("%s: the underline runs past the end of the line" % what)
    return i + 1


def run_test(nestc, path):
    """Returns (passed, reasons, output)."""
    args, ok, expects, plains, problems, srclines = parse_test(path)
    for e in expects:
        e.msg = e.msg.replace("$FILE", path)
    plains = [(k, m.replace("$FILE", path), n) for k, m, n in plains]
    cmd = [nestc, "check", path] + args
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return False, ["nestc did not finish in %d seconds" % TIMEOUT], ""
    except OSError as e:
        return False, ["cannot run %s: %s" % (nestc, e)], ""
    stdout, stderr = r.stdout.decode(ENC), r.stderr.decode(ENC)
    output = stdout + stderr
    reasons = list(problems)
    if r.returncode < 0:
        reasons.append("nestc crashed (signal %d)" % -r.returncode)
    want_rc = 1 if (any(e.kind == "error" for e in expects) or
                    any(k == "error" for k, _, _ in plains)) else 0

    if ok:
        if r.returncode != 0 and r.returncode >= 0:
            reasons.append("exit status %d, expected 0" % r.returncode)
        if output:
            reasons.append("expected no output")
        return not reasons, reasons, output

    if stdout and "--dump" not in " ".join(args):
        reasons.append("unexpected output on stdout")

    # Parse stderr.
    out = stderr.split("\n")
    if out and out[-1] == "":
        out.pop()
    diags, plain_out, summary = [], [], None
    notes_out = []
    i = 0
    while i < len(out):
        text = out[i]
        m = DIAG_OUT.match(text)
        if m and m.group(1) == path:
            line, col, kind, msg = int(m.group(2)), int(m.group(3)), m.group(4), m.group(5)
            what = "%s:%d:%d" % (kind, line, col)
            if kind != "note":
                diags.append((kind, line, col, msg))
            else:
                notes_out.append((line, msg))
            i = check_caret(srclines, line, col, out, i + 1, reasons, what)
            continue
        m = PLAIN_OUT.match(text)
        if m:
            plain_out.append((m.group(1), m.group(2)))
            i += 1
            continue
        m = SUMMARY_OUT.match(text)
        if m and summary is None:
            summary = int(m.group(1))
            i += 1
            continue
        reasons.append("unrecognised output line %r" % text)
        i += 1

    # Positioned diagnostics: pinned columns first, so that a free expectation cannot
    # take the diagnostic a pinned one needs.
    left = list(diags)
    for e in sorted(expects, key=lambda e: e.col is None):
        for j, (kind, line, col, msg) in enumerate(left):
            if kind == e.kind and line == e.line and msg == e.msg and (e.col is None or e.col == col):
                del left[j]
                break
        else:
            near = [d for d in left if d[0] == e.kind and d[1] == e.line]
            hint = ""
            if near:
                hint = " (on that line: %s)" % "; ".join("%d:%d %s" % (d[1], d[2], d[3]) for d in near)
            reasons.append("missing %s%s" % (e, hint))
    for kind, line, col, msg in left:
        reasons.append("unexpected %s at %d:%d: %s" % (kind, line, col, msg))

    for line, msg in parse_notes(srclines):
        if (line, msg.replace("$FILE", path)) not in notes_out:
            near = [m for l, m in notes_out if l == line]
            reasons.append("missing note at %d: %s%s" % (line, msg, " (on that line: %s)" % "; ".join(near)
                                                         if near else ""))

    pleft = list(plain_out)
    for kind, msg, n in plains:
        if (kind, msg) in pleft:
            pleft.remove((kind, msg))
        else:
            reasons.append("missing 'nestc: %s: %s'" % (kind, msg))
    for kind, msg in pleft:
        reasons.append("unexpected 'nestc: %s: %s'" % (kind, msg))

    nerr = sum(1 for d in diags if d[0] == "error") + sum(1 for p in plain_out if p[0] == "error")
    if summary is not None and summary != nerr:
        reasons.append("the summary says %d error(s) but %d were printed" % (summary, nerr))
    if r.returncode >= 0 and r.returncode != want_rc:
        reasons.append("exit status %d, expected %d" % (r.returncode, want_rc))
    return not reasons, reasons, output


def emit(text):
    """Prints text as the bytes it was read from (latin-1 round-trips every byte), so a
    UTF-8 source line shows as UTF-8 whatever the locale."""
    sys.stdout.buffer.write(text.encode(ENC, "replace") + b"\n")
    sys.stdout.buffer.flush()


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write("usage: %s NESTC [TEST.nest | NAME]...\n" % argv[0])
        return 2
    nestc = argv[1]
    if os.sep not in nestc and not os.path.exists(nestc):
        pass  # let the OS search PATH
    elif not os.path.exists(nestc):
        sys.stderr.write("%s: no such file: %s\n" % (argv[0], nestc))
        return 2
    here = os.path.dirname(os.path.abspath(__file__))
    rel = os.path.relpath(here)
    testdir = rel if not rel.startswith("..") else here
    if len(argv) > 2:
        tests = []
        for a in argv[2:]:
            if os.path.exists(a):
                tests.append(a)
            else:
                name = a if a.endswith(".nest") else a + ".nest"
                tests.append(os.path.join(testdir, name))
    else:
        tests = sorted(glob.glob(os.path.join(testdir, "*.nest")))
    passed = failed = 0
    for path in tests:
        name = os.path.splitext(os.path.basename(path))[0]
        if not os.path.exists(path):
            emit("FAIL %s: no such test file %s" % (name, path))
            failed += 1
            continue
        good, reasons, output = run_test(nestc, path)
        if good:
            emit("ok %s" % name)
            passed += 1
        else:
            failed += 1
            emit("FAIL %s: %s" % (name, "; ".join(reasons)))
            if output:
                emit("    nestc output:")
                for l in output.rstrip("\n").split("\n"):
                    emit("    | " + l)
            else:
                emit("    (no output)")
    emit("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not tests else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
