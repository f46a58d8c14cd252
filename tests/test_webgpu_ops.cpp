// Every DSL op forward and backward from WGSL on WebGPU (npm `webgpu`: Dawn for Node, on this machine through its
// OpenGL ES backend in compatibility mode over llvmpipe), through the real JavaScript runtime executor
// (runtime/web/webgpu_executor.js), against the native CPU reference backend: the case lists of tests/op_cases.h
// (the ones the GLES, GLES compute and Vulkan backends run), each exported as a bundle with only the webgpu target
// (program "ops": the ops' outputs and the gradients of sum(out * R) w.r.t. every float input; one check run with
// the fixed inputs; the expected outputs computed by the CPU backend at export), with the kernels the default
// "webgpu" preset gives a GPU and those of a CPU implementation (both webgpu plans; the long reductions only the CPU
// one, see kLists). One node process runs all bundles (tests/webgpu_ops_check.mjs), each with the plan the runtime picks
// for the adapter (the cpu plan: Dawn's adapter here is llvmpipe) and then the other plan forced, and writes what
// WebGPU computed; this test judges both with the op cases' tolerances
// (rel 1e-5 elementwise/movement, 1e-4 reductions, matmul, conv, pools, losses; NaN meets NaN, infinities exactly).
// The bundles and the judging of the outputs are tests/op_bundles.h's (shared with tests/test_web_ops.cpp, the
// same lists in Chromium). The contraction cases (odd shapes, fused epilogues, conv and its gradients) must run as tiled WGSL kernels.
// Needs node and `npm ci` in tests/ (run here when tests/node_modules/webgpu is missing). No timing is asserted.
#include <filesystem>
#include <functional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "op_bundles.h"
#include "test_web_util.h"

using Catch::Matchers::Contains;
using nlohmann::json;
using sg::testing::read_file;
using sg::testing::TempDir;
using sg::testing::shell;
namespace fs = std::filesystem;
namespace ob = sg::op_bundles;

TEST_CASE("webgpu (Dawn, node): every op forward and backward from WGSL equals the CPU backend", "[webgpu][ops]") {
  const std::string tests = sg::testing::tests_with_npm("webgpu");
  TempDir root("sg_webgpu_ops");
  sg::web::BundleTargets targets;
  targets.webgl2 = false;
  // Dawn's GLES backend in Node has no subgroups: the cpu-subgroups plan runs in Chromium (test_web_ops)
  targets.webgpu_plans = {"gpu", "cpu"};
  std::string names;
  const auto suites = ob::export_all(root.path, targets, names);
  std::string out;
  const int rc = shell(fmt::format("EGL_PLATFORM=surfaceless node '{}/webgpu_ops_check.mjs' '{}' '{}' {}", tests,
                                   root.path.string(), (root.path / "out").string(), names),
                       out);
  INFO(out.substr(0, std::min<size_t>(out.rfind("{\"results\""), 6000)));  // one line per case list and plan
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
    CHECK(b["targets"] == json::array({"webgpu"}));
    REQUIRE(b["webgpu"]["plans"].size() == (l.cpu_kernels ? 1u : 2u));
    // the runtime picks the cpu plan for Dawn's llvmpipe adapter and says why
    CHECK(r["picked"] == "cpu");
    CHECK_THAT(r["plans"]["cpu"]["plan"]["reason"].get<std::string>(),
               Contains("is a CPU implementation of WebGPU") && Contains("llvmpipe"));
    for (const json& pl : b["webgpu"]["plans"]) {
      const std::string plan = pl["name"];
      INFO("webgpu plan " << plan);
      const json& rp = r["plans"][plan];
      if (rp.contains("error")) FAIL_CHECK(rp["error"].dump().substr(0, 3000));
      if (rp.contains("error")) continue;
      CHECK(rp["plan"]["name"] == plan);
      CHECK(rp["kernels"].get<int>() > 0);
      ob::expect_outputs(*suites[li], dir, root.path / "out" / fmt::format("{}.{}.f32", l.name, plan), rp["outputs"],
                         "webgpu", /*signed_zeros=*/std::string(l.name) == "edge");
    }
  }

  // the contraction cases ran as tiled WGSL kernels (workgroup tiles and barriers), not as a silent per-element
  // fallback: matmuls with bias + relu, batched, x.W^T, conv2d forward, grad-input and grad-weight
  const json b = json::parse(read_file((root.path / "contraction" / "bundle.json").string()));
  int tiled = 0;
  for (const json& k : b["programs"]["ops"]["webgpu"]["kernels"]) {
    if (k["strategy"] != "tiled-contraction") continue;
    ++tiled;
    const std::string src = read_file((root.path / "contraction" / k["wgsl"].get<std::string>()).string());
    INFO(k["name"].get<std::string>() << "\n" << src);
    CHECK(src.find("var<workgroup> tile_a: array<") != std::string::npos);
    CHECK(src.find("workgroupBarrier();") != std::string::npos);
    CHECK(k["workgroup_storage_bytes"].get<int>() > 0);
    CHECK(k["workgroup_storage_bytes"].get<int>() <= 16384);
  }
  // (three small contractions of the op cases join union-blocks kernels with independent neighbours: the union
  // rule takes groups of little work, within the plan's storage buffers; test_wgsl tiles each of them alone)
  CHECK(tiled >= 9);
  // the cpu plan's contractions are register tiles: no workgroup memory, no barrier (and no tree reductions)
  int registers = 0;
  for (const json& k : b["programs"]["ops"]["webgpu_cpu"]["kernels"]) {
    const std::string src = read_file((root.path / "contraction" / k["wgsl"].get<std::string>()).string());
    INFO(k["name"].get<std::string>() << "\n" << src);
    CHECK(k["strategy"] != "tree-reduction");
    CHECK(k["strategy"] != "tiled-contraction");
    CHECK(src.find("var<workgroup>") == std::string::npos);
    CHECK(src.find("workgroupBarrier") == std::string::npos);
    registers += k["strategy"] == "register-tiled";
  }
  CHECK(registers >= 6);  // (the cpu plan's 10 storage buffers let three more small ones join union kernels)
  // the cpu plan's embedding gradients (one-hot^T x dY) are register tiles whose one-hot side selects dY's values
  // rather than multiplying them (a NaN or infinite adjoint reaches only its token's row: test_wgsl and test_cpu_simd)
  const json gb = json::parse(read_file((root.path / "gather" / "bundle.json").string()));
  int one_hot = 0;
  for (const json& k : gb["programs"]["ops"]["webgpu_cpu"]["kernels"]) {
    if (k["name"].get<std::string>().find("one_hot") == std::string::npos) continue;
    const std::string src = read_file((root.path / "gather" / k["wgsl"].get<std::string>()).string());
    INFO(k["name"].get<std::string>() << "\n" << src);
    if (k["strategy"] != "register-tiled") continue;
    ++one_hot;
    CHECK(src.find(" += select(0.0, ") != std::string::npos);
  }
  CHECK(one_hot >= 2);
}

