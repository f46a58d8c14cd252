// shadergrad web runtime — running a bundle's programs on a WebGPUDevice: the `webgpu` plan of each program
// (bundle.json programs.NAME.webgpu or webgpu_cpu, the plan chosen for the adapter, docs/BUNDLE.md; the compute contract of codegen/include/sg/compute_kernel.h)
// made real. Persistent values own a front and a back storage buffer shared by every program, swapped after each
// run; pooled temporaries, inputs and constants have their own. A program's buffers and pipelines are made once,
// when it first runs or is prepared (kernels with the same WGSL share one pipeline); bind groups
// once per parity (which of front/back each persistent value is in); one command encoder per step, every kernel
// dispatched in order in one compute pass (one pass per kernel with timestamp writes when profiling), only the
// program outputs copied to MAP_READ staging buffers and read back.
import { BundleError, UnsupportedError } from './errors.js';
import { unpack } from './layout.js';
import { numel } from './bundle.js';
import { checkedFeeds, checkWriteValues } from './feeds.js';
import { now } from './setup_stats.js';
import { ProgramExecutor } from './executor.js';

/** Persistent values (bundle.json `persistent`): a front and a back storage buffer each. */
class PersistentStore {
  constructor(device, bundle) {
    this.entries = new Map();
    for (const p of bundle.persistent) {
      const bytes = p.buffer_bytes ?? 4 * numel(p.shape);
      const front = device.createBuffer(p.name, bytes);
      const back = device.createBuffer(`${p.name} (back)`, bytes);
      device.upload(front, bundle.data(p.data));
      this.entries.set(p.name, { desc: p, bufs: [front, back], front: 0 });
    }
  }
  get(name) {
    const e = this.entries.get(name);
    if (!e) throw new BundleError(`no persistent value '${name}' in the bundle (it has ` +
                                  `${[...this.entries.keys()].join(', ')})`, { tensor: name });
    return e;
  }
  swap(name) { const e = this.get(name); e.front = 1 - e.front; }
}

/** Compiled kernels shared by every program of a runtime, keyed by WGSL text, entry point and binding access: two
 * kernels with the same source get one shader module and pipeline. A failed compile is not kept (a later kernel
 * with the same text compiles again and reports its own name). */
class PipelineCache {
  constructor(device) {
    this.device = device;
    this.entries = new Map();
    this.hits = 0;
    this.misses = 0;
  }

  /** The pipeline of kernel `k` (a webgpu plan's kernel description) with source `source`. */
  get(k, source) {
    const access = k.bindings.map((b) => b.access);
    const entry = k.entry_point || 'main';
    const key = `${entry}\u0000${access.join(',')}\u0000${source}`;
    let p = this.entries.get(key);
    if (p) { ++this.hits; return p; }
    ++this.misses;
    const nodes = (k.nodes || []).map((n) => `  n${n.node} ${n.op} ${n.shape} ${n.source}`).join('\n');
    p = this.device.kernelPipeline(k.name, k.wgsl, source, entry, access, nodes);
    p.catch(() => this.entries.delete(key));
    this.entries.set(key, p);
    return p;
  }
}

/** One program's webgpu plan: its buffers and pipelines are made by prepare(), once, when it first runs (or when
 * createRuntime / Runtime.prepare asks for it). */
class ProgramRun {
  constructor(device, bundle, name, store, plan, cache) {
    this.device = device;
    this.bundle = bundle;
    this.name = name;
    const p = bundle.program(name);
    if (!p[plan.program_key])
      throw new UnsupportedError(`program '${name}' has no webgpu plan '${plan.program_key}' (the bundle was exported ` +
                                 `with --targets ${(bundle.targets || ['webgl2']).join(',')}): export it with --targets ` +
                                 'webgpu,webgl2 or run it on WebGL2', { program: name });
    this.io = p;
    this.desc = p[plan.program_key];
    this.plan = plan;
    this.store = store;
    this.cache = cache;
    const d = this.desc;
    // the persistent values this program binds: their front/back parity selects the bind groups
    this.persistentNames = [...new Set(d.values.filter((v) => v.kind === 'persistent' || v.update_of !== undefined)
      .map((v) => v.tensor ?? v.update_of))];
    this.kernels = null;
    this.groups = new Map();
    this.timings = [];
    this._prepared = null;
  }

