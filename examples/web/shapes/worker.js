// Shapes page — the dedicated Worker (seed 003 §2.2): the runtime lives here on its own OffscreenCanvas; frames
// arrive as transferred ImageBitmaps or transferred ArrayBuffers (zero copy: the sender's object is detached),
// are read into the model's input, classified, and drawn with the prediction on the page's canvas, whose control
// was transferred here (transferControlToOffscreen). Input buffers are reused (one Float32Array for every frame),
// transferred ArrayBuffers are sent back for the page to refill (double buffering). Messages:
//   {op: 'init', bundle, canvas, backend}         -> {op: 'ready', backend, attempts, weights, kernels, textures}
//   {op: 'bitmap', id, bitmap}                     -> {op: 'result', id, probs, ms, textures}
//   {op: 'buffer', id, buffer (RGBA bytes)}        -> {op: 'result', id, probs, ms, textures, buffer (returned)}
//   {op: 'checks', id}                             -> {op: 'result', id, ok, runs} (the bundle's checks)
//   {op: 'dispose'}                                -> {op: 'disposed'}
import { createRuntime } from './bundle/runtime/shadergrad.js';

const SIDE = 128;
const NAMES = ['disc', 'square', 'triangle', 'plus'];
let rt = null, view = null, scratch = null, x = null;
// every texture/buffer the GPU API creates here, counted: pooling means the count stays fixed after set-up
let created = 0;
for (const proto of [globalThis.WebGL2RenderingContext?.prototype]) {
  if (!proto) continue;
  const orig = proto.createTexture;
  proto.createTexture = function () { ++created; return orig.call(this); };
}
if (globalThis.GPUDevice) {
  const orig = GPUDevice.prototype.createBuffer;
  GPUDevice.prototype.createBuffer = function (d) { ++created; return orig.call(this, d); };
}

function draw(src, probs) {
  if (!view) return;
  const g = view.getContext('2d');
  g.drawImage(src, 0, 0, view.width, view.height);
  let best = 0;
  for (let i = 1; i < NAMES.length; ++i) if (probs[i] > probs[best]) best = i;
  g.fillStyle = 'rgba(0,0,0,0.6)';
  g.fillRect(0, view.height - 22, view.width, 22);
  g.fillStyle = '#fff';
  g.font = '14px sans-serif';
  g.fillText(`${NAMES[best]} ${(probs[best] * 100).toFixed(1)}%`, 6, view.height - 6);
}

async function classify(pixels) {
  for (let i = 0, j = 0; j < x.length; i += 4, ++j) x[j] = pixels[i] / 255;
  const t0 = performance.now();
  const { probs } = await rt.run('infer', { x });
  return { probs, ms: performance.now() - t0 };
}

self.onmessage = async (e) => {
  const m = e.data;
  try {
    if (m.op === 'init') {
      view = m.canvas || null;
      scratch = new OffscreenCanvas(SIDE, SIDE);
      x = new Float32Array(SIDE * SIDE);
      // compile: 'all': 'ready' means every kernel is compiled and every texture made (the first frame waits for
      // nothing; the runtime's default would compile at the first frame)
      rt = await createRuntime(m.bundle, { backend: m.backend || 'auto', compile: 'all' });
      const infer = rt.bundle.program('infer');
      const meta = rt.bundle.json.metadata || {};
      self.postMessage({ op: 'ready', backend: rt.backend, attempts: rt.attempts, stats: rt.stats,
                         weights: { initial: meta.initial_parameters, test_accuracy: meta.checkpoint_test_accuracy },
                         kernels: infer.kernels.map((k) => ({ name: k.name, ops: k.nodes.map((n) => n.op) })),
                         textures: created });
    } else if (m.op === 'bitmap') {
      const g = scratch.getContext('2d', { willReadFrequently: true });
      g.drawImage(m.bitmap, 0, 0, SIDE, SIDE);
      const r = await classify(g.getImageData(0, 0, SIDE, SIDE).data);
      draw(m.bitmap, r.probs);
      m.bitmap.close();
      self.postMessage({ op: 'result', id: m.id, probs: r.probs, ms: r.ms, textures: created }, [r.probs.buffer]);
    } else if (m.op === 'buffer') {
      const pixels = new Uint8ClampedArray(m.buffer);
      const r = await classify(pixels);
      if (view) {
        scratch.getContext('2d').putImageData(new ImageData(pixels, SIDE, SIDE), 0, 0);
        draw(scratch, r.probs);
      }
      self.postMessage({ op: 'result', id: m.id, probs: r.probs, ms: r.ms, textures: created, buffer: m.buffer },
                       [r.probs.buffer, m.buffer]);
    } else if (m.op === 'checks') {
      // the bundle's checks (expected outputs of the native CPU backend) replayed on this Worker's runtime
      const c = await rt.runChecks();
      self.postMessage({ op: 'result', id: m.id, ok: c.ok,
                         runs: c.runs.map((x) => ({ program: x.program,
                                                    worst: Math.max(...Object.values(x.outputs).map((o) => o.max_rel)) })) });
    } else if (m.op === 'dispose') {
      rt?.dispose();
      rt = null;
      self.postMessage({ op: 'disposed' });
    }
  } catch (err) {
    self.postMessage({ op: 'error', id: m.id, name: err.name, message: err.message });
  }
};
