// Drives the browser demos (examples/web/, built by scripts/build_web_demo.sh) in real headless Chromium, served by
// `shadergrad serve` itself, and prints what happened as one JSON line; tests/test_web_app.cpp builds the demo
// folder, runs this and asserts (against the native CPU backend, the checkpoint, f64 forward passes).
//
// Usage: node tests/web_app_check.mjs ROOT SHADERGRAD OUTDIR [BACKEND...]
//   ROOT        the demo folder (digits/, shapes/)
//   SHADERGRAD  the CLI binary (its `serve ROOT --port 0` serves the pages)
//   OUTDIR      screenshots (*.png) and the checkpoint the page exported (browser.safetensors) are written here
//   BACKEND     webgl2 (default) and/or webgpu: the digits and shapes pages are run on each, the backends at once
//               in separate browser contexts; the shapes page is also opened without ?backend (auto)
// Also (no browser, for test_web_app): --colormap CASES_JSON (colormap.js's colours), --preprocess RECTS_JSON
// (preprocess.js's 8x8 counts of black rectangles on white)
// Exit status 0 = every step ran (whatever it returned), 1 = the page broke, 2 = the environment is missing
// something. Nothing here is timed except hang guards.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { guard, launchChromium, loadChromium, serveCli, watchConsole } from './browser.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

if (process.argv[2] === '--colormap') {
  const { mapValue } = await import(path.join(here, '..', 'runtime', 'web', 'colormap.js'));
  const cases = JSON.parse(process.argv[3]);
  console.log(JSON.stringify(cases.map(([v, cmap, lo, hi]) => mapValue(v === 'nan' ? NaN : v === 'inf' ? Infinity
                                                                       : v === '-inf' ? -Infinity : v, cmap, lo, hi))));
  process.exit(0);
}

if (process.argv[2] === '--preprocess') {
  // preprocess.js on a white 256x256 image with one black rectangle [x0, x1) x [y0, y1): the 8x8 counts
  const { digitFromImage } = await import(path.join(here, '..', 'runtime', 'web', 'preprocess.js'));
  const out = JSON.parse(process.argv[3]).map(([x0, x1, y0, y1]) => {
    const data = new Uint8ClampedArray(256 * 256 * 4).fill(255);
    for (let y = y0; y < y1; ++y) for (let x = x0; x < x1; ++x) data.fill(0, 4 * (y * 256 + x), 4 * (y * 256 + x) + 3);
    const d = digitFromImage({ data, width: 256, height: 256 });
    return d ? { counts: Array.from(d.counts), bbox: d.bbox } : null;
  });
  console.log(JSON.stringify(out));
  process.exit(0);
}

const [root, cli, outDir, ...backendArgs] = process.argv.slice(2);
const backends = backendArgs.length ? backendArgs : ['webgl2'];
if (!root || !cli || !outDir) {
  console.error('usage: node web_app_check.mjs ROOT SHADERGRAD OUTDIR [webgl2|webgpu...]');
  process.exit(2);
}
const chromium = await loadChromium();
fs.mkdirSync(outDir, { recursive: true });

const results = { backends: {} };
const console_ = [];
let browser, server, status = 0;

/** Pixels of a canvas element as the page drew them (a screenshot of just that element, saved for C++). */
async function shot(page, selector, name) {
  const file = path.join(outDir, `${name}.png`);
  await page.locator(selector).first().screenshot({ path: file });
  return file;
}

async function newPage(context, url) {
  const page = await context.newPage();
  page.setDefaultTimeout(300000);
  watchConsole(page, console_);
  const r = await page.goto(url, { waitUntil: 'load' });
  if (!r || !r.ok()) throw new Error(`${url}: HTTP ${r ? r.status() : 'no response'}`);
  return page;
}

/** Draws a stroke (a polyline in pad pixels) on the digits page's pad with the mouse (`steps` moves per segment). */
async function stroke(page, points, steps = 6) {
  const box = await page.locator('#pad').boundingBox();
  const at = ([x, y]) => [box.x + (x * box.width) / 256, box.y + (y * box.height) / 256];
  await page.mouse.move(...at(points[0]));
  await page.mouse.down();
  for (const p of points.slice(1)) await page.mouse.move(...at(p), { steps });
  await page.mouse.up();
}

