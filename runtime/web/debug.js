// shadergrad web runtime — debug mode (docs/DEBUGGING.md "In the page"): a program stepped kernel by kernel on the
// runtime's own backend (WebGPU or WebGL2, in the page or in a Worker), every value a kernel wrote read back right
// after it ran, with its statistics; a NaN/Inf check per kernel that names the first kernel writing a non-finite
// value, its graph nodes and the user's C++ source lines (bundle.json kernels[].nodes, values[].node/op/source) and
// its shader. Runtime.debug() / WorkerRuntime.debug() make a DebugSession; Runtime.checkNumerics() runs one to the
// first non-finite value.
import { ShadergradError } from './errors.js';

/**
 * Statistics of a tensor as the native debugger computes them (docs/DEBUGGING.md "Statistics"): min, max, mean, std
 * (population) and L2 norm over the finite elements (NaN when there is none), the counts of NaN, +Inf and -Inf, and
 * the index of the first non-finite element (-1: none).
 * @param {ArrayLike<number>} data
 */
export function tensorStats(data) {
  let finite = 0, nan = 0, posInf = 0, negInf = 0, first = -1, min = Infinity, max = -Infinity, sum = 0, sq = 0;
  for (let i = 0; i < data.length; ++i) {
    const v = data[i];
    if (Number.isFinite(v)) {
      ++finite;
      if (v < min) min = v;
      if (v > max) max = v;
      sum += v;
      sq += v * v;
      continue;
    }
    if (first < 0) first = i;
    if (Number.isNaN(v)) ++nan;
    else if (v > 0) ++posInf;
    else ++negInf;
  }
  const mean = finite ? sum / finite : NaN;
  let dev = 0;
  for (let i = 0; i < data.length; ++i) if (Number.isFinite(data[i])) dev += (data[i] - mean) ** 2;
  return { count: data.length, finite, min: finite ? min : NaN, max: finite ? max : NaN, mean,
           std: finite ? Math.sqrt(dev / finite) : NaN, l2: finite ? Math.sqrt(sq) : NaN,
           nan, pos_inf: posInf, neg_inf: negInf, first_non_finite: first };
}

/**
 * The infinities a value's op writes on purpose: a literal `-inf` (or `inf`) in its expression, as a causal mask's
 * `where((a0 > a1), -inf, a2)` writes -Inf above the diagonal of attention scores for the softmax to turn into 0.
 * Elements of that sign are expected there and are not a numerics failure (a NaN always is).
 * @param {string} [op] the value's op label (plan values[].op)
 * @returns {{neg: boolean, pos: boolean}}
 */
export function intendedInfinities(op) {
  const s = String(op ?? '');
  return { neg: /(^|[^\w.])-inf\b/.test(s), pos: /(^|[^\w.+-])\+?inf\b/.test(s) };
}

/** The index of the first element of `data` that is NaN or an infinity `intended` does not allow, -1: none. */
function firstUnexpected(data, intended) {
  for (let i = 0; i < data.length; ++i) {
    const v = data[i];
    if (Number.isFinite(v)) continue;
    if (Number.isNaN(v) || !(v > 0 ? intended.pos : intended.neg)) return i;
  }
  return -1;
}

/**
 * The names of a bundle's attention outputs: metadata `attention` (a JSON array as a string, e.g. '["attn/0",
 * "attn/1"]', or an array); [] when there is none or it does not parse.
 * @param {Record<string, unknown>} [metadata] bundle.json metadata
 * @returns {string[]}
 */
export function attentionNames(metadata) {
  let a = metadata?.attention;
  if (typeof a === 'string') {
    try { a = JSON.parse(a); } catch { return []; }
  }
  return Array.isArray(a) ? a.map(String) : [];
}

/**
 * Whether a value (debugKernels output or input) is an attention map: named in `names` (attentionNames: the program
 * output it is, or its plan name) and of rank 4 [batch, heads, T, T].
 */
export function isAttention(v, names) {
  const s = v.shape ?? [];
  return s.length === 4 && s[2] === s[3] && (names.includes(v.output) || names.includes(v.name));
}

/** "file:line" of every node, once each, in order. */
function linesOf(nodes) {
  return [...new Set(nodes.map((n) => n.source).filter(Boolean))];
}

