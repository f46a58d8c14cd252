// The JavaScript runtime as the npm package `shadergrad` (runtime/web/package.json), as a user gets it: `npm pack`
// of runtime/web into a temporary directory, the tarball installed offline into a temporary consumer project, then
//   pack        (ctest web_npm_pack): the tarball holds every module of the runtime and its types, nothing else; the
//               version follows the bundle format (0.N.P reads shadergrad-bundle/N: N = BUNDLE_FORMAT's number, the
//               version equal to the entry's VERSION); Node imports it by package name: every export of the entry
//               resolves, deep imports are closed by "exports", and the package loads a bundle (a fuzz corpus seed,
//               its files made up in memory)
//   typescript  (ctest web_typescript_consumer): tests/web_consumer/consumer.ts, a program using the public API by
//               package name, compiled with `tsc --strict --noEmit` against the package's shadergrad.d.ts (Node
//               resolution with DOM types, and bundler resolution without them); its @ts-expect-error lines are
//               misuses the types must refuse
// Usage: node tests/web_package_check.mjs pack|typescript. Exit status 0 = every assertion held.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { ensureNpmPackage } from './npm_deps.mjs';

const mode = process.argv[2];
if (mode !== 'pack' && mode !== 'typescript') {
  console.error('usage: node web_package_check.mjs pack|typescript');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const runtimeDir = path.resolve(here, '../runtime/web');
const npm = (args, cwd) => execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'],
                                        { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sg_npm_'));
try {
  // npm pack: the package as published
  const packed = JSON.parse(npm(['pack', '--json', '--pack-destination', tmp], runtimeDir))[0];
  const tarball = path.join(tmp, packed.filename);
  const pkg = JSON.parse(fs.readFileSync(path.join(runtimeDir, 'package.json'), 'utf8'));
  assert.equal(packed.name, 'shadergrad');
  assert.equal(packed.filename, `shadergrad-${pkg.version}.tgz`);
  // the consumer project: the tarball installed offline (the package has no dependencies)
  const app = path.join(tmp, 'app');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  npm(['install', '--offline', '--no-package-lock', tarball], app);
  const installed = path.join(app, 'node_modules/shadergrad');
  assert.ok(fs.existsSync(path.join(installed, 'package.json')), 'the package is installed in the consumer');

  if (mode === 'pack') {
    // every module of the runtime (the entry imports most; worker.js is loaded by URL), the types, the README
    const modules = fs.readdirSync(runtimeDir).filter((f) => f.endsWith('.js')).sort();
    const files = packed.files.map((f) => f.path).sort();
    assert.deepEqual(files, [...modules, 'README.md', 'package.json', 'shadergrad.d.ts'].sort(),
                     'the files of the tarball: every runtime module, the types, README.md, package.json');
    // the version rule: 0.N.P reads bundle format N (and the older ones BUNDLE_FORMATS lists)
    const probe = `
      import * as sg from 'shadergrad';
      import pkg from 'shadergrad/package.json' with { type: 'json' };
      const out = { exports: Object.keys(sg).sort(), version: sg.VERSION, pkg: pkg.version, format: sg.BUNDLE_FORMAT,
                    formats: sg.BUNDLE_FORMATS, resolved: import.meta.resolve('shadergrad') };
      for (const deep of ['shadergrad/bundle.js', 'shadergrad/worker.js'])
        try { await import(deep); out[deep] = 'imported'; } catch (e) { out[deep] = e.code; }
      console.log(JSON.stringify(out));`;
    const r = JSON.parse(execFileSync(process.execPath, ['--no-warnings', '--input-type=module', '-e', probe],
                                      { cwd: app, encoding: 'utf8' }));
    assert.equal(r.resolved, pathToFileURL(path.join(fs.realpathSync(installed), 'shadergrad.js')).href,
                 'shadergrad resolves to the installed package\'s entry');
    for (const name of ['createRuntime', 'createWorkerRuntime', 'loadBundle', 'Runtime', 'WorkerRuntime', 'Bundle',
                        'runChecks', 'compare', 'chooseWebGPUPlan', 'selectBackend', 'withWeights', 'loadWeights',
                        'saveWeights', 'forgetWeights', 'checkpointBytes', 'checkpointWeights', 'BundleError',
                        'FeedError', 'ShadergradError', 'VERSION', 'BUNDLE_FORMAT'])
      assert.ok(r.exports.includes(name), `export ${name}`);
    assert.equal(r.pkg, r.version, 'package.json version = the entry\'s VERSION');
    const [major, minor] = r.version.split('.').map(Number);
    assert.equal(major, 0, 'major version 0');
    assert.equal(minor, Number(r.format.split('/')[1]), `version ${r.version}: its minor is the bundle format ${r.format}`);
    assert.ok(r.formats.includes(r.format));
    assert.equal(r['shadergrad/bundle.js'], 'ERR_PACKAGE_PATH_NOT_EXPORTED', 'deep imports are closed by "exports"');
    // the installed package at work in Node: a bundle loaded and checked, a clear error for a bad argument
    const load = `
      import fs from 'node:fs';
      import { loadBundle, createWorkerRuntime, compare } from 'shadergrad';
      import { fetchFrom, seedFiles } from ${JSON.stringify(pathToFileURL(path.join(here, 'fuzz/bundle_files.mjs')).href)};
      const files = seedFiles(fs.readFileSync(${JSON.stringify(path.join(here, 'fuzz/corpus/bundle/mlp_infer_both.json'))}, 'utf8'));
      const base = 'http://pack.invalid/b/';
      const b = await loadBundle(base + 'bundle.json', { fetch: fetchFrom(files, base), shaders: 'all' });
      const c = await b.loadChecks();
      const out = { programs: b.programNames, plans: b.webgpuPlans.map((p) => p.name), runs: c.runs.length,
                    zeros: compare([0, 0], [0, 0], { rel: 1e-4 }).ok };
      try { await createWorkerRuntime('bundle.json'); } catch (e) { out.worker = e.name + ': ' + e.message; }
      console.log(JSON.stringify(out));`;
    const l = JSON.parse(execFileSync(process.execPath, ['--no-warnings', '--input-type=module', '-e', load],
                                      { cwd: app, encoding: 'utf8' }));
    assert.deepEqual(l.programs, ['infer']);
    assert.ok(l.plans.length > 0 && l.runs === 1 && l.zeros, JSON.stringify(l));
    assert.equal(l.worker, 'ShadergradError: Worker is not available in this context');
    console.log(`web_npm_pack: ${packed.filename} (${packed.files.length} files, ${packed.size} bytes) installed ` +
                `offline and imported by name; version ${r.version} reads ${r.format}`);
  } else {
    // tsc --strict against the installed package's types, twice: a Node project (NodeNext resolution, DOM types from
    // the lib option) and a bundler project without DOM in its libs (shadergrad.d.ts references the DOM lib itself)
    const tscDir = ensureNpmPackage('typescript');
    const tsc = path.join(tscDir, 'bin/tsc');
    fs.copyFileSync(path.join(here, 'web_consumer/consumer.ts'), path.join(app, 'consumer.ts'));
    fs.copyFileSync(path.join(here, 'web_consumer/tsconfig.json'), path.join(app, 'tsconfig.json'));
    const run = (args) => {
      try {
        return { ok: true, out: execFileSync(process.execPath, [tsc, ...args], { cwd: app, encoding: 'utf8' }) };
      } catch (e) {
        return { ok: false, out: `${e.stdout}${e.stderr}` };
      }
    };
    const node = run(['--strict', '--noEmit', '-p', 'tsconfig.json']);
    assert.ok(node.ok, `tsc --strict (NodeNext, lib ES2022 + DOM):\n${node.out}`);
    const bundler = run(['--strict', '--noEmit', '-p', 'tsconfig.json', '--module', 'ESNext', '--moduleResolution',
                         'Bundler', '--lib', 'ES2022']);
    assert.ok(bundler.ok, `tsc --strict (Bundler, lib ES2022):\n${bundler.out}`);
    const ts = JSON.parse(fs.readFileSync(path.join(tscDir, 'package.json'), 'utf8')).version;
    console.log(`web_typescript_consumer: tests/web_consumer/consumer.ts compiles with tsc ${ts} --strict against ` +
                `${packed.filename}'s shadergrad.d.ts (NodeNext and Bundler resolution); its misuses are refused`);
  }
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
