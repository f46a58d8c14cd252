// GL object leak tests for the GLES backend: live texture / program / framebuffer counts (gles::Device's
// counters, read through sg::gles_live_objects) across many train steps and compile/run/destroy cycles.
//
// What the backend keeps by design (found by these tests, asserted below):
//  - each Param/State leaf owns two textures (front/back) in the *backend* from the first compile that reads it
//    until the backend is destroyed (they are shared by every executable), so they do not return to the
//    baseline when an executable is destroyed;
//  - linked programs are cached in the backend by their GLSL ES source and never evicted: compiling the same
//    Program again reuses them, a Program whose kernels have new sources adds programs;
//  - everything else an executable creates (pooled temporaries, input and constant textures, each with its
//    framebuffer) is released when the executable is destroyed.
// Observed on llvmpipe (Mesa 22.3): a new backend holds 0 objects; the Adam MLP step below holds 40 textures
// (26 = 2 x 13 persistent values, 14 executable-owned), 40 framebuffers and 26 programs, unchanged over 1000
// steps; destroying it leaves the 26 persistent textures and the 26 programs. 50 programs differing only in a
// constant leave 50 cached programs (one kernel each) and no textures.
#include <catch2/catch.hpp>

#include "test_models.h"
#include "test_util.h"

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/gles_device.h"
#include "sg/sg.h"

using namespace sg;

namespace {

using sg::testing::randn;

std::unique_ptr<Backend> gles_backend(int64_t max_texture_width = 0) {
  BackendOptions bo;
  bo.kind = "gles";
  if (max_texture_width > 0) bo.max_texture_width = max_texture_width;
  auto be = make_backend(bo).backend;  // BackendError fails the test: CI has Mesa llvmpipe
  REQUIRE(be->name() == "gles");
  return be;
}

std::string str(const gles::LiveObjects& l) {
  return "textures " + std::to_string(l.textures) + ", programs " + std::to_string(l.programs) +
         ", framebuffers " + std::to_string(l.framebuffers);
}

/// Textures an executable of `plan` needs besides the backend's persistent ones: pooled temps, inputs, consts.
int64_t executable_textures(const Plan& plan) {
  int64_t n = static_cast<int64_t>(plan.buffers.size());
  for (auto& v : plan.values)
    if (v.kind == ValueKind::Input || v.kind == ValueKind::Constant) ++n;
  return n;
}
int64_t persistent_values(const Plan& plan) {
  int64_t n = 0;
  for (auto& v : plan.values) n += v.kind == ValueKind::Persistent;
  return n;
}

using sg::testing::Mlp;

}  // namespace

TEST_CASE("gles_live_objects refuses a CPU backend", "[gles][leaks]") {
  auto cpu = make_cpu_backend();
  CHECK_THROWS_AS(gles_live_objects(*cpu), ValueError);
}

/// The framebuffers the device keeps for the plan's multiple-render-target draws after `steps` runs: one per
/// distinct set of textures such a kernel renders into (pooled buffers by id; a parameter's next value goes to
/// its back texture, which alternates with the front after every step, so runs 1 and 2 use different sets).
/// `persistent_only`: the sets made only of persistent textures, which outlive the executable (the others go
/// with their pooled textures).
int mrt_framebuffers(const Plan& plan, int steps, bool persistent_only = false) {
  std::set<std::vector<std::string>> sets;
  for (int s = 0; s < std::min(steps, 2); ++s)
    for (auto& k : plan.kernels) {
      if (k.exprs.size() < 2) continue;  // one render target: the texture's own framebuffer
      std::vector<std::string> key;
      bool all_persistent = true;
      for (int o : k.outputs) {
        const Value& v = plan.values[o];
        if (v.update_of >= 0) {
          key.push_back(fmt::format("param{} parity{}", v.update_of, s));
          continue;
        }
        all_persistent = false;
        if (v.planes > 1)
          for (int b : v.plane_buffers) key.push_back(fmt::format("buffer{}", b));
        else
          key.push_back(fmt::format("buffer{}", v.buffer));
      }
      if (!persistent_only || all_persistent) sets.insert(key);
    }
  return static_cast<int>(sets.size());
}

