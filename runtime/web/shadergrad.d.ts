// shadergrad web runtime — TypeScript declarations of the public API (shadergrad.js and what it re-exports).
// The bundle format is docs/BUNDLE.md; the JSDoc in each module says the same in more words. Checked with
// `tsc --strict` by tests/web_package_check.mjs (ctest web_typescript_consumer).
/// <reference lib="dom" />

/** The newest bundle format this runtime reads: "shadergrad-bundle/3". */
export const BUNDLE_FORMAT: string;
/** Every bundle format this runtime reads: ["shadergrad-bundle/3", "shadergrad-bundle/2"]. */
export const BUNDLE_FORMATS: readonly string[];
/** The webgpu plans a bundle may carry: ['gpu', 'cpu', 'cpu-subgroups']. */
export const WEBGPU_PLANS: readonly WebGPUPlanName[];
/** The targets a bundle may carry: ['webgpu', 'webgl2', 'wasm']. */
export const TARGETS: readonly BackendName[];
/** Storage features (bundle.json `features`) this runtime can run. */
export const KNOWN_FEATURES: readonly string[];
/** Backends in the order `backend: 'auto'` tries them: ['webgpu', 'webgl2', 'wasm']. */
export const BACKENDS: readonly BackendName[];
export const VERSION: string;

export type BackendName = 'webgpu' | 'webgl2' | 'wasm';
/** 'gpu': WGSL kernels made for GPUs; 'cpu': made for CPU implementations of WebGPU (SwiftShader, llvmpipe);
 * 'cpu-subgroups': the cpu plan with contractions that share loads across subgroups of 4 (needs 'subgroups'). */
export type WebGPUPlanName = 'gpu' | 'cpu' | 'cpu-subgroups';

/** One webgpu plan of a bundle (bundle.json webgpu.plans[]): its programs live at programs.NAME[program_key]. */
export interface WebGPUPlanInfo {
  name: WebGPUPlanName; program_key: string; target: Record<string, unknown>;
  /** among the plans for its kind of adapter (target.cpu_device): 0 = tried first */
  preference?: number;
  /** subgroup_size: the plan's kernels need subgroups of exactly this many consecutive invocations. */
  requires: { limits: Record<string, number>; features: string[]; subgroup_size?: number };
}
/** The webgpu plan a runtime runs and why, in words. */
export interface ChosenWebGPUPlan { name: WebGPUPlanName; program_key: string; reason: string; }

/** bundle.json `webgpu.cpu_adapter`: how a CPU implementation of WebGPU is told (a fallback adapter; adapter info
 * naming one of `names` as a whole word, ignoring case). */
export interface CpuAdapterRule { fallback_adapter?: boolean; names?: string[]; }

/** The plan for `adapter` by the bundle's data: `cpuAdapter` classifies the adapter (CPU implementation or GPU), the
 * plans of that kind (`target.cpu_device`) are tried by `preference`; the next usable one is `fallback`. Without
 * `cpuAdapter` (older bundles) the first usable plan; `want` forces one. A plan that cannot run gives only a reason. */
export function chooseWebGPUPlan(adapter: { isFallbackAdapter?: boolean; info?: Record<string, unknown>;
                                            features?: ReadonlySet<string>; limits?: Record<string, number> },
                                 plans: WebGPUPlanInfo[], want?: 'auto' | WebGPUPlanName,
                                 cpuAdapter?: CpuAdapterRule):
  { plan: WebGPUPlanInfo; reason: string; fallback?: WebGPUPlanInfo } | { reason: string };

/** A reference to f32 data in a bundle file: absolute byte offset and length. */
export interface DataRef { file: string; tensor: string; offset: number; bytes: number; }

export interface TextureLayout { numel: number; texels: number; width: number; height: number; }

