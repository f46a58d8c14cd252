// shadergrad web runtime — one Worker of the wasm backend's pool (wasm_pool.js; a module Worker in a page or Worker,
// a worker_threads Worker in Node). Its one message: {module, memory, ctl, entries, stackTop}. It instantiates the
// bundle's module on the shared memory (the module's start function sees the data segments already copied and leaves
// the memory as it is), points the instance's __stack_pointer at its own stack region (stackTop: the end of
// wasm.threads.stack_bytes the runtime placed for it), answers {ready: true} (or {error}) and then takes chunks of
// each kernel the calling thread publishes until the pool stops.
import { controlViews, workerLoop } from './wasm_pool.js';

const isNode = typeof process === 'object' && typeof process.versions?.node === 'string';
const port = isNode ? (await import('node:worker_threads')).parentPort : self;
const post = (m) => port.postMessage(m);

function start({ module, memory, ctl, entries, stackTop }) {
  let fns;
  try {
    const instance = new WebAssembly.Instance(module, { env: { memory } });
    const sp = instance.exports.__stack_pointer;
    if (!(sp instanceof WebAssembly.Global)) throw new Error('the module exports no __stack_pointer');
    sp.value = stackTop;
    fns = entries.map((e) => {
      const f = instance.exports[e];
      if (typeof f !== 'function') throw new Error(`the module exports no function '${e}'`);
      return f;
    });
  } catch (e) {
    post({ error: `a pool Worker could not instantiate the module: ${e.message}` });
    return;
  }
  post({ ready: true });
  workerLoop(controlViews(ctl), fns);
  if (!isNode) self.close();
}

if (isNode) port.once('message', start);
else self.onmessage = (e) => start(e.data);
