// The draw-a-digit page (examples/web/digits/) in a classroom's windows (issue 40): at 1024x768 and 1366x768 in
// headless Chromium (WebGL2 on SwiftShader), with the runtime of this source tree:
//   - the main controls (pad, clear, what the model sees, prediction bars, the teach buttons, the loss plot) are
//     inside the window's width and their element boxes do not intersect; the prediction is above the fold;
//   - after one gradient-flow step every activation/gradient image is scaled up by a whole factor (>= 2) with
//     nearest-neighbour sampling, has its own colour bar with the end values, a click zooms it, and hovering an
//     element shows its value;
//   - the loss and gradient-norm plots have axes: tick values on both, the x axis in steps, the y axis named;
//   - the shapes page (examples/web/shapes/): its buttons, checkbox and both canvases do not overlap and are in the
//     first screen.
// Screenshots (the whole page) web_demo_WxH.png in the working directory.
//
// Usage: node tests/web_demo_layout_check.mjs SHADERGRAD_CLI   (builds the demos with scripts/build_web_demo.sh:
// the digits MLP trained 1 epoch; the shapes CNN with its shipped checkpoint). Exit 0 = every assertion held, 1 = one failed, 2 = chromium or playwright-core missing.
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
  console.error('usage: node web_demo_layout_check.mjs SHADERGRAD_CLI');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
ensureNpmPackage('playwright-core');
const chromium = await loadChromium();
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_demo_layout_'));
let browser, server;

