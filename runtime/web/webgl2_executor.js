// shadergrad web runtime — running a bundle's programs on a WebGL2Device: the memory plan of bundle.json made
// real (persistent values as front/back texture pairs shared by every program and swapped after each run, pooled
// buffers, inputs, constants), kernels drawn in launch order with their samplers and render targets, only the
// program outputs read back, per-kernel timings with EXT_disjoint_timer_query_webgl2 where it exists.
import { BundleError, DeviceError, UnsupportedError } from './errors.js';
import { checkedFeeds, checkWriteValues } from './feeds.js';
import { unpack } from './layout.js';
import { numel } from './bundle.js';
import { now } from './setup_stats.js';
import { ProgramExecutor } from './executor.js';


/** Persistent values (bundle.json `persistent`): two textures each, `front` holding the current value. */
class PersistentStore {
  constructor(device, bundle) {
    this.entries = new Map();
    for (const p of bundle.persistent) {
      const [w, h] = p.allocated;
      const front = device.createTexture(p.name, p.layout, w, h);
      const back = device.createTexture(`${p.name} (back)`, p.layout, w, h);
      device.upload(front, bundle.data(p.data));
      this.entries.set(p.name, { desc: p, front, back });
    }
  }
  get(name) {
    const e = this.entries.get(name);
    if (!e) throw new BundleError(`no persistent value '${name}' in the bundle (it has ` +
                                  `${[...this.entries.keys()].join(', ')})`, { tensor: name });
    return e;
  }
  swap(name) {
    const e = this.get(name);
    [e.front, e.back] = [e.back, e.front];
  }
}

/** Linked kernel programs shared by every program of a runtime, keyed by GLSL text and sampler order: two kernels
 * with the same source and samplers get one WebGL program. A failed compile is not kept. */
class ProgramCache {
  constructor(device) {
    this.device = device;
    this.entries = new Map();
    this.hits = 0;
    this.misses = 0;
  }

  /** The cache key of kernel `k` with GLSL `source`: the sampler order fixes the texture units set in it. */
  key(k, source) { return `${k.samplers.map((x) => x.name).join(',')}\u0000${source}`; }
}

/** One program of the bundle: its textures and kernel programs are made by prepare(), once, when it first runs (or
 * when createRuntime / Runtime.prepare asks for it). */
class ProgramRun {
  constructor(device, bundle, name, store, cache) {
    this.device = device;
    this.bundle = bundle;
    this.name = name;
    this.desc = bundle.program(name);
    this.store = store;
    this.cache = cache;
    for (const k of this.desc.kernels)
      if (typeof k.glsl_es !== 'string')
        throw new UnsupportedError(`kernel '${k.name}' of program '${name}' has no GLSL ES fragment shader (only ` +
                                   `${Object.keys(k).filter((f) => f === 'wgsl').join(', ') || 'no source'}): ` +
                                   'WebGL2 cannot run it; run this bundle on WebGPU or export it for webgl2',
                                   { program: name, kernel: k.name });
    this.buffers = [];
    this.own = new Map();  // inputs and constants
    this.kernels = null;
    this.queries = [];
    this._prepared = null;
  }

  /** Allocates the program's textures, uploads its constants, fetches its GLSL files, starts compiling and linking
   * every kernel (all before any status is read: drivers with KHR_parallel_shader_compile do them in parallel), then
   * checks each. Once: later calls return the same promise (a failure is kept: every run reports it). `serial`:
   * each kernel compiled and checked before the next starts, so each kernel's time in stats.kernels is its own. */
  prepare(stats, serial = false) {
    this._prepared ??= this._build(stats, serial);
    return this._prepared;
  }

