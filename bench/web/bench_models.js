// The cases of the web benchmarks, shared by the browser pages (bench_page.js, app_bench_page.js: headless
// Chromium) and by Node over Dawn (../web_node_bench.mjs): the same models, inputs, optimiser and timing loop for
// ours and the peers. Nothing here touches `window`: the caller passes the library objects (our runtime module,
// TF.js's `tf`, jax-js's module) and, for Node, a fetch over file:// URLs and a GPU object.
//
// The method (../../shared/PEERS.md): one fixed random batch (SGEMM: two fixed random matrices; the digits MLP: the
// page's batches of the shipped subset), a step = the whole train step with only the scalar loss read back (SGEMM:
// one product, C read back), the first step, 10 warm-up + 50 timed steps (SGEMM: 3 + 10), median (a step slower than
// 1 s: 1 + 3); first step = from nothing to the first result, shader compiles included. Besides the per-step times, the timed
// loop's wall time gives back-to-back steps per second (`steps_per_s`: steps / wall time of the timed loop).
//
//   timeOurs(mod, bundleUrl, program, runtimeOptions, profile)   a bundle's program on our runtime module `mod`
//   timeTfjs(tf, kind, model, size, backend, {uploads})           TF.js 4.22 on 'webgl' or 'webgpu'
//   timeJax(jax, kind, model, size, device, t0, {uploads})        jax-js 0.1.25 on 'webgpu' or 'webgl' (one jit;
//                                                                 t0: where its first step starts, default now)
// What a step moves: ours (timeOurs) uploads every program input each step (SGEMM: A and B; train: x and labels:
// the runtime's run() writes its feeds) and reads back the outputs (the loss; SGEMM: all of C). The peers' default
// keeps the inputs resident on the GPU (uploaded once) and reads back the same outputs; {uploads: true} makes them
// upload the same host arrays every step too (equal work). The digits cases upload a new batch each step for all.
//   timeDigitsOurs / timeDigitsTfjs / timeDigitsJax               the digits demo's MLP 64-128-10 step, batch 16
// kind: 'train' (model 'mlp' | 'cnn', size = batch) or 'sgemm' (size = N).
/** The train-step and SGEMM cases of bench/web_bench.mjs and ../web_node_bench.mjs (which adds the digits steps). */
export const BENCH_CASES = [
  { name: 'mlp_b32', kind: 'train', model: 'mlp', size: 32 },
  { name: 'mlp_b128', kind: 'train', model: 'mlp', size: 128 },
  { name: 'cnn_b64', kind: 'train', model: 'cnn', size: 64 },
  { name: 'sgemm_256', kind: 'sgemm', size: 256 },
  { name: 'sgemm_512', kind: 'sgemm', size: 512 },
  { name: 'sgemm_1024', kind: 'sgemm', size: 1024 },
  // the character transformer of issue 37 (sg::lm::CharTransformer: d_model 64, 2 blocks, 4 heads, MLP 256, vocab 27)
  // at context 64, one AdamW step (lr 1e-3, weight decay 0.01, global-norm clip 1) on 32 rows of words; kind 'lm':
  // bench/web_bench.mjs and ../web_node_bench.mjs run it only when --only names it (feeds from charlmRows); 3 warm-up
  // + 10 timed steps (SwiftShader: slow; web_node_bench.mjs --lm-counts overrides them)
  { name: 'charlm_b32', kind: 'lm', model: 'charlm', size: 32, context: 64, counts: [3, 10] },
];

export const median = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
export const summary = (t) => ({ median_ms: median(t), min_ms: Math.min(...t), max_ms: Math.max(...t), steps: t.length });
const counts = (kind) => (kind === 'sgemm' ? [3, 10] : [10, 50]);

export function lcg(seed) {  // deterministic inputs (not a check: the bundles' checks and test_web_runtime do those)
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
}
export const randoms = (n, rnd, scale = 1) => Float32Array.from({ length: n }, () => (rnd() * 2 - 1) * scale);

