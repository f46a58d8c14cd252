// The Vulkan backend's autotuner of tiled contractions (see vulkan_autotune.h).
#include "vulkan_autotune.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace sg::vk {

namespace {

constexpr int kTimedReps = 5;
constexpr double kSlowDispatchMs = 50;   // above this, one timed dispatch per candidate
constexpr double kKernelBudgetMs = 6000;  // tuning time per kernel after which later candidates are skipped

uint64_t tune_key(const Device& dev, const ComputeLimits& l, const std::string& heuristic_source) {
  const Caps& c = dev.caps();
  const std::string who =
      fmt::format("sg-autotune v1|{}|{}|{:x}:{:x}|{} {} {} {} {} {}", c.name, c.driver, c.vendor_id, c.device_id,
                  l.max_storage_buffers, l.max_workgroup_invocations, l.max_shared_bytes, l.max_workgroup_count,
                  l.max_buffer_bytes, l.cpu_device);
  return fnv1a64(heuristic_source, fnv1a64(who));
}

/// Zero-filled device buffers for every binding of a kernel (what candidates are timed on).
std::vector<Buffer> scratch_buffers(Device& dev, const Plan& plan, const ComputeKernel& ck) {
  std::vector<Buffer> out;
  for (int id : ck.bindings)
    out.push_back(dev.create_buffer(std::max<int64_t>(plan.values[id].node->numel(), 1) * 4, "autotune." + plan.values[id].name));
  return out;
}

/// Median kernel time (ms) of `reps` timed dispatches of `ck` after `warm` untimed ones (one submission).
double time_candidate(Device& dev, KernelCache& cache, const Kernel& k, const ComputeKernel& ck,
                      const std::vector<Buffer>& bufs, int reps, int warm = 1) {
  const CompiledShader& sh = cache.get_or_compile(k.name, ck.source, ShaderStage::Compute);
  Pipeline pipe = dev.create_pipeline(sh.spirv, static_cast<int>(ck.bindings.size()), ck.local_size, k.name + ".tune");
  DescriptorPool pool = dev.create_descriptor_pool(1, static_cast<int>(bufs.size()));
  std::vector<const Buffer*> ptrs;
  for (auto& b : bufs) ptrs.push_back(&b);
  VkDescriptorSet set = dev.allocate_set(pool, pipe, ptrs);
  QueryPool q = dev.create_timestamp_pool(static_cast<uint32_t>(2 * (reps + 1)));
  CommandBuffer cmd = dev.create_command_buffer();
  cmd.begin();
  cmd.reset_queries(q, 0, static_cast<uint32_t>(2 * (reps + 1)));
  for (int w = 1; w < warm; ++w) cmd.barrier(), cmd.dispatch(pipe, set, ck.workgroups);
  for (int r = 0; r <= reps; ++r) {
    cmd.barrier();
    cmd.timestamp(q, static_cast<uint32_t>(2 * r));
    cmd.dispatch(pipe, set, ck.workgroups);
    cmd.timestamp(q, static_cast<uint32_t>(2 * r + 1));
  }
  cmd.barrier_to_host();
  cmd.end();
  dev.submit_and_wait(cmd);
  const std::vector<double> ns = dev.read_timestamps_ns(q, 0, static_cast<uint32_t>(2 * (reps + 1)));
  std::vector<double> ms;
  for (int r = 1; r <= reps; ++r) ms.push_back((ns[2 * r + 1] - ns[2 * r]) * 1e-6);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

ComputeKernel autotune_kernel(Device& dev, KernelCache& cache, const Plan& plan, const Kernel& k,
                              const ComputeLimits& limits, ComputeKernel heuristic) {
  if (heuristic.strategy != "tiled-contraction" || !dev.caps().timestamps) return heuristic;
  const uint64_t key = tune_key(dev, limits, heuristic.source);
  auto finish = [&](const TileConfig& t, std::string how) {
    ComputeKernel ck = emit_compute_kernel(plan, k, limits, t);
    ck.tuning = std::move(how);
    return ck;
  };
  if (auto rec = cache.get_record(key)) {
    const std::string first = rec->substr(0, rec->find('\n'));
    if (auto t = parse_tile_config(first)) return finish(*t, "autotune cache: " + first);
  }
  const std::vector<TileConfig> cands = tile_candidates(plan, k, limits);
  if (cands.empty()) return heuristic;
  const std::vector<Buffer> bufs = scratch_buffers(dev, plan, heuristic);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::pair<double, TileConfig>> timed;
  for (const TileConfig& t : cands) {
    const double spent = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!timed.empty() && spent > kKernelBudgetMs) break;
    ComputeKernel ck = emit_compute_kernel(plan, k, limits, t);
    const double once = time_candidate(dev, cache, k, ck, bufs, 1);
    const double ms = once > kSlowDispatchMs ? once : time_candidate(dev, cache, k, ck, bufs, kTimedReps);
    timed.emplace_back(ms, *ck.tiles);
  }
  auto best = std::min_element(timed.begin(), timed.end(), [](auto& a, auto& b) { return a.first < b.first; });
  // Re-measure the heuristic and the best, alternating, after the GPU has been busy (an idle GPU clocks down: the
  // first candidates ran slower, the H200 picked 4x slower tiles than the heuristic at N=1024 without this); the
  // best replaces the heuristic only when it is clearly faster.
  if (best != timed.begin()) {
    const ComputeKernel hk = emit_compute_kernel(plan, k, limits, timed.front().second);
    const ComputeKernel bk = emit_compute_kernel(plan, k, limits, best->second);
    const int warm = static_cast<int>(std::clamp(20.0 / std::max(timed.front().first, 1e-3), 1.0, 200.0));
    std::vector<double> h, b;
    for (int round = 0; round < 3; ++round) {
      h.push_back(time_candidate(dev, cache, k, hk, bufs, kTimedReps, warm));
      b.push_back(time_candidate(dev, cache, k, bk, bufs, kTimedReps, warm));
    }
    std::sort(h.begin(), h.end()), std::sort(b.begin(), b.end());
    timed.front().first = h[1], best->first = b[1];
    if (!(b[1] < 0.97 * h[1])) best = timed.begin();
  }
  const std::string note = fmt::format("{} ({} of {} candidates timed; re-measured warm: best {:.4f} ms, heuristic {} {:.4f} ms)",
                                       best->second.str(), timed.size(), cands.size(), best->first,
                                       timed.front().second.str(), timed.front().first);
  std::string record = best->second.str() + "\n" + note + "\n";
  for (auto& [ms, t] : timed) record += fmt::format("{} {:.4f} ms\n", t.str(), ms);
  cache.put_record(key, record);
  return finish(best->second, "autotuned: " + note);
}

}  // namespace sg::vk
