// shadergrad web runtime — the WebGPU device: adapter and device with the limits a bundle requires, storage
// buffers, WGSL shader modules with readable compile errors (getCompilationInfo: the kernel file and the failing
// line marked), compute pipelines, readback through MAP_READ staging buffers, timestamp queries where the adapter
// has 'timestamp-query', and lost-device and uncaptured-error detection. Knows nothing about bundles;
// webgpu_executor.js runs a bundle's programs on it.
//
// Works wherever a GPU object exists: `navigator.gpu` in a page or a Worker (Chromium: a secure context; headless
// needs --enable-unsafe-webgpu), or one given as `options.gpu` (Node: npm `webgpu`'s create([...])).
import { ContextLostError, DeviceError, ShaderCompileError } from './errors.js';
import { numberLines } from './webgl2.js';

/** The WebGPU limits a bundle's `webgpu.requires.limits` may name (GPUSupportedLimits fields), with the export
 * flag that lowers each. */
export const REQUIRED_LIMITS = {
  maxStorageBuffersPerShaderStage: 'storage buffers per kernel (export for --targets webgpu with --webgpu-preset ' +
                                   'webgpu-compat)',
  maxComputeInvocationsPerWorkgroup: 'invocations per workgroup',
  maxComputeWorkgroupSizeX: 'workgroup size x',
  maxComputeWorkgroupSizeY: 'workgroup size y',
  maxComputeWorkgroupSizeZ: 'workgroup size z',
  maxComputeWorkgroupStorageSize: 'workgroup memory per workgroup, bytes',
  maxComputeWorkgroupsPerDimension: 'workgroups per dispatch dimension',
  maxStorageBufferBindingSize: 'bytes per storage buffer binding',
  maxBufferSize: 'bytes per buffer',
};

const fail = (reason) => ({ reason });

/** Lanes per subgroup that the cpu-subgroups plan's kernels assume (bundle.json plans[].requires.subgroup_size). */
const SUBGROUP_LANES = 4;

/** Why `adapter` cannot run a plan whose kernels need subgroups of `lanes` invocations, or null. */
function subgroupsUnusable(adapter, lanes = SUBGROUP_LANES) {
  if (!adapter.features?.has?.('subgroups')) return "the adapter has no 'subgroups' feature";
  const info = adapter.info ?? {};
  if (info.subgroupMinSize !== lanes || info.subgroupMaxSize !== lanes)
    return `its subgroups have ${info.subgroupMinSize ?? '?'} to ${info.subgroupMaxSize ?? '?'} invocations, the ` +
           `plan's kernels need exactly ${lanes}`;
  return null;
}

/** Why `adapter`'s limits fall short of plan `p`'s `requires.limits` (the cpu plans ask for the 10 storage buffers
 * per kernel of Chromium's SwiftShader adapter), or null; null too for a limit the adapter does not list
 * (requestDevice then names it). */
function limitsShort(adapter, p) {
  const has = adapter.limits ?? {};
  const short = Object.entries(p.requires?.limits ?? {}).filter(([l, need]) => has[l] !== undefined && need > has[l]);
  if (!short.length) return null;
  return `it needs ${short.map(([l, need]) => `${l} ${need} (${REQUIRED_LIMITS[l] ?? 'a limit'}): the adapter has ` +
                                             `${has[l]}`).join('; ')}`;
}

/**
 * Whether `adapter` is a CPU implementation of WebGPU by the bundle's rule (bundle.json `webgpu.cpu_adapter`,
 * written by shadergrad from its one list, sg::cpu_renderer_names): a fallback adapter when `fallback_adapter`, or
 * adapter info (vendor, architecture, device, description) naming one of `names` as a whole word, ignoring case.
 * @returns {{cpu: boolean, why: string}}
 */
