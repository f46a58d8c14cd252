// The GLES compute backend ("gles-compute", GLES 3.1 compute shaders over storage buffers; llvmpipe in CI) against
// the CPU reference: whole MLP and CNN train steps, kernel counts, the tiled matmul/conv kernels, leaks over many
// steps, and the errors of a device that lacks a limit a kernel needs.
#include <catch2/catch.hpp>

#include "test_models.h"
#include "test_util.h"

#include <map>
#include <string>
#include <vector>

#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/gles_device.h"
#include "sg/nn.h"
#include "sg/sg.h"

using namespace sg;

namespace {

using sg::testing::expect_close;
using sg::testing::Mlp;
using sg::testing::randn;

std::unique_ptr<Backend> compute_backend() {
  auto be = make_backend({.kind = "gles-compute"}).backend;  // BackendError fails the test: CI has llvmpipe
  REQUIRE(be->name() == "gles-compute");
  return be;
}

/// Three SGD-with-momentum steps of the MLP (28x28 inputs) or seed 002's CNN (8x8) on one backend: the losses and
/// every parameter afterwards, plus the compute kernels of the step (compute backends).
struct StepRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;
  std::vector<ComputeKernel> kernels;
  std::vector<std::string> names;
};
StepRun train_steps(const std::string& model, int64_t batch, const BackendOptions& bo, uint64_t seed) {
  nn::Rng rng(seed);
  const int64_t hw = model == "mlp" ? 28 : 8;
  auto net = nn::make_model(model, 1, hw, hw);
  net->build(rng);
  Tensor x = input("x", {batch, 1, hw, hw});
  Tensor y = input("labels", {batch}, DType::i32);
  auto opt = make_sgd({.lr = 0.05, .momentum = 0.9});
  Program p = make_train_step(cross_entropy((*net)(x), y), net->parameters(), *opt);
  auto be = make_backend(bo).backend;
  REQUIRE(be->name() == bo.kind);
  auto exe = be->compile(p);
  StepRun r;
  if (auto* ck = exe->compute_kernels()) r.kernels = *ck;
  if (auto* plan = exe->plan())
    for (auto& k : plan->kernels) r.names.push_back(k.name);
  std::vector<float> xs = randn(batch * hw * hw, static_cast<uint32_t>(8 + seed)), ys(batch);
  for (int64_t i = 0; i < batch; ++i) ys[i] = static_cast<float>((i * 7) % 10);
  for (int step = 0; step < 3; ++step) r.losses.push_back(exe->run({{"x", &xs}, {"labels", &ys}})[0][0]);
  for (auto& t : net->parameters()) r.params.push_back(be->read(t));
  return r;
}

void expect_same_steps(const StepRun& gpu, const StepRun& cpu) {
  expect_close(gpu.losses, cpu.losses, 1e-4, 1e-6, "losses");
  REQUIRE(gpu.params.size() == cpu.params.size());
  for (size_t i = 0; i < cpu.params.size(); ++i) expect_close(gpu.params[i], cpu.params[i], 1e-4, 1e-5, "param");
}

}  // namespace

TEST_CASE("gles-compute MLP and CNN train steps equal the CPU backend", "[gles-compute][backend]") {
  for (std::string model : {"mlp", "cnn"}) {
    for (int64_t batch : {int64_t{3}, int64_t{37}}) {
      INFO(model << " batch " << batch);
      StepRun cpu = train_steps(model, batch, {.kind = "cpu"}, 5);
      for (std::optional<bool> tiles : {std::optional<bool>{}, std::optional<bool>{true}}) {  // the device's, the GPU ones
        INFO("gpu_tiles " << (tiles ? "yes" : "auto"));
        StepRun gpu = train_steps(model, batch, {.kind = "gles-compute", .gpu_tiles = tiles}, 5);
        expect_same_steps(gpu, cpu);
        REQUIRE(gpu.kernels.size() == gpu.names.size());
      }
    }
  }
}

