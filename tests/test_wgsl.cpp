// The WGSL target: the compute emitter's second language (codegen/src/compute_lang.h, wgsl_math.h), the WebGPU
// DeviceCaps presets, `shadergrad dump --target wgsl`, and every generated WGSL kernel compiled on Dawn (npm
// `webgpu`, tests/wgsl_compile_check.mjs) — the mlp and cnn train steps and every op case of tests/op_cases.h
// (forward and backward), whose plans also run there against the CPU reference backend; the contractions as tiled
// kernels (workgroup tiles) in every preset.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string_view>
#include <sys/wait.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../codegen/src/glsl_math.h"
#include "../codegen/src/shader_files.h"
#include "embedding_nan_case.h"
#include "golden_util.h"
#include "op_cases.h"
#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/target.h"
#include "sg/web_export.h"
#include "test_util.h"

namespace fs = std::filesystem;
using sg::testing::read_file;
using sg::testing::TempDir;
using sg::testing::shell;
using sg::testing::write_file;

namespace {

/// A small train-free program: elementwise ops with NaN/Inf-producing inputs, a reduction, a matmul.
sg::Program small_program() {
  sg::Program p;
  sg::Tensor x = sg::input("x", {4, 300});
  sg::Tensor w = sg::input("w", {300, 5});
  p.add_output("y", sg::relu(sg::matmul(x, w)) + sg::sigmoid(sg::sum(x, {1}, true)));
  p.add_output("z", sg::pow(x, sg::constant({1}, {3.f})) + sg::tanh(x * 2.0));
  return p;
}

sg::Plan plan_for(const sg::Program& p, const sg::DeviceCaps& caps, const sg::BackendOptions& opt = {}) {
  const sg::Target t = sg::make_target(sg::TargetName::Wgsl, caps);
  return sg::schedule(p, sg::schedule_options(t, opt));
}

/// Every contraction a kernel of its own (no union-blocks kernel takes a small one): the tiled emitter sees each.
sg::BackendOptions contractions_alone() {
  sg::BackendOptions o;
  o.union_domains = false;
  return o;
}

/// npm ci in tests/ when npm webgpu is missing (one at a time: other tests install there too).
void ensure_node_modules() {
  const std::string tests = sg::golden::source_dir() + "/tests";
  if (fs::exists(tests + "/node_modules/webgpu/package.json")) return;
  std::string out;
  const int rc = shell("cd '" + tests + "' && flock /tmp/shadergrad-npm-ci.lock sh -c 'test -f node_modules/webgpu/"
                       "package.json || npm ci --no-audit --no-fund'", out);
  INFO(out);
  REQUIRE(rc == 0);
}

/// Runs tests/wgsl_compile_check.mjs over `dirs`; checks its summary: `kernels` > 0, no errors, no mismatches.
void check_on_dawn(const std::vector<std::string>& dirs, bool compat, int expect_outputs_run) {
  ensure_node_modules();
  std::string cmd = fmt::format("node '{}/tests/wgsl_compile_check.mjs'{}", sg::golden::source_dir(), compat ? " --compat" : "");
  for (auto& d : dirs) cmd += " '" + d + "'";
  std::string out;
  const int rc = shell(cmd, out);
  INFO(out);
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex(R"(wgsl_compile_check: (\d+) kernels, (\d+) errors, (\d+) outputs run, (\d+) mismatches)")));
  CHECK(std::stoi(m[1]) > 0);
  CHECK(std::stoi(m[2]) == 0);
  CHECK(std::stoi(m[3]) == expect_outputs_run);
  CHECK(std::stoi(m[4]) == 0);
  CHECK(rc == 0);
}

nlohmann::json floats_json(const std::vector<float>& v) {
  nlohmann::json a = nlohmann::json::array();
  // JSON has no NaN or infinity: NaN as null, an infinity as "inf" / "-inf" (wgsl_compile_check.mjs decodes both)
  for (float x : v)
    a.push_back(std::isnan(x)   ? nlohmann::json(nullptr)
                : std::isinf(x) ? nlohmann::json(x > 0 ? "inf" : "-inf")
                                : nlohmann::json(x));
  return a;
}

/// Writes every kernel of `plan` as KERNEL.wgsl into `dir` and run.json: the plan's launches, each value's data
/// (inputs from `feeds`, constants), and the program outputs the CPU backend computes (tolerance `tol`). `tiles`: the
/// tile configuration of the tiled contractions (empty = the heuristic's).
void write_run_dir(const sg::Plan& plan, const sg::ComputeLimits& limits, const std::vector<sg::Feed>& feeds,
                   sg::op_cases::Tol tol, const std::string& dir, const std::optional<sg::TileConfig>& tiles = {}) {
  fs::create_directories(dir);
  nlohmann::json run{{"kernels", nlohmann::json::array()}, {"values", nlohmann::json::object()}, {"outputs", nlohmann::json::array()}};
  for (const sg::Kernel& k : plan.kernels) {
    const sg::ComputeKernel ck = sg::emit_compute_kernel(plan, k, limits, sg::ComputeLanguage::Wgsl, tiles);
    write_file(dir + "/" + k.name + ".wgsl", ck.source);
    run["kernels"].push_back({{"file", k.name + ".wgsl"}, {"workgroups", ck.workgroups}, {"bindings", ck.bindings},
                              {"inputs", k.inputs.size()}});
  }
  for (const sg::Value& v : plan.values) {
    nlohmann::json e{{"numel", v.node->numel()}};
    if (v.node->data) e["data"] = floats_json(*v.node->data);
    for (const sg::Feed& f : feeds)
      if (v.kind == sg::ValueKind::Input && v.node->name == f.name) e["data"] = floats_json(*f.data);
    run["values"][std::to_string(v.id)] = e;
  }
  auto want = sg::make_cpu_backend()->compile(plan.program)->run(feeds);
  for (size_t i = 0; i < want.size(); ++i)
    run["outputs"].push_back({{"name", plan.program.output_names[i]}, {"id", plan.output_values[i]},
                              {"expected", floats_json(want[i])}, {"rtol", tol.rtol}, {"atol", tol.atol}});
  write_file(dir + "/run.json", run.dump());
}

}  // namespace