  /** Allocates the program's buffers, uploads its constants, fetches its WGSL files and creates every kernel's
   * pipeline (all at once; one at a time with `serial`, so each kernel's time in stats.kernels is its own). Once:
   * later calls return the same promise (a failure is kept: every run of the program reports it). */
  prepare(stats, serial = false) {
    this._prepared ??= this._build(stats, serial);
    return this._prepared;
  }

  async _build(stats, serial) {
    const d = this.desc, dev = this.device, name = this.name;
    const where = { program: name };
    await dev.scopedSync(`while creating the buffers of program '${name}'`, where, () => {
      this.pool = d.buffers.map((b, i) => dev.createBuffer(`${name} buffer ${i}`, b.bytes));
      this.own = new Map();  // inputs and constants
      for (const v of d.values)
        if (v.kind === 'input' || v.kind === 'constant') {
          const buf = dev.createBuffer(`${name} ${v.name}`, v.bytes);
          if (v.kind === 'constant') dev.upload(buf, this.bundle.data(v.data));
          this.own.set(v.id, buf);
        }
      this.staging = new Map(d.outputs.map((o) => [o.value, dev.createStaging(`${name} ${o.name} readback`,
                                                                             d.values[o.value].bytes)]));
    });
    const t0 = now();
    await this.bundle.loadShaders([name], [`webgpu ${this.plan.name}`]);
    const t1 = now();
    const one = async (k) => {
      const t0 = now();
      const { pipeline, layout } = await this.cache.get(k, this.bundle.source(k.wgsl));
      stats?.kernels.push({ program: name, kernel: k.name, file: k.wgsl, ms: now() - t0 });
      return { desc: k, pipeline, layout };
    };
    const kernels = [];
    if (serial) for (const k of d.kernels) kernels.push(await one(k));
    else kernels.push(...await Promise.all(d.kernels.map(one)));
    if (stats) {
      stats.shader_cache = { hits: this.cache.hits, misses: this.cache.misses };
      stats.prepared[name] = { fetch_ms: t1 - t0, compile_ms: now() - t1, kernels: d.kernels.length };
    }
    this.kernels = kernels;
  }

  /** The storage buffer holding value `id` now (persistent values: the current front; their updates: the back). */
  buffer(id) {
    const v = this.desc.values[id];
    switch (v.kind) {
      case 'input':
      case 'constant': return this.own.get(id);
      case 'persistent': { const e = this.store.get(v.tensor); return e.bufs[e.front]; }
      case 'temp':
        if (v.update_of !== undefined) { const e = this.store.get(v.update_of); return e.bufs[1 - e.front]; }
        if (v.buffer !== undefined) return this.pool[v.buffer];
    }
    throw new BundleError(`program '${this.name}' (webgpu): value '${v.name}' (${v.kind}) has no storage (no ` +
                          'buffer, no update_of)', { program: this.name, value: v.name });
  }

  /** The bind groups of every kernel for the persistent values' current parity (built once per parity). */
  bindGroups() {
    const key = this.persistentNames.map((n) => this.store.get(n).front).join('');
    let g = this.groups.get(key);
    if (!g) {
      g = this.kernels.map((k) => this.device.createBindGroup({
        label: `${k.desc.name} parity ${key}`, layout: k.layout,
        entries: k.desc.bindings.map((b, i) => ({ binding: i, resource: { buffer: this.buffer(b.value) } })),
      }));
      this.groups.set(key, g);
    }
    return g;
  }

  /** Checks and converts the feeds; writes them into the inputs' buffers. */
  upload(feeds) {
    const d = this.desc;
    for (const { input: i, data } of checkedFeeds(this.name, this.io.inputs, feeds, 'buffers', d.inputs)) {
      const wi = d.inputs.find((x) => x.name === i.name);
      if (wi) this.device.upload(this.own.get(wi.value), data);  // an input no kernel reads has no buffer
    }
  }