/** A loaded, checked bundle. */
export class Bundle {
  readonly url: URL;
  /** bundle.json as parsed (see docs/BUNDLE.md for its schema). */
  readonly json: any;
  readonly format: string;
  readonly model: string;
  /** The plans every program carries: 'webgpu' (WGSL compute), 'webgl2' (GLSL ES fragment), 'wasm' (WebAssembly). */
  readonly targets: BackendName[];
  /** The webgpu section: the first plan's target and the WebGPU limits (GPUSupportedLimits names) it requires,
   * and every plan (format 3). */
  readonly webgpu?: { target: Record<string, unknown>;
                      /** subgroup_size: the plan's kernels need subgroups of exactly this many consecutive invocations. */
  requires: { limits: Record<string, number>; features: string[]; subgroup_size?: number }; plans?: WebGPUPlanInfo[] };
  /** The webgpu plans in bundle order (format 2: its one plan); [] without the webgpu target. */
  readonly webgpuPlans: WebGPUPlanInfo[];
  readonly target: Record<string, unknown>;
  readonly requires: { max_draw_buffers: number; max_texture_image_units: number; max_texture_size: number;
                       extensions: string[]; };
  readonly features: string[];
  readonly programNames: string[];
  readonly persistent: { name: string; kind: 'param' | 'state'; shape: number[]; dtype: 'f32' | 'i32';
                         layout?: TextureLayout; allocated?: [number, number]; buffer_bytes?: number;
                         data: DataRef; }[];
  /** The description of a program; throws BundleError for an unknown name. */
  program(name: string): any;
  /** A kernel's shader source (path as in `kernels[].glsl_es` or `webgpu.kernels[].wgsl`), once fetched
   * (loadShaders; BundleError before). */
  source(path: string): string;
  /** The shader plans the bundle carries: 'webgl2', 'webgpu gpu', 'webgpu cpu'. */
  readonly shaderPlans: string[];
  /** Fetches (once, in parallel) the shader files of `programs` (default all) in `plans` (default all); BundleError
   * naming the file, kernel, program and plan for a missing one. Runtimes call it per program as they compile. */
  loadShaders(programs?: string[], plans?: string[]): Promise<void>;
  /** loadBundle's phases, ms: fetch_json, check_json, fetch_weights (and fetch_shaders with `shaders: 'all'`). */
  readonly loadPhases: Record<string, number>;
  /** The f32 values a data reference points at (a copy). */
  data(ref: DataRef): Float32Array;
  /** Fetches expected.safetensors (once) and resolves to bundle.json `checks`. */
  loadChecks(): Promise<any>;
}

export interface LoadOptions {
  fetch?: typeof fetch;
  /** 'lazy' (default): shader files are fetched when a runtime compiles their program (only the plan it runs);
   * 'all': every shader file of every plan now (a missing one rejects loadBundle). */
  shaders?: 'lazy' | 'all';
}

/** Loads bundle.json and the weights (and with `shaders: 'all'` every shader); BundleError / UnsupportedError when
 * it cannot be used. */
export function loadBundle(url: string | URL, options?: LoadOptions): Promise<Bundle>;

export interface RuntimeOptions extends LoadOptions {
  /** 'auto' (default) tries BACKENDS in order. */
  backend?: 'auto' | BackendName;
  /** WebGPU: which webgpu plan to run; 'auto' (default): chooseWebGPUPlan by the adapter. */
  webgpuPlan?: 'auto' | WebGPUPlanName;
  /** WebGPU: the GPU object to use where there is no navigator.gpu (Node: npm `webgpu`'s create([...])). */
  gpu?: unknown;
  /** WebGPU: the adapter's feature level; default: 'core', else 'compatibility'. */
  featureLevel?: 'core' | 'compatibility';
  powerPreference?: 'low-power' | 'high-performance';
  /** WebGL2: a canvas to draw with; default: a new OffscreenCanvas (or a <canvas> where there is none). */
  canvas?: HTMLCanvasElement | OffscreenCanvas;
  /** Per-kernel timings of each run (timings()). */
  profile?: boolean;
  /** Which programs' kernels createRuntime compiles: 'lazy' (default: none; each program's at its first run(), or
   * by prepare()), 'all' (createRuntime rejects for any broken kernel), or a list of program names. */
  compile?: 'lazy' | 'all' | string[];
  /** Compile kernels one at a time so `stats.kernels` gives each kernel's own compile time (a slower set-up, for
   * diagnosis). */
  setupProfile?: boolean;
  contextAttributes?: WebGLContextAttributes;
  /** wasm: threads in all, the calling thread included (1 = no Workers); default min(4, hardwareConcurrency). More
   * than one only where the memory can be shared: a cross-origin isolated page or Worker (COOP/COEP), or Node. */
  wasmThreads?: number;
}

export interface BackendAttempt { backend: BackendName; ok: boolean; reason: string; }

export interface KernelTiming {
  kernel: string;
  ms: number;
  /** true: GPU time (WebGPU timestamp-query, WebGL2 EXT_disjoint_timer_query_webgl2); false: host time (WebGPU:
   * one submit per kernel until onSubmittedWorkDone; WebGL2: between readbacks around the draw). */
  gpu_timer: boolean;
}