TEST_CASE("GL object counts stay constant over 1000 Adam train steps of a small MLP", "[gles][leaks]") {
  const int64_t B = 8, I = 19, H = 13, O = 5;
  Mlp m(B, I, H, O);
  auto opt = make_adam({.lr = 0.01});
  Program p = make_train_step(m.loss, m.params(), *opt);
  auto be = gles_backend(7);
  const gles::LiveObjects base = gles_live_objects(*be);
  INFO("after backend creation: " << str(base));
  CHECK(base.textures == base.framebuffers);

  auto exe = be->compile(p);
  const gles::LiveObjects compiled = gles_live_objects(*be);
  INFO("after compile: " << str(compiled));
  // every texture is accounted for by the plan: 2 per persistent value (params + Adam moments + step counter),
  // pooled temps, inputs, constants; each texture owns exactly one framebuffer; one program per distinct kernel
  const Plan& plan = *exe->plan();
  CHECK(persistent_values(plan) == 4 * 3 + 1);
  CHECK(compiled.textures - base.textures == 2 * persistent_values(plan) + executable_textures(plan));
  CHECK(compiled.framebuffers - base.framebuffers == compiled.textures - base.textures);
  CHECK(compiled.programs - base.programs >= 1);
  CHECK(compiled.programs - base.programs <= exe->kernels_per_step());

  std::vector<float> xs = randn(B * I, 10), ys(B);
  for (int64_t i = 0; i < B; ++i) ys[i] = static_cast<float>(i % O);
  float first_loss = exe->run({{"x", &xs}, {"labels", &ys}})[0][0];
  const gles::LiveObjects after_first = gles_live_objects(*be);
  INFO("after the first step: " << str(after_first));
  // Adam's m, v, p updates are one multi-output kernel per parameter (a set per step parity, see above)
  CHECK(mrt_framebuffers(plan, 1) >= 4);
  CHECK(after_first.textures == compiled.textures);
  CHECK(after_first.programs == compiled.programs);
  CHECK(after_first.framebuffers == compiled.framebuffers + mrt_framebuffers(plan, 1));
  float loss = exe->run({{"x", &xs}, {"labels", &ys}})[0][0];
  const gles::LiveObjects steady = gles_live_objects(*be);
  INFO("after the second step: " << str(steady));
  CHECK(steady.framebuffers == compiled.framebuffers + mrt_framebuffers(plan, 2));
  CHECK(mrt_framebuffers(plan, 2) > mrt_framebuffers(plan, 1));

  int mismatches = 0;
  for (int step = 2; step < 1000; ++step) {
    loss = exe->run({{"x", &xs}, {"labels", &ys}})[0][0];
    if (gles_live_objects(*be) != steady) ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(gles_live_objects(*be) == steady);
  // the steps really trained (one fixed batch: the loss must drop far below its start)
  INFO("loss " << first_loss << " -> " << loss);
  CHECK(std::isfinite(loss));
  CHECK(loss < 0.1f * first_loss);

  // counted before the executable (and the plan it owns) goes
  const int64_t persistent = persistent_values(plan);
  const int persistent_mrt = mrt_framebuffers(plan, 1000, true);
  exe.reset();
  const gles::LiveObjects destroyed = gles_live_objects(*be);
  INFO("after destroying the executable: " << str(destroyed));
  // the backend keeps the persistent front/back textures and the cached programs
  CHECK(destroyed.textures == base.textures + 2 * persistent);
  CHECK(destroyed.framebuffers == destroyed.textures + persistent_mrt);
  CHECK(destroyed.programs == compiled.programs);
}

TEST_CASE("textures and framebuffers return to the baseline after 50 compile/run/destroy cycles",
          "[gles][leaks]") {
  auto be = gles_backend(4);
  const gles::LiveObjects base = gles_live_objects(*be);
  INFO("after backend creation: " << str(base));

  SECTION("the same inputs-only program: nothing is left but its cached programs") {
    Tensor x = input("x", {5, 11});
    Tensor w = input("w", {11, 3});
    Tensor y = tanh(matmul(x, w)) * constant({3}, {0.5f, -1.f, 2.f});
    Tensor loss = sum(y * y);
    auto g = grad(loss, {x, w});
    Program p;
    p.add_output("y", y);
    p.add_output("dx", g[0]);
    p.add_output("dw", g[1]);
    std::vector<float> xs = randn(55, 20), ws = randn(33, 21);
    gles::LiveObjects first{};
    std::vector<float> first_dx;
    for (int cycle = 0; cycle < 50; ++cycle) {
      auto exe = be->compile(p);
      auto out = exe->run({{"x", &xs}, {"w", &ws}});
      const int scratch = mrt_framebuffers(*exe->plan(), 1, true);  // none: no persistent values
      if (cycle == 0) first_dx = out[1];
      CHECK(out[1] == first_dx);  // same program, same inputs: bit-identical results every cycle
      // a failing run (missing feed) must not leak either
      CHECK_THROWS_AS(exe->run({{"x", &xs}}), ValueError);
      exe.reset();
      gles::LiveObjects now = gles_live_objects(*be);
      INFO("cycle " << cycle << ": " << str(now));
      CHECK(now.textures == base.textures);
      CHECK(now.framebuffers == base.framebuffers + scratch);
      if (cycle == 0) {
        first = now;
        CHECK(now.programs > base.programs);
      }
      CHECK(now.programs == first.programs);  // recompiling reuses the cached programs
    }
  }

  SECTION("a train step: persistent textures stay allocated once, the rest returns") {
    Mlp m(4, 9, 7, 3);
    auto opt = make_sgd({.lr = 0.1, .momentum = 0.9});
    Program p = make_train_step(m.loss, m.params(), *opt);
    std::vector<float> xs = randn(36, 22), ys = {0, 1, 2, 1};
    gles::LiveObjects first{};
    int64_t persistent = 0;
    for (int cycle = 0; cycle < 50; ++cycle) {
      auto exe = be->compile(p);
      persistent = persistent_values(*exe->plan());
      // the parameters' textures persist across executables: after two cycles both parities have been drawn
      const int scratch = mrt_framebuffers(*exe->plan(), cycle + 1, true);
      exe->run({{"x", &xs}, {"labels", &ys}});
      exe.reset();
      gles::LiveObjects now = gles_live_objects(*be);
      INFO("cycle " << cycle << ": " << str(now));
      CHECK(now.textures == base.textures + 2 * persistent);
      CHECK(now.framebuffers == now.textures + scratch);
      if (cycle == 1) first = now;
      if (cycle >= 1) CHECK(now == first);
    }
    CHECK(persistent == 4 + 4);  // params and their momentum buffers
  }

  SECTION("50 different programs: textures return, programs are cached by source (never evicted)") {
    Tensor x = input("x", {3, 7});
    std::vector<float> xs = randn(21, 23);
    gles::LiveObjects prev = base;
    int64_t grown = 0, kernels = 0;
    for (int cycle = 0; cycle < 50; ++cycle) {
      // the constant is baked into the shader source: every cycle's kernels are new programs
      Tensor y = sum(exp(x * (0.01 * (cycle + 1))), {1});
      Program p;
      p.add_output("y", y);
      auto exe = be->compile(p);
      const int64_t k = exe->kernels_per_step();
      kernels += k;
      exe->run({{"x", &xs}});
      exe.reset();
      gles::LiveObjects now = gles_live_objects(*be);
      INFO("cycle " << cycle << ": " << str(now));
      CHECK(now.textures == base.textures);
      CHECK(now.framebuffers == base.framebuffers);
      CHECK(now.programs >= prev.programs);
      CHECK(now.programs - prev.programs <= k);  // at most one new program per kernel
      grown += now.programs - prev.programs;
      prev = now;
    }
    // programs are cached per distinct source: growth is bounded by the kernels compiled, and nothing else grows
    CHECK(grown <= kernels);
  }
}
