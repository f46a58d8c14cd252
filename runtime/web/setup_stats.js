// shadergrad web runtime — where a runtime's set-up time goes (Runtime.stats): wall-clock phases of loading a
// bundle and creating a runtime (fetches, checks, device, uploads, shader compile, pipelines / program link), the
// compile time of each kernel, and per program the first run (with lazy compile: its kernels' compile included).
// Host time (performance.now) in milliseconds; phases that overlap on the GPU side (parallel pipeline creation)
// are timed as the wall time the host waited for them.

export const now = () => (globalThis.performance ? performance.now() : Date.now());

/** Accumulates named phases: lap(name) adds the time since the previous lap (or the start) to `phases[name]`. */
export class PhaseClock {
  constructor(phases = {}) {
    /** @type {Record<string, number>} ms per phase, in the order first seen */
    this.phases = phases;
    this._last = now();
  }

  /** Adds the time since the previous lap to phase `name`; returns that time. */
  lap(name) {
    const t = now(), ms = t - this._last;
    this._last = t;
    this.phases[name] = (this.phases[name] ?? 0) + ms;
    return ms;
  }

  /** Restarts the clock without charging the time since the previous lap to any phase. */
  skip() { this._last = now(); }
}

/**
 * The set-up record of one runtime (Runtime.stats). `load_ms` and `setup_ms` keep their meaning of earlier
 * releases (bundle fetch; device, uploads and compile at creation); `phases` splits both; `kernels` lists each
 * compiled kernel (submission to ready, ms; kernels compiled in parallel overlap); `prepared` per compiled program
 * the ms its shader files took to fetch and its kernels to compile; `first_run` the first run() of each program (ms,
 * and `compile_ms`: how long of it was spent waiting for its kernels, 0 when compiled before); `shader_cache` how
 * many kernels found a compiled kernel with the same source; with setupProfile on WebGL2, `first_draws` the host
 * time of each draw of each program's first run (readbacks around each draw).
 */
export function emptyStats() {
  return { load_ms: 0, setup_ms: 0, phases: {}, kernels: [], prepared: {}, first_run: {}, first_draws: {},
           shader_cache: { hits: 0, misses: 0 } };
}
