// Tests for sg/nn.h: parameter counts, state_dict names/shapes and forward values against PyTorch's
// nn.Sequential (Debian's python3-torch, run through popen), PyTorch's default init bound, structure hashes.
#include <catch2/catch.hpp>

#include "golden_util.h"
#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/backend.h"
#include "sg/error.h"
#include "sg/nn.h"
#include "sg/train.h"
#include "sg/autodiff.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using sg::testing::TempDir;

/// Runs a shell command, returns (exit status, stdout).
std::pair<int, std::string> run_command(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

struct ModelSpec {
  std::string name;
  int64_t c, h, w;
};
const std::vector<ModelSpec> kSpecs = {{"mlp", 1, 28, 28}, {"cnn", 1, 8, 8}, {"cnn-large", 1, 8, 8}};
constexpr int64_t kBatch = 3;

std::unique_ptr<sg::nn::Sequential> build(const ModelSpec& s, uint64_t seed) {
  auto m = sg::nn::make_model(s.name, s.c, s.h, s.w);
  sg::nn::Rng rng(seed);
  m->build(rng);
  return m;
}

/// A deterministic input batch (kBatch x C x H x W) in [0, 1].
std::vector<float> input_batch(const ModelSpec& s) {
  std::vector<float> x(kBatch * s.c * s.h * s.w);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37 % 101) / 100.0);
  return x;
}

// The same models written with torch.nn, fed the parameters our models were built with (read in the order
// of torch's own state_dict) and the same inputs. Prints {model: {params: [[name, shape]...], count, logits}}.
const char* kTorchScript = R"PY(
import json, sys
import numpy as np
import torch, torch.nn as nn
def cnn(c1, c2, hidden, c, h, w):
    return nn.Sequential(nn.Conv2d(c, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(c2 * (h // 4) * (w // 4), hidden), nn.ReLU(), nn.Linear(hidden, 10))
models = {"mlp": (nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)), (1, 28, 28)),
          "cnn": (cnn(8, 16, 32, 1, 8, 8), (1, 8, 8)),
          "cnn-large": (cnn(64, 128, 256, 1, 8, 8), (1, 8, 8))}
out = {}
d = sys.argv[1]
for name, (m, shape) in models.items():
    flat = np.fromfile(f"{d}/{name}.params.f32", dtype="<f4")
    x = np.fromfile(f"{d}/{name}.x.f32", dtype="<f4").reshape(-1, *shape)
    sd, off = {}, 0
    for k, v in m.state_dict().items():
        sd[k] = torch.from_numpy(flat[off:off + v.numel()].copy()).reshape(v.shape)
        off += v.numel()
    assert off == flat.size, (name, off, flat.size)
    m.load_state_dict(sd)
    with torch.no_grad():
        logits = m(torch.from_numpy(x))
    out[name] = {"params": [[k, list(v.shape)] for k, v in m.state_dict().items()],
                 "count": sum(p.numel() for p in m.parameters()),
                 "logits": logits.flatten().tolist()}
print(json.dumps(out))
)PY";

/// Runs kTorchScript once per test process on parameters written from seed-0 models.
const nlohmann::json& torch_reference(const TempDir& dir) {
  static nlohmann::json ref = [&] {
    for (const auto& s : kSpecs) {
      auto m = build(s, 0);
      std::ofstream pf(dir / (s.name + ".params.f32"), std::ios::binary);
      for (auto& [name, t] : m->named_parameters()) {
        const auto& data = *t.node()->data;
        REQUIRE(static_cast<int64_t>(data.size()) == t.numel());
        pf.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * 4));
      }
      std::vector<float> x = input_batch(s);
      std::ofstream xf(dir / (s.name + ".x.f32"), std::ios::binary);
      xf.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * 4));
    }
    std::string script = dir / "ref.py";
    std::ofstream(script) << kTorchScript;
    auto [rc, out] = run_command(fmt::format("/usr/bin/python3 {} {}", script, dir.path.string()));
    INFO(out);
    REQUIRE(rc == 0);
    return nlohmann::json::parse(out);
  }();
  return ref;
}

}  // namespace

