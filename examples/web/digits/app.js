// Draw-a-digit page (issue 17, seed 000): draw, see the 8x8 the model sees, the 10 probabilities live; add samples
// and fine-tune in the page; train from scratch on shipped digits; save/load weights (IndexedDB, .safetensors);
// watch the gradient flow. Everything runs through the shadergrad web runtime on the backend it picks (WebGPU,
// else WebGL2). Layout of the served folder (scripts/build_web_demo.sh): bundle/ (shadergrad export, with its
// runtime/), pretrained.safetensors (examples/digits_pretrain.cpp; DIGITS_EPOCHS=N: shadergrad train --save),
// digits_subset.bin (N x (64 counts, label) bytes).
// URL parameters: backend=auto|webgpu|webgl2, bundle=PATH/bundle.json, db=IndexedDB name.
// window.sgApp is the page's API for tests (tests/web_app_check.mjs).
import { createRuntime, loadBundle } from './bundle/runtime/shadergrad.js';
import { digitFromImage } from './bundle/runtime/preprocess.js';
import { checkpointBytes, checkpointWeights, forgetWeights, loadWeights, saveWeights, structureHash, withWeights }
  from './bundle/runtime/persist.js';
import { runSteps } from './trainer.js';
import { FlowView, drawChart } from './flow.js';

const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
const t_start = performance.now();

const state = {
  bundle: null, rt: null, pretrained: null, subset: null, fine: [], current: null, probs: null, losses: [],
  busy: false, stop: { stopped: false }, recovering: null, events: [], timeline: {}, paused: false,
};
const log = (kind, message) => {
  state.events.push({ kind, message });
  $('status').textContent = message;
};

// One GPU call at a time: a WebGPU run is asynchronous (its readback maps a staging buffer), so a prediction
// from the pointer and a training step must not overlap on one runtime. `gpu` queues run(), read() and write() and looks
// the runtime up when the call starts (after a lost context it is a new one).
let queue = Promise.resolve();
const serial = (fn) => {
  const r = queue.then(fn);
  queue = r.catch(() => {});
  return r;
};
const gpu = {
  run: (program, feeds) => serial(() => state.rt.run(program, feeds)),
  read: (name) => serial(() => state.rt.read(name)),
  write: (name, values) => serial(() => state.rt.write(name, values)),
  get bundle() { return state.rt.bundle; },
};

// ---- start-up -----------------------------------------------------------------------------------------------

async function loadSubset() {
  const r = await fetch('digits_subset.bin');
  if (!r.ok) throw new Error(`digits_subset.bin: HTTP ${r.status}`);
  const b = new Uint8Array(await r.arrayBuffer());
  const n = b.length / 65;
  const x = new Float32Array(n * 64), y = new Int32Array(n);
  for (let i = 0; i < n; ++i) {
    for (let j = 0; j < 64; ++j) x[i * 64 + j] = b[i * 65 + j] / 16;
    y[i] = b[i * 65 + 64];
  }
  return { n, x, y };
}

async function makeRuntime(weights) {
  const b = weights ? withWeights(state.bundle, weights) : state.bundle;
  return createRuntime(b, { backend: params.get('backend') || 'auto' });
}

function showBackend(rt) {
  const why = rt.attempts.map((a) => `${a.ok ? '✓' : '✗'} ${a.backend}: ${a.reason}`).join('\n');
  $('backend').textContent = `backend: ${rt.backend} (${rt.caps?.renderer ?? ''})\n${why}`;
}

async function start() {
  const url = params.get('bundle') || 'bundle/bundle.json';
  [state.bundle, state.subset] = await Promise.all([loadBundle(url), loadSubset()]);
  const r = await fetch('pretrained.safetensors');
  if (r.ok) state.pretrained = await checkpointWeights(state.bundle, await r.arrayBuffer(), 'pretrained.safetensors');
  const saved = await loadWeights(state.bundle, { dbName: params.get('db') || undefined });
  $('persist').textContent = `structure hash ${structureHash(state.bundle)}: ${saved.message}`;
  state.savedStatus = saved.status;
  state.timeline.loaded_ms = performance.now();  // bundle, subset, checkpoint and saved weights in
  state.rt = await makeRuntime(saved.weights || state.pretrained);
  state.timeline.runtime_ready_ms = performance.now();
  showBackend(state.rt);
  state.flow = new FlowView($('flow'), $('norms'), $('normLegend'), JSON.parse(state.bundle.json.metadata.layers || '[]'),
                            state.bundle.persistent.filter((p) => p.kind === 'param').map((p) => p.name));
  setupPad();
  setupButtons();
  // the first prediction: a shipped digit, until the user draws
  state.current = { x: state.subset.x.slice(0, 64), counts: Uint8Array.from(state.subset.x.slice(0, 64), (v) => v * 16) };
  await predict();
  // performance.now() counts from the navigation's start: page load, bundle fetch, compile, first run
  state.timeline.first_prediction_ms = performance.now();
  state.timeline.module_start_ms = t_start;
  state.timeline.runtime = state.rt.stats;
  const infer = state.rt.stats.first_run?.infer;
  log('ready', `ready: first prediction ${state.timeline.first_prediction_ms.toFixed(0)} ms after ` +
               `navigation (runtime setup ${state.rt.stats.setup_ms.toFixed(0)} ms, first inference ` +
               `${infer ? infer.ms.toFixed(0) : '?'} ms incl. its shader compile)`);
  addEventListener('pagehide', dispose);
}

