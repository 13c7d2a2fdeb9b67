#!/usr/bin/python3
"""Regenerate the tokenizer suite's expectations: llama.cpp's own ids (node-llama-cpp
3.21.1, through bench/llamacpp_tokenize.mjs) for the test strings of vocab.py on each
synthetic vocabulary, stored as tests/tokenize/expected_NAME.json with the vocabulary's
fingerprint. Needs node and bench/.node (scripts/bench-deps.sh installs them); make check
does not (it reads the stored files).

    /usr/bin/python3 tests/tokenize/expected.py       (or: make tokenize-expected)
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import vocab  # noqa: E402


def main():
    strings = vocab.strings()
    with tempfile.TemporaryDirectory() as d:
        sp = os.path.join(d, "strings.json")
        with open(sp, "w") as f:
            json.dump(strings, f)
        for name in vocab.ARCH:
            path = os.path.join(d, name + ".gguf")
            v = vocab.write(path, name)
            r = subprocess.run(["node", os.path.join(ROOT, "bench", "llamacpp_tokenize.mjs"), path, sp],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit("llamacpp_tokenize.mjs failed on %s: %s" % (name, r.stderr))
            out = json.loads(r.stdout)
            if [c["text"] for c in out["cases"]] != strings:
                sys.exit("%s: llama.cpp's cases are not the strings given" % name)
            out["fingerprint"] = vocab.fingerprint(v)
            out["vocab"] = name
            dst = os.path.join(HERE, "expected_%s.json" % name)
            with open(dst, "w") as f:
                f.write("{\n")
                for k in ("vocab", "fingerprint", "llamacpp", "bos", "eos"):
                    f.write(" %s: %s,\n" % (json.dumps(k), json.dumps(out[k])))
                f.write(' "cases": [\n')
                f.write(",\n".join("  " + json.dumps(c, ensure_ascii=True) for c in out["cases"]))
                f.write("\n ]\n}\n")
            print("%s: %d strings -> %s" % (name, len(strings), os.path.relpath(dst, ROOT)))


main()
