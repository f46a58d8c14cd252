// Draw-a-digit page — the gradient-flow view and the small line charts: each layer's activations and gradients
// (outputs act/I and grad/I of the bundle's train_debug program) as colour images with the native debug report's
// colormaps (runtime colormap.js), and per-parameter gradient norms (gradp/NAME) over the steps.
import { renderGrid } from './bundle/runtime/colormap.js';

const COLORS = ['#4575b4', '#d73027', '#1a9850', '#984ea3', '#ff7f00', '#a65628', '#f781bf', '#666666'];

/** Round tick values (1, 2 or 5 times a power of ten apart) inside [lo, hi]: the widest spacing giving at least 2
 * and at most 2n of them. */
function ticks(lo, hi, n = 4) {
  const mag = 10 ** Math.floor(Math.log10((hi - lo) / n));
  let best = [];
  for (const m of [10, 5, 2, 1, 0.5, 0.2, 0.1]) {
    const step = m * mag, out = [];
    for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step; v += step) out.push(+v.toPrecision(6));
    if (out.length > 2 * n) break;
    best = out;
    if (out.length >= 2) break;
  }
  return best;
}

/**
 * A line chart of one or more series (arrays of numbers, one value per step) on a canvas, with axes: the x axis in
 * steps (1..n), the y axis named `label` with tick values (`log`: log10 scale, ticks at powers of ten). The axes are
 * also recorded on the canvas as data-axes = {x: 'step', y: label, xTicks, yTicks} (tests/web_demo_layout_check.mjs).
 */
export function drawChart(canvas, series, { log = false, label = '' } = {}) {
  const g = canvas.getContext('2d');
  const { width: w, height: h } = canvas;
  const L = 48, R = 8, T = 16, B = 26;  // plot margins: y tick labels left, x tick labels and title below
  g.fillStyle = '#fff';
  g.fillRect(0, 0, w, h);
  const tf = (v) => (log ? Math.log10(Math.max(v, 1e-12)) : v);
  const all = series.flatMap((s) => s.values.filter(Number.isFinite).map(tf));
  g.fillStyle = '#000';
  g.font = '11px sans-serif';
  g.fillText(label + (log ? ' (log scale)' : ''), L, 11);
  if (!all.length) { canvas.dataset.axes = JSON.stringify({ x: 'step', y: label, xTicks: [], yTicks: [] }); return; }
  let lo = Math.min(...all), hi = Math.max(...all);
  if (hi - lo < 1e-12) { hi += log ? 0.5 : Math.max(1e-3, Math.abs(hi) * 0.1); lo -= log ? 0.5 : Math.max(1e-3, Math.abs(lo) * 0.1); }
  const n = Math.max(...series.map((s) => s.values.length), 2);
  const X = (i) => L + (i / (n - 1)) * (w - L - R), Y = (v) => h - B - ((v - lo) / (hi - lo)) * (h - B - T);
  const yTicks = ticks(lo, hi, 4).filter((v) => v >= lo && v <= hi);  // log: in log10 units, labelled as 10^v
  const xTicks = ticks(1, n, Math.min(5, n - 1)).filter((v) => Number.isInteger(v) && v >= 1 && v <= n);
  g.strokeStyle = '#bbb';
  g.textAlign = 'right';
  for (const v of yTicks) {
    g.beginPath(); g.moveTo(L - 3, Y(v)); g.lineTo(w - R, Y(v)); g.stroke();
    g.fillText(log ? (10 ** v).toExponential(Number.isInteger(v) ? 0 : 1) : String(v), L - 5, Y(v) + 4);
  }
  g.textAlign = 'center';
  for (const v of xTicks) {
    g.beginPath(); g.moveTo(X(v - 1), h - B); g.lineTo(X(v - 1), h - B + 3); g.stroke();
    g.fillText(String(v), X(v - 1), h - B + 13);
  }
  g.fillText('step', L + (w - L - R) / 2, h - 2);
  g.textAlign = 'left';
  g.strokeStyle = '#333';
  g.beginPath(); g.moveTo(L, T); g.lineTo(L, h - B); g.lineTo(w - R, h - B); g.stroke();
  series.forEach((s, k) => {
    g.strokeStyle = s.color || COLORS[k % COLORS.length];
    g.beginPath();
    s.values.forEach((v, i) => {
      if (i) g.lineTo(X(i), Y(tf(v))); else g.moveTo(X(i), Y(tf(v)));
    });
    g.stroke();
    if (s.values.length === 1) g.strokeRect(X(0) - 2, Y(tf(s.values[0])) - 2, 4, 4);  // one step: a point
  });
  canvas.dataset.axes = JSON.stringify({ x: 'step', y: label, xTicks, yTicks: log ? yTicks.map((v) => 10 ** v) : yTicks });
}

/** Draws a [rows, cols] tensor into a new canvas (each value one pixel), auto colormap; shown `scale` times larger
 * with nearest-neighbour sampling (CSS image-rendering: pixelated). */
function tensorCanvas(values, rows, cols, scale) {
  const c = document.createElement('canvas');
  c.className = 'tensor';
  c.width = cols;
  c.height = rows;
  const { pixels, lo, hi, cmap } = renderGrid(values, rows, cols);
  c.getContext('2d').putImageData(new ImageData(pixels, cols, rows), 0, 0);
  c.style.width = `${cols * scale}px`;
  c.style.height = `${rows * scale}px`;
  return { canvas: c, lo, hi, cmap };
}

