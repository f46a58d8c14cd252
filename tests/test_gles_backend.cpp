// GLES backend vs the CPU reference: whole train steps (forward, backward, optimizer update) on llvmpipe.
#include <catch2/catch.hpp>

#include "test_models.h"
#include "test_util.h"
#include "vulkan_test_util.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/emit.h"
#include "sg/nn.h"
#include "sg/sg.h"

using namespace sg;

namespace {

using sg::testing::expect_close;
using sg::testing::randn;

using sg::testing::Mlp;

/// Three SGD-with-momentum train steps of the MLP (28x28 inputs) or seed 002's CNN (8x8) on one backend: the
/// losses, every parameter afterwards, and counts from the plan (split-K partial kernels, row-planed values).
/// SGD with momentum: Adam's normalised first steps would turn float rounding differences of near-zero gradients
/// into visible parameter differences.
struct StepRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;
  int partial_kernels = 0;
  int planed_values = 0;
  int col_planed_values = 0;
};
/// The SGD-with-momentum train step of the MLP (28x28 inputs, x [batch, 1, 28, 28]) or seed 002's CNN (8x8),
/// labels [batch] i32, its parameters built with Rng(seed).
struct ModelStep {
  std::unique_ptr<nn::Sequential> net;
  std::unique_ptr<Optimizer> opt;  // kept alive with the program it updates
  Program program;
  int64_t hw = 0;
};
ModelStep make_model_step(const std::string& model, int64_t batch, uint64_t seed) {
  ModelStep m;
  nn::Rng rng(seed);
  m.hw = model == "mlp" ? 28 : 8;
  m.net = nn::make_model(model, 1, m.hw, m.hw);
  m.net->build(rng);
  Tensor x = input("x", {batch, 1, m.hw, m.hw});
  Tensor y = input("labels", {batch}, DType::i32);
  m.opt = make_sgd({.lr = 0.05, .momentum = 0.9});
  m.program = make_train_step(cross_entropy((*m.net)(x), y), m.net->parameters(), *m.opt);
  return m;
}

StepRun train_steps(const std::string& model, int64_t batch, const BackendOptions& bo, uint64_t seed) {
  ModelStep m = make_model_step(model, batch, seed);
  const auto& [net, opt, p, hw] = m;
  auto be = make_backend(bo).backend;
  auto exe = be->compile(p);
  StepRun r;
  if (const Plan* plan = exe->plan()) {
    for (auto& k : plan->kernels) r.partial_kernels += k.name.find("_partial") != std::string::npos;
    for (auto& v : plan->values) r.planed_values += v.planes > 1;
    for (auto& v : plan->values) r.col_planed_values += v.col_planes > 1;
  }
  std::vector<float> xs = randn(batch * hw * hw, static_cast<uint32_t>(8 + seed)), ys(batch);
  for (int64_t i = 0; i < batch; ++i) ys[i] = static_cast<float>((i * 7) % 10);
  for (int step = 0; step < 3; ++step) r.losses.push_back(exe->run({{"x", &xs}, {"labels", &ys}})[0][0]);
  for (auto& t : net->parameters()) r.params.push_back(be->read(t));
  return r;
}

void expect_same_steps(const StepRun& gles, const StepRun& cpu) {
  expect_close(gles.losses, cpu.losses, 1e-4, 1e-6, "losses");
  REQUIRE(gles.params.size() == cpu.params.size());
  for (size_t i = 0; i < cpu.params.size(); ++i) expect_close(gles.params[i], cpu.params[i], 1e-4, 1e-5, "param");
}

}  // namespace

TEST_CASE("CPU devices: one rule tells a CPU implementation by its GL, Vulkan or WebGPU description",
          "[target][backend]") {
  for (const char* cpu : {"llvmpipe (LLVM 15.0.6, 256 bits)", "softpipe", "Google SwiftShader",
                          "ANGLE (Google, Vulkan 1.3.0 (SwiftShader Device (Subzero) (0x0000C0DE)), SwiftShader driver)",
                          "LAVAPIPE", "Microsoft Basic Render Driver", "google swiftshader", "acme cpu"}) {
    INFO(cpu);
    CHECK(is_cpu_renderer(cpu));
  }
  for (const char* gpu : {"NVIDIA H100 80GB HBM3/PCIe/SSE2", "Mesa Intel(R) UHD Graphics 620 (KBL GT2)",
                          "AMD Radeon Graphics (radeonsi, renoir)", "cpus-of-warpspeed", ""}) {
    INFO(gpu);
    CHECK_FALSE(is_cpu_renderer(gpu));
  }
  for (std::string_view n : cpu_renderer_names())  // lower case: is_cpu_renderer lowers only the description
    CHECK(std::none_of(n.begin(), n.end(), [](char c) { return c >= 'A' && c <= 'Z'; }));
}

