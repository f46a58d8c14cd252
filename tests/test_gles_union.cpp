// Union-domain kernels on GLES (llvmpipe): one draw renders independent values of different shapes, each output
// texture allocated at the draw's extent while keeping its own layout. Checked against the CPU reference backend
// (f64 accumulation) over several steps, so parameter updates written by union draws ping-pong between front and
// back textures allocated larger than their layouts.
#include <optional>

#include <catch2/catch.hpp>

#include "test_models.h"
#include "test_util.h"

#include <cmath>
#include <string>
#include <vector>

#include "sg/backend.h"
#include "sg/gles_device.h"
#include "sg/sg.h"

using namespace sg;
using sg::testing::Mlp;
using sg::testing::expect_close;
using sg::testing::randn;

namespace {


std::unique_ptr<Backend> make(const std::string& kind, int64_t max_width = 0, bool union_domains = true) {
  BackendOptions bo;
  bo.kind = kind;
  if (max_width > 0) bo.max_texture_width = max_width;
  bo.union_domains = union_domains;
  auto be = make_backend(bo).backend;
  REQUIRE(be->name() == kind);
  return be;
}

}  // namespace

TEST_CASE("GLES union-domain kernel: a [3] sum and a [5,8] map with their parameter updates in one draw",
          "[gles][union]") {
  // s = sum(a, 1) [3] and m = exp(b / 4) * q [5,8] are independent; p <- p + s/2 and q <- 0.9 q + 0.1 m are read
  // at their own elements, so {s, p'} and {m, q'} are two multi-output groups of different domains: one draw.
  struct Graph {
    Tensor a = input("a", {3, 7}), b = input("b", {5, 8});
    Tensor p = param("p", {3}, {0.5f, -1.f, 2.f});
    Tensor q = param("q", {5, 8}, randn(40, 11));
    Tensor s, m;
    Program step, eval;
    Graph() {
      s = sum(a, {1});
      m = exp(b * 0.25) * q;
      step.add_output("s", s);
      step.add_output("m", m);
      Tensor p_next = p + s * 0.5, q_next = q * 0.9 + m * 0.1;
      step.updates.push_back({p.node(), p_next.node()});
      step.updates.push_back({q.node(), q_next.node()});
      eval.add_output("p2", p * 2.0);  // reads the parameters only
      eval.add_output("q2", q * 2.0);
    }
  };
  for (int64_t width : {0, 4}) {  // width 4: q's 10 texels wrap into a 4x3 layout, p stays 1x1
    INFO("max texture width " << width);
    Graph g;
    auto gles = make("gles", width);
    auto cpu = make("cpu");
    // The eval program is compiled first: it creates p's and q's textures at their layouts' size; the step's
    // plan then needs them as large as its draw, so the backend re-allocates them keeping their values.
    auto eval_gles = gles->compile(g.eval), eval_cpu = cpu->compile(g.eval);
    auto step_gles = gles->compile(g.step), step_cpu = cpu->compile(g.step);
    const Plan* plan = step_gles->plan();
    REQUIRE(plan != nullptr);
    REQUIRE(plan->kernels.size() == 1);
    const Kernel& k = plan->kernels[0];
    CHECK(k.blocks() == 2);
    CHECK(k.outputs.size() == 4);
    const Value& pv = plan->value_of(g.p.node().get());
    const Value& qv = plan->value_of(g.q.node().get());
    CHECK(k.extent == Extent{qv.layout.width, qv.layout.height});
    CHECK(pv.layout.width * pv.layout.height == 1);
    CHECK(pv.extent == k.extent);  // front and back allocated for the draw
    CHECK(schedule(g.step, {{.union_domains = false}}).kernels.size() == 2);

    for (int stepi = 0; stepi < 3; ++stepi) {
      INFO("step " << stepi);
      std::vector<float> a = randn(21, 100 + stepi), b = randn(40, 200 + stepi);
      auto got = step_gles->run({{"a", &a}, {"b", &b}});
      auto want = step_cpu->run({{"a", &a}, {"b", &b}});
      REQUIRE(got.size() == 2);
      expect_close(got[0], want[0], 1e-5, 1e-6, "s");
      expect_close(got[1], want[1], 1e-5, 1e-6, "m");
      expect_close(gles->read(g.p), cpu->read(g.p), 1e-5, 1e-6, "p");
      expect_close(gles->read(g.q), cpu->read(g.q), 1e-5, 1e-6, "q");
      auto e_got = eval_gles->run({}), e_want = eval_cpu->run({});
      expect_close(e_got[0], e_want[0], 1e-5, 1e-6, "eval p2");
      expect_close(e_got[1], e_want[1], 1e-5, 1e-6, "eval q2");
    }
    // the parameters changed (the comparison above is not between initial values)
    CHECK(cpu->read(g.p) != std::vector<float>({0.5f, -1.f, 2.f}));
  }
}

