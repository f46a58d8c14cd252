// The layers of issue 36 beyond the op-case lists (tests/op_cases.h's "layers" list runs F.layer_norm, the RMSNorm
// formula and attention forward and backward on every backend against torch's golden values and the CPU reference;
// tests/test_ops.cpp and test_autodiff.cpp the CPU reference against torch and finite differences):
//  - nn::LayerNorm and nn::RMSNorm: torch's parameter names, shapes, initial values and repr; bad arguments and
//    inputs refused naming the layer and the caller's source line;
//  - a Linear -> LayerNorm -> ReLU -> Linear -> RMSNorm model trained 3 Adam steps with torch's initial weights
//    written into the backend (as a state_dict would be): losses, gradients and parameters equal torch's
//    (tests/golden/layers.json, written by tests/golden/gen_golden.py) on cpu, gles, gles-compute and vulkan.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "golden_util.h"
#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/cpu_reference.h"
#include "sg/nn.h"
#include "sg/train.h"
#include "vulkan_test_util.h"

using namespace sg;
using Catch::Matchers::Contains;

namespace {

constexpr auto& kNative = sg::testing::kNativeBackends;
using sg::testing::native_backend;

std::vector<float> floats_of(const sg::golden::json& t) { return sg::golden::tensor(t).floats(); }

/// |got - want| <= atol + rtol |want| everywhere; the message names the worst element.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol,
                  const std::string& what) {
  REQUIRE(got.size() == want.size());
  size_t worst = 0;
  double ratio = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double r = std::fabs(static_cast<double>(got[i]) - want[i]) / (atol + rtol * std::fabs(want[i]));
    if (!(r <= ratio)) ratio = r, worst = i;
  }
  INFO(what << ": worst element " << worst << ": " << got[worst] << " torch " << want[worst] << " (" << ratio
            << "x the tolerance)");
  CHECK(ratio <= 1.0);
}

}  // namespace

