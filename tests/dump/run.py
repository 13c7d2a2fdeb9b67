#!/usr/bin/env python3
"""Golden tests of the stable dump text.

Each tests/dump/*.nest holds its expectation: a first line `# Dump: ast` or
`# Dump: ir` (optionally followed by arguments, e.g. `# Dump: ir -D L=2`), and
the expected output as the file's trailing comment lines starting with `#> `.
Run: run.py NESTC [--update] (--update rewrites the expectations: review the diff).
"""
import glob
import os
import subprocess
import sys


def main():
    nestc = sys.argv[1]
    update = "--update" in sys.argv
    here = os.path.dirname(os.path.abspath(__file__))
    passed = failed = 0
    for path in sorted(glob.glob(os.path.join(here, "*.nest"))):
        name = os.path.basename(path)
        lines = open(path).read().split("\n")
        head = lines[0].split()
        if head[:2] != ["#", "Dump:"]:
            print("FAIL %s: first line must be '# Dump: ast|ir [ARGS]'" % name)
            failed += 1
            continue
        kind, args = head[2], head[3:]
        expected = [l[3:] if l.startswith("#> ") else "" for l in lines if l.startswith("#>")]
        body = [l for l in lines if not l.startswith("#>")]
        while body and body[-1] == "":
            body.pop()
        r = subprocess.run([nestc, "check", "--dump=" + kind] + args + [path],
                           capture_output=True, text=True)
        actual = r.stdout.rstrip("\n").split("\n")
        if update:
            with open(path, "w") as f:
                f.write("\n".join(body) + "\n" + "".join("#> %s\n" % a if a else "#>\n" for a in actual))
        if r.returncode != 0 or r.stderr:
            print("FAIL %s: exit %d\n%s" % (name, r.returncode, r.stderr))
            failed += 1
        elif actual != expected:
            print("FAIL %s: dump differs" % name)
            for i in range(max(len(actual), len(expected))):
                a = actual[i] if i < len(actual) else "<none>"
                e = expected[i] if i < len(expected) else "<none>"
                if a != e:
                    print("  line %d:\n    expected: %s\n    actual:   %s" % (i + 1, e, a))
                    break
            failed += 1
        else:
            print("ok %s" % name)
            passed += 1
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
