// shadergrad web runtime — the WebGL2 device: context and capability probe, RGBA32F textures, shader programs with
// readable compile errors, framebuffers (checked complete), draws, readback, timer queries and lost-context
// detection. Knows nothing about bundles; webgl2_executor.js runs a bundle's programs on it.
//
// Pitfalls handled (seed articles 000 §5/§8 and 003 §3/§5): textures are NEAREST + CLAMP_TO_EDGE and read with
// texelFetch at integer coordinates (no 0.5 offsets, no interpolation); every framebuffer is checked complete;
// RGBA32F is probed with a bit-exact round trip through a render target before use; fragment highp must have 23
// mantissa bits; texSubImage2D always gets exactly width * height * 4 floats; readPixels reads RGBA/FLOAT into a
// Float32Array; MAX_TEXTURE_SIZE / MAX_VIEWPORT_DIMS / MAX_DRAW_BUFFERS / MAX_TEXTURE_IMAGE_UNITS are checked
// against what the bundle needs; compile errors print the failing lines marked.
import { ContextLostError, DeviceError, ShaderCompileError, UnsupportedError } from './errors.js';
import { padToLayout } from './layout.js';

/** The full-screen triangle every kernel draws (as runtime/src/gles_device.cpp's): each texel of the viewport
 * gets exactly one fragment, at gl_FragCoord = texel + 0.5. */
export const VERTEX_SHADER = `#version 300 es
// shadergrad full-screen triangle: vertices (-1,-1), (3,-1), (-1,3) from gl_VertexID; no attributes.
void main() {
  vec2 p = vec2(float((gl_VertexID & 1) << 2) - 1.0, float((gl_VertexID & 2) << 1) - 1.0);
  gl_Position = vec4(p, 0.0, 1.0);
}
`;

const COPY_SHADER = `#version 300 es
// shadergrad fp32 round-trip probe: copies texels unchanged.
precision highp float;
precision highp sampler2D;
uniform highp sampler2D u_src;
out vec4 o_color;
void main() { o_color = texelFetch(u_src, ivec2(gl_FragCoord.xy), 0); }
`;

/** Values the fp32 probe sends through a render target; they must come back bit for bit. */
const PROBE_VALUES = [0.1234567890123, -3.4028234663852886e38, 1.1754943508222875e-38, 1 / 3, 1e-7, 65504.5,
                      123456.789, -0.5, 16777215, Infinity, -Infinity, 0, -0, 2.5e-30, 7.0e30, -1.5];

/** Source with 1-based line numbers; lines in `marked` get `>>`; with `context`, only lines near a marked one. */
export function numberLines(src, marked, context = Infinity) {
  const lines = src.split('\n');
  const near = (i) => !marked.size || [...marked].some((m) => Math.abs(m - i) <= context);
  const out = [];
  let skipped = false;
  lines.forEach((l, k) => {
    const i = k + 1;
    if (!near(i)) { if (!skipped) out.push('   ...'); skipped = true; return; }
    skipped = false;
    out.push(`${marked.has(i) ? '>>' : '  '}${String(i).padStart(4)} | ${l}`);
  });
  return out.join('\n');
}

/** Line numbers an info log blames ("ERROR: 0:12: ..." as ANGLE, Mesa and most drivers write them). */
export function blamedLines(log) {
  const s = new Set();
  for (const m of log.matchAll(/(?:ERROR|WARNING):\s*\d+:(\d+)/g)) s.add(Number(m[1]));
  for (const m of log.matchAll(/^\s*\d+\((\d+)\)\s*:/gm)) s.add(Number(m[1]));  // "0(12) : error ..." (NVIDIA)
  return s;
}

/** Sampler uniforms a GLSL source declares (also those a driver optimises out). */
function declaredSamplers(src) {
  return [...src.matchAll(/uniform\s+(?:(?:highp|mediump|lowp)\s+)?sampler2D\s+(\w+)\s*;/g)].map((m) => m[1]);
}

