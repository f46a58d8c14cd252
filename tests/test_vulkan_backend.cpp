// The Vulkan backend on lavapipe (validation layer on, zero messages asserted) against the CPU reference backend:
// a representative dozen ops forward and backward on odd shapes (the full op list runs through the shared
// per-backend harness), whole MLP and CNN train steps, recorded vs unrecorded steps, the staging path, kernel
// hooks and profiling, persistent values shared by executables, limits that a device lacks, and leaks over 1000
// steps. Tolerances: |vulkan - cpu| <= atol + rtol |cpu|, rtol 1e-5 elementwise, 1e-4 reductions/matmul/conv.
#include <catch2/catch.hpp>

#include "test_models.h"
#include "test_util.h"
#include "vulkan_test_util.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/nn.h"
#include "sg/sg.h"
#include "sg/train.h"
#include "sg/vulkan_device.h"

using namespace sg;
using sg::testing::expect_close;
using sg::testing::expect_no_validation_messages;
using sg::testing::randn;
using sg::testing::vulkan_options;

namespace {

struct Tol {
  double rtol, atol;
};
constexpr Tol kElem{1e-5, 1e-6};
constexpr Tol kReduce{1e-4, 1e-5};

using sg::testing::uniform;

/// NaN meets NaN and infinities match exactly; elsewhere |a - b| <= atol + rtol |b|. Returns "" or the worst element.
std::string mismatch(const std::vector<float>& got, const std::vector<float>& want, Tol tol) {
  if (got.size() != want.size()) return fmt::format("size {} != {}", got.size(), want.size());
  double worst = 0;
  size_t wi = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], b = want[i];
    double r = std::isnan(a) || std::isnan(b) ? (std::isnan(a) && std::isnan(b) ? 0 : INFINITY)
               : std::isinf(a) || std::isinf(b) ? (a == b ? 0 : INFINITY)
                                                : std::fabs(a - b) / (tol.atol + tol.rtol * std::fabs(b));
    if (r > worst) worst = r, wi = i;
  }
  if (worst <= 1) return "";
  return fmt::format("worst element {}: vulkan {} cpu {} (error/tolerance {})", wi, got[wi], want[wi], worst);
}

/// Op outputs and the gradients of sum(out * R) (R fixed, random) in one Program, run on CPU and on Vulkan.
class Suite {
 public:
  Tensor in(const std::string& name, ShapeRef shape, std::vector<float> data) {
    Tensor t = input(name, shape);
    data_.push_back(std::move(data));
    names_.push_back(name);
    return t;
  }
  void add(const std::string& name, const Tensor& out, const std::vector<Tensor>& wrt, Tol tol) {
    prog_.add_output(name, out);
    tols_.push_back(tol);
    if (wrt.empty()) return;
    Tensor r = constant(out.shape(), uniform(out.numel(), seed_++, -1.0, 1.0));
    std::vector<Tensor> gs = grad(sum(out * r), wrt);
    for (size_t i = 0; i < wrt.size(); ++i) {
      prog_.add_output(name + " d/d" + wrt[i].name(), gs[i]);
      tols_.push_back(tol);
    }
  }
  std::vector<Feed> feeds() const {
    std::vector<Feed> f;
    for (size_t i = 0; i < names_.size(); ++i) f.push_back({names_[i], &data_[i]});
    return f;
  }
  void check(int direct_map) const {
    auto want = make_cpu_backend()->compile(prog_)->run(feeds());
    auto be = make_backend(vulkan_options(direct_map)).backend;
    auto got = be->compile(prog_)->run(feeds());
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      std::string why = mismatch(got[i], want[i], tols_[i]);
      INFO("output '" << prog_.output_names[i] << "' " << shape_str(prog_.outputs[i]->shape) << ": " << why);
      CHECK(why.empty());
    }
    expect_no_validation_messages(vulkan_device(*be));
  }

 private:
  Program prog_;
  std::vector<Tol> tols_;
  std::vector<std::string> names_;
  std::vector<std::vector<float>> data_;
  uint32_t seed_ = 500;
};

