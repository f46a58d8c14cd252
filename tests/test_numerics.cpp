// Numeric semantics of the CPU reference against PyTorch (tests/golden/numerics.json from gen_golden.py):
// NaN, inf and empty tensors (the semantics every backend must follow, docs/RELIABILITY.md), Adam's first steps,
// and run()'s validation of fed labels (issue 19). NaN and inf are stored as strings in the golden file.
#include <cmath>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/sg.h"

using namespace sg;

namespace {

const nlohmann::json& golden() {
  static const nlohmann::json j = [] {
    std::ifstream f(std::string(SG_SOURCE_DIR) + "/tests/golden/numerics.json");
    REQUIRE(f.good());
    return nlohmann::json::parse(f)["cases"];
  }();
  return j;
}

std::vector<double> values(const nlohmann::json& a) {
  std::vector<double> v;
  for (auto& x : a) {
    if (x.is_string()) {
      const std::string s = x.get<std::string>();
      v.push_back(s == "nan" ? std::numeric_limits<double>::quiet_NaN()
                             : (s == "inf" ? std::numeric_limits<double>::infinity()
                                           : -std::numeric_limits<double>::infinity()));
    } else {
      v.push_back(x.get<double>());
    }
  }
  return v;
}
std::vector<float> floats(const nlohmann::json& a) {
  auto d = values(a);
  return {d.begin(), d.end()};
}

/// NaN where torch has NaN, the same infinity, else |got - want| <= rtol |want| + atol.
void expect_ieee(const std::vector<float>& got, const std::vector<double>& want, const std::string& what,
                 double rtol = 1e-6, double atol = 0) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what << " element " << i << ": got " << got[i] << ", torch " << want[i]);
    if (std::isnan(want[i]))
      CHECK(std::isnan(got[i]));
    else if (std::isinf(want[i]))
      CHECK(got[i] == want[i]);
    else
      CHECK(std::fabs(got[i] - want[i]) <= rtol * std::fabs(want[i]) + atol);
  }
}

/// Runs a program of one output over named inputs on `be`.
std::vector<float> run1(Backend& be, const Tensor& out, const std::vector<Feed>& feeds) {
  Program p;
  p.add_output("y", out);
  return be.compile(p)->run(feeds)[0];
}

}  // namespace

TEST_CASE("numerics: relu, maximum and minimum propagate NaN as torch on the CPU reference") {
  auto cpu = make_cpu_backend();
  const auto& g = golden();
  std::vector<float> xs = floats(g["relu"]["x"]);
  Tensor x = input("x", {static_cast<int64_t>(xs.size())});
  expect_ieee(run1(*cpu, relu(x), {{"x", &xs}}), values(g["relu"]["y"]), "relu");
  // a custom map using relu, as a layer would
  expect_ieee(run1(*cpu, map([](auto v) { return relu(v); }, x), {{"x", &xs}}), values(g["relu"]["y"]), "map relu");

  // relu's gradient: torch passes the incoming gradient where the input is NaN (threshold_backward: 0 where <= 0)
  std::vector<float> r = floats(g["relu_grad"]["r"]);
  Tensor xp = param("xp", {static_cast<int64_t>(xs.size())}, xs);
  Tensor rc = constant({static_cast<int64_t>(r.size())}, r);
  Tensor loss = sum(relu(xp) * rc);
  Tensor dx = grad(loss, {xp})[0];
  expect_ieee(run1(*cpu, dx, {}), values(g["relu_grad"]["dx"]), "relu grad");

  const auto& mm = g["maximum_minimum"];
  std::vector<float> av = floats(mm["a"]), bv = floats(mm["b"]);
  Tensor a = input("a", {6}), b = input("b", {6});
  expect_ieee(run1(*cpu, maximum(a, b), {{"a", &av}, {"b", &bv}}), values(mm["maximum"]), "maximum");
  expect_ieee(run1(*cpu, minimum(a, b), {{"a", &av}, {"b", &bv}}), values(mm["minimum"]), "minimum");
}

TEST_CASE("numerics: reductions, argmax and max_pool2d propagate NaN as torch on the CPU reference") {
  auto cpu = make_cpu_backend();
  const auto& rr = golden()["row_reductions"];
  std::vector<float> xs = floats(rr["x"]);
  Tensor x = input("x", {3, 4});
  int ax[1] = {1};
  expect_ieee(run1(*cpu, max(x, ax), {{"x", &xs}}), values(rr["amax"]), "amax");
  expect_ieee(run1(*cpu, min(x, ax), {{"x", &xs}}), values(rr["amin"]), "amin");
  expect_ieee(run1(*cpu, sum(x, ax), {{"x", &xs}}), values(rr["sum"]), "sum");
  std::vector<double> am;
  for (auto& v : rr["argmax"]) am.push_back(v.get<double>());
  expect_ieee(run1(*cpu, argmax(x, 1), {{"x", &xs}}), am, "argmax (the first NaN is the maximum)");

  const auto& mp = golden()["max_pool2d"];
  std::vector<float> ps = floats(mp["x"]);
  Tensor px = input("px", {1, 1, 4, 4});
  expect_ieee(run1(*cpu, max_pool2d(px), {{"px", &ps}}), values(mp["y"]), "max_pool2d");
}

