// shadergrad web runtime — the module Worker that hosts a Runtime for createWorkerRuntime() (worker_client.js).
// WebGL2 runs on an OffscreenCanvas here (seed article 003 §2.2: the main thread stays free). Messages:
//   {id, op: 'create', args: [source, options]}     -> {backend, attempts, webgpuPlan, caps, programs, stats, bundle}
//       source: the URL of bundle.json (bundle: {url, json}, the description for the page), or {bundle: MESSAGE}, a
//       Bundle loaded in the page (bundle.js bundleMessage: its files and initial values; bundle: null)
//   {id, op: 'run', args: [program, feeds]}        -> outputs (their buffers transferred, not copied)
//   {id, op: 'write', args: [name, values]}        -> undefined, after the persistent value was replaced
//   {id, op: 'prepare', args: [programs]}          -> stats (after compiling those programs' kernels)
//   {id, op: 'read' | 'timings' | 'liveObjects' | 'runChecks' | 'loseContextForTesting' | 'dispose', args}
//   {id, op: 'debugBegin', args: [program, feeds]}  -> {sources} (Runtime.debug: the session lives here)
//   {id, op: 'debugKernel', args: [i]}            -> [{value, data}] what kernel i wrote (data transferred)
//   {id, op: 'debugFinish' | 'debugAbort'}         -> the outputs (updates committed) | undefined
// Replies {id, ok: true, result} or {id, ok: false, error: {name, message, details}}.
import { bundleFromMessage } from './bundle.js';
import { createRuntime } from './runtime.js';
import { errorToJSON } from './errors.js';

let runtime = null;
let session = null;  // the DebugSession of debugBegin

const ops = {
  async create(source, options) {
    if (runtime) runtime.dispose();
    runtime = null;
    const fromPage = source !== null && typeof source === 'object';
    runtime = await createRuntime(fromPage ? bundleFromMessage(source.bundle) : source, options || {});
    return { backend: runtime.backend, attempts: runtime.attempts, webgpuPlan: runtime.webgpuPlan, caps: runtime.caps,
             programs: runtime.programs, stats: runtime.stats,
             bundle: fromPage ? null : { url: runtime.bundle.url.href, json: runtime.bundle.json } };
  },
  run: (program, feeds) => need().run(program, feeds),
  write: async (name, values) => { await need().write(name, values); },
  prepare: (programs) => need().prepare(programs),
  read: (name) => need().read(name),
  timings: () => need().timings(),
  liveObjects: () => need().liveObjects(),
  runChecks: (options) => need().runChecks(options),
  loseContextForTesting: () => need().loseContextForTesting(),
  async debugBegin(program, feeds) {
    if (session?.state === 'open') await session.abort();
    session = await need().debug(program, feeds);
    return { sources: session.sources };
  },
  async debugKernel(i) {
    if (!session || session.state !== 'open') throw new Error('the worker has no open debug session');
    if (i !== session.next) throw new Error(`debugKernel(${i}): the session's next kernel is ${session.next}`);
    const s = await session.step();
    session.steps.length = 0;  // the page keeps them
    return s.outputs.map((o) => ({ value: o.value, data: o.data }));
  },
  debugFinish: () => session.finish(),
  debugAbort: async () => { await session?.abort(); },
  dispose() { runtime?.dispose(); runtime = null; return true; },
};

function need() {
  if (!runtime) throw new Error('the worker has no runtime: call create first');
  return runtime;
}

/** ArrayBuffers of typed arrays in a result (transferred back instead of copied). */
function transferables(result) {
  if (ArrayBuffer.isView(result)) return [result.buffer];
  if (Array.isArray(result)) return result.filter((r) => ArrayBuffer.isView(r?.data)).map((r) => r.data.buffer);
  if (result && typeof result === 'object') return Object.values(result).filter(ArrayBuffer.isView).map((a) => a.buffer);
  return [];
}

self.onmessage = async (e) => {
  const { id, op, args } = e.data;
  try {
    if (!ops[op]) throw new Error(`unknown worker operation '${op}'`);
    const result = await ops[op](...(args || []));
    self.postMessage({ id, ok: true, result }, transferables(result));
  } catch (err) {
    self.postMessage({ id, ok: false, error: errorToJSON(err) });
  }
};
