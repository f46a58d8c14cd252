// The web runtime's storage readback and upload checked against the C++ (issue 35): tests/layout_vectors.cpp writes,
// from today's schedules, bundle records (describe_program, describe_webgpu_program) and TextureLayout, one vector
// per value of a set of small programs: the value's bundle.json record, its textures' (planes') whole allocated
// images as a draw leaves them (elements at TextureLayout::locate of their storage order, a sentinel everywhere
// else) or its storage buffer, and the row-major tensor (NaN, -0, +-inf among the values). For each, bit for bit:
//   - layout.js: unpack() of the storage-order readback equals the tensor; padToLayout() is padded_floats long, the
//     values then zeros;
//   - WebGL2Device.read (webgl2.js, over a mock GL that stores textures at their allocated size and implements
//     readPixels/texSubImage2D as GL does) reads TextureLayout::rows_for(numel) rows of the layout's width;
//   - the executors' own readback: WebGL2Executor's ProgramRun.readValue (planes, transposed) and read(name) of a
//     persistent value; the webgpu and wasm executors' readValue of a buffer (transposed undone, vec4 tail ignored);
//   - bundle.js: loadBundle accepts every record (its storage validation agrees with the C++ layouts);
//   - the upload direction (JS has only row-major uploads: inputs, constants, persistent values): WebGL2Device.upload
//     and WebGL2Executor.write leave each element at the texel the C++ layout puts it, zeros after numel, and the
//     C++ never gives such a value (nor an update) planes or transposed storage.
// Usage: node tests/layout_vectors_check.mjs VECTORS.json   (ctest web_layout_vectors writes the file first)
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { fetchFrom, seedFiles } from './fuzz/bundle_files.mjs';
import { loadBundle } from '../runtime/web/bundle.js';

import { padToLayout, unpack } from '../runtime/web/layout.js';
import { WebGL2Device } from '../runtime/web/webgl2.js';
import { WebGL2Executor } from '../runtime/web/webgl2_executor.js';
import { WebGPUExecutor } from '../runtime/web/webgpu_executor.js';
import { WasmExecutor } from '../runtime/web/wasm_executor.js';

const file = process.argv[2];
if (!file) {
  console.error('usage: node tests/layout_vectors_check.mjs VECTORS.json');
  process.exit(2);
}
const vectors = JSON.parse(readFileSync(file, 'utf8'));

const f32 = (bits) => new Float32Array(Uint32Array.from(bits).buffer);
const u32 = (f) => new Uint32Array(f.buffer, f.byteOffset, f.length);
const hex = (b) => `0x${b.toString(16).padStart(8, '0')}`;

const failures = [];
let checks = 0;
/** Compares float arrays bit for bit (got may be longer when `prefix`); records the first difference. */
function sameBits(what, got, wantBits, prefix = false) {
  ++checks;
  const g = u32(got instanceof Float32Array ? got : Float32Array.from(got));
  if (prefix ? g.length < wantBits.length : g.length !== wantBits.length) {
    failures.push(`${what}: ${g.length} floats, expected ${wantBits.length}`);
    return false;
  }
  for (let i = 0; i < wantBits.length; ++i)
    if (g[i] !== wantBits[i]) {
      failures.push(`${what}: element ${i} is ${hex(g[i])} (${new Float32Array(g.buffer, g.byteOffset)[i]}), expected ` +
                    `${hex(wantBits[i])} (${f32([wantBits[i]])[0]})`);
      return false;
    }
  return true;
}
function check(what, ok, detail = '') {
  ++checks;
  if (!ok) failures.push(`${what}${detail ? `: ${detail}` : ''}`);
}

