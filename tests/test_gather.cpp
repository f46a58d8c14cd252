// gather / take / nn::Embedding beyond the op-case lists (tests/op_cases.h runs their forward and backward on every
// backend against the CPU reference; tests/test_ops.cpp and test_autodiff.cpp against torch's golden values):
//  - an nn::Embedding train step (cross_entropy, Adam) equal to torch's after 3 steps (tests/golden/gather.json,
//    written by tests/golden/gen_golden.py), padding_idx included, on cpu, gles, gles-compute and vulkan;
//  - out-of-range and non-integer fed indices refused by run() on every native backend with the input, element,
//    value, op and the user's source line; a computed out-of-range index clamped on the GPU (never a stray read);
//  - the gather fuses into its consumer (no kernel of its own), and its gradient is one reduction kernel;
//  - shape, dtype and argument errors of gather, take and Embedding.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "golden_util.h"
#include "sg/backend.h"
#include "sg/nn.h"
#include "sg/schedule.h"
#include "sg/train.h"
#include "vulkan_test_util.h"

using namespace sg;
using Catch::Matchers::Contains;

namespace {

constexpr auto& kNative = sg::testing::kNativeBackends;
using sg::testing::native_backend;

std::vector<float> floats_of(const sg::golden::json& t) { return sg::golden::tensor(t).floats(); }

}  // namespace

TEST_CASE("embedding: nn::Embedding(10, 4, padding_idx=1) + cross_entropy, 3 Adam steps equal torch's on cpu, gles, "
          "gles-compute and vulkan", "[gather][embedding][golden]") {
  const sg::golden::json j = sg::golden::load("gather.json").at("embedding_train");
  const int64_t num = j.at("num_embeddings"), dim = j.at("embedding_dim");
  const sg::golden::GTensor idx = sg::golden::tensor(j.at("indices")), lab = sg::golden::tensor(j.at("labels"));
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    nn::Embedding emb(num, dim, j.at("padding_idx").get<int64_t>());
    nn::Rng rng(0);
    emb.build("", rng);
    CHECK(emb.weight.name() == "weight");
    CHECK(emb.describe() == "Embedding(10, 4, padding_idx=1)");
    auto be = native_backend(kind);
    be->write(emb.weight, floats_of(j.at("weight")));
    Tensor tokens = input("tokens", idx.shape, DType::i32);
    Tensor labels = input("labels", lab.shape, DType::i32);
    Tensor loss = cross_entropy(reshape(emb(tokens), Shape{-1, dim}), labels);
    auto opt = make_adam({.lr = j.at("lr").get<double>()});
    TrainStepGradients inspect;
    Program prog = make_train_step(loss, {emb.weight}, *opt, {}, inspect);
    prog.add_output("grad", inspect.grads.at(0));
    auto exe = be->compile(prog);
    const std::vector<float> tok(idx.data.begin(), idx.data.end()), lb(lab.data.begin(), lab.data.end());
    int step = 0;
    for (const sg::golden::json& s : j.at("steps")) {
      ++step;
      INFO("Adam step " << step);
      auto out = exe->run({{"tokens", &tok}, {"labels", &lb}});
      CHECK(out[0][0] == Approx(s.at("loss").get<double>()).epsilon(1e-5));
      const std::vector<float> g = floats_of(s.at("grad"));
      const std::vector<float> w = floats_of(s.at("weight"));
      const std::vector<float> got_w = be->read(emb.weight);
      REQUIRE(out[1].size() == g.size());
      REQUIRE(got_w.size() == w.size());
      for (size_t i = 0; i < g.size(); ++i) {
        INFO("element " << i);
        CHECK(out[1][i] == Approx(g[i]).margin(1e-6).epsilon(1e-4));
        CHECK(got_w[i] == Approx(w[i]).margin(1e-5).epsilon(1e-5));
      }
      // the padding row: no gradient, unchanged (zero) weight, as torch
      for (int64_t d = 0; d < dim; ++d) {
        CHECK(out[1][1 * dim + d] == 0.0f);
        CHECK(got_w[1 * dim + d] == 0.0f);
      }
    }
    CHECK(step == 3);
    if (std::string(kind) == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*be));
  }
}

