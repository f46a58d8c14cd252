// Compiles every WGSL kernel of shadergrad dump directories on Dawn (npm `webgpu`, Node) and, for directories with a
// run.json, runs the plan's kernels and compares the program outputs with the CPU reference written there.
//
//   node tests/wgsl_compile_check.mjs [--compat] DIR [DIR ...]
//
// Each DIR holds KERNEL.wgsl files (`shadergrad dump --target wgsl`, or tests/test_wgsl.cpp). A kernel passes when
// its shader module has no error message in getCompilationInfo() and a compute pipeline ('auto' layout, entry
// point main) is created without a validation error on a device with exactly the WebGPU default limits (core:
// 8 storage buffers, 256 invocations, 16 KiB workgroup storage; --compat: compatibility mode's 128 invocations),
// so a kernel that needs more than the target's limits fails too. Errors print as `DIR/KERNEL.wgsl:LINE:COL: error:
// MESSAGE` with the source line. run.json (optional): {"kernels": [{"file", "workgroups": [x,y,z], "bindings":
// [value id...], "inputs": n}], "values": {"<id>": {"numel", "data"?}}, "outputs": [{"name", "id", "expected",
// "rtol", "atol"}]}: every value gets its own storage buffer (data uploaded, else zeros); the kernels run in order;
// each output must equal `expected` within atol + rtol*|expected| (NaN meets NaN, infinities exactly).
// Last line: `wgsl_compile_check: K kernels, E errors, R outputs run, M mismatches`; exit status 1 when E + M > 0,
// 2 when no WebGPU adapter exists.
//
// This machine (../shared/TOOLCHAIN.md): Dawn's only working backend is OpenGL ES on Mesa llvmpipe (EGL
// surfaceless), reached through a compatibility-mode adapter.
import fs from 'node:fs';
import path from 'node:path';

process.env.EGL_PLATFORM ??= 'surfaceless';
const { create, globals } = await import('webgpu');
Object.assign(globalThis, globals);

const args = process.argv.slice(2);
const compat = args.includes('--compat');
const dirs = args.filter((a) => !a.startsWith('--'));
if (!dirs.length) {
  console.error('usage: node wgsl_compile_check.mjs [--compat] DIR [DIR ...]');
  process.exit(2);
}

const gpu = create(['backend=opengles']);
const adapter = (await gpu.requestAdapter({ featureLevel: 'compatibility' })) ?? (await gpu.requestAdapter());
if (!adapter) {
  console.error('wgsl_compile_check: no WebGPU adapter (Dawn on OpenGL ES needs EGL; see ../shared/TOOLCHAIN.md)');
  process.exit(2);
}
// the WebGPU default limits of the target (sg::preset_caps("webgpu") / ("webgpu-compat"))
const wanted = compat
  ? { maxStorageBuffersPerShaderStage: 8, maxComputeWorkgroupStorageSize: 16384 }
  : { maxStorageBuffersPerShaderStage: 8, maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupSizeX: 256,
      maxComputeWorkgroupSizeY: 256, maxComputeWorkgroupStorageSize: 16384 };
const requiredLimits = {};
for (const [k, v] of Object.entries(wanted)) if (adapter.limits[k] >= v) requiredLimits[k] = v;
const device = await adapter.requestDevice({ requiredLimits });

let kernels = 0, errors = 0, outputsRun = 0, mismatches = 0;

function report(file, source, line, col, message) {
  const text = source.split('\n')[line - 1] ?? '';
  console.log(`${file}:${line}:${col}: error: ${message}\n    ${line} | ${text}`);
}

/** A float of run.json: null is NaN, "inf" / "-inf" the infinities (JSON has neither). */
const fromJson = (x) => (x === null ? NaN : x === 'inf' ? Infinity : x === '-inf' ? -Infinity : x);