  /** Records the step: every dispatch in order, then the outputs' copies into their staging buffers. */
  encode(profile, ts) {
    const dev = this.device.device;
    const enc = dev.createCommandEncoder({ label: `${this.name} step` });
    const groups = this.bindGroups();
    const dispatch = (pass, i) => {
      const k = this.kernels[i];
      pass.setPipeline(k.pipeline);
      pass.setBindGroup(0, groups[i]);
      const [x, y, z] = k.desc.workgroups;
      pass.dispatchWorkgroups(x, y, z);
    };
    if (ts) {
      this.kernels.forEach((k, i) => {
        const pass = enc.beginComputePass({ label: k.desc.name, timestampWrites: {
          querySet: ts.set, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } });
        dispatch(pass, i);
        pass.end();
      });
      enc.resolveQuerySet(ts.set, 0, 2 * this.kernels.length, ts.resolve, 0);
      enc.copyBufferToBuffer(ts.resolve, 0, ts.read, 0, 16 * this.kernels.length);
    } else {
      const pass = enc.beginComputePass({ label: `${this.name} kernels` });
      for (let i = 0; i < this.kernels.length; ++i) dispatch(pass, i);
      pass.end();
    }
    for (const o of this.desc.outputs) {
      const s = this.staging.get(o.value);
      enc.copyBufferToBuffer(this.buffer(o.value), 0, s, 0, s.size);
    }
    return enc.finish();
  }

  /** Host-timed run (profile without timestamp-query): one submit per kernel, each waited for. */
  async runTimedOnHost() {
    const dev = this.device.device, groups = this.bindGroups();
    this.timings = [];
    for (let i = 0; i < this.kernels.length; ++i) {
      const k = this.kernels[i];
      const enc = dev.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(k.pipeline);
      pass.setBindGroup(0, groups[i]);
      pass.dispatchWorkgroups(...k.desc.workgroups);
      pass.end();
      const t0 = now();
      this.device.queue.submit([enc.finish()]);
      await this.device.queue.onSubmittedWorkDone();
      this.timings.push({ kernel: k.desc.name, ms: now() - t0, gpu_timer: false });
    }
    const enc = dev.createCommandEncoder();
    for (const o of this.desc.outputs) {
      const s = this.staging.get(o.value);
      enc.copyBufferToBuffer(this.buffer(o.value), 0, s, 0, s.size);
    }
    return enc.finish();
  }

  async run(feeds, profile, ts) {
    const dev = this.device;
    dev.checkLost(`before running program '${this.name}'`);
    dev.checkErrors(`before running program '${this.name}'`, { program: this.name });
    this.upload(feeds);
    const out = await dev.scoped(`while running program '${this.name}'`, { program: this.name }, async () => {
      const cmd = profile && !ts ? await this.runTimedOnHost() : this.encode(profile, ts);
      dev.queue.submit([cmd]);
      const res = {};
      for (const o of this.desc.outputs) {
        const v = this.desc.values[o.value];
        const f = await dev.readStaging(this.staging.get(o.value), 4 * numel(v.shape));
        res[o.name] = o.dtype === 'i32' ? Int32Array.from(f) : f;
      }
      if (ts) {
        const t = await dev.readStaging(ts.read, 16 * this.kernels.length, BigInt64Array);
        this.timings = this.kernels.map((k, i) => ({ kernel: k.desc.name, ms: Number(t[2 * i + 1] - t[2 * i]) / 1e6,
                                                     gpu_timer: true }));
      }
      return res;
    });
    dev.checkErrors(`while running program '${this.name}'`, { program: this.name });
    for (const u of this.desc.updates) this.store.swap(u.target);
    return out;
  }
  // Debug mode (debug.js DebugSession): the step as run() does it, one kernel per submit, each kernel's outputs read
  // back right after it ran; the updates are committed only by debugFinish().

  /** Debug mode: checks the device and writes the feeds; the kernels then run one by one (debugKernel). */
  debugBegin(feeds) {
    const dev = this.device;
    dev.checkLost(`before debugging program '${this.name}'`);
    dev.checkErrors(`before debugging program '${this.name}'`, { program: this.name });
    this.upload(feeds);
    this.debugGroups = this.bindGroups();
  }

  /** The values kernel `i` writes (its read_write bindings, once each). */
  outputsOf(i) {
    const ids = [];
    for (const b of this.kernels[i].desc.bindings) if (b.access !== 'read' && !ids.includes(b.value)) ids.push(b.value);
    return ids;
  }

