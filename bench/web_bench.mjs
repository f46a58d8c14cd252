// Benchmark (not a test): our exported bundles on WebGPU and on WebGL2 in headless Chromium (SwiftShader here)
// beside the peers on the same API — TF.js 4.22 (webgl, webgpu) and jax-js 0.1.25 (webgpu, webgl) — with the same
// models (../shared/PEERS.md): MLP 784-128-10 Adam lr 1e-3 at batch 32 and 128, seed 002's digits CNN (8-16-32,
// 1x8x8) Adam 2e-3 at batch 64, SGEMM [N,N]x[N,N] for N = 256, 512, 1024 (C read back; GFLOP/s = 2N^3 / t). Per
// case: first step (from nothing to the first result: bundle fetch, device, weight upload, shader compile, first
// run; peers: variables, compile, first step), then warm-up and timed steps (train 10 + 50, SGEMM 3 + 10), median
// (min-max). Each train step reads back only the scalar loss. The table gives, per API, the best peer's median over
// ours (> 1: we are faster).
//
//   (cd bench/web && npm ci)                     # TF.js, jax-js, playwright-core, pinned in package-lock.json
//   node bench/web_bench.mjs --cli build/bin/shadergrad --exporter build/bin/bench_web_export [--json FILE]
//        [--no-peers] [--peers tfjs,jax] [--only mlp_b32,sgemm_256,...] [--api webgpu,webgl2,wasm] [--no-gpu-plan]
//        [--profile] [--rounds R] [--base-cli OLD/shadergrad --base-exporter OLD/bench_web_export] [--no-jax]
//
// --no-jax: the same as --peers tfjs (jax-js takes seconds per SGEMM step on SwiftShader).
//
// --rounds R measures every row R times, interleaved (ours, base, peers per case, then the next round): the table
// gives the median of the rounds' medians and their range (this machine is shared: its load moves between rows).
// --base-cli/--base-exporter export the same cases with another build ("base": before a change) and time its
// picked webgpu plan and its webgl2 plan beside ours in each round. The 1-minute load average is sampled before
// every measurement and printed at the end.
//
// Ours: the default export (both targets; the webgpu target with its gpu, cpu and cpu-subgroups plans) run with
// backend 'webgpu' — the plan the runtime picks for the adapter (cpu-subgroups on SwiftShader) and the gpu plan
// forced — and 'webgl2', and the webgl2 plan with 8 draw buffers (what SwiftShader and most desktop GPUs offer)
// where its shaders differ from the default's. The ratio is the default export's (the plan the runtime picks);
// the other variants are listed beside it. --api limits the rows to one API; --profile adds per-kernel timings of
// one train step (the picked webgpu plan).
//
// --api wasm (not in the default list; issue 39): our wasm plan (the default export's WebAssembly SIMD128 kernels;
// runtime backend forced to 'wasm'; the page is crossOriginIsolated, so the runtime's default threads, min(4,
// hardwareConcurrency) — one thread before Run W19) beside jax-js 0.1.25's wasm backend (its CPU path in the page; it
// may use the page's threads too) on the same cases (train and lm; no TF.js row, no SGEMM).
// bench/wasm_threads_bench.mjs times our wasm plan on 1 vs N threads alone.
//
// charlm_b32 (issue 37; kind 'lm', only with --only charlm_b32: minutes on SwiftShader): `shadergrad export --model charlm
// --batch 32 --context 64`'s train program (one AdamW step, lr 1e-3, weight decay 0.01, global-norm clip 1) against
// the same CharTransformer, loss, AdamW and clipping written in jax-js (bench_models.js jaxCharlmLoss) on webgpu and
// webgl; both train on the same 32 rows of /usr/share/dict/words (charlmRows, make_word_rows' rule); 3 warm-up + 10
// timed steps; no TF.js row. The step-1 losses are printed under the table (a sanity check: near ln 27 = 3.30).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { startBenchServer } from './bench_server.mjs';
import { BENCH_CASES, charlmRows } from './web/bench_models.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name, dflt) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : dflt; };
const flag = (name) => process.argv.includes(name);
const cli = arg('--cli', path.join(here, '..', 'build', 'bin', 'shadergrad'));
const exporter = arg('--exporter', path.join(here, '..', 'build', 'bin', 'bench_web_export'));
const baseCli = arg('--base-cli'), baseExporter = arg('--base-exporter', baseCli && path.join(path.dirname(baseCli), 'bench_web_export'));
const rounds = Number(arg('--rounds', '1'));
const npmDir = path.join(here, 'web', 'node_modules');
let chromium;
try {
  ({ chromium } = await import(path.join(npmDir, 'playwright-core', 'index.mjs')));
} catch (e) {
  console.error(`bench/web/node_modules is missing: run 'npm ci' in bench/web (${e.message})`);
  process.exit(2);
}

