#!/usr/bin/python3
"""The tokenizer of libnestrt (runtime/tokenize.c) against llama.cpp (issue #37, item 3):

- four synthetic vocabularies (vocab.py: `llama` SentencePiece BPE, `gpt2` byte-level BPE
  with GPT-2's pre-tokenizer, the same with LLaMA-3's and with llama.cpp's default) in
  GGUF files llama.cpp loads as models; the ids of every test string, with and without special tokens parsed, equal
  llama.cpp's own, stored in expected_NAME.json (made by expected.py with node-llama-cpp
  3.21.1; this suite does not run node);
- decode(encode(s)) == s for every string (but a llama text holding U+2581 itself,
  which SentencePiece reads as a space, as llama.cpp does), also with BOS added;
- invalid UTF-8 input: no error, the bytes come back; known ids for a few;
- single pieces (byte tokens, U+2581, controls with and without special rendering);
- malformed metadata, each refused with the file, the key and the reason;
- argument checks of the C API (driver.c's api command).

    /usr/bin/python3 tests/tokenize/run.py NESTC_PATH
Prints ok/FAIL lines and `N passed, N failed`.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "io"))
import gguf  # noqa: E402
import vocab  # noqa: E402

NESTC = os.path.abspath(sys.argv[1])
B = os.path.dirname(NESTC)
LIB = os.path.join(B, "libnestrt.a")
LINK_FLAGS = os.environ.get("NESTC_TEST_LDFLAGS", "").split()
ADD, PARSE = 1, 2
passed = failed = 0


def result(ok, name, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok " + name)
    else:
        failed += 1
        print("FAIL " + name + (": " + detail if detail else ""))


def run(args, stdin=None):
    return subprocess.run(args, input=stdin, capture_output=True)


def tokenize(driver, path, cases):
    """cases: (flags, bytes); returns per case (ids, decoded bytes) or the error text."""
    stdin = "".join("%d %s\n" % (f, t.hex() or "-") for f, t in cases).encode()
    r = run([driver, "tokenize", path], stdin)
    lines = r.stdout.decode(errors="replace").splitlines()
    if len(lines) != len(cases):
        raise RuntimeError("driver tokenize %s: %d lines for %d cases (exit %d): %s" %
                           (path, len(lines), len(cases), r.returncode, r.stderr.decode()[-2000:]))
    out = []
    for line in lines:
        if line.startswith("error: "):
            out.append(line[7:])
            continue
        ids, _, hexed = line[3:].partition("|")
        hexed = hexed.strip()
        out.append(([int(x) for x in ids.split()], b"" if hexed == "-" else bytes.fromhex(hexed)))
    return out


def check_vocab(driver, work, name):
    path = os.path.join(work, name + ".gguf")
    v = vocab.write(path, name)
    with open(os.path.join(HERE, "expected_%s.json" % name)) as f:
        exp = json.load(f)
    result(exp["fingerprint"] == vocab.fingerprint(v), "%s: vocabulary as the expectations were made from" % name,
           "vocab.py makes %s, expected_%s.json says %s: regenerate (make tokenize-expected)" %
           (vocab.fingerprint(v), name, exp["fingerprint"]))
    for how in ("open", "openw"):
        r = run([driver, how, path])
        result(r.stdout.decode(errors="replace").split() == ["ok", str(len(v["tokens"])), str(exp["bos"]),
                                                              str(exp["eos"])],
               "%s: n_vocab, BOS and EOS as llama.cpp's (%s)" % (name, how), r.stdout.decode(errors="replace").strip())
    cases = exp["cases"]
    result(len(cases) >= 200, "%s: at least 200 strings" % name, str(len(cases)))
    texts = [c["text"].encode("utf-8", "surrogatepass") for c in cases]
    got = tokenize(driver, path, [(0, t) for t in texts] + [(PARSE, t) for t in texts] +
                   [(ADD, t) for t in texts] + [(ADD | PARSE, t) for t in texts])
    n = len(texts)
    plain, special, add_plain, add_special = got[:n], got[n:2 * n], got[2 * n:3 * n], got[3 * n:]
    add_bos = name in ("llama", "llama3", "llama_nospace")
    spm = v["tokenizer.ggml.model"] == "llama"
    for i, c in enumerate(cases):
        label = "%s: %s" % (name, json.dumps(c["text"], ensure_ascii=True)[:60])
        for mode, key, res in (("", "ids", plain[i]), (" (special)", "ids_special", special[i])):
            if isinstance(res, str):
                result(False, label + mode + ": ids", res)
                result(False, label + mode + ": decode(encode(s)) == s", res)
                continue
            result(res[0] == c[key], label + mode + ": ids as llama.cpp's",
                   "got %s, llama.cpp %s" % (res[0], c[key]))
            if spm and "\u2581" in c["text"]:
                continue  # U+2581 in the input is a space to SentencePiece (llama.cpp likewise)
            result(res[1] == texts[i], label + mode + ": decode(encode(s)) == s", "decoded %r" % res[1])
        # BOS added (when the file says so) before the same ids; decoding drops it
        for mode, base, res in (("", plain[i], add_plain[i]), (" (special)", special[i], add_special[i])):
            if isinstance(res, str) or isinstance(base, str):
                result(False, label + mode + ": with BOS", str(res))
                continue
            want = ([exp["bos"]] if add_bos else []) + base[0]
            text = texts[i]
            if add_bos and mode:  # rendered
                text = v["tokens"][exp["bos"]][0].encode() + text
            ok = res[0] == want and (res[1] == text or (spm and "\u2581" in c["text"]))
            if not ok or i % 16 == 0:  # one line in 16 when they agree: the failures all show
                result(ok, label + mode + ": with BOS", "got %s, want %s, decoded %r" % (res[0], want, res[1]))

    # invalid UTF-8 in the input: not an error; the bytes come back
    bad = [b"\xff", b"\xc3", b"a\xe2\x82", b"\xe2\x82a", b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80",
           b"\xf8\x88\x80\x80\x80", b"caf\xc3", b"\x80\x80 x \xbf", b"<s\xff>", b"\xff<s>\xfe"]
    got = tokenize(driver, path, [(0, t) for t in bad] + [(PARSE, t) for t in bad])
    for t, res in zip(bad + bad, got):
        ok = not isinstance(res, str) and res[1] == t
        result(ok, "%s: invalid UTF-8 %s: tokenized, decodes back" % (name, t.hex()), str(res))
    tok = {s: i for i, (s, _, _) in enumerate(v["tokens"])}
    if spm:
        # llama.cpp: "\u2581" then each byte that no token covers as its <0xXX> token
        sp = [tok["\u2581"]] if v.get("add_space_prefix", 1) else []
        for t, want in ((b"\xff", sp + [tok["<0xFF>"]]), (b"\xc0\x80", sp + [tok["<0xC0>"], tok["<0x80>"]])):
            res = tokenize(driver, path, [(0, t)])[0]
            result(not isinstance(res, str) and res[0] == want, "%s: %s as byte tokens" % (name, t.hex()), str(res))
    else:
        # each byte as its byte-level token (no merges of these code points)
        b2u = vocab.bytes_to_unicode()
        res = tokenize(driver, path, [(0, b"\xff")])[0]
        result(not isinstance(res, str) and res[0] == [tok[b2u[0xff]]], "%s: ff as its byte token" % name, str(res))
    return v


def check_flags(driver, work):
    """add_bos_token, add_eos_token from the file; detokenizing with the space kept;
    a token's text and type."""
    v = vocab.vocab("llama")
    tok = {s: i for i, (s, _, _) in enumerate(v["tokens"])}
    texts = [b"Hello world", b"", b"a<s>b"]
    base = tokenize(driver, os.path.join(work, "llama.gguf"), [(PARSE, t) for t in texts])
    for bos, eos in ((0, 1), (1, 1), (0, 0)):
        path = os.path.join(work, "flags.gguf")
        vocab.write(path, "llama", override={"tokenizer.ggml.add_bos_token": (gguf.BOOL, bos),
                                             "tokenizer.ggml.add_eos_token": (gguf.BOOL, eos)}, tensors=False)
        got = tokenize(driver, path, [(ADD | PARSE, t) for t in texts])
        want = [[v["bos"]] * bos + b[0] + [v["eos"]] * eos for b in base]
        result([g[0] for g in got] == want and [g[1] for g in got] == [b"<s>" * bos + t + b"</s>" * eos for t in texts],
               "add_bos_token %d, add_eos_token %d" % (bos, eos), "got %s, want %s" % (got, want))
    # the space after the start and after a special token is the encoder's: dropped
    ids = [tok["<s>"], tok["\u2581the"], tok["<tool>"], tok["\u2581the"], tok["\u2581the"]]
    for flags, want in ((0, b"the<tool>the the"), (2, b" the<tool> the the"), (3, b"<s> the<tool> the the"),
                        (1, b"<s>the<tool>the the")):
        r = run([driver, "detok", os.path.join(work, "llama.gguf"), str(flags)] + [str(i) for i in ids])
        got = r.stdout.decode().strip()
        result(got == (want.hex() or "-"), "detokenize flags %d" % flags, "got %s, want %r" % (got, want))
    r = run([driver, "token", os.path.join(work, "llama.gguf"), "0", "1", str(tok["<0x41>"]), str(tok["<tool>"]),
             str(tok["<unused0>"]), str(tok["\u2581the"]), str(len(v["tokens"]))])
    want = ["%s %d" % (t.encode().hex(), k) for t, k in (("<unk>", 2), ("<s>", 3), ("<0x41>", 6), ("<tool>", 4),
                                                          ("<unused0>", 5), ("\u2581the", 1))] + ["none"]
    result(r.stdout.decode().splitlines() == want, "token texts and types", r.stdout.decode())


