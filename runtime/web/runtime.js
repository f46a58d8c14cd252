// shadergrad web runtime — a Runtime: one bundle on one backend (WebGPU or WebGL2), with its persistent values on
// the GPU. run() is one step of a program (inputs uploaded, every kernel dispatched or drawn, only the outputs read
// back, updates committed by swapping front and back; a program's kernels are compiled at its first run unless
// createRuntime's `compile` or prepare() asked earlier); read() reads a persistent value back; timings() gives
// per-kernel times; stats says where the set-up time went.
import { isBundle, loadBundle } from './bundle.js';
import { ShadergradError, UnsupportedError } from './errors.js';
import { runChecks } from './checks.js';
import { checkNumerics, DebugSession } from './debug.js';
import { selectBackend } from './select.js';
import { WebGL2Executor } from './webgl2_executor.js';
import { WebGPUExecutor } from './webgpu_executor.js';
import { WasmExecutor } from './wasm_executor.js';
import { emptyStats, now, PhaseClock } from './setup_stats.js';

/** A bundle loaded on a backend. Create with createRuntime(). */
export class Runtime {
  constructor(bundle, selection, executor, stats) {
    /** @type {import('./bundle.js').Bundle} */
    this.bundle = bundle;
    /** @type {string} 'webgpu', 'webgl2' or 'wasm' */
    this.backend = selection.backend;
    /** @type {{backend: string, ok: boolean, reason: string}[]} every backend tried, with the reason in words */
    this.attempts = selection.attempts;
    /** @type {{name: 'gpu'|'cpu'|'cpu-subgroups', program_key: string, reason: string}|null} on WebGPU: the webgpu plan running
     * (the gpu plan, or the cpu plan on a CPU implementation of WebGPU) and why, in words; null on WebGL2 */
    this.webgpuPlan = selection.webgpuPlan ?? null;
    this.device = selection.device;
    this._exec = executor;
    /** Where the set-up time went (setup_stats.js): load_ms (bundle fetch), setup_ms (device or context, uploads, and
     * the kernels compiled at creation), their `phases`, each compiled kernel, each program's shader fetch and
     * compile (`prepared`) and first run(); updated as programs are compiled and first run. */
    this.stats = stats;
    this._disposed = false;
    this._debugging = null;  // the program of the open DebugSession
  }

  /** Device capabilities (renderer, limits, timer_query). */
  get caps() { return this.device.caps; }
  /** Program names of the bundle. */
  get programs() { return this.bundle.programNames; }

  /** The plan of `program` this runtime runs (bundle.json: the webgl2 plan is the program's description itself, a
   * webgpu plan its `webgpu` / `webgpu_cpu` field): its kernels, values, buffers. */
  plan(program) {
    const p = this.bundle.program(program);
    if (this.backend === 'wasm') return p.wasm;
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
    this._notDebugging(`run('${program}')`);
    return this._serial(async () => {
      const first = !(program in this.stats.first_run), t0 = now();
      const compileMs = await this._exec.prepare([program]);
      const out = await this._exec.run(program, feeds);
      if (first) this.stats.first_run[program] = { ms: now() - t0, compile_ms: compileMs };
      return out;
    });
  }

  /**
   * Compiles the kernels of `programs` now (default: every program not compiled yet), all at once, instead of at
   * their first run(): e.g. after a page's first prediction, so that its first training step does not wait. Runs
   * beside run() calls (not queued behind them). Rejects with the errors their first run() would throw
   * (ShaderCompileError naming the kernel and file, BundleError for a missing shader file); resolves to `stats`.
   * @param {string[]} [programs]
   */
  async prepare(programs = this.programs) {
    this._live('prepare()');
    await this._exec.prepare(programs);
    return this.stats;
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
    this._notDebugging(`write('${name}')`);
    return this._serial(() => this._exec.write(name, values));
  }

  _notDebugging(what) {
    if (this._debugging !== null)
      throw new ShadergradError(`${what}: program '${this._debugging}' is being debugged; finish() or abort() its ` +
                                'DebugSession first', { program: this._debugging });
  }

  /**
   * Debug mode (debug.js): uploads `feeds` and returns a DebugSession that runs `program` one kernel per step(),
   * reading back every value each kernel wrote (row-major, with statistics), on this runtime's backend and plan.
   * finish() commits the step as run() would; abort() leaves the persistent values as they were. One session at a
   * time; run() and write() are refused while it is open.
   * @param {string} program
   * @param {Record<string, ArrayLike<number>>} feeds
   * @returns {Promise<DebugSession>}
   */
  async debug(program, feeds) {
    this._live(`debug('${program}')`);
    this._notDebugging(`debug('${program}')`);
    this._debugging = program;
    try {
      return await this._serial(async () => {
        const run = await this._exec.debugBegin(program, feeds);
        const plan = this.plan(program);
        const sources = this.backend === 'wasm'  // the program's C file, cut at each kernel's header comment
          ? kernelSources(new TextDecoder().decode(await this.bundle.binary(plan.source, { program })), plan.kernels)
          : plan.kernels.map((k) => this.bundle.source(k.wgsl ?? k.glsl_es));
        const driver = {
          kernel: (i) => this._serial(() => run.debugKernel(i)),
          finish: () => this._serial(() => run.debugFinish()),
          abort: async () => {},
        };
        return new DebugSession({ program, backend: this.backend, plan, sources, driver,
                                  onClose: () => { this._debugging = null; } });
      });
    } catch (e) {
      this._debugging = null;
      throw e;
    }
  }

