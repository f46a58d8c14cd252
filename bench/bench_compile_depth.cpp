// bench_compile_depth — compile time against the depth of a chain of elementwise layers.
//
// Usage: bench_compile_depth [--backend gles|gles-compute|vulkan|cpu|none|all]... [--forward | --train]
//                            [--optimizer sgd|adam] [--skip-after SECONDS] [--schedule-only] [--same-process] [N ...]
//   (default: both tables; forward depths 8 16 24 30 64 128 256 512 1000, train depths 10 30 100 300 1000 3000;
//   --backend may repeat or list several, comma-separated; "all" = gles, gles-compute, vulkan; --skip-after stops
//   a backend's train sweep after the first depth whose rows add up to more than SECONDS, default 120;
//   --schedule-only: the train table's make_train_step, schedule and emission rows only, no device needed;
//   --same-process: the train table's depths in this process instead of one child process each)
//
// The graph (issue 19): x (3x3) -> N times sg::map(tanh(softplus(v) - 0.5)) -> sum. softplus reads its input
// twice, so the N chained Map nodes inline into one kernel whose expression DAG has ~N distinct nodes but 2^N
// root-to-leaf paths: any walk of the tree view is exponential. Rows: schedule() alone (fusion decisions, kernel
// IR lowering, cost and loop-budget queries), GLSL 4.50 emission of every kernel (and its size) for the fragment
// target and for the compute target (schedule with compute_schedule_options + emit_compute_kernel, default
// ComputeLimits), and
// Backend::compile (schedule + emission + glslang -> SPIR-V -> SPIRV-Cross + GL compile/link) and the first run (a
// driver that compiles lazily does it there), plus the result of that run checked against the CPU reference.
//
// The train table (issue 35): a param w (3x3) multiplied in (x @ w), the same chain, mean -> loss, and
// make_train_step with SGD (or Adam): the backward chain reads every forward layer's value, so the graph has
// ~3N Map nodes. One table per backend, one column per depth, one row per phase: make_train_step (autodiff),
// schedule() with the backend's target (sg::schedule_options of the "llvmpipe" caps preset, what the backends get
// on this machine's Mesa drivers), emission of every kernel for that target, Backend::compile (which schedules and
// emits again, then glslang -> SPIR-V -> SPIRV-Cross and the driver's compile), the first run (a driver that
// compiles lazily does it here), the kernels per step and how many distinct codes (kernel_code_key: what a backend
// compiles), then the loss and the updated w against the CPU reference. Each depth runs in a child process of its own
// (Mesa keeps compiled state per process: a deeper chain's kernels, equal to a shallower one's, would compile warm),
// whose driver start-up (a one-kernel program compiled and run first) is a row of its own, not in compile+run.
// Mesa's on-disk shader cache is turned off (MESA_SHADER_CACHE_DISABLE=true unless set): the driver compiles.
// Timings are printed, never asserted (tests/test_kernel_ir.cpp asserts the walks' node visits instead;
// tests/test_compile_time.cpp bounds a train step of depth 300).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <set>

#include <sys/wait.h>
#include <unistd.h>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/emit.h"
#include "sg/schedule.h"
#include "sg/sg.h"
#include "sg/target.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

sg::Tensor layers(sg::Tensor y, int n) {
  for (int i = 0; i < n; ++i) y = sg::map([](auto v) { return sg::tanh(sg::softplus(v) - 0.5); }, y);
  return y;
}

sg::Program chain(int n) {
  sg::Tensor x = sg::input("x", {3, 3});
  sg::Program p;
  p.add_output("sum", sg::sum(layers(x, n)));
  return p;
}

const std::vector<float> kXs = {-3.f, -1.f, -0.25f, 0.f, 0.5f, 1.f, 2.f, 4.f, 9.f};
const std::vector<float> kW0 = {0.5f, -0.25f, 0.125f, 0.75f, 0.f, -0.5f, 0.25f, 1.f, -1.f};

/// The train step of depth n: loss = mean(chain(x @ w)); w a fresh param (each depth's own persistent value).
struct TrainStep {
  sg::Tensor w;
  sg::Program program;
};
TrainStep train_step(int n, const std::string& optimizer) {
  sg::Tensor x = sg::input("x", {3, 3});
  sg::Tensor w = sg::param("w", {3, 3}, kW0);
  sg::Tensor loss = sg::mean(layers(sg::matmul(x, w), n));
  auto opt = optimizer == "adam" ? sg::make_adam({.lr = 0.1}) : sg::make_sgd({.lr = 0.5});
  return {w, sg::make_train_step(loss, {w}, *opt)};
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
  return d;
}

