// Benchmark (not a test): our exported bundles on our JS runtime (runtime/web, the copy inside each bundle) over
// Dawn in Node (npm `webgpu`, dawn.node: Chromium's WebGPU implementation, without a browser), beside the peers
// on the same Dawn in the same process: TF.js 4.22 (tfjs-backend-webgpu) and jax-js 0.1.25 (webgpu). The cases
// are bench/web_bench.mjs's (MLP 784-128-10 Adam b=32 and b=128, seed 002's digits CNN b=64, SGEMM 256/512/1024)
// and bench/web_app_bench.mjs's train step of the digits demo (examples/web/digits: MLP 64-128-10 Adam b=16,
// fine-tune from the natively trained weights and from scratch), with the models, inputs and timing loop of
// bench/web/bench_models.js (shared with the browser pages). Per case: the first step (runtime/device set-up,
// weight upload, shader compile, first run), then 10 warm-up and 50 timed steps (SGEMM 3 + 10) that each read back
// only the loss (SGEMM: C): median (min-max) ms per step, and back-to-back steps/s (timed steps / the timed loop's
// wall time). WebGL2 rows are impossible here: Node has no WebGL2 (that needs a browser).
//
// charlm_b32 (issue 37; kind 'lm', only when --only names it, as in bench/web_bench.mjs): `shadergrad export --model
// charlm --batch 32 --context 64`'s train program (one AdamW step, lr 1e-3, weight decay 0.01, global-norm clip 1)
// against the same CharTransformer, loss, AdamW and clipping written in jax-js (bench_models.js timeJaxCharlm) on
// webgpu; both train on the same 32 rows of /usr/share/dict/words (charlmRows; --words FILE), written at export as
// charlm_rows.json beside the bundle (the device has no words file); the case's 3 warm-up + 10 timed steps, or
// --lm-counts W,T (a step over 1 s: 1 + 3, as every case); no TF.js row (no charlm written for it: 'not measured').
// The step-1 losses are printed under the table (both near ln 27 = 3.30; Chromium saw 3.4561 ours, 3.4814 jax-js).
// jax-js's attention uses iterator helpers (Node 22+): on Node 20 map/filter are added to the iterator prototype.
//
//   (cd tests && npm ci); (cd bench/web && npm ci)   # npm webgpu; TF.js, jax-js (pinned in package-lock.json)
//   node bench/web_node_bench.mjs --cli build/bin/shadergrad --exporter build/bin/bench_web_export
//        [--bundles DIR] [--dawn-backend opengles|vulkan|default] [--feature-level core|compatibility]
//        [--plans auto,gpu,cpu|none] [--peers tfjs,jax | --no-peers] [--only mlp_b32,...] [--json FILE] [--npm DIR]
//        [--case-timeout S] [--lm-counts W,T] [--words FILE]
//   node bench/web_node_bench.mjs --export-to DIR [--cli ...] [--exporter ...]   # only export the bundles
//   node bench/web_node_bench.mjs --table-from FILE.json              # the table of a --json file (a cut-short run)
//   node bench/web_node_bench.mjs --adapter-only [--dawn-backend B]   # print the adapter (exit 3: none) and stop
//
// --bundles DIR: bundles exported before (--export-to: every case's, charlm_b32's included; scripts/device/
// stage_node.sh carries them to the H200), else the cases run are exported now with --cli/--exporter into a
// temporary directory. --dawn-backend: Dawn's backend (default opengles, the only one on this VM's Mesa; vulkan on a
// GPU driver); --feature-level: the adapter asked
// for (default core on vulkan, compatibility on opengles; the peers get the same through a navigator.gpu shim).
// --plans: our webgpu plans timed (default auto,gpu: the runtime's pick, and the gpu plan when the pick is another).
// --peer-inputs resident|per-step|both (default both): what a peer's step uploads. Ours uploads every program input
// each step (the runtime's run() writes its feeds: SGEMM's A and B, the train step's x and labels, charlm's x, y and
// mask); the browser
// pages' peers keep them resident on the GPU; 'per-step' rows (", uploads") upload the same host arrays every step
// (equal work). Everyone reads back the same outputs (the loss; SGEMM: all of C).
// A peer that cannot load or run in Node is reported with its error and the run goes on; so is a measurement that
// takes longer than --case-timeout (default 90 s). Prints the adapter, one
// line per measurement, then a table (ours against the best peer; seed 000's bar: 200 train steps/s) and writes
// --json FILE after every measurement (a run cut short keeps what it measured).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import vm from 'node:vm';

