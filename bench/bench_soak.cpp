// bench_soak — GPU object counts and process memory over many train steps (issue 19: "flat over 10,000 steps").
//
// Usage: bench_soak [STEPS] [--backend gles|gles-compute|vulkan|cpu] [--batch B]
//        (default 10000 steps, gles, batch 32)
//
// Trains the MLP 784-128-10 with Adam on fixed random batches (two batch sizes alternate every 100 steps, so two
// executables share the parameters, as the trainer's last partial batch does) and prints, every STEPS/10 steps,
// the backend's live GPU objects and the resident set size (/proc/self/statm), after a warm-up of two steps of each
// executable:
//   gles, gles-compute  GL textures / programs / framebuffers / storage buffers (sg::gles_live_objects)
//   vulkan              VkBuffers, VkDeviceMemory blocks and their bytes, bytes bound to buffers, compute
//                       pipelines, descriptor pools (descriptor sets come from those pools: a set allocated per
//                       run would exhaust its pool and throw), command buffers, query pools (vk::Device::live_objects)
//   cpu                 none (RSS only)
// Verdict (exit status 1 on failure, so `ctest -L soak` can run it with -DSG_SOAK=ON): every count equals its value
// after the first interval, the RSS grew by at most 8 MiB from the first interval to the last, and every loss is
// finite. Not part of the default test run (10,000 steps take minutes on llvmpipe / lavapipe).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/gles_device.h"
#include "sg/nn.h"
#include "sg/sg.h"
#include "sg/vulkan_device.h"

namespace {

struct Options {
  int64_t steps = 10000, batch = 32;
  std::string backend = "gles";
};

/// Named live-object counts of one backend at one moment (same names in the same order every time).
using Counts = std::vector<std::pair<std::string, int64_t>>;

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

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc) o.backend = argv[++i];
    else if (a == "--batch" && i + 1 < argc) o.batch = std::atoll(argv[++i]);
    else o.steps = std::atoll(a.c_str());
  }
  if (o.steps >= 10 && o.batch >= 2) return true;
  fmt::print(stderr, "usage: bench_soak [STEPS >= 10] [--backend gles|gles-compute|vulkan|cpu] [--batch B >= 2]\n");
  return false;
}

/// The live GPU objects of `be` (see the file comment); empty on the CPU backend.
Counts live_counts(sg::Backend& be) {
  if (be.name() == "gles" || be.name() == "gles-compute") {
    const sg::gles::LiveObjects l = sg::gles_live_objects(be);
    return {{"textures", l.textures}, {"programs", l.programs}, {"framebuffers", l.framebuffers},
            {"buffers", l.buffers}};
  }
  if (be.name() == "vulkan") {
    const sg::vk::LiveObjects l = sg::vulkan_device(be).live_objects();
    return {{"buffers", l.buffers},         {"memory", l.memory_blocks},      {"mem KiB", l.device_memory_bytes / 1024},
            {"bound KiB", l.allocated_bytes / 1024}, {"pipelines", l.pipelines}, {"desc pools", l.descriptor_pools},
            {"cmd bufs", l.command_buffers}, {"queries", l.query_pools}};
  }
  return {};
}

struct Step {
  std::unique_ptr<sg::Executable> exe;
  std::vector<float> x, y;
};

/// The two train steps (batch and batch / 2) of one MLP and one Adam, sharing the parameters.
std::vector<Step> build_steps(sg::Backend& be, int64_t batch) {
  sg::nn::Rng rng(7);
  auto model = sg::nn::make_model("mlp", 1, 28, 28, 10);
  model->build(rng);
  auto adam = sg::make_adam({});
  std::vector<Step> steps;
  for (int64_t b : {batch, batch / 2}) {
    sg::Tensor x = sg::input("x", {b, 1, 28, 28});
    sg::Tensor y = sg::input("labels", {b}, sg::DType::i32);
    Step s{be.compile(sg::make_train_step(sg::cross_entropy((*model)(x), y), model->parameters(), *adam)),
           uniform(static_cast<size_t>(b * 784), 1 + static_cast<uint32_t>(b), 0.f, 1.f), {}};
    for (int64_t i = 0; i < b; ++i) s.y.push_back(static_cast<float>((i * 7) % 10));
    steps.push_back(std::move(s));
  }
  return steps;
}

void print_header(const Counts& c) {
  std::string head = fmt::format("| {:>7} |", "step"), rule = "|---------|";
  for (auto& [name, v] : c) head += fmt::format(" {:>10} |", name), rule += "-----------:|";
  fmt::print("{} {:>8} | {:>10} |\n{}---------:|-----------:|\n", head, "RSS MiB", "loss", rule);
}

void print_row(int64_t step, const Counts& c, double rss, float loss) {
  std::string row = fmt::format("| {:>7} |", step);
  for (auto& [name, v] : c) row += fmt::format(" {:>10} |", v);
  fmt::print("{} {:>8.1f} | {:>10.5f} |\n", row, rss, loss);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return 2;
  auto choice = sg::make_backend({.kind = o.backend});
  sg::Backend& be = *choice.backend;
  std::vector<Step> progs = build_steps(be, o.batch);
  fmt::print("bench_soak: MLP 784-128-10 Adam, batches {} and {} alternating every 100 steps, {} steps, {} [{}]\n\n",
             o.batch, o.batch / 2, o.steps, be.name(), be.device());
  // warm-up: two steps of each executable (each creates its GPU objects, e.g. Vulkan descriptor sets and command
  // buffers, on its first runs), so that short soaks compare steady states too
  for (Step& p : progs)
    for (int w = 0; w < 2; ++w) p.exe->run({{"x", &p.x}, {"labels", &p.y}});
  print_header(live_counts(be));
  const int64_t every = o.steps / 10;
  Counts first;
  double first_rss = 0, last_rss = 0;
  bool ok = true;
  for (int64_t s = 1; s <= o.steps; ++s) {
    Step& p = progs[static_cast<size_t>((s / 100) % 2)];
    const float loss = p.exe->run({{"x", &p.x}, {"labels", &p.y}})[0][0];
    if (!std::isfinite(loss)) {
      fmt::print("FAIL: loss {} at step {}\n", loss, s);
      return 1;
    }
    if (s % every != 0) continue;
    const Counts live = live_counts(be);
    last_rss = rss_mib();
    if (s == every) first = live, first_rss = last_rss;
    if (live != first) ok = false;
    print_row(s, live, last_rss, loss);
  }
  const double grew = last_rss - first_rss;
  const bool counts_ok = ok;
  if (grew > 8.0) ok = false;
  fmt::print("\n{}: {} objects {} after step {}, RSS {:+.1f} MiB from step {} to step {}{}\n", ok ? "PASS" : "FAIL",
             be.name(), counts_ok ? "unchanged" : "CHANGED", every, grew, every, o.steps,
             grew > 8.0 ? " (more than 8 MiB)" : "");
  return ok ? 0 : 1;
}
