// Every DSL op forward and backward in a browser: the case lists of tests/op_cases.h (the ones the native GPU
// backends and tests/test_webgpu_ops.cpp run, the edge inputs of tests/edge_cases.h included: NaN, infinities,
// signed zeros, x/0, pow's special cases, NaN through max/min/argmax/pools, accuracy at large |x|), each exported as
// a bundle with the webgl2 target (GLSL ES 3.00 fragment shaders over RGBA32F textures; the edge list also with the
// webgpu cpu plans, the bindings and random lists with the cpu plan, the contraction lists with the cpu-subgroups
// plan) by tests/op_bundles.h, run in one headless
// Chromium (tests/web_ops_check.mjs) through the bundle's copy of the JavaScript runtime on WebGL2 (ANGLE over
// SwiftShader) and, for those lists, on WebGPU (SwiftShader's adapter, each plan forced), against the native CPU reference backend's outputs computed at
// export, with the op cases' tolerances (rel 1e-5 elementwise/movement, 1e-4 reductions, matmul, conv, pools,
// losses; rel 1e-5 + FLT_MIN for the edge inputs, whose zeros must carry the CPU's sign too; NaN meets NaN,
// infinities exactly). Needs /usr/bin/chromium and `npm ci` in tests/ (run here when missing). No timing is asserted.
#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "edge_cases.h"
#include "op_bundles.h"
#include "test_web_util.h"

using Catch::Matchers::Contains;
using nlohmann::json;
using sg::testing::TempDir;
using sg::testing::shell;
namespace fs = std::filesystem;
namespace ob = sg::op_bundles;

namespace {
/// The webgpu plans a list also runs on in the browser (besides webgl2): the edge list on both cpu plans; the lists
/// with contractions (matmul, conv, the contraction shapes, the large ones) on the cpu-subgroups plan, whose
/// register tiles share loads through subgroup operations that Dawn's GLES backend in Node (test_webgpu_ops) lacks;
/// the list wider than a kernel's bindings and the random list (Philox's integer arithmetic on Tint and SwiftShader:
/// the CPU's bits) on the cpu plan.
std::vector<std::string> webgpu_plans(const ob::CaseList& l) {
  const std::string n = l.name;
  if (n == "edge") return {"cpu", "cpu-subgroups"};
  if (n == "bindings" || n == "random") return {"cpu"};  // bindings: kernels split to the 8 storage buffers
  if (n == "matmul" || n == "conv" || n == "contraction" || n == "large") return {"cpu-subgroups"};
  return {};
}
}  // namespace