const allCases = BENCH_CASES;
const only = arg('--only');
const cases = only ? allCases.filter((c) => only.split(',').includes(c.name)) : allCases.filter((c) => c.kind !== 'lm');
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_web_bench_'));
// variants of ours: the default export (webgpu gpu and cpu plans, webgl2); its webgl2 plan with 8 draw buffers
const variants = [['', ['--max-draw-buffers', '4'], ['--max-draw-buffers', '4']],
                  ['_db8', ['--max-draw-buffers', '8', '--targets', 'webgl2'], ['--max-draw-buffers', '8']]];
const apis = (arg('--api') || 'webgpu,webgl2').split(',');
const on = (api) => apis.includes(api);
const peers = flag('--no-jax') ? ['tfjs'] : (arg('--peers') || 'tfjs,jax').split(',');
if (!on('webgl2')) variants.splice(1);  // the webgl2-only variant
const builds = [['', cli, exporter], ...(baseCli ? [['_base', baseCli, baseExporter]] : [])];
for (const c of cases)
  for (const [build, bcli, bexporter] of builds)
    for (const [suffix, exportArgs, sgemmArgs] of (build ? variants.slice(0, 1) : variants)) {
      const out = path.join(root, c.name + build + suffix);
      if (c.kind === 'train' || c.kind === 'lm')
        execFileSync(bcli, ['export', '--model', c.model, '--batch', String(c.size), '--check-steps', '0', ...exportArgs,
                            ...(c.context ? ['--context', String(c.context)] : []), '--out', out], { stdio: 'ignore' });
      else execFileSync(bexporter, ['sgemm', String(c.size), out, ...sgemmArgs], { stdio: 'ignore' });
    }

// the 8-draw-buffer variant is measured only where its fragment shaders differ from the default export's (the
// schedule gives more render targets only to kernels that use them: many cases export the same shaders)
const fragShaders = (dir) => {
  const sdir = path.join(dir, 'shaders');
  if (!fs.existsSync(sdir)) return '';
  return fs.readdirSync(sdir, { recursive: true }).filter((f) => f.endsWith('.frag')).sort()
    .map((f) => `${f}\n${fs.readFileSync(path.join(sdir, f), 'utf8')}`).join('\n');
};
const db8Same = new Set(variants.length > 1
  ? cases.filter((c) => fragShaders(path.join(root, c.name)) === fragShaders(path.join(root, c.name + '_db8'))).map((c) => c.name)
  : []);
for (const name of db8Same) console.log(`${name}: the 8-draw-buffer export has the default export's fragment shaders; not measured twice`);

// the lm cases' feeds (the same word rows for ours and jax-js) and step counts
const lmRows = new Map(cases.filter((c) => c.kind === 'lm')
  .map((c) => [c.name, charlmRows(fs.readFileSync('/usr/share/dict/words', 'utf8'), c.size, c.context)]));