/// SGD-with-momentum train steps of the MLP (28x28) or seed 002's CNN (8x8): the losses and every parameter after.
struct StepRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;
};
StepRun train_steps(const std::string& model, int64_t batch, const BackendOptions& bo, int steps) {
  nn::Rng rng(3);
  const int64_t hw = model == "mlp" ? 28 : 8;
  auto net = nn::make_model(model, 1, hw, hw);
  net->build(rng);
  Tensor x = input("x", {batch, 1, hw, hw});
  Tensor y = input("labels", {batch}, DType::i32);
  auto opt = make_sgd({.lr = 0.05, .momentum = 0.9});
  Program p = make_train_step(cross_entropy((*net)(x), y), net->parameters(), *opt);
  auto be = make_backend(bo).backend;
  auto exe = be->compile(p);
  StepRun r;
  for (int step = 0; step < steps; ++step) {
    std::vector<float> xs = randn(batch * hw * hw, static_cast<uint32_t>(11 + step)), ys(batch);
    for (int64_t i = 0; i < batch; ++i) ys[i] = static_cast<float>((i * 7 + step) % 10);
    r.losses.push_back(exe->run({{"x", &xs}, {"labels", &ys}})[0][0]);
  }
  for (auto& t : net->parameters()) r.params.push_back(be->read(t));
  if (be->name() == "vulkan") expect_no_validation_messages(vulkan_device(*be));
  return r;
}

void expect_same_steps(const StepRun& got, const StepRun& want) {
  expect_close(got.losses, want.losses, 1e-4, 1e-6, "losses");
  REQUIRE(got.params.size() == want.params.size());
  for (size_t i = 0; i < want.params.size(); ++i) expect_close(got.params[i], want.params[i], 1e-4, 1e-5, "param");
}

}  // namespace

TEST_CASE("vulkan: a dozen ops forward and backward on odd shapes equal the CPU backend", "[vulkan][ops]") {
  const int direct = GENERATE(-1, 0);  // auto (direct map on lavapipe) and the staging path of discrete GPUs
  INFO("direct_map " << direct);
  Suite s;
  const Shape sh = {3, 7, 13};
  Tensor a = s.in("a", sh, uniform(273, 1, -3, 3));
  Tensor pos = s.in("pos", sh, uniform(273, 2, 0.1, 4));
  Tensor col = s.in("col", {7, 1}, uniform(7, 3, -2, 2));
  Tensor row = s.in("row", {13}, uniform(13, 4, 0.5, 2));
  Tensor m = s.in("m", {7, 13}, uniform(91, 5, -1, 1));
  Tensor w = s.in("w", {13, 5}, uniform(65, 6, -1, 1));
  Tensor bias = s.in("bias", {5}, uniform(5, 7, -1, 1));
  Tensor ba = s.in("ba", {2, 1, 7, 13}, uniform(182, 8, -1, 1));
  Tensor bb = s.in("bb", {3, 13, 5}, uniform(195, 9, -1, 1));
  Tensor x = s.in("x", {2, 3, 9, 11}, uniform(594, 10, -1, 1));
  Tensor cw = s.in("cw", {5, 3, 3, 3}, uniform(135, 11, -0.5, 0.5));
  Tensor cb = s.in("cb", {5}, uniform(5, 12, -0.5, 0.5));
  Tensor logits = s.in("logits", {5, 7}, uniform(35, 13, -3, 3));
  s.add("exp tanh sigmoid", exp(a * 0.5) * tanh(a) + sigmoid(a * 2.0), {a}, kElem);
  s.add("log sqrt", log(pos) + sqrt(pos), {pos}, kElem);
  s.add("relu, div and broadcasts (7,1) and (13)", relu(a) / row + a * col, {a, col, row}, kElem);
  s.add("log of negative values is NaN, exp overflows to Inf", log(a) + exp(a * 40.0), {}, kElem);
  s.add("sum over axis 1", sum(a, {1}), {a}, kReduce);
  s.add("max over axis 2 and mean", max(a, {2}) + mean(a), {a}, kReduce);
  s.add("matmul 7x13 @ 13x5 + bias + relu", relu(matmul(m, w) + bias), {m, w, bias}, kReduce);
  s.add("matmul batched broadcast 2x1x7x13 @ 3x13x5", matmul(ba, bb), {ba, bb}, kReduce);
  s.add("conv2d stride 2 padding 1 + bias", conv2d(x, cw, cb, {.stride = {2, 2}, .padding = {1, 1}}), {x, cw, cb}, kReduce);
  s.add("max_pool2d k3 s2 p1", max_pool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}), {x}, kReduce);
  s.add("avg_pool2d default", avg_pool2d(x), {x}, kReduce);
  s.add("log_softmax", log_softmax(logits), {logits}, kReduce);
  s.add("permute, slice and pad", pad(slice(permute(a, {2, 0, 1}), 0, 2, 11), {1, 0, 2}, {0, 1, 1}), {a}, kElem);
  s.add("concat of a transpose", concat({transpose(m), w}, 1), {m, w}, kElem);
  s.check(direct);
}

