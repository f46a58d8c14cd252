// nn::LSTM and nn::GRU against torch (tests/golden/rnn.json, written by tests/golden/gen_golden.py): torch's
// state_dict loaded by name into ours, then output, h_n, c_n and the gradients of
// sum(output * R) + sum(h_n * Rh) (+ sum(c_n * Rc)) with respect to the input, h0, c0 and every parameter, on cpu,
// gles, gles-compute and vulkan (two layers, batch_first and time-major, given and zero initial states, no bias);
// the web bundles (WebGPU and WebGL2) run the same programs in tests/test_web_runtime.cpp. Also the errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
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

std::unique_ptr<nn::RecurrentLayer> make_layer(const sg::golden::json& c) {
  const int64_t in = c.at("input_size"), h = c.at("hidden_size"), layers = c.at("num_layers");
  const bool bias = c.at("bias"), bf = c.at("batch_first");
  if (c.at("layer") == "LSTM") return std::make_unique<nn::LSTM>(in, h, layers, bias, bf);
  return std::make_unique<nn::GRU>(in, h, layers, bias, bf);
}

Tensor golden_param(const sg::golden::json& c, const char* key) {
  const sg::golden::GTensor g = sg::golden::tensor(c.at(key));
  return param(key, g.shape, g.floats());
}

}  // namespace

TEST_CASE("lstm and gru: torch's weights loaded, outputs, final states and gradients equal torch on cpu, gles, "
          "gles-compute and vulkan", "[nn][lstm][gru][golden]") {
  const sg::golden::json file = sg::golden::load("rnn.json");  // (a temporary's member would dangle in the loop)
  for (const sg::golden::json& c : file.at("cases")) {
    const std::string name = c.at("name");
    for (const char* kind : kNative) {
      INFO(name << " on " << kind);
      auto layer = make_layer(c);
      nn::Rng rng(0);
      layer->build("", rng);
      // torch's state_dict names and order
      std::vector<std::string> names;
      for (auto& [n, t] : layer->named_parameters()) names.push_back(n);
      std::vector<std::string> torch_names;
      for (auto& [n, t] : c.at("state_dict").items()) torch_names.push_back(n);
      std::sort(torch_names.begin(), torch_names.end());
      std::vector<std::string> sorted = names;
      std::sort(sorted.begin(), sorted.end());
      REQUIRE(sorted == torch_names);
      auto be = native_backend(kind);
      for (auto& [n, t] : layer->named_parameters()) be->write(t, sg::golden::tensor(c.at("state_dict").at(n)).floats());
      const bool lstm = c.at("layer") == "LSTM";
      Tensor x = golden_param(c, "x");
      Tensor h0 = c.contains("h0") ? golden_param(c, "h0") : Tensor();
      Tensor c0 = c.contains("c0") ? golden_param(c, "c0") : Tensor();
      nn::RecurrentOutput r = layer->forward_state(x, h0, c0);
      auto weight = [&](const char* key) { return constant(sg::golden::tensor(c.at(key)).shape, sg::golden::tensor(c.at(key)).floats()); };
      Tensor loss = sum(r.output * weight("R")) + sum(r.h_n * weight("Rh"));
      if (lstm) loss = loss + sum(r.c_n * weight("Rc"));
      std::vector<Tensor> wrt = {x};
      std::vector<std::string> keys = {"dx"};
      if (h0) wrt.push_back(h0), keys.push_back("dh0");
      if (c0) wrt.push_back(c0), keys.push_back("dc0");
      for (auto& [n, t] : layer->named_parameters()) wrt.push_back(t), keys.push_back(n);
      const std::vector<Tensor> grads = grad(loss, wrt);
      Program p;
      p.add_output("output", r.output);
      p.add_output("h_n", r.h_n);
      if (lstm) p.add_output("c_n", r.c_n);
      for (size_t i = 0; i < grads.size(); ++i) p.add_output(keys[i], grads[i]);
      const auto out = be->compile(p)->run({});
      std::vector<sg::golden::GTensor> want = {sg::golden::tensor(c.at("output")), sg::golden::tensor(c.at("h_n"))};
      if (lstm) want.push_back(sg::golden::tensor(c.at("c_n")));
      for (size_t i = 0; i < keys.size(); ++i)
        want.push_back(sg::golden::tensor(c.contains(keys[i]) ? c.at(keys[i]) : c.at("grads").at(keys[i])));
      REQUIRE(out.size() == want.size());
      CHECK(shape_str(r.output.shape()) == shape_str(sg::golden::tensor(c.at("output")).shape));
      for (size_t i = 0; i < out.size(); ++i) {
        INFO("output " << p.output_names[i]);
        auto cmp = sg::golden::compare(std::vector<double>(out[i].begin(), out[i].end()), want[i], 1e-4, 2e-5);
        INFO(cmp.report());
        CHECK(cmp.ok);
      }
      if (std::string(kind) == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*be));
    }
  }
}

