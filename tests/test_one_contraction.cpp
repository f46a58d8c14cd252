// One contraction per tiled kernel (codegen/src/schedule/multi_output.cpp, issue 37): on GPU compute limits a kernel
// the compute emitter tiles as a contraction takes no second reduction of comparable length into its store, where
// the tiled strategy would sum it one element per invocation in a serial loop (charlm's attention backward: dV =
// P^T dO with the softmax recomputed beside dQ = dS K, two 64-step contractions in one kernel, 0.065 ms on an H100).
// An attention backward of that shape, and charlm's train step (issue 37's bench: b=32, T=64, AdamW, clipping), are
// scheduled for GPU limits; their kernels are then run on lavapipe as emitted for those limits (each value in a
// buffer of its own, in launch order) and their outputs checked against the CPU backend.
#include <catch2/catch.hpp>

#include "test_util.h"
#include "vulkan_test_util.h"

#include <cmath>
#include <functional>
#include <map>

#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/datasets.h"
#include "sg/lm.h"
#include "sg/nn.h"
#include "sg/sg.h"
#include "sg/shader_compiler.h"
#include "sg/vulkan_device.h"

using namespace sg;

namespace {

/// The distinct top-level reductions of kernel k of 32 or more steps (their loops' extents multiplied).
size_t store_length_reductions(const Kernel& k) {
  std::vector<KExprPtr> found;
  std::function<void(const KExprPtr&)> walk = [&](const KExprPtr& e) {
    if (!e) return;
    if (e->op == KOp::Reduce) {
      int64_t steps = 1;
      for (int64_t x : e->extents) steps *= x;
      if (steps >= 32 && std::none_of(found.begin(), found.end(), [&](const KExprPtr& f) { return kequal(f, e); }))
        found.push_back(e);
      return;
    }
    walk(e->a), walk(e->b), walk(e->c);
  };
  for (const KExprPtr& e : k.exprs) walk(e);
  return found.size();
}

/// The most such reductions of one tiled-contraction kernel of `plan` as emitted for `limits`.
size_t most_in_tiled_kernel(const Plan& plan, const ComputeLimits& limits) {
  size_t most = 0;
  for (const Kernel& k : plan.kernels)
    if (emit_compute_kernel(plan, k, limits).strategy == "tiled-contraction")
      most = std::max(most, store_length_reductions(k));
  return most;
}

/// Scaled dot-product attention over [B, H, T, D] (causal when `causal`), the gradients of sum(o * dO) with respect to
/// q, k and v as the program's outputs.
Program attention_backward(int64_t B, int64_t H, int64_t T, int64_t D, bool causal) {
  Tensor q = input("q", {B, H, T, D}), k = input("k", {B, H, T, D}), v = input("v", {B, H, T, D});
  Tensor dout = input("dout", {B, H, T, D});
  Tensor s = matmul(q, transpose(k)) * (1.0 / std::sqrt(static_cast<double>(D)));
  if (causal) s = s + input("mask", {T, T});  // 0 on and below the diagonal, -1e9 above
  Tensor o = matmul(softmax(s, -1), v);
  std::vector<Tensor> g = grad(sum(o * dout), {q, k, v});
  Program p;
  p.add_output("dq", g[0]);
  p.add_output("dk", g[1]);
  p.add_output("dv", g[2]);
  return p;
}

/// GPU limits lavapipe can run: its own, as a GPU (no CPU tile sizes, no loop budget split), without subgroups.
ComputeLimits gpu_limits_of(const vk::Device& dev) {
  ComputeLimits l = dev.caps().limits;
  l.cpu_device = false;
  l.register_tiles = false;
  l.subgroup_arithmetic = false;
  l.subgroup_size = 0;
  return l;
}

/// Runs every kernel of `plan` (emitted for `limits`) on `dev` once, each value in a buffer of its own (a persistent
/// value's holding its initial data); returns the program outputs, then the persistent values' next values in the
/// order of plan.updates.
std::vector<std::vector<float>> run_plan(vk::Device& dev, const Plan& plan, const ComputeLimits& limits,
                                         const std::map<std::string, std::vector<float>>& feeds) {
  std::vector<vk::Buffer> buf;
  for (const Value& v : plan.values) {
    buf.push_back(dev.create_buffer(std::max<int64_t>(v.node->numel(), 1) * 4, v.name));
    if (v.kind == ValueKind::Input) {
      const std::vector<float>& x = feeds.at(v.node->name);
      REQUIRE(static_cast<int64_t>(x.size()) == v.node->numel());
      dev.upload(buf.back(), x.data(), v.node->numel() * 4);
    }
    if (v.kind == ValueKind::Persistent || v.kind == ValueKind::Constant) dev.upload(buf.back(), v.node->data->data(), v.node->numel() * 4);
  }
  std::vector<vk::Pipeline> pipes;
  int descriptors = 0;
  std::vector<ComputeKernel> cks;
  for (const Kernel& k : plan.kernels) {
    cks.push_back(emit_compute_kernel(plan, k, limits));
    const ComputeKernel& ck = cks.back();
    INFO(ck.source);
    const CompiledShader cs = compile_shader(k.name, ck.source, ShaderStage::Compute);
    pipes.push_back(dev.create_pipeline(cs.spirv, static_cast<int>(ck.bindings.size()),
                                        {static_cast<uint32_t>(ck.local_size[0]), static_cast<uint32_t>(ck.local_size[1]),
                                         static_cast<uint32_t>(ck.local_size[2])},
                                        k.name));
    descriptors += static_cast<int>(ck.bindings.size());
  }
  vk::DescriptorPool pool = dev.create_descriptor_pool(static_cast<int>(plan.kernels.size()), descriptors);
  vk::CommandBuffer cmd = dev.create_command_buffer();
  cmd.begin();
  for (size_t i = 0; i < cks.size(); ++i) {
    std::vector<const vk::Buffer*> bound;
    for (int v : cks[i].bindings) bound.push_back(&buf[static_cast<size_t>(v)]);
    const VkDescriptorSet set = dev.allocate_set(pool, pipes[i], bound);
    cmd.dispatch(pipes[i], set,
                 {static_cast<uint32_t>(cks[i].workgroups[0]), static_cast<uint32_t>(cks[i].workgroups[1]),
                  static_cast<uint32_t>(cks[i].workgroups[2])});
    cmd.barrier();
  }
  cmd.barrier_to_host();
  cmd.end();
  dev.submit_and_wait(cmd);
  std::vector<std::vector<float>> out;
  std::vector<int> ids = plan.output_values;
  for (auto [value, next] : plan.updates) ids.push_back(next);
  for (int v : ids) {
    out.emplace_back(static_cast<size_t>(plan.values[static_cast<size_t>(v)].node->numel()));
    dev.download(buf[static_cast<size_t>(v)], out.back().data(), static_cast<int64_t>(out.back().size()) * 4);
  }
  return out;
}

}  // namespace

