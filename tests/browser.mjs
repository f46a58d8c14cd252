// The one place the browser checks and benchmarks start headless Chromium and serve pages from (tests/
// web_app_check.mjs, tests/web_runtime_check.mjs, tests/debug_report_check.mjs, bench/web_app_bench.mjs):
//   loadChromium(from)        Debian's /usr/bin/chromium and npm playwright-core, or exit 2 naming what is missing
//   launchChromium(chromium)  headless, no sandbox, no network chatter, WebGL2 on ANGLE/SwiftShader, WebGPU on
//                             (SwiftShader's adapter: --enable-unsafe-webgpu), the flags of /work/shared/PEERS.md
//   serveStatic(mounts)       a loopback HTTP server (127.0.0.1, an ephemeral port) over folders, every response
//                             logged, optional COOP/COEP headers (a cross-origin isolated page), no traversal
//   serveCli(cli, root)       `shadergrad serve ROOT --port 0` (the product's own server), its origin
//   guard(p, what, s)         a hang guard (not a timing check): rejects naming `what` after s seconds
//   watchConsole(page, into)  console messages and page errors appended to a list, one string each
//   withCheckPage(chromium, root, options, fn)  ROOT at / and tests/web/ at /_test/, Chromium launched,
//                             check_page.html open and ready; fn({page, context, origin, served}); all closed after
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const CHROMIUM = '/usr/bin/chromium';

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run',
                              '--disable-background-networking', '--disable-component-update', '--disable-sync',
                              '--use-angle=swiftshader', '--enable-unsafe-swiftshader'];

/**
 * Playwright's chromium launcher, after checking that Debian's chromium is installed.
 * @param {string} [from] where playwright-core is (a node_modules folder); default: resolved from tests/
 * @returns {Promise<import('playwright-core').BrowserType>} (exits the process with status 2 when missing)
 */
export async function loadChromium(from) {
  if (!fs.existsSync(CHROMIUM)) {
    console.error(`${CHROMIUM} is missing: install the Debian package 'chromium' (scripts/setup.sh lists it)`);
    process.exit(2);
  }
  try {
    const mod = from ? await import(path.join(from, 'playwright-core', 'index.mjs')) : await import('playwright-core');
    return mod.chromium;
  } catch (e) {
    const dir = from ? path.dirname(from) : 'tests/';
    console.error(`npm package 'playwright-core' is missing: run 'npm ci' in ${dir} (${e.message})`);
    process.exit(2);
  }
}

/** Launches headless Chromium with the shared flags; `webgpu: false` leaves WebGPU off. */
export function launchChromium(chromium, { webgpu = true, args = [] } = {}) {
  return chromium.launch({ executablePath: CHROMIUM, headless: true,
                           args: [...CHROMIUM_ARGS, ...(webgpu ? ['--enable-unsafe-webgpu'] : []), ...args] });
}

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
                '.mjs': 'text/javascript; charset=utf-8', '.json': 'application/json', '.png': 'image/png',
                '.frag': 'text/plain; charset=utf-8', '.wgsl': 'text/plain; charset=utf-8',
                '.ts': 'text/plain; charset=utf-8', '.css': 'text/css; charset=utf-8',
                '.safetensors': 'application/octet-stream', '.bin': 'application/octet-stream' };

/**
 * Serves folders from 127.0.0.1 on an ephemeral port.
 * @param {{prefix: string, dir: string}[]} mounts URL prefix ('/', '/_test/', ...) -> folder; the longest prefix
 *   wins; a path ending in '/' serves its index.html
 * @param {{isolated?: boolean}} [options] isolated: COOP/COEP headers and no caching (crossOriginIsolated pages)
 * @returns {Promise<{origin: string, served: {path: string, status: number}[], close: () => void}>}
 */
export async function serveStatic(mounts, { isolated = false } = {}) {
  const ms = mounts.map((m) => ({ prefix: m.prefix, dir: path.resolve(m.dir) }))
                   .sort((a, b) => b.prefix.length - a.prefix.length);
  const served = [];
  const headers = isolated ? { 'cross-origin-opener-policy': 'same-origin',
                               'cross-origin-embedder-policy': 'require-corp', 'cache-control': 'no-store' } : {};
  const server = http.createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url, 'http://127.0.0.1').pathname);
    const m = ms.find((x) => rel.startsWith(x.prefix));
    const sub = m ? '/' + rel.slice(m.prefix.length) : '';
    const file = m ? path.resolve(m.dir, '.' + (sub.endsWith('/') ? sub + 'index.html' : sub)) : '';
    if (!m || !file.startsWith(m.dir + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      served.push({ path: rel, status: 404 });
      res.writeHead(404, { ...headers, 'content-type': 'text/plain' });
      res.end('not found');
      return;
    }
    served.push({ path: rel, status: 200 });
    res.writeHead(200, { ...headers, 'content-type': TYPES[path.extname(file)] || 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${server.address().port}`, served, close: () => server.close() };
}

/** Starts `CLI serve ROOT --port 0`; resolves to {origin, close} once it printed its address. */
export function serveCli(cli, root) {
  return new Promise((resolve, reject) => {
    const child = spawn(cli, ['serve', root, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/http:\/\/127\.0\.0\.1:(\d+)\//);
      if (m) resolve({ origin: `http://127.0.0.1:${m[1]}`, close: () => child.kill('SIGTERM') });
    });
    child.stderr.on('data', (d) => { out += d; });
    child.on('exit', (code) => reject(new Error(`${cli} serve exited ${code}: ${out}`)));
  });
}

/** `p`, or a rejection naming `what` after `s` seconds (a hang guard, never a timing assertion). */
export function guard(p, what, s = 300) {
  let t;
  return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`${what} hung (${s} s)`)), s * 1000); })])
    .finally(() => clearTimeout(t));
}

/** Appends the page's console messages ('type: text') and page errors ('pageerror: message') to `into`. */
export function watchConsole(page, into, label = '') {
  page.on('console', (m) => into.push(`${label}${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => into.push(`${label}pageerror: ${e.message}`));
}

/**
 * Serves `root` at / and tests/web/ at /_test/, launches Chromium, opens /_test/check_page.html (the page side of the
 * browser checks) and waits until it is ready, then resolves to what `fn` returns; the browser and the server are
 * closed whatever happens (an error propagates).
 * @param {import('playwright-core').BrowserType} chromium from loadChromium()
 * @param {string} root
 * @param {{isolated?: boolean, console?: string[]}} options isolated: COOP/COEP headers (serveStatic); console: the
 *   page's messages are appended there (watchConsole)
 * @param {(s: {page: object, context: object, origin: string, served: object[]}) => Promise<any>} fn
 */
export async function withCheckPage(chromium, root, { isolated = false, console: into = [] }, fn) {
  const web = path.join(path.dirname(fileURLToPath(import.meta.url)), 'web');
  const server = await serveStatic([{ prefix: '/_test/', dir: web }, { prefix: '/', dir: root }], { isolated });
  let browser;
  try {
    browser = await launchChromium(chromium);
    const context = await browser.newContext();
    const page = await context.newPage();
    page.setDefaultTimeout(600000);
    watchConsole(page, into);
    const resp = await page.goto(`${server.origin}/_test/check_page.html`, { waitUntil: 'load' });
    if (!resp || !resp.ok()) throw new Error(`check_page.html: HTTP ${resp ? resp.status() : 'no response'}`);
    await page.waitForFunction(() => window.sgReady === true);
    return await fn({ page, context, origin: server.origin, served: server.served });
  } finally {
    if (browser) await browser.close();
    server.close();
  }
}
