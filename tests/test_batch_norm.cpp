// nn::BatchNorm1d / BatchNorm2d against torch (tests/golden/batch_norm.json, written by tests/golden/gen_golden.py):
//  - 10 SGD steps of a model with a BatchNorm layer in train mode: the loss of every step, then every parameter,
//    the running statistics (momentum 0.1, and None: the cumulative average) and num_batches_tracked, then the eval
//    program's output for a test batch, on cpu, gles, gles-compute and vulkan;
//  - BatchNorm1d on (N, C, L) without affine parameters: output, input gradient and running statistics;
//  - the running statistics are State updates of the same compiled step (no extra program, no host round trip);
//  - errors: shapes, arguments, one value per channel in train mode, a train-mode layer called twice in one step.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "golden_util.h"
#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/nn.h"
#include "vulkan_test_util.h"

using namespace sg;
using Catch::Matchers::Contains;

namespace {

constexpr auto& kNative = sg::testing::kNativeBackends;
using sg::testing::native_backend;

std::vector<double> doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::unique_ptr<nn::Sequential> golden_model(const std::string& which) {
  auto m = std::make_unique<nn::Sequential>();
  if (which == "bn2d_train")
    m->add<nn::Conv2d>(2, 3, 3, 1, 1).add<nn::BatchNorm2d>(3).add<nn::ReLU>().add<nn::Flatten>().add<nn::Linear>(48, 4);
  else
    m->add<nn::Linear>(5, 6).add<nn::BatchNorm1d>(6, 1e-5, std::nullopt).add<nn::Tanh>().add<nn::Linear>(6, 3);
  return m;
}

/// Trains `which` for the golden's steps on `kind` and compares losses, the state_dict and the eval output.
void check_training(const std::string& which, const std::string& kind) {
  const sg::golden::json j = sg::golden::load("batch_norm.json").at(which);
  auto model = golden_model(which);
  nn::Rng rng(0);
  model->build(rng);
  auto be = native_backend(kind);
  for (auto& [name, t] : model->named_parameters()) be->write(t, sg::golden::tensor(j.at("init").at(name)).floats());
  const sg::golden::GTensor x0 = sg::golden::tensor(j.at("batches").at(0));
  Tensor x = input("x", x0.shape), labels = input("labels", {x0.shape[0]}, DType::i32);
  auto opt = make_sgd({.lr = j.at("lr").get<double>()});
  Program step = make_train_step(cross_entropy((*model)(x), labels), model->parameters(), *opt);
  CHECK(step.updates.size() == model->parameters().size() + 3);  // + running_mean, running_var, num_batches_tracked
  auto exe = be->compile(step);
  for (size_t s = 0; s < j.at("losses").size(); ++s) {
    INFO("step " << s + 1);
    const std::vector<float> xs = sg::golden::tensor(j.at("batches").at(s)).floats();
    std::vector<float> ls;
    for (auto& v : j.at("labels").at(s).at("data")) ls.push_back(v.get<float>());
    auto out = exe->run({{"x", &xs}, {"labels", &ls}});
    CHECK(out[0][0] == Approx(j.at("losses").at(s).get<double>()).epsilon(1e-4));
  }
  const auto& sd = j.at("state_dict");
  const auto ours = model->state_dict();
  REQUIRE(ours.size() == sd.size());
  for (auto& [name, t] : ours) {
    INFO("state_dict entry " << name);
    REQUIRE(sd.contains(name));
    auto c = sg::golden::compare(doubles(be->read(t)), sg::golden::tensor(sd.at(name)), 1e-4, 2e-5);
    INFO(c.report());
    CHECK(c.ok);
  }
  model->eval();
  const sg::golden::GTensor xt = sg::golden::tensor(j.at("x_test"));
  Tensor xe = input("x", xt.shape);
  Program eval;
  eval.add_output("y", (*model)(xe));
  CHECK(eval.updates.empty());  // eval mode: the running statistics are read, not updated
  const std::vector<float> xtv = xt.floats();
  auto out = be->compile(eval)->run({{"x", &xtv}});
  auto c = sg::golden::compare(doubles(out[0]), sg::golden::tensor(j.at("eval_out")), 1e-4, 2e-5);
  INFO(c.report());
  CHECK(c.ok);
  if (kind == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*be));
}

}  // namespace