# llama.cpp's names of the pre-tokenizers (llama-vocab.cpp, release v0.4.0): the same split
# as the one the suite's vocabularies are tested with; LLaMA-3's own add BOS
GPT2_NAMES = ["gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
              "modern-bert", "mpt", "olmo", "jais", "exaone4", "trillion", "granite-docling"]
LLAMA3_NAMES = {"llama3": 1, "llama-v3": 1, "llama-bpe": 1, "falcon3": 1, "falcon-h1": 1, "pixtral": 1,
                "midm-2.0": 1, "lfm2": 1, "jina-v5-nano": 1, "dbrx": 0, "smaug-bpe": 0}


def check_pre_names(driver, work):
    texts = [t.encode() for t in vocab.strings()[::7]]
    want = {}
    for name in ("gpt2", "llama3"):
        want[name] = tokenize(driver, os.path.join(work, name + ".gguf"), [(0, t) for t in texts])
    v = vocab.vocab("gpt2")
    for pre, bos in [(p, 0) for p in GPT2_NAMES] + list(LLAMA3_NAMES.items()):
        path = os.path.join(work, "pre.gguf")
        vocab.write(path, "gpt2", override={"tokenizer.ggml.pre": (gguf.STRING, pre)}, tensors=False)
        got = tokenize(driver, path, [(0, t) for t in texts] + [(ADD, b"a")])
        ref = want["gpt2" if pre in GPT2_NAMES else "llama3"]
        a = tokenize(driver, os.path.join(work, "gpt2.gguf"), [(0, b"a")])[0][0]
        result(got[:-1] == ref and got[-1][0] == [v["bos"]] * bos + a,
               "pre-tokenizer %r: %s's split%s" % (pre, "GPT-2" if pre in GPT2_NAMES else "LLaMA-3",
                                                    ", BOS" if bos else ""))