TEST_CASE("schedule rule one-contraction: on GPU compute limits an attention backward's tiled kernels each sum one "
          "contraction (dV = P^T dO and dQ = dS K are two kernels), and the plan run on lavapipe equals the CPU backend",
          "[schedule][rule][vulkan][attention]") {
  const bool causal = GENERATE(false, true);
  INFO("causal " << causal);
  const int64_t B = 4, H = 4, T = 64, D = 16;  // outputs of 16384 elements: tiled, not the tree strategy's
  const Program p = attention_backward(B, H, T, D, causal);
  auto dev = vk::Device::create(sg::testing::vulkan_device_options());
  const ComputeLimits limits = gpu_limits_of(*dev);
  const ScheduleOptions so = compute_schedule_options(limits);
  const Plan plan = schedule(p, so);
  for (const Kernel& k : plan.kernels) UNSCOPED_INFO(k.name << ": " << k.outputs.size() << " outputs, "
                                                            << store_length_reductions(k) << " reductions");
  CHECK(most_in_tiled_kernel(plan, limits) == 1);
  // without the rule (as on targets that register-tile) a tiled kernel sums several:
  // the case the rule exists for
  ScheduleOptions off = so;
  off.one_contraction_per_tiled_kernel = false;
  const Plan fused = schedule(p, off);
  CHECK(most_in_tiled_kernel(fused, limits) >= 2);
  CHECK(plan.kernels.size() > fused.kernels.size());
  // the cpu plan keeps its kernels (register tiles: tuned separately, docs/perf-log/P37.md)
  ComputeLimits cpu = limits;
  cpu.cpu_device = cpu.register_tiles = true;
  CHECK(most_in_tiled_kernel(schedule(p, compute_schedule_options(cpu)), limits) >= 2);

  // values: the GPU plan's kernels on lavapipe against the CPU backend
  const int64_t n = B * H * T * D;
  std::map<std::string, std::vector<float>> feeds = {{"q", sg::testing::uniform(n, 1)},
                                                     {"k", sg::testing::uniform(n, 2)},
                                                     {"v", sg::testing::uniform(n, 3)},
                                                     {"dout", sg::testing::uniform(n, 4)}};
  if (causal) {
    std::vector<float> m(static_cast<size_t>(T * T));
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) m[static_cast<size_t>(i * T + j)] = j <= i ? 0.f : -1e9f;
    feeds["mask"] = m;
  }
  const std::vector<std::vector<float>> got = run_plan(*dev, plan, limits, feeds);
  auto cpu_be = make_cpu_backend();
  std::vector<Feed> fv;
  for (const auto& [name, x] : feeds) fv.push_back({name, &x});
  const std::vector<std::vector<float>> want = cpu_be->compile(p)->run(fv);
  REQUIRE(got.size() == 3);  // no updates
  REQUIRE(want.size() == 3);
  for (size_t o = 0; o < 3; ++o) {
    INFO("output " << o);
    REQUIRE(got[o].size() == want[o].size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < got[o].size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(got[o][i]) - want[o][i]));
      scale = std::max(scale, std::abs(static_cast<double>(want[o][i])));
    }
    INFO("max |got - want| " << worst << ", max |want| " << scale);
    CHECK(scale > 0.01);  // not all zeros
    CHECK(worst <= 1e-4 * (1 + scale));
  }
  sg::testing::expect_no_validation_messages(*dev);
}

