// Loads a shadergrad debug report (DIR/report.html) in real headless Chromium and checks that it is a working,
// self-contained page: no console errors or page errors, no failed or non-loopback requests, every <img>
// decoded (naturalWidth > 0), the gradient-flow plot and the kernels' GLSL ES sources present.
//
// Usage: node tests/debug_report_check.mjs DIR [SCREENSHOT.png]
// Needs Debian's `chromium` (/usr/bin/chromium, installed by scripts/setup.sh) and npm `playwright-core`
// (tests/package.json; `npm ci` in tests/ — test_debug runs it when tests/node_modules is missing).
// Serves DIR from a loopback HTTP server on 127.0.0.1 (an ephemeral port) started here.
// Prints one JSON line with what it found; exit status 0 = all checks passed, 1 = a check failed,
// 2 = the environment is missing something (the message names it).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const CHROMIUM = '/usr/bin/chromium';
const dir = process.argv[2];
const screenshot = process.argv[3];
if (!dir || !fs.existsSync(path.join(dir, 'report.html'))) {
  console.error(`usage: node debug_report_check.mjs DIR [SCREENSHOT.png] (DIR/report.html must exist; got '${dir}')`);
  process.exit(2);
}
if (!fs.existsSync(CHROMIUM)) {
  console.error(`${CHROMIUM} is missing: install the Debian package 'chromium' (apt-get install chromium; ` +
                `scripts/setup.sh lists it)`);
  process.exit(2);
}
let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  console.error(`npm package 'playwright-core' is missing: run 'npm ci' in tests/ (${e.message})`);
  process.exit(2);
}

const types = { '.html': 'text/html; charset=utf-8', '.png': 'image/png', '.json': 'application/json',
                '.frag': 'text/plain; charset=utf-8' };
const root = path.resolve(dir);
const served = [];
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  const file = path.resolve(root, '.' + decodeURIComponent(url.pathname));
  if (!file.startsWith(root + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
    served.push({ path: url.pathname, status: 404 });
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found');
    return;
  }
  served.push({ path: url.pathname, status: 200 });
  res.writeHead(200, { 'content-type': types[path.extname(file)] || 'application/octet-stream' });
  fs.createReadStream(file).pipe(res);
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const origin = `http://127.0.0.1:${server.address().port}`;

const problems = [];
let browser;
let result = {};
try {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
  });
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
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: false });
  result = { title, images: imgs.length, broken: broken.length, plot: plot ? [plot.w, plot.h] : null, shaders,
             requests: served.length };
} catch (e) {
  problems.push(`browser: ${e.message}`);
} finally {
  if (browser) await browser.close();
  server.close();
}
result.problems = problems;
console.log(JSON.stringify(result));
process.exit(problems.length ? 1 : 0);