import { BENCH_CASES, charlmRows, median, subsetOf, summary, timeDigitsJax, timeDigitsOurs, timeDigitsTfjs, timeJax, timeJaxCharlm,
  timeOurs, timeTfjs } from './web/bench_models.js';
import { createDawnGPU, fileFetch } from '../tests/dawn_node.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name, dflt) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : dflt; };
const flag = (name) => process.argv.includes(name);
const BAR = 200;  // seed 000: train steps per second in the browser

const allCases = [
  ...BENCH_CASES.filter((c) => c.kind === 'train'),
  { name: 'digits_finetune_b16', kind: 'digits', weights: 'pretrained', size: 16 },
  { name: 'digits_scratch_b16', kind: 'digits', weights: 'fresh', size: 16 },
  ...BENCH_CASES.filter((c) => c.kind === 'sgemm'),
  ...BENCH_CASES.filter((c) => c.kind === 'lm'),  // charlm_b32: only when --only names it (as bench/web_bench.mjs)
];
const DIGITS_LR = 0.003;  // the digits page's (scripts/build_web_demo.sh exports with --lr 0.003)

/** Exports the bundles of `list` (default every case) into `dir` (what bench/web_bench.mjs and
 * scripts/build_web_demo.sh export, the webgpu target only: Node has no WebGL2). */
function exportBundles(dir, cli, exporter, list = allCases) {
  fs.mkdirSync(dir, { recursive: true });
  for (const c of list.filter((x) => x.kind !== 'digits')) {
    const out = path.join(dir, c.name);
    if (c.kind === 'train' || c.kind === 'lm')
      execFileSync(cli, ['export', '--model', c.model, '--batch', String(c.size), '--check-steps', '0', '--targets', 'webgpu',
                         ...(c.context ? ['--context', String(c.context)] : []), '--out', out], { stdio: 'ignore' });
    else execFileSync(exporter, ['sgemm', String(c.size), out], { stdio: 'ignore' });
    // the lm case's word rows (charlmRows of --words) beside its bundle: the device has no /usr/share/dict/words
    if (c.kind === 'lm')
      fs.writeFileSync(path.join(out, 'charlm_rows.json'), JSON.stringify(charlmRows(fs.readFileSync(wordsFile, 'utf8'), c.size, c.context)));
  }
  // the digits demo's bundle, natively pretrained weights and shipped subset (digits/{bundle,pretrained.safetensors,
  // digits_subset.bin}); DIGITS_EPOCHS as web_app_bench.mjs sets it
  if (!list.some((x) => x.kind === 'digits')) return;
  execFileSync('bash', [path.join(here, '..', 'scripts', 'build_web_demo.sh'), dir, cli],
               { stdio: 'ignore', env: { ...process.env, DIGITS_EPOCHS: '10', SKIP_SHAPES: '1', SKIP_WORDS: '1' } });
  for (const f of ['index.html']) fs.rmSync(path.join(dir, f), { force: true });
}

const cli = arg('--cli', path.join(here, '..', 'build', 'bin', 'shadergrad'));
const wordsFile = arg('--words', '/usr/share/dict/words');
const exporter = arg('--exporter', path.join(here, '..', 'build', 'bin', 'bench_web_export'));
if (arg('--export-to')) {
  exportBundles(path.resolve(arg('--export-to')), cli, exporter);
  console.log(`exported ${allCases.length} cases' bundles to ${arg('--export-to')}`);
  process.exit(0);
}

