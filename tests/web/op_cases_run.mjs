// Runs one op-case bundle (tests/op_bundles.h exports every case list of tests/op_cases.h as a bundle: program
// "ops" whose outputs are the ops and their gradients, one check run with the fixed inputs, the native CPU
// backend's outputs as expected, cases.json with each output's tolerance) through the real runtime, and judges what
// it computed the way the C++ tests do. Shared by Node (tests/webgpu_ops_check.mjs: WebGPU on Dawn) and the browser
// check page (tests/web/check_page.js: WebGL2 and WebGPU in headless Chromium): no Node or DOM API here.

/** |a - e| <= atol + rtol |e| elementwise; NaN meets NaN, infinities match exactly (tests/op_cases.h compare). */
export function judge(a, e, rtol, atol) {
  let worst = -1, ratio = 0;
  for (let i = 0; i < e.length; ++i) {
    let r;
    if (Number.isNaN(a[i]) || Number.isNaN(e[i])) r = Number.isNaN(a[i]) && Number.isNaN(e[i]) ? 0 : Infinity;
    else if (!Number.isFinite(a[i]) || !Number.isFinite(e[i])) r = a[i] === e[i] ? 0 : Infinity;
    else r = a[i] === e[i] ? 0 : Math.abs(a[i] - e[i]) / (atol + rtol * Math.abs(e[i]));
    if (r > ratio) { ratio = r; worst = i; }
  }
  return { ok: a.length === e.length && ratio <= 1, ratio, worst, actual: worst >= 0 ? a[worst] : null,
           expected: worst >= 0 ? e[worst] : null };
}

/**
 * Creates a runtime of the bundle at `bundleUrl` with `options` (backend, webgpuPlan, gpu, fetch...), runs its
 * first check run once and judges every output of `cases` (cases.json `outputs`, in program output order).
 * @param {{createRuntime: Function}} mod the bundle's runtime module (runtime/shadergrad.js)
 * @param {string} bundleUrl
 * @param {{name: string, rtol: number, atol: number}[]} cases
 * @param {object} options createRuntime options
 * @returns {Promise<{backend: string, plan: object|null, adapter: string[], kernels: number, outputs: object,
 *   passed: number, failed: number, differing: string[], values: Float32Array}>} values: every output's f32 values
 *   concatenated in case order (the C++ test judges them itself); throws what the runtime threw
 */
export async function runOpCases(mod, bundleUrl, cases, options) {
  const rt = await mod.createRuntime(bundleUrl, options);
  try {
    const checks = await rt.bundle.loadChecks();
    const run = checks.runs[0];
    const feeds = {};
    for (const [k, ref] of Object.entries(run.feeds)) feeds[k] = rt.bundle.data(ref);
    const got = await rt.run(run.program, feeds);
    const r = { backend: rt.backend, plan: rt.webgpuPlan, adapter: rt.attempts.map((a) => `${a.backend}: ${a.reason}`),
                renderer: rt.caps?.renderer ?? null, kernels: rt.plan(run.program).kernels.length, outputs: {} };
    const parts = cases.map((c) => Float32Array.from(got[c.name]));
    cases.forEach((c, i) => { r.outputs[c.name] = judge(parts[i], rt.bundle.data(run.outputs[c.name]), c.rtol, c.atol); });
    r.differing = cases.filter((c) => !r.outputs[c.name].ok).map((c) => c.name);
    r.failed = r.differing.length;
    r.passed = cases.length - r.failed;
    r.values = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) { r.values.set(p, at); at += p.length; }
    return r;
  } finally {
    try { rt.dispose(); } catch { /* the caller reports what run() threw */ }
  }
}

/** One line for people: `NAME (BACKEND[, PLAN plan]): passed/total outputs equal the CPU backend, K kernels`. */
export function summaryLine(name, r, how = '') {
  const where = r.plan ? `${r.backend}, ${r.plan.name} plan${how ? `, ${how}` : ''}` : r.backend;
  return `${name} (${where}): ${r.passed}/${r.passed + r.failed} outputs equal the CPU backend, ${r.kernels} kernels` +
         (r.differing.length ? `; differing: ${r.differing.join(', ')}` : '');
}
