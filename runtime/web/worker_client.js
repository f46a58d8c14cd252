// shadergrad web runtime — a Runtime living in a module Worker (worker.js), driven from the page with the same API
// as Runtime (runtime.js): the same bundle argument (the URL of bundle.json, or a loaded Bundle such as persist.js
// withWeights() of one), the same properties and methods, every method that talks to the GPU async. Feeds are copied
// into the worker (structured clone) unless `transfer: true` is given to run() or write(), which moves their
// buffers instead (zero-copy; the caller's arrays become empty, seed article 003 §3.3); outputs are always
// transferred back.
import { bundleMessage, describedBundle, describeArg, isBundle } from './bundle.js';
import { errorFromJSON, ShadergradError } from './errors.js';
import { checkNumerics, DebugSession } from './debug.js';

/** createRuntime options that cannot cross to a Worker (functions, DOM objects), and what to do instead. */
const PAGE_ONLY_OPTIONS = {
  fetch: 'load the bundle in the page with loadBundle(url, {fetch}) and pass the Bundle to createWorkerRuntime',
  gpu: 'the worker uses its own navigator.gpu',
  canvas: 'the worker draws WebGL2 on an OffscreenCanvas of its own',
};

/** A Runtime in a Worker. Create with createWorkerRuntime(). */
export class WorkerRuntime {
  constructor(worker) {
    this.worker = worker;
    this._next = 1;
    this._pending = new Map();
    this._disposed = false;
    /** @type {import('./bundle.js').Bundle|null} the bundle given to createWorkerRuntime, or (given a URL) its
     * description: bundle.json, programs, persistent values; its weights live in the worker (read() them) */
    this.bundle = null;
    this.backend = null;
    this.attempts = [];
    this.webgpuPlan = null;  // on WebGPU: {name, program_key, reason}, the webgpu plan running and why
    this.caps = null;
    this.programs = [];
    this.stats = null;
    worker.onmessage = (e) => {
      const p = this._pending.get(e.data.id);
      if (!p) return;
      this._pending.delete(e.data.id);
      if (e.data.ok) p.resolve(e.data.result);
      else p.reject(errorFromJSON(e.data.error));
    };
    worker.onerror = (e) => {
      e.preventDefault?.();
      this._rejectAll(new ShadergradError(`the shadergrad worker failed: ${e.message || 'script error'} ` +
                                          `(${e.filename || 'worker.js'}:${e.lineno || '?'})`));
    };
  }

  _rejectAll(err) {
    for (const p of this._pending.values()) p.reject(err);
    this._pending.clear();
  }

