// bench_ops — end-to-end benchmarks of shadergrad's backends (issue 8), printed as tables and optionally as JSON.
//
// Usage: bench_ops [--backend gles|gles-compute|vulkan|cpu|both|all|LIST] [--json FILE] [--repeats N] [--warmup N]
//                  [--large] [--sgemm N,N,...] [--only CASE,CASE,...] [--max-seconds S] [--probe-side N]
//
//   --backend      which backends run the timed cases (default gles; "both" = gles then cpu; "all" = gles,
//                  gles-compute, vulkan, cpu; or a comma-separated list such as gles,vulkan,cpu-simd). gles-compute rows run
//                  the GLES 3.1 compute kernels (tiled matmul/conv) in the same EGL context, --compute-tiles picks
//                  their tile sizes; Vulkan steps are recorded once per parity and replayed (env SG_VULKAN_DEVICE
//                  picks the device)
//   --json FILE    also write every row (and the machine/date/load) as JSON (bench/run_all.sh joins it with
//                  bench/peers.py's JSON)
//   --repeats N    timed repeats per case (default 10); --warmup N untimed runs first (default 2)
//   --max-seconds  stop repeating a case once its timed runs add up to S seconds (at least 3 repeats; default 30)
//   --large        adds SGEMM N = 2048;  --sgemm LIST replaces the SGEMM sizes (e.g. 1024,2048,4096)
//   --only LIST    cases to run: sgemm, mlp, mlp-dropout, cnn, charlm, lstm, resnet, fusion, compile, cpuref, profile,
//                  probe (default all). charlm and lstm: the word models' train step (AdamW, clipping) on the first 32
//                  words of /usr/share/dict/words at context 64; resnet: the train CLI's ResNet-8 at b=64
//   --probe-side N the fragment ALU and fetch probes render N x N texels (default: 256 on llvmpipe, else 4096)
//   --probe-sgemm N  N of the hand-written MRT SGEMM probes (a multiple of 32; default: 256 on llvmpipe, else 4096)
//   --max-outputs N render targets per kernel of the GLES backends (0 = device limit; 1 = without multi-output
//                  fusion, the schedule of before it, for same-run comparisons)
//   --min-parallel N split-K threshold in output texels (4 outputs each) of every backend (default: auto; GLES
//                  16384 on GPUs, compute backends 256 x the device's compute units, 0 = off on llvmpipe/lavapipe)
//   --row-layout B  texture layouts keep tensor rows whole in texture rows (1) or wrap at the max width (0)
//                  (default: auto = 1 on GPUs, 0 on llvmpipe)
//   --row-planes N  matmul-like kernels compute N rows per fragment into N render targets (1 = off)
//                  (default: auto = 4)
//   --col-planes N  1 = off, 2 = kernels with row planes also compute 2 texels per row (a 4 x 8 tile per fragment
//                  with 4 row planes; BackendOptions::col_planes) (default: auto = 2)
//   --union-domains B  union-domain kernels (independent kernels of different shapes drawn as one) on (1) or off
//                  (0) in the GLES backend (default: auto = on for GPUs, off on llvmpipe) and in the compute backends
//                  (small independent kernels as one dispatch; default: on); the fusion table's columns are on unless
//                  0 is given
//   --reduce-tree B  compute backends: reductions to a few outputs over a long axis as a two-stage tree (1) or not (0)
//                  (BackendOptions::reduce_tree; default: auto = on for GPUs, off for lavapipe/llvmpipe)
//   --flush-draws B  glFlush after the uploads and every draw of a run (1) or not (0) (default: auto = on for GPUs,
//                  off for llvmpipe)
//   --compute-tiles T  gles-compute tile sizes: -1 = the device's class (default), 0 = CPU sizes, 1 = GPU sizes
//   --fresh-vulkan  vulkan: new Vulkan backends (a new VkInstance and VkDevice) before every case, so that no case
//                  runs on memory, pipelines or descriptor pools that an earlier case left (A/B of the order effect
//                  of docs/perf-log/12b.md; env SG_VULKAN_MEMORY=blocks|dedicated picks the buffer placement)
//   --vk-repeats R  vulkan: every run() dispatches its kernels R times back to back before its one readback
//                  (VulkanOptions::repeat_dispatches; the outputs are those of one run), so the GPU stays busy (a GPU
//                  idle between short runs is clocked down by its driver: docs/perf-log/13.md); SGEMM GFLOP/s
//                  then count R x 2 N^3 per run, kernel-only times are per dispatch; default 1
//   --reduce-rows LIST  rows R of the reduce case's R x C inputs (default: 1024,8191 on GPUs, 250 on CPU devices)
//   --autotune B   vulkan: 1 = time every tiled kernel's tile candidates on the device and run the fastest
//                  (BackendOptions::autotune; winners kept in SG_KERNEL_CACHE, a temporary directory when unset, so
//                  the profiled backend runs the same configs), 0 = the heuristic tiles (default: env SG_AUTOTUNE)
//
// Cases (each timed with warm-up runs first, then median and min-max over the repeats; a run() reads the program
// outputs back, which waits for the GPU, so every timing is synchronised):
//   sgemm      C = A @ B, N x N fp32, A and B constants on the device, C read back. GFLOP/s = 2 N^3 / median.
//              GLES rows also give the kernel-only time from a profiled backend (GL timer query when available;
//              skipped when one run takes over 5 s; flagged "implausible" when it is under half the wall time, as
//              llvmpipe's timer queries report for this kernel).
//              Check: full comparison with the CPU reference executor (sg::cpu::evaluate) for N <= 1024 on GLES,
//              and for every backend and N an f64 dot product for 4096 random elements plus the last row and
//              column; |err| is normalised by sum_k |a_ik b_kj| and must be <= 1e-4.
//   mlp        784-128-10 MLP train step (forward + backward + Adam, cross entropy), batch 32 and 128.
//   mlp-dropout  the same MLP with nn::Dropout(0.2) after its ReLU (a new mask every step from the layer's step
//              counter, regenerated in the backward kernels), batch 128: what the random numbers cost a step.
//   cnn        seed 002's CNN, make_cnn(8, 16, 32) on 1x8x8 inputs, train step (Adam), batch 64.
//              Train-step check (GLES): two steps from the same initial parameters on the GLES backend and on the
//              CPU reference backend; the losses and every parameter after the steps must agree within
//              1e-5 + 1e-4 |ref| (loss: 1e-4 (1 + |ref|)).
//   fusion     kernels per train step as scheduled (fused) and with ScheduleOptions{{.unfused = true}}.
//   compile    every kernel of the MLP batch-128 train step through KernelCache: cold compile (glslang ->
//              SPIR-V -> SPIRV-Cross, fresh memory-only cache), memory hit, disk hit (fresh cache on a temporary
//              directory); and Backend::compile of the whole step on a fresh backend vs the same backend again.
//   cpuref     the CPU reference backend running the MLP forward pass (logits), batch 128.
//   reduce     (only with --only reduce) sum, max, min and mean of an R x C constant over its rows (axis 1: R outputs; C = 4095 for
//              R <= 1024, else 1023) and over all of it (R = the first of --reduce-rows), checked against the CPU
//              reference (max/min exactly, sum/mean within 1e-4 of sum |x|); kernel-only time from the profiled
//              backend; the JSON names each kernel's strategy (tree-reduction[+subgroups]: env SG_VULKAN_SUBGROUPS=0
//              turns subgroup operations off).
//   roofline   (vulkan) the compute ALU and bandwidth probes (hand-written kernels), then per Vulkan row the
//              achieved GFLOP/s and GB/s (FLOPs and compulsory bytes of the program, bench/vulkan_probes.h) against
//              the bound min(ALU, FLOP/byte x bandwidth); SGEMM rows at their kernel-only time.
//   profile    (vulkan) per-kernel Vulkan timestamps of the MLP b=32, b=128 and CNN b=64 steps with each kernel's
//              strategy and tile config and the gaps between kernels;
//              (gles) per-kernel times of the MLP batch-128 and CNN batch-64 train steps, median over the repeats, two
//              ways: Executable::last_timings() on a profiled GLES backend, and a kernel hook that reads every
//              kernel's outputs back as soon as it is drawn (driver-independent; includes those readbacks, summed over a
//              multi-output kernel's outputs).
//   probe      fragment ALU ceiling: one fragment shader with 8 independent vec4 FMA chains per fragment
//              (2 flops per lane per step), timed with glFinish; its result is checked against a CPU emulation.
//              Fragment texel-fetch ceiling: 8 x 64 independent RGBA32F texelFetches per fragment from a 1 MiB
//              texture (Gtexel/s; exact sums of small integers, 64 texels checked for equality), with two address
//              patterns: "spread" (every fragment of a quad a different texel) and "matmul" (texels shared along rows
//              and columns).
//              Hand-written MRT SGEMM probes (not our generated code): R x C output texels per fragment into
//              R*C render targets, R + 4C fetches per 32*R*C flops, as FMA chains for (R, C) = (1,1), (4,1), (4,2),
//              (8,1), (2,4) and as the generated kernels sum ("tree": pairwise sums of 4 products, then one add) for
//              (4,1), (4,2), (8,1); checked like the sgemm case; the JSON gives flop/fetch and the implied Gtexel/s.
// Exit status: 0 when every correctness check passed, 1 when one failed (the row says FAIL), 2 on bad arguments.
// Timings are only printed here, never asserted.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/cpu_reference.h"
#include "sg/datasets.h"
#include "sg/emit.h"
#include "sg/error.h"
#include "sg/gles_device.h"
#include "sg/kernel_cache.h"
#include "sg/lm.h"
#include "sg/nn.h"
#include "sg/schedule.h"
#include "sg/sg.h"
#include "sg/vulkan_device.h"
#include "vulkan_probes.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// ------------------------------------------------------------------------------------------------
// Options
// ------------------------------------------------------------------------------------------------

struct Options {
  std::vector<std::string> backends{"gles"};
  std::string json_path;
  int repeats = 10;
  int warmup = 2;
  double max_seconds = 30;
  std::vector<int64_t> sgemm{256, 512, 1024};
  std::set<std::string> only;
  int64_t probe_side = 0;
  int64_t probe_sgemm = 0;  // N of the hand-written MRT SGEMM probes (0 = 256 on llvmpipe, else 4096)
  /// The GLES backends' options (--max-outputs, --min-parallel, --row-layout, --row-planes, --col-planes,
  /// --union-domains, --flush-draws); unset = auto (sg::schedule_options decides per device).
  sg::BackendOptions gles{.kind = "gles"};
  std::optional<bool> autotune;   // BackendOptions::autotune of the Vulkan backends (--autotune; unset = env SG_AUTOTUNE)
  std::optional<bool> gpu_tiles;  // BackendOptions::gpu_tiles of the compute backends (--compute-tiles; unset = the device's class)
  std::optional<bool> reduce_tree;  // BackendOptions::reduce_tree of the compute backends (--reduce-tree; unset = auto)
  bool fresh_vulkan = false;      // --fresh-vulkan
  int vk_repeats = 1;             // --vk-repeats
  std::vector<int64_t> reduce_rows;  // --reduce-rows (empty = by device class)
  /// --profile-steps: the train steps of the Vulkan per-kernel profile (MODEL:BATCH; default mlp:32,mlp:128,cnn:64)
  std::vector<std::pair<std::string, int64_t>> profile_steps{{"mlp", 32}, {"mlp", 128}, {"cnn", 64}};
  std::string plan_table;  // --plan-table MODEL:BATCH: print the GPU Vulkan plan's kernels and exit (no device)
  bool wants(const std::string& c) const { return only.empty() || only.count(c) != 0; }
};

