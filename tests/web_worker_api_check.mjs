// A WorkerRuntime has the API of the main-thread Runtime (issue 38): createWorkerRuntime takes the same bundle
// argument as createRuntime (a URL, a loaded Bundle, withWeights() of one: weights saved in IndexedDB and restored),
// and has write(), plan(), liveObjects() and `bundle`; errors cross the worker as their classes; options that cannot
// be sent to a worker are refused by name; calls after dispose() reject. In headless Chromium (SwiftShader) on WebGL2
// and WebGPU, with the runtime of this source tree (runtime/web/) in place of the bundle's embedded copy.
//
// Usage: node tests/web_worker_api_check.mjs SHADERGRAD_CLI   (ctest: web_worker_api)
// Exports a small MLP bundle with the CLI into a temporary directory, runs tests/web/check_page.js sgWorkerApi
// there and asserts. Exit 0 = every assertion held, 1 = one failed (the AssertionError says which), 2 = the
// environment lacks chromium or playwright-core.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { guard, loadChromium, withCheckPage } from './browser.mjs';
import { ensureNpmPackage } from './npm_deps.mjs';

const cli = process.argv[2];
if (!cli || !fs.existsSync(cli)) {
  console.error('usage: node web_worker_api_check.mjs SHADERGRAD_CLI');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
ensureNpmPackage('playwright-core');
const chromium = await loadChromium();
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_worker_api_'));
try {
  const dir = path.join(root, 'mlp');
  execFileSync(cli, ['export', '--model', 'mlp', '--batch', '4', '--infer-batch', '2', '--check-steps', '1',
                     '--webgpu-plans', 'cpu', '--out', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
  fs.rmSync(path.join(dir, 'runtime'), { recursive: true });
  fs.cpSync(path.join(here, '../runtime/web'), path.join(dir, 'runtime'), { recursive: true });
  const log = [];
  const results = await withCheckPage(chromium, root, { isolated: true, console: log }, async ({ page }) => {
    const out = {};
    for (const backend of ['webgl2', 'webgpu'])
      out[backend] = await guard(page.evaluate(([b]) => window.sgWorkerApi('mlp', b), [backend]), `sgWorkerApi ${backend}`, 240);
    return out;
  });
  for (const [backend, r] of Object.entries(results)) {
    const what = (s) => `${backend}: ${s}\n${JSON.stringify(r, null, 1).slice(0, 6000)}\nconsole: ${log.join('\n')}`;
    assert.equal(r.error, undefined, what('the page threw'));
    // a Bundle with weights restored from IndexedDB: the worker starts from them (it fetched "[object Object]" before)
    assert.equal(r.found, 'loaded', what('saved weights found'));
    assert.deepEqual(r.create_from_bundle, { ok: true, backend, same_bundle: true }, what('createWorkerRuntime(bundle)'));
    assert.ok(r.restored_equal.length > 0 && r.restored_equal.every(Boolean), what('restored weights read back'));
    for (const [k, e] of Object.entries(r.infer_restored)) assert.ok(e <= 1e-5, what(`infer ${k} from restored weights`));
    // the same API: every Runtime method and property, methods as methods
    assert.deepEqual(r.api.missing, [], what('Runtime members the WorkerRuntime lacks'));
    assert.deepEqual(r.api.kinds, [], what('members that are a method on one and not on the other'));
    for (const m of ['write', 'plan', 'liveObjects', 'bundle', 'read', 'run', 'prepare', 'runChecks', 'dispose'])
      assert.ok(r.api.worker.includes(m), what(`WorkerRuntime.${m}`));
    // write(): new weights into the running worker
    assert.ok(r.written_equal.every(Boolean), what('written weights read back'));
    assert.ok(r.infer_changed, what('the written weights change the outputs'));
    for (const [k, e] of Object.entries(r.infer_written)) assert.ok(e <= 1e-5, what(`infer ${k} after write`));
    assert.equal(r.write_errors.wrong?.name, 'FeedError', what('write of a wrong count'));
    assert.match(r.write_errors.wrong.message, /write\('1\.weight'\): 3 values for shape \[/, what('write message'));
    assert.ok(r.write_errors.wrong_is_feed_error, what('the FeedError crosses the worker as its class'));
    assert.equal(r.write_errors.unknown?.name, 'BundleError', what('write of an unknown name'));
    assert.match(r.write_errors.unknown.message, /no persistent value 'no\.such\.weight'/, what('unknown name message'));
    // plan(), liveObjects(), properties
    assert.deepEqual(r.plan.worker, r.plan.main, what('plan(infer)'));
    if (backend === 'webgpu') {
      assert.equal(typeof r.live.worker?.buffers, 'number', what('liveObjects on WebGPU'));
      assert.equal(r.live.worker.pipelines_created, r.live.main.pipelines_created, what('pipelines created'));
    } else {
      assert.equal(r.live.worker, null, what('liveObjects on WebGL2'));
    }
    assert.deepEqual(r.props.backend, [backend, backend], what('backend'));
    assert.deepEqual(r.props.programs[0], r.props.programs[1], what('programs'));
    assert.equal(r.props.webgpuPlan[0], r.props.webgpuPlan[1], what('webgpuPlan'));
    assert.ok(r.props.stats, what('stats'));
    // from a URL: the page has the bundle's description; saveWeights reads the worker's weights through it
    assert.equal(r.from_url.model, 'mlp', what('bundle of a URL-created worker'));
    assert.equal(r.from_url.format, 'shadergrad-bundle/3', what('format'));
    assert.ok(r.from_url.plan > 0, what('plan() of a URL-created worker'));
    assert.equal(r.from_url.saved?.values, r.from_url.persistent, what('saveWeights(worker runtime)'));
    assert.match(r.from_url.data_error ?? '', /loaded in the worker: read a persistent value with rt\.read\(name\)/,
                 what('data() of weights living in the worker'));
    // refused by name
    assert.match(r.refused.object?.message ?? '', /createWorkerRuntime: expected the URL of bundle\.json .* or a loaded Bundle/,
                 what('a plain object'));
    assert.doesNotMatch(r.refused.object.message, /object%20Object|HTTP 404/, what('no fetch of [object Object]'));
    assert.match(r.refused.fetch?.message ?? '', /option 'fetch' cannot be sent to a Worker/, what('the fetch option'));
    // after dispose
    for (const k of ['run', 'read']) {
      assert.equal(r.after_dispose[k].pending, undefined, what(`${k} after dispose stays pending`));
      assert.match(r.after_dispose[k].message ?? '', /the runtime was disposed/, what(`${k} after dispose`));
    }
    if (process.env.SG_VERBOSE) console.log(JSON.stringify(r));
    console.log(`web_worker_api ${backend}: WorkerRuntime has the Runtime's API (${r.api.runtime.length} members); ` +
                'restored weights, write(), plan(), liveObjects() and errors as on the main thread');
  }
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
