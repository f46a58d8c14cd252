// shadergrad web runtime — the wasm backend's device: the bundle's WebAssembly module (bundle.json `wasm.module`,
// the C kernels of every program compiled by `shadergrad export` with clang --target=wasm32 -msimd128; docs/BUNDLE.md
// "Running a program on WebAssembly") instantiated on a linear memory that the runtime makes and the module imports
// (env.memory), in which the executor places every value's f32 array (16-byte aligned, above the module's own data
// and stack at `__heap_base`; the memory grows as programs are prepared).
//
// Threads: where SharedArrayBuffer is available — a cross-origin isolated page or Worker (`crossOriginIsolated`:
// the page was served with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp),
// or Node — the memory is shared and a pool of Workers (wasm_pool.js) instantiates the same module on it; a kernel
// with enough work has its workgroups split over the pool and the calling thread. Elsewhere one thread: the module's
// memory import is declared shared, which an ordinary memory cannot satisfy, so the runtime instantiates a copy of
// the module bytes with that one flag cleared (same length, nothing else changes) on an ordinary memory. A module
// exported before threads (no imports, its own memory) runs on one thread as before.
import { BundleError, DeviceError } from './errors.js';
import { WasmPool } from './wasm_pool.js';

/** A module whose one function returns a v128 constant: WebAssembly.validate accepts it only with SIMD128. */
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 22, 1, 20, 0,
  253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11]);

const PAGE = 65536;
const MAX_THREADS = 4;
const align16 = (n) => Math.ceil(n / 16) * 16;
const isNode = typeof process === 'object' && typeof process.versions?.node === 'string';

/**
 * The memory import of a wasm binary (the import section read, nothing else): {module, name, at (the byte offset of
 * its limits flags), flags, initial, maximum (pages; undefined without one), shared}, null when it imports none, and
 * `others`: the names of every import that is not a memory.
 */
export function memoryImport(bytes) {
  let p = 8;
  const leb = () => {
    let r = 0, s = 0, b;
    do {
      if (p >= bytes.length) throw new Error('truncated');
      b = bytes[p++];
      r += (b & 0x7f) * 2 ** s;
      s += 7;
    } while (b & 0x80);
    return r;
  };
  const name = () => {
    const n = leb(), t = new TextDecoder().decode(bytes.subarray(p, p + n));
    p += n;
    return t;
  };
  let memory = null;
  const others = [];
  while (p < bytes.length) {
    const id = bytes[p++], size = leb(), end = p + size;
    if (id !== 2) { p = end; continue; }
    for (let n = leb(); n > 0; --n) {
      const mod = name(), field = name(), kind = bytes[p++];
      if (kind === 2) {
        const at = p, flags = bytes[p++], initial = leb(), maximum = flags & 1 ? leb() : undefined;
        memory = { module: mod, name: field, at, flags, initial, maximum, shared: (flags & 2) !== 0 };
        continue;
      }
      others.push(`${mod}.${field}`);
      if (kind === 0) leb();                                                             // function: type index
      else if (kind === 1) { p++; const f = bytes[p++]; leb(); if (f & 1) leb(); }     // table
      else if (kind === 3) p += 2;                                                       // global: type, mutability
      else break;                                                                        // (tag, ...): stop reading
    }
    break;
  }
  return { memory, others };
}

/** The module's bytes with its shared memory import made an ordinary one (the shared bit of its limits cleared). */
export function unsharedCopy(bytes, mem) {
  const copy = bytes.slice();
  copy[mem.at] = mem.flags & ~2;
  return copy;
}

/** How many threads to use: options.wasmThreads, else the hardware's, at most 4 (and at least 1). */
async function wantedThreads(options) {
  if (options.wasmThreads !== undefined) {
    const n = options.wasmThreads;
    if (!Number.isInteger(n) || n < 1)
      throw new DeviceError(`wasmThreads must be a positive integer (1 = one thread), not ${n}`, { wasmThreads: n });
    return { n, why: 'wasmThreads' };
  }
  let hw = globalThis.navigator?.hardwareConcurrency;
  if (!hw && isNode) {
    const os = await import('node:os');
    hw = os.availableParallelism?.() ?? os.cpus().length;
  }
  return { n: Math.max(1, Math.min(MAX_THREADS, hw || 1)), why: `${hw || 1} hardware thread${hw === 1 ? '' : 's'}` };
}

/** Why this context cannot share a memory with Workers (null when it can). */
function noThreadsReason() {
  if (isNode && typeof SharedArrayBuffer !== 'function') return 'this Node has no SharedArrayBuffer';
  if (typeof SharedArrayBuffer !== 'function' || (!isNode && globalThis.crossOriginIsolated !== true))
    return 'the page is not cross-origin isolated (SharedArrayBuffer needs it: serve the page with the headers ' +
           'Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)';
  if (!isNode && typeof Worker !== 'function') return 'this context cannot start Workers';
  return null;
}

