// shadergrad web runtime — the entry module. Runs bundles written by `shadergrad export` (docs/BUNDLE.md) in a
// browser page or a Worker: plain ES modules, no dependencies.
//
//   import { createRuntime } from './runtime/shadergrad.js';
//   const rt = await createRuntime('bundle.json');            // WebGPU, else WebGL2, else the reasons in words
//   const { probs } = await rt.run('infer', { x });           // Float32Array [batch * 10]
//   const { loss } = await rt.run('train', { x, labels });    // one Adam step; only the loss is read back
//
//   import { createWorkerRuntime } from './runtime/shadergrad.js';
//   const wrt = await createWorkerRuntime('bundle.json');     // the same API, running in a module Worker
//
//   const bundle = await loadBundle('bundle.json');           // weights saved in IndexedDB (persist.js), if any
//   const found = await loadWeights(bundle);
//   const rt2 = await createWorkerRuntime(found.weights ? withWeights(bundle, found.weights) : bundle);
export { BUNDLE_FORMAT, BUNDLE_FORMATS, KNOWN_FEATURES, TARGETS, WEBGPU_PLANS, Bundle, loadBundle } from './bundle.js';
export { chooseWebGPUPlan } from './webgpu.js';
export { Runtime, createRuntime } from './runtime.js';
export { BACKENDS, selectBackend } from './select.js';
export { compare, runChecks } from './checks.js';
export { attentionNames, checkNumerics, debugKernels, DebugSession, intendedInfinities, isAttention, numericsReport,
         tensorStats } from './debug.js';
export { createWorkerRuntime, WorkerRuntime } from './worker_client.js';
export { checkpointBytes, checkpointWeights, DB_NAME, forgetWeights, loadWeights, saveWeights, structureHash,
         weightsKey, withWeights } from './persist.js';
export * from './errors.js';

/** Version of this runtime (the bundle formats it reads are BUNDLE_FORMATS). */
export const VERSION = '0.3.0';
