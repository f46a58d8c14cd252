// The wasm plan on several threads (issue 39; runtime/web/wasm.js, wasm_pool.js, wasm_worker.js): a kernel with
// enough work has its workgroups split over a pool of Workers sharing the module's memory, and the results are those
// of one thread, bit for bit.
//
//   node tests/wasm_threads_check.mjs node SHADERGRAD_CLI      (ctest: web_wasm_threads_node)
//     MLP (batch 128) and CNN (batch 16) bundles exported with --targets wasm; their check sequence (infer, Adam
//     steps, infer) replayed in Node with wasmThreads 1, 2, 3 and 4 (4 twice): every output and every persistent
//     value after the sequence has the same bits as with one thread; the runtime reports the thread count; the
//     kernels the bundle marks as worth splitting (work >= wasm.threads.parallel_work, > 1 workgroup) are split and
//     no others; runChecks() (the native CPU reference) passes on 1 and 4 threads; a bundle.json without
//     `wasm.threads` runs one thread and says why; wasmThreads 0 is refused; a trap on the pool's threads is thrown
//     to the caller and the pool goes on.
//   node tests/wasm_threads_check.mjs chromium SHADERGRAD_CLI  (ctest: web_wasm_threads_chromium)
//     headless Chromium: an MLP bundle on a cross-origin isolated page (COOP/COEP) runs the wasm plan with more than
//     one thread in the page and in a Worker (caps and the attempt's reason say how many), its checks pass and its
//     outputs and persistent values have the bits of one thread; the same page served without the headers runs one
//     thread and says why.
// Exit 0 = every assertion held, 1 = one failed, 2 = the environment lacks chromium or playwright-core.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const [mode, cli] = process.argv.slice(2);
if (!['node', 'chromium'].includes(mode) || !cli || !fs.existsSync(cli)) {
  console.error('usage: node wasm_threads_check.mjs node|chromium SHADERGRAD_CLI');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_wasm_threads_'));

/** Exports a bundle with the CLI and puts this tree's runtime in place of its embedded copy. */
function exportBundle(name, args) {
  const dir = path.join(root, name);
  execFileSync(cli, ['export', ...args, '--out', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
  fs.rmSync(path.join(dir, 'runtime'), { recursive: true });
  fs.cpSync(path.join(here, '../runtime/web'), path.join(dir, 'runtime'), { recursive: true });
  return dir;
}

/** The kernels of a bundle's wasm plans that the pool splits (the rule in bundle.json), by program. */
function splitKernels(json) {
  const t = json.wasm.threads;
  return Object.fromEntries(Object.entries(json.programs).map(([n, p]) =>
    [n, p.wasm.kernels.filter((k) => k.workgroups > 1 && k.work >= t.parallel_work).map((k) => k.name)]));
}

async function nodeCheck() {
  const { fileFetch } = await import('./dawn_node.mjs');
  const bundles = {
    mlp: exportBundle('mlp', ['--model', 'mlp', '--targets', 'wasm', '--batch', '128', '--infer-batch', '16',
                              '--check-steps', '2']),
    cnn: exportBundle('cnn', ['--model', 'cnn', '--targets', 'wasm', '--batch', '16', '--infer-batch', '4',
                              '--check-steps', '2']),
  };
  for (const [name, dir] of Object.entries(bundles)) {
    const json = JSON.parse(fs.readFileSync(path.join(dir, 'bundle.json'), 'utf8'));
    assert.ok(json.wasm.threads && json.wasm.threads.parallel_work > 0, `${name}: bundle.json wasm.threads`);
    const want = splitKernels(json);
    const nsplit = Object.values(want).flat().length;
    assert.ok(nsplit > 0 && nsplit < Object.values(json.programs).map((p) => p.wasm.kernels.length).reduce((a, b) => a + b),
              `${name}: some kernels are worth splitting and some are not (${JSON.stringify(want)})`);
    const mod = await import(pathToFileURL(path.join(dir, 'runtime/shadergrad.js')).href);
    const url = pathToFileURL(path.join(dir, 'bundle.json')).href;
    let ref = null;
    for (const threads of [1, 2, 3, 4, 4]) {
      const rt = await mod.createRuntime(url, { fetch: fileFetch, backend: 'wasm', wasmThreads: threads });
      try {
        assert.equal(rt.backend, 'wasm');
        assert.equal(rt.caps.threads, threads, `${name}: caps.threads (${JSON.stringify(rt.caps)})`);
        assert.match(rt.attempts.at(-1).reason, threads === 1 ? /WebAssembly SIMD128, one thread: the wasmThreads option is 1/
                                                               : new RegExp(`WebAssembly SIMD128, ${threads} threads`));
        if (threads === 4 && name === 'mlp') {
          // a trap on the pool's threads (a binding table at the memory's end: every chunk's first load is out of
          // bounds) reaches the caller as an error, and the pool goes on: the sequence below gives one thread's bits
          await rt.prepare(['train']);
          const dev = rt._exec.device, k = rt._exec.programs.get('train').kernels.find((x) => x.split);
          assert.throws(() => dev.call(k.fn, k.id, dev.memory.buffer.byteLength, k.workgroups, true),
                        /out of bounds|memory access/i, 'a trap on the pool');
        }
        const runs = (await rt.bundle.loadChecks()).runs;
        const bits = {};
        for (const [i, r] of runs.entries()) {
          const feeds = {};
          for (const [k, f] of Object.entries(r.feeds)) feeds[k] = rt.bundle.data(f);
          const out = await rt.run(r.program, feeds);
          for (const [k, v] of Object.entries(out)) bits[`run${i}/${k}`] = new Uint32Array(new Float32Array(v).buffer);
        }
        for (const p of rt.bundle.persistent) bits[`final/${p.name}`] = new Uint32Array((await rt.read(p.name)).buffer);
        // the executor split exactly the kernels the bundle's rule names (none on one thread)
        for (const [pn, names] of Object.entries(want)) {
          const got = rt._exec.programs.get(pn).kernels.filter((k) => k.split).map((k) => k.desc.name);
          assert.deepEqual(got, threads > 1 ? names : [], `${name} ${pn}: split kernels on ${threads} threads`);
        }
        if (!ref) ref = bits;
        else
          for (const [k, v] of Object.entries(ref)) {
            const i = v.findIndex((x, j) => x !== bits[k][j]);
            assert.ok(v.length === bits[k].length && i < 0,
                      `${name}: ${k} on ${threads} threads differs from one thread at element ${i}`);
          }
        console.log(`web_wasm_threads_node ${name}: ${threads} thread(s): ${Object.keys(bits).length} outputs and ` +
                    `persistent values ${threads === 1 ? 'recorded' : 'bit-identical to one thread'}`);
      } finally {
        rt.dispose();
      }
    }
    if (name === 'mlp') {
      // a bundle.json without `wasm.threads` (hand-edited): one thread, saying why; a bad wasmThreads is refused
      const edited = path.join(root, 'mlp_no_threads');
      fs.cpSync(dir, edited, { recursive: true });
      const j = JSON.parse(fs.readFileSync(path.join(edited, 'bundle.json'), 'utf8'));
      delete j.wasm.threads;
      fs.writeFileSync(path.join(edited, 'bundle.json'), JSON.stringify(j));
      const rt = await mod.createRuntime(pathToFileURL(path.join(edited, 'bundle.json')).href,
                                         { fetch: fileFetch, backend: 'wasm', wasmThreads: 2 });
      assert.equal(rt.caps.threads, 1);
      assert.match(rt.attempts.at(-1).reason, /one thread: the bundle's module or its `wasm.threads` is not made for threads/);
      const rep = await rt.runChecks();
      rt.dispose();
      assert.ok(rep.ok, 'mlp without wasm.threads: the checks pass on one thread');
      await assert.rejects(mod.createRuntime(url, { fetch: fileFetch, backend: 'wasm', wasmThreads: 0 }),
                           /wasmThreads must be a positive integer/);
      console.log('web_wasm_threads_node mlp: without wasm.threads one thread, saying why; wasmThreads 0 refused');
    }
    for (const threads of [1, 4]) {
      const rt = await mod.createRuntime(url, { fetch: fileFetch, backend: 'wasm', wasmThreads: threads });
      const rep = await rt.runChecks();
      rt.dispose();
      assert.ok(rep.ok, `${name}: the checks pass on ${threads} thread(s)\n${JSON.stringify(rep).slice(0, 3000)}`);
      console.log(`web_wasm_threads_node ${name}: checks ok on ${threads} thread(s)`);
    }
  }
}

/** In the page: the check runs on the wasm plan (main thread or a Worker runtime), every value's bits hashed. */
async function pageRun({ mode, threads }) {
  const mod = await import('/mlp/runtime/shadergrad.js');
  const options = { backend: 'wasm', ...(threads ? { wasmThreads: threads } : {}) };
  const rt = mode === 'worker' ? await mod.createWorkerRuntime('/mlp/bundle.json', options)
    : await mod.createRuntime('/mlp/bundle.json', options);
  try {
    const b = await mod.loadBundle('/mlp/bundle.json');
    const runs = (await b.loadChecks()).runs;
    const fnv = (f) => {
      let h = 0x811c9dc5;
      for (const x of new Uint32Array(new Float32Array(f).buffer)) h = Math.imul(h ^ x, 16777619) >>> 0;
      return h;
    };
    const hashes = {};
    for (const [i, r] of runs.entries()) {
      const feeds = {};
      for (const [k, f] of Object.entries(r.feeds)) feeds[k] = b.data(f);
      for (const [k, v] of Object.entries(await rt.run(r.program, feeds))) hashes[`run${i}/${k}`] = fnv(v);
    }
    for (const p of b.persistent) hashes[`final/${p.name}`] = fnv(await rt.read(p.name));
    const caps = rt.caps, attempts = rt.attempts;
    await rt.dispose();
    const fresh = mode === 'worker' ? await mod.createWorkerRuntime('/mlp/bundle.json', options)
      : await mod.createRuntime('/mlp/bundle.json', options);
    const report = await fresh.runChecks();
    await fresh.dispose();
    return { ok: true, isolated: globalThis.crossOriginIsolated === true, caps, attempts, hashes, checks: report.ok,
             hardware: navigator.hardwareConcurrency };
  } catch (e) {
    return { ok: false, error: `${e.name}: ${e.message}` };
  }
}

async function chromiumCheck() {
  const { guard, launchChromium, loadChromium, serveStatic, watchConsole } = await import('./browser.mjs');
  const { ensureNpmPackage } = await import('./npm_deps.mjs');
  ensureNpmPackage('playwright-core');
  const chromium = await loadChromium();
  exportBundle('mlp', ['--model', 'mlp', '--targets', 'wasm', '--batch', '32', '--infer-batch', '4',
                       '--check-steps', '2']);
  const browser = await launchChromium(chromium, { webgpu: false });
  const log = [];
  try {
    const results = {};
    for (const isolated of [true, false]) {
      const server = await serveStatic([{ prefix: '/_test/', dir: path.join(here, 'web') }, { prefix: '/', dir: root }],
                                       { isolated });
      try {
        const page = await (await browser.newContext()).newPage();
        watchConsole(page, log);
        assert.ok((await page.goto(`${server.origin}/_test/check_page.html`, { waitUntil: 'load' }))?.ok());
        const cases = isolated ? [['main', 1], ['main', 3], ['main', undefined], ['worker', 3]] : [['main', undefined], ['worker', undefined]];
        for (const [m, threads] of cases) {
          const tag = `${isolated ? 'isolated' : 'not isolated'} ${m} wasmThreads=${threads ?? 'default'}`;
          const r = await guard(page.evaluate(pageRun, { mode: m, threads }), tag, 240);
          const what = (s) => `${tag}: ${s}\n${JSON.stringify(r, null, 1).slice(0, 4000)}\nconsole: ${log.join('\n')}`;
          assert.ok(r.ok, what('ran'));
          assert.equal(r.isolated, isolated, what('crossOriginIsolated'));
          assert.ok(r.checks, what('the checks equal the CPU reference'));
          const reason = r.attempts.at(-1).reason;
          if (isolated && threads !== 1) {
            const n = threads ?? Math.min(4, r.hardware);
            assert.ok(n > 1, what('this machine has more than one hardware thread'));
            assert.equal(r.caps.threads, n, what('caps.threads'));
            assert.match(reason, new RegExp(`^WebAssembly SIMD128, ${n} threads \\(${n - 1} Workers? and the calling thread`),
                         what('the reason says the threads'));
          } else {
            assert.equal(r.caps.threads, 1, what('one thread'));
            assert.match(reason, isolated ? /one thread: the wasmThreads option is 1/
              : /one thread: the page is not cross-origin isolated \(SharedArrayBuffer needs it: serve the page with the headers Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp\)/,
                         what('the reason says why one thread'));
          }
          results[tag] = r.hashes;
          console.log(`web_wasm_threads_chromium ${tag}: ${r.caps.threads} thread(s), checks ok; ${reason}`);
        }
      } finally {
        server.close();
      }
    }
    const [first, ...rest] = Object.entries(results);
    for (const [tag, h] of rest) assert.deepEqual(h, first[1], `${tag}: the bits of ${first[0]}`);
    console.log(`web_wasm_threads_chromium: ${Object.keys(first[1]).length} outputs and persistent values have the same ` +
                `bits in all ${Object.keys(results).length} runs`);
  } finally {
    await browser.close();
  }
}

try {
  await (mode === 'node' ? nodeCheck() : chromiumCheck());
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