export interface WebGL2Caps {
  api: 'webgl2'; renderer: string; max_texture_size: number; max_viewport: number; max_draw_buffers: number;
  max_texture_image_units: number; timer_query: boolean; parallel_shader_compile: boolean;
}

export interface WebGPUCaps {
  api: 'webgpu'; renderer: string; timestamp_query: boolean; max_storage_buffers_per_stage: number;
  max_compute_invocations_per_workgroup: number; max_compute_workgroup_storage_size: number;
  max_storage_buffer_binding_size: number;
}

/** The wasm backend: the bundle's WebAssembly SIMD128 module on the calling thread, and on a pool of Workers sharing
 * its memory where `threads` > 1 (`parallel_work`: the kernel work from which a kernel is split); `why_one_thread`
 * says why not, in words. */
export interface WasmCaps {
  renderer: string; threads: number; simd128: true; module: string; shared_memory: boolean;
  parallel_work?: number; why_one_thread?: string;
}

export type DeviceCaps = WebGL2Caps | WebGPUCaps | WasmCaps;

export type Feeds = Record<string, ArrayLike<number>>;
export type Outputs = Record<string, Float32Array | Int32Array>;

export interface Comparison {
  n: number; max_abs: number; max_rel: number; norm_rel: number; scale: number; worst: number;
  worst_actual: number; worst_expected: number; metric: 'elementwise' | 'norm'; ok: boolean;
  actual?: number[]; expected?: number[];
}

export interface Tolerance { metric?: 'elementwise' | 'norm'; rel: number; floor?: number; }

export interface CheckReport {
  ok: boolean;
  tolerance: { outputs: Tolerance; persistent: Tolerance };
  computed_by: string;
  backend: BackendName;
  runs: { program: string; outputs: Record<string, Comparison> }[];
  persistent: Record<string, Comparison>;
}

/** Where a runtime's set-up time went, host milliseconds (performance.now). */
export interface SetupStats {
  /** Fetching and checking the bundle (0 when createRuntime was given a loaded Bundle). */
  load_ms: number;
  /** Device or context, uploads, and the kernels compiled at creation (`compile`). */
  setup_ms: number;
  /** Both split: fetch_json, check_json, fetch_weights (loadBundle's, also when loaded before), backend (adapter and
   * device, or context and fp32 probe), buffers (persistent values allocated and uploaded), pipelines (WebGPU) or
   * link (WebGL2): the programs compiled at creation. */
  phases: Record<string, number>;
  /** Every kernel compiled, from its compile's start to its pipeline or program being ready (kernels compiled
   * together overlap; with setupProfile each is its own). */
  kernels: { program: string; kernel: string; file: string; ms: number }[];
  /** Per compiled program: its shader files' fetch and its kernels' compile, ms. */
  prepared: Record<string, { fetch_ms: number; compile_ms: number; kernels: number }>;
  /** Per program run so far: its first run() (ms), and how long of it was spent waiting for its kernels. */
  first_run: Record<string, { ms: number; compile_ms: number }>;
  /** With setupProfile on WebGL2: each draw of each program's first run, host ms (readbacks around each draw;
   * SwiftShader compiles a draw's routines at its first draw). */
  first_draws: Record<string, { kernel: string; ms: number }[]>;
  /** Kernels that found an already compiled kernel with the same source (hits), and compiles (misses). */
  shader_cache: { hits: number; misses: number };
}

/** Runtime.liveObjects(): GPU objects of a WebGPU runtime. */
export interface LiveObjects {
  buffers: number; buffers_created: number; bind_groups_created: number; pipelines_created: number;
  shader_modules_created: number;
}

/** A graph node a kernel computes (bundle.json kernels[].nodes): number (Program::nodes() position), op label, shape
 * ("4x10"), the user's C++ source line ("model.cpp:42"). */
export interface KernelNode { node: number; op: string; shape: string; source: string; }
/** A value a kernel writes (an entry of the plan's `values`). `update_of`: the persistent value it replaces. */
export interface DebugValue {
  value: number; name: string; kind: string; node: number; op: string; shape: number[]; source: string;
  update_of?: string; tensor?: string;
  /** The program output this value is (bundle.json programs[].outputs[].name), if it is one. */
  output?: string;
}
/** Statistics as the native debugger computes them: over the finite elements (NaN when none); `first_non_finite`
 * is the index of the first NaN/Inf, -1 for none. */
