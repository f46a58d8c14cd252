// Vulkan tree reductions on lavapipe, with and without subgroup operations (GL_KHR_shader_subgroup_arithmetic;
// lavapipe reports ARITHMETIC for compute), against the CPU reference backend: sum, max, min and mean over odd
// extents (not multiples of the workgroup or subgroup size), over the last axis, a middle axis, the first axis and
// everything, with NaN, infinities and signed zeros in some rows (torch semantics: max/min propagate NaN, Inf - Inf
// is NaN). Also: which strategy each kernel took (the subgroup variant only when asked for and on the Vulkan target),
// and the device's report against vulkaninfo. Validation layer on, zero messages.
#include <catch2/catch.hpp>

#include "test_util.h"
#include "vulkan_test_util.h"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/sg.h"
#include "sg/vulkan_device.h"

using namespace sg;
using sg::testing::expect_no_validation_messages;
using sg::testing::vulkan_options;

namespace {

struct Case {
  std::string name;
  Shape shape;
  std::vector<int> axes;  // empty = all
};

/// Random values in [-2, 2); rows (along the last axis) 1, 2, 3 get NaN, +Inf and -Inf / both infinities, row 4
/// signed zeros only, where the shape has them (`specials`).
std::vector<float> values(const Shape& shape, uint32_t seed, bool specials) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(g);
  if (!specials) return v;
  const int64_t last = shape.back();
  auto row = [&](int64_t r) { return r * last < n ? &v[static_cast<size_t>(r * last)] : nullptr; };
  if (float* r = row(1)) r[last / 2] = NAN;
  if (float* r = row(2)) r[last - 1] = INFINITY;
  if (float* r = row(3)) r[0] = INFINITY, r[last - 1] = -INFINITY;
  if (float* r = row(4))
    for (int64_t i = 0; i < last; ++i) r[i] = i % 2 ? -0.f : 0.f;
  return v;
}

/// |got - want| <= 1e-5 + 1e-4 |want| (exact for max/min), NaN meets NaN, infinities match; "" or the first miss.
std::string mismatch(const std::vector<float>& got, const std::vector<float>& want, bool exact) {
  if (got.size() != want.size()) return fmt::format("size {} != {}", got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const float a = got[i], b = want[i];
    const bool ok = std::isnan(b) ? std::isnan(a)
                    : std::isinf(b) ? a == b
                    : exact ? a == b
                            : std::fabs(double{a} - b) <= 1e-5 + 1e-4 * std::fabs(double{b});
    if (!ok) return fmt::format("element {}: vulkan {} cpu {}", i, a, b);
  }
  return "";
}

Tensor reduce(const std::string& op, const Tensor& x, const std::vector<int>& axes_v) {
  const Axes axes(axes_v);
  return op == "sum" ? sum(x, axes) : op == "max" ? max(x, axes) : op == "min" ? min(x, axes) : mean(x, axes);
}

/// Each case with each of sum, max, min and mean on `be` and on the CPU reference, fed values(shape, seed++,
/// specials) (which `edit` may change): CHECKs that they agree (max/min exactly), then calls inspect(case, op, exe).
template <class Edit, class Inspect>
void each_reduction(Backend& be, const std::vector<Case>& cases, uint32_t seed, bool specials, Edit edit,
                    Inspect inspect) {
  auto cpu = make_cpu_backend();
  for (const Case& c : cases)
    for (const std::string op : {"sum", "max", "min", "mean"}) {
      INFO(op << " over " << c.name);
      Tensor x = input("x", c.shape);
      Program p;
      p.add_output("y", reduce(op, x, c.axes));
      std::vector<float> xs = values(c.shape, seed++, specials);
      edit(c, xs);
      auto exe = be.compile(p);
      const std::vector<float> got = exe->run({{"x", &xs}})[0];
      const std::vector<float> want = cpu->compile(p)->run({{"x", &xs}})[0];
      CHECK(mismatch(got, want, op == "max" || op == "min") == "");
      inspect(c, op, *exe);
    }
}

}  // namespace

TEST_CASE("vulkan reductions: sum, max, min and mean on odd sizes equal the CPU reference with and without subgroups",
          "[vulkan][ops][subgroups]") {
  const bool subgroups = GENERATE(true, false);
  const bool specials = GENERATE(false, true);
  INFO("subgroups " << subgroups << ", NaN/Inf rows " << specials);
  BackendOptions bo = vulkan_options();
  bo.vulkan.subgroups = subgroups;
  auto be = make_backend(bo).backend;
  REQUIRE(vulkan_device(*be).caps().limits.subgroup_arithmetic);  // lavapipe has them (see the probe case below)
  const std::vector<Case> cases = {
      {"1x1001 last axis", {1, 1001}, {1}},        {"37x513 last axis", {37, 513}, {1}},
      {"6x131x3 middle axis", {6, 131, 3}, {1}},  {"515x7 first axis", {515, 7}, {0}},
      {"129x77 all", {129, 77}, {}},               {"5x4099 last axis", {5, 4099}, {1}},
  };
  int tree_kernels = 0, subgroup_kernels = 0;
  each_reduction(*be, cases, 1, specials, [](const Case&, std::vector<float>&) {},
                 [&](const Case&, const std::string& op, const Executable& exe) {
                   for (const ComputeKernel& k : *exe.compute_kernels()) {
                     if (k.strategy.rfind("tree-reduction", 0) != 0) continue;
                     ++tree_kernels;
                     const bool sub = k.strategy == "tree-reduction+subgroups";
                     subgroup_kernels += sub;
                     CHECK(sub == subgroups);
                     CHECK(sub == (k.source.find("#extension GL_KHR_shader_subgroup_arithmetic") != std::string::npos));
                     if (sub && op != "sum" && op != "mean")
                       CHECK(k.source.find("subgroupAny(sg_isnan(") != std::string::npos);  // NaN apart from subgroupMax
                   }
                 });
  CHECK(tree_kernels >= 16);  // most cases are long reductions of few outputs
  CHECK(subgroup_kernels == (subgroups ? tree_kernels : 0));
  expect_no_validation_messages(vulkan_device(*be));
}

