// The Vulkan backend's autotuner of tiled contractions (see vulkan_autotune.h).
//
// Why the obvious measurement lies, and what this file does about it:
//  - Clock ramp. A GPU that has been idle runs at low clocks and reaches its boost clock only after tens to hundreds
//    of milliseconds of load. On the H200 the compute ALU probe read 13.2 TFLOP/s as the first thing of a process and
//    64.4 TFLOP/s warm (docs/perf-log/11.md, Run 11c); the tuner of 868a077 timed candidates in that state and picked
//    tiles 3-4x slower than the heuristic. So: every candidate is compiled first (compiling between timings lets the
//    GPU idle and clock down again), then the heuristic kernel runs back to back for kWarmupMs before any timing,
//    every timed batch starts with untimed dispatches, and candidates are timed in round-robin rounds, so that a
//    drift of the clock affects all of them alike.
//  - Data. Zero-filled buffers are not what the real run reads: memory systems compress constant data (NVIDIA's
//    compute data compression since Ampere) and an FMA of zeros toggles no datapath bits (less power, higher clocks),
//    so a memory- or power-limited kernel looks faster on zeros. The scratch buffers hold pseudo-random values of
//    the bindings' real sizes (i32 values are 0: a valid index for every gather).
//  - Noise. One dispatch's time varies by a few per cent; a candidate replaces the heuristic only when its median
//    over kFinalRounds alternating rounds against the heuristic is at least kMargin faster and it won most rounds.
#include "vulkan_autotune.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace sg::vk {

namespace {

constexpr int kTimedReps = 5;            // timed dispatches per candidate and round
constexpr int kScreenRounds = 3;         // round-robin rounds over all candidates
constexpr int kFinalRounds = 5;          // heuristic vs the fastest candidate, alternating
constexpr double kMargin = 0.05;         // the fastest must be >= 5 % faster than the heuristic to replace it
constexpr double kWarmupMs = 250;        // back-to-back heuristic dispatches before the first timing (GPUs;
constexpr double kCpuWarmupMs = 20;      // CPU devices such as lavapipe have no GPU clock to ramp)
constexpr double kRoundWarmMs = 2;       // untimed dispatches before each timed batch
constexpr double kSlowDispatchMs = 50;   // above this, one timed dispatch per candidate and one round
constexpr double kKernelBudgetMs = 6000; // estimated timing budget per kernel: later candidates are dropped

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

uint64_t tune_key(const Device& dev, const ComputeLimits& l, const std::string& heuristic_source) {
  const Caps& c = dev.caps();
  // v2: warm, random-data, round-robin timing with a 5 % margin (records of v1 were timed cold on zeros)
  const std::string who =
      fmt::format("sg-autotune v2|{}|{}|{:x}:{:x}|{} {} {} {} {} {}", c.name, c.driver, c.vendor_id, c.device_id,
                  l.max_storage_buffers, l.max_workgroup_invocations, l.max_shared_bytes, l.max_workgroup_count,
                  l.max_buffer_bytes, l.cpu_device);
  return fnv1a64(heuristic_source, fnv1a64(who));
}

/// Device buffers for every binding of a kernel, of the bindings' sizes, holding pseudo-random floats in [-1, 1)
/// (a fixed 64-bit LCG; i32 values hold 0).
std::vector<Buffer> scratch_buffers(Device& dev, const Plan& plan, const ComputeKernel& ck) {
  std::vector<Buffer> out;
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  for (int id : ck.bindings) {
    const NodePtr& n = plan.values[id].node;
    const int64_t count = std::max<int64_t>(n->numel(), 1);
    out.push_back(dev.create_buffer(count * 4, "autotune." + plan.values[id].name));
    if (n->dtype != DType::f32) continue;  // create_buffer zero-fills
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      x = static_cast<float>(static_cast<double>(state >> 40) / static_cast<double>(1ULL << 24)) * 2.0f - 1.0f;
    }
    dev.upload(out.back(), v.data(), count * 4);
  }
  return out;
}

/// One candidate, compiled and bound to the scratch buffers, with its timed samples.
struct Prepared {
  TileConfig tiles;
  ComputeKernel ck;
  Pipeline pipe;
  DescriptorPool pool;
  VkDescriptorSet set = VK_NULL_HANDLE;
  std::vector<double> ms;  // every timed dispatch
  double median() const {
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  }
};

