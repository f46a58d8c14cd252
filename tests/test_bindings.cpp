// Train steps that used to exceed a kernel's bindings or mix layouts in one draw (issue 35), on every native GPU
// backend against the CPU reference backend, three steps each (the program's outputs include the parameters and
// states, read before each step's updates, so the updates of the earlier steps are compared too):
//  - the Adam updates of a (1, N) and an (N) parameter and a (1, N) output, with row-aligned layouts (one draw of
//    two layouts before);
//  - a one-element parameter trained with Adam;
//  - a kernel writing four State updates (BatchNorm-style running statistics);
//  - a LayerNorm train step (Adam's update reads more than 8 storage buffers' worth of values);
//  - a tanh RNN unrolled over 64 steps (the weight's gradient sums 64 per-step terms);
//  - torch-style global-norm gradient clipping of a 6-layer MLP (one norm over every gradient);
//  - nn::Linear, nn::LayerNorm, GELU, nn::Linear, nn::RMSNorm with Adam (issue 36's layers as a user writes them;
//    its bundle is also exported with every webgpu plan for the core and compatibility limits, no kernel refused).
// Tolerance: |gpu - cpu| <= 1e-5 + 1e-4 |cpu| (f32 kernels against the f64 reference, a few steps).
// The same models exported as bundles (webgl2 and the webgpu cpu plan) run their three steps in headless Chromium
// (SwiftShader) through the bundle's runtime; runChecks compares every step's outputs and the persistent values
// after the last step with the CPU reference's (the bundle's tolerances).
#include <catch2/catch.hpp>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <sstream>

#include "sg/nn.h"
#include "sg/sg.h"
#include "sg/web_export.h"
#include "test_util.h"
#include "test_web_util.h"
#include "vulkan_test_util.h"

using namespace sg;

