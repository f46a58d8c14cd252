// A TypeScript program using the web runtime's public API by package name, as an application would after
// `npm install shadergrad`: compiled with `tsc --strict --noEmit` against the package's shadergrad.d.ts by
// tests/web_package_check.mjs (ctest web_typescript_consumer), never run. The @ts-expect-error lines are misuses the
// types must refuse (an unused directive fails the compile: the types are not `any`).
import {
  BUNDLE_FORMAT, BundleError, FeedError, VERSION, type Bundle, type CheckReport, type Outputs, type Runtime,
  type WorkerRuntime, compare, createRuntime, createWorkerRuntime, loadBundle, loadWeights, saveWeights,
  checkpointBytes, checkpointWeights, withWeights, chooseWebGPUPlan, errorFromJSON,
} from 'shadergrad';

const version: string = `${VERSION} reads ${BUNDLE_FORMAT}`;

/** One prediction and one training step on the main thread, new weights written without recompiling. */
async function mainThread(x: Float32Array, labels: Int32Array): Promise<number> {
  const rt: Runtime = await createRuntime('/mlp/bundle.json', { backend: 'auto', compile: 'lazy' });
  console.log(rt.backend, rt.webgpuPlan?.name ?? 'webgl2', rt.attempts.map((a) => `${a.backend}: ${a.reason}`));
  const { probs } = await rt.run('infer', { x });
  const out: Outputs = await rt.run('train', { x, labels });
  await rt.prepare(['train']);
  const w: Float32Array = await rt.read('1.weight');
  await rt.write('1.weight', w.map((v) => v * 0.5));
  const kernels: number = rt.plan('infer').kernels.length;
  const live = rt.liveObjects();
  if (live) console.log(live.buffers, live.pipelines_created);
  const report: CheckReport = await rt.runChecks();
  console.log(report.ok, kernels, rt.stats.setup_ms, probs.length);
  rt.dispose();
  return out.loss[0];
}

/** The same in a Worker, started from weights saved in IndexedDB (or a checkpoint the user picked). */
async function inWorker(x: Float32Array, checkpoint?: ArrayBuffer): Promise<WorkerRuntime> {
  const bundle: Bundle = await loadBundle('/mlp/bundle.json', { shaders: 'lazy' });
  const found = await loadWeights(bundle);
  const restored = checkpoint ? withWeights(bundle, await checkpointWeights(bundle, checkpoint))
    : found.weights ? withWeights(bundle, found.weights) : bundle;
  const wr = await createWorkerRuntime(restored, { backend: 'webgpu', webgpuPlan: 'auto' });
  const { probs } = await wr.run('infer', { x }, { transfer: true });
  await wr.write('1.bias', new Float32Array(128), { transfer: true });
  const b: Float32Array = await wr.read('1.bias');
  const live = await wr.liveObjects();
  console.log(probs.length, b.length, live?.buffers, wr.plan('infer').kernels.length, wr.bundle.model);
  await saveWeights(wr);
  const bytes: Uint8Array = await checkpointBytes(wr);
  console.log(bytes.byteLength, wr.stats.first_run, (await wr.prepare([])).shader_cache.hits);
  const fromUrl = await createWorkerRuntime(new URL('/mlp/bundle.json', 'http://127.0.0.1/'));
  await fromUrl.dispose();
  return wr;
}

/** Errors as classes, comparisons, the plan choice. */
function helpers(e: unknown): string {
  if (e instanceof FeedError) return `${e.name}: ${String(e.details.input)}`;
  if (e instanceof BundleError) return e.message;
  const c = compare([0, 0], [0, 0], { rel: 1e-4 });
  const chosen = chooseWebGPUPlan({ isFallbackAdapter: true }, [], 'auto');
  return `${c.ok} ${'plan' in chosen ? chosen.plan.name : chosen.reason} ${errorFromJSON({ name: 'FeedError' }).name}`;
}

async function misuses(rt: Runtime, wr: WorkerRuntime): Promise<void> {
  // @ts-expect-error a program name is a string
  await rt.run(1, {});
  // @ts-expect-error feeds are arrays of numbers
  await rt.run('infer', { x: 'pixels' });
  // @ts-expect-error write() takes the values
  await wr.write('1.weight');
  // @ts-expect-error read() resolves to a Float32Array, not a string
  const s: string = await wr.read('1.weight');
  // @ts-expect-error a WorkerRuntime cannot take a fetch function (it cannot cross to the worker)
  await createWorkerRuntime('/mlp/bundle.json', { fetch: globalThis.fetch });
  // @ts-expect-error no such backend
  await createRuntime('/mlp/bundle.json', { backend: 'webgl1' });
  // @ts-expect-error liveObjects() of a WorkerRuntime is a promise
  console.log(wr.liveObjects().buffers, s);
}

export { version, mainThread, inWorker, helpers, misuses };
