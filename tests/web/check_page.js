// The page side of tests/web_runtime_check.mjs: window.sgCheck(bundle, mode) loads /BUNDLE/bundle.json with
// /BUNDLE/runtime/shadergrad.js (the copy `shadergrad export` wrote), replays the bundle's checks and returns a
// JSON-able report, or the error the runtime threw ({name, message, details}).
const log = (s) => { document.getElementById('log').textContent += `${s}\n`; };

function plainError(e) {
  return { name: e?.name || 'Error', message: e?.message || String(e), details: e?.details || {} };
}

async function runtimeFor(mod, name, mode, options) {
  const url = `/${name}/bundle.json`;
  return mode === 'worker' ? mod.createWorkerRuntime(url, options) : mod.createRuntime(url, options);
}

/** Replays the checks of bundle `name` on a fresh runtime ('main' thread or 'worker'; backend 'auto', 'webgpu' or
 * 'webgl2'; webgpuPlan 'auto', 'gpu' or 'cpu'). */
/** Three overlapping run()s of the first check's program (an animation frame and a button in a page): the runtime
 * executes them one at a time, so none throws and all give the same outputs as one run after them. */
async function concurrentRuns(mod, name, rt) {
  try {
    const b = rt.bundle || (await mod.loadBundle(`/${name}/bundle.json`));
    const run = (await b.loadChecks()).runs.find((r) => r.program === 'infer');
    if (!run) return { ok: true, skipped: 'no inference check' };
    const feeds = {};
    for (const [k, ref] of Object.entries(run.feeds)) feeds[k] = b.data(ref);
    const outs = await Promise.all([rt.run(run.program, feeds), rt.run(run.program, feeds), rt.run(run.program, feeds)]);
    const after = await rt.run(run.program, feeds);
    for (const o of outs)
      for (const [k, v] of Object.entries(after))
        if (o[k].length !== v.length || o[k].some((x, i) => !Object.is(x, v[i]))) return { ok: false, error: `output ${k} differs` };
    return { ok: true, runs: outs.length };
  } catch (e) {
    return { ok: false, error: `${e.name}: ${e.message}` };
  }
}

window.sgCheck = async (name, mode, backend = 'auto', webgpuPlan = 'auto') => {
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  let rt;
  try {
    rt = await runtimeFor(mod, name, mode, { backend, webgpuPlan });
    const t0 = performance.now();
    const report = await rt.runChecks();
    report.checks_ms = performance.now() - t0;
    if (mode === 'main') report.concurrent = await concurrentRuns(mod, name, rt);
    report.attempts = rt.attempts;
    report.webgpu_plan = rt.webgpuPlan;
    report.stats = rt.stats;
    report.caps = rt.caps;
    report.mode = mode;
    // the kernels of the plan the runtime ran (a WorkerRuntime has no bundle here: load the description)
    const p = (rt.bundle || (await mod.loadBundle(`/${name}/bundle.json`))).json.programs;
    report.kernels = Object.fromEntries(Object.entries(p).map(([k, v]) =>
      [k, (rt.webgpuPlan ? v[rt.webgpuPlan.program_key] : v).kernels.map((x) => x.name)]));
    log(`${name} ${mode} ${backend}: ok=${report.ok}`);
    return { ok: true, report };
  } catch (e) {
    log(`${name} ${mode}: ${e.name}: ${e.message}`);
    return { ok: false, error: plainError(e) };
  } finally {
    try { await rt?.dispose(); } catch { /* reported above */ }
  }
};

/** Runs one step, loses the context (or WebGPU device) on purpose, and returns what the next run and read throw. */
window.sgLostContext = async (name, mode, backend = 'webgl2') => {
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  const rt = await runtimeFor(mod, name, mode, { backend });
  const c = await rt.bundle?.loadChecks?.() ?? null;
  const result = { mode, supported: false };
  try {
    const b = rt.bundle || (await mod.loadBundle(`/${name}/bundle.json`));
    const checks = c || (await b.loadChecks());
    const first = checks.runs[0];
    const feeds = {};
    for (const [k, ref] of Object.entries(first.feeds)) feeds[k] = b.data(ref);
    await rt.run(first.program, feeds);
    result.supported = await rt.loseContextForTesting();
    await new Promise((r) => setTimeout(r, 50));  // let the webglcontextlost event arrive
    for (const [what, f] of [['run', () => rt.run(first.program, feeds)], ['read', () => rt.read(b.persistent[0].name)]]) {
      try { await f(); result[what] = { threw: false }; } catch (e) { result[what] = { threw: true, ...plainError(e) }; }
    }
  } finally {
    try { await rt.dispose(); } catch { /* the context is gone */ }
  }
  return result;
};

