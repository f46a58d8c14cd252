// Runs shadergrad web bundles (shadergrad export) in real headless Chromium on WebGL2 (SwiftShader) with the
// runtime copy inside each bundle, on the main thread and in a Worker, and prints what happened as one JSON line.
// The C++ test (tests/test_web_runtime.cpp) exports the bundles, breaks some on purpose, runs this and asserts.
//
// Usage: node tests/web_runtime_check.mjs ROOT TASK...
//   ROOT      a directory with one bundle per subdirectory (ROOT/NAME/bundle.json)
//   TASK      check:NAME:MODE[:BACKEND[:PLAN]]  replay NAME's checks (MODE main | worker; BACKEND auto (default) |
//                                         webgpu | webgl2; PLAN the webgpu plan: auto (default) | gpu | cpu): the
//                                         report (with the webgpu plan run and why), or the error thrown
//             lost:NAME:MODE[:BACKEND]    one run, then WEBGL_lose_context / GPUDevice.destroy(): what the next run
//                                         and read throw (BACKEND default webgl2)
//             webgpu:NAME                 createRuntime with backend 'webgpu' forced: the error and its reasons
//             profile:NAME:MODE[:BACKEND] one train step with profile: true: kernel names and timings()
//             lanes:NAME:N                the runtime's subgroup lane probe asking for N consecutive invocations
//             compile:NAME:MODE:BACKEND:PLAN[:COMPILE]  createRuntime with `compile` (lazy (default) | all | program
//                                         names, '+'-separated): what was compiled at creation, after the first
//                                         infer run (its outputs judged) and after prepare(), or the error
//             demo:NAME:MODE    opens NAME/runtime/demo.html (the bundle's self-check page): its sgDemoResult
//             checkpoint:NAME:MODE:BACKEND  the bundle's checks, then the page's checkpoint (persist.js
//                                         checkpointBytes) read back into a second runtime: both infer outputs, the
//                                         tensors it holds; its bytes are written to ROOT/NAME/page.safetensors
//                                         (MODE main; tests/web/check_page.js sgCheckpoint)
//             workerapi:NAME:BACKEND      a WorkerRuntime against a Runtime of the same bundle on BACKEND (webgl2 |
//                                         webgpu): API, bundle arguments, write(), plan(), errors (tests/web/
//                                         check_page.js sgWorkerApi; asserted by tests/web_worker_api_check.mjs)
// Serves ROOT and tests/web/ (at /_test/) from 127.0.0.1 on an ephemeral port with COOP/COEP headers (a
// cross-origin isolated page). Exit status 0 = every task ran (whatever it returned), 1 = the page broke,
// 2 = the environment is missing something (the message names it). No timing is asserted anywhere.
import fs from 'node:fs';
import { guard, loadChromium, withCheckPage } from './browser.mjs';

const [root, ...tasks] = process.argv.slice(2);
if (!root || !fs.existsSync(root) || !tasks.length) {
  console.error('usage: node web_runtime_check.mjs ROOT check:NAME:main|worker | lost:NAME:MODE | webgpu:NAME ...');
  process.exit(2);
}
const chromium = await loadChromium();

const console_ = [];
const results = {};
let status = 0, requests = [];
try {
  await withCheckPage(chromium, root, { isolated: true, console: console_ }, async ({ page, context, origin, served }) => {
    requests = served;
    results.crossOriginIsolated = await page.evaluate(() => self.crossOriginIsolated);
    for (const task of tasks) {
      const [kind, name, mode, backend, plan, compile] = task.split(':');
      if (kind === 'demo') {
        const demo = await context.newPage();
        demo.on('pageerror', (e) => console_.push(`demo pageerror: ${e.message}`));
        await demo.goto(`${origin}/${name}/runtime/demo.html?mode=${mode}`, { waitUntil: 'load' });
        await demo.waitForFunction(() => window.sgDemoResult !== undefined, null, { timeout: 300000 });
        results[task] = await demo.evaluate(() => ({ ...window.sgDemoResult,
                                                     text: document.getElementById('out').textContent }));
        await demo.close();
        continue;
      }
      const fn = { check: 'sgCheck', lost: 'sgLostContext', webgpu: 'sgSelectWebGPU', profile: 'sgProfile',
                   labels: 'sgBadLabels', compile: 'sgCompile', lanes: 'sgSubgroupLanes',
                   workerapi: 'sgWorkerApi', checkpoint: 'sgCheckpoint' }[kind];
      if (!fn) throw new Error(`unknown task '${task}'`);
      // a hang guard, not a timing check: no task here takes more than a minute even on a busy 2-core machine
      const served = requests.length;
      results[task] = await guard(page.evaluate(([f, n, m, b, p, c]) => window[f](n, m, b, p, c),
                                                [fn, name, mode, backend, plan, compile?.replaceAll('+', ',')]),
                                  `task ${task}`, 300);
      // the files the task fetched (shaders fetched lazily: only the plan and programs compiled)
      if (kind === 'compile') results[task].fetched = requests.slice(served).map((q) => q.path);
      if (kind === 'checkpoint' && results[task].bytes) {  // the file, not a JSON array of its bytes
        results[task].file = `${root}/${name}/page.safetensors`;
        fs.writeFileSync(results[task].file, Uint8Array.from(results[task].bytes));
        delete results[task].bytes;
      }
    }
  });
} catch (e) {
  results.harness_error = e.message;
  status = 1;
}
console.log(JSON.stringify({ results, console: console_, requests: requests.length }));
process.exit(status);
