// shadergrad web runtime — a Runtime: one bundle on one backend (WebGPU or WebGL2), with its persistent values on
// the GPU. run() is one step of a program (inputs uploaded, every kernel dispatched or drawn, only the outputs read
// back, updates committed by swapping front and back); read() reads a persistent value back; timings() gives
// per-kernel times.
import { Bundle, loadBundle } from './bundle.js';
import { ShadergradError } from './errors.js';
import { runChecks } from './checks.js';
import { selectBackend } from './select.js';
import { WebGL2Executor } from './webgl2_executor.js';
import { WebGPUExecutor } from './webgpu_executor.js';
import { emptyStats, now, PhaseClock } from './setup_stats.js';

/** A bundle loaded on a backend. Create with createRuntime(). */
export class Runtime {
  constructor(bundle, selection, executor, stats) {
    /** @type {Bundle} */
    this.bundle = bundle;
    /** @type {string} 'webgpu' or 'webgl2' */
    this.backend = selection.backend;
    /** @type {{backend: string, ok: boolean, reason: string}[]} every backend tried, with the reason in words */
    this.attempts = selection.attempts;
    /** @type {{name: 'gpu'|'cpu', program_key: string, reason: string}|null} on WebGPU: the webgpu plan running
     * (the gpu plan, or the cpu plan on a CPU implementation of WebGPU) and why, in words; null on WebGL2 */
    this.webgpuPlan = selection.webgpuPlan ?? null;
    this.device = selection.device;
    this._exec = executor;
    /** @type {{load_ms: number, setup_ms: number}} bundle fetch, and context + uploads + shader compile/link */
    this.stats = stats;
    this._disposed = false;
  }

  /** Device capabilities (renderer, limits, timer_query). */
  get caps() { return this.device.caps; }
  /** Program names of the bundle. */
  get programs() { return this.bundle.programNames; }

  /** The plan of `program` this runtime runs (bundle.json: the webgl2 plan is the program's description itself, a
   * webgpu plan its `webgpu` / `webgpu_cpu` field): its kernels, values, buffers. */
  plan(program) {
    const p = this.bundle.program(program);
    return this.webgpuPlan ? p[this.webgpuPlan.program_key] : p;
  }

  _live(what) {
    if (this._disposed) throw new ShadergradError(`${what}: the runtime was disposed`);
  }

  /** Runs `fn` after every earlier GPU call of this runtime settled: calls that overlap (a page's animation frame
   * and a button) are executed one at a time, in call order. Without it two WebGPU runs mapped one staging buffer
   * at once ("Buffer already has an outstanding map pending"). */
  _serial(fn) {
    const next = (this._queue || Promise.resolve()).then(fn, fn);
    this._queue = next.then(() => undefined, () => undefined);
    return next;
  }

  /**
   * One step of `program`. Feeds are keyed by input name (Float32Array, Int32Array or number arrays of numel
   * values, row-major; i32 inputs as integers). Resolves to the outputs by name (Float32Array; Int32Array for i32).
   * @param {string} program
   * @param {Record<string, ArrayLike<number>>} feeds
   */
  async run(program, feeds) {
    this._live(`run('${program}')`);
    return this._serial(async () => {
      const first = !(program in this.stats.first_run), t0 = now();
      const out = await this._exec.run(program, feeds);
      if (first) this.stats.first_run[program] = { ms: now() - t0 };
      return out;
    });
  }

  /** The current value of persistent value `name` (row-major Float32Array). */
  async read(name) {
    this._live(`read('${name}')`);
    return this._serial(() => this._exec.read(name));
  }

  /**
   * Replaces the current value of persistent value `name` (a parameter or optimizer state) with `values`
   * (row-major, numel of its shape), after every earlier call: loading weights into a running runtime without
   * compiling anything again. FeedError for a wrong count, BundleError for an unknown name.
   * @param {string} name
   * @param {ArrayLike<number>} values
   */
  async write(name, values) {
    this._live(`write('${name}')`);
    return this._serial(() => this._exec.write(name, values));
  }

  /** Per-kernel times of the last run when created with `profile: true`, else []. */
  async timings() {
    this._live('timings()');
    return this._exec.timings();
  }

  /** GPU objects of the WebGPU device (WebGPUDevice.liveObjects: buffers alive, buffers / bind groups / pipelines /
   * shader modules created), for leak checks; null on WebGL2. */
  liveObjects() {
    this._live('liveObjects()');
    return this.device.liveObjects ? this.device.liveObjects() : null;
  }

  /** Replays the bundle's checks (expected outputs of the native CPU backend); see checks.js. */
  async runChecks(options) {
    this._live('runChecks()');
    return runChecks(this, options);
  }

  /** Loses the WebGL context (WEBGL_lose_context) or destroys the WebGPU device on purpose, to test lost-context
   * handling; returns false where WebGL2 lacks the extension. */
  loseContextForTesting() {
    if (this.backend === 'webgpu') { this.device.loseForTesting(); return true; }
    const ext = this.device.loseContextExt;
    if (!ext) return false;
    ext.loseContext();
    return true;
  }

  /** Frees every GPU object of the runtime. */
  dispose() {
    if (this._disposed) return;
    this._disposed = true;
    this._exec.dispose();
    this.device.dispose();
  }
}

/**
 * Loads a bundle (unless given one), picks a backend, uploads the weights and compiles every kernel.
 * @param {string|URL|Bundle} bundle URL of bundle.json, or a loaded Bundle
 * @param {{backend?: 'auto'|'webgpu'|'webgl2', webgpuPlan?: 'auto'|'gpu'|'cpu', gpu?: GPU,
 *          canvas?: HTMLCanvasElement|OffscreenCanvas, profile?: boolean, fetch?: typeof fetch,
 *          contextAttributes?: WebGLContextAttributes, featureLevel?: 'core'|'compatibility'}} [options]
 *   `gpu`: a GPU object where there is no navigator.gpu (Node: npm webgpu's create([...])); `featureLevel`: the
 *   WebGPU adapter to ask for (default: core, else compatibility); `webgpuPlan`: which webgpu plan to run (default
 *   auto: the cpu plan on a CPU implementation of WebGPU, else the gpu plan; rt.webgpuPlan says which and why)
 * @returns {Promise<Runtime>}
 */
export async function createRuntime(bundle, options = {}) {
  const t0 = now();
  const b = bundle instanceof Bundle ? bundle : await loadBundle(bundle, options);
  const t1 = now();
  const stats = emptyStats();
  Object.assign(stats.phases, b.loadPhases ?? {});
  const clock = new PhaseClock(stats.phases);
  const selection = await selectBackend(b, options);
  clock.lap('backend');
  let exec;
  try {
    exec = selection.backend === 'webgpu'
      ? new WebGPUExecutor(b, selection.device, options, selection.webgpuPlan.program_key)
      : new WebGL2Executor(b, selection.device, options);
    clock.lap('buffers');
    await exec.link(clock, stats);
  } catch (e) {
    exec?.dispose();
    selection.device.dispose();
    throw e;
  }
  Object.assign(stats, { load_ms: t1 - t0, setup_ms: now() - t1 });
  return new Runtime(b, selection, exec, stats);
}
