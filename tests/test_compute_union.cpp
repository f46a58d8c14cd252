// Union-domain kernels on the compute targets (ScheduleOptions::union_invocation_blocks: small independent kernels,
// such as the Adam updates of biases and small layers with their gradients, as one dispatch whose workgroups are
// partitioned among the blocks): whole MLP and CNN Adam train steps on vulkan (lavapipe, validation layer on) and
// gles-compute (llvmpipe) over several steps equal the CPU reference backend with the rule on and off, with the
// kernel counts of both schedules asserted.
#include <catch2/catch.hpp>

#include "test_util.h"
#include "vulkan_test_util.h"

#include "sg/backend.h"
#include "sg/nn.h"
#include "sg/sg.h"
#include "sg/vulkan_device.h"

using namespace sg;
using sg::testing::expect_close;
using sg::testing::expect_no_validation_messages;
using sg::testing::randn;

namespace {

struct StepRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;
  int kernels = 0;
  int union_kernels = 0;
};

/// `steps` Adam train steps of the MLP (28x28) or seed 002's CNN (8x8) on one backend.
StepRun adam_steps(const std::string& model, int64_t batch, const BackendOptions& bo, int steps) {
  nn::Rng rng(5);
  const int64_t hw = model == "mlp" ? 28 : 8;
  auto net = nn::make_model(model, 1, hw, hw);
  net->build(rng);
  Tensor x = input("x", {batch, 1, hw, hw});
  Tensor y = input("labels", {batch}, DType::i32);
  // eps 1e-4: Adam's first steps move a weight by about lr whatever its gradient's size, so a gradient that cancels to
  // ~1e-8 (f32 here, f64 accumulation in the CPU reference) could flip its sign; with this eps such updates stay
  // proportional to the gradient and the comparison tests the kernels, not that cancellation
  auto opt = make_adam({.lr = 0.01, .eps = 1e-4});
  Program p = make_train_step(cross_entropy((*net)(x), y), net->parameters(), *opt);
  auto be = make_backend(bo).backend;
  REQUIRE(be->name() == bo.kind);
  auto exe = be->compile(p);
  StepRun r;
  r.kernels = exe->kernels_per_step();
  if (const auto* ck = exe->compute_kernels())
    for (const ComputeKernel& k : *ck) r.union_kernels += k.strategy == "union-blocks";
  for (int step = 0; step < steps; ++step) {
    std::vector<float> xs = randn(batch * hw * hw, static_cast<uint32_t>(21 + step)), ys(batch);
    for (int64_t i = 0; i < batch; ++i) ys[i] = static_cast<float>((i * 3 + step) % 10);
    r.losses.push_back(exe->run({{"x", &xs}, {"labels", &ys}})[0][0]);
  }
  for (auto& t : net->parameters()) r.params.push_back(be->read(t));
  if (be->name() == "vulkan") expect_no_validation_messages(vulkan_device(*be));
  return r;
}

BackendOptions options(const std::string& kind, bool unions) {
  BackendOptions bo = kind == "vulkan" ? sg::testing::vulkan_options() : BackendOptions{.kind = kind};
  bo.union_domains = unions;
  return bo;
}

}  // namespace

TEST_CASE("compute union-domain kernels: MLP and CNN Adam steps on vulkan and gles-compute equal the CPU backend, "
          "in fewer dispatches",
          "[vulkan][gles-compute][backend][union]") {
  const std::string kind = GENERATE(std::string("vulkan"), std::string("gles-compute"));
  struct Case {
    std::string model;
    int64_t batch;
    int fused, alone;  // kernels per step with the rule on / off
  };
  // the schedules of lavapipe (vulkan) and llvmpipe (gles-compute) differ by their limits (storage buffers)
  const bool vk = kind == "vulkan";
  for (const Case& c : {Case{"mlp", 32, vk ? 7 : 8, 10}, Case{"cnn", 64, vk ? 18 : 19, 22}}) {
    INFO(kind << " " << c.model << " batch " << c.batch);
    const StepRun cpu = adam_steps(c.model, c.batch, {.kind = "cpu"}, 3);
    const StepRun on = adam_steps(c.model, c.batch, options(kind, true), 3);
    const StepRun off = adam_steps(c.model, c.batch, options(kind, false), 3);
    for (const StepRun* r : {&on, &off}) {
      expect_close(r->losses, cpu.losses, 1e-4, 1e-6, "losses");
      REQUIRE(r->params.size() == cpu.params.size());
      for (size_t i = 0; i < cpu.params.size(); ++i) expect_close(r->params[i], cpu.params[i], 1e-4, 1e-5, "param");
    }
    CHECK(on.kernels == c.fused);
    CHECK(off.kernels == c.alone);
    CHECK(on.union_kernels >= 1);
    CHECK(off.union_kernels == 0);
  }
}