/// The target a backend kind compiles for on this machine's Mesa drivers (llvmpipe, lavapipe).
sg::Target target_of(const std::string& kind) {
  const sg::DeviceCaps caps = sg::preset_caps("llvmpipe");
  if (kind == "gles") return sg::make_target(sg::TargetName::GlslEsFragment, caps);
  if (kind == "gles-compute") return sg::make_target(sg::TargetName::GlslEsCompute, caps);
  if (kind == "vulkan") return sg::make_target(sg::TargetName::SpirvVulkan, caps);
  return sg::make_target(sg::TargetName::Cpu, caps);
}

/// kind "none": schedule and emission only. Each depth gets a backend of its own (see train_table).
void forward_table(const std::string& kind, sg::Backend& cpu, const std::vector<int>& depths) {
  const bool compile = kind != "none";
  fmt::print("bench_compile_depth: x(3x3) -> N x map(tanh(softplus(v) - 0.5)) -> sum; backend {}\n\n",
             compile ? sg::make_backend({.kind = kind}).backend->device() : "none");
  fmt::print("| {:>5} | {:>7} | {:>12} | {:>9} | {:>11} | {:>17} | {:>13} | {:>12} | {:>12} | {:>14} | {:>14} |\n", "N",
             "kernels", "schedule ms", "emit ms", "GLSL bytes", "compute sched+emit", "compute bytes", "compile ms",
             "first run ms", "result", "cpu reference");
  fmt::print("|{:-<7}|{:-<9}|{:-<14}|{:-<11}|{:-<13}|{:-<19}|{:-<15}|{:-<14}|{:-<14}|{:-<16}|{:-<16}|\n", "", "", "", "", "",
             "", "", "", "", "", "");
  const sg::ComputeLimits limits;
  for (int n : depths) {
    sg::Program p = chain(n);
    auto t0 = Clock::now();
    sg::Plan plan = sg::schedule(p);
    double sched_ms = ms_since(t0);
    t0 = Clock::now();
    size_t glsl_bytes = 0;
    for (const sg::Kernel& k : plan.kernels) glsl_bytes += sg::emit_glsl450(plan, k, sg::ShaderStage::Fragment).size();
    double emit_ms = ms_since(t0);
    t0 = Clock::now();
    sg::Plan cplan = sg::schedule(p, sg::compute_schedule_options(limits));
    size_t compute_bytes = 0;
    for (const sg::Kernel& k : cplan.kernels) compute_bytes += sg::emit_compute_kernel(cplan, k, limits).source.size();
    double compute_ms = ms_since(t0);
    double compile_ms = 0, run_ms = 0;
    float got = NAN;
    if (compile) {
      std::unique_ptr<sg::Backend> be = sg::make_backend({.kind = kind}).backend;
      t0 = Clock::now();
      auto exe = be->compile(p);
      compile_ms = ms_since(t0);
      t0 = Clock::now();
      got = exe->run({{"x", &kXs}})[0][0];
      run_ms = ms_since(t0);
    }
    float want = cpu.compile(p)->run({{"x", &kXs}})[0][0];
    fmt::print(
        "| {:>5} | {:>7} | {:>12.2f} | {:>9.2f} | {:>11} | {:>17.2f} | {:>13} | {:>12.2f} | {:>12.2f} | {:>14.7g} | {:>14.7g} |\n",
        n, plan.kernels.size(), sched_ms, emit_ms, glsl_bytes, compute_ms, compute_bytes, compile_ms, run_ms, got, want);
    std::fflush(stdout);
  }
  fmt::print("\n");
}

