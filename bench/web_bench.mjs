// Benchmark (not a test): our exported train steps on WebGL2 in headless Chromium (SwiftShader here) beside the
// TF.js 4.22 webgl peer, the same models (PEERS.md): MLP 784-128-10 Adam lr 1e-3 at batch 32 and 128, seed 002's
// digits CNN (8-16-32, 1x8x8) Adam 2e-3 at batch 64. Per case: first step (from nothing to the first loss: bundle
// fetch, context, weight upload, shader compile, first run; TF.js: variables, compile, first step), then 10 warm-up
// and 50 timed steps, median (min-max). Each step reads back only the scalar loss.
//
//   (cd bench/web && npm ci)                                  # TF.js + playwright-core, pinned in package-lock.json
//   node bench/web_bench.mjs --cli build/bin/shadergrad [--json FILE] [--no-tfjs] [--rounds N] [--profile]
//
// Ours is exported twice per case: the default webgl2 target (4 draw buffers, what WebGL2 guarantees) and with 8
// draw buffers (what SwiftShader and most desktop GPUs offer). --rounds N interleaves N rounds of every case.
// --profile adds a run with per-kernel timings (host time between readbacks where there are no timer queries).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name, dflt) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : dflt; };
const flag = (name) => process.argv.includes(name);
const cli = arg('--cli', path.join(here, '..', 'build', 'bin', 'shadergrad'));
const rounds = Number(arg('--rounds', '1'));
const npmDir = path.join(here, 'web', 'node_modules');
let chromium;
try {
  ({ chromium } = await import(path.join(npmDir, 'playwright-core', 'index.mjs')));
} catch (e) {
  console.error(`bench/web/node_modules is missing: run 'npm ci' in bench/web (${e.message})`);
  process.exit(2);
}

const cases = [
  { name: 'mlp_b32', model: 'mlp', batch: 32 },
  { name: 'mlp_b128', model: 'mlp', batch: 128 },
  { name: 'cnn_b64', model: 'cnn', batch: 64 },
];
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_web_bench_'));
for (const c of cases)
  for (const [suffix, extra] of [['', []], ['_db8', ['--max-draw-buffers', '8']]])
    execFileSync(cli, ['export', '--model', c.model, '--batch', String(c.batch), '--check-steps', '0',
                       ...extra, '--out', path.join(root, c.name + suffix)], { stdio: 'ignore' });

const types = { '.html': 'text/html', '.js': 'text/javascript', '.json': 'application/json' };
const server = http.createServer((req, res) => {
  const rel = decodeURIComponent(new URL(req.url, 'http://127.0.0.1').pathname);
  const [base, sub] = rel.startsWith('/_bench/') ? [path.join(here, 'web'), rel.slice(7)]
    : rel.startsWith('/_npm/') ? [npmDir, rel.slice(5)] : [root, rel];
  const file = path.resolve(base, '.' + sub);
  const h = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
  if (!file.startsWith(base + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
    res.writeHead(404, h); res.end(); return;
  }
  res.writeHead(200, { ...h, 'content-type': types[path.extname(file)] || 'application/octet-stream' });
  fs.createReadStream(file).pipe(res);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const origin = `http://127.0.0.1:${server.address().port}`;

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
  // (playwright starts every launch with a fresh temporary user-data dir)
});
const page = await browser.newPage();
page.setDefaultTimeout(600000);
await page.goto(`${origin}/_bench/bench_page.html`);
await page.waitForFunction(() => window.benchReady === true);
const results = [];
const fmt = (r) => `${r.median_ms.toFixed(2)} ms (${r.min_ms.toFixed(2)}-${r.max_ms.toFixed(2)}), first step ` +
                   `${r.first_step_ms.toFixed(0)} ms`;
for (let round = 0; round < rounds; ++round)
  for (const c of cases) {
    for (const suffix of ['', '_db8']) {
      const r = await page.evaluate(([n]) => window.benchOurs(n, false), [c.name + suffix]);
      results.push({ round, case: c.name, who: `shadergrad webgl2${suffix ? ' (8 draw buffers)' : ''}`, ...r });
      console.log(`${c.name.padEnd(9)} shadergrad${suffix.padEnd(5)} ${fmt(r)}, ${r.kernels} kernels, losses ` +
                  `${r.losses.map((l) => l.toFixed(4)).join(' -> ')}`);
    }
    if (!flag('--no-tfjs')) {
      const r = await page.evaluate(([m, b]) => window.benchTfjs(m, b), [c.model, c.batch]);
      results.push({ round, case: c.name, who: `tfjs ${r.tf_version} ${r.backend}`, ...r });
      console.log(`${c.name.padEnd(9)} tfjs ${r.tf_version} ${fmt(r)}, losses ` +
                  `${r.losses.map((l) => l.toFixed(4)).join(' -> ')}`);
    }
  }
if (flag('--profile'))
  for (const c of cases) {
    const r = await page.evaluate(([n]) => window.benchOurs(n, true), [c.name]);
    console.log(`\nper-kernel times, ${c.name} (${r.timer_query ? 'GPU timer queries' : 'host time between readbacks'}` +
                `, last timed step):`);
    for (const t of r.timings) console.log(`  ${t.kernel.padEnd(36)} ${t.ms.toFixed(3)} ms`);
  }
const renderer = results[0]?.renderer;
console.log(`\nrenderer: ${renderer}; ${os.cpus().length} CPUs (${os.cpus()[0]?.model}); chromium ${browser.version()}`);
if (arg('--json')) fs.writeFileSync(arg('--json'), JSON.stringify({ date: new Date().toISOString(), renderer,
                                                                     chromium: browser.version(), results }, null, 1));
await browser.close();
server.close();
fs.rmSync(root, { recursive: true, force: true });