TEST_CASE("vulkan: MLP and CNN train steps over several steps equal the CPU backend", "[vulkan][backend]") {
  for (std::string model : {"mlp", "cnn"}) {
    INFO(model);
    const int64_t batch = model == "mlp" ? 5 : 3;
    StepRun cpu = train_steps(model, batch, {.kind = "cpu"}, 3);
    StepRun vk = train_steps(model, batch, vulkan_options(), 3);
    expect_same_steps(vk, cpu);
  }
}

TEST_CASE("vulkan: recorded steps replayed, steps recorded afresh and the staging path give identical results",
          "[vulkan][backend]") {
  // the same kernels in the same order: bit-identical losses and parameters whatever the command-buffer policy
  BackendOptions rec = vulkan_options();
  BackendOptions fresh = rec;
  fresh.vulkan.record_steps = false;
  BackendOptions staged = vulkan_options(0);
  StepRun a = train_steps("mlp", 4, rec, 4), b = train_steps("mlp", 4, fresh, 4), c = train_steps("mlp", 4, staged, 4);
  CHECK(a.losses == b.losses);
  CHECK(a.params == b.params);
  CHECK(a.losses == c.losses);
  CHECK(a.params == c.params);
  expect_same_steps(a, train_steps("mlp", 4, {.kind = "cpu"}, 4));
}

TEST_CASE("vulkan: kernel hooks see every kernel's values and profiling times every kernel", "[vulkan][backend]") {
  const int direct = GENERATE(-1, 0);
  INFO("direct_map " << direct);
  sg::testing::Mlp m(5, 11, 6, 3);
  Program p = make_train_step(m.loss, m.params(), *make_adam({.lr = 0.01}));
  std::vector<float> xs = randn(55, 21), ys = {0, 1, 2, 1, 0};
  std::vector<Feed> feeds = {{"x", &xs}, {"labels", &ys}};
  // the CPU backend's hook sees every graph node: the reference for each value a Vulkan kernel stores
  std::map<const Node*, std::vector<float>> want;
  auto cpu = make_cpu_backend();
  auto cexe = cpu->compile(p);
  cexe->set_kernel_hook([&](const KernelEvent& ev) { want[ev.node] = ev.read(); });
  auto cout = cexe->run(feeds);

  BackendOptions bo = vulkan_options(direct);
  bo.profile = true;
  auto be = make_backend(bo).backend;
  auto exe = be->compile(p);
  int events = 0;
  exe->set_kernel_hook([&](const KernelEvent& ev) {
    ++events;
    INFO(ev.name << " output " << ev.output << ": " << ev.node->describe());
    REQUIRE(want.count(ev.node));
    expect_close(ev.read(), want[ev.node], 1e-4, 1e-5, ev.name);
  });
  auto out = exe->run(feeds);
  int outputs = 0;
  for (auto& k : exe->plan()->kernels) outputs += static_cast<int>(k.outputs.size());
  CHECK(events == outputs);
  expect_close(out[0], cout[0], 1e-4, 1e-6, "loss");
  auto t = exe->last_timings();
  REQUIRE(static_cast<int>(t.size()) == exe->kernels_per_step());
  for (size_t k = 0; k < t.size(); ++k) {
    CHECK(t[k].kernel == exe->plan()->kernels[k].name);
    CHECK(t[k].ms >= 0);
    CHECK(t[k].gpu_timer == vulkan_device(*be).caps().timestamps);
  }
  exe->set_kernel_hook({});
  exe->run(feeds);  // profiled, recorded (timestamps in the command buffer)
  CHECK(static_cast<int>(exe->last_timings().size()) == exe->kernels_per_step());
  // both steps committed: parameters equal two CPU steps
  cexe->set_kernel_hook({});
  cexe->run(feeds);
  for (auto& prm : m.params()) expect_close(be->read(prm), cpu->read(prm), 1e-4, 1e-5, prm.name());
  expect_no_validation_messages(vulkan_device(*be));
}

