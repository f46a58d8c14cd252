// The page debugger (runtime/web/debugger.html on runtime/web/debug.js) in headless Chromium (SwiftShader) on
// WebGL2 and WebGPU, in the page and in a Worker, with the runtime of this source tree in place of the bundle's copy.
//
//   node tests/page_debugger_check.mjs values SHADERGRAD_CLI
//     exports the MLP (digits, batch 4) with --check-nodes: the CPU reference's value of every graph node for the
//     first train check run; the debugger steps the train step kernel by kernel (its Step button) from the same
//     weights and inputs, and every value every kernel wrote must equal the CPU reference's value of its node; the
//     same for the small CNN; break-before stops where asked; at 1024x768 and 1366x768 the main controls do not
//     overlap (screenshots page_debugger_WxH.png in the working directory).
//   node tests/page_debugger_check.mjs numerics PAGE_DEBUGGER_LOG_MODEL
//     tests/page_debugger_log_model.cpp writes a bundle whose model takes log of a negative number and runs the
//     same step natively with check_numerics; Continue in the debugger must stop at the first kernel writing a
//     NaN (every earlier kernel finite), name the native check's first non-finite node and its C++ line, and leave
//     the weights as they were.
//   node tests/page_debugger_check.mjs attention SHADERGRAD_CLI
//     exports a small charlm (2 blocks of 2 heads, context 8, batch 2); on WebGL2 and WebGPU the debugger steps its
//     infer program with Step: the kernel writing attn/L shows that block's maps, one image per head, and once every
//     kernel ran the section shows blocks x heads images; for each batch row every map's pixels are the native
//     viridis over [0, 1] of its weights, hovering a cell shows its weight, and the weights equal the bundle's CPU
//     reference check outputs (checks.runs[] of infer, the bundle's tolerance); each row sums to 1 and is causal
//     (0 above the diagonal); the axes carry the input's characters. Then the train program runs with Continue (the
//     causal mask's -Inf is no NaN/Inf stop): on WebGPU to the end, and Finish gives the expected loss; on WebGL2 to
//     a breakpoint past the first block's softmax (its whole step takes 10-25 s on SwiftShader).
// Exit 0 = every assertion held, 1 = one failed, 2 = chromium or playwright-core missing.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { guard, launchChromium, loadChromium, serveStatic, watchConsole } from './browser.mjs';
import { ensureNpmPackage } from './npm_deps.mjs';