TEST_CASE("webgpu (Dawn, node): gather and take (embedding lookup) forward and scatter-add backward from WGSL equal "
          "the CPU backend", "[webgpu][ops][gather]") {
  // the gather list alone (the every-op test above runs it too), on both WebGPU plans
  const std::string tests = sg::testing::tests_with_npm("webgpu");
  TempDir root("sg_webgpu_gather");
  sg::web::BundleTargets targets;
  targets.webgl2 = false;
  targets.webgpu_plans = {"gpu", "cpu"};
  const ob::CaseList& l = ob::case_list("gather");
  sg::op_cases::Suite s;
  l.fill(s);
  ob::export_list(l, s, root.path / l.name, targets);
  std::string out;
  const int rc = shell(fmt::format("EGL_PLATFORM=surfaceless node '{}/webgpu_ops_check.mjs' '{}' '{}' {}", tests,
                                   root.path.string(), (root.path / "out").string(), l.name),
                       out);
  INFO(out.substr(0, std::min<size_t>(out.rfind("{\"results\""), 6000)));
  const json res = ob::last_results(out);
  CHECK(rc == 0);
  const json& r = res["results"][l.name];
  if (r.contains("error")) FAIL(r["error"].dump().substr(0, 3000));
  const json b = json::parse(read_file((root.path / l.name / "bundle.json").string()));
  REQUIRE(b["webgpu"]["plans"].size() == 2u);
  int runs = 0;
  for (const json& pl : b["webgpu"]["plans"]) {
    const std::string plan = pl["name"];
    INFO("webgpu plan " << plan);
    const json& rp = r["plans"][plan];
    if (rp.contains("error")) FAIL_CHECK(rp["error"].dump().substr(0, 3000));
    if (rp.contains("error")) continue;
    CHECK(rp["kernels"].get<int>() > 0);
    CHECK(ob::expect_outputs(s, root.path / l.name, root.path / "out" / fmt::format("{}.{}.f32", l.name, plan),
                             rp["outputs"], "webgpu") == static_cast<int>(s.program().outputs.size()));
    ++runs;
  }
  CHECK(runs == 2);
  // the bundle says which inputs are gather indices and of which gather; the JavaScript runtime's feed check
  // (runtime/web/feeds.js, called by both executors before any upload) refuses an out-of-range token with that name
  json tok;
  std::function<void(const json&)> find = [&](const json& v) {
    if (v.is_object())
      for (auto& [k, c] : v.items()) {
        if (k == "inputs" && c.is_array())
          for (const json& in : c)
            if (in.value("name", "") == "tok") tok = in;
        find(c);
      }
    else if (v.is_array())
      for (const json& c : v) find(c);
  };
  find(b);
  REQUIRE(tok.is_object());
  CHECK(tok["classes"] == 11);
  CHECK_THAT(tok["index_of"].get<std::string>(), Contains("gather at ") && Contains("op_cases.h:"));
  std::string msg;
  const std::string feeds_js = std::string(SG_SOURCE_DIR) + "/runtime/web/feeds.js";
  shell(fmt::format("node --input-type=module -e \"import {{ checkClassIndices }} from 'file://{}'; try {{ "
                    "checkClassIndices('ops', JSON.parse(process.argv[1]), [0, 3, 11]); console.log('accepted'); }} "
                    "catch (e) {{ console.log(e.name + ': ' + e.message); }}\" '{}'", feeds_js, tok.dump()),
        msg);
  CHECK_THAT(msg, Contains("FeedError: run('ops'): input 'tok' element 2 is 11, outside [0, 11) (gather at ") &&
                      Contains("indices must be integers 0..10"));
}
