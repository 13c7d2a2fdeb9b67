// ort_server.js - times an ONNX model in ONNX Runtime (onnxruntime-node), for bench/run.py.
//
// Usage: node ort_server.js MODEL.onnx THREADS OUT.npy WARMUP IN.npy...
// Creates a session (intraOpNumThreads THREADS, graphOptimizationLevel 'all'), feeds
// the inputs in the order of session.inputNames, runs once and writes the first
// output to OUT.npy (f32, flat), runs WARMUP more times, prints "ready VERSION",
// then serves "run K" (K wall times in ns, timed with process.hrtime, on one line)
// and "quit" on standard input: the protocol of bench/harness.c.
// Resolves onnxruntime-node from bench/.node (NODE_PATH) or the usual places.
'use strict';
const fs = require('fs');
const readline = require('readline');

function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(path + ': not a .npy file');
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hstart = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(path + ': Fortran order');
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)[1];
  const shape = shapeText.split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const n = shape.reduce((a, b) => a * b, 1);
  const off = hstart + hlen;
  const bytes = buf.buffer.slice(buf.byteOffset + off, buf.byteOffset + buf.length);
  const types = {
    '<f4': ['float32', Float32Array], '<i4': ['int32', Int32Array], '<i8': ['int64', BigInt64Array],
  };
  if (!types[descr]) throw new Error(path + ': dtype ' + descr);
  const [type, Arr] = types[descr];
  return { type, shape, data: new Arr(bytes.slice(0, n * Arr.BYTES_PER_ELEMENT)) };
}

function writeNpyF32(path, data) {
  let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + data.length + ",), }";
  header += ' '.repeat(64 - ((10 + header.length + 1) % 64)) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.from(new Float32Array(data).buffer);
  fs.writeFileSync(path + '.tmp', Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
  fs.renameSync(path + '.tmp', path);
}

async function main() {
  const [modelPath, threads, outPath, warmup, ...inputs] = process.argv.slice(2);
  const ort = require('onnxruntime-node');
  const version = require('onnxruntime-node/package.json').version;
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    const a = readNpy(inputs[i]);
    feeds[name] = new ort.Tensor(a.type, a.data, a.shape);
  });
  const outName = session.outputNames[0];
  const first = await session.run(feeds);
  writeNpyF32(outPath, first[outName].data);
  for (let i = 0; i < Number(warmup); i++) await session.run(feeds);
  process.stdout.write('ready ' + version + '\n');

  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  for await (const line of rl) {
    const m = /^run (\d+)/.exec(line);
    if (m) {
      const times = [];
      for (let i = 0; i < Number(m[1]); i++) {
        const t0 = process.hrtime.bigint();
        await session.run(feeds);
        times.push(String(process.hrtime.bigint() - t0));
      }
      process.stdout.write(times.join(' ') + '\n');
    } else if (line.startsWith('quit')) {
      break;
    }
  }
  process.exit(0);
}

main().catch((e) => {
  if (e && e.stack) process.stderr.write(e.stack + '\n');
  process.stderr.write('ort_server: ' + (e && e.message ? e.message : e) + '\n');
  process.exit(1);
});