if (arg('--table-from')) {
  printTable(JSON.parse(fs.readFileSync(arg('--table-from'), 'utf8')));
  process.exit(0);
}
const only = arg('--only');
const cases = only ? allCases.filter((c) => only.split(',').includes(c.name)) : allCases.filter((c) => c.kind !== 'lm');
// the lm case's [warm-up, timed] steps: the case's counts (bench_models.js), or --lm-counts W,T
const lmCounts = arg('--lm-counts')?.split(',').map(Number);
if (lmCounts && (lmCounts.length !== 2 || !lmCounts.every((n) => Number.isInteger(n) && n > 0))) {
  console.error(`--lm-counts ${arg('--lm-counts')}: want WARMUP,TIMED (positive integers)`);
  process.exit(2);
}
let root = arg('--bundles'), tmpRoot = null;
if (!root && !flag('--adapter-only')) {
  root = tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_web_node_bench_'));
  exportBundles(root, cli, exporter, cases);  // only the cases run
}
root = path.resolve(root ?? '.');
const dawnBackend = arg('--dawn-backend', 'opengles');
const featureLevel = arg('--feature-level', dawnBackend === 'opengles' ? 'compatibility' : 'core');
const plans = arg('--plans', 'auto,gpu').split(',').filter((p) => p && p !== 'none');
const peers = flag('--no-peers') ? [] : arg('--peers', 'tfjs,jax').split(',');
const npmDir = path.resolve(arg('--npm', path.join(here, 'web', 'node_modules')));
const jsonFile = arg('--json');

// ---------------------------------------------------------------------------------------------------------------
// Dawn: the GPU object, the adapter we report, and navigator.gpu for the peers (they ask for a core adapter; on
// Dawn's GLES backend only a compatibility adapter exists, so the shim asks for --feature-level)
// ---------------------------------------------------------------------------------------------------------------
const gpu = await createDawnGPU(dawnBackend === 'default' ? '' : dawnBackend);
const adapter = await gpu.requestAdapter({ featureLevel, powerPreference: 'high-performance' });
if (!adapter) {
  console.error(`Dawn (${dawnBackend} backend) gave no ${featureLevel} adapter`);
  process.exit(3);
}
const info = adapter.info ?? {};
const adapterInfo = { dawn_backend: dawnBackend, feature_level: featureLevel, vendor: info.vendor, architecture: info.architecture,
                      device: info.device, description: info.description, is_fallback: adapter.isFallbackAdapter ?? info.isFallbackAdapter,
                      features: [...adapter.features].sort(),
                      limits: Object.fromEntries(['maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupStorageSize',
                                                  'maxStorageBuffersPerShaderStage', 'maxStorageBufferBindingSize', 'maxBufferSize']
                                                   .map((k) => [k, adapter.limits[k]])) };
console.log(`Dawn adapter: ${JSON.stringify(adapterInfo)}`);
console.log(`node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model}), ${os.type()} ${os.release()}`);
if (flag('--adapter-only')) process.exit(0);
const shimGpu = {
  requestAdapter: (o = {}) => gpu.requestAdapter({ ...o, featureLevel }),
  getPreferredCanvasFormat: () => 'rgba8unorm',
  get wgslLanguageFeatures() { return gpu.wgslLanguageFeatures; },
};
// (jax-js reads navigator.userAgent; Node 20 has no navigator, Node 21+ one without gpu)
Object.defineProperty(globalThis, 'navigator', { value: { userAgent: `Node.js/${process.version} (Dawn)`, ...(globalThis.navigator ?? {}),
                                                          gpu: shimGpu }, configurable: true, writable: true });
const ourOptions = (plan) => ({ backend: 'webgpu', webgpuPlan: plan, gpu, fetch: fileFetch, featureLevel });