TEST_CASE("the helpers' shader files of codegen/shaders are embedded verbatim, each one helper's source",
          "[wgsl][codegen]") {
  // every helper's three files (GLSL, WGSL, C; ArgBetter's forms are in glsl_argmax.cpp); the C one is printed inside
  // its include guard
  std::set<std::string> helper_sources, c_sources;
  for (int h = 0; h < static_cast<int>(sg::MathHelper::kCount); ++h)
    if (static_cast<sg::MathHelper>(h) != sg::MathHelper::ArgBetter) {
      for (bool wgsl : {false, true}) helper_sources.insert(sg::math_helper_source(static_cast<sg::MathHelper>(h), wgsl));
      c_sources.insert(sg::math_helper_source(static_cast<sg::MathHelper>(h), sg::ComputeLanguage::C));
    }
  CHECK(helper_sources.size() == 2 * (static_cast<size_t>(sg::MathHelper::kCount) - 1));
  CHECK(c_sources.size() == static_cast<size_t>(sg::MathHelper::kCount) - 1);
  const auto& files = sg::shaders::shader_files();
  CHECK(files.size() == helper_sources.size() + c_sources.size());  // no file that no helper prints
  for (const auto& f : files) {
    INFO(f.path);
    const std::string on_disk = sg::testing::read_file(sg::golden::source_dir() + "/codegen/shaders/" + std::string(f.path));
    CHECK(!on_disk.empty());
    CHECK(std::string(f.bytes) == on_disk);  // byte for byte
    if (std::string_view(f.path).ends_with(".c"))
      CHECK(std::count_if(c_sources.begin(), c_sources.end(),
                          [&](const std::string& c) { return c.find("\n" + on_disk + "#endif\n") != std::string::npos; }) == 1);
    else
      CHECK(helper_sources.count(on_disk) == 1);
  }
  CHECK_THROWS_AS(sg::shaders::shader_file("math/no_such_helper.glsl"), sg::CompileError);
}

TEST_CASE("every float op and every math helper has a GLSL, a WGSL and a C formula", "[wgsl][codegen]") {
  for (int i = static_cast<int>(sg::SOp::Neg); i <= static_cast<int>(sg::SOp::Select); ++i) {
    const auto op = static_cast<sg::SOp>(i);
    INFO("SOp " << i);
    sg::MathHelpers gh, wh;
    const std::string g = sg::float_math(false, op, "a", "b", "c", gh), w = sg::float_math(true, op, "a", "b", "c", wh);
    CHECK(g.find("0x7fc00000u") == std::string::npos);  // the fallback for an op without a formula is NaN
    CHECK(w.find("0x7fc00000u") == std::string::npos);
    CHECK(w.find('a') != std::string::npos);  // reads its first operand
    // C (cpu-simd): its own formula, the same helpers, defined as static inline functions; no GLSL spelling
    sg::MathHelpers ch;
    const std::string c = sg::float_math(sg::ComputeLanguage::C, op, "a", "b", "c", ch);
    CHECK(c.find("0x7fc00000u") == std::string::npos);
    CHECK(ch.c_source().empty() == wh.wgsl_source().empty());
    for (const char* glsl_only : {"uintBitsToFloat", "floatBitsToUint", "roundEven", "inversesqrt", "abs(", "floor("})
      CHECK(c.find(glsl_only) == std::string::npos);
    // the same helpers in both languages, each defined in WGSL
    CHECK(gh.source(false).empty() == wh.wgsl_source().empty());
    if (!wh.empty()) CHECK(wh.wgsl_source().find("fn ") != std::string::npos);
    // WGSL has no uintBitsToFloat, floatBitsToUint, roundEven, inversesqrt, mod, float() or ?:
    for (const char* glsl_only : {"uintBitsToFloat", "floatBitsToUint", "roundEven", "inversesqrt", "mod(", "float(", "?"}) {
      CHECK(w.find(glsl_only) == std::string::npos);
      CHECK(wh.wgsl_source().find(glsl_only) == std::string::npos);
    }
  }
  for (int h = 0; h < static_cast<int>(sg::MathHelper::kCount); ++h) {
    INFO("MathHelper " << h);
    const std::string g = sg::math_helper_source(static_cast<sg::MathHelper>(h), false);
    const std::string w = sg::math_helper_source(static_cast<sg::MathHelper>(h), true);
    CHECK(!g.empty());
    CHECK(!w.empty());
    // NaN/Inf are runtime values in WGSL (a constant expression evaluating to NaN is a shader-creation error)
    CHECK(w.find("bitcast<f32>(0x") == std::string::npos);
    CHECK_FALSE(std::regex_search(w, std::regex(R"(\b(float|bool|int)\s+\w+\s*[(=])")));  // no GLSL declarations
    // C: include-guarded static inline functions over the C prelude's bit casts, float literals only (a double
    // literal would make an expression double)
    const std::string c = sg::math_helper_source(static_cast<sg::MathHelper>(h), sg::ComputeLanguage::C);
    CHECK(c.rfind("#ifndef SG_MATH_", 0) == 0);
    CHECK(c.find("static inline ") != std::string::npos);
    CHECK(c.find("uintBitsToFloat") == std::string::npos);
    CHECK(c.find("floatBitsToUint") == std::string::npos);
    CHECK_FALSE(std::regex_search(c, std::regex(R"([^\w.][0-9]+\.[0-9]+(e-?[0-9]+)?[^0-9ef])")));
  }
}