namespace {

using sg::testing::uniform;

/// A train step and its feeds (the same every step).
struct Model {
  Program program;
  std::vector<std::pair<std::string, std::vector<float>>> feeds;
  std::vector<std::unique_ptr<Optimizer>> keep;  // optimizers outlive the program's construction
};

/// make_train_step with every parameter and `also` as extra outputs (their values before the step).
Program train(const Tensor& loss, const std::vector<Tensor>& params, Optimizer& opt,
              std::vector<std::pair<std::string, Tensor>> also = {}) {
  for (const Tensor& p : params) also.push_back({"param " + p.name(), p});
  return make_train_step(loss, params, opt, also);
}

Model row_and_vector() {
  Model m;
  // with row-aligned layouts a (1, 12) tensor is a texture row of 3 texels and a (12) one a 1 x 3 block: the Adam
  // updates of p and q (one domain, read at their own elements) must not share a draw
  Tensor p = param("p", {12}, uniform(12, 1));
  Tensor q = param("q", {1, 12}, uniform(12, 6));
  Tensor x = input("x", {1, 12});
  Tensor y = reshape(p, {1, 12}) * q * x;
  m.keep.push_back(make_adam({.lr = 0.01}));
  m.program = train(sum(y * y), {p, q}, *m.keep.back(), {{"y", y}});
  m.feeds = {{"x", uniform(12, 2)}};
  return m;
}

Model one_element() {
  Model m;
  Tensor s = param("s", {1}, {0.75f});
  Tensor x = input("x", {8});
  m.keep.push_back(make_adam({.lr = 0.05}));
  m.program = train(sum((x * s - 1.0) * (x * s - 1.0)), {s}, *m.keep.back());
  m.feeds = {{"x", uniform(8, 3)}};
  return m;
}

Model four_states() {
  Model m;
  Tensor x = input("x", {16, 4});
  Tensor w = param("w", {4}, uniform(4, 4));
  Tensor mean_x = mean(x, {0}), var_x = mean((x - mean_x) * (x - mean_x), {0});
  std::vector<Tensor> st;
  for (int i = 0; i < 4; ++i) st.push_back(state("running_" + std::to_string(i), {4}, uniform(4, 10 + i, 0, 1)));
  m.keep.push_back(make_sgd({.lr = 0.1}));
  m.program = train(sum((x - mean_x) * (x - mean_x) * w), {w}, *m.keep.back(),
                    {{"running_0", st[0]}, {"running_1", st[1]}, {"running_2", st[2]}, {"running_3", st[3]}});
  m.program.updates.push_back({st[0].node(), Tensor(st[0] * 0.9 + mean_x * 0.1).node()});
  m.program.updates.push_back({st[1].node(), Tensor(st[1] * 0.9 + var_x * 0.1).node()});
  m.program.updates.push_back({st[2].node(), Tensor(st[2] * 0.5 + mean_x * 0.5).node()});
  m.program.updates.push_back({st[3].node(), Tensor(st[3] * 0.5 + var_x * 0.5).node()});
  m.feeds = {{"x", uniform(64, 5)}};
  return m;
}

Model layer_norm_model() {
  Model m;
  Tensor x = input("x", {8, 16});
  Tensor gamma = param("gamma", {16}, uniform(16, 20, 0.5, 1.5)), beta = param("beta", {16}, uniform(16, 21));
  Tensor w = param("w", {16, 4}, uniform(64, 22, -0.5, 0.5));
  Tensor mu = mean(x, {1}, true);
  Tensor var = mean((x - mu) * (x - mu), {1}, true);
  Tensor h = (x - mu) * rsqrt(var + 1e-5) * gamma + beta;
  Tensor y = matmul(h, w);
  m.keep.push_back(make_adam({.lr = 0.01}));
  m.program = train(mean(y * y), {gamma, beta, w}, *m.keep.back());
  m.feeds = {{"x", uniform(128, 23)}};
  return m;
}

/// nn::Linear -> nn::LayerNorm -> GELU -> nn::Linear -> nn::RMSNorm with mse_loss and Adam: the layers as a user
/// writes them (issue 36), exported and trained on WebGPU and WebGL2 like the hand-written layer_norm above.
Model nn_norm() {
  Model m;
  static std::vector<std::unique_ptr<nn::Sequential>> nets;  // parameters outlive the program's construction
  nn::Rng rng(24);
  nets.push_back(std::make_unique<nn::Sequential>());
  nn::Sequential& net = *nets.back();
  net.add<nn::Linear>(16, 12).add<nn::LayerNorm>(12).add<nn::GELU>().add<nn::Linear>(12, 4).add<nn::RMSNorm>(4);
  net.build(rng);
  Tensor x = input("x", {8, 16}), target = input("target", {8, 4});
  m.keep.push_back(make_adam({.lr = 0.01}));
  m.program = train(mse_loss(net(x), target), net.parameters(), *m.keep.back());
  m.feeds = {{"x", uniform(128, 25)}, {"target", uniform(32, 26)}};
  return m;
}

Model rnn(int steps) {
  Model m;
  const int64_t batch = 2, hidden = 8;
  Tensor xs = input("xs", {steps, batch, hidden});
  Tensor wx = param("wx", {hidden, hidden}, uniform(hidden * hidden, 30, -0.3, 0.3));
  Tensor wh = param("wh", {hidden, hidden}, uniform(hidden * hidden, 31, -0.3, 0.3));
  Tensor b = param("b", {hidden}, uniform(hidden, 32, -0.1, 0.1));
  Tensor h = constant({batch, hidden}, std::vector<float>(batch * hidden, 0.f));
  for (int t = 0; t < steps; ++t)
    h = tanh(matmul(reshape(slice(xs, 0, t, t + 1), {batch, hidden}), wx) + matmul(h, wh) + b);
  m.keep.push_back(make_sgd({.lr = 0.05}));
  m.program = train(mean(h * h), {wx, wh, b}, *m.keep.back());
  m.feeds = {{"xs", uniform(steps * batch * hidden, 33)}};
  return m;
}

Model clipped_mlp(int layers) {
  Model m;
  const int64_t width = 16;
  Tensor x = input("x", {4, width});
  std::vector<Tensor> params;
  Tensor h = x;
  for (int l = 0; l < layers; ++l) {
    Tensor w = param("w" + std::to_string(l), {width, width}, uniform(width * width, 40 + l, -0.4, 0.4));
    Tensor b = param("b" + std::to_string(l), {width}, uniform(width, 60 + l, -0.1, 0.1));
    h = tanh(matmul(h, w) + b);
    params.push_back(w);
    params.push_back(b);
  }
  Tensor loss = mean(h * h) * 100.0;
  // torch.nn.utils.clip_grad_norm_(max_norm=0.5): g * min(1, 0.5 / (||g||_2 + 1e-6)) over all gradients together
  const std::vector<Tensor> gs = grad(loss, params);
  Tensor sq = sum(gs[0] * gs[0]);
  for (size_t i = 1; i < gs.size(); ++i) sq = sq + sum(gs[i] * gs[i]);
  Tensor coef = map([](auto n) { return min(Scalar(1.0), 0.5 / (sqrt(n) + 1e-6)); }, sq);
  m.program.add_output("loss", loss);
  m.program.add_output("coef", coef);
  for (size_t i = 0; i < params.size(); ++i) {
    m.program.add_output("param " + params[i].name(), params[i]);
    m.program.updates.push_back({params[i].node(), Tensor(params[i] - gs[i] * coef * 0.1).node()});
  }
  m.feeds = {{"x", uniform(4 * width, 41)}};
  return m;
}

std::vector<Feed> feeds_of(const Model& m) {
  std::vector<Feed> f;
  for (const auto& [name, data] : m.feeds) f.push_back({name, &data});
  return f;
}

/// Three steps of `m` on each native GPU backend (and GLES with row-aligned layouts) equal the CPU backend's.
void check_on_every_backend(const std::function<Model()>& make) {
  const Model m = make();
  auto want_exe = make_cpu_backend()->compile(m.program);
  std::vector<std::vector<std::vector<float>>> want;
  for (int step = 0; step < 3; ++step) want.push_back(want_exe->run(feeds_of(m)));
  std::vector<BackendOptions> targets = {{.kind = "gles"}, {.kind = "gles-compute"}, sg::testing::vulkan_options()};
  BackendOptions rows{.kind = "gles"};
  rows.row_layout = true;
  targets.push_back(rows);
  for (const BackendOptions& bo : targets) {
    auto gpu = make_backend(bo).backend;
    auto exe = gpu->compile(m.program);
    for (int step = 0; step < 3; ++step) {
      const auto got = exe->run(feeds_of(m));
      REQUIRE(got.size() == want[step].size());
      for (size_t o = 0; o < got.size(); ++o) {
        REQUIRE(got[o].size() == want[step][o].size());
        std::ostringstream bad;
        for (size_t i = 0; i < got[o].size(); ++i) {
          const double g = got[o][i], w = want[step][o][i];
          if (!(std::fabs(g - w) <= 1e-5 + 1e-4 * std::fabs(w))) bad << " [" << i << "] " << g << " vs cpu " << w;
        }
        INFO("backend " << bo.kind << (bo.row_layout ? " (row-aligned layouts)" : "") << ", step " << step
                        << ", output '" << m.program.output_names[o] << "'" << bad.str().substr(0, 600));
        CHECK(bad.str().empty());
      }
    }
    if (bo.kind == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*gpu));
  }
}

}  // namespace

