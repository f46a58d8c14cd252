// dispatch_epochs.h, the order in which the Vulkan backend records a step's dispatches between barriers: on random
// access patterns every conflicting pair keeps its order across an epoch boundary, and the number of epochs equals
// the longest chain of conflicts computed here by a quadratic walk over all pairs. The end-to-end check (every model
// on lavapipe with synchronization validation and zero messages) is the Vulkan suites'.
#include <algorithm>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "../runtime/src/dispatch_epochs.h"

using sg::detail::DispatchAccess;

namespace {

bool contains(const std::vector<int>& v, int h) { return std::find(v.begin(), v.end(), h) != v.end(); }

/// Whether the later dispatch `b` must stay after `a`: reads what `a` writes, or writes what `a` reads or writes.
bool conflicts(const DispatchAccess<int>& a, const DispatchAccess<int>& b) {
  for (int h : b.reads)
    if (contains(a.writes, h)) return true;
  for (int h : b.writes)
    if (contains(a.writes, h) || contains(a.reads, h)) return true;
  return false;
}

/// Length (in dispatches) of the longest chain i1 < i2 < ... of pairwise-conflicting consecutive dispatches.
int longest_conflict_chain(const std::vector<DispatchAccess<int>>& d) {
  std::vector<int> len(d.size(), 1);
  int best = 0;
  for (size_t j = 0; j < d.size(); ++j) {
    for (size_t i = 0; i < j; ++i)
      if (conflicts(d[i], d[j])) len[j] = std::max(len[j], len[i] + 1);
    best = std::max(best, len[j]);
  }
  return best;
}

std::vector<DispatchAccess<int>> random_step(std::mt19937& rng, int kernels, int buffers) {
  std::uniform_int_distribution<int> buffer(0, buffers - 1), count(0, 3);
  std::vector<DispatchAccess<int>> d(kernels);
  for (auto& k : d) {
    for (int n = count(rng); n > 0; --n) k.reads.push_back(buffer(rng));
    for (int n = 1 + count(rng) / 2; n > 0; --n) k.writes.push_back(buffer(rng));
  }
  return d;
}

}  // namespace

TEST_CASE("dispatch epochs: conflicting dispatches keep their order, no more epochs than the longest chain",
          "[vulkan][epochs]") {
  std::mt19937 rng(20261206);
  for (int round = 0; round < 300; ++round) {
    const auto d = random_step(rng, 1 + round % 40, 2 + round % 13);
    const std::vector<int> epoch = sg::detail::dispatch_epochs(d);
    REQUIRE(epoch.size() == d.size());
    for (size_t j = 0; j < d.size(); ++j)
      for (size_t i = 0; i < j; ++i)
        if (conflicts(d[i], d[j])) REQUIRE(epoch[i] < epoch[j]);
    CHECK(*std::max_element(epoch.begin(), epoch.end()) + 1 == longest_conflict_chain(d));
    const std::vector<size_t> order = sg::detail::epoch_order(epoch);
    for (size_t n = 1; n < order.size(); ++n) {  // by epoch, program order within one
      REQUIRE(epoch[order[n - 1]] <= epoch[order[n]]);
      if (epoch[order[n - 1]] == epoch[order[n]]) REQUIRE(order[n - 1] < order[n]);
    }
  }
}

TEST_CASE("dispatch epochs: independent kernels between dependent ones share an epoch", "[vulkan][epochs]") {
  // a(writes 0), b(reads 0, writes 1), c(writes 2), d(reads 2, writes 3): recorded in program order, barriers fall
  // before b and before d (groups {a} {b, c} {d}); by epoch one barrier: {a, c} {b, d}
  std::vector<DispatchAccess<int>> d{{{}, {0}}, {{0}, {1}}, {{}, {2}}, {{2}, {3}}};
  CHECK(sg::detail::dispatch_epochs(d) == std::vector<int>{0, 1, 0, 1});
  CHECK(sg::detail::epoch_order(sg::detail::dispatch_epochs(d)) == std::vector<size_t>{0, 2, 1, 3});
  // a write after a read of the same (pooled) buffer waits for the reader
  std::vector<DispatchAccess<int>> war{{{5}, {6}}, {{}, {5}}};
  CHECK(sg::detail::dispatch_epochs(war) == std::vector<int>{0, 1});
}
