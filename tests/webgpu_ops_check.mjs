// Runs shadergrad bundles (webgpu target) on WebGPU in Node through the real runtime executor (runtime/web/,
// loaded from each bundle's runtime/ copy), with npm `webgpu` (Dawn for Node). tests/test_webgpu_ops.cpp exports
// every op case list of tests/op_cases.h as one bundle each (a program "ops" whose outputs are the ops and their
// gradients, one check run with the fixed inputs, the native CPU backend's outputs as expected), runs this once for
// all of them and judges the outputs it writes.
//
// Usage: node tests/webgpu_ops_check.mjs ROOT OUT NAME...
//   ROOT/NAME/bundle.json   a bundle; ROOT/NAME/cases.json: {"outputs": [{"name", "rtol", "atol"}...]} in the
//                           program's output order (the op cases' tolerances: |a - e| <= atol + rtol |e|)
//   OUT/NAME.PLAN.f32       what WebGPU computed with webgpu plan PLAN (gpu, cpu): every output's f32 values,
//                           concatenated in output order. Each bundle runs first with the plan the runtime picks for
//                           the adapter ('auto'), then with each other plan of the bundle forced.
// Prints one JSON line: per bundle and plan the adapter, whether the plan was picked or forced and why, kernels run,
// and per output pass/fail with the worst element (a report for people; the C++ test judges the .f32 files itself). Exit 0 = every bundle ran, 1 = a bundle failed to
// load or run (its error is in the JSON), 2 = the environment lacks npm `webgpu`.
//
// Dawn on this machine runs only through its OpenGL ES backend in compatibility mode (../shared/TOOLCHAIN.md):
// EGL_PLATFORM=surfaceless, create(['backend=opengles']), requestAdapter({featureLevel: 'compatibility'}).
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { createDawnGPU, fileFetch } from './dawn_node.mjs';
import { runOpCases, summaryLine } from './web/op_cases_run.mjs';

const [root, out, ...names] = process.argv.slice(2);
if (!root || !out || !names.length) {
  console.error('usage: node webgpu_ops_check.mjs ROOT OUT NAME...');
  process.exit(2);
}
const gpu = await createDawnGPU();

fs.mkdirSync(out, { recursive: true });
const results = {};
let status = 0;
/** Runs bundle `dir` once with webgpu plan `plan` ('auto' or forced); fills `r` and writes OUT/NAME.PLAN.f32. */
async function runPlan(name, dir, plan, r) {
  try {
    const mod = await import(pathToFileURL(path.join(dir, 'runtime/shadergrad.js')).href);
    const cases = JSON.parse(fs.readFileSync(path.join(dir, 'cases.json'), 'utf8')).outputs;
    const { values, ...got } = await runOpCases(mod, pathToFileURL(path.join(dir, 'bundle.json')).href, cases,
                                                { backend: 'webgpu', webgpuPlan: plan, gpu, fetch: fileFetch,
                                                  featureLevel: 'compatibility' });
    Object.assign(r, got, { picked: plan === 'auto' });
    console.error(summaryLine(name, r, r.picked ? 'picked' : 'forced'));
    fs.writeFileSync(path.join(out, `${name}.${r.plan.name}.f32`), Buffer.from(values.buffer));
    return r.plan.name;
  } catch (e) {
    r.error = { name: e.name, message: e.message };
    console.error(`${name} (${plan}): ${e.name}: ${e.message.split('\n').slice(0, 2).join(' ')}`);
    status = 1;
    return null;
  }
}

for (const name of names) {
  const dir = path.resolve(root, name);
  const r = (results[name] = { plans: {} });
  const auto = {};
  const picked = await runPlan(name, dir, 'auto', auto);
  if (!picked) { r.error = auto.error; continue; }
  r.picked = picked;
  r.plans[picked] = auto;
  const all = JSON.parse(fs.readFileSync(path.join(dir, 'bundle.json'), 'utf8')).webgpu.plans.map((p) => p.name);
  for (const plan of all.filter((p) => p !== picked)) await runPlan(name, dir, plan, (r.plans[plan] = {}));
}
console.log(JSON.stringify({ results }));
process.exit(status);
