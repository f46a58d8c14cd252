// shadergrad web runtime — weights that outlive the page (seed 000 §7.3): every persistent value of a runtime
// (parameters and optimizer state) saved in IndexedDB under a key that includes the bundle's structure hash
// (bundle.json `metadata.structure_hash`, sg::web::structure_hash: the programs' graphs and the names and shapes
// of the persistent values), so a changed model never loads old weights and says so; and the parameters as a
// `.safetensors` checkpoint in the format `shadergrad train --save` writes (metadata format
// "shadergrad-checkpoint/1", model, dataset, structure_hash of the nn::Sequential, SHA-256 of the data section),
// which `shadergrad predict --load` reads, and back.
//
//   const found = await loadWeights(bundle);            // {status: 'loaded' | 'none' | 'mismatch', weights, message}
//   const rt = await createRuntime(found.weights ? withWeights(bundle, found.weights) : bundle);
//   await saveWeights(rt);                              // after training
//   const bytes = await checkpointBytes(rt);            // download as model.safetensors
//   const w = await checkpointWeights(bundle, bytes);   // an uploaded checkpoint -> withWeights(bundle, w)
import { Bundle } from './bundle.js';
import { BundleError } from './errors.js';
import { parseSafetensors } from './safetensors.js';

/** IndexedDB database and object store the weights live in. */
export const DB_NAME = 'shadergrad';
const STORE = 'weights';
const CHECKPOINT_FORMAT = 'shadergrad-checkpoint/1';
const SHA_KEY = 'shadergrad.data_sha256';

/** The bundle's structure hash; BundleError when the bundle was exported without one. */
export function structureHash(bundle) {
  const h = bundle.json.metadata?.structure_hash;
  if (typeof h !== 'string' || !h)
    throw new BundleError('bundle.json has no metadata.structure_hash: export the bundle again with a shadergrad ' +
                          'that writes it, so saved weights can be matched to the model', {});
  return h;
}

/** The IndexedDB key of a bundle's weights: "MODEL@STRUCTURE_HASH" (a slot name may follow: "...#slot"). */
export function weightsKey(bundle, slot = 'default') {
  return `${bundle.model}@${structureHash(bundle)}#${slot}`;
}