TEST_CASE("GLES Adam train steps of an odd-sized MLP equal the CPU backend", "[gles][backend]") {
  const int64_t B = 7, I = 37, H = 13, O = 5;
  auto run_steps = [&](const std::string& kind, int64_t max_width) {
    Mlp m(B, I, H, O);
    auto opt = make_adam({.lr = 0.01});
    Program p = make_train_step(m.loss, m.params(), *opt);
    BackendOptions bo;
    bo.kind = kind;
    bo.max_texture_width = max_width;
    auto be = make_backend(bo).backend;
    REQUIRE(be->name() == kind);
    auto exe = be->compile(p);
    std::vector<float> losses;
    for (int step = 0; step < 4; ++step) {
      std::vector<float> xs = randn(B * I, 100 + step), ys(B);
      for (int64_t i = 0; i < B; ++i) ys[i] = static_cast<float>((i * 3 + step) % O);
      auto out = exe->run({{"x", &xs}, {"labels", &ys}});
      losses.push_back(out[0][0]);
    }
    std::vector<std::vector<float>> params;
    for (auto& t : m.params()) params.push_back(be->read(t));
    return std::make_pair(losses, params);
  };
  auto cpu = run_steps("cpu", 0);
  SECTION("default texture width") {
    auto gl = run_steps("gles", 0);
    expect_close(gl.first, cpu.first, 1e-4, 1e-6, "losses");
    for (size_t i = 0; i < cpu.second.size(); ++i) expect_close(gl.second[i], cpu.second[i], 1e-4, 1e-5, "param");
  }
  SECTION("texture rows wrap at width 4") {
    auto gl = run_steps("gles", 4);
    expect_close(gl.first, cpu.first, 1e-4, 1e-6, "losses");
    for (size_t i = 0; i < cpu.second.size(); ++i) expect_close(gl.second[i], cpu.second[i], 1e-4, 1e-5, "param");
  }
}

TEST_CASE("reductions longer than llvmpipe's 65535-iteration loop budget are split and stay exact", "[gles][backend]") {
  // llvmpipe silently stops loops after 65535 iterations per invocation; the scheduler splits such reductions
  // into a partial kernel + a final one (ScheduleOptions::max_loop_iterations).
  Tensor x = input("x", {3, 137, 163});
  Tensor a = input("a", {2, 20000}), b = input("b", {20000, 3});
  Program p;
  p.add_output("sum", sum(x));
  p.add_output("max", max(x * -1.0));
  p.add_output("matmul", matmul(a, b));
  std::vector<float> xs = randn(3 * 137 * 163, 7), as = randn(40000, 8), bs = randn(60000, 9);
  std::vector<std::vector<float>> res[2];
  int i = 0;
  for (const char* kind : {"cpu", "gles"}) {
    auto be = make_backend({.kind = kind}).backend;
    auto exe = be->compile(p);
    if (std::string(kind) == "gles") CHECK(exe->kernels_per_step() > 3);  // split into partial + final kernels
    res[i++] = exe->run({{"x", &xs}, {"a", &as}, {"b", &bs}});
  }
  expect_close(res[1][0], res[0][0], 1e-4, 1e-3, "sum");
  expect_close(res[1][1], res[0][1], 1e-6, 1e-6, "max");
  expect_close(res[1][2], res[0][2], 1e-4, 1e-3, "matmul");
}

TEST_CASE("split-K for parallelism (the GPU setting) keeps MLP and CNN train steps equal to the CPU backend",
          "[gles][backend]") {
  // On GPUs the scheduler splits long reductions with few output texels into partial sums
  // (ScheduleOptions::min_parallel_texels); llvmpipe turns it off by default, so force it here.
  for (std::string model : {"mlp", "cnn"}) {
    INFO(model);
    const int64_t batch = model == "mlp" ? 16 : 8;
    StepRun cpu = train_steps(model, batch, {.kind = "cpu"}, 3);
    StepRun gl = train_steps(model, batch, {.kind = "gles", .min_parallel_texels = 16384}, 3);
    CHECK(gl.partial_kernels > 0);  // some reductions were split for parallelism
    expect_same_steps(gl, cpu);
  }
}

