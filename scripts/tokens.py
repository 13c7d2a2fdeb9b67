#!/usr/bin/env python3
"""Write a 1-d int32 .npy of token ids (no NumPy needed): tokens.py OUT N VOCAB [SEED]."""
import struct
import sys


def main():
    out, n, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    state = seed
    toks = []
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        toks.append((state >> 33) % vocab)
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % n
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(out, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%di" % n, *toks))


if __name__ == "__main__":
    main()
