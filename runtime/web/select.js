// shadergrad web runtime — picking a backend: WebGPU (WGSL compute kernels over storage buffers), else WebGL2
// (GLSL ES fragment kernels over RGBA32F render targets), else wasm (the C kernels compiled to WebAssembly SIMD128,
// on the CPU: any engine with WebAssembly SIMD, e.g. a WebGL2 device without highp float or a page with WebGPU and
// WebGL2 disabled), else an error that lists every backend tried with the reason in words (the fallback chain of
// seed article 000 §7.1, without its WebGL1 tier; its plain-JavaScript tier is the wasm plan).
import { BackendUnavailableError, UnsupportedError } from './errors.js';
import { probeWebGL2 } from './webgl2.js';
import { probeWebGPU } from './webgpu.js';
import { probeWasm } from './wasm.js';

/** Backends in the order `backend: 'auto'` tries them. */
export const BACKENDS = ['webgpu', 'webgl2', 'wasm'];

/** Why the bundle itself rules a backend out (it was exported without that target), or null. */
function bundleReason(bundle, backend) {
  if (bundle.targets.includes(backend)) return null;
  return `the bundle has no ${backend} plan (exported with --targets ${bundle.targets.join(',')}); export it with ` +
         '--targets webgpu,webgl2,wasm to run it here';
}

/**
 * Tries the backends in order and returns the first that can run the bundle. On WebGPU it also picks the webgpu
 * plan (chooseWebGPUPlan: by the adapter, or `webgpuPlan` forces one) and says why.
 * @param {import('./bundle.js').Bundle} bundle
 * @param {{backend?: 'auto'|'webgpu'|'webgl2'|'wasm', webgpuPlan?: 'auto'|'gpu'|'cpu'|'cpu-subgroups', gpu?: GPU,
 *          canvas?: HTMLCanvasElement|OffscreenCanvas, contextAttributes?: WebGLContextAttributes,
 *          profile?: boolean}} [options]
 * @returns {Promise<{backend: string, device: import('./webgl2.js').WebGL2Device|import('./webgpu.js').WebGPUDevice,
 *                    attempts: {backend: string, ok: boolean, reason: string}[],
 *                    webgpuPlan: {name: string, program_key: string, reason: string}|null}>}
 * @throws {BackendUnavailableError} listing every attempt and its reason
 */
export async function selectBackend(bundle, options = {}) {
  const want = options.backend ?? 'auto';
  if (want !== 'auto' && !BACKENDS.includes(want))
    throw new UnsupportedError(`unknown backend '${want}' (choose auto, ${BACKENDS.join(', ')})`, { backend: want });
  const order = want === 'auto' ? BACKENDS : [want];
  const attempts = [];
  for (const backend of order) {
    const no = bundleReason(bundle, backend);
    if (no) { attempts.push({ backend, ok: false, reason: no }); continue; }
    const r = backend === 'webgpu' ? await probeWebGPU(bundle.webgpuPlans, options, bundle.webgpu?.cpu_adapter)
      : backend === 'webgl2' ? probeWebGL2(bundle.requires, options) : await probeWasm(bundle, options);
    if (r.device) {
      const ok = backend === 'webgpu'
        ? `${r.device.renderer}: ${r.planReason}; limits cover that plan${r.device.timestamps ? ', timestamp-query' : ''}`
        : backend === 'webgl2' ? `${r.device.renderer}: EXT_color_buffer_float, fp32 round trip ok, limits cover the bundle`
          : `${r.device.renderer}: the bundle's module (${r.device.path}) compiled and instantiated`;
      attempts.push({ backend, ok: true, reason: ok });
      const webgpuPlan = r.plan ? { name: r.plan.name, program_key: r.plan.program_key, reason: r.planReason } : null;
      return { backend, device: r.device, attempts, webgpuPlan };
    }
    attempts.push({ backend, ok: false, reason: r.reason });
  }
  throw new BackendUnavailableError(
    `no backend can run this bundle here:\n${attempts.map((a) => `  ${a.backend}: ${a.reason}`).join('\n')}`,
    { attempts });
}