TEST_CASE("row planes (a fragment computes 4 rows of a matmul into 4 render targets) and column planes (4 x 8 "
          "into 8) equal the CPU backend", "[gles][backend]") {
  // ScheduleOptions::row_planes (the GLES default on every device, pinned here with the other switches). The
  // planed values are read by matmuls (as the A operand: texel loads), by reductions over rows, by an elementwise
  // output and transposed (t_T: lane d of a texel reads plane d, the planed gather of the fragment emitter);
  // hooks and outputs must see the row-major values. With ScheduleOptions::col_planes = 2, h and the output u
  // also get 2 column planes (8 textures); t and t_direct (one kernel of 2 outputs: 16 render targets) and bt
  // (too few texels per plane) keep row planes only.
  // 2 row planes: a texel's 4 transposed lanes come from 2 texel positions in 2 planes (the planed gather's lane
  // groups); column planes need 4 row planes
  const std::pair<int, int> planes = GENERATE(std::pair{4, 1}, std::pair{4, 2}, std::pair{2, 1});
  const int row_planes = planes.first, col_planes = planes.second;
  INFO("row_planes " << row_planes << ", col_planes " << col_planes);
  Tensor a = input("a", {256, 24}), b = input("b", {24, 128}), c = input("c", {128, 12});
  Tensor x = input("x", {512, 32}), w = input("w", {64, 32}), bias = input("bias", {64});
  Tensor ba = input("ba", {8, 64, 16}), bb = input("bb", {8, 16, 32}), bu = input("bu", {24, 256});
  Tensor tt = input("tt", {128, 256});
  Tensor t = matmul(a, b);                              // 256x128
  Tensor h = relu(matmul(x, transpose(w)) + bias);      // 512x64, x.W^T with a bias + relu epilogue
  Tensor bt = matmul(ba, bb);                           // 8 x 64x32, batched
  Program p;
  p.add_output("tc", matmul(t, c));
  p.add_output("t_rows", sum(t, {1}));
  p.add_output("t_cols", sum(t, {0}));
  p.add_output("h_sum", sum(h, {0}));
  p.add_output("h_mat", matmul(transpose(h), h));
  p.add_output("bt_sum", sum(bt, {0}));
  p.add_output("t_direct", matmul(a, b) * 1.0);         // a planed program output, read back interleaved
  p.add_output("u", matmul(a, bu));                     // 256x256, a column-planed program output
  p.add_output("t_T", transpose(t) * 2.0 + tt);        // the transpose of the planed t (tt: texel reads, lane mode)
  std::vector<float> as = randn(256 * 24, 61), bs = randn(24 * 128, 62), cs = randn(128 * 12, 63),
                     xs = randn(512 * 32, 64), ws = randn(64 * 32, 65), biases = randn(64, 66),
                     bas = randn(8 * 64 * 16, 67), bbs = randn(8 * 16 * 32, 68), bus = randn(24 * 256, 69),
                     tts = randn(128 * 256, 70);
  std::vector<Feed> feeds = {{"a", &as}, {"b", &bs}, {"c", &cs}, {"x", &xs}, {"w", &ws}, {"bias", &biases},
                             {"ba", &bas}, {"bb", &bbs}, {"bu", &bus}, {"tt", &tts}};
  std::map<const Node*, std::vector<float>> seen[2];
  std::vector<std::vector<float>> res[2];
  std::vector<std::unique_ptr<Backend>> keep;
  std::vector<std::unique_ptr<Executable>> exes;
  for (int i = 0; i < 2; ++i) {
    BackendOptions bo;
    bo.kind = i == 0 ? "cpu" : "gles";
    bo.row_planes = row_planes;
    bo.col_planes = col_planes;
    // the same schedule on every device: no split-K partial values (nodes the CPU backend does not have), no
    // row layouts, no unions (the next test runs the whole GPU schedule)
    bo.min_parallel_texels = 0;
    bo.row_layout = false;
    bo.union_domains = false;
    keep.push_back(make_backend(bo).backend);
    exes.push_back(keep.back()->compile(p));
    auto* store = &seen[i];
    exes.back()->set_kernel_hook([store](const KernelEvent& ev) { (*store)[ev.node] = ev.read(); });
    res[i] = exes.back()->run(feeds);
  }
  const Plan* plan = exes[1]->plan();
  REQUIRE(plan != nullptr);
  int planed = 0, col_planed = 0;
  for (auto& v : plan->values) {
    if (v.planes == 1) continue;
    ++planed;
    col_planed += v.col_planes == 2;
    INFO(v.name << " " << v.node->describe());
    REQUIRE(seen[0].count(v.node.get()));
    REQUIRE(seen[1].count(v.node.get()));
    expect_close(seen[1][v.node.get()], seen[0][v.node.get()], 1e-4, 1e-4, "hook read of a planed value");
  }
  CHECK(planed >= 5);  // t, h, bt and the outputs t_direct and u
  CHECK(col_planed == (col_planes == 2 ? 2 : 0));  // h and u
  if (col_planes == 2) {
    CHECK(plan->value_of(h.node().get()).col_planes == 2);
    CHECK(plan->value_of(t.node().get()).planes == 4);
  }
  for (size_t i = 0; i < res[0].size(); ++i) {
    INFO(p.output_names[i]);
    expect_close(res[1][i], res[0][i], 1e-4, 1e-3, p.output_names[i]);
  }
}

