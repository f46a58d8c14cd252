// Benchmark (not a test) of the browser demos (issue 17), ours beside TF.js 4.22 and jax-js 0.1.25 in the same
// headless Chromium, the same run (WebGL2 and WebGPU on SwiftShader here), each measurement in a fresh page:
//   - the digits MLP 64-128-10 train step of the draw-a-digit page (batch 16, Adam, the page's batches): fine-tune
//     (pretrained weights) and from scratch (fresh init), the same program, other weights, on webgl2 and webgpu;
//     TF.js (webgl, webgpu) and jax-js (webgpu, webgl): the same model, step and batches;
//   - per-frame latency of the 128x128 five-conv CNN (cnn5, the shipped checkpoint) in a dedicated Worker: ours
//     (examples/web/shapes/worker.js) on webgpu and webgl2, TF.js on webgpu and webgl with the same layers and
//     weights (bench/web/tfjs_cnn_worker.js); and how many of the frames each classified as drawn;
//   - time to first prediction after page load: the digits page's own timeline (navigation to the first
//     prediction: bundle fetch, checkpoint, context, uploads, shader compile, one inference) and TF.js's (module
//     start to its first prediction of the same MLP, after tf.min.js has loaded).
// Each timed case: 10 warm-up + 50 (train) or --frames (default 40) timed runs, median (min-max).
//
//   (cd bench/web && npm ci)     # TF.js 4.22, jax-js 0.1.25, playwright-core, pinned in package-lock.json
//   nice -n 10 node bench/web_app_bench.mjs --cli build/bin/shadergrad [--json FILE] [--only train,worker,first]
//                                           [--frames N] [--shapes-untrained] [--alt LABEL=[PATH][=EXPORT_ARGS]]...
// --alt: ours also from another shadergrad build and/or with the shapes bundle exported with more flags, e.g.
//   --alt wgsltile=/path/to/shadergrad --alt cpu-tiles==--webgpu-cpu
// --api webgl2|webgpu: only that API's rows (TF.js's webgl backend for webgl2); --no-jax: no jax-js rows.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium, loadChromium, serveStatic } from '../tests/browser.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name, dflt) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : dflt; };
const cli = arg('--cli', path.join(here, '..', 'build', 'bin', 'shadergrad'));
const npmDir = path.join(here, 'web', 'node_modules');
const chromium = await loadChromium(npmDir);
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_web_app_bench_'));
// the shapes CNN: the shipped checkpoint (examples/web/shapes/cnn5.safetensors), or --shapes-untrained (fresh init)
const demo = (dir, withCli, shapesArgs = '') => execFileSync('bash', [path.join(here, '..', 'scripts', 'build_web_demo.sh'), dir, withCli],
  { stdio: 'inherit', env: { ...process.env, DIGITS_EPOCHS: '10', SHAPES_EXPORT_ARGS: shapesArgs,
                             SHAPES_UNTRAINED: process.argv.includes('--shapes-untrained') ? '1' : '0' } });
demo(root, cli);
// --alt LABEL=PATH[=EXPORT_ARGS] (repeatable): the same demo from another build of ours (a branch's codegen) and/or
// the shapes bundle exported with more flags (e.g. --webgpu-cpu), served under /_altN/ and measured beside
const alts = process.argv.flatMap((a, i) => (a === '--alt' ? [process.argv[i + 1]] : [])).map((spec, i) => {
  const [label, exe, ...rest] = spec.split('=');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_web_app_bench_alt_'));
  demo(dir, exe || cli, rest.join('='));
  return { label, dir, prefix: `/_alt${i}` };
});

const server = await serveStatic([{ prefix: '/_bench/', dir: path.join(here, 'web') }, { prefix: '/_npm/', dir: npmDir },
                                  ...alts.map((a) => ({ prefix: `${a.prefix}/`, dir: a.dir })), { prefix: '/', dir: root }],
                                 { isolated: true });
const { origin } = server;
const browser = await launchChromium(chromium);
const results = [];
const f = (r) => `${r.median_ms.toFixed(2)} ms (${r.min_ms.toFixed(2)}-${r.max_ms.toFixed(2)})`;
const only = arg('--only', 'train,worker,first').split(',');
const api = arg('--api');  // ours' backend name; TF.js and jax-js call WebGL2 'webgl'
const wanted = (backend) => !api || backend === api || (api === 'webgl2' && backend === 'webgl');
const jaxRows = !process.argv.includes('--no-jax');
const sites = [['', ''], ...alts.map((a) => [a.prefix, ` (${a.label})`])];
const frames = Number(arg('--frames', '40'));
/** One measurement in a fresh page (the peers keep global state: TF.js backends, jax-js devices); an error is
 * recorded and printed, not fatal (a peer without that API here). */