TEST_CASE("WebGPU presets carry the WebGPU default limits and fusion stays within them", "[wgsl][target]") {
  const sg::DeviceCaps core = sg::preset_caps("webgpu"), compat = sg::preset_caps("webgpu-compat");
  CHECK(core.compute.max_storage_buffers == 8);
  CHECK(core.compute.max_workgroup_invocations == 256);
  CHECK(core.compute.max_shared_bytes == 16384);
  CHECK(core.compute.max_workgroup_count == 65535);
  CHECK(core.compute.max_buffer_bytes == int64_t{128} << 20);
  CHECK(compat.compute.max_workgroup_invocations == 128);
  CHECK(compat.compute.max_storage_buffers == 8);
  const sg::Target t = sg::make_target(sg::TargetName::Wgsl, compat);
  CHECK(t.storage == sg::StorageModel::Buffers);
  // one budget of 8 storage buffers for a kernel's inputs and outputs together, at most 4 of them outputs
  CHECK(t.limits.max_storage_buffers == 8);
  CHECK(t.limits.max_outputs == 4);
  CHECK(t.limits.max_bindings == 7);
  CHECK_THROWS_WITH(sg::preset_caps("webgl"), Catch::Contains("webgpu-compat"));

  // every kernel of the mlp-like program fits the compat device: bindings, invocations, workgroup storage
  const sg::Plan plan = plan_for(small_program(), compat);
  for (const sg::Kernel& k : plan.kernels) {
    const sg::ComputeKernel ck = sg::emit_compute_kernel(plan, k, compat.compute, sg::ComputeLanguage::Wgsl);
    CHECK(ck.bindings.size() <= 8);
    CHECK(ck.local_size[0] * ck.local_size[1] * ck.local_size[2] <= 128);
    CHECK(ck.shared_bytes <= 16384);
  }
  // a device of fewer storage buffers than a kernel binds: a clear error naming the limit
  sg::ComputeLimits four = compat.compute;
  four.max_storage_buffers = 2;
  bool threw = false;
  for (const sg::Kernel& k : plan.kernels)
    if (k.inputs.size() + k.outputs.size() > 2) {
      CHECK_THROWS_WITH(sg::emit_compute_kernel(plan, k, four, sg::ComputeLanguage::Wgsl), Catch::Contains("max_storage_buffers"));
      threw = true;
    }
  CHECK(threw);
  sg::ComputeLimits small_buffers = compat.compute;
  small_buffers.max_buffer_bytes = 64;
  CHECK_THROWS_WITH(sg::emit_compute_kernel(plan, plan.kernels.front(), small_buffers, sg::ComputeLanguage::Wgsl),
                    Catch::Contains("max_buffer_bytes"));
}

TEST_CASE("WGSL kernels are byte-stable and match their GLSL twins in strategy, launch and header", "[wgsl][codegen]") {
  const sg::DeviceCaps caps = sg::preset_caps("webgpu");
  const sg::Plan plan = plan_for(small_program(), caps);
  std::set<std::string> strategies;
  for (const sg::Kernel& k : plan.kernels) {
    const auto w = sg::emit_compute_kernel(plan, k, caps.compute, sg::ComputeLanguage::Wgsl);
    const auto w2 = sg::emit_compute_kernel(plan_for(small_program(), caps), k, caps.compute, sg::ComputeLanguage::Wgsl);
    const auto g = sg::emit_compute_kernel(plan, k, caps.compute, sg::ComputeLanguage::Glsl450);
    INFO(w.source);
    CHECK(w.source == w2.source);
    CHECK(w.language == sg::ComputeLanguage::Wgsl);
    CHECK(g.language == sg::ComputeLanguage::Glsl450);
    CHECK(w.strategy == g.strategy);
    CHECK(w.workgroups == g.workgroups);
    CHECK(w.local_size == g.local_size);
    CHECK(w.bindings == g.bindings);
    CHECK(w.shared_bytes == g.shared_bytes);
    strategies.insert(w.strategy);
    // the same header comment (kernel, strategy, outputs, graph nodes, user source lines) after GLSL's #version
    REQUIRE(g.source.rfind("#version 450\n", 0) == 0);
    std::string header;  // the comment lines after #version
    for (size_t pos = 13; g.source.compare(pos, 2, "//") == 0; pos = g.source.find('\n', pos) + 1)
      header += g.source.substr(pos, g.source.find('\n', pos) + 1 - pos);
    CHECK(w.source.rfind(header, 0) == 0);
    CHECK(header.find("test_wgsl.cpp:") != std::string::npos);
    CHECK(w.source.find("@compute @workgroup_size(") != std::string::npos);
    CHECK(w.source.find("gl_") == std::string::npos);
  }
  CHECK(strategies.count("per-element"));
  CHECK(strategies.count("tree-reduction"));
}

