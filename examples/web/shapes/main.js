// Shapes page — the main thread: makes frames (frames.js) and posts them to the Worker (worker.js) as transferred
// ImageBitmaps (or transferred ArrayBuffers, two in rotation), one frame in flight at a time; it never touches the
// GPU runtime. window.sgShapes is the page's API for tests (tests/web_app_check.mjs).
import { SHAPE_NAMES, drawShape, rng } from './frames.js';

const $ = (id) => document.getElementById(id);
const SIDE = 128;
const params = new URLSearchParams(location.search);
const worker = new Worker('worker.js', { type: 'module' });
const src = $('source').getContext('2d', { willReadFrequently: true });
const pending = new Map();
let nextId = 0, stopped = false;
const spare = [new ArrayBuffer(SIDE * SIDE * 4), new ArrayBuffer(SIDE * SIDE * 4)];  // double buffering
const state = { results: [], detachedAfterSend: [], ready: null, info: null, mainFrames: 0 };

const ready = new Promise((resolve, reject) => {
  worker.onmessage = (e) => {
    const m = e.data;
    if (m.op === 'ready') { state.info = m; resolve(m); return; }
    if (m.op === 'error' && m.id === undefined) { reject(new Error(`${m.name}: ${m.message}`)); return; }
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.op === 'error') p.reject(new Error(`${m.name}: ${m.message}`));
    else {
      if (m.buffer) spare.push(m.buffer);
      p.resolve(m);
    }
  };
  worker.onerror = (e) => reject(new Error(e.message));
});
const view = $('view').transferControlToOffscreen();
worker.postMessage({ op: 'init', bundle: new URL('bundle/bundle.json', location.href).href, canvas: view,
                     backend: params.get('backend') || 'auto' }, [view]);
ready.then((m) => {
  $('backend').textContent = `backend (in the Worker): ${m.backend}\n` +
    m.attempts.map((a) => `${a.ok ? '✓' : '✗'} ${a.backend}: ${a.reason}`).join('\n') +
    `\ninfer: ${m.kernels.length} kernels\n` + weightsLine(m.weights);
}, (e) => { $('backend').textContent = `failed: ${e.message}`; });

/** What the Worker's weights are: the shipped checkpoint with its test accuracy, or an untrained fresh init. */
function weightsLine(w) {
  if (w.test_accuracy !== undefined)
    return `weights: trained natively (shadergrad train --model cnn5 --dataset shapes), test accuracy ${(100 * Number(w.test_accuracy)).toFixed(1)}% on the generated test set`;
  if (w.initial && !w.initial.startsWith('fresh init')) return `weights: ${w.initial}`;
  return 'weights: UNTRAINED (fresh init; the predictions are chance): build the page with the shipped checkpoint, see examples/web/README.md';
}

/** Draws frame `seed` (class seed % 4) and sends it; resolves to the Worker's result {probs, ms, k}. */
async function frame(seed, useBuffers = $('buffers').checked) {
  const k = seed % SHAPE_NAMES.length;
  drawShape(src, SIDE, k, rng(seed * 7 + 1));
  const id = nextId++;
  const done = new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
  if (useBuffers) {
    const buffer = spare.pop() || new ArrayBuffer(SIDE * SIDE * 4);
    new Uint8ClampedArray(buffer).set(src.getImageData(0, 0, SIDE, SIDE).data);
    worker.postMessage({ op: 'buffer', id, buffer }, [buffer]);
    state.detachedAfterSend.push(buffer.byteLength);  // 0: transferred, not copied
  } else {
    const bitmap = await createImageBitmap($('source'));
    worker.postMessage({ op: 'bitmap', id, bitmap }, [bitmap]);
    state.detachedAfterSend.push(bitmap.width);  // 0: a transferred ImageBitmap is detached here
  }
  const r = await done;
  const res = { k, probs: Array.from(r.probs), ms: r.ms, textures: r.textures };
  state.results.push(res);
  return res;
}

async function runFrames(n, useBuffers) {
  stopped = false;
  for (let i = 0; i < n && !stopped; ++i) {
    const r = await frame(i, useBuffers);
    const best = r.probs.slice(0, 4).indexOf(Math.max(...r.probs.slice(0, 4)));
    $('status').textContent = `frame ${i + 1}/${n}: ${SHAPE_NAMES[r.k]} -> ${SHAPE_NAMES[best]}, ${r.ms.toFixed(1)} ms in the Worker`;
  }
  const ok = state.results.filter((r) => r.probs.slice(0, 4).indexOf(Math.max(...r.probs.slice(0, 4))) === r.k).length;
  $('status').textContent += `\n${ok}/${state.results.length} frames classified right so far`;
}

// the main thread keeps animating (a counter of its frames) while the Worker works
const tick = () => { ++state.mainFrames; requestAnimationFrame(tick); };
requestAnimationFrame(tick);
$('run').onclick = () => runFrames(50);
$('stop').onclick = () => { stopped = true; };
document.addEventListener('visibilitychange', () => { if (document.hidden) stopped = true; });
addEventListener('pagehide', () => { worker.postMessage({ op: 'dispose' }); worker.terminate(); });

function checks() {
  const id = nextId++;
  const done = new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
  worker.postMessage({ op: 'checks', id });
  return done.then((m) => ({ ok: m.ok, runs: m.runs }));
}

window.sgShapes = { ready, state, frame, runFrames, checks,
                    dispose: () => new Promise((resolve) => {
                      worker.addEventListener('message', (e) => { if (e.data.op === 'disposed') resolve(true); });
                      worker.postMessage({ op: 'dispose' });
                    }) };
