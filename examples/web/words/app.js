// Word-completion page (issue 37): type a prefix, the character transformer completes it (sampled in the page,
// sampler.js = `shadergrad sample`'s sampler); fine-tune it on your own words with the loss curve; the attention maps
// of every head of every block; weights saved in IndexedDB (runtime persist.js) and downloaded as a checkpoint
// `shadergrad sample --load` reads. Layout of the served folder (scripts/build_web_demo.sh): bundle/ (shadergrad
// export --model charlm --load pretrained.safetensors: programs infer (logits, attn/L) and train (AdamW step), with
// its runtime/), trainer.js and flow.js (the digits page's step loop and charts).
// URL parameters: backend=auto|webgpu|webgl2, bundle=PATH/bundle.json, db=IndexedDB name.
// window.sgWords is the page's API for tests (tests/words_page_check.mjs).
import { createRuntime, loadBundle } from './bundle/runtime/shadergrad.js';
import { renderGrid } from './bundle/runtime/colormap.js';
import { checkpointBytes, checkpointWeights, forgetWeights, loadWeights, saveWeights, structureHash, withWeights }
  from './bundle/runtime/persist.js';
import { runSteps } from './trainer.js';
import { drawChart } from './flow.js';
import { sampleWords, wordRows } from './sampler.js';

const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
const dbName = params.get('db') || undefined;

const state = { bundle: null, rt: null, meta: null, losses: [], busy: false, stop: { stopped: false }, events: [],
                paused: false, last: null, savedStatus: null };
const log = (kind, message) => {
  state.events.push({ kind, message });
  $('status').textContent = message;
};

// one GPU call at a time (a WebGPU run is asynchronous): completions and training steps never overlap
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

const context = () => Number(state.meta.context);
const vocab = () => state.meta.vocab;
const inferRows = () => state.bundle.program('infer').inputs.find((i) => i.name === 'x').shape[0];
const trainRows = () => state.bundle.program('train').inputs.find((i) => i.name === 'x').shape[0];

async function start() {
  state.bundle = await loadBundle(params.get('bundle') || 'bundle/bundle.json');
  state.meta = state.bundle.json.metadata;
  $('describe').textContent = state.meta.describe;
  const saved = await loadWeights(state.bundle, { dbName });
  state.savedStatus = saved.status;
  $('persist').textContent = `structure hash ${structureHash(state.bundle)}: ${saved.message}`;
  state.rt = await createRuntime(saved.weights ? withWeights(state.bundle, saved.weights) : state.bundle,
                                 { backend: params.get('backend') || 'auto' });
  const why = state.rt.attempts.map((a) => `${a.ok ? '✓' : '✗'} ${a.backend}: ${a.reason}`).join('\n');
  $('backend').textContent = `backend: ${state.rt.backend}; weights: ${saved.weights ? 'saved in this browser' :
    state.meta.initial_parameters}${state.meta.checkpoint_validation_loss ?
    ` (validation loss ${state.meta.checkpoint_validation_loss} nats/char)` : ''}\n${why}`;
  setupControls();
  await complete();
  log('ready', `ready on ${state.rt.backend}`);
  addEventListener('pagehide', () => { state.stop.stopped = true; state.rt?.dispose(); state.rt = null; });
}

// ---- completions and attention ------------------------------------------------------------------------------------

function options() {
  return { prefix: $('prefix').value.trim(), temperature: Number($('temp').value), seed: Number($('seed').value) };
}

async function complete(o = options()) {
  const T = context();
  const { words, rows } = await sampleWords({
    infer: async (x) => (await gpu.run('infer', { x })).logits, n: inferRows(), context: T, vocabChars: vocab(),
    prefix: o.prefix, temperature: o.temperature, seed: o.seed,
  });
  // the attention of the finished rows (one more run: the maps of the words as they end)
  const out = await gpu.run('infer', { x: rows });
  const attn = JSON.parse(state.meta.attention || '[]').map((name) => out[name]);
  state.last = { ...o, words, rows, attn };
  showCompletions(words, o.prefix);
  showAttention(rows, attn);
  return words;
}