// Ten clean digits 0-9 as a person draws them with the mouse on the 256x256 pad: plain, centred, about 160 pixels
// tall, one polyline per stroke (the 4 open at the top, in two strokes). Held-out drawings: the shipped checkpoint
// (examples/digits_pretrain.cpp) never trains on them.
const arc = (cx, cy, rx, ry, a0, a1, n) => Array.from({ length: n + 1 }, (_, i) => {
  const a = ((a0 + ((a1 - a0) * i) / n) * Math.PI) / 180;
  return [Math.round(cx + rx * Math.cos(a)), Math.round(cy + ry * Math.sin(a))];
});
const CLEAN_DIGITS = [
  [arc(128, 128, 52, 82, -90, 270, 24)],                                                     // 0: an ellipse
  [[[128, 48], [128, 208]]],                                                                  // 1: a vertical line
  [[[80, 90], [90, 62], [115, 48], [145, 48], [170, 62], [178, 88], [165, 118], [130, 155], [80, 205], [180, 205]]],
  [[[80, 60], [110, 46], [150, 48], [172, 68], [168, 95], [140, 118], [115, 122], [145, 126], [172, 145], [178, 175],
    [160, 200], [125, 210], [85, 200]]],
  [[[110, 45], [75, 150], [185, 150]], [[155, 85], [155, 215]]],                              // 4: open top
  [[[170, 48], [95, 48], [88, 120], [120, 108], [155, 112], [178, 140], [178, 175], [155, 203], [120, 210], [85, 195]]],
  [[[160, 50], [125, 70], [100, 105], [88, 150], [95, 190], [125, 210], [158, 200], [172, 170], [160, 140], [128, 130],
    [100, 145], [90, 170]]],
  [[[75, 55], [185, 55], [150, 125], [115, 210]]],
  [[[165, 65], [140, 47], [110, 48], [90, 68], [98, 95], [128, 118], [162, 140], [172, 172], [155, 202], [125, 210],
    [95, 200], [85, 172], [98, 142], [128, 118], [158, 95], [165, 65]]],                      // 8: one stroke
  [[[170, 80], [150, 52], [120, 48], [92, 65], [88, 95], [108, 118], [140, 118], [165, 100], [170, 80], [168, 150],
    [160, 210]]],
];

/** Clears the pad, draws `strokes`, and reads what the page then shows: its 8x8 counts, the probabilities of its
 * infer run, and the digit and probability of the highlighted bar. */
async function drawDigit(page, strokes) {
  await page.click('#clear');
  for (const s of strokes) await stroke(page, s, 1);
  // the page reads the pad on the animation frame after the last mouse event: two frames later it has
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  const cur = await page.evaluate(() => window.sgApp.current());
  const probs = await page.evaluate((x) => window.sgApp.predict(x), cur.x);
  const shown = await page.evaluate(() => {
    const b = document.querySelector('#bars .bar.best');
    return { digit: Number(b.querySelector('.d').textContent), p: Number(b.querySelector('.p').textContent) };
  });
  return { counts: cur.counts, x: cur.x, probs, shown };
}

// a "7": top bar, then the diagonal; and three variants shifted/scaled (the fine-tune samples)
const SEVEN = [[70, 60], [190, 60], [150, 130], [110, 210]];
const variants = [SEVEN, SEVEN.map(([x, y]) => [x - 30, y + 10]), SEVEN.map(([x, y]) => [x * 0.8 + 30, y]),
                  SEVEN.map(([x, y]) => [x + 20, y * 0.9 + 15])];

async function drawAndRead(page, pts) {
  await page.click('#clear');
  await stroke(page, pts);
  // the page predicts on the next animation frame after the stroke: wait for the drawn digit's prediction
  await page.waitForFunction(() => window.sgApp.state.current && window.sgApp.state.current.bbox !== undefined);
  const cur = await page.evaluate(() => window.sgApp.current());
  const probs = await page.evaluate((x) => window.sgApp.predict(x), cur.x);
  return { counts: cur.counts, x: cur.x, probs };
}