TEST_CASE("layer_norm: nn::LayerNorm and nn::RMSNorm have torch's parameter names, shapes, initial values and repr",
          "[nn][layer_norm][rms_norm]") {
  nn::Rng rng(0);
  nn::LayerNorm ln(8);
  ln.build("ln.", rng);
  CHECK(ln.describe() == "LayerNorm((8,), eps=1e-05, elementwise_affine=True)");
  auto p = ln.named_parameters();
  REQUIRE(p.size() == 2);
  CHECK(p[0].first == "ln.weight");
  CHECK(p[1].first == "ln.bias");
  CHECK(p[0].second.shape() == ShapeRef({8}));
  CHECK(p[0].second.node()->data->at(3) == 1.0f);
  CHECK(p[1].second.node()->data->at(3) == 0.0f);
  nn::LayerNorm ln2({3, 5}, 1e-3, true, false);
  ln2.build("", rng);
  CHECK(ln2.describe() == "LayerNorm((3, 5), eps=0.001, elementwise_affine=True, bias=False)");
  REQUIRE(ln2.named_parameters().size() == 1);
  CHECK(ln2.weight.shape() == ShapeRef({3, 5}));
  CHECK(!ln2.bias);
  nn::LayerNorm plain(4, 1e-5, false);
  plain.build("", rng);
  CHECK(plain.named_parameters().empty());
  CHECK(plain.describe() == "LayerNorm((4,), eps=1e-05, elementwise_affine=False)");

  nn::RMSNorm rms(6);
  rms.build("norm.", rng);
  CHECK(rms.describe() == "RMSNorm((6,), eps=None, elementwise_affine=True)");
  REQUIRE(rms.named_parameters().size() == 1);
  CHECK(rms.weight.name() == "norm.weight");
  CHECK(rms.weight.node()->data->at(5) == 1.0f);
  CHECK(nn::RMSNorm({2, 3}, 1e-6, false).describe() == "RMSNorm((2, 3), eps=1e-06, elementwise_affine=False)");

  // in a Sequential, parameters are named by index as in torch's state_dict
  nn::Sequential net;
  net.add<nn::Linear>(4, 8).add<nn::LayerNorm>(8).add<nn::ReLU>().add<nn::Linear>(8, 2).add<nn::RMSNorm>(2);
  net.build(rng);
  std::vector<std::string> names;
  for (const auto& [n, t] : net.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias", "4.weight"});
  // the RMSNorm default eps is f32's machine epsilon (torch.finfo(torch.float32).eps)
  Tensor x = input("x", {2, 6});
  std::vector<float> xv = {1e-4f, -2e-4f, 3e-4f, 0.f, 1e-4f, 2e-4f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  const auto y = cpu::evaluate({rms(x).node()}, {{x.node().get(), std::vector<double>(xv.begin(), xv.end())}})[0];
  double ms = 0;
  for (int i = 0; i < 6; ++i) ms += static_cast<double>(xv[i]) * xv[i] / 6;
  CHECK(y[1] == Approx(xv[1] / std::sqrt(ms + 1.1920928955078125e-07)).epsilon(1e-6));
}

TEST_CASE("layer_norm: bad arguments and inputs are refused naming the layer or op and the caller's line",
          "[nn][layer_norm][rms_norm]") {
  const std::string here = "test_layers.cpp:";
  CHECK_THROWS_AS(nn::LayerNorm(ShapeRef()), ValueError);
  CHECK_THROWS_WITH(nn::LayerNorm(0), Contains("LayerNorm") && Contains("size < 1"));
  CHECK_THROWS_WITH(nn::LayerNorm(4, -1.0), Contains("LayerNorm: eps must be >= 0"));
  CHECK_THROWS_WITH(nn::RMSNorm(4, NAN), Contains("RMSNorm: eps must be >= 0"));
  nn::Rng rng(0);
  nn::LayerNorm ln(8);
  Tensor x = input("x", {3, 7});
  CHECK_THROWS_WITH(ln(x), Contains("build() was not called"));
  ln.build("", rng);
  CHECK_THROWS_WITH(ln(x), Contains("LayerNorm((8,), eps=1e-05, elementwise_affine=True): input 3x7 does not end in "
                                    "normalized_shape 8") && Contains(here));
  CHECK_THROWS_AS(ln(x), ShapeError);
  nn::RMSNorm rms({3, 7});
  rms.build("", rng);
  CHECK_THROWS_WITH(rms(input("v", {7})), Contains("RMSNorm((3, 7)") && Contains(here));
  // the functional forms
  Tensor w = input("w", {6});
  CHECK_THROWS_WITH(layer_norm(x, {7}, w), Contains("layer_norm: weight has shape 6, expected normalized_shape 7") &&
                                               Contains(here));
  CHECK_THROWS_WITH(layer_norm(x, {}), Contains("layer_norm: normalized_shape is empty") && Contains(here));
  CHECK_THROWS_WITH(layer_norm(x, {2, 3, 7}), Contains("does not end in normalized_shape") && Contains(here));
  CHECK_THROWS_WITH(rms_norm(x, {7}, Tensor(), -1.0), Contains("rms_norm: eps must be >= 0") && Contains(here));
  CHECK_THROWS_WITH(rms_norm(x, {3}), Contains("rms_norm: input 3x7 does not end in normalized_shape 3 (its last 1 dimension must be 3)"));
}

TEST_CASE("layer_norm: Linear, LayerNorm, ReLU, Linear, RMSNorm with torch's weights, 3 Adam steps equal torch's on "
          "cpu, gles, gles-compute and vulkan", "[nn][layer_norm][rms_norm][golden]") {
  const sg::golden::json j = sg::golden::load("layers.json").at("norm_train");
  const std::vector<float> xv = floats_of(j.at("x")), tv = floats_of(j.at("target"));
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    nn::Rng rng(0);
    nn::Sequential net;
    net.add<nn::Linear>(6, 8).add<nn::LayerNorm>(8).add<nn::ReLU>().add<nn::Linear>(8, 4).add<nn::RMSNorm>(4);
    net.build(rng);
    auto be = native_backend(kind);
    const auto params = net.named_parameters();
    REQUIRE(params.size() == j.at("init").size());
    for (const auto& [name, t] : params) be->write(t, floats_of(j.at("init").at(name)));  // torch's state_dict
    Tensor x = input("x", {5, 6}), target = input("target", {5, 4});
    Tensor loss = mse_loss(net(x), target);
    auto opt = make_adam({.lr = j.at("lr").get<double>()});
    TrainStepGradients inspect;
    Program prog = make_train_step(loss, net.parameters(), *opt, {}, inspect);
    for (size_t i = 0; i < params.size(); ++i) prog.add_output("grad " + params[i].first, inspect.grads.at(i));
    auto exe = be->compile(prog);
    int step = 0;
    for (const sg::golden::json& s : j.at("steps")) {
      ++step;
      INFO("Adam step " << step);
      auto out = exe->run({{"x", &xv}, {"target", &tv}});
      CHECK(out[0][0] == Approx(s.at("loss").get<double>()).epsilon(1e-5));
      for (size_t i = 0; i < params.size(); ++i) {
        const std::string& name = params[i].first;
        expect_close(out[1 + i], floats_of(s.at("grads").at(name)), 1e-4, 1e-6, "gradient of " + name);
        expect_close(be->read(params[i].second), floats_of(s.at("params").at(name)), 1e-5, 1e-6, "parameter " + name);
      }
    }
    if (std::string(kind) == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*be));
  }
}