TEST_CASE("lstm and gru: repr, parameter names and torch's initialisation bound", "[nn][lstm][gru]") {
  nn::LSTM lstm(3, 4, 2, true, true);
  CHECK(lstm.describe() == "LSTM(3, 4, num_layers=2, batch_first=True)");  // torch's repr
  nn::GRU gru(5, 6, 1, false);
  CHECK(gru.describe() == "GRU(5, 6, bias=False)");
  nn::Rng rng(2);
  lstm.build("rnn.", rng);
  gru.build("", rng);
  std::vector<std::string> names;
  for (auto& [n, t] : lstm.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0", "rnn.bias_hh_l0",
                                          "rnn.weight_ih_l1", "rnn.weight_hh_l1", "rnn.bias_ih_l1", "rnn.bias_hh_l1"});
  CHECK(shape_str(lstm.weight_ih[0].shape()) == shape_str(Shape{16, 3}));
  CHECK(shape_str(lstm.weight_ih[1].shape()) == shape_str(Shape{16, 4}));
  CHECK(shape_str(gru.weight_hh[0].shape()) == shape_str(Shape{18, 6}));
  CHECK(gru.named_parameters().size() == 2);
  // every value within torch's U(-1/sqrt(H), 1/sqrt(H)), and spread over it
  for (auto& [n, t] : lstm.named_parameters()) {
    const auto& v = *t.node()->data;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    CHECK(*lo >= -0.5f);
    CHECK(*hi <= 0.5f);
    if (v.size() >= 16) CHECK(*hi - *lo > 0.5f);
  }
}

TEST_CASE("lstm and gru: unbatched input, and shape and argument errors name the layer", "[nn][lstm][gru][errors]") {
  nn::LSTM lstm(3, 4);
  CHECK_THROWS_WITH(lstm(input("x", {5, 2, 3})), Contains("build() was not called"));
  nn::Rng rng(0);
  lstm.build("", rng);
  CHECK_THROWS_WITH(lstm(input("x", {5, 2, 7})), Contains("LSTM(3, 4): input must be (T, N, 3) or unbatched (T, 3)"));
  CHECK_THROWS_AS(lstm(input("x", {5, 2, 3, 1})), ShapeError);
  CHECK_THROWS_WITH(lstm.forward_state(input("x", {5, 2, 3}), input("h", {1, 3, 4})),
                    Contains("h0 must be 1x2x4, got 1x3x4"));
  nn::GRU gru(3, 4);
  gru.build("", rng);
  CHECK_THROWS_WITH(gru.forward_state(input("x", {5, 2, 3}), Tensor(), input("c", {1, 2, 4})),
                    Contains("a GRU has none"));
  CHECK_THROWS_WITH(nn::GRU(0, 4), Contains("sizes must be >= 1"));
  // unbatched (T, I) equals the batch of one
  std::vector<float> xs(15);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.3f * static_cast<float>(i));
  Tensor x1 = param("x1", {5, 3}, xs), xb = param("xb", {5, 1, 3}, xs);
  nn::RecurrentOutput a = lstm.forward_state(x1), b = lstm.forward_state(xb);
  CHECK(shape_str(a.output.shape()) == shape_str(Shape{5, 4}));
  CHECK(shape_str(a.h_n.shape()) == shape_str(Shape{1, 4}));
  Program p;
  p.add_output("a", a.output);
  p.add_output("b", b.output);
  p.add_output("ca", a.c_n);
  p.add_output("cb", b.c_n);
  auto out = make_cpu_backend()->compile(p)->run({});
  CHECK(out[0] == out[1]);
  CHECK(out[2] == out[3]);
}

namespace {

/// A one-layer copy of layer k of `deep` (the same parameter leaves), time-major.
std::unique_ptr<nn::RecurrentLayer> layer_k(const nn::RecurrentLayer& deep, bool lstm, size_t k, int64_t in,
                                            int64_t h) {
  std::unique_ptr<nn::RecurrentLayer> one;
  if (lstm)
    one = std::make_unique<nn::LSTM>(in, h, 1);
  else
    one = std::make_unique<nn::GRU>(in, h, 1);
  one->weight_ih = {deep.weight_ih[k]};
  one->weight_hh = {deep.weight_hh[k]};
  one->bias_ih = {deep.bias_ih[k]};
  one->bias_hh = {deep.bias_hh[k]};
  return one;
}

}  // namespace