TEST_CASE("vulkan: persistent values are shared by executables, read() and write() reach them", "[vulkan][backend]") {
  sg::testing::Mlp m(4, 9, 5, 3);
  Program train = make_train_step(m.loss, m.params(), *make_sgd({.lr = 0.1}));
  Program eval;
  eval.add_output("w1_sum", sum(m.w1, {0}));
  std::vector<float> xs = randn(36, 31), ys = {0, 1, 2, 0};
  auto cpu = make_cpu_backend();
  auto vk = make_backend(vulkan_options()).backend;
  std::vector<std::vector<float>> got, want;
  for (auto* be : {cpu.get(), vk.get()}) {
    auto t = be->compile(train);
    auto e = be->compile(eval);
    auto& res = be == cpu.get() ? want : got;
    res.push_back(e->run({})[0]);
    for (int step = 0; step < 3; ++step) {
      t->run({{"x", &xs}, {"labels", &ys}});
      res.push_back(e->run({})[0]);  // the eval executable sees each parity of w1
    }
    std::vector<float> w2 = be->read(m.w2);
    for (auto& v : w2) v *= -0.5f;
    be->write(m.w2, w2);
    res.push_back(t->run({{"x", &xs}, {"labels", &ys}})[0]);
    res.push_back(be->read(m.w2));
    CHECK_THROWS_AS(be->write(m.w2, {1.f}), ValueError);
  }
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) expect_close(got[i], want[i], 1e-4, 1e-5, fmt::format("result {}", i));
  CHECK_THROWS_WITH(vk->compile(train)->run({{"x", &xs}}), Catch::Contains("labels"));
  expect_no_validation_messages(vulkan_device(*vk));
}

TEST_CASE("vulkan: a device lacking a needed limit gives an error naming the limit", "[vulkan][backend]") {
  Tensor a = input("a", {300}), b = input("b", {300}), c = input("c", {300});
  Program p;
  p.add_output("abc", a * b + c);  // one kernel of 3 inputs + 1 output = 4 storage buffers
  std::vector<float> as = randn(300, 1), bs = randn(300, 2), cs = randn(300, 3);
  std::vector<float> want(300);
  for (int i = 0; i < 300; ++i) want[i] = as[i] * bs[i] + cs[i];
  BackendOptions bo = vulkan_options();
  bo.vulkan.max_limits = ComputeLimits{};
  // 3 storage buffers: the scheduler splits the kernel to fit (a * b first), it does not refuse the program
  bo.vulkan.max_limits->max_storage_buffers = 3;
  {
    auto small = make_backend(bo).backend;
    auto exe = small->compile(p);
    CHECK(exe->kernels_per_step() == 2);
    expect_close(exe->run({{"a", &as}, {"b", &bs}, {"c", &cs}})[0], want, 1e-6, 1e-7, "a*b+c in 2 kernels");
  }
  bo.vulkan.max_limits->max_storage_buffers = 1;  // a kernel needs one input and one output
  CHECK_THROWS_WITH(make_backend(bo).backend->compile(p), Catch::Contains("maxPerStageDescriptorStorageBuffers"));
  bo.vulkan.max_limits = ComputeLimits{};
  bo.vulkan.max_limits->max_buffer_bytes = 1024;  // a value of 300 floats needs 1200 bytes
  CHECK_THROWS_WITH(make_backend(bo).backend->compile(p), Catch::Contains("maxStorageBufferRange") && Catch::Contains("1200"));
  bo.vulkan.max_limits = ComputeLimits{};  // the defaults (the small device ComputeLimits describes) suffice here
  auto be = make_backend(bo).backend;
  auto out = be->compile(p)->run({{"a", &as}, {"b", &bs}, {"c", &cs}});
  expect_close(out[0], want, 1e-6, 1e-7, "a*b+c");
  expect_no_validation_messages(vulkan_device(*be));
}