TEST_CASE("nn: parameter counts of the CLI's models", "[nn]") {
  // 784*128 + 128 + 128*10 + 10
  CHECK(build({"mlp", 1, 28, 28}, 0)->num_parameters() == 101770);
  // (8*1*9 + 8) + (16*8*9 + 16) + (32*16*2*2 + 32) + (10*32 + 10)
  CHECK(build({"cnn", 1, 8, 8}, 0)->num_parameters() == 3658);
  // (64*9 + 64) + (128*64*9 + 128) + (256*128*4 + 256) + (10*256 + 10)
  CHECK(build({"cnn-large", 1, 8, 8}, 0)->num_parameters() == 208394);
  // The sum over named_parameters is what num_parameters reports.
  auto m = build({"cnn", 1, 8, 8}, 0);
  int64_t n = 0;
  for (auto& [name, t] : m->named_parameters()) n += static_cast<int64_t>(t.node()->data->size());
  CHECK(n == 3658);
  CHECK_THROWS_AS(sg::nn::make_model("resnet", 1, 8, 8), sg::ValueError);
  CHECK_THROWS_AS(sg::nn::make_model("cnn", 1, 6, 6), sg::ValueError);  // two 2x2 pools need H, W % 4 == 0
}

TEST_CASE("nn: state_dict names and shapes and forward values equal PyTorch's nn.Sequential", "[nn][torch]") {
  TempDir dir;
  const nlohmann::json& ref = torch_reference(dir);
  for (const auto& s : kSpecs) {
    INFO("model " << s.name);
    // A fresh backend per model (it holds only this model's parameters).
    auto backend = sg::make_cpu_backend();
    auto m = build(s, 0);
    const auto& r = ref.at(s.name);
    CHECK(r.at("count").get<int64_t>() == m->num_parameters());
    auto params = m->named_parameters();
    REQUIRE(params.size() == r.at("params").size());
    for (size_t i = 0; i < params.size(); ++i) {
      CHECK(params[i].first == r.at("params")[i][0].get<std::string>());
      CHECK(std::vector<int64_t>(params[i].second.shape().begin(), params[i].second.shape().end()) ==
            r.at("params")[i][1].get<std::vector<int64_t>>());
    }
    // Same weights and inputs -> same logits (layouts: Linear (out, in), Conv2d (O, C, KH, KW), NCHW flatten).
    sg::Tensor x = sg::input("x", {kBatch, s.c, s.h, s.w});
    sg::Program p;
    p.add_output("logits", (*m)(x));
    std::vector<float> xs = input_batch(s);
    std::vector<float> got = backend->compile(p)->run({{"x", &xs}})[0];
    auto want = r.at("logits").get<std::vector<double>>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-4).margin(1e-5));
  }
}

TEST_CASE("nn: default init is PyTorch's kaiming_uniform with bound 1/sqrt(fan_in)", "[nn]") {
  for (const auto& s : kSpecs) {
    auto m = build(s, 3);
    int64_t weight_fan_in = 0;
    for (auto& [name, t] : m->named_parameters()) {
      INFO(s.name << " " << name);
      // fan_in from the shape, the way torch.nn.init._calculate_fan_in_and_fan_out does; a bias uses its
      // layer's weight fan_in (weights come first in the state_dict).
      if (t.rank() >= 2) {
        weight_fan_in = 1;
        for (int d = 1; d < t.rank(); ++d) weight_fan_in *= t.dim(d);
      }
      REQUIRE(weight_fan_in > 0);
      double bound = 1.0 / std::sqrt(static_cast<double>(weight_fan_in));
      const auto& v = *t.node()->data;
      double sum = 0, sq = 0, maxabs = 0;
      for (float f : v) {
        sum += f;
        sq += static_cast<double>(f) * f;
        maxabs = std::max(maxabs, std::fabs(static_cast<double>(f)));
      }
      CHECK(maxabs <= bound);
      auto n = static_cast<double>(v.size());
      if (v.size() >= 2000) {  // statistics only where they are tight: std of U(-b, b) is b/sqrt(3)
        double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
        CHECK(sd == Approx(bound / std::sqrt(3.0)).epsilon(0.03));
        CHECK(std::fabs(mean) < 4 * bound / std::sqrt(3.0 * n));
        CHECK(maxabs > 0.99 * bound);
      }
    }
  }
  // Seeded: the same seed gives the same values, another seed different ones.
  auto a = build(kSpecs[1], 5), b = build(kSpecs[1], 5), c = build(kSpecs[1], 6);
  CHECK(*a->named_parameters()[0].second.node()->data == *b->named_parameters()[0].second.node()->data);
  CHECK(*a->named_parameters()[0].second.node()->data != *c->named_parameters()[0].second.node()->data);
}

