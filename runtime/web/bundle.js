// shadergrad web runtime — loading a bundle written by `shadergrad export` (docs/BUNDLE.md): bundle.json, every
// kernel's shader source, and the weight files, checked before anything reaches a GPU. A bundle of another
// format version, a missing shader, truncated weights or an inconsistent description is refused with a
// BundleError naming the file (and the program, kernel or tensor).
import { BundleError, UnsupportedError } from './errors.js';
import { checkBundleTypes } from './bundle_schema.js';
import { parseSafetensors } from './safetensors.js';
import { PhaseClock } from './setup_stats.js';

/** The bundle format this runtime writes about (bundle.json `format`); it also reads format 2 (one webgpu plan). */
export const BUNDLE_FORMAT = 'shadergrad-bundle/3';
/** Every format this runtime reads, newest first. */
export const BUNDLE_FORMATS = ['shadergrad-bundle/3', 'shadergrad-bundle/2'];

/** The webgpu plans a bundle may carry (bundle.json `webgpu.plans[].name`): 'gpu' (kernels for GPUs), 'cpu'
 * (kernels for CPU implementations of WebGPU such as SwiftShader or Dawn over llvmpipe) and 'cpu-subgroups' (the cpu
 * plan whose contractions share loads across subgroups of 4 lanes: it requires the 'subgroups' feature). */
export const WEBGPU_PLANS = ['gpu', 'cpu', 'cpu-subgroups'];

/**
 * The webgpu plans of a bundle.json: format 3's `webgpu.plans`, or format 2's one plan (`webgpu.target`,
 * `webgpu.requires`, programs.NAME.webgpu; its kind from target.cpu_device).
 * @returns {{name: string, program_key: string, target: object, requires: object}[]}
 */
export function webgpuPlans(json) {
  const w = json.webgpu;
  if (!w) return [];
  if (Array.isArray(w.plans)) return w.plans;
  return [{ name: w.target?.cpu_device ? 'cpu' : 'gpu', program_key: 'webgpu', target: w.target, requires: w.requires }];
}

/** Targets a bundle may carry (bundle.json `targets`): per program a `webgpu` plan (WGSL compute kernels over
 * storage buffers), the `webgl2` plan (GLSL ES 3.00 fragment kernels over RGBA32F textures) and the `wasm` plan (C
 * kernels compiled to one WebAssembly SIMD128 module, over arrays in its linear memory). */
export const TARGETS = ['webgpu', 'webgl2', 'wasm'];

/** Storage features (bundle.json `features`) this runtime knows how to run. */
export const KNOWN_FEATURES = ['transposed', 'row_planes', 'col_planes', 'union_domains', 'allocated_extents'];

/** The shader file field of a kernel per plan: `glsl_es` (webgl2 plan) and `wgsl` (webgpu plan). */
const SOURCE_FIELD = { webgl2: 'glsl_es', webgpu: 'wgsl' };

/**
 * @param {string|URL} url
 * @param {typeof fetch} fetchImpl
 * @param {string} file the name in the bundle, for messages
 * @param {Record<string, unknown>} where program/kernel/tensor for messages
 * @returns {Promise<Response>}
 */
async function fetchFile(url, fetchImpl, file, where, what) {
  let res;
  try {
    res = await fetchImpl(url);
  } catch (e) {
    throw new BundleError(`${what} '${file}' could not be fetched from ${url}: ${e.message}`, { file, ...where });
  }
  if (!res.ok)
    throw new BundleError(`${what} '${file}' is missing: HTTP ${res.status} for ${url}${describeWhere(where)}. ` +
                          `The bundle directory is incomplete: export it again (shadergrad export) and serve the ` +
                          `whole directory`, { file, status: res.status, ...where });
  return res;
}

function describeWhere(where) {
  const parts = [];
  if (where.kernel) parts.push(`kernel '${where.kernel}'`);
  if (where.program) parts.push(`program '${where.program}'`);
  if (where.target) parts.push(`${where.target} plan`);
  if (where.tensor) parts.push(`tensor '${where.tensor}'`);
  return parts.length ? ` (${parts.join(', ')})` : '';
}

