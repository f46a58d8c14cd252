// The browser benchmarks' static file server (bench/web_bench.mjs, bench/web_kernel_ab.mjs): `root` at /, bench/web/
// at /_bench/, `npmDir` at /_npm/, every response cross-origin isolated (COOP + COEP: SharedArrayBuffer, so the wasm
// plan's threads run); paths outside their directory and directories are 404. Listening on 127.0.0.1 at a free port.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const benchWeb = path.join(path.dirname(fileURLToPath(import.meta.url)), 'web');
const types = { '.html': 'text/html', '.js': 'text/javascript', '.json': 'application/json' };

/** Starts the server; resolves to { server, origin } (close it with server.close()). */
export async function startBenchServer(root, npmDir) {
  const server = http.createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url, 'http://127.0.0.1').pathname);
    const [base, sub] = rel.startsWith('/_bench/') ? [benchWeb, rel.slice(7)]
      : rel.startsWith('/_npm/') ? [npmDir, rel.slice(5)] : [root, rel];
    const file = path.resolve(base, '.' + sub);
    const h = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
    if (!file.startsWith(base + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, h);
      res.end();
      return;
    }
    res.writeHead(200, { ...h, 'content-type': types[path.extname(file)] || 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, origin: `http://127.0.0.1:${server.address().port}` };
}