TEST_CASE("numerics: empty means, division by zero, pow and x*0 follow IEEE/torch on the CPU reference") {
  auto cpu = make_cpu_backend();
  const auto& g = golden();
  std::vector<float> none;
  Tensor e = input("e", {0});
  expect_ieee(run1(*cpu, mean(e), {{"e", &none}}), values(g["mean_empty"]["mean"]), "mean of empty");
  expect_ieee(run1(*cpu, sum(e), {{"e", &none}}), values(g["mean_empty"]["sum"]), "sum of empty");

  std::vector<float> num = floats(g["divide_by_zero"]["x"]);
  Tensor x = input("x", {4});
  expect_ieee(run1(*cpu, x / 0.0, {{"x", &num}}), values(g["divide_by_zero"]["y"]), "x / 0");

  std::vector<float> pa = floats(g["pow"]["a"]), pb = floats(g["pow"]["b"]);
  Tensor a = input("a", {5}), b = input("b", {5});
  expect_ieee(run1(*cpu, pow(a, b), {{"a", &pa}, {"b", &pb}}), values(g["pow"]["y"]), "pow", 1e-6);

  // x * 0 and 0 / x are not folded away: NaN and inf inputs give NaN (torch)
  std::vector<float> z = floats(g["times_zero"]["x"]);
  Tensor zx = input("zx", {4});
  expect_ieee(run1(*cpu, zx * 0.0, {{"zx", &z}}), values(g["times_zero"]["y"]), "x * 0");
  expect_ieee(run1(*cpu, map([](auto v) { return Scalar(0.0) / v; }, zx), {{"zx", &z}}),
              values(g["times_zero"]["zero_div"]), "0 / x");
}

TEST_CASE("numerics: a NaN weight from a checkpoint yields NaN probabilities, not plausible ones") {
  // issue 19: relu(NaN) was 0, so a NaN loaded into a hidden unit vanished behind the relu
  auto cpu = make_cpu_backend();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor w1 = param("w1", {2, 3}, {0.5f, -1.f, nan, 2.f, 0.25f, 1.f});
  Tensor w2 = param("w2", {3, 2}, {1.f, -1.f, 0.5f, 2.f, -0.5f, 1.f});
  Tensor x = input("x", {1, 2});
  std::vector<float> xs = {1.f, -2.f};
  std::vector<float> probs = run1(*cpu, softmax(matmul(relu(matmul(x, w1)), w2), 1), {{"x", &xs}});
  REQUIRE(probs.size() == 2);
  CHECK(std::isnan(probs[0]));
  CHECK(std::isnan(probs[1]));
}

namespace {

/// p after each of `steps` Adam steps (torch defaults) with loss = sum(p * g), on `be`.
std::vector<std::vector<float>> adam_steps(Backend& be, int steps) {
  const auto& ad = golden()["adam"];
  std::vector<float> p0 = floats(ad["p0"]), g = floats(ad["g"]);
  const int64_t n = static_cast<int64_t>(p0.size());
  Tensor p = param("p", {n}, p0);
  Tensor loss = sum(p * constant({n}, g));
  auto adam = make_adam({});
  auto exe = be.compile(make_train_step(loss, {p}, *adam));
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) {
    exe->run({});
    out.push_back(be.read(p));
  }
  return out;
}

}  // namespace

TEST_CASE("numerics: Adam's first steps equal torch.optim.Adam's to 1e-6 on the CPU reference") {
  auto cpu = make_cpu_backend();
  auto got = adam_steps(*cpu, 3);
  const auto& steps = golden()["adam"]["steps"];
  for (int s = 0; s < 3; ++s) expect_ieee(got[s], values(steps[s]), fmt::format("CPU Adam step {}", s + 1), 1e-6);
}

TEST_CASE("numerics: Adam's first step equals torch's to 1e-6 on GLES (bias correction without f32 cancellation)") {
  // 1 - pow(0.999, t) in f32 lost ~1e-4 relative at t = 1; the parameters start near 0 so p1 is the step itself
  auto be = make_backend({.kind = "gles"}).backend;
  auto got = adam_steps(*be, 3);
  const auto& steps = golden()["adam"]["steps"];
  expect_ieee(got[0], values(steps[0]), "GLES Adam step 1", 1e-6);
  for (int s = 1; s < 3; ++s) expect_ieee(got[s], values(steps[s]), fmt::format("GLES Adam step {}", s + 1), 1e-5);
}

