// The files a bundle.json names, made up in memory (tests/fuzz/fuzz_bundle.mjs, tests/bundle_shapes_check.mjs): every
// shader file a short source, every data file a safetensors file whose header puts each referenced tensor exactly at
// the offset bundle.json gives (F32, shape [bytes / 4]), and a fetch that serves them; loadBundle runs on them in
// Node without a GPU or a server.

/** Every data reference ({file, tensor, offset, bytes}) of a bundle.json: weights, constants, checks. */
export function dataRefs(json) {
  const refs = [];
  const add = (r) => { if (r && typeof r === 'object' && typeof r.file === 'string') refs.push(r); };
  for (const p of json.persistent || []) add(p.data);
  const plans = Array.isArray(json.webgpu?.plans) ? json.webgpu.plans.map((p) => p.program_key) : ['webgpu'];
  for (const p of Object.values(json.programs || {})) {
    for (const v of p.values || []) add(v.data);
    for (const k of plans) for (const v of p[k]?.values || []) add(v.data);
  }
  for (const r of json.checks?.runs || []) for (const x of [...Object.values(r.feeds), ...Object.values(r.outputs)]) add(x);
  for (const x of Object.values(json.checks?.persistent_after || {})) add(x);
  return refs;
}

/** Every shader file a bundle.json names (glsl_es, wgsl of every plan). */
export function shaderPaths(json) {
  const paths = new Set();
  for (const p of Object.values(json.programs || {}))
    for (const d of [p, ...Object.values(p).filter((x) => x && typeof x === 'object' && Array.isArray(x.kernels))])
      for (const k of d.kernels || []) for (const f of [k.glsl_es, k.wgsl]) if (typeof f === 'string') paths.add(f);
  return paths;
}

/** A safetensors file holding every reference to `file` at its offset (header padded with spaces to fit). */
export function makeSafetensors(refs) {
  const byName = new Map(refs.map((r) => [r.tensor, r]));
  const sorted = [...byName.values()].sort((a, b) => a.offset - b.offset);
  const dataStart = sorted[0].offset;
  const header = {};
  for (const r of sorted)
    header[r.tensor] = { dtype: 'F32', shape: [r.bytes / 4], data_offsets: [r.offset - dataStart, r.offset - dataStart + r.bytes] };
  let text = JSON.stringify(header);
  if (8 + text.length > dataStart) throw new Error(`seed: header of ${text.length} bytes does not fit before ${dataStart}`);
  text = text.padEnd(dataStart - 8, ' ');
  const end = Math.max(...sorted.map((r) => r.offset + r.bytes));
  const bytes = new Uint8Array(end);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(text.length), true);
  bytes.set(new TextEncoder().encode(text), 8);
  const f = new Float32Array(bytes.buffer, dataStart, (end - dataStart) >> 2);
  for (let i = 0; i < f.length; ++i) f[i] = ((i * 37) % 101) / 101 - 0.5;
  return bytes;
}

/** The file map of a seed bundle.json text: name -> string (bundle.json, shaders) or Uint8Array (data). */
export function seedFiles(text) {
  const json = JSON.parse(text);
  const files = new Map([['bundle.json', text]]);
  for (const p of shaderPaths(json)) files.set(p, `// ${p}\n`);
  const byFile = new Map();
  for (const r of dataRefs(json)) byFile.set(r.file, [...(byFile.get(r.file) || []), r]);
  for (const [f, refs] of byFile) files.set(f, makeSafetensors(refs));
  return files;
}

/**
 * A fetch over a file map (seedFiles): `BASE + name` -> the file, 404 for a name it lacks; names in `throwOn` make
 * it throw (a connection that fails).
 * @param {Map<string, string|Uint8Array>} files
 * @param {string} base the URL prefix of the bundle directory, ending in '/'
 * @param {Set<string>} [throwOn]
 */
export function fetchFrom(files, base, throwOn = new Set()) {
  return async (url) => {
    const u = String(url), raw = u.startsWith(base) ? u.slice(base.length) : u;
    let name = raw;
    try { name = decodeURIComponent(raw); } catch { /* not percent-encoded: the name as written */ }
    if (throwOn.has(name)) throw new Error('connection reset (fuzz)');
    const body = files.get(name);
    if (body === undefined) return { ok: false, status: 404, text: async () => '', arrayBuffer: async () => new ArrayBuffer(0) };
    return { ok: true, status: 200, text: async () => (typeof body === 'string' ? body : new TextDecoder().decode(body)),
             arrayBuffer: async () => (typeof body === 'string' ? new TextEncoder().encode(body) : body).slice().buffer };
  };
}