TEST_CASE("nn: structure_hash identifies the architecture and not the values", "[nn]") {
  std::set<std::string> hashes;
  for (const auto& s : kSpecs) hashes.insert(build(s, 0)->structure_hash());
  hashes.insert(build({"mlp", 1, 8, 8}, 0)->structure_hash());   // other input size -> other Linear
  hashes.insert(build({"cnn", 1, 12, 12}, 0)->structure_hash());  // other flatten size
  auto five = sg::nn::make_cnn(8, 16, 32, 1, 8, 8, 5);  // 5 classes
  // Before build() there are no parameters to hash: a clear error, not a crash.
  CHECK_THROWS_WITH(five->structure_hash(), Contains("build()"));
  CHECK_THROWS_AS(five->num_parameters(), sg::ValueError);
  sg::nn::Rng rng(0);
  five->build(rng);
  hashes.insert(five->structure_hash());
  CHECK(hashes.size() == 6);
  for (const auto& h : hashes) {
    CHECK(h.size() == 16);
    CHECK(h.find_first_not_of("0123456789abcdef") == std::string::npos);
  }
  // Stable: independent of seed, of the parameter values, and of how often it is asked.
  auto m1 = build(kSpecs[1], 0), m2 = build(kSpecs[1], 99);
  CHECK(m1->structure_hash() == m2->structure_hash());
  CHECK(m1->structure_hash() == m1->structure_hash());
  // A layer that differs only in a hyper-parameter without parameters (pool stride) changes the hash too.
  sg::nn::Sequential p1, p2;
  p1.add<sg::nn::MaxPool2d>(2);
  p2.add<sg::nn::MaxPool2d>(2, 1);
  CHECK(p1.structure_hash() != p2.structure_hash());
}

TEST_CASE("nn: Linear rejects inputs of the wrong width with a ShapeError naming both sizes", "[nn]") {
  sg::nn::Rng rng(0);
  sg::nn::Linear lin(784, 128);
  lin.build("fc.", rng);
  CHECK(lin.weight.name() == "fc.weight");
  CHECK_THROWS_WITH(lin(sg::input("x", {4, 100})), Contains("784") && Contains("4x100"));
}

TEST_CASE("nn: GELU (approximate 'none' and 'tanh') between two Linears equals torch.nn.GELU, repr included", "[nn][torch][gelu]") {
  TempDir dir;
  const int64_t batch = 5;
  std::vector<float> x(batch * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(((i * 37) % 23) / 2.5 - 4.5);  // [-4.5, 4.3]
  std::ofstream(dir / "x.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * 4));
  nlohmann::json got;
  for (const std::string approx : {"none", "tanh"}) {
    sg::nn::Sequential net;
    net.add<sg::nn::Linear>(4, 6).add<sg::nn::GELU>(approx).add<sg::nn::Linear>(6, 3);
    sg::nn::Rng rng(7);
    net.build(rng);
    std::ofstream pf(dir / (approx + ".params.f32"), std::ios::binary);
    for (auto& [name, t] : net.named_parameters())
      pf.write(reinterpret_cast<const char*>(t.node()->data->data()), static_cast<std::streamsize>(t.numel() * 4));
    sg::Tensor in = sg::input("x", {batch, 4});
    sg::Program p;
    p.add_output("y", net(in));
    got[approx] = {{"repr", net.layer_name(1)}, {"y", sg::make_cpu_backend()->compile(p)->run({{"x", &x}})[0]}};
  }
  std::ofstream(dir / "ref.py") << R"PY(
import json, sys
import numpy as np
import torch, torch.nn as nn
d, out = sys.argv[1], {}
x = torch.from_numpy(np.fromfile(f"{d}/x.f32", dtype="<f4").reshape(-1, 4))
for a in ["none", "tanh"]:
    m = nn.Sequential(nn.Linear(4, 6), nn.GELU(approximate=a), nn.Linear(6, 3))
    flat, sd, off = np.fromfile(f"{d}/{a}.params.f32", dtype="<f4"), {}, 0
    for k, v in m.state_dict().items():
        sd[k] = torch.from_numpy(flat[off:off + v.numel()].copy()).reshape(v.shape)
        off += v.numel()
    m.load_state_dict(sd)
    m = m.double()
    with torch.no_grad():
        out[a] = {"repr": repr(m[1]), "y": m(x.double()).flatten().tolist()}
print(json.dumps(out))
)PY";
  auto [rc, out] = run_command(fmt::format("/usr/bin/python3 {} {}", dir / "ref.py", dir.path.string()));
  INFO(out);
  REQUIRE(rc == 0);
  const nlohmann::json ref = nlohmann::json::parse(out);
  for (const std::string approx : {"none", "tanh"}) {
    INFO("approximate " << approx);
    const std::string got_repr = got[approx]["repr"], ref_repr = ref[approx]["repr"];
    CHECK(got_repr == "1: " + ref_repr);
    const std::vector<double> g = got[approx]["y"], w = ref[approx]["y"];
    REQUIRE(g.size() == w.size());
    for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(w[i]).epsilon(1e-5).margin(1e-6));
  }
  CHECK_THROWS_WITH(sg::nn::GELU("exact"), Contains("approximate='exact'") && Contains("'none' or 'tanh'"));
}