TEST_CASE("batch_norm: BatchNorm2d after 10 SGD steps (losses, parameters, running statistics, num_batches_tracked, "
          "eval output) equals torch on cpu, gles, gles-compute and vulkan", "[nn][batch_norm][golden]") {
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    check_training("bn2d_train", kind);
  }
}

TEST_CASE("batch_norm: BatchNorm1d(momentum=None), the cumulative average, after 10 SGD steps equals torch on cpu, "
          "gles, gles-compute and vulkan", "[nn][batch_norm][golden]") {
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    check_training("bn1d_train", kind);
  }
}

TEST_CASE("batch_norm: BatchNorm1d(affine=False) on (N, C, L): output, input gradient and running statistics equal "
          "torch on cpu, gles, gles-compute and vulkan", "[nn][batch_norm][golden]") {
  const sg::golden::json j = sg::golden::load("batch_norm.json").at("bn1d_ncl");
  const sg::golden::GTensor xg = sg::golden::tensor(j.at("x"));
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    nn::BatchNorm1d bn(3, 1e-5, 0.1, false);
    nn::Rng rng(0);
    bn.build("", rng);
    CHECK(bn.named_parameters().empty());
    CHECK(bn.describe() == "BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=False, track_running_stats=True)");
    Tensor x = param("x", xg.shape, xg.floats());
    Tensor w = constant(xg.shape, sg::golden::tensor(j.at("w")).floats());
    Tensor y = bn(x);
    Program p;
    p.add_output("y", y);
    p.add_output("dx", grad(sum(y * w), {x})[0]);
    REQUIRE(p.updates.size() == 3);
    auto be = native_backend(kind);
    auto out = be->compile(p)->run({});
    for (auto [got, key] : {std::pair{out[0], "y"}, {out[1], "dx"}}) {
      INFO(key);
      auto c = sg::golden::compare(doubles(got), sg::golden::tensor(j.at(key)), 1e-4, 1e-5);
      INFO(c.report());
    CHECK(c.ok);
    }
    for (auto [t, key] : {std::pair{bn.running_mean, "running_mean"}, {bn.running_var, "running_var"}}) {
      INFO(key);
      auto c = sg::golden::compare(doubles(be->read(t)), sg::golden::tensor(j.at(key)), 1e-4, 1e-6);
      INFO(c.report());
    CHECK(c.ok);
    }
    CHECK(be->read(bn.num_batches_tracked) == std::vector<float>{1.0f});
  }
}

TEST_CASE("batch_norm: shape, argument and mode errors name the layer", "[nn][batch_norm][errors]") {
  CHECK_THROWS_WITH(nn::BatchNorm2d(0), Contains("BatchNorm2d(0): num_features must be >= 1"));
  CHECK_THROWS_WITH(nn::BatchNorm2d(3, 0.0), Contains("eps must be > 0"));
  CHECK_THROWS_WITH(nn::BatchNorm1d(3, 1e-5, 1.5), Contains("momentum must be within [0, 1] or None"));
  nn::BatchNorm2d bn(3);
  CHECK_THROWS_WITH(bn(input("x", {2, 3, 4, 4})), Contains("build() was not called"));
  nn::Rng rng(0);
  bn.build("bn.", rng);
  CHECK(bn.running_mean.name() == "bn.running_mean");
  CHECK_THROWS_AS(bn(input("x", {2, 3, 4})), ShapeError);
  CHECK_THROWS_WITH(bn(input("x", {2, 4, 4, 4})), Contains("expected input of shape (N, C, H, W) with 3 channels"));
  nn::BatchNorm1d bn1(3);
  bn1.build("", rng);
  CHECK_THROWS_WITH(bn1(input("x", {1, 3})), Contains("expected more than 1 value per channel when training"));
  bn1.eval();
  CHECK_NOTHROW(bn1(input("x", {1, 3})));  // eval mode uses the running statistics: one sample is fine
  bn1.train();
  // a train-mode layer called twice in one step would update its running statistics twice
  Tensor a = input("a", {4, 3}), b = input("b", {4, 3});
  Program p;
  p.add_output("ya", bn1(a));
  CHECK_THROWS_WITH(p.add_output("yb", bn1(b)), Contains("state 'running_mean' gets two next values in one step"));
}