TEST_CASE("bindings: Adam updates of a (1, N) and an (N) parameter with a (1, N) output equal the CPU backend",
          "[bindings][gles][vulkan]") {
  check_on_every_backend(row_and_vector);
}

TEST_CASE("bindings: a one-element parameter trained with Adam equals the CPU backend", "[bindings][gles][vulkan]") {
  check_on_every_backend(one_element);
}

TEST_CASE("bindings: four State updates of one domain (running statistics) equal the CPU backend",
          "[bindings][gles][vulkan]") {
  check_on_every_backend(four_states);
}

TEST_CASE("bindings: a layer_norm train step with Adam equals the CPU backend", "[bindings][gles][vulkan]") {
  check_on_every_backend(layer_norm_model);
}

TEST_CASE("bindings: an nn::LayerNorm and nn::RMSNorm train step with Adam equals the CPU backend",
          "[bindings][gles][vulkan][layer_norm]") {
  check_on_every_backend(nn_norm);
}

TEST_CASE("bindings: an nn::LayerNorm train step exports for WebGPU (gpu, cpu, cpu-subgroups plans, core and "
          "compatibility limits) and WebGL2 without refusing a kernel", "[bindings][web][layer_norm]") {
  sg::testing::TempDir root("sg_bindings_norm");
  for (const char* preset : {"webgpu", "webgpu-compat"}) {
    INFO("preset " << preset);
    const Model m = nn_norm();
    sg::web::BundleSpec spec;
    spec.model = "nn_norm";
    spec.programs.push_back({"train", m.program});
    sg::web::BundleTargets t;  // the defaults: webgpu (gpu, cpu, cpu-subgroups plans) and webgl2
    t.webgpu_target.preset = preset;
    REQUIRE_NOTHROW(sg::web::write_bundle(spec, t, (root.path / preset).string()));
    const nlohmann::json b = nlohmann::json::parse(sg::testing::read_file((root.path / preset / "bundle.json").string()));
    CHECK(b["webgpu"]["plans"].size() == 3);
    CHECK(b["programs"]["train"]["webgpu"]["kernels"].size() > 0);
  }
}