  _call(op, args = [], transfer = [], what = op) {
    if (this._disposed) return Promise.reject(new ShadergradError(`${what}: the runtime was disposed`));
    const id = this._next++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject });
      try {
        this.worker.postMessage({ id, op, args }, transfer);
      } catch (e) {  // DataCloneError: an argument that cannot cross to the worker
        this._pending.delete(id);
        reject(new ShadergradError(`${what}: its arguments cannot be sent to the worker (${e.message})`));
      }
    });
  }

  /** The plan of `program` this runtime runs (as Runtime.plan: the webgl2 plan, the program's
   * webgpuPlan.program_key field, or its wasm plan). */
  plan(program) {
    const p = this.bundle.program(program);
    if (this.backend === 'wasm') return p.wasm;
    return this.webgpuPlan ? p[this.webgpuPlan.program_key] : p;
  }

  /** One step of `program` in the worker; `options.transfer` moves the feeds' buffers instead of copying. */
  run(program, feeds, options = {}) {
    const transfer = options.transfer && feeds ? Object.values(feeds).filter(ArrayBuffer.isView).map((a) => a.buffer)
                                               : [];
    return this._call('run', [program, feeds], transfer, `run('${program}')`);
  }

  /** Compiles the kernels of `programs` in the worker now (default: every program not compiled yet), as
   * Runtime.prepare(); resolves to the worker runtime's stats, which also replace `this.stats` (`prepare([])`
   * only fetches the stats: first runs and compiles since creation). */
  async prepare(programs) {
    this.stats = await this._call('prepare', programs === undefined ? [] : [programs], [], 'prepare()');
    return this.stats;
  }

  /** The current value of persistent value `name` (row-major Float32Array). */
  read(name) { return this._call('read', [name], [], `read('${name}')`); }

  /** Replaces persistent value `name` in the worker (as Runtime.write: row-major, numel of its shape; FeedError for
   * a wrong count, BundleError for an unknown name); `options.transfer` moves the values' buffer instead of
   * copying it. */
  async write(name, values, options = {}) {
    const transfer = options.transfer && ArrayBuffer.isView(values) ? [values.buffer] : [];
    await this._call('write', [name, values], transfer, `write('${name}')`);
  }

  /** Per-kernel times of the last run when created with `profile: true`, else []. */
  timings() { return this._call('timings', [], [], 'timings()'); }

  /** Runtime.liveObjects() of the worker's runtime (WebGPU: GPU objects alive and created; null on WebGL2). */
  liveObjects() { return this._call('liveObjects', [], [], 'liveObjects()'); }

  /** Replays the bundle's checks in the worker (checks.js; on a fresh runtime). */
  runChecks(options) { return this._call('runChecks', [options], [], 'runChecks()'); }

  /** Runtime.debug in the worker: a DebugSession in the page whose kernels run in the worker (each kernel's outputs
   * transferred back). */
  async debug(program, feeds) {
    const plan = this.plan(program);
    const { sources } = await this._call('debugBegin', [program, feeds], [], `debug('${program}')`);
    const driver = {
      kernel: (i) => this._call('debugKernel', [i], [], `debug('${program}') kernel ${i}`),
      finish: () => this._call('debugFinish', [], [], `debug('${program}') finish()`),
      abort: () => this._call('debugAbort', [], [], `debug('${program}') abort()`),
    };
    return new DebugSession({ program, backend: this.backend, plan, sources, driver, onClose: () => {} });
  }

  /** Runtime.checkNumerics with the kernels running in the worker. */
  checkNumerics(program, feeds) { return checkNumerics(this, program, feeds); }

  loseContextForTesting() { return this._call('loseContextForTesting', [], [], 'loseContextForTesting()'); }

  /** Frees the GPU objects and terminates the worker (seed article 003 §5.4: an idle worker still holds memory);
   * later calls reject saying the runtime was disposed. */
  async dispose() {
    if (this._disposed) return;
    try {
      await this._call('dispose');
    } finally {
      this._disposed = true;
      this.worker.terminate();
      this._rejectAll(new ShadergradError('the runtime was disposed'));
    }
  }
}

/**
 * Starts a module Worker running worker.js and creates a Runtime there, as createRuntime does in the page.
 * @param {string|URL|import('./bundle.js').Bundle} bundle URL of bundle.json (resolved against this page's location),
 *   or a loaded Bundle (loadBundle(), or withWeights() of one: weights from IndexedDB or a checkpoint), whose files
 *   and initial values are sent to the worker (shader files it has not fetched yet are fetched there from its URL)
 * @param {object} [options] createRuntime's options except `fetch`, `gpu` and `canvas` (refused: the worker has its
 *   own fetch, navigator.gpu and OffscreenCanvas)
 * @returns {Promise<WorkerRuntime>}
 */
export async function createWorkerRuntime(bundle, options = {}) {
  if (typeof Worker === 'undefined') throw new ShadergradError('Worker is not available in this context');
  for (const [k, instead] of Object.entries(PAGE_ONLY_OPTIONS))
    if (options[k] !== undefined)
      throw new ShadergradError(`createWorkerRuntime: option '${k}' cannot be sent to a Worker (${instead})`,
                                { option: k });
  let source, transfer = [];
  if (isBundle(bundle)) {
    ({ message: source, transfer } = bundleMessage(bundle));
    source = { bundle: source };
  } else if (typeof bundle === 'string' || bundle instanceof URL) {
    source = new URL(bundle, globalThis.location?.href).href;
  } else {
    throw new ShadergradError(`createWorkerRuntime: expected the URL of bundle.json (a string or URL) or a loaded ` +
                              `Bundle (loadBundle, withWeights), got ${describeArg(bundle)}`);
  }
  const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'shadergrad' });
  const wr = new WorkerRuntime(worker);
  try {
    const { bundle: described, ...info } = await wr._call('create', [source, options], transfer, 'createWorkerRuntime');
    Object.assign(wr, info);
    wr.bundle = described ? describedBundle(described.url, described.json, 'the worker') : bundle;
  } catch (e) {
    worker.terminate();
    throw e;
  }
  return wr;
}