Prepared prepare(Device& dev, KernelCache& cache, const Plan& plan, const Kernel& k, const Emitter& emitter,
                 const TileConfig& t, const std::vector<Buffer>& bufs) {
  Prepared p;
  p.ck = emitter.compute_kernel(plan, k, t);
  p.tiles = *p.ck.tiles;
  const CompiledShader& sh = cache.get_or_compile(k.name, p.ck.source, ShaderStage::Compute);
  p.pipe = dev.create_pipeline(sh.spirv, static_cast<int>(p.ck.bindings.size()), p.ck.local_size, k.name + ".tune");
  p.pool = dev.create_descriptor_pool(1, static_cast<int>(bufs.size()));
  std::vector<const Buffer*> ptrs;
  for (auto& b : bufs) ptrs.push_back(&b);
  p.set = dev.allocate_set(p.pool, p.pipe, ptrs);
  return p;
}

/// `warm` untimed then `reps` timed dispatches of `p` in one submission, a barrier before each (as between the
/// kernels of a recorded step); the timed ones' kernel times (ms) by timestamps around each dispatch.
std::vector<double> dispatch_batch(Device& dev, const Prepared& p, int warm, int reps) {
  QueryPool q = dev.create_timestamp_pool(static_cast<uint32_t>(2 * std::max(reps, 1)));
  CommandBuffer cmd = dev.create_command_buffer();
  cmd.begin();
  cmd.reset_queries(q, 0, static_cast<uint32_t>(2 * std::max(reps, 1)));
  for (int w = 0; w < warm; ++w) cmd.barrier(), cmd.dispatch(p.pipe, p.set, p.ck.workgroups);
  for (int r = 0; r < reps; ++r) {
    cmd.barrier();
    cmd.timestamp(q, static_cast<uint32_t>(2 * r));
    cmd.dispatch(p.pipe, p.set, p.ck.workgroups);
    cmd.timestamp(q, static_cast<uint32_t>(2 * r + 1));
  }
  cmd.barrier_to_host();
  cmd.end();
  dev.submit_and_wait(cmd);
  if (reps == 0) return {};
  const std::vector<double> ns = dev.read_timestamps_ns(q, 0, static_cast<uint32_t>(2 * reps));
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) ms.push_back((ns[2 * r + 1] - ns[2 * r]) * 1e-6);
  return ms;
}

/// Untimed dispatches that take about `ms` of GPU time for a kernel of `once` ms (at least 1, at most 4096).
int dispatches_for(double ms, double once) {
  return static_cast<int>(std::clamp(ms / std::max(once, 1e-4), 1.0, 4096.0));
}

/// Keeps the GPU busy with `p` for `ms` of wall time (the clock ramp; see the file comment).
void warm_up(Device& dev, const Prepared& p, double once, double ms) {
  const int n = dispatches_for(std::min(ms, 20.0), once);
  const auto t0 = Clock::now();
  do (void)dispatch_batch(dev, p, n, 0);
  while (ms_since(t0) < ms);
}

/// The heuristic (index 0) against the fastest other candidate in alternating rounds; true when the other wins by
/// kMargin on the median and in most rounds.
bool final_check(Device& dev, Prepared& h, Prepared& best, int warm, int rounds) {
  h.ms.clear(), best.ms.clear();
  int wins = 0;
  for (int r = 0; r < rounds; ++r) {
    const std::vector<double> a = dispatch_batch(dev, h, warm, kTimedReps);
    const std::vector<double> b = dispatch_batch(dev, best, warm, kTimedReps);
    h.ms.insert(h.ms.end(), a.begin(), a.end());
    best.ms.insert(best.ms.end(), b.begin(), b.end());
    std::vector<double> sa = a, sb = b;
    std::sort(sa.begin(), sa.end()), std::sort(sb.begin(), sb.end());
    wins += sb[sb.size() / 2] < sa[sa.size() / 2];
  }
  return best.median() <= (1 - kMargin) * h.median() && 2 * wins > rounds;
}

}  // namespace