TEST_CASE("batch_norm: the running statistics are updated by the compiled train step itself, with every other "
          "update, in one run", "[nn][batch_norm]") {
  nn::Sequential m;
  m.add<nn::Linear>(4, 3).add<nn::BatchNorm1d>(3).add<nn::ReLU>();
  nn::Rng rng(1);
  m.build(rng);
  Tensor x = input("x", {5, 4});
  auto opt = make_sgd({.lr = 0.0});
  Program step = make_train_step(sum(m(x)), m.parameters(), *opt);
  auto be = make_cpu_backend();
  auto exe = be->compile(step);
  std::vector<float> xs(20);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 7) - 3.0f;
  auto& bn = static_cast<nn::BatchNorm1d&>(*m.children()[1].second);
  for (int s = 1; s <= 3; ++s) {
    exe->run({{"x", &xs}});
    CHECK(be->read(bn.num_batches_tracked) == std::vector<float>{static_cast<float>(s)});
  }
  // with lr 0 every batch is the same: running_mean = (1 - 0.9^3) * batch mean
  const std::vector<float> h = be->compile([&] {
    Program p;
    p.add_output("h", m.children()[0].second->forward(x));
    return p;
  }())->run({{"x", &xs}})[0];
  for (int c = 0; c < 3; ++c) {
    double mu = 0;
    for (int n = 0; n < 5; ++n) mu += h[n * 3 + c] / 5.0;
    CHECK(be->read(bn.running_mean)[c] == Approx((1 - 0.9 * 0.9 * 0.9) * mu).margin(1e-6));
  }
}

TEST_CASE("batch_norm: BatchNorm2d over 8x12x12 values per channel trains 3 Adam steps on gles, gles-compute and "
          "vulkan equal to the cpu backend (the statistics' kernel within the loop budget)",
          "[nn][batch_norm][schedule]") {
  // 1152 values per channel: the mean read inside the variance's loop is computed once before it (the emitters
  // hoist it; the scheduler's loop count once said 1152^2 iterations and refused the step)
  const Shape shape{8, 8, 12, 12};
  std::vector<float> xs(static_cast<size_t>(numel(shape))), ts(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    xs[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 2.0 + 0.5);
    ts[i] = static_cast<float>(std::cos(0.11 * static_cast<double>(i)));
  }
  std::map<std::string, std::vector<std::vector<float>>> results;  // backend -> losses, then every state_dict entry
  for (const char* kind : {"cpu", "gles", "gles-compute", "vulkan"}) {
    INFO("backend " << kind);
    nn::Sequential model;
    model.add<nn::BatchNorm2d>(8);
    nn::Rng rng(0);
    model.build(rng);
    auto adam = make_adam({.lr = 0.05});
    Program step = make_train_step(mse_loss(model(input("x", shape)), input("target", shape)), model.parameters(), *adam);
    auto be = native_backend(kind);
    auto exe = be->compile(step);
    std::vector<std::vector<float>>& r = results[kind];
    for (int s = 0; s < 3; ++s) r.push_back(exe->run({{"x", &xs}, {"target", &ts}})[0]);
    for (auto& [name, t] : model.state_dict()) r.push_back(be->read(t));
  }
  const auto& want = results.at("cpu");
  for (const char* kind : {"gles", "gles-compute", "vulkan"}) {
    INFO("backend " << kind);
    const auto& got = results.at(kind);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("result " << i << " (3 losses, then weight, bias, running_mean, running_var, num_batches_tracked)");
      REQUIRE(got[i].size() == want[i].size());
      for (size_t e = 0; e < want[i].size(); ++e) CHECK(got[i][e] == Approx(want[i][e]).epsilon(1e-4).margin(1e-5));
    }
  }
}
