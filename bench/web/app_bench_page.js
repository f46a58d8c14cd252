// The page side of bench/web_app_bench.mjs (issue 17's benchmarks), same browser, same run; each call in a fresh
// page (the peers keep global state: TF.js backends, jax-js devices):
//   benchTrain(weights, backend, site) the digits MLP (64-128-10, Adam) train step of the draw-a-digit page's bundle
//                                 (batch 16) on 'webgl2' or 'webgpu': 'pretrained' = the fine-tune step (the page's
//                                 weights and batches), 'fresh' = the from-scratch step; 10 warm-up + 50 timed steps
//   benchTfjsTrain(B, lr, backend) the same model, step and batches in TF.js 4.22 ('webgl' or 'webgpu')
//   benchJaxTrain(B, lr, device)  the same in jax-js 0.1.25 ('webgpu' or 'webgl'): the whole step (loss, gradients,
//                                 Adam written by hand, as bench_page.js does) under one jit
//   benchWorker(kind, frames, backend, site) per-frame latency of the 128x128 five-conv CNN in a dedicated Worker: 'ours'
//                                 (the shapes page's worker.js, backend 'webgpu' or 'webgl2') or 'tfjs'
//                                 (tfjs_cnn_worker.js, the same layers and weights in TF.js, 'webgl' or 'webgpu')
//   benchTfjsFirst()              TF.js: from module start to the first digits prediction (compile included)
// `site`: '' (the demo built with --cli) or '/_altN' (the N-th --alt demo: another build of ours or export flags).
// The train cases' models, batches and timing loop are those of bench_models.js (shared with ../web_node_bench.mjs).
import { lcg, subsetOf, summary, timeDigitsJax, timeDigitsOurs, timeDigitsTfjs } from './bench_models.js';

const WARM = 10;

async function subset() {
  return subsetOf(new Uint8Array(await (await fetch('/digits/digits_subset.bin')).arrayBuffer()));  // the same in every site
}

window.benchTrain = async (weights, backend = 'webgl2', site = '') => {
  const sg = await import(`${site}/digits/bundle/runtime/shadergrad.js`);
  const persist = await import(`${site}/digits/bundle/runtime/persist.js`);
  const bytes = weights === 'pretrained' ? await (await fetch(`${site}/digits/pretrained.safetensors`)).arrayBuffer() : null;
  return timeDigitsOurs(sg, persist, `${site}/digits/bundle/bundle.json`, bytes, await subset(), { backend });
};

window.benchTfjsTrain = async (B, lr, backend = 'webgl') => timeDigitsTfjs(window.tf, await subset(), B, lr, backend);

window.benchJaxTrain = async (B, lr, device) =>
  timeDigitsJax(await import('/_npm/@jax-js/jax/dist/index.js'), await subset(), B, lr, device);

/** Frames through a Worker: per frame the Worker's own time around its inference (upload, kernels, readback)
 * and the page's round trip (post to result, frame transfer included). */
window.benchWorker = async (kind, frames = 40, backend = kind === 'ours' ? 'webgl2' : 'webgl', site = '') => {
  const { drawShape, rng } = await import('/shapes/frames.js');
  const url = kind === 'ours' ? `${site}/shapes/worker.js` : '/_bench/tfjs_cnn_worker.js';
  const w = new Worker(url, { type: kind === 'ours' ? 'module' : 'classic' });
  let resolveMsg;
  w.onmessage = (e) => resolveMsg(e.data);
  const next = () => new Promise((r) => { resolveMsg = r; });
  const t0 = performance.now();
  let m = next();
  w.postMessage({ op: 'init', bundle: new URL(`${site}/shapes/bundle/bundle.json`, location.href).href, backend,
                  tfjs: new URL('/_npm/@tensorflow/tfjs/dist/tf.min.js', location.href).href,
                  tfjsWebgpu: new URL('/_npm/@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.min.js', location.href).href,
                  weights: new URL('/shapes/bundle/weights.safetensors', location.href).href });
  const ready = await m;
  if (ready.op === 'error') throw new Error(`${kind} worker: ${ready.message}`);
  const setup = performance.now() - t0;
  const c = new OffscreenCanvas(128, 128), g = c.getContext('2d', { willReadFrequently: true });
  const inWorker = [], roundTrip = [];
  let correct = 0;  // frames classified as drawn (the weights' quality on the page's frames, not a timing)
  for (let i = 0; i < WARM + frames; ++i) {
    drawShape(g, 128, i % 4, rng(i * 7 + 1));
    const bitmap = c.transferToImageBitmap();
    const s = performance.now();
    m = next();
    w.postMessage({ op: 'bitmap', id: i, bitmap }, [bitmap]);
    const r = await m;
    if (r.op === 'error') throw new Error(`${kind} worker: ${r.message}`);
    if (i >= WARM) {
      roundTrip.push(performance.now() - s);
      inWorker.push(r.ms);
      const p = Array.from(r.probs);
      correct += p.indexOf(Math.max(...p)) === i % 4;
    }
  }
  w.terminate();
  return { worker: summary(inWorker), round_trip: summary(roundTrip), setup_ms: setup, backend: ready.backend,
           correct, frames };
};

window.benchTfjsFirst = async () => {
  // the digits MLP in TF.js from nothing to the first prediction, as the page does with ours
  const t0 = performance.now();
  const tf = window.tf;
  await tf.setBackend('webgl');
  await tf.ready();
  const rnd = lcg(3);
  const w1 = tf.tensor(Float32Array.from({ length: 64 * 128 }, rnd), [64, 128]), b1 = tf.zeros([128]);
  const w2 = tf.tensor(Float32Array.from({ length: 1280 }, rnd), [128, 10]), b2 = tf.zeros([10]);
  const x = tf.tensor(Float32Array.from({ length: 64 }, rnd), [1, 64]);
  const p = tf.softmax(tf.add(tf.matMul(tf.relu(tf.add(tf.matMul(x, w1), b1)), w2), b2));
  await p.data();
  return { first_prediction_ms: performance.now() - t0, since_navigation_ms: performance.now() };
};
window.benchReady = true;