/** The backend-selection report with backend 'webgpu' forced (it must refuse with reasons). */
window.sgSelectWebGPU = async (name) => {
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  try {
    await mod.createRuntime(`/${name}/bundle.json`, { backend: 'webgpu' });
    return { threw: false };
  } catch (e) {
    return { threw: true, ...plainError(e) };
  }
};
/** The runtime's subgroup lane probe (webgpu.js subgroupLanesReason) on this adapter, asking for subgroups of
 * `lanes` consecutive invocations: {reason} (null when the lanes agree), or {skipped} without the feature. */
window.sgSubgroupLanes = async (name, lanes) => {
  const { subgroupLanesReason } = await import(`/${name}/runtime/webgpu.js`);
  const adapter = await navigator.gpu?.requestAdapter();
  if (!adapter?.features.has('subgroups')) return { skipped: 'no adapter with the subgroups feature' };
  const device = await adapter.requestDevice({ requiredFeatures: ['subgroups'] });
  try {
    return { reason: await subgroupLanesReason(device, Number(lanes)),
             min: adapter.info.subgroupMinSize, max: adapter.info.subgroupMaxSize };
  } finally {
    device.destroy();
  }
};
/** One profiled train step: the kernel names and whether each time came from a GPU timer query (the values are
 * reported, never judged: no timing is asserted). */
window.sgProfile = async (name, mode, backend = 'webgl2') => {
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  const rt = await runtimeFor(mod, name, mode, { profile: true, backend });
  try {
    const b = await mod.loadBundle(`/${name}/bundle.json`);
    const checks = await b.loadChecks();
    const run = checks.runs.find((r) => r.program === 'train');
    const feeds = {};
    for (const [k, ref] of Object.entries(run.feeds)) feeds[k] = b.data(ref);
    await rt.run('train', feeds);
    const timings = await rt.timings();
    const plan = rt.webgpuPlan ? b.program('train')[rt.webgpuPlan.program_key] : b.program('train');
    return { backend: rt.backend, kernels: plan.kernels.map((k) => k.name), timings,
             timer_query: backend === 'webgpu' ? rt.caps.timestamp_query : rt.caps.timer_query };
  } finally {
    await rt.dispose();
  }
};
/** What a runtime compiled, from its stats: per program the kernels compiled, and the programs first run. */
function compiled(stats) {
  const kernels = {};
  for (const k of stats.kernels) kernels[k.program] = (kernels[k.program] ?? 0) + 1;
  return { kernels, prepared: Object.keys(stats.prepared), first_run: stats.first_run, phases: stats.phases,
           shader_cache: stats.shader_cache };
}

/** When kernels are compiled (createRuntime's `compile`: 'lazy' by default, 'all', or program names): a fresh
 * runtime, what it compiled at creation; then the first inference check's run, its outputs judged against the
 * bundle's expected outputs (the native CPU backend's), and what was compiled by then; then prepare() of every
 * program, which rejects with the error a broken kernel of another program gives. Served files are counted by
 * the harness (which shader files were fetched). */