TEST_CASE("gles-compute Adam train steps of an odd-sized MLP equal the CPU backend", "[gles-compute][backend]") {
  const int64_t B = 7, I = 37, H = 13, O = 5;
  auto run_steps = [&](const std::string& kind) {
    Mlp m(B, I, H, O);
    auto opt = make_adam({.lr = 0.01});
    Program p = make_train_step(m.loss, m.params(), *opt);
    auto be = make_backend({.kind = kind}).backend;
    REQUIRE(be->name() == kind);
    auto exe = be->compile(p);
    std::vector<float> losses;
    for (int step = 0; step < 4; ++step) {
      std::vector<float> xs = randn(B * I, 100 + step), ys(B);
      for (int64_t i = 0; i < B; ++i) ys[i] = static_cast<float>((i * 3 + step) % O);
      losses.push_back(exe->run({{"x", &xs}, {"labels", &ys}})[0][0]);
    }
    std::vector<std::vector<float>> params;
    for (auto& t : m.params()) params.push_back(be->read(t));
    return std::make_pair(losses, params);
  };
  auto cpu = run_steps("cpu");
  auto gpu = run_steps("gles-compute");
  expect_close(gpu.first, cpu.first, 1e-4, 1e-6, "losses");
  for (size_t i = 0; i < cpu.second.size(); ++i) expect_close(gpu.second[i], cpu.second[i], 1e-4, 1e-5, "param");
}

TEST_CASE("gles-compute: single-element values hoisted out of a large kernel equal the CPU backend over steps",
          "[gles-compute][backend]") {
  // a step counter and costly functions of it read by every element of a 48x40 output (Adam's bias corrections'
  // shape); the scheduler computes them once per step in the counter's kernel (schedule rule scalar-hoist)
  auto run_steps = [](const std::string& kind) {
    Tensor x = input("x", {48, 40});
    Tensor t = state("t", {}, {0.f});
    Tensor t1 = t + 1.0;
    Tensor f = map([](auto v) { return -where(abs(v * -0.1) < 0.5, v * -0.1 * (1.0 + v * -0.05), exp(v * -0.1) - 1.0); },
                   t1);
    Tensor g = sqrt(map([](auto v) { return 1.0 - exp(v * -0.01) * 0.99 + v * v; }, t1));
    Program p;
    p.add_output("y", x * 0.001 / f / (sqrt(abs(x)) / g + 1e-8));
    p.updates.push_back({t.node(), t1.node()});
    auto be = make_backend({.kind = kind}).backend;
    REQUIRE(be->name() == kind);
    auto exe = be->compile(p);
    if (const Plan* plan = exe->plan()) CHECK(plan->value_of(f.node().get()).producer == plan->value_of(t1.node().get()).producer);
    std::vector<float> ys;
    for (int step = 0; step < 7; ++step) {  // t = 1..7: f crosses from the series to exp(x) - 1
      std::vector<float> xs = randn(48 * 40, 40 + step);
      std::vector<float> y = exe->run({{"x", &xs}})[0];
      ys.insert(ys.end(), y.begin(), y.end());
    }
    ys.push_back(be->read(t)[0]);
    return ys;
  };
  const std::vector<float> cpu = run_steps("cpu");
  CHECK(cpu.back() == 7.f);
  expect_close(run_steps("gles-compute"), cpu, 1e-5, 1e-7, "y over 7 steps, then the counter");
}

TEST_CASE("gles-compute kernel hooks read every output of every kernel, equal to the CPU backend's node values",
          "[gles-compute][backend]") {
  Mlp m(5, 11, 6, 3);
  Program p;
  p.add_output("loss", m.loss);
  std::vector<float> xs = randn(55, 3), ys = {0, 2, 1, 1, 0};
  std::map<const Node*, std::vector<float>> cpu_values;
  auto cpu_backend = make_cpu_backend();
  auto cpu = cpu_backend->compile(p);
  cpu->set_kernel_hook([&](const KernelEvent& ev) { cpu_values[ev.node] = ev.read(); });
  cpu->run({{"x", &xs}, {"labels", &ys}});
  auto be = compute_backend();
  auto exe = be->compile(p);
  int events = 0, compared = 0;
  exe->set_kernel_hook([&](const KernelEvent& ev) {
    ++events;
    REQUIRE(ev.kernel != nullptr);
    auto it = cpu_values.find(ev.node);
    if (it == cpu_values.end()) return;
    expect_close(ev.read(), it->second, 1e-4, 1e-5, ev.name);
    ++compared;
  });
  exe->run({{"x", &xs}, {"labels", &ys}});
  int outputs = 0;
  for (auto& k : exe->plan()->kernels) outputs += static_cast<int>(k.outputs.size());
  CHECK(events == outputs);
  CHECK(compared > 0);
}

