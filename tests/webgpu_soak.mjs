// WebGPU soak (docs/RELIABILITY.md "Soak", issue 19): runs an exported bundle's `train` program STEPS times with
// the web runtime (the bundle's runtime/ copy) on WebGPU in Node through npm `webgpu` (Dawn, its OpenGL ES backend
// on this machine: ../shared/TOOLCHAIN.md), and checks that nothing grows: the runtime's WebGPU objects
// (Runtime.liveObjects(): buffers alive, buffers / bind groups / pipelines / shader modules created), the JS heap
// after a full GC and the process RSS. Every 100 steps the `infer` program runs once too (a second program on the
// same parameters). Before the counted steps, a warm-up of two train steps each followed by infer: every program has
// then met both parities of the persistent values (front/back), so each has its bind groups (built once per parity).
// Prints a table every STEPS/10 steps, then the verdict.
//
// Usage: node --expose-gc tests/webgpu_soak.mjs BUNDLE_DIR [STEPS] [PLAN]   (default 10000 steps; PLAN the webgpu
//        plan: auto (default: the runtime picks) | gpu | cpu; bench/webgpu_soak.sh exports the bundle and runs this)
// Verdict, exit status 1 on failure: a loss that is not finite (at any step), an object count that differs from its
// value after the first interval, the JS heap grown by more than 4 MiB or the RSS by more than 16 MiB from the first
// interval to the last. Exit 2: the environment lacks npm `webgpu` or the bundle. Timings are printed, never judged.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { createDawnGPU, fileFetch } from './dawn_node.mjs';
import { mulberry32 } from './mulberry32.mjs';

const [dir, stepsArg, plan = 'auto'] = process.argv.slice(2);
const steps = Number(stepsArg ?? 10000);
if (!dir || !fs.existsSync(path.join(dir, 'bundle.json')) || !(steps >= 10)) {
  console.error('usage: node --expose-gc webgpu_soak.mjs BUNDLE_DIR [STEPS >= 10] [auto|gpu|cpu]');
  process.exit(2);
}
const gpu = await createDawnGPU();
const HEAP_MIB = 4, RSS_MIB = 16;

/** Deterministic feeds for a program's inputs: pixels in [0, 1), class indices i mod classes (mulberry32). */
function makeFeeds(inputs, seed) {
  const rand = mulberry32(seed);
  const feeds = {};
  for (const i of inputs) {
    const n = i.shape.reduce((a, b) => a * b, 1);
    feeds[i.name] = i.dtype === 'i32' ? Int32Array.from({ length: n }, (_, k) => (k * 7) % (i.classes ?? 10))
                                      : Float32Array.from({ length: n }, rand);
  }
  return feeds;
}

const mib = (b) => b / 1048576;
function memory() {
  globalThis.gc?.();
  const m = process.memoryUsage();
  return { heap: mib(m.heapUsed), rss: mib(m.rss) };
}

const mod = await import(pathToFileURL(path.join(path.resolve(dir), 'runtime/shadergrad.js')).href);
const rt = await mod.createRuntime(pathToFileURL(path.join(path.resolve(dir), 'bundle.json')).href,
                                   { backend: 'webgpu', webgpuPlan: plan, gpu, fetch: fileFetch, featureLevel: 'compatibility' });
const train = rt.bundle.program('train'), infer = rt.programs.includes('infer') ? rt.bundle.program('infer') : null;
const lossName = train.outputs[0].name;
const trainFeeds = makeFeeds(train.inputs, 1), inferFeeds = infer ? makeFeeds(infer.inputs, 2) : null;
console.log(`webgpu_soak: ${path.basename(path.resolve(dir))} train (${train.inputs.map((i) => `${i.name} ` +
            `${i.shape.join('x')}`).join(', ')}), ${steps} steps${infer ? ', infer every 100' : ''}, ` +
            `${rt.webgpuPlan.name} plan (${plan === 'auto' ? 'picked' : 'forced'}) on ${rt.caps.renderer}, node ${process.version}` +
            (globalThis.gc ? '' : ' (no --expose-gc: the heap is sampled without a full GC)'));

for (let w = 0; w < 2; ++w) {  // the warm-up (see the top)
  await rt.run('train', trainFeeds);
  if (infer) await rt.run('infer', inferFeeds);
}
const keys = Object.keys(rt.liveObjects());
console.log(`\n| step | ${keys.join(' | ')} | JS heap MiB | RSS MiB | loss | s |`);
console.log(`|---:|${keys.map(() => '---:|').join('')}---:|---:|---:|---:|`);
const every = Math.floor(steps / 10), t0 = Date.now();
let first = null, firstMem = null, lastMem = null, countsOk = true, bad = null;
for (let s = 1; s <= steps; ++s) {
  const out = await rt.run('train', trainFeeds);
  const loss = out[lossName][0];
  if (!Number.isFinite(loss)) { bad = `loss ${loss} at step ${s}`; break; }
  if (infer && s % 100 === 0) await rt.run('infer', inferFeeds);
  if (s % every) continue;
  const live = rt.liveObjects();
  lastMem = memory();
  if (s === every) { first = live; firstMem = lastMem; }
  if (keys.some((k) => live[k] !== first[k])) countsOk = false;
  console.log(`| ${s} | ${keys.map((k) => live[k]).join(' | ')} | ${lastMem.heap.toFixed(1)} | ` +
              `${lastMem.rss.toFixed(1)} | ${loss.toFixed(5)} | ${((Date.now() - t0) / 1000).toFixed(0)} |`);
}
rt.dispose();
if (bad) {
  console.log(`\nFAIL: ${bad}`);
  process.exit(1);
}
const heap = lastMem.heap - firstMem.heap, rss = lastMem.rss - firstMem.rss;
const ok = countsOk && heap <= HEAP_MIB && rss <= RSS_MIB;
console.log(`\n${ok ? 'PASS' : 'FAIL'}: WebGPU objects ${countsOk ? 'unchanged' : 'CHANGED'} after step ${every}, ` +
            `JS heap ${heap >= 0 ? '+' : ''}${heap.toFixed(1)} MiB (limit ${HEAP_MIB}), RSS ${rss >= 0 ? '+' : ''}` +
            `${rss.toFixed(1)} MiB (limit ${RSS_MIB}) from step ${every} to step ${steps}, every loss finite; ` +
            `${((Date.now() - t0) / 1000).toFixed(0)} s`);
process.exit(ok ? 0 : 1);
