// Benchmark (not a test): issue 37's charlm_b32 train step of several exported bundles A/B in one headless Chromium
// (SwiftShader), per kernel. Used for docs/perf-log/W21.md.
//   node bench/web_kernel_ab.mjs ROUNDS ROOT NAME1 NAME2 ...   (ROOT/NAMEi: `shadergrad export --model charlm --batch 32
//        --context 64 --check-steps 0 --out ROOT/NAMEi` of each build; AB_OUT=FILE.json for the raw timings; a bundle
//        of another model, e.g. --model mlp --batch 128, gets fixed random inputs)
// One page per bundle, its two runtimes (plain and profile: true) made once; the rounds interleave the bundles: per
// round and bundle 2 plain steps (host-timed) then 1 profiled step (per-kernel GPU timestamps: on SwiftShader one
// compute pass per kernel). Prints each bundle's step median/min and the sums of its kernels' min and median times
// (the sum against the step time: what the JavaScript side and submission add).
import fs from 'node:fs'; import os from 'node:os'; import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startBenchServer } from './bench_server.mjs';
const here = path.dirname(fileURLToPath(import.meta.url));
const { charlmRows, BENCH_CASES } = await import(path.join(here, 'web', 'bench_models.js'));
const npmDir = path.join(here, 'web', 'node_modules');
const { chromium } = await import(path.join(npmDir, 'playwright-core', 'index.mjs'));
const [rounds, rootArg, ...names] = process.argv.slice(2);
const root = path.resolve(rootArg);
const c = BENCH_CASES.find((x) => x.name === 'charlm_b32');
const rows = charlmRows(fs.readFileSync('/usr/share/dict/words', 'utf8'), c.size, c.context);
const { server, origin } = await startBenchServer(root, npmDir);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--enable-unsafe-webgpu'] });
const pages = {};
for (const n of names) {
  const page = await browser.newPage(); page.setDefaultTimeout(600000);
  await page.goto(`${origin}/_bench/bench_page.html`); await page.waitForFunction(() => window.benchReady === true);
  await page.evaluate(async ([n, rows]) => {
    const mod = await import(`/${n}/runtime/shadergrad.js`);
    const mk = async (profile) => {
      const rt = await mod.createRuntime(`/${n}/bundle.json`, { profile, backend: 'webgpu', webgpuPlan: 'auto' });
      const p = rt.bundle.program('train'), feeds = {};
      let seed = 1;
      const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
      for (const i of p.inputs) {  // the charlm rows; another bundle's inputs (an MLP's x, labels): fixed random values
        const n = i.shape.reduce((x, y) => x * y, 1);
        feeds[i.name] = rows[i.name]?.length === n ? Float32Array.from(rows[i.name])
          : Float32Array.from({ length: n }, () => (i.dtype === 'i32' ? Math.floor(rnd() * 10) : rnd()));
      }
      return { rt, feeds, out: p.outputs[0].name };
    };
    window.abN = await mk(false); window.abP = await mk(true);
    for (const x of [window.abN, window.abP]) await x.rt.run('train', x.feeds);
  }, [n, rows]);
  pages[n] = page;
}
const res = Object.fromEntries(names.map((n) => [n, { steps: [], prof: [], loss: [] }]));
for (let r = 0; r < Number(rounds); ++r)
  for (const n of names) {
    const o = await pages[n].evaluate(async () => {
      const steps = [];
      let loss;
      for (let i = 0; i < 2; ++i) { const s = performance.now(); loss = (await abN.rt.run('train', abN.feeds))[abN.out][0]; steps.push(performance.now() - s); }
      const s = performance.now(); await abP.rt.run('train', abP.feeds); const pstep = performance.now() - s;
      return { steps, loss, pstep, timings: await abP.rt.timings() };
    });
    res[n].steps.push(...o.steps); res[n].prof.push(o.timings); res[n].loss.push(o.loss);
    const sum = o.timings.reduce((a, x) => a + x.ms, 0);
    console.log(`round ${r} ${n.padEnd(8)} steps ${o.steps.map((x) => x.toFixed(0)).join(' ')} profiled ${o.pstep.toFixed(0)} (sum ${sum.toFixed(0)}) loss ${o.loss.toFixed(4)} load ${os.loadavg()[0].toFixed(2)}`);
  }
const med = (a) => { const b = [...a].sort((x, y) => x - y); return b.length % 2 ? b[b.length >> 1] : (b[b.length / 2 - 1] + b[b.length / 2]) / 2; };
for (const n of names) {
  const ks = {};
  for (const t of res[n].prof) for (const k of t) (ks[k.kernel] ??= []).push(k.ms);
  const mins = Object.values(ks).map((v) => Math.min(...v)), meds = Object.values(ks).map(med);
  console.log(`${n.padEnd(8)} step median ${med(res[n].steps).toFixed(1)} min ${Math.min(...res[n].steps).toFixed(1)} (${res[n].steps.length} steps); kernels ${Object.keys(ks).length}, sum of per-kernel mins ${mins.reduce((a, b) => a + b, 0).toFixed(1)}, of medians ${meds.reduce((a, b) => a + b, 0).toFixed(1)}`);
}
fs.writeFileSync(process.env.AB_OUT || path.join(os.tmpdir(), 'web_kernel_ab.json'), JSON.stringify(res, null, 1));
await browser.close(); server.close();