TEST_CASE("the GPU schedule (split-K, row layouts, row planes, union-domain kernels together) keeps MLP b=128 "
          "and CNN train steps equal to the CPU backend", "[gles][backend]") {
  // (with a glFlush after every draw, as on GPUs)
  BackendOptions gpu{.kind = "gles", .min_parallel_texels = 16384, .row_layout = true, .row_planes = 4,
                     .union_domains = true, .flush_draws = true};
  for (std::string model : {"mlp", "cnn"}) {
    INFO(model);
    const int64_t batch = model == "mlp" ? 128 : 64;
    StepRun cpu = train_steps(model, batch, {.kind = "cpu"}, 5);
    StepRun gl = train_steps(model, batch, gpu, 5);
    if (model == "mlp") CHECK(gl.planed_values > 0);  // x.W1^T's partial sums are computed in row planes
    expect_same_steps(gl, cpu);
  }
}

TEST_CASE("the GPU schedule with column planes (a 4 x 8 tile per fragment) keeps MLP b=128 and CNN train steps "
          "equal to the CPU backend", "[gles][backend]") {
  BackendOptions gpu{.kind = "gles", .min_parallel_texels = 16384, .row_layout = true, .row_planes = 4,
                     .col_planes = 2, .union_domains = true, .flush_draws = true};
  for (std::string model : {"mlp", "cnn"}) {
    INFO(model);
    const int64_t batch = model == "mlp" ? 128 : 64;
    StepRun cpu = train_steps(model, batch, {.kind = "cpu"}, 5);
    StepRun gl = train_steps(model, batch, gpu, 5);
    if (model == "mlp") CHECK(gl.col_planed_values > 0);
    expect_same_steps(gl, cpu);
  }
}

TEST_CASE("GLES backend options out of range are ValueErrors naming the option", "[gles][backend]") {
  // (switches are std::optional<bool>: out-of-range values cannot be written)
  CHECK_THROWS_WITH(make_backend({.kind = "gles", .max_outputs = 0}), Catch::Contains("max_outputs"));
  CHECK_THROWS_WITH(make_backend({.kind = "gles", .min_parallel_texels = -1}), Catch::Contains("min_parallel_texels"));
  CHECK_THROWS_WITH(make_backend({.kind = "gles", .row_planes = 0}), Catch::Contains("row_planes"));
  CHECK_THROWS_WITH(make_backend({.kind = "gles", .row_planes = 9}), Catch::Contains("row_planes"));
  CHECK_THROWS_WITH(make_backend({.kind = "gles", .col_planes = 0}), Catch::Contains("col_planes"));
  CHECK_THROWS_WITH(make_backend({.kind = "gles", .col_planes = 3}), Catch::Contains("col_planes"));
  CHECK_THROWS_AS(make_backend({.kind = "gles", .col_planes = -2}), sg::ValueError);
  CHECK_NOTHROW(make_backend({.kind = "gles", .col_planes = 2}));
  CHECK_NOTHROW(make_backend({.kind = "gles", .union_domains = false, .flush_draws = false}));
}

