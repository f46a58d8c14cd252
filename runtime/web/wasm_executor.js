// shadergrad web runtime — running a bundle's programs on the wasm backend: the `wasm` plan of each program
// (bundle.json programs.NAME.wasm, docs/BUNDLE.md "Running a program on WebAssembly"), the native cpu-simd backend's
// execution (runtime/src/cpu_simd_backend.cpp) in the module's linear memory. Every value is an f32 array there
// (16-byte aligned; `bytes` of the plan): persistent values a front and a back array shared by every program,
// swapped after each run; a program's pooled temporaries, inputs and constants its own, placed when the program is
// first run or prepared. A kernel is one call of its exported entry `entry(buf, 0, workgroups)` (buf: the byte
// offsets of its bindings' arrays, inputs then outputs, in a table of 32-bit pointers in the same memory), on the
// calling thread — or, where the device has a pool of Workers (wasm.js: a shared memory) and the kernel enough work
// (its `work` at least bundle.json `wasm.threads.parallel_work`, more than one workgroup), split over the pool and the
// calling thread in contiguous chunks of workgroups (wasm_pool.js), with the same results bit for bit; only the
// program outputs are copied out.
import { BundleError, ContextLostError } from './errors.js';
import { numel } from './bundle.js';
import { checkedFeeds, checkWriteValues } from './feeds.js';
import { unpack } from './layout.js';
import { now } from './setup_stats.js';
import { ProgramExecutor } from './executor.js';

