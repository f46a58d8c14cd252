// Loads a shadergrad debug report (DIR/report.html) in real headless Chromium and checks that it is a working,
// self-contained page: no console errors or page errors, no failed or non-loopback requests, every <img>
// decoded (naturalWidth > 0), the gradient-flow plot and the kernels' GLSL ES sources present, and the graph
// view works: nodes and gradient-coloured edges drawn, a click on a node shows its value, gradient and kernel,
// and a screenshot of it is not blank.
//
// Usage: node tests/debug_report_check.mjs DIR [SCREENSHOT.png]
// Needs Debian's `chromium` (/usr/bin/chromium, installed by scripts/setup.sh) and npm `playwright-core`
// (tests/package.json; `npm ci` in tests/ — test_debug runs it when tests/node_modules is missing).
// Serves DIR from a loopback HTTP server on 127.0.0.1 (an ephemeral port) started here.
// Prints one JSON line with what it found; exit status 0 = all checks passed, 1 = a check failed,
// 2 = the environment is missing something (the message names it).
import fs from 'node:fs';
import path from 'node:path';
import { launchChromium, loadChromium, serveStatic } from './browser.mjs';

const dir = process.argv[2];
const screenshot = process.argv[3];
if (!dir || !fs.existsSync(path.join(dir, 'report.html'))) {
  console.error(`usage: node debug_report_check.mjs DIR [SCREENSHOT.png] (DIR/report.html must exist; got '${dir}')`);
  process.exit(2);
}
const chromium = await loadChromium();
const server = await serveStatic([{ prefix: '/', dir }]);
const { origin, served } = server;