function showCompletions(words, prefix) {
  const ol = $('completions');
  ol.textContent = '';
  for (const w of words) {
    const li = document.createElement('li');
    const b = document.createElement('b');
    b.textContent = w.slice(0, prefix.length);
    li.append(b, w.slice(prefix.length));
    ol.append(li);
  }
}

/** One image per head of every block for row 0: the first len x len corner (the word's positions), each cell
 * `scale` px (nearest neighbour), the native viridis colormap over [0, 1], letters along both axes. */
function showAttention(rows, attn) {
  const el = $('attn');
  el.textContent = '';
  const T = context(), H = Number(state.meta.heads), chars = vocab();
  let len = 1;
  while (len < T && rows[len] !== 0) ++len;  // boundary + letters
  const labels = Array.from(rows.slice(0, len), (t) => chars[t]);
  const scale = Math.max(4, Math.floor(160 / len));
  attn.forEach((w, l) => {
    for (let h = 0; h < H; ++h) {
      const vals = new Float32Array(len * len);
      for (let i = 0; i < len; ++i)
        for (let j = 0; j < len; ++j) vals[i * len + j] = w[((0 * H + h) * T + i) * T + j];
      const { pixels } = renderGrid(vals, len, len, { cmap: 'viridis', lo: 0, hi: 1 });
      const c = document.createElement('canvas');
      c.width = c.height = len;
      c.getContext('2d').putImageData(new ImageData(pixels, len, len), 0, 0);
      c.style.width = c.style.height = `${len * scale}px`;
      c.title = `block ${l}, head ${h}: row = query position, column = key position`;
      c.dataset.block = String(l);
      c.dataset.head = String(h);
      c.onmousemove = (e) => {  // the weight under the mouse: query position, key position and their letters
        const r = c.getBoundingClientRect();
        const j = Math.min(len - 1, Math.floor(((e.clientX - r.left) / r.width) * len));
        const i = Math.min(len - 1, Math.floor(((e.clientY - r.top) / r.height) * len));
        $('attnHover').textContent = `block ${l}, head ${h}: position ${i} ('${labels[i]}', predicting letter ` +
          `${i + 1}) attends to position ${j} ('${labels[j]}') with weight ${vals[i * len + j].toFixed(4)}`;
      };
      const fig = document.createElement('figure');
      const cap = document.createElement('figcaption');
      cap.textContent = `block ${l}, head ${h} — "${labels.join('')}"`;
      fig.append(c, cap);
      el.append(fig);
    }
  });
}

// ---- fine-tuning ------------------------------------------------------------------------------------------------

/** The user's words: split at anything but letters, lower-cased, at most context - 1 letters kept whole. */
function userWords(text = $('words').value) {
  return text.toLowerCase().split(/[^a-z]+/).filter((w) => w.length > 0);
}

async function fineTune(steps = Number($('steps').value), words = userWords()) {
  if (state.busy) return 0;
  if (!words.length) { log('info', 'type some words (letters a-z) to fine-tune on'); return 0; }
  state.busy = true;
  state.stop = { stopped: false };
  state.losses = [];
  const B = trainRows(), T = context();
  try {
    const done = await runSteps({
      getRuntime: () => gpu, program: 'train', total: steps, signal: state.stop,
      batch: (i) => wordRows(Array.from({ length: B }, (_, k) => words[(i * B + k) % words.length]), vocab(), T),
      onStep: (i, out) => state.losses.push(out.loss[0]),
      onFrame: (d, t) => {
        $('progress').value = d / t;
        drawChart($('loss'), [{ values: state.losses }], { label: 'loss (nats per character)' });
        if (!state.paused) $('status').textContent = `fine-tuning: step ${d}/${t}`;
      },
      onPause: (p) => {
        state.paused = p;
        log(p ? 'paused' : 'resumed', p ? 'training paused: the tab is hidden' : 'training resumed');
      },
    });
    await saveWeights(gpu, { dbName });
    $('persist').textContent = `saved in this browser under ${state.bundle.model}@${structureHash(state.bundle)}`;
    log('trained', `fine-tuned ${done} steps on ${words.length} words; loss ${state.losses[0]?.toFixed(3)} → ` +
                   `${state.losses.at(-1)?.toFixed(3)} nats per character`);
    await complete();
    return done;
  } finally {
    state.busy = false;
  }
}