TEST_CASE("vulkan: no leaks over 1000 steps, executables release what they own", "[vulkan][leaks]") {
  auto be = make_backend(vulkan_options()).backend;
  vk::Device& dev = vulkan_device(*be);
  const vk::LiveObjects base = dev.live_objects();
  Tensor x = input("x", {3});
  Tensor w = param("w", {3}, {0.5f, -1.f, 2.f});
  const double lr = 0.001;
  Program p = make_train_step(sum(x * w * w), {w}, *make_sgd({.lr = lr}));
  std::vector<float> xs = {1.f, 2.f, 3.f};
  vk::LiveObjects after_first, with_persistent;
  {
    auto exe = be->compile(p);
    exe->run({{"x", &xs}});
    exe->run({{"x", &xs}});  // both parities recorded
    after_first = dev.live_objects();
    for (int step = 2; step < 1000; ++step) exe->run({{"x", &xs}});
    CHECK(dev.live_objects() == after_first);
  }
  // what stays with the backend: the persistent values' front/back buffers and the cached pipelines
  with_persistent = dev.live_objects();
  CHECK(with_persistent.descriptor_pools == base.descriptor_pools);
  CHECK(with_persistent.command_buffers == base.command_buffers);
  CHECK(with_persistent.pipelines > base.pipelines);
  {
    auto exe = be->compile(p);  // the same kernels: pipelines reused
    exe->run({{"x", &xs}});
    CHECK(dev.live_objects().pipelines == with_persistent.pipelines);
  }
  CHECK(dev.live_objects() == with_persistent);
  // 1001 SGD steps of d/dw sum(x w^2) = 2 x w: w = w0 (1 - 2 lr x)^1001
  std::vector<float> wv = be->read(w);
  for (int i = 0; i < 3; ++i) CHECK(wv[i] == Approx(std::vector<double>{0.5, -1, 2}[i] * std::pow(1 - 2 * lr * xs[i], 1001)).epsilon(1e-4));
  expect_no_validation_messages(dev);
}

TEST_CASE("vulkan: no leaks over 1000 steps with buffers in memory of their own, under both memory policies",
          "[vulkan][leaks][memory]") {
  const std::string policy = GENERATE("dedicated", "blocks");
  INFO("memory policy " << policy);
  BackendOptions bo = vulkan_options();
  bo.vulkan.memory_policy = policy;
  auto be = make_backend(bo).backend;
  vk::Device& dev = vulkan_device(*be);
  const vk::LiveObjects base = dev.live_objects();
  constexpr int64_t n = 300000;  // 1.2 MB per value: above kDedicatedMinBytes
  Tensor x = input("x", {n});
  std::vector<float> w0(n);
  for (int64_t i = 0; i < n; ++i) w0[i] = 0.5f + static_cast<float>(i % 7) * 0.25f;
  Tensor w = param("w", {n}, w0);
  const double lr = 0.001;
  Program p = make_train_step(sum(x * w * w), {w}, *make_sgd({.lr = lr}));
  std::vector<float> xs(n);
  for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<float>(i % 3) - 1.f;
  vk::LiveObjects after_first;
  {
    auto exe = be->compile(p);
    exe->run({{"x", &xs}});
    exe->run({{"x", &xs}});
    after_first = dev.live_objects();
    // the two buffers of w and the input x at least, each in memory of its own under "dedicated"
    if (policy == "dedicated") CHECK(after_first.dedicated_allocations >= base.dedicated_allocations + 3);
    else CHECK(after_first.dedicated_allocations == 0);
    for (int step = 2; step < 1000; ++step) exe->run({{"x", &xs}});
    CHECK(dev.live_objects() == after_first);
  }
  const vk::LiveObjects with_persistent = dev.live_objects();
  CHECK(with_persistent.allocated_bytes < after_first.allocated_bytes);  // the executable's buffers went back
  if (policy == "dedicated") CHECK(with_persistent.device_memory_bytes < after_first.device_memory_bytes);  // and their memory
  else CHECK(with_persistent.device_memory_bytes <= after_first.device_memory_bytes);  // (one shared 32 MiB block here)
  CHECK(with_persistent.descriptor_pools == base.descriptor_pools);
  // 1000 SGD steps of d/dw sum(x w^2) = 2 x w: w = w0 (1 - 2 lr x)^1000
  const std::vector<float> wv = be->read(w);
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{2}, n - 1})
    CHECK(wv[i] == Approx(w0[i] * std::pow(1 - 2 * lr * xs[i], 1000)).epsilon(1e-3));
  expect_no_validation_messages(dev);
}

