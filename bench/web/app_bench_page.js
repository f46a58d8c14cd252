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
const WARM = 10, STEPS = 50;
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
const summary = (t) => ({ median_ms: median(t), min_ms: Math.min(...t), max_ms: Math.max(...t), n: t.length });

function lcg(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
}

async function subset() {
  const b = new Uint8Array(await (await fetch('/digits/digits_subset.bin')).arrayBuffer());  // the same in every site
  return { n: b.length / 65, b };
}

function batchOf(sub, step, B) {
  const x = new Float32Array(B * 64), labels = new Int32Array(B);
  for (let i = 0; i < B; ++i) {
    const j = ((step * B + i) * 2654435761 >>> 0) % sub.n;
    for (let k = 0; k < 64; ++k) x[i * 64 + k] = sub.b[j * 65 + k] / 16;
    labels[i] = sub.b[j * 65 + 64];
  }
  return { x, labels };
}

window.benchTrain = async (weights, backend = 'webgl2', site = '') => {
  const sg = await import(`${site}/digits/bundle/runtime/shadergrad.js`);
  const persist = await import(`${site}/digits/bundle/runtime/persist.js`);
  const bundle = await sg.loadBundle(`${site}/digits/bundle/bundle.json`);
  let b = bundle;
  if (weights === 'pretrained') {
    const bytes = await (await fetch(`${site}/digits/pretrained.safetensors`)).arrayBuffer();
    b = persist.withWeights(bundle, await persist.checkpointWeights(bundle, bytes));
  }
  const rt = await sg.createRuntime(b, { backend });
  const sub = await subset();
  const B = bundle.program('train').inputs.find((i) => i.name === 'labels').shape[0];
  const losses = [];
  for (let i = 0; i < WARM; ++i) losses.push((await rt.run('train', batchOf(sub, i, B))).loss[0]);
  const times = [];
  for (let i = 0; i < STEPS; ++i) {
    const f = batchOf(sub, WARM + i, B);
    const s = performance.now();
    const out = await rt.run('train', f);
    times.push(performance.now() - s);
    losses.push(out.loss[0]);
  }
  const plan = rt.plan('train');
  const r = { ...summary(times), batch: B, kernels: plan.kernels.length, backend: rt.backend,
              webgpu_plan: rt.webgpuPlan?.name,
              renderer: rt.caps.renderer, loss_first: losses[0], loss_last: losses.at(-1) };
  rt.dispose();
  return r;
};

window.benchTfjsTrain = async (B, lr, backend = 'webgl') => {
  const tf = window.tf;
  if (!(await tf.setBackend(backend))) throw new Error(`TF.js backend ${backend} is not available here`);
  await tf.ready();
  const rnd = lcg(2);
  const v = (shape, fanIn) => tf.variable(tf.tensor(Float32Array.from({ length: shape.reduce((a, c) => a * c, 1) },
                                                                  () => (rnd() * 2 - 1) / Math.sqrt(fanIn)), shape));
  const w1 = v([64, 128], 64), b1 = v([128], 64), w2 = v([128, 10], 128), b2 = v([10], 128);
  const opt = tf.train.adam(lr);
  const sub = await subset();
  const step = async (i) => {
    const f = batchOf(sub, i, B);
    const x = tf.tensor(f.x, [B, 64]);
    const y = tf.oneHot(tf.tensor1d(f.labels, 'int32'), 10);
    const l = opt.minimize(() => tf.losses.softmaxCrossEntropy(y, tf.add(tf.matMul(tf.relu(tf.add(tf.matMul(x, w1), b1)), w2), b2)),
                           true, [w1, b1, w2, b2]);
    const val = (await l.data())[0];
    tf.dispose([x, y, l]);
    return val;
  };
  const losses = [];
  for (let i = 0; i < WARM; ++i) losses.push(await step(i));
  const times = [];
  for (let i = 0; i < STEPS; ++i) {
    const s = performance.now();
    losses.push(await step(WARM + i));
    times.push(performance.now() - s);
  }
  opt.dispose();
  tf.dispose([w1, b1, w2, b2]);
  return { ...summary(times), batch: B, backend: tf.getBackend(), tf_version: tf.version_core,
           loss_first: losses[0], loss_last: losses.at(-1) };
};

/** jax-js: the digits MLP step with the same batches, the same init scale and Adam (lr, 0.9, 0.999, 1e-8). */
window.benchJaxTrain = async (B, lr, device) => {
  const jax = await import('/_npm/@jax-js/jax/dist/index.js');
  const { numpy: np, nn } = jax;
  if (!(await jax.init(device)).includes(device)) throw new Error(`jax-js device ${device} is not available here`);
  jax.defaultDevice(device);
  const rnd = lcg(2);
  const v = (shape, fanIn) => np.array(Float32Array.from({ length: shape.reduce((a, c) => a * c, 1) },
                                                         () => (rnd() * 2 - 1) / Math.sqrt(fanIn))).reshape(shape);
  let p = { w1: v([64, 128], 64), b1: v([128], 64), w2: v([128, 10], 128), b2: v([10], 128) };
  const zeros = (q) => Object.fromEntries(Object.entries(q).map(([k, a]) => [k, np.zeros(a.shape)]));
  let m = zeros(p), vv = zeros(p);
  const b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const lossFn = (q, x, y) => nn.logSoftmax(np.matmul(nn.relu(np.matmul(x, q.w1).add(q.b1)), q.w2).add(q.b2), -1)
    .mul(y).sum().mul(-1 / B);
  const step = jax.jit((q, mq, vq, lrt, x, y) => {
    const [loss, g] = jax.valueAndGrad(lossFn)(jax.tree.ref(q), x, y);
    const nq = {}, nm = {}, nv = {};
    for (const k of Object.keys(q)) {
      const gk = g[k];
      nm[k] = mq[k].mul(b1).add(gk.ref.mul(1 - b1));
      nv[k] = vq[k].mul(b2).add(gk.ref.mul(gk).mul(1 - b2));
      nq[k] = q[k].sub(nm[k].ref.mul(lrt.ref).div(np.sqrt(nv[k].ref).add(eps)));
    }
    lrt.dispose();
    return [loss, nq, nm, nv];
  });
  const sub = await subset();
  let t = 0;
  const one = async (i) => {
    const f = batchOf(sub, i, B);
    const x = np.array(f.x).reshape([B, 64]);
    const y = np.array(Float32Array.from({ length: B * 10 }, (_, j) => (f.labels[Math.floor(j / 10)] === j % 10 ? 1 : 0)))
      .reshape([B, 10]);
    ++t;
    const lrt = np.array([lr * Math.sqrt(1 - b2 ** t) / (1 - b1 ** t)]).reshape([]);
    const [loss, nq, nm, nv] = step(p, m, vv, lrt, x, y);
    [p, m, vv] = [nq, nm, nv];
    return (await loss.data())[0];
  };
  const losses = [];
  for (let i = 0; i < WARM; ++i) losses.push(await one(i));
  const times = [];
  for (let i = 0; i < STEPS; ++i) {
    const s = performance.now();
    losses.push(await one(WARM + i));
    times.push(performance.now() - s);
  }
  for (const tr of [p, m, vv]) for (const a of Object.values(tr)) a.dispose();
  return { ...summary(times), batch: B, backend: device, version: '0.1.25', loss_first: losses[0], loss_last: losses.at(-1) };
};

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
