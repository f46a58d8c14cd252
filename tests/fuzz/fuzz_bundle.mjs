// Deterministic mutation fuzzer of the web runtime's bundle loader (runtime/web/bundle.js: loadBundle's parse and
// validate, Bundle.program/data/loadChecks): everything that runs before a GPU device is created.
//
// Usage: node tests/fuzz/fuzz_bundle.mjs [--runs N] [--seed S] [--replay-only] [--out DIR] CORPUS_DIR
//   CORPUS_DIR  tests/fuzz/corpus/bundle: seed bundles (a bundle.json from `shadergrad export`, compacted) and
//               regression cases ({"fuzz_case": {"seed": FILE, "bundle": TEXT, "drop": [FILE...],
//               "truncate": {FILE: BYTES}, "flip": {FILE: [OFFSET...]}, "throwOn": [FILE...]}}: the seed's files
//               with bundle.json replaced by TEXT and the file edits applied; instead of TEXT, "set": [[PATH,
//               VALUE]...] and "delete": [PATH...] edit the seed's bundle.json, PATH a list of keys).
//   --runs N    mutations after the replay (default 2000); --seed S the PRNG seed (default 1): the same N and S
//               give the same inputs on every machine.
//   --out DIR   where a failing case is written as a regression case (default: the current directory).
//   --keep-going  go on after a finding (one case written per kind of finding).
// The files a bundle.json names are made up in memory: every shader file a short source, every data file a
// safetensors file whose header puts each referenced tensor exactly at the offset bundle.json gives (F32, shape
// [bytes / 4]). A mutation edits bundle.json (a value's type or size, a deleted key, a duplicated or removed array
// element, another format, byte flips, truncation) or the files (a shader or data file missing, a data file
// truncated or its header's bytes flipped, a fetch that throws).
// Property: each input loads, or is refused with the runtime's own error class (ShadergradError) whose message names
// the file at fault (details.file, also in the message). Anything else (TypeError, RangeError, an error without the
// file, a case running longer than --case-ms, default 5000, on a Worker watched by the main thread) is a finding:
// the process prints it, writes the case and exits 1. Exit 0: every case held.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

import { mulberry32 } from '../mulberry32.mjs';
import { fetchFrom, seedFiles } from './bundle_files.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const runtimeDir = path.resolve(here, '../../runtime/web');

// ---- deterministic PRNG (mulberry32) -------------------------------------------------------------------------
function prng(seed) {
  const next = mulberry32(seed);
  return { next, int: (n) => Math.floor(next() * n), pick: (xs) => xs[Math.floor(next() * xs.length)] };
}

// ---- mutations -----------------------------------------------------------------------------------------------
const ODD_VALUES = [null, true, false, 0, -1, 1.5, -0, 2 ** 31, 2 ** 53 + 2, 1e308, -1e308, '', 'x', '4', [], {}, [0],
                    [1, 2, 3], { a: 1 }, 'shadergrad-bundle/1', 'shadergrad-bundle/4', '__proto__', 'constructor'];

function paths(x, at = [], out = []) {
  out.push(at);
  if (x && typeof x === 'object') for (const k of Object.keys(x)) paths(x[k], [...at, k], out);
  return out;
}
const get = (x, p) => p.reduce((o, k) => o?.[k], x);

function mutateJson(json, r) {
  const all = paths(json).filter((p) => p.length);
  const p = r.pick(all);
  const parent = get(json, p.slice(0, -1)), key = p[p.length - 1], v = parent[key];
  switch (r.int(8)) {
    case 0: if (Array.isArray(parent)) parent.splice(Number(key), 1); else delete parent[key]; break;
    case 1: parent[key] = structuredClone(r.pick(ODD_VALUES)); break;
    case 2: parent[key] = typeof v === 'number' ? String(v) : typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : [v]; break;
    case 3: if (typeof v === 'number') parent[key] = r.pick([-v, v * 4096, v + 1, v - 1, v + 0.5, 2 ** 60]); else parent[key] = -1; break;
    case 4: if (Array.isArray(v) && v.length) v.push(structuredClone(r.pick(v))); else parent[key] = structuredClone(get(json, r.pick(all))); break;
    case 5: if (Array.isArray(v)) v.reverse(); else if (v && typeof v === 'object') parent[key] = Object.values(v); else parent[key] = { value: v }; break;
    case 6: parent[key] = structuredClone(get(json, r.pick(all))); break;  // a value from elsewhere (often dangling)
    default: if (typeof v === 'string') parent[key] = v.slice(0, r.int(v.length + 1)) + r.pick(['', '/', '../', 'x', '\u0000']); else delete parent[key];
  }
}

