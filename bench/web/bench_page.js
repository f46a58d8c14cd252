// The page side of bench/web_bench.mjs. Every function times one case the same way (the method of
// ../../shared/PEERS.md): one fixed random batch (SGEMM: two fixed random matrices), a step = the whole train step
// with only the scalar loss read back (SGEMM: one product, C read back), 10 warm-up + 50 timed steps (SGEMM: 3 + 10),
// median (a step slower than 1 s: 1 + 3); first step = from nothing to the first result, shader compiles included.
//   benchOurs(bundle, program, backend, profile, webgpuPlan)  a bundle's program with the runtime copy inside the
//                                                  bundle (webgpuPlan: 'auto' = the runtime's pick, 'gpu', 'cpu')
//   benchTfjs(kind, model, size, backend)         TF.js 4.22 on 'webgl' or 'webgpu'
//   benchJax(kind, model, size, device)           jax-js 0.1.25 on 'webgpu' or 'webgl', the whole step under jit
// kind: 'train' (model 'mlp' | 'cnn', size = batch) or 'sgemm' (size = N).
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
const summary = (t) => ({ median_ms: median(t), min_ms: Math.min(...t), max_ms: Math.max(...t), steps: t.length });
const counts = (kind) => (kind === 'sgemm' ? [3, 10] : [10, 50]);

function lcg(seed) {  // deterministic inputs (not a check: the bundles' checks and test_web_runtime do those)
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
}
const randoms = (n, rnd, scale = 1) => Float32Array.from({ length: n }, () => (rnd() * 2 - 1) * scale);

/** Times `step` (async, returns a number to report: a loss or C[0]). A step slower than 1 s (jax-js webgl SGEMM)
 * gets 1 warm-up and 3 timed steps instead, to keep the run within minutes. */
async function timeSteps(kind, t0, step) {
  let [warm, timed] = counts(kind);
  const values = [await step()];
  const firstMs = performance.now() - t0;
  const w0 = performance.now();
  await step();
  if (performance.now() - w0 > 1000) [warm, timed] = [1, 3];
  for (let i = 1; i < warm; ++i) await step();
  const times = [];
  for (let i = 0; i < timed; ++i) {
    const s = performance.now();
    const v = await step();
    times.push(performance.now() - s);
    if (i === timed - 1) values.push(v);
  }
  return { ...summary(times), first_step_ms: firstMs, values };
}

window.benchOurs = async (name, program, backend, profile, webgpuPlan = 'auto') => {
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  const t0 = performance.now();
  const rt = await mod.createRuntime(`/${name}/bundle.json`, { profile: !!profile, backend, webgpuPlan });
  const p = rt.bundle.program(program);
  const rnd = lcg(1);
  const feeds = {};
  for (const i of p.inputs) {
    const n = i.shape.reduce((a, b) => a * b, 1);
    feeds[i.name] = Float32Array.from({ length: n }, () => (i.dtype === 'i32' ? Math.floor(rnd() * 10) : rnd()));
  }
  const out = p.outputs[0].name;
  const r = await timeSteps(program === 'sgemm' ? 'sgemm' : 'train', t0, async () => (await rt.run(program, feeds))[out][0]);
  r.kernels = rt.plan(program).kernels.length;
  r.webgpu_plan = rt.webgpuPlan?.name;
  r.webgpu_plan_reason = rt.webgpuPlan?.reason;
  r.renderer = rt.caps.renderer;
  r.backend = rt.backend;
  r.timings = profile ? await rt.timings() : [];
  rt.dispose();
  return r;
};

// ---------------------------------------------------------------------------------------------------------------
// TF.js: the models from raw variables (MLP 784-128-10; seed-002 student CNN), softmax cross-entropy, Adam
// ---------------------------------------------------------------------------------------------------------------