// --- a mock WebGL2 context: textures at their allocated size, texSubImage2D and readPixels with GL's row order ----
function mockGL() {
  const gl = {
    NO_ERROR: 0, TEXTURE_2D: 0x0de1, RGBA32F: 0x8814, RGBA: 0x1908, FLOAT: 0x1406, NEAREST: 0x2600,
    CLAMP_TO_EDGE: 0x812f, TEXTURE_MIN_FILTER: 0x2801, TEXTURE_MAG_FILTER: 0x2800, TEXTURE_WRAP_S: 0x2802,
    TEXTURE_WRAP_T: 0x2803, READ_FRAMEBUFFER: 0x8ca8, COLOR_ATTACHMENT0: 0x8ce0, FRAMEBUFFER_COMPLETE: 0x8cd5,
    VERTEX_SHADER: 0x8b31, COMPILE_STATUS: 0x8b81, DITHER: 0x0bd0,
    bound: null, attached: null, calls: [],
    getExtension: () => null, createVertexArray: () => ({}), createShader: () => ({}), shaderSource() {},
    compileShader() {}, getShaderParameter: () => true, createFramebuffer: () => ({}), disable() {},
    isContextLost: () => false, getError: () => 0,
    createTexture: () => ({ img: null, width: 0, height: 0 }),
    bindTexture(target, t) { this.bound = t; },
    texStorage2D(target, levels, format, w, h) {
      this.bound.width = w; this.bound.height = h; this.bound.img = new Float32Array(w * h * 4);
    },
    texParameteri() {},
    deleteTexture(t) { t.img = null; },
    texSubImage2D(target, level, x, y, w, h, format, type, data) {
      const t = this.bound;
      if (data.length !== w * h * 4) throw new Error(`texSubImage2D: ${data.length} floats for ${w}x${h} texels`);
      if (x + w > t.width || y + h > t.height) throw new Error(`texSubImage2D ${w}x${h} outside ${t.width}x${t.height}`);
      for (let r = 0; r < h; ++r) t.img.set(data.subarray(r * w * 4, (r + 1) * w * 4), ((y + r) * t.width + x) * 4);
    },
    bindFramebuffer() {},
    framebufferTexture2D(target, attachment, textarget, t) { this.attached = t; },
    readBuffer() {},
    checkFramebufferStatus() { return this.FRAMEBUFFER_COMPLETE; },
    readPixels(x, y, w, h, format, type, out) {
      const t = this.attached;
      if (x + w > t.width || y + h > t.height) throw new Error(`readPixels ${w}x${h} outside ${t.width}x${t.height}`);
      if (out.length < w * h * 4) throw new Error(`readPixels: ${out.length} floats for ${w}x${h} texels`);
      this.calls.push({ w, h });
      for (let r = 0; r < h; ++r)
        out.set(t.img.subarray(((y + r) * t.width + x) * 4, ((y + r) * t.width + x + w) * 4), r * w * 4);
    },
  };
  return gl;
}

const gl = mockGL();
const device = new WebGL2Device(gl, {}, 'mock GL (tests/layout_vectors_check.mjs)', { max_texture_size: 1 << 16 });

/** A texture of `layout` allocated at `size`, holding `imageBits` (the C++ image, allocated width x height). */
function textureWith(name, layout, size, imageBits) {
  const t = device.createTexture(name, layout, size[0], size[1]);
  t.tex.img.set(f32(imageBits));
  return t;
}

/** A one-program bundle as the executors see it (bundle.js Bundle's program(), programNames, persistent). */
const bundleOf = (program) => ({ programNames: ['p'], program: () => program, persistent: [], targets: ['webgl2'] });

const storageForms = new Map();
for (const v of vectors.textures) {
  const rec = v.value, where = `${v.case} ${rec.name} ${JSON.stringify(rec.shape)}`;
  try {
    checkTexture(v, rec, where);
  } catch (e) {
    failures.push(`${where}: threw ${e.stack}`);
  }
}

