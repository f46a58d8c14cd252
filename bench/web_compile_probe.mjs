// Benchmark tool (not a test): time to create each WebGPU compute pipeline of an exported bundle's program in
// headless Chromium (on SwiftShader the pipeline's creation is its JIT compile, the bulk of a bundle's first step).
// Each bundle directory under ROOT runs in a fresh page; every kernel of PROGRAM's plan (cpu unless --plan gpu) is
// compiled with createShaderModule + createComputePipeline (sync, layout 'auto', one at a time); it prints each
// kernel's milliseconds and their sum. --rounds R repeats the list, interleaved.
//
//   (cd bench/web && npm ci)
//   nice -n 10 node bench/web_compile_probe.mjs --root DIR [--program train] [--plan cpu|gpu] [--rounds 2] new base
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium, loadChromium, serveStatic } from '../tests/browser.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv.splice(i, 2)[1] : dflt; };
const root = opt('--root'), program = opt('--program', 'train'), plan = opt('--plan', 'cpu');
const rounds = Number(opt('--rounds', '1'));
if (!root || argv.length === 0) {
  console.error('usage: web_compile_probe.mjs --root DIR [--program NAME] [--plan cpu|gpu] [--rounds R] BUNDLE ...');
  process.exit(2);
}
const npmDir = path.join(here, 'web', 'node_modules');
const chromium = await loadChromium(npmDir);
const server = await serveStatic([{ prefix: '/_bench/', dir: path.join(here, 'web') }, { prefix: '/', dir: root }],
                                 { isolated: true });
const browser = await launchChromium(chromium, { webgpu: true });

/** Page side: compile every kernel of one program's plan, one at a time. */
async function compileAll([name, prog, plan]) {
  const bundle = await (await fetch(`/${name}/bundle.json`)).json();
  const p = bundle.programs[prog][plan === 'cpu' ? 'webgpu_cpu' : 'webgpu'];
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({ requiredLimits: { maxComputeWorkgroupStorageSize: 16384 } });
  const out = {};
  for (const k of p.kernels) {
    const code = await (await fetch(`/${name}/${k.wgsl}`)).text();
    const t = performance.now();
    const module = device.createShaderModule({ code });
    device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: k.entry_point || 'main' } });
    await device.queue.onSubmittedWorkDone();
    out[k.name] = performance.now() - t;
  }
  device.destroy();
  return out;
}

for (let round = 0; round < rounds; ++round)
  for (const name of argv) {
    const page = await browser.newPage();
    page.setDefaultTimeout(600000);
    await page.goto(`${server.origin}/_bench/bench_page.html`);
    const r = await page.evaluate(compileAll, [name, program, plan]).catch((e) => ({ error: e.message }));
    await page.close();
    if (r.error) { console.log(`${name}: ERROR ${r.error}`); continue; }
    const sum = Object.values(r).reduce((a, b) => a + b, 0);
    console.log(`${name}: compile sum ${sum.toFixed(0)} ms`);
    for (const [k, t] of Object.entries(r)) console.log(`   ${k.padEnd(40)} ${t.toFixed(0)} ms`);
  }
await browser.close();
server.close();