/// One depth's column of the train table (the rows of kTrainRows); total_s: its timed phases added up.
std::vector<std::string> train_column(const std::string& kind, bool compile, int n, const std::string& optimizer,
                                      double& total_s) {
  const sg::Target target = target_of(kind);
  const sg::ScheduleOptions so = sg::schedule_options(target, {});
  const bool compute = target.stage == sg::TargetStage::Compute;
  // the driver's one-time start-up in this process (Mesa: LLVM's, at the first shader), timed apart: a one-kernel
  // program compiled and run on a backend of its own
  double startup_ms = 0;
  if (compile) {
    auto be = sg::make_backend({.kind = kind}).backend;
    sg::Tensor x = sg::input("x", {3, 3});
    sg::Program p;
    p.add_output("y", x + 1.0);
    const auto t0 = Clock::now();
    be->compile(p)->run({{"x", &kXs}});
    startup_ms = ms_since(t0);
  }
  auto t0 = Clock::now();
  TrainStep ts = train_step(n, optimizer);
  const double grad_ms = ms_since(t0);
  t0 = Clock::now();
  sg::Plan plan = sg::schedule(ts.program, so);
  const double sched_ms = ms_since(t0);
  t0 = Clock::now();
  size_t bytes = 0, max_bytes = 0;
  for (const sg::Kernel& k : plan.kernels) {
    size_t b = compute ? sg::emit_compute_kernel(plan, k, target.compute).source.size()
                       : sg::emit_glsl450(plan, k, sg::ShaderStage::Fragment).size();
    bytes += b;
    max_bytes = std::max(max_bytes, b);
  }
  const double emit_ms = ms_since(t0);
  std::set<std::string> codes;  // what a backend compiles: one program per kernel_code_key
  for (const sg::Kernel& k : plan.kernels)
    codes.insert(sg::kernel_code_key(plan, k, [&] {
      return compute ? sg::emit_compute_kernel(plan, k, target.compute).source
                     : sg::emit_glsl450(plan, k, sg::ShaderStage::Fragment);
    }));
  double compile_ms = 0, run_ms = 0;
  std::vector<std::string> col;
  if (compile) {
    std::unique_ptr<sg::Backend> be = sg::make_backend({.kind = kind}).backend;
    t0 = Clock::now();
    auto exe = be->compile(ts.program);
    compile_ms = ms_since(t0);
    t0 = Clock::now();
    const float loss = exe->run({{"x", &kXs}})[0][0];
    run_ms = ms_since(t0);
    const std::vector<float> w = be->read(ts.w);
    auto cpu = sg::make_cpu_backend();
    float loss_cpu = cpu->compile(ts.program)->run({{"x", &kXs}})[0][0];
    const std::vector<float> w_cpu = cpu->read(ts.w);
    col = {fmt::format("{:.1f}", startup_ms), fmt::format("{:.1f}", grad_ms), fmt::format("{:.1f}", sched_ms),
           fmt::format("{:.1f}", emit_ms),    fmt::format("{:.1f}", compile_ms), fmt::format("{:.1f}", run_ms),
           fmt::format("{:.1f}", compile_ms + run_ms), fmt::format("{}", exe->kernels_per_step()),
           fmt::format("{}", codes.size()),   fmt::format("{}", max_bytes), fmt::format("{}", bytes),
           fmt::format("{:.7g}", loss),       fmt::format("{:.7g}", loss_cpu),
           fmt::format("{:.2g}", max_abs_diff(w, w_cpu))};
  } else {
    col = {"-", fmt::format("{:.1f}", grad_ms), fmt::format("{:.1f}", sched_ms), fmt::format("{:.1f}", emit_ms), "-",
           "-", "-", fmt::format("{}", plan.kernels.size()), fmt::format("{}", codes.size()),
           fmt::format("{}", max_bytes), fmt::format("{}", bytes), "-", "-", "-"};
  }
  total_s = (grad_ms + sched_ms + emit_ms + compile_ms + run_ms) / 1000;
  return col;
}

/// train_column in a child process (fork), so that nothing a driver keeps per process (Mesa's in-memory caches, the
/// programs of the earlier depths) makes a deeper chain's compile warm. The parent never opens a device.
std::vector<std::string> train_column_forked(const std::string& kind, bool compile, int n,
                                             const std::string& optimizer, double& total_s) {
  int fd[2];
  if (pipe(fd) != 0) return train_column(kind, compile, n, optimizer, total_s);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    std::string out;
    try {
      double t = 0;
      for (const std::string& c : train_column(kind, compile, n, optimizer, t)) out += c + "\n";
      out += fmt::format("{}\n", t);
    } catch (const std::exception& e) {
      out = fmt::format("error: {}\n", e.what());
    }
    for (size_t done = 0; done < out.size();) {
      const ssize_t w = write(fd[1], out.data() + done, out.size() - done);
      if (w <= 0) break;
      done += static_cast<size_t>(w);
    }
    _exit(0);
  }
  close(fd[1]);
  std::string in;
  char buf[4096];
  for (ssize_t r; (r = read(fd[0], buf, sizeof buf)) > 0;) in.append(buf, static_cast<size_t>(r));
  close(fd[0]);
  waitpid(pid, nullptr, 0);
  std::vector<std::string> lines;
  std::stringstream ss(in);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  if (lines.empty() || lines[0].starts_with("error:")) {
    fmt::print(stderr, "bench_compile_depth: {} N={}: {}\n", kind, n, lines.empty() ? "the child died" : lines[0]);
    std::exit(1);
  }
  total_s = std::atof(lines.back().c_str());
  lines.pop_back();
  return lines;
}

const char* kTrainRows[] = {"driver start-up ms", "make_train_step ms", "schedule ms",     "emit ms",
                            "Backend::compile ms", "first run ms",     "compile+run ms",  "kernels",
                            "distinct codes",     "max kernel bytes",   "source bytes",    "loss",
                            "loss cpu",           "max |w - w cpu|"};

