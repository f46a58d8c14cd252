// Drives the word-completion page (examples/web/words/, built by scripts/build_web_demo.sh) in headless Chromium,
// served by `shadergrad serve`, on each backend in its own browser context, and prints what happened as one JSON line;
// tests/test_lm_web.cpp builds the folder, runs this and asserts (the completions against `shadergrad sample` on the
// page's checkpoint, the loss, the reload).
//
// Usage: node tests/words_page_check.mjs ROOT SHADERGRAD OUTDIR [BACKEND...]
//   ROOT        the demo folder (words/)
//   SHADERGRAD  the CLI binary (its `serve ROOT --port 0` serves the page)
//   OUTDIR      screenshots (*.png) and the page's checkpoints (BACKEND_words.safetensors) are written here
//   BACKEND     webgl2 and/or webgpu (default both)
// Per backend: start, completions of PREFIX (seed 3, temperature 0.8) and at temperature 0, the attention images,
// 20 fine-tune steps on a list of names, completions after, the checkpoint, a reload (IndexedDB) and the completions
// again; then (webgl2) the layout at 1024x768: the main controls' boxes inside the window and not intersecting.
// Exit status 0 = every step ran, 1 = the page broke, 2 = the environment is missing something.
import fs from 'node:fs';
import path from 'node:path';
import { guard, launchChromium, loadChromium, serveCli, watchConsole } from './browser.mjs';

const [root, cli, outDir, ...backendArgs] = process.argv.slice(2);
const backends = backendArgs.length ? backendArgs : ['webgl2', 'webgpu'];
if (!root || !cli || !outDir) {
  console.error('usage: node words_page_check.mjs ROOT SHADERGRAD OUTDIR [webgl2|webgpu...]');
  process.exit(2);
}
const chromium = await loadChromium();
fs.mkdirSync(outDir, { recursive: true });
const PREFIX = 'ma';
const NAMES = ['alice', 'amelia', 'anna', 'aurora', 'bella', 'charlotte', 'chloe', 'clara', 'ella', 'emma', 'grace',
               'hannah', 'isabella', 'julia', 'lily', 'lucy', 'mia', 'olivia', 'sophia', 'zoe', 'mara', 'maria'];

const results = { backends: {} };
const console_ = [];
let browser, server, status = 0;

async function newPage(context, url, viewport) {
  const page = await context.newPage(viewport ? { viewport } : undefined);
  if (viewport) await page.setViewportSize(viewport);
  page.setDefaultTimeout(300000);
  watchConsole(page, console_);
  const r = await page.goto(url, { waitUntil: 'load' });
  if (!r || !r.ok()) throw new Error(`${url}: HTTP ${r ? r.status() : 'no response'}`);
  return page;
}

async function words(context, origin, backend) {
  const r = { ms: {} };
  let t0 = Date.now();
  const lap = (what) => { r.ms[what] = Date.now() - t0; t0 = Date.now(); };  // for people reading the output
  const url = `${origin}/words/?backend=${backend}&db=sg-words-${backend}`;
  let page = await newPage(context, url);
  await guard(page.evaluate(() => window.sgWords.ready), 'words start');
  r.start = await page.evaluate(() => window.sgWords.info());
  lap('start');
  r.before = await guard(page.evaluate((p) => window.sgWords.complete({ prefix: p, temperature: 0.8, seed: 3 }), PREFIX),
                         'complete');
  r.greedy = await guard(page.evaluate((p) => window.sgWords.complete({ prefix: p, temperature: 0, seed: 0 }), PREFIX),
                         'complete greedy');
  lap('complete x2');
  r.attention = await page.evaluate(() => window.sgWords.attention());
  await page.locator('#attn canvas').first().screenshot({ path: path.join(outDir, `${backend}_attn.png`) });
  await page.locator('#attn canvas').first().hover({ position: { x: 1, y: 1 } });  // query 0, key 0: weight 1
  r.attn_hover = await page.evaluate(() => document.getElementById('attnHover').textContent);
  r.tune = await guard(page.evaluate((w) => window.sgWords.fineTune(20, w), NAMES), 'fine-tune');
  lap('fine-tune');
  await page.locator('#loss').screenshot({ path: path.join(outDir, `${backend}_loss.png`) });
  r.loss_axes = await page.evaluate(() => JSON.parse(document.getElementById('loss').dataset.axes || 'null'));
  r.after = await guard(page.evaluate((p) => window.sgWords.complete({ prefix: p, temperature: 0.8, seed: 3 }), PREFIX),
                        'complete after');
  const bytes = await page.evaluate(() => window.sgWords.checkpoint());
  fs.writeFileSync(path.join(outDir, `${backend}_words.safetensors`), Buffer.from(bytes));
  r.weight_before_reload = await page.evaluate(() => window.sgWords.read('head.weight'));
  r.status_after = await page.evaluate(() => window.sgWords.info());
  await page.close();
  // IndexedDB: a reload brings the fine-tuned weights back (the fine-tune saved them)
  page = await newPage(context, url);
  await guard(page.evaluate(() => window.sgWords.ready), 'words reload');
  r.reload = await page.evaluate(() => window.sgWords.info());
  r.weight_after_reload = await page.evaluate(() => window.sgWords.read('head.weight'));
  r.after_reload = await guard(page.evaluate((p) => window.sgWords.complete({ prefix: p, temperature: 0.8, seed: 3 }),
                                             PREFIX), 'complete after reload');
  // native -> browser: the shipped checkpoint loaded as a file gives the words of the start again
  r.imported = await guard(page.evaluate(async (p) => {
    const b = new Uint8Array(await (await fetch('pretrained.safetensors')).arrayBuffer());
    await window.sgWords.importCheckpoint(Array.from(b));
    return window.sgWords.complete({ prefix: p, temperature: 0.8, seed: 3 });
  }, PREFIX), 'import');
  await page.close();
  return r;
}

async function layout(context, origin) {
  const [w, h] = [1024, 768];
  const page = await newPage(context, `${origin}/words/?backend=webgl2&db=sg-words-layout`, { width: w, height: h });
  await guard(page.evaluate(() => window.sgWords.ready), 'words layout start');
  const ids = ['prefix', 'complete', 'temp', 'seed', 'completions', 'words', 'steps', 'finetune', 'reset', 'loss'];
  const boxes = await page.evaluate((ids) => ids.map((id) => {
    const r = document.getElementById(id).getBoundingClientRect();
    return { id, x: r.left, y: r.top + window.scrollY, w: r.width, h: r.height };
  }), ids);
  await page.screenshot({ path: path.join(outDir, `words_${w}x${h}.png`), fullPage: true });
  await page.close();
  return { width: w, height: h, boxes };
}

try {
  server = await serveCli(cli, root);
  browser = await launchChromium(chromium);
  await Promise.all(backends.map(async (backend) => {
    const context = await browser.newContext();
    try {
      results.backends[backend] = await words(context, server.origin, backend);
      if (backend === 'webgl2') results.layout = await layout(context, server.origin);
    } catch (e) {
      results.backends[backend] = { error: e.message };
      status = 1;
    } finally {
      await context.close();
    }
  }));
} catch (e) {
  results.harness_error = e.message;
  status = 1;
} finally {
  if (browser) await browser.close();
  if (server) server.close();
}
console.log(JSON.stringify({ results, console: console_ }));
process.exit(status);