/** A loaded bundle: its description, shader sources and weight files, all checked. */
export class Bundle {
  /**
   * @param {URL} url of bundle.json
   * @param {any} json bundle.json
   * @param {Map<string, string>} sources path -> shader source
   * @param {Map<string, ArrayBuffer>} files path -> bytes (weights)
   * @param {typeof fetch} fetchImpl
   */
  constructor(url, json, sources, files, fetchImpl) {
    this.url = url;
    this.json = json;
    this.sources = sources;
    this.files = files;
    this._fetch = fetchImpl;
    this._expected = null;
    /** @type {Map<string, Float32Array>|null} initial values that replace the data files' (bundleFromMessage) */
    this._initial = null;
    /** @type {string|null} where the data files were loaded when not here (describedBundle) */
    this._dataIn = null;
    /** @type {Record<string, number>} loadBundle's phases, ms: fetch_json, check_json, fetch_shaders, fetch_weights */
    this.loadPhases = {};
  }
  get format() { return this.json.format; }
  /** @returns {string[]} the targets the bundle carries (`webgpu`, `webgl2`) */
  get targets() { return this.json.targets; }
  /** The webgpu section ({target, requires, plans}); undefined without the webgpu target. */
  get webgpu() { return this.json.webgpu; }
  /** @returns {{name: string, program_key: string, target: object, requires: object}[]} the webgpu plans, in
   * bundle order ([] without the webgpu target) */
  get webgpuPlans() { return webgpuPlans(this.json); }
  get model() { return this.json.model; }
  get target() { return this.json.target; }
  get requires() { return this.json.requires; }
  get features() { return this.json.features || []; }
  /** @returns {string[]} */
  get programNames() { return Object.keys(this.json.programs); }
  /** @returns {any[]} bundle.json `persistent` */
  get persistent() { return this.json.persistent; }

  /** The description of program `name`; BundleError listing the programs when there is none. */
  program(name) {
    const p = this.json.programs[name];
    if (!p) throw new BundleError(`the bundle has no program '${name}' (it has ${this.programNames.join(', ')})`,
                                  { program: name });
    return p;
  }

  /** The source text of a kernel's shader file (a path from `kernels[].glsl_es` or `webgpu.kernels[].wgsl`), once
   * fetched (loadShaders). */
  source(path) {
    const s = this.sources.get(path);
    if (s === undefined)
      throw new BundleError(`shader file '${path}' was not loaded with the bundle (call loadShaders first)`,
                            { file: path });
    return s;
  }

  /** The shader plans of the bundle: 'webgl2' (programs.NAME.kernels[].glsl_es) and 'webgpu gpu' / 'webgpu cpu' /
   * 'webgpu cpu-subgroups' (programs.NAME[program_key].kernels[].wgsl), the ones it carries. */
  get shaderPlans() {
    return [...(this.targets.includes('webgl2') ? ['webgl2'] : []),
            ...(this.targets.includes('webgpu') ? this.webgpuPlans.map((pl) => `webgpu ${pl.name}`) : [])];
  }

  /**
   * Fetches (once, in parallel) the shader files of `programs` in `plans` (names as in shaderPlans); resolves when
   * all are there. A missing file is a BundleError naming it, its kernel, program and plan.
   * @param {string[]} [programs] default: every program
   * @param {string[]} [plans] default: every plan the bundle carries
   */
  async loadShaders(programs = this.programNames, plans = this.shaderPlans) {
    this._shaderFetches ??= new Map();
    const jobs = [];
    for (const program of programs)
      for (const plan of plans) {
        const webgpu = plan.startsWith('webgpu ') && this.webgpuPlans.find((pl) => `webgpu ${pl.name}` === plan);
        const d = webgpu ? this.program(program)[webgpu.program_key] : this.program(program);
        for (const k of d.kernels) {
          const path = k[SOURCE_FIELD[webgpu ? 'webgpu' : 'webgl2']];
          if (typeof path !== 'string' || this.sources.has(path)) continue;
          let job = this._shaderFetches.get(path);
          if (!job) {
            const where = { program, kernel: k.name, target: plan };
            job = fetchFile(new URL(path, this.url), this._fetch, path, where, 'shader file')
              .then((r) => r.text()).then((text) => { this.sources.set(path, text); });
            job.catch(() => this._shaderFetches.delete(path));  // a later call tries again
            this._shaderFetches.set(path, job);
          }
          jobs.push(job);
        }
      }
    await Promise.all(jobs);
  }

  /**
   * The f32 values a data reference ({file, tensor, offset, bytes}) points at, copied into a new array.
   * @returns {Float32Array}
   */
  data(ref) {
    const initial = this._initial?.get(dataKey(ref));
    if (initial) return initial.slice();
    const bytes = this.files.get(ref.file) || (this._expected && this._expected.get(ref.file));
    if (!bytes)
      throw new BundleError(`data file '${ref.file}' was not loaded with the bundle` +
                            (this._dataIn ? ` (it was loaded in ${this._dataIn}: read a persistent value with ` +
                                            'rt.read(name), or load the bundle here with loadBundle() and pass it ' +
                                            'to createWorkerRuntime)' : ''), { file: ref.file });
    return new Float32Array(bytes.slice(ref.offset, ref.offset + ref.bytes));
  }