TEST_CASE("attention: nn::MultiheadAttention has torch's parameter names, layouts and initialisation",
          "[nn][attention]") {
  nn::Rng rng(3);
  nn::MultiheadAttention mha(32, 4);
  mha.build("attn.", rng);
  CHECK(mha.label() == "MultiheadAttention(embed_dim=32, num_heads=4, batch_first=True)");
  CHECK(mha.describe() == "MultiheadAttention(\n  (out_proj): Linear(32, 32)\n)");  // torch's nested repr
  const auto p = mha.named_parameters();
  REQUIRE(p.size() == 4);
  CHECK(p[0].first == "attn.in_proj_weight");
  CHECK(p[1].first == "attn.in_proj_bias");
  CHECK(p[2].first == "attn.out_proj.weight");
  CHECK(p[3].first == "attn.out_proj.bias");
  CHECK(p[0].second.shape() == ShapeRef({96, 32}));
  CHECK(p[1].second.shape() == ShapeRef({96}));
  CHECK(p[2].second.shape() == ShapeRef({32, 32}));
  CHECK(p[3].second.shape() == ShapeRef({32}));
  // xavier_uniform_ on (3E, E): U(+-sqrt(6 / (E + 3E))), spread over the range; out_proj: U(+-1/sqrt(E)); biases 0
  auto range_of = [](const Tensor& t) {
    float lo = 0, hi = 0;
    for (float v : *t.node()->data) lo = std::min(lo, v), hi = std::max(hi, v);
    return std::make_pair(lo, hi);
  };
  const double xavier = std::sqrt(6.0 / 128.0), linear = 1.0 / std::sqrt(32.0);
  auto [lo, hi] = range_of(mha.in_proj_weight);
  CHECK(lo >= -xavier);
  CHECK(hi <= xavier);
  CHECK(hi - lo > 1.9 * xavier);  // 3072 draws cover the range
  std::tie(lo, hi) = range_of(mha.out_proj.weight);
  CHECK(lo >= -linear);
  CHECK(hi <= linear);
  CHECK(hi - lo > 1.9 * linear);
  CHECK(range_of(mha.in_proj_bias) == std::make_pair(0.f, 0.f));
  CHECK(range_of(mha.out_proj.bias) == std::make_pair(0.f, 0.f));
  nn::MultiheadAttention nobias(8, 2, 0.0, false, false);
  nobias.build("", rng);
  CHECK(nobias.named_parameters().size() == 2);
  CHECK(nobias.label() == "MultiheadAttention(embed_dim=8, num_heads=2, bias=False, batch_first=False)");
  CHECK(nobias.describe() == "MultiheadAttention(\n  (out_proj): Linear(8, 8, bias=False)\n)");
}

TEST_CASE("attention: bad arguments and inputs are refused naming the layer or op and the caller's line",
          "[nn][attention]") {
  const std::string here = "test_layers.cpp:";
  CHECK_THROWS_AS(nn::MultiheadAttention(8, 3), ValueError);
  CHECK_THROWS_WITH(nn::MultiheadAttention(8, 3), Contains("embed_dim must be divisible by num_heads"));
  CHECK_THROWS_AS(nn::MultiheadAttention(0, 1), ValueError);
  CHECK_THROWS_AS(nn::MultiheadAttention(8, 2, 1.5), ValueError);
  CHECK_THROWS_AS(nn::MultiheadAttention(8, 2, -0.1), ValueError);
  CHECK_THROWS_AS(nn::MultiheadAttention(8, 2, std::nan("")), ValueError);
  CHECK_NOTHROW(nn::MultiheadAttention(8, 2, 0.1));
  nn::Rng rng(0);
  nn::MultiheadAttention mha(8, 2);
  Tensor x = input("x", {2, 5, 8});
  CHECK_THROWS_WITH(mha(x), Contains("build() was not called"));
  mha.build("", rng);
  CHECK_THROWS_WITH(mha(input("bad", {2, 5, 6})), Contains("MultiheadAttention(embed_dim=8") &&
                                                      Contains("must end in embed_dim 8") && Contains(here));
  CHECK_THROWS_AS(mha(input("bad4", {1, 2, 5, 8})), ShapeError);
  Tensor kv = input("kv", {3, 4, 8});
  CHECK_THROWS_WITH(mha.attend(x, kv, kv), Contains("multi_head_attention: key 3x4x8 and value 3x4x8") && Contains(here));
  nn::AttentionOptions o;
  o.key_padding_mask = input("kpm", {2, 4}, DType::i32);
  CHECK_THROWS_WITH(mha.attend(x, x, x, o), Contains("multi_head_attention: key_padding_mask has shape 2x4, expected 2x5") &&
                                                Contains(here));
  o = {};
  o.attn_mask = input("am", {5, 4}, DType::i32);
  CHECK_THROWS_WITH(mha.attend(x, x, x, o), Contains("attn_mask has shape 5x4, expected 5x5 or 4x5x5") && Contains(here));
  CHECK_THROWS_WITH(nn::multi_head_attention_forward(x, x, x, 3, mha.in_proj_weight, mha.in_proj_bias,
                                                     mha.out_proj.weight, mha.out_proj.bias),
                    Contains("embed_dim 8 is not divisible by num_heads 3") && Contains(here));
  CHECK_THROWS_WITH(nn::multi_head_attention_forward(x, x, x, 2, mha.out_proj.weight, mha.in_proj_bias,
                                                     mha.out_proj.weight, mha.out_proj.bias),
                    Contains("in_proj_weight has shape 8x8, expected 24x8") && Contains(here));
}

