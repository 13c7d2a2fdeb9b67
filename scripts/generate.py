#!/usr/bin/python3
"""generate.py - greedy generation from Python with a model nestc built as a
shared library: scripts/generate.c's program over the nestrt package. The
prompt runs through the model's prefill entry, then each new token through
decode, one position at a time, against the sequence's key/value cache.

Usage:
  generate.py LIB.so WEIGHTS N TOKEN... [--logits OUT.bin]
      prints the generated ids and the decode steps' tokens per second;
  generate.py LIB.so WEIGHTS N --prompt TEXT [--vocab FILE.gguf] [--logits OUT.bin]
      tokenizes TEXT with the GGUF tokenizer of --vocab (else of WEIGHTS),
      prints the text of at most N tokens as they come, stops at EOS.
With --logits, the logits of every step (the prompt's last position, then each
decoded one) go to OUT.bin as float32, one row of V per step: the same bytes
generate.c writes. Needs runtime/python on PYTHONPATH (or nestrt installed)."""
import argparse
import os
import sys
import time

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime", "python"))
import numpy as np  # noqa: E402

import nestrt  # noqa: E402


def utf8_complete(a):
    """How many bytes of a may go out: all but a last, incomplete character."""
    n = len(a)
    for back in range(1, min(3, n) + 1):
        c = a[n - back]
        if c & 0xC0 == 0x80:
            continue
        need = 4 if 0xF0 <= c <= 0xF4 else 3 if 0xE0 <= c <= 0xEF else 2 if 0xC2 <= c <= 0xDF else 1
        return n - back if need > back else n
    return n


def main():
    ap = argparse.ArgumentParser(description="greedy generation with a model built by nestc build -o LIB.so")
    ap.add_argument("lib")
    ap.add_argument("weights")
    ap.add_argument("n", type=int)
    ap.add_argument("tokens", nargs="*", type=int)
    ap.add_argument("--prompt")
    ap.add_argument("--vocab")
    ap.add_argument("--logits")
    a = ap.parse_args()
    if a.n < 0 or (a.prompt is None) == (not a.tokens) or (a.vocab and a.prompt is None):
        ap.print_usage(sys.stderr)
        return 2
    try:
        m = nestrt.load(a.lib, weights=a.weights)
    except (nestrt.Error, ValueError, OSError) as e:
        print("generate: %s" % e, file=sys.stderr)
        return 1
    for need in ("prefill", "decode"):
        if need not in m.entries:
            print("generate: %s has no %s entry point" % (a.lib, need), file=sys.stderr)
            return 1
    V = m.entries["decode"]["outputs"][0]["shape"][-1]
    ctx = m.entries["prefill"]["dims"][0]["max"]
    tk = None
    if a.prompt is not None:
        try:
            tk = m.tokenizer(a.vocab)
        except nestrt.Error as e:
            print("generate: %s%s" % (e, "" if a.vocab else " (give the tokenizer's GGUF file with --vocab)"),
                  file=sys.stderr)
            return 1
        if tk.n_vocab > V:
            print("generate: the tokenizer has %d tokens, more than the model's %d" % (tk.n_vocab, V), file=sys.stderr)
            return 1
        prompt = tk.encode(a.prompt)
        if not len(prompt):
            print("generate: the prompt has no tokens", file=sys.stderr)
            return 2
    else:
        prompt = np.array(a.tokens, np.int32)
    T = len(prompt)
    if T + a.n > ctx:
        print("generate: %d prompt tokens and %d new ones exceed the context of %d" % (T, a.n, ctx), file=sys.stderr)
        return 2
    lf = open(a.logits, "wb") if a.logits else None
    rep = sys.stderr if tk else sys.stdout
    out = sys.stdout.buffer
    s = m.sequence()
    try:
        t0 = time.monotonic()
        logits = s.prefill(prompt)
        t1 = time.monotonic()
        last = logits[T - 1]
        if lf:
            lf.write(last.tobytes())
        tok = int(last.argmax())
        print("prompt: %d tokens, prefill %.2f ms" % (T, (t1 - t0) * 1e3), file=rep)
        if not tk:
            out.write(b"ids:")
        rep.flush()
        pending, made, at_eos = b"", 0, False
        step = np.empty(1, np.int32)
        t2 = time.monotonic()
        for i in range(a.n):
            if tk and tok == tk.eos:
                at_eos = True
                break
            made += 1
            if not tk:
                out.write(b" %d" % tok)
            else:
                if tok >= tk.n_vocab:
                    print("\ngenerate: generated id %d is outside the tokenizer's %d tokens" % (tok, tk.n_vocab),
                          file=sys.stderr)
                    return 1
                pending += tk.piece(tok)
                k = utf8_complete(pending)
                out.write(pending[:k])
                pending = pending[k:]
            out.flush()
            if i + 1 == a.n:
                break
            step[0] = tok
            logits = s.decode(step, P=T + i)
            if lf:
                lf.write(logits.tobytes())
            tok = int(logits.argmax())
        t3 = time.monotonic()
        if tk:
            out.write(pending)
        else:
            out.write(b"\n")
        out.flush()
        if tk:
            print("\n%d tokens%s" % (made, ", stopped at EOS" if at_eos else ""), file=rep)
        if made > 1:
            print("decode: %d steps, %.2f ms per token, %.1f tokens/s" % (
                made - 1, (t3 - t2) * 1e3 / (made - 1), (made - 1) / (t3 - t2)), file=rep)
    except nestrt.Error as e:
        print("\ngenerate: %s" % e, file=sys.stderr)
        return 1
    finally:
        if lf:
            lf.close()
        m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
