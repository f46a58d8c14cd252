// The wasm plan of web bundles (issue 39): the C kernels of the cpu-simd target compiled at export time into one
// WebAssembly SIMD128 module (clang-14 --target=wasm32-wasi, wasm-ld; stdlib/src/web_wasm.cpp) and run by the
// JavaScript runtime's wasm backend (runtime/web/wasm.js, wasm_executor.js) in Node, which runs WebAssembly without a
// browser or any npm package:
//  - every DSL op forward and backward (the case lists of tests/op_cases.h, as tests/test_webgpu_ops.cpp runs them on
//    WebGPU) and the edge inputs (NaN, infinities, signed zeros) against the native CPU reference backend, with the op
//    cases' tolerances (tests/op_bundles.h);
//  - an MLP bundle of every target: in Node (no WebGPU, no WebGL2) the backend chain falls through to wasm and says
//    why for each, and the bundle's checks (bundle.json `checks`: infer, 3 Adam steps, infer, the weights after them)
//    pass on it;
//  - the edge list and the layers' math (erf, GELU) in headless Chromium's page too (tests/web_ops_check.mjs);
//    the fallback chain in a page and a Worker with WebGPU and WebGL2 disabled is ctest web_wasm_fallback;
//  - a missing compiler is an error naming the packages.
// Needs node (>= 16.4: WebAssembly SIMD and BigInt entry arguments) and clang-14 with wasm-ld and wasi-libc
// (scripts/setup.sh); the Chromium case chromium and npm playwright-core. No timing is asserted.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "op_bundles.h"
#include "sg/lm_export.h"
#include "test_web_util.h"

using Catch::Matchers::Contains;
using nlohmann::json;
using sg::testing::read_file;
using sg::testing::shell;
using sg::testing::TempDir;
namespace fs = std::filesystem;
namespace ob = sg::op_bundles;

namespace {

sg::web::BundleTargets wasm_only() {
  sg::web::BundleTargets t;
  t.webgpu = false;
  t.webgl2 = false;
  t.wasm = true;
  return t;
}

std::string tests_dir() { return sg::golden::source_dir() + "/tests"; }

/// Runs the checks of the bundle in `dir` in Node (tests/wasm_ops_check.mjs --checks: backend auto, which is wasm
/// there); the script's JSON line ({checks, backend, attempts, ms} or {error}), after INFO of its output.
json node_checks(const fs::path& dir, int& rc) {
  std::string out;
  rc = shell(fmt::format("node '{}/wasm_ops_check.mjs' --checks '{}'", tests_dir(), dir.string()), out);
  INFO(out.substr(0, 6000));
  size_t at = out.rfind("{\"checks\"");
  if (at == std::string::npos) at = out.rfind("{\"error\"");
  REQUIRE(at != std::string::npos);
  return json::parse(out.substr(at));
}

}  // namespace

TEST_CASE("wasm (node): every op forward and backward and the edge list from WebAssembly SIMD128 equal the CPU "
          "backend", "[wasm][ops]") {
  TempDir root("sg_wasm_ops");
  std::string names;
  const auto suites = ob::export_all(root.path, wasm_only(), names);
  std::string out;
  const int rc = shell(fmt::format("node '{}/wasm_ops_check.mjs' '{}' '{}' {}", tests_dir(), root.path.string(),
                                   (root.path / "out").string(), names),
                       out);
  INFO(out.substr(0, std::min<size_t>(out.rfind("{\"results\""), 6000)));  // one line per case list
  const json res = ob::last_results(out);
  CHECK(rc == 0);
  for (size_t li = 0; li < ob::case_lists().size(); ++li) {
    const ob::CaseList& l = ob::case_lists()[li];
    const json& r = res["results"][l.name];
    INFO("case list " << l.name);
    if (r.contains("error")) FAIL_CHECK(r["error"].dump().substr(0, 3000));
    if (r.contains("error")) continue;
    const fs::path dir = root.path / l.name;
    const json b = json::parse(read_file((dir / "bundle.json").string()));
    CHECK(b["targets"] == json::array({"wasm"}));
    CHECK(b["wasm"]["module"] == "wasm/kernels.wasm");
    CHECK(fs::exists(dir / "wasm/ops.c"));
    CHECK(r["backend"] == "wasm");
    CHECK(r["kernels"].get<int>() == static_cast<int>(b["programs"]["ops"]["wasm"]["kernels"].size()));
    CHECK(r["kernels"].get<int>() > 0);
    ob::expect_outputs(*suites[li], dir, root.path / "out" / fmt::format("{}.wasm.f32", l.name), r["outputs"], "wasm",
                       /*signed_zeros=*/std::string(l.name) == "edge");
  }
  // the contractions run as the cpu-simd target's register tiles (as on the native backend), not per element
  const json b = json::parse(read_file((root.path / "contraction" / "bundle.json").string()));
  int registers = 0;
  for (const json& k : b["programs"]["ops"]["wasm"]["kernels"]) registers += k["strategy"] == "register-tiled";
  CHECK(registers >= 6);
}