TEST_CASE("attention: nn::MultiheadAttention with torch's weights written into the backend equals "
          "torch.nn.MultiheadAttention (causal self-attention, key padding with averaged weights) on cpu, gles, "
          "gles-compute and vulkan", "[nn][attention][golden]") {
  const sg::golden::json cases = sg::golden::load("layers.json").at("cases");
  auto find = [&](const std::string& name) -> const sg::golden::json& {
    for (const auto& c : cases)
      if (c.at("name") == name) return c;
    FAIL("no golden case " << name);
    return cases.at(0);
  };
  const sg::golden::json& causal = find("attention_self_causal_2x6x8_h2");
  const sg::golden::json& padded = find("attention_weights_averaged");
  auto input_of = [](const sg::golden::json& c, const std::string& name) -> sg::golden::GTensor {
    for (const auto& i : c.at("inputs"))
      if (i.at("name") == name) return sg::golden::tensor(i);
    FAIL("no input " << name);
    return {};
  };
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    nn::Rng rng(0);
    nn::MultiheadAttention a(8, 2), b(8, 2);
    a.build("", rng);
    b.build("", rng);
    auto be = native_backend(kind);
    for (auto [m, c] : {std::pair{&a, &causal}, std::pair{&b, &padded}}) {
      be->write(m->in_proj_weight, input_of(*c, "in_proj_weight").floats());  // torch's state_dict
      be->write(m->in_proj_bias, input_of(*c, "in_proj_bias").floats());
      be->write(m->out_proj.weight, input_of(*c, "out_proj_weight").floats());
      be->write(m->out_proj.bias, input_of(*c, "out_proj_bias").floats());
    }
    const auto xg = input_of(causal, "x"), qg = input_of(padded, "query"), kg = input_of(padded, "key"),
               vg = input_of(padded, "value"), pg = input_of(padded, "key_padding_mask");
    Tensor x = input("x", xg.shape), q = input("q", qg.shape), k = input("k", kg.shape), v = input("v", vg.shape);
    Tensor kpm = input("kpm", pg.shape, DType::i32);
    nn::AttentionOptions causal_opt;
    causal_opt.is_causal = true;
    nn::AttentionOptions pad_opt;
    pad_opt.key_padding_mask = kpm;
    pad_opt.need_weights = true;
    Program p;
    p.add_output("causal", a.attend(x, x, x, causal_opt).output);
    p.add_output("weights", b.attend(q, k, v, pad_opt).weights);
    auto exe = be->compile(p);
    const std::vector<float> xv = xg.floats(), qv = qg.floats(), kv = kg.floats(), vv = vg.floats(), pv = pg.floats();
    const auto out = exe->run({{"x", &xv}, {"q", &qv}, {"k", &kv}, {"v", &vv}, {"kpm", &pv}});
    expect_close(out[0], floats_of(causal.at("output")), 1e-4, 1e-5, "causal self-attention output");
    expect_close(out[1], floats_of(padded.at("output")), 1e-4, 1e-5, "averaged attention weights with key padding");
    if (std::string(kind) == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(*be));
  }
}

TEST_CASE("attention: a query whose every key is masked gets NaN as in torch on cpu, gles, gles-compute and vulkan, and "
          "forward(x) is self-attention", "[nn][attention]") {
  nn::Rng rng(1);
  nn::MultiheadAttention mha(4, 2);
  mha.build("", rng);
  Tensor x = input("x", {2, 3, 4});
  nn::AttentionOptions o;
  o.key_padding_mask = input("kpm", {2, 3}, DType::i32);
  Program p;
  p.add_output("masked", mha.attend(x, x, x, o).output);
  p.add_output("forward", mha(x));
  p.add_output("attend", mha.attend(x, x, x).output);
  const std::vector<float> xv = {0.1f, -0.4f, 0.3f, 0.9f, -1.2f, 0.5f, 0.7f, -0.3f, 0.2f, 0.0f, -0.6f, 1.1f,
                                 0.8f, 0.4f, -0.9f, 0.3f, 0.6f, -0.2f, 0.1f, 0.5f, -0.7f, 0.9f, 0.2f, -0.1f};
  const std::vector<float> kv = {0, 0, 1, 1, 1, 1};  // batch 1: every key is padding
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    const auto out = native_backend(kind)->compile(p)->run({{"x", &xv}, {"kpm", &kv}});
    for (int i = 0; i < 12; ++i) CHECK(std::isfinite(out[0][i]));
    for (int i = 12; i < 24; ++i) CHECK(std::isnan(out[0][i]));
    CHECK(out[1] == out[2]);
  }
}