// ---------------------------------------------------------------------------------------------------------------
// The peers, loaded as the browser pages load them: TF.js's UMD bundles (tf.min.js, then tf-backend-webgpu.min.js,
// which registers 'webgpu' when navigator.gpu exists) into the global scope; jax-js as its ES module
// ---------------------------------------------------------------------------------------------------------------
async function loadTfjs() {
  const require = createRequire(path.join(npmDir, 'x.js'));  // what tf.min.js's Node platform asks for (util...)
  globalThis.require ??= require;
  for (const f of ['@tensorflow/tfjs/dist/tf.min.js', '@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.min.js']) {
    const src = fs.readFileSync(path.join(npmDir, f), 'utf8');
    // no exports/module/define in scope: the UMD wrapper takes its browser path (globalThis.tf)
    vm.runInThisContext(`(function (exports, module, define) {${src}\n})`, { filename: f })(undefined, undefined, undefined);
  }
  if (!globalThis.tf?.setBackend) throw new Error('tf.min.js did not define globalThis.tf');
  return globalThis.tf;
}
// jax-js's einsum parser (nn.dotProductAttention: the charlm step) chains iterator helpers (matchAll(...).map(...)
// .filter(...)), which Node 20's V8 lacks (Node 22+, Chromium have them): the two it uses, only where missing
function iteratorHelpers() {
  const proto = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));
  const add = (name, fn) => proto[name] ?? Object.defineProperty(proto, name, { value: fn, writable: true, configurable: true });
  add('map', function* map(f) { let i = 0; for (const v of { [Symbol.iterator]: () => this }) yield f(v, i++); });
  add('filter', function* filter(f) { let i = 0; for (const v of { [Symbol.iterator]: () => this }) if (f(v, i++)) yield v; });
}
const loadJax = async () => {
  iteratorHelpers();
  return import(pathToFileURL(path.join(npmDir, '@jax-js/jax/dist/index.js')).href);
};
const peerLibs = {};
for (const [name, load] of [['tfjs', loadTfjs], ['jax', loadJax]].filter(([n]) => peers.includes(n))) {
  try {
    peerLibs[name] = await load();
  } catch (e) {
    peerLibs[name] = { error: `cannot load in Node: ${e.message.split('\n')[0]}` };
    console.log(`${name}: ${peerLibs[name].error}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The measurements
// ---------------------------------------------------------------------------------------------------------------
const results = [];
const save = () => jsonFile && fs.writeFileSync(jsonFile, JSON.stringify({ date: new Date().toISOString(), node: process.version,
                                                                           adapter: adapterInfo, bar_steps_per_s: BAR, results }, null, 1));
const caseTimeout = Number(arg('--case-timeout', '90'));  // seconds per measurement, then it is an error
async function record(c, who, fn) {
  let r, timer;
  try {
    r = await Promise.race([fn(), new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${caseTimeout} s (--case-timeout)`)), caseTimeout * 1000);
    })]);
  } catch (e) {
    r = { error: (e?.message ?? String(e)).split('\n')[0] };
  } finally {
    clearTimeout(timer);
  }
  results.push({ case: c.name, who, load1: os.loadavg()[0], ...r, timings: undefined });
  save();
  const v = r.values ?? [r.loss_first, r.loss_last];
  const what = r.error ? `ERROR ${r.error}` : r.skipped ? `not measured: ${r.skipped}`
    : `${r.median_ms.toFixed(3)} ms (${r.min_ms.toFixed(3)}-${r.max_ms.toFixed(3)}), ${r.steps_per_s.toFixed(1)} steps/s back to back, ` +
      `first ${r.first_step_ms.toFixed(0)} ms${r.kernels ? `, ${r.kernels} kernels` : ''}, ` +
      (c.kind === 'sgemm' ? `${(2 * c.size ** 3 / (r.median_ms * 1e6)).toFixed(2)} GFLOP/s` : `loss ${v.map((l) => l.toFixed(4)).join(' -> ')}`) +
      (r.webgpu_plan ? ` [${r.webgpu_plan} plan: ${r.webgpu_plan_reason}]` : '');
  console.log(`${c.name.padEnd(20)} ${who.padEnd(24)} ${what}`);
  return r;
}
const digitsDir = path.join(root, 'digits');
const subset = () => subsetOf(new Uint8Array(fs.readFileSync(path.join(digitsDir, 'digits_subset.bin'))));
async function ours(c, plan) {
  if (c.kind !== 'digits') {
    const dir = path.join(root, c.name);
    const mod = await import(pathToFileURL(path.join(dir, 'runtime', 'shadergrad.js')).href);
    return timeOurs(mod, pathToFileURL(path.join(dir, 'bundle.json')).href, c.kind === 'sgemm' ? 'sgemm' : 'train', ourOptions(plan),
                    false, c.kind === 'lm' ? lmCase(c) : null);
  }
  const rtDir = path.join(digitsDir, 'bundle', 'runtime');
  const sg = await import(pathToFileURL(path.join(rtDir, 'shadergrad.js')).href);
  const persist = await import(pathToFileURL(path.join(rtDir, 'persist.js')).href);
  const weights = c.weights === 'pretrained' ? new Uint8Array(fs.readFileSync(path.join(digitsDir, 'pretrained.safetensors'))).buffer : null;
  return timeDigitsOurs(sg, persist, pathToFileURL(path.join(digitsDir, 'bundle', 'bundle.json')).href, weights, subset(), ourOptions(plan));
}
/** The lm case's feeds and counts: the rows written beside its bundle at export (charlm_rows.json), else charlmRows
 * of --words now; counts = --lm-counts or the case's. The same rows and counts for ours and jax-js. */