function request(r) {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

async function openDb(name = DB_NAME) {
  if (!globalThis.indexedDB) throw new BundleError('IndexedDB is not available here (a private window, or a ' +
                                                   'browser setting): weights cannot be saved', {});
  const r = indexedDB.open(name, 1);
  r.onupgradeneeded = () => r.result.createObjectStore(STORE);
  return request(r);
}

async function withStore(mode, fn, dbName) {
  const db = await openDb(dbName);
  try {
    const tx = db.transaction(STORE, mode);
    const done = new Promise((resolve, reject) => {
      tx.oncomplete = resolve;
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
    const result = await fn(tx.objectStore(STORE));
    await done;
    return result;
  } finally {
    db.close();
  }
}

/**
 * Reads every persistent value of a runtime and stores them in IndexedDB under weightsKey(bundle, slot).
 * @param {{bundle: Bundle, read(name: string): Promise<Float32Array>}} rt a Runtime or WorkerRuntime
 * @returns {Promise<{key: string, values: number, bytes: number}>}
 */
export async function saveWeights(rt, { slot = 'default', dbName, extra = {} } = {}) {
  const bundle = rt.bundle;
  const tensors = {};
  let bytes = 0;
  for (const p of bundle.persistent) {
    tensors[p.name] = await rt.read(p.name);
    bytes += tensors[p.name].byteLength;
  }
  const key = weightsKey(bundle, slot);
  const record = { key, model: bundle.model, structure_hash: structureHash(bundle), saved_at: new Date().toISOString(),
                   shapes: Object.fromEntries(bundle.persistent.map((p) => [p.name, p.shape])), tensors, ...extra };
  await withStore('readwrite', (s) => request(s.put(record, key)), dbName);
  return { key, values: bundle.persistent.length, bytes };
}

/**
 * Looks up saved weights for this bundle. `status`: 'loaded' (weights: Map name -> Float32Array of every
 * persistent value), 'none' (nothing saved for any structure of this model), or 'mismatch' (weights saved for
 * this model name under another structure hash exist and are NOT loaded; `message` says so, `stale` lists keys).
 * A record under the right key whose shapes disagree with the bundle is refused as a mismatch too.
 */
export async function loadWeights(bundle, { slot = 'default', dbName } = {}) {
  const key = weightsKey(bundle, slot);
  const hash = structureHash(bundle);
  const [record, keys] = await withStore('readonly', async (s) => [await request(s.get(key)),
                                                                   await request(s.getAllKeys())], dbName);
  const stale = keys.filter((k) => typeof k === 'string' && k !== key && k.startsWith(`${bundle.model}@`) &&
                                   k.endsWith(`#${slot}`));
  if (record) {
    const bad = checkRecord(bundle, record, hash);
    if (bad) return { status: 'mismatch', weights: null, stale: [key], message: bad };
    return { status: 'loaded', weights: new Map(Object.entries(record.tensors)), saved_at: record.saved_at,
             key, message: `loaded the weights saved ${record.saved_at} (structure ${hash})` };
  }
  if (stale.length)
    return { status: 'mismatch', weights: null, stale, key,
             message: `saved weights of '${bundle.model}' exist for another model structure ` +
                      `(${stale.map((k) => k.split('@')[1].split('#')[0]).join(', ')}; this bundle's is ${hash}): ` +
                      'the model changed since they were saved, so they are not loaded; the bundle\'s initial ' +
                      'weights are used' };
  return { status: 'none', weights: null, stale, key, message: `no saved weights for structure ${hash}` };
}

function checkRecord(bundle, record, hash) {
  if (record.structure_hash !== hash)
    return `the saved record has structure ${record.structure_hash}, the bundle ${hash}: not loaded`;
  for (const p of bundle.persistent) {
    const t = record.tensors?.[p.name];
    const n = p.shape.reduce((a, b) => a * b, 1);
    if (!(t instanceof Float32Array) || t.length !== n)
      return `the saved record's '${p.name}' has ${t?.length ?? 'no'} values, the bundle needs ${n}: not loaded`;
  }
  return null;
}

/** Deletes the saved weights of this bundle's structure (or of `key`). */
export async function forgetWeights(bundle, { slot = 'default', dbName, key } = {}) {
  const k = key ?? weightsKey(bundle, slot);
  await withStore('readwrite', (s) => request(s.delete(k)), dbName);
}

/**
 * A Bundle that is `bundle` with other initial values for some persistent values (name -> Float32Array of numel
 * values, row-major), for createRuntime(): weights from IndexedDB or a checkpoint. Unnamed values keep the
 * bundle's initial data. BundleError for an unknown name or a wrong size.
 */
export function withWeights(bundle, weights) {
  const byName = new Map(bundle.persistent.map((p) => [p.name, p]));
  const override = new Map();
  for (const [name, v] of weights) {
    const p = byName.get(name);
    if (!p) throw new BundleError(`weights for '${name}', which the bundle has no persistent value of`, { tensor: name });
    const n = p.shape.reduce((a, b) => a * b, 1);
    if (v.length !== n)
      throw new BundleError(`weights for '${name}' have ${v.length} values, the bundle's [${p.shape}] needs ${n}`,
                            { tensor: name });
    override.set(p.data.file + '\u0000' + p.data.tensor, Float32Array.from(v));
  }
  const b = Object.create(bundle);
  b.data = (ref) => {
    const o = override.get(ref.file + '\u0000' + ref.tensor);
    return o ? o.slice() : bundle.data(ref);
  };
  return b;
}

async function sha256Hex(bytes) {
  const d = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return [...d].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * The persistent values a checkpoint holds: the parameters (kind "param") and the buffers that
 * metadata.checkpoint_buffers names (a JSON array, e.g. BatchNorm's running statistics of `--model resnet`), in the
 * bundle's order. `need`: every named buffer must be a persistent value of the bundle (BundleError otherwise: an
 * --infer-only bundle reads no num_batches_tracked).
 */
function checkpointTensors(bundle, need) {
  const buffers = new Set(JSON.parse(bundle.json.metadata?.checkpoint_buffers || '[]'));
  const have = new Set(bundle.persistent.map((p) => p.name));
  for (const b of buffers)
    if (need && !have.has(b))
      throw new BundleError(`the model's buffer '${b}' is not a persistent value of this bundle (an --infer-only ` +
                            'export?): export the bundle with its train program to save checkpoints', { tensor: b });
  return bundle.persistent.filter((p) => p.kind === 'param' || buffers.has(p.name));
}

/**
 * The parameters of a runtime (persistent values of kind "param") and the buffers metadata.checkpoint_buffers
 * names (BatchNorm's running statistics) as a checkpoint file (safetensors bytes) in the format of
 * `shadergrad train --save`: `shadergrad predict --load FILE` reads it.
 * Needs the bundle's metadata.checkpoint_model / checkpoint_structure_hash / dataset (shadergrad export writes them).
 * @returns {Promise<Uint8Array>}
 */
export async function checkpointBytes(rt, { extra = {} } = {}) {
  const m = rt.bundle.json.metadata || {};
  for (const k of ['checkpoint_model', 'checkpoint_structure_hash', 'dataset'])
    if (!m[k]) throw new BundleError(`bundle.json metadata has no '${k}': export the bundle again to save checkpoints`, {});
  const params = checkpointTensors(rt.bundle, true);
  const datas = [];
  for (const p of params) datas.push(await rt.read(p.name));
  const total = datas.reduce((a, d) => a + d.byteLength, 0);
  const data = new Uint8Array(total);
  const header = {};
  let off = 0;
  params.forEach((p, i) => {
    data.set(new Uint8Array(datas[i].buffer, datas[i].byteOffset, datas[i].byteLength), off);
    header[p.name] = { dtype: 'F32', shape: p.shape, data_offsets: [off, off + datas[i].byteLength] };
    off += datas[i].byteLength;
  });
  header.__metadata__ = { format: CHECKPOINT_FORMAT, model: m.checkpoint_model, dataset: m.dataset,
                          structure_hash: m.checkpoint_structure_hash, saved_by: 'shadergrad web runtime',
                          ...extra, [SHA_KEY]: await sha256Hex(data) };
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += ' ';
  const hb = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + hb.length + total);
  new DataView(out.buffer).setBigUint64(0, BigInt(hb.length), true);
  out.set(hb, 8);
  out.set(data, 8 + hb.length);
  return out;
}

/**
 * The parameters (and the buffers metadata.checkpoint_buffers names that the bundle has) in a checkpoint
 * (`shadergrad train --save`, or checkpointBytes) as a Map for withWeights(), after
 * checking it belongs to this bundle's model: format, structure hash, every parameter present with its shape,
 * the SHA-256 of the data when recorded. BundleError naming what differs otherwise.
 * @param {ArrayBuffer|Uint8Array} bytes
 */
export async function checkpointWeights(bundle, bytes, file = 'checkpoint') {
  const buf = bytes instanceof ArrayBuffer ? bytes : bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  const st = parseSafetensors(buf, file);
  const meta = st.metadata;
  const want = bundle.json.metadata?.checkpoint_structure_hash;
  if (meta.format !== CHECKPOINT_FORMAT)
    throw new BundleError(`${file}: not a shadergrad checkpoint (metadata format '${meta.format}', expected ` +
                          `'${CHECKPOINT_FORMAT}')`, { file });
  if (!want || meta.structure_hash !== want)
    throw new BundleError(`${file}: the checkpoint is for another model structure (model '${meta.model}', structure ` +
                          `${meta.structure_hash}; this bundle's model '${bundle.json.metadata?.checkpoint_model}' is ` +
                          `${want}): not loaded`, { file, structure_hash: meta.structure_hash });
  if (meta[SHA_KEY]) {
    const got = await sha256Hex(new Uint8Array(buf, st.dataStart));
    if (got !== meta[SHA_KEY])
      throw new BundleError(`${file}: the data's SHA-256 is ${got} but the checkpoint records ${meta[SHA_KEY]}: the ` +
                            'file is corrupt', { file });
  }
  const weights = new Map();
  for (const p of checkpointTensors(bundle, false)) {
    const e = st.tensors.get(p.name);
    if (!e) throw new BundleError(`${file}: ${p.kind === 'param' ? 'parameter' : 'buffer'} '${p.name}' is missing`,
                                  { file, tensor: p.name });
    if (e.dtype !== 'F32' || JSON.stringify(e.shape) !== JSON.stringify(p.shape))
      throw new BundleError(`${file}: '${p.name}' is ${e.dtype} ${JSON.stringify(e.shape)}, the bundle needs F32 ` +
                            `${JSON.stringify(p.shape)}`, { file, tensor: p.name });
    weights.set(p.name, new Float32Array(buf.slice(e.begin, e.end)));
  }
  return weights;
}