/** Number of `layout(location = N) out` declarations (render targets) of a fragment shader. */
function declaredOutputs(src) {
  return [...src.matchAll(/layout\s*\(\s*location\s*=\s*\d+\s*\)\s*out\s/g)].length;
}

/**
 * Tries to make a WebGL2 device that can run a bundle with `requires`. Never throws: a failure is a reason in
 * words (the backend-selection chain reports it).
 * @param {{max_draw_buffers?: number, max_texture_image_units?: number, max_texture_size?: number}} requires
 * @param {{canvas?: HTMLCanvasElement|OffscreenCanvas, contextAttributes?: WebGLContextAttributes}} [options]
 * @returns {{device: WebGL2Device, reason?: undefined} | {device?: undefined, reason: string}}
 */
export function probeWebGL2(requires = {}, options = {}) {
  let canvas = options.canvas;
  if (!canvas) {
    if (typeof OffscreenCanvas !== 'undefined') canvas = new OffscreenCanvas(1, 1);
    else if (typeof document !== 'undefined') canvas = document.createElement('canvas');
    else return { reason: 'no canvas to draw with: neither OffscreenCanvas nor a document exists in this context' };
  }
  let gl = null;
  try {
    gl = canvas.getContext('webgl2', {
      alpha: false, antialias: false, depth: false, stencil: false, premultipliedAlpha: false,
      preserveDrawingBuffer: false, powerPreference: 'high-performance', ...options.contextAttributes,
    });
  } catch (e) {
    return { reason: `getContext('webgl2') threw: ${e.message}` };
  }
  if (!gl) return { reason: 'the browser gave no WebGL2 context (WebGL2 unsupported or disabled here, or the GPU ' +
                            'is blocklisted: see chrome://gpu or about:support)' };
  const dbg = gl.getExtension('WEBGL_debug_renderer_info');
  const renderer = String(gl.getParameter(dbg ? dbg.UNMASKED_RENDERER_WEBGL : gl.RENDERER));
  if (!gl.getExtension('EXT_color_buffer_float'))
    return { reason: `WebGL2 works (${renderer}) but EXT_color_buffer_float is missing: RGBA32F textures cannot ` +
                     'be render targets, so kernels cannot write fp32 results' };
  const hp = gl.getShaderPrecisionFormat(gl.FRAGMENT_SHADER, gl.HIGH_FLOAT);
  if (!hp || hp.precision < 23)
    return { reason: `fragment shaders' highp float has ${hp ? hp.precision : 0} mantissa bits on ${renderer}; ` +
                     'fp32 training needs 23' };
  const limits = {
    max_texture_size: gl.getParameter(gl.MAX_TEXTURE_SIZE),
    max_viewport: Math.min(...gl.getParameter(gl.MAX_VIEWPORT_DIMS)),
    max_draw_buffers: Math.min(gl.getParameter(gl.MAX_DRAW_BUFFERS), gl.getParameter(gl.MAX_COLOR_ATTACHMENTS)),
    max_texture_image_units: gl.getParameter(gl.MAX_TEXTURE_IMAGE_UNITS),
  };
  const short = [];
  if ((requires.max_texture_size ?? 0) > Math.min(limits.max_texture_size, limits.max_viewport))
    short.push(`textures and draws of ${requires.max_texture_size} texels per side (MAX_TEXTURE_SIZE ` +
               `${limits.max_texture_size}, MAX_VIEWPORT_DIMS ${limits.max_viewport}); export with a smaller ` +
               '--max-texture-size');
  if ((requires.max_draw_buffers ?? 0) > limits.max_draw_buffers)
    short.push(`${requires.max_draw_buffers} render targets per kernel (MAX_DRAW_BUFFERS ${limits.max_draw_buffers});` +
               ' export with --max-draw-buffers ' + limits.max_draw_buffers);
  if ((requires.max_texture_image_units ?? 0) > limits.max_texture_image_units)
    short.push(`${requires.max_texture_image_units} samplers per kernel (MAX_TEXTURE_IMAGE_UNITS ` +
               `${limits.max_texture_image_units})`);
  if (short.length) return { reason: `WebGL2 on ${renderer} cannot run this bundle: it needs ${short.join('; ')}` };
  const device = new WebGL2Device(gl, canvas, renderer, limits);
  const bad = device.roundTripProbe();
  if (bad) { device.dispose(); return { reason: bad }; }
  return { device };
}