async function measure(fn, args, label) {
  const page = await browser.newPage();
  page.setDefaultTimeout(600000);
  try {
    await page.goto(`${origin}/_bench/app_bench_page.html`);
    await page.waitForFunction(() => window.benchReady === true);
    return await page.evaluate(([g, a]) => window[g](...a), [fn, args]);
  } catch (e) {
    console.log(`${label}: failed: ${e.message.split('\n')[0]}`);
    return { error: e.message };
  } finally {
    await page.close();
  }
}
try {
  if (only.includes('train')) {
    for (const [site, label] of sites)
      for (const backend of ['webgl2', 'webgpu'].filter(wanted))
        for (const w of ['pretrained', 'fresh']) {
          const c = w === 'pretrained' ? 'finetune_step_b16' : 'scratch_step_b16';
          const who = `shadergrad${label} ${backend}`;
          const r = await measure('benchTrain', [w, backend, site], `${c} ${who}`);
          results.push({ case: c, who, ...r });
          if (!r.error) console.log(`${c.padEnd(20)} ${who.padEnd(18)} ${f(r)}, ${r.kernels} kernels, loss ${r.loss_first.toFixed(3)} -> ${r.loss_last.toFixed(3)}`);
        }
    for (const backend of ['webgl', 'webgpu'].filter(wanted)) {
      const r = await measure('benchTfjsTrain', [16, 0.003, backend], `train_step_b16 tfjs ${backend}`);
      results.push({ case: 'train_step_b16', who: `tfjs 4.22 ${backend}`, ...r });
      if (!r.error) console.log(`${'train_step_b16'.padEnd(20)} tfjs ${backend.padEnd(13)} ${f(r)}, loss ${r.loss_first.toFixed(3)} -> ${r.loss_last.toFixed(3)}`);
    }
    for (const device of ['webgpu', 'webgl'].filter((d) => jaxRows && wanted(d))) {
      const r = await measure('benchJaxTrain', [16, 0.003, device], `train_step_b16 jax-js ${device}`);
      results.push({ case: 'train_step_b16', who: `jax-js 0.1.25 ${device}`, ...r });
      if (!r.error) console.log(`${'train_step_b16'.padEnd(20)} jax-js ${device.padEnd(11)} ${f(r)}, loss ${r.loss_first.toFixed(3)} -> ${r.loss_last.toFixed(3)}`);
    }
  }
  if (only.includes('worker'))
    for (const [kind, backend, site, label] of [...sites.flatMap(([st, l]) => [['ours', 'webgpu', st, l], ['ours', 'webgl2', st, l]]),
                                                ['tfjs', 'webgpu', '', ''], ['tfjs', 'webgl', '', '']].filter((x) => wanted(x[1]))) {
      const who = kind === 'ours' ? `shadergrad${label} ${backend}` : `tfjs 4.22 ${backend}`;
      const r = await measure('benchWorker', [kind, frames, backend, site], `worker_cnn5_frame ${who}`);
      results.push({ case: 'worker_cnn5_frame', who, ...r });
      if (!r.error) console.log(`${'worker_cnn5_frame'.padEnd(20)} ${who.padEnd(18)} in worker ${f(r.worker)}, round trip ${f(r.round_trip)}, setup ${r.setup_ms.toFixed(0)} ms, ${r.correct}/${r.frames} frames right (${r.backend})`);
    }
  if (only.includes('first')) {
    // time to first prediction: a fresh page each, in a new browser each (Chromium's GPU process keeps compiled
    // programs in memory across pages: a second page compiling the same shaders would be faster)
    const phases = (rt) => Object.entries(rt.phases ?? {}).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(', ');
    for (const [site, label] of sites)
      for (const backend of ['webgpu', 'webgl2'].filter(wanted)) {
        const own = await launchChromium(chromium);
        try {
          const p1 = await own.newPage();
          await p1.goto(`${origin}${site}/digits/?db=bench&backend=${backend}`);
          await p1.evaluate(() => window.sgApp.ready);
          const ours = await p1.evaluate(() => window.sgApp.info().timeline);
          const who = `shadergrad${label} ${backend} (digits page)`;
          results.push({ case: 'first_prediction', who, load: os.loadavg()[0], ...ours });
          const rt = ours.runtime, infer = rt.first_run?.infer;
          console.log(`${'first_prediction'.padEnd(20)} ${who} ${ours.first_prediction_ms.toFixed(0)} ms after ` +
                      `navigation (module start ${ours.module_start_ms.toFixed(0)}, bundle and weights ready ` +
                      `${ours.loaded_ms?.toFixed(0) ?? '?'}; runtime setup ${rt.setup_ms.toFixed(0)} ms` +
                      `${rt.phases ? ` (${phases(rt)})` : ''}${infer ? `, first infer ${infer.ms.toFixed(0)} ms of which compile ` +
                      `${infer.compile_ms.toFixed(0)}` : ''})`);
        } finally {
          await own.close();
        }
      }
    const p2 = await browser.newPage();
    await p2.goto(`${origin}/_bench/app_bench_page.html`);
    await p2.waitForFunction(() => window.benchReady === true);
    const tfr = await p2.evaluate(() => window.benchTfjsFirst());
    results.push({ case: 'first_prediction', who: 'tfjs webgl (same MLP)', ...tfr });
    console.log(`${'first_prediction'.padEnd(20)} tfjs       ${tfr.since_navigation_ms.toFixed(0)} ms after navigation (${tfr.first_prediction_ms.toFixed(0)} ms from tf ready-up to the prediction)`);
    await p2.close();
  }
} finally {
  console.log(`\n${os.cpus().length} CPUs (${os.cpus()[0]?.model}), load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}; chromium ${browser.version()}; ${new Date().toISOString()}`);
  if (arg('--json')) fs.writeFileSync(arg('--json'), JSON.stringify({ date: new Date().toISOString(), chromium: browser.version(), results }, null, 1));
  await browser.close();
  server.close();
  fs.rmSync(root, { recursive: true, force: true });
  for (const a of alts) fs.rmSync(a.dir, { recursive: true, force: true });
}
