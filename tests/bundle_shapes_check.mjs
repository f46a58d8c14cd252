// The web runtime's bundle loader (runtime/web/bundle.js) checks the declared shapes of a program's inputs and
// outputs against what its plans store for them (webgl2: the value's texture layout; webgpu: the storage buffer's
// bytes), every value's shape against its layout, and the checks' data against the declared shapes. A hand-edited
// bundle.json asking a bundle made for two images to take four was loaded before, and on WebGL2 the upload was cut to
// the layout: the run returned the first images' probabilities and dropped the others silently. Now loadBundle
// refuses it with a BundleError naming the program, the input, the declared shape and what the plan stores.
// Pure loader logic on the bundle.json seeds of tests/fuzz/corpus/bundle (files made up in memory), no GPU: run by
// ctest (bundle_declared_shapes) in Node. Exit status 0 = every assertion held.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { fetchFrom, seedFiles } from './fuzz/bundle_files.mjs';
import { BundleError, loadBundle } from '../runtime/web/shadergrad.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const corpus = path.join(here, 'fuzz/corpus/bundle');
const BASE = 'http://shapes.invalid/b/';

/** Loads seed `name` after `edit(json)` changed its bundle.json: the Bundle, or the error thrown. */
async function load(name, edit = () => {}) {
  const text = fs.readFileSync(path.join(corpus, name), 'utf8');
  const files = seedFiles(text);
  const json = JSON.parse(text);
  edit(json);
  files.set('bundle.json', JSON.stringify(json));
  try {
    const b = await loadBundle(`${BASE}bundle.json`, { fetch: fetchFrom(files, BASE), shaders: 'all' });
    await b.loadChecks();
    return { bundle: b };
  } catch (error) {
    return { error };
  }
}

/** The error of loading seed `name` edited by `edit`: a BundleError matching every pattern of `want`. */
async function refused(what, name, edit, want, details = {}) {
  const { bundle, error } = await load(name, edit);
  assert.ok(!bundle, `${what}: loaded, but the declared shape disagrees with the storage`);
  assert.ok(error instanceof BundleError, `${what}: ${error?.name}: ${error?.message}`);
  for (const re of want) assert.match(error.message, re, `${what}: ${error.message}`);
  assert.equal(error.details.file, 'bundle.json', what);
  for (const [k, v] of Object.entries(details)) assert.deepEqual(error.details[k], v, `${what}: details.${k}`);
  return error;
}

const BOTH = 'mlp_infer_both.json';           // webgpu (gpu, cpu plans) and webgl2; infer: x [2,1,8,8] -> probs [2,10]
const PLANES = 'mlp_infer_webgl2_planes.json';  // webgl2 only, values in row planes
const WEBGPU = 'cnn_infer_webgpu_gpu.json';   // webgpu gpu plan only; infer: x [1,1,8,8] -> probs [1,10]

// the seeds as exported load
for (const seed of [BOTH, PLANES, WEBGPU]) {
  const { bundle, error } = await load(seed);
  assert.ok(bundle, `${seed}: ${error?.name}: ${error?.message}`);
}

// an empty output (numel 0) as export writes it: a 1x1 texture of 0 texels, a buffer of one vec4 (16 bytes)
for (const seed of [BOTH, WEBGPU]) {
  const { bundle, error } = await load(seed, (j) => {
    const p = j.programs.infer;
    for (const d of [p, ...(j.webgpu?.plans ?? []).map((pl) => p[pl.program_key])]) {
      d.outputs[0].shape = [0, 10];
      if (!d.values) continue;  // webgpu only: the program's own entry has no values
      const v = d.values[d.outputs[0].value];
      v.shape = [0, 10];
      if (v.layout) v.layout = { numel: 0, texels: 0, width: 1, height: 1 };
      if (v.bytes !== undefined) v.bytes = 16;
    }
    j.checks.runs[0].outputs = {};
  });
  assert.ok(bundle, `${seed} with an empty output: ${error?.name}: ${error?.message}`);
}

const inputs = (j) => j.programs.infer.inputs;
const outputs = (j) => j.programs.infer.outputs;