function checkTexture(v, rec, where) {
  const L = rec.layout, st = rec.storage;
  const P = st.planes;
  const form = P > 1 ? `planes ${st.row_planes}x${st.col_planes}` : st.transposed ? 'transposed' : 'plain';
  storageForms.set(form, (storageForms.get(form) || 0) + 1);
  check(`${where}: a record with ${P} planes and ${v.planes.length} images`, v.planes.length === P);
  const sizes = v.planes.map((img) => img.length);
  check(`${where}: images of the allocated size`, sizes.every((s) => s === v.texture[0] * v.texture[1] * 4),
        JSON.stringify(sizes));

  // WebGL2Device.read of each plane: rows_for(numel) rows of the layout's width, then unpack
  const textures = v.planes.map((img, p) => textureWith(`${where} plane ${p}`, L, rec.allocated, img));
  const reads = textures.map((t) => {
    gl.calls.length = 0;
    const r = device.read(t, L.numel);
    check(`${where}: readPixels of the layout's width and rows_for(numel) rows`,
          gl.calls.length === 1 && gl.calls[0].w === L.width && gl.calls[0].h === Math.max(1, v.rows_for_numel),
          JSON.stringify(gl.calls));
    return r;
  });
  sameBits(`${where}: unpack(WebGL2Device.read planes)`, unpack(reads, L, rec.shape, st), v.expected);

  // the executor's readValue (ProgramRun of WebGL2Executor): the plane textures looked up by value and plane
  const ex = new WebGL2Executor(bundleOf({ values: [rec], kernels: [], buffers: [] }), device);
  const run = ex.programs.get('p');
  run.desc = { ...run.desc, values: { [rec.id]: rec } };
  run.texture = (id, plane = 0) => textures[plane];
  sameBits(`${where}: WebGL2Executor readValue`, run.readValue(rec.id), v.expected);

  // JS uploads only row-major values: those must be stored plain
  const uploaded = rec.kind === 'input' || rec.kind === 'constant' || rec.kind === 'persistent' ||
                   rec.update_of !== undefined;
  if (uploaded)
    check(`${where}: a ${rec.kind}${rec.update_of !== undefined ? ' (update)' : ''} value stored plain (JS uploads ` +
          'and reads it row-major)', P === 1 && !st.transposed, JSON.stringify(st));
  if (P === 1 && !st.transposed) {
    // padToLayout: padded_floats long, the values, then zeros
    const values = f32(v.expected);
    const padded = padToLayout(values, L);
    const want = new Uint32Array(v.padded_floats);
    want.set(v.expected);
    sameBits(`${where}: padToLayout`, padded, want);
    // WebGL2Device.upload into a fresh texture: the layout's texels as the C++ image has them, zeros after numel
    const t = device.createTexture(`${where} upload`, L, rec.allocated[0], rec.allocated[1]);
    device.upload(t, values);
    const W = rec.allocated[0], img = u32(t.tex.img), cpp = v.planes[0];
    let bad = -1;
    for (let e = 0; e < L.width * L.height * 4 && bad < 0; ++e) {
      const tx = Math.floor(e / 4), at = (Math.floor(tx / L.width) * W + tx % L.width) * 4 + e % 4;
      if (img[at] !== (e < L.numel ? cpp[at] : 0)) bad = e;
    }
    check(`${where}: WebGL2Device.upload places element e where TextureLayout::locate(e) does, zeros after numel`,
          bad < 0, `storage element ${bad}`);
    if (rec.kind === 'persistent') {  // the executor's write() and read() of a persistent value
      const ex2 = new WebGL2Executor(bundleOf({ values: [], kernels: [], buffers: [] }), device);
      const front = device.createTexture(`${where} front`, L, rec.allocated[0], rec.allocated[1]);
      ex2.store.entries.set(rec.tensor, { desc: { ...rec, layout: L }, front, back: null });
      ex2.write(rec.tensor, values);
      sameBits(`${where}: WebGL2Executor write then read`, ex2.read(rec.tensor), v.expected);
      const t3 = textureWith(`${where} drawn`, L, rec.allocated, v.planes[0]);
      ex2.store.entries.get(rec.tensor).front = t3;
      sameBits(`${where}: WebGL2Executor read of the C++ image`, ex2.read(rec.tensor), v.expected);
    }
  }
  for (const t of textures) device.deleteTexture(t);
}

// --- buffers: the webgpu and wasm executors' readValue --------------------------------------------------------
let buffersChecked = 0;
for (const v of vectors.buffers) {
  const rec = v.value, where = `${v.case} ${rec.name} ${JSON.stringify(rec.shape)}`;
  try {
    await checkBuffer(v, rec, where);
  } catch (e) {
    failures.push(`${where}: threw ${e.stack}`);
  }
}

