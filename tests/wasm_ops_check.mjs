// Runs shadergrad bundles on the wasm backend in Node (WebAssembly SIMD128, no browser and no npm package) through the
// real runtime executor (runtime/web/wasm_executor.js, loaded from each bundle's runtime/ copy). tests/test_wasm_ops.cpp
// exports every op case list of tests/op_cases.h as one bundle with only the wasm target, runs this once for all of
// them and judges the outputs it writes (the same contract as tests/webgpu_ops_check.mjs).
//
// Usage: node tests/wasm_ops_check.mjs ROOT OUT NAME...
//   ROOT/NAME/bundle.json, ROOT/NAME/cases.json   as tests/webgpu_ops_check.mjs reads them
//   OUT/NAME.wasm.f32                              every output's f32 values, concatenated in output order
// Prints one line per bundle and then one JSON line {"results": {NAME: {backend, adapter, kernels, outputs...}}}.
// Exit 0 = every bundle ran, 1 = a bundle failed to load or run (its error is in the JSON).
//
//   node tests/wasm_ops_check.mjs --checks DIR     runs the bundle's checks (bundle.json `checks`) on wasm with
//                                                   backend 'auto' (no WebGPU or WebGL2 in Node: the chain falls
//                                                   through to wasm) and prints {"checks": report, "attempts",
//                                                   "debug"}: debug mode stepping the first train run (each step's
//                                                   C source, the outputs equal to run()'s).
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { fileFetch } from './dawn_node.mjs';
import { runOpCases, summaryLine } from './web/op_cases_run.mjs';

const args = process.argv.slice(2);
if (args[0] === '--checks') {
  const dir = path.resolve(args[1]);
  const mod = await import(pathToFileURL(path.join(dir, 'runtime/shadergrad.js')).href);
  const t0 = performance.now();
  try {
    const rt = await mod.createRuntime(pathToFileURL(path.join(dir, 'bundle.json')).href, { fetch: fileFetch });
    const report = await rt.runChecks();
    const ms = performance.now() - t0;
    // debug mode on wasm: the first train check run stepped kernel by kernel on a fresh runtime gives what run() gives
    // on another, and each step shows its kernel's C
    let debug = null;
    const c = await rt.bundle.loadChecks();
    const run = c.runs.find((r) => r.program === 'train') ?? c.runs[0];
    const feeds = {};
    for (const [k, ref] of Object.entries(run.feeds)) feeds[k] = rt.bundle.data(ref);
    const url = pathToFileURL(path.join(dir, 'bundle.json')).href;
    const [a, b] = [await mod.createRuntime(url, { fetch: fileFetch }), await mod.createRuntime(url, { fetch: fileFetch })];
    const want = await a.run(run.program, feeds);
    const session = await b.debug(run.program, feeds);
    let sources = 0, steps = 0;
    while (!session.atEnd) {
      const st = await session.step();
      ++steps;
      if (st.source.startsWith(`// shadergrad compute kernel ${st.name} `)) ++sources;
    }
    const got = await session.finish();
    const same = Object.keys(want).every((k) => want[k].length === got[k].length && want[k].every((x, i) => Object.is(x, got[k][i])));
    debug = { program: run.program, steps, sources, same, kernels: b.plan(run.program).kernels.length };
    console.log(JSON.stringify({ checks: report, backend: rt.backend, attempts: rt.attempts, ms, debug }));
    process.exit(report.ok ? 0 : 1);
  } catch (e) {
    console.log(JSON.stringify({ error: { name: e.name, message: e.message } }));
    process.exit(1);
  }
}

const [root, out, ...names] = args;
if (!root || !out || !names.length) {
  console.error('usage: node wasm_ops_check.mjs ROOT OUT NAME... | --checks DIR');
  process.exit(2);
}
fs.mkdirSync(out, { recursive: true });
const results = {};
let status = 0;
for (const name of names) {
  const dir = path.resolve(root, name);
  const r = (results[name] = {});
  try {
    const mod = await import(pathToFileURL(path.join(dir, 'runtime/shadergrad.js')).href);
    const cases = JSON.parse(fs.readFileSync(path.join(dir, 'cases.json'), 'utf8')).outputs;
    const t0 = performance.now();
    const { values, ...got } = await runOpCases(mod, pathToFileURL(path.join(dir, 'bundle.json')).href, cases,
                                                { backend: 'wasm', fetch: fileFetch });
    Object.assign(r, got, { ms: performance.now() - t0 });
    console.error(summaryLine(name, r));
    fs.writeFileSync(path.join(out, `${name}.wasm.f32`), Buffer.from(values.buffer));
  } catch (e) {
    r.error = { name: e.name, message: e.message };
    console.error(`${name}: ${e.name}: ${e.message.split('\n').slice(0, 2).join(' ')}`);
    status = 1;
  }
}
console.log(JSON.stringify({ results }));
process.exit(status);