TEST_CASE("wasm (node): an MLP bundle of every target falls through WebGPU and WebGL2 to wasm, saying why, and its "
          "checks pass there", "[wasm]") {
  TempDir root("sg_wasm_mlp");
  sg::web::ModelExportOptions mo;
  mo.model = "mlp";
  mo.batch = 16;
  sg::web::BundleTargets t;
  t.wasm = true;
  const sg::web::ExportSummary s = sg::web::write_bundle(sg::web::model_bundle_spec(mo), t, root.path.string());
  REQUIRE(s.wasm_kernels.size() == 2u);
  CHECK(s.wasm_bytes > 0);
  const json b = json::parse(read_file((root.path / "bundle.json").string()));
  CHECK(b["targets"] == json::array({"webgpu", "webgl2", "wasm"}));
  // every persistent value has its array size, every program its wasm plan with entries the module exports
  for (const json& p : b["persistent"]) CHECK(p["buffer_bytes"].get<int64_t>() >= 4);
  for (const char* prog : {"infer", "train"})
    for (const json& k : b["programs"][prog]["wasm"]["kernels"]) {
      CHECK_THAT(k["entry"].get<std::string>(), Contains("sg_p"));
      CHECK(k["workgroups"].get<int64_t>() >= 1);
    }
  int rc = 0;
  const json r = node_checks(root.path, rc);
  CHECK(rc == 0);
  INFO(r.dump().substr(0, 6000));
  REQUIRE(!r.contains("error"));
  CHECK(r["backend"] == "wasm");
  CHECK(r["checks"]["ok"] == true);
  CHECK(r["checks"]["backend"] == "wasm");
  CHECK(r["checks"]["runs"].size() == b["checks"]["runs"].size());
  // the chain tried WebGPU and WebGL2 first and says in words why neither ran, then why wasm did
  const json& a = r["attempts"];
  REQUIRE(a.size() == 3u);
  CHECK(a[0]["backend"] == "webgpu");
  CHECK(a[0]["ok"] == false);
  CHECK_THAT(a[0]["reason"].get<std::string>(), Contains("navigator.gpu is missing"));
  CHECK(a[1]["backend"] == "webgl2");
  CHECK(a[1]["ok"] == false);
  CHECK_THAT(a[1]["reason"].get<std::string>(), Contains("no canvas"));
  CHECK(a[2]["backend"] == "wasm");
  CHECK(a[2]["ok"] == true);
  CHECK_THAT(a[2]["reason"].get<std::string>(), Contains("WebAssembly SIMD128") && Contains("wasm/kernels.wasm"));
  // debug mode on wasm (rt.debug): the train step kernel by kernel, each step showing its kernel's part of
  // wasm/train.c, ends with the outputs run() gives
  const json& d = r["debug"];
  CHECK(d["program"] == "train");
  CHECK(d["steps"] == d["kernels"]);
  CHECK(d["sources"] == d["kernels"]);
  CHECK(d["same"] == true);
}