/**
 * The kernels of a plan as the debugger shows them: name, shader file and language, graph nodes, user source lines,
 * the values each writes (plan `values` entries: id, name, node, op, shape, source; `output`: the program output it
 * is, if it is one) and the values it reads, each with
 * `producer`: the index of the kernel of this step that wrote it last before, or null (an input, a parameter or
 * state, a constant) — the program's data flow between kernels.
 * @param {object} plan Runtime.plan(program): the webgl2 plan or a webgpu plan
 */
export function debugKernels(plan) {
  const outputOf = new Map((plan.outputs ?? []).map((o) => [o.value, o.name]));  // value id -> program output name
  const describe = (id) => {
    const v = plan.values[id];
    return { value: id, name: v.name, kind: v.kind, node: v.node, op: v.op, shape: v.shape, source: v.source,
             ...(v.update_of !== undefined ? { update_of: v.update_of } : {}),
             ...(v.tensor !== undefined ? { tensor: v.tensor } : {}),
             ...(outputOf.has(id) ? { output: outputOf.get(id) } : {}) };
  };
  const writer = new Map();  // value id -> the last kernel so far that wrote it
  return plan.kernels.map((k, index) => {
    const outs = [], ins = [];
    for (const b of k.bindings ?? []) {
      const list = b.access === 'read' ? ins : outs;
      if (!list.includes(b.value)) list.push(b.value);
    }
    for (const t of k.render_targets ?? []) if (!outs.includes(t.value)) outs.push(t.value);
    for (const s of k.samplers ?? []) if (!ins.includes(s.value)) ins.push(s.value);
    const inputs = ins.map((id) => ({ ...describe(id), producer: writer.has(id) ? writer.get(id) : null }));
    for (const id of outs) writer.set(id, index);
    const nodes = k.nodes ?? [];
    return { index, name: k.name, file: k.wgsl ?? k.glsl_es ?? k.c,
             language: k.wgsl ? 'wgsl' : k.entry ? 'c11' : 'glsl-es-3.00', nodes,
             lines: linesOf(nodes), outputs: outs.map(describe), inputs };
  });
}

/** Whether kernel `k` (debugKernels entry) is named by breakpoint `b`: its index, its name or a prefix of it. */
function matches(k, b) {
  return typeof b === 'number' ? k.index === b : k.name === b || k.name.startsWith(String(b));
}

/**
 * One program being stepped (Runtime.debug, WorkerRuntime.debug). The feeds were uploaded when it was made; each
 * step() runs the next kernel and reads back what it wrote; finish() reads the program outputs and commits the
 * updates (the persistent values change only then); abort() leaves them as they were. While a session is open the
 * runtime refuses run() and write().
 */
export class DebugSession {
  /** Made by Runtime.debug (`driver`: how to run kernel i, finish, abort — in the page or through the worker). */
  constructor({ program, backend, plan, sources, driver, onClose }) {
    /** @type {string} */
    this.program = program;
    /** @type {string} 'webgpu' or 'webgl2' */
    this.backend = backend;
    /** every kernel of the plan, in launch order (debugKernels) */
    this.kernels = debugKernels(plan);
    /** shader source of each kernel (WGSL on WebGPU, GLSL ES 3.00 on WebGL2), by kernel index */
    this.sources = sources;
    /** index of the kernel the next step() runs */
    this.next = 0;
    /** the steps so far, in order (DebugStep) */
    this.steps = [];
    /** the first step that wrote a non-finite value, or null */
    this.firstNonFinite = null;
    /** 'open' | 'finished' | 'aborted' */
    this.state = 'open';
    this._driver = driver;
    this._onClose = onClose;
  }

  /** Whether every kernel ran. */
  get atEnd() { return this.next >= this.kernels.length; }

  _open(what) {
    if (this.state !== 'open') throw new ShadergradError(`${what}: the debug session of '${this.program}' is ${this.state}`);
  }

  /**
   * Runs the next kernel; resolves to its DebugStep: the kernel (debugKernels entry), its outputs with their
   * row-major data and statistics, and `nonFinite` (any NaN/Inf in what it wrote, but for the infinities its op
   * writes on purpose: intendedInfinities; each output's `nonFinite` and `first_unexpected` say which).
   */
  async step() {
    this._open('step()');
    if (this.atEnd) throw new ShadergradError(`step(): every kernel of '${this.program}' ran; call finish()`);
    const k = this.kernels[this.next];
    const read = await this._driver.kernel(this.next);
    const outputs = k.outputs.map((o) => {
      const r = read.find((x) => x.value === o.value);
      const data = r ? r.data : new Float32Array(0), stats = tensorStats(data);
      const intended = intendedInfinities(o.op);
      const first = stats.first_non_finite < 0 ? -1 : firstUnexpected(data, intended);
      return { ...o, data, stats, nonFinite: first >= 0, first_unexpected: first,
               ...(intended.neg || intended.pos ? { intended } : {}) };
    });
    const nonFinite = outputs.some((o) => o.nonFinite);
    const s = { ...k, outputs, nonFinite, source: this.sources[k.index] };
    this.steps.push(s);
    if (nonFinite && !this.firstNonFinite) this.firstNonFinite = s;
    ++this.next;
    return s;
  }