TEST_CASE("vulkan: repeat_dispatches runs a step's kernels back to back and computes what one run computes",
          "[vulkan][backend]") {
  // an MLP train step (parameters ping-pong, pooled temporaries reused) 3 steps with 1 and with 4 dispatches per
  // run: the same losses and parameters; profiled, one timing per kernel; validation (synchronization) clean
  const bool profile = GENERATE(false, true);
  INFO("profile " << profile);
  std::vector<std::vector<float>> params[2];
  std::vector<float> losses[2];
  for (int variant = 0; variant < 2; ++variant) {
    BackendOptions bo = vulkan_options(variant == 1 ? 0 : -1);  // the repeated one also on the staging path
    bo.vulkan.repeat_dispatches = variant == 1 ? 4 : 1;
    bo.profile = profile;
    auto be = make_backend(bo).backend;
    auto model = nn::make_model("mlp", 1, 6, 6, 10);
    nn::Rng rng(3);
    model->build(rng);
    Tensor x = input("x", {9, 1, 6, 6});
    Tensor y = input("labels", {9}, DType::i32);
    Program p = make_train_step(cross_entropy((*model)(x), y), model->parameters(), *make_adam({.lr = 1e-2}));
    std::vector<float> xs = uniform(9 * 36, 4, 0, 1), ys(9);
    for (int i = 0; i < 9; ++i) ys[i] = static_cast<float>(i % 10);
    auto exe = be->compile(p);
    for (int s = 0; s < 3; ++s) losses[variant].push_back(exe->run({{"x", &xs}, {"labels", &ys}})[0][0]);
    if (profile) CHECK(exe->last_timings().size() == static_cast<size_t>(exe->kernels_per_step()));
    for (auto& t : model->parameters()) params[variant].push_back(be->read(t));
    expect_no_validation_messages(vulkan_device(*be));
  }
  CHECK(losses[1] == losses[0]);  // bit-identical: the same kernels on the same values
  CHECK(params[1] == params[0]);
  BackendOptions bad = vulkan_options();
  bad.vulkan.repeat_dispatches = 0;
  CHECK_THROWS_AS(make_backend(bad), ValueError);
}

TEST_CASE("vulkan: shadergrad's training driver with --backend vulkan equals the CPU backend", "[vulkan][backend]") {
  // sg::train::run behind `shadergrad train --backend vulkan`: 200 digits samples in batches of 64 (a last batch of
  // 8 gets its own program sharing the parameters), 2 epochs, the test split evaluated by a third program
  sg::testing::pin_lavapipe();
  sg::train::Config cfg;
  cfg.model = "cnn";
  cfg.dataset = "digits";
  cfg.epochs = 2;
  cfg.batch = 64;
  cfg.train_limit = 200;
  cfg.test_limit = 97;
  cfg.progress = false;
  std::ostringstream log_cpu, log_vk;
  cfg.backend = "cpu";
  sg::train::Result cpu = sg::train::run(cfg, log_cpu);
  cfg.backend = "vulkan";
  sg::train::Result vk = sg::train::run(cfg, log_vk);
  CHECK(vk.backend == "vulkan");
  CHECK(vk.fallback_note.empty());
  REQUIRE(vk.history.size() == cpu.history.size());
  for (size_t e = 0; e < cpu.history.size(); ++e) {
    CHECK(vk.history[e].train_loss == Approx(cpu.history[e].train_loss).epsilon(1e-4));
    CHECK(std::abs(vk.history[e].test_accuracy - cpu.history[e].test_accuracy) <= 1.0 / 97 + 1e-9);
  }
}

TEST_CASE("vulkan: programs whose outputs are leaves (no kernel for them) read the leaves back", "[vulkan][backend]") {
  Tensor x = input("x", {5});
  Tensor w = param("w", {3}, {1.f, -2.f, 0.25f});
  Program p;
  p.add_output("x", x);
  p.add_output("w", w);
  auto be = make_backend(vulkan_options(0)).backend;
  auto exe = be->compile(p);
  std::vector<float> xs = {1, 2, 3, 4, 5};
  auto out = exe->run({{"x", &xs}});
  CHECK(out[0] == xs);
  CHECK(out[1] == std::vector<float>{1.f, -2.f, 0.25f});
  expect_no_validation_messages(vulkan_device(*be));
}