export interface TensorStats {
  count: number; finite: number; min: number; max: number; mean: number; std: number; l2: number;
  nan: number; pos_inf: number; neg_inf: number; first_non_finite: number;
}
/** A kernel as the debugger lists it: launch index, name, shader file and language, graph nodes, their distinct C++
 * lines, the values it writes. */
export interface DebugKernel {
  index: number; name: string; file: string; language: 'wgsl' | 'glsl-es-3.00' | 'c11'; nodes: KernelNode[];
  lines: string[]; outputs: DebugValue[];
  /** The values it reads; `producer`: the kernel of the step that wrote it last before, null for an input, a
   * persistent value or a constant (`tensor`: the input's or persistent value's name). */
  inputs: (DebugValue & { producer: number | null })[];
}
/** One kernel run by DebugSession.step(): what it wrote (row-major, with statistics) and its shader source. */
export interface DebugStep extends DebugKernel {
  /** `nonFinite`: a NaN, or an infinity its op does not write on purpose (intendedInfinities: a mask's literal
   * -inf); `first_unexpected`: the index of the first such element, -1 for none. */
  outputs: (DebugValue & { data: Float32Array; stats: TensorStats; nonFinite: boolean; first_unexpected: number;
                           intended?: { neg: boolean; pos: boolean } })[];
  nonFinite: boolean;
  source: string;
}
/** checkNumerics' result: the first kernel writing a NaN/Inf (nothing committed), or the committed step's outputs. */
export type NumericsResult =
  | { ok: true; outputs: Outputs }
  | { ok: false; program: string; backend: BackendName; kernel: string; index: number; file: string;
      language: string; value: Omit<DebugValue, 'kind'>; stats: TensorStats; nodes: KernelNode[]; lines: string[];
      source: string; message: string };
/** A program stepped kernel by kernel (Runtime.debug, WorkerRuntime.debug). */
export class DebugSession {
  readonly program: string;
  readonly backend: BackendName;
  readonly kernels: DebugKernel[];
  /** Shader source of each kernel (WGSL on WebGPU, GLSL ES 3.00 on WebGL2). */
  readonly sources: string[];
  /** Index of the kernel the next step() runs. */
  readonly next: number;
  readonly steps: DebugStep[];
  readonly firstNonFinite: DebugStep | null;
  readonly state: 'open' | 'finished' | 'aborted';
  readonly atEnd: boolean;
  step(): Promise<DebugStep>;
  /** Steps to a stop: after a non-finite kernel (stopOnNonFinite, default true), before a breakpoint kernel
   * (index, name or name prefix), or at the end. */
  continue(options?: { breakpoints?: (number | string)[]; stopOnNonFinite?: boolean }):
    Promise<{ stopped: 'non-finite' | 'breakpoint' | 'end'; step: DebugStep | null }>;
  /** Runs the kernels left, reads the outputs and commits the updates as run() does. */
  finish(): Promise<Outputs>;
  /** Ends without committing the updates. */
  abort(): Promise<void>;
}
export function tensorStats(data: ArrayLike<number>): TensorStats;
export function debugKernels(plan: any): DebugKernel[];
export function numericsReport(session: DebugSession, step: DebugStep): Exclude<NumericsResult, { ok: true }>;
export function checkNumerics(rt: Runtime | WorkerRuntime, program: string, feeds: Feeds): Promise<NumericsResult>;
/** The infinities an op label writes on purpose: a literal `-inf` / `inf` (a causal mask's where(a0 > a1, -inf, a2)). */
export function intendedInfinities(op: string | undefined): { neg: boolean; pos: boolean };
/** A bundle's attention outputs: metadata `attention` (a JSON array, as a string or an array); [] when none. */
export function attentionNames(metadata: Record<string, unknown> | undefined): string[];
/** Whether a value is an attention map: named in `names` (its program output or plan name), shape [B, H, T, T]. */
export function isAttention(v: { name: string; output?: string; shape: number[] }, names: string[]): boolean;

