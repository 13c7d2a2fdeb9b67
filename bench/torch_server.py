#!/usr/bin/python3
"""Times a model of bench/models.py in PyTorch eager, for bench/run.py.

Usage: torch_server.py THREADS OUT.npy WARMUP gpt2 WEIGHTS L D H V CTX S TOKENS.npy
       torch_server.py THREADS OUT.npy WARMUP gpt2-decode WEIGHTS L D H V CTX TOKEN.npy PAST_K.npy PAST_V.npy
       torch_server.py THREADS OUT.npy WARMUP resnet WEIGHTS C0 CLASSES X.npy
       torch_server.py THREADS OUT.npy WARMUP resnet18 WEIGHTS X.npy
Sets torch.set_num_threads(THREADS) (the caller sets OPENBLAS_NUM_THREADS,
OPENBLAS_CORETYPE and OMP_WAIT_POLICY=PASSIVE in the environment), runs once under
torch.inference_mode() and writes the output to OUT.npy (f32, flat), runs WARMUP more
times, prints "ready TORCH_VERSION OPENBLAS_CORE", then serves "run K" and "quit" on
standard input: the protocol of bench/harness.c (times with time.perf_counter_ns).
"""
import ctypes
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def blas_core():
    """openblas_get_corename() of the BLAS this process loaded, if it is OpenBLAS."""
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({l.split()[-1] for l in f if "blas" in l.rsplit("/", 1)[-1]})
        for lib in libs:
            try:
                fn = ctypes.CDLL(lib).openblas_get_corename
            except (OSError, AttributeError):
                continue
            fn.restype = ctypes.c_char_p
            return fn().decode()
        return "no-OpenBLAS(%s)" % ",".join(os.path.basename(l) for l in libs) if libs else "no-BLAS-loaded"
    except OSError:
        return "?"


def main():
    threads, out, warmup, kind = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(threads)
    weights = models.load_safetensors(sys.argv[5])
    if kind == "gpt2":
        L, D, H, V, CTX, S = (int(x) for x in sys.argv[6:12])
        model = models.GPT2(L, D, H, V, CTX, S)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        xs = [torch.from_numpy(np.load(sys.argv[12]))]
    elif kind == "gpt2-decode":     # one decode step: logits, present_k, present_v; OUT gets the logits
        L, D, H, V, CTX = (int(x) for x in sys.argv[6:11])
        model = models.GPT2Decode(L, D, H, V, CTX, 1)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        xs = [torch.from_numpy(np.load(a)) for a in sys.argv[11:14]]
    elif kind == "resnet":
        C0, CLASSES = int(sys.argv[6]), int(sys.argv[7])
        model = models.ResNet18(C0, CLASSES)
        model.load_hf_state(weights)
        xs = [torch.from_numpy(np.load(sys.argv[8]))]
    elif kind == "resnet18":
        model = models.ResNet18BN()
        model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        xs = [torch.from_numpy(np.load(sys.argv[6]))]
    else:
        sys.exit("torch_server: unknown model " + kind)
    model.eval()
    with torch.inference_mode():
        y = model(*xs)
        if isinstance(y, tuple):
            y = y[0]
        np.save(out, y.numpy().astype(np.float32).reshape(-1))
        for _ in range(warmup):
            model(*xs)
        print("ready", torch.__version__, blas_core(), flush=True)
        for line in sys.stdin:
            if line.startswith("run "):
                times = []
                for _ in range(int(line.split()[1])):
                    t0 = time.perf_counter_ns()
                    model(*xs)
                    times.append(time.perf_counter_ns() - t0)
                print(" ".join(map(str, times)), flush=True)
            elif line.startswith("quit"):
                break


if __name__ == "__main__":
    main()
