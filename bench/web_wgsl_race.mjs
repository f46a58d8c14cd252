// Benchmark tool (not a test): races hand-written or generated WGSL variants of one compute kernel in one WebGPU
// device of headless Chromium (SwiftShader), interleaved: round r runs every variant in turn, each `--reps` times,
// every dispatch in its own compute pass timed by timestamp queries. Prints each variant's minimum and median GPU
// time over all rounds, the wall time of its createComputePipelineAsync (SwiftShader compiles there) and the first few elements of its last binding (variants of one kernel must agree), so A/B
// comparisons do not depend on which minute of a shared machine a variant ran in (web_kernel_probe.mjs runs each
// bundle in its own page, one after another).
//
// A variant is a .wgsl file whose first lines say how to run it:
//   // race: dispatch X Y Z
//   // race: bind NAME:FLOATS NAME:FLOATS ...     (the bindings of group 0 in order; the last is the output)
// Buffers of one name are shared by all variants (name the output per variant to see each one's values) (filled once with values from a fixed generator, in [-1, 1)); a
// file starting with `enable subgroups;` gets a device with the 'subgroups' feature (where the adapter has it).
//
//   (cd bench/web && npm ci)
//   nice -n 5 node bench/web_wgsl_race.mjs [--rounds 8] [--reps 5] a.wgsl b.wgsl ...
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium, loadChromium, serveStatic } from '../tests/browser.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv.splice(i, 2)[1] : dflt; };
const rounds = Number(opt('--rounds', '8')), reps = Number(opt('--reps', '5'));
if (argv.length === 0) {
  console.error('usage: web_wgsl_race.mjs [--rounds R] [--reps N] VARIANT.wgsl ...');
  process.exit(2);
}

/** The `// race:` header of a variant: its dispatch and its bindings. */
function parseVariant(file) {
  const source = fs.readFileSync(file, 'utf8');
  const dispatch = source.match(/^\/\/ race: dispatch (\d+) (\d+) (\d+)$/m);
  const bind = source.match(/^\/\/ race: bind (.+)$/m);
  if (!dispatch || !bind) throw new Error(`${file}: no '// race: dispatch X Y Z' and '// race: bind NAME:FLOATS ...' lines`);
  const bindings = bind[1].trim().split(/\s+/).map((b) => {
    const [name, floats] = b.split(':');
    if (!name || !(Number(floats) > 0)) throw new Error(`${file}: binding '${b}' is not NAME:FLOATS`);
    return { name, floats: Number(floats) };
  });
  return { name: path.basename(file, '.wgsl'), source, dispatch: dispatch.slice(1).map(Number), bindings };
}
const variants = argv.map(parseVariant);