// ---- weights -----------------------------------------------------------------------------------------------------

/** The checkpoint `shadergrad train --save` writes for this model, with the keys `shadergrad sample` rebuilds it from. */
async function checkpoint() {
  return checkpointBytes(gpu, { extra: JSON.parse(state.meta.checkpoint_metadata || '{}') });
}

async function replaceWeights(weights, what) {
  state.stop.stopped = true;
  for (const p of state.bundle.persistent) await gpu.write(p.name, weights?.get(p.name) ?? state.bundle.data(p.data));
  log('weights', what);
  await complete();
}

function download(bytes, name) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function setupControls() {
  const report = (p) => p.catch((e) => log('error', `${e.name}: ${e.message}`));
  $('temp').oninput = () => { $('tempOut').textContent = Number($('temp').value).toFixed(2); };
  $('complete').onclick = () => report(complete());
  $('prefix').onkeydown = (e) => { if (e.key === 'Enter') report(complete()); };
  $('finetune').onclick = () => report(fineTune());
  $('reset').onclick = () => report(replaceWeights(null, 'the pretrained weights (the bundle\'s)'));
  $('save').onclick = () => report(saveWeights(gpu, { dbName })
    .then((s) => { $('persist').textContent = `saved ${s.values} values (${s.bytes} bytes) under ${s.key}`; }));
  $('forget').onclick = () => report(forgetWeights(state.bundle, { dbName })
    .then(() => { $('persist').textContent = 'forgotten'; }));
  $('export').onclick = () => report(checkpoint().then((b) => download(b, 'words_charlm.safetensors')));
  $('import').onchange = (e) => report((async () => {
    const f = e.target.files[0];
    await replaceWeights(await checkpointWeights(state.bundle, await f.arrayBuffer(), f.name), `loaded ${f.name}`);
  })());
}

// ---- the page's API for tests ------------------------------------------------------------------------------------

const ready = start().catch((e) => {
  log('error', `${e.name}: ${e.message}`);
  $('backend').textContent = `failed: ${e.name}: ${e.message}`;
  throw e;
});

window.sgWords = {
  ready, state,
  complete: (o) => complete({ ...options(), ...o }),
  fineTune: (steps, words) => fineTune(steps, words).then((done) => ({ done, losses: state.losses })),
  attention: () => [...document.querySelectorAll('#attn canvas')].map((c) => ({ block: c.dataset.block,
                                                                                head: c.dataset.head, w: c.width })),
  save: () => saveWeights(gpu, { dbName }),
  checkpoint: async () => Array.from(await checkpoint()),
  /** A checkpoint's bytes (as "Load .safetensors" reads a file) written into the running runtime. */
  importCheckpoint: async (bytes) => replaceWeights(await checkpointWeights(state.bundle, Uint8Array.from(bytes)),
                                                    'imported'),
  read: async (name) => Array.from(await gpu.read(name)),
  info: () => ({ backend: state.rt?.backend, structure_hash: structureHash(state.bundle), saved: state.savedStatus,
                 persist: $('persist').textContent, status: $('status').textContent, events: state.events,
                 heads: Number(state.meta.heads), layers: Number(state.meta.layers), infer_rows: inferRows(),
                 train_rows: trainRows(), context: context() }),
};
