#!/usr/bin/python3
"""run_threads.py NESTC [LIBNESTRT] - build samples/gpt2.nest small with NESTC,
write random weights, link tests/runtime/test_threads.c with the objects and
LIBNESTRT (default: libnestrt.a beside NESTC), run it and pass on its output
(last line "N passed, N failed") and exit status.

$CC compiles (default cc); $NESTC_TEST_LDFLAGS are added to its flags (the
sanitizers: make check-asan, make check-tsan), and then the timing test is
left out: a sanitized pool is too slow to time."""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SMALL = "-D L=2 -D D=64 -D H=4 -D V=256 -D CTX=64 -D S=16".split()


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    nestc = os.path.abspath(sys.argv[1])
    lib = os.path.abspath(sys.argv[2]) if len(sys.argv) == 3 else os.path.join(os.path.dirname(nestc), "libnestrt.a")
    flags = os.environ.get("NESTC_TEST_LDFLAGS", "").split()
    cc = os.environ.get("CC", "cc")
    model = os.path.join(ROOT, "samples", "gpt2.nest")
    with tempfile.TemporaryDirectory(prefix="nestrt-threads.") as d:
        out = os.path.join(d, "out")
        weights = os.path.join(d, "gpt2.safetensors")
        steps = [
            [nestc, "build", model] + SMALL + ["--no-cache", "-o", out],
            [nestc, "weights", model] + SMALL + ["--random-weights", "1", "-o", weights],
        ]
        for cmd in steps:
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(" ".join(cmd) + ":\n" + r.stdout + r.stderr)
                print("0 passed, 1 failed")
                return 1
        objs = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".o"))
        exe = os.path.join(d, "test_threads")
        cmd = [cc, "-O1", "-g", "-std=c11", "-I" + os.path.join(ROOT, "runtime"), "-I" + out] + flags + [
            "-o", exe, os.path.join(HERE, "test_threads.c")] + objs + [lib, "-lm", "-lpthread"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(" ".join(cmd) + ":\n" + r.stdout + r.stderr)
            print("0 passed, 1 failed")
            return 1
        args = [exe, weights] + (["--no-timing"] if flags else [])
        r = subprocess.run(args, capture_output=True, text=True, timeout=900, env=dict(os.environ, TMPDIR=d))
        sys.stdout.write(r.stdout)
        if r.stderr:
            sys.stdout.write(r.stderr)
        if r.returncode != 0 and "failed" not in r.stdout.strip().split("\n")[-1]:
            print("test_threads exited with status %d" % r.returncode)
            print("0 passed, 1 failed")
            return 1
        # NESTRT_PROFILE=2 with the threads on one instance: every kernel counted once per call
        p = subprocess.run([exe, "--profile-threads", weights], capture_output=True, text=True, timeout=900,
                           env=dict(os.environ, NESTRT_PROFILE="2"))
        problems = profile_problems(p.stderr) if p.returncode == 0 else [
            "exit %d: %s" % (p.returncode, (p.stdout + p.stderr)[-500:])]
        name = "NESTRT_PROFILE=2, 8 threads on one instance: kernel calls match their variants'"
        print(("FAIL %s: %s" % (name, "; ".join(problems))) if problems else "ok " + name)
        # weights held once, packed (test_packed.c), with V a multiple of the panel width and not
        packed_pass, packed_fail = 0, 0
        for v in (256, 251):
            p, f = run_packed(nestc, lib, cc, flags, model, d, v)
            packed_pass += p
            packed_fail += f
        cores_ok = run_cores(lib, cc, flags, d)
        stack_pass, stack_fail = run_stack(nestc, lib, cc, flags, d)
        last = r.stdout.strip().split("\n")[-1].split()
        if len(last) == 4 and last[1] == "passed,":
            print("%d passed, %d failed" % (int(last[0]) + (not problems) + packed_pass + cores_ok + stack_pass,
                                            int(last[2]) + bool(problems) + packed_fail + (not cores_ok) + stack_fail))
        return 1 if problems or r.returncode or packed_fail or not cores_ok or stack_fail else 0


# test_stack.c's model: a Winograd convolution and a matmul whose panel of B
# (10000 rows) takes 1.3 MB of a task's stack
STACK_SRC = """
param conv: { weight: f32[64, 64, 3, 3] }
export fn forward(x: f32[1, 64, 56, 56], a: f32[64, 10000], b: f32[10000, 40]) -> (f32[1, 64, 56, 56], f32[64, 40]) {
  return relu(conv2d(x, conv.weight, padding=1)), a @ b
}
"""


def run_stack(nestc, lib, cc, flags, d):
    """test_stack.c at 1 and 2 threads: the entry called from threads of 8 MiB,
    2 MiB and 256 KiB of stack; its passed and failed counts."""
    src, out, weights = (os.path.join(d, f) for f in ("stk.nest", "stk", "stk.safetensors"))
    with open(src, "w") as f:
        f.write(STACK_SRC)
    exe = os.path.join(d, "test_stack")
    steps = [
        [nestc, "build", src, "--no-cache", "-o", out],
        [nestc, "weights", src, "--random-weights", "3", "-o", weights],
    ]
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL test_stack: %s:\n%s" % (" ".join(cmd), r.stdout + r.stderr))
            return 0, 1
    objs = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".o"))
    cmd = [cc, "-O1", "-g", "-std=c11", "-I" + os.path.join(ROOT, "runtime"), "-I" + out] + flags + [
        "-o", exe, os.path.join(HERE, "test_stack.c")] + objs + [lib, "-lm", "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL test_stack: %s:\n%s" % (" ".join(cmd), r.stdout + r.stderr))
        return 0, 1
    npass = nfail = 0
    for t in ("1", "2"):
        r = subprocess.run([exe, weights], capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, NESTRT_NUM_THREADS=t))
        lines = r.stdout.strip().split("\n")
        for line in lines[:-1]:
            print(line.replace("ok ", "ok NESTRT_NUM_THREADS=%s: " % t, 1).replace("FAIL ", "FAIL NESTRT_NUM_THREADS=%s: " % t, 1))
        last = lines[-1].split() if lines else []
        if r.returncode in (0, 1) and len(last) == 4 and last[1] == "passed,":
            npass += int(last[0])
            nfail += int(last[2])
        else:
            print("FAIL NESTRT_NUM_THREADS=%s: test_stack exited with status %d%s" % (t, r.returncode, r.stderr[-300:]))
            nfail += 1
    return npass, nfail