function mutateBytes(text, r) {
  const b = Buffer.from(text);
  switch (r.int(3)) {
    case 0: for (let i = 1 + r.int(4); i > 0; --i) b[r.int(b.length)] ^= 1 << r.int(8); return b.toString('latin1');
    case 1: return text.slice(0, r.int(text.length));
    default: { const i = r.int(text.length); return text.slice(0, i) + r.pick(['{', '}', '[', ']', ',', '"', '0', '-', 'e9']) + text.slice(i); }
  }
}

/** One fuzz case: {seed, bundle, drop, truncate, flip, throwOn}. */
function mutateCase(seedName, seedText, files, r) {
  const c = { seed: seedName, bundle: seedText, drop: [], truncate: {}, flip: {}, throwOn: [] };
  const json = JSON.parse(seedText);
  let structural = false;
  for (let n = 1 + r.int(3); n > 0; --n) {
    const what = r.int(10);
    if (what < 6) { mutateJson(json, r); structural = true; }
    else if (what === 6) c.drop.push(r.pick([...files.keys()].filter((f) => f !== 'bundle.json')));
    else if (what === 7) { const f = r.pick([...files.keys()].filter((x) => x.endsWith('.safetensors'))); if (f) c.truncate[f] = r.int(files.get(f).length); }
    else if (what === 8) { const f = r.pick([...files.keys()].filter((x) => x.endsWith('.safetensors'))); if (f) c.flip[f] = [r.int(Math.min(files.get(f).length, 600))]; }
    else c.throwOn.push(r.pick([...files.keys()]));
  }
  c.bundle = structural ? JSON.stringify(json) : seedText;
  if (r.int(6) === 0) c.bundle = mutateBytes(c.bundle, r);
  return c;
}

/** bundle.json of a case: its text, or the seed's with `set` ([[path, value]...]) and `delete` ([path...]) applied. */
function caseBundle(c, seeds) {
  if (typeof c.bundle === 'string') return c.bundle;
  const json = JSON.parse(seeds.get(c.seed).text);
  for (const [p, v] of c.set || []) get(json, p.slice(0, -1))[p[p.length - 1]] = v;
  for (const p of c.delete || []) delete get(json, p.slice(0, -1))[p[p.length - 1]];
  return JSON.stringify(json);
}

function caseFiles(c, seeds) {
  if (!seeds.has(c.seed)) throw new Error(`fuzz case: unknown seed '${c.seed}'`);
  const files = new Map(seeds.get(c.seed).files);
  files.set('bundle.json', caseBundle(c, seeds));
  for (const f of c.drop || []) files.delete(f);
  for (const [f, n] of Object.entries(c.truncate || {})) if (files.has(f)) files.set(f, files.get(f).slice(0, n));
  for (const [f, offs] of Object.entries(c.flip || {}))
    if (files.has(f)) { const b = files.get(f).slice(); for (const o of offs) if (o < b.length) b[o] ^= 0x5a; files.set(f, b); }
  return files;
}

// ---- the property --------------------------------------------------------------------------------------------
const BASE = 'http://fuzz.invalid/b/';

async function runCase(c, seeds, lib) {
  const files = caseFiles(c, seeds);
  const fetchStub = fetchFrom(files, BASE, new Set(c.throwOn || []));
  try {
    const b = await lib.loadBundle(`${BASE}bundle.json`, { fetch: fetchStub, shaders: 'all' });
    for (const name of b.programNames) b.program(name);
    for (const p of b.persistent || []) b.data(p.data);
    if (b.json.checks) await b.loadChecks();
    return { bad: null, loaded: true };
  } catch (e) {
    if (!(e instanceof lib.ShadergradError))
      return { bad: `${e?.name ?? typeof e} (not a ShadergradError): ${e?.message ?? String(e)}\n${e?.stack ?? ''}` };
    const file = e.details?.file;
    if (typeof file !== 'string' || !file || !e.message.includes(file))
      return { bad: `${e.name} without the file it is about (details.file ${JSON.stringify(file)}): ${e.message}` };
    return { bad: null, loaded: false };
  }
}

function loadSeeds(dir) {
  const seeds = new Map(), cases = [];
  for (const name of fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
    const text = fs.readFileSync(path.join(dir, name), 'utf8');
    const j = JSON.parse(text);
    if (j.fuzz_case) cases.push({ name, c: j.fuzz_case });
    else { seeds.set(name, { text, files: seedFiles(text) }); cases.push({ name, c: { seed: name, bundle: text } }); }
  }
  return { seeds, cases };
}

