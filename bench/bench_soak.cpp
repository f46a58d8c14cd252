// bench_soak — GL object counts and process memory over many train steps (issue 19: "flat over 10,000 steps").
//
// Usage: bench_soak [STEPS] [--backend gles|cpu] [--batch B]      (default 10000 steps, gles, batch 32)
//
// Trains the MLP 784-128-10 with Adam on fixed random batches (two batch sizes alternate every 100 steps, so two
// executables share the parameters, as the trainer's last partial batch does) and prints, every STEPS/10 steps,
// the live GL textures / programs / framebuffers (sg::gles_live_objects) and the resident set size
// (/proc/self/statm). Verdict (exit status 1 on failure, so `ctest -L soak` can run it with -DSG_SOAK=ON): the GL
// counts equal those after the first interval, the RSS grew by at most 8 MiB from the first interval to the
// last, and every loss is finite. Not part of the default test run (10,000 steps take minutes on llvmpipe).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/gles_device.h"
#include "sg/nn.h"
#include "sg/sg.h"

namespace {

double rss_mib() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  std::fclose(f);
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1048576.0;
}

std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 10000, batch = 32;
  std::string kind = "gles";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc) kind = argv[++i];
    else if (a == "--batch" && i + 1 < argc) batch = std::atoll(argv[++i]);
    else steps = std::atoll(a.c_str());
  }
  if (steps < 10 || batch < 2) {
    fmt::print(stderr, "usage: bench_soak [STEPS >= 10] [--backend gles|cpu] [--batch B >= 2]\n");
    return 2;
  }
  auto choice = sg::make_backend({.kind = kind});
  sg::Backend& be = *choice.backend;
  sg::nn::Rng rng(7);
  auto model = sg::nn::make_model("mlp", 1, 28, 28, 10);
  model->build(rng);
  auto adam = sg::make_adam({});
  struct Step {
    std::unique_ptr<sg::Executable> exe;
    std::vector<float> x, y;
  };
  std::vector<Step> progs;
  for (int64_t b : {batch, batch / 2}) {
    sg::Tensor x = sg::input("x", {b, 1, 28, 28});
    sg::Tensor y = sg::input("labels", {b}, sg::DType::i32);
    Step s{be.compile(sg::make_train_step(sg::cross_entropy((*model)(x), y), model->parameters(), *adam)),
           uniform(static_cast<size_t>(b * 784), 1 + static_cast<uint32_t>(b), 0.f, 1.f), {}};
    for (int64_t i = 0; i < b; ++i) s.y.push_back(static_cast<float>((i * 7) % 10));
    progs.push_back(std::move(s));
  }
  const bool gl = be.name() == "gles";
  fmt::print("bench_soak: MLP 784-128-10 Adam, batches {} and {} alternating every 100 steps, {} steps, {} [{}]\n\n",
             batch, batch / 2, steps, be.name(), be.device());
  fmt::print("| {:>7} | {:>8} | {:>8} | {:>12} | {:>8} | {:>10} |\n", "step", "textures", "programs", "framebuffers",
             "RSS MiB", "loss");
  fmt::print("|{:-<9}|{:-<10}|{:-<10}|{:-<14}|{:-<10}|{:-<12}|\n", "", "", "", "", "", "");
  const int64_t every = steps / 10;
  sg::gles::LiveObjects first{};
  double first_rss = 0, last_rss = 0;
  bool ok = true;
  for (int64_t s = 1; s <= steps; ++s) {
    Step& p = progs[static_cast<size_t>((s / 100) % 2)];
    float loss = p.exe->run({{"x", &p.x}, {"labels", &p.y}})[0][0];
    if (!std::isfinite(loss)) {
      fmt::print("FAIL: loss {} at step {}\n", loss, s);
      return 1;
    }
    if (s % every != 0) continue;
    sg::gles::LiveObjects live = gl ? sg::gles_live_objects(be) : sg::gles::LiveObjects{};
    last_rss = rss_mib();
    if (s == every) first = live, first_rss = last_rss;
    if (!(live == first)) ok = false;
    fmt::print("| {:>7} | {:>8} | {:>8} | {:>12} | {:>8.1f} | {:>10.5f} |\n", s, live.textures, live.programs,
               live.framebuffers, last_rss, loss);
    std::fflush(stdout);
  }
  const double grew = last_rss - first_rss;
  if (grew > 8.0) ok = false;
  fmt::print("\n{}: GL objects {} after step {}, RSS {:+.1f} MiB from step {} to step {}\n", ok ? "PASS" : "FAIL",
             ok ? "unchanged" : "CHANGED (or RSS grew > 8 MiB)", every, grew, every, steps);
  return ok ? 0 : 1;
}