const given = (c) => (c.kind === 'lm' ? { feeds: lmRows.get(c.name), counts: c.counts } : null);
for (const [name, r] of lmRows) console.log(`${name}: rows of the words ${r.words.join(' ')}`);

const { server, origin } = await startBenchServer(root, npmDir);

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
         '--enable-unsafe-webgpu'],
  // (playwright starts every launch with a fresh temporary user-data dir)
});
const results = [];
let round = 0;
const ms = (r) => `${r.median_ms.toFixed(2)} ms (${r.min_ms.toFixed(2)}-${r.max_ms.toFixed(2)}), first ${r.first_step_ms.toFixed(0)} ms`;
/** One measurement in a fresh page (peers keep global state: TF.js backends, jax-js devices). */
async function measure(fn, args) {
  const page = await browser.newPage();
  page.setDefaultTimeout(600000);
  try {
    await page.goto(`${origin}/_bench/bench_page.html`);
    await page.waitForFunction(() => window.benchReady === true);
    return await page.evaluate(([f, a]) => window[f](...a), [fn, args]);
  } catch (e) {
    return { error: e.message.split('\n')[0] };
  } finally {
    await page.close();
  }
}
const record = (c, api, who, r) => {
  results.push({ case: c.name, api, who, round, load1: os.loadavg()[0], ...r });
  const what = r.error ? `ERROR ${r.error}` : `${ms(r)}${r.kernels ? `, ${r.kernels} kernels` : ''}, ` +
    `${c.kind === 'sgemm' ? `${(2 * c.size ** 3 / (r.median_ms * 1e6)).toFixed(2)} GFLOP/s` : `loss ${r.values.map((l) => l.toFixed(4)).join(' -> ')}`}`;
  console.log(`${c.name.padEnd(10)} ${api.padEnd(6)} ${who.padEnd(26)} ${what}` +
              (r.webgpu_plan ? ` [${r.webgpu_plan} plan: ${r.webgpu_plan_reason}]` : ''));
};
for (round = 0; round < rounds; ++round) for (const c of cases) {
  const program = c.kind === 'sgemm' ? 'sgemm' : 'train', g = given(c);
  if (on('webgpu')) {
    record(c, 'webgpu', 'shadergrad (picked plan)', await measure('benchOurs', [c.name, program, 'webgpu', false, 'auto', g]));
    if (baseCli)
      record(c, 'webgpu', 'base (picked plan)', await measure('benchOurs', [`${c.name}_base`, program, 'webgpu', false, 'auto', g]));
    if (!flag('--no-gpu-plan'))
      record(c, 'webgpu', 'shadergrad (gpu plan)', await measure('benchOurs', [c.name, program, 'webgpu', false, 'gpu', g]));
  }
  if (on('wasm') && c.kind !== 'sgemm')
    record(c, 'wasm', 'shadergrad', await measure('benchOurs', [c.name, program, 'wasm', false, 'auto', g]));
  if (on('webgl2')) {
    record(c, 'webgl2', 'shadergrad', await measure('benchOurs', [c.name, program, 'webgl2', false, 'auto', g]));
    if (!db8Same.has(c.name))
      record(c, 'webgl2', 'shadergrad (8 draw buffers)', await measure('benchOurs', [`${c.name}_db8`, program, 'webgl2', false, 'auto', g]));
    if (baseCli) record(c, 'webgl2', 'base', await measure('benchOurs', [`${c.name}_base`, program, 'webgl2', false, 'auto', g]));
  }
  if (flag('--no-peers')) continue;
  if (c.kind === 'lm') {  // jax-js only (the same CharTransformer written in jax-js); TF.js is the legacy peer
    if (!peers.includes('jax')) continue;
    if (on('webgpu')) record(c, 'webgpu', 'jax-js 0.1.25 webgpu', await measure('benchJaxCharlm', [c, lmRows.get(c.name), 'webgpu']));
    if (on('webgl2'))  // its webgl backend has no Scatter (np.take's gradient): the embedding is a one-hot product there
      record(c, 'webgl2', 'jax-js 0.1.25 webgl (one-hot emb.)', await measure('benchJaxCharlm', [c, lmRows.get(c.name), 'webgl']));
    if (on('wasm')) record(c, 'wasm', 'jax-js 0.1.25 wasm', await measure('benchJaxCharlm', [c, lmRows.get(c.name), 'wasm']));
    continue;
  }
  const tfjs = peers.includes('tfjs'), jax = peers.includes('jax');
  if (on('webgl2') && tfjs) record(c, 'webgl2', 'tfjs 4.22 webgl', await measure('benchTfjs', [c.kind, c.model, c.size, 'webgl']));
  if (on('webgpu') && tfjs) record(c, 'webgpu', 'tfjs 4.22 webgpu', await measure('benchTfjs', [c.kind, c.model, c.size, 'webgpu']));
  if (on('webgpu') && jax) record(c, 'webgpu', 'jax-js 0.1.25 webgpu', await measure('benchJax', [c.kind, c.model, c.size, 'webgpu']));
  if (on('webgl2') && jax) record(c, 'webgl2', 'jax-js 0.1.25 webgl', await measure('benchJax', [c.kind, c.model, c.size, 'webgl']));
  if (on('wasm') && jax && c.kind !== 'sgemm')
    record(c, 'wasm', 'jax-js 0.1.25 wasm', await measure('benchJax', [c.kind, c.model, c.size, 'wasm']));
}
if (flag('--profile'))
  for (const c of cases.filter((x) => x.kind === 'train' || x.kind === 'lm'))
    for (const backend of ['webgpu', 'webgl2'].filter(on)) {
      const r = await measure('benchOurs', [c.name, 'train', backend, true, 'auto', given(c)]);
      if (r.error) { console.log(`profile ${c.name} ${backend}: ${r.error}`); continue; }
      console.log(`\nper-kernel times, ${c.name} on ${backend}${r.webgpu_plan ? ` (${r.webgpu_plan} plan)` : ''} (${r.timings[0]?.gpu_timer ? 'GPU timer' : 'host time'}):`);
      for (const t of r.timings) console.log(`  ${t.kernel.padEnd(36)} ${t.ms.toFixed(3)} ms`);
    }

