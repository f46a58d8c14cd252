// The cpu-simd backend (C kernels of the cpu plan, compiled by the system C compiler, run on the host's threads)
// against the CPU reference: every op case forward and backward and the NaN/Inf edge list (tests/op_cases.h), MLP,
// CNN and Adam train steps, the kernel cache (a second compile loads the library without running the compiler), the
// errors of a missing or failing compiler, the C emitter's refusals, and the same kernels compiled by clang-14 (run
// natively, and compiled for wasm32-wasi with SIMD128: the C is freestanding but for <math.h>).
#include "embedding_nan_case.h"
#include "op_cases.h"
#include "test_models.h"
#include "test_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/nn.h"
#include "sg/target.h"

using namespace sg;

namespace {

using sg::testing::expect_close;
using sg::testing::randn;

[[maybe_unused]] std::vector<BackendOptions> cpu_simd() {
  BackendOptions bo;
  bo.kind = "cpu-simd";
  return {bo};
}

/// Three SGD-with-momentum steps of the MLP (28x28 inputs) or seed 002's CNN (8x8): the losses and every parameter
/// afterwards.
struct StepRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;
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
  std::vector<float> xs = randn(batch * hw * hw, static_cast<uint32_t>(8 + seed)), ys(batch);
  for (int64_t i = 0; i < batch; ++i) ys[i] = static_cast<float>((i * 7) % 10);
  for (int step = 0; step < 3; ++step) r.losses.push_back(exe->run({{"x", &xs}, {"labels", &ys}})[0][0]);
  for (auto& t : net->parameters()) r.params.push_back(be->read(t));
  return r;
}

void expect_same_steps(const StepRun& got, const StepRun& cpu) {
  expect_close(got.losses, cpu.losses, 1e-4, 1e-6, "losses");
  REQUIRE(got.params.size() == cpu.params.size());
  for (size_t i = 0; i < cpu.params.size(); ++i) expect_close(got.params[i], cpu.params[i], 1e-4, 1e-5, "param");
}

/// A small program: y = relu(x W + b) summed, one matmul and a reduction.
struct Small {
  Tensor x = input("x", {5, 7});
  Tensor w = param("w", {7, 3}, randn(21, 11, 0.5f));
  Tensor b = param("b", {3}, randn(3, 12, 0.1f));
  Program program() const {
    Program p;
    p.add_output("y", relu(matmul(x, w) + b));
    return p;
  }
};

}  // namespace

SG_OP_CASE_TESTS("cpu-simd", "[cpu-simd][ops]", cpu_simd(), cpu_simd())

TEST_CASE("cpu-simd MLP and CNN train steps equal the CPU backend (one thread and the pool)", "[cpu-simd][backend]") {
  for (std::string model : {"mlp", "cnn"}) {
    for (int64_t batch : {int64_t{3}, int64_t{37}}) {
      INFO(model << " batch " << batch);
      const StepRun cpu = train_steps(model, batch, {.kind = "cpu"}, 5);
      for (int threads : {1, 2}) {
        INFO("threads " << threads);
        BackendOptions bo{.kind = "cpu-simd"};
        bo.cpu_simd.threads = threads;
        expect_same_steps(train_steps(model, batch, bo, 5), cpu);
      }
    }
  }
}

TEST_CASE("cpu-simd Adam train steps of an odd-sized MLP equal the CPU backend", "[cpu-simd][backend]") {
  const int64_t B = 7, I = 37, H = 13, O = 5;
  auto run_steps = [&](const std::string& kind) {
    sg::testing::Mlp m(B, I, H, O);
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
  auto got = run_steps("cpu-simd");
  expect_close(got.first, cpu.first, 1e-4, 1e-6, "losses");
  for (size_t i = 0; i < cpu.second.size(); ++i) expect_close(got.second[i], cpu.second[i], 1e-4, 1e-5, "param");
}

TEST_CASE("cpu-simd: the embedding gradient as a register tile (one-hot^T x dY) keeps a NaN or infinite adjoint to "
          "its token's row", "[cpu-simd][backend]") {
  // the cpu plan tiles sum_p where(tok[p] == v, 0.5 dY[p, d], 0) as a contraction whose one-hot side selects dY
  // (never 0 * NaN); the 0.5 (a scalar) goes with dY's side
  const sg::testing::EmbeddingNanCase c;
  const Program p = c.program();
  const std::vector<Feed> feeds = c.feeds();
  const auto want = make_cpu_backend()->compile(p)->run(feeds)[0];
  const auto got = make_backend(cpu_simd()[0]).backend->compile(p)->run(feeds)[0];
  REQUIRE(got.size() == want.size());
  int nan = 0, inf = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i << " (row " << i / 40 << ", column " << i % 40 << "): cpu-simd " << got[i] << ", cpu " << want[i]);
    nan += std::isnan(want[i]), inf += std::isinf(want[i]);
    if (std::isnan(want[i]) || std::isinf(want[i])) CHECK((std::isnan(got[i]) ? std::isnan(want[i]) : got[i] == want[i]));
    else CHECK(std::abs(got[i] - want[i]) <= 1e-5f + 1e-5f * std::abs(want[i]));
  }
  CHECK(nan == 1);  // row tok[3] = 111, column 5
  CHECK(inf == 1);  // row tok[80] = 260, column 7
}

