#!/usr/bin/python3
"""Synthetic tokenizer vocabularies in GGUF files that llama.cpp loads as models, and the
test strings of the tokenizer suite. Deterministic: the same files every run (the stored
expectations of llama.cpp's ids, tests/tokenize/expected_*.json, were made from them).

- llama: tokenizer.ggml.model "llama" (SentencePiece BPE): <unk> <s> </s>, the 256
  <0xXX> byte tokens, a control <ctl> and a user-defined <tool>, one unused token, the
  characters of a fixed corpus (ASCII, accented Latin, Greek, Cyrillic, CJK, Hangul,
  emoji) and about 2,600 pieces learned from it by BPE over "\u2581"-escaped words, scored
  -(rank // 2) (pairs of equal scores, so ties are taken leftmost first), in a tiny
  `llama` model (1 block, D=64).
- gpt2: tokenizer.ggml.model "gpt2", pre "gpt-2": GPT-2's byte-level alphabet, about 2,000
  merges learned from the same corpus (words split roughly as GPT-2 splits them),
  <|endoftext|> (control, BOS and EOS) and <tool> (user-defined), in a tiny `gpt2` model.
- llama3: the gpt2 vocabulary with pre "llama-bpe" (LLaMA-3's split, whole-word
  tokens, BOS added) in a tiny `llama` model.
- default: the gpt2 vocabulary with pre "default" (llama.cpp's cascade: punctuation
  runs, GPT-2's split, number runs, ASCII digits in threes) in a tiny `gpt2` model.
- llama_nospace: the llama vocabulary with tokenizer.ggml.add_space_prefix false.

    /usr/bin/python3 tests/tokenize/vocab.py DIR          writes DIR/NAME.gguf for each
    /usr/bin/python3 tests/tokenize/vocab.py --strings    prints the test strings (JSON)
    /usr/bin/python3 tests/tokenize/vocab.py --fuzz-seeds DIR
        writes the seeds of tests/fuzz/fuzz_tokenize.c: a 2-byte length, a text, and
        each vocabulary's metadata as a GGUF file (no tensors)

Needs NumPy (Debian's /usr/bin/python3); GGUF writing is tests/io/gguf.py's.
"""
import hashlib
import json
import os
import random
import re
import sys
import unicodedata

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "io"))
import gguf  # noqa: E402

SP = "\u2581"
WORDS = """the of and to in is that it was for on are as with his they at be this from have or by one had
not but what all were when we there can an your which their said if do will each about how up out them
then she many some so these would other into has more her two like him see time could no make than first
been its who now people my made over did down only way find use may water long little very after words
called just where most know get through back much before go good new write our used me man too any day same
right look think also around another came come work three word must because does part even place well such
here take why things help put years different away again off went old number great tell men say small every
found still between name should home big give air line set own under read last never us left end along while
might next sound below saw something thought both few those always looked show large often together asked
house don't world going want school important until form food keep children feet land side without boy once
animals life enough took sometimes four head above kind began almost live page got earth need far hand high
year mother light parts country father let night following picture being study second eyes soon times story
boys since white days ever paper hard near sentence better best across during today others however sure means
knew it's try told young miles sun ways thing whole hear example heard several change answer room sea against
top turned learn point city play toward five using himself usually caf\u00e9 na\u00efve r\u00e9sum\u00e9
Z\u00fcrich S\u00e3o Paulo \u00c5ngstr\u00f6m se\u00f1or fa\u00e7ade \u0153uvre \u00e9t\u00e9 \u00fcber
Stra\u00dfe M\u00fcnchen cr\u00e8me br\u00fbl\u00e9e ni\u00f1o co\u00f6perate \u00e0 la fran\u00e7aise
\u0391\u03b8\u03ae\u03bd\u03b1 \u03ba\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03b1\u03b2\u03b3
\u043f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440 \u041c\u043e\u0441\u043a\u0432\u0430
\u65e5\u672c\u8a9e \u4e2d\u6587 \u6771\u4eac \u6f22\u5b57 \u6587\u5b57 \u4eba\u6c11 \u5927\u5b66
\ud55c\uad6d\uc5b4 \uc11c\uc6b8 \u3053\u3093\u306b\u3061\u306f \u3042\u308a\u304c\u3068\u3046
\U0001f600 \U0001f680 \U0001f44d 2024 1999 3.14 100 42 7 0 12345 (a) [b] {c} "quoted" end. yes! no? a, b;
c: x+y=z a-b a_b a/b #tag @user $5 50% *bold* ~tilde | pipe ^caret `code` <tag> 'single' IT'S DON'T WE'LL
I'M YOU'RE THEY'VE HE'D""".split()