  /** The bytes of a binary file of the bundle (the wasm module, bundle.json `wasm.module`), fetched once; a missing
   * file is a BundleError naming it. */
  async binary(path, where = {}) {
    if (!this.files.has(path)) {
      const res = await fetchFile(new URL(path, this.url), this._fetch, path, where, 'wasm module');
      this.files.set(path, await res.arrayBuffer());
    }
    return this.files.get(path);
  }

  /** Fetches (once) and checks the checks' file (expected.safetensors); resolves to the `checks` description. */
  async loadChecks() {
    const c = this.json.checks;
    if (!c) throw new BundleError('the bundle has no checks (bundle.json `checks` is null)', {});
    if (!this._expected) {
      const refs = [...c.runs.flatMap((r) => [...Object.values(r.feeds), ...Object.values(r.outputs),
                                               ...Object.values(r.nodes ?? {})]),
                    ...Object.values(c.persistent_after)];
      this._expected = await fetchDataFiles(this.url, refs, this._fetch, 'expected outputs file');
    }
    return c;
  }
}

/** The key of a data reference in a bundle's initial values: its file and tensor. */
const dataKey = (ref) => `${ref.file}\u0000${ref.tensor}`;

/** Whether `x` is a loaded bundle (a Bundle, a withWeights() bundle, or a Bundle of another copy of this runtime). */
export function isBundle(x) {
  return x instanceof Bundle || (x !== null && typeof x === 'object' && !(x instanceof URL) && x.json !== null &&
                                 typeof x.json === 'object' && x.url !== undefined && typeof x.data === 'function' &&
                                 x.files instanceof Map);
}

/**
 * What a Worker needs to rebuild `bundle` (bundleFromMessage), as structured-cloneable data: bundle.json, its URL,
 * the data files, the shader sources and expected outputs fetched so far, and every persistent value's initial value
 * as `bundle.data()` gives it, so that a withWeights() bundle (weights from IndexedDB or a checkpoint) starts the
 * Worker's runtime from those weights. `transfer`: the buffers of those fresh copies (the files are copied).
 * @returns {{message: object, transfer: ArrayBuffer[]}}
 */
export function bundleMessage(bundle) {
  const initial = new Map(bundle.persistent.map((p) => [p.name, bundle.data(p.data)]));
  return {
    message: { url: new URL(bundle.url, globalThis.location?.href).href, json: bundle.json, files: bundle.files,
               sources: bundle.sources, expected: bundle._expected ?? null, loadPhases: bundle.loadPhases ?? {},
               initial },
    transfer: [...initial.values()].map((a) => a.buffer),
  };
}

/**
 * The Bundle of a bundleMessage(), checked again like a fetched bundle.json; shader files not sent are fetched
 * relative to its URL with `fetchImpl` when a program is compiled.
 * @returns {Bundle}
 */
export function bundleFromMessage(m, fetchImpl = globalThis.fetch?.bind(globalThis)) {
  const url = new URL(m.url);
  validate(m.json, url.pathname.split('/').pop() || 'bundle.json');
  const b = new Bundle(url, m.json, new Map(m.sources), m.files, fetchImpl);
  b._expected = m.expected;
  b.loadPhases = { ...m.loadPhases };
  const byName = new Map(b.persistent.map((p) => [p.name, p]));
  b._initial = new Map();
  for (const [name, values] of m.initial) {
    const p = byName.get(name);
    if (!p || values.length !== numel(p.shape))
      throw new BundleError(`initial value of '${name}': ${values.length} values for ${p ? `shape [${p.shape}]` :
                            'no persistent value of that name'}`, { tensor: name });
    b._initial.set(dataKey(p.data), values);
  }
  return b;
}

/**
 * The description of a bundle whose data files were loaded elsewhere (the Worker of a WorkerRuntime created from a
 * URL): bundle.json, its programs and persistent values; data() of a weights file throws saying where they are,
 * loadChecks() fetches the expected outputs here.
 * @returns {Bundle}
 */
export function describedBundle(url, json, where, fetchImpl = globalThis.fetch?.bind(globalThis)) {
  const b = new Bundle(new URL(url), json, new Map(), new Map(), fetchImpl);
  b._dataIn = where;
  return b;
}

/**
 * Fetches every file a list of data references names and checks each reference against the file's size and its
 * safetensors header (same dtype F32, shape, byte range).
 * @returns {Promise<Map<string, ArrayBuffer>>}
 */