TEST_CASE("lstm and gru dropout: torch's argument order and repr, the dropout between layers and not after the last "
          "equals one-layer layers composed with the same masks, eval and p = 0 draw nothing, the masks change every "
          "step", "[nn][lstm][gru][dropout]") {
  CHECK(nn::LSTM(3, 4, 2, true, false, 0.5).describe() == "LSTM(3, 4, num_layers=2, dropout=0.5)");  // torch's repr
  CHECK(nn::GRU(3, 4, 2, true, true, 0.25).describe() == "GRU(3, 4, num_layers=2, batch_first=True, dropout=0.25)");
  CHECK(nn::GRU(3, 4, 2, true, false, 1.0).describe() == "GRU(3, 4, num_layers=2, dropout=1.0)");
  CHECK_THROWS_WITH(nn::LSTM(3, 4, 2, true, false, 1.5),
                    Contains("LSTM(3, 4): dropout should be a number in range [0, 1]"));
  CHECK_THROWS_AS(nn::GRU(3, 4, 2, true, false, -0.5), ValueError);
  CHECK_THROWS_AS(nn::GRU(3, 4, 2, true, false, std::nan("")), ValueError);
  const int64_t t_len = 5, n = 2, in = 3, h = 4;
  std::vector<float> xs(t_len * n * in);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.37f * static_cast<float>(i) + 0.2f) * 1.5f;
  const double p = 0.4;
  const double keep = std::ceil((1.0 - p) * 16777216.0) / 16777216.0;  // sg::dropout's threshold and scale
  const double scale = static_cast<float>(1.0f / static_cast<float>(1.0 - p));
  for (bool lstm : {true, false}) {
    INFO((lstm ? "LSTM" : "GRU"));
    std::unique_ptr<nn::RecurrentLayer> deep;
    if (lstm)
      deep = std::make_unique<nn::LSTM>(in, h, 3, true, false, p, 77);
    else
      deep = std::make_unique<nn::GRU>(in, h, 3, true, false, p, 78);
    nn::Rng rng(9);
    deep->build("rnn.", rng);
    REQUIRE(deep->dropout_step);
    CHECK(deep->dropout_step.name() == "rnn.dropout_step");
    CHECK(deep->state_dict().size() == 12);  // the counter is no state_dict entry (torch has none)
    const uint64_t seed = deep->dropout_seed();
    CHECK(seed == (lstm ? 77u : 78u));
    const uint32_t stream = peek_random_stream(seed);
    Tensor x = param("x", {t_len, n, in}, xs);
    const nn::RecurrentOutput got = deep->forward_state(x);
    // by hand: layer 0, mask (stream), layer 1, mask (stream + 1), layer 2, no mask; h_n from the undropped outputs
    Tensor seq = x;
    std::vector<Tensor> hs, cs;
    for (size_t k = 0; k < 3; ++k) {
      auto one = layer_k(*deep, lstm, k, k == 0 ? in : h, h);
      const nn::RecurrentOutput o = one->forward_state(seq);
      seq = o.output;
      hs.push_back(o.h_n);
      if (lstm) cs.push_back(o.c_n);
      if (k < 2) {
        Tensor u = random_uniform({t_len, n, h}, seed, deep->dropout_step, stream + static_cast<uint32_t>(k));
        seq = seq * where(u < keep, scale, 0.0);
      }
    }
    Program prog;
    prog.add_output("output", got.output);
    prog.add_output("h_n", got.h_n);
    prog.add_output("by hand", seq);
    prog.add_output("h_n by hand", concat(hs, 0));
    if (lstm) {
      prog.add_output("c_n", got.c_n);
      prog.add_output("c_n by hand", concat(cs, 0));
    }
    CHECK(prog.updates.size() == 1);  // the counter, once
    auto be = make_cpu_backend();
    auto exe = be->compile(prog);
    const auto a = exe->run({}), b = exe->run({});
    CHECK(a[0] == a[2]);
    CHECK(a[1] == a[3]);
    if (lstm) CHECK(a[4] == a[5]);
    CHECK(a[0] != b[0]);  // the next step's masks
    CHECK(b[0] == b[2]);
    CHECK(be->read(deep->dropout_step) == std::vector<float>{2.f});
    // eval: the composition without masks, no random numbers, no counter
    deep->eval();
    Program ev;
    ev.add_output("output", deep->forward_state(x).output);
    Tensor plain = x;
    for (size_t k = 0; k < 3; ++k) plain = layer_k(*deep, lstm, k, k == 0 ? in : h, h)->forward_state(plain).output;
    ev.add_output("by hand", plain);
    CHECK(ev.updates.empty());
    for (const NodePtr& nd : ev.nodes()) CHECK(nd->op != Op::RandomUniform);
    const auto e = make_cpu_backend()->compile(ev)->run({});
    CHECK(e[0] == e[1]);
  }
  // one layer (torch warns) or p = 0: no counter, no random numbers
  nn::Rng rng(1);
  nn::LSTM single(3, 4, 1, true, false, 0.5), zero(3, 4, 2, true, false, 0.0);
  single.build("", rng);
  zero.build("", rng);
  CHECK_FALSE(single.dropout_step);
  CHECK_FALSE(zero.dropout_step);
  Program p1;
  p1.add_output("a", single(param("x1", {t_len, n, in}, xs)));
  p1.add_output("b", zero(param("x2", {t_len, n, in}, xs)));
  CHECK(p1.updates.empty());
  for (const NodePtr& nd : p1.nodes()) CHECK(nd->op != Op::RandomUniform);
}