const lmGiven = new Map();
function lmCase(c) {
  if (!lmGiven.has(c.name)) {
    const f = path.join(root, c.name, 'charlm_rows.json');
    const rows = fs.existsSync(f) ? JSON.parse(fs.readFileSync(f, 'utf8')) : charlmRows(fs.readFileSync(wordsFile, 'utf8'), c.size, c.context);
    console.log(`${c.name}: rows of the words ${rows.words.join(' ')}${fs.existsSync(f) ? ' (charlm_rows.json)' : ` (${wordsFile})`}`);
    lmGiven.set(c.name, { feeds: rows, counts: lmCounts ?? c.counts });
  }
  return lmGiven.get(c.name);
}
function peer(c, name, uploads) {
  const lib = peerLibs[name];
  if (c.kind === 'lm' && name === 'tfjs')  // the browser bench has no TF.js charlm either
    return async () => ({ skipped: 'TF.js has no charlm step (bench_models.js writes the CharTransformer in jax-js only)' });
  if (lib.error) return async () => ({ error: lib.error });
  if (c.kind === 'lm') {
    const g = lmCase(c);
    return () => timeJaxCharlm(lib, { ...c, counts: g.counts }, g.feeds, 'webgpu', undefined, { uploads });
  }
  if (name === 'tfjs')
    return c.kind === 'digits' ? () => timeDigitsTfjs(lib, subset(), c.size, DIGITS_LR, 'webgpu')
      : () => timeTfjs(lib, c.kind, c.model, c.size, 'webgpu', { uploads });
  return c.kind === 'digits' ? () => timeDigitsJax(lib, subset(), c.size, DIGITS_LR, 'webgpu')
    : () => timeJax(lib, c.kind, c.model, c.size, 'webgpu', undefined, { uploads });
}
// --peer-inputs: resident (inputs uploaded once, as bench/web_bench.mjs's pages), per-step (uploaded every step, as
// ours does: equal work), or both (default); the digits cases upload a new batch every step for everyone
const peerInputs = arg('--peer-inputs', 'both');
const peerModes = { resident: [false], 'per-step': [true], both: [false, true] }[peerInputs] ?? [false, true];
const peerName = { tfjs: 'tfjs 4.22 webgpu', jax: 'jax-js 0.1.25 webgpu' };
const digitsTwice = new Set();  // the peers' digits step is one program: timed once, as web_app_bench
/** The floor under every step that reads a value back: one tiny compute dispatch, a 4-byte copy and mapAsync, on a
 * device of the same adapter (Dawn in Node polls its events; a browser has its own loop). 10 warm-up, 200 timed. */
