"""nestrt: models compiled by nestc, called from Python.

A model built as a shared library (``nestc build model.nest -o libgpt2.so``)
carries the description of its API (nestc(1), THE API DESCRIPTION); this
package reads it and makes every entry point a method taking and returning
NumPy arrays::

    import nestrt
    with nestrt.load("libgpt2.so", weights="gpt2.safetensors") as m:
        logits = m.forward(tokens)              # an entry without state
        s = m.sequence()                        # the state of one sequence
        out = s.prefill(ids)                    # T is ids' length
        out = s.decode(tok, P=len(ids))         # a dim no shape gives: a keyword

Arguments are checked against the API (dtype, rank, shape, the bounds and
conditions of run-time dims) before the call, with a ValueError naming what is
wrong; an array already C-contiguous and of the right dtype is passed as it is,
never copied. Results are new arrays, or the arrays given as ``out=``. The call
itself releases the GIL, so threads calling one model run in parallel; the
runtime's failures raise nestrt.Error with its message. bf16 tensors are
uint16 arrays of the bits (NumPy has no bfloat16), as in the C header.

Pure Python over ctypes; NumPy is the one dependency.
"""
import ctypes
import json
import os
import threading
import weakref

import numpy as np

__all__ = ["load", "Model", "Sequence", "Tokenizer", "Error"]
__version__ = "0.1.0"

API_SCHEMA = "nestc-api"
API_VERSION = 1

# the API's dtypes: NumPy's, and ctypes' element type for the pointer
DTYPES = {
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64), "f16": np.dtype(np.float16),
    "bf16": np.dtype(np.uint16), "i32": np.dtype(np.int32), "i64": np.dtype(np.int64),
    "i8": np.dtype(np.int8), "u8": np.dtype(np.uint8), "i16": np.dtype(np.int16),
    "u16": np.dtype(np.uint16), "bool": np.dtype(np.bool_),
}


class Error(RuntimeError):
    """A failure the runtime reported (its message is the exception's)."""


class _Err(ctypes.Structure):
    _fields_ = [("message", ctypes.c_char * 512)]


def _message(err):
    return err.message.decode("utf-8", "replace")


def _value(dim, dims):
    """A shape entry of the API: an int, or {"const": c, "dims": {name: coef}}."""
    if isinstance(dim, int):
        return dim
    return dim["const"] + sum(c * dims[n] for n, c in dim["dims"].items())


def _solve(entry, arrays, given):
    """The run-time dims: those given as keywords, the others from the
    shapes of the inputs (an entry c + k * D alone in a dim gives D)."""
    dims = dict(given)
    for spec, a in zip(entry["inputs"], arrays):
        if a is None or len(a.shape) != spec["rank"]:
            continue
        for d, n in zip(spec["shape"], a.shape):
            if isinstance(d, dict) and len(d["dims"]) == 1:
                (name, coef), = d["dims"].items()
                if name not in dims and (n - d["const"]) % coef == 0:
                    dims[name] = (n - d["const"]) // coef
    return dims