TEST_CASE("attention: nn::TransformerEncoderLayer has torch's state_dict names, bad arguments are refused",
          "[nn][attention][transformer]") {
  nn::Rng rng(0);
  nn::TransformerEncoderLayer layer(16, 2, 32);
  layer.build("layers.0.", rng);
  CHECK(layer.label() == "TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, activation=relu)");
  std::vector<std::string> names;
  for (const auto& [n, t] : layer.named_parameters()) names.push_back(n);
  const std::vector<std::string> torch_names = {
      "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
      "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight",
      "norm2.bias"};
  REQUIRE(names.size() == torch_names.size());
  for (size_t i = 0; i < names.size(); ++i) CHECK(names[i] == "layers.0." + torch_names[i]);
  CHECK(layer.linear1.weight.shape() == ShapeRef({32, 16}));
  CHECK(layer.linear2.weight.shape() == ShapeRef({16, 32}));
  CHECK(nn::TransformerEncoderLayer(8, 2, 16, 0.0, "gelu", 1e-5, true, true).label() ==
        "TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, activation=gelu, norm_first=True)");
  CHECK_THROWS_AS(nn::TransformerEncoderLayer(16, 2, 32, 1.5), ValueError);
  CHECK_THROWS_WITH(nn::TransformerEncoderLayer(16, 3, 32), Contains("d_model must be divisible by nhead"));
  CHECK_THROWS_WITH(nn::TransformerEncoderLayer(16, 2, 32, 0.0, "tanh"), Contains("activation 'tanh'"));
  CHECK_THROWS_AS(nn::TransformerEncoderLayer(16, 2, 0), ValueError);
  CHECK_THROWS_WITH(layer.encode(input("bad", {2, 5, 8})), Contains("TransformerEncoderLayer(d_model=16") &&
                                                                Contains("must be (N, S, 16)") && Contains("test_layers.cpp:"));
  // a two-layer encoder trains: three Adam steps lower a regression loss on the CPU reference
  nn::Sequential enc;
  enc.add<nn::TransformerEncoderLayer>(16, 2, 32, 0.0, "gelu", 1e-5, true, true)
      .add<nn::TransformerEncoderLayer>(16, 2, 32, 0.0, "relu");
  enc.build(rng);
  Tensor x = input("x", {2, 5, 16}), target = input("target", {2, 5, 16});
  auto opt = make_adam({.lr = 0.01});
  auto exe = make_cpu_backend()->compile(make_train_step(mse_loss(enc(x), target), enc.parameters(), *opt));
  const std::vector<float> xv = rng.normal(160, 0, 1), tv = rng.normal(160, 0, 1);
  float first = 0, last = 0;
  for (int step = 0; step < 4; ++step) {
    last = exe->run({{"x", &xv}, {"target", &tv}})[0][0];
    if (step == 0) first = last;
  }
  CHECK(last < first);
}

// ------------------------------------------------------------------------------------------------
// Dropout inside MultiheadAttention and TransformerEncoderLayer (torch's dropout sites). The masks are shadergrad's
// Philox bits, not torch's generator's, so: p = 0 and eval() equal torch's goldens; in training the masks are checked
// by their statistics, their independence (steps, sites) and against the CPU reference on every backend (the
// 'random' op-case list, tests/op_cases.h); gradients against finite differences at a fixed step.
// ------------------------------------------------------------------------------------------------

namespace {

/// The RandomUniform nodes `p` evaluates, as (seed, stream) pairs.
std::vector<std::pair<uint64_t, uint32_t>> random_sites(const Program& p) {
  std::vector<std::pair<uint64_t, uint32_t>> r;
  for (const NodePtr& n : p.nodes())
    if (n->op == Op::RandomUniform) r.emplace_back(n->attrs.seed, n->attrs.stream);
  return r;
}

std::vector<float> normals(nn::Rng& rng, int64_t n) { return rng.normal(n, 0, 1); }

}  // namespace