TEST_CASE("contractions print as tiled WGSL kernels within every WebGPU preset's limits, launched like GLSL's",
          "[wgsl][codegen][tiled]") {
  sg::op_cases::Suite s;
  sg::op_cases::contraction_cases(s);
  sg::DeviceCaps dawn = sg::preset_caps("webgpu-compat");  // Dawn on llvmpipe: CPU tile sizes
  dawn.cpu_device = dawn.compute.cpu_device = true;
  for (const sg::DeviceCaps& caps : {sg::preset_caps("webgpu"), sg::preset_caps("webgpu-compat"), dawn}) {
    const sg::Plan plan = plan_for(s.program(), caps, contractions_alone());
    int tiled = 0;
    for (const sg::Kernel& k : plan.kernels) {
      const auto w = sg::emit_compute_kernel(plan, k, caps.compute, sg::ComputeLanguage::Wgsl);
      const auto g = sg::emit_compute_kernel(plan, k, caps.compute, sg::ComputeLanguage::Glsl450);
      INFO(w.source);
      CHECK(w.strategy == g.strategy);
      CHECK(w.workgroups == g.workgroups);
      CHECK(w.local_size == g.local_size);
      CHECK(w.shared_bytes == g.shared_bytes);
      CHECK(w.tiles == g.tiles);
      // every kernel the GLSL autotuner could tile is tiled in WGSL too (no silent per-element fallback)
      if (!sg::tile_candidates(plan, k, caps.compute).empty()) CHECK(w.strategy == "tiled-contraction");
      if (w.strategy != "tiled-contraction") continue;
      ++tiled;
      CHECK(w.source == sg::emit_compute_kernel(plan, k, caps.compute, sg::ComputeLanguage::Wgsl).source);  // stable
      CHECK(w.source.find("var<workgroup> tile_a: array<") != std::string::npos);
      CHECK(w.source.find("var<workgroup> tile_b: array<") != std::string::npos);
      CHECK(w.source.find("workgroupBarrier();") != std::string::npos);
      CHECK(w.source.find("// contraction: C[batch][m][n]") != std::string::npos);
      CHECK(w.source.find("test_wgsl.cpp:") == std::string::npos);  // (the nodes come from op_cases.h)
      CHECK(w.source.find("op_cases.h:") != std::string::npos);     // user source lines in the header
      std::string code;  // the WGSL without its comments (they may quote the kernel IR's tree view, `c ? a : b`)
      for (std::string_view rest = w.source; !rest.empty();) {
        const size_t eol = std::min(rest.find('\n'), rest.size());
        std::string_view line = rest.substr(0, eol);
        rest.remove_prefix(std::min(eol + 1, rest.size()));
        code.append(line.substr(0, line.find("//"))).push_back('\n');
      }
      for (const char* glsl_only : {"gl_", "\nshared ", "\nvoid ", "layout(", " ? ", "  vec4 ", "  float ", "  int ", "  barrier();"})
        CHECK(code.find(glsl_only) == std::string::npos);
      CHECK(w.shared_bytes <= caps.compute.max_shared_bytes);
      CHECK(int64_t{w.local_size[0]} * w.local_size[1] <= caps.compute.max_workgroup_invocations);
    }
    CHECK(tiled >= 12);
  }
  // tiles that cannot fit the device's workgroup memory: per-element, the header saying why
  const sg::DeviceCaps core = sg::preset_caps("webgpu");
  sg::ComputeLimits tiny = core.compute;
  tiny.max_shared_bytes = 16;  // 4 floats: no tile of these contractions fits
  const sg::Plan plan = plan_for(s.program(), core, contractions_alone());
  int fallbacks = 0;
  for (const sg::Kernel& k : plan.kernels) {
    if (sg::tile_candidates(plan, k, core.compute).empty()) continue;
    const auto w = sg::emit_compute_kernel(plan, k, tiny, sg::ComputeLanguage::Wgsl);
    INFO(w.source);
    CHECK(w.strategy == "per-element");
    CHECK(w.source.find("not tiled: tile config") != std::string::npos);
    CHECK(w.source.find("more than max_shared_bytes 16; one invocation per element instead") != std::string::npos);
    CHECK(w.source.find("var<workgroup>") == std::string::npos);
    ++fallbacks;
  }
  CHECK(fallbacks >= 12);
}

