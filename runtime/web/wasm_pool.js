// shadergrad web runtime — the wasm backend's pool of Workers (wasm.js starts it where the memory can be shared):
// each Worker instantiates the bundle's module on the same shared linear memory, with its own shadow stack, and
// waits; a kernel with enough work (bundle.json `wasm.threads.parallel_work`, the rule of the native cpu-simd
// backend's thread pool) has its workgroups cut into min(workgroups, threads x chunks_per_thread) contiguous chunks,
// which the calling thread and the Workers take in turn until none is left; the call returns when every chunk is
// done (one barrier per kernel: kernels run in order). A workgroup computes the same values whatever thread runs it,
// so the results are those of one thread, bit for bit.
//
// The job is published through a small SharedArrayBuffer of control words (Atomics, sequentially consistent): the
// chunk counter NEXT (64 bits: the job's generation in the high half, the next chunk in the low half), the job's
// entry, binding table, workgroups and chunk count in one of two slots (by the generation's parity), LEFT (chunks of
// the job not yet finished) and GEN (bumped per job: what idle Workers Atomics.wait on). A Worker takes chunk c only
// by moving NEXT from (gen, c) to (gen, c + 1), so one that wakes late for a finished job takes nothing of the next;
// the slot it read stays as written while its generation is current (the next job writes the other slot).
//
// Waiting for the last chunks: Atomics.wait where the calling thread may block (a Worker, Node); the page's main
// thread may not, so there it spins — it takes chunks itself first, so it spins at most for the chunks that other
// threads are finishing, and it would be busy for the whole kernel on one thread anyway.
const NEXT = 0;          // BigInt64 word 0 (bytes 0..7)
const GEN = 2, LEFT = 3, STOP = 4, ERROR = 5, ERRLEN = 6, SCRATCH = 7;  // Int32 words
const SLOT = 8;          // two slots of 4 words: entry index, binding table, workgroups, chunks
const ERRTEXT = 64;      // bytes 64.. : the first error's text (UTF-8)
const ERRBYTES = 512;
const STALL_MS = 120000; // no chunk finished for this long: a Worker is gone

const nowMs = () => (typeof performance === 'object' ? performance.now() : Date.now());

/** The control words of a pool over `ctl` (a SharedArrayBuffer). */
export function controlViews(ctl) {
  return { i32: new Int32Array(ctl), i64: new BigInt64Array(ctl, 0, 1), bytes: new Uint8Array(ctl) };
}

/** Records the first error of a job (its text), for the calling thread to throw. */
function recordError(v, e) {
  if (Atomics.compareExchange(v.i32, ERROR, 0, 1) !== 0) return;
  const text = new TextEncoder().encode(String(e?.message ?? e)).slice(0, ERRBYTES);
  v.bytes.set(text, ERRTEXT);
  Atomics.store(v.i32, ERRLEN, text.length);
}

/**
 * Takes chunks of the current job until none is left (or another job has started) and runs them with `fns` (the
 * entries in bundle order). Returns how many it ran; an entry's trap is recorded (the chunk counts as done).
 */
export function takeChunks(v, fns) {
  let done = 0;
  for (;;) {
    const next = Atomics.load(v.i64, NEXT);
    const gen = Number(next >> 32n), c = Number(next & 0xffffffffn), s = SLOT + 4 * (gen & 1);
    const id = Atomics.load(v.i32, s), table = Atomics.load(v.i32, s + 1);
    const total = Atomics.load(v.i32, s + 2), chunks = Atomics.load(v.i32, s + 3);
    if (c >= chunks) break;
    if (Atomics.compareExchange(v.i64, NEXT, next, next + 1n) !== next) continue;
    try {
      fns[id](table, BigInt(Math.floor(total * c / chunks)), BigInt(Math.floor(total * (c + 1) / chunks)));
    } catch (e) {
      recordError(v, e);
    }
    ++done;
  }
  return done;
}

/** The loop of a Worker of the pool: waits for a job, takes its chunks, until STOP. Never returns otherwise. */
export function workerLoop(v, fns) {
  let seen = Atomics.load(v.i32, GEN);
  for (;;) {
    Atomics.wait(v.i32, GEN, seen);
    seen = Atomics.load(v.i32, GEN);
    if (Atomics.load(v.i32, STOP)) return;
    const n = takeChunks(v, fns);
    if (n && Atomics.sub(v.i32, LEFT, n) === n) Atomics.notify(v.i32, LEFT);
  }
}