def check_no_pre(driver, work):
    """A gpt2 file without tokenizer.ggml.pre tokenizes as "default" (llama.cpp too)."""
    path = os.path.join(work, "nopre.gguf")
    vocab.write(path, "default", ["tokenizer.ggml.pre"], tensors=False)
    texts = [t.encode() for t in vocab.strings()]
    want = tokenize(driver, os.path.join(work, "default.gguf"), [(0, t) for t in texts])
    got = tokenize(driver, path, [(0, t) for t in texts])
    result(got == want and not any(isinstance(g, str) for g in got),
           "no tokenizer.ggml.pre: llama.cpp's default pre-tokenizer")


def check_pieces(driver, work, v_llama, v_gpt2):
    tok = {s: i for i, (s, _, _) in enumerate(v_llama["tokens"])}
    path = os.path.join(work, "llama.gguf")
    ids = [tok["<0x41>"], tok["<0x0A>"], tok["\u2581"], tok["<s>"], tok["<unk>"], tok["<tool>"], tok["<unused0>"]]
    ids += [i for s, i in tok.items() if s.startswith("\u2581") and len(s) > 3][:1]
    word = [s for s in tok if s.startswith("\u2581") and len(s) > 3][0]
    for flags, want in ((0, ["41", "0a", "20", "-", "-", b"<tool>".hex(), "-", (" " + word[1:]).encode().hex()]),
                        (1, ["41", "0a", "20", b"<s>".hex(), b"<unk>".hex(), b"<tool>".hex(), "-",
                             (" " + word[1:]).encode().hex()])):
        r = run([driver, "piece", path, str(flags)] + [str(i) for i in ids])
        result(r.stdout.decode(errors="replace").split() == want, "llama: pieces (flags %d)" % flags, r.stdout.decode(errors="replace"))
    r = run([driver, "piece", path, "0", str(len(v_llama["tokens"]))])
    result(r.stdout.decode(errors="replace").startswith("error: " + path + ": token %d is outside the vocabulary of %d tokens" %
                                        (len(v_llama["tokens"]), len(v_llama["tokens"]))),
           "llama: piece of an id outside", r.stdout.decode(errors="replace"))
    tok = {s: i for i, (s, _, _) in enumerate(v_gpt2["tokens"])}
    path = os.path.join(work, "gpt2.gguf")
    b2u = vocab.bytes_to_unicode()
    merged = [s for s in tok if len(s) > 2 and s.startswith(b2u[32])][0]
    u2b = {c: b for b, c in b2u.items()}
    ids = [tok[b2u[0]], tok[b2u[32]], tok[b2u[0xe9]], tok["<|endoftext|>"], tok[merged]]
    want = ["00", "20", "e9", "-", bytes(u2b[c] for c in merged).hex()]
    r = run([driver, "piece", path, "0"] + [str(i) for i in ids])
    result(r.stdout.decode(errors="replace").split() == want, "gpt2: pieces", r.stdout.decode(errors="replace"))
    r = run([driver, "piece", path, "1", str(tok["<|endoftext|>"])])
    result(r.stdout.decode(errors="replace").split() == [b"<|endoftext|>".hex()], "gpt2: a control piece rendered", r.stdout.decode(errors="replace"))


