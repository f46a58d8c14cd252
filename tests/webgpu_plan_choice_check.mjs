// The web runtime's choice of a bundle's webgpu plan (runtime/web/webgpu.js chooseWebGPUPlan) for adapters
// described by hand: a GPU, SwiftShader with and without subgroups of 4, another CPU implementation with subgroups
// of 8, adapters short of a plan's limits, forced plans and bundles that lack a plan. The choice is the bundle's
// data: the plans' kinds and preferences and the CPU-adapter rule come from a bundle.json that `shadergrad export`
// wrote (the first argument; ctest webgpu_plan_choice exports one), so the rule tested is the one C++ writes
// (sg::cpu_renderer_names). Pure logic, no device: run by ctest in Node.
// Exit status 0 = every assertion held; an AssertionError names the case otherwise.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { chooseWebGPUPlan as choose } from '../runtime/web/webgpu.js';

const bundle = JSON.parse(readFileSync(process.argv[2] ?? assert.fail('usage: webgpu_plan_choice_check.mjs BUNDLE.json'), 'utf8'));
const rule = bundle.webgpu.cpu_adapter;
assert.ok(rule?.names?.length, 'bundle.json has webgpu.cpu_adapter.names');
const exported = Object.fromEntries(bundle.webgpu.plans.map((p) => [p.name, p]));
assert.deepEqual(Object.keys(exported).sort(), ['cpu', 'cpu-subgroups', 'gpu']);
// the exported plans with hand-set requirements (each case below says what the adapter lacks)
const plan = (name, requires = {}) => ({ ...exported[name], requires: { limits: {}, features: [], ...requires } });
const chooseWebGPUPlan = (adapter, plans, want = 'auto') => choose(adapter, plans, want, rule);
const all = [plan('gpu'), plan('cpu'), plan('cpu-subgroups', { features: ['subgroups'], subgroup_size: 4 })];
const adapter = (info, features = [], fallback = false) => ({ info, features: new Set(features), isFallbackAdapter: fallback });
const swiftshader = adapter({ vendor: 'google', architecture: 'swiftshader', subgroupMinSize: 4, subgroupMaxSize: 4 },
                            ['subgroups'], true);
const noSubgroups = adapter({ vendor: 'google', architecture: 'swiftshader', subgroupMinSize: 4, subgroupMaxSize: 4 },
                            [], true);
const lanes8 = adapter({ vendor: 'mesa', architecture: 'llvmpipe', subgroupMinSize: 8, subgroupMaxSize: 8 }, ['subgroups']);
const gpu = adapter({ vendor: 'nvidia', architecture: 'hopper', subgroupMinSize: 32, subgroupMaxSize: 32 }, ['subgroups']);

// the rule's names as whole words, ignoring case, and a fallback adapter: CPU; a name inside a word: not
for (const [info, fallback, cpu] of [[{ vendor: 'Microsoft', description: 'Microsoft Basic Render Driver' }, false, true],
                                     [{ vendor: 'mesa', device: 'LLVMPIPE (LLVM 15.0.6, 256 bits)' }, false, true],
                                     [{ vendor: 'acme', architecture: 'cpu' }, false, true],
                                     [{ vendor: 'acme' }, true, true],
                                     [{ vendor: 'acme', architecture: 'cpus-of-warpspeed' }, false, false],
                                     [{ vendor: 'nvidia', architecture: 'hopper' }, false, false]])
  assert.equal(chooseWebGPUPlan(adapter(info, [], fallback), [plan('gpu'), plan('cpu')]).plan.name, cpu ? 'cpu' : 'gpu',
               JSON.stringify(info));
// a bundle exported before bundle.json carried the rule: its first usable plan, saying why
let c = choose(swiftshader, all, 'auto', undefined);
assert.equal(c.plan.name, 'gpu');
assert.match(c.reason, /no webgpu.cpu_adapter rule.*re-export/);
assert.match(choose(gpu, [], 'auto', rule).reason, /the bundle has no webgpu plan/);

