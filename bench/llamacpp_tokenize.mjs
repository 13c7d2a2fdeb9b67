// llamacpp_tokenize.mjs - llama.cpp's token ids for strings, through node-llama-cpp
// (scripts/bench-deps.sh installs it into bench/.node; nothing here is needed by make check).
//
//   node bench/llamacpp_tokenize.mjs MODEL.gguf STRINGS.json      (or - for stdin)
//
// STRINGS.json is a JSON array of strings. Prints one JSON object:
//   {"llamacpp": "node-llama-cpp 3.21.1", "model": PATH,
//    "bos": id|null, "eos": id|null,
//    "cases": [{"text": S, "ids": [...], "ids_special": [...]}, ...]}
// ids: llama.cpp's llama_tokenize(text, add_special=false, parse_special=false);
// ids_special: the same with parse_special=true (special tokens' texts become those tokens).
// tests/tokenize/expected.py stores its output as the tokenizer suite's expectations; a
// bench section can run it live on any GGUF file with a tokenizer.
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const pkgDir = process.env.NODE_LLAMA_CPP_DIR ?? path.join(here, ".node", "node_modules", "node-llama-cpp");

async function main() {
    const [modelPath, stringsPath] = process.argv.slice(2);
    if (!modelPath || !stringsPath) {
        process.stderr.write("usage: node bench/llamacpp_tokenize.mjs MODEL.gguf STRINGS.json|-\n");
        process.exit(2);
    }
    const strings = JSON.parse(fs.readFileSync(stringsPath === "-" ? 0 : stringsPath, "utf8"));
    if (!Array.isArray(strings) || strings.some((s) => typeof s !== "string")) {
        process.stderr.write(`${stringsPath}: not a JSON array of strings\n`);
        process.exit(2);
    }
    const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8"));
    const {getLlama, LlamaLogLevel} = await import(pathToFileURL(path.join(pkgDir, "dist", "index.js")).href);
    const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
    const model = await llama.loadModel({modelPath, gpuLayers: 0});
    const cases = strings.map((text) => ({
        text,
        ids: Array.from(model.tokenize(text, false)),
        ids_special: Array.from(model.tokenize(text, true)),
    }));
    const out = {
        llamacpp: `node-llama-cpp ${pkg.version}`,
        model: path.basename(modelPath),
        bos: model.tokens.bos ?? null,
        eos: model.tokens.eos ?? null,
        cases,
    };
    process.stdout.write(JSON.stringify(out) + "\n");
    await model.dispose();
    await llama.dispose();
}

main().catch((e) => {
    process.stderr.write(`llamacpp_tokenize: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
});