  async _build(stats, serial) {
    const d = this.desc, device = this.device, name = this.name;
    this.buffers = d.buffers.map((b, i) => device.createTexture(`${name} buffer ${i}`, b.layout, b.allocated[0],
                                                                b.allocated[1]));
    for (const v of d.values) {
      if (v.kind === 'input' || v.kind === 'constant') {
        const t = device.createTexture(v.name, v.layout, v.allocated[0], v.allocated[1]);
        if (v.kind === 'constant') device.upload(t, this.bundle.data(v.data));
        this.own.set(v.id, t);
      }
    }
    const t0 = now();
    await this.bundle.loadShaders([name], ['webgl2']);
    const t1 = now();
    const c = this.cache, jobs = [];
    const start = (k) => {
      const key = c.key(k, this.bundle.source(k.glsl_es));
      let job = c.entries.get(key);
      if (job) { ++c.hits; return job; }
      ++c.misses;
      const h = device.beginProgram(k.name, k.glsl_es, this.bundle.source(k.glsl_es));
      job = device.waitProgram(h).then(() => this.finish(k, h, stats));
      job.catch(() => c.entries.delete(key));
      c.entries.set(key, job);
      return job;
    };
    if (serial) for (const k of d.kernels) jobs.push(await start(k));
    else jobs.push(...d.kernels.map(start));
    // every status read after every compile and link was started (reading one right after its compile serialises)
    const programs = await Promise.all(jobs);
    this.kernels = d.kernels.map((k, i) => ({ desc: k, ...programs[i] }));
    if (stats) {
      stats.shader_cache = { hits: c.hits, misses: c.misses };
      stats.prepared[name] = { fetch_ms: t1 - t0, compile_ms: now() - t1, kernels: d.kernels.length };
    }
    device.checkError(`preparing the kernels of program '${name}'`, { program: name });
  }

  /** Checks a linked kernel program against the bundle and fixes each sampler's texture unit. */
  finish(k, h, stats) {
    const gl = this.device.gl;
    const nodes = k.nodes.map((n) => `  n${n.node} ${n.op} ${n.shape} ${n.source}`).join('\n');
    const p = this.device.finishProgram(h, { nodes });
    stats?.kernels.push({ program: this.name, kernel: k.name, file: k.glsl_es, ms: now() - h.t0 });
    const where = { program: this.name, kernel: k.name, file: k.glsl_es };
    const units = [];
    gl.useProgram(p.program);
    for (const s of k.samplers) {
      const loc = p.samplers.get(s.name);
      if (loc === undefined) {
        if (p.declared.includes(s.name)) continue;  // declared, optimised out by the driver
        throw new BundleError(`kernel '${k.name}' (${k.glsl_es}): bundle.json binds sampler '${s.name}' but the ` +
                              `shader declares ${p.declared.join(', ') || 'no samplers'}`, where);
      }
      gl.uniform1i(loc, units.length);
      units.push(s);
    }
    for (const name of p.samplers.keys())
      if (!k.samplers.some((s) => s.name === name))
        throw new BundleError(`kernel '${k.name}' (${k.glsl_es}): the shader samples '${name}', which bundle.json ` +
                              'does not bind', where);
    if (p.outputs !== k.render_targets.length)
      throw new BundleError(`kernel '${k.name}' (${k.glsl_es}): the shader writes ${p.outputs} render targets but ` +
                            `bundle.json lists ${k.render_targets.length}`, where);
    if (units.length > this.device.limits.max_texture_image_units || k.render_targets.length >
        this.device.limits.max_draw_buffers)
      throw new UnsupportedError(`kernel '${k.name}' needs ${units.length} texture units and ` +
                                 `${k.render_targets.length} render targets; ${this.device.renderer} has ` +
                                 `${this.device.limits.max_texture_image_units} and ` +
                                 `${this.device.limits.max_draw_buffers}`, where);
    return { program: p, units };
  }

  /** The texture holding plane `plane` of value `id` now (persistent values: the current front or back). */
  texture(id, plane = 0) {
    const v = this.desc.values[id];
    if (plane > 0) return this.buffers[v.plane_buffers[plane]];
    switch (v.kind) {
      case 'input':
      case 'constant': return this.own.get(id);
      case 'persistent': return this.store.get(v.tensor).front;
      case 'temp':
        if (v.update_of !== undefined) return this.store.get(v.update_of).back;
        if (v.buffer !== undefined) return this.buffers[v.buffer];
    }
    throw new BundleError(`program '${this.name}': value '${v.name}' (${v.kind}) has no storage (no buffer, no ` +
                          'update_of)', { program: this.name, value: v.name });
  }