TEST_CASE("wasm: export without the wasm compiler names the packages to install", "[wasm]") {
  TempDir root("sg_wasm_nocc");
  sg::web::ModelExportOptions mo;
  mo.model = "mlp";
  mo.batch = 4;
  mo.infer_only = true;
  const char* old = std::getenv("SG_WASM_CC");
  const std::string saved = old ? old : "";
  setenv("SG_WASM_CC", "/nonexistent/clang-14", 1);
  std::string msg;
  try {
    sg::web::write_bundle(sg::web::model_bundle_spec(mo), wasm_only(), root.path.string());
  } catch (const sg::CompileError& e) {
    msg = e.what();
  }
  if (old) setenv("SG_WASM_CC", saved.c_str(), 1);
  else unsetenv("SG_WASM_CC");
  CHECK_THAT(msg, Contains("/nonexistent/clang-14") && Contains("was not found") && Contains("lld-14") &&
                      Contains("wasi-libc") && Contains("--targets webgpu,webgl2"));
  CHECK(!fs::exists(root.path / "bundle.json"));
}

TEST_CASE("wasm (node): the CNN and charlm bundles' checks pass on the wasm plan", "[wasm]") {
  // the built-in models with convolutions (register-tiled conv and its gradients, pools) and attention (softmax,
  // LayerNorm, GELU's erf from WASI's libm, AdamW); each its checks: infer, 3 steps, infer, the weights after them
  TempDir root("sg_wasm_models");
  sg::web::ModelExportOptions mo;
  mo.model = "cnn";
  sg::web::write_bundle(sg::web::model_bundle_spec(mo), wasm_only(), (root.path / "cnn").string());
  sg::lm::LmExportOptions lo;
  lo.spec.model = "charlm";
  sg::web::write_bundle(sg::lm::lm_bundle_spec(lo), wasm_only(), (root.path / "charlm").string());
  for (const char* model : {"cnn", "charlm"}) {
    INFO(model);
    int rc = 0;
    const json r = node_checks(root.path / model, rc);
    INFO(r.dump().substr(0, 6000));
    CHECK(rc == 0);
    REQUIRE(!r.contains("error"));
    CHECK(r["backend"] == "wasm");
    CHECK(r["checks"]["ok"] == true);
    CHECK(r["checks"]["runs"].size() >= 5u);
  }
}

TEST_CASE("wasm (Chromium): the edge inputs and the layers' math from WebAssembly in a page equal the CPU backend",
          "[wasm][ops][browser]") {
  // the same bundles as in Node, run in headless Chromium's page by its WebAssembly engine (tests/web_ops_check.mjs,
  // tasks NAME:wasm): NaN, infinities, signed zeros, pow's special cases; erf, erfc and GELU from WASI's libm
  const std::string tests = sg::testing::browser_tests_dir();
  TempDir root("sg_wasm_browser_ops");
  std::vector<std::unique_ptr<sg::op_cases::Suite>> suites;
  const std::vector<std::string> lists = {"edge", "math"};
  for (const std::string& name : lists) {
    suites.push_back(std::make_unique<sg::op_cases::Suite>());
    ob::case_list(name).fill(*suites.back());
    ob::export_list(ob::case_list(name), *suites.back(), root.path / name, wasm_only());
  }
  std::string out;
  const int rc = shell(fmt::format("node '{}/web_ops_check.mjs' '{}' '{}' edge:wasm math:wasm", tests,
                                   root.path.string(), (root.path / "out").string()),
                       out);
  INFO(out.substr(0, std::min<size_t>(out.rfind("{\"results\""), 6000)));
  const json res = ob::last_results(out);
  CHECK(rc == 0);
  for (size_t i = 0; i < lists.size(); ++i) {
    INFO("case list " << lists[i]);
    const json& r = res["results"][lists[i]]["wasm"];
    REQUIRE(r.is_object());
    if (r.contains("error")) FAIL(r["error"].dump().substr(0, 3000));
    CHECK(r["backend"] == "wasm");
    CHECK(ob::expect_outputs(*suites[i], root.path / lists[i], root.path / "out" / (lists[i] + ".wasm.f32"),
                             r["outputs"], "wasm (Chromium)", /*signed_zeros=*/lists[i] == "edge") ==
          static_cast<int>(suites[i]->program().outputs.size()));
  }
}