TEST_CASE("gles-compute storage buffers and programs stay constant over 1000 Adam steps and are released",
          "[gles-compute][leaks]") {
  const int64_t B = 8, I = 19, H = 13, O = 5;
  Mlp m(B, I, H, O);
  auto opt = make_adam({.lr = 0.01});
  Program p = make_train_step(m.loss, m.params(), *opt);
  auto be = compute_backend();
  const gles::LiveObjects base = gles_live_objects(*be);
  auto exe = be->compile(p);
  const Plan& plan = *exe->plan();
  int64_t persistent = 0, owned = static_cast<int64_t>(plan.buffers.size());
  for (auto& v : plan.values) {
    persistent += v.kind == ValueKind::Persistent;
    owned += v.kind == ValueKind::Input || v.kind == ValueKind::Constant;
  }
  CHECK(persistent == 4 * 3 + 1);  // params, Adam's m and v, the step counter
  const gles::LiveObjects compiled = gles_live_objects(*be);
  CHECK(compiled.buffers - base.buffers == 2 * persistent + owned);
  CHECK(compiled.textures == base.textures);
  CHECK(compiled.programs - base.programs >= 1);
  CHECK(compiled.programs - base.programs <= exe->kernels_per_step());
  std::vector<float> xs = randn(B * I, 10), ys(B);
  for (int64_t i = 0; i < B; ++i) ys[i] = static_cast<float>(i % O);
  const float first = exe->run({{"x", &xs}, {"labels", &ys}})[0][0];
  float loss = first;
  int mismatches = 0;
  for (int step = 1; step < 1000; ++step) {
    loss = exe->run({{"x", &xs}, {"labels", &ys}})[0][0];
    if (gles_live_objects(*be) != compiled) ++mismatches;
  }
  CHECK(mismatches == 0);
  INFO("loss " << first << " -> " << loss);
  CHECK(loss < 0.1f * first);  // the steps really trained
  exe.reset();
  const gles::LiveObjects destroyed = gles_live_objects(*be);
  CHECK(destroyed.buffers == base.buffers + 2 * persistent);  // the backend keeps the parameters' front/back
  CHECK(destroyed.programs == compiled.programs);             // and its program cache
  be.reset();
}

TEST_CASE("compute kernels that exceed a device limit are refused with an error naming the limit",
          "[gles-compute][backend]") {
  Tensor a = input("a", {9, 7}), b = input("b", {7, 5}), c = input("c", {9, 5});
  Program p;
  p.add_output("y", relu(matmul(a, b) + c) * c);
  ComputeLimits wide;
  wide.max_storage_buffers = 16;
  Plan plan = schedule(p, compute_schedule_options(wide));
  const Kernel* k3 = nullptr;  // the kernel reading a, b and c
  for (auto& k : plan.kernels)
    if (k.inputs.size() == 3) k3 = &k;
  REQUIRE(k3 != nullptr);
  ComputeLimits narrow = wide;
  narrow.max_storage_buffers = 3;
  CHECK_THROWS_AS(emit_compute_kernel(plan, *k3, narrow), UnsupportedError);
  CHECK_THROWS_WITH(emit_compute_kernel(plan, *k3, narrow), Catch::Contains("max_storage_buffers"));
  ComputeLimits tiny_buffers = wide;
  tiny_buffers.max_buffer_bytes = 64;
  CHECK_THROWS_WITH(emit_compute_kernel(plan, *k3, tiny_buffers), Catch::Contains("max_buffer_bytes"));
  ComputeLimits one = wide;
  one.max_storage_buffers = 1;
  CHECK_THROWS_AS(compute_schedule_options(one), ValueError);
  // GLES 3.1's guaranteed minimum of 4 storage buffers fits this program's kernels. (The scheduler bounds the
  // inputs of multi-output kernels by max_inputs, not those of a kernel with prologues: with 3 buffers the
  // matmul + epilogue kernel above still reads 3 inputs, and is refused as tested.)
  ComputeLimits es31 = wide;
  es31.max_storage_buffers = 4;
  Plan fitted = schedule(p, compute_schedule_options(es31));
  for (auto& k : fitted.kernels) CHECK_NOTHROW(emit_compute_kernel(fitted, k, es31));
}

