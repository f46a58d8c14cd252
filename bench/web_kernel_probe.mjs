// Benchmark tool (not a test): per-kernel GPU times of exported bundles on WebGL2 or WebGPU in headless Chromium,
// for A/B comparisons of plans (docs/perf-log/W5.md, W6.md). Each bundle directory under ROOT runs one
// program in a fresh page with the runtime's profile mode (WebGL2: EXT_disjoint_timer_query_webgl2 around every
// draw where the context has it, as SwiftShader's does, else a readback bounds each draw; WebGPU: timestamp
// queries around every dispatch, SwiftShader has them; --backend webgpu, the plan the runtime picks unless
// --webgpu-plan gpu|cpu): 1 warm-up run, then STEPS timed runs;
// it prints the median wall time of a run, the sum of the kernels' median GPU times and each kernel's median, and
// the first and last element of the first output (variants of one plan must agree). `tfjs:N` instead of a bundle
// name times TF.js 4.22's webgl matMul of two N x N matrices (wall time, C read back) in the same browser.
// --rounds R repeats the list R times, interleaved (this machine is shared: compare rows of one round).
//
//   (cd bench/web && npm ci)
//   build/bin/bench_web_export sgemm 512 /tmp/b/new && OTHER/bench_web_export sgemm 512 /tmp/b/old
//   nice -n 10 node bench/web_kernel_probe.mjs --root /tmp/b --program sgemm [--steps 5] [--rounds 2] [--quiet]
//     [--backend webgl2|webgpu] [--webgpu-plan auto|gpu|cpu] [--stat median|min] [--no-profile]
//     new old tfjs:512
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium, loadChromium, serveStatic } from '../tests/browser.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv.splice(i, 2)[1] : dflt; };
const quiet = argv.includes('--quiet') ? (argv.splice(argv.indexOf('--quiet'), 1), true) : false;
const root = opt('--root'), program = opt('--program', 'train');
const steps = Number(opt('--steps', '5')), rounds = Number(opt('--rounds', '1'));
const backend = opt('--backend', 'webgl2'), webgpuPlan = opt('--webgpu-plan', 'auto');
// --stat min: each kernel's (and the wall time's) fastest run instead of the median (on a loaded machine the
// minimum is the steadier estimate of what a kernel costs by itself)
const stat = opt('--stat', 'median');
// --no-profile: the runtime without its profile mode (one compute pass per step, no timestamp queries): wall time only
const profile = argv.includes('--no-profile') ? (argv.splice(argv.indexOf('--no-profile'), 1), false) : true;
if (!root || argv.length === 0) {
  console.error('usage: web_kernel_probe.mjs --root DIR [--program NAME] [--steps N] [--rounds R] [--quiet] ' +
                '[--backend webgl2|webgpu] [--webgpu-plan auto|gpu|cpu] BUNDLE|tfjs:N ...');
  process.exit(2);
}
const npmDir = path.join(here, 'web', 'node_modules');
const chromium = await loadChromium(npmDir);
const server = await serveStatic([{ prefix: '/_bench/', dir: path.join(here, 'web') }, { prefix: '/_npm/', dir: npmDir },
                                  { prefix: '/', dir: root }], { isolated: true });
const browser = await launchChromium(chromium, { webgpu: backend === 'webgpu' });

/** Page side: a bundle's program, profiled. */
async function runBundle([name, prog, n, backend, webgpuPlan, stat, profile]) {
  const t0 = performance.now();
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  const rt = await mod.createRuntime(`/${name}/bundle.json`, { profile, backend, webgpuPlan });
  const p = rt.bundle.program(prog);
  let s = 1;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
  const feeds = {};
  for (const i of p.inputs) {
    const k = i.shape.reduce((a, b) => a * b, 1);
    feeds[i.name] = Float32Array.from({ length: k }, () => (i.dtype === 'i32' ? Math.floor(rnd() * 10) : rnd()));
  }
  const out = p.outputs[0].name;
  await rt.run(prog, feeds);
  const setup = performance.now() - t0;  // runtime creation (fetch, compile, link) and the first run
  const per = {}, wall = [];
  let v;
  for (let k = 0; k < n; ++k) {
    const t = performance.now();
    v = (await rt.run(prog, feeds))[out];
    wall.push(performance.now() - t);
    if (profile) for (const x of await rt.timings()) (per[x.kernel] ||= []).push(x.ms);
  }
  const med = (a) => { const b = [...a].sort((x, y) => x - y); return stat === 'min' ? b[0] : b[b.length >> 1]; };
  const kernels = {};
  for (const [k, a] of Object.entries(per)) kernels[k] = med(a);
  rt.dispose();
  return { wall: med(wall), first: v[0], last: v[v.length - 1], kernels, setup };
}

/** Page side: TF.js webgl matMul N x N (the web_bench inputs' generator). */
async function runTfjs([size, n]) {
  const tf = window.tf;
  await tf.setBackend('webgl');
  await tf.ready();
  let s = 1;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
  const mk = () => tf.tensor(Float32Array.from({ length: size * size }, rnd), [size, size]);
  const a = mk(), b = mk(), wall = [];
  let d;
  for (let k = 0; k < n + 1; ++k) {
    const t = performance.now();
    const c = tf.matMul(a, b);
    d = await c.data();
    c.dispose();
    if (k > 0) wall.push(performance.now() - t);
  }
  const med = (x) => { const y = [...x].sort((p, q) => p - q); return y[y.length >> 1]; };
  return { wall: med(wall), first: d[0], last: d[d.length - 1], kernels: {} };
}

for (let round = 0; round < rounds; ++round)
  for (const name of argv) {
    const page = await browser.newPage();
    page.setDefaultTimeout(600000);
    await page.goto(`${server.origin}/_bench/bench_page.html`);
    const r = await (name.startsWith('tfjs:') ? page.evaluate(runTfjs, [Number(name.slice(5)), steps])
                                             : page.evaluate(runBundle, [name, program, steps, backend, webgpuPlan, stat, profile]))
      .catch((e) => ({ error: e.message.split('\n').slice(0, 4).join(' ') }));
    await page.close();
    if (r.error) { console.log(`${name}: ERROR ${r.error}`); continue; }
    const sum = Object.values(r.kernels).reduce((a, b) => a + b, 0);
    console.log(`${name}: wall ${r.wall.toFixed(1)} ms, GPU sum ${sum.toFixed(1)} ms, out[0] ${r.first}, out[-1] ${r.last}` +
                (r.setup !== undefined ? `, set-up + first run ${r.setup.toFixed(0)} ms` : ''));
    if (!quiet) for (const [k, t] of Object.entries(r.kernels)) console.log(`   ${k.padEnd(40)} ${t.toFixed(2)} ms`);
  }
await browser.close();
server.close();