async function readbackFloor() {
  const a = await gpu.requestAdapter({ featureLevel, powerPreference: 'high-performance' });
  const device = await a.requestDevice();
  const src = device.createBuffer({ size: 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const dst = device.createBuffer({ size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { entryPoint: 'main', module: device.createShaderModule({
    code: '@group(0) @binding(0) var<storage, read_write> v: array<f32>;\n@compute @workgroup_size(1) fn main() { v[0] = v[0] + 1.0; }' }) } });
  const bind = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: src } }] });
  const once = async () => {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline); pass.setBindGroup(0, bind); pass.dispatchWorkgroups(1); pass.end();
    enc.copyBufferToBuffer(src, 0, dst, 0, 4);
    device.queue.submit([enc.finish()]);
    await dst.mapAsync(GPUMapMode.READ);
    const v = new Float32Array(dst.getMappedRange())[0];
    dst.unmap();
    return v;
  };
  const t0 = performance.now();
  for (let i = 0; i < 10; ++i) await once();
  const times = [];
  const l0 = performance.now();
  for (let i = 0; i < 200; ++i) { const s = performance.now(); await once(); times.push(performance.now() - s); }
  const loopMs = performance.now() - l0;
  const v = await once();
  device.destroy();
  return { ...summary(times), first_step_ms: l0 - t0, steps_per_s: (1000 * 200) / loopMs, values: [v] };
}
if (!only || only.split(',').includes('readback_floor'))
  await record({ name: 'readback_floor', kind: 'floor' }, 'dawn (dispatch + 4 B mapAsync)', readbackFloor);

