// The op cases of tests/op_cases.h as web bundles, for the tests that run them through the JavaScript runtime
// (tests/test_webgpu_ops.cpp: WebGPU on Dawn in Node; tests/test_web_ops.cpp: WebGL2 and WebGPU in headless
// Chromium). Each case list becomes one bundle ROOT/NAME: program "ops" (the ops' outputs and the gradients of
// sum(out * R) w.r.t. every float input), one check run with the fixed inputs, the expected outputs computed by the
// native CPU backend at export, and cases.json (each output's tolerance, read by tests/web/op_cases_run.mjs). The
// node scripts write what the runtime computed as OUT/NAME.KEY.f32 (every output's f32 values in output order);
// expect_outputs judges them here with the op cases' tolerances (rel 1e-5 elementwise/movement, 1e-4 reductions,
// matmul, conv, pools, losses; rel 1e-5 + FLT_MIN for the edge inputs; NaN meets NaN, infinities exactly).
#pragma once

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "op_cases.h"
#include "sg/safetensors.h"
#include "sg/web_export.h"
#include "test_util.h"

namespace sg::op_bundles {

namespace oc = sg::op_cases;
namespace fs = std::filesystem;
using nlohmann::json;

struct CaseList {
  const char* name;
  void (*fill)(oc::Suite&);
  /// Export only the kernels of a CPU implementation of WebGPU (the cpu plan: reductions split below 32768
  /// iterations per invocation). For the long reductions: Dawn's GLES backend runs on Mesa's llvmpipe here, whose
  /// gallivm stops every loop of an invocation after 65535 iterations (the GLES tests' LONG_TARGETS likewise), so
  /// their gpu plan cannot run here.
  bool cpu_kernels = false;
  /// Also run in headless Chromium (tests/test_web_ops.cpp); false for a list too slow to compile there as WebGL2
  /// shaders, which runs on WebGPU in Node only (with a browser subset of its own).
  bool browser = true;
};

/// Every case list of tests/op_cases.h, in the order the tests run them.
inline const std::vector<CaseList>& case_lists() {
  static const std::vector<CaseList> lists = {
      {"unary", oc::unary_cases},   {"binary", oc::binary_cases},     {"reductions", oc::reductions_cases},
      {"matmul", oc::matmul_cases}, {"movement", oc::movement_cases}, {"gather", oc::gather_cases},
      {"masks", oc::masks_cases},  // iota, arange, tril, triu, flip (issue 36)
      // LayerNorm, RMSNorm, attention, TransformerEncoderLayer against torch's goldens too (issue 36); in Chromium
      // the subset layers_browser
      {"layers", oc::layers_cases, false, false},
      {"layers_browser", oc::layers_browser_cases},
      {"conv", oc::conv_cases},
      {"losses", oc::losses_cases}, {"large", oc::large_cases},       {"long", oc::long_cases, true},
      {"contraction", oc::contraction_cases},
      // wider than one kernel's bindings: 12, 33 and 100 distinct inputs, concat of 20 (issue 35)
      {"bindings", oc::bindings_cases},
      // the layers' scalar math (issue 36): erf, erfc, gelu (exact and tanh)
      {"math", oc::math_cases},
      // random numbers inside kernels (issue 36): random_uniform, bernoulli, dropout, the CPU's bits
      {"random", oc::random_cases},
      // NaN, infinities, x/0, pow's special cases, accuracy at large |x| (issue 19: every backend follows the CPU
      // reference's numeric semantics)
      {"edge", oc::edge_input_cases},
  };
  return lists;
}

/// The case list named `name` (REQUIREs that it exists).
inline const CaseList& case_list(const std::string& name) {
  for (const CaseList& l : case_lists())
    if (name == l.name) return l;
  FAIL("no op case list named " << name);
  return case_lists().front();
}

/// Exports case list `l` (filled into `s`) as a bundle in `dir` with the targets `t` (webgpu_plans: {"cpu"} for a
/// list with cpu_kernels), and cases.json.
inline void export_list(const CaseList& l, const oc::Suite& s, const fs::path& dir, sg::web::BundleTargets t) {
  sg::web::BundleSpec spec;
  spec.model = fmt::format("op cases: {}", l.name);
  spec.programs.push_back({"ops", s.program()});
  sg::web::CheckRun run{"ops", {}};
  for (const sg::Feed& f : s.feeds()) run.feeds.emplace_back(f.name, *f.data);
  spec.checks.push_back(std::move(run));
  if (l.cpu_kernels) t.webgpu_plans = {"cpu"};
  sg::web::write_bundle(spec, t, dir.string());
  json cases = json::array();
  for (size_t i = 0; i < s.program().outputs.size(); ++i)
    cases.push_back({{"name", s.program().output_names[i]}, {"rtol", s.tolerances()[i].rtol},
                     {"atol", s.tolerances()[i].atol}});
  sg::testing::write_file((dir / "cases.json").string(), json{{"outputs", cases}}.dump(1));
}

/// The case lists filled and exported under `root` (one Suite per list, in case_lists() order); `names` gets
/// " NAME" per list (the node scripts' arguments).
inline std::vector<std::unique_ptr<oc::Suite>> export_all(const fs::path& root, const sg::web::BundleTargets& t,
                                                          std::string& names) {
  std::vector<std::unique_ptr<oc::Suite>> suites;
  for (const CaseList& l : case_lists()) {
    suites.push_back(std::make_unique<oc::Suite>());
    l.fill(*suites.back());
    export_list(l, *suites.back(), root / l.name, t);
    names += fmt::format(" {}", l.name);
  }
  return suites;
}

/// The JSON line a node script printed last (`{"results"...`), after CHECKs that it is there and parses; the
/// lines before it (one per run) go to INFO by the caller.
inline json last_results(const std::string& out) {
  const size_t at = out.rfind("{\"results\"");
  REQUIRE(at != std::string::npos);
  json res = json::parse(out.substr(at), nullptr, false);
  REQUIRE(!res.is_discarded());
  return res;
}

/// Judges `got_file` (what `backend` computed for case list `dir` with suite `s`: every output's f32 values in
/// output order) against the bundle's expected outputs (the CPU backend's) with the suite's tolerances, one CHECK
/// per output naming the worst element; `report` is the node script's per-output verdict (`outputs`), which must
/// agree. With `signed_zeros`, a zero must also carry the CPU's sign (IEEE 754 defines it for the edge list's
/// elementwise ops: 1 / -inf, -0 * 2...; a texture format or a shader that dropped it would pass the tolerance).
/// Returns the number of outputs that passed.
inline int expect_outputs(const oc::Suite& s, const fs::path& dir, const fs::path& got_file, const json& report,
                          const std::string& backend, bool signed_zeros = false) {
  const json b = json::parse(sg::testing::read_file((dir / "bundle.json").string()));
  const sg::io::SafetensorsFile e = sg::io::load_safetensors((dir / "expected.safetensors").string());
  const std::string got_bytes = sg::testing::read_file(got_file.string());
  size_t off = 0;
  int passed = 0;
  for (size_t i = 0; i < s.program().outputs.size(); ++i) {
    const std::string& name = s.program().output_names[i];
    const sg::io::NamedTensor* want = e.find(b["checks"]["runs"][0]["outputs"][name]["tensor"].get<std::string>());
    REQUIRE(want != nullptr);
    REQUIRE(off + 4 * want->data.size() <= got_bytes.size());
    std::vector<float> got(want->data.size());
    std::memcpy(got.data(), got_bytes.data() + off, 4 * got.size());
    off += 4 * got.size();
    const oc::Diff d = oc::compare(got, want->data, s.tolerances()[i]);
    INFO("output '" << name << "' " << d.why << " worst element " << d.worst << ": " << backend << " "
                    << (d.worst >= 0 ? got[d.worst] : 0.f) << " cpu " << (d.worst >= 0 ? want->data[d.worst] : 0.f)
                    << " (" << d.ratio << "x the tolerance)");
    CHECK(d.ok);
    CHECK(report[name]["ok"] == d.ok);  // the node report agrees
    s.check_golden(i, got, backend);    // and torch's values, where the case has them (golden cases)
    int64_t zero_sign = -1;  // the first zero with the other sign
    for (size_t k = 0; signed_zeros && zero_sign < 0 && k < got.size(); ++k)
      if (got[k] == 0.f && want->data[k] == 0.f && std::signbit(got[k]) != std::signbit(want->data[k]))
        zero_sign = static_cast<int64_t>(k);
    INFO("element " << zero_sign << ": " << backend << " " << (zero_sign >= 0 ? got[zero_sign] : 0.f) << ", cpu "
                    << (zero_sign >= 0 ? want->data[zero_sign] : 0.f));
    CHECK(zero_sign == -1);
    passed += d.ok && zero_sign == -1;
  }
  CHECK(off == got_bytes.size());
  return passed;
}

}  // namespace sg::op_bundles
