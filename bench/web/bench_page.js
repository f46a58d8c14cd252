// The page side of bench/web_bench.mjs. Every function times one case the same way (the method of
// ../../shared/PEERS.md): one fixed random batch (SGEMM: two fixed random matrices), a step = the whole train step
// with only the scalar loss read back (SGEMM: one product, C read back), 10 warm-up + 50 timed steps (SGEMM: 3 + 10),
// median (a step slower than 1 s: 1 + 3); first step = from nothing to the first result, shader compiles included.
//   benchOurs(bundle, program, backend, profile, webgpuPlan)  a bundle's program with the runtime copy inside the
//                                                  bundle (webgpuPlan: 'auto' = the runtime's pick, 'gpu', 'cpu')
//   benchTfjs(kind, model, size, backend)         TF.js 4.22 on 'webgl' or 'webgpu'
//   benchJax(kind, model, size, device)           jax-js 0.1.25 on 'webgpu', 'webgl' or 'wasm', the whole step under jit
// kind: 'train' (model 'mlp' | 'cnn', size = batch) or 'sgemm' (size = N).
// The models, inputs and timing loop are those of bench_models.js (shared with ../web_node_bench.mjs: Node + Dawn).
//   benchJaxCharlm(c, rows, device)               the charlm case (bench_models.js timeJaxCharlm) in jax-js
// benchOurs' `given` ({feeds, counts}, optional): the charlm case's word rows and its [warm-up, timed] counts.
import { timeJax, timeJaxCharlm, timeOurs, timeTfjs } from './bench_models.js';

window.benchOurs = async (name, program, backend, profile, webgpuPlan = 'auto', given = null) =>
  timeOurs(await import(`/${name}/runtime/shadergrad.js`), `/${name}/bundle.json`, program, { backend, webgpuPlan }, profile, given);

window.benchTfjs = (kind, model, size, backend) => timeTfjs(window.tf, kind, model, size, backend);

let jaxMod = null;
window.benchJax = async (kind, model, size, device) => {
  const t0 = performance.now();  // the first case's first step includes the module's import
  if (!jaxMod) jaxMod = await import('/_npm/@jax-js/jax/dist/index.js');
  return timeJax(jaxMod, kind, model, size, device, t0);
};
window.benchJaxCharlm = async (c, rows, device) => {
  const t0 = performance.now();
  if (!jaxMod) jaxMod = await import('/_npm/@jax-js/jax/dist/index.js');
  return timeJaxCharlm(jaxMod, c, rows, device, t0);
};
window.benchReady = true;