TEST_CASE("browser (Chromium, SwiftShader): every op forward and backward on WebGL2, the edge inputs and the "
          "contractions on WebGPU, equal the CPU backend",
          "[web][webgl2][webgpu][ops][browser]") {
  const std::string tests = sg::testing::browser_tests_dir();
  TempDir root("sg_web_ops");
  // WebGL2: every list (of the layers' golden cases the subset layers_browser). WebGPU: the edge list (IEEE
  // semantics hang on Tint and the driver, which differ from Dawn's GLES backend in Node) and the contraction lists
  // on the cpu-subgroups plan (webgpu_plans); the other lists run the same WGSL and runtime on WebGPU in
  // test_webgpu_ops already, and doubling the browser time for them is not worth it in the default suite.
  std::vector<std::unique_ptr<sg::op_cases::Suite>> suites;
  std::string tasks;
  for (const ob::CaseList& l : ob::case_lists()) {
    suites.push_back(std::make_unique<sg::op_cases::Suite>());
    if (!l.browser) continue;  // too slow to compile as WebGL2 shaders here: its browser subset runs instead
    sg::web::BundleTargets targets;
    targets.webgpu = !webgpu_plans(l).empty();
    if (targets.webgpu) targets.webgpu_plans = webgpu_plans(l);  // the plans for SwiftShader
    l.fill(*suites.back());
    ob::export_list(l, *suites.back(), root.path / l.name, targets);
    tasks += fmt::format(" {0}:webgl2", l.name);
    for (const std::string& plan : webgpu_plans(l)) tasks += fmt::format(" {}:webgpu:{}", l.name, plan);
  }
  std::string out;
  const int rc = shell(fmt::format("node '{}/web_ops_check.mjs' '{}' '{}' {}", tests, root.path.string(),
                                   (root.path / "out").string(), tasks),
                       out);
  INFO(out.substr(0, std::min<size_t>(out.rfind("{\"results\""), 6000)));  // one line per case list and backend
  const json res = ob::last_results(out);
  CHECK(rc == 0);
  REQUIRE(!res["results"].contains("harness_error"));

  std::map<std::string, int> outputs, passed;  // by key: webgl2, webgpu-cpu, webgpu-cpu-subgroups
  size_t browser_lists = 0;
  for (size_t li = 0; li < ob::case_lists().size(); ++li) {
    const ob::CaseList& l = ob::case_lists()[li];
    if (!l.browser) continue;
    ++browser_lists;
    const fs::path dir = root.path / l.name;
    std::vector<std::string> keys = {"webgl2"};
    for (const std::string& plan : webgpu_plans(l)) keys.push_back("webgpu-" + plan);
    for (const std::string& key : keys) {
      const bool webgpu = key != "webgl2";
      outputs[key] += static_cast<int>(suites[li]->program().outputs.size());
      INFO("case list " << l.name << ", " << key);
      REQUIRE(res["results"][l.name].contains(key));
      const json& r = res["results"][l.name][key];
      if (r.contains("error")) FAIL_CHECK(r["error"].dump().substr(0, 3000));
      if (r.contains("error")) continue;
      CHECK(r["backend"] == (webgpu ? "webgpu" : "webgl2"));
      CHECK(r["kernels"].get<int>() > 0);
      CHECK_THAT(r["renderer"].dump(), Contains("swiftshader", Catch::CaseSensitive::No));  // not a hardware GPU
      if (webgpu) CHECK(r["plan"]["name"] == key.substr(7));
      if (key == "webgpu-cpu-subgroups")  // the forced plan: SwiftShader's subgroups passed the runtime's lane probe
        CHECK_THAT(r["plan"]["reason"].get<std::string>(), Contains("forced"));
      passed[key] += ob::expect_outputs(*suites[li], dir, root.path / "out" / fmt::format("{}.{}.f32", l.name, key),
                                        r["outputs"], key, /*signed_zeros=*/std::string(l.name) == "edge");
    }
  }
  // the edge list is every case of tests/edge_cases.h (one output each), then the max-pool gradients with NaN
  const size_t edge_outputs = sg::edge_cases::all().size() + sg::op_cases::kEdgePoolGradientOutputs;
  CHECK(suites.back()->program().outputs.size() == edge_outputs);
  size_t bindings_outputs = 0, random_outputs = 0;  // the lists that run on the cpu plan too
  for (size_t li = 0; li < ob::case_lists().size(); ++li) {
    if (std::string(ob::case_lists()[li].name) == "bindings") bindings_outputs = suites[li]->program().outputs.size();
    if (std::string(ob::case_lists()[li].name) == "random") random_outputs = suites[li]->program().outputs.size();
  }
  CHECK(bindings_outputs > 0);
  CHECK(random_outputs > 0);
  CHECK(outputs["webgpu-cpu"] == static_cast<int>(edge_outputs + bindings_outputs + random_outputs));
  CHECK(outputs["webgpu-cpu-subgroups"] > static_cast<int>(edge_outputs));
  WARN(fmt::format("outputs equal to the CPU backend's: webgl2 {}/{} ({} lists), webgpu cpu {}/{} (the {} edge cases, the bindings and random lists), "
                   "webgpu cpu-subgroups {}/{} (the edge, matmul, conv, contraction and large lists)",
                   passed["webgl2"], outputs["webgl2"], browser_lists, passed["webgpu-cpu"],
                   outputs["webgpu-cpu"], sg::edge_cases::all().size(), passed["webgpu-cpu-subgroups"],
                   outputs["webgpu-cpu-subgroups"]));
}

TEST_CASE("browser (Chromium, SwiftShader): gather and take (embedding lookup) forward and scatter-add backward on "
          "WebGL2 and WebGPU equal the CPU backend", "[web][webgl2][webgpu][ops][gather][browser]") {
  // the gather list alone (the every-op test above runs it on WebGL2 too): WebGL2 fragment shaders, and the WebGPU
  // cpu plan on SwiftShader's adapter
  const std::string tests = sg::testing::browser_tests_dir();
  TempDir root("sg_web_gather");
  const ob::CaseList& l = ob::case_list("gather");
  sg::op_cases::Suite s;
  l.fill(s);
  sg::web::BundleTargets targets;
  targets.webgpu = true;
  targets.webgpu_plans = {"cpu"};
  ob::export_list(l, s, root.path / l.name, targets);
  std::string out;
  const int rc = shell(fmt::format("node '{}/web_ops_check.mjs' '{}' '{}' {}:webgl2 {}:webgpu:cpu", tests,
                                   root.path.string(), (root.path / "out").string(), l.name, l.name),
                       out);
  INFO(out.substr(0, std::min<size_t>(out.rfind("{\"results\""), 6000)));
  const json res = ob::last_results(out);
  CHECK(rc == 0);
  REQUIRE(!res["results"].contains("harness_error"));
  for (const std::string key : {"webgl2", "webgpu-cpu"}) {
    INFO(key);
    REQUIRE(res["results"][l.name].contains(key));
    const json& r = res["results"][l.name][key];
    if (r.contains("error")) FAIL_CHECK(r["error"].dump().substr(0, 3000));
    if (r.contains("error")) continue;
    CHECK(r["backend"] == (key == "webgl2" ? "webgl2" : "webgpu"));
    CHECK_THAT(r["renderer"].dump(), Contains("swiftshader", Catch::CaseSensitive::No));
    CHECK(ob::expect_outputs(s, root.path / l.name, root.path / "out" / fmt::format("{}.{}.f32", l.name, key),
                             r["outputs"], key) == static_cast<int>(s.program().outputs.size()));
  }
}
