#!/usr/bin/python3
"""py_server.py - times a model's forward called from Python through the nestrt
package (runtime/python), for bench/run.py's python section: bench/harness.c's
protocol, so that the C call and the Python call are measured side by side.

Usage: py_server.py LIB.so WEIGHTS OUT.npy WARMUP IN.npy
Loads the library and weights, runs forward once on IN and writes the output
(f32, flat) to OUT.npy, runs WARMUP more times, prints "ready", then serves
"run K" (K wall times in nanoseconds on one line) and "quit". Each timed call
is m.forward(x): the checks, the output array it allocates, the ctypes call."""
import os
import sys
import time

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime", "python"))
import numpy as np  # noqa: E402

import nestrt  # noqa: E402


def main():
    lib, w, out, warm, inp = sys.argv[1:6]
    m = nestrt.load(lib, weights=w)
    x = np.load(inp)
    y = m.forward(x)
    np.save(out, y.astype(np.float32).ravel())
    for _ in range(int(warm)):
        m.forward(x)
    print("ready", flush=True)
    clock = time.perf_counter_ns
    for line in sys.stdin:
        f = line.split()
        if f[:1] == ["run"] and len(f) == 2:
            ts = []
            for _ in range(int(f[1])):
                t0 = clock()
                m.forward(x)
                ts.append(clock() - t0)
            print(" ".join(map(str, ts)), flush=True)
        elif f[:1] == ["quit"]:
            break
    m.close()


if __name__ == "__main__":
    main()