window.sgCompile = async (name, mode, backend = 'auto', webgpuPlan = 'auto', compile = 'lazy') => {
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  const opt = compile.includes(',') || !['lazy', 'all'].includes(compile) ? compile.split(',') : compile;
  let rt;
  try {
    rt = await runtimeFor(mod, name, mode, { backend, webgpuPlan, compile: opt });
  } catch (e) {
    return { created: false, error: plainError(e) };
  }
  const stats = async () => compiled(mode === 'worker' ? await rt.prepare([]) : rt.stats);
  const result = { created: true, backend: rt.backend, plan: rt.webgpuPlan?.name ?? null, at_creation: await stats() };
  try {
    const b = rt.bundle || (await mod.loadBundle(`/${name}/bundle.json`));
    const checks = await b.loadChecks();
    const run = checks.runs.find((r) => r.program === 'infer');
    const feeds = {};
    for (const [k, ref] of Object.entries(run.feeds)) feeds[k] = b.data(ref);
    try {
      const out = await rt.run('infer', feeds);
      result.infer = { ok: true, outputs: Object.fromEntries(Object.entries(run.outputs).map(([k, ref]) =>
        [k, mod.compare(out[k], b.data(ref), checks.tolerance?.outputs ?? { rel: 1e-4, floor: 1e-3 })])) };
    } catch (e) {
      result.infer = { ok: false, error: plainError(e) };
    }
    result.after_infer = await stats();
    result.live_after_infer = mode === 'main' ? rt.liveObjects() : null;
    try {
      await rt.prepare();
      result.prepare = { ok: true };
    } catch (e) {
      result.prepare = { ok: false, error: plainError(e) };
    }
    result.after_prepare = await stats();
  } finally {
    try { await rt.dispose(); } catch { /* reported above */ }
  }
  return result;
};
/** Runs the train program with labels that are no class indices (-1, 1.5, 10 of 10 classes, NaN): each must be
 * refused before anything is uploaded with a FeedError naming the input, the element and the value; a valid run
 * follows and succeeds (the runtime still works). */
window.sgBadLabels = async (name, mode, backend = 'webgl2') => {
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  const rt = await runtimeFor(mod, name, mode, { backend });
  try {
    const b = rt.bundle || (await mod.loadBundle(`/${name}/bundle.json`));
    const run = (await b.loadChecks()).runs.find((r) => r.program === 'train');
    const desc = b.program('train');
    const labelInputs = [...desc.inputs, ...(desc.webgpu?.inputs || [])].filter((i) => i.classes)
      .map((i) => ({ name: i.name, classes: i.classes }));
    const feeds = {};
    for (const [k, ref] of Object.entries(run.feeds)) feeds[k] = b.data(ref);
    const label = labelInputs[0]?.name;
    const results = [];
    for (const bad of [-1, 1.5, 10, NaN]) {
      const f = { ...feeds, [label]: Float32Array.from(feeds[label]) };
      f[label][3] = bad;
      try { await rt.run('train', f); results.push({ value: String(bad), threw: false }); } catch (e) {
        results.push({ value: String(bad), threw: true, ...plainError(e) });
      }
    }
    const ok = await rt.run('train', feeds);
    return { backend: rt.backend, labelInputs, results, valid_loss: Array.from(ok.loss || []) };
  } finally {
    await rt.dispose();
  }
};
/** Runs op-case bundle `name` (tests/op_bundles.h) once on `backend` ('webgl2' | 'webgpu', with webgpu plan
 * `webgpuPlan`) and judges its outputs (tests/web/op_cases_run.mjs); the values come back as base64 of the f32
 * bytes (the harness writes them for the C++ test), or the error the runtime threw. */
window.sgOpCases = async (name, backend, webgpuPlan = 'auto') => {
  try {
    const [mod, { runOpCases }] = await Promise.all([import(`/${name}/runtime/shadergrad.js`),
                                                      import('/_test/op_cases_run.mjs')]);
    const cases = (await (await fetch(`/${name}/cases.json`)).json()).outputs;
    const { values, ...r } = await runOpCases(mod, `/${name}/bundle.json`, cases, { backend, webgpuPlan });
    const bytes = new Uint8Array(values.buffer);
    let bin = '';
    for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    log(`${name} ${backend}: ${r.passed}/${r.passed + r.failed}`);
    return { ok: true, result: r, values: btoa(bin) };
  } catch (e) {
    log(`${name} ${backend}: ${e.name}: ${e.message}`);
    return { ok: false, error: plainError(e) };
  }
};
/** A WorkerRuntime has the main-thread Runtime's API (issue 38): every method and property of a Runtime of the same
 * bundle, the same bundle argument forms (a URL, a loaded Bundle, withWeights() of one with weights saved in and
 * restored from IndexedDB), write(), plan(), liveObjects(), errors of the same classes, options that cannot cross to
 * a worker refused by name, and calls after dispose() rejected (not left pending). `backend`: 'webgl2' | 'webgpu'. */