// two images more than the bundle was made for: refused, naming the input, the declared shape and the storage
let e = await refused('x declared [4,1,8,8] (webgl2 + webgpu)', BOTH, (j) => { inputs(j)[0].shape = [4, 1, 8, 8]; },
                      [/program 'infer': input 'x' is declared \[4,1,8,8\] \(256 values\)/,
                       /webgl2 plan stores \[2,1,8,8\] for it \(128 values/, /export the bundle again/],
                      { program: 'infer', input: 'x', shape: [4, 1, 8, 8], stored: [2, 1, 8, 8], target: 'webgl2' });
await refused('x declared [4,1,8,8] (webgl2 planes)', PLANES, (j) => { inputs(j)[0].shape = [4, 1, 8, 8]; },
              [/input 'x' is declared \[4,1,8,8\] \(256 values\) but the webgl2 plan stores \[2,1,8,8\]/]);
await refused('x declared [2,1,8,8] (webgpu only)', WEBGPU, (j) => { inputs(j)[0].shape = [2, 1, 8, 8]; },
              [/input 'x' is declared \[2,1,8,8\] \(128 values, 512 bytes\) but the webgpu gpu plan stores \[1,1,8,8\] for it in a buffer of 256 bytes/],
              { program: 'infer', input: 'x', stored: [1, 1, 8, 8], bytes: 256, target: 'webgpu gpu' });
// fewer than stored: the rest of the storage would hold stale values
await refused('x declared [1,1,8,8]', BOTH, (j) => { inputs(j)[0].shape = [1, 1, 8, 8]; },
              [/input 'x' is declared \[1,1,8,8\] \(64 values\) but the webgl2 plan stores \[2,1,8,8\]/]);
// the output: probabilities of four images read back from a plan that computes two
await refused('probs declared [4,10]', BOTH, (j) => { outputs(j)[0].shape = [4, 10]; },
              [/output 'probs' is declared \[4,10\] \(40 values\) but the webgl2 plan stores \[2,10\]/],
              { output: 'probs' });
await refused('probs declared [2,10] (webgpu only)', WEBGPU, (j) => { outputs(j)[0].shape = [2, 10]; },
              [/output 'probs' is declared \[2,10\] \(20 values, 80 bytes\) but the webgpu gpu plan stores \[1,10\]/]);
// every shape edited consistently, the storage (layouts, buffer bytes) left as exported: still refused
e = await refused('x [4,1,8,8] in every description', BOTH, (j) => {
  const p = j.programs.infer;
  for (const d of [p, ...j.webgpu.plans.map((pl) => p[pl.program_key])]) {
    d.inputs[0].shape = [4, 1, 8, 8];
    d.values[d.inputs[0].value].shape = [4, 1, 8, 8];
  }
}, [/value 'x' has shape \[4,1,8,8\] \(256 values\) but its layout stores 128 elements in 32 texels/,
    /export the bundle again/]);
await refused('x [2,1,8,8] in every description (webgpu only)', WEBGPU, (j) => {
  const w = j.programs.infer.webgpu;
  for (const d of [j.programs.infer, w]) d.inputs[0].shape = [2, 1, 8, 8];
  w.values[w.inputs[0].value].shape = [2, 1, 8, 8];
}, [/value 'x' \[2,1,8,8\] has 256 bytes/]);
await refused('x [2,1,8,8] and its buffer bytes (webgpu only)', WEBGPU, (j) => {
  const w = j.programs.infer.webgpu;
  j.programs.infer.inputs[0].shape = [2, 1, 8, 8];
  w.values[w.inputs[0].value].bytes = 512;  // the buffer, not the plan's own input: its kernels read one image
}, [/input 'x' is declared \[2,1,8,8\].*webgpu gpu plan stores \[1,1,8,8\] for it in a buffer of 512 bytes.*and declares it \[1,1,8,8\]/]);
// a texture layout that does not hold the value's elements
await refused('layout numel', BOTH, (j) => {
  const p = j.programs.infer;
  p.values[p.outputs[0].value].layout.numel = 10;
}, [/value 'probs' has shape \[2,10\] \(20 values\) but its layout stores 10 elements/]);
await refused('layout width x height', BOTH, (j) => {
  const p = j.programs.infer;
  p.values[p.inputs[0].value].layout.width = 16;
}, [/value 'x' has shape \[2,1,8,8\].*in 32 texels of a 16x1 texture/]);
// the checks' fixed inputs against the declared shape
await refused('checks feed of another size', BOTH, (j) => { j.checks.runs[0].feeds.x.bytes = 256; },
              [/checks.runs\[0\]: feed 'x' has 256 bytes \(64 values\) but input 'x' of program 'infer' is declared \[2,1,8,8\] \(128 values\)/]);
await refused('checks of a missing program', BOTH, (j) => { j.checks.runs[0].program = 'train'; },
              [/checks.runs\[0\] runs program "train", which the bundle does not have \(it has infer\)/]);
await refused('malformed declared shape', BOTH, (j) => { inputs(j)[0].shape = [2, -1, 8, 8]; },
              [/input 'x' has shape \[2,-1,8,8\]; expected a list of non-negative integers/]);
console.log('bundle_declared_shapes: every hand-edited shape refused, naming the input, its shape and the storage');
