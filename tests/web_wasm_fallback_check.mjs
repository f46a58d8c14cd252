// The backend chain falls through to wasm (issue 39): in headless Chromium with WebGL and WebGPU disabled (no GPU
// process rendering: --disable-gpu --disable-software-rasterizer, with --disable-3d-apis --disable-webgl
// --disable-features=WebGPU and no --enable-unsafe-webgpu; in the page and in its Workers alike), a bundle of every target
// runs on its wasm plan in the page and in a Worker, `rt.attempts` says in words why WebGPU and WebGL2 did not run, and
// the bundle's checks (infer, an Adam step, infer, the weights after it) equal the native CPU reference there. And a
// WebGL2 device whose fragment highp float is below 23 bits (the page's getShaderPrecisionFormat made to say 16, as a
// mobile GPU's mediump-only highp would) falls through to wasm too, the reason naming the bits.
//
// Usage: node tests/web_wasm_fallback_check.mjs SHADERGRAD_CLI   (ctest: web_wasm_fallback)
// Exports a small MLP bundle with the CLI into a temporary directory (the runtime of this source tree in place of
// its embedded copy), runs tests/web/check_page.js sgCheck in the page and in a Worker, and asserts. Exit 0 = every
// assertion held, 1 = one failed, 2 = the environment lacks chromium or playwright-core.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { guard, launchChromium, loadChromium, serveStatic, watchConsole } from './browser.mjs';
import { ensureNpmPackage } from './npm_deps.mjs';

const cli = process.argv[2];
if (!cli || !fs.existsSync(cli)) {
  console.error('usage: node web_wasm_fallback_check.mjs SHADERGRAD_CLI');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
ensureNpmPackage('playwright-core');
const chromium = await loadChromium();
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_wasm_fallback_'));
let browser, server;
try {
  const dir = path.join(root, 'mlp');
  execFileSync(cli, ['export', '--model', 'mlp', '--batch', '4', '--infer-batch', '2', '--check-steps', '1',
                     '--webgpu-plans', 'cpu', '--out', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
  const b = JSON.parse(fs.readFileSync(path.join(dir, 'bundle.json'), 'utf8'));
  assert.deepEqual(b.targets, ['webgpu', 'webgl2', 'wasm'], 'the CLI exports every target by default');
  fs.rmSync(path.join(dir, 'runtime'), { recursive: true });
  fs.cpSync(path.join(here, '../runtime/web'), path.join(dir, 'runtime'), { recursive: true });

  server = await serveStatic([{ prefix: '/_test/', dir: path.join(here, 'web') }, { prefix: '/', dir: root }]);
  browser = await launchChromium(chromium, { webgpu: false,
                                             args: ['--disable-3d-apis', '--disable-webgl', '--disable-features=WebGPU', '--disable-gpu', '--disable-software-rasterizer'] });
  const page = await (await browser.newContext()).newPage();
  const log = [];
  watchConsole(page, log);
  const resp = await page.goto(`${server.origin}/_test/check_page.html`, { waitUntil: 'load' });
  assert.ok(resp?.ok(), 'check_page.html loads');
  await page.waitForFunction(() => window.sgReady === true);
  const checkOn = async (pg, mode) => {
    const r = await guard(pg.evaluate(([m]) => window.sgCheck('mlp', m), [mode]), `sgCheck ${mode}`, 240);
    assert.ok(r.ok, `${mode}: the runtime was created and the checks ran\n${JSON.stringify(r).slice(0, 3000)}`);
    return r;
  };
  for (const mode of ['main', 'worker']) {
    const r = await checkOn(page, mode);
    const what = (s) => `${mode}: ${s}\n${JSON.stringify(r, null, 1).slice(0, 6000)}\nconsole: ${log.join('\n')}`;
    assert.ok(r.ok, what('the runtime was created and the checks ran'));
    const rep = r.report;
    assert.equal(rep.backend, 'wasm', what('the checks ran on wasm'));
    assert.ok(rep.ok, what('the checks equal the CPU reference'));
    assert.equal(rep.runs.length, b.checks.runs.length, what('every check run'));
    const a = rep.attempts;
    assert.deepEqual(a.map((x) => [x.backend, x.ok]), [['webgpu', false], ['webgl2', false], ['wasm', true]],
                     what('webgpu and webgl2 tried first, then wasm'));
    assert.match(a[0].reason, /WebGPU|navigator\.gpu|adapter/, what('why not WebGPU'));
    assert.match(a[1].reason, /WebGL2|webgl2|context/i, what('why not WebGL2'));
    assert.match(a[2].reason, /WebAssembly SIMD128, one thread: .*wasm\/kernels\.wasm/, what('why wasm'));
    console.log(`web_wasm_fallback ${mode}: checks ok on wasm (${rep.checks_ms.toFixed(0)} ms); webgpu: ${a[0].reason}; ` +
                `webgl2: ${a[1].reason}`);
  }
  await browser.close();

  // WebGL2 without 23-bit highp float (WebGPU off): the webgl2 attempt names the bits, wasm runs the checks
  browser = await launchChromium(chromium, { webgpu: false, args: ['--disable-features=WebGPU'] });
  const context = await browser.newContext();
  await context.addInitScript(() => {
    const real = WebGL2RenderingContext.prototype.getShaderPrecisionFormat;
    WebGL2RenderingContext.prototype.getShaderPrecisionFormat = function (shader, type) {
      const f = real.call(this, shader, type);
      return type === this.HIGH_FLOAT ? { precision: 16, rangeMin: 15, rangeMax: 15 } : f;
    };
  });
  const page2 = await context.newPage();
  watchConsole(page2, log);
  assert.ok((await page2.goto(`${server.origin}/_test/check_page.html`, { waitUntil: 'load' }))?.ok());
  await page2.waitForFunction(() => window.sgReady === true);
  const r = await checkOn(page2, 'main');
  const a = r.report.attempts;
  const what = (s) => `highp: ${s}\n${JSON.stringify(a, null, 1)}`;
  assert.equal(r.report.backend, 'wasm', what('the checks ran on wasm'));
  assert.ok(r.report.ok, what('the checks equal the CPU reference'));
  assert.deepEqual(a.map((x) => [x.backend, x.ok]), [['webgpu', false], ['webgl2', false], ['wasm', true]], what('order'));
  assert.match(a[1].reason, /highp float has 16 mantissa bits/, what('why not WebGL2'));
  console.log(`web_wasm_fallback highp: checks ok on wasm; webgl2: ${a[1].reason}`);
} finally {
  if (browser) await browser.close();
  server?.close();
  fs.rmSync(root, { recursive: true, force: true });
}