using namespace sg;

namespace {
// torch's tutorial shape of a custom module: children as members, registered by name; a residual forward
struct ResidualBlock : nn::Module {
  nn::BatchNorm1d bn{4};
  nn::Linear fc{4, 4};
  ResidualBlock() {
    register_module("bn", bn);
    register_module("fc", fc);
  }
  Tensor forward(const Tensor& x) override { return x + fc(bn(x)); }
  std::string type_name() const override { return "Block"; }
};
}  // namespace

TEST_CASE("nn: a Module with children (a residual block inside a Sequential) names parameters and buffers by path "
          "as torch's state_dict, prints torch's nested repr, and train()/eval() reach every descendant",
          "[nn][modules]") {
  nn::Sequential m;
  m.add<nn::Linear>(3, 4).add<ResidualBlock>().add<nn::Linear>(4, 2);
  nn::Rng rng(3);
  m.build(rng);
  std::vector<std::string> names;
  for (auto& [n, t] : m.state_dict()) names.push_back(n);
  // torch: list(nn.Sequential(nn.Linear(3,4), Block(), nn.Linear(4,2)).state_dict().keys())
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "1.bn.weight", "1.bn.bias", "1.bn.running_mean",
                                          "1.bn.running_var", "1.bn.num_batches_tracked", "1.fc.weight", "1.fc.bias",
                                          "2.weight", "2.bias"});
  CHECK(m.parameters().size() == 8);
  CHECK(m.named_buffers().size() == 3);
  CHECK(m.num_parameters() == 3 * 4 + 4 + 4 + 4 + 16 + 4 + 4 * 2 + 2);
  // torch's repr nests a child's lines two spaces deeper (our Linear prints its short form)
  CHECK(m.describe() ==
        "Sequential(\n  (0): Linear(3, 4)\n  (1): Block(\n    (bn): BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, "
        "track_running_stats=True)\n    (fc): Linear(4, 4)\n  )\n  (2): Linear(4, 2)\n)");
  auto& block = static_cast<ResidualBlock&>(*m.children()[1].second);
  CHECK(block.bn.training());
  m.eval();
  CHECK(!block.bn.training());
  CHECK(!block.fc.training());
  m.train();
  CHECK(block.bn.training());

  // the residual forward is x + fc(bn(x)): compare with the same graph written without modules, on the CPU reference
  Tensor x = input("x", {5, 3});
  Tensor h = matmul(x, transpose(m.named_parameters()[0].second)) + m.named_parameters()[1].second;
  Tensor mu = mean(h, {0}, true), v = var(h, {0}, false, true);
  Tensor expected = h + matmul((h - mu) * rsqrt(v + 1e-5) * block.bn.weight + block.bn.bias, transpose(block.fc.weight)) +
                    block.fc.bias;
  Program p;
  p.add_output("got", m.children()[1].second->forward(h));
  p.add_output("expected", expected);
  std::vector<float> xs(15);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i));
  auto out = make_cpu_backend()->compile(p)->run({{"x", &xs}});
  REQUIRE(out[0].size() == 20u);
  for (size_t i = 0; i < out[0].size(); ++i) CHECK(out[0][i] == Approx(out[1][i]).margin(1e-6));
  CHECK(p.updates.size() == 3);  // the block's BatchNorm running statistics
}