TEST_CASE("values stored transposed read back row-major and equal the CPU backend", "[gles][backend]") {
  // The MLP's activation gradient dh is read only by dW1 = x^T.dh (as the B operand) and db1 = sum over rows:
  // the scheduler stores it transposed (Value::transposed) so both loops walk contiguous texels.
  Mlp m(8, 20, 16, 5);  // hidden 16 and batch 8: both multiples of 4
  auto opt = make_sgd({.lr = 0.1});
  Program p = make_train_step(m.loss, m.params(), *opt);
  std::vector<float> xs = randn(8 * 20, 31), ys = {0, 1, 2, 3, 4, 0, 1, 2};
  std::map<const Node*, std::vector<float>> seen[2];
  const Plan* plan = nullptr;
  std::vector<std::unique_ptr<Backend>> keep;
  std::vector<std::unique_ptr<Executable>> exes;
  int i = 0;
  for (const char* kind : {"cpu", "gles"}) {
    keep.push_back(make_backend({.kind = kind}).backend);
    exes.push_back(keep.back()->compile(p));
    auto* store = &seen[i++];
    exes.back()->set_kernel_hook([store](const KernelEvent& ev) { (*store)[ev.node] = ev.read(); });
    exes.back()->run({{"x", &xs}, {"labels", &ys}});
  }
  plan = exes[1]->plan();
  REQUIRE(plan != nullptr);
  int transposed = 0;
  for (auto& v : plan->values) {
    if (!v.transposed) continue;
    ++transposed;
    INFO(v.name << " " << v.node->describe());
    CHECK(v.stored_shape() == Shape{v.node->shape[1], v.node->shape[0]});
    REQUIRE(seen[0].count(v.node.get()));
    REQUIRE(seen[1].count(v.node.get()));
    expect_close(seen[1][v.node.get()], seen[0][v.node.get()], 1e-5, 1e-6, "transposed value");
    // the kernel reading it as a matmul operand fetches whole texels along the reduction (load4_, or texture() where
    // the texel coordinates come straight from the index)
    bool read_in_tile = false;
    for (auto& k : plan->kernels)
      if (std::find(k.inputs.begin(), k.inputs.end(), v.id) != k.inputs.end()) {
        const std::string src = emit_glsl450(*plan, k, ShaderStage::Fragment);
        read_in_tile |= src.find("load4_" + v.name) != std::string::npos ||
                        src.find("texture(in_" + v.name + ", ") != std::string::npos;
      }
    CHECK(read_in_tile);
  }
  CHECK(transposed == 1);
}

TEST_CASE("texel addresses in textures of non-power-of-two width (a float multiply and a correction step) hold "
          "over a million texels", "[gles][backend]") {
  // Row-aligned layouts: x [300, 4004] is 1001 texels wide and 300 high, y = x^T + 1 [4004, 300] 75 texels wide and
  // 4004 high. The fragment emitter computes a texel's row as int(float(t) * (1 / width)) corrected by one step
  // (no integer division: docs/perf-log/W5.md); y reads x element by element (scalar loads), z = 2x + 1
  // texel by texel. Every element is an exact small integer, so the results must be exact.
  const int64_t R = 300, C = 4004;
  std::vector<float> xs(static_cast<size_t>(R * C));
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 1000003);
  Tensor x = input("x", {R, C});
  Program p;
  p.add_output("y", transpose(x) + 1.0);
  p.add_output("z", x * 2.0 + 1.0);
  auto gl = make_backend({.kind = "gles", .row_layout = true}).backend;
  auto exe = gl->compile(p);
  const Plan* plan = exe->plan();
  REQUIRE(plan != nullptr);
  CHECK(plan->value_of(x.node().get()).layout.width == 1001);
  auto out = exe->run({{"x", &xs}});
  REQUIRE(out.size() == 2);
  size_t wrong_y = 0, wrong_z = 0;
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      const float v = xs[static_cast<size_t>(i * C + j)];
      wrong_y += out[0][static_cast<size_t>(j * R + i)] != v + 1.0f;
      wrong_z += out[1][static_cast<size_t>(i * C + j)] != 2.0f * v + 1.0f;
    }
  CHECK(wrong_y == 0);
  CHECK(wrong_z == 0);
}

