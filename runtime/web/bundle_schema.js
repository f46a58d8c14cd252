// shadergrad web runtime — the types of the bundle.json fields the loader reads (docs/BUNDLE.md), checked before
// validate() cross-checks their values: a field of the wrong type (a number where a list belongs, a string size,
// a missing object) is refused with a BundleError naming the file and the field's path (e.g.
// `programs.infer.kernels[2].render_targets`), never a TypeError deeper down. Found by tests/fuzz/fuzz_bundle.mjs.
import { BundleError } from './errors.js';

const isObj = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);
const isCount = (x) => Number.isSafeInteger(x) && x >= 0;

/** A checker of one bundle.json text: each method refuses `value` at `path` unless it has the type. */
function checker(file) {
  const fail = (path, want, got) => {
    let shown;
    try { shown = JSON.stringify(got); } catch { shown = String(got); }
    if (shown === undefined) shown = 'absent';
    else if (shown.length > 80) shown = `${shown.slice(0, 77)}...`;
    throw new BundleError(`${file}: \`${path}\` is ${shown}; expected ${want}. The file is damaged or was not ` +
                          'written by shadergrad export: export the bundle again', { file, field: path });
  };
  const c = {
    object: (v, path) => { if (!isObj(v)) fail(path, 'an object', v); return v; },
    array: (v, path) => { if (!Array.isArray(v)) fail(path, 'a list', v); return v; },
    objects: (v, path) => { c.array(v, path).forEach((x, i) => c.object(x, `${path}[${i}]`)); return v; },
    string: (v, path) => { if (typeof v !== 'string') fail(path, 'a string', v); return v; },
    count: (v, path) => { if (!isCount(v)) fail(path, 'a non-negative integer', v); return v; },
    shape: (v, path) => { if (!Array.isArray(v) || !v.every(isCount)) fail(path, 'a list of non-negative integers', v); return v; },
    optional: (v, path, f) => (v === undefined ? v : f(v, path)),
    /** A data reference {file, tensor, offset, bytes}; the file a plain name inside the bundle directory. */
    ref: (v, path) => {
      c.object(v, path);
      c.string(v.tensor, `${path}.tensor`);
      if (typeof v.file !== 'string' || !/^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/.test(v.file) || v.file.includes('..'))
        fail(`${path}.file`, 'a relative file name inside the bundle directory', v.file);
      c.count(v.offset, `${path}.offset`);
      c.count(v.bytes, `${path}.bytes`);
      if (v.bytes % 4) fail(`${path}.bytes`, 'a multiple of 4 (f32 values)', v.bytes);
      return v;
    },
  };
  return c;
}

/** The value list of a plan (webgl2 program or webgpu plan): objects with an id, a shape, maybe data. */
function checkPlan(c, p, path, sourceField) {
  c.object(p, path);
  for (const key of ['values', 'kernels', 'inputs', 'outputs', 'updates', 'buffers']) c.objects(p[key], `${path}.${key}`);
  p.values.forEach((v, i) => {
    const at = `${path}.values[${i}]`;
    c.shape(v.shape, `${at}.shape`);
    c.optional(v.data, `${at}.data`, c.ref);
    c.optional(v.storage, `${at}.storage`, c.object);
  });
  p.kernels.forEach((k, i) => {
    const at = `${path}.kernels[${i}]`;
    c.string(k[sourceField], `${at}.${sourceField}`);
    for (const key of ['samplers', 'render_targets', 'bindings']) c.optional(k[key], `${at}.${key}`, c.objects);
  });
}

/**
 * Checks the type of every field of bundle.json the loader reads.
 * @param {any} json the parsed bundle.json
 * @param {string} file its name, for messages
 * @throws {BundleError} naming the file and the field (details.field)
 */
export function checkBundleTypes(json, file) {
  const c = checker(file);
  c.object(json, '(the top level)');
  c.array(json.targets, 'targets');
  c.optional(json.features, 'features', c.array);
  c.objects(json.persistent, 'persistent');
  json.persistent.forEach((p, i) => {
    c.string(p.name, `persistent[${i}].name`);
    c.shape(p.shape, `persistent[${i}].shape`);
    c.ref(p.data, `persistent[${i}].data`);
    c.optional(p.layout, `persistent[${i}].layout`, c.object);
  });
  if (json.wasm !== undefined) {
    c.object(json.wasm, 'wasm');
    c.string(json.wasm.module, 'wasm.module');
  }
  if (json.webgpu !== undefined) {
    c.object(json.webgpu, 'webgpu');
    c.optional(json.webgpu.plans, 'webgpu.plans', c.objects);
  }
  const planKeys = json.webgpu && Array.isArray(json.webgpu.plans) ? json.webgpu.plans.map((pl) => pl.program_key)
                                                                   : ['webgpu'];
  c.object(json.programs, 'programs');
  for (const [name, p] of Object.entries(json.programs)) {
    c.object(p, `programs.${name}`);
    if (json.targets.includes('webgl2')) checkPlan(c, p, `programs.${name}`, 'glsl_es');
    if (json.targets.includes('webgpu'))
      for (const key of planKeys)
        if (typeof key === 'string' && p[key] !== undefined) checkPlan(c, p[key], `programs.${name}.${key}`, 'wgsl');
    if (json.targets.includes('wasm') && p.wasm !== undefined) checkPlan(c, p.wasm, `programs.${name}.wasm`, 'entry');
  }
  if (json.checks !== undefined && json.checks !== null) {
    c.object(json.checks, 'checks');
    c.objects(json.checks.runs, 'checks.runs');
    json.checks.runs.forEach((r, i) => {
      for (const key of ['feeds', 'outputs', ...(r.nodes !== undefined ? ['nodes'] : [])])
        for (const [n, ref] of Object.entries(c.object(r[key], `checks.runs[${i}].${key}`)))
          c.ref(ref, `checks.runs[${i}].${key}.${n}`);
    });
    for (const [n, ref] of Object.entries(c.object(json.checks.persistent_after, 'checks.persistent_after')))
      c.ref(ref, `checks.persistent_after.${n}`);
  }
}