TEST_CASE("cpu-simd: a second compile of a program loads its library from the kernel cache", "[cpu-simd][cache]") {
  sg::testing::TempDir dir("sg_cpu_simd_cache");
  Small s;
  const Program p = s.program();
  std::vector<float> xs = randn(35, 13);
  BackendOptions bo{.kind = "cpu-simd"};
  bo.cpu_simd.cache_dir = dir.path.string();
  auto first = make_backend(bo).backend;
  const auto y1 = first->compile(p)->run({{"x", &xs}});
  const CpuSimdBuild b1 = cpu_simd_last_build(*first);
  CHECK_FALSE(b1.cache_hit);
  CHECK(b1.compile_ms > 0);
  CHECK(std::filesystem::exists(b1.library));
  CHECK(std::filesystem::exists(b1.source));
  CHECK(std::filesystem::path(b1.library).parent_path() == dir.path);
  // a new backend (as a new process would): the library from the directory, the compiler not run
  auto second = make_backend(bo).backend;
  const auto y2 = second->compile(p)->run({{"x", &xs}});
  const CpuSimdBuild b2 = cpu_simd_last_build(*second);
  CHECK(b2.cache_hit);
  CHECK(b2.compile_ms == 0);
  CHECK(b2.library == b1.library);
  CHECK(y2 == y1);
  // the translation unit holds every kernel, each with its exported entry point
  std::ifstream in(b1.source);
  const std::string tu((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto exe = second->compile(p);
  REQUIRE(exe->compute_kernels() != nullptr);
  for (const ComputeKernel& ck : *exe->compute_kernels()) {
    CHECK(ck.language == ComputeLanguage::C);
    CHECK(tu.find("SG_EXPORT void " + ck.entry + "(") != std::string::npos);
  }
  CHECK_THROWS_AS(cpu_simd_last_build(*make_backend({.kind = "cpu"}).backend), ValueError);
}

TEST_CASE("cpu-simd: a missing or failing C compiler is a BackendError naming it, its message and the source",
          "[cpu-simd][errors]") {
  sg::testing::TempDir dir("sg_cpu_simd_cc");
  Small s;
  BackendOptions bo{.kind = "cpu-simd"};
  bo.cpu_simd.cache_dir = dir.path.string();
  bo.cpu_simd.compiler = "/bin/false";  // runs, prints nothing, fails
  auto be = make_backend(bo).backend;
  try {
    be->compile(s.program());
    FAIL("compiled with /bin/false");
  } catch (const BackendError& e) {
    const std::string m = e.what();
    CHECK(m.find("'/bin/false' failed (exit status 1)") != std::string::npos);
    CHECK(m.find(dir.path.string()) != std::string::npos);
    CHECK(m.find(".c") != std::string::npos);
    CHECK(m.find("SG_CC") != std::string::npos);
  }
  bo.cpu_simd.compiler = "sg-no-such-compiler";
  CHECK_THROWS_WITH(make_backend(bo).backend->compile(s.program()),
                    Catch::Contains("'sg-no-such-compiler' was not found") && Catch::Contains("scripts/setup.sh"));
  // a compiler that rejects the source: its own message comes through (a C compiler given an option it lacks)
  const std::filesystem::path fake = dir.path / "fakecc";
  {
    std::ofstream f(fake);
    f << "#!/bin/sh\necho \"fakecc: error: kernels are not welcome here\" >&2\nexit 3\n";
  }
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  bo.cpu_simd.compiler = fake.string();
  CHECK_THROWS_WITH(make_backend(bo).backend->compile(s.program()),
                    Catch::Contains("exit status 3") && Catch::Contains("kernels are not welcome here"));
}

TEST_CASE("cpu-simd: C kernels are byte-stable, refuse workgroup memory, and the target names them", "[cpu-simd][codegen]") {
  Small s;
  const DeviceCaps caps = preset_caps("cpu-simd");
  const Target t = make_target(TargetName::CpuSimd, caps);
  CHECK(target_name(t.name) == "cpu-simd");
  CHECK(parse_target_name("cpu-simd") == TargetName::CpuSimd);
  CHECK(t.storage == StorageModel::Buffers);
  CHECK(t.compute.register_tiles);
  const Plan plan = schedule(s.program(), schedule_options(t, {}));
  for (const Kernel& k : plan.kernels) {
    const ComputeKernel ck = emit_compute_kernel(plan, k, t.compute, ComputeLanguage::C);
    CHECK(ck.source == emit_compute_kernel(plan, k, t.compute, ComputeLanguage::C).source);
    CHECK(ck.entry == "sg_" + k.name);
    CHECK(ck.shared_bytes == 0);
    CHECK(ck.source.find(k.name) != std::string::npos);
    CHECK(ck.source.find("#include <math.h>") != std::string::npos);
  }
  CHECK(std::string(compute_language_name(ComputeLanguage::C)) == "c");
  // a GPU plan's tree reduction needs workgroup memory and barriers: not in C
  ComputeLimits gpu = preset_caps("gpu").compute;
  Tensor big = input("big", {4, 4096});
  Program sum_p;
  sum_p.add_output("s", sum(big, {1}));
  const Plan gplan = schedule(sum_p, compute_schedule_options(gpu));
  bool refused = false;
  for (const Kernel& k : gplan.kernels) {
    try {
      emit_compute_kernel(gplan, k, gpu, ComputeLanguage::C);
    } catch (const UnsupportedError& e) {
      refused = true;
      CHECK(std::string(e.what()).find("cpu-simd") != std::string::npos);
    }
  }
  CHECK(refused);
}

namespace {

/// Whether `program` runs (found on PATH, exit status 0 for `--version`).
bool have_program(const std::string& program) {
  return std::system((program + " --version > /dev/null 2>&1").c_str()) == 0;
}

}  // namespace

TEST_CASE("cpu-simd compiled by clang-14: the edge list and MLP train steps equal the CPU reference", "[cpu-simd][clang]") {
  if (!have_program("clang-14")) {
    WARN("clang-14 is not installed (scripts/setup.sh installs it): nothing checked");
    return;
  }
  sg::testing::TempDir dir("sg_cpu_simd_clang");
  BackendOptions bo{.kind = "cpu-simd"};
  bo.cpu_simd.compiler = "clang-14";  // clang's default -ffp-contract=on is overridden by the backend's flags
  bo.cpu_simd.cache_dir = dir.path.string();
  sg::op_cases::check_edge_cases({bo});
  expect_same_steps(train_steps("mlp", 37, bo, 5), train_steps("mlp", 37, {.kind = "cpu"}, 5));
}

TEST_CASE("cpu-simd: a program's C compiles for wasm32-wasi with SIMD128 (freestanding but for <math.h>)",
          "[cpu-simd][clang]") {
  if (!have_program("clang-14") || !std::filesystem::exists("/usr/include/wasm32-wasi/math.h")) {
    WARN("clang-14 or wasi-libc is not installed (scripts/setup.sh installs both): nothing checked");
    return;
  }
  sg::testing::TempDir dir("sg_cpu_simd_wasm");
  // the CNN's train step: register tiles, window blocks (the max-pool gradients), union blocks, per-element kernels
  nn::Rng rng(3);
  auto net = nn::make_model("cnn", 1, 8, 8);
  net->build(rng);
  Tensor x = input("x", {4, 1, 8, 8});
  Tensor y = input("labels", {4}, DType::i32);
  auto opt = make_adam({});
  const Program p = make_train_step(cross_entropy((*net)(x), y), net->parameters(), *opt);
  BackendOptions bo{.kind = "cpu-simd"};
  bo.cpu_simd.cache_dir = dir.path.string();
  auto be = make_backend(bo).backend;
  be->compile(p);
  const std::string src = cpu_simd_last_build(*be).source;
  const std::string obj = (dir.path / "kernels.o").string(), log = (dir.path / "wasm.log").string();
  const int rc = std::system(("clang-14 --target=wasm32-wasi -msimd128 -std=c11 -O2 -ffp-contract=off -c " + src + " -o " +
                              obj + " > " + log + " 2>&1").c_str());
  INFO(sg::testing::read_file(log));
  CHECK(rc == 0);
  CHECK(std::filesystem::exists(obj));
}

TEST_CASE("cpu-simd: 4 threads on 2 cores run 300 dispatches of split kernels with the same bits every time",
          "[cpu-simd][threads]") {
  // a register-tiled matmul of 5 workgroups and an elementwise kernel of 1024, both above the pool's work threshold,
  // run back to back: a worker that wakes late for a finished kernel must take nothing of the next one
  Tensor a = input("a", {96, 96});
  Tensor w = param("w", {96, 96}, randn(96 * 96, 21, 0.2f));
  Tensor big = input("big", {256, 256});
  Program p;
  p.add_output("h", relu(matmul(a, w)));
  p.add_output("e", tanh(big) * 0.5 + big);
  std::vector<float> as = randn(96 * 96, 22), bs = randn(256 * 256, 23);
  BackendOptions bo{.kind = "cpu-simd"};
  bo.cpu_simd.threads = 4;
  auto be = make_backend(bo).backend;
  auto exe = be->compile(p);
  const auto first = exe->run({{"a", &as}, {"big", &bs}});
  const auto cpu = make_cpu_backend()->compile(p)->run({{"a", &as}, {"big", &bs}});
  for (size_t i = 0; i < cpu.size(); ++i) expect_close(first[i], cpu[i], 1e-4, 1e-5, "output");
  int same = 0;
  for (int r = 0; r < 300; ++r) same += exe->run({{"a", &as}, {"big", &bs}}) == first;
  CHECK(same == 300);
}