window.sgWorkerApi = async (name, backend) => {
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  const persist = await import(`/${name}/runtime/persist.js`);  // IndexedDB: saveWeights, loadWeights, withWeights
  const url = `/${name}/bundle.json`;
  const r = { backend };
  const settle = async (p) => {
    let t;
    const hung = new Promise((resolve) => { t = setTimeout(() => resolve({ pending: true }), 10000); });
    try {
      return await Promise.race([p.then((value) => ({ value }), (e) => ({ error: plainError(e) })), hung]);
    } finally {
      clearTimeout(t);
    }
  };
  const same = (a, b) => a.length === b.length && a.every((x, i) => Object.is(x, b[i]));
  const api = (o) => {
    const names = new Set(Object.keys(o).filter((k) => !k.startsWith('_')));
    for (let p = Object.getPrototypeOf(o); p && p !== Object.prototype; p = Object.getPrototypeOf(p))
      for (const k of Object.getOwnPropertyNames(p)) if (k !== 'constructor' && !k.startsWith('_')) names.add(k);
    return names;
  };
  const b = await mod.loadBundle(url);
  const checks = await b.loadChecks();
  const inferRun = checks.runs.find((x) => x.program === 'infer');
  const feeds = Object.fromEntries(Object.entries(inferRun.feeds).map(([k, ref]) => [k, b.data(ref)]));
  const params = b.persistent.filter((p) => p.kind === 'param');
  const numel = (p) => p.shape.reduce((a, x) => a * x, 1);
  const pattern = (p, k) => Float32Array.from({ length: numel(p) }, (_, i) => Math.fround(Math.sin(i * 0.37 + k) * 0.05));
  const dbName = `sg-worker-api-${backend}`;
  let rt, wr, wr2;
  try {
    rt = await mod.createRuntime(b, { backend });
    // weights written on the main thread, saved in IndexedDB and restored into a bundle for the worker
    for (const p of params) await rt.write(p.name, pattern(p, 1));
    await persist.forgetWeights(b, { dbName }).catch(() => {});
    r.saved = await persist.saveWeights(rt, { dbName });
    const found = await persist.loadWeights(b, { dbName });
    r.found = found.status;
    const restored = persist.withWeights(b, found.weights);
    const created = await settle(mod.createWorkerRuntime(restored, { backend }));
    if (created.error || created.pending) { r.create_from_bundle = created; return r; }
    wr = created.value;
    r.create_from_bundle = { ok: true, backend: wr.backend, same_bundle: wr.bundle === restored };
    r.api = { runtime: [...api(rt)].filter((k) => k !== 'device').sort(), worker: [...api(wr)].sort() };
    r.api.missing = r.api.runtime.filter((k) => !(k in wr));
    r.api.kinds = r.api.runtime.filter((k) => k in wr && (typeof rt[k] === 'function') !== (typeof wr[k] === 'function'));
    r.restored_equal = [];
    for (const p of params) r.restored_equal.push(same(await wr.read(p.name), pattern(p, 1)));
    const [a, w] = [await rt.run('infer', feeds), await wr.run('infer', feeds)];
    r.infer_restored = Object.fromEntries(Object.keys(a).map((k) => [k, mod.compare(w[k], a[k], { rel: 1e-5 }).max_rel]));
    // write(): new weights into the running worker, nothing compiled again
    for (const p of params) {
      await rt.write(p.name, pattern(p, 2));
      await wr.write(p.name, pattern(p, 2), { transfer: true });
    }
    r.written_equal = [];
    for (const p of params) r.written_equal.push(same(await wr.read(p.name), pattern(p, 2)));
    const [a2, w2] = [await rt.run('infer', feeds), await wr.run('infer', feeds)];
    r.infer_written = Object.fromEntries(Object.keys(a2).map((k) => [k, mod.compare(w2[k], a2[k], { rel: 1e-5 }).max_rel]));
    r.infer_changed = Object.keys(a).some((k) => !same(a[k], a2[k]));
    const wrong = await settle(wr.write(params[0].name, new Float32Array(3)));
    const unknown = await settle(wr.write('no.such.weight', new Float32Array(3)));
    r.write_errors = { wrong: wrong.error, unknown: unknown.error, wrong_is_feed_error: false };
    try { await wr.write(params[0].name, [1, 2, 3]); } catch (e) { r.write_errors.wrong_is_feed_error = e instanceof mod.FeedError; }
    // plan(), liveObjects(), stats and the other properties
    r.plan = { worker: wr.plan('infer').kernels.map((k) => k.name), main: rt.plan('infer').kernels.map((k) => k.name) };
    r.live = { worker: await wr.liveObjects(), main: rt.liveObjects() };
    r.props = { backend: [wr.backend, rt.backend], programs: [wr.programs, rt.programs],
                webgpuPlan: [wr.webgpuPlan?.name ?? null, rt.webgpuPlan?.name ?? null],
                stats: typeof wr.stats?.setup_ms === 'number' };
    // from a URL: the worker loads the bundle; the page gets its description (saveWeights works on it)
    wr2 = await mod.createWorkerRuntime(url, { backend });
    r.from_url = { model: wr2.bundle?.model, format: wr2.bundle?.format, persistent: wr2.bundle?.persistent.length,
                   plan: wr2.plan('infer').kernels.length };
    const saved2 = await settle(persist.saveWeights(wr2, { dbName, slot: 'worker' }));
    r.from_url.saved = saved2.error ?? saved2.value;
    const weightsData = await settle((async () => wr2.bundle.data(wr2.bundle.persistent[0].data))());
    r.from_url.data_error = weightsData.error?.message ?? null;
    // arguments and options that cannot work are refused by name, not fetched as "[object Object]"
    const bad = await settle(mod.createWorkerRuntime({ model: 'not a bundle' }));
    const fetchOpt = await settle(mod.createWorkerRuntime(url, { fetch: globalThis.fetch }));
    r.refused = { object: bad.error, fetch: fetchOpt.error };
    // after dispose(): calls reject at once, none stays pending
    await wr.dispose();
    const after = await settle(wr.run('infer', feeds));
    const afterRead = await settle(wr.read(params[0].name));
    r.after_dispose = { run: after.error ?? after, read: afterRead.error ?? afterRead };
    wr = null;
    await persist.forgetWeights(b, { dbName });
    await persist.forgetWeights(b, { dbName, slot: 'worker' });
    return r;
  } catch (e) {
    r.error = plainError(e);
    r.stack = e.stack;
    return r;
  } finally {
    rt?.dispose();
    await wr?.dispose().catch(() => {});
    await wr2?.dispose().catch(() => {});
  }
};

