#!/usr/bin/python3
"""Times bench/fold.nest (a BERT-like feed-forward block on x[2, 128, 768]) built by
two nestc binaries, side by side, with bench/harness.c:

    /usr/bin/python3 bench/fold.py NEW_NESTC OLD_NESTC [THREADS...]

Prints the median wall time of each per thread count (NESTRT_NUM_THREADS) and their
ratio. Needs build/libnestrt.a beside NEW_NESTC."""
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def safetensors(path, tensors):
    header, off, blobs = {}, 0, []
    for name, a in tensors.items():
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def build(nestc, tmp, tag):
    d = os.path.join(tmp, tag)
    subprocess.run([nestc, "build", os.path.join(HERE, "fold.nest"), "-o", d], check=True)
    objs = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".o")]
    exe = os.path.join(tmp, "h_" + tag)
    lib = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "libnestrt.a")
    subprocess.run(["cc", "-O2", "-I" + os.path.join(ROOT, "runtime"), "-I" + d, "-DMODEL=fold",
                    '-DMODEL_H="fold.h"', "-DOUT_NUMEL=FOLD_FORWARD_OUT_NUMEL", "-DNINPUTS=1", "-o", exe,
                    os.path.join(HERE, "harness.c")] + objs + [lib, "-lm", "-lpthread"], check=True)
    return exe


def main():
    new, old = sys.argv[1], sys.argv[2]
    threads = sys.argv[3:] or ["1", "2"]
    rng = np.random.default_rng(9)
    tmp = tempfile.mkdtemp(prefix="nest_fold_")
    w = os.path.join(tmp, "w.safetensors")
    safetensors(w, {"w1": rng.standard_normal((3072, 768), np.float32) * 0.03,
                    "b1": rng.standard_normal(3072, np.float32) * 0.1,
                    "w2": rng.standard_normal((768, 3072), np.float32) * 0.03,
                    "b2": rng.standard_normal(768, np.float32) * 0.1})
    x = os.path.join(tmp, "x.npy")
    np.save(x, rng.standard_normal((2, 128, 768), np.float32))
    exes = {"new": build(new, tmp, "new"), "old": build(old, tmp, "old")}
    for th in threads:
        env = dict(os.environ, NESTRT_NUM_THREADS=th)
        procs, outs = {}, {}
        for k, e in exes.items():
            outs[k] = os.path.join(tmp, k + ".npy")
            procs[k] = subprocess.Popen([e, w, outs[k], "3", x], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env=env)
            assert procs[k].stdout.readline().strip() == "ready"
        times = {k: [] for k in exes}
        for _ in range(10):  # interleaved: A B A B ...
            for k, p in procs.items():
                p.stdin.write("run 2\n")
                p.stdin.flush()
                times[k] += [int(t) / 1e6 for t in p.stdout.readline().split()]
        for p in procs.values():
            p.stdin.write("quit\n")
            p.stdin.flush()
            p.wait()
        a, b = np.load(outs["new"]), np.load(outs["old"])
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"threads {th}: new {med['new']:.2f} ms, old {med['old']:.2f} ms, old/new {med['old'] / med['new']:.2f}x, "
              f"max|new-old| {float(np.max(np.abs(a - b))):.2e}")


if __name__ == "__main__":
    main()