ComputeKernel autotune_kernel(Device& dev, KernelCache& cache, const Plan& plan, const Kernel& k,
                              const Emitter& emitter, ComputeKernel heuristic) {
  if (heuristic.strategy != "tiled-contraction" || !dev.caps().timestamps) return heuristic;
  const auto t_start = Clock::now();
  const uint64_t key = tune_key(dev, emitter.options().limits, heuristic.source);
  auto finish = [&](const TileConfig& t, std::string how) {
    ComputeKernel ck = emitter.compute_kernel(plan, k, t);
    ck.tuning = std::move(how);
    ck.tuning_ms = ms_since(t_start);
    return ck;
  };
  if (auto rec = cache.get_record(key)) {
    const std::string first = rec->substr(0, rec->find('\n'));
    if (auto t = parse_tile_config(first)) return finish(*t, "autotune cache: " + first);
  }
  const std::vector<TileConfig> cands = emitter.tile_candidates(plan, k);
  if (cands.size() < 2) return heuristic;
  const std::vector<Buffer> bufs = scratch_buffers(dev, plan, heuristic);

  // the heuristic first: compiled, one dispatch for its cost, then the warm-up
  std::vector<Prepared> p;
  p.push_back(prepare(dev, cache, plan, k, emitter, cands[0], bufs));
  (void)dispatch_batch(dev, p[0], 0, 1);
  double once = dispatch_batch(dev, p[0], 0, 1).front();
  const double warmup_ms = dev.caps().limits.cpu_device ? kCpuWarmupMs : kWarmupMs;
  warm_up(dev, p[0], once, warmup_ms);
  once = dispatch_batch(dev, p[0], 0, 1).front();  // warm
  const bool slow = once > kSlowDispatchMs;
  const int reps = slow ? 1 : kTimedReps, rounds = slow ? 1 : kScreenRounds;
  const int warm = slow ? 0 : dispatches_for(kRoundWarmMs, once);
  // as many candidates as the budget allows, estimated at the heuristic's time (all compiled before any timing)
  const double per_candidate = once * (reps + warm) * rounds + 1;
  const size_t fit = static_cast<size_t>(std::max(2.0, kKernelBudgetMs / per_candidate));
  for (size_t i = 1; i < cands.size() && i < fit; ++i) p.push_back(prepare(dev, cache, plan, k, emitter, cands[i], bufs));
  warm_up(dev, p[0], once, kRoundWarmMs * 10);  // the compiles above let the GPU idle

  // rounds after the first are skipped once the kernel's tuning has run past twice the budget (a slow or busy device)
  int rounds_run = 0;
  for (int r = 0; r < rounds && (r == 0 || ms_since(t_start) < 2 * kKernelBudgetMs); ++r, ++rounds_run)
    for (Prepared& c : p) {
      const std::vector<double> ms = dispatch_batch(dev, c, warm, reps);
      c.ms.insert(c.ms.end(), ms.begin(), ms.end());
    }
  std::vector<std::pair<double, TileConfig>> screened;
  for (const Prepared& c : p) screened.emplace_back(c.median(), c.tiles);
  size_t best = 0;
  for (size_t i = 1; i < p.size(); ++i)
    if (p[i].median() < p[best].median()) best = i;
  const double h_screen = p[0].median(), b_screen = p[best].median();
  bool replace = false;
  if (best != 0) replace = final_check(dev, p[0], p[best], warm, slow ? 3 : kFinalRounds);
  const size_t pick = replace ? best : 0;
  const double tune_ms = ms_since(t_start);
  const std::string verdict =
      best == 0 ? "the heuristic was fastest"
                : fmt::format("fastest {} {:.4f} ms vs heuristic {:.4f} ms; final check (medians of {} alternating rounds) "
                              "{:.4f} vs {:.4f} ms: {}",
                              p[best].tiles.str(), b_screen, h_screen, slow ? 3 : kFinalRounds, p[best].median(),
                              p[0].median(), replace ? "replaced the heuristic" : "kept the heuristic (needs -5 %)");
  const std::string note = fmt::format("{} ({} of {} candidates, {} rounds after {:.0f} ms of warm-up; {}; tuning took {:.0f} ms)",
                                       p[pick].tiles.str(), p.size(), cands.size(), rounds_run, warmup_ms, verdict, tune_ms);
  std::string record = p[pick].tiles.str() + "\n" + note + "\n";
  for (auto& [ms, t] : screened) record += fmt::format("{} {:.4f} ms\n", t.str(), ms);
  cache.put_record(key, record);
  ComputeKernel out = replace ? std::move(p[pick].ck) : std::move(heuristic);
  out.tuning = "autotuned: " + note;
  out.tuning_ms = ms_since(t_start);
  return out;
}

}  // namespace sg::vk