/** Persistent values (bundle.json `persistent`): a front and a back array each in linear memory. */
class PersistentStore {
  constructor(device, bundle) {
    this.entries = new Map();
    for (const p of bundle.persistent) {
      const bytes = p.buffer_bytes ?? 4 * numel(p.shape);
      const front = device.alloc(bytes, `persistent value '${p.name}'`);
      const back = device.alloc(bytes, `persistent value '${p.name}' (back)`);
      device.f32(front, numel(p.shape)).set(bundle.data(p.data));
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

/** One program's wasm plan; its arrays and entries are set up by prepare(), once. */
class ProgramRun {
  constructor(device, bundle, name, store) {
    this.device = device;
    this.bundle = bundle;
    this.name = name;
    const p = bundle.program(name);
    if (!p.wasm)
      throw new BundleError(`program '${name}' has no wasm plan (the bundle was exported with --targets ` +
                            `${bundle.targets.join(',')}): export it with --targets webgpu,webgl2,wasm`, { program: name });
    this.io = p;
    this.desc = p.wasm;
    this.store = store;
    this.kernels = null;
    this.timings = [];
    this._prepared = null;
  }

  prepare(stats) {
    this._prepared ??= this._build(stats);
    return this._prepared;
  }

  async _build(stats) {
    const d = this.desc, dev = this.device, name = this.name;
    const t0 = now();
    this.pool = d.buffers.map((b, i) => dev.alloc(b.bytes, `buffer ${i} of program '${name}'`));
    this.own = new Map();  // inputs and constants
    for (const v of d.values)
      if (v.kind === 'input' || v.kind === 'constant') {
        const at = dev.alloc(v.bytes, `${v.kind} '${v.name}' of program '${name}'`);
        if (v.kind === 'constant') dev.f32(at, numel(v.shape)).set(this.bundle.data(v.data));
        this.own.set(v.id, at);
      }
    this.kernels = d.kernels.map((k) => {
      const where = { program: name, kernel: k.name };
      return { desc: k, fn: dev.entry(k.entry, where), id: dev.entryIndex(k.entry), split: dev.splits(k),
               table: dev.alloc(4 * k.bindings.length, `the bindings of ${k.name}`), workgroups: k.workgroups };
    });
    if (stats) stats.prepared[name] = { fetch_ms: 0, compile_ms: now() - t0, kernels: d.kernels.length };
  }

  /** The byte offset of the array holding value `id` now (persistent values: the current front; updates: the back). */
  offset(id) {
    const v = this.desc.values[id];
    switch (v.kind) {
      case 'input':
      case 'constant': return this.own.get(id);
      case 'persistent': { const e = this.store.get(v.tensor); return e.bufs[e.front]; }
      case 'temp':
        if (v.update_of !== undefined) { const e = this.store.get(v.update_of); return e.bufs[1 - e.front]; }
        if (v.buffer !== undefined) return this.pool[v.buffer];
    }
    throw new BundleError(`program '${this.name}' (wasm): value '${v.name}' (${v.kind}) has no storage (no buffer, ` +
                          'no update_of)', { program: this.name, value: v.name });
  }

  upload(feeds) {
    const d = this.desc;
    for (const { input: i, data } of checkedFeeds(this.name, this.io.inputs, feeds, 'arrays', d.inputs)) {
      const wi = d.inputs.find((x) => x.name === i.name);
      if (wi) this.device.f32(this.own.get(wi.value), data.length).set(data);  // an input no kernel reads has none
    }
  }

  /** Runs kernel `i`: its binding table written (the values' current arrays), then its entry over every workgroup
   * (on the calling thread, or split over the device's pool). */
  kernel(i) {
    const k = this.kernels[i];
    const table = this.device.u32(k.table, k.desc.bindings.length);
    k.desc.bindings.forEach((b, j) => { table[j] = this.offset(b.value); });
    try {
      this.device.call(k.fn, k.id, k.table, k.workgroups, k.split);
    } catch (e) {
      throw new ContextLostError(`wasm: kernel '${k.desc.name}' of program '${this.name}' trapped (${e.message}); the ` +
                                 'module\'s memory may be inconsistent: create the runtime again',
                                 { program: this.name, kernel: k.desc.name });
    }
  }

  checkLive(what) {
    if (this.device.lost) throw new ContextLostError(`wasm: ${what}: the runtime was disposed`, { program: this.name });
  }

  run(feeds, profile) {
    this.checkLive(`before running program '${this.name}'`);
    this.upload(feeds);
    this.timings = [];
    for (let i = 0; i < this.kernels.length; ++i) {
      const t0 = profile ? now() : 0;
      this.kernel(i);
      if (profile) this.timings.push({ kernel: this.kernels[i].desc.name, ms: now() - t0, gpu_timer: false });
    }
    const res = {};
    for (const o of this.desc.outputs) {
      const f = this.readValue(o.value);
      res[o.name] = o.dtype === 'i32' ? Int32Array.from(f) : f;
    }
    for (const u of this.desc.updates) this.store.swap(u.target);
    return res;
  }

  /** The current contents of value `id`, row-major (a copy). */
  readValue(id) {
    const v = this.desc.values[id], n = numel(v.shape);
    const f = this.device.f32(this.offset(id), n).slice();
    return v.transposed ? unpack([f], { numel: n }, v.shape, { transposed: true }) : f;
  }

  // Debug mode (debug.js DebugSession): one kernel per step, its outputs read back; updates only by debugFinish().
  debugBegin(feeds) {
    this.checkLive(`before debugging program '${this.name}'`);
    this.upload(feeds);
  }

  outputsOf(i) {
    const ids = [];
    for (const b of this.kernels[i].desc.bindings) if (b.access !== 'read' && !ids.includes(b.value)) ids.push(b.value);
    return ids;
  }

  debugKernel(i) {
    this.kernel(i);
    return this.outputsOf(i).map((id) => ({ value: id, data: this.readValue(id) }));
  }

  debugFinish() {
    const res = {};
    for (const o of this.desc.outputs) {
      const f = this.readValue(o.value);
      res[o.name] = o.dtype === 'i32' ? Int32Array.from(f) : f;
    }
    for (const u of this.desc.updates) this.store.swap(u.target);
    return res;
  }
}

/** Runs a bundle's programs on the wasm backend (one WasmDevice: the instantiated module). */
export class WasmExecutor extends ProgramExecutor {
  constructor(bundle, device, options = {}) {
    super(bundle, device, options, 'kernels');
    this.store = new PersistentStore(device, bundle);
    this.programs = new Map(bundle.programNames.map((n) => [n, new ProgramRun(device, bundle, n, this.store)]));
  }

  async run(program, feeds) {
    const p = this._program(program);
    await this.prepare([program]);
    const out = p.run(feeds, this.profile);
    this.last = p;
    return out;
  }

  async read(name) {
    const e = this.store.get(name);
    if (this.device.lost) throw new ContextLostError(`wasm: before reading '${name}': the runtime was disposed`, {});
    return this.device.f32(e.bufs[e.front], numel(e.desc.shape)).slice();
  }

  async write(name, values) {
    const e = this.store.get(name);
    checkWriteValues(name, e.desc.shape, values);
    this.device.f32(e.bufs[e.front], numel(e.desc.shape)).set(values);
  }

  async timings() {
    return this.last ? this.last.timings.map((t) => ({ ...t })) : [];
  }

  dispose() {}
}