// the table: per case and API, ours (the default export: on WebGPU the plan the runtime picks, on WebGL2 its webgl2
// plan) against the best peer on the same API, and our other variants' medians beside it (not the ratio: picking
// the better of two variants per case would favour ours by the noise alone); with rounds, each row's cells are the
// median of its rounds' medians (min–max: the rounds' medians' range)
const ok = (r) => r && !r.error;
const median = (a) => { const b = [...a].sort((x, y) => x - y); return b.length % 2 ? b[b.length >> 1] : (b[b.length / 2 - 1] + b[b.length / 2]) / 2; };
const merged = [];
for (const r of results.filter(ok)) {
  const m = merged.find((x) => x.case === r.case && x.api === r.api && x.who === r.who);
  if (m) m.all.push(r); else merged.push({ ...r, all: [r] });
}
for (const m of merged)
  if (m.all.length > 1) {
    const meds = m.all.map((r) => r.median_ms);
    Object.assign(m, { median_ms: median(meds), min_ms: Math.min(...meds), max_ms: Math.max(...meds),
                       first_step_ms: median(m.all.map((r) => r.first_step_ms)) });
  }
const rows = [];
const isOurs = (r) => r.who.startsWith('shadergrad'), isBase = (r) => r.who.startsWith('base');
for (const c of cases)
  for (const api of ['webgpu', 'webgl2', 'wasm'].filter(on)) {
    const mine = merged.filter((r) => r.case === c.name && r.api === api && isOurs(r));
    const peers = merged.filter((r) => r.case === c.name && r.api === api && !isOurs(r) && !isBase(r));
    const base = merged.find((r) => r.case === c.name && r.api === api && isBase(r));
    const best = (l) => l.reduce((a, b) => (!a || b.median_ms < a.median_ms ? b : a), null);
    const o = mine.find((r) => r.who === (api === 'webgpu' ? 'shadergrad (picked plan)' : 'shadergrad')), p = best(peers);
    const cell = (r) => (r ? `${r.median_ms.toFixed(2)}` : '–');
    const each = (who) => cell(merged.find((r) => r.case === c.name && r.api === api && r.who.startsWith(who)));
    const plan = o?.webgpu_plan ? ` (${o.webgpu_plan} plan)` : '';
    const others = mine.filter((r) => r !== o).map((r) => `${r.who.replace('shadergrad ', '')} ${cell(r)}`);
    if (api === 'webgl2' && db8Same.has(c.name)) others.push('(8 draw buffers: the same shaders)');
    const span = (r) => (r ? ` (${r.min_ms.toFixed(2)}–${r.max_ms.toFixed(2)})` : '');
    rows.push(`| ${c.name} | ${api} | ${cell(o)}${span(o)}${plan} | ${others.join(', ') || '–'} | ` +
              (baseCli ? `${cell(base)}${span(base)} | ${base && o ? (base.median_ms / o.median_ms).toFixed(2) + '×' : '–'} | ` : '') +
              `${each('tfjs')} | ` +
              `${each('jax-js')} | ${p ? `${p.who.split(' ')[0]} ${cell(p)}` : '–'} | ` +
              `${o && p ? (p.median_ms / o.median_ms).toFixed(2) + '×' : '–'} | ` +
              `${o ? (o.first_step_ms / 1000).toFixed(2) : '–'} / ${p ? (p.first_step_ms / 1000).toFixed(2) : '–'} |` +
              (c.kind === 'sgemm' && o ? ` ${(2 * c.size ** 3 / (o.median_ms * 1e6)).toFixed(2)} GFLOP/s` : ''));
  }