/** A bundle on a backend, its persistent values on the GPU. */
export class Runtime {
  readonly bundle: Bundle;
  readonly backend: BackendName;
  readonly attempts: BackendAttempt[];
  /** On WebGPU: the webgpu plan running and why; null on WebGL2. */
  readonly webgpuPlan: ChosenWebGPUPlan | null;
  readonly caps: DeviceCaps;
  /** The plan of `program` this runtime runs (the webgl2 plan, or programs.NAME[webgpuPlan.program_key]). */
  plan(program: string): any;
  readonly programs: string[];
  /** Where the set-up time went; updated as programs are compiled and first run. */
  readonly stats: SetupStats;
  /** One step: inputs uploaded, every kernel dispatched (WebGPU) or drawn (WebGL2), only the outputs read back,
   * updates committed (front and back swapped). The first run of a program compiles its kernels unless that was
   * done before (`compile`, prepare()): ShaderCompileError naming the kernel and file for a broken one. */
  run(program: string, feeds: Feeds): Promise<Outputs>;
  /** Compiles the kernels of `programs` (default: every program) now, beside running work; rejects with the errors
   * their first run would throw; resolves to `stats`. */
  prepare(programs?: string[]): Promise<SetupStats>;
  /** A persistent value's current value. */
  read(name: string): Promise<Float32Array>;
  /** Replaces a persistent value's current value (row-major, numel of its shape): new weights without recompiling. */
  write(name: string, values: ArrayLike<number>): Promise<void>;
  timings(): Promise<KernelTiming[]>;
  /** WebGPU only (null on WebGL2), for leak checks: buffers alive now, and buffers / bind groups / compute pipelines
   * / shader modules created since the runtime was made (a steady state of run() creates none). */
  liveObjects(): LiveObjects | null;
  runChecks(options?: { outputs?: Tolerance; persistent?: Tolerance }): Promise<CheckReport>;
  /** Debug mode: the feeds uploaded, a DebugSession running `program` one kernel per step() (each kernel's outputs
   * read back). run() and write() are refused until it is finished or aborted. */
  debug(program: string, feeds: Feeds): Promise<DebugSession>;
  /** One step in debug mode, stopped at the first kernel writing a NaN/Inf (not committed), else committed. */
  checkNumerics(program: string, feeds: Feeds): Promise<NumericsResult>;
  loseContextForTesting(): boolean;
  dispose(): void;
}

export function createRuntime(bundle: string | URL | Bundle, options?: RuntimeOptions): Promise<Runtime>;

/** createWorkerRuntime's options: createRuntime's, except those that cannot cross to a Worker (it has its own
 * fetch, navigator.gpu and OffscreenCanvas; passing one throws naming it). */
export type WorkerRuntimeOptions = Omit<RuntimeOptions, 'canvas' | 'fetch' | 'gpu'>;

/** The same API as Runtime, in a module Worker (WebGPU from the worker's navigator.gpu, WebGL2 on an
 * OffscreenCanvas): the same properties, and the same methods, async where Runtime's talk to the GPU. Calls after
 * dispose() reject with a ShadergradError. */
export class WorkerRuntime {
  readonly worker: Worker;
  /** The Bundle given to createWorkerRuntime; given a URL, the bundle's description (bundle.json, programs,
   * persistent values: enough for saveWeights / checkpointBytes), its weights living in the worker. */
  readonly bundle: Bundle;
  readonly backend: BackendName;
  readonly attempts: BackendAttempt[];
  readonly webgpuPlan: ChosenWebGPUPlan | null;
  readonly caps: DeviceCaps;
  readonly programs: string[];
  /** The worker runtime's stats at creation; prepare() refreshes them. */
  stats: SetupStats;
  /** The plan of `program` the worker runs (as Runtime.plan). */
  plan(program: string): any;
  /** Runtime.prepare() in the worker; also refreshes `stats` (`prepare([])` compiles nothing). */
  prepare(programs?: string[]): Promise<SetupStats>;
  /** `transfer: true` moves the feeds' buffers to the worker instead of copying them. */
  run(program: string, feeds: Feeds, options?: { transfer?: boolean }): Promise<Outputs>;
  read(name: string): Promise<Float32Array>;
  /** Runtime.write() in the worker; `transfer: true` moves the values' buffer instead of copying it. */
  write(name: string, values: ArrayLike<number>, options?: { transfer?: boolean }): Promise<void>;
  timings(): Promise<KernelTiming[]>;
  liveObjects(): Promise<LiveObjects | null>;
  runChecks(options?: { outputs?: Tolerance; persistent?: Tolerance }): Promise<CheckReport>;
  /** Runtime.debug with the kernels running in the worker (each kernel's outputs transferred back). */
  debug(program: string, feeds: Feeds): Promise<DebugSession>;
  checkNumerics(program: string, feeds: Feeds): Promise<NumericsResult>;
  loseContextForTesting(): Promise<boolean>;
  /** Frees the GPU objects and terminates the worker. */
  dispose(): Promise<void>;
}

/** Starts a module Worker and creates a Runtime there. `bundle`: as createRuntime's — the URL of bundle.json, or a
 * loaded Bundle (loadBundle(), withWeights() of one) whose files and initial values are sent to the worker. */