  /** Debug mode: dispatches kernel `i` alone and reads back every value it wrote: [{value, data}] (row-major). */
  async debugKernel(i) {
    const dev = this.device, k = this.kernels[i];
    const where = { program: this.name, kernel: k.desc.name };
    dev.checkLost(`before kernel '${k.desc.name}' of program '${this.name}'`);
    const out = await dev.scoped(`while running kernel '${k.desc.name}' of program '${this.name}'`, where, async () => {
      const enc = dev.device.createCommandEncoder({ label: `${this.name} ${k.desc.name} (debug)` });
      const pass = enc.beginComputePass({ label: k.desc.name });
      pass.setPipeline(k.pipeline);
      pass.setBindGroup(0, this.debugGroups[i]);
      pass.dispatchWorkgroups(...k.desc.workgroups);
      pass.end();
      dev.queue.submit([enc.finish()]);
      const res = [];
      for (const id of this.outputsOf(i)) res.push({ value: id, data: await this.readValue(id) });
      return res;
    });
    dev.checkErrors(`while running kernel '${k.desc.name}' of program '${this.name}'`, where);
    return out;
  }

  /** The current contents of value `id` of this plan, row-major (a transposed value transposed back). */
  async readValue(id) {
    const v = this.desc.values[id], n = numel(v.shape);
    const f = await this.device.read(this.buffer(id), 4 * n);
    return unpack([f.length === n ? f : f.slice(0, n)], { numel: n }, v.shape, { transposed: !!v.transposed });
  }

  /** Debug mode, after the last kernel: the program outputs (as run() returns them), then the updates committed. */
  async debugFinish() {
    const res = {};
    for (const o of this.desc.outputs) {
      const f = await this.readValue(o.value);
      res[o.name] = o.dtype === 'i32' ? Int32Array.from(f) : f;
    }
    this.device.checkErrors(`while finishing program '${this.name}'`, { program: this.name });
    for (const u of this.desc.updates) this.store.swap(u.target);
    return res;
  }
}

/** Runs a bundle's programs on a WebGPU device (the `webgpu` backend of a Runtime). */
export class WebGPUExecutor extends ProgramExecutor {
  /** Allocates the persistent values' buffers and uploads the weights; each program's buffers and pipelines are
   * made by prepare() (link() for the programs compiled at creation, run() for the others). `plan`: the webgpu
   * plan to run ({name, program_key}: bundle.json webgpu.plans[]). */
  constructor(bundle, device, options = {}, plan = { name: 'gpu', program_key: 'webgpu' }) {
    super(bundle, device, options, 'pipelines');
    this.store = new PersistentStore(device, bundle);
    this.cache = new PipelineCache(device);
    this.programs = new Map(bundle.programNames.map((n) => [n, new ProgramRun(device, bundle, n, this.store, plan,
                                                                              this.cache)]));
    const most = Math.max(1, ...[...this.programs.values()].map((p) => p.desc.kernels.length));
    this.ts = this.profile && device.timestamps ? device.createTimestamps(2 * most) : null;
  }

  /** After prepare(): an uncaptured WebGPU error of the pipelines' creation becomes a DeviceError. */
  checkPrepared(names) {
    this.device.checkErrors(`while creating the pipelines of ${names.map((n) => `'${n}'`).join(', ')}`, {});
  }

  /**
   * One step of `program` (prepared first if it was not): feeds written, every kernel dispatched in one command
   * buffer, the outputs read back, then the updates committed (front and back swapped).
   * @returns {Promise<Record<string, Float32Array|Int32Array>>}
   */
  async run(program, feeds) {
    const p = this._program(program);
    await this.prepare([program]);
    const out = await p.run(feeds, this.profile, this.ts);
    this.last = p;
    return out;
  }

  /** The current value of a persistent value (row-major). */
  async read(name) {
    const e = this.store.get(name);
    this.device.checkLost(`before reading '${name}'`);
    return this.device.read(e.bufs[e.front], 4 * numel(e.desc.shape));
  }

  /** Replaces persistent value `name` (row-major values, numel of its shape) in its current (front) buffer. */
  async write(name, values) {
    const e = this.store.get(name);
    checkWriteValues(name, e.desc.shape, values);
    this.device.checkLost(`before writing '${name}'`);
    this.device.upload(e.bufs[e.front], values);
    this.device.checkErrors(`while writing '${name}'`, { tensor: name });
  }

  /** Per-kernel times of the last run (profile on): timestamp queries where the adapter has them, else host time
   * around one submit per kernel. */
  async timings() {
    return this.last ? this.last.timings.map((t) => ({ ...t })) : [];
  }

  dispose() {}
}