/// compile == false (--schedule-only): make_train_step, schedule and emission only. Each depth runs in a process of
/// its own (same_process: in this one, with a backend of its own).
void train_table(const std::string& kind, bool compile, bool same_process, const std::vector<int>& depths,
                 const std::string& optimizer, double skip_after_s) {
  const sg::Target target = target_of(kind);
  std::vector<std::string> head{"phase"};
  std::vector<std::vector<std::string>> rows;
  for (const char* n : kTrainRows) rows.push_back({n});
  fmt::print("bench_compile_depth train step: x(3x3) @ w(3x3) -> N x map(tanh(softplus(v) - 0.5)) -> mean -> {}; "
             "backend {}, target {}{}\n",
             optimizer, kind, sg::target_name(target.name),
             compile ? (same_process ? "; depths in this process" : "; each depth in a fresh process") : ", not compiled");
  std::fflush(stdout);
  for (int n : depths) {
    head.push_back(fmt::format("N={}", n));
    double total_s = 0;
    const std::vector<std::string> col = compile && !same_process
                                             ? train_column_forked(kind, compile, n, optimizer, total_s)
                                             : train_column(kind, compile, n, optimizer, total_s);
    for (size_t r = 0; r < rows.size(); ++r) rows[r].push_back(col.at(r));
    fmt::print(stderr, "  {} N={}: {:.1f} s\n", kind, n, total_s);
    if (total_s > skip_after_s && n != depths.back()) {
      fmt::print("(deeper chains skipped: N={} took {:.0f} s, more than --skip-after {:.0f})\n", n, total_s,
                 skip_after_s);
      break;
    }
  }
  std::vector<size_t> width(head.size(), 0);
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (size_t c = 0; c < cells.size(); ++c)
      s += c == 0 ? fmt::format(" {:<{}} |", cells[c], width[c]) : fmt::format(" {:>{}} |", cells[c], width[c]);
    fmt::print("{}\n", s);
  };
  line(head);
  std::string sep = "|";
  for (size_t w : width) sep += std::string(w + 2, '-') + "|";
  fmt::print("{}\n", sep);
  for (auto& r : rows) line(r);
  fmt::print("\n");
  std::fflush(stdout);
}

[[noreturn]] void usage() {
  fmt::print(stderr,
             "usage: bench_compile_depth [--backend gles|gles-compute|vulkan|cpu|none|all]... [--forward | --train] "
             "[--optimizer sgd|adam] [--skip-after SECONDS] [--schedule-only] [--same-process] [N ...]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> backends;
  std::vector<int> depths;
  bool forward = true, train = true, schedule_only = false, same_process = false;
  std::string optimizer = "sgd";
  double skip_after_s = 120;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      for (std::string b; std::getline(ss, b, ',');) {
        if (b == "all")
          backends.insert(backends.end(), {"gles", "gles-compute", "vulkan"});
        else
          backends.push_back(b);
      }
    } else if (a == "--forward") {
      train = false;
    } else if (a == "--train") {
      forward = false;
    } else if (a == "--schedule-only") {
      schedule_only = true;
    } else if (a == "--same-process") {
      same_process = true;
    } else if (a == "--optimizer" && i + 1 < argc) {
      optimizer = argv[++i];
      if (optimizer != "sgd" && optimizer != "adam") usage();
    } else if (a == "--skip-after" && i + 1 < argc) {
      skip_after_s = std::atof(argv[++i]);
    } else {
      int v = std::atoi(a.c_str());
      if (v < 1) usage();
      depths.push_back(v);
    }
  }
  if (backends.empty()) backends = {"gles"};
  // Mesa keeps compiled shaders on disk (~/.cache/mesa_shader_cache): a second run would time cache hits, not the
  // driver's compile. Off unless the caller sets it.
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 0);
  fmt::print("MESA_SHADER_CACHE_DISABLE={}\n", std::getenv("MESA_SHADER_CACHE_DISABLE"));
  // the train tables first: their depths run in child processes, forked before this one opens any device
  for (const std::string& kind : backends)
    if (train && kind != "none" && kind != "cpu")
      train_table(kind, !schedule_only, same_process,
                  depths.empty() ? std::vector<int>{10, 30, 100, 300, 1000, 3000} : depths, optimizer, skip_after_s);
  std::unique_ptr<sg::Backend> cpu = sg::make_cpu_backend();
  for (const std::string& kind : backends)
    if (forward)
      forward_table(kind, *cpu, depths.empty() ? std::vector<int>{8, 16, 24, 30, 64, 128, 256, 512, 1000} : depths);
  return 0;
}