  /**
   * Steps until a stop: after a kernel that wrote a non-finite value (`stopOnNonFinite`, default true), before a
   * kernel named in `breakpoints` (index, name or name prefix; not the kernel the call starts at), or at the end.
   * @param {{breakpoints?: (number|string)[], stopOnNonFinite?: boolean}} [options]
   * @returns {Promise<{stopped: 'non-finite'|'breakpoint'|'end', step: object|null}>} `step`: the last kernel run
   */
  async continue({ breakpoints = [], stopOnNonFinite = true } = {}) {
    this._open('continue()');
    let last = null;
    for (let first = true; !this.atEnd; first = false) {
      if (!first && breakpoints.some((b) => matches(this.kernels[this.next], b))) return { stopped: 'breakpoint', step: last };
      last = await this.step();
      if (stopOnNonFinite && last.nonFinite) return { stopped: 'non-finite', step: last };
    }
    return { stopped: 'end', step: last };
  }

  /** Runs the kernels left, reads the program outputs and commits the updates, as run() does; resolves to the
   * outputs by name. */
  async finish() {
    this._open('finish()');
    while (!this.atEnd) await this.step();
    try {
      return await this._driver.finish();
    } finally {
      this.state = 'finished';
      this._onClose();
    }
  }

  /** Ends the session without committing the updates (the persistent values keep their values from before). */
  async abort() {
    if (this.state !== 'open') return;
    this.state = 'aborted';
    try {
      await this._driver.abort();
    } finally {
      this._onClose();
    }
  }
}

/** The report of a non-finite step (checkNumerics): where, how many, and the nodes and user lines of the kernel. */
export function numericsReport(session, s) {
  const o = s.outputs.find((x) => x.nonFinite) ?? s.outputs.find((x) => x.stats.first_non_finite >= 0);
  const st = o.stats, first = o.first_unexpected >= 0 ? o.first_unexpected : st.first_non_finite;
  const node = (n) => `n${n.node} ${n.op} (${Array.isArray(n.shape) ? n.shape.join('x') : n.shape}) at ${n.source}`;
  const message = [
    `check_numerics: program '${session.program}' (${session.backend}), kernel ${s.index} '${s.name}' (${s.file}) ` +
    `produced ${st.nan} NaN, ${st.pos_inf} +Inf, ${st.neg_inf} -Inf of ${st.count} values (first at element ` +
    `${first}) in value '${o.name}' = ${node(o)}.`,
    '  graph nodes it computes:', ...s.nodes.map((n) => `    ${node(n)}`),
    `  user source lines: ${s.lines.join(', ')}`,
    s.index === 0 ? '  it is the first kernel of the step' : '  every earlier kernel of this step wrote finite values',
  ].join('\n');
  return { ok: false, program: session.program, backend: session.backend, kernel: s.name, index: s.index, file: s.file,
           language: s.language, value: { value: o.value, name: o.name, node: o.node, op: o.op, shape: o.shape,
                                          source: o.source },
           stats: st, nodes: s.nodes, lines: s.lines, source: s.source, message };
}

/**
 * Runs `program` once in debug mode, checking every kernel's outputs for NaN/Inf. The first kernel that writes one
 * stops the step without committing the updates: resolves to numericsReport's object (`ok: false`, kernel, value,
 * nodes, user source lines, shader source, `message` in words). Without one, the step is committed as run() would
 * and it resolves to {ok: true, outputs}.
 * @param {{debug: Function}} rt a Runtime or WorkerRuntime
 */
export async function checkNumerics(rt, program, feeds) {
  const session = await rt.debug(program, feeds);
  try {
    const r = await session.continue({ stopOnNonFinite: true });
    if (r.stopped === 'non-finite') {
      await session.abort();
      return numericsReport(session, r.step);
    }
    return { ok: true, outputs: await session.finish() };
  } catch (e) {
    await session.abort();
    throw e;
  }
}