TEST_CASE("gles-compute emits the MLP's and the CNN's matmul and conv kernels as tiled contractions",
          "[gles-compute][backend]") {
  // SGD-momentum steps at batch 64 on llvmpipe (16 storage buffers per kernel): the MLP's 10 kernels and the
  // CNN's 22. Every matmul (forward, x.W^T, x^T.dh with the relu mask and the optimizer epilogue) and every conv
  // (forward, grad-input, grad-weight) is tiled; a conv weight gradient of few outputs (the CNN's first layer: 72
  // outputs over 64 x 8 x 8 products) may be a tree reduction instead; the bias gradient + loss kernels are not
  // contractions. (With the union-domain rule off: on, the small ones among them, such as h.W2's gradient with its
  // update, join the small independent kernels of the step in union-blocks kernels: 7 and 18 kernels.)
  for (std::string model : {"mlp", "cnn"}) {
    INFO(model);
    StepRun r = train_steps(model, 64, {.kind = "gles-compute", .union_domains = false}, 1);
    REQUIRE(r.kernels.size() == r.names.size());
    CHECK(r.names.size() == (model == "mlp" ? 10u : 22u));
    const StepRun fused = train_steps(model, 64, {.kind = "gles-compute"}, 1);
    CHECK(fused.names.size() == (model == "mlp" ? 7u : 18u));
    int tiled = 0;
    for (size_t i = 0; i < r.names.size(); ++i) {
      INFO(r.names[i] << ": " << r.kernels[i].strategy);
      const std::string& s = r.kernels[i].strategy;
      tiled += s == "tiled-contraction";
      CHECK(r.kernels[i].source.find("// shadergrad compute kernel " + r.names[i] + " (" + s + ")") != std::string::npos);
      if (r.names[i].find("matmul") != std::string::npos) CHECK(s == "tiled-contraction");
      if (r.names[i].find("conv2d_grad_weight") != std::string::npos)
        CHECK((s == "tiled-contraction" || s == "tree-reduction"));
      else if (r.names[i].find("conv2d") != std::string::npos)
        CHECK(s == "tiled-contraction");
      if (s == "tiled-contraction") {
        CHECK(r.kernels[i].shared_bytes > 0);
        CHECK(r.kernels[i].source.find("barrier();") != std::string::npos);
      }
    }
    CHECK(tiled >= (model == "mlp" ? 5 : 10));
  }
}

TEST_CASE("compute kernel sources are byte-stable and name the kernel, its graph nodes, user lines and bindings",
          "[gles-compute][codegen]") {
  auto emit_all = [] {
    Mlp m(9, 23, 17, 5);
    auto opt = make_adam({.lr = 0.01});
    Program p = make_train_step(m.loss, m.params(), *opt);
    ComputeLimits l;
    l.max_storage_buffers = 16;
    l.max_workgroup_invocations = 1024;
    l.max_shared_bytes = 49152;
    Plan plan = schedule(p, compute_schedule_options(l));
    std::vector<std::string> names, sources;
    for (auto& k : plan.kernels) {
      names.push_back(k.name);
      sources.push_back(emit_compute_kernel(plan, k, l).source);
    }
    return std::make_pair(names, sources);
  };
  auto [names, a] = emit_all();
  auto b = emit_all().second;  // a second program built the same way: new nodes, same text
  REQUIRE(a.size() == b.size());
  int tiled = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(names[i]);
    CHECK(a[i] == b[i]);
    CHECK(a[i].rfind("#version 450\n// shadergrad compute kernel " + names[i] + " (", 0) == 0);
    CHECK(a[i].find("// graph nodes computed here") != std::string::npos);
    CHECK(a[i].find("test_models.h:") != std::string::npos);  // the user's source line of the nodes
    CHECK(a[i].find("// bindings (set 0)") != std::string::npos);
    CHECK(a[i].find("push_constant") == std::string::npos);
    tiled += a[i].find("(tiled-contraction)") != std::string::npos;
    if (a[i].find("(union-blocks)") != std::string::npos) {  // every block commented in the body as well
      CHECK(a[i].find("\n  // block 0 (") != std::string::npos);
      CHECK(a[i].find("\n  // block 1 (") != std::string::npos);
    }
  }
  CHECK(tiled >= 3);  // x.W1, dh = dlogits.W2^T, x^T.dh (+ Adam); h.W2 (9 x 5) is small: in a union-blocks kernel
}

