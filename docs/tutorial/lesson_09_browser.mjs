// Lesson 9's browser half: runs a bundle (lesson_09_web_export.cpp writes it) in headless Chromium with the runtime
// copy inside the bundle, on WebGPU and then on WebGL2. For each API: the bundle's checks (the browser's outputs and
// weights against the native CPU reference backend's), then 30 Adam steps on the checks' batch, printing the loss;
// the two APIs' loss curves must agree.
//
// Usage: node docs/tutorial/lesson_09_browser.mjs BUNDLE_DIR
// Exit status: 0 = both APIs passed the checks, the loss fell below 0.7 of its first value and the two curves agree
// within 1e-3; 1 = not; 2 = node, chromium or playwright-core
// missing (tests/browser.mjs says which).
import { guard, loadChromium, withCheckPage } from '../../tests/browser.mjs';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node docs/tutorial/lesson_09_browser.mjs BUNDLE_DIR');
  process.exit(2);
}
const chromium = await loadChromium();  // exits 2 when chromium or playwright-core is missing

// tests/browser.mjs serves DIR at / (and its test page at /_test/, used here as a blank page of the same origin)
const results = await withCheckPage(chromium, dir, { isolated: true }, ({ page }) => guard(page.evaluate(async () => {
  const { createRuntime } = await import('/runtime/shadergrad.js');  // the runtime the bundle carries
  const out = [];
  for (const backend of ['webgpu', 'webgl2']) {
    const rt = await createRuntime('/bundle.json', { backend });
    const report = await rt.runChecks();           // infer, 3 train steps, infer: against the CPU reference
    // the checks' training batch, from the bundle (expected.safetensors holds the fixed inputs)
    const checks = await rt.bundle.loadChecks();
    const run = checks.runs.find((r) => r.program === 'train');
    const x = rt.bundle.data(run.feeds.x), labels = rt.bundle.data(run.feeds.labels);
    const losses = [];
    for (let step = 0; step < 30; ++step) losses.push((await rt.run('train', { x, labels })).loss[0]);
    out.push({ backend: rt.backend, plan: rt.webgpuPlan ? rt.webgpuPlan.name : null, checks: report.ok, losses });
    rt.dispose();
  }
  return out;
}), 'the lesson page'));

let ok = results.length === 2;
for (const r of results) {
  const first = r.losses[0], last = r.losses[r.losses.length - 1];
  const fell = last < 0.7 * first;
  ok = ok && r.checks && fell;
  console.log(`${r.backend}${r.plan ? ` (${r.plan} plan)` : ''}: checks against the native CPU backend ` +
              `${r.checks ? 'passed' : 'FAILED'}; loss ${first.toFixed(4)} -> ${last.toFixed(4)} in 30 steps` +
              `${fell ? '' : ' (it should fall below 0.7 of the first)'}`);
}
// Two APIs, two languages (WGSL, GLSL ES), one kernel IR: the loss curves agree step by step.
const worst = Math.max(...results[0].losses.map((l, i) => Math.abs(l - results[1].losses[i]) / Math.abs(l)));
const agree = worst < 1e-3;
ok = ok && agree;
console.log(`WebGPU and WebGL2 losses agree at every step: largest relative difference ${worst.toExponential(2)}` +
            `${agree ? '' : ' (more than 1e-3)'}`);
process.exit(ok ? 0 : 1);
