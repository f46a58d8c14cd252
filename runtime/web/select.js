// shadergrad web runtime — picking a backend: WebGPU, else WebGL2 (RGBA32F render targets), else an error that
// lists every backend tried with the reason in words (the fallback chain of seed article 000 §7.1, without its
// WebGL1 and plain-JavaScript tiers: the kernels need WebGL2's texelFetch, integer math and multiple render
// targets, and a JavaScript interpreter of them would be a different product).
import { BackendUnavailableError, UnsupportedError } from './errors.js';
import { probeWebGL2 } from './webgl2.js';

/** Backends in the order `backend: 'auto'` tries them. */
export const BACKENDS = ['webgpu', 'webgl2'];

/** Why WebGPU cannot run `bundle` in this runtime version (always a reason today: the WGSL target is not written). */
function webgpuReason(bundle) {
  if (!globalThis.navigator?.gpu)
    return 'navigator.gpu is missing: this browser or context has no WebGPU (it needs a secure context; headless ' +
           'Chromium needs --enable-unsafe-webgpu)';
  const wgsl = Object.values(bundle.json.programs).some((p) => p.kernels.some((k) => typeof k.wgsl === 'string'));
  if (!wgsl)
    return 'WebGPU is present, but this bundle has no WGSL kernels (it was exported for the webgl2 target: GLSL ES ' +
           'fragment shaders) and this runtime version has no WebGPU executor yet';
  return 'WebGPU is present and the bundle has WGSL kernels, but this runtime version has no WebGPU executor yet';
}

/**
 * Tries the backends in order and returns the first that can run the bundle.
 * @param {import('./bundle.js').Bundle} bundle
 * @param {{backend?: 'auto'|'webgpu'|'webgl2', canvas?: HTMLCanvasElement|OffscreenCanvas,
 *          contextAttributes?: WebGLContextAttributes}} [options]
 * @returns {Promise<{backend: string, device: import('./webgl2.js').WebGL2Device,
 *                    attempts: {backend: string, ok: boolean, reason: string}[]}>}
 * @throws {BackendUnavailableError} listing every attempt and its reason
 */
export async function selectBackend(bundle, options = {}) {
  const want = options.backend ?? 'auto';
  if (want !== 'auto' && !BACKENDS.includes(want))
    throw new UnsupportedError(`unknown backend '${want}' (choose auto, ${BACKENDS.join(', ')})`, { backend: want });
  const order = want === 'auto' ? BACKENDS : [want];
  const attempts = [];
  for (const backend of order) {
    if (backend === 'webgpu') {
      attempts.push({ backend, ok: false, reason: webgpuReason(bundle) });
      continue;
    }
    const r = probeWebGL2(bundle.requires, options);
    if (r.device) {
      attempts.push({ backend, ok: true, reason: `${r.device.renderer}: EXT_color_buffer_float, fp32 round trip ok, ` +
                                                 `limits cover the bundle` });
      return { backend, device: r.device, attempts };
    }
    attempts.push({ backend, ok: false, reason: r.reason });
  }
  throw new BackendUnavailableError(
    `no backend can run this bundle here:\n${attempts.map((a) => `  ${a.backend}: ${a.reason}`).join('\n')}`,
    { attempts });
}