  /** Checks and converts the feeds; uploads them. */
  upload(feeds) {
    const d = this.desc;
    for (const { input: i, data } of checkedFeeds(this.name, d.inputs, feeds, 'textures'))
      this.device.upload(this.own.get(i.value), data);
  }

  /** Draws every kernel in launch order; with `profile`, each inside a timer query (or bounded by a readback). */
  draw(profile, host = false) {
    const dev = this.device;
    for (const t of this.timings || []) if (t.query) dev.gl.deleteQuery(t.query);  // never collected by timings()
    this.timings = [];
    for (const k of this.kernels) {
      const ins = k.units.map((s) => this.texture(s.value, s.plane));
      const outs = k.desc.render_targets.map((t) => this.texture(t.value, t.plane));
      const fb = dev.framebuffer(outs, k.desc.name);
      let query = null, t0 = 0;
      if (profile && dev.timer && !host) query = dev.gl.createQuery();
      else if (profile) { dev.read(outs[0], 4); t0 = performance.now(); }
      dev.draw(k.program, ins, fb, k.desc.extent, query);
      if (query) this.timings.push({ kernel: k.desc.name, query });
      else if (profile) { dev.read(outs[0], 4); this.timings.push({ kernel: k.desc.name, ms: performance.now() - t0 }); }
      dev.unbindInputs(ins.length);
    }
  }

  /** The program outputs, row-major, as their dtype. */
  readOutputs() {
    const out = {};
    for (const o of this.desc.outputs) {
      const v = this.desc.values[o.value];
      const planes = [];
      for (let p = 0; p < (v.storage?.planes ?? 1); ++p) planes.push(this.device.read(this.texture(o.value, p),
                                                                                        v.layout.numel));
      const f = unpack(planes, v.layout, v.shape, v.storage || {});
      out[o.name] = o.dtype === 'i32' ? Int32Array.from(f) : f;
    }
    return out;
  }

  run(feeds, profile, host = false) {
    this.device.checkLost(`before running program '${this.name}'`);
    this.upload(feeds);
    this.draw(profile, host);
    const out = this.readOutputs();
    this.device.checkError(`while running program '${this.name}'`, { program: this.name });
    for (const u of this.desc.updates) this.store.swap(u.target);
    return out;
  }

  // Debug mode (debug.js DebugSession): the step as run() does it, one kernel at a time, each kernel's outputs read
  // back right after its draw; the updates are committed only by debugFinish().

  /** Debug mode: checks the context and uploads the feeds; the kernels then run one by one (debugKernel). */
  debugBegin(feeds) {
    this.device.checkLost(`before debugging program '${this.name}'`);
    this.upload(feeds);
  }

  /** The values kernel `i` writes (its render targets' values, once each). */
  outputsOf(i) {
    const ids = [];
    for (const t of this.kernels[i].desc.render_targets) if (!ids.includes(t.value)) ids.push(t.value);
    return ids;
  }

  /** Debug mode: draws kernel `i` alone and reads back every value it wrote: [{value, data}] (row-major). */
  debugKernel(i) {
    const dev = this.device, k = this.kernels[i];
    dev.checkLost(`before kernel '${k.desc.name}' of program '${this.name}'`);
    const ins = k.units.map((s) => this.texture(s.value, s.plane));
    const outs = k.desc.render_targets.map((t) => this.texture(t.value, t.plane));
    dev.draw(k.program, ins, dev.framebuffer(outs, k.desc.name), k.desc.extent, null);
    dev.unbindInputs(ins.length);
    const res = this.outputsOf(i).map((id) => ({ value: id, data: this.readValue(id) }));
    dev.checkError(`while running kernel '${k.desc.name}' of program '${this.name}'`,
                   { program: this.name, kernel: k.desc.name });
    return res;
  }

  /** The current contents of value `id` of the plan, row-major (planes and transposed storage undone). */
  readValue(id) {
    const v = this.desc.values[id];
    const planes = [];
    for (let p = 0; p < (v.storage?.planes ?? 1); ++p) planes.push(this.device.read(this.texture(id, p), v.layout.numel));
    return unpack(planes, v.layout, v.shape, v.storage || {});
  }