TEST_CASE("vulkan reductions: the two-stage tree (many partial workgroups of contiguous chunks, then one) equals the "
          "CPU reference on odd sizes with NaN rows, with and without subgroups",
          "[vulkan][ops][subgroups][tree]") {
  const bool subgroups = GENERATE(true, false);
  const bool specials = GENERATE(false, true);
  INFO("subgroups " << subgroups << ", NaN/Inf/signed-zero rows " << specials);
  BackendOptions bo = vulkan_options();
  bo.vulkan.subgroups = subgroups;
  bo.reduce_tree = true;  // off by default on lavapipe, whose loop budget splits these loops another way
  auto be = make_backend(bo).backend;
  // each reduction has >= 16384 iterations per output and few outputs: stage 1 cuts its outermost long-enough loop
  const std::vector<Case> cases = {
      {"129x257 all", {129, 257}, {}},          // 15 chunks of 9 rows (the last one short: padded with the identity)
      {"3x20001 last axis", {3, 20001}, {1}},   // 9 chunks of 2224 per output
      {"2x17001x3 middle axis", {2, 17001, 3}, {1}},
      {"16411 all", {16411}, {}},
  };
  each_reduction(
      *be, cases, 300, specials,
      [&](const Case& c, std::vector<float>& xs) {
        if (specials && c.shape.size() == 1) xs[777] = NAN, xs[9000] = -0.f;  // a 1-D input has no rows
      },
      [](const Case& c, const std::string&, const Executable& exe) {
        const Plan& plan = *exe.plan();
        REQUIRE(plan.kernels.size() == 2);  // stage 1 (partials), stage 2 (the outputs)
        CHECK(plan.kernels[0].name.find("_partial") != std::string::npos);
        CHECK(plan.kernels[0].notes.find(" chunks of ") != std::string::npos);
        if (c.axes.empty() && c.shape.size() == 2) CHECK(plan.kernels[0].notes.find("of loop r0 (of 129)") != std::string::npos);
      });
  expect_no_validation_messages(vulkan_device(*be));
}

TEST_CASE("vulkan reductions: the subgroup kernels also run on the staging path, in a train step", "[vulkan][subgroups]") {
  // d/dw of mean((x w)^2) sums over the batch (a tree reduction of 300 rows per weight) ; 3 SGD steps vs the CPU
  BackendOptions bo = vulkan_options(0);
  bo.vulkan.subgroups = true;
  auto be = make_backend(bo).backend;
  auto cpu = make_cpu_backend();
  Tensor x = input("x", {300, 5});
  std::vector<float> w0 = {0.5f, -1.f, 2.f, 0.25f, -0.75f};
  Tensor w = param("w", {1, 5}, w0);
  Tensor xw = x * w;
  Program p = make_train_step(mean(xw * xw), {w}, *make_sgd({.lr = 0.01}));
  std::vector<float> xs = values({300, 5}, 99, false);
  auto ev = be->compile(p), ec = cpu->compile(p);
  for (int s = 0; s < 3; ++s) {
    const float lv = ev->run({{"x", &xs}})[0][0], lc = ec->run({{"x", &xs}})[0][0];
    CHECK(lv == Approx(lc).epsilon(1e-4));
  }
  CHECK(mismatch(be->read(w), cpu->read(w), false) == "");
  expect_no_validation_messages(vulkan_device(*be));
}

TEST_CASE("vulkan probe: subgroup arithmetic as vulkaninfo reports it, and SG_VULKAN_SUBGROUPS=0 turns it off",
          "[vulkan][device][subgroups]") {
  sg::testing::pin_lavapipe();
  const std::string report = sg::testing::run_command(std::string("VK_DRIVER_FILES=") + sg::testing::kLavapipeIcd +
                                                      " vulkaninfo 2>/dev/null");
  const auto sub = report.find("VkPhysicalDeviceSubgroupProperties");
  REQUIRE(sub != std::string::npos);
  const std::string section = report.substr(sub, 600);
  const bool want = section.find("SUBGROUP_FEATURE_ARITHMETIC_BIT") != std::string::npos &&
                    section.find("SUBGROUP_FEATURE_VOTE_BIT") != std::string::npos &&
                    section.find("SHADER_STAGE_COMPUTE_BIT") != std::string::npos;
  auto dev = vk::Device::create(sg::testing::vulkan_device_options());
  CHECK(dev->caps().limits.subgroup_arithmetic == want);
  // the env switch reaches the kernels: a long sum is emitted without subgroups
  setenv("SG_VULKAN_SUBGROUPS", "0", 1);
  auto be = make_backend(vulkan_options()).backend;
  unsetenv("SG_VULKAN_SUBGROUPS");
  Tensor x = input("x", {2, 999});
  Program p;
  p.add_output("y", sum(x, {1}));
  auto exe = be->compile(p);
  REQUIRE(!exe->compute_kernels()->empty());
  for (auto& k : *exe->compute_kernels()) CHECK(k.strategy.find("subgroups") == std::string::npos);
  auto be2 = make_backend(vulkan_options()).backend;  // default: on where the device has them
  auto exe2 = be2->compile(p);
  CHECK(exe2->compute_kernels()->front().strategy == (want ? "tree-reduction+subgroups" : "tree-reduction"));
  expect_no_validation_messages(*dev);
}
