// Benchmark (not a test): one train step of the wasm plan on 1 thread vs N threads (runtime/web/wasm_pool.js), in
// Node and/or in a cross-origin isolated headless Chromium page (its main thread, which spins while it waits for
// the pool's last chunks, and a Worker runtime). Cases: MLP 784-128-10 at batch 32 and 128 and the digits CNN at
// batch 64 (the bench/web_bench.mjs models), exported with `--targets wasm`. Per case and thread count: 10 warm-up
// steps, then 50 timed steps (the feeds of the bundle's first train check, the loss read back); median (min-max)
// per round; rounds interleave the thread counts (the machine is shared: its load moves). The 1-minute load
// average is printed with every row, and before and after the rows a calibration: a fixed pure-JS loop on one
// thread, then the same loop on the main thread and a worker_threads Worker at once — "2 threads = 1.0x one" means a
// second core was free, 2.0x that none was (the load of a shared VM decides what threads can give).
//
//   node bench/wasm_threads_bench.mjs [--cli build/bin/shadergrad] [--where node,chromium] [--threads 1,2]
//        [--only mlp_b32,mlp_b128,cnn_b64] [--rounds 3] [--profile]
// --profile prints, for the last round, each kernel's host time per step on 1 thread and on the most threads (Node).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name, dflt) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : dflt; };
const cli = arg('--cli', path.join(here, '..', 'build', 'bin', 'shadergrad'));
const where = arg('--where', 'node').split(',');
const threadCounts = arg('--threads', '1,2').split(',').map(Number);
const rounds = Number(arg('--rounds', '3'));
const profile = process.argv.includes('--profile');
const CASES = {
  mlp_b32: ['--model', 'mlp', '--batch', '32'],
  mlp_b128: ['--model', 'mlp', '--batch', '128'],
  cnn_b64: ['--model', 'cnn', '--dataset', 'digits', '--batch', '64'],
};
const only = arg('--only', Object.keys(CASES).join(',')).split(',');
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_wasm_threads_bench_'));
for (const name of only) {
  const dir = path.join(root, name);
  execFileSync(cli, ['export', ...CASES[name], '--targets', 'wasm', '--check-steps', '1', '--out', dir],
               { stdio: ['ignore', 'ignore', 'inherit'] });
  fs.rmSync(path.join(dir, 'runtime'), { recursive: true });
  fs.cpSync(path.join(here, '../runtime/web'), path.join(dir, 'runtime'), { recursive: true });
}

/** Times `steps` train steps after `warm` ones on a runtime made by `make(options)`; runs in Node or in the page. */
async function timeSteps({ url, threads, worker, warm, steps, profile }) {
  const mod = await import(url.replace(/bundle\.json$/, 'runtime/shadergrad.js'));
  const options = { backend: 'wasm', wasmThreads: threads, profile: !!profile, ...(globalThis.__sgFetch ? { fetch: globalThis.__sgFetch } : {}) };
  const rt = worker ? await mod.createWorkerRuntime(url, options) : await mod.createRuntime(url, options);
  const b = await mod.loadBundle(url, globalThis.__sgFetch ? { fetch: globalThis.__sgFetch } : {});
  const run = (await b.loadChecks()).runs.find((r) => r.program === 'train');
  const feeds = {};
  for (const [k, f] of Object.entries(run.feeds)) feeds[k] = b.data(f);
  for (let i = 0; i < warm; ++i) await rt.run('train', feeds);
  const ms = [];
  const kernels = {};
  for (let i = 0; i < steps; ++i) {
    const t0 = performance.now();
    await rt.run('train', feeds);
    ms.push(performance.now() - t0);
    if (profile) for (const t of await rt.timings()) kernels[t.kernel] = (kernels[t.kernel] ?? 0) + t.ms / steps;
  }
  const caps = rt.caps;
  await rt.dispose();
  ms.sort((a, b) => a - b);
  return { median: ms[ms.length >> 1], min: ms[0], max: ms[ms.length - 1], threads: caps.threads, kernels };
}

/** Wall time of `units` copies of a fixed loop run at once on `units` threads (main + Workers), in ms. */
async function calibrate(units) {
  const { Worker } = await import('node:worker_threads');
  const body = 'let x = 0; for (let i = 0; i < 1e8; ++i) x = (x + i * 7) % 1000003;';
  const t0 = performance.now();
  const ws = Array.from({ length: units - 1 }, () => new Worker(`${body} require('node:worker_threads').parentPort.postMessage(x);`, { eval: true }));
  const done = ws.map((w) => new Promise((r) => w.once('message', r)));
  new Function(body)();
  await Promise.all(done);
  for (const w of ws) w.terminate();
  return performance.now() - t0;
}
const calibration = async (when) => {
  const one = await calibrate(1), two = await calibrate(2);
  console.log(`calibration (${when}): a pure-JS loop ${one.toFixed(0)} ms on 1 thread; 2 copies on 2 threads ` +
              `${two.toFixed(0)} ms = ${(two / one).toFixed(2)}x (1.0x: a second core was free), load ${os.loadavg()[0].toFixed(2)}`);
};
await calibration('before');

const rows = [];
const print = (where, name, threads, r) => {
  const row = { where, case: name, threads, ...r, load1: os.loadavg()[0] };
  rows.push(row);
  console.log(`${where.padEnd(16)} ${name.padEnd(9)} wasmThreads=${threads} (ran ${r.threads}): ` +
              `${r.median.toFixed(2)} ms (${r.min.toFixed(2)}-${r.max.toFixed(2)}), load ${row.load1.toFixed(2)}`);
};

if (where.includes('node')) {
  const { fileFetch } = await import(pathToFileURL(path.join(here, '../tests/dawn_node.mjs')).href);
  globalThis.__sgFetch = fileFetch;
  for (let r = 0; r < rounds; ++r)
    for (const name of only)
      for (const threads of threadCounts) {
        const url = pathToFileURL(path.join(root, name, 'bundle.json')).href;
        const res = await timeSteps({ url, threads, worker: false, warm: 10, steps: 50, profile: profile && r === rounds - 1 });
        print('node', name, threads, res);
        if (profile && r === rounds - 1)
          console.log('  ' + Object.entries(res.kernels).map(([k, t]) => `${k} ${t.toFixed(3)}`).join(', '));
      }
}

if (where.includes('chromium')) {
  const { launchChromium, loadChromium, serveStatic } = await import(pathToFileURL(path.join(here, '../tests/browser.mjs')).href);
  const chromium = await loadChromium(path.join(here, '../tests/node_modules'));
  const server = await serveStatic([{ prefix: '/_test/', dir: path.join(here, '../tests/web') }, { prefix: '/', dir: root }],
                                   { isolated: true });
  const browser = await launchChromium(chromium, { webgpu: false });
  try {
    const page = await browser.newPage();
    await page.goto(`${server.origin}/_test/check_page.html`);
    for (let r = 0; r < rounds; ++r)
      for (const name of only)
        for (const worker of [false, true])
          for (const threads of threadCounts) {
            const res = await page.evaluate(timeSteps, { url: `/${name}/bundle.json`, threads, worker, warm: 10, steps: 50 });
            print(`chromium ${worker ? 'worker' : 'page'}`, name, threads, res);
          }
  } finally {
    await browser.close();
    server.close();
  }
}
await calibration('after');
fs.rmSync(root, { recursive: true, force: true });
console.log(`${os.cpus().length} CPUs (${os.cpus()[0]?.model}), node ${process.version}`);