class _Entry:
    """One entry point: its checks, and the call through ctypes."""

    def __init__(self, lib, spec):
        self.spec = spec
        self.name = spec["name"]
        self.fn = getattr(lib, spec["symbol"])
        self.fn.restype = ctypes.c_int
        nargs = 1 + spec["sequence"] + len(spec["dims"]) + len(spec["inputs"]) + len(spec["outputs"])
        self.fn.argtypes = [ctypes.c_void_p] * (1 + spec["sequence"]) + [ctypes.c_int64] * len(spec["dims"]) + \
            [ctypes.c_void_p] * (nargs - 1 - spec["sequence"] - len(spec["dims"]))
        self.dtypes = [DTYPES[t["dtype"]] for t in spec["inputs"] + spec["outputs"]]

    def __call__(self, model, seq, args, kwargs):
        spec, name = self.spec, self.name
        out = kwargs.pop("out", None)
        dimnames = [d["name"] for d in spec["dims"]]
        given = {}
        for k in list(kwargs):
            if k in dimnames:
                given[k] = int(kwargs.pop(k))
        ins = spec["inputs"]
        # inputs by position, then by name
        if len(args) > len(ins):
            raise TypeError("%s() takes %d input%s, %d given" % (name, len(ins), "" if len(ins) == 1 else "s",
                                                                  len(args)))
        vals = list(args) + [None] * (len(ins) - len(args))
        for i, t in enumerate(ins):
            if t["name"] in kwargs:
                if vals[i] is not None:
                    raise TypeError("%s(): %s given twice" % (name, t["name"]))
                vals[i] = kwargs.pop(t["name"])
        if kwargs:
            raise TypeError("%s(): unknown argument %s (inputs: %s; dims: %s)" % (
                name, ", ".join(sorted(kwargs)), ", ".join(t["name"] for t in ins) or "none",
                ", ".join(dimnames) or "none"))
        missing = [t["name"] for t, v in zip(ins, vals) if v is None]
        if missing:
            raise TypeError("%s(): missing input %s" % (name, ", ".join(missing)))
        arrays = []
        for t, v, dt in zip(ins, vals, self.dtypes):
            if isinstance(v, np.ndarray):
                if v.dtype != dt:
                    raise ValueError("%s(): %s: expected dtype %s (%s), got %s" % (name, t["name"], dt, t["dtype"],
                                                                                   v.dtype))
                # the array itself when it is C-contiguous and aligned: no copy
                v = np.require(v, dt, ["C", "A"])
            else:
                v = np.asarray(v, dtype=dt, order="C")
            arrays.append(v)
        dims = _solve(spec, arrays, given)
        for d in spec["dims"]:
            if d["name"] not in dims:
                raise TypeError("%s(): give %s=..., a dim no input's shape determines (%d <= %s <= %d)" % (
                    name, d["name"], d["min"], d["name"], d["max"]))
            if not d["min"] <= dims[d["name"]] <= d["max"]:
                raise ValueError("%s(): %s = %d is out of its range [%d, %d]" % (
                    name, d["name"], dims[d["name"]], d["min"], d["max"]))
        for t, a in zip(ins, arrays):
            want = tuple(_value(x, dims) for x in t["shape"])
            if a.shape != want:
                raise ValueError("%s(): %s: expected shape %s, got %s" % (name, t["name"], want, a.shape))
        outs = spec["outputs"]
        if out is None:
            res = [np.empty(tuple(_value(x, dims) for x in t["shape"]), self.dtypes[len(ins) + j])
                   for j, t in enumerate(outs)]
        else:
            res = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(res) != len(outs):
                raise ValueError("%s(): out= needs %d array%s" % (name, len(outs), "" if len(outs) == 1 else "s"))
            for j, (t, r) in enumerate(zip(outs, res)):
                want = tuple(_value(x, dims) for x in t["shape"])
                dt = self.dtypes[len(ins) + j]
                if not isinstance(r, np.ndarray) or r.dtype != dt or r.shape != want or \
                        not r.flags.c_contiguous or not r.flags.writeable:
                    raise ValueError("%s(): out[%d] must be a writable C-contiguous %s array of shape %s" % (
                        name, j, dt, want))
        cargs = [model._ptr()] + ([seq._ptr()] if spec["sequence"] else []) + \
            [dims[d["name"]] for d in spec["dims"]] + \
            [a.ctypes.data for a in arrays] + [r.ctypes.data for r in res]
        if self.fn(*cargs) != 0:
            raise Error(model._error())
        return res[0] if len(res) == 1 else tuple(res)


def _api_of(lib, path, api):
    if api is not None:
        with open(api) as f:
            return json.load(f)
    try:
        text = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "nestc_model_api")))
    except ValueError:
        raise ValueError("%s: not a model library of nestc (it has no nestc_model_api; "
                         "build it with nestc build -o FILE.so, or give api=NAME.api.json)" % path) from None
    return json.loads(text)


