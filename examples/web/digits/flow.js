// Draw-a-digit page — the gradient-flow view and the small line charts: each layer's activations and gradients
// (outputs act/I and grad/I of the bundle's train_debug program) as colour images with the native debug report's
// colormaps (runtime colormap.js), and per-parameter gradient norms (gradp/NAME) over the steps.
import { renderGrid } from './bundle/runtime/colormap.js';

const COLORS = ['#4575b4', '#d73027', '#1a9850', '#984ea3', '#ff7f00', '#a65628', '#f781bf', '#666666'];

/** A line chart of one or more series (arrays of numbers) on a canvas; `log`: log10 y axis. */
export function drawChart(canvas, series, { log = false, label = '' } = {}) {
  const g = canvas.getContext('2d');
  const { width: w, height: h } = canvas;
  g.fillStyle = '#fff';
  g.fillRect(0, 0, w, h);
  g.strokeStyle = '#999';
  g.strokeRect(0.5, 0.5, w - 1, h - 1);
  const tf = (v) => (log ? Math.log10(Math.max(v, 1e-12)) : v);
  const all = series.flatMap((s) => s.values.filter(Number.isFinite).map(tf));
  if (!all.length) return;
  let lo = Math.min(...all), hi = Math.max(...all);
  if (hi === lo) { hi += 1; lo -= 1; }
  const n = Math.max(...series.map((s) => s.values.length), 2);
  series.forEach((s, k) => {
    g.strokeStyle = s.color || COLORS[k % COLORS.length];
    g.beginPath();
    s.values.forEach((v, i) => {
      const x = 4 + (i / (n - 1)) * (w - 8), y = h - 14 - ((tf(v) - lo) / (hi - lo)) * (h - 24);
      if (i) g.lineTo(x, y); else g.moveTo(x, y);
    });
    g.stroke();
  });
  g.fillStyle = '#000';
  g.font = '11px sans-serif';
  const fmt = (v) => (log ? `1e${v.toFixed(1)}` : v.toPrecision(3));
  g.fillText(`${label} ${fmt(lo)} .. ${fmt(hi)}`, 6, h - 3);
}

/** Draws a [rows, cols] tensor into a new canvas (each value one pixel, scaled up), auto colormap. */
function tensorCanvas(values, rows, cols, scale) {
  const c = document.createElement('canvas');
  c.width = cols;
  c.height = rows;
  const { pixels, lo, hi, cmap } = renderGrid(values, rows, cols);
  c.getContext('2d').putImageData(new ImageData(pixels, cols, rows), 0, 0);
  c.style.width = `${cols * scale}px`;
  c.style.height = `${rows * scale}px`;
  return { canvas: c, lo, hi, cmap };
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

  /** Shows the outputs of one train_debug run (a Record of Float32Array) for a bundle program description. */
  show(outputs, program) {
    this.container.textContent = '';
    const shapes = new Map(program.outputs.map((o) => [o.name, o.shape]));
    for (let i = 0; shapes.has(`act/${i}`); ++i)
      for (const kind of ['act', 'grad']) {
        const name = `${kind}/${i}`;
        const shape = shapes.get(name);
        const rows = shape[0], cols = shape.slice(1).reduce((a, b) => a * b, 1);
        const scale = Math.max(1, Math.min(6, Math.floor(192 / Math.max(cols, rows))));
        const t = tensorCanvas(outputs[name], rows, cols, scale);
        const fig = document.createElement('figure');
        fig.dataset.tensor = name;
        fig.append(t.canvas);
        const cap = document.createElement('figcaption');
        cap.textContent = `${kind === 'act' ? 'activation' : '∂loss/∂'} ${this.layers[i] ?? i} [${shape}] ` +
                          `${t.cmap} ${t.lo.toPrecision(3)}..${t.hi.toPrecision(3)}`;
        fig.append(cap);
        this.container.append(fig);
      }
    ++this.steps;
    for (const n of this.paramNames) {
      const g = outputs[`gradp/${n}`];
      let s = 0;
      for (const v of g) s += v * v;
      this.norms.get(n).push(Math.sqrt(s));
    }
    drawChart(this.chart, this.paramNames.map((n) => ({ values: this.norms.get(n) })), { log: true, label: '‖grad‖₂' });
    this.legend.innerHTML = this.paramNames.map((n, k) => `<span style="color:${COLORS[k % COLORS.length]}">■ ${n}` +
                                                          ` ${this.norms.get(n).at(-1).toExponential(2)}</span>`).join(' ');
  }

  /** The latest gradient norm of every parameter (for tests). */
  latestNorms() {
    return Object.fromEntries([...this.norms].map(([n, v]) => [n, v.at(-1)]));
  }
}