/** The page's checkpoint of bundle `name` (issue 37: resnet's BatchNorm running statistics): on a fresh runtime
 * (main thread, `backend`) the bundle's checks (its train steps), then persist.checkpointBytes — the parameters and
 * the buffers metadata.checkpoint_buffers names — read back with checkpointWeights into a second runtime: the
 * tensors the file holds, both runtimes' outputs of the first infer check (they must be equal), and the bytes (the
 * harness writes them to NAME/page.safetensors for the native side to load). */
window.sgCheckpoint = async (name, mode, backend = 'auto') => {
  const mod = await import(`/${name}/runtime/shadergrad.js`);
  const persist = await import(`/${name}/runtime/persist.js`);
  const b = await mod.loadBundle(`/${name}/bundle.json`);
  let rt, rt2;
  try {
    rt = await mod.createRuntime(b, { backend });
    const report = await rt.runChecks();
    const bytes = await persist.checkpointBytes(rt);
    const weights = await persist.checkpointWeights(b, bytes, 'page.safetensors');
    rt2 = await mod.createRuntime(persist.withWeights(b, weights), { backend });
    const run = (await b.loadChecks()).runs.find((r) => r.program === 'infer');
    const feeds = Object.fromEntries(Object.entries(run.feeds).map(([k, ref]) => [k, b.data(ref)]));
    const [a, c] = [await rt.run('infer', feeds), await rt2.run('infer', feeds)];
    const same = Object.keys(a).every((k) => a[k].length === c[k].length && a[k].every((x, i) => Object.is(x, c[k][i])));
    return { ok: true, checks_ok: report.ok, backend: rt.backend, tensors: [...weights.keys()], infer_same: same,
             infer: Object.fromEntries(Object.entries(a).map(([k, v]) => [k, Array.from(v)])), bytes: Array.from(bytes) };
  } catch (e) {
    return { ok: false, error: plainError(e) };
  } finally {
    await rt?.dispose();
    await rt2?.dispose();
  }
};
window.sgReady = true;