// ---- worker: runs the cases, reporting each before it starts -------------------------------------------------
async function workerMain({ corpus, runs, seed, keepGoing }) {
  const lib = { ...(await import(pathToFileURL(path.join(runtimeDir, 'bundle.js')))),
                ...(await import(pathToFileURL(path.join(runtimeDir, 'errors.js')))) };
  const { seeds, cases } = loadSeeds(corpus);
  const seedNames = [...seeds.keys()];
  if (!seedNames.length) throw new Error(`${corpus}: no seed bundle`);
  const r = prng(seed);
  const counts = { replayed: 0, mutations: 0, loaded: 0, refused: 0, findings: 0 };
  const check = async (label, c) => {
    parentPort.postMessage({ start: label, c });
    const { bad, loaded } = await runCase(c, seeds, lib);
    if (bad) { parentPort.postMessage({ finding: label, c, bad }); ++counts.findings; return keepGoing; }
    ++counts[loaded ? 'loaded' : 'refused'];
    return true;
  };
  for (const { name, c } of cases) {
    if (!(await check(`replay ${name}`, c))) return;
    ++counts.replayed;
  }
  for (let i = 0; i < runs; ++i) {
    const s = r.pick(seedNames);
    const c = mutateCase(s, seeds.get(s).text, seeds.get(s).files, r);
    if (!(await check(`mutation ${i} (seed ${seed})`, c))) return;
    ++counts.mutations;
  }
  parentPort.postMessage({ done: counts });
}

// ---- main: the watchdog ---------------------------------------------------------------------------------------
function main() {
  const args = process.argv.slice(2);
  const opt = { runs: 2000, seed: 1, caseMs: 5000, out: '.', corpus: null };
  for (let i = 0; i < args.length; ++i) {
    const a = args[i];
    if (a === '--runs') opt.runs = Number(args[++i]);
    else if (a === '--seed') opt.seed = Number(args[++i]);
    else if (a === '--case-ms') opt.caseMs = Number(args[++i]);
    else if (a === '--out') opt.out = args[++i];
    else if (a === '--replay-only') opt.runs = 0;
    else if (a === '--keep-going') opt.keepGoing = true;
    else opt.corpus = a;
  }
  if (!opt.corpus || !Number.isInteger(opt.runs) || opt.runs < 0 || !Number.isInteger(opt.seed)) {
    console.error('usage: node fuzz_bundle.mjs [--runs N] [--seed S] [--replay-only] [--out DIR] [--case-ms MS] CORPUS_DIR');
    process.exit(2);
  }
  const t0 = Date.now();
  const w = new Worker(fileURLToPath(import.meta.url), { workerData: { corpus: opt.corpus, runs: opt.runs, seed: opt.seed, keepGoing: !!opt.keepGoing } });
  let current = null, timer = null, failed = false;
  const seen = new Set();
  const fail = (label, c, why) => {
    failed = true;
    const kind = why.split('\n')[0].replace(/\d+/g, 'N');
    if (seen.has(kind)) return;  // --keep-going: one case per kind of finding
    seen.add(kind);
    const file = path.join(opt.out, `bundle-finding-${Date.now()}.json`);
    const { throwOn, ...rest } = c;
    fs.writeFileSync(file, JSON.stringify({ fuzz_case: { ...rest, ...(throwOn?.length ? { throwOn } : {}) } }));
    console.error(`FINDING at ${label}: ${why}\ncase written to ${file}`);
  };
  w.on('message', (m) => {
    if (m.start) {
      current = m;
      clearTimeout(timer);
      timer = setTimeout(() => { fail(current.start, current.c, `no answer after ${opt.caseMs} ms (a hang)`); w.terminate(); }, opt.caseMs);
    } else if (m.finding) fail(m.finding, m.c, m.bad);
    else if (m.done) {
      clearTimeout(timer);
      const s = ((Date.now() - t0) / 1000).toFixed(1);
      console.log(`fuzz_bundle: ${m.done.replayed} corpus cases replayed, ${m.done.mutations} mutations (seed ${opt.seed}) ` +
                  `in ${s} s: ${m.done.loaded} loaded, ${m.done.refused} refused with a ShadergradError naming the file, ` +
                  `${m.done.findings} findings (${seen.size} kinds)`);
    }
  });
  w.on('error', (e) => { clearTimeout(timer); failed = true; console.error(`fuzz_bundle: the worker failed: ${e.stack || e}`); });
  w.on('exit', (code) => { clearTimeout(timer); process.exit(failed || code !== 0 ? 1 : 0); });
}

if (isMainThread) main();
else workerMain(workerData).catch((e) => { console.error(e.stack || e); process.exit(3); });
