// shadergrad web runtime — the errors it throws. Every message says what is wrong, where (bundle file, program,
// kernel, value) and how to fix it; `details` carries the same facts as fields for programs.
// Errors cross the Worker boundary as {name, message, details} and are rebuilt as the same class there.

/** Base class of every error the runtime throws. */
export class ShadergradError extends Error {
  /**
   * @param {string} message
   * @param {Record<string, unknown>} [details]
   */
  constructor(message, details = {}) {
    super(message);
    this.name = 'ShadergradError';
    /** @type {Record<string, unknown>} */
    this.details = details;
  }
}

/** The bundle cannot be used: another format version, a missing or unreadable file, truncated weights, a field of
 * the wrong type, an inconsistent description. `details.file` names the file, `details.kernel` / `details.program`
 * where known, `details.field` the path of a bundle.json field of the wrong type. */
export class BundleError extends ShadergradError {
  constructor(message, details) { super(message, details); this.name = 'BundleError'; }
}

/** The bundle is valid but needs something this backend or device does not offer (a limit, a feature, a shader
 * language); nothing was run. */
export class UnsupportedError extends ShadergradError {
  constructor(message, details) { super(message, details); this.name = 'UnsupportedError'; }
}

/** No backend can run here; `details.attempts` lists every backend tried with the reason in words. */
export class BackendUnavailableError extends ShadergradError {
  constructor(message, details) { super(message, details); this.name = 'BackendUnavailableError'; }
}

/** A kernel's shader failed to compile or link; the message has the driver's log and the source lines it blames
 * (marked `>>`), `details.kernel`, `details.file`, `details.lines`. */
export class ShaderCompileError extends ShadergradError {
  constructor(message, details) { super(message, details); this.name = 'ShaderCompileError'; }
}

/** The GPU context was lost (GPU reset, driver crash, too many contexts, or a page asking for it); every
 * texture is gone, create a new runtime. */
export class ContextLostError extends ShadergradError {
  constructor(message, details) { super(message, details); this.name = 'ContextLostError'; }
}

/** A run was fed wrongly: a missing or unknown input, a wrong number of values, a non-integer label. */
export class FeedError extends ShadergradError {
  constructor(message, details) { super(message, details); this.name = 'FeedError'; }
}

/** The device reported an error (a GL error, an incomplete framebuffer) while running a kernel. */
export class DeviceError extends ShadergradError {
  constructor(message, details) { super(message, details); this.name = 'DeviceError'; }
}

/** The classes by name, for rebuilding errors that crossed a Worker boundary. */
export const ERROR_CLASSES = {
  ShadergradError, BundleError, UnsupportedError, BackendUnavailableError, ShaderCompileError, ContextLostError,
  FeedError, DeviceError,
};

/**
 * An error from its serialised form ({name, message, details}); unknown names give a ShadergradError.
 * @param {{name?: string, message?: string, details?: Record<string, unknown>}} e
 * @returns {ShadergradError}
 */
export function errorFromJSON(e) {
  const C = ERROR_CLASSES[e.name] || ShadergradError;
  const err = new C(e.message || String(e), e.details || {});
  if (!ERROR_CLASSES[e.name] && e.name) err.name = e.name;
  return err;
}

/**
 * The serialisable form of any thrown value.
 * @param {unknown} err
 * @returns {{name: string, message: string, details: Record<string, unknown>}}
 */
export function errorToJSON(err) {
  if (err instanceof Error) {
    const details = /** @type {any} */ (err).details;
    let plain = {};
    try { plain = details ? JSON.parse(JSON.stringify(details)) : {}; } catch { plain = {}; }
    return { name: err.name, message: err.message, details: plain };
  }
  return { name: 'Error', message: String(err), details: {} };
}