TEST_CASE("conv weight gradients with runtime tap shifts (reduce mode: texel pairs, shifts and masks hoisted) equal "
          "the CPU backend", "[gles][backend]") {
  // The digits CNN's two weight gradients (docs/perf-log/W12d.md) at batch 5, and an odd one (3 -> 5
  // channels, a 3x5 kernel over 9x12 planes, padding (1, 2): shifts -2..2 across 3-texel rows, 225 outputs: the last
  // texel runs past the end). In reduce mode a
  // texel's 4 lanes are 4 taps (c, kh, kw) whose shift kw - padding is a runtime value: each lane reads the two
  // texels around the shifted input row (no load4u_ call per fetch), its components picked by selects whose
  // conditions, like the padding masks, are computed once before the loops.
  struct Case {
    Shape x, w;
    int64_t ph, pw;
  };
  for (const Case& c : {Case{{5, 1, 8, 8}, {8, 1, 3, 3}, 1, 1}, Case{{5, 8, 4, 4}, {16, 8, 3, 3}, 1, 1},
                        Case{{2, 3, 9, 12}, {5, 3, 3, 5}, 1, 2}}) {
    INFO("x " << shape_str(c.x) << ", w " << shape_str(c.w));
    Tensor x = input("x", c.x);
    Tensor w = input("w", c.w);
    Tensor y = conv2d(x, w, Tensor(), {.padding = {c.ph, c.pw}});
    Tensor r = input("r", y.shape());
    Program p;
    p.add_output("dw", grad(sum(y * r), {w})[0]);
    std::vector<float> xs = randn(static_cast<size_t>(numel(c.x)), 3), ws = randn(static_cast<size_t>(numel(c.w)), 4),
                       rs = randn(static_cast<size_t>(y.numel()), 5);
    const std::vector<Feed> feeds = {{"x", &xs}, {"w", &ws}, {"r", &rs}};
    auto want = make_cpu_backend()->compile(p)->run(feeds);
    // the CPU rasterisers' schedule on every device (what the webgl2 plan runs on SwiftShader): on GPUs the defaults
    // split these long sums over partial-sum fragments (split-K) and row-align the layouts instead
    auto gl = make_backend({.kind = "gles", .min_parallel_texels = 0, .row_layout = false, .union_domains = false}).backend;
    auto exe = gl->compile(p);
    const Plan* plan = exe->plan();
    REQUIRE(plan != nullptr);
    int seen = 0;
    for (const Kernel& k : plan->kernels) {
      if (k.name.find("conv2d_grad_weight") == std::string::npos) continue;
      ++seen;
      const std::string src = emit_glsl450(*plan, k, ShaderStage::Fragment);
      INFO(src);
      CHECK(src.find("texel fetches shared") != std::string::npos);  // reduce mode, the 4 lanes in one loop nest
      CHECK(src.find("load4u_x") == std::string::npos);
      CHECK(src.find("), bvec4(c") != std::string::npos);  // the texel pair's components: hoisted selects
      // the padding masks (vector comparisons) are computed before the loops, not in them
      REQUIRE(src.find("for (int r0") != std::string::npos);
      const std::string loops = src.substr(src.find("for (int r0"));
      CHECK(loops.find("greaterThanEqual") == std::string::npos);
    }
    CHECK(seen == 1);
    expect_close(exe->run(feeds)[0], want[0], 1e-4, 1e-5, "dw");
  }
}

