// llamacpp_server.mjs - times a GGUF model in llama.cpp (node-llama-cpp 3.21.1, its
// prebuilt CPU libraries), for bench/run.py's llamacpp section.
//
// Usage: node llamacpp_server.mjs MODEL.gguf THREADS OUT.npy WARMUP TOKENS.json decode P
//        node llamacpp_server.mjs MODEL.gguf THREADS OUT.npy WARMUP TOKENS.json prefill T
//        node llamacpp_server.mjs MODEL.gguf THREADS OUT.json 0 TOKENS.json greedy N
//        node llamacpp_server.mjs MODEL.gguf THREADS OUT.json 0 STRINGS.json tokenize
// decode P: evaluates TOKENS[0:P] once, then each run evaluates TOKENS[P] at position P
//   and erases it again, so every run is the same one-token step over P past positions.
// prefill T: each run erases the sequence and evaluates TOKENS[0:T].
// Either writes the log-probabilities of the next token after TOKENS[0:P+1] (decode) or
// TOKENS[0:T] (prefill) to OUT.npy (f32[V]; llama.cpp's API gives probabilities, not
// logits), runs WARMUP more times, prints "ready llama.cpp VARIANT", then serves
// "run K" (K wall times in ns on one line) and "quit": the protocol of bench/harness.c.
// greedy N: the N tokens llama.cpp generates greedily after TOKENS, as JSON, then exits.
// tokenize: llama.cpp's ids of each string of STRINGS.json (special tokens parsed), JSON.
// The KV cache is f32 (as nestc's default), flash attention off (F32 KV needs it off).
// Resolves node-llama-cpp from bench/.node.
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const lib = path.join(here, '.node', 'node_modules', 'node-llama-cpp', 'dist', 'index.js');
const { getLlama } = await import(pathToFileURL(lib).href);

function writeNpyF32(file, data) {
  let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + data.length + ",), }";
  header += ' '.repeat(64 - ((10 + header.length + 1) % 64)) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.from(new Float32Array(data).buffer);
  fs.writeFileSync(file + '.tmp', Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
  fs.renameSync(file + '.tmp', file);
}

const [modelPath, threadsArg, outPath, warmupArg, inPath, mode, nArg] = process.argv.slice(2);
const threads = Number(threadsArg), warmup = Number(warmupArg), n = Number(nArg);
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });

if (mode === 'tokenize') {
  const strings = JSON.parse(fs.readFileSync(inPath, 'utf8'));
  const ids = strings.map((s) => Array.from(model.tokenize(s, true)));
  fs.writeFileSync(outPath, JSON.stringify(ids));
  process.exit(0);
}

const tokens = JSON.parse(fs.readFileSync(inPath, 'utf8'));
const ctxSize = Math.max(256, tokens.length + (mode === 'greedy' ? n : 0) + 8);
const context = await model.createContext({
  contextSize: ctxSize, threads, batchSize: 512, flashAttention: false,
  experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32',
});
const seq = context.getSequence();

async function logprobs(prompt) {
  const items = prompt.map((t, i) => (i === prompt.length - 1 ? [t, { generateNext: { probabilities: true } }] : t));
  const res = await seq.controlledEvaluate(items);
  const probs = res[res.length - 1].next.probabilities;
  const out = new Float32Array(probs.size);
  for (const [tok, p] of probs) out[tok] = Math.log(p);
  return out;
}

if (mode === 'greedy') {
  const out = [];
  for await (const t of seq.evaluate(tokens, { temperature: 0 })) {
    out.push(t);
    if (out.length >= n) break;
  }
  fs.writeFileSync(outPath, JSON.stringify(out));
  process.exit(0);
}

let step;
if (mode === 'decode') {
  await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(0, n));
  writeNpyF32(outPath, await logprobs([tokens[n]]));
  await seq.eraseContextTokenRanges([{ start: n, end: n + 1 }]);
  step = async () => {
    await seq.evaluateWithoutGeneratingNewTokens([tokens[n]]);
    await seq.eraseContextTokenRanges([{ start: n, end: n + 1 }]);
  };
} else if (mode === 'prefill') {
  writeNpyF32(outPath, await logprobs(tokens.slice(0, n)));
  step = async () => {
    await seq.clearHistory();
    await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(0, n));
  };
  await seq.clearHistory();
} else {
  throw new Error('unknown mode ' + mode);
}
for (let i = 0; i < warmup; i++) await step();
// the CPU features its ggml-cpu variant uses (AVX512_VNNI, AMX_INT8, ...)
const feats = [...(llama.systemInfo || '').matchAll(/([A-Z0-9_]+) = 1/g)].map((m) => m[1]);
console.log('ready llama.cpp ' + feats.join(','));

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const [cmd, k] = line.trim().split(/\s+/);
  if (cmd === 'quit') break;
  if (cmd !== 'run') continue;
  const times = [];
  for (let i = 0; i < Number(k); i++) {
    const t0 = process.hrtime.bigint();
    await step();
    times.push(String(process.hrtime.bigint() - t0));
  }
  console.log(times.join(' '));
}
process.exit(0);
