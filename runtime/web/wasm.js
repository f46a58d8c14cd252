// shadergrad web runtime — the wasm backend's device: the bundle's WebAssembly module (bundle.json `wasm.module`,
// the C kernels of every program compiled by `shadergrad export` with clang --target=wasm32 -msimd128; docs/BUNDLE.md
// "Running a program on WebAssembly") instantiated once, and its linear memory, in which the executor places every
// value's f32 array (16-byte aligned, above the module's own data and stack at `__heap_base`; the memory grows as
// programs are prepared). One thread: the kernels run on the calling thread (the page's or the Worker's).
import { BundleError, DeviceError } from './errors.js';

/** A module whose one function returns a v128 constant: WebAssembly.validate accepts it only with SIMD128. */
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 22, 1, 20, 0,
  253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11]);

const PAGE = 65536;
const align16 = (n) => Math.ceil(n / 16) * 16;

/** The instantiated module of a bundle and its linear memory. */
export class WasmDevice {
  constructor(instance, path) {
    this.exports = instance.exports;
    this.memory = instance.exports.memory;
    this.path = path;
    this.top = align16(Number(instance.exports.__heap_base?.value ?? 65536));
    this.base = this.top;
    this.renderer = 'WebAssembly SIMD128, one thread';
    this.caps = { renderer: this.renderer, threads: 1, simd128: true, module: path };
    this.lost = false;
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

  /** A Float32Array view of `n` floats at byte offset `at` (views are made again after every grow). */
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

  dispose() { this.lost = true; this.exports = null; }
}

/**
 * Whether the wasm backend can run `bundle` here: WebAssembly with SIMD128, the bundle's module fetched, compiled and
 * instantiated without imports. Resolves to {device} or {reason} in words; a missing module file is a BundleError.
 */
export async function probeWasm(bundle) {
  if (typeof WebAssembly !== 'object' || typeof WebAssembly.instantiate !== 'function')
    return { reason: 'this JavaScript engine has no WebAssembly' };
  if (!WebAssembly.validate(SIMD_PROBE))
    return { reason: 'this WebAssembly engine lacks SIMD128 (fixed-width SIMD: Chrome 91, Firefox 89, Safari 16.4, ' +
                     'Node 16.4 and later have it), which the bundle\'s kernels use' };
  const path = bundle.json.wasm?.module;
  if (typeof path !== 'string') return { reason: 'the bundle has no wasm module (bundle.json `wasm.module`)' };
  const bytes = await bundle.binary(path, { target: 'wasm' });
  let module;
  try {
    module = await WebAssembly.compile(bytes);
  } catch (e) {
    return { reason: `WebAssembly could not compile ${path}: ${e.message}` };
  }
  const imports = WebAssembly.Module.imports(module);
  if (imports.length)
    return { reason: `${path} imports ${imports.map((i) => `${i.module}.${i.name}`).join(', ')}; the runtime gives ` +
                     'none: export the bundle again' };
  let instance;
  try {
    instance = await WebAssembly.instantiate(module, {});
  } catch (e) {
    return { reason: `WebAssembly could not instantiate ${path}: ${e.message}` };
  }
  if (!(instance.exports.memory instanceof WebAssembly.Memory))
    return { reason: `${path} exports no memory: export the bundle again` };
  return { device: new WasmDevice(instance, path) };
}