TEST_CASE("nn: register_module refuses empty, dotted and repeated names and a module as its own child",
          "[nn][modules][errors]") {
  struct M : nn::Module {
    nn::Linear a{2, 2};
    Tensor forward(const Tensor& x) override { return a(x); }
    void reg(const std::string& n, nn::Module& c) { register_module(n, c); }
  } m;
  CHECK_THROWS_WITH(m.reg("", m.a), Contains("must be non-empty without '.'"));
  CHECK_THROWS_WITH(m.reg("a.b", m.a), Contains("'a.b' must be non-empty without '.'"));
  m.reg("a", m.a);
  CHECK_THROWS_WITH(m.reg("a", m.a), Contains("a child module named 'a' is already registered"));
  CHECK_THROWS_WITH(m.reg("self", m), Contains("cannot be its own child"));
}

TEST_CASE("nn: checkpoints save and load buffers (BatchNorm running statistics) with the parameters",
          "[nn][modules][batch_norm]") {
  auto make = [] {
    auto m = std::make_unique<nn::Sequential>();
    m->add<nn::Linear>(3, 4).add<nn::BatchNorm1d>(4);
    nn::Rng rng(5);
    m->build(rng);
    return m;
  };
  auto a = make();
  auto be = make_cpu_backend();
  Tensor x = input("x", {6, 3});
  auto opt = make_sgd({.lr = 0.1});
  auto exe = be->compile(make_train_step(sum((*a)(x)), a->parameters(), *opt));
  std::vector<float> xs(18);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::cos(static_cast<float>(i) * 0.7f);
  exe->run({{"x", &xs}});
  exe->run({{"x", &xs}});
  TempDir dir;
  const std::string path = dir / "bn.safetensors";
  train::save_checkpoint(path, *a, *be, "custom");
  auto b = make();
  auto be2 = make_cpu_backend();
  Program p;
  b->eval();
  p.add_output("y", (*b)(x));
  auto exe2 = be2->compile(p);
  train::load_checkpoint(path, *b, *be2);
  const auto sa = a->state_dict(), sb = b->state_dict();
  REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    INFO(sa[i].first);
    CHECK(sa[i].first == sb[i].first);
    CHECK(be->read(sa[i].second) == be2->read(sb[i].second));
  }
  CHECK(be2->read(static_cast<nn::BatchNorm1d&>(*b->children()[1].second).num_batches_tracked) ==
        std::vector<float>{2.0f});
}

TEST_CASE("nn: ConvTranspose2d and Upsample (conv_transpose, upsample) have torch's weight layout, repr and output "
          "sizes", "[nn][conv_transpose][upsample]") {
  nn::ConvTranspose2d up(4, 2, 3, 2, 1, 1);
  CHECK(up.describe() == "ConvTranspose2d(4, 2, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1))");
  nn::Rng rng(9);
  up.build("dec.", rng);
  CHECK(shape_str(up.weight.shape()) == "4x2x3x3");  // (in, out, k, k) as torch
  for (float v : *up.weight.node()->data) CHECK(std::fabs(v) <= 1.0f / std::sqrt(18.0f));  // fan_in = 2*3*3
  Tensor x = input("x", {2, 4, 5, 5});
  CHECK(shape_str(up(x).shape()) == "2x2x10x10");  // (5-1)*2 - 2 + 2 + 1 + 1
  nn::Upsample near(3);
  CHECK(near.describe() == "Upsample(scale_factor=3.0, mode='nearest')");
  CHECK(shape_str(near(x).shape()) == "2x4x15x15");
  CHECK_THROWS_AS(nn::Upsample(2, "bicubic"), UnsupportedError);
  CHECK_THROWS_WITH(conv_transpose2d(x, up.weight, Tensor(), {.stride = {2, 2}, .output_padding = {2, 0}}),
                    Contains("output_padding 2 must be within [0, stride 2)"));
}