const problems = [];
let browser;
let result = {};
try {
  browser = await launchChromium(chromium, { webgpu: false });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} (${r.failure()?.errorText})`));
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(origin + '/') && !u.startsWith('data:')) problems.push(`request leaves the report: ${u}`);
  });
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.url()}`); });
  const resp = await page.goto(`${origin}/report.html`, { waitUntil: 'load', timeout: 60000 });
  if (!resp || !resp.ok()) problems.push(`report.html: HTTP ${resp ? resp.status() : 'no response'}`);
  // Every image must be fully decoded; 'load' waits for them, decode() settles any still in flight.
  // (naturalWidth alone is not enough: a truncated PNG has a valid header, so a width, but decode() rejects.)
  const imgs = await page.$$eval('img', async (els) => {
    const ok = await Promise.all(els.map((i) => i.decode().then(() => true, () => false)));
    return els.map((i, k) => ({ src: i.getAttribute('src'), w: i.naturalWidth, h: i.naturalHeight, decoded: ok[k] }));
  });
  const broken = imgs.filter((i) => !(i.w > 0) || !i.decoded);
  for (const b of broken) problems.push(`image did not decode: ${b.src} (naturalWidth ${b.w})`);
  if (imgs.length === 0) problems.push('the report has no images');
  const plot = imgs.find((i) => i.src === 'gradient_flow.png');
  if (!plot) problems.push('no gradient_flow.png image');
  const shaders = await page.$$eval('details pre', (els) => els.filter((e) => e.textContent.includes('#version 300 es')).length);
  if (shaders === 0) problems.push('no GLSL ES kernel source (#version 300 es) in the report');
  const title = await page.title();

  // The graph view: nodes and edges drawn, edges coloured by gradient norm, and a click on a node shows its value,
  // its gradient and the kernel that computed it (images decoded, the kernel's name and source in the panel).
  const graph = await page.evaluate(() => {
    const edges = [...document.querySelectorAll('#graph .gedge')];
    return { nodes: document.querySelectorAll('#graph .gnode').length, edges: edges.length,
             coloured: edges.filter((e) => e.getAttribute('stroke') !== '#bbb').length };
  });
  if (graph.nodes < 5) problems.push(`graph view: ${graph.nodes} nodes`);
  if (graph.edges < 4) problems.push(`graph view: ${graph.edges} edges`);
  // A report cut short by --check-numerics has no gradients for its last step: the graph still draws, and a node
  // with a value still shows it, but gradient colours and images are not required there.
  const failed = await page.evaluate(() => Boolean(JSON.parse(document.getElementById('sg-data').textContent).failure));
  if (graph.coloured < 1 && !failed) problems.push('graph view: no edge coloured by a gradient norm');
  // Pick a computed forward node with a gradient (a matmul when there is one), as a student would.
  const target = await page.evaluate((failed) => {
    const D = JSON.parse(document.getElementById('sg-data').textContent);
    const ok = (n) => n.role === 'forward' && n.value && n.value.png &&
                      (failed || (n.grad !== undefined && D.nodes[n.grad].value));
    const n = D.nodes.find((m) => ok(m) && m.op === 'matmul') || D.nodes.find(ok);
    return n ? { n: n.n, kernel: n.kernel, grad: failed ? null : n.grad } : null;
  }, failed);
  let clicked = null;
  if (!target) {
    problems.push('graph view: no forward node with a value and a gradient to click');
  } else {
    await page.click(`#graph .gnode[data-node="${target.n}"]`);
    await page.waitForFunction((k) => document.getElementById('panel').dataset.node === String(k), target.n,
                               { timeout: 10000 });
    clicked = await page.$eval('#panel', async (p) => {
      const imgs = [...p.querySelectorAll('img')];
      const ok = await Promise.all(imgs.map((i) => i.decode().then(() => i.naturalWidth > 0, () => false)));
      const src = p.querySelector('details.ksrc pre');
      return { images: imgs.length, decoded: ok.filter((x) => x).length, text: p.textContent,
               kernel_source: src ? src.textContent.includes('#version 300 es') : false,
               selected: document.querySelectorAll('#graph .gnode.sel').length };
    });
    const want = failed ? 1 : 2;
    if (clicked.images < want || clicked.decoded < want)
      problems.push(`graph click on n${target.n}: ${clicked.decoded} of ${clicked.images} images decoded ` +
                    `(${failed ? 'the value' : 'value and gradient'} expected)`);
    if (!clicked.text.includes(target.kernel)) problems.push(`graph click on n${target.n}: kernel ${target.kernel} not named`);
    if (!failed && !clicked.text.includes(`n${target.grad}`))
      problems.push(`graph click on n${target.n}: gradient node n${target.grad} not named`);
    if (!clicked.kernel_source) problems.push(`graph click on n${target.n}: the kernel's GLSL ES source is missing`);
    if (clicked.selected !== 1) problems.push(`graph click on n${target.n}: ${clicked.selected} nodes highlighted`);
  }
  // Screenshots are not blank: the graph (after the click) has many distinct colours (nodes, coloured edges).
  const box = await page.$('#graph-wrap');
  const shot = box ? await box.screenshot() : null;
  let colours = 0;
  if (shot) {
    colours = await page.evaluate(async (b64) => {
      const img = new Image();
      img.src = 'data:image/png;base64,' + b64;
      await img.decode();
      const c = document.createElement('canvas');
      c.width = img.naturalWidth;
      c.height = img.naturalHeight;
      const g = c.getContext('2d');
      g.drawImage(img, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height).data, seen = new Set();
      for (let i = 0; i < d.length; i += 4 * 7) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      return seen.size;
    }, shot.toString('base64'));
  }
  if (colours < 20) problems.push(`graph screenshot looks blank: ${colours} distinct colours`);
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: false });
  result = { title, images: imgs.length, broken: broken.length, plot: plot ? [plot.w, plot.h] : null, shaders,
             requests: served.length, graph, clicked: clicked ? { node: target.n, images: clicked.images,
             decoded: clicked.decoded } : null, screenshot_colours: colours };
} catch (e) {
  problems.push(`browser: ${e.message}`);
} finally {
  if (browser) await browser.close();
  server.close();
}
result.problems = problems;
console.log(JSON.stringify(result));
process.exit(problems.length ? 1 : 0);