/** Compiles one kernel; returns its pipeline ('auto' layout) or null after reporting why. */
async function compile(file, source) {
  ++kernels;
  device.pushErrorScope('validation');  // (the same errors as getCompilationInfo's)
  const module = device.createShaderModule({ code: source, label: file });
  await device.popErrorScope();
  const info = await module.getCompilationInfo();
  const errs = info.messages.filter((m) => m.type === 'error');
  for (const m of errs) report(file, source, m.lineNum, m.linePos, m.message);
  if (errs.length) {
    errors += errs.length;
    return null;
  }
  device.pushErrorScope('validation');
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' }, label: file });
  const err = await device.popErrorScope();
  if (err) {
    ++errors;
    console.log(`${file}:1:1: error: compute pipeline: ${err.message}`);
    return null;
  }
  return { module, pipeline };
}

function close(got, want, rtol, atol) {
  if (Number.isNaN(want) || Number.isNaN(got)) return Number.isNaN(want) && Number.isNaN(got);
  if (!Number.isFinite(want) || !Number.isFinite(got)) return got === want;
  return Math.abs(got - want) <= atol + rtol * Math.abs(want);
}

/** Runs run.json's kernels in order over one buffer per value; compares the outputs. */
async function run(dir, manifest, compiled) {
  const buffers = new Map();
  for (const [id, v] of Object.entries(manifest.values)) {
    const size = Math.max(16, Math.ceil(v.numel / 4) * 16);
    const b = device.createBuffer({ size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    if (v.data) device.queue.writeBuffer(b, 0, new Float32Array(v.data.map(fromJson)));
    buffers.set(Number(id), b);
  }
  const enc = device.createCommandEncoder();
  for (const k of manifest.kernels) {
    const c = compiled.get(k.file);
    if (!c) return;  // reported already
    // explicit layout: every binding of the kernel, inputs read-only (an 'auto' layout drops unread bindings)
    const layout = device.createBindGroupLayout({
      entries: k.bindings.map((_, i) => ({ binding: i, visibility: GPUShaderStage.COMPUTE,
                                            buffer: { type: i < k.inputs ? 'read-only-storage' : 'storage' } })),
    });
    const pipeline = device.createComputePipeline({
      layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }), compute: { module: c.module, entryPoint: 'main' },
    });
    const group = device.createBindGroup({
      layout, entries: k.bindings.map((id, i) => ({ binding: i, resource: { buffer: buffers.get(id) } })),
    });
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(...k.workgroups);
    pass.end();
  }
  const reads = manifest.outputs.map((o) => {
    const r = device.createBuffer({ size: buffers.get(o.id).size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    enc.copyBufferToBuffer(buffers.get(o.id), 0, r, 0, r.size);
    return r;
  });
  device.queue.submit([enc.finish()]);
  for (let j = 0; j < manifest.outputs.length; ++j) {
    const o = manifest.outputs[j];
    await reads[j].mapAsync(GPUMapMode.READ);
    const got = new Float32Array(reads[j].getMappedRange().slice(0));
    reads[j].unmap();
    ++outputsRun;
    let bad = -1;
    for (let i = 0; i < o.expected.length && bad < 0; ++i) {
      const want = fromJson(o.expected[i]);
      if (!close(got[i], want, o.rtol, o.atol)) bad = i;
    }
    if (bad >= 0) {
      ++mismatches;
      console.log(`${dir}: output '${o.name}' element ${bad}: webgpu ${got[bad]}, cpu ${o.expected[bad]}`);
    }
  }
}

for (const dir of dirs) {
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.wgsl')).sort();
  const compiled = new Map();
  for (const f of files) {
    const file = path.join(dir, f);
    const c = await compile(file, fs.readFileSync(file, 'utf8'));
    if (c) compiled.set(f, c);
  }
  const manifest = path.join(dir, 'run.json');
  if (fs.existsSync(manifest)) await run(dir, JSON.parse(fs.readFileSync(manifest, 'utf8')), compiled);
}
console.log(`wgsl_compile_check: ${kernels} kernels, ${errors} errors, ${outputsRun} outputs run, ${mismatches} mismatches`);
device.destroy();
process.exit(errors + mismatches > 0 ? 1 : 0);