const [mode, exe] = process.argv.slice(2);
if (!['values', 'numerics', 'attention'].includes(mode) || !exe || !fs.existsSync(exe)) {
  console.error('usage: node page_debugger_check.mjs values|attention SHADERGRAD_CLI | numerics PAGE_DEBUGGER_LOG_MODEL');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
ensureNpmPackage('playwright-core');
const chromium = await loadChromium();
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_page_debugger_'));

/** The tree's runtime in place of the bundle's embedded copy. */
function treeRuntime(bundleDir) {
  fs.rmSync(path.join(bundleDir, 'runtime'), { recursive: true, force: true });
  fs.cpSync(path.join(here, '../runtime/web'), path.join(bundleDir, 'runtime'), { recursive: true });
}

const CONFIGS = [{ backend: 'webgl2', worker: false }, { backend: 'webgpu', worker: false },
                 { backend: mode === 'values' ? 'webgpu' : 'webgl2', worker: true }];

/** Opens the debugger of `bundleDir` (relative to root) for each configuration; `fn(page, config)` checks it.
 * `query`: more URL parameters ('&program=infer'). */
async function eachConfig(bundleDir, fn, { configs = CONFIGS, query = '' } = {}) {
  const server = await serveStatic([{ prefix: '/', dir: root }]);
  const browser = await launchChromium(chromium);
  try {
    for (const c of configs) {
      const page = await browser.newPage();
      const log = [];
      watchConsole(page, log);
      page.setDefaultTimeout(300000);
      const q = `backend=${c.backend}${c.worker ? '&mode=worker' : ''}${query}`;
      await page.goto(`${server.origin}/${bundleDir}/runtime/debugger.html?${q}`);
      await guard(page.waitForFunction(() => window.sgDebugger?.ready === true), `debugger ${q} ready`, 240);
      const what = (s) => `${q}: ${s}\nconsole:\n${log.join('\n')}`;
      const err = await page.evaluate(() => window.sgDebugger.error);
      assert.equal(err, null, what('the debugger failed'));
      const backend = await page.evaluate(() => window.sgDebugger.rt.backend);
      assert.equal(backend, c.backend, what('backend'));
      await fn(page, c, what);
      await page.close();
    }
  } finally {
    await browser.close();
    server.close();
  }
}

/** At 1024x768 and 1366x768 the debugger's main controls and panes are inside the window's width and do not
 * overlap (element boxes do not intersect); a screenshot of each is kept in the working directory
 * (page_debugger_TAGWxH.png). */
async function checkLayout(page, what, tag = '') {
  const ids = ['program', 'step', 'continue', 'breakAt', 'stopNaN', 'finish', 'restart', 'zoom', 'kernels', 'detail',
               'backendLine'];
  for (const [w, h] of [[1024, 768], [1366, 768]]) {
    await page.setViewportSize({ width: w, height: h });
    await page.click('.kgroup');  // kernel 0 in the detail pane: its images and source
    const boxes = await page.evaluate((ids) => ids.map((id) => {
      const r = document.getElementById(id).getBoundingClientRect();
      return { id, x: r.left, y: r.top, w: r.width, h: r.height };
    }), ids);
    await page.screenshot({ path: `page_debugger_${tag}${w}x${h}.png` });
    for (const b of boxes) {
      assert.ok(b.w > 0 && b.h > 0, what(`${w}x${h}: #${b.id} is not shown ${JSON.stringify(b)}`));
      assert.ok(b.x >= 0 && b.x + b.w <= w + 0.5, what(`${w}x${h}: #${b.id} leaves the window ${JSON.stringify(b)}`));
    }
    for (let i = 0; i < boxes.length; ++i)
      for (let j = i + 1; j < boxes.length; ++j) {
        const a = boxes[i], b = boxes[j];
        const overlap = a.x < b.x + b.w - 0.5 && b.x < a.x + a.w - 0.5 && a.y < b.y + b.h - 0.5 && b.y < a.y + a.h - 0.5;
        assert.ok(!overlap, what(`${w}x${h}: #${a.id} and #${b.id} overlap ${JSON.stringify([a, b])}`));
      }
    // the controls are in the first screen
    for (const b of boxes.filter((x) => !['kernels', 'detail'].includes(x.id)))
      assert.ok(b.y + b.h <= h, what(`${w}x${h}: #${b.id} is below the fold`));
  }
}

/** Kernel 0's first output as the page draws it: every element's pixel has the native colormap's colour of its
 * value (colormap.js, the range and map of the whole tensor), at the place the native layout puts it (2-D: rows x
 * columns; [N, C, H, W]: N rows of C tiles of H x W with 1-px separators), and hovering an element shows its value. */
async function checkImage(page, what) {
  await page.click('.kgroup');
  const r = await page.evaluate(async () => {
    const { mapValue, autoRange } = await import('./colormap.js');
    const o = window.sgDebugger.session.steps[0].outputs[0], cv = document.querySelector('#detail canvas.img');
    const s = o.shape, at = (e) => {
      if (s.length === 4) {
        const [, C, H, W] = s, x = e % W, y = Math.floor(e / W) % H, c = Math.floor(e / (W * H)) % C,
              n = Math.floor(e / (W * H * C));
        return [n * (H + 1) + y, c * (W + 1) + x];
      }
      return [Math.floor(e / s.at(-1)), e % s.at(-1)];
    };
    const px = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data, rg = autoRange(o.data);
    let bad = 0;
    for (let e = 0; e < o.data.length; ++e) {
      const [y, x] = at(e), want = mapValue(o.data[e], rg.cmap, rg.lo, rg.hi), p = 4 * (y * cv.width + x);
      if (px[p] !== want[0] || px[p + 1] !== want[1] || px[p + 2] !== want[2]) ++bad;
    }
    const e = Math.floor(o.data.length / 2) + 1, [y, x] = at(e), b = cv.getBoundingClientRect();
    const cx = b.left + (x + 0.5) * b.width / cv.width, cy = b.top + (y + 0.5) * b.height / cv.height;
    cv.dispatchEvent(new MouseEvent('mousemove', { clientX: cx, clientY: cy, bubbles: true }));
    return { bad, n: o.data.length, shape: s, cmap: rg.cmap, hover: cv.parentElement.querySelector('.hover').textContent,
             want: `[${e}] = ${o.data[e]}`, zoom: b.width / cv.width };
  });
  assert.equal(r.bad, 0, what(`pixels not in the native colour of their element ${JSON.stringify(r)}`));
  assert.equal(r.hover, r.want, what('hover value'));
  assert.ok(r.zoom >= 2, what(`the image is scaled up (${r.zoom}x)`));
}

try {
  if (mode === 'values') for (const model of ['mlp', 'cnn']) {
    const dir = path.join(root, model);
    execFileSync(exe, ['export', '--model', model, '--dataset', 'digits', '--batch', '4', '--infer-batch', '2',
                       '--check-steps', '1', '--check-nodes', '--webgpu-plans', 'cpu', '--out', dir],
                 { stdio: ['ignore', 'ignore', 'inherit'] });
    treeRuntime(dir);
    await eachConfig(model, async (page, c, what0) => {
      const what = (s) => what0(`${model}: ${s}`);
      // Step through every kernel with the page's Step button
      const n = await page.evaluate(() => window.sgDebugger.session.kernels.length);
      assert.ok(n >= 5, what(`kernels of train: ${n}`));
      for (let i = 0; i < n; ++i) {
        await page.click('#step');
        await guard(page.waitForFunction((k) => window.sgDebugger.session.next === k + 1 &&
                                                !document.querySelector('#restart').disabled, i), `step ${i}`, 120);
      }
      const r = await page.evaluate(async () => {
        const s = window.sgDebugger.session, b = window.sgDebugger.bundle;
        const run = b.json.checks.runs.find((x) => x.program === 'train');
        const rows = [];
        for (const st of s.steps)
          for (const o of st.outputs) {
            const ref = run.nodes[String(o.node)];
            if (!ref) { rows.push({ kernel: st.name, value: o.name, node: o.node, missing: true }); continue; }
            const e = b.data(ref);
            let scale = 0, worst = 0, sum = 0, min = Infinity, max = -Infinity;
            for (const v of e) { scale = Math.max(scale, Math.abs(v)); sum += v; min = Math.min(min, v); max = Math.max(max, v); }
            for (let i = 0; i < e.length; ++i) worst = Math.max(worst, Math.abs(o.data[i] - e[i]));
            const mean = sum / e.length;
            let dev = 0;
            for (const v of e) dev += (v - mean) ** 2;
            // the page's statistics of the GPU's values against those of the CPU reference's
            const refStats = { min, max, mean, std: Math.sqrt(dev / e.length) };
            const statsWorst = Math.max(...Object.entries(refStats).map(([k, v]) => Math.abs(o.stats[k] - v)));
            rows.push({ kernel: st.name, value: o.name, node: o.node, n: o.data.length, ref_n: e.length, scale, worst,
                        statsWorst, count: o.stats.count, nonfinite: o.stats.nan + o.stats.pos_inf + o.stats.neg_inf });
          }
        return { rows, images: document.querySelectorAll('#detail canvas.img').length,
                 ran: document.querySelectorAll('.kgroup.ran').length, kernels: s.kernels.length };
      });
      assert.equal(r.ran, n, what('every kernel group is marked as run'));
      assert.ok(r.images >= 1, what('the selected kernel shows its outputs as images'));
      assert.ok(r.rows.length >= n, what('outputs read back'));
      for (const row of r.rows) {
        const where = what(`kernel ${row.kernel} value ${row.value} (n${row.node}): ${JSON.stringify(row)}`);
        assert.ok(!row.missing, where);
        assert.equal(row.n, row.ref_n, where);
        assert.equal(row.nonfinite, 0, where);
        // f32 on the GPU against the CPU reference (f64 rounded to f32 per node): relative to the tensor's scale
        assert.ok(row.worst <= 1e-4 * row.scale + 1e-6, where);
        assert.ok(row.count === row.ref_n && row.statsWorst <= 1e-4 * row.scale + 1e-6, where);
      }
      // and a value that differs would fail: the check is not vacuous (some values are not all zeros)
      assert.ok(r.rows.filter((x) => x.scale > 0).length >= n, what('non-zero reference values'));
      // finishing commits the step as run() does: the loss output equals the bundle's expected loss
      const fin = await page.evaluate(async () => {
        document.querySelector('#finish').click();
        const s = window.sgDebugger.session;
        while (s.state === 'open') await new Promise((res) => setTimeout(res, 20));
        const b = window.sgDebugger.bundle, run = b.json.checks.runs.find((x) => x.program === 'train');
        return { state: s.state, loss: window.sgDebugger.outputs?.loss?.[0], expected: b.data(run.outputs.loss)[0] };
      });
      assert.equal(fin.state, 'finished', what('finish'));
      assert.ok(Math.abs(fin.loss - fin.expected) <= 1e-4 * Math.abs(fin.expected), what(`loss ${JSON.stringify(fin)}`));
      // the data flow between kernels: every value a kernel reads was written by the kernel named as its producer
      // (earlier in the step), or is an input, a persistent value or a constant; selecting a kernel marks them
      const flow = await page.evaluate(async () => {
        const ks = window.sgDebugger.session.kernels, bad = [];
        for (const k of ks)
          for (const i of k.inputs) {
            if (i.producer === null ? i.kind === 'temp' && i.update_of === undefined
                                    : !(i.producer < k.index && ks[i.producer].outputs.some((o) => o.value === i.value)))
              bad.push({ kernel: k.name, input: i });
          }
        const k = ks.find((x) => x.inputs.some((i) => i.producer !== null));
        document.querySelectorAll('.kgroup')[k.index].click();
        const marked = [...document.querySelectorAll('.kgroup.producer')].map((e) => e.dataset.kernel);
        const want = [...new Set(k.inputs.filter((i) => i.producer !== null).map((i) => ks[i.producer].name))];
        return { bad, marked, want, edges: ks.reduce((a, x) => a + x.inputs.filter((i) => i.producer !== null).length, 0) };
      });
      assert.deepEqual(flow.bad, [], what('data flow'));
      assert.ok(flow.edges >= n - 1, what(`kernel-to-kernel reads: ${flow.edges}`));
      assert.deepEqual(flow.marked.sort(), flow.want.sort(), what('producers marked'));
      // Restart, break before kernel 3: Continue stops with kernels 0..2 run; Continue from there runs to the end
      const brk = async (bp) => {
        if (bp !== null) await page.selectOption('#breakAt', String(bp));
        await page.click('#continue');
        await guard(page.waitForFunction(() => !document.querySelector('#restart').disabled &&
                                               !document.querySelector('#finish').disabled), 'continue', 120);
        return page.evaluate(() => ({ next: window.sgDebugger.session.next, steps: window.sgDebugger.session.steps.length,
                                      status: document.querySelector('#status').textContent }));
      };
      await page.click('#restart');
      await guard(page.waitForFunction(() => window.sgDebugger.session.state === 'open' &&
                                             window.sgDebugger.session.next === 0 &&
                                             !document.querySelector('#continue').disabled), 'restart', 120);
      assert.deepEqual(await brk(3), { next: 3, steps: 3, status: `next: kernel 3 of ${n}` }, what('break before kernel 3'));
      assert.deepEqual((await brk(null)).next, n, what('continue from the breakpoint runs to the end'));
      if (!c.worker && c.backend === 'webgl2') {
        await checkImage(page, what);
        await checkLayout(page, what);
      }
      console.log(`page debugger values ${model} ${c.backend}${c.worker ? ' (worker)' : ''}: ${n} kernels, ${r.rows.length} ` +
                  `values, worst |gpu - cpu| / scale ${Math.max(...r.rows.map((x) => x.worst / (x.scale || 1))).toExponential(2)}`);
    });
  } else if (mode === 'attention') {
    const [L, H, B, T] = [2, 2, 2, 8];
    const dir = path.join(root, 'charlm');
    execFileSync(exe, ['export', '--model', 'charlm', '--context', String(T), '--d-model', '16', '--layers', String(L),
                       '--heads', String(H), '--batch', '2', '--infer-batch', String(B), '--check-steps', '1',
                       '--webgpu-plans', 'cpu', '--out', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
    treeRuntime(dir);
    const configs = [{ backend: 'webgl2', worker: false }, { backend: 'webgpu', worker: false }];
    await eachConfig('charlm', async (page, c, what) => {
      const names = await page.evaluate(() => window.sgDebugger.attention);
      assert.deepEqual(names, Array.from({ length: L }, (_, l) => `attn/${l}`), what('metadata attention'));
      // Step through infer with the Step button; the kernel writing attn/L shows that block's H maps
      const n = await page.evaluate(() => window.sgDebugger.session.kernels.length);
      const writers = [];
      for (let i = 0; i < n; ++i) {
        await page.click('#step');
        await guard(page.waitForFunction((k) => window.sgDebugger.session.next === k + 1 &&
                                                !document.querySelector('#restart').disabled, i), `step ${i}`, 120);
        const shown = await page.evaluate((k) => {
          const st = window.sgDebugger.session.steps[k];
          return { wrote: st.outputs.map((o) => o.output).filter((x) => x?.startsWith('attn/')), last: k === window.sgDebugger.session.kernels.length - 1,
                   maps: [...document.querySelectorAll('#attention canvas.attn')].map((e) => `${e.dataset.value}#${e.dataset.head}`) };
        }, i);
        if (shown.wrote.length) writers.push(i);
        if (!shown.last)
          assert.deepEqual(shown.maps, shown.wrote.flatMap((v) => Array.from({ length: H }, (_, h) => `${v}#${h}`)),
                           what(`kernel ${i}: its attention maps ${JSON.stringify(shown)}`));
      }
      assert.equal(writers.length, L, what(`kernels writing attention: ${writers}`));
      // every kernel ran: one image per head of every block, for each batch row equal to the CPU reference
      const worst = { value: 0, pixel: 0, hover: 0, rowsum: 0, upper: 0 };
      for (let row = 0; row < B; ++row) {
        if (row > 0) {
          await page.selectOption('#attnRow', String(row));
          await guard(page.waitForFunction((r) => document.querySelector('#attention canvas.attn')?.dataset.row === String(r), row), 'row', 30);
        }
        const r = await page.evaluate(async ({ row, H, T }) => {
          const { mapValue } = await import('./colormap.js');
          const { compare } = await import('./checks.js');
          const d = window.sgDebugger, b = d.bundle;
          const run = b.json.checks.runs.find((x) => x.program === 'infer');
          const tol = b.json.checks.tolerance.outputs;
          const x = b.data(run.feeds.x), vocab = Array.from(b.json.metadata.vocab);
          const written = new Map();
          for (const st of d.session.steps) for (const o of st.outputs) if (o.output) written.set(o.output, o.data);
          const maps = [...document.querySelectorAll('#attention canvas.attn')];
          const out = { images: maps.length, keys: maps.map((e) => `${e.dataset.value}#${e.dataset.head}`), bad: [],
                        worst: { value: 0, pixel: 0, hover: 0, rowsum: 0, upper: 0 }, compare: {} };
          const bad = (s) => { if (out.bad.length < 20) out.bad.push(s); };
          for (const [name, data] of written) {
            const c = compare(data, b.data(run.outputs[name]), tol);
            out.compare[name] = { ok: c.ok, max_rel: c.max_rel, max_abs: c.max_abs };
          }
          for (const cv of maps) {
            const name = cv.dataset.value, h = +cv.dataset.head, data = written.get(name), ref = b.data(run.outputs[name]);
            if (+cv.dataset.row !== row || cv.width !== T || cv.height !== T) bad(`${name}#${h}: ${cv.dataset.row} ${cv.width}x${cv.height}`);
            const px = cv.getContext('2d').getImageData(0, 0, T, T).data, box = cv.getBoundingClientRect();
            let scale = 0;
            for (const v of ref) scale = Math.max(scale, Math.abs(v));
            const hover = cv.closest('#attention').querySelector('#attnHover');
            for (let i = 0; i < T; ++i) {
              let sum = 0;
              for (let j = 0; j < T; ++j) {
                const e = ((row * H + h) * T + i) * T + j, v = data[e], want = ref[e];
                sum += v;
                const err = Math.abs(v - want) / Math.max(Math.abs(want), tol.floor * scale);
                out.worst.value = Math.max(out.worst.value, err);
                if (!(err <= tol.rel)) bad(`${name}#${h} (${i}, ${j}): ${v} vs ${want}`);
                if (j > i) { out.worst.upper = Math.max(out.worst.upper, Math.abs(v)); if (v !== 0) bad(`${name}#${h} (${i}, ${j}) above the diagonal: ${v}`); }
                // the pixel: the native viridis over [0, 1] of the page's weight, within a step of the reference's
                const p = 4 * (i * T + j), mine = mapValue(v, 'viridis', 0, 1), theirs = mapValue(want, 'viridis', 0, 1);
                for (let ch = 0; ch < 3; ++ch) {
                  if (px[p + ch] !== mine[ch]) bad(`${name}#${h} (${i}, ${j}) pixel ${px.slice(p, p + 3)} != ${mine}`);
                  out.worst.pixel = Math.max(out.worst.pixel, Math.abs(px[p + ch] - theirs[ch]));
                }
                // hovering the cell's centre names its query and key positions, their characters, and the weight
                cv.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: box.left + (j + 0.5) * box.width / T,
                                                               clientY: box.top + (i + 0.5) * box.height / T }));
                const m = hover.textContent.match(/^(\S+) head (\d+) row (\d+): query (\d+) '(.)' → key (\d+) '(.)' = (\S+)$/);
                if (!m || m[1] !== name || +m[2] !== h || +m[3] !== row || +m[4] !== i || +m[6] !== j ||
                    m[5] !== vocab[x[row * T + i]] || m[7] !== vocab[x[row * T + j]]) { bad(`hover (${i}, ${j}): ${hover.textContent}`); continue; }
                const hv = Number(m[8]);
                out.worst.hover = Math.max(out.worst.hover, Math.abs(hv - want) / Math.max(Math.abs(want), tol.floor * scale));
                if (hv !== v) bad(`hover (${i}, ${j}) ${hv} != ${v}`);
              }
              out.worst.rowsum = Math.max(out.worst.rowsum, Math.abs(sum - 1));
            }
            // the query axis names the row's characters
            const ticks = cv.parentElement.querySelector('.ticks.y').textContent;
            for (let t = 0; t < T; ++t) if (!ticks.includes(vocab[x[row * T + t]])) bad(`${name}#${h}: query axis '${ticks}' lacks token ${t}`);
          }
          out.scale = document.querySelector('#attention .scale')?.textContent;
          return out;
        }, { row, H, T });
        const where = what(`row ${row}: ${JSON.stringify(r).slice(0, 3000)}`);
        assert.equal(r.images, L * H, where);
        assert.deepEqual(r.keys, Array.from({ length: L * H }, (_, k) => `attn/${Math.floor(k / H)}#${k % H}`), where);
        assert.deepEqual(r.bad, [], where);
        for (const cmp of Object.values(r.compare)) assert.ok(cmp.ok, where);
        assert.ok(r.worst.rowsum <= 1e-5, where);
        assert.ok(r.worst.pixel <= 2, where);
        assert.ok(r.scale?.includes('viridis') && r.scale.startsWith('0'), where);
        for (const k of Object.keys(worst)) worst[k] = Math.max(worst[k], r.worst[k]);
      }
      // the maps stay in the detail pane at 1024x768 (and the main controls do not overlap)
      if (c.backend === 'webgl2') {
        await checkLayout(page, what, 'charlm_');
        for (const w of [1024, 1366]) {
          await page.setViewportSize({ width: w, height: 768 });
          const out = await page.evaluate(() => {
            const pane = document.querySelector('#detail').getBoundingClientRect();
            const figs = [...document.querySelectorAll('#attention figure.head')].map((f) => f.getBoundingClientRect());
            return { n: figs.length, outside: figs.filter((b) => b.left < pane.left || b.right > pane.right - 10).length };
          });
          assert.deepEqual(out, { n: L * H, outside: 0 }, what(`attention figures in the detail pane at ${w}x768`));
        }
      }
      // Finish: the outputs equal the maps stepped; the maps stay shown
      const fin = await page.evaluate(async () => {
        document.querySelector('#finish').click();
        const d = window.sgDebugger;
        while (d.session.state === 'open' || document.querySelector('#restart').disabled) await new Promise((res) => setTimeout(res, 20));
        const same = Object.keys(d.outputs).filter((k) => k.startsWith('attn/')).every((k) => {
          const st = d.session.steps.flatMap((s) => s.outputs).findLast((o) => o.output === k);
          return st && st.data.every((v, i) => v === d.outputs[k][i]);
        });
        return { state: d.session.state, same, images: document.querySelectorAll('#attention canvas.attn').length };
      });
      assert.deepEqual(fin, { state: 'finished', same: true, images: L * H }, what('finish infer'));
      // the train step: Continue runs to the end (the causal mask's -Inf is written on purpose: no NaN/Inf stop),
      // Finish commits it with the expected loss. On WebGL2 (SwiftShader compiles every draw's routines at its first
      // draw: the whole step takes 10-25 s there) only up to a breakpoint past the first block's mask and softmax.
      await page.selectOption('#program', 'train');
      await guard(page.waitForFunction(() => window.sgDebugger.session?.program === 'train' &&
                                             window.sgDebugger.session.state === 'open' &&
                                             !document.querySelector('#continue').disabled), 'train session', 120);
      const full = c.backend === 'webgpu';
      const breakAt = full ? null : await page.evaluate(() => {
        const ks = window.sgDebugger.session.kernels;
        return ks.findIndex((k, i) => i > 0 && ks[i - 1].outputs.some((o) => /-inf/.test(o.op))) + 3;
      });
      if (!full) await page.selectOption('#breakAt', String(breakAt));
      await page.click('#continue');
      await guard(page.waitForFunction(() => !document.querySelector('#restart').disabled &&
                                             !document.querySelector('#finish').disabled), 'continue train', 240);
      const tr = await page.evaluate(async (full) => {
        const d = window.sgDebugger, s = d.session;
        const masked = s.steps.flatMap((st) => st.outputs).filter((o) => o.stats.neg_inf > 0);
        const r = { atEnd: s.atEnd, steps: s.steps.length, kernels: s.kernels.length, report: d.report, error: d.error,
                    bad: document.querySelectorAll('.kgroup.bad').length, masked: masked.length,
                    maskedFlagged: masked.filter((o) => o.nonFinite).length,
                    numerics: getComputedStyle(document.querySelector('#numerics')).display };
        if (!full) return r;
        document.querySelector('#finish').click();
        while (s.state === 'open' || document.querySelector('#restart').disabled) await new Promise((res) => setTimeout(res, 20));
        const run = d.bundle.json.checks.runs.find((x) => x.program === 'train');
        return { ...r, state: s.state, loss: d.outputs?.loss?.[0], expected: d.bundle.data(run.outputs.loss)[0], error: d.error };
      }, full);
      const where = what(`train: ${JSON.stringify(tr)}`);
      assert.ok(tr.report === null && tr.error === null, where);
      assert.equal(tr.bad, 0, where);
      assert.equal(tr.numerics, 'none', where);
      // each block's masked scores: -Inf, not flagged
      assert.ok(tr.masked >= (full ? L : 1) && tr.maskedFlagged === 0, where);
      if (full) {
        assert.ok(tr.atEnd && tr.steps === tr.kernels, where);
        assert.equal(tr.state, 'finished', where);
        assert.ok(Math.abs(tr.loss - tr.expected) <= 1e-4 * Math.abs(tr.expected), where);
      } else {
        assert.ok(breakAt > 3 && tr.steps === breakAt, where);
      }
      console.log(`page debugger attention ${c.backend}: infer ${n} kernels (attention written by ${writers.join(', ')}), ` +
                  `${L * H} head maps x ${B} rows; worst relative |page - cpu| ${worst.value.toExponential(2)}, ` +
                  `|row sum - 1| ${worst.rowsum.toExponential(2)}, pixel ${worst.pixel}; train ` +
                  (full ? `${tr.kernels} kernels, loss ${tr.loss} (expected ${tr.expected})`
                        : `kernels 0..${breakAt - 1} of ${tr.kernels} (break), the mask's -Inf not a stop`));
    }, { configs, query: '&program=infer' });
  } else {
    execFileSync(exe, [root], { stdio: ['ignore', 'ignore', 'inherit'] });
    const native = JSON.parse(fs.readFileSync(path.join(root, 'native.json'), 'utf8'));
    // the native check (sg::debug::Session, check_numerics) found the log: its first non-finite node and line
    assert.ok(native.kernel, `native check_numerics threw no NumericsError: ${JSON.stringify(native)}`);
    assert.ok(native.sources.includes(native.log_line), `native sources ${native.sources} lack ${native.log_line}`);
    const first = native.message.match(/first non-finite node[^\n]*: n(\d+) ([^\n]*) at ([^\s]+)/);
    assert.ok(first, `native message names no first non-finite node:\n${native.message}`);
    assert.equal(+first[1], native.log_node, native.message);
    assert.equal(first[3], native.log_line, native.message);
    treeRuntime(path.join(root, 'bundle'));
    await eachConfig('bundle', async (page, c, what) => {
      await page.click('#continue');
      await guard(page.waitForFunction(() => window.sgDebugger.report !== null &&
                                             !document.querySelector('#restart').disabled), 'continue to the NaN', 120);
      const r = await page.evaluate(async (backend) => {
        const d = window.sgDebugger, s = d.session;
        await new Promise((res) => setTimeout(res, 50));
        // the kernel's own shader: a WGSL compute entry point, or a GLSL ES 3.00 fragment shader
        const shader = (backend === 'webgpu' ? /@compute/ : /#version 300 es/).test(d.report.source);
        return { report: { ...d.report, source: d.report.source.slice(0, 1500) }, shader,
                 text: document.querySelector('#numerics').textContent,
                 shown: getComputedStyle(document.querySelector('#numerics')).display,
                 steps: s.steps.map((st) => ({ name: st.name, nonFinite: st.nonFinite })),
                 badGroups: [...document.querySelectorAll('.kgroup.bad')].map((e) => e.dataset.kernel) };
      }, c.backend);
      const rep = r.report;
      const where = what(JSON.stringify(r, null, 1).slice(0, 4000));
      // stopped at the first kernel with a non-finite value: every earlier kernel was finite
      assert.equal(r.steps.at(-1).name, rep.kernel, where);
      assert.ok(r.steps.slice(0, -1).every((x) => !x.nonFinite), where);
      assert.ok(rep.stats.nan > 0, where);
      assert.deepEqual(r.badGroups, [rep.kernel], where);
      // the native check's first non-finite node and its C++ line are among the kernel's nodes and lines
      assert.ok(rep.nodes.some((n) => n.node === native.log_node && n.op === native.log_op), where);
      assert.ok(rep.lines.includes(native.log_line), where);
      // and the page says so in words, with the shader's source at hand
      assert.equal(r.shown, 'block', where);
      for (const s of [rep.kernel, `n${native.log_node} ${native.log_op}`, native.log_line]) assert.ok(r.text.includes(s), `${where}\nlacks ${s}`);
      assert.ok(r.shader, where);
      assert.ok(rep.source.includes(native.log_line), where);  // its header comment names the log's line
      // nothing committed: the weight is still its initial value (finish() after a non-finite step aborts)
      const w = await page.evaluate(async () => {
        document.querySelector('#finish').click();
        const d = window.sgDebugger;
        while (d.session.state === 'open') await new Promise((res) => setTimeout(res, 20));
        return { state: d.session.state, w: Array.from(await d.rt.read('w')) };
      });
      assert.equal(w.state, 'aborted', where);
      assert.deepEqual(w.w, [1, 0.5, 0.5, 1, 0.25, 0.25], where);
      console.log(`page debugger numerics ${c.backend}${c.worker ? ' (worker)' : ''}: stopped at kernel ` +
                  `${rep.index} '${rep.kernel}' (native: '${native.kernel}' on ${native.backend}); n${native.log_node} ` +
                  `at ${native.log_line}`);
    });
  }
  console.log(`page debugger ${mode}: ok`);
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
