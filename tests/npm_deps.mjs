// The npm packages of the tests (tests/package.json, versions pinned in tests/package-lock.json) for the node checks
// that ctest runs directly: `npm ci` in tests/ once when a package is missing, under the lock the C++ tests take
// for the same install (tests/test_web_util.h tests_with_npm), so that parallel tests do not install twice.
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** tests/ of the source tree. */
export const TESTS_DIR = path.dirname(fileURLToPath(import.meta.url));

/**
 * Makes sure tests/node_modules/PACKAGE is installed; returns its folder. Throws with npm's output when the install
 * fails (no network and no cache: run `npm ci` in tests/, or scripts/setup.sh).
 * @param {string} pkg
 */
export function ensureNpmPackage(pkg) {
  const dir = path.join(TESTS_DIR, 'node_modules', pkg);
  if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
  execSync(`flock /tmp/shadergrad-npm-ci.lock sh -c 'test -f node_modules/${pkg}/package.json || ` +
           "npm ci --no-audit --no-fund || npm install --no-audit --no-fund'", { cwd: TESTS_DIR, stdio: 'inherit' });
  return dir;
}