console.log(`\n| case | API | ours ms (default export) | our other variants ms |${baseCli ? ' base ms | base / ours |' : ''} ` +
            `TF.js ms | jax-js ms | best peer ms | best peer / ours | first step s (ours / best peer) |`);
console.log(`|---|---|---|---|${baseCli ? '---|---|' : ''}---|---|---|---|---|`);
for (const r of rows) console.log(r);
for (const c of cases.filter((x) => x.kind === 'lm'))  // the sanity check: both start near ln(vocab 27) = 3.30
  console.log(`\n${c.name} loss at step 1 (first round; ln 27 = 3.30): ` + results.filter((r) => r.case === c.name && ok(r) && r.round === 0)
    .map((r) => `${r.api} ${r.who} ${r.values[0].toFixed(4)} (${r.steps} timed steps)`).join(', ') +
    ` (${c.counts[0]} warm-up + ${c.counts[1]} timed; 1 + 3 where a step took over 1 s)`);
const renderer = results.find((r) => r.renderer)?.renderer;
const loads = results.map((r) => r.load1);
console.log(`\n${rounds} round(s); 1-minute load average before each measurement ${Math.min(...loads).toFixed(1)}–` +
            `${Math.max(...loads).toFixed(1)} (median ${median(loads).toFixed(1)})`);
console.log(`\nours on: ${[...new Set(results.filter((r) => r.renderer).map((r) => `${r.backend}: ${r.renderer}`))].join('; ')}; ` +
            `${os.cpus().length} CPUs (${os.cpus()[0]?.model}); chromium ${browser.version()}`);
if (arg('--json')) fs.writeFileSync(arg('--json'), JSON.stringify({ date: new Date().toISOString(), renderer,
                                                                     chromium: browser.version(), results }, null, 1));
await browser.close();
server.close();
fs.rmSync(root, { recursive: true, force: true });