  /** Runs `program` once in debug mode and stops at the first kernel that writes a NaN or Inf (debug.js
   * checkNumerics): {ok: false, kernel, value, nodes, lines, source, message} without committing, else
   * {ok: true, outputs} with the step committed. */
  async checkNumerics(program, feeds) {
    return checkNumerics(this, program, feeds);
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

/** Each kernel's part of a wasm plan's C file (wasm/PROGRAM.c): from its `// shadergrad compute kernel NAME` line to
 * the next kernel's. */
function kernelSources(text, kernels) {
  const at = kernels.map((k) => text.indexOf(`// shadergrad compute kernel ${k.name} `));
  return kernels.map((k, i) => {
    if (at[i] < 0) return `// ${k.c}: no source found for kernel ${k.name} (entry ${k.entry})`;
    const after = at.filter((x) => x > at[i]);
    return text.slice(at[i], after.length ? Math.min(...after) : text.length);
  });
}

/** The programs `compile` ('lazy' | 'all' | names) asks to compile at createRuntime. */
function compiledAtCreation(bundle, compile = 'lazy') {
  if (compile === 'lazy') return [];
  if (compile === 'all') return bundle.programNames;
  if (Array.isArray(compile)) {
    for (const n of compile) bundle.program(n);  // BundleError naming the programs for an unknown one
    return compile;
  }
  throw new UnsupportedError(`unknown compile option ${JSON.stringify(compile)} (choose 'lazy', 'all' or a list of ` +
                             `program names: ${bundle.programNames.join(', ')})`, { compile });
}

/**
 * Loads a bundle (unless given one), picks a backend and uploads the weights; compiles the kernels of the programs
 * `compile` names (default 'lazy': none — each program's kernels are compiled at its first run(), or by
 * Runtime.prepare()).
 * @param {string|URL|import('./bundle.js').Bundle} bundle URL of bundle.json, or a loaded Bundle (loadBundle(), or
 *   persist.js withWeights() of one: weights from IndexedDB or a checkpoint)
 * @param {{backend?: 'auto'|'webgpu'|'webgl2', webgpuPlan?: 'auto'|'gpu'|'cpu'|'cpu-subgroups', gpu?: GPU,
 *          canvas?: HTMLCanvasElement|OffscreenCanvas, profile?: boolean, fetch?: typeof fetch,
 *          contextAttributes?: WebGLContextAttributes, featureLevel?: 'core'|'compatibility',
 *          compile?: 'lazy'|'all'|string[], setupProfile?: boolean, shaders?: 'lazy'|'all'}} [options]
 *   `gpu`: a GPU object where there is no navigator.gpu (Node: npm webgpu's create([...])); `featureLevel`: the
 *   WebGPU adapter to ask for (default: core, else compatibility); `webgpuPlan`: which webgpu plan to run (default
 *   auto: the cpu plan on a CPU implementation of WebGPU, else the gpu plan; rt.webgpuPlan says which and why);
 *   `compile`: 'lazy' (default), 'all' (every program now: createRuntime rejects for any broken kernel) or program
 *   names; `setupProfile`: compile kernels one at a time so stats.kernels gives each kernel's own compile time
 *   (slower set-up; for diagnosis); `shaders`: loadBundle's option (when given a URL)
 * @returns {Promise<Runtime>}
 */
export async function createRuntime(bundle, options = {}) {
  const t0 = now();
  const b = isBundle(bundle) ? bundle : await loadBundle(bundle, options);
  const t1 = now();
  const stats = emptyStats();
  Object.assign(stats.phases, b.loadPhases ?? {});
  const clock = new PhaseClock(stats.phases);
  const eager = compiledAtCreation(b, options.compile);
  const selection = await selectBackend(b, options);
  clock.lap('backend');
  let exec;
  try {
    exec = selection.backend === 'webgpu'
      ? new WebGPUExecutor(b, selection.device, options, selection.webgpuPlan)
      : selection.backend === 'webgl2' ? new WebGL2Executor(b, selection.device, options)
        : new WasmExecutor(b, selection.device, options);
    clock.lap('buffers');
    await exec.link(clock, stats, eager);
  } catch (e) {
    exec?.dispose();
    selection.device.dispose();
    throw e;
  }
  Object.assign(stats, { load_ms: t1 - t0, setup_ms: now() - t1 });
  return new Runtime(b, selection, exec, stats);
}