async function digits(context, origin, backend) {
  const r = {};
  const db = `sg-test-${backend}`;
  const url = `${origin}/digits/?backend=${backend}&db=${db}`;
  let page = await newPage(context, url);
  await guard(page.evaluate(() => window.sgApp.ready), 'digits start');
  r.start = await page.evaluate(() => window.sgApp.info());
  r.checks = await guard(page.evaluate(() => window.sgApp.checks()), 'checks');
  // 1. a scripted stroke, its 8x8 and the prediction
  r.drawn = await drawAndRead(page, SEVEN);
  await shot(page, '#pad', `${backend}_pad`);
  await shot(page, '#seen', `${backend}_seen`);
  await shot(page, '#bars', `${backend}_bars`);
  // 1b. the pretrained checkpoint on ten cleanly drawn digits 0-9 (on the first backend only: the weights are the
  // same on each, and the 7 above already shows the backends predict alike)
  if (backend === backends[0]) {
    r.clean = [];
    for (const strokes of CLEAN_DIGITS) r.clean.push(await drawDigit(page, strokes));
  }
  // 2. fine-tune on the four variants labelled 7 (or 2 where it is already sure of the 7: a label to be learnt)
  r.label = r.drawn.probs[7] > 0.95 ? 2 : 7;
  r.samples = [];
  for (const v of variants) {
    const s = await drawAndRead(page, v);
    await page.evaluate((l) => window.sgApp.addSample(l), r.label);
    r.samples.push(s);
  }
  r.steps = await guard(page.evaluate(() => window.sgApp.fineTune(40)), 'fine-tune');
  r.after = [];
  for (const s of r.samples) r.after.push(await page.evaluate((x) => window.sgApp.predict(x), s.x));
  r.fine_info = await page.evaluate(() => window.sgApp.info());
  await shot(page, '#loss', `${backend}_loss`);
  await shot(page, '#flow canvas', `${backend}_flow`);
  r.norms = await page.evaluate(() => window.sgApp.norms());
  r.flow_figures = await page.evaluate(() => [...document.querySelectorAll('#flow figure')].map((f) => f.dataset.tensor));
  // 3. one gradient-flow step on a button press: its outputs
  r.debug = await page.evaluate(async () => {
    const o = await window.sgApp.debugStep();
    return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, v.length]));
  });
  // the page's checkpoint, for `shadergrad predict --load` (browser -> native)
  const bytes = await page.evaluate(() => window.sgApp.checkpoint());
  fs.writeFileSync(path.join(outDir, `${backend}_browser.safetensors`), Buffer.from(bytes));
  r.weight_before_reload = await page.evaluate(() => window.sgApp.read('1.weight'));
  r.probs_before_reload = await page.evaluate((x) => window.sgApp.predict(x), r.drawn.x);
  await page.evaluate(() => window.sgApp.save());
  // 4. IndexedDB round trip: reload, the saved weights come back
  await page.close();
  page = await newPage(context, url);
  await guard(page.evaluate(() => window.sgApp.ready), 'digits reload');
  r.reload = await page.evaluate(() => window.sgApp.info());
  r.weight_after_reload = await page.evaluate(() => window.sgApp.read('1.weight'));
  r.probs_after_reload = await page.evaluate((x) => window.sgApp.predict(x), r.drawn.x);
  // 5. a lost context: reported, recovered by reloading the weights, the same prediction after
  r.lost = await guard(page.evaluate(async (x) => {
    const had = window.sgApp.loseContext();
    const p = await window.sgApp.predict(x);
    return { had, probs: p, info: window.sgApp.info() };
  }, r.drawn.x), 'lost context');
  // 6. the tab hidden during training: it pauses and says so, and goes on when shown
  r.hidden = await guard(page.evaluate(async () => {
    let hidden = true;
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => (hidden ? 'hidden' : 'visible') });
    document.dispatchEvent(new Event('visibilitychange'));
    const run = window.sgApp.trainScratch(10);
    while (!window.sgApp.state.paused) await new Promise((res) => setTimeout(res, 20));
    const during = { status: document.getElementById('status').textContent, losses: window.sgApp.state.losses.length };
    hidden = false;
    document.dispatchEvent(new Event('visibilitychange'));
    const steps = await run;
    delete document.visibilityState;
    return { during, steps, losses: window.sgApp.state.losses };
  }), 'hidden tab');
  // 7. from scratch on the shipped digits: the loss curve
  r.scratch = await guard(page.evaluate(async () => {
    const steps = await window.sgApp.trainScratch(100);
    return { steps, losses: window.sgApp.state.losses };
  }), 'from scratch');
  await shot(page, '#loss', `${backend}_scratch_loss`);
  // 8. a checkpoint of another model is refused with the reason
  if (fs.existsSync(path.join(root, 'digits', 'other_model.safetensors')))
    r.wrong_checkpoint = await page.evaluate(async () => {
      const b = new Uint8Array(await (await fetch('other_model.safetensors')).arrayBuffer());
      try { await window.sgApp.importCheckpoint(Array.from(b)); return { refused: false }; }
      catch (e) { return { refused: true, name: e.name, message: e.message }; }
    });
  // 9. the native -> browser import: pretrained.safetensors as an uploaded file gives the pretrained predictions
  r.imported = await page.evaluate(async (x) => {
    const b = new Uint8Array(await (await fetch('pretrained.safetensors')).arrayBuffer());
    await window.sgApp.importCheckpoint(Array.from(b));
    return window.sgApp.predict(x);
  }, r.drawn.x);
  await page.close();
  // 10. a changed model (another bundle: other structure hash) never loads the weights saved above
  if (fs.existsSync(path.join(root, 'digits', 'bundle_changed', 'bundle.json'))) {
    page = await newPage(context, `${url}&bundle=bundle_changed/bundle.json`);
    await guard(page.evaluate(() => window.sgApp.ready), 'changed model');
    r.changed = await page.evaluate(() => window.sgApp.info());
    await page.close();
  }
  return r;
}