async function fetchDataFiles(base, refs, fetchImpl, what) {
  const names = [...new Set(refs.map((r) => r.file))];
  const files = new Map();
  await Promise.all(names.map(async (file) => {
    const res = await fetchFile(new URL(file, base), fetchImpl, file, {}, what);
    files.set(file, await res.arrayBuffer());
  }));
  const headers = new Map([...files].map(([f, b]) => [f, parseSafetensors(b, f)]));
  for (const r of refs) {
    const bytes = files.get(r.file);
    const end = r.offset + r.bytes;
    if (end > bytes.byteLength)
      throw new BundleError(`${r.file} is truncated: tensor '${r.tensor}' needs bytes [${r.offset}, ${end}) but ` +
                            `the file has ${bytes.byteLength} bytes; export the bundle again`,
                            { file: r.file, tensor: r.tensor, offset: r.offset });
    const e = headers.get(r.file).tensors.get(r.tensor);
    if (!e || e.dtype !== 'F32' || e.begin !== r.offset || e.end !== end)
      throw new BundleError(`${r.file}: tensor '${r.tensor}' is ${e ? `${e.dtype} at bytes [${e.begin}, ${e.end})`
                            : 'absent'} but bundle.json expects F32 at bytes [${r.offset}, ${end}): the file does ` +
                            `not belong to this bundle.json; export the bundle again`,
                            { file: r.file, tensor: r.tensor, offset: r.offset });
  }
  return files;
}

/** A function argument in words, for messages. */
export function describeArg(x) {
  if (x === null || x === undefined) return String(x);
  if (typeof x !== 'object') return `${typeof x} ${JSON.stringify(x)}`;
  return `an object (${x.constructor?.name ?? 'no prototype'}${x.constructor?.name === 'Object'
    ? ` with keys ${Object.keys(x).slice(0, 6).join(', ') || 'none'}` : ''})`;
}

/** @param {number[]} shape */
export function numel(shape) { return shape.reduce((a, b) => a * b, 1); }

/** Checks bundle.json's structure and cross references; BundleError naming the program/kernel/value at fault. */
function validate(json, file) {
  const fail = (msg, where = {}) => { throw new BundleError(`${file}: ${msg}`, { file, ...where }); };
  if (!json || typeof json !== 'object') fail('is not a JSON object');
  if (!BUNDLE_FORMATS.includes(json.format))
    fail(`bundle format '${json.format}' is not supported by this runtime, which reads ` +
         `${BUNDLE_FORMATS.map((f) => `'${f}'`).join(' and ')}. Export the bundle again with the shadergrad release ` +
         `that matches this runtime, or load it with the runtime copy inside the bundle (runtime/shadergrad.js)`,
         { format: json.format });
  checkBundleTypes(json, file);
  if (!Array.isArray(json.targets) || !json.targets.length || json.targets.some((t) => !TARGETS.includes(t)))
    fail(`\`targets\` is ${JSON.stringify(json.targets)}; expected a non-empty list of ${TARGETS.join(', ')}`);
  if (json.targets.includes('wasm') && typeof json.wasm?.module !== 'string')
    fail('lists the wasm target but has no `wasm.module`');
  if (json.targets.includes('webgpu') && !json.webgpu?.requires)
    fail('lists the webgpu target but has no `webgpu.requires`');
  const plans = json.targets.includes('webgpu') ? webgpuPlans(json) : [];
  if (json.targets.includes('webgpu') && !plans.length) fail('lists the webgpu target but `webgpu.plans` is empty');
  plans.forEach((pl, i) => {
    if (!WEBGPU_PLANS.includes(pl.name) || plans.findIndex((q) => q.name === pl.name) !== i)
      fail(`webgpu.plans[${i}] is named '${pl.name}'; expected one of ${WEBGPU_PLANS.join(', ')}, each once`);
    if (typeof pl.program_key !== 'string' || !/^webgpu(_[a-z][a-z_]*)?$/.test(pl.program_key) || !pl.requires)
      fail(`webgpu.plans[${i}] ('${pl.name}') has program_key ${JSON.stringify(pl.program_key)} and ` +
           `${pl.requires ? '' : 'no '}requires; expected 'webgpu' or 'webgpu_NAME' and its requires`);
  });
  for (const f of json.features || [])
    if (!KNOWN_FEATURES.includes(f))
      throw new UnsupportedError(`${file}: the bundle uses storage feature '${f}', which this runtime does not know ` +
                                 `(it knows ${KNOWN_FEATURES.join(', ')}); use the runtime copy inside the bundle`,
                                 { file, feature: f });
  if (!json.programs || typeof json.programs !== 'object' || !Object.keys(json.programs).length)
    fail('has no programs');
  const persistent = new Map((json.persistent || []).map((p) => [p.name, p]));
  for (const p of persistent.values())
    if (!p.data || p.data.bytes !== 4 * numel(p.shape) ||
        (json.targets.includes('webgl2') && p.layout?.numel !== numel(p.shape)) ||
        ((json.targets.includes('webgpu') || json.targets.includes('wasm')) && !(p.buffer_bytes >= 4 * numel(p.shape))))
      fail(`persistent value '${p.name}' ${JSON.stringify(p.shape)} has ${p.data?.bytes} bytes of initial data, ` +
           `layout numel ${p.layout?.numel} and buffer_bytes ${p.buffer_bytes}; expected ${4 * numel(p.shape)} ` +
           'bytes (and the layout or buffer of every target in `targets`)', { tensor: p.name });
  for (const [name, p] of Object.entries(json.programs)) {
    for (const key of ['inputs', 'outputs']) {
      if (!Array.isArray(p[key])) fail(`program '${name}' has no '${key}' array`, { program: name });
      p[key].forEach((io, i) => {
        if (!io || typeof io !== 'object' || typeof io.name !== 'string')
          fail(`program '${name}': ${key}[${i}] is ${JSON.stringify(io)}; expected {name, shape, dtype}`,
               { program: name });
        if (!Array.isArray(io.shape) || !io.shape.every((d) => Number.isSafeInteger(d) && d >= 0))
          fail(`program '${name}': ${key.slice(0, -1)} '${io.name}' has shape ${JSON.stringify(io.shape)}; expected a ` +
               'list of non-negative integers', { program: name, [key.slice(0, -1)]: io.name });
      });
    }
    if (json.targets.includes('webgl2')) {
      validateProgram(name, p, persistent, fail);
      validateStorage(name, p, fail);
    }
    for (const pl of plans) {
      const w = p[pl.program_key];
      if (!w || typeof w !== 'object')
        fail(`program '${name}' has no webgpu ${pl.name} plan (\`${pl.program_key}\`) although \`webgpu.plans\` ` +
             'lists it', { program: name });
      validateWebGPUProgram(name, w, persistent, fail, pl.name);
      validateWebGPUStorage(name, p, w, fail, pl.name);
    }
    if (json.targets.includes('wasm')) {
      if (!p.wasm || typeof p.wasm !== 'object')
        fail(`program '${name}' has no wasm plan (\`wasm\`) although \`targets\` lists wasm`, { program: name });
      validateWebGPUProgram(name, p.wasm, persistent, fail, 'wasm', true);
      validateWebGPUStorage(name, p, p.wasm, fail, 'wasm', true);
    }
  }
  validateCheckShapes(json, fail);
}