TEST_CASE("numerics: Adam's first step equals torch's to 1e-6 on gles-compute and vulkan (bias correction in f32)") {
  const auto& steps = golden()["adam"]["steps"];
  for (const char* kind : {"gles-compute", "vulkan"}) {
    auto be = make_backend({.kind = kind}).backend;
    REQUIRE(be->name() == kind);
    auto got = adam_steps(*be, 3);
    expect_ieee(got[0], values(steps[0]), fmt::format("{} Adam step 1", kind), 1e-6);
    for (int s = 1; s < 3; ++s) expect_ieee(got[s], values(steps[s]), fmt::format("{} Adam step {}", kind, s + 1), 1e-5);
  }
}

namespace {

/// The message of the ValueError `f` throws ("" when it throws none, and the test fails).
template <class F>
std::string value_error_of(F&& f) {
  try {
    f();
  } catch (const ValueError& e) {
    return e.what();
  }
  FAIL_CHECK("no ValueError thrown");
  return "";
}

void check_label_validation(Backend& be) {
  const auto& bad = golden()["cross_entropy_bad_labels"];
  REQUIRE(bad["raises"]["label_5"].get<bool>());  // torch raises for both
  REQUIRE(bad["raises"]["label_minus_1"].get<bool>());
  Tensor logits = param("logits", {2, 3}, std::vector<float>(6, 0.f));
  Tensor y = input("labels", {2}, DType::i32);
  Program p;
  p.add_output("loss", cross_entropy(logits, y));
  auto exe = be.compile(p);
  std::vector<float> five = floats(bad["label_5"]), minus = floats(bad["label_minus_1"]), half = {0.f, 1.5f};
  std::string m = value_error_of([&] { exe->run({{"labels", &five}}); });
  CHECK_THAT(m, Catch::Contains("'labels'") && Catch::Contains("element 1 is 5") && Catch::Contains("[0, 3)"));
  m = value_error_of([&] { exe->run({{"labels", &minus}}); });
  CHECK_THAT(m, Catch::Contains("'labels'") && Catch::Contains("element 0 is -1"));
  m = value_error_of([&] { exe->run({{"labels", &half}}); });
  CHECK_THAT(m, Catch::Contains("'labels'") && Catch::Contains("element 1 is 1.5") && Catch::Contains("integer"));
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), 0.f};
  m = value_error_of([&] { exe->run({{"labels", &nan}}); });
  CHECK_THAT(m, Catch::Contains("element 0 is nan"));
  // valid labels run, and give torch's value: log(3) for uniform logits
  std::vector<float> ok = {0.f, 2.f};
  CHECK(exe->run({{"labels", &ok}})[0][0] == Approx(std::log(3.0)).epsilon(1e-6));
  // duplicate names and null data are refused, naming the input
  m = value_error_of([&] { exe->run({{"labels", &ok}, {"labels", &ok}}); });
  CHECK_THAT(m, Catch::Contains("'labels' is fed twice"));
  m = value_error_of([&] { exe->run({{"labels", nullptr}}); });
  CHECK_THAT(m, Catch::Contains("'labels'") && Catch::Contains("null"));
}

}  // namespace

TEST_CASE("run: labels for one_hot/cross_entropy are validated on the CPU backend (index, value, input name)") {
  auto cpu = make_cpu_backend();
  check_label_validation(*cpu);
}

TEST_CASE("run: labels for one_hot/cross_entropy are validated on the GLES backend as on the CPU") {
  auto be = make_backend({.kind = "gles"}).backend;
  check_label_validation(*be);
}

TEST_CASE("run: labels for one_hot/cross_entropy are validated on the gles-compute and vulkan backends as on the CPU") {
  for (const char* kind : {"gles-compute", "vulkan"}) {
    auto be = make_backend({.kind = kind}).backend;
    REQUIRE(be->name() == kind);
    INFO("backend " << kind);
    check_label_validation(*be);
  }
}

TEST_CASE("run: one_hot through a reshape checks the fed labels, f32 inputs are not checked") {
  auto cpu = make_cpu_backend();
  Tensor y = input("y", {2, 2}, DType::i32);
  Program p;
  p.add_output("h", one_hot(reshape(y, {4}), 4));
  auto exe = cpu->compile(p);
  std::vector<float> bad = {0, 1, 2, 4}, good = {3, 1, 2, 0};
  CHECK_THAT(value_error_of([&] { exe->run({{"y", &bad}}); }), Catch::Contains("element 3 is 4"));
  auto h = exe->run({{"y", &good}})[0];
  CHECK(h[3] == 1.f);   // row 0 class 3
  CHECK(h[12] == 1.f);  // row 3 class 0
  // an f32 input may hold anything, NaN included
  Tensor x = input("x", {2});
  std::vector<float> xs = {std::numeric_limits<float>::quiet_NaN(), 2.5f};
  CHECK(std::isnan(run1(*cpu, x * 1.0 + 0.0, {{"x", &xs}})[0]));
}