TEST_CASE("GLES MLP Adam steps with union-domain kernels equal the CPU backend", "[gles][union]") {
  const int64_t B = 24, I = 300, H = 36, O = 10;  // x.W1 loops over 300: split-K in the GPU schedule
  struct Variant {
    const char* label;
    int64_t width;
    std::optional<bool> row_layout;       // empty: auto
    std::optional<int64_t> min_parallel;  // empty: auto
  };
  for (Variant v : {Variant{"llvmpipe schedule", 0, {}, {}}, Variant{"rows wrap at 8 texels", 8, {}, {}},
                    Variant{"GPU schedule (row layouts, split-K)", 0, true, 16384}}) {
    INFO(v.label);
    auto run = [&](const std::string& kind, bool union_domains, int* kernels, int* union_kernels) {
      Mlp m(B, I, H, O);
      auto adam = make_adam({.lr = 0.01});
      Program p = make_train_step(m.loss, m.params(), *adam);
      BackendOptions bo;
      bo.kind = kind;
      if (v.width > 0) bo.max_texture_width = v.width;
      bo.row_layout = v.row_layout;
      bo.min_parallel_texels = v.min_parallel;
      bo.union_domains = union_domains;
      auto be = make_backend(bo).backend;
      REQUIRE(be->name() == kind);
      auto exe = be->compile(p);
      if (kernels) *kernels = exe->kernels_per_step();
      if (union_kernels) {
        *union_kernels = 0;
        for (auto& k : exe->plan()->kernels) *union_kernels += k.blocks() > 1;
      }
      std::vector<float> losses;
      for (int step = 0; step < 4; ++step) {
        std::vector<float> xs = randn(B * I, 300 + step), ys(B);
        for (int64_t i = 0; i < B; ++i) ys[i] = static_cast<float>((i * 7 + step) % O);
        losses.push_back(exe->run({{"x", &xs}, {"labels", &ys}})[0][0]);
      }
      std::vector<std::vector<float>> params;
      for (auto& t : m.params()) params.push_back(be->read(t));
      return std::make_pair(losses, params);
    };
    int with = 0, without = 0, unions = 0;
    auto cpu = run("cpu", true, nullptr, nullptr);
    auto gl = run("gles", true, &with, &unions);
    (void)run("gles", false, &without, nullptr);
    CHECK(unions >= 2);
    CHECK(with < without);
    CHECK(with <= 8);
    expect_close(gl.first, cpu.first, 1e-4, 1e-6, "losses");
    const char* names[] = {"w1", "b1", "w2", "b2"};
    for (size_t i = 0; i < cpu.second.size(); ++i) expect_close(gl.second[i], cpu.second[i], 1e-4, 1e-5, names[i]);
  }
}

TEST_CASE("GLES textures allocated larger than their layout: transfers follow the layout, draws the viewport",
          "[gles][union]") {
  auto dev = gles::Device::create({});
  const TextureLayout small = TextureLayout::for_numel(22, 3);  // 6 texels in 3x2
  REQUIRE(small.width == 3);
  REQUIRE(small.height == 2);
  const TextureLayout big = TextureLayout::for_numel(4 * 8 * 4, 8);  // 8x4
  // an allocation must cover the layout
  CHECK_THROWS_AS(dev->create_texture(small, "too small", 2, 2), ValueError);
  gles::Texture a = dev->create_texture(small, "a", 8, 4), b = dev->create_texture(big, "b");
  CHECK(a.alloc_width() == 8);
  CHECK(a.alloc_height() == 4);
  CHECK(a.width() == 3);
  CHECK(b.alloc_width() == 8);
  std::vector<float> host(22);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 1.5f - 3.f;
  dev->upload(a, host.data(), 22);
  std::vector<float> back(22);
  dev->download(a, back.data(), 22);
  CHECK(back == host);
  // one draw over 8x4 into both: each fragment writes (x, y, 0, 1) to both outputs
  const char* shader = R"(#version 300 es
precision highp float;
layout(location = 0) out vec4 o0;
layout(location = 1) out vec4 o1;
void main() {
  vec4 v = vec4(floor(gl_FragCoord.xy), 0.0, 1.0);
  o0 = v;
  o1 = v;
}
)";
  gles::Program prog = dev->create_program(shader, "xy");
  // the multiple-render-target draw without a viewport needs equal layouts
  CHECK_THROWS_AS(dev->draw(prog, {}, {&a, &b}, "xy"), ValueError);
  gles::Texture c = dev->create_texture(small, "c");  // allocated at its layout: smaller than the viewport
  CHECK_THROWS_WITH(dev->draw(prog, {}, {&c, &b}, "xy", 8, 4), Catch::Contains("smaller than the 8x4 viewport"));
  dev->draw(prog, {}, {&a, &b}, "xy", 8, 4);
  // a's elements follow its own 3-wide layout: texel t at (t % 3, t / 3)
  std::vector<float> got(22);
  dev->download(a, got.data(), 22);
  for (int64_t e = 0; e < 22; ++e) {
    const int64_t t = e / 4;
    const float want[4] = {static_cast<float>(t % 3), static_cast<float>(t / 3), 0.f, 1.f};
    INFO("element " << e);
    CHECK(got[static_cast<size_t>(e)] == want[e % 4]);
  }
  std::vector<float> gb(128);
  dev->download(b, gb.data(), 128);
  CHECK(gb[4 * 31] == 7.f);  // texel 31 at (7, 3)
  CHECK(gb[4 * 31 + 1] == 3.f);
}