def corpus():
    rng = random.Random(37)
    lines = []
    for _ in range(1500):
        n = rng.randint(3, 12)
        lines.append(" ".join(rng.choice(WORDS) for _ in range(n)))
    return lines


def bpe(words, merges_wanted):
    """BPE over {word tuple of symbols: count}: the merges in order (most frequent pair,
    ties by the pair's text)."""
    words = dict(words)
    merges = []
    for _ in range(merges_wanted):
        pairs = {}
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        (a, b), c = best
        merges.append((a, b))
        new = {}
        for w, cnt in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + cnt
        words = new
    return merges


def llama_vocab():
    text = corpus()
    counts = {}
    for line in text:
        for w in line.split(" "):
            t = tuple(SP + w)
            counts[t] = counts.get(t, 0) + 1
    merges = bpe(counts, 2600)
    tokens = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    tokens += [("<0x%02X>" % b, 0.0, 6) for b in range(256)]
    # "<tool>x" holds "<tool>": special tokens are matched longest first
    tokens += [("<ctl>", 0.0, 3), ("<tool>", 0.0, 4), ("<unused0>", 0.0, 5), ("<tool>x", 0.0, 4)]
    chars = sorted(set("".join(text)) | set(SP) | set(chr(c) for c in range(0x21, 0x7f)))
    seen = set(t for t, _, _ in tokens)
    for i, (a, b) in enumerate(merges):
        if a + b not in seen:
            seen.add(a + b)
            tokens.append((a + b, -float(i // 2), 1))
    for i, ch in enumerate(chars):
        if ch not in seen:
            seen.add(ch)
            tokens.append((ch, -1e5 - i, 1))
    return {"tokenizer.ggml.model": "llama", "tokens": tokens, "bos": 1, "eos": 2}


def bytes_to_unicode():
    bs = list(range(0x21, 0x7f)) + list(range(0xa1, 0xad)) + list(range(0xae, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def gpt2_vocab(pre):
    b2u = bytes_to_unicode()
    counts = {}
    # roughly GPT-2's split, but contractions in either case (LLaMA-3's), so that there
    # are merges of "'S" and the like, which GPT-2's split never makes
    split = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+")
    for line in corpus():
        for w in split.findall(line):
            t = tuple(b2u[b] for b in w.encode())
            counts[t] = counts.get(t, 0) + 1
    merges = bpe(counts, 2000)
    tokens = [(b2u[b], 0.0, 1) for b in range(256)]
    seen = set(t for t, _, _ in tokens)
    for a, b in merges:
        if a + b not in seen:
            seen.add(a + b)
            tokens.append((a + b, 0.0, 1))
    eot = len(tokens)
    tokens += [("<|endoftext|>", 0.0, 3), ("<tool>", 0.0, 4)]
    return {"tokenizer.ggml.model": "gpt2", "tokens": tokens, "merges": ["%s %s" % m for m in merges],
            "pre": pre, "bos": eot, "eos": eot}


def vocab(name):
    return {"llama": llama_vocab, "gpt2": lambda: gpt2_vocab("gpt-2"), "llama3": lambda: gpt2_vocab("llama-bpe"),
            "default": lambda: gpt2_vocab("default"),
            "llama_nospace": lambda: dict(llama_vocab(), add_space_prefix=0)}[name]()


def vocab_kv(v, omit=(), override=None):
    """The tokenizer's metadata: (key, type, value) entries; omit drops keys, override
    replaces or adds them ({key: (type, value)})."""
    toks = v["tokens"]
    kv = [("tokenizer.ggml.model", gguf.STRING, v["tokenizer.ggml.model"]),
          ("tokenizer.ggml.tokens", gguf.ARRAY, (gguf.STRING, [t for t, _, _ in toks])),
          ("tokenizer.ggml.scores", gguf.ARRAY, (gguf.F32, [s for _, s, _ in toks])),
          ("tokenizer.ggml.token_type", gguf.ARRAY, (gguf.I32, [k for _, _, k in toks])),
          ("tokenizer.ggml.bos_token_id", gguf.U32, v["bos"]),
          ("tokenizer.ggml.eos_token_id", gguf.U32, v["eos"])]
    if "merges" in v:
        kv.append(("tokenizer.ggml.merges", gguf.ARRAY, (gguf.STRING, v["merges"])))
        kv.append(("tokenizer.ggml.pre", gguf.STRING, v["pre"]))
    if v["tokenizer.ggml.model"] == "llama":
        kv.append(("tokenizer.ggml.add_bos_token", gguf.BOOL, 1))
        kv.append(("tokenizer.ggml.add_space_prefix", gguf.BOOL, v.get("add_space_prefix", 1)))
    override = dict(override or {})
    out = []
    for k, t, x in kv:
        if k in omit:
            continue
        if k in override:
            t, x = override.pop(k)
        out.append((k, t, x))
    out += [(k, t, x) for k, (t, x) in override.items()]
    return out


def fingerprint(v):
    """A digest of the vocabulary's contents: the expectations name the one they were made from."""
    h = hashlib.sha256(json.dumps([v["tokens"], v.get("merges"), v.get("pre"), v["bos"], v["eos"]] +
                                  ([v["add_space_prefix"]] if "add_space_prefix" in v else [])).encode())
    return h.hexdigest()[:16]


def model_kv_tensors(arch, n_vocab, seed=0):
    """Hyper-parameters and small random F32 weights of a tiny `llama` or `gpt2` model,
    with llama.cpp's names (ne as GGUF lists them: the input dimension first)."""
    D, F, H, L, CTX = 64, 128, 4, 1, 256
    rng = np.random.default_rng(seed)
    ts = []

    def t(name, *ne, scale=0.02, ones=False):
        n = int(np.prod(ne))
        x = np.ones(n, np.float32) if ones else (rng.standard_normal(n) * scale).astype(np.float32)
        ts.append({"name": name, "ne": list(ne), "type": "f32", "data": x.astype("<f4").tobytes()})

    kv = [("general.architecture", gguf.STRING, arch), ("general.name", gguf.STRING, "nestc-tokenizer-test"),
          (arch + ".context_length", gguf.U32, CTX), (arch + ".embedding_length", gguf.U32, D),
          (arch + ".block_count", gguf.U32, L), (arch + ".feed_forward_length", gguf.U32, F),
          (arch + ".attention.head_count", gguf.U32, H)]
    t("token_embd.weight", D, n_vocab)
    if arch == "llama":
        kv += [(arch + ".attention.head_count_kv", gguf.U32, H), (arch + ".rope.dimension_count", gguf.U32, D // H),
               (arch + ".attention.layer_norm_rms_epsilon", gguf.F32, 1e-5), (arch + ".vocab_size", gguf.U32, n_vocab)]
        t("output_norm.weight", D, ones=True)
        t("output.weight", D, n_vocab)
        for i in range(L):
            p = "blk.%d." % i
            t(p + "attn_norm.weight", D, ones=True)
            for w in ("attn_q", "attn_k", "attn_v", "attn_output"):
                t(p + w + ".weight", D, D)
            t(p + "ffn_norm.weight", D, ones=True)
            t(p + "ffn_gate.weight", D, F)
            t(p + "ffn_up.weight", D, F)
            t(p + "ffn_down.weight", F, D)
    else:
        kv += [(arch + ".attention.layer_norm_epsilon", gguf.F32, 1e-5)]
        t("position_embd.weight", D, CTX)
        t("output_norm.weight", D, ones=True)
        t("output_norm.bias", D)
        t("output.weight", D, n_vocab)
        for i in range(L):
            p = "blk.%d." % i
            t(p + "attn_norm.weight", D, ones=True)
            t(p + "attn_norm.bias", D)
            t(p + "attn_qkv.weight", D, 3 * D)
            t(p + "attn_qkv.bias", 3 * D)
            t(p + "attn_output.weight", D, D)
            t(p + "attn_output.bias", D)
            t(p + "ffn_norm.weight", D, ones=True)
            t(p + "ffn_norm.bias", D)
            t(p + "ffn_up.weight", D, F)
            t(p + "ffn_up.bias", F)
            t(p + "ffn_down.weight", F, D)
            t(p + "ffn_down.bias", D)
    return kv, ts


ARCH = {"llama": "llama", "gpt2": "gpt2", "llama3": "llama", "default": "gpt2", "llama_nospace": "llama"}


def write(path, name, omit=(), override=None, tensors=True):
    v = vocab(name)
    kv, ts = model_kv_tensors(ARCH[name], len(v["tokens"]))
    with open(path, "wb") as f:
        f.write(gguf.encode(kv + vocab_kv(v, omit, override), ts if tensors else []))
    return v


def strings():
    """The test strings: hand-picked cases, then random mixtures of the corpus's words,
    characters outside it, digits, whitespace and special tokens' texts."""
    s = ["", " ", "  ", "   ", "\t", "\n", "\n\n", " \n", "\r\n", "\t\t ", "a", "A", " a", "a ", " a ",
         "  a", "a  ", "a  b", "a   b", "a\tb", "a\nb", "a\n\nb", "a \n b", " \t\n ", "Hello", "Hello world",
         " Hello world", "Hello world ", "Hello  world", "hello, world!", "Hello\nworld\n", "\tindented",
         "the quick brown fox jumps over the lazy dog", "THE QUICK BROWN FOX", "it's", "don't", "we'll",
         "they've", "I'm", "you're", "he'd", "IT'S", "DON'T", "WE'LL", "'s", "'", "''", "a'b", "rock 'n' roll",
         "caf\u00e9", "na\u00efve r\u00e9sum\u00e9", "Z\u00fcrich", "S\u00e3o Paulo", "\u00c5ngstr\u00f6m",
         "e\u0301", "\u00e9t\u00e9 \u00e0 Paris", "Stra\u00dfe", "\u00ff\u00fe", "\u0153uvre", "\u00c6sir",
         "\u65e5\u672c\u8a9e", "\u6771\u4eac\u306f\u5927\u304d\u3044", "\u4e2d\u6587\u5b57", "\u6f22\u5b57 \u6587\u5b57",
         "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c",
         "\u9f8d", "\u4e00\u4e8c\u4e09", "\u043f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440",
         "\u0391\u03b8\u03ae\u03bd\u03b1", "\u05e9\u05dc\u05d5\u05dd", "\u0645\u0631\u062d\u0628\u0627",
         "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
         "\U0001f600", "\U0001f680 launch", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
         "\u2764\ufe0f", "\U0001f1eb\U0001f1f7", "a\U0001f600b", "\U0001f600 \U0001f600", "\u2603",
         "0", "1", "12", "123", "1234", "12345", "1234567", "3.14159", "1,000,000", "-42", "+7", "2024-01-01",
         "a1b2c3", "x2", "\u0661\u0662\u0663", "\u00bd", "\u2167", "\u2460\u2461", "\uff11\uff12\uff13",
         "12 34", " 12", "12 ", "a 1", "1 a",
         "(a)", "[b]", "{c}", "\"q\"", "a.b", "a..b", "...", "!!!", "?!", "a, b; c: d", "x+y=z", "a-b_c",
         "#tag @user $5 50%", "<tag>", "</tag>", "<", ">", "<<>>", "a<b>c", "&amp;", "path/to/file.txt",
         "C:\\dir\\file", "http://example.com/a?b=c&d=e", "foo()", "f(x) = x^2", "`code`", "~~", "|", "\\",
         "\u00a0", "a\u00a0b", "\u3000", "a\u2003b", "\u2028", "\u200b", "\u00ad", "\ufeff", "\x7f", "\x01\x02",
         "\x00", "a\x00b", "\u2581", "\u2581\u2581", "a\u2581b",
         "<s>", "</s>", "<unk>", "<ctl>", "<tool>", "<unused0>", "<|endoftext|>", "<s>hello", "hello</s>",
         " <s> ", "<s><s>", "a<s>b", "a <s> b", "<tool>x", "x<tool>", "<tool> <tool>", "<ctl>text<ctl>",
         "<|endoftext|>next", "a<|endoftext|>b", " <|endoftext|> ", "<|endoftext|><|endoftext|>",
         "<s>\n</s>", "<0x41>", "<0x0A>", "<s", "s>", "</s", "<|endoftext|", "<tool", "tool>",
         "Line one.\nLine two.\n\nLine four.", "    four spaces", "trailing spaces    ", "tabs\t\tand\tmore",
         "mixed \t \n whitespace", "\n\n\nnewlines first", "last newlines\n\n\n", " \u00e9", "  \u65e5",
         "\u00e9 ", "1 2 3 4 5 6 7 8 9 10", "aaaaaaaaaaaaaaaaaaaa", "ababababab", "the the the the",
         "ThE qUiCk", "CAF\u00c9", "\u00c9COLE", "\u00df\u1e9e", "\u0130stanbul", "\u212a", "\u017ft",
         "'S 'T 'RE 'VE 'M 'LL 'D", "'re've'll", "x's y't z'm", "it\u2019s",
         "\u00abquoted\u00bb", "\u00bfqu\u00e9?", "a\u2014b", "\u201csmart\u201d", "1234567890", "12.345,67",
         "a`b", "x^2|y", "\u00a71", "\u0663\u0664\u0665\u0666", "a1234b", " 12345 ", "(1+2)*3=9", "--help",
         "\u3002\u3001", "#!/bin/sh", "a.b.c", "$$$", "<=>", "~/x", "\u2026", "e.g.,"]
    # each of Unicode's White_Space characters, alone and between words
    for c in (0x9, 0xa, 0xb, 0xc, 0xd, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005,
              0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000):
        s.append("x%sy %s%sz" % (chr(c), chr(c), chr(c)))
    s += ["<tool>x", "a<tool>xb", "<tool><tool>x", "x<tool>"]
    # texts of the lengths where the tokenizer's buffers grow (64 and 128 code points)
    s += [("abcd efgh " * 13)[:64], ("abcd efgh " * 13)[:128], "\u00e9" * 64, "x" * 127 + "\u65e5"]
    rng = random.Random(2037)
    extra = ["\u9f8d", "\U0001f600", "\u00e9", " ", "  ", "\n", "\t", "123", "4567", "<s>", "</s>", "<tool>",
             "<|endoftext|>", "<ctl>", "!", "?", "'s", "'ll", "\u2581", "\u00a0", "Q", "zz", "\u0416"]
    while len(s) < 300:
        parts = []
        for _ in range(rng.randint(1, 8)):
            parts.append(rng.choice(WORDS) if rng.random() < 0.6 else rng.choice(extra))
        sep = rng.choice([" ", " ", " ", "", "  ", "\n", "\t"])
        s.append(sep.join(parts))
    seen, out = set(), []
    for x in s:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def main():
    if sys.argv[1:] == ["--strings"]:
        json.dump(strings(), sys.stdout, ensure_ascii=True, indent=0)
        print()
        return
    if sys.argv[1] == "--fuzz-seeds":
        d = sys.argv[2]
        os.makedirs(d, exist_ok=True)
        text = "Hello world, <s>caf\u00e9 \u65e5\u672c 12345 it's <|endoftext|>\t<tool>\n\U0001f600  x".encode()
        for name in ARCH:
            v = vocab(name)
            with open(os.path.join(d, name + ".bin"), "wb") as f:
                f.write(len(text).to_bytes(2, "little") + text + gguf.encode(vocab_kv(v)))
        return
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    for name in ARCH:
        write(os.path.join(d, name + ".gguf"), name)


if __name__ == "__main__":
    main()