/** The colour bar of an image (160 px): its colormap from end to end, with the end values and the middle one (0 for
 * the diverging map) under it. */
function colorBar(lo, hi, cmap) {
  const wrap = document.createElement('div');
  const c = document.createElement('canvas');
  c.className = 'colorbar';
  c.width = 160;
  c.height = 1;
  const a = cmap === 'diverging' ? -Math.max(Math.abs(lo), Math.abs(hi)) : lo, b = cmap === 'diverging' ? -a : hi;
  const vals = Float32Array.from({ length: 160 }, (_, i) => a + (b - a) * i / 159);
  c.getContext('2d').putImageData(new ImageData(renderGrid(vals, 1, 160, { cmap, lo, hi }).pixels, 160, 1), 0, 0);
  const labels = document.createElement('div');
  labels.className = 'colorbar-labels';
  const fmt = (v) => (Number.isFinite(v) ? +v.toPrecision(3) : String(v));
  labels.innerHTML = `<span>${fmt(a)}</span><span>${fmt(cmap === 'diverging' ? 0 : (a + b) / 2)}</span><span>${fmt(b)}</span>`;
  wrap.append(c, labels);
  return wrap;
}

/** The gradient-flow view: one figure per layer output and its gradient, and the norm chart. */
export class FlowView {
  constructor(container, chart, legend, layers, paramNames) {
    this.container = container;
    this.chart = chart;
    this.legend = legend;
    this.layers = layers;
    this.paramNames = paramNames;
    this.norms = new Map(paramNames.map((n) => [n, []]));
    this.steps = 0;
  }

  /** Shows the outputs of one train_debug run (a Record of Float32Array) for a bundle program description: per
   * layer output and gradient an image scaled up by a whole factor (click: twice as large, up to 8 times the base;
   * then back), its colour bar, and the value under the mouse. */
  show(outputs, program) {
    this.container.textContent = '';
    this.outputs = outputs;
    const shapes = new Map(program.outputs.map((o) => [o.name, o.shape]));
    this.shapes = shapes;
    for (let i = 0; shapes.has(`act/${i}`); ++i)
      for (const kind of ['act', 'grad']) {
        const name = `${kind}/${i}`;
        const shape = shapes.get(name);
        const rows = shape[0], cols = shape.slice(1).reduce((a, b) => a * b, 1);
        // at least 2x (a [16, 128] activation: 384 x 48 px), at most 16x, within 384 x 192 px
        const base = Math.max(2, Math.min(16, Math.floor(384 / cols), Math.floor(192 / rows)));
        const t = tensorCanvas(outputs[name], rows, cols, base);
        const fig = document.createElement('figure');
        fig.dataset.tensor = name;
        fig.append(t.canvas);
        let zoom = 1;
        t.canvas.title = 'click to zoom';
        t.canvas.onclick = () => {
          zoom = zoom >= 8 || cols * base * zoom * 2 > 1600 ? 1 : zoom * 2;
          t.canvas.style.width = `${cols * base * zoom}px`;
          t.canvas.style.height = `${rows * base * zoom}px`;
        };
        const hover = document.createElement('div');
        hover.className = 'hover';
        hover.textContent = '\u00a0';
        t.canvas.onmousemove = (e) => {
          const b = t.canvas.getBoundingClientRect();
          const c = Math.floor((e.clientX - b.left) / b.width * cols), r = Math.floor((e.clientY - b.top) / b.height * rows);
          if (r >= 0 && r < rows && c >= 0 && c < cols) hover.textContent = `[${r}, ${c}] = ${outputs[name][r * cols + c]}`;
        };
        const cap = document.createElement('figcaption');
        cap.textContent = `${kind === 'act' ? 'activation' : '∂loss/∂'} ${this.layers[i] ?? i} [${shape}], ` +
                          `${t.cmap === 'diverging' ? 'blue < 0 = white < red' : 'viridis'}; click to zoom`;
        fig.append(colorBar(t.lo, t.hi, t.cmap), hover, cap);
        this.container.append(fig);
      }
    ++this.steps;
    for (const n of this.paramNames) {
      const g = outputs[`gradp/${n}`];
      let s = 0;
      for (const v of g) s += v * v;
      this.norms.get(n).push(Math.sqrt(s));
    }
    drawChart(this.chart, this.paramNames.map((n) => ({ values: this.norms.get(n) })),
              { log: true, label: 'gradient L2 norm ‖∂loss/∂param‖₂' });
    this.legend.innerHTML = this.paramNames.map((n, k) => `<span style="color:${COLORS[k % COLORS.length]}">■ ${n}` +
                                                          ` ${this.norms.get(n).at(-1).toExponential(2)}</span>`).join(' ');
  }

  /** Element (r, c) of the shown flow tensor `name`, viewed as [rows, cols] (for tests). */
  value(name, r, c) {
    const shape = this.shapes.get(name), cols = shape.slice(1).reduce((a, b) => a * b, 1);
    return this.outputs[name][r * cols + c];
  }

  /** The latest gradient norm of every parameter (for tests). */
  latestNorms() {
    return Object.fromEntries([...this.norms].map(([n, v]) => [n, v.at(-1)]));
  }
}