TEST_CASE("attention dropout: nn::MultiheadAttention and nn::TransformerEncoderLayer are module trees with torch's "
          "children, repr, state_dict order and train and eval reaching every child", "[nn][attention][dropout]") {
  nn::Rng rng(0);
  nn::TransformerEncoderLayer layer(16, 2, 32, 0.1);
  layer.build("enc.", rng);
  // torch 1.13's print(nn.TransformerEncoderLayer(16, 2, 32, 0.1)), with shadergrad's Linear repr ("Linear(16, 32)"
  // for torch's "Linear(in_features=16, out_features=32, bias=True)", and for out_proj's
  // NonDynamicallyQuantizableLinear)
  CHECK(layer.describe() ==
        "TransformerEncoderLayer(\n"
        "  (self_attn): MultiheadAttention(\n"
        "    (out_proj): Linear(16, 16)\n"
        "  )\n"
        "  (linear1): Linear(16, 32)\n"
        "  (dropout): Dropout(p=0.1, inplace=False)\n"
        "  (linear2): Linear(32, 16)\n"
        "  (norm1): LayerNorm((16,), eps=1e-05, elementwise_affine=True)\n"
        "  (norm2): LayerNorm((16,), eps=1e-05, elementwise_affine=True)\n"
        "  (dropout1): Dropout(p=0.1, inplace=False)\n"
        "  (dropout2): Dropout(p=0.1, inplace=False)\n"
        ")");
  CHECK(layer.label() == "TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.1, activation=relu)");
  std::vector<std::string> children;
  for (const auto& [n, c] : layer.children()) children.push_back(n);
  CHECK(children == std::vector<std::string>{"self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1",
                                             "dropout2"});
  REQUIRE(layer.self_attn.children().size() == 1);
  CHECK(layer.self_attn.children()[0].first == "out_proj");
  CHECK(layer.self_attn.children()[0].second == &layer.self_attn.out_proj);
  // torch's state_dict keys in torch's order; the dropout step counters are State leaves, not buffers
  std::vector<std::string> names;
  for (const auto& [n, t] : layer.state_dict()) names.push_back(n);
  const std::vector<std::string> torch_keys = {
      "enc.self_attn.in_proj_weight", "enc.self_attn.in_proj_bias", "enc.self_attn.out_proj.weight",
      "enc.self_attn.out_proj.bias", "enc.linear1.weight", "enc.linear1.bias", "enc.linear2.weight", "enc.linear2.bias",
      "enc.norm1.weight", "enc.norm1.bias", "enc.norm2.weight", "enc.norm2.bias"};
  CHECK(names == torch_keys);
  CHECK(layer.parameters().size() == 12);
  CHECK(layer.self_attn.dropout_step.name() == "enc.self_attn.dropout_step");
  CHECK(layer.dropout.step.name() == "enc.dropout.dropout_step");
  CHECK(layer.dropout1.step.name() == "enc.dropout1.dropout_step");
  CHECK(layer.dropout2.step.name() == "enc.dropout2.dropout_step");
  // four dropout sites, four seeds (the hash of each path)
  const std::vector<uint64_t> seeds = {layer.self_attn.dropout_seed(), layer.dropout.seed(), layer.dropout1.seed(),
                                       layer.dropout2.seed()};
  for (size_t i = 0; i < seeds.size(); ++i)
    for (size_t j = i + 1; j < seeds.size(); ++j) CHECK(seeds[i] != seeds[j]);
  // train()/eval() reach every child, out_proj included
  std::vector<const nn::Module*> all = {&layer, &layer.self_attn, &layer.self_attn.out_proj, &layer.linear1,
                                        &layer.dropout, &layer.linear2, &layer.norm1, &layer.norm2, &layer.dropout1,
                                        &layer.dropout2};
  layer.eval();
  for (const nn::Module* m : all) CHECK_FALSE(m->training());
  layer.train();
  for (const nn::Module* m : all) CHECK(m->training());
  // a MultiheadAttention without dropout has no counter; with dropout its repr is still torch's (no sizes)
  nn::MultiheadAttention plain(8, 2);
  plain.build("", rng);
  CHECK_FALSE(plain.dropout_step);
  nn::MultiheadAttention dropped(8, 2, 0.25, true, true, 99);
  dropped.build("a.", rng);
  CHECK(dropped.dropout_seed() == 99);
  CHECK(dropped.describe() == "MultiheadAttention(\n  (out_proj): Linear(8, 8)\n)");
  CHECK(dropped.label() == "MultiheadAttention(embed_dim=8, num_heads=2, dropout=0.25, batch_first=True)");
  // the functional refuses a dropout without a step and a p outside [0, 1], naming the op and the line
  Tensor x = input("x", {2, 3, 8});
  nn::AttentionDropout no_step{.p = 0.5};
  CHECK_THROWS_WITH(nn::multi_head_attention_forward(x, x, x, 2, plain.in_proj_weight, plain.in_proj_bias,
                                                     plain.out_proj.weight, plain.out_proj.bias, {}, true, no_step),
                    Contains("multi_head_attention: dropout p = 0.5 in training needs a step") &&
                        Contains("test_layers.cpp:"));
  nn::AttentionDropout bad_p{.p = 1.5, .step = input("s", {})};
  CHECK_THROWS_AS(nn::multi_head_attention_forward(x, x, x, 2, plain.in_proj_weight, plain.in_proj_bias,
                                                   plain.out_proj.weight, plain.out_proj.bias, {}, true, bad_p),
                  ValueError);
  // not training: no step needed, no random numbers (torch's dropout_p = 0)
  nn::AttentionDropout off{.p = 0.5, .training = false};
  Program po;
  po.add_output("y", nn::multi_head_attention_forward(x, x, x, 2, plain.in_proj_weight, plain.in_proj_bias,
                                                      plain.out_proj.weight, plain.out_proj.bias, {}, true, off)
                         .output);
  CHECK(random_sites(po).empty());
}

