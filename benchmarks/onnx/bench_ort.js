// ONNX Runtime peer (npm's onnxruntime-node, CPU provider, all graph optimizations; one thread, then
// two: intraOpNumThreads 2, results under "shapes_t2"):
// runs each model exported by export_layers.py, checks its output against PyTorch's, then times
// it the way scripts/bench_report times the C++ benchmarks (best of REPS repetitions, each the mean
// of enough runs for MIN_TIME seconds), and the same for the shape's Identity model: the net time
// subtracts that per-call overhead (node's event loop, tensor marshaling).
//   node bench_ort.js MODEL_DIR OUT.json [MIN_TIME=0.25] [REPS=10]
const ort = require('onnxruntime-node');
const fs = require('fs');
const path = require('path');

const [dir, outPath] = process.argv.slice(2, 4);
const minTime = Number(process.argv[4] || 0.25), reps = Number(process.argv[5] || 10);
const shapes = {tiny: [1, 16, 16, 64], small: [1, 32, 32, 128], base: [1, 128, 128, 512], batched: [8, 32, 32, 128],
                gpt: [1, 64, 64, 256]};
const optionsFor = (threads) => ({intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all',
                                  executionMode: 'sequential'});

function floats(file) {
  const b = fs.readFileSync(file);
  return new Float32Array(b.buffer, b.byteOffset, b.length / 4);
}

async function time(session, feeds) {
  for (let i = 0; i < 20; ++i) await session.run(feeds);  // warm-up
  let best = Infinity;
  for (let r = 0; r < reps; ++r) {
    let n = 0;
    const t0 = process.hrtime.bigint();
    let t = t0;
    while (Number(t - t0) < minTime * 1e9) {
      await session.run(feeds);
      ++n;
      t = process.hrtime.bigint();
    }
    best = Math.min(best, Number(t - t0) / 1e3 / n);
  }
  return best;  // µs
}

(async () => {
  const results = {onnxruntime: require('onnxruntime-node/package.json').version, threads: 1, shapes: {}, shapes_t2: {}};
  for (const threads of [1, 2])
  for (const [name, [B, T, S, D]] of Object.entries(shapes)) {
    const options = optionsFor(threads);
    const file = path.join(dir, name + '.onnx');
    if (!fs.existsSync(file)) continue;
    const input = floats(path.join(dir, name + '.in.bin')), want = floats(path.join(dir, name + '.out.bin'));
    const session = await ort.InferenceSession.create(file, options);
    const feeds = {tgt: new ort.Tensor('float32', input.slice(0, B * T * D), [B, T, D])};
    if (session.inputNames.includes('memory'))
      feeds.memory = new ort.Tensor('float32', input.slice(B * T * D, B * T * D + B * S * D), [B, S, D]);
    const got = (await session.run(feeds)).out.data;
    let err = 0;
    for (let i = 0; i < want.length; ++i) err = Math.max(err, Math.abs(got[i] - want[i]));
    if (!(err <= 1e-4)) throw new Error(`${name}: ONNX Runtime differs from PyTorch by ${err}`);
    const ident = await ort.InferenceSession.create(path.join(dir, name + '.identity.onnx'), options);
    const identFeeds = {};
    for (const k of ident.inputNames) identFeeds[k] = feeds[k];
    const total = await time(session, feeds), overhead = await time(ident, identFeeds);
    results[threads === 1 ? 'shapes' : 'shapes_t2'][name] = {total_us: total, overhead_us: overhead, net_us: total - overhead,
                                                          max_abs_err: err};
    console.log(`${name} (${threads} thread${threads > 1 ? 's' : ''}): ${total.toFixed(1)} µs - overhead ${overhead.toFixed(1)} µs = ${(total - overhead).toFixed(1)} µs` +
                ` (max abs err vs PyTorch ${err.toExponential(2)})`);
  }
  fs.writeFileSync(outPath, JSON.stringify(results, null, 1));
})().catch((e) => { console.error(e.message); process.exit(1); });