/** A WebGL2 context set up for fragment-shader compute over RGBA32F textures. */
export class WebGL2Device {
  constructor(gl, canvas, renderer, limits) {
    this.gl = gl;
    this.canvas = canvas;
    this.renderer = renderer;
    this.limits = limits;
    this.timer = gl.getExtension('EXT_disjoint_timer_query_webgl2');
    this.parallelCompile = gl.getExtension('KHR_parallel_shader_compile');
    this.loseContextExt = gl.getExtension('WEBGL_lose_context');
    /** @type {null | {statusMessage: string}} */
    this.lost = null;
    this._onLost = (e) => { this.lost = { statusMessage: e.statusMessage || '' }; };
    canvas.addEventListener?.('webglcontextlost', this._onLost);
    this.vao = gl.createVertexArray();
    this.vs = gl.createShader(gl.VERTEX_SHADER);
    gl.shaderSource(this.vs, VERTEX_SHADER);
    gl.compileShader(this.vs);
    if (!gl.getShaderParameter(this.vs, gl.COMPILE_STATUS))
      throw new ShaderCompileError(`the runtime's full-screen vertex shader failed to compile on ${renderer}:\n` +
                                   `${gl.getShaderInfoLog(this.vs)}`, { kernel: '(vertex shader)' });
    this.readFbo = gl.createFramebuffer();
    this._fbos = new Map();
    this._textures = new Set();
    this._programs = new Set();
    this._nextId = 1;
    gl.disable(gl.DITHER);  // dithering may perturb color outputs
  }

  /** Capabilities for reports: renderer, limits, extensions used. */
  get caps() {
    return { api: 'webgl2', renderer: this.renderer, ...this.limits, timer_query: !!this.timer,
             parallel_shader_compile: !!this.parallelCompile };
  }

  /** Throws ContextLostError when the context is gone (`doing` says what was attempted). */
  checkLost(doing) {
    if (!this.lost && !this.gl.isContextLost()) return;
    const why = this.lost?.statusMessage ? ` (${this.lost.statusMessage})` : '';
    throw new ContextLostError(`the WebGL2 context was lost${why}${doing ? ` ${doing}` : ''}: every texture on the ` +
                               'GPU (weights, optimizer state) is gone and nothing more can run on it. Create a new ' +
                               'runtime to start again from the bundle\'s weights (read weights back with ' +
                               'runtime.read() while it works if you need to keep training progress)',
                               { renderer: this.renderer });
  }

  /** Throws DeviceError when gl.getError() reports one. */
  checkError(doing, details = {}) {
    const e = this.gl.getError();
    if (e === this.gl.NO_ERROR) return;
    this.checkLost(doing);
    const names = { 0x500: 'INVALID_ENUM', 0x501: 'INVALID_VALUE', 0x502: 'INVALID_OPERATION',
                    0x505: 'OUT_OF_MEMORY', 0x506: 'INVALID_FRAMEBUFFER_OPERATION' };
    throw new DeviceError(`WebGL2 reported ${names[e] || `error 0x${e.toString(16)}`} ${doing} on ${this.renderer}`,
                          { ...details, gl_error: e });
  }