const fmtShape = (s) => `[${s.join(',')}]`;
const count = (n) => `${n} value${n === 1 ? '' : 's'}`;
/** How to get a bundle for another shape: the kernels are compiled for the shapes of the export. */
const RESHAPE_HINT = 'its kernels were generated for that size, so editing a shape in bundle.json cannot change it: ' +
                     'export the bundle again with the shape you need (shadergrad export --batch N / --infer-batch N)';

/**
 * The declared shapes of a program's inputs and outputs (programs.NAME.inputs/outputs) against what its webgl2 plan
 * stores for them, and every value's shape against its texture layout: numel(shape) values in `layout.numel` per
 * plane, `texels` = ceil(numel / 4) within width x height, inside its `allocated` texture and its pooled buffer. A
 * hand-edited shape (two images into a bundle made for one) would otherwise be uploaded cut to the layout and read
 * back as the first image only, silently.
 */
function validateStorage(program, p, fail) {
  p.values.forEach((v) => {
    const w = { program, value: v.name, target: 'webgl2' };
    const L = v.layout, planes = v.storage?.planes ?? 1, n = numel(v.shape);
    if (!L || typeof L !== 'object' || ![L.numel, L.texels, L.width, L.height].every((x) => Number.isSafeInteger(x) && x >= 0))
      fail(`program '${program}': value '${v.name}' has layout ${JSON.stringify(L)}; expected {numel, texels, width, ` +
           'height} (non-negative integers)', w);
    if (!(Number.isSafeInteger(planes) && planes >= 1) || L.numel * planes !== n || L.texels !== Math.ceil(L.numel / 4) ||
        L.width * L.height < L.texels)
      fail(`program '${program}' (webgl2): value '${v.name}' has shape ${fmtShape(v.shape)} (${count(n)}) but its ` +
           `layout stores ${L.numel} element${L.numel === 1 ? '' : 's'} in ${L.texels} texels of a ${L.width}x${L.height} ` +
           `texture${planes > 1 ? ` (x ${planes} planes)` : ''}: the description does not match its storage; ` +
           RESHAPE_HINT, w);
    const a = v.allocated;
    if (a !== undefined && (!Array.isArray(a) || !(a[0] >= L.width && a[1] >= L.height)))
      fail(`program '${program}' (webgl2): value '${v.name}' is allocated ${JSON.stringify(a)} texels, smaller than ` +
           `its ${L.width}x${L.height} layout`, w);
    if (v.kind === 'temp' && v.buffer !== undefined) {  // the pooled texture (allocated at least its layout)
      const buf = p.buffers[v.buffer], bl = buf?.layout, ba = buf?.allocated;
      const texels = Math.max(bl ? bl.width * bl.height : 0, Array.isArray(ba) ? ba[0] * ba[1] : 0);
      if (!(texels >= L.texels))
        fail(`program '${program}' (webgl2): value '${v.name}' (${L.texels} texels) lives in buffer ${v.buffer}, ` +
             `whose texture (layout ${JSON.stringify(bl)}, allocated ${JSON.stringify(ba)}) is smaller`, w);
    }
  });
  for (const [key, what] of [['inputs', 'input'], ['outputs', 'output']])
    for (const io of p[key]) {
      const v = p.values[io.value], n = numel(io.shape);
      if (numel(v.shape) !== n)
        fail(`program '${program}': ${what} '${io.name}' is declared ${fmtShape(io.shape)} (${count(n)}) but the ` +
             `webgl2 plan stores ${fmtShape(v.shape)} for it (${count(numel(v.shape))}: a ${v.layout.width}x` +
             `${v.layout.height}-texel layout of ${v.layout.numel} elements); ${RESHAPE_HINT}`,
             { program, [what]: io.name, shape: io.shape, stored: v.shape, target: 'webgl2' });
    }
}

