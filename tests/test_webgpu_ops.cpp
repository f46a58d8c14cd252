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
// The contraction cases (odd shapes, fused epilogues, conv and its gradients) must run as tiled WGSL kernels.
// Needs node and `npm ci` in tests/ (run here when tests/node_modules/webgpu is missing). No timing is asserted.
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "golden_util.h"
#include "op_cases.h"
#include "sg/safetensors.h"
#include "sg/web_export.h"
#include "test_util.h"

using Catch::Matchers::Contains;
using nlohmann::json;
using sg::testing::read_file;
using sg::testing::TempDir;
using sg::testing::shell;
namespace fs = std::filesystem;
namespace oc = sg::op_cases;

namespace {

/// The tests/ directory with its npm packages installed (npm ci once, under a lock shared with the other tests).
std::string tests_with_npm() {
  const std::string tests = sg::golden::source_dir() + "/tests";
  if (!fs::exists(tests + "/node_modules/webgpu/package.json")) {
    std::string out;
    const int rc = shell("cd '" + tests + "' && flock /tmp/shadergrad-npm-ci.lock sh -c 'test -f node_modules/webgpu/"
                         "package.json || npm ci --no-audit --no-fund'", out);
    INFO(out);
    REQUIRE(rc == 0);
  }
  return tests;
}

struct CaseList {
  const char* name;
  void (*fill)(oc::Suite&);
  /// Export only the kernels of a CPU implementation of WebGPU (the cpu plan: reductions split below 32768
  /// iterations per invocation). For the long reductions: Dawn's GLES backend runs on Mesa's llvmpipe here, whose
  /// gallivm stops every loop of an invocation after 65535 iterations (the GLES tests' LONG_TARGETS likewise), so
  /// their gpu plan cannot run here.
  bool cpu_kernels = false;
};

const CaseList kLists[] = {
    {"unary", oc::unary_cases},   {"binary", oc::binary_cases},     {"reductions", oc::reductions_cases},
    {"matmul", oc::matmul_cases}, {"movement", oc::movement_cases}, {"conv", oc::conv_cases},
    {"losses", oc::losses_cases}, {"large", oc::large_cases},       {"long", oc::long_cases, true},
    {"contraction", oc::contraction_cases},
    // NaN, infinities, x/0, pow's special cases, accuracy at large |x| (issue 19: every backend follows the CPU
    // reference's numeric semantics)
    {"edge", oc::edge_input_cases},
};

/// Exports one case list as a webgpu bundle ROOT/NAME with cases.json (the outputs' tolerances).
void export_list(const CaseList& l, oc::Suite& s, const fs::path& dir) {
  sg::web::BundleSpec spec;
  spec.model = fmt::format("op cases: {}", l.name);
  spec.programs.push_back({"ops", s.program()});
  sg::web::CheckRun run{"ops", {}};
  for (const sg::Feed& f : s.feeds()) run.feeds.emplace_back(f.name, *f.data);
  spec.checks.push_back(std::move(run));
  sg::web::BundleTargets t;
  t.webgl2 = false;
  if (l.cpu_kernels) t.webgpu_plans = {"cpu"};
  sg::web::write_bundle(spec, t, dir.string());
  json cases = json::array();
  for (size_t i = 0; i < s.program().outputs.size(); ++i)
    cases.push_back({{"name", s.program().output_names[i]}, {"rtol", s.tolerances()[i].rtol},
                     {"atol", s.tolerances()[i].atol}});
  sg::testing::write_file((dir / "cases.json").string(), json{{"outputs", cases}}.dump(1));
}

}  // namespace

TEST_CASE("webgpu (Dawn, node): every op forward and backward from WGSL equals the CPU backend", "[webgpu][ops]") {
  const std::string tests = tests_with_npm();
  TempDir root("sg_webgpu_ops");
  std::vector<std::unique_ptr<oc::Suite>> suites;
  std::string names;
  for (const CaseList& l : kLists) {
    suites.push_back(std::make_unique<oc::Suite>());
    l.fill(*suites.back());
    export_list(l, *suites.back(), root.path / l.name);
    names += fmt::format(" {}", l.name);
  }
  std::string out;
  const int rc = shell(fmt::format("EGL_PLATFORM=surfaceless node '{}/webgpu_ops_check.mjs' '{}' '{}' {}", tests,
                                   root.path.string(), (root.path / "out").string(), names),
                       out);
  const size_t at = out.rfind("{\"results\"");
  INFO(out.substr(0, at == std::string::npos ? 6000 : std::min<size_t>(at, 6000)));  // one line per case list
  REQUIRE(at != std::string::npos);
  const json res = json::parse(out.substr(at), nullptr, false);
  REQUIRE(!res.is_discarded());
  CHECK(rc == 0);

  for (size_t li = 0; li < std::size(kLists); ++li) {
    const CaseList& l = kLists[li];
    const oc::Suite& s = *suites[li];
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
    const sg::io::SafetensorsFile e = sg::io::load_safetensors((dir / "expected.safetensors").string());
    for (const json& pl : b["webgpu"]["plans"]) {
      const std::string plan = pl["name"];
      INFO("webgpu plan " << plan);
      const json& rp = r["plans"][plan];
      if (rp.contains("error")) FAIL_CHECK(rp["error"].dump().substr(0, 3000));
      if (rp.contains("error")) continue;
      CHECK(rp["plan"]["name"] == plan);
      CHECK(rp["kernels"].get<int>() > 0);
      const std::string got_bytes = read_file((root.path / "out" / fmt::format("{}.{}.f32", l.name, plan)).string());
      size_t off = 0;
      for (size_t i = 0; i < s.program().outputs.size(); ++i) {
        const std::string& name = s.program().output_names[i];
        const sg::io::NamedTensor* want = e.find(b["checks"]["runs"][0]["outputs"][name]["tensor"].get<std::string>());
        REQUIRE(want != nullptr);
        REQUIRE(off + 4 * want->data.size() <= got_bytes.size());
        std::vector<float> got(want->data.size());
        std::memcpy(got.data(), got_bytes.data() + off, 4 * got.size());
        off += 4 * got.size();
        const oc::Diff d = oc::compare(got, want->data, s.tolerances()[i]);
        INFO("output '" << name << "' " << d.why << " worst element " << d.worst << ": webgpu "
                        << (d.worst >= 0 ? got[d.worst] : 0.f) << " cpu " << (d.worst >= 0 ? want->data[d.worst] : 0.f)
                        << " (" << d.ratio << "x the tolerance)");
        CHECK(d.ok);
        CHECK(rp["outputs"][name]["ok"] == d.ok);  // the node report agrees
      }
      CHECK(off == got_bytes.size());
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
  CHECK(tiled >= 11);  // (one small contraction of the op cases joins a union-blocks kernel with its independent neighbour)
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
  CHECK(registers >= tiled);
}