for (const c of cases) {
  let picked = null;
  for (const plan of plans) {
    if (plan !== 'auto' && picked === plan) continue;  // the pick already was this plan
    const r = await record(c, `shadergrad (${plan === 'auto' ? 'picked' : plan} plan)`, () => ours(c, plan));
    if (plan === 'auto') picked = r.webgpu_plan;
  }
  if (c.kind === 'digits' && digitsTwice.size) continue;
  if (c.kind === 'digits') digitsTwice.add(c.name);
  for (const uploads of c.kind === 'digits' ? [false] : peerModes)
    for (const name of peers) {
      if (c.kind === 'lm' && name === 'tfjs' && uploads && peerModes.length > 1) continue;  // one 'not measured' row
      await record(c, `${peerName[name]}${uploads ? ', uploads' : ''}`, peer(c, name, uploads));
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The table: per case, our best plan against the best peer (the peers' digits step, timed once, stands beside both
// digits rows); also printed from a --json file by --table-from (a run cut short by a timeout prints none itself)
// ---------------------------------------------------------------------------------------------------------------
printTable({ adapter: adapterInfo, results, date: new Date().toISOString() });
if (tmpRoot) fs.rmSync(tmpRoot, { recursive: true, force: true });
process.exit(results.some((r) => !r.error) ? 0 : 1);

function printTable({ adapter: a, results: rs, date }) {
  const ok = (r) => r && !r.error && !r.skipped;
  const best = (l) => l.filter(ok).reduce((x, y) => (!x || y.median_ms < x.median_ms ? y : x), null);
  const cell = (r) => (ok(r) ? `${r.median_ms.toFixed(3)} (${r.min_ms.toFixed(3)}–${r.max_ms.toFixed(3)})` : r?.skipped ? 'n/a' : r ? 'error' : '–');
  const rate = (r) => (ok(r) ? r.steps_per_s.toFixed(r.steps_per_s < 10 ? 1 : 0) : '–');
  console.log('\n| case | ours ms (min–max) | ours plan | ours steps/s | TF.js webgpu ms | TF.js steps/s | jax-js webgpu ms | ' +
              'jax-js steps/s | best peer / ours | best peer, inputs uploaded per step as ours: ms, / ours | ' +
              'first step s (ours / best peer) | ≥ 200 steps/s |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  const resident = (r) => !r.who.endsWith(', uploads');
  const digitsPeerCase = rs.find((r) => r.case.startsWith('digits_') && !r.who.startsWith('shadergrad'))?.case;
  for (const c of allCases.filter((x) => rs.some((r) => r.case === x.name))) {
    const pc = c.kind === 'digits' ? digitsPeerCase : c.name;
    const o = best(rs.filter((r) => r.case === c.name && r.who.startsWith('shadergrad')));
    const t = rs.find((r) => r.case === pc && r.who.startsWith('tfjs') && resident(r));
    const j = rs.find((r) => r.case === pc && r.who.startsWith('jax') && resident(r));
    const p = best([t, j].filter(Boolean));
    // equal work: the digits peers upload every step anyway; the other cases' ', uploads' rows
    const pu = c.kind === 'digits' ? p : best(rs.filter((r) => r.case === pc && !r.who.startsWith('shadergrad') && !resident(r)));
    const equal = pu ? `${pu.who.split(' ')[0]} ${pu.median_ms.toFixed(3)}${ok(o) ? `, ${(pu.median_ms / o.median_ms).toFixed(2)}×` : ''}` : '–';
    const bar = c.kind === 'sgemm' ? (ok(o) ? `${(2 * c.size ** 3 / (o.median_ms * 1e6)).toFixed(1)} GFLOP/s` : '–')
      : ok(o) ? (o.steps_per_s >= BAR ? 'yes' : 'no') : '–';
    console.log(`| ${c.name} | ${cell(o)} | ${ok(o) ? o.webgpu_plan : '–'} | ${rate(o)} | ${cell(t)} | ${rate(t)} | ${cell(j)} | ${rate(j)} | ` +
                `${ok(o) && p ? (p.median_ms / o.median_ms).toFixed(2) + '×' : '–'} | ${equal} | ` +
                `${ok(o) ? (o.first_step_ms / 1000).toFixed(2) : '–'} / ${p ? (p.first_step_ms / 1000).toFixed(2) : '–'} | ${bar} |`);
  }
  const floor = rs.find((r) => r.case === 'readback_floor' && ok(r));
  if (floor) console.log(`\nreadback floor (one dispatch + a 4-byte mapAsync, back to back): ${cell(floor)} ms, ${rate(floor)}/s`);
  for (const r of rs.filter((x) => x.error)) console.log(`${r.case} ${r.who}: ERROR ${r.error}`);
  for (const r of rs.filter((x) => x.skipped)) console.log(`${r.case} ${r.who}: not measured: ${r.skipped}`);
  for (const c of allCases.filter((x) => x.kind === 'lm' && rs.some((r) => r.case === x.name && ok(r))))  // both start near ln 27
    console.log(`\n${c.name} loss at step 1 (ln 27 = 3.30): ` + rs.filter((r) => r.case === c.name && ok(r))
      .map((r) => `${r.who} ${r.values[0].toFixed(4)} (${r.steps} timed steps)`).join(', '));
  const loads = rs.map((r) => r.load1);
  console.log(`\nNode + Dawn (${a.dawn_backend} backend, ${a.feature_level} adapter: ${a.vendor} ${a.architecture} ${a.device} ` +
              `${a.description}), not a browser; WebGL2 rows impossible without a browser. 1-minute load average ` +
              (loads.length ? `${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} (median ${median(loads).toFixed(1)}); ` : '') +
              date);
}
