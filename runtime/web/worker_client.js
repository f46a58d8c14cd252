// shadergrad web runtime — a Runtime living in a module Worker (worker.js), driven from the page with the same
// async API as Runtime. Feeds are copied into the worker (structured clone) unless `transfer: true` is given to
// run(), which moves their buffers instead (zero-copy; the caller's arrays become empty, seed article 003 §3.3);
// outputs are always transferred back.
import { errorFromJSON, ShadergradError } from './errors.js';

/** A Runtime in a Worker. Create with createWorkerRuntime(). */
export class WorkerRuntime {
  constructor(worker) {
    this.worker = worker;
    this._next = 1;
    this._pending = new Map();
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
      const err = new ShadergradError(`the shadergrad worker failed: ${e.message || 'script error'} ` +
                                      `(${e.filename || 'worker.js'}:${e.lineno || '?'})`);
      for (const p of this._pending.values()) p.reject(err);
      this._pending.clear();
    };
  }

  _call(op, args = [], transfer = []) {
    const id = this._next++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, op, args }, transfer);
    });
  }

  /** One step of `program` in the worker; `options.transfer` moves the feeds' buffers instead of copying. */
  run(program, feeds, options = {}) {
    const transfer = options.transfer ? Object.values(feeds).filter(ArrayBuffer.isView).map((a) => a.buffer) : [];
    return this._call('run', [program, feeds], transfer);
  }
  /** Compiles the kernels of `programs` in the worker now (default: every program not compiled yet), as
   * Runtime.prepare(); resolves to the worker runtime's stats, which also replace `this.stats` (`prepare([])`
   * only fetches the stats: first runs and compiles since creation). */
  async prepare(programs) {
    this.stats = await this._call('prepare', programs === undefined ? [] : [programs]);
    return this.stats;
  }
  read(name) { return this._call('read', [name]); }
  timings() { return this._call('timings'); }
  runChecks(options) { return this._call('runChecks', [options]); }
  loseContextForTesting() { return this._call('loseContextForTesting'); }

  /** Frees the GPU objects and terminates the worker (seed article 003 §5.4: an idle worker still holds memory). */
  async dispose() {
    try { await this._call('dispose'); } finally { this.worker.terminate(); }
  }
}

/**
 * Starts a module Worker running worker.js and creates a Runtime there (same options as createRuntime, minus
 * `canvas` and `fetch`: the worker makes an OffscreenCanvas and uses its own fetch).
 * @param {string|URL} bundleUrl URL of bundle.json (resolved against this page's location)
 * @param {object} [options]
 * @returns {Promise<WorkerRuntime>}
 */
export async function createWorkerRuntime(bundleUrl, options = {}) {
  if (typeof Worker === 'undefined') throw new ShadergradError('Worker is not available in this context');
  const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'shadergrad' });
  const wr = new WorkerRuntime(worker);
  const url = new URL(bundleUrl, globalThis.location?.href).href;
  try {
    const info = await wr._call('create', [url, options]);
    Object.assign(wr, info);
  } catch (e) {
    worker.terminate();
    throw e;
  }
  return wr;
}
