// What the tests that drive the web runtime from node scripts need (tests/*.mjs; the browser ones share
// tests/browser.mjs for the launch and the servers): the browser tests (test_web_app, test_web_runtime,
// test_web_ops) Debian's chromium (a missing one fails the test, naming the package) and npm playwright-core, the
// Node WebGPU test (test_webgpu_ops) npm webgpu, in tests/node_modules (`npm ci` from tests/package-lock.json,
// once, under a lock shared with the other tests that install there).
#pragma once

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "golden_util.h"
#include "test_util.h"

namespace sg::testing {

/// The tests/ folder of the source tree with npm package `package` installed in tests/node_modules (`npm ci`
/// once, under a lock shared with the other tests that install there).
inline std::string tests_with_npm(const std::string& package) {
  const std::string tests = sg::golden::source_dir() + "/tests";
  if (std::filesystem::exists(tests + "/node_modules/" + package + "/package.json")) return tests;
  std::string out;
  const int rc = shell("cd '" + tests + "' && flock /tmp/shadergrad-npm-ci.lock sh -c 'test -f node_modules/" +
                       package + "/package.json || npm ci --no-audit --no-fund || npm install --no-audit --no-fund'",
                       out);
  INFO(out);
  REQUIRE(rc == 0);
  return tests;
}

/// The tests/ folder of the source tree, with chromium checked and playwright-core installed.
inline std::string browser_tests_dir() {
  if (!std::filesystem::exists("/usr/bin/chromium"))
    FAIL("/usr/bin/chromium is missing: install the Debian package 'chromium' (scripts/setup.sh installs it)");
  return tests_with_npm("playwright-core");
}

}  // namespace sg::testing
