#!/usr/bin/python3
"""Write a corpus of malformed and valid .safetensors and .npy files.

    /usr/bin/python3 tests/io/make_corpus.py OUTDIR

Files are named bad-WHAT.safetensors, bad-WHAT.npy (must be rejected with a
message, never a crash) and good-WHAT.safetensors, good-WHAT.npy (must load).
Prints nothing. Used by tests/io/run_corpus.sh and by any test that wants to
feed hostile files to `nestc run`.
"""
import io
import json
import os
import struct
import sys

import numpy as np


def st_bytes(header, data=b"", pad=0, hlen=None):
    """A safetensors file: header (dict, or raw str/bytes), data; hlen overrides the length."""
    if isinstance(header, dict):
        header = json.dumps(header)
    if isinstance(header, str):
        header = header.encode()
    header += b" " * pad
    n = len(header) if hlen is None else hlen
    return struct.pack("<Q", n) + header + data


def t(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def npy_bytes(header, data=b"", version=(1, 0), hlen=None):
    """A .npy file from a raw header string; hlen overrides the length field."""
    if isinstance(header, str):
        header = header.encode("latin1")
    n = len(header) if hlen is None else hlen
    fmt = "<H" if version[0] == 1 else "<I"
    return b"\x93NUMPY" + bytes(version) + struct.pack(fmt, n) + header + data


def npy_save(arr, **kw):
    f = io.BytesIO()
    np.save(f, arr, **kw)
    return f.getvalue()


def hdr(descr="'<f4'", fortran="False", shape="(2,)"):
    return "{'descr': %s, 'fortran_order': %s, 'shape': %s, }\n" % (descr, fortran, shape)


def corpus():
    f32x2 = np.arange(2, dtype="<f4").tobytes()
    good_header = {
        "__metadata__": {"format": "pt"},
        "w": t("F32", [2, 3], 0, 24),
        "b": t("F32", [3], 24, 36),
        "ids": t("I64", [2], 40, 56),
    }
    good_data = (np.arange(6, dtype="<f4").tobytes() + np.ones(3, dtype="<f4").tobytes()
                 + b"\0" * 4 + np.array([5, -1], dtype="<i8").tobytes())
    one = {"a": t("F32", [2], 0, 8)}
    c = {}

    # ---- safetensors: valid
    c["good-basic.safetensors"] = st_bytes(good_header, good_data, pad=7)
    c["good-empty-header.safetensors"] = st_bytes({})
    c["good-all-dtypes.safetensors"] = st_bytes({
        "f64": t("F64", [1], 0, 8), "f32": t("F32", [], 8, 12), "i64": t("I64", [1], 12, 20),
        "i32": t("I32", [1], 20, 24), "bool": t("BOOL", [2], 24, 26),
        "bf16": t("BF16", [2], 26, 30), "f16": t("F16", [1], 30, 32), "u8": t("U8", [1], 32, 33),
        "e4": t("F8_E4M3", [1], 33, 34), "u64": t("U64", [1], 34, 42)}, bytes(range(42)))
    c["good-zero-size.safetensors"] = st_bytes({"z": t("F32", [0, 5], 0, 0), "a": t("F32", [2], 0, 8)},
                                              f32x2)
    c["good-rank8.safetensors"] = st_bytes({"a": t("I32", [1, 1, 1, 1, 1, 1, 1, 2], 0, 8)}, b"\1" * 8)

    # ---- safetensors: the file and the header length
    c["bad-empty-file.safetensors"] = b""
    c["bad-3-byte-file.safetensors"] = b"abc"
    c["bad-7-byte-file.safetensors"] = b"\x02\0\0\0\0\0\0"
    c["bad-header-length-zero.safetensors"] = st_bytes(one, f32x2, hlen=0)
    c["bad-header-longer-than-file.safetensors"] = st_bytes(one, f32x2, hlen=4096)
    c["bad-header-length-one-too-many.safetensors"] = st_bytes("{}", hlen=3)
    c["bad-header-length-huge.safetensors"] = st_bytes(one, f32x2, hlen=2**64 - 1)
    c["bad-header-length-2-63.safetensors"] = st_bytes(one, f32x2, hlen=2**63)
    c["bad-header-length-short.safetensors"] = st_bytes(one, f32x2, hlen=10)
    # ---- safetensors: the JSON
    c["bad-header-not-json.safetensors"] = st_bytes("this is not json")
    c["bad-header-truncated-json.safetensors"] = st_bytes('{"a": {"dtype": "F32", "sha')
    c["bad-header-not-object.safetensors"] = st_bytes("[1, 2, 3]")
    c["bad-header-scalar.safetensors"] = st_bytes("42")
    c["bad-header-string.safetensors"] = st_bytes('"F32"')
    c["bad-header-trailing-garbage.safetensors"] = st_bytes("{} {}")
    c["bad-header-nul-padding.safetensors"] = st_bytes(b"{}\0\0\0\0")
    c["bad-header-nul-in-key.safetensors"] = st_bytes('{"a\\u0000b": {}}')
    c["bad-header-invalid-utf8.safetensors"] = st_bytes(b'{"\xff\xfe": {}}')
    c["bad-header-deep-nesting.safetensors"] = st_bytes("[" * 100000 + "]" * 100000)
    c["bad-duplicate-name.safetensors"] = st_bytes(
        '{"a": %s, "a": %s}' % (json.dumps(t("F32", [2], 0, 8)), json.dumps(t("F32", [2], 8, 16))),
        f32x2 * 2)
    c["bad-metadata-not-object.safetensors"] = st_bytes({"__metadata__": ["x"], **one}, f32x2)
    c["bad-metadata-not-string.safetensors"] = st_bytes({"__metadata__": {"step": 5}, **one}, f32x2)
    # ---- safetensors: entries with wrong types
    c["bad-entry-not-object.safetensors"] = st_bytes({"a": [0, 8]}, f32x2)
    c["bad-entry-null.safetensors"] = st_bytes({"a": None}, f32x2)
    c["bad-missing-dtype.safetensors"] = st_bytes({"a": {"shape": [2], "data_offsets": [0, 8]}}, f32x2)
    c["bad-missing-shape.safetensors"] = st_bytes({"a": {"dtype": "F32", "data_offsets": [0, 8]}}, f32x2)
    c["bad-missing-offsets.safetensors"] = st_bytes({"a": {"dtype": "F32", "shape": [2]}}, f32x2)
    c["bad-dtype-not-string.safetensors"] = st_bytes({"a": t(4, [2], 0, 8)}, f32x2)
    c["bad-dtype-lowercase.safetensors"] = st_bytes({"a": t("f32", [2], 0, 8)}, f32x2)
    c["bad-unknown-dtype.safetensors"] = st_bytes({"a": t("Q4", [2], 0, 8)}, f32x2)
    c["bad-name-control-chars.safetensors"] = st_bytes({"a\nb\x1b[31m": t("Q4\n", [2], 0, 8)}, f32x2)
    c["bad-name-very-long.safetensors"] = st_bytes({"\u00e9" * 5000: t("F32", [3], 0, 8)}, f32x2)
    c["bad-shape-not-list.safetensors"] = st_bytes({"a": t("F32", 2, 0, 8)}, f32x2)
    c["bad-shape-string.safetensors"] = st_bytes({"a": t("F32", ["2"], 0, 8)}, f32x2)
    c["bad-shape-float.safetensors"] = st_bytes({"a": t("F32", [2.0], 0, 8)}, f32x2)
    c["bad-shape-bool.safetensors"] = st_bytes({"a": t("F32", [True, True], 0, 8)}, f32x2)
    c["bad-offsets-not-list.safetensors"] = st_bytes(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": 8}}, f32x2)
    c["bad-offsets-one-int.safetensors"] = st_bytes(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [8]}}, f32x2)
    c["bad-offsets-three-ints.safetensors"] = st_bytes(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 8]}}, f32x2)
    c["bad-offsets-float.safetensors"] = st_bytes({"a": t("F32", [2], 0.0, 8.0)}, f32x2)
    c["bad-offsets-string.safetensors"] = st_bytes({"a": t("F32", [2], "0", "8")}, f32x2)
    # ---- safetensors: numbers out of range
    c["bad-negative-dim.safetensors"] = st_bytes({"a": t("F32", [-2], 0, 8)}, f32x2)
    c["bad-negative-dims-product-positive.safetensors"] = st_bytes({"a": t("F32", [-1, -2], 0, 8)}, f32x2)
    c["bad-shape-overflow.safetensors"] = st_bytes({"a": t("F32", [2**62, 2**62], 0, 8)}, f32x2)
    c["bad-shape-overflow-bytes.safetensors"] = st_bytes({"a": t("F64", [2**62], 0, 8)}, f32x2)
    c["bad-shape-overflow-to-zero.safetensors"] = st_bytes({"a": t("F32", [2**32, 2**32, 0], 0, 0)})
    c["bad-shape-bigint.safetensors"] = st_bytes({"a": t("F32", [2**64], 0, 8)}, f32x2)
    c["bad-huge-rank.safetensors"] = st_bytes({"a": t("F32", [1] * 100, 0, 4)}, f32x2)
    c["bad-rank-9.safetensors"] = st_bytes({"a": t("F32", [1] * 8 + [2], 0, 8)}, f32x2)
    c["bad-offsets-out-of-range.safetensors"] = st_bytes({"a": t("F32", [2], 8, 16)}, f32x2)
    c["bad-offsets-end-past-file.safetensors"] = st_bytes({"a": t("F32", [4], 0, 16)}, f32x2)
    c["bad-offsets-huge.safetensors"] = st_bytes({"a": t("F32", [2], 2**63 - 8, 2**63 - 1)}, f32x2)
    c["bad-offsets-negative.safetensors"] = st_bytes({"a": t("F32", [2], -8, 0)}, f32x2)
    c["bad-offsets-into-header.safetensors"] = st_bytes({"a": t("F32", [2], -4, 4)}, f32x2)
    c["bad-offsets-reversed.safetensors"] = st_bytes({"a": t("F32", [2], 8, 0)}, f32x2)
    c["bad-size-mismatch.safetensors"] = st_bytes({"a": t("F32", [4, 8], 0, 64)}, b"\0" * 64)
    c["bad-size-mismatch-small.safetensors"] = st_bytes({"a": t("F32", [1], 0, 8)}, f32x2)
    c["bad-truncated-data.safetensors"] = st_bytes(good_header, good_data[:30])
    c["bad-overlapping-tensors.safetensors"] = st_bytes(
        {"a": t("F32", [2], 0, 8), "b": t("F32", [2], 4, 12)}, f32x2 * 2)
    c["bad-overlapping-identical.safetensors"] = st_bytes(
        {"a": t("F32", [2], 0, 8), "b": t("I32", [2], 0, 8)}, f32x2)
    c["bad-overlapping-contained.safetensors"] = st_bytes(
        {"a": t("F32", [4], 0, 16), "b": t("F32", [1], 4, 8), "c": t("F32", [1], 8, 12)}, f32x2 * 2)

    # ---- npy: valid
    a34 = np.arange(12, dtype="<f4").reshape(3, 4)
    c["good-f32.npy"] = npy_save(a34)
    c["good-f64.npy"] = npy_save(np.linspace(0, 1, 5))
    c["good-i32.npy"] = npy_save(np.arange(6, dtype="<i4").reshape(1, 2, 3))
    c["good-i64.npy"] = npy_save(np.arange(3, dtype="<i8"))
    c["good-bool.npy"] = npy_save(np.array([True, False, True]))
    c["good-0d.npy"] = npy_save(np.float32(2.5))
    c["good-empty.npy"] = npy_save(np.zeros((0, 3), dtype="<f4"))
    c["good-rank8.npy"] = npy_save(np.zeros((1, 2, 1, 2, 1, 2, 1, 2), dtype="<f8"))
    c["good-f16.npy"] = npy_save(np.array([1.5, -2, 65504], dtype="<f2"))
    c["good-i8.npy"] = npy_save(np.array([-128, 0, 127], dtype="i1"))
    c["good-u8.npy"] = npy_save(np.array([0, 7, 255], dtype="u1"))
    c["good-i16.npy"] = npy_save(np.array([-32768, 1], dtype="<i2"))
    c["good-u16.npy"] = npy_save(np.array([65535, 1], dtype="<u2"))
    for v in (2, 3):
        f = io.BytesIO()
        np.lib.format.write_array(f, a34, version=(v, 0))
        c["good-version-%d.npy" % v] = f.getvalue()
    c["good-handwritten.npy"] = npy_bytes("{'shape':(2,),'descr':'<f4','fortran_order':False}", f32x2)

    # ---- npy: the preamble
    good = c["good-f32.npy"]
    c["bad-empty-file.npy"] = b""
    c["bad-magic.npy"] = b"\x93NUMPX" + good[6:]
    c["bad-magic-text.npy"] = b"hello world, not an array\n"
    c["bad-truncated-magic.npy"] = good[:4]
    c["bad-truncated-version.npy"] = good[:7]
    c["bad-truncated-header-length.npy"] = good[:9]
    c["bad-truncated-header.npy"] = good[:40]
    c["bad-header-length-beyond-file.npy"] = npy_bytes(hdr(), f32x2, hlen=4096)
    c["bad-header-length-4g.npy"] = npy_bytes(hdr(), f32x2, version=(2, 0), hlen=2**32 - 1)
    c["bad-header-length-short.npy"] = npy_bytes(hdr(), f32x2, hlen=20)
    c["bad-version-9.npy"] = npy_bytes(hdr(), f32x2, version=(9, 0))
    c["bad-version-0.npy"] = npy_bytes(hdr(), f32x2, version=(0, 0))
    c["bad-version-1-1.npy"] = npy_bytes(hdr(), f32x2, version=(1, 1))
    # ---- npy: the dict
    c["bad-dict-empty-header.npy"] = npy_bytes("", f32x2)
    c["bad-dict-not-dict.npy"] = npy_bytes("['<f4', False, (2,)]\n", f32x2)
    c["bad-dict-unterminated.npy"] = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", f32x2)
    c["bad-dict-unterminated-string.npy"] = npy_bytes("{'descr: '<f4'}", f32x2)
    c["bad-dict-unterminated-tuple.npy"] = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,", f32x2)
    c["bad-dict-missing-shape.npy"] = npy_bytes("{'descr': '<f4', 'fortran_order': False}", f32x2)
    c["bad-dict-missing-descr.npy"] = npy_bytes("{'fortran_order': False, 'shape': (2,)}", f32x2)
    c["bad-dict-extra-key.npy"] = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", f32x2)
    c["bad-dict-duplicate-key.npy"] = npy_bytes(
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", f32x2)
    c["bad-dict-no-commas.npy"] = npy_bytes("{'descr': '<f4' 'fortran_order': False 'shape': (2,)}", f32x2)
    c["bad-dict-garbage-after.npy"] = npy_bytes(hdr() + "garbage", f32x2)
    c["bad-dict-shape-not-tuple.npy"] = npy_bytes(hdr(shape="[2]"), f32x2)
    c["bad-dict-shape-paren-int.npy"] = npy_bytes(hdr(shape="(2)"), f32x2)
    c["bad-dict-shape-float.npy"] = npy_bytes(hdr(shape="(2.0,)"), f32x2)
    c["bad-dict-shape-double-comma.npy"] = npy_bytes(hdr(shape="(2,,)"), f32x2)
    c["bad-dict-fortran-not-bool.npy"] = npy_bytes(hdr(fortran="0"), f32x2)
    c["bad-dict-descr-not-string.npy"] = npy_bytes(hdr(descr="4"), f32x2)
    c["bad-dict-nul-bytes.npy"] = npy_bytes(b"{'descr': '<f4'\0\0\0}", f32x2)
    c["bad-dict-high-bytes.npy"] = npy_bytes(b"{'descr': '\xff\xfe\xfd', 'fortran_order': False, 'shape': (2,)}", f32x2)
    # ---- npy: what the dict says
    c["bad-big-endian.npy"] = npy_save(np.arange(4, dtype=">f4"))
    c["bad-big-endian-i8.npy"] = npy_save(np.arange(4, dtype=">i8"))
    c["bad-fortran.npy"] = npy_save(np.asfortranarray(a34))
    c["bad-object.npy"] = npy_save(np.array([1, "x", None], dtype=object), allow_pickle=True)
    c["bad-structured.npy"] = npy_save(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
    c["bad-u32.npy"] = npy_save(np.zeros(3, dtype="<u4"))
    c["bad-f128.npy"] = npy_save(np.zeros(3, dtype=np.longdouble))
    c["bad-big-endian-f16.npy"] = npy_save(np.zeros(3, dtype=">f2"))
    c["bad-complex.npy"] = npy_save(np.zeros(3, dtype="<c8"))
    c["bad-unicode.npy"] = npy_save(np.array(["ab", "c"]))
    c["bad-native-order-descr.npy"] = npy_bytes(hdr(descr="'=f4'"), f32x2)
    c["bad-no-order-descr.npy"] = npy_bytes(hdr(descr="'f4'"), f32x2)
    c["bad-shape-overflow.npy"] = npy_bytes(hdr(shape="(%d, %d)" % (2**62, 2**62)), f32x2)
    c["bad-shape-overflow-bytes.npy"] = npy_bytes(hdr(descr="'<f8'", shape="(%d,)" % 2**62), f32x2)
    c["bad-shape-overflow-to-zero.npy"] = npy_bytes(hdr(shape="(%d, %d, 0)" % (2**32, 2**32)))
    c["bad-shape-bigint.npy"] = npy_bytes(hdr(shape="(%d,)" % 2**64), f32x2)
    c["bad-shape-huge.npy"] = npy_bytes(hdr(shape="(%d,)" % 2**40), f32x2)
    c["bad-negative-dim.npy"] = npy_bytes(hdr(shape="(-2,)"), f32x2)
    c["bad-huge-rank.npy"] = npy_bytes(hdr(shape="(" + "1, " * 100 + ")"), f32x2)
    c["bad-rank-9.npy"] = npy_bytes(hdr(shape="(1, 1, 1, 1, 1, 1, 1, 1, 2)"), f32x2)
    c["bad-truncated-data.npy"] = good[:-1]
    c["bad-truncated-data-empty.npy"] = good[:len(good) - 48]
    c["bad-trailing-data.npy"] = good + b"\0"
    return c


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: make_corpus.py OUTDIR\n")
        sys.exit(2)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, data in corpus().items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