TEST_CASE("the cpu plan's register tiles: 8x8 where they leave a workgroup of tiles, one sums array, >= 4 workgroups, "
          "shifts, tap counters",
          "[wgsl][codegen][regtile]") {
  // the numbers these kernels compute are checked on Dawn against the CPU reference by test_webgpu_ops (both plans)
  sg::op_cases::Suite s;
  sg::op_cases::contraction_cases(s);
  sg::DeviceCaps cpu = sg::preset_caps("webgpu");
  cpu.cpu_device = cpu.compute.cpu_device = cpu.compute.register_tiles = true;
  const sg::DeviceCaps gpu = sg::preset_caps("webgpu");
  const sg::Plan plan = plan_for(s.program(), cpu);
  std::map<std::string, int> tiles;  // "MxN" -> register tile rows
  int counters = 0;
  for (const sg::Kernel& k : plan.kernels) {
    const auto w = sg::emit_compute_kernel(plan, k, cpu.compute, sg::ComputeLanguage::Wgsl);
    INFO(w.source);
    CHECK(w.source == sg::emit_compute_kernel(plan, k, cpu.compute, sg::ComputeLanguage::Wgsl).source);  // stable
    // no division or modulo of a coordinate by a power of two: shifts and masks (Subzero divides lane by lane)
    for (const char* div : {" / 2)", " / 4)", " / 8)", " / 16)", " / 32)", " / 64)", " % 2;", " % 4;", " % 8;", " % 16;"})
      CHECK(w.source.find(div) == std::string::npos);
    if (w.strategy != "register-tiled") continue;
    const size_t at = w.source.find("M = ");
    REQUIRE(at != std::string::npos);
    int64_t m = 0, n = 0, kk = 0, batch = 0;
    REQUIRE(std::sscanf(w.source.c_str() + at, "M = %" SCNd64 ", N = %" SCNd64 ", K = %" SCNd64 ", batch %" SCNd64, &m, &n,
                        &kk, &batch) == 4);
    const bool eight = w.source.find("register tiles of 8x8 outputs") != std::string::npos;
    const bool wide = w.source.find("register tiles of 4x8 outputs") != std::string::npos ||
                      w.source.find("register tiles of 8x4 outputs") != std::string::npos;
    CHECK((eight || wide || w.source.find("register tiles of 4x") != std::string::npos ||
           w.source.find("register tiles of 2x") != std::string::npos || w.source.find("register tiles of 1x") != std::string::npos));
    tiles[fmt::format("{}x{}", m, n)] = eight ? 8 : wide ? 48 : 4;
    // the sums in one private array and one epilogue loop (SwiftShader compiles 64 scalar sums and 64 inlined
    // epilogues ~10x longer), at least 4 workgroups (a CPU implementation spreads a dispatch by workgroups)
    if (eight) {
      CHECK(w.source.find("  var acc: array<f32, 64>;  // the register tile's sums, row-major (8x8)\n") != std::string::npos);
      CHECK(w.source.find(" acc[63] += a7 * b7;\n") != std::string::npos);
      CHECK(w.source.find("  for (var e: i32 = 0; e < 64; e++) { store_tile(m0 + (e >> 3), n0 + (e & 7), acc[e]); }\n") !=
            std::string::npos);
    }
    CHECK(w.source.find("acc_0_0") == std::string::npos);
    CHECK(std::count(w.source.begin(), w.source.end(), '\n') < 200);  // no unrolled epilogue
    const size_t wg = w.source.find(" workgroups of ");
    REQUIRE(wg != std::string::npos);
    int64_t groups = 0, local = 0;
    REQUIRE(std::sscanf(w.source.c_str() + w.source.rfind("; ", wg) + 2, "%" SCNd64 " workgroups of %" SCNd64, &groups, &local) == 2);
    CHECK((groups * batch >= 4 || local == 16));
    CHECK((local == 16 || local == 32 || local == 64));
    if (m == 16 && n == 72) CHECK(local == 16);  // 4x18 tiles of 4x4: 5 workgroups of 16, not 2 of 64
    // a 3x3 tap loop: its variables stepped as counters, no per-iteration division by 3 or 9
    if (w.source.find("the loop variables of k, stepped with it") != std::string::npos) {
      ++counters;
      CHECK(w.source.find("let carry1: bool = r1 == ") != std::string::npos);
      CHECK(w.source.find("(k / ") == std::string::npos);
      CHECK(w.source.find("k % 3") == std::string::npos);
    }
  }
  std::string seen;
  for (const auto& [mn, t] : tiles) seen += fmt::format(" {}:{}", mn, t);
  INFO("register-tiled contractions (MxN: tile rows):" << seen);
  CHECK(tiles["150x67"] == 8);  // 19x9 tiles of 8x8: at least a workgroup (64) of them
  CHECK(tiles["16x72"] == 4);   // the conv's weight gradient: 2x9 tiles of 8x8 would idle most lanes, 4x18 of 4x4
  // the conv forward (x padded: a large im2col factor; the weights: a load): 8 along the weights' side, 4 along the
  // image's (N = C_out = 5 takes 8 only where it pays: a side of 5 is two tiles of 4 or one of 8)
  int wide = 0;
  for (const auto& [mn, t] : tiles) wide += t == 48;
  CHECK(wide >= 1);
  CHECK(counters >= 1);         // the conv's C_in x 3 x 3
  // the gpu plan prints the divisions (GPU compilers strength-reduce them) and has no register tiles
  const sg::Plan gplan = plan_for(s.program(), gpu);
  int divisions = 0;
  for (const sg::Kernel& k : gplan.kernels) {
    const auto w = sg::emit_compute_kernel(gplan, k, gpu.compute, sg::ComputeLanguage::Wgsl);
    CHECK(w.strategy != "register-tiled");
    divisions += w.source.find(" / ") != std::string::npos;
    CHECK(w.source.find("stepped with it") == std::string::npos);
  }
  CHECK(divisions >= 1);
}

