// bench/web_app_bench.mjs's TF.js peer of the shapes Worker (examples/web/shapes/worker.js): the same 128x128
// five-conv CNN (sg::nn::make_cnn5: 3x3 pad 1 convs of 4, 8, 8, 16, 16 channels, each + bias, ReLU, 2x2 max pool,
// then Linear(256, 4), softmax) with the same weights (the bundle's weights.safetensors, OIHW converted to HWIO),
// TF.js 4.22 on 'webgl' (the Worker's OffscreenCanvas) or 'webgpu' (tfjs-backend-webgpu 4.22), init's `backend`.
// Same messages as ours: init -> ready, bitmap -> result {probs, ms}.
/* global tf, importScripts */
let model = null, canvas = null;

function parseSafetensors(buf) {
  const n = Number(new DataView(buf).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 8, n)));
  const out = {};
  for (const [k, e] of Object.entries(header))
    if (k !== '__metadata__') out[k] = { shape: e.shape, data: new Float32Array(buf.slice(8 + n + e.data_offsets[0], 8 + n + e.data_offsets[1])) };
  return out;
}

function oihwToHwio(t) {
  const [o, i, h, w] = t.shape;
  const d = new Float32Array(t.data.length);
  for (let a = 0; a < o; ++a) for (let b = 0; b < i; ++b) for (let y = 0; y < h; ++y) for (let x = 0; x < w; ++x)
    d[((y * w + x) * i + b) * o + a] = t.data[((a * i + b) * h + y) * w + x];
  return tf.tensor(d, [h, w, i, o]);
}

self.onmessage = async (e) => {
  const m = e.data;
  try {
    if (m.op === 'init') {
      const backend = m.backend === 'webgpu' ? 'webgpu' : 'webgl';
      importScripts(m.tfjs);
      if (backend === 'webgpu') importScripts(m.tfjsWebgpu);
      if (!(await tf.setBackend(backend))) throw new Error(`TF.js backend ${backend} is not available in this Worker`);
      await tf.ready();
      const w = parseSafetensors(await (await fetch(m.weights)).arrayBuffer());
      // Sequential indices: block b's conv is layer 3b (0, 3, 6, 9, 12), the Linear is layer 16
      const convs = [0, 3, 6, 9, 12].map((i) => ({ f: oihwToHwio(w[`${i}.weight`]), b: tf.tensor(w[`${i}.bias`].data) }));
      const lw = w["16.weight"];  // [classes, 256] over NCHW-flattened features
      const lin = { w: tf.transpose(tf.tensor(lw.data, lw.shape)), b: tf.tensor(w['16.bias'].data) };
      model = (x) => tf.tidy(() => {
        let h = x;
        for (const c of convs) h = tf.maxPool(tf.relu(tf.add(tf.conv2d(h, c.f, 1, 'same'), c.b)), 2, 2, 'valid');
        h = tf.reshape(tf.transpose(h, [0, 3, 1, 2]), [1, 256]);  // NHWC -> NCHW order, as the Linear expects
        return tf.softmax(tf.add(tf.matMul(h, lin.w), lin.b));
      });
      canvas = new OffscreenCanvas(128, 128);
      const warm = model(tf.zeros([1, 128, 128, 1]));
      await warm.data();
      warm.dispose();
      self.postMessage({ op: 'ready', backend: `tfjs ${tf.version_core} ${tf.getBackend()}` });
    } else if (m.op === 'bitmap') {
      const g = canvas.getContext('2d', { willReadFrequently: true });
      g.drawImage(m.bitmap, 0, 0);
      m.bitmap.close();
      const px = g.getImageData(0, 0, 128, 128).data;
      const x = new Float32Array(128 * 128);
      for (let i = 0, j = 0; j < x.length; i += 4, ++j) x[j] = px[i] / 255;
      const t0 = performance.now();
      const xt = tf.tensor(x, [1, 128, 128, 1]);
      const p = model(xt);
      const probs = await p.data();
      const ms = performance.now() - t0;
      tf.dispose([xt, p]);
      self.postMessage({ op: 'result', id: m.id, probs, ms });
    }
  } catch (err) {
    self.postMessage({ op: 'error', id: m.id, message: err.message });
  }
};