/** Workers running one kernel at a time with the calling thread. */
export class WasmPool {
  constructor(workers, ctl, fns, chunksPerThread) {
    this.workers = workers;
    this.ctl = ctl;
    this.v = controlViews(ctl);
    this.fns = fns;
    this.threads = workers.length + 1;
    this.chunksPerThread = chunksPerThread;
    this.gen = 0;
    try {  // may this thread block? (a page's main thread may not: TypeError)
      Atomics.wait(this.v.i32, SCRATCH, 1, 0);
      this.canBlock = true;
    } catch {
      this.canBlock = false;
    }
  }

  /**
   * Starts one Worker per stack top in `stacks`, each instantiating `module` on `memory`; resolves to the pool when
   * every Worker has its instance, rejects (and stops them) when one fails or none answers within 30 s.
   */
  static async start(module, memory, entries, stacks, chunksPerThread, exports, isNode) {
    const ctl = new SharedArrayBuffer(ERRTEXT + ERRBYTES);
    const url = new URL('./wasm_worker.js', import.meta.url);
    const NodeWorker = isNode ? (await import('node:worker_threads')).Worker : null;
    const workers = [];
    const ready = [];
    try {
      for (let i = 0; i < stacks.length; ++i) {
        const w = isNode ? new NodeWorker(url) : new Worker(url, { type: 'module', name: `shadergrad wasm ${i + 1}` });
        workers.push(w);
        ready.push(new Promise((resolve, reject) => {
          const onMessage = (m) => (m?.ready ? resolve() : reject(new Error(m?.error ?? 'unexpected message')));
          const onError = (e) => reject(new Error(`Worker ${i + 1}: ${e?.message ?? e}`));
          if (isNode) { w.once('message', onMessage); w.once('error', onError); }
          else { w.onmessage = (e) => onMessage(e.data); w.onerror = (e) => { e.preventDefault?.(); onError(e); }; }
        }));
        w.postMessage({ module, memory, ctl, entries, stackTop: stacks[i] });
      }
      let timer;
      const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer within 30 s')), 30000);
      });
      try {
        await Promise.race([Promise.all(ready), timeout]);
      } finally {
        clearTimeout(timer);
      }
    } catch (e) {
      for (const w of workers) w.terminate();
      throw e;
    }
    if (isNode) for (const w of workers) w.unref();  // idle Workers do not keep Node running
    const fns = entries.map((e) => exports[e]);
    return new WasmPool(workers, ctl, fns, chunksPerThread);
  }

  /** Runs entry `id` over workgroups [0, total) on every thread; returns when all are done. Throws the first trap. */
  run(id, table, total) {
    const v = this.v, g = this.gen = (this.gen + 1) >>> 0;
    const chunks = Math.min(total, this.threads * this.chunksPerThread), s = SLOT + 4 * (g & 1);
    Atomics.store(v.i32, s, id);
    Atomics.store(v.i32, s + 1, table);
    Atomics.store(v.i32, s + 2, total);
    Atomics.store(v.i32, s + 3, chunks);
    Atomics.store(v.i32, LEFT, chunks);
    Atomics.store(v.i64, NEXT, BigInt(g) << 32n);
    Atomics.store(v.i32, GEN, g | 0);
    Atomics.notify(v.i32, GEN);
    const n = takeChunks(v, this.fns);
    let left = n ? Atomics.sub(v.i32, LEFT, n) - n : Atomics.load(v.i32, LEFT);
    let since = left ? nowMs() : 0, last = left;
    while (left !== 0) {
      if (this.canBlock) Atomics.wait(v.i32, LEFT, left, 1000);
      else for (let k = 0; k < 4096 && Atomics.load(v.i32, LEFT) === left; ++k);
      left = Atomics.load(v.i32, LEFT);
      if (left !== last) { last = left; since = nowMs(); }
      else if (nowMs() - since > STALL_MS)
        throw new Error(`the pool's Workers finished no chunk for ${STALL_MS / 1000} s (a Worker is gone)`);
    }
    if (Atomics.load(v.i32, ERROR)) {
      const text = new TextDecoder().decode(v.bytes.slice(ERRTEXT, ERRTEXT + Atomics.load(v.i32, ERRLEN)));
      Atomics.store(v.i32, ERROR, 0);
      throw new Error(text);
    }
  }

  /** Stops and terminates the Workers. */
  stop() {
    Atomics.store(this.v.i32, STOP, 1);
    Atomics.add(this.v.i32, GEN, 1);
    Atomics.notify(this.v.i32, GEN);
    for (const w of this.workers) w.terminate();
    this.workers = [];
  }
}