TEST_CASE("bindings: a tanh RNN unrolled over 64 steps trains equal to the CPU backend", "[bindings][gles][vulkan]") {
  check_on_every_backend([] { return rnn(64); });
}

TEST_CASE("bindings: global-norm gradient clipping of a 6-layer MLP equals the CPU backend",
          "[bindings][gles][vulkan]") {
  check_on_every_backend([] { return clipped_mlp(6); });
}

namespace {

const std::vector<std::pair<const char*, std::function<Model()>>>& models_list() {
  static const std::vector<std::pair<const char*, std::function<Model()>>> list = {
      {"row_and_vector", row_and_vector}, {"one_element", one_element}, {"four_states", four_states},
      {"layer_norm", layer_norm_model},       {"rnn64", [] { return rnn(64); }}, {"clip_mlp6", [] { return clipped_mlp(6); }},
      {"nn_norm", nn_norm}};
  return list;
}

}  // namespace

TEST_CASE("bindings in Chromium: the same seven train steps (layer_norm and nn::LayerNorm among them) on WebGL2 and WebGPU "
          "equal the CPU reference",
          "[bindings][web][webgl2][webgpu][browser]") {
  const std::string tests = sg::testing::browser_tests_dir();
  sg::testing::TempDir root("sg_bindings_web");
  std::string tasks;
  for (const auto& [name, make] : models_list()) {
    const Model m = make();
    sg::web::BundleSpec spec;
    spec.model = name;
    spec.programs.push_back({"train", m.program});
    for (int step = 0; step < 3; ++step) spec.checks.push_back({"train", m.feeds});
    sg::web::BundleTargets t;
    t.webgpu_plans = {"cpu"};  // SwiftShader's adapter
    REQUIRE_NOTHROW(sg::web::write_bundle(spec, t, (root.path / name).string()));
    tasks += fmt::format(" check:{0}:main:webgl2 check:{0}:main:webgpu:cpu", name);
  }
  std::string out;
  const int rc = sg::testing::shell(fmt::format("node '{}/web_runtime_check.mjs' '{}'{}", tests, root.path.string(), tasks), out);
  INFO(out.substr(0, 4000));
  REQUIRE(rc == 0);
  const size_t at = out.rfind("{\"results\"");
  REQUIRE(at != std::string::npos);
  const nlohmann::json res = nlohmann::json::parse(out.substr(at));
  for (const auto& [name, make] : models_list())
    for (const char* backend : {"webgl2", "webgpu:cpu"}) {
      const std::string task = fmt::format("check:{}:main:{}", name, backend);
      INFO(task << ": " << res["results"][task].dump().substr(0, 3000));
      REQUIRE(res["results"].contains(task));
      CHECK(res["results"][task]["ok"] == true);
      CHECK(res["results"][task]["report"]["ok"] == true);
    }
}