  /**
   * An RGBA32F texture allocated at width x height texels (>= the layout's), NEAREST, CLAMP_TO_EDGE.
   * @param {string} name for messages
   * @param {{numel: number, texels: number, width: number, height: number}} layout addressing
   */
  createTexture(name, layout, width = layout.width, height = layout.height) {
    const gl = this.gl;
    const max = this.limits.max_texture_size;
    if (width > max || height > max)
      throw new UnsupportedError(`texture '${name}' needs ${width}x${height} texels but MAX_TEXTURE_SIZE is ${max} on ` +
                                 `${this.renderer}`, { value: name });
    const tex = gl.createTexture();
    gl.bindTexture(gl.TEXTURE_2D, tex);
    gl.texStorage2D(gl.TEXTURE_2D, 1, gl.RGBA32F, width, height);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
    gl.bindTexture(gl.TEXTURE_2D, null);
    this.checkError(`creating the ${width}x${height} RGBA32F texture '${name}'`, { value: name });
    const t = { id: this._nextId++, tex, name, layout, width, height, scratch: null };
    this._textures.add(t);
    return t;
  }

  /** Uploads storage-order values (layout.numel of them; zeros after) into the layout's region of `t`. */
  upload(t, values) {
    const gl = this.gl;
    const data = padToLayout(values, t.layout, t.scratch || undefined);
    if (data !== values) t.scratch = data;
    gl.bindTexture(gl.TEXTURE_2D, t.tex);
    gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, t.layout.width, t.layout.height, gl.RGBA, gl.FLOAT, data);
    gl.bindTexture(gl.TEXTURE_2D, null);
  }

  /**
   * Reads the first `n` storage-order values of `t` (readPixels RGBA/FLOAT of the rows holding them).
   * @returns {Float32Array} at least n values
   */
  read(t, n = t.layout.numel) {
    const gl = this.gl;
    const w = t.layout.width, rows = Math.max(1, Math.ceil(Math.ceil(n / 4) / w));
    const out = new Float32Array(w * rows * 4);
    gl.bindFramebuffer(gl.READ_FRAMEBUFFER, this.readFbo);
    gl.framebufferTexture2D(gl.READ_FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, t.tex, 0);
    gl.readBuffer(gl.COLOR_ATTACHMENT0);
    const status = gl.checkFramebufferStatus(gl.READ_FRAMEBUFFER);
    if (status !== gl.FRAMEBUFFER_COMPLETE) {
      this.checkLost(`reading '${t.name}'`);
      throw new DeviceError(`the framebuffer reading '${t.name}' is incomplete (status 0x${status.toString(16)}) on ` +
                            this.renderer, { value: t.name });
    }
    gl.readPixels(0, 0, w, rows, gl.RGBA, gl.FLOAT, out);
    gl.framebufferTexture2D(gl.READ_FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, null, 0);
    gl.bindFramebuffer(gl.READ_FRAMEBUFFER, null);
    this.checkError(`reading back '${t.name}' (readPixels RGBA/FLOAT ${w}x${rows})`, { value: t.name });
    this.checkLost(`while reading '${t.name}'`);  // a lost context reads zeros without an error
    return out;
  }

  /**
   * Starts compiling a kernel's fragment shader and linking its program (drivers may do both in the background;
   * finishProgram() waits and checks).
   */
  beginProgram(kernel, file, source) {
    const gl = this.gl;
    const fs = gl.createShader(gl.FRAGMENT_SHADER);
    gl.shaderSource(fs, source);
    gl.compileShader(fs);
    const program = gl.createProgram();
    gl.attachShader(program, this.vs);
    gl.attachShader(program, fs);
    gl.linkProgram(program);
    return { kernel, file, source, fs, program, t0: globalThis.performance?.now() ?? Date.now() };
  }

  /** Waits (without blocking, where KHR_parallel_shader_compile exists) until a program is linked. */
  async waitProgram(h) {
    if (!this.parallelCompile) return;
    const gl = this.gl;
    while (!gl.getProgramParameter(h.program, this.parallelCompile.COMPLETION_STATUS_KHR) && !gl.isContextLost())
      await new Promise((r) => setTimeout(r, 1));
  }

  /**
   * Checks a program begun with beginProgram: ShaderCompileError with the log and the blamed lines marked.
   * @param {{nodes?: string}} info graph nodes of the kernel, for the message
   * @returns {{program: WebGLProgram, samplers: Map<string, WebGLUniformLocation>, declared: string[],
   *            outputs: number, kernel: string}}
   */
  finishProgram(h, info = {}) {
    const gl = this.gl;
    this.checkLost(`while compiling kernel '${h.kernel}'`);
    const fail = (what, log) => {
      const lines = blamedLines(log);
      gl.deleteProgram(h.program);
      gl.deleteShader(h.fs);
      throw new ShaderCompileError(
        `kernel '${h.kernel}' (${h.file}): the fragment shader failed to ${what} on ${this.renderer}:\n${log.trim()}\n` +
        `--- ${h.file} (>> marks the lines the log blames) ---\n${numberLines(h.source, lines, 3)}` +
        (info.nodes ? `\n--- graph nodes this kernel computes ---\n${info.nodes}` : ''),
        { kernel: h.kernel, file: h.file, log, lines: [...lines] });
    };
    if (!gl.getShaderParameter(h.fs, gl.COMPILE_STATUS)) fail('compile', gl.getShaderInfoLog(h.fs) || '');
    if (!gl.getProgramParameter(h.program, gl.LINK_STATUS)) fail('link', gl.getProgramInfoLog(h.program) || '');
    gl.detachShader(h.program, h.fs);
    gl.deleteShader(h.fs);
    const samplers = new Map();
    const n = gl.getProgramParameter(h.program, gl.ACTIVE_UNIFORMS);
    for (let i = 0; i < n; ++i) {
      const u = gl.getActiveUniform(h.program, i);
      if (u && u.type === gl.SAMPLER_2D) samplers.set(u.name, gl.getUniformLocation(h.program, u.name));
    }
    const p = { program: h.program, samplers, declared: declaredSamplers(h.source),
                outputs: declaredOutputs(h.source), kernel: h.kernel };
    this._programs.add(p);
    return p;
  }

  /** The framebuffer drawing into `outputs` (COLOR_ATTACHMENTi = outputs[i]), created once per set, checked. */
  framebuffer(outputs, kernel) {
    const key = outputs.map((t) => t.id).join(',');
    let f = this._fbos.get(key);
    if (f) return f;
    const gl = this.gl;
    f = gl.createFramebuffer();
    gl.bindFramebuffer(gl.DRAW_FRAMEBUFFER, f);
    outputs.forEach((t, i) => gl.framebufferTexture2D(gl.DRAW_FRAMEBUFFER, gl.COLOR_ATTACHMENT0 + i, gl.TEXTURE_2D,
                                                      t.tex, 0));
    gl.drawBuffers(outputs.map((_, i) => gl.COLOR_ATTACHMENT0 + i));
    const status = gl.checkFramebufferStatus(gl.DRAW_FRAMEBUFFER);
    gl.bindFramebuffer(gl.DRAW_FRAMEBUFFER, null);
    if (status !== gl.FRAMEBUFFER_COMPLETE) {
      gl.deleteFramebuffer(f);
      this.checkLost(`while setting up kernel '${kernel}'`);
      throw new DeviceError(`the framebuffer of kernel '${kernel}' (${outputs.length} RGBA32F render targets: ` +
                            `${outputs.map((t) => `${t.name} ${t.width}x${t.height}`).join(', ')}) is incomplete ` +
                            `(status 0x${status.toString(16)}) on ${this.renderer}`, { kernel });
    }
    this._fbos.set(key, { fbo: f, textures: outputs });
    return this._fbos.get(key);
  }

  /**
   * One draw of a kernel: `inputs[u]` bound to texture unit u (the program's sampler uniforms were pointed at
   * their units once), rendering `viewport` texels into the framebuffer `fb`.
   * @param {WebGLQuery|null} query a TIME_ELAPSED query wrapped around the draw
   */
  draw(program, inputs, fb, viewport, query = null) {
    const gl = this.gl;
    gl.useProgram(program.program);
    for (let u = 0; u < inputs.length; ++u) {
      gl.activeTexture(gl.TEXTURE0 + u);
      gl.bindTexture(gl.TEXTURE_2D, inputs[u].tex);
    }
    gl.bindFramebuffer(gl.DRAW_FRAMEBUFFER, fb.fbo);
    gl.viewport(0, 0, viewport[0], viewport[1]);
    gl.bindVertexArray(this.vao);
    if (query) gl.beginQuery(this.timer.TIME_ELAPSED_EXT, query);
    gl.drawArrays(gl.TRIANGLES, 0, 3);
    if (query) gl.endQuery(this.timer.TIME_ELAPSED_EXT);
  }

  /** Unbinds the textures of units 0..n-1 (a texture bound as input while attached as output is a feedback loop). */
  unbindInputs(n) {
    const gl = this.gl;
    for (let u = 0; u < n; ++u) { gl.activeTexture(gl.TEXTURE0 + u); gl.bindTexture(gl.TEXTURE_2D, null); }
    gl.activeTexture(gl.TEXTURE0);
  }

  /**
   * Returns null when RGBA32F values survive an upload, a draw into an RGBA32F render target and a readPixels
   * bit for bit (Infinity included), else the reason in words.
   */
  roundTripProbe() {
    const gl = this.gl;
    const layout = { numel: PROBE_VALUES.length, texels: PROBE_VALUES.length / 4, width: PROBE_VALUES.length / 4, height: 1 };
    let src, dst, h;
    try {
      src = this.createTexture('probe-in', layout);
      dst = this.createTexture('probe-out', layout);
      this.upload(src, Float32Array.from(PROBE_VALUES));
      h = this.beginProgram('fp32-probe', '(built in)', COPY_SHADER);
      const p = this.finishProgram(h);
      gl.useProgram(p.program);
      gl.uniform1i(p.samplers.get('u_src'), 0);
      this.draw(p, [src], this.framebuffer([dst], 'fp32-probe'), [layout.width, 1]);
      const got = this.read(dst);
      const want = Float32Array.from(PROBE_VALUES);
      const wb = new Uint32Array(want.buffer), gb = new Uint32Array(got.buffer);
      for (let i = 0; i < want.length; ++i)
        if (wb[i] !== gb[i])
          return `RGBA32F render targets do not keep fp32 values on ${this.renderer}: wrote ${want[i]} ` +
                 `(0x${wb[i].toString(16)}), read back ${got[i]} (0x${gb[i].toString(16)})`;
      return null;
    } catch (e) {
      return `the fp32 round-trip probe failed on ${this.renderer}: ${e.message}`;
    } finally {
      for (const t of [src, dst]) if (t) this.deleteTexture(t);
    }
  }

  deleteTexture(t) {
    for (const [key, f] of this._fbos)
      if (f.textures.includes(t)) { this.gl.deleteFramebuffer(f.fbo); this._fbos.delete(key); }
    this.gl.deleteTexture(t.tex);
    this._textures.delete(t);
  }

  /** Frees every GL object; the device is unusable afterwards. */
  dispose() {
    const gl = this.gl;
    for (const f of this._fbos.values()) gl.deleteFramebuffer(f.fbo);
    for (const t of this._textures) gl.deleteTexture(t.tex);
    for (const p of this._programs) gl.deleteProgram(p.program);
    this._fbos.clear(); this._textures.clear(); this._programs.clear();
    gl.deleteFramebuffer(this.readFbo);
    gl.deleteVertexArray(this.vao);
    gl.deleteShader(this.vs);
    this.canvas.removeEventListener?.('webglcontextlost', this._onLost);
  }
}
