// Dawn for Node (npm `webgpu`, pinned in tests/package-lock.json) as the Node WebGPU checks of this directory use it.
// Dawn on this machine runs only through its OpenGL ES backend in compatibility mode (../shared/TOOLCHAIN.md):
// EGL_PLATFORM=surfaceless and create(['backend=opengles']); callers request the adapter themselves. On a machine
// with a GPU driver's Vulkan (bench/web_node_bench.mjs on the H200), createDawnGPU('vulkan').
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The GPU object of Dawn's `backend` ('opengles' (default), 'vulkan'; '' lets Dawn choose), with the WebGPU
 *  globals (GPUBufferUsage...) installed. Exits with status 2 and says so when npm `webgpu` is not installed (the
 *  tests' "environment lacks it" status). */
export async function createDawnGPU(backend = 'opengles') {
  if (backend === 'opengles') process.env.EGL_PLATFORM ??= 'surfaceless';
  let webgpu;
  try {
    webgpu = await import('webgpu');
  } catch (e) {
    console.error(`npm package 'webgpu' is missing: run 'npm ci' in tests/ (${e.message})`);
    process.exit(2);
  }
  Object.assign(globalThis, webgpu.globals);
  return webgpu.create(backend ? [`backend=${backend}`] : []);
}

/** fetch() over file:// URLs (Node's fetch has none): a 404 Response for a missing file, as a server gives. */
export async function fileFetch(url) {
  const file = fileURLToPath(url);
  if (!fs.existsSync(file)) return new Response('not found', { status: 404 });
  return new Response(fs.readFileSync(file));
}
