// Tests for sg/nn.h: parameter counts, state_dict names/shapes and forward values against PyTorch's
// nn.Sequential (Debian's python3-torch, run through popen), PyTorch's default init bound, structure hashes.
#include <catch2/catch.hpp>

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
