// The bundle checks (runtime/web/checks.js: compare, runChecks) judge exact zeros as equal: a gradient that is
// exactly zero in the CPU reference's expected values and in ours is a pass (error 0, not the 0/0 of a relative
// error), under both metrics, whatever the tolerance's floor, in a tensor of zeros or among non-zero elements; and a
// report stays plain numbers through JSON (no NaN turned into null). Zeros are still judged: a non-zero value where
// the reference has an all-zero tensor fails. Pure logic, no device: run by ctest (web_checks_exact_zeros) in Node.
import assert from 'node:assert/strict';

import { compare, runChecks } from '../runtime/web/checks.js';

const F = (xs) => Float32Array.from(xs);
const tolerances = [
  ['elementwise, floor 1e-3', { metric: 'elementwise', rel: 1e-4, floor: 1e-3 }],
  ['elementwise, default floor', { rel: 1e-4 }],
  ['elementwise, floor 0', { metric: 'elementwise', rel: 1e-4, floor: 0 }],
  ['elementwise, rel 0', { metric: 'elementwise', rel: 0, floor: 0 }],
  ['norm', { metric: 'norm', rel: 1e-4 }],
  ['norm, rel 0', { metric: 'norm', rel: 0 }],
];
const zeroCases = [
  ['a scalar gradient of 0', [0], [0]],
  ['an all-zero gradient', new Array(37).fill(0), new Array(37).fill(0)],
  ['-0 against 0', [-0, 0, -0], [0, -0, 0]],
  ['dead ReLU units among others', [0, 0.5, 0, -0.25, 0], [0, 0.5, 0, -0.25, 0]],
  ['an empty tensor', [], []],
];
for (const [what, actual, expected] of zeroCases)
  for (const [tname, tol] of tolerances)
    for (const [a, e] of [[actual, expected], [F(actual), F(expected)]]) {
      const c = compare(a, e, tol);
      const at = `${what} (${tname}): ${JSON.stringify(c)}`;
      assert.equal(c.ok, true, at);
      assert.equal(c.max_rel, 0, at);
      assert.equal(c.norm_rel, 0, at);
      assert.equal(c.max_abs, 0, at);
      assert.ok(!Number.isNaN(c.worst_actual) || !a.length, at);
    }
// still judged: a value where the reference's tensor is all zeros, and a zero where it is not
assert.equal(compare([0, 1e-3], [0, 0], { rel: 1e-4 }).ok, false, 'non-zero against an all-zero reference');
assert.equal(compare([0, 1e-3], [0, 0], { metric: 'norm', rel: 1e-4 }).ok, false, 'norm: non-zero against zeros');
assert.equal(compare([0, 1], [0.5, 1], { rel: 1e-4 }).ok, false, 'a zero against a non-zero reference');
// a zero reference element among others is judged against the tensor's scale (floor), not against itself
assert.equal(compare([1e-8, 1], [0, 1], { rel: 1e-4, floor: 1e-3 }).ok, true, 'near zero within the floor');
assert.equal(compare([1e-6, 1], [0, 1], { rel: 1e-4, floor: 1e-3 }).ok, false, 'near zero beyond the floor');

// runChecks over a bundle whose checks expect exact zeros: a debug program's gradient of a dead layer (all zeros),
// a partly zero gradient, a zero loss, and persistent values that stayed zero; the runtime returns the same
const expected = {
  'run0/x': F([1, 2, 3, 4]),
  'run0/gradp/dead.weight': F(new Array(12).fill(0)),
  'run0/gradp/w': F([0, 0.25, 0, -0.5]),
  'run0/loss': F([0]),
  'final/dead.weight': F(new Array(12).fill(0)),
  'final/w.exp_avg': F([0, 0, 0, 0]),
};
const ref = (tensor) => ({ file: 'expected.safetensors', tensor, offset: 0, bytes: 4 * expected[tensor].length });
const checks = {
  runs: [{ program: 'train_debug', feeds: { x: ref('run0/x') },
           outputs: { 'gradp/dead.weight': ref('run0/gradp/dead.weight'), 'gradp/w': ref('run0/gradp/w'),
                      loss: ref('run0/loss') } }],
  persistent_after: { 'dead.weight': ref('final/dead.weight'), 'w.exp_avg': ref('final/w.exp_avg') },
  computed_by: 'cpu: CPU reference (f32 storage, f64 accumulation)',
  tolerance: { outputs: { metric: 'elementwise', rel: 1e-4, floor: 1e-3 }, persistent: { metric: 'norm', rel: 1e-4 } },
};
const bundle = { loadChecks: async () => checks, data: (r) => expected[r.tensor].slice() };
const runtime = {
  bundle, backend: 'webgl2',
  run: async (program, feeds) => {
    assert.equal(program, 'train_debug');
    assert.deepEqual(Array.from(feeds.x), [1, 2, 3, 4]);
    return { 'gradp/dead.weight': F(new Array(12).fill(-0)), 'gradp/w': F([0, 0.25, -0, -0.5]), loss: F([0]) };
  },
  read: async (name) => (name === 'dead.weight' ? F(new Array(12).fill(0)) : F([0, -0, 0, 0])),
};
const report = await runChecks(runtime);
const shown = JSON.stringify(report);
assert.equal(report.ok, true, shown);
for (const [name, c] of Object.entries(report.runs[0].outputs)) {
  assert.equal(c.ok, true, `output ${name}: ${shown}`);
  assert.equal(c.max_rel, 0, `output ${name}`);
}
for (const [name, c] of Object.entries(report.persistent)) {
  assert.equal(c.ok, true, `persistent ${name}: ${shown}`);
  assert.equal(c.norm_rel, 0, `persistent ${name}`);
}
assert.ok(!shown.includes('null'), `the report through JSON (as the browser harness reads it) has no NaN: ${shown}`);
// the same report when our gradient is not zero where the reference's is: a failure naming the element
runtime.run = async () => ({ 'gradp/dead.weight': F([...new Array(11).fill(0), 1e-3]), 'gradp/w': F([0, 0.25, 0, -0.5]),
                             loss: F([0]) });
const bad = await runChecks(runtime);
assert.equal(bad.ok, false);
assert.equal(bad.runs[0].outputs['gradp/dead.weight'].ok, false);
assert.equal(bad.runs[0].outputs['gradp/dead.weight'].worst, 11);
console.log('web_checks_exact_zeros: exact zeros on both sides pass under every metric and floor; zeros are still judged');