/**
 * The declared shapes of a program's inputs and outputs against a webgpu plan: the plan's own input/output entry
 * and the storage buffer of its value (`bytes` = 4 * numel rounded up to 16, 16 for an empty tensor).
 */
function validateWebGPUStorage(program, p, w, fail, plan, wasm = false) {
  const target = wasm ? 'wasm' : `webgpu ${plan}`;
  for (const [key, what] of [['inputs', 'input'], ['outputs', 'output']]) {
    for (const io of p[key]) {
      const wi = w[key].find((x) => x?.name === io.name);
      if (!wi) {
        if (key === 'outputs')
          fail(`program '${program}': output '${io.name}' is not an output of the ${target} plan`,
               { program, output: io.name, target });
        continue;  // an input no kernel of this plan reads has no buffer
      }
      const v = w.values[wi.value], n = numel(io.shape);
      const exact = 16 * Math.ceil(Math.max(n, 1) / 4);  // vec4-rounded, one vec4 for an empty tensor (web_webgpu.cpp)
      if (!Array.isArray(wi.shape) || numel(wi.shape) !== n || numel(v.shape) !== n || v.bytes !== exact)
        fail(`program '${program}': ${what} '${io.name}' is declared ${fmtShape(io.shape)} (${count(n)}, ${exact} ` +
             `bytes) but the ${target} plan stores ${fmtShape(v.shape)} for it in a buffer of ${v.bytes} bytes ` +
             `(${count(Math.floor(v.bytes / 4))} at most)${Array.isArray(wi.shape) && numel(wi.shape) !== n
               ? ` and declares it ${fmtShape(wi.shape)}` : ''}; ${RESHAPE_HINT}`,
             { program, [what]: io.name, shape: io.shape, stored: v.shape, bytes: v.bytes, target });
    }
  }
}

/** The checks' fixed inputs and expected outputs against the declared shapes of their program's inputs and outputs. */
function validateCheckShapes(json, fail) {
  const c = json.checks;
  if (!c) return;
  c.runs.forEach((r, i) => {
    const p = typeof r.program === 'string' && Object.hasOwn(json.programs, r.program) ? json.programs[r.program] : null;
    if (!p) fail(`checks.runs[${i}] runs program ${JSON.stringify(r.program)}, which the bundle does not have ` +
                 `(it has ${Object.keys(json.programs).join(', ')})`, { check: i });
    for (const [key, what, refs] of [['inputs', 'feed', r.feeds], ['outputs', 'expected output', r.outputs]])
      for (const [name, ref] of Object.entries(refs)) {
        const io = p[key].find((x) => x.name === name);
        if (!io) fail(`checks.runs[${i}]: ${what} '${name}' is not an ${key.slice(0, -1)} of program '${r.program}'`,
                      { program: r.program, check: i, tensor: ref.tensor });
        if (ref.bytes !== 4 * numel(io.shape))
          fail(`checks.runs[${i}]: ${what} '${name}' has ${ref.bytes} bytes (${count(ref.bytes / 4)}) but ` +
               `${key.slice(0, -1)} '${name}' of program '${r.program}' is declared ${fmtShape(io.shape)} ` +
               `(${count(numel(io.shape))})`, { program: r.program, check: i, tensor: ref.tensor });
      }
  });
}