async function checkBuffer(v, rec, where) {
  check(`${where}: bytes = the buffer's floats x 4, a multiple of 16`, rec.bytes === v.buffer.length * 4 &&
        rec.bytes % 16 === 0, `${rec.bytes} bytes, ${v.buffer.length} floats`);
  const data = f32(v.buffer);
  // webgpu: device.read(buffer, 4 * numel) maps a staging copy of that many bytes
  const gpuDevice = {
    async read(buf, bytes) {
      if (bytes > rec.bytes) throw new Error(`read of ${bytes} bytes from a buffer of ${rec.bytes}`);
      return data.slice(0, Math.ceil(bytes / 4));
    },
  };
  const gex = new WebGPUExecutor(bundleOf({ webgpu: { values: [rec], kernels: [], buffers: [] } }), gpuDevice);
  const grun = gex.programs.get('p');
  grun.desc = { ...grun.desc, values: { [rec.id]: rec } };
  grun.buffer = () => 'the buffer';
  sameBits(`${where}: WebGPUExecutor readValue`, await grun.readValue(rec.id), v.expected);
  // wasm: a view of numel floats at the value's offset in the module's memory
  const mem = new ArrayBuffer(16 + rec.bytes + 16);
  new Float32Array(mem, 16, data.length).set(data);
  new Float32Array(mem, 16 + rec.bytes, 4).fill(-7);  // the next allocation
  const wasmDevice = { f32: (at, n) => new Float32Array(mem, at, n) };
  const wex = new WasmExecutor(bundleOf({ wasm: { values: [rec], kernels: [], buffers: [] } }), wasmDevice);
  const wrun = wex.programs.get('p');
  wrun.desc = { ...wrun.desc, values: { [rec.id]: rec } };
  wrun.offset = () => 16;
  sameBits(`${where}: WasmExecutor readValue`, wrun.readValue(rec.id), v.expected);
  ++buffersChecked;
}

// --- the bundle loader's storage validation (bundle.js) accepts every C++ record of a temporary, input, constant or
// output (persistent values and updates need the bundle's persistent list); a record off by one texel is refused --
/** loadBundle of the seed bundle tests/fuzz/corpus/bundle/mlp_infer_both.json with `records` added to its first
 * program's values (each temporary with pooled textures of its own); the error thrown, or null. */
async function loadWith(records) {
  const seed = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fuzz/corpus/bundle/mlp_infer_both.json');
  const text = readFileSync(seed, 'utf8');
  const files = seedFiles(text), json = JSON.parse(text);
  const p = Object.values(json.programs)[0];
  for (const rec of records) {
    const r = structuredClone(rec);
    r.id = p.values.length;
    const pooled = () => { p.buffers.push({ layout: r.layout, allocated: r.allocated }); return p.buffers.length - 1; };
    if (r.buffer !== undefined) r.buffer = pooled();
    if (r.plane_buffers) r.plane_buffers = r.plane_buffers.map(pooled);
    p.values.push(r);
  }
  files.set('bundle.json', JSON.stringify(json));
  const base = 'http://layout-vectors.invalid/b/';
  try {
    await loadBundle(`${base}bundle.json`, { fetch: fetchFrom(files, base), shaders: 'all' });
    return null;
  } catch (e) {
    return e;
  }
}
const loadable = vectors.textures.map((v) => v.value).filter((r) => r.kind !== 'persistent' && r.update_of === undefined);
const err = await loadWith(loadable);
check(`loadBundle of ${loadable.length} C++ value records`, !err, err?.message);
const planed = loadable.find((r) => r.storage.planes > 1);
const shifted = { ...planed, layout: { ...planed.layout, numel: planed.layout.numel + 4, texels: planed.layout.texels + 1 } };
check('loadBundle refuses a planed record whose layout holds one texel more', !!(await loadWith([shifted])));

const summary = `${vectors.textures.length} texture vectors (${[...storageForms].map(([f, n]) => `${n} ${f}`).join(', ')})` +
                `, ${buffersChecked} buffer vectors; C++ storage forms: ${vectors.forms.join(', ')}; ${checks} checks`;
if (failures.length) {
  console.error(`layout vectors: ${failures.length} of ${checks} checks failed:`);
  for (const f of failures.slice(0, 30)) console.error(`  ${f}`);
  if (failures.length > 30) console.error(`  ... and ${failures.length - 30} more`);
  console.error(summary);
  process.exit(1);
}
console.log(`layout vectors: all passed: ${summary}`);
console.log(`C++ placement against the GPU (layout_vectors.cpp GpuCheck): ${vectors.gles_cross_check}`);