TEST_CASE("the cpu plans' per-element kernels: runs of 4 consecutive elements where the innermost extent allows, "
          "few elements in >= 4 workgroups, values on Dawn",
          "[wgsl][codegen][dawn]") {
  // the webgpu cpu plans take runs of 4 (a CPU implementation pays per invocation: docs/perf-log/W23.md)
  CHECK(sg::web::WebGPUTarget{.cpu_device = true}.limits().element_run == 4);
  CHECK(sg::web::WebGPUTarget{}.limits().element_run == 1);
  sg::DeviceCaps dawn = sg::preset_caps("webgpu-compat");  // Dawn runs on llvmpipe here, in compatibility mode
  dawn.cpu_device = dawn.compute.cpu_device = dawn.compute.register_tiles = true;
  dawn.compute.element_run = 4;
  sg::Program p;
  sg::Tensor x = sg::input("x", {64, 256}), odd = sg::input("odd", {64, 255}), small = sg::input("small", {8, 8});
  p.add_output("softmax_numerator", sg::exp(x - sg::max(x, {1}, true)));  // a row reduction, then a run kernel
  p.add_output("gelu", sg::gelu(x) * 2.0);
  p.add_output("odd_tanh", sg::tanh(odd));                                // 255: one element per invocation
  p.add_output("small", small * 3.0);                                     // 64 elements: too few for runs
  p.add_output("row_sums", sg::sum(x * x, {1}));                          // 64 sums of 256: 4 workgroups of 16
  std::vector<float> xs = sg::testing::randn(64 * 256, 7, 2.0f), os = sg::testing::randn(64 * 255, 8, 2.0f);
  xs[3] = NAN, xs[258] = INFINITY, xs[517] = -INFINITY, xs[1000] = -0.0f, os[254] = NAN;  // NaN/Inf inside runs
  const std::vector<float> ss = sg::testing::randn(64, 9, 1.0f);
  const std::vector<sg::Feed> feeds = {{"x", &xs}, {"odd", &os}, {"small", &ss}};
  const sg::Plan plan = plan_for(p, dawn, contractions_alone());
  TempDir root("sg_wgsl_runs");
  write_run_dir(plan, dawn.compute, feeds, sg::op_cases::kReduce, root / "runs");
  int runs = 0, singles = 0, split = 0;
  for (const sg::Kernel& k : plan.kernels) {
    const sg::ComputeKernel w = sg::emit_compute_kernel(plan, k, dawn.compute, sg::ComputeLanguage::Wgsl);
    INFO(w.source);
    REQUIRE(w.strategy == "per-element");
    const int64_t n = plan.values[k.output()].node->numel();
    const bool reduces = w.source.find("// sum over") != std::string::npos || w.source.find("// max over") != std::string::npos;
    if (w.source.find("// one invocation per run of 4 consecutive elements of ") != std::string::npos) {
      ++runs;
      CHECK(!reduces);
      CHECK(n % 4 == 0);
      CHECK(int64_t{w.workgroups[0]} * w.local_size[0] == n / 4);  // 16384 elements: 64 workgroups of 64 runs
      CHECK(w.source.find("  let elem0: i32 = run * 4;\n") != std::string::npos);
      CHECK(w.source.find("    let i1: i32 = i1_0 + 3;\n    let elem: i32 = elem0 + 3;\n") != std::string::npos);
      continue;
    }
    ++singles;
    CHECK(w.source.find("// one invocation per element of ") != std::string::npos);
    CHECK((reduces || n % 4 != 0 || n < 4 * 64 * 64));
    if (n == 64) {  // the small map and the row sums: 4 workgroups of 16, not one of 64 (one CPU thread)
      ++split;
      CHECK(w.local_size[0] == 16);
      CHECK(w.workgroups[0] == 4);
    }
  }
  CHECK(runs >= 1);
  CHECK(singles >= 3);  // the row max, the odd map, the small map and the row sums (some may share kernels)
  CHECK(split >= 1);
  check_on_dawn({root / "runs"}, true, static_cast<int>(p.outputs.size()));
}

TEST_CASE("the cpu plans' embedding gradient: a register tile whose one-hot side selects, a NaN or infinite adjoint "
          "reaches only its token's row, on Dawn", "[wgsl][codegen][dawn][regtile]") {
  sg::DeviceCaps dawn = sg::preset_caps("webgpu-compat");  // Dawn runs on llvmpipe here, in compatibility mode
  dawn.cpu_device = dawn.compute.cpu_device = dawn.compute.register_tiles = true;
  const sg::testing::EmbeddingNanCase c;  // rows 111 and 260 only get the NaN and the inf (torch's index_add)
  const sg::Program p = c.program();
  const std::vector<sg::Feed> feeds = c.feeds();
  const sg::Plan plan = plan_for(p, dawn, contractions_alone());
  TempDir root("sg_wgsl_onehot");
  write_run_dir(plan, dawn.compute, feeds, sg::op_cases::kReduce, root / "onehot");
  int tiles = 0;
  for (const sg::Kernel& k : plan.kernels) {
    const sg::ComputeKernel w = sg::emit_compute_kernel(plan, k, dawn.compute, sg::ComputeLanguage::Wgsl);
    INFO(w.source);
    if (w.strategy != "register-tiled") continue;
    ++tiles;
    CHECK(w.source.find(" += select(0.0, b0, a0 != 0.0);") != std::string::npos);
    CHECK(w.source.find(" += a0 * b0;") == std::string::npos);
  }
  CHECK(tiles == 1);
  check_on_dawn({root / "onehot"}, true, 1);
}

