// Runs op-case bundles (tests/op_bundles.h: every case list of tests/op_cases.h exported with the webgl2 and webgpu
// targets) in one headless Chromium (tests/browser.mjs: WebGL2 on ANGLE/SwiftShader, WebGPU on SwiftShader's
// adapter) through the runtime copy inside each bundle, and writes what each backend computed; tests/test_web_ops.cpp
// exports the bundles, runs this once and judges the outputs against the native CPU backend's.
//
// Usage: node tests/web_ops_check.mjs ROOT OUT TASK...
//   ROOT/NAME/bundle.json, ROOT/NAME/cases.json   a bundle and its outputs' tolerances (tests/web/op_cases_run.mjs)
//   TASK          NAME:BACKEND[:PLAN]   BACKEND webgl2 | webgpu (PLAN the webgpu plan: auto (default) | gpu | cpu | cpu-subgroups)
//   OUT/NAME.KEY.f32  what the task computed, every output's f32 values in output order; KEY is the backend
//                     (webgl2) or webgpu-PLAN with the plan that ran
// Prints one JSON line {"results": {NAME: {KEY: {backend, plan, adapter, renderer, kernels, outputs, passed,
// failed}}}} (a task that threw gets {error} under KEY = its BACKEND[-PLAN]), after one line per task for people.
// Exit 0 = every task ran, 1 = a task threw or the page broke, 2 = the environment lacks chromium or playwright-core.
// No timing is asserted.
import fs from 'node:fs';
import path from 'node:path';

import { guard, loadChromium, withCheckPage } from './browser.mjs';
import { summaryLine } from './web/op_cases_run.mjs';

const [root, out, ...tasks] = process.argv.slice(2);
if (!root || !out || !tasks.length) {
  console.error('usage: node web_ops_check.mjs ROOT OUT NAME:webgl2|webgpu[:PLAN]...');
  process.exit(2);
}
const chromium = await loadChromium();
fs.mkdirSync(out, { recursive: true });

const results = {};
const messages = [];
let status = 0;
try {
  await withCheckPage(chromium, root, { console: messages }, async ({ page }) => {
    for (const task of tasks) {
      const [name, backend, plan = 'auto'] = task.split(':');
      const r = await guard(page.evaluate(([n, b, p]) => window.sgOpCases(n, b, p), [name, backend, plan]),
                            `task ${task}`, 300);
      results[name] ??= {};
      if (!r.ok) {
        results[name][backend === 'webgpu' ? `webgpu-${plan}` : backend] = { error: r.error };
        console.error(`${task}: ${r.error.name}: ${r.error.message.split('\n').slice(0, 2).join(' ')}`);
        status = 1;
        continue;
      }
      const key = r.result.plan ? `webgpu-${r.result.plan.name}` : r.result.backend;
      results[name][key] = r.result;
      fs.writeFileSync(path.join(out, `${name}.${key}.f32`), Buffer.from(r.values, 'base64'));
      console.error(summaryLine(name, r.result));
    }
  });
} catch (e) {
  results.harness_error = e.message;
  status = 1;
}
if (status) console.error(messages.join('\n'));
console.log(JSON.stringify({ results }));
process.exit(status);