TEST_CASE("auto takes vulkan on a GPU, and on CPU implementations cpu-simd (gles without a C compiler), saying why "
          "it skipped the rest", "[vulkan][auto]") {
  sg::testing::pin_lavapipe();  // CI: the Vulkan device is lavapipe and the GLES device llvmpipe (CPU implementations)
  const bool vulkan_on_cpu = vulkan_device(*make_backend({.kind = "vulkan"}).backend).caps().limits.cpu_device;
  BackendChoice c = make_backend({.kind = "auto"});
  INFO(c.note);
  if (vulkan_on_cpu) {
    CHECK(c.backend->name() == "cpu-simd");
    CHECK_THAT(c.note, Catch::Contains("vulkan: 'llvmpipe") && Catch::Contains("gles-compute: 'llvmpipe") &&
                           Catch::Contains("gles: 'llvmpipe"));
    CHECK_THAT(c.note, Catch::Contains("a CPU implementation"));
    // a C compiler that fails: gles, the note saying why not cpu-simd (and not that gles was skipped)
    BackendOptions broken;
    broken.kind = "auto";
    broken.cpu_simd.compiler = "/bin/false";
    BackendChoice g = make_backend(broken);
    INFO(g.note);
    CHECK(g.backend->name() == "gles");
    CHECK_THAT(g.note, Catch::Contains("cpu-simd: ") && Catch::Contains("/bin/false"));
    CHECK_THAT(g.note, !Catch::Contains("gles: 'llvmpipe"));
  } else {  // a GPU (e.g. VK_DRIVER_FILES set to NVIDIA's ICD): the first backend of the order, nothing skipped
    CHECK(c.backend->name() == "vulkan");
    CHECK(c.note.empty());
  }
  // the explicit kinds are still there for whoever asks for them
  CHECK(make_backend({.kind = "gles-compute"}).backend->name() == "gles-compute");
}

TEST_CASE("vulkan: the autotuner runs a timed tile candidate of every tiled kernel and reuses the winners from the "
          "kernel cache", "[vulkan][autotune]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("sg_test_autotune_{}", ::getpid());
  fs::remove_all(dir);
  setenv("SG_KERNEL_CACHE", dir.c_str(), 1);  // the backends' kernel caches (and their tuning records) live here
  sg::testing::Mlp m(37, 29, 19, 5);          // odd sizes: no tile divides them
  Program p = make_train_step(m.loss, m.params(), *make_adam({.lr = 0.01}));
  std::vector<float> xs = randn(37 * 29, 31), ys(37);
  for (int i = 0; i < 37; ++i) ys[i] = static_cast<float>(i % 5);
  std::vector<Feed> feeds = {{"x", &xs}, {"labels", &ys}};
  auto cpu = make_cpu_backend();
  auto cexe = cpu->compile(p);
  const auto want = cexe->run(feeds);
  auto tuned_run = [&](std::optional<bool> autotune) {
    BackendOptions bo = vulkan_options();
    bo.autotune = autotune;
    bo.union_domains = false;  // the small contractions would join union-blocks kernels, which are never tiled
    auto be = make_backend(bo).backend;
    auto exe = be->compile(p);
    expect_close(exe->run(feeds)[0], want[0], 1e-4, 1e-6, "loss");
    for (auto& prm : m.params()) expect_close(be->read(prm), cpu->read(prm), 1e-4, 1e-5, prm.name());
    expect_no_validation_messages(vulkan_device(*be));
    return *exe->compute_kernels();
  };
  // the first backend times the candidates; the second finds every winner in the cache; without autotune: heuristic
  const std::vector<ComputeKernel> first = tuned_run(true), again = tuned_run(true), plain = tuned_run(false);
  REQUIRE(first.size() == again.size());
  REQUIRE(first.size() == plain.size());
  int tiled = 0;
  for (size_t k = 0; k < first.size(); ++k) {
    INFO("kernel " << k << " " << first[k].strategy << " " << first[k].tuning);
    if (first[k].strategy != "tiled-contraction") {
      CHECK(first[k].tuning.empty());
      continue;
    }
    ++tiled;
    REQUIRE(first[k].tiles);
    CHECK(first[k].tuning.rfind("autotuned: " + first[k].tiles->str(), 0) == 0);
    CHECK(again[k].tuning.rfind("autotune cache: " + first[k].tiles->str(), 0) == 0);
    CHECK(again[k].tiles == first[k].tiles);
    CHECK(again[k].source == first[k].source);
    CHECK(plain[k].tuning.empty());
    CHECK(first[k].source.find("// tile config " + first[k].tiles->str()) != std::string::npos);
    // the heuristic is a candidate and stays unless another beat it by the margin in the final alternating rounds
    if (first[k].tiles == plain[k].tiles) {
      CHECK(first[k].source == plain[k].source);
      const bool kept = first[k].tuning.find("the heuristic was fastest") != std::string::npos ||
                        first[k].tuning.find("kept the heuristic") != std::string::npos;
      CHECK(kept);
    } else {
      CHECK(first[k].tuning.find("replaced the heuristic") != std::string::npos);
    }
    CHECK(first[k].tuning_ms > 0);
    CHECK(plain[k].tuning_ms == 0);
  }
  CHECK(tiled >= 4);
  int records = 0;
  for (auto& e : fs::directory_iterator(dir)) records += e.path().extension() == ".tune";
  CHECK(records == tiled);
  unsetenv("SG_KERNEL_CACHE");
  fs::remove_all(dir);
}