class Model:
    """An instance of a compiled model: its weights bound, its entry points
    without state as methods. Close it (or use ``with``) to free it."""

    def __init__(self, library, weights=None, api=None):
        self._lib = ctypes.CDLL(os.path.abspath(library) if os.sep in library else library,
                                mode=os.RTLD_NOW | os.RTLD_LOCAL)
        self.api = _api_of(self._lib, library, api)
        if self.api.get("schema") != API_SCHEMA or self.api.get("version") != API_VERSION:
            raise ValueError("%s: API description of schema %r version %r; this nestrt reads %s version %d" % (
                library, self.api.get("schema"), self.api.get("version"), API_SCHEMA, API_VERSION))
        self.name = self.api["model"]
        lib, fns = self._lib, self.api["functions"]
        self._m = self._w = None
        self._lock = threading.Lock()
        self._seqs = weakref.WeakSet()
        for fn, res, args in (("nestrt_weights_open", ctypes.c_void_p, [ctypes.c_char_p, ctypes.POINTER(_Err)]),
                              ("nestrt_weights_close", None, [ctypes.c_void_p]),
                              ("nestrt_model_error", ctypes.c_char_p, [ctypes.c_void_p])):
            getattr(lib, fn).restype, getattr(lib, fn).argtypes = res, args
        for key, res, args in (("new", ctypes.c_void_p, [ctypes.c_void_p, ctypes.POINTER(_Err)]),
                               ("free", None, [ctypes.c_void_p]),
                               ("new_embedded", ctypes.c_void_p, [ctypes.POINTER(_Err)]),
                               ("seq_new", ctypes.c_void_p, [ctypes.c_void_p, ctypes.POINTER(_Err)]),
                               ("seq_reset", None, [ctypes.c_void_p]), ("seq_free", None, [ctypes.c_void_p])):
            if key in fns:
                f = getattr(lib, fns[key])
                f.restype, f.argtypes = res, args
        err = _Err()
        if weights is None and "new_embedded" in fns:
            m = getattr(lib, fns["new_embedded"])(ctypes.byref(err))
        elif weights is None:
            if self.api["weights"]:
                raise ValueError("%s: the model's weights are not compiled in: give weights=FILE" % library)
            m = getattr(lib, fns["new"])(None, ctypes.byref(err))   # a model without params
        else:
            if not isinstance(weights, (str, bytes, os.PathLike)):
                raise TypeError("weights: a path to a .safetensors or .gguf file")
            w = lib.nestrt_weights_open(os.fsencode(weights), ctypes.byref(err))
            if not w:
                raise Error(_message(err))
            self._w = w
            m = getattr(lib, fns["new"])(w, ctypes.byref(err))
        if not m:
            self._close_weights()
            raise Error(_message(err))
        self._m = m
        self._entries = {e["name"]: _Entry(lib, e) for e in self.api["entries"]}

    def __getattr__(self, name):
        entries = self.__dict__.get("_entries", {})
        if name in entries:
            e = entries[name]
            if e.spec["sequence"]:
                def need_seq(*a, **k):
                    raise TypeError("%s() reads the model's state: call it on a sequence (m.sequence().%s(...))" % (
                        name, name))
                return need_seq
            return lambda *a, **k: e(self, None, a, k)
        raise AttributeError("%s model has no entry point %r (entries: %s)" % (
            self.__dict__.get("name", "a"), name, ", ".join(entries)))

    def __dir__(self):
        return list(super().__dir__()) + list(self.__dict__.get("_entries", {}))

    @property
    def entries(self):
        """The entry points' descriptions (the API's "entries"), by name."""
        return {n: e.spec for n, e in self._entries.items()}

    def tokenizer(self, path=None):
        """The tokenizer of the weights file (a GGUF file with one), or of
        the GGUF file at path."""
        return Tokenizer(self, path)

    def sequence(self):
        """A new sequence: the model's state (zeroed) for one sequence."""
        if "seq_new" not in self.api["functions"]:
            raise TypeError("%s has no state: its entry points are methods of the model" % self.name)
        s = Sequence(self)
        self._seqs.add(s)
        return s

    def _ptr(self):
        if not self._m:
            raise ValueError("the %s model is closed" % self.name)
        return self._m

    def _error(self):
        msg = self._lib.nestrt_model_error(self._m)
        return msg.decode("utf-8", "replace") if msg else "failed"

    def _close_weights(self):
        if self._w:
            self._lib.nestrt_weights_close(self._w)
            self._w = None

    def close(self):
        """Frees the instance, its sequences and its weights (idempotent)."""
        with self._lock:
            for s in list(self._seqs):
                s.close()
            if self._m:
                getattr(self._lib, self.api["functions"]["free"])(self._m)
                self._m = None
            self._close_weights()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if self.__dict__.get("_m") or self.__dict__.get("_w"):
            self.close()

    def __repr__(self):
        return "<nestrt.Model %s: %s%s>" % (self.name, ", ".join(self.__dict__.get("_entries", {})),
                                            "" if self.__dict__.get("_m") else " (closed)")


class Sequence:
    """The state of one sequence of a model; the entry points that read or
    write state are its methods. Sequences of one model may run at once."""

    def __init__(self, model):
        self.model = model
        err = _Err()
        fns = model.api["functions"]
        self._s = getattr(model._lib, fns["seq_new"])(model._ptr(), ctypes.byref(err))
        if not self._s:
            raise Error(_message(err))

    def __getattr__(self, name):
        entries = self.model.__dict__.get("_entries", {})
        if name in entries and entries[name].spec["sequence"]:
            e = entries[name]
            return lambda *a, **k: e(self.model, self, a, k)
        return getattr(self.model, name)

    def _ptr(self):
        if not self._s:
            raise ValueError("the sequence is closed")
        return self._s

    def reset(self):
        """Zeroes the state: a new sequence in the same memory."""
        getattr(self.model._lib, self.model.api["functions"]["seq_reset"])(self._ptr())

    def close(self):
        if self.__dict__.get("_s"):
            getattr(self.model._lib, self.model.api["functions"]["seq_free"])(self._s)
            self._s = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if self.__dict__.get("_s") and self.model._m:
            self.close()