/** Checks a program's webgpu plan: value ids, buffers, persistent names, kernel bindings and dispatch sizes. */
function validateWebGPUProgram(program, p, persistent, fail, plan = 'gpu', wasm = false) {
  const where = { program, target: wasm ? 'wasm' : `webgpu ${plan}` };
  for (const key of ['values', 'kernels', 'inputs', 'outputs', 'updates', 'buffers'])
    if (!Array.isArray(p[key])) fail(`program '${program}': the webgpu plan has no '${key}' array`, where);
  const value = (id, what, w) => {
    const v = p.values[id];
    if (!Number.isInteger(id) || !v || v.id !== id)
      fail(`${what} refers to value ${id}, which the webgpu plan of program '${program}' does not have`, { ...where, ...w });
    return v;
  };
  p.values.forEach((v, i) => {
    const w = { ...where, value: v.name };
    if (v.id !== i) fail(`program '${program}' (webgpu): values[${i}] has id ${v.id}`, w);
    if (!(v.bytes >= 4 * numel(v.shape)))
      fail(`program '${program}' (webgpu): value '${v.name}' ${JSON.stringify(v.shape)} has ${v.bytes} bytes`, w);
    const p_ = v.kind === 'persistent' ? v.tensor : v.update_of;
    if (p_ !== undefined && !persistent.has(p_))
      fail(`program '${program}' (webgpu): value '${v.name}' refers to persistent value '${p_}', which is not in ` +
           '`persistent`', w);
    if (v.buffer !== undefined && !(p.buffers[v.buffer]?.bytes >= 4 * numel(v.shape)))
      fail(`program '${program}' (webgpu): value '${v.name}' lives in buffer ${v.buffer}, which does not exist or ` +
           'is too small', w);
  });
  for (const k of p.kernels) {
    const w = { ...where, kernel: k.name };
    if (!k.name || (wasm ? typeof k.entry !== 'string' : typeof k.wgsl !== 'string'))
      fail(`program '${program}' (${where.target}): kernel '${k.name}' names no ${wasm ? 'entry' : 'WGSL file'}`, w);
    if (!Array.isArray(k.bindings) || !k.bindings.length)
      fail(`program '${program}' (webgpu): kernel '${k.name}' has no bindings`, w);
    k.bindings.forEach((b, i) => {
      if (b.binding !== i) fail(`kernel '${k.name}': bindings[${i}] has binding ${b.binding}`, w);
      if (b.access !== 'read' && b.access !== 'read_write')
        fail(`kernel '${k.name}': binding ${i} has access '${b.access}' (read or read_write)`, w);
      value(b.value, `kernel '${k.name}' binding ${i}`, w);
    });
    if (wasm ? !(Number.isSafeInteger(k.workgroups) && k.workgroups >= 1)
             : !Array.isArray(k.workgroups) || k.workgroups.length !== 3 || !k.workgroups.every((n) => Number.isInteger(n) && n >= 1))
      fail(`kernel '${k.name}': workgroups ${JSON.stringify(k.workgroups)} is not ${wasm ? 'a positive integer'
                                                                                    : 'three positive integers'}`, w);
  }
  for (const io of [...p.inputs, ...p.outputs]) value(io.value, `input/output '${io.name}'`, where);
  for (const u of p.updates) {
    if (!persistent.has(u.target)) fail(`program '${program}' (webgpu) updates '${u.target}', which is not in ` +
                                        '`persistent`', where);
    value(u.value, `the update of '${u.target}'`, where);
  }
}