TEST_CASE("jam mode: a conv's 3x3 taps and 4 channels' weights from shared texels (forward, input gradient), a 10-class contraction unrolled "
          "with its strided reads shared, equal the CPU backend", "[gles][backend]") {
  // The digits CNN and the MLP train steps at batch 8 under the CPU rasterisers' schedule (the webgl2 plan's on
  // SwiftShader). Jam mode unrolls a conv's kernel height with its width and its input channels by 4, so the
  // weights of 4 channels' taps are 36 consecutive elements from an aligned base: whole texels, no scalar load_
  // call per tap (docs/perf-log/W15.md). Its input gradient reads w[co, ci, ., .] at co * 72 + ci * 9 + tap
  // with ci the output's channel, a runtime shift: 4-element windows shared by neighbouring taps. The MLP's dh = dlogits . W2 (10 classes, ReLU mask) is written
  // as 10 terms whose lanes read dlogits at stride 10: texels with components picked at compile time, no loop.
  const BackendOptions bo{.kind = "gles", .min_parallel_texels = 0, .row_layout = false, .union_domains = false};
  for (const std::string model : {"cnn", "mlp"}) {
    INFO(model);
    const int64_t batch = 8;
    ModelStep m = make_model_step(model, batch, 5);
    const auto& [net, opt, p, hw] = m;
    std::vector<float> xs = randn(static_cast<size_t>(batch * hw * hw), 9), ys(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i) ys[static_cast<size_t>(i)] = static_cast<float>((i * 3) % 10);
    const std::vector<Feed> feeds = {{"x", &xs}, {"labels", &ys}};
    auto cpu_be = make_cpu_backend();
    auto cpu = cpu_be->compile(p);
    auto be = make_backend(bo).backend;
    auto exe = be->compile(p);
    const Plan* plan = exe->plan();
    REQUIRE(plan != nullptr);
    int checked = 0;
    for (const Kernel& k : plan->kernels) {
      const std::string src = emit_glsl450(*plan, k, ShaderStage::Fragment);
      INFO(k.name << "\n" << src);
      const std::string body = src.substr(src.find("void main"));
      const bool forward = k.name.rfind("conv2d_add", 4) == 4, input_grad = k.name.find("conv2d_grad_input") != std::string::npos;
      if (model == "cnn" && (forward || input_grad)) {  // conv2 forward and its input gradient
        for (int in : k.inputs)
          if (plan->values[in].node->shape.size() == 4 && plan->values[in].node->shape[1] == 8 &&
              plan->values[in].node->shape[2] == 3) {  // conv2's weight [16, 8, 3, 3]
            ++checked;
            CHECK(body.find("load_" + plan->values[in].name + "(") == std::string::npos);
            CHECK(body.find("r0 += 4") != std::string::npos);
          }
      }
      if (model == "mlp" && k.name.find("matmul_le_where") != std::string::npos) {
        for (int in : k.inputs)
          if (plan->values[in].node->shape == Shape{batch, 10}) {  // dlogits, read down its columns
            ++checked;
            CHECK(body.find("load_" + plan->values[in].name + "(") == std::string::npos);
            CHECK(body.find("for (int r0") == std::string::npos);
          }
      }
    }
    CHECK(checked == (model == "cnn" ? 2 : 1));
    for (int step = 0; step < 3; ++step) {
      auto want = cpu->run(feeds);
      auto got = exe->run(feeds);
      expect_close(got[0], want[0], 1e-4, 1e-6, "loss");
    }
    for (auto& t : net->parameters()) expect_close(be->read(t), cpu_be->read(t), 1e-4, 1e-5, "parameter");
  }
}

TEST_CASE("every backend: an executable runs after the backend that compiled it is gone", "[backend][lifetime]") {
  // make_backend(...).backend->compile(p) keeps no backend: the executable owns what it runs on (device,
  // programs, persistent values). Before, vulkan's run() segfaulted and gles' failed on a destroyed context.
  Tensor x = input("x", {4, 3});
  Tensor w = param("w", {3, 2}, {0.5f, -0.25f, 0.125f, 0.75f, -0.5f, 0.25f});
  Tensor y = matmul(x, w);
  Tensor loss = mean(y * y);
  auto sgd = make_sgd({.lr = 0.5});
  const Program step = make_train_step(loss, {w}, *sgd, {{"w", w}});
  const std::vector<float> xs = {1, 2, 3, -1, 0.5f, 2, 0, 1, -2, 3, 1, 1};
  auto run3 = [&](Executable& exe) {
    std::vector<std::vector<float>> outs;
    for (int i = 0; i < 3; ++i) {
      auto o = exe.run({{"x", &xs}});
      outs.push_back(o[0]);
      outs.push_back(o[1]);
    }
    return outs;
  };
  std::unique_ptr<Executable> cpu = make_cpu_backend()->compile(step);
  const auto want = run3(*cpu);
  for (const BackendOptions& bo : {BackendOptions{.kind = "gles"}, BackendOptions{.kind = "gles-compute"},
                                   sg::testing::vulkan_options()}) {
    INFO("backend " << bo.kind);
    std::unique_ptr<Executable> exe = make_backend(bo).backend->compile(step);  // the backend is destroyed here
    const auto got = run3(*exe);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
      expect_close(got[i], want[i], 1e-5, 1e-6, bo.kind + " output " + std::to_string(i));
    exe.reset();  // the last owner releases the device's objects, then the device
  }
}