TEST_CASE("the cpu plan's max-pool gradients: one invocation per window (window blocks), the argmax once",
          "[wgsl][codegen][pool]") {
  // the values are checked on Dawn against the CPU reference by test_webgpu_ops (both plans: the conv list's 6x8
  // cases with ties, the edge list's with NaN, -inf and ties inside windows); here the kernels' form
  sg::op_cases::Suite s;
  sg::op_cases::conv_cases(s);
  sg::DeviceCaps cpu = sg::preset_caps("webgpu");
  cpu.cpu_device = cpu.compute.cpu_device = cpu.compute.register_tiles = true;
  const sg::Plan plan = plan_for(s.program(), cpu);
  int blocked = 0, union_blocked = 0, pools = 0;
  for (const sg::Kernel& k : plan.kernels) {
    const auto w = sg::emit_compute_kernel(plan, k, cpu.compute, sg::ComputeLanguage::Wgsl);
    INFO(w.source);
    CHECK(w.source == sg::emit_compute_kernel(plan, k, cpu.compute, sg::ComputeLanguage::Wgsl).source);  // stable
    const bool window = w.source.find("window blocks ") != std::string::npos;
    if (!window) continue;
    (w.strategy == "window-blocks" ? blocked : union_blocked) += 1;
    CHECK((w.strategy == "window-blocks" || w.strategy == "union-blocks"));
    // a 2x2 block per invocation: its elements stored at the block's base plus constant offsets
    CHECK(w.source.find("// element 1 of the block (offset ") != std::string::npos);
    CHECK(w.source.find("base + 1]") != std::string::npos);
    // the argmax loop once per block and pool, not once per element (horizontal fusion may put two pools of one
    // input in a kernel: the header lists each max_pool2d_grad node)
    size_t loops = 0, pooled = 0;
    for (size_t at = w.source.find("// argmax over"); at != std::string::npos; at = w.source.find("// argmax over", at + 1))
      ++loops;
    for (size_t at = w.source.find("  max_pool2d_grad "); at != std::string::npos;
         at = w.source.find("  max_pool2d_grad ", at + 1))
      ++pooled;
    CHECK(pooled >= 1);
    CHECK(loops == pooled);
    pools += static_cast<int>(pooled);
    if (w.strategy == "window-blocks") {
      // the dispatch covers the blocks (a quarter of the elements for 2x2 windows), not the elements
      const size_t at = w.source.find(" blocks of ");
      REQUIRE(at != std::string::npos);
      const size_t line = w.source.rfind("// ", at);
      int64_t blocks = 0, elements = 0;
      REQUIRE(std::sscanf(w.source.c_str() + line, "// %" SCNd64, &blocks) == 1);
      REQUIRE(std::sscanf(w.source.c_str() + w.source.find('(', at), "(%" SCNd64, &elements) == 1);
      CHECK(blocks * 4 == elements);
    }
  }
  CHECK(blocked + union_blocked >= 1);
  CHECK(pools >= 2);  // the two 6x8 cases of 2x2 windows (one kernel, or a union kernel, may hold both)
  // where the windows overlap along a dimension, an element's gradient loops over the windows holding it, and that
  // loop (the argmax inside it) depends on the element's offset: one invocation per element, as before
  int overlapping = 0;
  for (const sg::Kernel& k : plan.kernels)
    if (std::any_of(k.outputs.begin(), k.outputs.end(), [&](int v) {
          return plan.values[v].name.find("overlapping") != std::string::npos; })) {
      // alone, or a block of a union kernel (one invocation per element of each block's domain), no window blocks
      const auto w = sg::emit_compute_kernel(plan, k, cpu.compute, sg::ComputeLanguage::Wgsl);
      INFO(w.source);
      CHECK((w.strategy == "per-element" || w.strategy == "union-blocks"));
      CHECK(w.source.find("window blocks") == std::string::npos);
      ++overlapping;
    }
  CHECK(overlapping == 1);
  // the gpu plan keeps one invocation per element (its shaders are unchanged)
  const sg::DeviceCaps gpu = sg::preset_caps("webgpu");
  const sg::Plan gplan = plan_for(s.program(), gpu);
  for (const sg::Kernel& k : gplan.kernels)
    CHECK(sg::emit_compute_kernel(gplan, k, gpu.compute, sg::ComputeLanguage::Wgsl).source.find("window blocks") ==
          std::string::npos);
}

TEST_CASE("shadergrad dump --target wgsl writes KERNEL.wgsl per kernel, byte-stable, and Dawn compiles them all",
          "[wgsl][cli][dawn]") {
  TempDir root("sg_wgsl_dump");
  std::vector<std::string> core, compat;
  for (const char* model : {"mlp", "cnn"})
    for (const char* target : {"wgsl", "wgsl-compat"}) {
      const std::string a = root / fmt::format("{}-{}", model, target), b = a + "-again";
      std::string out;
      for (const std::string& d : {a, b}) {
        REQUIRE(shell(fmt::format("'{}' dump --model {} --target {} --out '{}'", SG_CLI, model, target, d), out) == 0);
        INFO(out);
        CHECK(out.find("*.wgsl") != std::string::npos);
      }
      size_t n = 0;
      for (auto& e : fs::directory_iterator(a)) {
        const std::string f = e.path().filename().string();
        CHECK((e.path().extension() == ".wgsl" || f == "plan.json"));
        if (e.path().extension() != ".wgsl") continue;
        ++n;
        CHECK(read_file(e.path().string()) == read_file(b + "/" + f));
      }
      const auto plan = nlohmann::json::parse(read_file(a + "/plan.json"));
      CHECK(n == plan["kernels"].size());
      (std::string(target) == "wgsl" ? core : compat).push_back(a);
    }
  check_on_dawn(core, false, 0);
  check_on_dawn(compat, true, 0);
}

