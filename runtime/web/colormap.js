// shadergrad web runtime — the colormaps of the native tensor images (sg::image::map_value, docs/COLORMAPS.md)
// for pages that draw activations and gradients: diverging blue-white-red symmetric around 0 (ColorBrewer RdBu
// with a pure white middle), viridis (17 control points of matplotlib's table), gray; NaN magenta, +Inf green,
// -Inf cyan. The same value gives the same 8-bit colour as the native debug report (tests/test_web_app.cpp).

const DIVERGING = [[5, 113, 176], [146, 197, 222], [255, 255, 255], [244, 165, 130], [202, 0, 32]];
const VIRIDIS = [[68, 1, 84], [72, 24, 106], [71, 45, 123], [66, 64, 134], [59, 82, 139], [51, 99, 141],
                 [44, 114, 142], [38, 129, 142], [33, 144, 140], [31, 159, 136], [40, 174, 128], [62, 188, 116],
                 [93, 201, 99], [130, 211, 76], [171, 220, 50], [213, 226, 26], [253, 231, 37]];
const NAN = [255, 0, 255], POS_INF = [0, 255, 0], NEG_INF = [0, 255, 255];

// The native code computes in f32 (std::lround of float expressions): Math.fround after every operation gives
// the same bits, so the same colour even where a channel lands on .5.
const f = Math.fround;
const lround = (x) => Math.floor(x + 0.5);  // std::lround for x >= 0 (halves away from zero)
const lerp8 = (a, b, t) => lround(f(a + f(f(b - a) * t)));
const lerp = (p, q, t) => [lerp8(p[0], q[0], t), lerp8(p[1], q[1], t), lerp8(p[2], q[2], t)];
const DIVERGING_T = [-1, -0.5, 0, 0.5, 1];

function marker(v) {
  if (Number.isNaN(v)) return NAN;
  if (v === Infinity) return POS_INF;
  if (v === -Infinity) return NEG_INF;
  return null;
}

/** Diverging colour of v for the range [-scale, scale]; exactly 0 (and scale 0) is white. */
export function divergingColor(v, scale) {
  const m = marker(v);
  if (m) return m;
  if (v === 0 || !(scale > 0)) return [255, 255, 255];
  const t = Math.max(-1, Math.min(1, f(f(v) / f(scale))));
  for (let k = 0; k + 1 < DIVERGING.length; ++k)
    if (t <= DIVERGING_T[k + 1]) return lerp(DIVERGING[k], DIVERGING[k + 1], f(f(t - DIVERGING_T[k]) / 0.5));
  return DIVERGING[DIVERGING.length - 1];
}

/** Sequential colour at t in [0, 1] ('viridis' or 'gray'). */
export function sequentialColor(t, cmap = 'viridis') {
  const c = Number.isNaN(t) ? 0 : Math.max(0, Math.min(1, f(t)));
  if (cmap === 'gray') {
    const g = lround(f(c * 255));
    return [g, g, g];
  }
  const x = f(c * 16);
  const k = Math.min(Math.floor(x), 15);
  return lerp(VIRIDIS[k], VIRIDIS[k + 1], f(x - k));
}

/** sg::image::map_value: the colour of v under `cmap` ('diverging' | 'viridis' | 'gray') for the range [lo, hi]. */
export function mapValue(v, cmap, lo, hi) {
  if (cmap === 'diverging') return divergingColor(v, Math.max(Math.abs(f(lo)), Math.abs(f(hi))));
  const m = marker(v);
  if (m) return m;
  return sequentialColor(f(hi) > f(lo) ? f(f(f(v) - f(lo)) / f(f(hi) - f(lo))) : 0, cmap);
}

/** The range and the 'auto' colormap of a tensor (finite values only): diverging when any value is < 0. */
export function autoRange(values) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) if (Number.isFinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; }
  if (lo > hi) return { lo: NaN, hi: NaN, cmap: 'viridis' };
  return { lo, hi, cmap: lo < 0 ? 'diverging' : 'viridis' };
}

/**
 * RGBA pixels of a rows x cols grid of values (row-major), each value one pixel, with the auto colormap (or
 * options.cmap / lo / hi). Returns {pixels: Uint8ClampedArray, lo, hi, cmap} for an ImageData of cols x rows.
 */
export function renderGrid(values, rows, cols, options = {}) {
  const r = autoRange(values);
  const cmap = options.cmap ?? r.cmap;
  const lo = options.lo ?? r.lo, hi = options.hi ?? r.hi;
  const pixels = new Uint8ClampedArray(rows * cols * 4);
  for (let i = 0; i < rows * cols; ++i) {
    const c = mapValue(values[i], cmap, lo, hi);
    pixels.set([c[0], c[1], c[2], 255], 4 * i);
  }
  return { pixels, lo, hi, cmap };
}