TEST_CASE("attention dropout: with dropout > 0 in eval mode MultiheadAttention equals torch's goldens on cpu, gles, "
          "gles-compute and vulkan, and a TransformerEncoderLayer's output is the dropout-free layer's",
          "[nn][attention][dropout][golden]") {
  const sg::golden::json cases = sg::golden::load("layers.json").at("cases");
  const sg::golden::json* causal = nullptr;
  for (const auto& c : cases)
    if (c.at("name") == "attention_self_causal_2x6x8_h2") causal = &c;
  REQUIRE(causal != nullptr);
  auto input_of = [&](const std::string& name) -> sg::golden::GTensor {
    for (const auto& i : causal->at("inputs"))
      if (i.at("name") == name) return sg::golden::tensor(i);
    FAIL("no input " << name);
    return {};
  };
  nn::Rng rng(0);
  nn::MultiheadAttention mha(8, 2, 0.4);
  mha.build("", rng);
  mha.eval();  // torch: training=False sets dropout_p to 0
  const auto xg = input_of("x");
  Tensor x = input("x", xg.shape);
  nn::AttentionOptions o;
  o.is_causal = true;
  Program p;
  p.add_output("y", mha.attend(x, x, x, o).output);
  CHECK(random_sites(p).empty());
  CHECK(p.updates.empty());
  const std::vector<float> xv = xg.floats();
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    auto be = native_backend(kind);
    be->write(mha.in_proj_weight, input_of("in_proj_weight").floats());
    be->write(mha.in_proj_bias, input_of("in_proj_bias").floats());
    be->write(mha.out_proj.weight, input_of("out_proj_weight").floats());
    be->write(mha.out_proj.bias, input_of("out_proj_bias").floats());
    expect_close(be->compile(p)->run({{"x", &xv}})[0], floats_of(causal->at("output")), 1e-4, 1e-5,
                 "eval-mode attention with dropout 0.4");
  }
  // a TransformerEncoderLayer with dropout 0.3 in eval mode computes the same bits as one with dropout 0 (whose
  // values the 'layers' op-case list checks against torch) with the same parameters; in training with p = 0 neither
  // draws random numbers nor adds counters
  nn::Rng r1(5), r2(5);
  nn::TransformerEncoderLayer with(16, 2, 32, 0.3, "gelu", 1e-5, true, true), without(16, 2, 32, 0.0, "gelu", 1e-5,
                                                                                      true, true);
  with.build("", r1);
  without.build("", r2);
  Tensor src = input("src", {2, 5, 16});
  Program train0;
  train0.add_output("y", without(src));
  CHECK(random_sites(train0).empty());
  CHECK(train0.updates.empty());
  with.eval();
  Program ev;
  ev.add_output("with", with(src));
  ev.add_output("without", without(src));
  CHECK(random_sites(ev).empty());
  CHECK(ev.updates.empty());
  const std::vector<float> sv = normals(rng, 160);
  const auto out = make_cpu_backend()->compile(ev)->run({{"src", &sv}});
  CHECK(out[0] == out[1]);
}

TEST_CASE("attention dropout: the attention weights after dropout have zeros with probability p and keep their mean, "
          "the survivors are the weights scaled by 1 / (1 - p), and need_weights returns them after dropout as torch",
          "[nn][attention][dropout]") {
  // 4 x 2 heads x 64 x 64 = 32768 weights, p = 0.25: the fraction of zeros is within 5 binomial standard deviations
  // (0.0024 each) of p; every row summed 1 before dropout, the mean of the 512 row sums after it stays within 0.02 of
  // 1 (standard deviation ~0.0032)
  const double p = 0.25;
  nn::Rng rng(11);
  nn::MultiheadAttention mha(8, 2, p);
  mha.build("", rng);
  Tensor x = input("x", {4, 64, 8});
  nn::AttentionOptions o;
  o.need_weights = true;
  o.average_attn_weights = false;
  const nn::AttentionOutput trained = mha.attend(x, x, x, o);
  mha.eval();
  const nn::AttentionOutput evaluated = mha.attend(x, x, x, o);
  Program prog;
  prog.add_output("dropped", trained.weights);
  prog.add_output("plain", evaluated.weights);
  const std::vector<float> xv = normals(rng, 4 * 64 * 8);
  for (const char* kind : {"cpu", "gles"}) {
    INFO("backend " << kind);
    const auto out = native_backend(kind)->compile(prog)->run({{"x", &xv}});
    const std::vector<float>&d = out[0], &w = out[1];
    REQUIRE(d.size() == 32768);
    const float scale = 1.0f / static_cast<float>(1.0 - p);
    int64_t zeros = 0, bad = 0;
    double sum = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      if (d[i] == 0.f) {
        ++zeros;
      } else if (std::fabs(d[i] - w[i] * scale) > 1e-5 * std::fabs(w[i] * scale) + 1e-7) {
        ++bad;  // a survivor is the undropped weight times 1 / (1 - p)
      }
      sum += d[i];
    }
    CHECK(bad == 0);
    const double frac = static_cast<double>(zeros) / d.size(), sd = std::sqrt(p * (1 - p) / d.size());
    INFO("fraction of zeros " << frac << ", mean row sum " << sum / 512);
    CHECK(std::fabs(frac - p) < 5 * sd);
    CHECK(std::fabs(sum / 512 - 1.0) < 0.02);
  }
}