def run_cores(lib, cc, flags, d):
    """test_cores.c: the pool's default on a process that may use 300 CPUs
    (more than its cap); True when it passed (its line goes to stdout)."""
    exe = os.path.join(d, "test_cores")
    cmd = [cc, "-O1", "-g", "-std=c11", "-I" + os.path.join(ROOT, "runtime")] + flags + [
        "-o", exe, os.path.join(HERE, "test_cores.c"), lib, "-lm", "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL test_cores: %s:\n%s" % (" ".join(cmd), r.stdout + r.stderr))
        return False
    env = {k: v for k, v in os.environ.items() if k != "NESTRT_NUM_THREADS"}
    try:
        r = subprocess.run([exe], capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:
        print("FAIL test_cores: no answer in 120 s (the first parallel loop hangs)")
        return False
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0 or not out.startswith("ok "):
        print("FAIL test_cores: exit %d: %s" % (r.returncode, out[-500:] or "no output"))
        return False
    print(out.split("\n")[0])
    return True


def run_packed(nestc, lib, cc, flags, model, d, v):
    """Build gpt2 and gpt2e (--embed-weights) small with V=v, run test_packed; its
    passed and failed counts (its own lines go to stdout)."""
    defs = [x if not x.startswith("V=") else "V=%d" % v for x in SMALL]
    out, weights = os.path.join(d, "packed-%d" % v), os.path.join(d, "packed-%d.safetensors" % v)
    steps = [
        [nestc, "weights", model] + defs + ["--random-weights", "2", "-o", weights],
        [nestc, "build", model] + defs + ["--no-cache", "-o", out],
        [nestc, "build", model] + defs + ["--no-cache", "--name", "gpt2e", "--embed-weights", weights, "-o", out],
    ]
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL V=%d: %s:\n%s" % (v, " ".join(cmd), r.stdout + r.stderr))
            return 0, 1
    objs = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".o"))
    exe = os.path.join(d, "test_packed-%d" % v)
    cmd = [cc, "-O1", "-g", "-std=c11", "-I" + os.path.join(ROOT, "runtime"), "-I" + out] + flags + [
        "-o", exe, os.path.join(HERE, "test_packed.c")] + objs + [lib, "-lm", "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL V=%d: %s:\n%s" % (v, " ".join(cmd), r.stdout + r.stderr))
        return 0, 1
    L = int([x for x in SMALL if x.startswith("L=")][0][2:])
    D = int([x for x in SMALL if x.startswith("D=")][0][2:])
    r = subprocess.run([exe, weights, str(v), str(D), str(4 + 12 * L)], capture_output=True, text=True, timeout=900)
    lines = r.stdout.strip().split("\n")
    for line in lines[:-1]:
        print(line.replace("ok ", "ok V=%d: " % v, 1).replace("FAIL ", "FAIL V=%d: " % v, 1))
    if r.stderr:
        sys.stdout.write(r.stderr)
    last = lines[-1].split() if lines else []
    if len(last) == 4 and last[1] == "passed,":
        return int(last[0]), int(last[2]) + (r.returncode != 0 and int(last[2]) == 0)
    print("FAIL V=%d: test_packed exited with status %d" % (v, r.returncode))
    return 0, 1


def profile_problems(text):
    """In each profile: each kernel's calls equal its variant's, the entry's kernels agree."""
    problems, seen = [], 0
    for prof in text.split("nestrt profile:")[1:]:
        calls = None
        for line in prof.splitlines():
            m = re.match(r"^  (\S+)\s+(\d+) calls\s", line)
            if m:
                calls = int(m.group(2)) if m.group(1) != "total" else None
                continue
            if re.match(r"^  \S", line):
                calls = "entry"   # an entry point: its kernels agree with each other
                continue
            k = re.match(r"^    .*\((\d+) calls\)$", line)
            if not k:
                continue
            seen += 1
            n = int(k.group(1))
            if calls == "entry":
                calls = n
            if n != calls:
                problems.append("%r: %d calls, expected %s" % (line.strip(), n, calls))
    if not seen:
        problems.append("no kernel lines in: " + text[-500:])
    if "3200 calls" not in text:
        problems.append("no variant with 3200 calls (8 threads x 200 calls x 2 blocks)")
    return problems[:5]


if __name__ == "__main__":
    sys.exit(main())