function dispose() {
  state.stop.stopped = true;
  state.rt?.dispose();
  state.rt = null;
}

// ---- drawing and prediction -----------------------------------------------------------------------------------

function setupPad() {
  const pad = $('pad');
  const g = pad.getContext('2d', { willReadFrequently: true });
  const clear = () => { g.fillStyle = '#fff'; g.fillRect(0, 0, pad.width, pad.height); };
  clear();
  let drawing = false, last = null, pending = false;
  const pos = (e) => { const r = pad.getBoundingClientRect(); return [(e.clientX - r.left) * pad.width / r.width,
                                                                      (e.clientY - r.top) * pad.height / r.height]; };
  const schedule = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(async () => { pending = false; await fromPad(); });
  };
  pad.addEventListener('pointerdown', (e) => { drawing = true; last = pos(e); pad.setPointerCapture(e.pointerId); });
  pad.addEventListener('pointermove', (e) => {
    if (!drawing) return;
    const p = pos(e);
    g.strokeStyle = '#000';
    g.lineWidth = 18;
    g.lineCap = g.lineJoin = 'round';
    g.beginPath();
    g.moveTo(...last);
    g.lineTo(...p);
    g.stroke();
    last = p;
    schedule();
  });
  const up = () => { if (drawing) { drawing = false; schedule(); } };
  pad.addEventListener('pointerup', up);
  pad.addEventListener('pointercancel', up);
  $('clear').onclick = () => { clear(); state.current = null; showSeen(null); showBars(null); };
}

async function fromPad() {
  const pad = $('pad');
  const d = digitFromImage(pad.getContext('2d').getImageData(0, 0, pad.width, pad.height));
  state.current = d;
  showSeen(d);
  if (d) await predict();
}

function showSeen(d) {
  const c = $('seen'), g = c.getContext('2d');
  g.fillStyle = '#fff';
  g.fillRect(0, 0, c.width, c.height);
  if (!d) return;
  const s = c.width / 8;
  for (let i = 0; i < 64; ++i) {
    const v = 255 - Math.round((d.counts[i] / 16) * 255);
    g.fillStyle = `rgb(${v},${v},${v})`;
    g.fillRect((i % 8) * s, Math.floor(i / 8) * s, s, s);
  }
}

function showBars(p) {
  const el = $('bars');
  el.textContent = '';
  if (!p) return;
  let best = 0;
  for (let i = 1; i < 10; ++i) if (p[i] > p[best]) best = i;
  for (let i = 0; i < 10; ++i) {
    const row = document.createElement('div');
    row.className = i === best ? 'bar best' : 'bar';
    row.innerHTML = `<span class="d">${i}</span><div class="b" style="width:${Math.round(p[i] * 200)}px"></div>` +
                    `<span class="p">${p[i].toFixed(3)}</span>`;
    el.append(row);
  }
}

/** Runs `fn(runtime)`; on a lost context/device says so, recreates the runtime from the last saved weights, and
 * runs it once more. */
async function guarded(what, fn) {
  try {
    return await fn(state.rt);
  } catch (e) {
    if (!/ContextLost|DeviceLost/.test(e.name) && !/lost/i.test(e.message)) throw e;
    await recover(`${what}: ${e.message}`);
    return fn(state.rt);
  }
}

async function recover(reason) {
  if (!state.recovering) {
    state.recovering = (async () => {
      log('lost', `the GPU context was lost (${reason}); recovering: reloading the weights`);
      const old = state.rt;
      state.rt = null;
      try { old?.dispose(); } catch { /* already gone */ }
      const saved = await loadWeights(state.bundle, { dbName: params.get('db') || undefined });
      const w = state.snapshot || saved.weights || state.pretrained;
      state.rt = await makeRuntime(w);
      showBackend(state.rt);
      state.recoveries = (state.recoveries || 0) + 1;
      log('recovered', `recovered on ${state.rt.backend}: weights reloaded from ` +
                       `${state.snapshot ? 'the last snapshot' : saved.weights ? 'IndexedDB' : 'the pretrained checkpoint'}`);
    })().finally(() => { state.recovering = null; });
  }
  await state.recovering;
}