class Tokenizer:
    """The tokenizer of a GGUF file (nestrt(3)): m.tokenizer() for the
    model's weights file, or Tokenizer(model, "vocab.gguf")."""

    def __init__(self, model, path=None):
        lib = model._lib
        self._lib, self._t = lib, None
        P, E = ctypes.c_void_p, ctypes.POINTER(_Err)
        for fn, res, args in (("nestrt_tokenizer_open", P, [ctypes.c_char_p, E]),
                              ("nestrt_tokenizer_from_weights", P, [P, E]),
                              ("nestrt_tokenizer_free", None, [P]), ("nestrt_tokenizer_n_vocab", ctypes.c_int, [P]),
                              ("nestrt_tokenizer_bos", ctypes.c_int32, [P]),
                              ("nestrt_tokenizer_eos", ctypes.c_int32, [P]),
                              ("nestrt_tokenize", ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int,
                                                                 P, ctypes.c_int, E]),
                              ("nestrt_token_to_piece", ctypes.c_int, [P, ctypes.c_int32, ctypes.c_int,
                                                                       ctypes.c_char_p, ctypes.c_int, E]),
                              ("nestrt_detokenize", ctypes.c_int, [P, P, ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                                                                   ctypes.c_int, E])):
            getattr(lib, fn).restype, getattr(lib, fn).argtypes = res, args
        err = _Err()
        if path is None:
            if not model._w:
                raise ValueError("the model's weights are compiled in: give the tokenizer's GGUF file")
            t = lib.nestrt_tokenizer_from_weights(model._w, ctypes.byref(err))
        else:
            t = lib.nestrt_tokenizer_open(os.fsencode(path), ctypes.byref(err))
        if not t:
            raise Error(_message(err))
        self._t = t
        self.n_vocab = lib.nestrt_tokenizer_n_vocab(t)
        bos, eos = lib.nestrt_tokenizer_bos(t), lib.nestrt_tokenizer_eos(t)
        self.bos = None if bos < 0 else bos
        self.eos = None if eos < 0 else eos

    def encode(self, text, add_special=True, parse_special=True):
        """The ids of text (str or bytes), an int32 array."""
        b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        flags = (1 if add_special else 0) | (2 if parse_special else 0)
        err, cap = _Err(), max(16, len(b) + 2)
        while True:
            ids = np.empty(cap, np.int32)
            n = self._lib.nestrt_tokenize(self._t, b, len(b), flags, ids.ctypes.data, cap, ctypes.byref(err))
            if n < 0:
                raise Error(_message(err))
            if n <= cap:
                return ids[:n].copy()
            cap = n

    def decode_bytes(self, ids, special=False):
        """The bytes of ids (a piece may end inside a UTF-8 character)."""
        ids = np.ascontiguousarray(ids, np.int32)
        err, cap = _Err(), 16 * len(ids) + 16
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = self._lib.nestrt_detokenize(self._t, ids.ctypes.data, len(ids), 1 if special else 0, buf, cap,
                                            ctypes.byref(err))
            if n < 0:
                raise Error(_message(err))
            if n <= cap:
                return buf.raw[:n]
            cap = n

    def piece(self, tok, special=False):
        """Token tok's bytes (nestrt_token_to_piece: what generate.c prints)."""
        err, cap = _Err(), 64
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = self._lib.nestrt_token_to_piece(self._t, int(tok), 1 if special else 0, buf, cap, ctypes.byref(err))
            if n < 0:
                raise Error("token %d is outside the vocabulary of %d" % (tok, self.n_vocab))
            if n <= cap:
                return buf.raw[:n]
            cap = n

    def decode(self, ids, special=False):
        """The text of ids."""
        return self.decode_bytes(ids, special).decode("utf-8", "replace")

    def close(self):
        if self.__dict__.get("_t"):
            self._lib.nestrt_tokenizer_free(self._t)
            self._t = None

    def __del__(self):
        self.close()


def load(library, weights=None, *, api=None):
    """The model in the shared library `library` (built by nestc build -o
    FILE.so), its params bound from `weights` (a .safetensors or .gguf file;
    None for a library built with --embed-weights, or a model without
    params). api: a NAME.api.json to
    read instead of the one inside the library."""
    return Model(library, weights, api)