def check_malformed(driver, work):
    L, G = "llama", "gpt2"
    S, A = gguf.STRING, gguf.ARRAY
    v = vocab.vocab(L)
    n = len(v["tokens"])
    toks = [t for t, _, _ in v["tokens"]]
    ng = len(vocab.vocab(G)["tokens"])
    merges = vocab.vocab(G)["merges"]
    cases = [
        ("no model", L, ["tokenizer.ggml.model"], {}, "no tokenizer (no metadata 'tokenizer.ggml.model')"),
        ("unknown model", L, [], {"tokenizer.ggml.model": (S, "bert")},
         "metadata 'tokenizer.ggml.model' is 'bert': only 'llama' and 'gpt2' are supported"),
        ("model llamx", L, [], {"tokenizer.ggml.model": (S, "llamx")},
         "metadata 'tokenizer.ggml.model' is 'llamx': only 'llama' and 'gpt2' are supported"),
        ("model gpt3", L, [], {"tokenizer.ggml.model": (S, "gpt3")},
         "metadata 'tokenizer.ggml.model' is 'gpt3': only 'llama' and 'gpt2' are supported"),
        ("model not a string", L, [], {"tokenizer.ggml.model": (gguf.U32, 1)},
         "metadata 'tokenizer.ggml.model' is of type u32, not a string"),
        ("no tokens", L, ["tokenizer.ggml.tokens"], {}, "no metadata 'tokenizer.ggml.tokens'"),
        ("tokens not an array", L, [], {"tokenizer.ggml.tokens": (S, "a")},
         "metadata 'tokenizer.ggml.tokens' is of type string, not an array"),
        ("tokens of integers", L, [], {"tokenizer.ggml.tokens": (A, (gguf.I32, [1, 2]))},
         "metadata 'tokenizer.ggml.tokens' is an array of i32, not of strings"),
        ("no tokens at all", L, [], {"tokenizer.ggml.tokens": (A, (S, []))},
         "metadata 'tokenizer.ggml.tokens' has 0 tokens"),
        ("no scores", L, ["tokenizer.ggml.scores"], {}, "no metadata 'tokenizer.ggml.scores'"),
        ("scores short", L, [], {"tokenizer.ggml.scores": (A, (gguf.F32, [0.0] * (n - 1)))},
         "metadata 'tokenizer.ggml.scores' has %d elements for %d tokens" % (n - 1, n)),
        ("scores of strings", L, [], {"tokenizer.ggml.scores": (A, (S, ["a"] * n))},
         "metadata 'tokenizer.ggml.scores' is an array of string, not of f32"),
        ("token types long", L, [], {"tokenizer.ggml.token_type": (A, (gguf.I32, [1] * (n + 1)))},
         "metadata 'tokenizer.ggml.token_type' has %d elements for %d tokens" % (n + 1, n)),
        ("token type 9", L, [], {"tokenizer.ggml.token_type": (A, (gguf.I32, [1] * 5 + [9] + [1] * (n - 6)))},
         "metadata 'tokenizer.ggml.token_type': token 5 has type 9, not one of 0-6"),
        ("token types of floats", L, [], {"tokenizer.ggml.token_type": (A, (gguf.F32, [1.0] * n))},
         "metadata 'tokenizer.ggml.token_type' is an array of f32, not of i32"),
        ("BOS outside", L, [], {"tokenizer.ggml.bos_token_id": (gguf.U32, n)},
         "metadata 'tokenizer.ggml.bos_token_id' is %d, outside the vocabulary of %d tokens" % (n, n)),
        ("EOS negative", L, [], {"tokenizer.ggml.eos_token_id": (gguf.I32, -1)},
         "metadata 'tokenizer.ggml.eos_token_id' is -1, outside the vocabulary of %d tokens" % n),
        ("EOS a string", L, [], {"tokenizer.ggml.eos_token_id": (S, "2")},
         "metadata 'tokenizer.ggml.eos_token_id' is of type string, not an integer"),
        ("add_bos_token 2", L, [], {"tokenizer.ggml.add_bos_token": (gguf.U8, 2)},
         "metadata 'tokenizer.ggml.add_bos_token' is 2, not a boolean"),
        ("token not UTF-8", L, [], {"tokenizer.ggml.tokens": (A, (S, toks[:300] + [b"a\xffb"] + toks[301:]))},
         "metadata 'tokenizer.ggml.tokens': token 300 'a"),
        ("token with a NUL", L, [], {"tokenizer.ggml.tokens": (A, (S, toks[:300] + [b"a\x00b"] + toks[301:]))},
         "is not valid UTF-8 (byte 1): a NUL"),
        ("token repeated", L, [], {"tokenizer.ggml.tokens": (A, (S, toks[:300] + [toks[299]] + toks[301:]))},
         "metadata 'tokenizer.ggml.tokens': token 300 '%s' repeats token 299" % toks[299]),
        ("byte token not <0xXX>", L, [], {"tokenizer.ggml.tokens": (A, (S, toks[:3] + ["<0xZZ>"] + toks[4:]))},
         "metadata 'tokenizer.ggml.token_type': token 3 '<0xZZ>' is of type byte but is not <0xXX>"),
        ("no merges", G, ["tokenizer.ggml.merges"], {}, "no metadata 'tokenizer.ggml.merges'"),
        ("merge without a space", G, [], {"tokenizer.ggml.merges": (A, (S, merges[:3] + ["ab"] + merges[4:]))},
         "metadata 'tokenizer.ggml.merges': merge 3 'ab' is not two pieces separated by a space"),
        ("merge with a space last", G, [], {"tokenizer.ggml.merges": (A, (S, merges[:3] + ["ab "] + merges[4:]))},
         "merge 3 'ab ' is not two pieces separated by a space"),
        ("merge not UTF-8", G, [], {"tokenizer.ggml.merges": (A, (S, merges[:7] + [b"\xc3 x"] + merges[8:]))},
         "metadata 'tokenizer.ggml.merges': merge 7 '"),
        ("pre-tokenizer not a string", G, [], {"tokenizer.ggml.pre": (gguf.I32, 2)},
         "metadata 'tokenizer.ggml.pre' is of type i32, not a string"),
        ("unsupported pre-tokenizer", G, [], {"tokenizer.ggml.pre": (S, "qwen2")},
         "metadata 'tokenizer.ggml.pre' is 'qwen2': supported are llama.cpp's default, GPT-2's"),
        ("gpt2 BOS outside", G, [], {"tokenizer.ggml.bos_token_id": (gguf.U64, 1 << 40)},
         "metadata 'tokenizer.ggml.bos_token_id' is %d, outside the vocabulary of %d tokens" % (1 << 40, ng)),
        ("BOS added but none", G, ["tokenizer.ggml.bos_token_id"],
         {"tokenizer.ggml.tokens": (A, (S, ["a", "b"])), "tokenizer.ggml.scores": (A, (gguf.F32, [0.0, 0.0])),
          "tokenizer.ggml.token_type": (A, (gguf.I32, [1, 1])), "tokenizer.ggml.eos_token_id": (gguf.U32, 0),
          "tokenizer.ggml.merges": (A, (S, ["a b"])), "tokenizer.ggml.add_bos_token": (gguf.BOOL, 1)},
         "the tokenizer adds a BOS token but has none (no 'tokenizer.ggml.bos_token_id', and 2 tokens)"),
    ]
    # UTF-8 as Unicode defines it: overlong forms, surrogates, code points past U+10FFFF,
    # cut sequences and stray continuation bytes are not
    for bad in (b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf0\x80\x80\x80",
                b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xe2\x82", b"\x80", b"\xf8\x88\x80\x80\x80"):
        cases.append(("token %s" % bad.hex(), L, [], {"tokenizer.ggml.tokens": (A, (S, toks[:300] + [bad] + toks[301:]))},
                      "' is not valid UTF-8 (byte 0)"))
    for label, name, omit, override, want in cases:
        path = os.path.join(work, "bad.gguf")
        vocab.write(path, name, omit, override, tensors=False)
        r = run([driver, "open", path])
        out = r.stdout.decode(errors="replace").strip()
        ok = r.returncode == 1 and out.startswith("error: " + path + ": ") and want in out
        result(ok, "malformed: " + label, "exit %d, %s; want ...%s" % (r.returncode, out, want))
    # the edges of UTF-8 are tokens
    for good in (b"\xc2\x80", b"\xdf\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xee\x80\x80",
                 b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\x7f"):
        path = os.path.join(work, "edge.gguf")
        vocab.write(path, L, [], {"tokenizer.ggml.tokens": (A, (S, toks[:300] + [good] + toks[301:]))}, tensors=False)
        r = run([driver, "open", path])
        result(r.returncode == 0, "UTF-8 token %s accepted" % good.hex(), r.stdout.decode(errors="replace"))
    # a llama vocabulary without byte tokens: what no token covers cannot be tokenized
    toks3 = [("<b%02x>" % i if t.startswith("<0x") else t) for i, t in enumerate(toks)]
    types = [1 if t.startswith("<0x") else k for t, (_, _, k) in zip(toks, v["tokens"])]
    path = os.path.join(work, "nobytes.gguf")
    vocab.write(path, L, [], {"tokenizer.ggml.tokens": (A, (S, toks3)),
                              "tokenizer.ggml.token_type": (A, (gguf.I32, types))}, tensors=False)
    got = tokenize(driver, path, [(0, "a \u9f8d".encode()), (0, b"ab")])
    result(got[0] == path + ": no token for byte 0xE9 (no <0xE9> token)" and not isinstance(got[1], str),
           "no byte token for a byte no token covers", str(got))
    # not a tokenizer's file at all
    path = os.path.join(work, "none.gguf")
    with open(path, "wb") as f:
        f.write(gguf.encode([("general.architecture", S, "llama")]))
    r = run([driver, "open", path])
    result(r.stdout.decode(errors="replace").strip() == "error: %s: no tokenizer (no metadata 'tokenizer.ggml.model')" % path,
           "malformed: a GGUF file without a tokenizer", r.stdout.decode(errors="replace"))
    r = run([driver, "open", os.path.join(work, "missing.gguf")])
    result(r.returncode == 1 and "missing.gguf" in r.stdout.decode(errors="replace"), "malformed: no such file", r.stdout.decode(errors="replace"))
    with open(os.path.join(work, "gpt2.gguf"), "rb") as f:
        data = f.read()
    # nestrt_tokenizer_open reads the metadata alone: a file whose tensor data is cut
    # still has its tokenizer (the weights reader refuses the file)
    path = os.path.join(work, "nodata.gguf")
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    r, rw = run([driver, "open", path]), run([driver, "openw", path])
    result(r.stdout.decode().split()[:2] == ["ok", str(len(vocab.vocab(G)["tokens"]))] and rw.returncode == 1 and
           "passes the end of the data" in rw.stdout.decode(), "a file with its tensors cut: the tokenizer alone",
           r.stdout.decode() + rw.stdout.decode())
    path = os.path.join(work, "cut.gguf")
    with open(path, "wb") as f:
        f.write(data[:5000])
    r = run([driver, "open", path])
    result(r.returncode == 1 and r.stdout.decode(errors="replace").startswith("error: " + path), "malformed: a cut file",
           r.stdout.decode(errors="replace"))


def main():
    with tempfile.TemporaryDirectory() as work:
        driver = os.path.join(work, "driver")
        r = run(["cc", "-O1", "-g", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "runtime"),
                 os.path.join(HERE, "driver.c"), LIB, "-lm", "-lpthread"] + LINK_FLAGS + ["-o", driver])
        if r.returncode != 0:
            result(False, "build driver.c", r.stderr.decode())
        else:
            v_llama = check_vocab(driver, work, "llama")
            v_gpt2 = check_vocab(driver, work, "gpt2")
            check_vocab(driver, work, "llama3")
            check_vocab(driver, work, "default")
            check_vocab(driver, work, "llama_nospace")
            check_flags(driver, work)
            check_no_pre(driver, work)
            check_pre_names(driver, work)
            check_pieces(driver, work, v_llama, v_gpt2)
            check_malformed(driver, work)
            r = run([driver, "api", os.path.join(work, "llama.gguf")])
            for line in r.stdout.decode(errors="replace").splitlines():
                if line.startswith("ok ") or line.startswith("FAIL "):
                    result(line.startswith("ok "), "api: " + line.split(" ", 1)[1])
            result(r.returncode == 0, "api: driver exit status", str(r.returncode))
    print("%d passed, %d failed" % (passed, failed))
    return failed == 0


sys.exit(0 if main() else 1)
