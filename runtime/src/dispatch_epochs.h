// Private to runtime: the order in which a step's dispatches are recorded between barriers (Vulkan).
//
// A barrier is needed between two dispatches that conflict: the later one reads a buffer the earlier one writes, or
// writes a buffer the earlier one reads or writes (the memory plan's pooled buffers make write-after-read conflicts
// real). Recorded in program order, a barrier falls wherever the next dispatch conflicts with one since the last
// barrier, so a chain of independent kernels interleaved with dependent ones pays a barrier each. Epochs group them
// instead: a dispatch's epoch is one more than the latest epoch of an earlier dispatch it conflicts with (0 if none),
// the dispatches are recorded epoch by epoch (program order within one) and a barrier separates epochs. Every
// conflicting pair keeps its program order with a barrier between them; dispatches of one epoch may run concurrently.
// The number of barriers is the longest chain of conflicts, the least any order that keeps the conflicts can have.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <numeric>
#include <vector>

namespace sg::detail {

/// The buffers one dispatch reads and writes (any handle type with operator<).
template <class Handle>
struct DispatchAccess {
  std::vector<Handle> reads, writes;
};

/// Epoch of each dispatch (see the file comment), in one pass: per buffer the latest epoch that wrote it and the
/// latest that read it.
template <class Handle>
std::vector<int> dispatch_epochs(const std::vector<DispatchAccess<Handle>>& dispatches) {
  std::map<Handle, int> last_write, last_read;
  auto latest = [](const std::map<Handle, int>& m, const Handle& h) {
    auto it = m.find(h);
    return it == m.end() ? -1 : it->second;
  };
  std::vector<int> epoch;
  epoch.reserve(dispatches.size());
  for (const auto& d : dispatches) {
    int after = -1;
    for (const auto& h : d.reads) after = std::max(after, latest(last_write, h));
    for (const auto& h : d.writes) after = std::max({after, latest(last_write, h), latest(last_read, h)});
    const int e = after + 1;
    for (const auto& h : d.reads) last_read[h] = std::max(latest(last_read, h), e);
    for (const auto& h : d.writes) last_write[h] = std::max(latest(last_write, h), e);
    epoch.push_back(e);
  }
  return epoch;
}

/// The dispatch indices in recording order: by epoch, program order within an epoch.
inline std::vector<size_t> epoch_order(const std::vector<int>& epochs) {
  std::vector<size_t> order(epochs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return epochs[a] < epochs[b]; });
  return order;
}

}  // namespace sg::detail
