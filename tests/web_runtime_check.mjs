// Runs shadergrad web bundles (shadergrad export) in real headless Chromium on WebGL2 (SwiftShader) with the
// runtime copy inside each bundle, on the main thread and in a Worker, and prints what happened as one JSON line.
// The C++ test (tests/test_web_runtime.cpp) exports the bundles, breaks some on purpose, runs this and asserts.
//
// Usage: node tests/web_runtime_check.mjs ROOT TASK...
//   ROOT      a directory with one bundle per subdirectory (ROOT/NAME/bundle.json)
//   TASK      check:NAME:MODE[:BACKEND]   replay NAME's checks (MODE main | worker; BACKEND auto (default) | webgpu
//                                         | webgl2): the report, or the error thrown
//             lost:NAME:MODE[:BACKEND]    one run, then WEBGL_lose_context / GPUDevice.destroy(): what the next run
//                                         and read throw (BACKEND default webgl2)
//             webgpu:NAME                 createRuntime with backend 'webgpu' forced: the error and its reasons
//             profile:NAME:MODE[:BACKEND] one train step with profile: true: kernel names and timings()
//             demo:NAME:MODE    opens NAME/runtime/demo.html (the bundle's self-check page): its sgDemoResult
// Serves ROOT and tests/web/ (at /_test/) from 127.0.0.1 on an ephemeral port with COOP/COEP headers (a
// cross-origin isolated page). Exit status 0 = every task ran (whatever it returned), 1 = the page broke,
// 2 = the environment is missing something (the message names it). No timing is asserted anywhere.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const CHROMIUM = '/usr/bin/chromium';
const [root, ...tasks] = process.argv.slice(2);
if (!root || !fs.existsSync(root) || !tasks.length) {
  console.error('usage: node web_runtime_check.mjs ROOT check:NAME:main|worker | lost:NAME:MODE | webgpu:NAME ...');
  process.exit(2);
}
if (!fs.existsSync(CHROMIUM)) {
  console.error(`${CHROMIUM} is missing: install the Debian package 'chromium' (scripts/setup.sh lists it)`);
  process.exit(2);
}
let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  console.error(`npm package 'playwright-core' is missing: run 'npm ci' in tests/ (${e.message})`);
  process.exit(2);
}

const here = path.dirname(fileURLToPath(import.meta.url));
const testDir = path.join(here, 'web');
const bundleRoot = path.resolve(root);
const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
                '.mjs': 'text/javascript; charset=utf-8', '.json': 'application/json', '.frag': 'text/plain; charset=utf-8',
                '.wgsl': 'text/plain; charset=utf-8',
                '.safetensors': 'application/octet-stream', '.ts': 'text/plain; charset=utf-8' };
const served = [];
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  const rel = decodeURIComponent(url.pathname);
  const [base, sub] = rel.startsWith('/_test/') ? [testDir, rel.slice(6)] : [bundleRoot, rel];
  const file = path.resolve(base, '.' + sub);
  const headers = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp',
                    'cache-control': 'no-store' };
  if (!file.startsWith(base + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
    served.push({ path: rel, status: 404 });
    res.writeHead(404, { ...headers, 'content-type': 'text/plain' });
    res.end('not found');
    return;
  }
  served.push({ path: rel, status: 200 });
  res.writeHead(200, { ...headers, 'content-type': types[path.extname(file)] || 'application/octet-stream' });
  fs.createReadStream(file).pipe(res);
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const origin = `http://127.0.0.1:${server.address().port}`;

const console_ = [];
const results = {};
let browser, status = 0;
try {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--enable-unsafe-webgpu'],
  });
  const context = await browser.newContext();
  const page = await context.newPage();
  page.setDefaultTimeout(600000);
  page.on('console', (m) => console_.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => console_.push(`pageerror: ${e.message}`));
  const resp = await page.goto(`${origin}/_test/check_page.html`, { waitUntil: 'load' });
  if (!resp || !resp.ok()) throw new Error(`check_page.html: HTTP ${resp ? resp.status() : 'no response'}`);
  await page.waitForFunction(() => window.sgReady === true);
  results.crossOriginIsolated = await page.evaluate(() => self.crossOriginIsolated);
  for (const task of tasks) {
    const [kind, name, mode, backend] = task.split(':');
    if (kind === 'demo') {
      const demo = await context.newPage();
      demo.on('pageerror', (e) => console_.push(`demo pageerror: ${e.message}`));
      await demo.goto(`${origin}/${name}/runtime/demo.html?mode=${mode}`, { waitUntil: 'load' });
      await demo.waitForFunction(() => window.sgDemoResult !== undefined, null, { timeout: 300000 });
      results[task] = await demo.evaluate(() => ({ ...window.sgDemoResult,
                                                   text: document.getElementById('out').textContent }));
      await demo.close();
      continue;
    }
    const fn = { check: 'sgCheck', lost: 'sgLostContext', webgpu: 'sgSelectWebGPU', profile: 'sgProfile',
                 labels: 'sgBadLabels' }[kind];
    if (!fn) throw new Error(`unknown task '${task}'`);
    // a hang guard, not a timing check: no task here takes more than a minute even on a busy 2-core machine
    let timer;
    const hang = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`task ${task} hung (300 s)`)), 300000); });
    results[task] = await Promise.race([page.evaluate(([f, n, m, b]) => window[f](n, m, b), [fn, name, mode, backend]),
                                        hang]);
    clearTimeout(timer);
  }
} catch (e) {
  results.harness_error = e.message;
  status = 1;
} finally {
  if (browser) await browser.close();
  server.close();
}
console.log(JSON.stringify({ results, console: console_, requests: served.length }));
process.exit(status);