TEST_CASE("nn: Conv2d with groups (depthwise) and ConvTranspose2d with groups have torch's weight layout, fan_in, repr "
          "and checks", "[nn][conv_groups]") {
  // reprs as torch 1.13 prints nn.Conv2d(4, 8, 3, 2, 1, groups=4), nn.Conv2d(4, 8, 3, 1, 0, 2, 4, False) and
  // nn.ConvTranspose2d(4, 6, 3, 2, 1, 1, 2, False, 2)
  nn::Conv2d dw(4, 8, 3, 2, 1, 1, 4);
  CHECK(dw.describe() == "Conv2d(4, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=4)");
  CHECK(nn::Conv2d(4, 8, 3, 1, 0, 2, 4, false).describe() ==
        "Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), dilation=(2, 2), groups=4, bias=False)");
  CHECK(nn::ConvTranspose2d(4, 6, 3, 2, 1, 1, 2, false, 2).describe() ==
        "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(2, 2), "
        "output_padding=(1, 1), groups=2, bias=False)");
  nn::Rng rng(5);
  dw.build("dw.", rng);
  CHECK(shape_str(dw.weight.shape()) == "8x1x3x3");  // (out, in / groups, k, k) as torch
  CHECK(shape_str(dw.bias.shape()) == "8");
  for (float v : *dw.weight.node()->data) CHECK(std::fabs(v) <= 1.0f / 3.0f);  // fan_in = 1 * 3 * 3
  bool wide = false;
  for (float v : *dw.weight.node()->data) wide |= std::fabs(v) > 1.0f / std::sqrt(36.0f);  // not fan_in = 4 * 3 * 3
  CHECK(wide);
  nn::Conv2d kg(6, 4, 3, 1, 1, 1, 2, false, nn::ConvInit::KaimingRelu);
  kg.build("kg.", rng);
  CHECK(shape_str(kg.weight.shape()) == "4x3x3x3");
  CHECK(kg.named_parameters().size() == 1);  // bias=False: weight only, as torch's state_dict
  for (float v : *kg.weight.node()->data) CHECK(std::fabs(v) <= std::sqrt(6.0f / 27.0f));
  Tensor x = input("x", {2, 4, 9, 9});
  CHECK(shape_str(dw(x).shape()) == "2x8x5x5");
  nn::ConvTranspose2d up(4, 6, 3, 2, 1, 1, 2);
  up.build("up.", rng);
  CHECK(shape_str(up.weight.shape()) == "4x3x3x3");  // (in, out / groups, k, k)
  CHECK(shape_str(up(x).shape()) == "2x6x18x18");
  CHECK_THROWS_WITH(nn::Conv2d(6, 4, 3, 1, 0, 1, 4), Contains("in_channels must be divisible by groups"));
  CHECK_THROWS_WITH(nn::Conv2d(4, 6, 3, 1, 0, 1, 4), Contains("out_channels must be divisible by groups"));
  CHECK_THROWS_AS(nn::ConvTranspose2d(4, 6, 3, 1, 0, 0, 4), ValueError);
  // the functional form names the op and the caller's line
  Tensor w = param("w", {6, 3, 3, 3}, std::vector<float>(162, 0.1f));
  Tensor x6 = input("x6", {1, 6, 5, 5});
  CHECK_THROWS_WITH(conv2d(x6, w, Tensor(), {.groups = 4}), Contains("conv2d") && Contains("divisible by groups 4") &&
                                                               Contains("test_nn.cpp"));
  CHECK_THROWS_AS(conv2d(x6, w, Tensor(), {.groups = 3}), ShapeError);  // 6 channels, w expects 3 * 3 = 9
  // a torch state_dict's shapes: Conv2d(4, 8, 3, groups=4) holds weight (8, 1, 3, 3), bias (8)
  auto sd = dw.named_parameters();
  REQUIRE(sd.size() == 2);
  CHECK(sd[0].first == "dw.weight");
  CHECK(sd[1].first == "dw.bias");
}

