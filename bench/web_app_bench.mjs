// Benchmark (not a test) of the browser demos (issue 17), ours beside TF.js 4.22 in the same headless Chromium,
// the same run (WebGL2 on SwiftShader here):
//   - the digits MLP 64-128-10 train step of the draw-a-digit page (batch 16, Adam): fine-tune (pretrained
//     weights) and from scratch (fresh init): the same program, other weights; TF.js: the same model and step;
//   - per-frame latency of the 128x128 five-conv CNN (cnn5) in a dedicated Worker: ours (examples/web/shapes/
//     worker.js) and TF.js with the same layers and weights (bench/web/tfjs_cnn_worker.js);
//   - time to first prediction after page load: the digits page's own timeline (navigation to the first
//     prediction: bundle fetch, checkpoint, context, uploads, shader compile, one inference) and TF.js's (module
//     start to its first prediction of the same MLP, after tf.min.js has loaded).
// Each timed case: 10 warm-up + 50 (train) or 40 (frames) timed runs, median (min-max).
//
//   (cd bench/web && npm ci)     # TF.js 4.22 + playwright-core, pinned in package-lock.json
//   nice -n 10 node bench/web_app_bench.mjs --cli build/bin/shadergrad [--json FILE] [--shapes-epochs N]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name, dflt) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : dflt; };
const cli = arg('--cli', path.join(here, '..', 'build', 'bin', 'shadergrad'));
const npmDir = path.join(here, 'web', 'node_modules');
let chromium;
try {
  ({ chromium } = await import(path.join(npmDir, 'playwright-core', 'index.mjs')));
} catch (e) {
  console.error(`bench/web/node_modules is missing: run 'npm ci' in bench/web (${e.message})`);
  process.exit(2);
}
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_web_app_bench_'));
const epochs = arg('--shapes-epochs', '0');
execFileSync('bash', [path.join(here, '..', 'scripts', 'build_web_demo.sh'), root, cli],
             { stdio: 'inherit', env: { ...process.env, DIGITS_EPOCHS: '10', SHAPES_UNTRAINED: epochs === '0' ? '1' : '0',
                                        SHAPES_EPOCHS: epochs } });

const types = { '.html': 'text/html', '.js': 'text/javascript', '.json': 'application/json' };
const server = http.createServer((req, res) => {
  const rel = decodeURIComponent(new URL(req.url, 'http://127.0.0.1').pathname);
  const [base, sub] = rel.startsWith('/_bench/') ? [path.join(here, 'web'), rel.slice(7)]
    : rel.startsWith('/_npm/') ? [npmDir, rel.slice(5)] : [root, rel.endsWith('/') ? rel + 'index.html' : rel];
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
});
const results = [];
const f = (r) => `${r.median_ms.toFixed(2)} ms (${r.min_ms.toFixed(2)}-${r.max_ms.toFixed(2)})`;
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(600000);
  await page.goto(`${origin}/_bench/app_bench_page.html`);
  await page.waitForFunction(() => window.benchReady === true);
  for (const w of ['pretrained', 'fresh']) {
    const r = await page.evaluate((x) => window.benchTrain(x), w);
    results.push({ case: w === 'pretrained' ? 'finetune_step_b16' : 'scratch_step_b16', who: 'shadergrad webgl2', ...r });
    console.log(`${results.at(-1).case.padEnd(20)} shadergrad ${f(r)}, ${r.kernels} kernels, loss ${r.loss_first.toFixed(3)} -> ${r.loss_last.toFixed(3)}`);
  }
  {
    const r = await page.evaluate(() => window.benchTfjsTrain(16, 0.003));
    results.push({ case: 'train_step_b16', who: `tfjs ${r.tf_version} ${r.backend}`, ...r });
    console.log(`${'train_step_b16'.padEnd(20)} tfjs       ${f(r)}, loss ${r.loss_first.toFixed(3)} -> ${r.loss_last.toFixed(3)}`);
  }
  for (const kind of ['ours', 'tfjs']) {
    const r = await page.evaluate((k) => window.benchWorker(k, 40), kind);
    results.push({ case: 'worker_cnn5_frame', who: kind === 'ours' ? 'shadergrad webgl2' : r.backend, ...r });
    console.log(`${'worker_cnn5_frame'.padEnd(20)} ${kind.padEnd(10)} in worker ${f(r.worker)}, round trip ${f(r.round_trip)}, setup ${r.setup_ms.toFixed(0)} ms`);
  }
  await page.close();
  // time to first prediction: a fresh page each
  const p1 = await browser.newPage();
  await p1.goto(`${origin}/digits/?db=bench`);
  await p1.evaluate(() => window.sgApp.ready);
  const ours = await p1.evaluate(() => window.sgApp.info().timeline);
  results.push({ case: 'first_prediction', who: 'shadergrad webgl2 (digits page)', ...ours });
  console.log(`${'first_prediction'.padEnd(20)} shadergrad ${ours.first_prediction_ms.toFixed(0)} ms after navigation (runtime setup ${ours.runtime.setup_ms.toFixed(0)} ms, bundle load ${ours.runtime.load_ms.toFixed(0)} ms)`);
  await p1.close();
  const p2 = await browser.newPage();
  await p2.goto(`${origin}/_bench/app_bench_page.html`);
  await p2.waitForFunction(() => window.benchReady === true);
  const tfr = await p2.evaluate(() => window.benchTfjsFirst());
  results.push({ case: 'first_prediction', who: 'tfjs webgl (same MLP)', ...tfr });
  console.log(`${'first_prediction'.padEnd(20)} tfjs       ${tfr.since_navigation_ms.toFixed(0)} ms after navigation (${tfr.first_prediction_ms.toFixed(0)} ms from tf ready-up to the prediction)`);
  await p2.close();
} finally {
  console.log(`\n${os.cpus().length} CPUs (${os.cpus()[0]?.model}); chromium ${browser.version()}; ${new Date().toISOString()}`);
  if (arg('--json')) fs.writeFileSync(arg('--json'), JSON.stringify({ date: new Date().toISOString(), chromium: browser.version(), results }, null, 1));
  await browser.close();
  server.close();
  fs.rmSync(root, { recursive: true, force: true });
}
