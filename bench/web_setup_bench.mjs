// Benchmark tool (not a test): where a bundle's set-up time goes, from nothing to the first result of one program,
// on WebGPU and WebGL2 in headless Chromium (SwiftShader here). Each measurement starts a new browser (Chromium's
// GPU process keeps compiled shaders and pipelines in memory across pages of one browser: a second page compiling
// the same sources is faster, so two runtimes measured in one browser are not compared fairly) and opens a bare
// page, which imports the bundle's own runtime copy (BUNDLE/runtime/shadergrad.js), then times
//   import        the runtime's modules
//   create        createRuntime(url, {backend, setupProfile: true, ...--options}): bundle fetch and checks,
//                 device, uploads, shader compile / pipelines (eager) — rt.stats.phases breaks it down where the
//                 runtime has them (older runtimes: load_ms and setup_ms only)
//   first run     the first run() of --program (with lazy compile: its kernels' compile included)
//   second run    the next run(), nothing compiled
// and prints one row per bundle and backend per round, interleaved (round 1: every bundle, then round 2: ...), the
// load average before each, then the medians.
//
//   (cd bench/web && npm ci)
//   nice -n 10 node bench/web_setup_bench.mjs --root DIR [--program infer] [--backend webgpu,webgl2] [--rounds 3]
//        [--options '{"compile":"all"}'] [--json FILE] [--kernels] [--same-browser] BUNDLE ...
// BUNDLE: a folder under DIR written by `shadergrad export` (its runtime/ is the runtime measured: copy another
// runtime/web over it to compare runtimes on the same bundle). --kernels: print the per-kernel compile times of
// the last round (rt.stats.kernels, the slowest first; with --options '{"setupProfile":true}' each kernel's own).
// --same-browser: one browser for every measurement (to see what Chromium's in-memory caches give a later page).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium, loadChromium, serveStatic } from '../tests/browser.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv.splice(i, 2)[1] : dflt; };
const flag = (name) => (argv.includes(name) ? (argv.splice(argv.indexOf(name), 1), true) : false);
const root = opt('--root'), program = opt('--program', 'infer');
const backends = opt('--backend', 'webgpu,webgl2').split(',');
const rounds = Number(opt('--rounds', '3'));
const options = JSON.parse(opt('--options', '{}'));
const jsonOut = opt('--json');
const kernels = flag('--kernels');
// --same-browser: every measurement in one browser (new pages): shows how much Chromium's in-memory shader and
// pipeline caches give a page that compiles sources an earlier page compiled
const sameBrowser = flag('--same-browser');
if (!root || !argv.length) {
  console.error('usage: web_setup_bench.mjs --root DIR [--program NAME] [--backend webgpu,webgl2] [--rounds R] ' +
                "[--options JSON] [--json FILE] [--kernels] BUNDLE ...");
  process.exit(2);
}
const chromium = await loadChromium(path.join(here, 'web', 'node_modules'));
const pageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_setup_bench_'));
fs.writeFileSync(path.join(pageDir, 'index.html'), '<!doctype html><title>set-up bench</title>\n');
const server = await serveStatic([{ prefix: '/_setup/', dir: pageDir }, { prefix: '/', dir: root }]);

/** Page side: from nothing to the first and second result of `prog`. */
async function firstRun([name, prog, backend, opts]) {
  const t0 = performance.now();
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  const t1 = performance.now();
  const rt = await mod.createRuntime(`/${name}/bundle.json`, { backend, setupProfile: true, ...opts });
  const t2 = performance.now();
  const p = rt.bundle.program(prog);
  let s = 7;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
  const feeds = {};
  for (const i of p.inputs) {
    const k = i.shape.reduce((a, b) => a * b, 1);
    feeds[i.name] = Float32Array.from({ length: k }, () => (i.dtype === 'i32' ? Math.floor(rnd() * (i.classes || 2))
                                                                               : rnd()));
  }
  await rt.run(prog, feeds);
  const t3 = performance.now();
  await rt.run(prog, feeds);
  const t4 = performance.now();
  const r = { backend: rt.backend, plan: rt.webgpuPlan?.name ?? null, import_ms: t1 - t0, create_ms: t2 - t1,
              first_run_ms: t3 - t2, second_run_ms: t4 - t3, total_ms: t3 - t0, stats: rt.stats };
  rt.dispose();
  return r;
}