TEST_CASE("every op case forward and backward compiles as WGSL and runs on Dawn like the CPU backend",
          "[wgsl][ops][dawn]") {
  using namespace sg::op_cases;
  TempDir root("sg_wgsl_ops");
  // Dawn runs on Mesa llvmpipe here: a CPU device (its loop budget splits long reductions; CPU tile sizes)
  sg::DeviceCaps dawn = sg::preset_caps("webgpu-compat");
  dawn.cpu_device = dawn.compute.cpu_device = true;
  const sg::DeviceCaps core = sg::preset_caps("webgpu");
  std::vector<std::string> run_dirs, compile_dirs;
  int outputs = 0;
  const std::vector<std::pair<const char*, void (*)(Suite&)>> lists = {
      {"unary", unary_cases},     {"binary", binary_cases}, {"reductions", reductions_cases},
      {"matmul", matmul_cases},   {"movement", movement_cases}, {"gather", gather_cases}, {"masks", masks_cases}, {"layers", layers_cases}, {"conv", conv_cases},
      {"losses", losses_cases},   {"large", large_cases},   {"long", long_cases},
      {"contraction", contraction_cases}, {"math", math_cases}, {"random", random_cases}};
  for (auto& [name, fill] : lists) {
    Suite s;
    fill(s);
    const sg::Plan plan = plan_for(s.program(), dawn);
    write_run_dir(plan, dawn.compute, s.feeds(), kReduce, root / name);
    run_dirs.push_back(root / name);
    outputs += static_cast<int>(s.program().outputs.size());
    // the GPU schedule and tile sizes of the plain webgpu preset: compiled only
    const sg::Plan gplan = plan_for(s.program(), core);
    const std::string gdir = root / (std::string(name) + "-core");
    fs::create_directories(gdir);
    for (const sg::Kernel& k : gplan.kernels)
      write_file(gdir + "/" + k.name + ".wgsl", sg::emit_compute_kernel(gplan, k, core.compute, sg::ComputeLanguage::Wgsl).source);
    compile_dirs.push_back(gdir);
  }
  // the tiled contractions with every option of the tile config (vec4 shared tiles, grouped tile order, register
  // prefetch, k rotation), which the heuristic gives only larger contractions than these, run on Dawn too
  Suite s;
  contraction_cases(s);
  const sg::Plan plan = plan_for(s.program(), dawn, contractions_alone());
  int tiled = 0;
  for (const char* config : {"8x8.4x4.k8.g2.v4.pf", "8x8.4x4.k4.g2.v4.kr", "4x8.4x8.k16.g1.v4.pf.kr"}) {
    const auto t = sg::parse_tile_config(config);
    REQUIRE(t);
    const std::string dir = root / fmt::format("contraction-{}", config);
    write_run_dir(plan, dawn.compute, s.feeds(), kReduce, dir, t);
    for (const sg::Kernel& k : plan.kernels) {
      const std::string src = read_file(dir + "/" + k.name + ".wgsl");
      if (src.find("(tiled-contraction)") == std::string::npos) continue;
      ++tiled;
      CHECK(src.find(": array<vec4<f32>, ") != std::string::npos);
    }
    run_dirs.push_back(dir);
    outputs += static_cast<int>(s.program().outputs.size());
  }
  CHECK(tiled >= 3 * 12);
  // and as the cpu plans' register tiles, every contraction a kernel of its own (in bundles small ones may join
  // union-blocks kernels)
  sg::DeviceCaps regs = dawn;
  regs.compute.register_tiles = true;
  const sg::Plan rplan = plan_for(s.program(), regs, contractions_alone());
  const std::string rdir = root / "contraction-register-tiles";
  write_run_dir(rplan, regs.compute, s.feeds(), kReduce, rdir);
  int registers = 0, long_k = 0;
  for (const sg::Kernel& k : rplan.kernels) {
    const std::string src = read_file(rdir + "/" + k.name + ".wgsl");
    registers += src.find("(register-tiled)") != std::string::npos;
    // no steps of k per iteration in WGSL (the C kernels' unrolling ran slower on SwiftShader: docs/perf-log/W21.md):
    // the K = 260 x.W^T is one step of k per iteration, each sum updated with its product
    CHECK(src.find(" steps per iteration") == std::string::npos);
    if (src.find("for (var k: i32 = 0; k < 260; k++)") == std::string::npos) continue;
    ++long_k;
    CHECK(src.find("acc[0] += a0 * b0;") != std::string::npos);
  }
  CHECK(registers >= 13);
  CHECK(long_k >= 1);
  run_dirs.push_back(rdir);
  outputs += static_cast<int>(s.program().outputs.size());
  check_on_dawn(run_dirs, true, outputs);
  check_on_dawn(compile_dirs, false, 0);
}
