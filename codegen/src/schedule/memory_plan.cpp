// The memory plan (all targets): liveness, pooled buffers, allocation extents, bytes.
//
// Runs last, after checking that the outputs of each domain block share one layout (the draw-extent invariant).
// Kernel::extent is recomputed (row planes may have narrowed layouts). Value::last_use is the last
// kernel reading a value (program outputs: forever). Every Temp output that is not an update value (an update
// value lives in its target's back texture or buffer) takes, per plane, a pooled buffer of the same physical
// size (layout width x height) that is free strictly before its producer runs — a kernel never reads the buffer
// it writes — preferring one already allocated for the draw's extent; a reused buffer keeps the largest numel of
// its users. Allocation extents (Value::extent) cover every draw writing the buffer (a union-domain draw renders
// its whole extent); a persistent value and its next value get the extent of the draw writing the next value.
// Plan::peak_bytes counts every texture or buffer as allocated: pooled temporaries, 2x persistent values (front
// and back), inputs and constants.
#include "schedule/state.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace sg::sched {

namespace {

/// The draw-extent invariant: the outputs of one domain block share one layout (the block addresses them all at the
/// same texel and its draw covers that layout's extent), else a target would run a mismatched draw: wrong values
/// where the device does not refuse it. A violation is a scheduler bug, reported by kernel and values.
void check_block_layouts(const Plan& plan) {
  for (const Kernel& k : plan.kernels)
    for (size_t j = 1; j < k.outputs.size(); ++j) {
      if (k.block_of(j) != k.block_of(j - 1)) continue;
      const Value& a = plan.values[k.outputs[j - 1]];
      const Value& b = plan.values[k.outputs[j]];
      if (a.layout.width != b.layout.width || a.layout.height != b.layout.height || a.layout.numel != b.layout.numel)
        throw Error(fmt::format("schedule: kernel {} writes {} ({}x{} texels) and {} ({}x{} texels) in one domain "
                                "block; its draw would address one of them wrongly (a bug in shadergrad's scheduler)",
                                k.name, a.name, a.layout.width, a.layout.height, b.name, b.layout.width,
                                b.layout.height));
    }
}

void liveness(Plan& plan) {
  for (auto& k : plan.kernels) {
    k.extent = {};
    for (int o : k.outputs) k.extent = k.extent.cover({plan.values[o].layout.width, plan.values[o].layout.height});
  }
  for (size_t ki = 0; ki < plan.kernels.size(); ++ki)
    for (int in : plan.kernels[ki].inputs) plan.values[in].last_use = static_cast<int>(ki);
  for (int o : plan.output_values) plan.values[o].last_use = std::numeric_limits<int>::max();
}

void pool_buffers(Plan& plan) {
  std::vector<int> buffer_free_after;  // kernel index after which the buffer is free
  for (auto& k : plan.kernels)
    for (int out : k.outputs) {
      Value& v = plan.values[out];
      if (v.update_of >= 0) continue;
      for (int plane = 0; plane < v.planes; ++plane) {
        // same physical size (addressing), free strictly before this kernel (never read and written by one
        // kernel); among those, one already allocated for this draw's extent (no growth)
        int found = -1;
        for (size_t b = 0; b < plan.buffers.size(); ++b) {
          if (buffer_free_after[b] < v.producer && plan.buffers[b].width == v.layout.width &&
              plan.buffers[b].height == v.layout.height) {
            if (found < 0 || (!plan.buffer_extents[found].covers(k.extent) && plan.buffer_extents[b].covers(k.extent)))
              found = static_cast<int>(b);
          }
        }
        if (found < 0) {
          found = static_cast<int>(plan.buffers.size());
          plan.buffers.push_back(v.layout);
          plan.buffer_extents.push_back({v.layout.width, v.layout.height});
          buffer_free_after.push_back(-1);
        }
        if (plane == 0) v.buffer = found;
        if (v.planes > 1) v.plane_buffers.push_back(found);
        // a reused buffer has the same physical size but may hold more elements than its first user: the
        // runtime checks downloads (and sizes its textures) against the buffer's numel, so keep the largest
        TextureLayout& bl = plan.buffers[found];
        if (v.layout.numel > bl.numel) bl.numel = v.layout.numel, bl.texels = v.layout.texels;
        // allocated for the largest draw writing it (a union-domain draw renders its whole extent)
        plan.buffer_extents[found] = plan.buffer_extents[found].cover(k.extent);
        // taken until after the last reader (and, for the other planes of this value, already now)
        buffer_free_after[found] = std::max(v.last_use, v.producer);
      }
    }
}

void allocation_extents(Plan& plan) {
  // allocation extents (Value::extent) and the bytes of all textures as allocated
  for (auto& v : plan.values) v.extent = {v.layout.width, v.layout.height};
  for (auto& v : plan.values)
    if (v.buffer >= 0) v.extent = plan.buffer_extents[v.buffer];
  for (auto& [target, value] : plan.updates) {
    Value& t = plan.values[target];
    const Value& u = plan.values[value];
    if (u.producer >= 0) t.extent = t.extent.cover(plan.kernels[u.producer].extent);
  }
  for (auto& [target, value] : plan.updates) plan.values[value].extent = plan.values[target].extent;
  int64_t bytes = 0;
  constexpr int64_t kTexelBytes = 4 * TextureLayout::kComponents;
  for (auto& v : plan.values) {
    if (v.kind == ValueKind::Persistent) bytes += 2 * v.extent.texels() * kTexelBytes;
    if (v.kind == ValueKind::Input || v.kind == ValueKind::Constant) bytes += v.extent.texels() * kTexelBytes;
  }
  for (auto& e : plan.buffer_extents) bytes += e.texels() * kTexelBytes;
  plan.peak_bytes = bytes;
}

}  // namespace

void plan_memory(ScheduleState& st) {
  check_block_layouts(st.plan);
  liveness(st.plan);
  pool_buffers(st.plan);
  allocation_extents(st.plan);
}

}  // namespace sg::sched