TEST_CASE("nn: Upsample bilinear (upsample_bilinear2d) repr, output sizes, align_corners and errors as torch",
          "[nn][upsample_bilinear2d]") {
  CHECK(nn::Upsample(std::nullopt, std::array<double, 2>{1.5, 2.5}, "bilinear").describe() ==
        "Upsample(scale_factor=(1.5, 2.5), mode='bilinear')");
  CHECK(nn::Upsample(std::array<int64_t, 2>{5, 7}, std::nullopt, "bilinear", true).describe() ==
        "Upsample(size=(5, 7), mode='bilinear')");
  nn::Upsample up2(std::nullopt, std::array<double, 2>{1.5, 1.5}, "bilinear", true);
  nn::Upsample up2s(2, "bilinear", true);
  CHECK(up2s.describe() == "Upsample(scale_factor=2.0, mode='bilinear')");
  Tensor x = input("x", {1, 2, 3, 4});
  CHECK(shape_str(up2s(x).shape()) == "1x2x6x8");
  nn::Upsample frac(std::nullopt, std::array<double, 2>{1.5, 2.5}, "bilinear");
  CHECK(shape_str(frac(x).shape()) == "1x2x4x10");  // floor(3 * 1.5), floor(4 * 2.5)
  CHECK_THROWS_AS(nn::Upsample(2, "nearest", true), ValueError);
  CHECK_THROWS_AS(nn::Upsample(std::nullopt, std::nullopt, "bilinear"), ValueError);
  CHECK_THROWS_AS(nn::Upsample(std::array<int64_t, 2>{2, 2}, std::array<double, 2>{2, 2}, "bilinear"), ValueError);
  // align_corners=True on a 1x1x2x2 -> 3x3: the corners are the input's, the centre their mean (torch's values)
  Tensor s = input("s", {1, 1, 2, 2});
  Program p;
  p.add_output("y", up2(s));
  std::vector<float> sv = {1, 2, 3, 4};
  std::vector<float> y = make_cpu_backend()->compile(p)->run({{"s", &sv}})[0];
  CHECK(y == std::vector<float>{1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4});
  CHECK_THROWS_WITH(upsample_bilinear2d(x, {.size = {{0, 3}}}), Contains("upsample_bilinear2d") &&
                                                                   Contains("test_nn.cpp"));
}

TEST_CASE("nn: layer errors name the layer (a Sequential's index and repr), the op inside it and the caller's line, "
          "build twice is refused, a standalone layer builds with build(rng)", "[nn][errors][lstm][attention]") {
  nn::Rng rng(0);
  nn::Sequential seq;
  seq.add<nn::Linear>(16, 32).add<nn::ReLU>().add<nn::Linear>(32, 4);
  seq.build(rng);
  auto wrong_width = [&] { return seq(input("x", {3, 8})); };
  const std::string line = "test_nn.cpp:" + std::to_string(__LINE__ - 1);
  CHECK_THROWS_WITH(wrong_width(), Contains("0: Linear(16, 32): input last dimension must be 16") && Contains(line));
  nn::Sequential convs;
  convs.add<nn::Conv2d>(3, 8, 3).add<nn::Conv2d>(4, 8, 3);  // the second expects 4 channels, gets 8
  convs.build(rng);
  CHECK_THROWS_WITH(convs(input("img", {1, 3, 9, 9})), Contains("1: Conv2d(4, 8, kernel_size=(3, 3)") &&
                                                           Contains("conv2d") && Contains("test_nn.cpp:"));
  // a standalone layer: build(rng) is visible (using Module::build), forward_state names the layer and the line
  nn::LSTM lstm(4, 6, 2, true, true);
  lstm.build(rng);
  auto bad_h0 = [&] { return lstm.forward_state(input("seq", {2, 5, 4}), input("h0", {1, 2, 6})); };
  const std::string lstm_line = "test_nn.cpp:" + std::to_string(__LINE__ - 1);
  CHECK_THROWS_WITH(bad_h0(), Contains("LSTM(4, 6, num_layers=2, batch_first=True): h0 must be 2x2x6, got 1x2x6") &&
                                  Contains(lstm_line));
  nn::MultiheadAttention mha(8, 2);
  mha.build(rng);
  Tensor q = input("q", {2, 5, 8});
  auto bad_mask = [&] { return mha.attend(q, q, q, {.attn_mask = input("mask", {6, 5})}); };
  const std::string mha_line = "test_nn.cpp:" + std::to_string(__LINE__ - 1);
  CHECK_THROWS_WITH(bad_mask(), Contains("MultiheadAttention(embed_dim=8, num_heads=2") &&
                                    Contains("multi_head_attention: attn_mask") && Contains(mha_line));
  // build twice: new parameters that earlier graphs would not read
  CHECK_THROWS_WITH(seq.build(rng), Contains("Sequential: build() was already called (0 has its parameters)"));
  CHECK_THROWS_WITH(lstm.build(rng), Contains("LSTM: build() was already called"));
  struct Outer : nn::Module {
    nn::Sequential body;
    Outer() { register_module("body", body); }
    Tensor forward(const Tensor& x) override { return body(x); }
  } outer;
  outer.body.add<nn::Linear>(2, 2);
  outer.body.build(rng);  // a child built on its own, then its parent
  CHECK_THROWS_WITH(outer.build(rng), Contains("Module: build() was already called (body.0 has its parameters)"));
}