TEST_CASE("attention dropout: the masks differ between the steps of one compiled program and between dropout sites",
          "[nn][attention][dropout]") {
  nn::Rng rng(2);
  nn::MultiheadAttention a(8, 2, 0.5), b(8, 2, 0.5);
  a.build("a.", rng);
  b.build("b.", rng);
  Tensor x = input("x", {2, 6, 8});
  nn::AttentionOptions o;
  o.need_weights = true;
  o.average_attn_weights = false;
  Program p;
  p.add_output("a", a.attend(x, x, x, o).weights);
  p.add_output("b", b.attend(x, x, x, o).weights);
  CHECK(p.updates.size() == 2);  // each layer's counter
  const std::vector<float> xv = normals(rng, 96);
  auto be = native_backend("cpu");
  auto exe = be->compile(p);
  // b's weights are written as a's: the same softmax, other masks
  be->write(b.in_proj_weight, be->read(a.in_proj_weight));
  be->write(b.out_proj.weight, be->read(a.out_proj.weight));
  auto zeros_of = [](const std::vector<float>& v) {
    std::vector<bool> z;
    for (float f : v) z.push_back(f == 0.f);
    return z;
  };
  const auto s0 = exe->run({{"x", &xv}}), s1 = exe->run({{"x", &xv}});
  CHECK(zeros_of(s0[0]) != zeros_of(s1[0]));  // step 0 and step 1 of layer a
  CHECK(zeros_of(s0[0]) != zeros_of(s0[1]));  // layers a and b at one step
  CHECK(be->read(a.dropout_step) == std::vector<float>{2.f});
  // a TransformerEncoderLayer's train step draws four independent masks: four (seed, stream) pairs, all different
  nn::TransformerEncoderLayer layer(8, 2, 16, 0.2);
  layer.build("enc.", rng);
  Tensor src = input("src", {2, 6, 8});
  Program tp;
  tp.add_output("y", layer(src));
  auto sites = random_sites(tp);
  REQUIRE(sites.size() == 4);
  std::sort(sites.begin(), sites.end());
  CHECK(std::adjacent_find(sites.begin(), sites.end()) == sites.end());
  CHECK(tp.updates.size() == 4);
  auto te = be->compile(tp);
  const auto y0 = te->run({{"src", &xv}}), y1 = te->run({{"src", &xv}});
  CHECK(y0[0] != y1[0]);
  for (const Tensor* step : {&layer.self_attn.dropout_step, &layer.dropout.step, &layer.dropout1.step,
                             &layer.dropout2.step})
    CHECK(be->read(*step) == std::vector<float>{2.f});
}

TEST_CASE("attention dropout: gradients of multi_head_attention_forward and of a TransformerEncoderLayer with dropout "
          "equal finite differences on the CPU reference at a fixed step", "[nn][attention][dropout][autodiff]") {
  nn::Rng rng(4);
  // the functional, with a fed step (5): self-attention with key padding, per-head weights in the loss too
  const int64_t n = 2, l = 4, e = 6;
  Tensor x = input("x", {n, l, e}), step = input("step", {});
  Tensor w_in = param("w_in", {3 * e, e}, rng.uniform(3 * e * e, -0.5, 0.5));
  Tensor b_in = param("b_in", {3 * e}, rng.uniform(3 * e, -0.2, 0.2));
  Tensor w_out = param("w_out", {e, e}, rng.uniform(e * e, -0.5, 0.5));
  Tensor b_out = param("b_out", {e}, rng.uniform(e, -0.2, 0.2));
  nn::AttentionOptions o;
  o.need_weights = true;
  o.average_attn_weights = false;
  nn::AttentionDropout d{.p = 0.3, .seed = 17, .step = step};
  const nn::AttentionOutput r = nn::multi_head_attention_forward(x, x, x, 3, w_in, b_in, w_out, b_out, o, true, d);
  Tensor loss = sum(r.output * constant(r.output.shape(), rng.uniform(n * l * e, -1, 1))) +
                sum(r.weights * constant(r.weights.shape(), rng.uniform(n * 3 * l * l, -1, 1)));
  const std::vector<float> xf = normals(rng, n * l * e);
  cpu::LeafValues feeds{{x.node().get(), std::vector<double>(xf.begin(), xf.end())}, {step.node().get(), {5.0}}};
  // the masks are there: some weights are zero at step 5
  const auto wv = cpu::evaluate({r.weights.node()}, feeds)[0];
  CHECK(std::count(wv.begin(), wv.end(), 0.0) > 0);
  GradCheckResult g = cpu::check_gradients(loss, {x, w_in, b_in, w_out, b_out}, feeds);
  INFO("multi_head_attention_forward with dropout: " << g.report());
  CHECK(g.ok);
  // the layer: pre-norm gelu, dropout 0.2 at every site, its counters at their initial 0
  nn::TransformerEncoderLayer layer(6, 2, 12, 0.2, "gelu", 1e-5, true, true);
  layer.build("", rng);
  Tensor src = input("src", {n, l, e});
  Tensor y = layer(src);
  Tensor loss2 = sum(y * constant(y.shape(), rng.uniform(n * l * e, -1, 1)));
  cpu::LeafValues feeds2{{src.node().get(), std::vector<double>(xf.begin(), xf.end())}};
  std::vector<Tensor> wrt = {src};
  for (const auto& [name, t] : layer.named_parameters()) wrt.push_back(t);
  GradCheckResult g2 = cpu::check_gradients(loss2, wrt, feeds2);
  INFO("TransformerEncoderLayer with dropout: " << g2.report());
  CHECK(g2.ok);
}