TEST_CASE("gather: fed indices outside the axis or not integers are refused by run() on every native backend, naming "
          "the input, element, value, op and source line", "[gather][embedding][errors]") {
  Tensor table = param("table", {5, 3}, std::vector<float>(15, 0.5f));
  Tensor tok = input("tok", {2, 3}, DType::i32);
  const int line = __LINE__ + 1;
  Tensor y = take(table, tok);
  Program p;
  p.add_output("y", y);
  const std::string where = fmt::format("test_gather.cpp:{}", line);
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    auto exe = native_backend(kind)->compile(p);
    std::vector<float> good = {0, 4, 2, 2, 1, 3};
    auto out = exe->run({{"tok", &good}});
    REQUIRE(out[0].size() == 18u);
    std::vector<float> bad = {0, 4, 2, 5, 1, 3};
    CHECK_THROWS_AS(exe->run({{"tok", &bad}}), ValueError);
    CHECK_THROWS_WITH(exe->run({{"tok", &bad}}), Contains("input 'tok' element 3 is 5, outside [0, 5)") &&
                                                     Contains("gather at ") && Contains(where) &&
                                                     Contains("indices must be integers 0..4"));
    std::vector<float> neg = {0, -1, 2, 2, 1, 3};
    CHECK_THROWS_WITH(exe->run({{"tok", &neg}}), Contains("element 1 is -1, outside [0, 5)") && Contains(where));
    std::vector<float> frac = {0, 1, 2, 2, 1.5f, 3};
    CHECK_THROWS_WITH(exe->run({{"tok", &frac}}),
                      Contains("element 4 is 1.5, not an integer index in [0, 5)") && Contains(where));
    std::vector<float> nan = {0, 1, 2, NAN, 1, 3};
    CHECK_THROWS_WITH(exe->run({{"tok", &nan}}), Contains("element 3 is nan") && Contains(where));
  }
  // nn::Embedding: the line that called the layer
  nn::Embedding emb(4, 2);
  nn::Rng rng(1);
  emb.build("emb.", rng);
  const int eline = __LINE__ + 1;
  Tensor e = emb(tok);
  Program pe;
  pe.add_output("e", e);
  auto exe = make_cpu_backend()->compile(pe);
  std::vector<float> bad = {0, 1, 2, 3, 4, 0};
  CHECK_THROWS_WITH(exe->run({{"tok", &bad}}), Contains("element 4 is 4, outside [0, 4)") &&
                                                   Contains(fmt::format("test_gather.cpp:{}", eline)));
}

TEST_CASE("gather: an index computed out of range is clamped into the axis on the GPU backends (never a stray read), "
          "the CPU reference refuses it", "[gather][errors]") {
  // argmax(x, 1) = [1, 0], padded (pad keeps i32) with 99 before and -7 after: [99, 1, 0, -7] indexes a table of 4
  // rows; not a fed input, so run() cannot check it: the kernels read rows [3, 1, 0, 0]
  std::vector<float> tv(12);
  for (int i = 0; i < 12; ++i) tv[i] = static_cast<float>(i + 1);
  Tensor table = param("table", {4, 3}, tv);
  Tensor x = param("x", {2, 3}, {0.f, 2.f, 1.f, 5.f, 1.f, 0.f});
  Tensor idx = pad(pad(argmax(x, 1), Shape{1}, Shape{0}, 99.0), Shape{0}, Shape{1}, -7.0);
  REQUIRE(idx.dtype() == DType::i32);
  Program p;
  p.add_output("y", take(table, idx));
  const std::vector<float> want = {10, 11, 12, 4, 5, 6, 1, 2, 3, 1, 2, 3};
  for (const char* kind : {"gles", "gles-compute", "vulkan"}) {
    INFO("backend " << kind);
    auto be = native_backend(kind);
    auto out = be->compile(p)->run({});
    CHECK(out[0] == want);
    if (std::string(kind) == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*be));
  }
  auto exe = make_cpu_backend()->compile(p);
  CHECK_THROWS_AS(exe->run({}), ValueError);
  CHECK_THROWS_WITH(exe->run({}), Contains("index element 0 is 99, outside [0, 4)"));
}