function tfModel(model, batch) {
  const tf = window.tf, rnd = lcg(2);
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

window.benchTfjs = async (kind, model, size, backend) => {
  const tf = window.tf;
  const t0 = performance.now();
  if (!(await tf.setBackend(backend))) throw new Error(`TF.js backend ${backend} failed to initialise`);
  await tf.ready();
  const rnd = lcg(1);
  let r;
  if (kind === 'sgemm') {
    const a = tf.tensor(randoms(size * size, rnd), [size, size]), b = tf.tensor(randoms(size * size, rnd), [size, size]);
    r = await timeSteps(kind, t0, async () => { const c = tf.matMul(a, b); const d = await c.data(); c.dispose(); return d[0]; });
    a.dispose(); b.dispose();
  } else {
    const m = tfModel(model, size);
    const x = tf.tensor(Float32Array.from({ length: m.xShape.reduce((a, b) => a * b, 1) }, rnd), m.xShape);
    const y = tf.oneHot(tf.tensor1d(Int32Array.from({ length: size }, () => Math.floor(rnd() * 10)), 'int32'), 10);
    const opt = tf.train.adam(m.lr);
    r = await timeSteps(kind, t0, async () => {
      const l = opt.minimize(() => tf.losses.softmaxCrossEntropy(y, m.forward(x)), true, m.vars);
      const v = (await l.data())[0];
      l.dispose();
      return v;
    });
    opt.dispose();
    for (const t of [x, y, ...m.vars]) t.dispose();
  }
  return { ...r, version: tf.version_core, backend: tf.getBackend() };
};

// ---------------------------------------------------------------------------------------------------------------
// jax-js: the same models, the whole step (loss, gradients, Adam written by hand: optax is not on the registry
// here) under one jit; reference-counted arrays (every use but the last takes .ref)
// ---------------------------------------------------------------------------------------------------------------

let jaxMod = null;
const jaxReady = new Map();

function jaxParams(np, model) {
  const rnd = lcg(2);
  const v = (shape, fanIn) => np.array(randoms(shape.reduce((a, b) => a * b, 1), rnd, 1 / Math.sqrt(fanIn))).reshape(shape);
  if (model === 'mlp') return { w1: v([784, 128], 784), b1: v([128], 784), w2: v([128, 10], 128), b2: v([10], 128) };
  return { f1: v([8, 1, 3, 3], 9), c1: v([8], 9), f2: v([16, 8, 3, 3], 72), c2: v([16], 72),
           w3: v([64, 32], 64), b3: v([32], 64), w4: v([32, 10], 32), b4: v([10], 32) };
}

function jaxForward(jax, model, p, x, batch) {
  const { numpy: np, nn, lax } = jax;
  if (model === 'mlp') return np.matmul(nn.relu(np.matmul(x, p.w1).add(p.b1)), p.w2).add(p.b2);
  const block = (h, f, c, C, H) => {
    h = nn.relu(lax.conv(h, f, [1, 1], 'SAME').add(c.reshape([1, C, 1, 1])));
    return h.reshape([batch, C, H / 2, 2, H / 2, 2]).max([3, 5]);  // max_pool2d 2x2
  };
  let h = block(x, p.f1, p.c1, 8, 8);
  h = block(h, p.f2, p.c2, 16, 4);
  h = nn.relu(np.matmul(h.reshape([batch, 64]), p.w3).add(p.b3));
  return np.matmul(h, p.w4).add(p.b4);
}

window.benchJax = async (kind, model, size, device) => {
  const t0 = performance.now();
  if (!jaxMod) jaxMod = await import('/_npm/@jax-js/jax/dist/index.js');
  const jax = jaxMod, { numpy: np, nn } = jax;
  if (!jaxReady.has(device)) jaxReady.set(device, (await jax.init(device)).includes(device));
  if (!jaxReady.get(device)) throw new Error(`jax-js device ${device} is not available here`);
  jax.defaultDevice(device);
  const rnd = lcg(1);
  let r;
  if (kind === 'sgemm') {
    const a = np.array(randoms(size * size, rnd)).reshape([size, size]);
    const b = np.array(randoms(size * size, rnd)).reshape([size, size]);
    const mm = jax.jit((x, y) => np.matmul(x, y));
    r = await timeSteps(kind, t0, async () => (await mm(a.ref, b.ref).data())[0]);
    a.dispose(); b.dispose();
  } else {
    const lr = model === 'mlp' ? 1e-3 : 2e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, batch = size;
    const xShape = model === 'mlp' ? [batch, 784] : [batch, 1, 8, 8];
    const x = np.array(Float32Array.from({ length: xShape.reduce((a, b) => a * b, 1) }, rnd)).reshape(xShape);
    const labels = Int32Array.from({ length: batch }, () => Math.floor(rnd() * 10));
    const y = np.array(Float32Array.from({ length: batch * 10 }, (_, i) => (labels[Math.floor(i / 10)] === i % 10 ? 1 : 0))).reshape([batch, 10]);
    let p = jaxParams(np, model);
    const zeros = (q) => Object.fromEntries(Object.entries(q).map(([k, a]) => [k, np.zeros(a.shape)]));
    let m = zeros(p), v = zeros(p);
    const lossFn = (q, xx, yy) => nn.logSoftmax(jaxForward(jax, model, q, xx, batch), -1).mul(yy).sum().mul(-1 / batch);
    const step = jax.jit((q, mq, vq, lrt, xx, yy) => {
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
    r = await timeSteps(kind, t0, async () => {
      ++t;
      const lrt = np.array([lr * Math.sqrt(1 - b2 ** t) / (1 - b1 ** t)]).reshape([]);
      const [loss, nq, nm, nv] = step(p, m, v, lrt, x.ref, y.ref);
      [p, m, v] = [nq, nm, nv];
      return (await loss.data())[0];
    });
    for (const tr of [p, m, v]) for (const a of Object.values(tr)) a.dispose();
    x.dispose(); y.dispose();
  }
  return { ...r, version: '0.1.25', backend: device };
};
window.benchReady = true;