/** Page side: compiles every variant, runs the rounds, returns per-variant GPU times (ms) and output heads. */
async function race([variants, rounds, reps]) {
  const adapter = await navigator.gpu.requestAdapter();
  const features = ['timestamp-query'];
  if (variants.some((v) => v.source.startsWith('enable subgroups;')) && adapter.features.has('subgroups'))
    features.push('subgroups');
  const device = await adapter.requestDevice({ requiredFeatures: features,
                                               requiredLimits: { maxStorageBuffersPerShaderStage:
                                                                 adapter.limits.maxStorageBuffersPerShaderStage } });
  const buffers = {};
  let s = 1;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296) * 2 - 1;
  const buffer = ({ name, floats }) => {
    if (buffers[name]) return buffers[name];
    const b = device.createBuffer({ size: floats * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC |
                                                            GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(b, 0, Float32Array.from({ length: floats }, rnd));
    return (buffers[name] = b);
  };
  const runs = [];
  for (const v of variants) {
    const module = device.createShaderModule({ code: v.source });
    const info = await module.getCompilationInfo();
    const errors = info.messages.filter((m) => m.type === 'error');
    if (errors.length) return { error: `${v.name}: ${errors.map((m) => `line ${m.lineNum}: ${m.message}`).join('; ')}` };
    // an explicit layout (every binding kept, used or not): inputs read-only, the last binding read_write
    device.pushErrorScope('validation');
    const layout = device.createBindGroupLayout({ entries: v.bindings.map((b, i) => ({
      binding: i, visibility: GPUShaderStage.COMPUTE,
      buffer: { type: i === v.bindings.length - 1 ? 'storage' : 'read-only-storage' } })) });
    const t0 = performance.now();
    const pipeline = await device.createComputePipelineAsync({
      layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }), compute: { module, entryPoint: 'main' } });
    const group = device.createBindGroup({ layout, entries: v.bindings.map((b, i) => ({ binding: i, resource: { buffer: buffer(b) } })) });
    const invalid = await device.popErrorScope();
    if (invalid) return { error: `${v.name}: ${invalid.message}` };
    runs.push({ v, pipeline, group, ms: [], compile: performance.now() - t0 });
  }
  const query = device.createQuerySet({ type: 'timestamp', count: 2 * reps });
  const resolved = device.createBuffer({ size: 16 * reps, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  const readback = device.createBuffer({ size: 16 * reps, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  for (let r = 0; r < rounds + 1; ++r)  // round 0 warms up
    for (const run of runs) {
      const enc = device.createCommandEncoder();
      for (let i = 0; i < reps; ++i) {
        const pass = enc.beginComputePass({ timestampWrites: { querySet: query, beginningOfPassWriteIndex: 2 * i,
                                                               endOfPassWriteIndex: 2 * i + 1 } });
        pass.setPipeline(run.pipeline);
        pass.setBindGroup(0, run.group);
        pass.dispatchWorkgroups(...run.v.dispatch);
        pass.end();
      }
      enc.resolveQuerySet(query, 0, 2 * reps, resolved, 0);
      enc.copyBufferToBuffer(resolved, 0, readback, 0, 16 * reps);
      device.pushErrorScope('validation');
      device.queue.submit([enc.finish()]);
      const invalid = await device.popErrorScope();
      if (invalid) return { error: `${run.v.name}: ${invalid.message}` };
      await readback.mapAsync(GPUMapMode.READ);
      const t = new BigUint64Array(readback.getMappedRange().slice(0));
      readback.unmap();
      if (r > 0) for (let i = 0; i < reps; ++i) run.ms.push(Number(t[2 * i + 1] - t[2 * i]) / 1e6);
    }
  const out = [];
  for (const run of runs) {
    const last = run.v.bindings[run.v.bindings.length - 1];
    const copy = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(buffer(last), 0, copy, 0, 16);
    device.queue.submit([enc.finish()]);
    await copy.mapAsync(GPUMapMode.READ);
    const head = Array.from(new Float32Array(copy.getMappedRange().slice(0)));
    const sorted = [...run.ms].sort((a, b) => a - b);
    out.push({ name: run.v.name, min: sorted[0], median: sorted[sorted.length >> 1], head, ms: run.ms, compile: run.compile });
  }
  return { out };
}

const npmDir = path.join(here, 'web', 'node_modules');
const chromium = await loadChromium(npmDir);
const server = await serveStatic([{ prefix: '/_bench/', dir: path.join(here, 'web') }], { isolated: true });
const browser = await launchChromium(chromium, { webgpu: true });
const page = await browser.newPage();
page.setDefaultTimeout(600000);
await page.goto(`${server.origin}/_bench/bench_page.html`);
const r = await page.evaluate(race, [variants, rounds, reps]).catch((e) => ({ error: e.message.split('\n')[0] }));
await browser.close();
server.close();
if (r.error) {
  console.error(`ERROR ${r.error}`);
  process.exit(1);
}
console.log(`${rounds} rounds x ${reps} dispatches per variant, interleaved; GPU time (timestamp queries)`);
console.log('| variant | min ms | median ms | pipeline ms | output[0..3] |\n|---|---|---|---|---|');
for (const v of r.out)
  console.log(`| ${v.name} | ${v.min.toFixed(3)} | ${v.median.toFixed(3)} | ${v.compile.toFixed(0)} | ${v.head.map((x) => x.toPrecision(6)).join(' ')} |`);
if (process.env.RACE_DEBUG) for (const v of r.out) console.log(v.name, v.ms.map((x) => x.toFixed(2)).join(' '));