TEST_CASE("one-contraction: charlm's train step scheduled for GPU limits, its attention backward in tiled kernels of "
          "one contraction each, run on lavapipe equals the CPU backend (loss, parameters after one AdamW step)",
          "[schedule][vulkan][charlm][attention]") {
  sg::lm::LmSpec spec;
  spec.model = "charlm";
  spec.context = 64;
  auto model = sg::lm::make_lm(spec);
  nn::Rng rng(0);
  model->build(rng);
  const int64_t b = 32;
  const double lr = 3e-3;
  sg::lm::LmLoss l = sg::lm::lm_loss(*model, spec, b);
  auto adamw = make_adamw({.lr = lr, .weight_decay = 0.01});
  const Program step = make_train_step(l.loss, model->parameters(), *adamw, TrainStepOptions{.clip_grad_norm = 1.0});
  std::vector<std::string> words = data::load_words().train;
  words.resize(static_cast<size_t>(b));
  data::WordRows rows = data::make_word_rows(words, spec.context);
  const std::map<std::string, std::vector<float>> feeds = {{"x", rows.x}, {"y", rows.y}, {"mask", rows.mask}};
  auto dev = vk::Device::create(sg::testing::vulkan_device_options());
  const ComputeLimits limits = gpu_limits_of(*dev);
  const ScheduleOptions so = compute_schedule_options(limits);
  const Plan plan = schedule(step, so);
  CHECK(most_in_tiled_kernel(plan, limits) == 1);
  ScheduleOptions off = so;  // without the rule: the two attention backward kernels of two contractions each
  off.one_contraction_per_tiled_kernel = false;
  const Plan fused = schedule(step, off);
  CHECK(most_in_tiled_kernel(fused, limits) == 2);
  CHECK(plan.kernels.size() == fused.kernels.size() + 2);

  const std::vector<std::vector<float>> got = run_plan(*dev, plan, limits, feeds);
  auto cpu_be = make_cpu_backend();
  std::vector<Feed> fv;
  for (const auto& [name, x] : feeds) fv.push_back({name, &x});
  const std::vector<std::vector<float>> want = cpu_be->compile(step)->run(fv);
  REQUIRE(got.size() == plan.output_values.size() + plan.updates.size());
  CHECK(std::abs(static_cast<double>(got[0][0]) - want[0][0]) <= 1e-4 * (1 + std::abs(want[0][0])));
  // AdamW moves a weight by about lr whatever its gradient's size, so where a gradient is rounding noise the two
  // summation orders move it differently: a tenth of lr (bench_ops' check_step)
  int64_t bad = 0;
  double worst = 0, moved = 0;
  size_t i = plan.output_values.size();
  for (auto [value, next] : plan.updates) {
    const NodePtr& leaf = plan.values[static_cast<size_t>(value)].node;
    const std::vector<float> w = cpu_be->read(Tensor(leaf));
    REQUIRE(got[i].size() == w.size());
    for (size_t j = 0; j < w.size(); ++j) {
      const double e = std::abs(static_cast<double>(got[i][j]) - w[j]);
      worst = std::max(worst, e);
      moved = std::max(moved, std::abs(static_cast<double>(got[i][j]) - (*leaf->data)[j]));
      if (!(e <= 1e-5 + 0.1 * lr + 1e-4 * std::abs(w[j]))) ++bad;
    }
    ++i;
  }
  INFO("worst parameter difference " << worst << ", largest step " << moved);
  CHECK(bad == 0);
  CHECK(moved > 0.5 * lr);  // the step changed the persistent values (a parameter by about lr, the step counter by 1)
  sg::testing::expect_no_validation_messages(*dev);
}