TEST_CASE("gather: take fuses into its consumer and its gradient is one reduction kernel", "[gather][embedding][schedule]") {
  Tensor table = param("table", {11, 6}, std::vector<float>(66, 0.25f));
  Tensor tok = input("tok", {3, 8}, DType::i32);
  Tensor y = relu(take(table, tok)) * 2.0;
  Program fwd;
  fwd.add_output("y", y);
  CHECK(schedule(fwd).kernels.size() == 1);
  Tensor r = constant({3, 8, 6}, std::vector<float>(144, 0.5f));
  Program bwd;
  bwd.add_output("dtable", grad(sum(y * r), {table})[0]);
  const Plan plan = schedule(bwd);
  INFO(plan.kernels.size() << " kernels");
  CHECK(plan.kernels.size() <= 2);
}

TEST_CASE("gather, take and Embedding: shape, dtype and argument errors name the op and the line",
          "[gather][embedding][errors]") {
  Tensor x = param("x", {3, 4}, std::vector<float>(12, 1.f));
  Tensor i2 = input("i2", {3, 2}, DType::i32);
  Tensor f2 = input("f2", {3, 2});
  Tensor i1 = input("i1", {2}, DType::i32);
  Tensor big = input("big", {4, 2}, DType::i32);
  CHECK_THROWS_AS(gather(x, 1, f2), ValueError);
  CHECK_THROWS_WITH(gather(x, 1, f2), Contains("gather: index must be i32") && Contains("test_gather.cpp"));
  CHECK_THROWS_AS(gather(x, 1, i1), ShapeError);
  CHECK_THROWS_WITH(gather(x, 1, i1), Contains("must have the rank of the input"));
  CHECK_THROWS_WITH(gather(x, 2, i2), Contains("axis 2 out of range"));
  CHECK_THROWS_WITH(gather(x, 1, big), Contains("larger than the input (3x4) along axis 0") ||
                                           Contains("larger than the input"));
  CHECK(gather(x, 0, big).shape() == ShapeRef(Shape{4, 2}));  // any size along the axis
  CHECK_THROWS_WITH(take(x, f2), Contains("take: indices must be i32"));
  CHECK_THROWS_WITH(take(x, i2, -3), Contains("take: axis -3 out of range"));
  CHECK(take(x, i2, 1).shape() == ShapeRef(Shape{3, 3, 2}));
  CHECK(take(x, i1, 0).shape() == ShapeRef(Shape{2, 4}));
  CHECK_THROWS_AS(nn::Embedding(0, 3), ValueError);
  CHECK_THROWS_WITH(nn::Embedding(5, 3, 5), Contains("padding_idx 5 must be within [-5, 5)"));
  CHECK(nn::Embedding(5, 3, -1).padding_idx() == 4);
  nn::Embedding emb(5, 3);
  CHECK_THROWS_WITH(emb(i2), Contains("build() was not called"));
  nn::Rng rng(3);
  emb.build("", rng);
  CHECK_THROWS_WITH(emb(f2), Contains("Embedding(5, 3): indices must be i32"));
  CHECK(emb(i2).shape() == ShapeRef(Shape{3, 2, 3}));
  // N(0, 1) init: mean near 0, standard deviation near 1 over a large table
  nn::Embedding large(1000, 50, 7);
  large.build("", rng);
  auto w = make_cpu_backend()->read(large.weight);
  double m = 0, v = 0;
  for (float a : w) m += a;
  m /= static_cast<double>(w.size());
  for (float a : w) v += (a - m) * (a - m);
  v /= static_cast<double>(w.size());
  CHECK(std::fabs(m) < 0.02);
  CHECK(std::fabs(std::sqrt(v) - 1.0) < 0.02);
  for (int d = 0; d < 50; ++d) CHECK(w[7 * 50 + d] == 0.0f);  // the padding row starts at zero
}