  /** Debug mode, after the last kernel: the program outputs (as run() returns them), then the updates committed. */
  debugFinish() {
    const out = this.readOutputs();
    this.device.checkError(`while finishing program '${this.name}'`, { program: this.name });
    for (const u of this.desc.updates) this.store.swap(u.target);
    return out;
  }

  dispose() {
    for (const t of [...this.buffers, ...this.own.values()]) this.device.deleteTexture(t);
  }
}

/** Runs a bundle's programs on a WebGL2 device (the `webgl2` backend of a Runtime). */
export class WebGL2Executor extends ProgramExecutor {
  /** Allocates the persistent values' textures and uploads the weights; each program's textures and kernel
   * programs are made by prepare() (link() for the programs compiled at creation, run() for the others). */
  constructor(bundle, device, options = {}) {
    super(bundle, device, options, 'link');
    this.store = new PersistentStore(device, bundle);
    this.cache = new ProgramCache(device);
    this.programs = new Map(bundle.programNames.map((n) => [n, new ProgramRun(device, bundle, n, this.store,
                                                                              this.cache)]));
  }

  /**
   * Runs one step of `program` (prepared first if it was not): uploads `feeds`, draws every kernel, reads back the
   * outputs, then commits the updates (swaps the persistent values' textures).
   * @returns {Promise<Record<string, Float32Array|Int32Array>>}
   */
  async run(program, feeds) {
    const p = this._program(program);
    await this.prepare([program]);
    // setupProfile: the first run's draws host-timed one by one (SwiftShader compiles a draw's routines at its first
    // draw: this is where WebGL2's first-run time goes)
    const first = this.serialCompile && !p.ran;
    const out = p.run(feeds, this.profile || first, first);
    p.ran = true;
    if (first && this.stats) this.stats.first_draws[program] = p.timings.map((t) => ({ kernel: t.kernel, ms: t.ms }));
    this.last = p;
    return out;
  }

  /** The current value of a persistent value (row-major). */
  read(name) {
    const e = this.store.get(name);
    this.device.checkLost(`before reading '${name}'`);
    return unpack([this.device.read(e.front, e.desc.layout.numel)], e.desc.layout, e.desc.shape, {});
  }

  /** Replaces persistent value `name` (row-major values, numel of its shape) in its current (front) texture. */
  write(name, values) {
    const e = this.store.get(name);
    checkWriteValues(name, e.desc.shape, values);
    this.device.checkLost(`before writing '${name}'`);
    this.device.upload(e.front, values instanceof Float32Array ? values : Float32Array.from(values));
  }

  /**
   * Per-kernel times of the last run (profile on): GPU timer queries where EXT_disjoint_timer_query_webgl2 exists
   * (waits for their results), else host time between readbacks bracketing each draw.
   * @returns {Promise<{kernel: string, ms: number, gpu_timer: boolean}[]>}
   */
  async timings() {
    if (!this.last || !this.last.timings) return [];
    const dev = this.device, gl = dev.gl, list = this.last.timings;
    const out = [];
    for (const t of list) {
      if (!t.query) { out.push({ kernel: t.kernel, ms: t.ms, gpu_timer: !!t.gpu_timer }); continue; }
      const start = performance.now();
      while (!gl.getQueryParameter(t.query, gl.QUERY_RESULT_AVAILABLE)) {
        dev.checkLost('while waiting for timer queries');
        if (performance.now() - start > 10000)
          throw new DeviceError(`the timer query of kernel '${t.kernel}' gave no result within 10 s`, { kernel: t.kernel });
        await new Promise((r) => setTimeout(r, 1));
      }
      const ns = gl.getQueryParameter(t.query, gl.QUERY_RESULT);
      gl.deleteQuery(t.query);
      t.query = null;
      t.ms = ns / 1e6;
      t.gpu_timer = true;
      out.push({ kernel: t.kernel, ms: t.ms, gpu_timer: true });
    }
    if (list.length && dev.timer && gl.getParameter(dev.timer.GPU_DISJOINT_EXT))
      throw new DeviceError('the GPU timer was disjoint during the profiled run (the GPU clock changed or was ' +
                            'reset): its kernel times are meaningless; run again', {});
    return out;
  }

  dispose() {
    for (const p of this.programs.values()) p.dispose();
  }
}