[[noreturn]] void usage(const std::string& why) {
  fmt::print(stderr,
             "bench_ops: {}\nusage: bench_ops [--backend gles|gles-compute|vulkan|cpu-simd|cpu|both|all|LIST] [--json FILE] [--repeats N] [--warmup N]\n"
             "                 [--large] [--sgemm N,N,..] [--only sgemm,mlp,cnn,charlm,lstm,resnet,fusion,compile,cpuref,profile,probe]\n"
             "                 [--max-seconds S] [--probe-side N] [--probe-sgemm N] [--max-outputs N] [--min-parallel N]\n"
             "                 [--row-layout 0|1] [--row-planes N] [--col-planes 1|2] [--union-domains 0|1] [--reduce-tree 0|1] [--flush-draws 0|1]\n"
             "                 [--compute-tiles -1|0|1] [--autotune 0|1] [--fresh-vulkan] [--vk-repeats R] [--reduce-rows R,R,..]\n"
             "                 [--profile-steps MODEL:B,..] [--plan-table MODEL:B]\n",
             why);
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int64_t parse_int(const std::string& s, const char* what) {
  try {
    size_t pos = 0;
    long long v = std::stoll(s, &pos);
    if (pos != s.size() || v < 0) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    usage(fmt::format("{} expects a non-negative integer, got '{}'", what, s));
  }
}

/// A 0|1 switch's value (exits with the usage message otherwise).
bool parse_switch(const std::string& s, const char* what) {
  const int64_t v = parse_int(s, what);
  if (v > 1) usage(fmt::format("{} must be 0 or 1, got {}", what, v));
  return v == 1;
}

Options parse(int argc, char** argv) {
  Options o;
  bool large = false, sizes_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--backend") {
      std::string b = value();
      if (b == "both") o.backends = {"gles", "cpu"};
      else if (b == "all") o.backends = {"gles", "gles-compute", "vulkan", "cpu"};
      else {
        o.backends = split(b);  // one backend or a comma-separated list ("gles,vulkan")
        for (auto& x : o.backends)
          if (x != "gles" && x != "gles-compute" && x != "vulkan" && x != "cpu-simd" && x != "cpu")
            usage("--backend must be gles, gles-compute, vulkan, cpu-simd, cpu, a comma-separated list of them, both "
                  "(gles,cpu) or all, got '" + b + "'");
      }
    } else if (a == "--json") {
      o.json_path = value();
    } else if (a == "--repeats") {
      o.repeats = static_cast<int>(std::max<int64_t>(1, parse_int(value(), "--repeats")));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(parse_int(value(), "--warmup"));
    } else if (a == "--max-seconds") {
      o.max_seconds = static_cast<double>(parse_int(value(), "--max-seconds"));
    } else if (a == "--large") {
      large = true;
    } else if (a == "--sgemm") {
      o.sgemm.clear();
      for (auto& s : split(value())) o.sgemm.push_back(std::max<int64_t>(1, parse_int(s, "--sgemm")));
      sizes_given = true;
    } else if (a == "--only") {
      static const std::set<std::string> known{"sgemm",   "mlp",     "mlp-dropout", "cnn",      "charlm", "lstm",
                                               "resnet",  "fusion",  "compile",     "cpuref",   "profile",
                                               "roofline", "probe",  "reduce"};
      for (auto& c : split(value())) {
        if (!known.count(c)) usage("unknown case '" + c + "' in --only");
        o.only.insert(c);
      }
    } else if (a == "--probe-side") {
      o.probe_side = parse_int(value(), "--probe-side");
    } else if (a == "--probe-sgemm") {
      o.probe_sgemm = parse_int(value(), "--probe-sgemm");
      if (o.probe_sgemm % 32 != 0 || o.probe_sgemm == 0)
        usage(fmt::format("--probe-sgemm must be a positive multiple of 32, got {}", o.probe_sgemm));
    } else if (a == "--max-outputs") {
      o.gles.max_outputs = static_cast<int>(parse_int(value(), "--max-outputs"));
      if (*o.gles.max_outputs == 0) o.gles.max_outputs.reset();  // 0 = device limit
    } else if (a == "--min-parallel") {
      o.gles.min_parallel_texels = parse_int(value(), "--min-parallel");
    } else if (a == "--row-layout") {
      o.gles.row_layout = parse_switch(value(), "--row-layout");
    } else if (a == "--row-planes") {
      const int64_t v = parse_int(value(), "--row-planes");
      if (v < 1 || v > 8) usage(fmt::format("--row-planes must be 1..8 (1 = off), got {}", v));
      o.gles.row_planes = static_cast<int>(v);
    } else if (a == "--col-planes") {
      const int64_t v = parse_int(value(), "--col-planes");
      if (v < 1 || v > 2) usage(fmt::format("--col-planes must be 1 (off) or 2, got {}", v));
      o.gles.col_planes = static_cast<int>(v);
    } else if (a == "--union-domains") {
      o.gles.union_domains = parse_switch(value(), "--union-domains");
    } else if (a == "--reduce-tree") {
      o.reduce_tree = parse_switch(value(), "--reduce-tree");
    } else if (a == "--flush-draws") {
      o.gles.flush_draws = parse_switch(value(), "--flush-draws");
    } else if (a == "--vk-repeats") {
      o.vk_repeats = static_cast<int>(std::max<int64_t>(1, parse_int(value(), "--vk-repeats")));
    } else if (a == "--fresh-vulkan") {
      o.fresh_vulkan = true;
    } else if (a == "--reduce-rows") {
      for (auto& r : split(value())) o.reduce_rows.push_back(std::max<int64_t>(1, parse_int(r, "--reduce-rows")));
    } else if (a == "--autotune") {
      o.autotune = parse_switch(value(), "--autotune");
    } else if (a == "--compute-tiles") {
      const int64_t v = parse_int(value(), "--compute-tiles");
      if (v < -1 || v > 1) usage(fmt::format("--compute-tiles must be -1 (the device's class), 0 (CPU tiles) or 1 (GPU tiles), got {}", v));
      if (v >= 0) o.gpu_tiles = v == 1;
    } else if (a == "--profile-steps") {
      o.profile_steps.clear();
      for (auto& item : split(value())) {
        const size_t colon = item.find(':');
        if (colon == std::string::npos) usage("--profile-steps expects MODEL:BATCH items, got '" + item + "'");
        o.profile_steps.emplace_back(item.substr(0, colon),
                                     std::max<int64_t>(1, parse_int(item.substr(colon + 1), "--profile-steps")));
      }
    } else if (a == "--plan-table") {
      o.plan_table = value();
      if (o.plan_table.find(':') == std::string::npos) usage("--plan-table expects MODEL:BATCH");
    } else if (a == "-h" || a == "--help") {
      usage("help");
    } else {
      usage("unknown argument '" + a + "'");
    }
  }
  if (large && !sizes_given) o.sgemm.push_back(2048);
  return o;
}

// ------------------------------------------------------------------------------------------------
// Timing and rows
// ------------------------------------------------------------------------------------------------

struct Stat {
  double median = 0, min = 0, max = 0;
  int n = 0;
};

Stat summarize(std::vector<double> v) {
  Stat s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = static_cast<int>(v.size());
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  s.min = v.front();
  s.max = v.back();
  return s;
}

/// Runs f `warmup` times untimed, then up to `repeats` times timed (ms each); stops early once the timed runs
/// add up to max_seconds (after at least 3).
/// `first_ms`: how long a run already made before (the correctness run) took; when it exceeds 2 s that run
/// counts as the warm-up and no further warm-up runs are made (llvmpipe SGEMM N=1024 takes ~20 s a run).
Stat measure(const std::function<void()>& f, const Options& o, double first_ms = 0) {
  const int warmup = first_ms > 2000 ? 0 : o.warmup;
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  double total = 0;
  for (int i = 0; i < o.repeats; ++i) {
    auto t0 = Clock::now();
    f();
    t.push_back(ms_since(t0));
    total += t.back();
    if (t.size() >= 3 && total > o.max_seconds * 1000) break;
  }
  return summarize(t);
}

struct Row {
  std::string key;      ///< join key with peers.py: "sgemm_1024", "mlp_step_b128", ...
  std::string label;    ///< human-readable case
  std::string backend;  ///< "gles" | "gles-compute" | "cpu"
  Stat ms;
  double throughput = 0;
  std::string unit;     ///< "GFLOP/s" | "steps/s" | "runs/s"
  std::string check;    ///< "ok (max err ...)" | "FAIL ..." | "-"
  bool ok = true;
  json extra = json::object();
};

std::vector<Row> g_rows;
json g_tables = json::object();
bool g_failed = false;
sg::Backend* g_vulkan = nullptr;  // the unprofiled Vulkan backend (its device's memory counters go into Vulkan rows)

void print_row_header() {
  fmt::print("| {:<30} | {:<12} | {:>4} | {:>10} | {:>21} | {:>12} | {:<8} | {:<34} |\n", "case", "backend", "reps",
             "median ms", "min - max ms", "throughput", "unit", "check");
  fmt::print("|{:-<32}|{:-<14}|{:-<6}|{:-<12}|{:-<23}|{:-<14}|{:-<10}|{:-<36}|\n", "", "", "", "", "", "", "", "");
}

void add_row(Row r) {
  if (!r.ok) g_failed = true;
  if (r.backend == "vulkan" && g_vulkan) {  // what the device held when the case ended (its executable still alive)
    const sg::vk::LiveObjects l = sg::vulkan_device(*g_vulkan).live_objects();
    r.extra["vk_memory"] = {{"buffers", l.buffers}, {"memory_objects", l.memory_blocks},
                            {"dedicated", l.dedicated_allocations}, {"device_memory_bytes", l.device_memory_bytes},
                            {"bound_bytes", l.allocated_bytes}, {"pipelines", l.pipelines}};
  }
  fmt::print("| {:<30} | {:<12} | {:>4} | {:>10.3f} | {:>10.3f} - {:>8.3f} | {:>12.2f} | {:<8} | {:<34} |\n", r.label,
             r.backend, r.ms.n, r.ms.median, r.ms.min, r.ms.max, r.throughput, r.unit, r.check);
  if (r.extra.contains("phase_ms")) {
    std::string ph;
    for (auto& [name, ms] : r.extra["phase_ms"].items()) ph += fmt::format("{} {:.3f} ms, ", name, ms.get<double>());
    fmt::print("|   run() phases, median of 7: {:<150} |\n", ph.substr(0, ph.size() - 2));
  }
  std::fflush(stdout);
  g_rows.push_back(std::move(r));
}

json row_json(const Row& r) {
  json j = {{"key", r.key},
            {"label", r.label},
            {"backend", r.backend},
            {"median_ms", r.ms.median},
            {"min_ms", r.ms.min},
            {"max_ms", r.ms.max},
            {"repeats", r.ms.n},
            {"throughput", r.throughput},
            {"unit", r.unit},
            {"check", r.check},
            {"ok", r.ok}};
  for (auto& [k, v] : r.extra.items()) j[k] = v;
  return j;
}