TEST_CASE("vulkan: split-K turns a long-K contraction with few outputs into a tiled partial-sum kernel and a final "
          "kernel; train steps equal the CPU reference either way", "[vulkan][splitk]") {
  // x @ w1: 67 x 131 = 8777 outputs (above the 8192 left to tree reductions) over K = 301 (>= 256): split when the
  // threshold asks for more parallelism than 8777 / 4 texels; odd sizes, and K not a multiple of the slices
  sg::testing::Mlp m(67, 301, 131, 7);
  Program p = make_train_step(m.loss, m.params(), *make_adam({.lr = 0.01}));
  std::vector<float> xs = randn(67 * 301, 41), ys(67);
  for (int i = 0; i < 67; ++i) ys[i] = static_cast<float>(i % 7);
  std::vector<Feed> feeds = {{"x", &xs}, {"labels", &ys}};
  auto run = [&](std::optional<int64_t> min_parallel, bool gpu_tiles) {
    auto cpu = make_cpu_backend();
    auto cexe = cpu->compile(p);
    BackendOptions bo = vulkan_options();
    bo.min_parallel_texels = min_parallel;
    bo.gpu_tiles = gpu_tiles;
    auto be = make_backend(bo).backend;
    auto exe = be->compile(p);
    for (int step = 0; step < 2; ++step)
      expect_close(exe->run(feeds)[0], cexe->run(feeds)[0], 1e-4, 1e-6, fmt::format("loss of step {}", step));
    for (auto& prm : m.params()) expect_close(be->read(prm), cpu->read(prm), 1e-4, 1e-5, prm.name());
    expect_no_validation_messages(vulkan_device(*be));
    std::vector<std::pair<std::string, std::string>> kernels;  // (name, strategy)
    for (size_t k = 0; k < exe->plan()->kernels.size(); ++k)
      kernels.emplace_back(exe->plan()->kernels[k].name, (*exe->compute_kernels())[k].strategy);
    return kernels;
  };
  auto partials = [](const std::vector<std::pair<std::string, std::string>>& ks) {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& k : ks)
      if (k.first.size() > 8 && k.first.compare(k.first.size() - 8, 8, "_partial") == 0) out.push_back(k);
    return out;
  };
  for (bool gpu_tiles : {false, true}) {
    INFO("gpu tiles " << gpu_tiles);
    const auto plain = run(std::nullopt, gpu_tiles);  // lavapipe is a CPU device: split-K is off by default
    const auto split = run(int64_t{1} << 16, gpu_tiles);
    const auto off = run(0, gpu_tiles);
    CHECK(partials(plain).empty());
    CHECK(off.size() == plain.size());
    REQUIRE(partials(split).size() == 1);
    CHECK(partials(split)[0].second == "tiled-contraction");  // the slice is the contraction's batch dimension
    CHECK(split.size() == plain.size() + 1);                  // + the partial-sum kernel
  }
}
