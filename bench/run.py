#!/usr/bin/python3
"""Run-time benchmark of code compiled by nestc against its peers (make bench).

Run: run.py NESTC [--rounds N] [--procs N] [--only SECTION,...] [--skip PEER,...] [--work DIR] [--peak1 G] [--peak2 G]
     SECTION: gpt2-shape, gpt2-small, coldstart, gpt2-decode, gpt2-prefill, formats-decode, formats-prefill,
              llamacpp, matmul, resnet, resnet18, bert, vit, resnet50, conv3x3, onnx, python
     (all by default); PEER: ort, torch, sgemm

Peers (installed by scripts/bench-deps.sh; a missing one is reported as
"unavailable: reason" and skipped): ONNX Runtime (onnxruntime-node in bench/.node),
PyTorch eager (Debian's python3-torch, under /usr/bin/python3), OpenBLAS cblas_sgemm.

Method. Every model's weights and inputs are written once (bench/models.py: a plain
PyTorch model, saved as .safetensors and exported to ONNX) and read by every runtime.
Each runtime at each thread count runs in a server process of its own (bench/harness.c
for nestc, bench/ort_server.js, bench/torch_server.py, bench/sgemm.c) that loads the
model, runs it once (writing its output for the cross-check against float64 PyTorch),
warms up, and then runs K forwards per request. The servers are started one after
the other and then asked in turn, A B C D A B C D ..., for --rounds rounds (>= 20;
the quick sections go on for more rounds within a time budget, up to 5 times as many),
so that the machine's drift hits all of them alike; each forward is timed inside its
server (clock_gettime, process.hrtime, perf_counter_ns) and the median is quoted.
The rounds are shared out over --procs fresh processes of each runtime (default 3),
one set after the other, and the median is over all their runs: on this virtual
machine one process of a binary can run 15-20% slower than another of the same
binary for its whole life (where its memory landed), which one process per runtime
would take for a difference between runtimes.
K is chosen per server so that a turn lasts about TURN_S seconds. Between turns the
driver waits until the previous server uses no more CPU (its spinning threads have
gone idle; OpenBLAS's spin for about 0.1 s).
"cpu/wall" is the CPU time of the server process over the wall time of its turns
(from /proc): how many cores it kept busy (spin-waiting counts). Under each table: how
many cores other processes on the machine kept busy meanwhile (from /proc/stat).
FLOPs count 2*M*N*K for every matrix product (for GPT-2 including attention's
QK^T and AV and the LM head) and 2*O*I*k*k*OH*OW for every convolution.

Generation (issue 13; samples/gpt2.nest's prefill and decode entries over a per-sequence
key/value cache, GPT-2 small L=12 D=768 H=12 V=50257 CTX=1024, the weights of gpt2-small;
bench/models.py gpt2-decode writes 1024 random tokens and, from one float64 whole-sequence
forward, the cache a prefill of the first P tokens fills and the logits of each position):
- gpt2-decode: one decode step at P = 127 and 1023 past positions, 1 and 2 threads. nestc
  runs bench/decode.c (prefills P tokens, then every run decodes token P at position P:
  rewriting the same position is the same work each time); ONNX Runtime and PyTorch eager
  run models.GPT2Decode (inputs token, past_k and past_v [L, H, P, D/H] from PyTorch;
  outputs logits, present_k, present_v; exported to ONNX with P a dynamic axis). Each
  runtime's logits go against the float64 logits and against each other. The memory-read
  bandwidth (bench/stream.c, a 1 GiB buffer, 1 and 2 threads) gives the limit: a step reads
  every weight once, so limit time = bytes of weights per token (every parameter but wpe, of
  which one row: 494.6 MB) / bandwidth. The read runs as one more runtime of the rounds
  (stream serve), its turn right after nestc's; the goal's measure, "% of the round's read
  limit", is per round the limit from that round's read over the step's median time in its
  turn, the median over the rounds: on the AMD kind the step's medians moved by half between
  runs with the memory system, and the read with them (29 to 66 GB/s at two threads seconds
  apart), so a limit from reads minutes away set the step against another minute's memory. Against the issue's
  goals (>= 75% of the limit at 1 thread, >= 85% at 2; <= 0.85x ORT at 1 thread, <= 1.0x
  at 2). Also printed: the same with the cache bytes, and the step's median against the best
  of stream.c's reads before and after the runs (the measure of the goal lines before). All
  its servers run with glibc malloc keeping freed memory (DECODE_MALLOC_ENV): the peers
  allocate present_k/present_v, the whole cache, at every step, and first touches of fresh
  pages are slow on these virtual machines.
- gpt2-prefill: prefill at T = 1, 7, 64 and 1024, 1 and 2 threads: nestc's one build with
  T a run-time dimension against a static build of each T (nestc build -D T=n), the ratio
  dynamic / static (goal <= 1.1) and the two outputs' last row against each other and
  float64. T = 1024 runs a quarter of the rounds (at least 3).

Weight formats (issue 36; bench/sections_formats.py):
- formats-decode: the decode step at P = 127 of GPT-2 small and of a TinyLlama-1.1B-shaped LLaMA
  (L=22, D=2048, H=32, KVH=4, F=5632, V=32000), each built in f32, bf16, q8_0 and q4_0
  (--weights-format) over one file of random weights, 1 and 2 threads, each as a fraction of
  the read limit in its format's own bytes (the weights a step reads, over the speed of
  bench/stream.c's read in the same round); logits against the f32 build's. Goals on
  TinyLlama's shape: >= 85% of that limit for bf16 and q8_0, >= 75% for q4_0.
- formats-prefill: TinyLlama's 128-token prefill, the f32 build against q8_0 and q4_0 builds
  with f32 and with int8 activations (--activations=int8), 1 and 2 threads; goal: int8 at least
  2x the f32 build's speed.

llama.cpp (issue 37; bench/sections_llamacpp.py, bench/llamacpp_server.mjs):
- llamacpp: a TinyLlama-1.1B-shaped LLaMA (CTX=256) in one GGUF file per format (f16, q8_0,
  q4_0) written by `nestc weights` in llama.cpp's layout, run from that same file by
  llama.cpp (node-llama-cpp 3.21.1 in bench/.node, F32 key/value cache) and by nestc
  (`nestc build --consts-from FILE --weights-format=FMT`): decode step at P = 127 and a
  128-token prefill, 1 and 2 threads, llama.cpp's time over nestc's (goals: >= 1.1 for
  decode, >= 1.2 for prefill), the next-token log-probabilities against each other, and
  32 greedy tokens from a 16-token prompt.

Networks of issue #9 (bench/sections_nets.py), nestc against ONNX Runtime at 1 and 2 threads,
each with nestc / ORT (goal <= 0.9), % of the FMA peak and the max relative difference
(max |a - b| / max |b|) from float64 PyTorch (goal <= 1e-4), and "% of peak per CPU time"
(GFLOP/s over cpu/wall against the peak's share of one core: the speed while the process
had its cores, a figure that holds when other processes share the machine):
- bert: samples/bert.nest, BERT-base, batch 2 of 128 tokens (goal >= 80% of the peak at 1 thread);
- vit: samples/vit.nest, ViT-B/16, batch 2 of 224x224 (goal >= 80% of the peak at 1 thread);
- resnet50: samples/resnet50.nest, torchvision's ResNet-50, 1x3x224x224;
- conv3x3: bench/conv3x3.nest, one 3x3 convolution (stride 1, padding 1, batch 1) at 64ch 56x56,
  128ch 28x28, 256ch 14x14 and 512ch 7x7 (goals >= 80% of the peak, >= 1.1x ORT's speed);
- onnx (issue #11): `nestc build model.onnx` of the ONNX files of gpt2-small, bert and
  resnet50 (weights from the import, DIR.safetensors) against the hand-written sample
  (goal: imported / sample <= 1.05) and ONNX Runtime, with the repeated regions and
  variants `nestc report` finds.
- onnx-vision (issue #38; bench/sections_vision.py, bench/vision.py): `nestc build NET.onnx` of
  torchvision's mobilenet_v2, mobilenet_v3_small, efficientnet_b0, shufflenet_v2_x1_0, densenet121
  and vit_b_16 and of an LSTM language model, as torch.onnx exports them, against ONNX Runtime
  on the same file: build time (goal <= 10 s), kernels shared, nestc / ORT (goal <= 1.0) and the
  max relative difference from float64 PyTorch (goal <= 1e-4).
The FMA peak is measured at the start of every run (bench/peak.c: independent-accumulator
FMA loops at the widest vector width the CPU's features offer, 1 and 2 threads, FLOPs over
each thread's CPU time so that other processes' turns on the cores do not count, the best
of 3 x 20 runs). Every "% of FMA peak" column uses it.

Files: run.py (this driver), common.py (configuration, servers, measurement), core.py
(environments, probing, builds, model files, report helpers), sections_gpt2.py, sections_formats.py,
sections_cnn.py, sections_nets.py, sections_python.py (with py_server.py and py_rss.py), sections_vision.py.

The report goes to standard output; progress to standard error.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import GPT2_SHAPE, GPT2_SMALL, log  # noqa: E402
from core import BenchCore  # noqa: E402
from sections_cnn import CNNSections  # noqa: E402
from sections_formats import FormatSections  # noqa: E402
from sections_gpt2 import GPT2Sections  # noqa: E402
from sections_llamacpp import LlamaCppSections  # noqa: E402
from sections_nets import NetSections  # noqa: E402
from sections_python import PythonSections  # noqa: E402
from sections_vision import VISION_NETS, VisionSections  # noqa: E402


class Bench(VisionSections, PythonSections, LlamaCppSections, FormatSections, NetSections, CNNSections, GPT2Sections, BenchCore):
    """Every section, on the shared environment of BenchCore."""


SECTIONS = ("gpt2-shape", "gpt2-small", "coldstart", "gpt2-decode", "gpt2-prefill", "formats-decode", "formats-prefill",
            "llamacpp", "matmul",
            "resnet", "resnet18", "bert", "vit", "resnet50", "conv3x3", "onnx", "onnx-vision", "python")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("nestc")
    ap.add_argument("--rounds", type=int, default=20, help="interleaved rounds (default 20)")
    ap.add_argument("--procs", type=int, default=3,
                    help="fresh processes of each runtime the rounds are shared out over (default 3)")
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--skip", default="", help="peers to leave out: ort,torch,sgemm")
    ap.add_argument("--nets", help="onnx-vision's networks, by bench/vision.py's names (default: %s)"
                    % ",".join(VISION_NETS))
    ap.add_argument("--work", help="folder for models and builds (default: NESTC's folder/bench)")
    ap.add_argument("--peak1", type=float, help="FMA peak GFLOP/s at 1 thread (default: measured, bench/peak.c)")
    ap.add_argument("--peak2", type=float, help="FMA peak GFLOP/s at 2 threads (default: measured)")
    args = ap.parse_args()
    common.PROCS = max(1, args.procs)
    sections = args.only.split(",")
    bad = set(p for p in args.skip.split(",") if p) - {"ort", "torch", "sgemm"}
    if bad:
        ap.error("unknown peer(s) for --skip: %s" % ", ".join(sorted(bad)))
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        ap.error("unknown section(s): %s" % ", ".join(sorted(unknown)))
    t0 = time.time()
    b = Bench(args)
    b.probe()
    b.measure_peak()
    f = b.facts
    print("# nestc run-time benchmark\n")
    print("- machine: %s, %s cores, %s memory, Linux %s" % (f["cpu"], f["cores"], f["mem"], f["kernel"]))
    print("- FMA peak (fp32): %s" % b.peak_note)
    print("- nestc: %s (%s), NESTRT_NUM_THREADS=1 or 2; %s" % (f["nestc"], args.nestc, f["cc"]))
    print("- ONNX Runtime: %s" % ("onnxruntime-node %s on Node %s, intraOpNumThreads=1 or 2, graphOptimizationLevel all"
                                  % (f["ort"], f["node"]) if "ort" not in b.why_not else "unavailable: " + b.why_not["ort"]))
    print("- PyTorch: %s" % ("%s eager (inference_mode), torch.set_num_threads = OPENBLAS_NUM_THREADS = 1 or 2, "
                             "OMP_WAIT_POLICY=PASSIVE; onnx %s; NumPy %s" % (f["torch"], f["onnx"], f["numpy"])
                             if "torch" not in b.why_not else "unavailable: " + b.why_not["torch"]))
    print("- OpenBLAS: %s" % ("%s; openblas_get_corename() = %s (OPENBLAS_CORETYPE=%s)"
                              % (f["openblas"], f["openblas_core"], b.blas_core or "unset")
                              if "sgemm" not in b.why_not else "unavailable: " + b.why_not["sgemm"]))
    print("- method: every runtime in its own process, warmed up, then runs interleaved A B A B ... over at least "
          "%d rounds (the quick sections go on for up to 5 times as many within a time budget), K runs per turn, "
          "the rounds shared out over %d fresh processes of each runtime (a process's speed depends on where its "
          "memory landed), median of all runs; FLOPs = 2*M*N*K per matrix product (attention and LM head included), "
          "2*O*I*k*k*OH*OW per convolution; outputs against the model in float64 PyTorch" % (args.rounds, common.PROCS))
    sys.stdout.flush()
    for sec in sections:
        log("section %s" % sec)
        if sec == "gpt2-shape":
            b.gpt2("GPT-2 shape", GPT2_SHAPE, "gpt2-shape")
        elif sec == "gpt2-small":
            b.gpt2("GPT-2 small", GPT2_SMALL, "gpt2-small")
        elif sec == "coldstart":
            b.coldstart()
        elif sec == "matmul":
            b.matmul()
        elif sec == "python":
            b.python()
        elif sec == "resnet":
            b.resnet()
        elif sec == "resnet18":
            b.resnet18()
        elif sec == "gpt2-decode":
            b.gpt2_decode()
        elif sec == "gpt2-prefill":
            b.gpt2_prefill()
        elif sec == "formats-decode":
            b.formats_decode()
        elif sec == "formats-prefill":
            b.formats_prefill()
        elif sec == "llamacpp":
            b.llamacpp()
        elif sec == "onnx-vision":
            b.onnx_vision()
        elif sec in ("bert", "vit", "resnet50", "conv3x3", "onnx"):
            getattr(b, sec)()
        sys.stdout.flush()
    print("\n(benchmark took %.0f s)" % (time.time() - t0))


if __name__ == "__main__":
    main()