export function createWorkerRuntime(bundle: string | URL | Bundle, options?: WorkerRuntimeOptions):
  Promise<WorkerRuntime>;

// ---- weights that outlive the page (persist.js): IndexedDB keyed by the bundle's structure hash, checkpoints ----

/** The IndexedDB database the weights live in ('shadergrad'). */
export const DB_NAME: string;
/** A runtime whose persistent values can be read: a Runtime or a WorkerRuntime. */
export type WeightsSource = Pick<Runtime, 'bundle' | 'read'> | Pick<WorkerRuntime, 'bundle' | 'read'>;
/** Where in IndexedDB: `slot` names one of several saved states (default 'default'), `dbName` the database. */
export interface WeightsSlot { slot?: string; dbName?: string; }
/** bundle.json metadata.structure_hash; BundleError when the bundle has none. */
export function structureHash(bundle: Bundle): string;
/** The IndexedDB key of a bundle's weights: "MODEL@STRUCTURE_HASH#SLOT". */
export function weightsKey(bundle: Bundle, slot?: string): string;
/** Reads every persistent value of `rt` and stores them under weightsKey(rt.bundle, slot). */
export function saveWeights(rt: WeightsSource, options?: WeightsSlot & { extra?: Record<string, unknown> }):
  Promise<{ key: string; values: number; bytes: number }>;
/** Saved weights of this bundle's structure: 'loaded' (weights: every persistent value), 'none', or 'mismatch'
 * (weights of another structure of the model exist and are not loaded; `message` says why). */
export function loadWeights(bundle: Bundle, options?: WeightsSlot): Promise<{
  status: 'loaded' | 'none' | 'mismatch'; weights: Map<string, Float32Array> | null; message: string; key?: string;
  stale?: string[]; saved_at?: string }>;
/** Deletes the saved weights of this bundle's structure (or of `key`). */
export function forgetWeights(bundle: Bundle, options?: WeightsSlot & { key?: string }): Promise<void>;
/** `bundle` with other initial values for the named persistent values (row-major, numel of the shape), for
 * createRuntime() and createWorkerRuntime(); BundleError for an unknown name or a wrong size. */
export function withWeights(bundle: Bundle, weights: Iterable<readonly [string, ArrayLike<number>]>): Bundle;
/** The parameters of `rt` as a checkpoint (safetensors bytes) that `shadergrad predict --load` reads. */
export function checkpointBytes(rt: WeightsSource, options?: { extra?: Record<string, string> }): Promise<Uint8Array>;
/** The parameters in a checkpoint after checking it belongs to this bundle's model, for withWeights(). */
export function checkpointWeights(bundle: Bundle, bytes: ArrayBuffer | Uint8Array, file?: string):
  Promise<Map<string, Float32Array>>;

export function selectBackend(bundle: Bundle, options?: RuntimeOptions):
  Promise<{ backend: BackendName; device: unknown; attempts: BackendAttempt[]; webgpuPlan: ChosenWebGPUPlan | null }>;

export function compare(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: Tolerance): Comparison;
export function runChecks(runtime: Runtime, options?: { outputs?: Tolerance; persistent?: Tolerance }):
  Promise<CheckReport>;

export class ShadergradError extends Error { details: Record<string, unknown>; }
/** Another format version, a missing file, truncated weights, a bundle.json field of the wrong type (details.file,
 * .kernel, .program, .tensor; .field: the path of the bundle.json field, e.g. `programs.infer.kernels[1].shape`). */
export class BundleError extends ShadergradError {}
/** The bundle needs a limit, feature or shader language this backend/device lacks. */
export class UnsupportedError extends ShadergradError {}
/** No backend can run here; details.attempts has the reasons. */
export class BackendUnavailableError extends ShadergradError {}
/** A kernel failed to compile/link; the message marks the blamed lines (details.kernel, .file, .log, .lines;
 * WGSL: .line, the first failing line). */
export class ShaderCompileError extends ShadergradError {}
/** The WebGL2 context or WebGPU device was lost; create a new runtime. */
export class ContextLostError extends ShadergradError {}
export class FeedError extends ShadergradError {}
export class DeviceError extends ShadergradError {}
export const ERROR_CLASSES: Record<string, typeof ShadergradError>;
export function errorFromJSON(e: { name?: string; message?: string; details?: Record<string, unknown> }):
  ShadergradError;
export function errorToJSON(e: unknown): { name: string; message: string; details: Record<string, unknown> };