function classifyAdapter(adapter, rule) {
  const info = adapter.info ?? {};
  const text = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ');
  const fallback = rule.fallback_adapter && !!(adapter.isFallbackAdapter ?? info.isFallbackAdapter);
  const escape = (n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const named = rule.names?.length ? text.match(new RegExp(`\\b(${rule.names.map(escape).join('|')})\\b`, 'i'))?.[0]
                                   : undefined;
  const cpu = fallback || !!named;
  const about = `the adapter${text ? ` (${text})` : ''}`;
  return {
    cpu,
    why: cpu ? `${about} is a CPU implementation of WebGPU (${[fallback ? 'a fallback adapter' : '',
                                                                named ? `its info names ${named}` : ''].filter(Boolean).join(', ')})`
             : `${about} is a GPU (not a fallback adapter; its info names no CPU implementation)`,
  };
}

/**
 * Which webgpu plan of the bundle runs on `adapter`, by the bundle's data: `cpuAdapter` (bundle.json
 * `webgpu.cpu_adapter`) says whether the adapter is a CPU implementation of WebGPU; the plans made for that kind
 * (`target.cpu_device`) are tried by their `preference` (0 first): the first one whose limits, features and
 * subgroups the adapter has runs, and the next such one is its `fallback` (the runtime takes it when a device probe
 * disagrees: the cpu-subgroups plan's lanes). A plan the adapter cannot run is passed over, saying why; with none of
 * the adapter's kind usable, the first usable plan of the bundle. A bundle without `cpu_adapter` (exported before
 * the choice was written into bundle.json) gets its first usable plan. `want` ('gpu' | 'cpu' | 'cpu-subgroups')
 * forces one. Never throws.
 * @param {{isFallbackAdapter?: boolean, info?: object, features?: Set<string>, limits?: object}} adapter
 * @param {{name: string, target?: {cpu_device?: boolean}, preference?: number, requires?: object}[]} plans the
 *   bundle's webgpu plans
 * @param {'auto'|'gpu'|'cpu'|'cpu-subgroups'} [want]
 * @param {{fallback_adapter?: boolean, names?: string[]}} [cpuAdapter] bundle.json `webgpu.cpu_adapter`
 * @returns {{plan: object, reason: string, fallback?: object} | {reason: string}} the plan and why, in words; or
 *   why none can run
 */
export function chooseWebGPUPlan(adapter, plans, want = 'auto', cpuAdapter = undefined) {
  if (!plans.length) return fail('the bundle has no webgpu plan (export it with --targets webgpu)');
  const names = plans.map((p) => p.name);
  const has = (n) => plans.find((p) => p.name === n);
  const unusable = (p) => limitsShort(adapter, p) ??
                          (p.requires?.subgroup_size ? subgroupsUnusable(adapter, p.requires.subgroup_size) : null);
  if (want !== 'auto') {
    if (!['gpu', 'cpu', 'cpu-subgroups'].includes(want))
      return fail(`unknown webgpu plan '${want}' (choose auto, gpu, cpu, cpu-subgroups)`);
    if (!has(want))
      return fail(`the bundle has no webgpu ${want} plan (it has ${names.join(', ')}; export it with --webgpu-plans ` +
                  'gpu,cpu,cpu-subgroups)');
    const no = unusable(has(want));
    if (no) return fail(`the ${want} plan, forced (webgpuPlan: '${want}'), cannot run here: ${no}`);
    return { plan: has(want), reason: `the ${want} plan, forced (webgpuPlan: '${want}')` };
  }
  const other = plans.find((p) => !unusable(p));
  const none = () => fail(plans.length > 1
    ? `none of the bundle's plans (${names.join(', ')}) can run here: ` +
      plans.map((p) => `${p.name}: ${unusable(p)}`).join('; ')
    : `the bundle's only plan (${names.join(', ')}) cannot run here: ${unusable(plans[0])}`);
  if (!cpuAdapter) {
    if (!other) return none();
    return { plan: other, reason: `the ${other.name} plan, the first usable one of the bundle: its bundle.json has ` +
                                  'no webgpu.cpu_adapter rule to choose by the adapter (re-export it with this shadergrad)' };
  }
  const { cpu, why } = classifyAdapter(adapter, cpuAdapter);
  const kind = cpu ? 'cpu' : 'gpu';
  const mine = plans.filter((p) => !!p.target?.cpu_device === cpu)
    .sort((a, b) => (a.preference ?? 0) - (b.preference ?? 0));
  const passed = mine.filter((p) => unusable(p)).map((p) => `not ${p.name}: ${unusable(p)}`);
  const usable = mine.filter((p) => !unusable(p));
  if (usable.length) {
    const p = usable[0];
    const passedBefore = passed.slice(0, mine.indexOf(p));
    const lanes = p.requires?.subgroup_size ? `, with subgroups of ${p.requires.subgroup_size} invocations` : '';
    return { plan: p, reason: `the ${p.name} plan: ${why}${lanes}${passedBefore.length ? ` (${passedBefore.join('; ')})` : ''}`,
             ...(usable[1] ? { fallback: usable[1] } : {}) };
  }
  if (!other) return none();
  const whyOther = passed.length ? passed.join('; ')
                                 : `the bundle has no ${kind} plan (export it with --webgpu-plans gpu,cpu,cpu-subgroups)`;
  return { plan: other, reason: `the ${other.name} plan, the only ${plans.length > 1 ? 'usable ' : ''}one of the ` +
                                `bundle: ${why}, but ${whyOther}` };
}

/**
 * Why the device's subgroups are not `lanes` consecutive invocations (local_invocation_index 4q..4q+3, lane = index
 * mod 4, lane 0's value broadcast to all four), as the cpu-subgroups kernels assume, or null when they are: one
 * dispatch of a probe kernel, read back. WGSL leaves the lanes' order to the implementation.
 * @param {GPUDevice} device a device with the 'subgroups' feature
 * @returns {Promise<string|null>}
 */
export async function subgroupLanesReason(device, lanes = SUBGROUP_LANES) {
  const n = 128;
  const code = `enable subgroups;
@group(0) @binding(0) var<storage, read_write> lane_ok: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) i: u32, @builtin(workgroup_id) wg: vec3<u32>,
        @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) size: u32) {
  let first = subgroupBroadcast(i, 0u);
  lane_ok[wg.x * 64u + i] = select(0u, 1u, size == ${lanes}u && lane == i % ${lanes}u && first == i - i % ${lanes}u);
}`;
  device.pushErrorScope('validation');
  const out = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const read = device.createBuffer({ size: 4 * n, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  try {
    const pipeline = await device.createComputePipelineAsync({ layout: 'auto',
                                                                compute: { module: device.createShaderModule({ code }),
                                                                           entryPoint: 'main' } });
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, device.createBindGroup({ layout: pipeline.getBindGroupLayout(0),
                                                  entries: [{ binding: 0, resource: { buffer: out } }] }));
    pass.dispatchWorkgroups(n / 64);
    pass.end();
    enc.copyBufferToBuffer(out, 0, read, 0, 4 * n);
    device.queue.submit([enc.finish()]);
    const error = await device.popErrorScope();
    if (error) return `the subgroup probe kernel failed: ${error.message}`;
    await read.mapAsync(GPUMapMode.READ);
    const ok = new Uint32Array(read.getMappedRange()).every((v) => v === 1);
    read.unmap();
    return ok ? null : `its subgroups are not ${lanes} consecutive invocations (a probe kernel's lanes disagree)`;
  } catch (e) {
    return `the subgroup probe kernel failed: ${e.message}`;
  } finally {
    out.destroy();
    read.destroy();
  }
}

/**
 * Tries to make a WebGPU device that can run one of a bundle's webgpu plans (chooseWebGPUPlan picks it by the
 * adapter, or `options.webgpuPlan` forces it) with that plan's `requires` ({limits: {NAME: N}}). Never throws: a
 * failure is a reason in words (the backend-selection chain reports it).
 * @param {{name: string, program_key: string, requires: {limits?: Record<string, number>}}[]} plans
 * @param {{gpu?: GPU, profile?: boolean, featureLevel?: string, powerPreference?: string,
 *          webgpuPlan?: 'auto'|'gpu'|'cpu'|'cpu-subgroups'}} [options]
 * @param {{fallback_adapter?: boolean, names?: string[]}} [cpuAdapter] bundle.json `webgpu.cpu_adapter`
 * @returns {Promise<{device: WebGPUDevice, plan: object, planReason: string} | {reason: string}>}
 */
export async function probeWebGPU(plans, options = {}, cpuAdapter = undefined) {
  const gpu = options.gpu ?? globalThis.navigator?.gpu;
  if (!gpu)
    return fail('navigator.gpu is missing: this browser or context has no WebGPU (it needs a secure context; ' +
                'headless Chromium needs --enable-unsafe-webgpu)');
  let adapter = null;
  const tried = [];
  // core first; then compatibility mode (WebGPU on OpenGL ES, e.g. Dawn's GLES backend)
  for (const featureLevel of options.featureLevel ? [options.featureLevel] : ['core', 'compatibility']) {
    try {
      adapter = await gpu.requestAdapter({ featureLevel, powerPreference: options.powerPreference });
    } catch (e) {
      tried.push(`${featureLevel}: ${e.message}`);
    }
    if (adapter) break;
    tried.push(`${featureLevel}: no adapter`);
  }
  if (!adapter)
    return fail(`navigator.gpu exists but requestAdapter() gave no adapter (${tried.join('; ')}): no usable GPU ` +
                'or WebGPU is blocklisted here (see chrome://gpu)');
  const info = adapter.info ?? {};
  const name = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ') ||
               'unknown adapter';
  const chosen = chooseWebGPUPlan(adapter, plans, options.webgpuPlan ?? 'auto', cpuAdapter);
  if (!chosen.plan) return fail(`adapter ${name}: ${chosen.reason}`);
  // the limits of the plan and of its fallback (the device runs the fallback when the subgroup probe disagrees)
  const wanted = { ...(chosen.fallback?.requires?.limits ?? {}) };
  for (const [limit, need] of Object.entries(chosen.plan.requires?.limits ?? {}))
    wanted[limit] = Math.max(need, wanted[limit] ?? 0);
  const short = [];
  const requiredLimits = {};
  for (const [limit, need] of Object.entries(wanted)) {
    const has = adapter.limits[limit];
    if (has === undefined) { short.push(`${limit} (unknown to this browser; the bundle needs ${need})`); continue; }
    if (need > has) short.push(`${limit} ${need} (${REQUIRED_LIMITS[limit] ?? 'a limit'}): the adapter has ${has}`);
    else requiredLimits[limit] = need;
  }
  if (short.length)
    return fail(`the WebGPU adapter ${name} cannot run this bundle's ${chosen.plan.name} plan (${chosen.reason}): ` +
                `it needs ${short.join('; ')}`);
  const requiredFeatures = [...(chosen.plan.requires?.features ?? [])];
  const missing = requiredFeatures.filter((f) => !adapter.features.has(f));
  if (missing.length)
    return fail(`the WebGPU adapter ${name} cannot run this bundle's ${chosen.plan.name} plan (${chosen.reason}): ` +
                `it needs the feature${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`);
  const timestamps = !!options.profile && adapter.features.has('timestamp-query');
  if (timestamps) requiredFeatures.push('timestamp-query');
  let device;
  try {
    device = await adapter.requestDevice({ requiredLimits, requiredFeatures, label: 'shadergrad' });
  } catch (e) {
    return fail(`requestDevice on ${name} failed: ${e.message}`);
  }
  let { plan, reason } = chosen;
  if (plan.requires?.subgroup_size) {
    const no = await subgroupLanesReason(device, plan.requires.subgroup_size);
    if (no && !chosen.fallback) {
      device.destroy();
      return fail(`the WebGPU adapter ${name} cannot run this bundle's ${plan.name} plan (${reason}): ${no}`);
    }
    if (no) ({ plan, reason } = { plan: chosen.fallback, reason: `the ${chosen.fallback.name} plan: ${no}` });
  }
  return { device: new WebGPUDevice(gpu, adapter, device, name, timestamps), plan, planReason: reason };
}

/** Line, column and text of every message of a shader module's compilation info, errors first. */
function compileMessages(info) {
  return [...(info?.messages ?? [])].map((m) => ({ type: m.type, line: m.lineNum, column: m.linePos,
                                                   message: m.message }))
    .sort((a, b) => (a.type === 'error' ? 0 : 1) - (b.type === 'error' ? 0 : 1));
}

/** A WebGPU device ready for compute kernels. */
export class WebGPUDevice {
  constructor(gpu, adapter, device, name, timestamps) {
    this.gpu = gpu;
    this.adapter = adapter;
    this.device = device;
    this.queue = device.queue;
    this.renderer = name;
    this.timestamps = timestamps;
    this.limits = device.limits;
    this.lost = null;       // {reason, message} once device.lost resolved
    this.errors = [];       // uncaptured errors, oldest first
    this._buffers = new Set();
    /** objects created so far (liveObjects()) */
    this._created = { buffers: 0, bind_groups: 0, pipelines: 0, shader_modules: 0 };
    this._destroyed = false;
    device.lost.then((i) => {
      if (!this._destroyed) this.lost = { reason: i.reason, message: i.message };
    });
    const onError = (e) => { this.errors.push(e.error?.message ?? String(e.error ?? e)); };
    if (device.addEventListener) device.addEventListener('uncapturederror', onError);
    else device.onuncapturederror = onError;
  }

  get caps() {
    const l = this.limits;
    return { api: 'webgpu', renderer: this.renderer, timestamp_query: this.timestamps,
             max_storage_buffers_per_stage: l.maxStorageBuffersPerShaderStage,
             max_compute_invocations_per_workgroup: l.maxComputeInvocationsPerWorkgroup,
             max_compute_workgroup_storage_size: l.maxComputeWorkgroupStorageSize,
             max_storage_buffer_binding_size: l.maxStorageBufferBindingSize };
  }

  /** ContextLostError when the device was lost (driver reset, destroy(), too much memory). */
  checkLost(doing) {
    if (this.lost)
      throw new ContextLostError(`the WebGPU device (${this.renderer}) was lost ${doing}: ${this.lost.reason}: ` +
                                 `${(this.lost.message || 'no message').replace(/\.+$/, '')}. Every buffer is gone: create a new ` +
                                 'runtime (createRuntime) and load the weights again', { ...this.lost, doing });
  }

  /** DeviceError for an uncaptured error reported since the last check. */
  checkErrors(doing, details = {}) {
    if (!this.errors.length) return;
    const all = this.errors.splice(0);
    throw new DeviceError(`WebGPU reported ${all.length} error(s) ${doing}:\n  ${all.join('\n  ')}`,
                          { ...details, errors: all });
  }

  /** Runs `fn` inside validation and out-of-memory error scopes; a captured error becomes a DeviceError. */
  async scoped(doing, details, fn) {
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    let result, thrown = null;
    try { result = await fn(); } catch (e) { thrown = e; }
    const validation = await this.device.popErrorScope();
    const oom = await this.device.popErrorScope();
    return this.closeScopes(doing, details, validation, oom, thrown, result);
  }

  /** The end of a scoped call: a lost device first, then what `fn` threw, then a captured error as a DeviceError. */
  closeScopes(doing, details, validation, oom, thrown, result) {
    this.checkLost(doing);
    if (thrown) throw thrown;
    const err = validation || oom;
    if (err)
      throw new DeviceError(`WebGPU ${oom && !validation ? 'ran out of memory' : 'validation failed'} ${doing}: ` +
                            `${err.message}`, { ...details, error: err.message });
    return result;
  }

  /**
   * A storage buffer of `bytes` (rounded up to 16: every allocation holds whole vec4s, sg/compute_kernel.h).
   * @returns {GPUBuffer}
   */
  createBuffer(label, bytes, extraUsage = 0) {
    const U = globalThis.GPUBufferUsage;
    const b = this.device.createBuffer({ label, size: Math.max(16, Math.ceil(bytes / 16) * 16),
                                         usage: U.STORAGE | U.COPY_SRC | U.COPY_DST | extraUsage });
    this._buffers.add(b);
    ++this._created.buffers;
    return b;
  }

  /** A MAP_READ staging buffer for readbacks. */
  createStaging(label, bytes) {
    const U = globalThis.GPUBufferUsage;
    const b = this.device.createBuffer({ label, size: Math.max(16, Math.ceil(bytes / 16) * 16),
                                         usage: U.MAP_READ | U.COPY_DST });
    this._buffers.add(b);
    ++this._created.buffers;
    return b;
  }

  /** Writes f32 values at the start of a buffer (queue.writeBuffer; no mappedAtCreation, see PEERS.md). */
  upload(buffer, values) {
    const f = values instanceof Float32Array ? values : Float32Array.from(values);
    const n = Math.floor(f.byteLength / 4) * 4;  // writeBuffer needs a multiple of 4 bytes
    this.queue.writeBuffer(buffer, 0, f.buffer, f.byteOffset, n);
  }

  /**
   * Runs `fn` (synchronous GPU calls) inside validation and out-of-memory error scopes pushed and popped around it
   * alone, so concurrent async work (a program compiling while another runs) never shares a scope; resolves to its
   * result, or rejects with a DeviceError for a captured error.
   */
  async scopedSync(doing, details, fn) {
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    let result, thrown = null;
    try { result = fn(); } catch (e) { thrown = e; }
    const scopes = [this.device.popErrorScope(), this.device.popErrorScope()];
    const [validation, oom] = await Promise.all(scopes);
    return this.closeScopes(doing, details, validation, oom, thrown, result);
  }

  /**
   * Compiles a kernel's WGSL: ShaderCompileError naming the kernel and file, with the compiler's messages and the
   * failing lines marked `>>`.
   * @returns {Promise<GPUShaderModule>}
   */
  async compile(kernel, file, source, nodes = '') {
    const { module, checked } = this.createModule(kernel, file, source, nodes);
    await checked;
    return module;
  }

  /**
   * Starts compiling a kernel's WGSL (createShaderModule, its error scope popped at once) without waiting:
   * `checked` resolves once the compiler's messages are in, or rejects with compile()'s ShaderCompileError.
   * @returns {{module: GPUShaderModule, checked: Promise<void>}}
   */
  createModule(kernel, file, source, nodes = '') {
    this.checkLost(`before compiling kernel '${kernel}'`);
    this.device.pushErrorScope('validation');
    const module = this.device.createShaderModule({ label: `${kernel} (${file})`, code: source });
    const scope = this.device.popErrorScope();
    ++this._created.shader_modules;
    const checked = Promise.all([module.getCompilationInfo(), scope]).then(([info, scopeError]) => {
      const msgs = compileMessages(info);
      const errors = msgs.filter((m) => m.type === 'error');
      if (!errors.length && !scopeError) return;
      const lines = new Set(errors.map((m) => m.line).filter((l) => l > 0));
      const log = errors.length ? errors.map((m) => `${file}:${m.line}:${m.column}: error: ${m.message}`).join('\n')
                                : scopeError.message;
      const first = errors[0];
      throw new ShaderCompileError(
        `kernel '${kernel}' (${file}): the WGSL shader failed to compile on ${this.renderer}` +
        (first ? ` at line ${first.line}` : '') + `:\n${log}\n--- ${file} (>> marks the failing lines) ---\n` +
        numberLines(source, lines, 3) + (nodes ? `\n--- graph nodes this kernel computes ---\n${nodes}` : ''),
        { kernel, file, log, lines: [...lines], line: first?.line });
    });
    return { module, checked };
  }

  /**
   * The compute pipeline of a compiled kernel with an explicit layout: `access[b]` 'read' -> read-only-storage,
   * else storage.
   * @returns {Promise<{pipeline: GPUComputePipeline, layout: GPUBindGroupLayout}>}
   */
  async pipeline(kernel, file, module, entryPoint, access) {
    const S = globalThis.GPUShaderStage;
    const layout = this.device.createBindGroupLayout({
      label: kernel,
      entries: access.map((a, b) => ({ binding: b, visibility: S.COMPUTE,
                                        buffer: { type: a === 'read' ? 'read-only-storage' : 'storage' } })),
    });
    const desc = { label: kernel, layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout] }),
                   compute: { module, entryPoint } };
    try {
      const pipeline = this.device.createComputePipelineAsync
        ? await this.device.createComputePipelineAsync(desc) : this.device.createComputePipeline(desc);
      ++this._created.pipelines;
      return { pipeline, layout };
    } catch (e) {
      throw new ShaderCompileError(`kernel '${kernel}' (${file}): its compute pipeline could not be created on ` +
                                   `${this.renderer}: ${e.message} (entry point '${entryPoint}', ${access.length} ` +
                                   'storage buffer bindings)', { kernel, file, log: e.message });
    }
  }

  /**
   * Compiles a kernel and creates its pipeline at once (createComputePipelineAsync is asked for before the
   * compiler's messages arrive; a compile error is the one reported, as compile()'s ShaderCompileError).
   * @returns {Promise<{pipeline: GPUComputePipeline, layout: GPUBindGroupLayout}>}
   */
  async kernelPipeline(kernel, file, source, entryPoint, access, nodes = '') {
    const where = { kernel, file };
    const { checked, piped } = await this.scopedSync(`while creating the pipeline of kernel '${kernel}' (${file})`,
                                                     where, () => {
      const m = this.createModule(kernel, file, source, nodes);
      const p = this.pipeline(kernel, file, m.module, entryPoint, access);
      m.checked.catch(() => {});  // both are awaited below, the compile error first
      p.catch(() => {});
      return { checked: m.checked, piped: p };
    });
    await checked;
    return piped;
  }

  /** A bind group (GPUDevice.createBindGroup), counted in liveObjects(). */
  createBindGroup(desc) {
    ++this._created.bind_groups;
    return this.device.createBindGroup(desc);
  }

  /**
   * GPU objects of this device, for leak checks (tests/webgpu_soak.mjs): `buffers` storage and staging buffers
   * alive now (created by createBuffer/createStaging, not yet destroyed); `*_created` buffers, bind groups,
   * compute pipelines and shader modules created since the device was made (a steady state creates none).
   * @returns {{buffers: number, buffers_created: number, bind_groups_created: number, pipelines_created: number,
   *            shader_modules_created: number}}
   */
  liveObjects() {
    const c = this._created;
    return { buffers: this._buffers.size, buffers_created: c.buffers, bind_groups_created: c.bind_groups,
             pipelines_created: c.pipelines, shader_modules_created: c.shader_modules };
  }

  /** A query set of `count` timestamps and its resolve/readback buffers (timestamp-query only). */
  createTimestamps(count) {
    const U = globalThis.GPUBufferUsage;
    const set = this.device.createQuerySet({ type: 'timestamp', count });
    const resolve = this.device.createBuffer({ size: count * 8, usage: U.QUERY_RESOLVE | U.COPY_SRC });
    const read = this.device.createBuffer({ size: count * 8, usage: U.MAP_READ | U.COPY_DST });
    return { set, resolve, read, count };
  }

  /** Maps a staging buffer and copies its first `bytes` out (as Float32Array, or BigInt64Array for timestamps). */
  async readStaging(staging, bytes, type = Float32Array) {
    await staging.mapAsync(globalThis.GPUMapMode.READ);
    const out = new type(staging.getMappedRange(0, bytes).slice(0));
    staging.unmap();
    return out;
  }

  /** Reads `bytes` of a storage buffer back (a one-off staging buffer). */
  async read(buffer, bytes) {
    this.checkLost('before a readback');
    const staging = this.createStaging(`${buffer.label} readback`, bytes);
    const enc = this.device.createCommandEncoder({ label: `read ${buffer.label}` });
    enc.copyBufferToBuffer(buffer, 0, staging, 0, staging.size);
    this.queue.submit([enc.finish()]);
    try {
      return await this.readStaging(staging, Math.ceil(bytes / 4) * 4);
    } finally {
      this.destroyBuffer(staging);
    }
  }

  destroyBuffer(b) {
    if (this._buffers.delete(b)) b.destroy();
  }

  /** Destroys every buffer and the device (a later device.lost is ours, not an error). */
  dispose() {
    this._destroyed = true;
    for (const b of this._buffers) b.destroy();
    this._buffers.clear();
    this.device.destroy();
  }

  /** Destroys the device on purpose (as a GPU reset would), to test lost-device handling. */
  loseForTesting() {
    this.device.destroy();
  }
}