std::string human_bytes(int64_t b) {
  if (b >= (int64_t{1} << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(b) / (1 << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
  return fmt::format("{} B", b);
}

// ------------------------------------------------------------------------------------------------
// Backends
// ------------------------------------------------------------------------------------------------

struct Backends {
  std::unique_ptr<sg::Backend> gles, gles_profiled, compute, compute_profiled, cpu;
  std::unique_ptr<sg::Backend> vulkan, vulkan_profiled;  // --backend vulkan: steps recorded once, replayed
  std::unique_ptr<sg::Backend> cpu_simd, cpu_simd_profiled;  // --backend cpu-simd: C kernels on the host's threads
  std::string renderer, vulkan_device;
};

/// The backend a case runs on. The CPU backend is made fresh for every case: it keys parameter state by Node address
/// without keeping the nodes alive, so a later model whose nodes reuse a freed address would read stale state
/// (seen: "value for param ... has 128 elements, expected 72"); a fresh backend per case sidesteps that.
sg::Backend& backend_named(Backends& b, const std::string& name) {
  if (name == "cpu") {
    b.cpu = sg::make_cpu_backend();
    return *b.cpu;
  }
  if (name == "vulkan") return *b.vulkan;
  if (name == "cpu-simd") return *b.cpu_simd;
  return name == "gles-compute" ? *b.compute : *b.gles;
}

/// The Vulkan backends of the run (unprofiled and profiled), replacing any earlier ones (whose devices go first).
void make_vulkan_backends(Backends& bk, const Options& o) {
  g_vulkan = nullptr;
  bk.vulkan.reset();
  bk.vulkan_profiled.reset();
  sg::BackendOptions bo;
  bo.kind = "vulkan";
  bo.max_outputs = o.gles.max_outputs;
  bo.min_parallel_texels = o.gles.min_parallel_texels;
  bo.union_domains = o.gles.union_domains;
  bo.reduce_tree = o.reduce_tree;
  bo.gpu_tiles = o.gpu_tiles;
  bo.autotune = o.autotune;
  bo.vulkan.repeat_dispatches = o.vk_repeats;
  const char* tune_env = std::getenv("SG_AUTOTUNE");
  const bool tuning = o.autotune ? *o.autotune : (tune_env && std::string(tune_env) == "1");
  const char* cache_env = std::getenv("SG_KERNEL_CACHE");
  if (tuning && (!cache_env || !*cache_env)) {  // one record store for both backends: the same winners
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("sg_bench_ops_tune_{}", ::getpid());
    ::setenv("SG_KERNEL_CACHE", dir.c_str(), 1);
    fmt::print("autotune on: tuning records in {} (SG_KERNEL_CACHE was unset)\n", dir.string());
  }
  bk.vulkan = sg::make_backend(bo).backend;
  bo.profile = true;
  bk.vulkan_profiled = sg::make_backend(bo).backend;
  bk.vulkan_device = bk.vulkan->device();
  g_vulkan = bk.vulkan.get();
}

std::vector<float> uniform(std::mt19937_64& g, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

std::vector<float> labels(std::mt19937_64& g, int64_t n, int classes) {
  std::uniform_int_distribution<int> d(0, classes - 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(d(g));
  return v;
}

// ------------------------------------------------------------------------------------------------
// SGEMM
// ------------------------------------------------------------------------------------------------

/// Max over checked elements of |c - ref| / (sum_k |a_ik b_kj| + tiny); `checked` elements.
struct GemmCheck {
  double max_err = 0;
  int64_t checked = 0;
};

GemmCheck check_sampled(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c,
                        int64_t n, int64_t samples, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int64_t> d(0, n - 1);
  GemmCheck r;
  const int64_t total = n * n;
  const bool all = samples + 2 * n >= total;
  // Random elements, then the whole last row and last column (edge texels are where layout bugs show).
  const int64_t count = all ? total : samples + 2 * n;
  for (int64_t s = 0; s < count; ++s) {
    int64_t i, j;
    if (all) i = s / n, j = s % n;
    else if (s < samples) i = d(g), j = d(g);
    else if (s < samples + n) i = n - 1, j = s - samples;
    else i = s - samples - n, j = n - 1;
    double acc = 0, mag = 0;
    for (int64_t k = 0; k < n; ++k) {
      double p = static_cast<double>(a[i * n + k]) * static_cast<double>(b[k * n + j]);
      acc += p;
      mag += std::abs(p);
    }
    double err = std::abs(static_cast<double>(c[i * n + j]) - acc) / (mag + 1e-30);
    if (!std::isfinite(c[i * n + j])) err = INFINITY;
    r.max_err = std::max(r.max_err, err);
    ++r.checked;
  }
  return r;
}

void bench_sgemm(Backends& bk, const std::string& backend, int64_t n, const Options& o) {
  std::mt19937_64 g(1000 + n);
  std::vector<float> a = uniform(g, n * n, -1, 1), b = uniform(g, n * n, -1, 1);
  sg::Tensor ta = sg::constant({n, n}, a), tb = sg::constant({n, n}, b);
  sg::Tensor tc = sg::matmul(ta, tb);
  sg::Program p;
  p.add_output("c", tc);
  sg::Backend& be = backend_named(bk, backend);
  auto exe = be.compile(p);
  auto t_first = Clock::now();
  std::vector<float> c = exe->run({})[0];
  const double first_ms = ms_since(t_first);

  // Correctness first: a wrong result makes the row FAIL whatever its speed.
  constexpr double kTol = 1e-4;
  GemmCheck sampled = check_sampled(a, b, c, n, 4096, 7 + n);
  double full_err = -1;
  if (backend != "cpu" && n <= 1024) {
    auto ref = sg::cpu::evaluate({tc.node()}, {})[0];
    full_err = 0;
    for (int64_t i = 0; i < n * n; ++i) {
      // normalise by the magnitude bound of the row/column (cheap proxy: n * max|a| * max|b| <= n)
      double e = std::abs(static_cast<double>(c[i]) - ref[i]) / static_cast<double>(n);
      if (!std::isfinite(c[i])) e = INFINITY;
      full_err = std::max(full_err, e);
    }
  }
  Row r;
  r.key = fmt::format("sgemm_{}", n);
  r.label = fmt::format("SGEMM N={}", n);
  r.backend = backend;
  r.ok = sampled.max_err <= kTol && full_err <= kTol;
  r.check = fmt::format("{} (rel {:.1e} on {}{})", r.ok ? "ok" : "FAIL", sampled.max_err, sampled.checked,
                        full_err >= 0 ? fmt::format(", ref {:.1e}", full_err) : "");
  r.ms = measure([&] { (void)exe->run({}); }, o, first_ms);
  const double flop = 2.0 * static_cast<double>(n) * n * n;
  const int reps = backend == "vulkan" ? o.vk_repeats : 1;  // --vk-repeats: R dispatches per run()
  r.throughput = reps * flop / (r.ms.median * 1e-3) / 1e9;
  r.unit = "GFLOP/s";
  r.extra = {{"n", n}, {"kernels", exe->kernels_per_step()}, {"sampled_rel_err", sampled.max_err},
             {"full_ref_err", full_err}, {"dispatch_repeats", reps}};
  if (const sg::Plan* plan = exe->plan()) r.extra["peak_bytes"] = plan->peak_bytes;

  // Kernel-only time (GLES, Vulkan): the same program on the profiled backend.
  // Skipped when one run takes over 5 s (llvmpipe at N >= 1024: there the wall time is the kernel time, and its
  // timer queries underreport).
  if (const auto* ck = exe->compute_kernels(); ck && !ck->empty()) {
    r.extra["strategy"] = ck->front().strategy;
    r.extra["config"] = ck->front().tiles ? ck->front().tiles->str() : "-";
    r.extra["tuning"] = ck->front().tuning.empty() ? "heuristic" : ck->front().tuning;
  }
  if (const sg::Plan* plan = exe->plan()) {
    const bench_vk::Work w = bench_vk::program_work(*plan);
    r.extra["flop"] = w.flop, r.extra["bytes"] = w.bytes;
  }
  sg::Backend* profiled = backend == "gles"           ? bk.gles_profiled.get()
                          : backend == "gles-compute" ? bk.compute_profiled.get()
                          : backend == "vulkan"       ? bk.vulkan_profiled.get()
                          : backend == "cpu-simd"     ? bk.cpu_simd_profiled.get()
                                                      : nullptr;
  if (profiled && first_ms <= 5000) {
    auto pexe = profiled->compile(p);
    std::vector<double> kms;
    bool gpu_timer = false;
    Options po = o;
    po.repeats = std::min(o.repeats, 5);
    const int skip = first_ms > 2000 ? 0 : po.warmup;
    (void)measure(
        [&] {
          (void)pexe->run({});
          double t = 0;
          for (auto& kt : pexe->last_timings()) {
            t += kt.ms;
            gpu_timer = kt.gpu_timer;
          }
          kms.push_back(t);
        },
        po, first_ms);
    kms.erase(kms.begin(), kms.begin() + std::min<size_t>(kms.size(), static_cast<size_t>(skip)));
    Stat ks = summarize(kms);
    r.extra["kernel_ms"] = ks.median;
    r.extra["kernel_gflops"] = flop / (ks.median * 1e-3) / 1e9;
    r.extra["kernel_timer"] = backend == "vulkan" ? (gpu_timer ? "Vulkan timestamps" : "submit-bounded")
                              : gpu_timer                                    ? "GL timer query"
                                                                             : "glFinish-bounded";
    // A timer query that reports far less than the synchronised wall time of a one-kernel program is not
    // believable (seen on llvmpipe: 0.7 ms reported for a 300 ms draw).
    r.extra["kernel_time_plausible"] = ks.median >= 0.5 * r.ms.median;
  }
  add_row(std::move(r));
}

// ------------------------------------------------------------------------------------------------
// Reductions
// ------------------------------------------------------------------------------------------------

/// One reduction `op` (sum, max, min, mean) of an R x C constant over axis 1 (`full` = over all of it).
void bench_reduce(Backends& bk, const std::string& backend, const std::string& op, int64_t rows, int64_t cols, bool full,
                  const Options& o) {
  std::mt19937_64 g(77 + rows * 31 + cols);
  std::vector<float> x = uniform(g, rows * cols, -1, 1);
  sg::Tensor tx = sg::constant({rows, cols}, x);
  const std::vector<int> axes_v = full ? std::vector<int>{} : std::vector<int>{1};
  const sg::Axes axes(axes_v);
  sg::Tensor ty = op == "sum" ? sg::sum(tx, axes) : op == "max" ? sg::max(tx, axes) : op == "min" ? sg::min(tx, axes) : sg::mean(tx, axes);
  sg::Program p;
  p.add_output("y", ty);
  sg::Backend& be = backend_named(bk, backend);
  auto exe = be.compile(p);
  auto t_first = Clock::now();
  std::vector<float> y = exe->run({})[0];
  const double first_ms = ms_since(t_first);
  const std::vector<double> ref = sg::cpu::evaluate({ty.node()}, {})[0];
  // max/min are exact; sum/mean within 1e-4 of the magnitude sum of the reduced values (per output)
  const int64_t per = full ? rows * cols : cols;
  double err = ref.size() == y.size() ? 0 : INFINITY;
  for (size_t i = 0; i < y.size() && i < ref.size(); ++i) {
    double mag = 0;
    for (int64_t k = 0; k < per; ++k) mag += std::abs(x[static_cast<size_t>(full ? k : static_cast<int64_t>(i) * cols + k)]);
    if (op == "mean") mag /= static_cast<double>(per);
    const double e = std::abs(static_cast<double>(y[i]) - ref[i]);
    err = std::max(err, !std::isfinite(y[i]) ? INFINITY : (op == "max" || op == "min") ? e : e / (mag + 1e-30));
  }
  Row r;
  r.key = fmt::format("reduce_{}_{}x{}{}", op, rows, cols, full ? "_all" : "_axis1");
  r.label = fmt::format("{} {}x{} {}", op, rows, cols, full ? "all" : "axis 1");
  r.backend = backend;
  const double tol = (op == "max" || op == "min") ? 0 : 1e-4;
  r.ok = err <= tol;
  r.check = fmt::format("{} (err {:.1e} on {})", r.ok ? "ok" : "FAIL", err, y.size());
  r.ms = measure([&] { (void)exe->run({}); }, o, first_ms);
  r.throughput = static_cast<double>(rows * cols) * 4 / (r.ms.median * 1e-3) / 1e9;
  r.unit = "GB/s";
  r.extra = {{"rows", rows}, {"cols", cols}, {"full", full}, {"op", op}, {"kernels", exe->kernels_per_step()}, {"err", err}};
  if (const auto* ck = exe->compute_kernels()) {
    json strategies = json::array();
    for (auto& k : *ck) strategies.push_back(k.strategy);
    r.extra["strategies"] = strategies;
  }
  sg::Backend* profiled = backend == "vulkan"         ? bk.vulkan_profiled.get()
                          : backend == "gles-compute" ? bk.compute_profiled.get()
                          : backend == "cpu-simd"     ? bk.cpu_simd_profiled.get()
                                                      : nullptr;
  if (profiled && first_ms <= 5000) {
    auto pexe = profiled->compile(p);
    std::vector<double> kms;
    Options po = o;
    po.repeats = std::min(o.repeats, 5);
    (void)measure(
        [&] {
          (void)pexe->run({});
          double t = 0;
          for (auto& kt : pexe->last_timings()) t += kt.ms;
          kms.push_back(t);
        },
        po, first_ms);
    kms.erase(kms.begin(), kms.begin() + std::min<size_t>(kms.size(), static_cast<size_t>(first_ms > 2000 ? 0 : po.warmup)));
    const Stat ks = summarize(kms);
    r.extra["reduce_kernel_ms"] = ks.median;  // not "kernel_ms": that key puts a row into the SGEMM kernel table
    r.extra["kernel_gbps"] = static_cast<double>(rows * cols) * 4 / (ks.median * 1e-3) / 1e9;
    r.check += fmt::format(", kernels {:.4f} ms", ks.median);
  }
  add_row(std::move(r));
}

/// The reduce case: every op over axis 1 of each R x C of --reduce-rows, then over all of the first.
void bench_reductions(Backends& bk, const std::string& backend, const Options& o, bool cpu_device) {
  std::vector<int64_t> rows = o.reduce_rows;
  if (rows.empty()) rows = cpu_device ? std::vector<int64_t>{250} : std::vector<int64_t>{1024, 8191};
  for (int64_t r : rows)
    for (const char* op : {"sum", "max", "min", "mean"}) bench_reduce(bk, backend, op, r, r <= 1024 ? 4095 : 1023, false, o);
  for (const char* op : {"sum", "max"}) bench_reduce(bk, backend, op, rows.front(), rows.front() <= 1024 ? 4095 : 1023, true, o);
}

// ------------------------------------------------------------------------------------------------
// Train steps
// ------------------------------------------------------------------------------------------------

struct StepSetup {
  std::unique_ptr<sg::nn::Module> model;
  std::unique_ptr<sg::Optimizer> opt;
  sg::Program step;
  std::string label;                                           ///< the row's label ("MLP 784-128-10 train step ...")
  std::vector<std::pair<std::string, std::vector<float>>> inputs;  ///< the step's inputs, a fixed batch
  /// check_step's absolute tolerance of a parameter after two steps (plus 1e-4 |w|). Adam moves a weight by about lr
  /// whatever its gradient's size, so where a gradient is rounding noise (attention over padded rows, a sum that
  /// cancels, below Adam's eps) the backends' summation orders move it differently: the word models' and the
  /// ResNet's rows allow a tenth of lr.
  double param_atol = 1e-5;
  std::vector<sg::Feed> feeds() const {
    std::vector<sg::Feed> f;
    for (const auto& [name, v] : inputs) f.push_back({name, &v});
    return f;
  }
};

/// The word models of `shadergrad train` (sg/lm.h) on the first b training words of the word list at context 64
/// (issue 37's bench: charlm b=32, T=64), AdamW (torch's defaults but lr, weight decay 0.01) with global-norm
/// clipping at 1, as `train --model charlm|lstm` at a constant learning rate; bench/peers.py's lm steps are the same.
StepSetup make_lm_step(const std::string& model, int64_t b) {
  StepSetup s;
  sg::lm::LmSpec spec;
  spec.model = model;
  spec.context = 64;
  s.model = sg::lm::make_lm(spec);
  sg::nn::Rng rng(0);
  s.model->build(rng);
  sg::lm::LmLoss l = sg::lm::lm_loss(*s.model, spec, b);
  const double lr = model == "lstm" ? 1e-2 : 3e-3;
  s.opt = sg::make_adamw({.lr = lr, .weight_decay = 0.01});
  s.param_atol = 1e-5 + 0.1 * lr;
  s.step = sg::make_train_step(l.loss, s.model->parameters(), *s.opt, sg::TrainStepOptions{.clip_grad_norm = 1.0});
  std::vector<std::string> words = sg::data::load_words().train;
  words.resize(static_cast<size_t>(std::min<int64_t>(b, static_cast<int64_t>(words.size()))));
  sg::data::WordRows rows = sg::data::make_word_rows(words, spec.context);
  s.inputs = {{"x", std::move(rows.x)}, {"y", std::move(rows.y)}, {"mask", std::move(rows.mask)}};
  s.label = fmt::format("{} train step (AdamW, clip) b={} T={}", spec.describe(), b, spec.context);
  return s;
}

/// Model "mlp" (1x28x28), "mlp-dropout" (the same with Dropout(0.2) after the ReLU), "cnn" (1x8x8), "resnet" (the
/// train CLI's ResNet-8, 1x28x28) with Adam(lr 1e-3) on a fixed random batch (seeded), or a word model
/// (make_lm_step).
StepSetup make_step(const std::string& model, int64_t b) {
  if (sg::lm::is_lm_model(model)) return make_lm_step(model, b);
  StepSetup s;
  const int64_t hw = model == "cnn" ? 8 : 28;
  if (model == "mlp-dropout") {
    auto m = std::make_unique<sg::nn::Sequential>();
    m->add<sg::nn::Flatten>().add<sg::nn::Linear>(hw * hw, 128).add<sg::nn::ReLU>().add<sg::nn::Dropout>(0.2);
    m->add<sg::nn::Linear>(128, 10);
    s.model = std::move(m);
  } else {
    s.model = sg::nn::make_module(model, 1, hw, hw, 10);
  }
  sg::nn::Rng rng(0);
  s.model->build(rng);
  sg::Tensor x = sg::input("x", {b, 1, hw, hw});
  sg::Tensor y = sg::input("labels", {b}, sg::DType::i32);
  sg::Tensor loss = sg::cross_entropy((*s.model)(x), y);
  s.opt = sg::make_adam({.lr = 1e-3});
  s.step = sg::make_train_step(loss, s.model->parameters(), *s.opt);
  if (model == "resnet") s.param_atol = 1e-5 + 0.1 * 1e-3;  // deep convolutions: gradients of rounding-noise size
  std::mt19937_64 g(42 + b);
  s.inputs = {{"x", uniform(g, b * hw * hw, 0, 1)}, {"labels", labels(g, b, 10)}};
  s.label = fmt::format("{} train step (Adam) b={}",
                        model == "mlp"           ? "MLP 784-128-10"
                        : model == "mlp-dropout" ? "MLP 784-128-10 + Dropout(0.2)"
                        : model == "resnet"      ? "ResNet-8 16-32-64 (BatchNorm, dropout) 28x28"
                                                 : "CNN 8-16-32",
                        b);
  return s;
}

/// Two steps on `be` and on the CPU reference from the same initial values; compares losses and parameters.
/// Leaves `be`'s parameters two steps on.
std::pair<bool, std::string> check_step(sg::Executable& exe, sg::Backend& be, sg::Backend& cpu, const StepSetup& s) {
  auto ref_exe = cpu.compile(s.step);
  const std::vector<sg::Feed> feeds = s.feeds();
  double loss_err = 0, param_err = 0;
  bool ok = true;
  for (int step = 0; step < 2; ++step) {
    float l = exe.run(feeds)[0][0];
    float lr = ref_exe->run(feeds)[0][0];
    double e = std::abs(static_cast<double>(l) - lr);
    loss_err = std::max(loss_err, e);
    if (!(e <= 1e-4 * (1 + std::abs(lr)))) ok = false;
  }
  int64_t bad = 0;
  for (auto& prm : s.model->parameters()) {
    auto got = be.read(prm), want = cpu.read(prm);
    for (size_t i = 0; i < got.size(); ++i) {
      double e = std::abs(static_cast<double>(got[i]) - want[i]);
      param_err = std::max(param_err, e);
      if (!(e <= s.param_atol + 1e-4 * std::abs(want[i]))) ++bad;
    }
  }
  if (bad) ok = false;
  return {ok, fmt::format("{} (loss {:.1e}, params {:.1e}{})", ok ? "ok" : "FAIL", loss_err, param_err,
                          bad ? fmt::format(", {} off", bad) : "")};
}

void bench_step(Backends& bk, const std::string& backend, const std::string& model, int64_t b, const Options& o) {
  StepSetup s = make_step(model, b);
  sg::Backend& be = backend_named(bk, backend);
  auto exe = be.compile(s.step);
  Row r;
  r.key = fmt::format("{}_step_b{}", model, b);
  r.label = s.label;
  r.backend = backend;
  if (backend == "cpu") {
    r.check = "- (is the reference)";
  } else {
    auto ref = sg::make_cpu_backend();  // fresh: see backend_named()
    auto [ok, msg] = check_step(*exe, be, *ref, s);
    r.ok = ok;
    r.check = msg;
  }
  const std::vector<sg::Feed> feeds = s.feeds();
  float last_loss = 0;
  r.ms = measure([&] { last_loss = exe->run(feeds)[0][0]; }, o);
  if (!std::isfinite(last_loss)) {
    r.ok = false;
    r.check += " FAIL: loss not finite";
  }
  r.throughput = 1000.0 / r.ms.median;
  r.unit = "steps/s";
  r.extra = {{"batch", b}, {"model", model}, {"kernels", exe->kernels_per_step()}, {"last_loss", last_loss}};
  if (const auto* ck = exe->compute_kernels()) {  // gles-compute: how many kernels each strategy emitted
    json counts = json::object();
    for (auto& k : *ck) counts[k.strategy] = counts.value(k.strategy, 0) + 1;
    r.extra["strategies"] = counts;
  }
  // where a run's host time goes (GLES: upload / draw submission / readback, which waits for the GPU)
  std::map<std::string, std::vector<double>> phases;
  for (int i = 0; i < 7; ++i) {
    exe->run(feeds);
    for (auto& [name, ms] : exe->last_phases()) phases[name].push_back(ms);
  }
  for (auto& [name, v] : phases) {
    std::sort(v.begin(), v.end());
    r.extra["phase_ms"][name] = v[v.size() / 2];
  }
  if (const sg::Plan* plan = exe->plan()) {
    r.extra["peak_bytes"] = plan->peak_bytes;
    const bench_vk::Work w = bench_vk::program_work(*plan);
    r.extra["flop"] = w.flop, r.extra["bytes"] = w.bytes;
  }
  add_row(std::move(r));
}

// ------------------------------------------------------------------------------------------------
// Fusion, memory plan, compile times
// ------------------------------------------------------------------------------------------------

void bench_fusion(const Options& o) {
  fmt::print("\nKernels per train step (forward + backward + Adam) and planned texture memory (ScheduleOptions "
             "defaults (4 render targets, union-domain kernels on); \"GPU\" = as the GLES backend on a GPU with 8 draw buffers "
             "(split-K, row layouts, row planes, unions, 8 render targets); \"1 out/k\" = "
             ".max_outputs = 1, i.e. without multi-output fusion; \"1 dom/k\" = .union_domains = false, i.e. without "
             "union-domain kernels; .unfused = true):\n\n");
  fmt::print("| {:<28} | {:>6} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8} | {:>14} | {:>14} |\n", "program", "nodes",
             "fused", "GPU", "1 dom/k", "1 out/k", "unfused", "peak (fused)", "peak (unfused)");
  fmt::print("|{:-<30}|{:-<8}|{:-<10}|{:-<10}|{:-<10}|{:-<10}|{:-<10}|{:-<16}|{:-<16}|\n", "", "", "", "", "", "", "",
             "", "");
  json rows = json::array();
  auto one = [&](const std::string& label, const std::string& key, const sg::Program& p) {
    sg::ScheduleOptions fo;
    fo.union_domains = o.gles.union_domains.value_or(true);
    sg::Plan fused = sg::schedule(p, fo);
    sg::ScheduleOptions one_domain;
    one_domain.union_domains = false;
    const size_t single_domain = sg::schedule(p, one_domain).kernels.size();
    sg::ScheduleOptions u;
    u.unfused = true;
    sg::Plan unf = sg::schedule(p, u);
    sg::ScheduleOptions one_out;
    one_out.max_outputs = 1;
    const size_t single = sg::schedule(p, one_out).kernels.size();
    // what the GLES backend runs on a hardware GPU with 8 draw buffers (the H200): the one policy on that device
    sg::BackendOptions gpu_opt;
    gpu_opt.union_domains = o.gles.union_domains;
    const sg::ScheduleOptions gpu =
        sg::schedule_options(sg::make_target(sg::TargetName::GlslEsFragment, sg::preset_caps("gpu")), gpu_opt);
    const size_t split = sg::schedule(p, gpu).kernels.size();
    fmt::print("| {:<28} | {:>6} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8} | {:>14} | {:>14} |\n", label,
               p.nodes().size(), fused.kernels.size(), split, single_domain, single, unf.kernels.size(),
               human_bytes(fused.peak_bytes), human_bytes(unf.peak_bytes));
    rows.push_back({{"key", key}, {"label", label}, {"nodes", p.nodes().size()}, {"kernels_fused", fused.kernels.size()},
                    {"kernels_fused_single_output", single}, {"kernels_fused_single_domain", single_domain},
                    {"kernels_fused_split_k", split},
                    {"kernels_unfused", unf.kernels.size()}, {"peak_bytes_fused", fused.peak_bytes},
                    {"peak_bytes_unfused", unf.peak_bytes}});
  };
  for (int64_t b : {32, 128}) {
    StepSetup s = make_step("mlp", b);
    one(fmt::format("MLP train step b={}", b), fmt::format("mlp_step_b{}", b), s.step);
  }
  {
    StepSetup s = make_step("cnn", 64);
    one("CNN train step b=64", "cnn_step_b64", s.step);
  }
  for (auto [model, b] : {std::pair<const char*, int64_t>{"charlm", 32}, {"lstm", 32}, {"resnet", 64}}) {
    StepSetup s = make_step(model, b);
    one(fmt::format("{} train step b={}", model, b), fmt::format("{}_step_b{}", model, b), s.step);
  }
  // the layers of issue 36, one Adam train step each (mse loss against a target of the output's shape): kernels
  // against graph nodes ("a small multiple of the op count"; tests/test_schedule.cpp's layer budgets assert them)
  auto layer = [&](const std::string& label, const std::string& key,
                   const std::function<void(sg::nn::Sequential&)>& add, const std::vector<int64_t>& in,
                   const std::vector<int64_t>& out) {
    sg::nn::Rng rng(0);
    sg::nn::Sequential model;
    add(model);
    model.build(rng);
    auto adam = sg::make_adam({});
    sg::Tensor y = model(sg::input("x", in));
    one(label, key, sg::make_train_step(sg::mse_loss(y, sg::input("target", out)), model.parameters(), *adam));
  };
  layer("attention 4x12x64, 4 heads", "attention_step", [](sg::nn::Sequential& m) {
    m.add<sg::nn::MultiheadAttention>(64, 4);
  }, {4, 12, 64}, {4, 12, 64});
  layer("pre-norm encoder 4x12x64", "encoder_step", [](sg::nn::Sequential& m) {
    m.add<sg::nn::TransformerEncoderLayer>(64, 4, 128, 0.0, "gelu", 1e-5, true, true);
  }, {4, 12, 64}, {4, 12, 64});
  layer("LSTM 2 layers, T=32, b=16", "lstm_step_t32", [](sg::nn::Sequential& m) {
    m.add<sg::nn::LSTM>(32, 64, 2, true, true);
  }, {16, 32, 32}, {16, 32, 64});
  layer("conv+BatchNorm2d+ReLU b=16", "conv_bn_step", [](sg::nn::Sequential& m) {
    m.add<sg::nn::Conv2d>(8, 16, 3, 1, 1).add<sg::nn::BatchNorm2d>(16).add<sg::nn::ReLU>();
  }, {16, 8, 14, 14}, {16, 16, 14, 14});
  for (int64_t n : o.sgemm) {
    std::vector<float> z(static_cast<size_t>(n * n), 0.f);
    sg::Program p;
    p.add_output("c", sg::matmul(sg::constant({n, n}, z), sg::constant({n, n}, z)));
    one(fmt::format("SGEMM N={}", n), fmt::format("sgemm_{}", n), p);
  }
  fmt::print("(issue 8 target: <= 8 kernels per MLP train step; peak = pooled temporaries + 2x persistent + inputs "
             "+ constants, RGBA32F texels incl. padding)\n");
  g_tables["fusion"] = rows;
}

void bench_compile_times(Backends& bk, const Options& o) {
  StepSetup s = make_step("mlp", 128);
  sg::Plan plan = sg::schedule(s.step);
  std::vector<double> emit_ms, cold_ms, hit_us, disk_miss_ms, disk_hit_us;
  std::vector<std::string> sources;
  for (auto& k : plan.kernels) {
    auto t0 = Clock::now();
    sources.push_back(sg::emit_glsl450(plan, k, sg::ShaderStage::Fragment));
    emit_ms.push_back(ms_since(t0));
  }
  // Warm the toolchain (glslang process init) so the first kernel is not charged for it.
  (void)sg::compile_shader("warmup", sources[0], sg::ShaderStage::Fragment);
  {
    sg::KernelCache mem{std::filesystem::path{}};
    for (size_t i = 0; i < sources.size(); ++i) {
      auto t0 = Clock::now();
      (void)mem.get_or_compile(plan.kernels[i].name, sources[i], sg::ShaderStage::Fragment);
      cold_ms.push_back(ms_since(t0));
    }
    constexpr int kReps = 200;
    for (size_t i = 0; i < sources.size(); ++i) {
      auto t0 = Clock::now();
      for (int r = 0; r < kReps; ++r)
        (void)mem.get_or_compile(plan.kernels[i].name, sources[i], sg::ShaderStage::Fragment);
      hit_us.push_back(ms_since(t0) * 1000.0 / kReps);
    }
  }
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("sg_bench_ops_cache_{}", ::getpid());
  std::filesystem::remove_all(dir);
  {
    sg::KernelCache disk(dir);
    for (size_t i = 0; i < sources.size(); ++i) {
      auto t0 = Clock::now();
      (void)disk.get_or_compile(plan.kernels[i].name, sources[i], sg::ShaderStage::Fragment);
      disk_miss_ms.push_back(ms_since(t0));
    }
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    sg::KernelCache fresh(dir);
    auto t0 = Clock::now();
    (void)fresh.get_or_compile(plan.kernels[i].name, sources[i], sg::ShaderStage::Fragment);
    disk_hit_us.push_back(ms_since(t0) * 1000.0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);

  // Whole-step compile: fresh backend (cold cache) vs the same backend again (memory hits, GL programs reused).
  double step_cold_ms = -1, step_warm_ms = -1;
  if (bk.gles) {
    sg::BackendOptions bo = o.gles;
    auto fresh = sg::make_backend(bo).backend;
    auto t0 = Clock::now();
    auto e1 = fresh->compile(s.step);
    step_cold_ms = ms_since(t0);
    t0 = Clock::now();
    auto e2 = fresh->compile(s.step);
    step_warm_ms = ms_since(t0);
  }

  fmt::print("\nKernel compile times, the {} kernels of the MLP b=128 train step (GLSL 4.50 -> glslang -> SPIR-V -> "
             "SPIRV-Cross -> GLSL ES 3.00):\n\n",
             sources.size());
  fmt::print("| {:<52} | {:>3} | {:>10} | {:>10} | {:>10} | {:<4} |\n", "operation", "n", "median", "min", "max",
             "unit");
  fmt::print("|{:-<54}|{:-<5}|{:-<12}|{:-<12}|{:-<12}|{:-<6}|\n", "", "", "", "", "", "");
  json rows = json::array();
  auto line = [&](const std::string& what, const std::string& key, const char* unit, const std::vector<double>& v) {
    Stat st = summarize(v);
    fmt::print("| {:<52} | {:>3} | {:>10.3f} | {:>10.3f} | {:>10.3f} | {:<4} |\n", what, st.n, st.median, st.min, st.max,
               unit);
    rows.push_back({{"key", key}, {"label", what}, {"unit", unit}, {"n", st.n}, {"median", st.median}, {"min", st.min},
                    {"max", st.max}});
  };
  line("emit GLSL 4.50 (emit_glsl450)", "emit", "ms", emit_ms);
  line("cold compile (KernelCache miss, memory only)", "cold", "ms", cold_ms);
  line("cache hit, memory (hash + lookup)", "hit_memory", "us", hit_us);
  line("cache miss + disk write", "disk_miss", "ms", disk_miss_ms);
  line("cache hit, disk (fresh KernelCache, read + verify)", "hit_disk", "us", disk_hit_us);
  if (step_cold_ms >= 0) {
    line("Backend::compile(MLP step), fresh GLES backend", "step_compile_cold", "ms", {step_cold_ms});
    line("Backend::compile(MLP step), same backend again", "step_compile_warm", "ms", {step_warm_ms});
  }
  fmt::print("(issue 8 targets: cache hit <= 50 us; cold compile <= 20 ms per kernel on this machine)\n");
  g_tables["compile"] = rows;
  (void)o;
}

// ------------------------------------------------------------------------------------------------
// CPU reference forward
// ------------------------------------------------------------------------------------------------

void bench_cpuref(Backends& bk, const Options& o) {
  const int64_t b = 128;
  auto model = sg::nn::make_model("mlp", 1, 28, 28, 10);
  sg::nn::Rng rng(0);
  model->build(rng);
  sg::Tensor x = sg::input("x", {b, 1, 28, 28});
  sg::Tensor logits = (*model)(x);
  sg::Program p;
  p.add_output("logits", logits);
  std::mt19937_64 g(5);
  std::vector<float> xs = uniform(g, b * 784, 0, 1);
  sg::Backend& cpu = backend_named(bk, "cpu");
  auto exe = cpu.compile(p);
  std::vector<float> out = exe->run({{"x", &xs}})[0];
  // Check against an independent f64 evaluation of the two Linear layers (x @ W1^T + b1, relu, @ W2^T + b2).
  auto params = model->parameters();  // 1.weight (128,784), 1.bias, 3.weight (10,128), 3.bias
  auto w1 = cpu.read(params[0]), b1 = cpu.read(params[1]), w2 = cpu.read(params[2]), b2 = cpu.read(params[3]);
  double err = 0;
  for (int64_t i = 0; i < b; ++i) {
    std::vector<double> h(128);
    for (int64_t j = 0; j < 128; ++j) {
      double acc = b1[j];
      for (int64_t k = 0; k < 784; ++k) acc += static_cast<double>(xs[i * 784 + k]) * w1[j * 784 + k];
      h[j] = std::max(acc, 0.0);
    }
    for (int64_t j = 0; j < 10; ++j) {
      double acc = b2[j];
      for (int64_t k = 0; k < 128; ++k) acc += h[k] * w2[j * 128 + k];
      err = std::max(err, std::abs(acc - out[i * 10 + j]) / (1 + std::abs(acc)));
    }
  }
  Row r;
  r.key = "mlp_forward_b128";
  r.label = "MLP forward b=128 (logits)";
  r.backend = "cpu";
  r.ok = err <= 1e-5;
  r.check = fmt::format("{} (f64 direct {:.1e})", r.ok ? "ok" : "FAIL", err);
  r.ms = measure([&] { (void)exe->run({{"x", &xs}}); }, o);
  r.throughput = 1000.0 / r.ms.median;
  r.unit = "runs/s";
  r.extra = {{"batch", b}, {"nodes", exe->kernels_per_step()}};
  add_row(std::move(r));
}

// ------------------------------------------------------------------------------------------------
// Per-kernel profile
// ------------------------------------------------------------------------------------------------

/// Two per-kernel profiles of one train step, each the median over the repeats:
///  - "timer": Executable::last_timings() on the profiled GLES backend (GL timer queries when the driver has them,
///    else CPU time between two glFinish calls);
///  - "sync": on the unprofiled backend, a kernel hook reads every kernel's output back as soon as it is drawn
///    (which waits for it); the time from the previous kernel's readback to this one's includes the draw call, the
///    kernel and its own readback (kernel 0 also the input uploads). Driver-independent; a cross-check when the
///    timer queries are suspect.
void bench_profile(Backends& bk, const std::string& model, int64_t b, const Options& o) {
  StepSetup s = make_step(model, b);
  const std::vector<sg::Feed> feeds = s.feeds();
  auto exe = bk.gles_profiled->compile(s.step);
  std::vector<std::string> names;
  std::vector<std::vector<double>> per, per_sync;  // per kernel: samples
  std::vector<double> wall, wall_sync;
  bool gpu = false;
  int call = 0;
  (void)measure(
      [&] {
        auto t0 = Clock::now();
        (void)exe->run(feeds);
        double w = ms_since(t0);
        auto t = exe->last_timings();
        if (per.empty()) {
          per.resize(t.size());
          for (auto& kt : t) names.push_back(kt.kernel);
        }
        if (call++ < o.warmup) return;
        wall.push_back(w);
        for (size_t k = 0; k < t.size() && k < per.size(); ++k) {
          per[k].push_back(t[k].ms);
          gpu = t[k].gpu_timer;
        }
      },
      o);

  auto sexe = bk.gles->compile(s.step);
  std::vector<double> cur(per.size(), 0);
  Clock::time_point last;
  // one event per output value: a multi-output kernel's time is the sum over its events (the first one waits for
  // the draw, the others only read their outputs back)
  sexe->set_kernel_hook([&](const sg::KernelEvent& ev) {
    (void)ev.read();
    auto now = Clock::now();
    if (ev.index >= 0 && static_cast<size_t>(ev.index) < cur.size())
      cur[ev.index] += std::chrono::duration<double, std::milli>(now - last).count();
    last = Clock::now();
  });
  per_sync.resize(per.size());
  call = 0;
  (void)measure(
      [&] {
        std::fill(cur.begin(), cur.end(), 0.0);
        auto t0 = Clock::now();
        last = t0;
        (void)sexe->run(feeds);
        double w = ms_since(t0);
        if (call++ < o.warmup) return;
        wall_sync.push_back(w);
        for (size_t k = 0; k < cur.size(); ++k) per_sync[k].push_back(cur[k]);
      },
      o);
  sexe->set_kernel_hook({});

  const sg::Plan* plan = exe->plan();
  std::vector<double> med(per.size()), med_sync(per.size());
  double total = 0, total_sync = 0;
  for (size_t k = 0; k < per.size(); ++k) {
    total += (med[k] = summarize(per[k]).median);
    total_sync += (med_sync[k] = summarize(per_sync[k]).median);
  }
  const Stat ws = summarize(wall), wss = summarize(wall_sync);
  fmt::print("\nPer-kernel profile: {} train step b={} on {} ({} run(s) each, median per kernel).\n"
             "timer: {}; sync: kernel hook reading each output back (includes those readbacks):\n\n",
             model == "mlp" ? "MLP 784-128-10" : "CNN 8-16-32", b, bk.renderer, ws.n,
             gpu ? "GL timer queries" : "glFinish-bounded CPU time per draw");
  fmt::print("| {:>2} | {:<44} | {:<14} | {:>9} | {:>6} | {:>9} | {:>6} |\n", "#", "kernel", "output", "timer ms",
             "share", "sync ms", "share");
  fmt::print("|{:-<4}|{:-<46}|{:-<16}|{:-<11}|{:-<8}|{:-<11}|{:-<8}|\n", "", "", "", "", "", "", "");
  json rows = json::array();
  for (size_t k = 0; k < per.size(); ++k) {
    std::string shape = "?";
    if (plan && k < plan->kernels.size()) shape = sg::shape_str(plan->values[plan->kernels[k].output()].node->shape);
    fmt::print("| {:>2} | {:<44} | {:<14} | {:>9.3f} | {:>5.1f}% | {:>9.3f} | {:>5.1f}% |\n", k, names[k], shape,
               med[k], total > 0 ? 100 * med[k] / total : 0, med_sync[k],
               total_sync > 0 ? 100 * med_sync[k] / total_sync : 0);
    rows.push_back({{"index", k}, {"kernel", names[k]}, {"output", shape}, {"timer_ms", med[k]},
                    {"sync_ms", med_sync[k]}});
  }
  fmt::print("| {:>2} | {:<44} | {:<14} | {:>9.3f} | {:>6} | {:>9.3f} | {:>6} |\n", "", "sum of kernels", "", total, "",
             total_sync, "");
  fmt::print("| {:>2} | {:<44} | {:<14} | {:>9.3f} | {:>6} | {:>9.3f} | {:>6} |\n", "", "whole run()", "", ws.median,
             "", wss.median, "");
  g_tables[fmt::format("profile_{}_b{}", model, b)] = {{"timer", gpu ? "gpu" : "glfinish"}, {"kernels", rows},
                                                        {"sum_timer_ms", total}, {"sum_sync_ms", total_sync},
                                                        {"run_ms_timer", ws.median}, {"run_ms_sync", wss.median}};
}

// ------------------------------------------------------------------------------------------------
// Fragment ALU probe
// ------------------------------------------------------------------------------------------------

constexpr int kProbeIters = 256;
constexpr int kProbeChains = 8;

std::string probe_source() {
  std::string s = "#version 300 es\nprecision highp float;\nprecision highp sampler2D;\n"
                  "uniform sampler2D u_coef;\nout vec4 o;\nvoid main() {\n"
                  "  vec4 c = texelFetch(u_coef, ivec2(0, 0), 0);\n"
                  "  vec4 base = vec4(gl_FragCoord.xy * 1e-4, 0.25, 0.5);\n";
  for (int i = 0; i < kProbeChains; ++i) s += fmt::format("  vec4 x{} = base + float({}) * 0.01;\n", i, i);
  s += fmt::format("  for (int i = 0; i < {}; ++i) {{\n", kProbeIters);
  for (int i = 0; i < kProbeChains; ++i) s += fmt::format("    x{0} = x{0} * c.x + c.y;\n", i);
  s += "  }\n  o = x0";
  for (int i = 1; i < kProbeChains; ++i) s += fmt::format(" + x{}", i);
  s += ";\n}\n";
  return s;
}

void bench_probe(const std::string& renderer, const Options& o) {
  auto dev = sg::gles::Device::create({});
  const int64_t side =
      o.probe_side > 0 ? o.probe_side : (renderer.find("llvmpipe") != std::string::npos ? 256 : 4096);
  const int64_t texels = side * side;
  sg::gles::Texture coef = dev->create_texture(4, "coef");
  const float cv[4] = {0.999f, 0.001f, 0.f, 0.f};
  dev->upload(coef, cv, 4);
  sg::gles::Texture out = dev->create_texture(texels * 4, "probe_out");
  sg::gles::Program prog = dev->create_program(probe_source(), "alu_probe");
  auto draw = [&] {
    dev->draw(prog, {{"u_coef", &coef}}, out, "alu_probe");
    dev->finish();
  };
  Stat st = measure(draw, o);
  // Check a few texels against a CPU emulation (float, same operation order; tolerance for fma contraction).
  std::vector<float> got(static_cast<size_t>(texels * 4));
  dev->download(out, got.data(), texels * 4);
  const int64_t w = out.width();
  double err = 0;
  for (int64_t t : {int64_t{0}, texels / 3, texels - 1}) {
    float fx = static_cast<float>(t % w) + 0.5f, fy = static_cast<float>(t / w) + 0.5f;
    float base[4] = {fx * 1e-4f, fy * 1e-4f, 0.25f, 0.5f};
    for (int l = 0; l < 4; ++l) {
      double sum = 0;
      for (int i = 0; i < kProbeChains; ++i) {
        float x = base[l] + static_cast<float>(i) * 0.01f;
        for (int it = 0; it < kProbeIters; ++it) x = x * cv[0] + cv[1];
        sum += x;
      }
      err = std::max(err, std::abs(sum - got[t * 4 + l]) / (1 + std::abs(sum)));
    }
  }
  const double flop = 2.0 * 4 * kProbeChains * kProbeIters * static_cast<double>(texels);
  Row r;
  r.key = "fragment_alu_probe";
  r.label = fmt::format("fragment ALU probe {}x{}", side, side);
  r.backend = "gles";
  r.ms = st;
  r.ok = err <= 1e-4;
  r.check = fmt::format("{} (rel {:.1e} on 12)", r.ok ? "ok" : "FAIL", err);
  r.throughput = flop / (st.median * 1e-3) / 1e9;
  r.unit = "GFLOP/s";
  r.extra = {{"side", side}, {"texture_width", out.width()}, {"flop", flop}};
  add_row(std::move(r));
}

// ------------------------------------------------------------------------------------------------
// Texel-fetch probe and hand-written MRT SGEMM probes
// ------------------------------------------------------------------------------------------------

// Fetch probes: every fragment makes kFetchIters x kFetchWays independent RGBA32F texelFetches from a 256x256
// texture (1 MiB, cache-resident) and adds them up (1 add per fetch: far below the ALU ceiling). Two address
// patterns: "spread" (way f of iteration i reads texel (x + i, y + f + 8i): every fragment of a quad a different
// texel) and "matmul" (even ways read texel (8i + f, y), shared by a row of fragments like a matmul's A rows; odd
// ways (x, 8i + f), shared by a column like B's). Measures the fragment path's texel-fetch ceiling.
constexpr int kFetchIters = 64;
constexpr int kFetchWays = 8;
constexpr int kFetchSide = 256;

/// Texel (x, y) read by way f of iteration i of the fetch probe for fragment (px, py).
std::pair<int64_t, int64_t> fetch_probe_texel(bool matmul, int64_t px, int64_t py, int i, int f) {
  const int64_t m = kFetchSide - 1;
  if (!matmul) return {(px + i) & m, (py + f + int64_t{i} * kFetchWays) & m};
  const int64_t k = (int64_t{i} * kFetchWays + f) & m;
  return f % 2 == 0 ? std::pair{k, py & m} : std::pair{px & m, k};
}

std::string fetch_probe_source(bool matmul) {
  std::string s = "#version 300 es\nprecision highp float;\nprecision highp int;\nprecision highp sampler2D;\n"
                  "uniform sampler2D u_src;\nout vec4 o;\nvoid main() {\n"
                  "  ivec2 p = ivec2(gl_FragCoord.xy);\n";
  for (int f = 0; f < kFetchWays; ++f) s += fmt::format("  vec4 s{} = vec4(0.0);\n", f);
  s += fmt::format("  for (int i = 0; i < {}; ++i) {{\n", kFetchIters);
  const int m = kFetchSide - 1;
  for (int f = 0; f < kFetchWays; ++f) {
    std::string at = !matmul        ? fmt::format("(p.x + i) & {1}, (p.y + {0} + i * {2}) & {1}", f, m, kFetchWays)
                     : f % 2 == 0 ? fmt::format("(i * {2} + {0}) & {1}, p.y & {1}", f, m, kFetchWays)
                                  : fmt::format("p.x & {1}, (i * {2} + {0}) & {1}", f, m, kFetchWays);
    s += fmt::format("    s{} += texelFetch(u_src, ivec2({}), 0);\n", f, at);
  }
  s += "  }\n  o = s0";
  for (int f = 1; f < kFetchWays; ++f) s += fmt::format(" + s{}", f);
  s += ";\n}\n";
  return s;
}

void bench_fetch_probe(const std::string& renderer, const Options& o, bool matmul) {
  auto dev = sg::gles::Device::create({});
  const int64_t side =
      o.probe_side > 0 ? o.probe_side : (renderer.find("llvmpipe") != std::string::npos ? 256 : 4096);
  // source: small integers, so every sum is exact in fp32 and the check can demand equality
  const int64_t W = kFetchSide;
  std::vector<float> src(static_cast<size_t>(W * W * 4));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>((i * 7919) % 13);
  sg::gles::Texture tsrc = dev->create_texture(sg::TextureLayout::for_numel(W * W * 4, W), "fetch_src");
  dev->upload(tsrc, src.data(), W * W * 4);
  sg::gles::Texture out =
      dev->create_texture(sg::TextureLayout::for_numel(side * side * 4, side), "fetch_out");
  sg::gles::Program prog = dev->create_program(fetch_probe_source(matmul), "fetch_probe");
  auto draw = [&] {
    dev->draw(prog, {{"u_src", &tsrc}}, out, "fetch_probe");
    dev->finish();
  };
  Stat st = measure(draw, o);
  std::vector<float> got(static_cast<size_t>(side * side * 4));
  dev->download(out, got.data(), side * side * 4);
  double err = 0;
  std::vector<int64_t> checked{0, side * side / 3 + 17, side * side - 1};
  std::mt19937_64 g(5);
  std::uniform_int_distribution<int64_t> pick(0, side * side - 1);
  while (checked.size() < 64) checked.push_back(pick(g));
  for (int64_t t : checked) {
    const int64_t px = t % side, py = t / side;
    for (int l = 0; l < 4; ++l) {
      double sum = 0;
      for (int i = 0; i < kFetchIters; ++i)
        for (int f = 0; f < kFetchWays; ++f) {
          auto [x, y] = fetch_probe_texel(matmul, px, py, i, f);
          sum += src[static_cast<size_t>((y * W + x) * 4 + l)];
        }
      err = std::max(err, std::abs(sum - got[static_cast<size_t>(t * 4 + l)]));
    }
  }
  const double fetches = static_cast<double>(kFetchIters) * kFetchWays * side * side;
  Row r;
  r.key = matmul ? "fragment_fetch_probe_matmul" : "fragment_fetch_probe_spread";
  r.label = fmt::format("fetch probe {} {}x{}", matmul ? "matmul" : "spread", side, side);
  r.backend = "gles";
  r.ms = st;
  r.ok = err == 0;
  r.check = fmt::format("{} (abs {:.1e} on {})", r.ok ? "ok" : "FAIL", err, 4 * checked.size());
  r.throughput = fetches / (st.median * 1e-3) / 1e9;
  r.unit = "Gtexel/s";
  r.extra = {{"side", side}, {"fetches", fetches}, {"source_side", W}};
  add_row(std::move(r));
}

// Hand-written SGEMM with R x C output texels per fragment in R*C render targets (not our generated code: the
// shape a hand-tuned fragment kernel takes, to compare the generated kernels with). A and B are N x N, one
// texture row per matrix row (N/4 texels wide). Fragment (x, y) computes C rows R*y .. R*y+R-1, column texels
// C*x .. C*x+C-1; per 4 steps of k it fetches R texels of A and 4*C of B for 16*R*C multiply-adds, accumulated
// in FMA chains. Render target r*C+c holds the texels (x, y) of row offset r and column offset c.
std::string mrt_sgemm_source(int64_t n, int R, int C, bool tree) {
  std::string s = "#version 300 es\nprecision highp float;\nprecision highp int;\nprecision highp sampler2D;\n"
                  "uniform sampler2D u_a;\nuniform sampler2D u_b;\n";
  for (int j = 0; j < R * C; ++j) s += fmt::format("layout(location = {0}) out vec4 o{0};\n", j);
  s += "void main() {\n  int x = int(gl_FragCoord.x), y = int(gl_FragCoord.y);\n";
  for (int j = 0; j < R * C; ++j) s += fmt::format("  vec4 c{} = vec4(0.0);\n", j);
  s += fmt::format("  for (int k = 0; k < {}; ++k) {{\n", n / 4);
  for (int r = 0; r < R; ++r) s += fmt::format("    vec4 a{0} = texelFetch(u_a, ivec2(k, {1} * y + {0}), 0);\n", r, R);
  for (int kk = 0; kk < 4; ++kk)
    for (int c = 0; c < C; ++c)
      s += fmt::format("    vec4 b{0}{1} = texelFetch(u_b, ivec2({2} * x + {1}, 4 * k + {0}), 0);\n", kk, c, C);
  const char* comp = "xyzw";
  if (tree) {  // the generated kernels' order: pairwise sums of the 4 products, then one add
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c)
        s += fmt::format("    c{0} += ((a{1}.x * b0{2} + a{1}.y * b1{2}) + (a{1}.z * b2{2} + a{1}.w * b3{2}));\n", r * C + c,
                         r, c);
  } else {  // FMA chains
    for (int kk = 0; kk < 4; ++kk)
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) s += fmt::format("    c{0} += a{1}.{2} * b{3}{4};\n", r * C + c, r, comp[kk], kk, c);
  }
  s += "  }\n";
  for (int j = 0; j < R * C; ++j) s += fmt::format("  o{0} = c{0};\n", j);
  s += "}\n";
  return s;
}

void bench_mrt_sgemm_probe(const std::string& renderer, const Options& o, int R, int C, bool tree) {
  const bool cpu_raster = renderer.find("llvmpipe") != std::string::npos;
  const int64_t n = o.probe_sgemm > 0 ? o.probe_sgemm : (cpu_raster ? 256 : 4096);
  if (n % (4 * C) != 0 || n % R != 0) {
    fmt::print("(MRT SGEMM probe {}x{} skipped: N={} is not a multiple of {} and {})\n", R, C, n, 4 * C, R);
    return;
  }
  auto dev = sg::gles::Device::create({});
  if (n > dev->caps().max_texture_size) {
    fmt::print("(MRT SGEMM probe {}x{} skipped: N={} exceeds the texture height limit {})\n", R, C, n,
               dev->caps().max_texture_size);
    return;
  }
  if (R * C > dev->caps().max_draw_buffers) {
    fmt::print("(MRT SGEMM probe {}x{} skipped: {} render targets, the device has {})\n", R, C, R * C,
               dev->caps().max_draw_buffers);
    return;
  }
  std::mt19937_64 g(2000 + n);
  std::vector<float> a = uniform(g, n * n, -1, 1), b = uniform(g, n * n, -1, 1);
  const sg::TextureLayout mat = sg::TextureLayout::for_numel(n * n, n / 4, dev->caps().max_texture_size);
  sg::gles::Texture ta = dev->create_texture(mat, "probe_a"), tb = dev->create_texture(mat, "probe_b");
  dev->upload(ta, a.data(), n * n);
  dev->upload(tb, b.data(), n * n);
  const int64_t pw = n / (4 * C), ph = n / R;
  std::vector<sg::gles::Texture> planes;
  std::vector<sg::gles::Texture*> outs;
  for (int j = 0; j < R * C; ++j)
    planes.push_back(dev->create_texture(sg::TextureLayout::for_numel(pw * ph * 4, pw, dev->caps().max_texture_size),
                                         fmt::format("probe_c{}", j)));
  for (auto& p : planes) outs.push_back(&p);
  const std::string name = fmt::format("mrt_sgemm_{}x{}{}", R, C, tree ? "_tree" : "");
  sg::gles::Program prog = dev->create_program(mrt_sgemm_source(n, R, C, tree), name);
  auto draw = [&] {
    dev->draw(prog, {{"u_a", &ta}, {"u_b", &tb}}, outs, name);
    dev->finish();
  };
  auto t_first = Clock::now();
  draw();
  const double first_ms = ms_since(t_first);
  // reassemble C row-major from the planes and check it like the generated SGEMM
  std::vector<float> c(static_cast<size_t>(n * n));
  std::vector<float> plane(static_cast<size_t>(pw * ph * 4));
  for (int r = 0; r < R; ++r)
    for (int cc = 0; cc < C; ++cc) {
      dev->download(planes[static_cast<size_t>(r * C + cc)], plane.data(), pw * ph * 4);
      for (int64_t y = 0; y < ph; ++y)
        for (int64_t x = 0; x < pw; ++x)
          for (int l = 0; l < 4; ++l)
            c[static_cast<size_t>((R * y + r) * n + 4 * (C * x + cc) + l)] = plane[static_cast<size_t>((y * pw + x) * 4 + l)];
    }
  GemmCheck chk = check_sampled(a, b, c, n, 4096, 11 + n);
  Row row;
  row.key = fmt::format("mrt_sgemm_probe_{}x{}{}_{}", R, C, tree ? "_tree" : "", n);
  row.label = fmt::format("MRT SGEMM {}x{}{} N={}", R, C, tree ? " tree" : "", n);
  row.backend = "gles";
  row.ms = measure(draw, o, first_ms);
  row.ok = chk.max_err <= 1e-4;
  row.check = fmt::format("{} (rel {:.1e} on {})", row.ok ? "ok" : "FAIL", chk.max_err, chk.checked);
  row.throughput = 2.0 * static_cast<double>(n) * n * n / (row.ms.median * 1e-3) / 1e9;
  row.unit = "GFLOP/s";
  const double fetches_per_step = R + 4.0 * C, flop_per_step = 32.0 * R * C;
  row.extra = {{"n", n}, {"rows", R}, {"col_texels", C}, {"render_targets", R * C},
               {"flop_per_fetch", flop_per_step / fetches_per_step},
               {"gtexel_per_s", row.throughput / (flop_per_step / fetches_per_step)}};
  add_row(std::move(row));
}

// ------------------------------------------------------------------------------------------------
// Vulkan: roofline and per-kernel profile
// ------------------------------------------------------------------------------------------------

/// The compute ceilings, the roofline line of every Vulkan row so far (SGEMM at its kernel-only time, steps at their
/// whole-step median), then the per-kernel profiles of the train steps.
void bench_vulkan_roofline_and_profile(Backends& bk, const Options& o) {
  if (o.wants("roofline")) {
    fmt::print("\n");
    const bench_vk::Ceilings c = bench_vk::run_probes(*bk.vulkan);
    if (!c.ok) g_failed = true;
    json rows = json::array();
    bench_vk::print_roofline_header();
    for (auto& r : g_rows) {
      if (r.backend != "vulkan" || !r.extra.contains("flop")) continue;
      const bool kernel = r.extra.contains("kernel_ms");
      const double ms = kernel ? r.extra["kernel_ms"].get<double>() : r.ms.median;
      const bench_vk::Work w{r.extra["flop"].get<double>(), r.extra["bytes"].get<double>()};
      rows.push_back(bench_vk::roofline_row(r.key + (kernel ? " (kernel only)" : " (whole step)"), w, ms, c));
    }
    fmt::print("(FLOPs: 2 per multiply-add of matmul/conv, 1 per element of maps and reductions; bytes: what the program "
               "must read and write once; bound = min(ALU probe, FLOP/B x bandwidth probe))\n");
    g_tables["roofline"] = {{"alu_gflops", c.alu_gflops}, {"bw_gbs", c.bw_gbs}, {"check", c.check}, {"rows", rows}};
  }
  if (o.wants("profile") && bk.vulkan_profiled) {
    json profiles = json::array();
    for (const auto& [model, b] : o.profile_steps) {
      StepSetup s = make_step(model, b);
      const std::vector<sg::Feed> feeds = s.feeds();
      profiles.push_back(bench_vk::profile_step(*bk.vulkan_profiled, *bk.vulkan, s.step, feeds,
                                                fmt::format("{} train step b={}", model, b), std::min(o.repeats, 10)));
    }
    g_tables["vulkan_profile"] = profiles;
  }
}

// ------------------------------------------------------------------------------------------------
// Machine description
// ------------------------------------------------------------------------------------------------

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "?";
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

/// The run's metadata (host, CPU, load, command line); the backends' entries are added by make_backends.
json run_meta(const Options& o, int argc, char** argv) {
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return {{"tool", "bench_ops"},
          {"date", utc_now()},
          {"host", host},
          {"cpu", cpu_model()},
          {"cores", ::sysconf(_SC_NPROCESSORS_ONLN)},
          {"loadavg_start", read_first_line("/proc/loadavg")},
          {"command", cmd},
          {"repeats", o.repeats},
          {"warmup", o.warmup}};
}

bool wants_backend(const Options& o, const char* name) {
  return std::find(o.backends.begin(), o.backends.end(), name) != o.backends.end();
}

/// The backends `o` asks for (each also profiled), their names in `meta`. False (message printed) when a backend
/// that was asked for is unavailable.
bool make_backends(Backends& bk, const Options& o, json& meta) {
  bk.cpu = sg::make_cpu_backend();
  const bool want_gles = wants_backend(o, "gles"), want_vulkan = wants_backend(o, "vulkan");
  // the GLES profile runs unless only Vulkan rows were asked for (then the profile is Vulkan's)
  const bool need_gles = want_gles || (o.wants("profile") && !want_vulkan) || o.wants("probe");
  if (need_gles) {
    try {
      sg::BackendOptions bo = o.gles;
      bk.gles = sg::make_backend(bo).backend;
      bo.profile = true;
      bk.gles_profiled = sg::make_backend(bo).backend;
      bk.renderer = bk.gles->device();
    } catch (const sg::Error& e) {
      fmt::print(stderr, "bench_ops: GLES backend unavailable: {}\n", e.what());
      if (want_gles) return false;
    }
  }
  if (wants_backend(o, "gles-compute")) {
    try {
      sg::BackendOptions bo;
      bo.kind = "gles-compute";
      bo.max_outputs = o.gles.max_outputs;
      bo.min_parallel_texels = o.gles.min_parallel_texels;
      bo.union_domains = o.gles.union_domains;
      bo.reduce_tree = o.reduce_tree;
      bo.gpu_tiles = o.gpu_tiles;
      bk.compute = sg::make_backend(bo).backend;
      bo.profile = true;
      bk.compute_profiled = sg::make_backend(bo).backend;
      if (bk.renderer.empty()) bk.renderer = bk.compute->device();
    } catch (const sg::Error& e) {
      fmt::print(stderr, "bench_ops: GLES compute backend unavailable: {}\n", e.what());
      return false;
    }
  }
  if (wants_backend(o, "cpu-simd")) {
    try {
      sg::BackendOptions bo;
      bo.kind = "cpu-simd";
      bo.max_outputs = o.gles.max_outputs;
      bo.union_domains = o.gles.union_domains;
      bk.cpu_simd = sg::make_backend(bo).backend;
      bo.profile = true;
      bk.cpu_simd_profiled = sg::make_backend(bo).backend;
    } catch (const sg::Error& e) {
      fmt::print(stderr, "bench_ops: cpu-simd backend unavailable: {}\n", e.what());
      return false;
    }
  }
  if (want_vulkan) {
    try {
      make_vulkan_backends(bk, o);
    } catch (const sg::Error& e) {
      fmt::print(stderr, "bench_ops: Vulkan backend unavailable: {}\n", e.what());
      return false;
    }
    const sg::vk::Caps& vc = sg::vulkan_device(*bk.vulkan).caps();
    meta["vulkan_memory_policy"] = sg::vk::memory_policy_name(vc.memory_policy);
    meta["vulkan_dedicated_min_bytes"] = vc.dedicated_min_bytes;
    meta["vulkan_subgroup_arithmetic"] = vc.limits.subgroup_arithmetic;
    const char* sub_env = std::getenv("SG_VULKAN_SUBGROUPS");
    meta["vulkan_subgroups"] = vc.limits.subgroup_arithmetic && !(sub_env && std::string(sub_env) == "0");
    meta["fresh_vulkan"] = o.fresh_vulkan;
    meta["vulkan_dispatch_repeats"] = o.vk_repeats;
  }
  meta["renderer"] = bk.renderer;
  meta["vulkan_device"] = bk.vulkan_device;
  meta["cpu_backend"] = bk.cpu->device();
  return true;
}

void print_banner(const Backends& bk, const Options& o, const json& meta) {
  fmt::print("bench_ops  {}  host {}  cpu {} x{}  load {}\n", meta["date"].get<std::string>(),
             meta["host"].get<std::string>(), cpu_model(), meta["cores"].get<long>(),
             meta["loadavg_start"].get<std::string>());
  fmt::print("GLES renderer: {}\n", bk.renderer.empty() ? "(none)" : bk.renderer);
  if (!bk.vulkan_device.empty()) fmt::print("Vulkan device: {}\n", bk.vulkan_device);
  fmt::print("warm-up {} run(s), then up to {} timed repeats (stopping after {} s of timed runs, at least 3); "
             "each run() reads its outputs back (synchronised)\n\n",
             o.warmup, o.repeats, o.max_seconds);
}

/// The table rows: per backend the train steps, SGEMMs and (opt-in) reductions; then the CPU reference and the
/// GLES probes.
void run_cases(Backends& bk, const Options& o) {
  print_row_header();
  for (auto& backend : o.backends) {
    if ((backend == "gles" && !bk.gles) || (backend == "gles-compute" && !bk.compute)) continue;
    // --fresh-vulkan: every case on new Vulkan backends (nothing left by earlier cases)
    auto fresh = [&] {
      if (o.fresh_vulkan && backend == "vulkan") make_vulkan_backends(bk, o);
    };
    // train steps first: on the H200 they ran 2-3x slower after the large SGEMM cases in the same process
    if (o.wants("mlp"))
      for (int64_t b : {32, 128}) fresh(), bench_step(bk, backend, "mlp", b, o);
    if (o.wants("mlp-dropout")) fresh(), bench_step(bk, backend, "mlp-dropout", 128, o);
    if (o.wants("cnn")) fresh(), bench_step(bk, backend, "cnn", 64, o);
    // the model families of issue 37: the word models at b=32, T=64 and the ResNet at b=64
    if (o.wants("charlm")) fresh(), bench_step(bk, backend, "charlm", 32, o);
    if (o.wants("lstm")) fresh(), bench_step(bk, backend, "lstm", 32, o);
    if (o.wants("resnet")) fresh(), bench_step(bk, backend, "resnet", 64, o);
    if (o.wants("sgemm"))
      for (int64_t n : o.sgemm) fresh(), bench_sgemm(bk, backend, n, o);
    if (o.only.count("reduce") && backend != "gles") {  // opt-in (not part of the default cases)
      fresh();
      const bool cpu_device = backend == "vulkan" ? sg::vulkan_device(*bk.vulkan).caps().limits.cpu_device
                                                  : bk.renderer.find("llvmpipe") != std::string::npos;
      bench_reductions(bk, backend, o, cpu_device);
    }
  }
  if (o.wants("cpuref")) bench_cpuref(bk, o);
  if (o.wants("probe") && bk.gles) {
    bench_probe(bk.renderer, o);
    bench_fetch_probe(bk.renderer, o, false);
    bench_fetch_probe(bk.renderer, o, true);
    for (auto [R, C] : {std::pair{1, 1}, {4, 1}, {4, 2}, {8, 1}, {2, 4}}) bench_mrt_sgemm_probe(bk.renderer, o, R, C, false);
    for (auto [R, C] : {std::pair{4, 1}, {4, 2}, {8, 1}}) bench_mrt_sgemm_probe(bk.renderer, o, R, C, true);
  }
}

/// GLES and Vulkan SGEMM kernel-only times (the rows that have them).
void print_kernel_times() {
  bool any_kernel = false;
  for (auto& r : g_rows)
    if (r.extra.contains("kernel_ms")) {
      if (!any_kernel)
        fmt::print("\nSGEMM kernel-only time (profiled backend; excludes the readback of C):\n\n"
                   "| {:<14} | {:<12} | {:<17} | {:>10} | {:>12} | {:<26} | {:<12} |\n"
                   "|{:-<16}|{:-<14}|{:-<19}|{:-<12}|{:-<14}|{:-<28}|{:-<14}|\n",
                   "case", "backend", "timer", "kernel ms", "GFLOP/s", "tile config", "note", "", "", "", "", "", "", "");
      any_kernel = true;
      fmt::print("| {:<14} | {:<12} | {:<17} | {:>10.3f} | {:>12.2f} | {:<26} | {:<12} |\n", r.label, r.backend,
                 r.extra["kernel_timer"].get<std::string>(), r.extra["kernel_ms"].get<double>(),
                 r.extra["kernel_gflops"].get<double>(), r.extra.value("config", "-"),
                 r.extra["kernel_time_plausible"].get<bool>() ? "" : "implausible: < 0.5x wall time");
      if (r.extra.contains("tuning")) fmt::print("|   {}: {:<160} |\n", r.label, r.extra["tuning"].get<std::string>());
    }
}

/// The sections after the table: roofline and Vulkan profile, fusion, compile times, the GLES profile.
void run_sections(Backends& bk, const Options& o) {
  const bool want_gles = wants_backend(o, "gles"), want_vulkan = wants_backend(o, "vulkan");
  if (bk.vulkan && (o.wants("roofline") || o.wants("profile"))) bench_vulkan_roofline_and_profile(bk, o);
  if (o.wants("fusion")) bench_fusion(o);
  if (o.wants("compile")) bench_compile_times(bk, o);
  if (o.wants("profile") && bk.gles_profiled && (want_gles || !want_vulkan)) {
    bench_profile(bk, "mlp", 128, o);
    bench_profile(bk, "cnn", 64, o);
  }
}

/// --json PATH: the metadata, every row and every table. False (message printed) when the file cannot be written.
bool write_json(const Options& o, const json& meta) {
  json j = {{"meta", meta}, {"results", json::array()}, {"tables", g_tables}};
  for (auto& r : g_rows) j["results"].push_back(row_json(r));
  std::ofstream f(o.json_path);
  f << j.dump(2) << "\n";
  if (!f) {
    fmt::print(stderr, "bench_ops: could not write {}\n", o.json_path);
    return false;
  }
  fmt::print("wrote {}\n", o.json_path);
  return true;
}

// ------------------------------------------------------------------------------------------------
// Plan table (no device)
// ------------------------------------------------------------------------------------------------

/// --plan-table MODEL:B: the train step scheduled and emitted as the Vulkan backend does on a large NVIDIA GPU
/// (preset "gpu" with subgroup arithmetic, subgroups of 32, 132 multiprocessors and 2^20 storage buffers per kernel, as
/// the H100/H200 report), one
/// line per kernel: strategy, tiles, workgroups x invocations, outputs and the graph nodes of its comment. Lets the
/// GPU plan be read (and changed) on a machine without such a GPU; with SG_PLAN_SOURCES=DIR the GLSL goes there too,
/// with SG_PLAN_COMPILE=1 every kernel goes through glslang (a CompileError stops it).
int plan_table(const Options& o) {
  const size_t colon = o.plan_table.find(':');
  const std::string model = o.plan_table.substr(0, colon);
  const int64_t b = parse_int(o.plan_table.substr(colon + 1), "--plan-table");
  StepSetup s = make_step(model, b);
  sg::DeviceCaps caps = sg::preset_caps("gpu");
  caps.compute.subgroup_arithmetic = true;
  caps.compute.subgroup_size = 32;
  caps.compute.compute_units = 132;
  caps.compute.max_workgroup_count = 2147483647;
  caps.compute.max_buffer_bytes = int64_t{1} << 32;
  caps.compute.max_storage_buffers = 1 << 20;  // NVIDIA's maxPerStageDescriptorStorageBuffers, as vulkan_device caps it
  const sg::Target tgt = sg::make_target(sg::TargetName::SpirvVulkan, caps);
  sg::BackendOptions bo;
  bo.kind = "vulkan";
  bo.reduce_tree = o.reduce_tree;
  if (o.gles.min_parallel_texels) bo.min_parallel_texels = o.gles.min_parallel_texels;
  const sg::Plan plan = sg::schedule(s.step, sg::schedule_options(tgt, bo));
  const char* dir = std::getenv("SG_PLAN_SOURCES");
  if (dir) std::filesystem::create_directories(dir);
  fmt::print("{}: {} kernels on the GPU Vulkan plan\n", s.label, plan.kernels.size());
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const sg::Kernel& k = plan.kernels[i];
    const sg::ComputeKernel ck = sg::emit_compute_kernel(plan, k, tgt.compute);
    std::string outs;
    for (int v : k.outputs) {
      const auto& val = plan.values[static_cast<size_t>(v)];
      outs += fmt::format("{}{}{}", outs.empty() ? "" : " ", val.name, sg::shape_str(val.node->shape));
    }
    std::string nodes;
    std::istringstream cs(k.comment);
    for (std::string line; std::getline(cs, line);) {
      if (line.rfind("//   n", 0) != 0) continue;
      std::istringstream ls(line.substr(5));
      std::string id, op;
      ls >> id >> op;
      nodes += (nodes.empty() ? "" : ",") + op;
    }
    fmt::print("{:3} {:<44} {:<24} {:<26} wg {}x{}x{} * {}  out {}  [{}]\n", i, k.name, ck.strategy,
               ck.tiles ? ck.tiles->str() : "-", ck.workgroups[0], ck.workgroups[1], ck.workgroups[2],
               ck.local_size[0] * ck.local_size[1] * ck.local_size[2], outs, nodes.substr(0, 160));
    if (dir) std::ofstream(fmt::format("{}/{}.glsl", dir, k.name)) << ck.source;
    if (std::getenv("SG_PLAN_COMPILE")) (void)sg::compile_shader(k.name, ck.source, sg::ShaderStage::Compute);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (!o.plan_table.empty()) return plan_table(o);
  json meta = run_meta(o, argc, argv);
  Backends bk;
  if (!make_backends(bk, o, meta)) return 1;
  print_banner(bk, o, meta);
  try {
    run_cases(bk, o);
    print_kernel_times();
    run_sections(bk, o);
  } catch (const sg::Error& e) {
    fmt::print(stderr, "bench_ops: {}\n", e.what());
    g_failed = true;
  }
  meta["loadavg_end"] = read_first_line("/proc/loadavg");
  fmt::print("\nload average at end: {}\n", meta["loadavg_end"].get<std::string>());
  if (!o.json_path.empty() && !write_json(o, meta)) return 1;
  if (g_failed) fmt::print("SOME CORRECTNESS CHECKS FAILED (see FAIL rows)\n");
  return g_failed ? 1 : 0;
}