TEST_CASE("tile configurations: text form round trip, the heuristic first among candidates that fit the device",
          "[gles-compute][codegen]") {
  for (const char* s : {"16x16.8x8.k8.g8.v4.pf", "16x16.8x8.k32.g8.v4.pf.kr", "8x8.4x4.k16.g1", "4x16.2x8.k4.g3.pf", "1x1.1x1.k1.g1.v4"}) {
    auto t = parse_tile_config(s);
    REQUIRE(t);
    CHECK(t->str() == s);
  }
  for (const char* bad : {"", "16x16", "16x16.8x8.k8", "16x16.8x8.k8.g8.v5", "0x16.8x8.k8.g1", "16x16.8x8.k8.g1.pf.v4", "16x16.8x8.k8.g1.kr.pf",
                          "16x16.8x8.k8.g1 "})
    CHECK_FALSE(parse_tile_config(bad));
  Tensor a = input("a", {1160, 200}), b = input("b", {200, 1040}), bias = input("bias", {1040});  // > 8 tile rows
  Program p;
  p.add_output("y", relu(matmul(a, b) + bias));
  for (bool cpu : {false, true}) {
    INFO((cpu ? "cpu" : "gpu") << " limits");
    ComputeLimits l;
    l.max_storage_buffers = 16, l.max_workgroup_invocations = 1024, l.max_shared_bytes = 49152, l.cpu_device = cpu;
    Plan plan = schedule(p, compute_schedule_options(l));
    REQUIRE(plan.kernels.size() == 1);
    const ComputeKernel h = emit_compute_kernel(plan, plan.kernels[0], l);
    REQUIRE(h.strategy == "tiled-contraction");
    REQUIRE(h.tiles);
    const std::vector<TileConfig> cands = tile_candidates(plan, plan.kernels[0], l);
    REQUIRE(cands.size() >= 4);
    CHECK(cands.size() <= 20);
    CHECK(cands[0] == *h.tiles);
    for (size_t i = 0; i < cands.size(); ++i) {
      INFO(cands[i].str());
      const ComputeKernel ck = emit_compute_kernel(plan, plan.kernels[0], l, cands[i]);
      CHECK(*ck.tiles == cands[i]);  // candidates are already fitted
      CHECK(ck.shared_bytes <= l.max_shared_bytes);
      CHECK(cands[i].threads() <= l.max_workgroup_invocations);
      CHECK(ck.source.find("// tile config " + cands[i].str()) != std::string::npos);
      for (size_t j = 0; j < i; ++j) CHECK_FALSE(cands[j] == cands[i]);
    }
    // GPU heuristic: vec4 shared tiles, register prefetch, grouped workgroup order (a 1-D grid)
    if (!cpu) {
      CHECK(h.tiles->vec4);
      CHECK(h.tiles->prefetch);
      CHECK(h.tiles->group_m > 1);
      CHECK(h.source.find("shared vec4 tile_a") != std::string::npos);
      CHECK(h.source.find("int rows_here") != std::string::npos);
      CHECK(h.workgroups[1] == 1);
    }
  }
  // a configuration with more invocations than the device allows is refused, naming the limit
  ComputeLimits small;
  small.max_storage_buffers = 16, small.max_workgroup_invocations = 64;
  Plan plan = schedule(p, compute_schedule_options(small));
  CHECK_THROWS_WITH(emit_compute_kernel(plan, plan.kernels[0], small, parse_tile_config("16x16.8x8.k8.g1")),
                    Catch::Contains("max_workgroup_invocations"));
}

TEST_CASE("GPU tile heuristic: 16x16 invocations of 8x4 register tiles for large SGEMMs, shrunk for small ones",
          "[compute][tiles]") {
  // what the H200 measured fastest at every N (docs/perf-log/12a.md): 16x16.8x4.k8.g8.v4.pf
  ComputeLimits l;
  l.max_storage_buffers = 16, l.max_workgroup_invocations = 1024, l.max_shared_bytes = 49152, l.cpu_device = false;
  auto heuristic = [&](int64_t m, int64_t k, int64_t n) {
    Program p;
    p.add_output("c", matmul(input("a", {m, k}), input("b", {k, n})));
    Plan plan = schedule(p, compute_schedule_options(l));
    REQUIRE(plan.kernels.size() == 1);
    const ComputeKernel ck = emit_compute_kernel(plan, plan.kernels[0], l);
    REQUIRE(ck.tiles);
    return ck.tiles->str();
  };
  CHECK(heuristic(1024, 1024, 1024) == "16x16.8x4.k8.g1.v4.pf");  // 8 tile rows: no groups of 8
  for (int64_t n : {2048, 3072, 4096, 4100}) CHECK(heuristic(n, n, n) == "16x16.8x4.k8.g8.v4.pf");
  CHECK(heuristic(256, 64, 96) == "8x8.2x2.k8.g8.v4.pf");  // small: shrunk towards 128 workgroups (96 of 16 x 16)
}
