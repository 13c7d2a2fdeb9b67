#!/usr/bin/python3
"""scripts/generate.c --prompt TEXT (issue #37, item 3): text in and out.

The LLaMA sample at a small size with V = the tokenizer suite's synthetic `llama`
vocabulary (tests/tokenize/vocab.py), random weights:

- the prompt's ids are what nestrt_tokenize makes of it (BOS added, special tokens
  parsed: tests/tokenize/driver.c), so --prompt generates the same ids as the id mode
  does from them, and prints exactly their pieces (nestrt_token_to_piece);
- with the vocabulary's tokens permuted so that the first generated ids are the byte
  tokens of a three-byte character, the text still comes out byte for byte (the
  character is cut between tokens: the first bytes wait for the last);
- with EOS set to the k-th generated id, it stops there: k tokens, EOS not printed;
- errors: weights without a tokenizer and no --vocab, a vocabulary larger than the
  model's V, an id-mode argument with --vocab.

    /usr/bin/python3 tests/generate/prompt.py NESTC_PATH
Prints ok/FAIL lines and `N passed, N failed`.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "tokenize"))
sys.path.insert(0, os.path.join(ROOT, "tests", "io"))
import gguf  # noqa: E402
import vocab  # noqa: E402

NESTC = os.path.abspath(sys.argv[1])
B = os.path.dirname(NESTC)
LIB = os.path.join(B, "libnestrt.a")
LINK_FLAGS = os.environ.get("NESTC_TEST_LDFLAGS", "").split()
LLAMA = os.path.join(ROOT, "samples", "llama.nest")
PROMPT = "Hello world, the sea"
STEPS = 16
passed = failed = 0


def result(ok, name, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok " + name)
    else:
        failed += 1
        print("FAIL " + name + (": " + detail if detail else ""))


def run(args, env=None):
    r = subprocess.run(args, capture_output=True, env=env)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def shared_env():
    """nestc linking a .so and Python loading it, under the sanitizers too
    (tests/api/run.py says how)."""
    e = dict(os.environ)
    if LINK_FLAGS:
        e["CC"] = "cc " + " ".join(LINK_FLAGS)
        pre = [subprocess.run(["cc", "-print-file-name=" + x], capture_output=True, text=True).stdout.strip()
               for x in ("libasan.so", "libubsan.so")]
        e["LD_PRELOAD"] = " ".join(p for p in pre if os.path.isabs(p))
        e["ASAN_OPTIONS"] = e.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    return e


def cc(srcs, out, extra=()):
    code, _, err = run(["cc", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "runtime")] +
                       list(extra) + srcs + [LIB, "-lm", "-lpthread", "-ldl"] + LINK_FLAGS + ["-o", out])
    if code != 0:
        raise RuntimeError("cc failed: " + err)


def prompt_ids(driver, path, text):
    code, out, err = run_stdin([driver, "tokenize", path], ("3 %s\n" % text.encode().hex()).encode())
    line = out.decode().strip()
    if not line.startswith("ids "):
        raise RuntimeError("tokenize: " + line + err)
    return [int(x) for x in line[4:].split("|")[0].split()]


def run_stdin(args, data):
    r = subprocess.run(args, input=data, capture_output=True)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def pieces(driver, path, ids):
    code, out, err = run([driver, "piece", path, "0"] + [str(i) for i in ids])
    return b"".join(b"" if h == "-" else bytes.fromhex(h) for h in out.decode().split())


def generate_ids(exe, w, ids):
    code, out, err = run([exe, w, str(STEPS)] + [str(i) for i in ids])
    line = [l for l in out.decode().splitlines() if l.startswith("ids:")]
    if code != 0 or not line:
        raise RuntimeError("generate (ids): exit %d: %s" % (code, err))
    return [int(x) for x in line[0][4:].split()]


def main():
    with tempfile.TemporaryDirectory() as d:
        v = vocab.vocab("llama")
        n = len(v["tokens"])
        voc = os.path.join(d, "llama.gguf")
        vocab.write(voc, "llama", tensors=False)
        cfg = ("-D L=2 -D D=64 -D H=4 -D KVH=2 -D F=128 -D V=%d -D CTX=64" % n).split()
        out = os.path.join(d, "out")
        code, _, err = run([NESTC, "build", LLAMA, "-o", out, "--no-cache"] + cfg)
        if code != 0:
            result(False, "build", err)
            return
        exe = os.path.join(d, "generate")
        objs = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".o"))
        cc([os.path.join(ROOT, "scripts", "generate.c")] + objs, exe, ["-I" + out, "-DMODEL=llama", "-DMODEL_UP=LLAMA"])
        driver = os.path.join(d, "driver")
        cc([os.path.join(ROOT, "tests", "tokenize", "driver.c")], driver)

        # random weights whose generation starts with three different ids (a random
        # model often repeats one): the first of seeds 1, 2, ... that gives them
        P = prompt_ids(driver, voc, PROMPT)
        w = os.path.join(d, "w.safetensors")
        for seed in range(1, 30):
            code, _, err = run([NESTC, "weights", LLAMA] + cfg + ["--random-weights", str(seed), "-o", w])
            assert code == 0, err
            G = generate_ids(exe, w, P)
            if len(set(G[:3])) == 3:
                break
        result(P[0] == v["bos"] and len(G) == STEPS and len(set(G[:3])) == 3,
               "the prompt starts with BOS; %d ids generated, the first three different" % STEPS,
               "prompt %s, generated %s (weights seed %d)" % (P, G, seed))

        # text mode: the same ids' pieces, exactly
        code, text, err = run([exe, w, str(STEPS), "--prompt", PROMPT, "--vocab", voc])
        want = pieces(driver, voc, G)
        result(code == 0 and text == want, "--prompt prints the pieces of the ids the id mode generates",
               "exit %d, got %r, want %r; %s" % (code, text, want, err))
        result("prompt: %d tokens" % len(P) in err and "\n%d tokens\n" % STEPS in err,
               "--prompt reports the prompt's and the generated counts on stderr", err)

        # a character cut between tokens: the first distinct generated ids become the
        # byte tokens E6 97 A5 ("\u65e5"), by swapping tokens (the prompt's ids unchanged)
        firsts = []
        for g in G:
            if g not in firsts:
                firsts.append(g)
        toks = list(v["tokens"])
        index = {t[0]: i for i, t in enumerate(toks)}
        for g, b in zip(firsts, ("<0xE6>", "<0x97>", "<0xA5>")):
            j = index[b]
            toks[g], toks[j] = toks[j], toks[g]
            index[toks[g][0]], index[toks[j][0]] = g, j
        v2 = dict(v, tokens=toks)
        voc2 = os.path.join(d, "permuted.gguf")
        with open(voc2, "wb") as f:
            f.write(gguf.encode(vocab.vocab_kv(v2)))
        P2 = prompt_ids(driver, voc2, PROMPT)
        code, text, err = run([exe, w, str(STEPS), "--prompt", PROMPT, "--vocab", voc2])
        want = pieces(driver, voc2, G)
        ok = P2 == P and code == 0 and text == want and len(firsts) >= 3 and "\u65e5".encode() in want
        result(ok, "a UTF-8 character cut between tokens comes out whole",
               "prompt %s (was %s), exit %d, got %r, want %r" % (P2, P, code, text, want))

        # EOS at the k-th generated id: k tokens, EOS not printed
        k = max(i for i, g in enumerate(G) if g not in G[:i])
        voc3 = os.path.join(d, "eos.gguf")
        vocab.write(voc3, "llama", override={"tokenizer.ggml.eos_token_id": (gguf.U32, G[k])}, tensors=False)
        code, text, err = run([exe, w, str(STEPS), "--prompt", PROMPT, "--vocab", voc3])
        want = pieces(driver, voc3, G[:k])
        result(k > 0 and code == 0 and text == want and "\n%d tokens, stopped at EOS\n" % k in err,
               "generation stops at EOS (id %d, after %d tokens)" % (G[k], k),
               "exit %d, got %r, want %r; %s" % (code, text, want, err))

        # scripts/generate.py over the model as a shared library (issue 39): the same
        # ids, text, logits and stops as generate.c
        lib = os.path.join(d, "libllama.so")
        env = shared_env()
        code, _, err = run([NESTC, "build", LLAMA, "-o", lib, "--no-cache"] + cfg, env)
        gpy = [sys.executable, os.path.join(ROOT, "scripts", "generate.py"), lib, w, str(STEPS)]
        if code != 0:
            result(False, "generate.py: the shared library builds", err)
        else:
            lc, lp = os.path.join(d, "c.bin"), os.path.join(d, "py.bin")
            c1 = run([exe, w, str(STEPS)] + [str(i) for i in P] + ["--logits", lc])
            p1 = run(gpy + [str(i) for i in P] + ["--logits", lp], env)
            same = os.path.exists(lp) and open(lc, "rb").read() == open(lp, "rb").read()
            ids = lambda out: [l for l in out.decode().splitlines() if l.startswith("ids:")]
            result(p1[0] == 0 and ids(p1[1]) == ids(c1[1]) and same,
                   "generate.py: the ids and logits of generate.c, bit for bit", "exit %d: %s" % (p1[0], p1[2]))
            for vf, what in ((voc, "the prompt's text"), (voc2, "a character cut between tokens"),
                             (voc3, "a stop at EOS")):
                c2 = run([exe, w, str(STEPS), "--prompt", PROMPT, "--vocab", vf])
                p2 = run(gpy + ["--prompt", PROMPT, "--vocab", vf], env)
                result(p2[0] == 0 and p2[1] == c2[1] and p2[2].splitlines()[1:3] == c2[2].splitlines()[1:3],
                       "generate.py --prompt: %s as generate.c prints it" % what,
                       "exit %d, got %r, want %r; %s" % (p2[0], p2[1], c2[1], p2[2]))
            p3 = run(gpy + ["--prompt", PROMPT], env)
            result(p3[0] == 1 and "no tokenizer" in p3[2] and "--vocab" in p3[2],
                   "generate.py --prompt without a tokenizer", p3[2])

        # errors
        code, text, err = run([exe, w, str(STEPS), "--prompt", PROMPT])
        result(code == 1 and "no tokenizer" in err and "--vocab" in err and w in err,
               "--prompt without a tokenizer in the weights or --vocab", err)
        big = os.path.join(d, "gpt2.gguf")
        vocab.write(big, "gpt2", tensors=False)
        nb = len(vocab.vocab("gpt2")["tokens"])
        code, text, err = run([exe, w, str(STEPS), "--prompt", PROMPT, "--vocab", big])
        result(code == 1 and "the tokenizer has %d tokens, more than the model's %d" % (nb, n) in err,
               "a vocabulary larger than the model's V", err)
        code, text, err = run([exe, w, str(STEPS), "1", "2", "--vocab", voc])
        result(code == 2 and "usage:" in err, "--vocab without --prompt", err)
        code, text, err = run([exe, w, str(STEPS), "--prompt", PROMPT, "--vocab", os.path.join(d, "none.gguf")])
        result(code == 1 and "none.gguf" in err, "a --vocab file that is not there", err)


main()
print("%d passed, %d failed" % (passed, failed))
sys.exit(0 if failed == 0 else 1)