async function predict(x = state.current?.x) {
  if (!x) return null;
  const { probs } = await guarded('predict', () => gpu.run('infer', { x }));
  state.probs = probs;
  showBars(probs);
  return probs;
}

// ---- training -----------------------------------------------------------------------------------------------

const TRAIN = () => state.bundle.program('train');
const batchSize = () => TRAIN().inputs.find((i) => i.name === 'labels').shape[0];

/** Fine-tune batches: the first half cycles through the user's samples, the rest are shipped digits (so the model
 * keeps what it knew); deterministic. */
function fineBatch(step) {
  const B = batchSize(), x = new Float32Array(B * 64), labels = new Int32Array(B);
  const half = Math.max(1, Math.ceil(B / 2));
  for (let i = 0; i < B; ++i) {
    if (i < half) {
      const s = state.fine[(step * half + i) % state.fine.length];
      x.set(s.x, i * 64);
      labels[i] = s.label;
    } else {
      const j = (step * (B - half) + i * 7919) % state.subset.n;
      x.set(state.subset.x.subarray(j * 64, j * 64 + 64), i * 64);
      labels[i] = state.subset.y[j];
    }
  }
  return { x, labels };
}

/** From-scratch batches: the shipped digits in a fixed shuffled order. */
function scratchBatch(step) {
  const B = batchSize(), x = new Float32Array(B * 64), labels = new Int32Array(B);
  for (let i = 0; i < B; ++i) {
    const j = ((step * B + i) * 2654435761 >>> 0) % state.subset.n;
    x.set(state.subset.x.subarray(j * 64, j * 64 + 64), i * 64);
    labels[i] = state.subset.y[j];
  }
  return { x, labels };
}

async function snapshot() {
  const m = new Map();
  for (const p of state.bundle.persistent) m.set(p.name, await gpu.read(p.name));
  state.snapshot = m;
}

async function train(kind, total) {
  if (state.busy) return 0;
  state.busy = true;
  state.stop = { stopped: false };
  const hasDebug = state.bundle.programNames.includes('train_debug');
  try {
    await guarded('snapshot', () => snapshot());
    if (kind === 'scratch') state.losses = [];
    const done = await runSteps({
      getRuntime: () => gpu, program: 'train', total, signal: state.stop,
      batch: kind === 'fine' ? fineBatch : scratchBatch,
      debugProgram: hasDebug ? 'train_debug' : null, debugEvery: hasDebug ? 10 : 0,
      onStep: (i, out, debug) => {
        state.losses.push(out.loss[0]);
        if (debug) state.flow.show(out, state.bundle.program('train_debug'));
      },
      onFrame: (d, t) => {
        $('progress').value = d / t;
        drawChart($('loss'), [{ values: state.losses }], { label: 'loss (cross entropy, nats)' });
        if (!state.paused) $('status').textContent = `${kind === 'fine' ? 'fine-tuning' : 'training'}: step ${d}/${t}`;
      },
      onPause: (p) => {
        state.paused = p;
        if (p) log('paused', 'training paused: the tab is hidden (it goes on when the tab is shown again)');
        else log('resumed', 'training resumed');
      },
    });
    await snapshot();
    await saveWeights(gpu, { dbName: params.get('db') || undefined });
    $('persist').textContent = `saved in this browser under ${state.bundle.model}@${structureHash(state.bundle)}`;
    log('trained', `${kind === 'fine' ? 'fine-tuned' : 'trained'} ${done} steps; last loss ${state.losses.at(-1)?.toFixed(4)}`);
    await predict();
    return done;
  } catch (e) {
    if (/ContextLost|DeviceLost/.test(e.name) || /lost/i.test(e.message)) {
      await recover(`training: ${e.message}`);
      return 0;
    }
    throw e;
  } finally {
    state.busy = false;
  }
}

async function debugStep() {
  if (!state.fine.length && !state.subset) return null;
  const out = await guarded('step', () => gpu.run('train_debug', state.fine.length ? fineBatch(0) : scratchBatch(0)));
  state.losses.push(out.loss[0]);
  state.flow.show(out, state.bundle.program('train_debug'));
  drawChart($('loss'), [{ values: state.losses }], { label: 'loss (cross entropy, nats)' });
  return out;
}

