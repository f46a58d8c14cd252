// shadergrad web runtime — replaying a bundle's checks (bundle.json `checks`, expected.safetensors): the fixed
// inputs and the outputs the native CPU reference backend computed for them, run by run, then every persistent
// value after the sequence. Run on a fresh runtime: the sequence starts from the bundle's initial weights.
//
// Two metrics (bundle.json checks.tolerance, docs/BUNDLE.md):
//   elementwise (program outputs: probabilities, losses): error_i = |a_i - e_i| / max(|e_i|, floor * max_j |e_j|)
//     <= rel for every element — relative, with elements near zero judged against the tensor's scale;
//   norm (persistent values after several Adam steps): ||a - e||_2 / ||e||_2 <= rel. Adam divides each gradient
//     by its own running RMS, so a weight whose gradient is a near-cancelling sum (f32 on the GPU, f64 in the
//     reference) can differ by a visible fraction of the learning rate while the tensor as a whole agrees.
// NaN must meet NaN and an infinity the same infinity under both metrics. A persistent value may have its own
// tolerance (checks.tolerance.persistent_by_name.NAME), e.g. metric abs: max |a_i - e_i| <= abs (a value whose
// gradient is zero in exact arithmetic, which Adam moves by rounding noise: the learning rate bounds it).

/**
 * @param {ArrayLike<number>} actual
 * @param {ArrayLike<number>} expected
 * @param {{metric?: 'elementwise'|'norm'|'abs', rel?: number, floor?: number, abs?: number}} tol
 * @returns {{n: number, max_abs: number, max_rel: number, norm_rel: number, scale: number, worst: number,
 *            worst_actual: number, worst_expected: number, metric: string, ok: boolean}}
 *   max_rel: the largest elementwise error_i; norm_rel: ||a - e|| / ||e||; scale: max |e|; worst: index of max_rel
 */
export function compare(actual, expected, tol) {
  const metric = tol.metric || 'elementwise';
  if (actual.length !== expected.length)
    return { n: actual.length, max_abs: Infinity, max_rel: Infinity, norm_rel: Infinity, scale: NaN, worst: -1,
             worst_actual: NaN, worst_expected: NaN, metric, ok: false };
  let scale = 0;
  for (let i = 0; i < expected.length; ++i) if (Number.isFinite(expected[i])) scale = Math.max(scale, Math.abs(expected[i]));
  const floor = Math.max(scale * (tol.floor ?? 1e-3), 1e-30);
  let maxAbs = 0, maxRel = 0, worst = -1, d2 = 0, e2 = 0, special = false;
  for (let i = 0; i < expected.length; ++i) {
    const a = actual[i], e = expected[i];
    let err;
    if (Number.isNaN(e) || Number.isNaN(a)) err = Number.isNaN(e) && Number.isNaN(a) ? 0 : Infinity;
    else if (!Number.isFinite(e) || !Number.isFinite(a)) err = a === e ? 0 : Infinity;
    else {
      const abs = Math.abs(a - e);
      maxAbs = Math.max(maxAbs, abs);
      d2 += abs * abs;
      e2 += e * e;
      err = abs / Math.max(Math.abs(e), floor);
    }
    if (err === Infinity) special = true;
    if (worst < 0 || err > maxRel) { worst = i; maxRel = err; }
  }
  const normRel = special ? Infinity : e2 > 0 ? Math.sqrt(d2 / e2) : Math.sqrt(d2);
  return { n: expected.length, max_abs: maxAbs, max_rel: maxRel, norm_rel: normRel, scale, worst,
           worst_actual: worst >= 0 ? actual[worst] : NaN, worst_expected: worst >= 0 ? expected[worst] : NaN, metric,
           ok: metric === 'abs' ? !special && maxAbs <= tol.abs : (metric === 'norm' ? normRel : maxRel) <= tol.rel };
}

const small = (a) => (a.length <= 16 ? Array.from(a) : undefined);

/**
 * Replays the checks on `runtime` and compares every output and, at the end, every persistent value.
 * @param {{bundle: import('./bundle.js').Bundle, backend: string, run: Function, read: Function}} runtime a fresh
 *   Runtime of the bundle
 * @param {{outputs?: object, persistent?: object}} [options] tolerances (default: bundle.json checks.tolerance)
 * @returns {Promise<object>} {ok, tolerance, computed_by, backend, runs: [{program, outputs: {name: comparison
 *   (+ actual, expected for outputs of at most 16 values)}}], persistent: {name: comparison}}
 */
export async function runChecks(runtime, options = {}) {
  const bundle = runtime.bundle;
  const c = await bundle.loadChecks();
  const tolerance = {
    outputs: options.outputs ?? c.tolerance?.outputs ?? { metric: 'elementwise', rel: 1e-4, floor: 1e-3 },
    persistent: options.persistent ?? c.tolerance?.persistent ?? { metric: 'norm', rel: 1e-4 },
  };
  const report = { ok: true, tolerance, computed_by: c.computed_by, backend: runtime.backend, runs: [],
                   persistent: {} };
  for (const r of c.runs) {
    const feeds = {};
    for (const [name, ref] of Object.entries(r.feeds)) feeds[name] = bundle.data(ref);
    const out = await runtime.run(r.program, feeds);
    const outputs = {};
    for (const [name, ref] of Object.entries(r.outputs)) {
      const want = bundle.data(ref);
      outputs[name] = { ...compare(out[name], want, tolerance.outputs), actual: small(out[name]), expected: small(want) };
      report.ok = report.ok && outputs[name].ok;
    }
    report.runs.push({ program: r.program, outputs });
  }
  for (const [name, ref] of Object.entries(c.persistent_after)) {
    const tol = c.tolerance?.persistent_by_name?.[name] ?? tolerance.persistent;
    report.persistent[name] = compare(await runtime.read(name), bundle.data(ref), tol);
    report.ok = report.ok && report.persistent[name].ok;
  }
  return report;
}
