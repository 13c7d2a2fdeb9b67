#!/usr/bin/python3
"""py_rss.py - the resident memory a Python process gains over many calls of a
model through the nestrt package (bench/run.py's python section).

Usage: py_rss.py LIB.so WEIGHTS N
Prints "rss_kb BEFORE AFTER": VmRSS after 200 warm-up calls, then after N more
(each m.forward on a fresh input array, with its new result array, as a user's
loop would do), in KiB."""
import os
import sys

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime", "python"))
import numpy as np  # noqa: E402

import nestrt  # noqa: E402


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main():
    lib, w, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    m = nestrt.load(lib, weights=w)
    spec = m.entries["forward"]["inputs"][0]
    shape, hi = tuple(spec["shape"]), m.entries["forward"]["outputs"][0]["shape"][-1]
    rng = np.random.default_rng(1)
    for i in range(200):
        m.forward(rng.integers(0, hi, shape, dtype=np.int32))
    before = rss_kb()
    for i in range(n):
        m.forward(rng.integers(0, hi, shape, dtype=np.int32))
    print("rss_kb %d %d" % (before, rss_kb()))
    m.close()


if __name__ == "__main__":
    main()
