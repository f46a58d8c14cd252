// The page side of bench/web_bench.mjs. window.benchOurs(bundle) times a bundle's train step with the runtime copy
// inside the bundle; window.benchTfjs(model, batch) times the same model written with TF.js variables (the method of
// ../../shared/PEERS.md: one fixed random batch, a step = the whole train step with only the scalar loss read back,
// 10 warm-up + 50 timed steps, median; first step = from nothing to the first loss, compiles included).
const WARM = 10, STEPS = 50;
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
const summary = (t) => ({ median_ms: median(t), min_ms: Math.min(...t), max_ms: Math.max(...t), steps: t.length });

function lcg(seed) {  // deterministic inputs (not a check: the bundle's checks and test_web_runtime do those)
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
}

window.benchOurs = async (name, profile) => {
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  const t0 = performance.now();
  const rt = await mod.createRuntime(`/${name}/bundle.json`, { profile: !!profile });
  const setup = performance.now() - t0;
  const p = rt.bundle.program('train');
  const rnd = lcg(1);
  const feeds = {};
  for (const i of p.inputs) {
    const n = i.shape.reduce((a, b) => a * b, 1);
    feeds[i.name] = Float32Array.from({ length: n }, () => (i.dtype === 'i32' ? Math.floor(rnd() * 10) : rnd()));
  }
  const first = await rt.run('train', feeds);
  const firstMs = performance.now() - t0;
  const losses = [first.loss[0]];
  for (let i = 0; i < WARM; ++i) await rt.run('train', feeds);
  const times = [];
  for (let i = 0; i < STEPS; ++i) {
    const s = performance.now();
    const out = await rt.run('train', feeds);
    times.push(performance.now() - s);
    if (i === STEPS - 1) losses.push(out.loss[0]);
  }
  const timings = profile ? await rt.timings() : [];
  const r = { ...summary(times), first_step_ms: firstMs, setup_ms: setup, kernels: p.kernels.length, losses,
              renderer: rt.caps.renderer, timer_query: rt.caps.timer_query, timings };
  rt.dispose();
  return r;
};

function tfModel(model, batch) {
  const tf = window.tf, rnd = lcg(2);
  const v = (shape, fanIn) => tf.variable(tf.tensor(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) },
                                                                  () => (rnd() * 2 - 1) / Math.sqrt(fanIn)), shape));
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

window.benchTfjs = async (model, batch) => {
  const tf = window.tf;
  const t0 = performance.now();
  await tf.setBackend('webgl');
  await tf.ready();
  const m = tfModel(model, batch);
  const rnd = lcg(1);
  const x = tf.tensor(Float32Array.from({ length: m.xShape.reduce((a, b) => a * b, 1) }, rnd), m.xShape);
  const y = tf.oneHot(tf.tensor1d(Int32Array.from({ length: batch }, () => Math.floor(rnd() * 10)), 'int32'), 10);
  const opt = tf.train.adam(m.lr);
  const step = async () => {
    const l = opt.minimize(() => tf.losses.softmaxCrossEntropy(y, m.forward(x)), true, m.vars);
    const v = (await l.data())[0];
    l.dispose();
    return v;
  };
  const losses = [await step()];
  const firstMs = performance.now() - t0;
  for (let i = 0; i < WARM; ++i) await step();
  const times = [];
  for (let i = 0; i < STEPS; ++i) {
    const s = performance.now();
    const l = await step();
    times.push(performance.now() - s);
    if (i === STEPS - 1) losses.push(l);
  }
  const r = { ...summary(times), first_step_ms: firstMs, losses, tf_version: tf.version_core, backend: tf.getBackend() };
  opt.dispose();
  for (const t of [x, y, ...m.vars]) t.dispose();
  return r;
};
window.benchReady = true;