// SwiftShader with subgroups of 4: cpu-subgroups, with the cpu plan to fall back to after the lane probe
c = chooseWebGPUPlan(swiftshader, all);
assert.equal(c.plan.name, 'cpu-subgroups');
assert.equal(c.fallback.name, 'cpu');
assert.match(c.reason, /CPU implementation of WebGPU.*subgroups of 4 invocations/);
// without the feature, or with subgroups of 8: the cpu plan, saying why not the other
c = chooseWebGPUPlan(noSubgroups, all);
assert.equal(c.plan.name, 'cpu');
assert.match(c.reason, /not cpu-subgroups: the adapter has no 'subgroups' feature/);
c = chooseWebGPUPlan(lanes8, all);
assert.equal(c.plan.name, 'cpu');
assert.match(c.reason, /subgroups have 8 to 8 invocations, the plan's kernels need exactly 4/);
// a GPU: the gpu plan, whatever its subgroups
c = chooseWebGPUPlan(gpu, all);
assert.equal(c.plan.name, 'gpu');
assert.equal(c.fallback, undefined);
// forced plans: run when the adapter can, else only a reason
assert.equal(chooseWebGPUPlan(gpu, all, 'cpu').plan.name, 'cpu');
assert.equal(chooseWebGPUPlan(swiftshader, all, 'cpu-subgroups').plan.name, 'cpu-subgroups');
c = chooseWebGPUPlan(noSubgroups, all, 'cpu-subgroups');
assert.equal(c.plan, undefined);
assert.match(c.reason, /forced.*cannot run here: the adapter has no 'subgroups' feature/);
assert.match(chooseWebGPUPlan(gpu, all, 'tpu').reason, /unknown webgpu plan 'tpu' \(choose auto, gpu, cpu, cpu-subgroups\)/);
assert.match(chooseWebGPUPlan(gpu, [plan('gpu')], 'cpu').reason, /the bundle has no webgpu cpu plan/);
// a bundle without the adapter's kind: the first plan the adapter can run, saying so
const cpuOnly = [plan('cpu-subgroups', { features: ['subgroups'], subgroup_size: 4 }), plan('cpu')];
c = chooseWebGPUPlan(gpu, cpuOnly);
assert.equal(c.plan.name, 'cpu');  // the GPU's subgroups are 32
assert.match(c.reason, /the only usable one of the bundle.*has no gpu plan/);
c = chooseWebGPUPlan(noSubgroups, [cpuOnly[0]]);
assert.equal(c.plan, undefined);
assert.match(c.reason, /the bundle's only plan \(cpu-subgroups\) cannot run here: the adapter has no 'subgroups' feature/);
c = chooseWebGPUPlan(swiftshader, [plan('gpu')]);
assert.equal(c.plan.name, 'gpu');
assert.match(c.reason, /the only one of the bundle.*has no cpu plan/);
// limits: the cpu plans ask for 10 storage buffers per kernel (SwiftShader's adapter has 10); a CPU adapter with 8
// gets the gpu plan, saying which plans it passed over and why; one with 10 gets cpu-subgroups
const ten = { limits: { maxStorageBuffersPerShaderStage: 10 } };
const limited = [plan('gpu', { limits: { maxStorageBuffersPerShaderStage: 8 } }), plan('cpu', ten),
                 plan('cpu-subgroups', { ...ten, features: ['subgroups'], subgroup_size: 4 })];
const withLimits = (a, buffers) => ({ ...a, limits: { maxStorageBuffersPerShaderStage: buffers } });
c = chooseWebGPUPlan(withLimits(swiftshader, 8), limited);
assert.equal(c.plan.name, 'gpu');
assert.match(c.reason, /not cpu-subgroups: it needs maxStorageBuffersPerShaderStage 10 \(storage buffers per kernel.*the adapter has 8; not cpu: it needs maxStorageBuffersPerShaderStage 10/);
c = chooseWebGPUPlan(withLimits(swiftshader, 10), limited);
assert.equal(c.plan.name, 'cpu-subgroups');
assert.equal(c.fallback.name, 'cpu');
c = chooseWebGPUPlan(withLimits(noSubgroups, 10), limited);
assert.equal(c.plan.name, 'cpu');
// forced onto an adapter without the limits: a reason only; no plan fits at all: every plan's reason
c = chooseWebGPUPlan(withLimits(swiftshader, 8), limited, 'cpu');
assert.equal(c.plan, undefined);
assert.match(c.reason, /forced.*cannot run here: it needs maxStorageBuffersPerShaderStage 10/);
c = chooseWebGPUPlan(withLimits(swiftshader, 4), limited);
assert.equal(c.plan, undefined);
assert.match(c.reason, /none of the bundle's plans \(gpu, cpu, cpu-subgroups\) can run here: gpu: it needs maxStorageBuffersPerShaderStage 8 \(storage buffers per kernel.*?\): the adapter has 4; cpu: .*the adapter has 4/);
console.log('webgpu plan choice: every case holds');