/** The instantiated module of a bundle, its linear memory and (with threads) its pool of Workers. */
export class WasmDevice {
  constructor(instance, memory, path, { module = null, threads = null, entries = [], why = '' } = {}) {
    this.exports = instance.exports;
    this.memory = memory;
    this.module = module;
    this.path = path;
    this.top = align16(Number(instance.exports.__heap_base?.value ?? 65536));
    this.base = this.top;
    this.threadsDesc = threads;  // bundle.json wasm.threads (when the pool may start)
    this.entries = entries;      // every kernel entry of the bundle: a Worker calls entry i by its index
    this.pool = null;
    this.threads = 1;
    this.whyOneThread = why;
    this._setCaps();
    this.lost = false;
  }

  _setCaps() {
    this.renderer = this.threads > 1
      ? `WebAssembly SIMD128, ${this.threads} threads (${this.threads - 1} Worker${this.threads > 2 ? 's' : ''} and the ` +
        'calling thread share the memory)'
      : `WebAssembly SIMD128, one thread${this.whyOneThread ? `: ${this.whyOneThread}` : ''}`;
    this.caps = { renderer: this.renderer, threads: this.threads, simd128: true, module: this.path,
                  shared_memory: typeof SharedArrayBuffer === 'function' && this.memory.buffer instanceof SharedArrayBuffer,
                  ...(this.threads > 1 ? { parallel_work: this.threadsDesc.parallel_work } : { why_one_thread: this.whyOneThread }) };
  }

  /** Starts `n - 1` Workers on the shared memory (each with its own stack region); on failure stays one thread and
   * says why. */
  async startPool(n) {
    const stack = this.threadsDesc.stack_bytes;
    const stacks = [];
    for (let i = 1; i < n; ++i) stacks.push(this.alloc(stack, `the stack of Worker ${i}`) + stack);
    try {
      this.pool = await WasmPool.start(this.module, this.memory, this.entries, stacks,
                                       this.threadsDesc.chunks_per_thread ?? 4, this.exports, isNode);
      this.threads = n;
    } catch (e) {
      this.whyOneThread = `the Workers did not start (${e.message})`;
    }
    this._setCaps();
  }

  /** Whether kernel `k` (bundle.json kernel: work, workgroups) is split over the pool. */
  splits(k) {
    return this.pool !== null && k.workgroups > 1 && k.workgroups <= 0x7fffffff &&
           typeof k.work === 'number' && k.work >= this.threadsDesc.parallel_work;
  }

  /** Runs entry `fn` (index `id` in `entries`) over workgroups [0, workgroups): split over the pool when `split`. */
  call(fn, id, table, workgroups, split) {
    if (split) this.pool.run(id, table, workgroups);
    else fn(table, 0n, BigInt(workgroups));
  }

  /** Bytes of linear memory given to the executor's arrays so far. */
  get allocatedBytes() { return this.top - this.base; }

  /** `bytes` of linear memory, 16-byte aligned, zeroed (fresh pages are): its byte offset. DeviceError when the
   * memory cannot grow (wasm32: 4 GiB at most; the engine may allow less). */
  alloc(bytes, what) {
    const at = this.top, end = align16(at + Math.max(bytes, 16));
    const have = this.memory.buffer.byteLength;
    if (end > have) {
      try {
        this.memory.grow(Math.ceil((end - have) / PAGE));
      } catch (e) {
        throw new DeviceError(`wasm: cannot grow the module's memory to ${end} bytes for ${what} (${e.message}); ` +
                              'the bundle needs more memory than this WebAssembly engine gives', { what, bytes });
      }
    }
    this.top = end;
    return at;
  }

  /** A Float32Array view of `n` floats at byte offset `at` (views are made again after every grow: a shared memory's
   * buffer object is replaced by a longer one). */
  f32(at, n) { return new Float32Array(this.memory.buffer, at, n); }
  /** A Uint32Array view of `n` words at byte offset `at`. */
  u32(at, n) { return new Uint32Array(this.memory.buffer, at, n); }

  /** The exported kernel entry `name`; BundleError when the module lacks it. */
  entry(name, where) {
    const f = this.exports[name];
    if (typeof f !== 'function')
      throw new BundleError(`${this.path} exports no function '${name}' (kernel '${where.kernel}' of program ` +
                            `'${where.program}'): the module does not belong to this bundle.json; export it again`,
                            { file: this.path, ...where });
    return f;
  }

  /** The index of entry `name` in `entries` (what a Worker is told to call). */
  entryIndex(name) { return this.entries.indexOf(name); }

  dispose() {
    this.lost = true;
    this.exports = null;
    this.pool?.stop();
    this.pool = null;
  }
}

/** Every kernel entry of the bundle's wasm plans, each once, in program and kernel order. */
function bundleEntries(bundle) {
  const out = new Set();
  for (const n of bundle.programNames) for (const k of bundle.program(n).wasm?.kernels ?? []) out.add(k.entry);
  return [...out];
}