/** Times `step(i)` (async, returns a number to report: a loss or C[0]). A step slower than 1 s (jax-js webgl SGEMM)
 * gets 1 warm-up and 3 timed steps instead, to keep the run within minutes. `counts` overrides [warm-up, timed]. */
export async function timeSteps(kind, t0, step, counts_ = counts(kind)) {
  let [warm, timed] = counts_;
  const values = [await step(0)];
  const firstMs = performance.now() - t0;
  const w0 = performance.now();
  await step(1);
  if (performance.now() - w0 > 1000) [warm, timed] = [1, 3];
  for (let i = 2; i <= warm; ++i) await step(i);
  const times = [];
  const l0 = performance.now();
  for (let i = 0; i < timed; ++i) {
    const s = performance.now();
    const v = await step(warm + 1 + i);
    times.push(performance.now() - s);
    if (i === timed - 1) values.push(v);
  }
  const loopMs = performance.now() - l0;
  return { ...summary(times), first_step_ms: firstMs, steps_per_s: (1000 * timed) / loopMs, values };
}

/** Our bundle's `program` ('train' or 'sgemm') with fixed random feeds; runtimeOptions go to createRuntime
 * (backend, webgpuPlan, and in Node gpu, fetch, featureLevel). */
export async function timeOurs(mod, bundleUrl, program, runtimeOptions, profile = false, given = null) {
  const t0 = performance.now();
  const rt = await mod.createRuntime(bundleUrl, { profile: !!profile, ...runtimeOptions });
  const p = rt.bundle.program(program);
  const rnd = lcg(1);
  const feeds = {};
  for (const i of p.inputs) {
    const n = i.shape.reduce((a, b) => a * b, 1);
    feeds[i.name] = given?.feeds?.[i.name] ? Float32Array.from(given.feeds[i.name])
      : Float32Array.from({ length: n }, () => (i.dtype === 'i32' ? Math.floor(rnd() * 10) : rnd()));
  }
  const out = p.outputs[0].name;
  const r = await timeSteps(program === 'sgemm' ? 'sgemm' : 'train', t0, async () => (await rt.run(program, feeds))[out][0],
                            given?.counts);
  r.kernels = rt.plan(program).kernels.length;
  r.webgpu_plan = rt.webgpuPlan?.name;
  r.webgpu_plan_reason = rt.webgpuPlan?.reason;
  r.renderer = rt.caps.renderer;
  r.backend = rt.backend;
  r.timings = profile ? await rt.timings() : [];
  rt.dispose();
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// TF.js: the models from raw variables (MLP 784-128-10; seed-002 student CNN), softmax cross-entropy, Adam
// ---------------------------------------------------------------------------------------------------------------

function tfModel(tf, model, batch) {
  const rnd = lcg(2);
  const v = (shape, fanIn) => tf.variable(tf.tensor(randoms(shape.reduce((a, b) => a * b, 1), rnd, 1 / Math.sqrt(fanIn)), shape));
  if (model === 'mlp') {
    const w1 = v([784, 128], 784), b1 = v([128], 784), w2 = v([128, 10], 128), b2 = v([10], 128);
    return { vars: [w1, b1, w2, b2], xShape: [batch, 784], lr: 1e-3,
             forward: (x) => tf.add(tf.matMul(tf.relu(tf.add(tf.matMul(x, w1), b1)), w2), b2) };
  }
  const f1 = v([3, 3, 1, 8], 9), c1 = v([8], 9), f2 = v([3, 3, 8, 16], 72), c2 = v([16], 72);
  const w3 = v([64, 32], 64), b3 = v([32], 64), w4 = v([32, 10], 32), b4 = v([10], 32);
  return { vars: [f1, c1, f2, c2, w3, b3, w4, b4], xShape: [batch, 8, 8, 1], lr: 2e-3,
           forward: (x) => {
             let h = tf.maxPool(tf.relu(tf.add(tf.conv2d(x, f1, 1, 'same'), c1)), 2, 2, 'valid');
             h = tf.maxPool(tf.relu(tf.add(tf.conv2d(h, f2, 1, 'same'), c2)), 2, 2, 'valid');
             h = tf.relu(tf.add(tf.matMul(tf.reshape(h, [batch, 64]), w3), b3));
             return tf.add(tf.matMul(h, w4), b4);
           } };
}

async function tfBackend(tf, backend) {
  if (!(await tf.setBackend(backend))) throw new Error(`TF.js backend ${backend} failed to initialise`);
  await tf.ready();
}

export async function timeTfjs(tf, kind, model, size, backend, { uploads = false } = {}) {
  const t0 = performance.now();
  await tfBackend(tf, backend);
  const rnd = lcg(1);
  let r;
  if (kind === 'sgemm') {
    const ah = randoms(size * size, rnd), bh = randoms(size * size, rnd);
    const a = tf.tensor(ah, [size, size]), b = tf.tensor(bh, [size, size]);
    r = await timeSteps(kind, t0, async () => {
      const [x, y] = uploads ? [tf.tensor(ah, [size, size]), tf.tensor(bh, [size, size])] : [a, b];
      const c = tf.matMul(x, y);
      const d = await c.data();
      tf.dispose(uploads ? [c, x, y] : [c]);
      return d[0];
    });
    a.dispose(); b.dispose();
  } else {
    const m = tfModel(tf, model, size);
    const xh = Float32Array.from({ length: m.xShape.reduce((a, b) => a * b, 1) }, rnd);
    const labels = Int32Array.from({ length: size }, () => Math.floor(rnd() * 10));
    const x = tf.tensor(xh, m.xShape), y = tf.oneHot(tf.tensor1d(labels, 'int32'), 10);
    const opt = tf.train.adam(m.lr);
    r = await timeSteps(kind, t0, async () => {
      const [xx, yy] = uploads ? [tf.tensor(xh, m.xShape), tf.oneHot(tf.tensor1d(labels, 'int32'), 10)] : [x, y];
      const l = opt.minimize(() => tf.losses.softmaxCrossEntropy(yy, m.forward(xx)), true, m.vars);
      const v = (await l.data())[0];
      tf.dispose(uploads ? [l, xx, yy] : [l]);
      return v;
    });
    opt.dispose();
    for (const t of [x, y, ...m.vars]) t.dispose();
  }
  return { ...r, version: tf.version_core, backend: tf.getBackend(), uploads };
}

// ---------------------------------------------------------------------------------------------------------------
// jax-js: the same models, the whole step (loss, gradients, Adam written by hand: optax is not on the registry
// here) under one jit; reference-counted arrays (every use but the last takes .ref)
// ---------------------------------------------------------------------------------------------------------------

const jaxReady = new WeakMap();  // per jax module: device -> initialised?

async function jaxDevice(jax, device) {
  let ready = jaxReady.get(jax);
  if (!ready) jaxReady.set(jax, (ready = new Map()));
  if (!ready.has(device)) ready.set(device, (await jax.init(device)).includes(device));
  if (!ready.get(device)) throw new Error(`jax-js device ${device} is not available here`);
  jax.defaultDevice(device);
}

function jaxParams(np, model) {
  const rnd = lcg(2);
  const v = (shape, fanIn) => np.array(randoms(shape.reduce((a, b) => a * b, 1), rnd, 1 / Math.sqrt(fanIn))).reshape(shape);
  if (model === 'mlp') return { w1: v([784, 128], 784), b1: v([128], 784), w2: v([128, 10], 128), b2: v([10], 128) };
  if (model === 'digits_mlp') return { w1: v([64, 128], 64), b1: v([128], 64), w2: v([128, 10], 128), b2: v([10], 128) };
  return { f1: v([8, 1, 3, 3], 9), c1: v([8], 9), f2: v([16, 8, 3, 3], 72), c2: v([16], 72),
           w3: v([64, 32], 64), b3: v([32], 64), w4: v([32, 10], 32), b4: v([10], 32) };
}

function jaxForward(jax, model, p, x, batch) {
  const { numpy: np, nn, lax } = jax;
  if (model !== 'cnn') return np.matmul(nn.relu(np.matmul(x, p.w1).add(p.b1)), p.w2).add(p.b2);
  const block = (h, f, c, C, H) => {
    h = nn.relu(lax.conv(h, f, [1, 1], 'SAME').add(c.reshape([1, C, 1, 1])));
    return h.reshape([batch, C, H / 2, 2, H / 2, 2]).max([3, 5]);  // max_pool2d 2x2
  };
  let h = block(x, p.f1, p.c1, 8, 8);
  h = block(h, p.f2, p.c2, 16, 4);
  h = nn.relu(np.matmul(h.reshape([batch, 64]), p.w3).add(p.b3));
  return np.matmul(h, p.w4).add(p.b4);
}

/** The jitted Adam train step of `model` (softmax cross-entropy, mean over the batch) and its state; `step(x, y)`
 * runs one step on jax arrays and returns the loss array. */
function jaxTrainer(jax, model, batch, lr) {
  const { numpy: np, nn } = jax;
  const b1 = 0.9, b2 = 0.999, eps = 1e-8;
  let p = jaxParams(np, model);
  const zeros = (q) => Object.fromEntries(Object.entries(q).map(([k, a]) => [k, np.zeros(a.shape)]));
  let m = zeros(p), v = zeros(p);
  const lossFn = (q, xx, yy) => nn.logSoftmax(jaxForward(jax, model, q, xx, batch), -1).mul(yy).sum().mul(-1 / batch);
  const jitted = jax.jit((q, mq, vq, lrt, xx, yy) => {
    const [loss, g] = jax.valueAndGrad(lossFn)(jax.tree.ref(q), xx, yy);
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
  let t = 0;
  return {
    step(x, y) {
      ++t;
      const lrt = np.array([lr * Math.sqrt(1 - b2 ** t) / (1 - b1 ** t)]).reshape([]);
      const [loss, nq, nm, nv] = jitted(p, m, v, lrt, x, y);
      [p, m, v] = [nq, nm, nv];
      return loss;
    },
    dispose() { for (const tr of [p, m, v]) for (const a of Object.values(tr)) a.dispose(); },
  };
}

const oneHot = (np, labels, batch) =>
  np.array(Float32Array.from({ length: batch * 10 }, (_, i) => (labels[Math.floor(i / 10)] === i % 10 ? 1 : 0))).reshape([batch, 10]);

export async function timeJax(jax, kind, model, size, device, t0 = performance.now(), { uploads = false } = {}) {
  await jaxDevice(jax, device);
  const np = jax.numpy;
  const rnd = lcg(1);
  let r;
  if (kind === 'sgemm') {
    const ah = randoms(size * size, rnd), bh = randoms(size * size, rnd);
    const a = np.array(ah).reshape([size, size]), b = np.array(bh).reshape([size, size]);
    const mm = jax.jit((x, y) => np.matmul(x, y));
    r = await timeSteps(kind, t0, async () => (await (uploads ? mm(np.array(ah).reshape([size, size]), np.array(bh).reshape([size, size]))
                                                              : mm(a.ref, b.ref)).data())[0]);
    a.dispose(); b.dispose();
  } else {
    const batch = size, xShape = model === 'mlp' ? [batch, 784] : [batch, 1, 8, 8];
    const xh = Float32Array.from({ length: xShape.reduce((a, b) => a * b, 1) }, rnd);
    const labels = Int32Array.from({ length: batch }, () => Math.floor(rnd() * 10));
    const x = np.array(xh).reshape(xShape), y = oneHot(np, labels, batch);
    const trainer = jaxTrainer(jax, model, batch, model === 'mlp' ? 1e-3 : 2e-3);
    r = await timeSteps(kind, t0, async () => (await (uploads ? trainer.step(np.array(xh).reshape(xShape), oneHot(np, labels, batch))
                                                              : trainer.step(x.ref, y.ref)).data())[0]);
    trainer.dispose();
    x.dispose(); y.dispose();
  }
  return { ...r, version: '0.1.25', backend: device, uploads };
}

// ---------------------------------------------------------------------------------------------------------------
// The digits demo's train step (examples/web/digits, issue 17): MLP 64-128-10, Adam, batch 16, the page's batches
// of the shipped subset (digits_subset.bin: 64 counts 0..16 and the label per sample, one byte each)
// ---------------------------------------------------------------------------------------------------------------

export const subsetOf = (bytes) => ({ n: bytes.length / 65, b: bytes });

export function batchOf(sub, step, B) {
  const x = new Float32Array(B * 64), labels = new Int32Array(B);
  for (let i = 0; i < B; ++i) {
    const j = ((step * B + i) * 2654435761 >>> 0) % sub.n;
    for (let k = 0; k < 64; ++k) x[i * 64 + k] = sub.b[j * 65 + k] / 16;
    labels[i] = sub.b[j * 65 + 64];
  }
  return { x, labels };
}

/** Ours: the digits page's bundle (`bundleUrl`), with `weights` (an ArrayBuffer of safetensors: fine-tune) or
 * without (from scratch); `persist` is the bundle's runtime/persist.js module. */
export async function timeDigitsOurs(sg, persist, bundleUrl, weights, sub, runtimeOptions) {
  const t0 = performance.now();
  const bundle = await sg.loadBundle(bundleUrl, runtimeOptions);
  const b = weights ? persist.withWeights(bundle, await persist.checkpointWeights(bundle, weights)) : bundle;
  const rt = await sg.createRuntime(b, runtimeOptions);
  const B = bundle.program('train').inputs.find((i) => i.name === 'labels').shape[0];
  const losses = [];
  const r = await timeSteps('train', t0, async (i) => {
    const l = (await rt.run('train', batchOf(sub, i, B))).loss[0];
    losses.push(l);
    return l;
  });
  const res = { ...r, batch: B, kernels: rt.plan('train').kernels.length, backend: rt.backend,
                webgpu_plan: rt.webgpuPlan?.name, webgpu_plan_reason: rt.webgpuPlan?.reason, renderer: rt.caps.renderer,
                loss_first: losses[0], loss_last: losses.at(-1) };
  rt.dispose();
  return res;
}

export async function timeDigitsTfjs(tf, sub, B, lr, backend) {
  const t0 = performance.now();
  await tfBackend(tf, backend);
  const rnd = lcg(2);
  const v = (shape, fanIn) => tf.variable(tf.tensor(Float32Array.from({ length: shape.reduce((a, c) => a * c, 1) },
                                                                  () => (rnd() * 2 - 1) / Math.sqrt(fanIn)), shape));
  const w1 = v([64, 128], 64), b1 = v([128], 64), w2 = v([128, 10], 128), b2 = v([10], 128);
  const opt = tf.train.adam(lr);
  const losses = [];
  const r = await timeSteps('train', t0, async (i) => {
    const f = batchOf(sub, i, B);
    const x = tf.tensor(f.x, [B, 64]);
    const y = tf.oneHot(tf.tensor1d(f.labels, 'int32'), 10);
    const l = opt.minimize(() => tf.losses.softmaxCrossEntropy(y, tf.add(tf.matMul(tf.relu(tf.add(tf.matMul(x, w1), b1)), w2), b2)),
                           true, [w1, b1, w2, b2]);
    const val = (await l.data())[0];
    tf.dispose([x, y, l]);
    losses.push(val);
    return val;
  });
  opt.dispose();
  tf.dispose([w1, b1, w2, b2]);
  return { ...r, batch: B, backend: tf.getBackend(), tf_version: tf.version_core, version: tf.version_core,
           loss_first: losses[0], loss_last: losses.at(-1) };
}

/** jax-js: the digits MLP step with the same batches; its init draws from lcg(2) in TF.js's order (w1, b1, w2, b2). */
export async function timeDigitsJax(jax, sub, B, lr, device) {
  const t0 = performance.now();
  await jaxDevice(jax, device);
  const np = jax.numpy;
  const trainer = jaxTrainer(jax, 'digits_mlp', B, lr);
  const losses = [];
  const r = await timeSteps('train', t0, async (i) => {
    const f = batchOf(sub, i, B);
    const x = np.array(f.x).reshape([B, 64]);
    const l = (await trainer.step(x, oneHot(np, f.labels, B)).data())[0];
    losses.push(l);
    return l;
  });
  trainer.dispose();
  return { ...r, batch: B, backend: device, version: '0.1.25', loss_first: losses[0], loss_last: losses.at(-1) };
}

// ---------------------------------------------------------------------------------------------------------------
// The character transformer (issue 37, case charlm_b32): sg::lm::CharTransformer / bench/charlm_torch.py's
// CharTransformer written in jax-js, and the word rows both sides train on
// ---------------------------------------------------------------------------------------------------------------

/** `batch` rows of words as sg::data::make_word_rows makes them (stdlib/include/sg/datasets.h): the words of `text`
 * (/usr/share/dict/words) lower-cased in ASCII, kept iff all a-z, deduplicated, sorted by bytes; rows of the words
 * at indices floor(i * n / batch), i < batch (a fixed spread of lengths). Tokens 0 = boundary, 1..26 = a..z; row of
 * word w: s = [0, w..., 0], x[t] = s[t], y[t] = s[t + 1], mask 1 for t < min(context, len + 1), padding 0. Returns
 * plain arrays {x, y, mask, words} (batch * context each) that cross page.evaluate. */
export function charlmRows(text, batch, context) {
  const words = [...new Set(text.split('\n').map((l) => l.replace(/[A-Z]/g, (c) => c.toLowerCase())).filter((w) => /^[a-z]+$/.test(w)))].sort();
  const x = new Array(batch * context).fill(0), y = x.slice(), mask = x.slice(), picked = [];
  for (let i = 0; i < batch; ++i) {
    const w = words[Math.floor((i * words.length) / batch)];
    picked.push(w);
    const s = [0, ...[...w].map((c) => c.charCodeAt(0) - 96), 0];
    for (let t = 0; t < Math.min(context, s.length - 1); ++t) {
      x[i * context + t] = s[t];
      y[i * context + t] = s[t + 1];
      mask[i * context + t] = 1;
    }
  }
  return { x, y, mask, words: picked };
}

/** The parameters of CharTransformer(vocab, context, d_model, layers, heads, ff) with ours' (torch's) initial-value
 * distributions, drawn from lcg(2): embeddings N(0, 1) (Box-Muller); in_proj xavier-uniform, in_proj and out_proj
 * biases 0, out_proj weight U(+-1/sqrt(d)); Linear weights and biases U(+-1/sqrt(fan_in)); LayerNorms 1 and 0.
 * Weights are stored [in, out] (x @ W: no transposes in the step; the same distribution). */
function jaxCharlmParams(np, s) {
  const rnd = lcg(2);
  const arr = (shape, f) => np.array(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, f)).reshape(shape);
  const normal = () => Math.sqrt(-2 * Math.log(1 - rnd())) * Math.cos(2 * Math.PI * rnd());
  const uni = (shape, bound) => arr(shape, () => (rnd() * 2 - 1) * bound);
  const fill = (shape, v) => arr(shape, () => v);
  const d = s.d_model, ff = s.ff;
  const p = { tok_emb: arr([s.vocab, d], normal), pos_emb: arr([s.context, d], normal) };
  for (let l = 0; l < s.layers; ++l) {
    Object.assign(p, {
      [`b${l}_ln1_w`]: fill([d], 1), [`b${l}_ln1_b`]: fill([d], 0),
      [`b${l}_in_w`]: uni([d, 3 * d], Math.sqrt(6 / (4 * d))), [`b${l}_in_b`]: fill([3 * d], 0),
      [`b${l}_out_w`]: uni([d, d], 1 / Math.sqrt(d)), [`b${l}_out_b`]: fill([d], 0),
      [`b${l}_ln2_w`]: fill([d], 1), [`b${l}_ln2_b`]: fill([d], 0),
      [`b${l}_l1_w`]: uni([d, ff], 1 / Math.sqrt(d)), [`b${l}_l1_b`]: uni([ff], 1 / Math.sqrt(d)),
      [`b${l}_l2_w`]: uni([ff, d], 1 / Math.sqrt(ff)), [`b${l}_l2_b`]: uni([d], 1 / Math.sqrt(ff)),
    });
  }
  Object.assign(p, { ln_f_w: fill([d], 1), ln_f_b: fill([d], 0),
                     head_w: uni([d, s.vocab], 1 / Math.sqrt(d)), head_b: uni([s.vocab], 1 / Math.sqrt(d)) });
  return p;
}

/** The mean cross-entropy of CharTransformer over the unmasked positions (lm::lm_loss), as a jax-js user writes
 * it: embeddings by np.take (a gather; with s.oneHotEmb, nn.oneHot(x) @ tok_emb instead: jax-js 0.1.25's webgl
 * backend has no Scatter, the gather's gradient), pre-LN blocks with nn.dotProductAttention(isCausal) on [B, T, heads, hd]
 * (einsum, where(tri), softmax inside), exact-erf GELU (nn.gelu approximate: false, as torch's "gelu"), LayerNorm
 * eps 1e-5. x: (B, T) int32; yOneHot: (B, T, vocab) f32; mask: (B, T) f32; returns a scalar. */
function jaxCharlmLoss(jax, s, B, p, x, yOneHot, mask) {
  const { numpy: np, nn } = jax;
  const T = s.context, d = s.d_model, H = s.heads;
  const layerNorm = (a, w, b) => {
    const c = a.ref.sub(a.mean(-1, { keepdims: true }));
    const r = np.sqrt(c.ref.mul(c.ref).mean(-1, { keepdims: true }).add(1e-5));
    return c.div(r).mul(w).add(b);
  };
  const emb = s.oneHotEmb ? np.matmul(nn.oneHot(x, s.vocab), p.tok_emb) : np.take(p.tok_emb, x, 0);
  let h = emb.add(p.pos_emb);  // (B, T, d) + (T, d)
  for (let l = 0; l < s.layers; ++l) {
    const q = (k) => p[`b${l}_${k}`];
    const a = layerNorm(h.ref, q('ln1_w'), q('ln1_b'));
    const qkv = np.matmul(a, q('in_w')).add(q('in_b')).reshape([B, T, 3, H, d / H]);
    const [qq, kk, vv] = [0, 1, 2].map((i) => qkv.ref.slice([], [], i));
    qkv.dispose();
    const att = nn.dotProductAttention(qq, kk, vv, { isCausal: true }).reshape([B, T, d]);
    h = h.add(np.matmul(att, q('out_w')).add(q('out_b')));
    const m = nn.gelu(np.matmul(layerNorm(h.ref, q('ln2_w'), q('ln2_b')), q('l1_w')).add(q('l1_b')), { approximate: false });
    h = h.add(np.matmul(m, q('l2_w')).add(q('l2_b')));
  }
  const logits = np.matmul(layerNorm(h, p.ln_f_w, p.ln_f_b), p.head_w).add(p.head_b);
  const nll = nn.logSoftmax(logits, -1).mul(yOneHot).sum(-1).mul(-1);  // (B, T)
  return nll.mul(mask.ref).sum().div(mask.sum());
}

/** The jitted train step: loss and gradients, torch.nn.utils.clip_grad_norm_ (global L2 norm; coefficient
 * min(1, clip / (norm + 1e-6))), torch.optim.AdamW (betas 0.9, 0.999, eps 1e-8, decoupled weight decay). */
function jaxCharlmTrainer(jax, s, B, lr, wd, clip) {
  const { numpy: np } = jax;
  const b1 = 0.9, b2 = 0.999, eps = 1e-8;
  let p = jaxCharlmParams(np, s);
  const zeros = (q) => Object.fromEntries(Object.entries(q).map(([k, a]) => [k, np.zeros(a.shape)]));
  let m = zeros(p), v = zeros(p);
  const lossFn = (q, x, y, mask) => jaxCharlmLoss(jax, s, B, q, x, y, mask);
  const jitted = jax.jit((q, mq, vq, lrt, bc2, x, y, mask) => {
    const [loss, g] = jax.valueAndGrad(lossFn)(jax.tree.ref(q), x, y, mask);
    const keys = Object.keys(q);
    const norm = np.sqrt(keys.map((k) => g[k].ref.mul(g[k].ref).sum()).reduce((a, b) => a.add(b)));
    const coef = np.minimum(np.reciprocal(norm.add(1e-6)).mul(clip), 1);
    const nq = {}, nm = {}, nv = {};
    for (const k of keys) {
      const gk = g[k].mul(coef.ref);
      nm[k] = mq[k].mul(b1).add(gk.ref.mul(1 - b1));
      nv[k] = vq[k].mul(b2).add(gk.ref.mul(gk).mul(1 - b2));
      // p <- p (1 - lr wd) - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)   (torch's AdamW, bias corrections bc1, bc2)
      nq[k] = q[k].mul(1 - lr * wd).sub(nm[k].ref.mul(lrt.ref).div(np.sqrt(nv[k].ref).mul(bc2.ref).add(eps)));
    }
    coef.dispose(); lrt.dispose(); bc2.dispose();
    return [loss, nq, nm, nv];
  });
  let t = 0;
  return {
    step(x, y, mask) {
      ++t;
      const lrt = np.array([lr / (1 - b1 ** t)]).reshape([]), bc2 = np.array([1 / Math.sqrt(1 - b2 ** t)]).reshape([]);
      const [loss, nq, nm, nv] = jitted(p, m, v, lrt, bc2, x, y, mask);
      [p, m, v] = [nq, nm, nv];
      return loss;
    },
    dispose() { for (const tr of [p, m, v]) for (const a of Object.values(tr)) a.dispose(); },
  };
}

/** jax-js: the charlm case's step on `rows` (charlmRows), inputs resident on the device (uploaded once, as the other
 * peer cases; {uploads: true}: x, the one-hot y and mask uploaded from the same host arrays every step, as ours
 * uploads its feeds); `counts` = [warm-up, timed]. On 'webgl' the token embedding is a one-hot product (no Scatter there). */
export async function timeJaxCharlm(jax, c, rows, device, t0 = performance.now(), { uploads = false } = {}) {
  await jaxDevice(jax, device);
  const np = jax.numpy;
  const s = { vocab: 27, context: c.context, d_model: 64, layers: 2, heads: 4, ff: 256, oneHotEmb: device === 'webgl' };
  const B = c.size, T = c.context;
  const xh = Int32Array.from(rows.x), maskh = Float32Array.from(rows.mask);
  const yh = Float32Array.from({ length: B * T * s.vocab }, (_, i) => (rows.y[Math.floor(i / s.vocab)] === i % s.vocab ? 1 : 0));
  const feeds = () => [np.array(xh, { dtype: np.int32 }).reshape([B, T]), np.array(yh).reshape([B, T, s.vocab]),
                       np.array(maskh).reshape([B, T])];
  const [x, y, mask] = feeds();
  const trainer = jaxCharlmTrainer(jax, s, B, 1e-3, 0.01, 1.0);
  const r = await timeSteps('train', t0, async () => (await (uploads ? trainer.step(...feeds())
                                                                     : trainer.step(x.ref, y.ref, mask.ref)).data())[0], c.counts);
  trainer.dispose();
  x.dispose(); y.dispose(); mask.dispose();
  return { ...r, version: '0.1.25', backend: device, uploads, embedding: s.oneHotEmb ? 'one-hot matmul' : 'np.take' };
}