function validateProgram(program, p, persistent, fail) {
  const where = { program };
  for (const key of ['values', 'kernels', 'inputs', 'outputs', 'updates', 'buffers'])
    if (!Array.isArray(p[key])) fail(`program '${program}' has no '${key}' array`, where);
  const value = (id, what, w) => {
    const v = p.values[id];
    if (!Number.isInteger(id) || !v || v.id !== id) fail(`${what} refers to value ${id}, which program '${program}' ` +
                                                         `does not have`, { ...where, ...w });
    return v;
  };
  p.values.forEach((v, i) => {
    if (v.id !== i) fail(`program '${program}': values[${i}] has id ${v.id}`, where);
    const w = { ...where, value: v.name };
    if (v.kind === 'persistent') {
      const e = persistent.get(v.tensor);
      if (!e) fail(`program '${program}': persistent value '${v.name}' refers to '${v.tensor}', which is not in ` +
                   '`persistent`', w);
      if (JSON.stringify(e.layout) !== JSON.stringify(v.layout))
        fail(`program '${program}': persistent value '${v.tensor}' has layout ${JSON.stringify(v.layout)} but ` +
             `\`persistent\` says ${JSON.stringify(e.layout)}`, w);
    }
    if (v.update_of !== undefined && !persistent.has(v.update_of))
      fail(`program '${program}': value '${v.name}' updates '${v.update_of}', which is not in \`persistent\``, w);
    if (v.buffer !== undefined && !p.buffers[v.buffer])
      fail(`program '${program}': value '${v.name}' lives in buffer ${v.buffer}, which does not exist`, w);
    const planes = v.storage?.planes ?? 1;
    if (planes > 1 && (!Array.isArray(v.plane_buffers) || v.plane_buffers.length !== planes) && v.kind === 'temp')
      fail(`program '${program}': value '${v.name}' has ${planes} planes but ${v.plane_buffers?.length ?? 0} ` +
           'plane_buffers', w);
  });
  for (const k of p.kernels) {
    const w = { ...where, kernel: k.name };
    if (!k.name || typeof k.glsl_es !== 'string')
      fail(`program '${program}': kernel '${k.name}' names no GLSL ES shader file (glsl_es)`, w);
    for (const s of k.samplers || []) {
      const v = value(s.value, `kernel '${k.name}' sampler '${s.name}'`, w);
      if (!(s.plane >= 0 && s.plane < (v.storage?.planes ?? 1)))
        fail(`kernel '${k.name}' sampler '${s.name}' reads plane ${s.plane} of '${v.name}', which has ` +
             `${v.storage?.planes ?? 1}`, w);
    }
    (k.render_targets || []).forEach((t, i) => {
      if (t.location !== i) fail(`kernel '${k.name}': render_targets[${i}] has location ${t.location}`, w);
      value(t.value, `kernel '${k.name}' render target ${i}`, w);
    });
    if (!(k.render_targets || []).length) fail(`kernel '${k.name}' has no render targets`, w);
  }
  for (const io of [...p.inputs, ...p.outputs]) value(io.value, `input/output '${io.name}'`, where);
  for (const u of p.updates) {
    if (!persistent.has(u.target)) fail(`program '${program}' updates '${u.target}', which is not in \`persistent\``,
                                        where);
    value(u.value, `the update of '${u.target}'`, where);
  }
}

/**
 * Loads a bundle: bundle.json and the weight files (checked against bundle.json); with `shaders: 'all'` also every
 * kernel's shader source. By default (`shaders: 'lazy'`) a shader file is fetched when a runtime first compiles
 * its kernel (Bundle.loadShaders: only the plan the runtime runs, one program at a time), so a missing one is
 * reported then, naming its kernel, program and plan.
 * Works in a page and in a Worker (relative URLs resolve against the current location).
 * @param {string|URL} url of bundle.json
 * @param {{fetch?: typeof fetch, shaders?: 'lazy'|'all'}} [options]
 * @returns {Promise<Bundle>}
 * @throws {BundleError} another format version, a missing file (a shader file: with `shaders: 'all'`), truncated
 *   weights, an inconsistent description
 * @throws {UnsupportedError} storage features this runtime does not know
 */
export async function loadBundle(url, options = {}) {
  if (typeof url !== 'string' && !(url instanceof URL))
    throw new BundleError(`loadBundle: expected the URL of bundle.json (a string or URL), got ${describeArg(url)}`,
                          { file: 'bundle.json' });
  const fetchImpl = options.fetch || globalThis.fetch.bind(globalThis);
  const clock = new PhaseClock();
  const base = new URL(url, globalThis.location?.href);
  const file = base.pathname.split('/').pop() || 'bundle.json';
  const res = await fetchFile(base, fetchImpl, file, {}, 'bundle description');
  const text = await res.text();
  clock.lap('fetch_json');
  let json;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new BundleError(`${file}: not valid JSON (${e.message})`, { file });
  }
  validate(json, file);
  clock.lap('check_json');
  const plans = json.targets.includes('webgpu') ? webgpuPlans(json) : [];
  const refs = [...json.persistent.map((p) => p.data),
                ...Object.values(json.programs).flatMap((p) => [...(p.values || []),
                                                                ...plans.flatMap((pl) => p[pl.program_key].values),
                                                                ...(json.targets.includes('wasm') ? p.wasm.values : [])]
                  .filter((v) => v.data).map((v) => v.data))];
  const files = await fetchDataFiles(base, refs, fetchImpl, 'weights file');
  clock.lap('fetch_weights');
  const bundle = new Bundle(base, json, new Map(), files, fetchImpl);
  bundle.loadPhases = clock.phases;
  if (options.shaders === 'all') {
    await bundle.loadShaders();
    clock.lap('fetch_shaders');
  }
  return bundle;
}