/** A shared memory of `initial` pages: the module's maximum if the engine gives it, else 1 GiB, else 256 MiB. */
function sharedMemory(mem) {
  let last;
  for (const maximum of [mem.maximum, 16384, 4096])
    if (maximum !== undefined && maximum >= mem.initial && maximum <= (mem.maximum ?? 65536))
      try {
        return new WebAssembly.Memory({ initial: mem.initial, maximum, shared: true });
      } catch (e) { last = e; }
  throw last ?? new Error('no maximum size fits');
}

/**
 * Whether the wasm backend can run `bundle` here: WebAssembly with SIMD128, the bundle's module fetched, compiled and
 * instantiated (importing only its memory). Resolves to {device} or {reason} in words; a missing module file is a
 * BundleError. `options.wasmThreads`: threads in all (1 = no Workers); default the hardware's, at most 4.
 */
export async function probeWasm(bundle, options = {}) {
  if (typeof WebAssembly !== 'object' || typeof WebAssembly.instantiate !== 'function')
    return { reason: 'this JavaScript engine has no WebAssembly' };
  if (!WebAssembly.validate(SIMD_PROBE))
    return { reason: 'this WebAssembly engine lacks SIMD128 (fixed-width SIMD: Chrome 91, Firefox 89, Safari 16.4, ' +
                     'Node 16.4 and later have it), which the bundle\'s kernels use' };
  const path = bundle.json.wasm?.module;
  if (typeof path !== 'string') return { reason: 'the bundle has no wasm module (bundle.json `wasm.module`)' };
  const bytes = new Uint8Array(await bundle.binary(path, { target: 'wasm' }));
  let imp;
  try {
    imp = memoryImport(bytes);
  } catch (e) {
    return { reason: `${path} is not a WebAssembly module (its import section: ${e.message})` };
  }
  if (imp.others.length)
    return { reason: `${path} imports ${imp.others.join(', ')}; the runtime gives only a memory (env.memory): export ` +
                     'the bundle again' };
  const mem = imp.memory;
  const compile = async (b) => {
    try {
      return { module: await WebAssembly.compile(b) };
    } catch (e) {
      return { reason: `WebAssembly could not compile ${path}: ${e.message}` };
    }
  };
  const instantiate = async (module, imports) => {
    try {
      return { instance: await WebAssembly.instantiate(module, imports) };
    } catch (e) {
      return { reason: `WebAssembly could not instantiate ${path}: ${e.message}` };
    }
  };
  if (!mem) {  // a module from before threads: its own memory, no imports
    const c = await compile(bytes);
    if (!c.module) return c;
    const r = await instantiate(c.module, {});
    if (!r.instance) return r;
    if (!(r.instance.exports.memory instanceof WebAssembly.Memory))
      return { reason: `${path} exports no memory: export the bundle again` };
    return { device: new WasmDevice(r.instance, r.instance.exports.memory, path,
                                    { why: 'the module was exported before threads (export the bundle again)' }) };
  }
  if (`${mem.module}.${mem.name}` !== 'env.memory')
    return { reason: `${path} imports its memory as ${mem.module}.${mem.name}, not env.memory: export the bundle again` };
  const t = bundle.json.wasm.threads;  // used only when every number is sane (else one thread, saying so)
  const desc = t && typeof t === 'object' && t.parallel_work >= 0 && Number.isSafeInteger(t.stack_bytes) &&
    t.stack_bytes >= 1024 && t.stack_bytes % 16 === 0 && Number.isInteger(t.chunks_per_thread ?? 4) &&
    (t.chunks_per_thread ?? 4) >= 1 ? t : null;
  const want = await wantedThreads(options);
  let why = want.n === 1 ? (want.why === 'wasmThreads' ? 'the wasmThreads option is 1' : `this machine has one hardware thread`)
    : !mem.shared || !desc ? 'the bundle\'s module or its `wasm.threads` is not made for threads (export the bundle again)'
      : noThreadsReason();
  let memory = null;
  if (!why) {
    try {
      memory = sharedMemory(mem);
    } catch (e) {
      why = `this engine gives no shared memory of ${mem.initial} pages (${e.message})`;
    }
  }
  if (memory) {
    const c = await compile(bytes);
    if (!c.module) return c;
    const r = await instantiate(c.module, { env: { memory } });
    if (!r.instance) return r;
    const device = new WasmDevice(r.instance, memory, path, { module: c.module, threads: desc,
                                                              entries: bundleEntries(bundle) });
    await device.startPool(want.n);
    return { device };
  }
  const c = await compile(mem.shared ? unsharedCopy(bytes, mem) : bytes);
  if (!c.module) return c;
  try {
    memory = new WebAssembly.Memory({ initial: mem.initial, ...(mem.maximum !== undefined ? { maximum: mem.maximum } : {}) });
  } catch (e) {
    return { reason: `WebAssembly could not make a memory of ${mem.initial} pages for ${path}: ${e.message}` };
  }
  const r = await instantiate(c.module, { env: { memory } });
  if (!r.instance) return r;
  return { device: new WasmDevice(r.instance, memory, path, { why }) };
}
