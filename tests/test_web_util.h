// What the browser tests (test_web_app, test_web_runtime) need before they drive headless Chromium through the
// node scripts next to them (tests/*.mjs, which share tests/browser.mjs for the launch and the servers): Debian's
// chromium (a missing one fails the test, naming the package) and npm playwright-core in tests/node_modules
// (`npm ci` from tests/package-lock.json, once, under a lock shared with the other tests that install there).
#pragma once

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "golden_util.h"
#include "test_util.h"

namespace sg::testing {

/// The tests/ folder of the source tree, with chromium checked and playwright-core installed.
inline std::string browser_tests_dir() {
  if (!std::filesystem::exists("/usr/bin/chromium"))
    FAIL("/usr/bin/chromium is missing: install the Debian package 'chromium' (scripts/setup.sh installs it)");
  const std::string tests = sg::golden::source_dir() + "/tests";
  if (std::filesystem::exists(tests + "/node_modules/playwright-core/package.json")) return tests;
  std::string out;
  const int rc = shell("cd '" + tests + "' && flock /tmp/shadergrad-npm-ci.lock sh -c 'test -f node_modules/"
                       "playwright-core/package.json || npm ci --no-audit --no-fund || npm install --no-audit --no-fund'",
                       out);
  INFO(out);
  REQUIRE(rc == 0);
  return tests;
}

}  // namespace sg::testing