/** Every box is shown, inside the window's width `w`, and no two intersect. */
function checkBoxes(boxes, w, what) {
  for (const b of boxes) {
    assert.ok(b.w > 0 && b.h > 0, what(`#${b.id} is not shown ${JSON.stringify(b)}`));
    assert.ok(b.x >= 0 && b.x + b.w <= w + 0.5, what(`#${b.id} leaves the window's width ${JSON.stringify(b)}`));
  }
  for (let i = 0; i < boxes.length; ++i)
    for (let j = i + 1; j < boxes.length; ++j) {
      const a = boxes[i], b = boxes[j];
      const overlap = a.x < b.x + b.w - 0.5 && b.x < a.x + a.w - 0.5 && a.y < b.y + b.h - 0.5 && b.y < a.y + a.h - 0.5;
      assert.ok(!overlap, what(`#${a.id} and #${b.id} overlap ${JSON.stringify([a, b])}`));
    }
}
try {
  execFileSync('bash', [path.join(here, '../scripts/build_web_demo.sh'), root, cli],
               { env: { ...process.env, DIGITS_EPOCHS: '1' }, stdio: ['ignore', 'ignore', 'inherit'] });
  for (const demo of ['digits', 'shapes']) {
    const rt = path.join(root, demo, 'bundle/runtime');
    fs.rmSync(rt, { recursive: true });
    fs.cpSync(path.join(here, '../runtime/web'), rt, { recursive: true });
  }
  server = await serveStatic([{ prefix: '/', dir: root }]);
  browser = await launchChromium(chromium, { webgpu: false });
  for (const [w, h] of [[1024, 768], [1366, 768]]) {
    const page = await browser.newPage({ viewport: { width: w, height: h } });
    const log = [];
    watchConsole(page, log);
    page.setDefaultTimeout(240000);
    const what = (s) => `${w}x${h}: ${s}\nconsole:\n${log.join('\n')}`;
    await page.goto(`${server.origin}/digits/?backend=webgl2&db=layout_${w}`);
    await guard(page.evaluate(() => window.sgApp.ready), 'digits page ready', 240);
    // one gradient-flow step
    await page.click('#step');
    await guard(page.waitForFunction(() => document.querySelectorAll('#flow figure').length > 0 &&
                                           !document.querySelector('#step').disabled), 'gradient-flow step', 120);
    await page.evaluate(() => window.scrollTo(0, 0));
    const ids = ['pad', 'clear', 'seen', 'bars', 'labels', 'finetune', 'step', 'scratch', 'pretrained', 'loss'];
    const boxes = await page.evaluate((ids) => ids.map((id) => {
      const r = document.getElementById(id).getBoundingClientRect();
      return { id, x: r.left, y: r.top + window.scrollY, w: r.width, h: r.height };
    }), ids);
    await page.screenshot({ path: `web_demo_${w}x${h}.png`, fullPage: true });
    checkBoxes(boxes, w, what);
    for (const id of ['pad', 'seen', 'bars']) {
      const b = boxes.find((x) => x.id === id);
      assert.ok(b.y + b.h <= h, what(`#${id} is below the fold ${JSON.stringify(b)}`));
    }
    // the gradient-flow images
    const flow = await page.evaluate(() => [...document.querySelectorAll('#flow figure')].map((f) => {
      const cv = f.querySelector('canvas.tensor');
      return { tensor: f.dataset.tensor, zoom: cv.clientWidth / cv.width, zoomY: cv.clientHeight / cv.height,
               rendering: getComputedStyle(cv).imageRendering, bar: !!f.querySelector('canvas.colorbar'),
               labels: [...f.querySelectorAll('.colorbar-labels span')].map((s) => s.textContent) };
    }));
    assert.ok(flow.length >= 4, what(`flow figures ${JSON.stringify(flow)}`));
    for (const f of flow) {
      const where = what(JSON.stringify(f));
      assert.ok(Number.isInteger(f.zoom) && f.zoom >= 2 && f.zoom === f.zoomY, where);
      assert.equal(f.rendering, 'pixelated', where);
      assert.ok(f.bar && f.labels.length === 3 && f.labels.every((s) => s.length > 0), where);
    }
    // click zooms (twice the scale), hover shows the element's value
    const z = await page.evaluate(() => {
      const f = document.querySelector('#flow figure'), cv = f.querySelector('canvas.tensor');
      const before = cv.clientWidth / cv.width;
      cv.click();
      const after = cv.clientWidth / cv.width;
      const b = cv.getBoundingClientRect(), r = 1, c = 2;
      cv.dispatchEvent(new MouseEvent('mousemove', { clientX: b.left + (c + 0.5) * b.width / cv.width,
                                                     clientY: b.top + (r + 0.5) * b.height / cv.height, bubbles: true }));
      return { before, after, hover: f.querySelector('.hover').textContent, value: window.sgApp.flowValue(f.dataset.tensor, r, c) };
    });
    assert.ok(z.after === 2 * z.before, what(`click zoom ${JSON.stringify(z)}`));
    assert.equal(z.hover, `[1, 2] = ${z.value}`, what('hover value'));
    // plots with axes
    const axes = await page.evaluate(() => ['loss', 'norms'].map((id) => JSON.parse(document.getElementById(id).dataset.axes || 'null')));
    for (const a of axes) {
      assert.ok(a && a.x === 'step' && a.y.length > 0, what(`axes ${JSON.stringify(axes)}`));
      assert.ok(a.yTicks.length >= 2 && a.xTicks.length >= 1, what(`ticks ${JSON.stringify(axes)}`));
    }
    // the shapes page (a Worker classifying frames): its controls and both canvases, in the first screen
    const shapes = await browser.newPage({ viewport: { width: w, height: h } });
    watchConsole(shapes, log, 'shapes ');
    await shapes.goto(`${server.origin}/shapes/?backend=webgl2`);
    await guard(shapes.evaluate(() => window.sgShapes.ready.then(() => true)), 'shapes page ready', 240);
    const sboxes = await shapes.evaluate(() => ['run', 'stop', 'buffers', 'source', 'view', 'backend'].map((id) => {
      const r = document.getElementById(id).getBoundingClientRect();
      return { id, x: r.left, y: r.top, w: r.width, h: r.height };
    }));
    await shapes.screenshot({ path: `web_demo_shapes_${w}x${h}.png` });
    checkBoxes(sboxes, w, (s) => what(`shapes: ${s}`));
    for (const b of sboxes.filter((x) => x.id !== 'backend'))
      assert.ok(b.y + b.h <= h, what(`shapes: #${b.id} is below the fold ${JSON.stringify(b)}`));
    await shapes.close();
    console.log(`web demo layout ${w}x${h}: ok (bars at y ${boxes.find((x) => x.id === 'bars').y}..` +
                `${Math.round(boxes.find((x) => x.id === 'bars').y + boxes.find((x) => x.id === 'bars').h)}, ` +
                `flow zooms ${flow.map((f) => f.zoom).join(',')})`);
    await page.close();
  }
} finally {
  await browser?.close();
  server?.close();
  fs.rmSync(root, { recursive: true, force: true });
}