const rows = [];
/** The shader fetch and compile of `program` when its first run did them (lazy compile), else undefined. */
const firstPrep = (r) => (r.stats?.first_run?.[program]?.compile_ms > 0 ? r.stats.prepared?.[program] : undefined);
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN; };
const fmt = (x) => (x === undefined || Number.isNaN(x) ? '–' : x.toFixed(0));
const phaseNames = new Set();
const shared = sameBrowser ? await launchChromium(chromium, { webgpu: true }) : null;
for (let round = 1; round <= rounds; ++round)
  for (const name of argv)
    for (const backend of backends) {
      const load = os.loadavg()[0];
      const browser = shared ?? await launchChromium(chromium, { webgpu: true });
      try {
        const page = await browser.newPage();
        page.setDefaultTimeout(600000);
        await page.goto(`${server.origin}/_setup/index.html`);
        const r = await page.evaluate(firstRun, [name, program, backend, options]);
        await page.close();
        for (const k of Object.keys(r.stats?.phases ?? {})) phaseNames.add(k);
        rows.push({ round, bundle: name, load, ...r });
        const pr = r.stats?.prepared?.[program];
        const prep = pr && r.stats.first_run?.[program]?.compile_ms > 0
          ? `shader fetch ${fmt(pr.fetch_ms)}, compile ${fmt(pr.compile_ms)} of ${pr.kernels} kernels` : '';
        const ph = Object.entries(r.stats?.phases ?? {}).map(([k, v]) => `${k} ${fmt(v)}`).join(', ');
        console.log(`round ${round} ${name.padEnd(16)} ${backend.padEnd(7)}${r.plan ? ` (${r.plan})` : ''} load ` +
                    `${load.toFixed(1)}: total ${fmt(r.total_ms)} ms = import ${fmt(r.import_ms)} + create ` +
                    `${fmt(r.create_ms)} (load ${fmt(r.stats?.load_ms)}, setup ${fmt(r.stats?.setup_ms)}${ph ? `: ${ph}` : ''})` +
                    ` + first run ${fmt(r.first_run_ms)}${prep ? ` (${prep})` : ''}; second run ${fmt(r.second_run_ms)} ms`);
      } catch (e) {
        console.log(`round ${round} ${name} ${backend}: failed: ${e.message.split('\n')[0]}`);
      } finally {
        if (!shared) await browser.close();
      }
    }

console.log(`\nmedians over ${rounds} round(s), ms (program '${program}'):`);
const cols = ['total', 'import', 'create', 'load', 'setup', ...phaseNames, 'first run', '(its shader fetch', 'compile)',
              'second run'];
console.log(`| bundle | backend | ${cols.join(' | ')} |`);
console.log(`|---|---|${cols.map(() => '---').join('|')}|`);
for (const name of argv)
  for (const backend of backends) {
    const rs = rows.filter((r) => r.bundle === name && r.backend === backend);
    if (!rs.length) continue;
    const m = (f) => fmt(median(rs.map(f).filter((x) => x !== undefined)));
    console.log(`| ${name} | ${backend} | ${m((r) => r.total_ms)} | ${m((r) => r.import_ms)} | ${m((r) => r.create_ms)} | ` +
                `${m((r) => r.stats?.load_ms)} | ${m((r) => r.stats?.setup_ms)} | ` +
                [...phaseNames].map((k) => m((r) => r.stats?.phases?.[k])).join(' | ') +
                `${phaseNames.size ? ' | ' : ''}${m((r) => r.first_run_ms)} | ${m((r) => firstPrep(r)?.fetch_ms)} | ` +
                `${m((r) => firstPrep(r)?.compile_ms)} | ${m((r) => r.second_run_ms)} |`);
    if (kernels && rs.at(-1).stats?.kernels) {
      const ks = [...rs.at(-1).stats.kernels].sort((a, b) => b.ms - a.ms).slice(0, 8);
      console.log(`    slowest compiles (round ${rs.at(-1).round}): ` +
                  ks.map((k) => `${k.kernel}${k.program ? ` [${k.program}]` : ''} ${fmt(k.ms)}`).join(', '));
      const draws = rs.at(-1).stats.first_draws?.[program];
      if (draws?.length)
        console.log('    slowest first draws: ' + [...draws].sort((a, b) => b.ms - a.ms).slice(0, 8)
          .map((k) => `${k.kernel} ${fmt(k.ms)}`).join(', ') + ` (all ${fmt(draws.reduce((a, k) => a + k.ms, 0))})`);
    }
  }
console.log(`\n${os.cpus().length} CPUs (${os.cpus()[0]?.model}), load average now ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}; ` +
            `${new Date().toISOString()}`);
if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify({ date: new Date().toISOString(), program, options, rows }, null, 1));
await shared?.close();
server.close();
fs.rmSync(pageDir, { recursive: true, force: true });