async function shapes(context, origin, backend) {
  const page = await newPage(context, `${origin}/shapes/?backend=${backend}`);
  const ready = await guard(page.evaluate(() => window.sgShapes.ready), 'shapes start');
  const r = { ready };
  const before = await page.evaluate(() => window.sgShapes.state.mainFrames);
  r.bitmaps = await guard(page.evaluate(async () => { const o = []; for (let i = 0; i < 4; ++i) o.push(await window.sgShapes.frame(i, false)); return o; }), 'bitmap frames');
  r.buffers = await guard(page.evaluate(async () => { const o = []; for (let i = 0; i < 4; ++i) o.push(await window.sgShapes.frame(i, true)); return o; }), 'buffer frames');
  r.detached = await page.evaluate(() => window.sgShapes.state.detachedAfterSend);
  r.main_frames = (await page.evaluate(() => window.sgShapes.state.mainFrames)) - before;
  r.worker_checks = await guard(page.evaluate(() => window.sgShapes.checks()), 'worker checks');
  await shot(page, '#view', `${backend}_shapes_view`);
  r.disposed = await page.evaluate(() => window.sgShapes.dispose());
  await page.close();
  return r;
}

try {
  server = await serveCli(cli, root);
  results.origin = server.origin;
  browser = await launchChromium(chromium);
  // the backends side by side, each in its own browser context (its own IndexedDB, pages and GPU objects): the
  // pages wait on the GPU process most of the time, so running them at once shortens the test, not what it checks
  await Promise.all([...backends.map(async (backend) => {
    const context = await browser.newContext();
    const b = {};
    results.backends[backend] = b;
    try {
      b.digits = await digits(context, server.origin, backend);
      if (fs.existsSync(path.join(root, 'shapes', 'bundle', 'bundle.json')))
        b.shapes = await shapes(context, server.origin, backend);
    } catch (e) {
      b.error = e.message;
      status = 1;
    } finally {
      await context.close();
    }
  }), (async () => {
    // the shapes page as a visitor opens it (backend auto): WebGPU where the browser has it, else WebGL2
    if (!fs.existsSync(path.join(root, 'shapes', 'bundle', 'bundle.json'))) return;
    const context = await browser.newContext();
    try {
      const page = await newPage(context, `${server.origin}/shapes/`);
      results.shapes_auto = { ready: await guard(page.evaluate(() => window.sgShapes.ready), 'shapes (auto) start') };
      results.shapes_auto.frame = await guard(page.evaluate(() => window.sgShapes.frame(1, false)), 'shapes (auto) frame');
      results.shapes_auto.text = await page.evaluate(() => document.getElementById('backend').textContent);
    } catch (e) {
      results.shapes_auto = { error: e.message };
      status = 1;
    } finally {
      await context.close();
    }
  })()]);
} catch (e) {
  results.harness_error = e.message;
  status = 1;
} finally {
  if (browser) await browser.close();
  if (server) server.close();
}
console.log(JSON.stringify({ results, console: console_ }));
process.exit(status);