function addSample(label) {
  if (!state.current) return false;
  state.fine.push({ x: Float32Array.from(state.current.x), label });
  $('fineCount').textContent = String(state.fine.length);
  return true;
}

// ---- buttons --------------------------------------------------------------------------------------------------

function download(bytes, name) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

/** Every persistent value (parameters, Adam state) replaced: from `weights` (a Map name -> values, e.g. a
 * checkpoint's parameters) where it has them, else the bundle's initial values; written into the running runtime
 * (nothing is compiled again). */
async function replaceWeights(weights, what) {
  state.stop.stopped = true;
  await guarded('weights', async () => {
    for (const p of state.bundle.persistent)
      await gpu.write(p.name, weights?.get(p.name) ?? state.bundle.data(p.data));
  });
  state.snapshot = null;
  log('weights', what);
  await predict();
}

function setupButtons() {
  const labels = $('labels');
  for (let d = 0; d < 10; ++d) {
    const b = document.createElement('button');
    b.textContent = String(d);
    b.dataset.digit = String(d);
    b.onclick = () => addSample(d);
    labels.append(b);
  }
  const report = (p) => p.catch((e) => log('error', `${e.name}: ${e.message}`));
  $('finetune').onclick = () => report(state.fine.length ? train('fine', 40) : Promise.resolve(log('info', 'add samples first')));
  $('scratch').onclick = () => report(replaceWeights(null, 'fresh initial weights (the bundle\'s)').then(() => train('scratch', 300)));
  $('pretrained').onclick = () => report(replaceWeights(state.pretrained, 'the pretrained checkpoint'));
  $('step').onclick = () => report(debugStep());
  $('save').onclick = () => report(saveWeights(gpu, { dbName: params.get('db') || undefined })
    .then((s) => { $('persist').textContent = `saved ${s.values} values (${s.bytes} bytes) under ${s.key}`; }));
  $('forget').onclick = () => report(forgetWeights(state.bundle, { dbName: params.get('db') || undefined })
    .then(() => { $('persist').textContent = 'forgotten'; }));
  $('export').onclick = () => report(checkpointBytes(gpu).then((b) => download(b, 'digits_mlp.safetensors')));
  $('import').onchange = (e) => report((async () => {
    const f = e.target.files[0];
    const w = await checkpointWeights(state.bundle, await f.arrayBuffer(), f.name);
    await replaceWeights(w, `loaded ${f.name}`);
  })());
}

// ---- the page's API for tests ------------------------------------------------------------------------------------

const ready = start().catch((e) => {
  log('error', `${e.name}: ${e.message}`);
  $('backend').textContent = `failed: ${e.name}: ${e.message}`;
  throw e;
});

window.sgApp = {
  ready, state,
  predict: (x) => predict(x ? Float32Array.from(x) : undefined).then((p) => Array.from(p)),
  current: () => state.current && { counts: Array.from(state.current.counts), x: Array.from(state.current.x) },
  addSample,
  fineTune: (steps = 40) => train('fine', steps),
  trainScratch: (steps = 100) => replaceWeights(null, 'fresh').then(() => train('scratch', steps)),
  debugStep: () => debugStep().then((o) => o && Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Array.from(v)]))),
  norms: () => state.flow.latestNorms(),
  flowValue: (name, r, c) => state.flow.value(name, r, c),
  save: () => saveWeights(gpu, { dbName: params.get('db') || undefined }),
  checkpoint: async () => Array.from(await checkpointBytes(gpu)),
  importCheckpoint: async (bytes) => replaceWeights(await checkpointWeights(state.bundle, Uint8Array.from(bytes)), 'imported'),
  read: async (name) => Array.from(await gpu.read(name)),
  loseContext: () => state.rt.loseContextForTesting(),
  /** The bundle's checks (the native CPU backend's outputs) on a fresh runtime with the bundle's own weights. */
  checks: async () => {
    const rt = await createRuntime(state.bundle, { backend: params.get('backend') || 'auto' });
    try {
      const c = await rt.runChecks();
      return { ok: c.ok, backend: rt.backend,
               runs: c.runs.map((x) => ({ program: x.program, ok: Object.values(x.outputs).every((o) => o.ok),
                                          worst: Math.max(...Object.values(x.outputs).map((o) => o.max_rel)) })) };
    } finally {
      rt.dispose();
    }
  },
  info: () => ({ backend: state.rt?.backend, attempts: state.rt?.attempts, structure_hash: structureHash(state.bundle),
                 saved: state.savedStatus, persist: $('persist').textContent, status: $('status').textContent,
                 events: state.events, timeline: state.timeline, recoveries: state.recoveries || 0,
                 losses: state.losses, paused: state.paused }),
};