TEST_CASE("nn: a torch state_dict (LSTM, BatchNorm1d, Linear) saved by scripts/torch_state_dict.py loads with "
          "load_state_dict, outputs equal torch's, strict checks name the tensor", "[nn][torch][lstm][batch_norm]") {
  TempDir dir;
  const std::string script = fmt::format(R"PY(
import sys, json, torch
sys.path.insert(0, '{0}/scripts')
from torch_state_dict import save_state_dict
torch.manual_seed(0)
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(4, 6, 2, batch_first=True)
        self.norm = torch.nn.BatchNorm1d(6)
        self.head = torch.nn.Linear(6, 3)
    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(self.norm(y[:, -1]))
m = M()
m.norm.running_mean.uniform_(-1, 1); m.norm.running_var.uniform_(0.5, 2); m.norm.num_batches_tracked.fill_(7)
save_state_dict(m, '{1}/m.safetensors')
m.eval()
x = torch.linspace(-1, 1, 2 * 5 * 4).reshape(2, 5, 4)
print(json.dumps({{'y': m(x).detach().flatten().tolist(), 'x': x.flatten().tolist()}}))
)PY", sg::golden::source_dir(), dir.path.string());
  std::ofstream(dir.path / "make.py") << script;
  auto [rc, out] = run_command("/usr/bin/python3 " + (dir.path / "make.py").string());
  INFO(out);
  REQUIRE(rc == 0);
  const nlohmann::json ref = nlohmann::json::parse(out.substr(out.find('{')));
  struct M : nn::Module {
    nn::LSTM rnn{4, 6, 2, true, true};
    nn::BatchNorm1d norm{6};
    nn::Linear head{6, 3};
    M() { register_module("rnn", rnn), register_module("norm", norm), register_module("head", head); }
    Tensor forward(const Tensor& x) override {
      Tensor y = rnn(x);
      return head(norm(reshape(slice(y, 1, 4, 5), {y.dim(0), 6})));
    }
  } m;
  nn::Rng rng(1);
  m.build(rng);
  m.eval();
  auto backend = make_cpu_backend();
  Program p;
  p.add_output("y", m(input("x", {2, 5, 4})));
  auto exe = backend->compile(p);
  train::load_state_dict((dir.path / "m.safetensors").string(), m, *backend);
  std::vector<float> xs = ref.at("x").get<std::vector<float>>();
  const std::vector<float> y = exe->run({{"x", &xs}})[0];
  const auto want = ref.at("y").get<std::vector<double>>();
  REQUIRE(y.size() == want.size());
  for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == Approx(want[i]).margin(2e-6));
  // strict: a model with another hidden size names the first tensor that differs
  nn::LSTM other(4, 7, 2, true, true);
  other.build(rng);
  CHECK_THROWS_WITH(train::load_state_dict((dir.path / "m.safetensors").string(), other, *backend),
                    Contains("tensor 'weight_ih_l0' is missing"));
  struct Partial : nn::Module {
    nn::LSTM rnn{4, 6, 2, true, true};
    Partial() { register_module("rnn", rnn); }
    Tensor forward(const Tensor& x) override { return rnn(x); }
  } partial;
  partial.build(rng);
  CHECK_THROWS_WITH(train::load_state_dict((dir.path / "m.safetensors").string(), partial, *backend),
                    Contains("tensor 'norm.weight' is not a parameter or buffer of the model"));
  // a shadergrad checkpoint of another structure names the tensor that differs too
  train::save_checkpoint((dir.path / "ck.safetensors").string(), m, *backend, "m");
  CHECK_THROWS_WITH(train::load_checkpoint((dir.path / "ck.safetensors").string(), partial, *backend),
                    Contains("not a parameter or buffer") && Contains("a different model structure"));
}
