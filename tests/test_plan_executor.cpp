// plan_executor.h, the native backends' one plan executor, over a host storage of float vectors: which slot holds
// which value, the persistent values' front/back commits (two steps of an update that reads its own target),
// hooks, row-major readback of a transposed value, re-allocation of a leaf's slots, and the errors.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../runtime/src/plan_executor.h"
#include "sg/schedule.h"
#include "sg/sg.h"

using namespace sg;

namespace {

/// A slot: host floats, the extent it was allocated for, and a serial number (which slot is which).
struct HostSlot {
  std::vector<float> data;
  Extent alloc;
  int serial = -1;
};

struct HostStorage {
  using Slot = HostSlot;
  int created = 0;
  Slot create_value(const Value& v) { return {std::vector<float>(v.node->numel()), {}, created++}; }
  Slot create_pooled(const Plan& plan, int b) { return {std::vector<float>(plan.buffers[b].numel), {}, created++}; }
  Slot create_leaf(const Node& n, const std::string&, Extent alloc, const Slot* like) {
    return {std::vector<float>(n.numel()), like ? alloc.cover(like->alloc) : alloc, created++};
  }
  bool covers(const Slot& s, Extent alloc) { return s.alloc.covers(alloc); }
  void upload(Slot& s, const float* data, int64_t numel) { std::copy(data, data + numel, s.data.begin()); }
  void download(const Slot& s, float* data, int64_t numel) { std::copy_n(s.data.begin(), numel, data); }
};

using Slots = detail::PlanSlots<HostStorage>;
using Leaves = detail::PersistentValues<HostStorage>;

std::vector<float> elementwise(const std::vector<float>& a, const std::vector<float>& b, float (*f)(float, float)) {
  std::vector<float> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = f(a[i], b[i]);
  return r;
}

}  // namespace

TEST_CASE("plan executor: inputs, the parameter's front, its update's back slot, commits over two steps, hooks",
          "[plan_executor]") {
  const Tensor x = input("x", {2, 3});
  const std::vector<float> w0 = {1, 2, 3, 4, 5, 6};
  const Tensor w = param("w", {2, 3}, w0);
  Program p;
  p.add_output("y", x * w);
  const Tensor w_next = w - x;
  p.updates.push_back({w.node(), w_next.node()});
  const Plan plan = schedule(p);
  const int xid = plan.value_of(x.node().get()).id, wid = plan.value_of(w.node().get()).id;
  const int yid = plan.output_values.at(0), next = plan.updates.at(0).second;
  REQUIRE(plan.values[xid].kind == ValueKind::Input);
  REQUIRE(plan.values[wid].kind == ValueKind::Persistent);
  REQUIRE(plan.values[next].update_of == wid);

  HostStorage st;
  Leaves leaves("host");
  Slots slots(st, leaves, plan);
  CHECK(slots.of(wid).data == w0);  // the front, created with the leaf's data
  CHECK(slots.of(next).serial == leaves.get(st, w.node()).back().serial);
  CHECK(slots.of(next).serial != slots.of(wid).serial);
  CHECK(slots.fronts() == std::vector<uint8_t>{0});

  // the kernels, on the host: y = x * w and w' = w - x, each written into the slot its value has now
  auto launch = [&](size_t k) {
    const auto& xs = slots.of(xid).data;
    const auto& ws = slots.of(wid).data;
    for (int o : plan.kernels[k].outputs) {
      if (o == yid) slots.of(o).data = elementwise(xs, ws, [](float a, float b) { return a * b; });
      if (o == next) slots.of(o).data = elementwise(ws, xs, [](float a, float b) { return a - b; });
    }
  };
  const FeedChecker checker(plan.program);
  const std::vector<float> xv = {0.5f, -1, 2, 0, 3, -2};
  std::vector<std::vector<float>> hooked(plan.values.size());
  auto notify = [&](int k, const std::function<std::vector<float>(int)>& read) {
    for (int o : plan.kernels[k].outputs) hooked[o] = read(o);
  };
  detail::Phases phases;
  std::vector<float> want_w = w0;
  for (int step = 0; step < 2; ++step) {
    INFO("step " << step);
    const std::vector<std::vector<float>> out = slots.run(
        phases, [&] { slots.upload_feeds(checker, {{"x", &xv}}); }, [&] { slots.launch_each(launch, notify); });
    REQUIRE(out.size() == 1);
    CHECK(out[0] == elementwise(xv, want_w, [](float a, float b) { return a * b; }));
    CHECK(hooked[yid] == out[0]);
    want_w = elementwise(want_w, xv, [](float a, float b) { return a - b; });
    CHECK(hooked[next] == want_w);           // read by the hook before the commit
    CHECK(leaves.read(st, w) == want_w);     // committed: the back slot is the front now
    CHECK(slots.of(wid).data == want_w);
    CHECK(slots.fronts() == std::vector<uint8_t>{static_cast<uint8_t>((step + 1) % 2)});
    REQUIRE(phases.size() == 3);
    CHECK(phases[0].first == "upload");
    CHECK(phases[1].first == "submit");
    CHECK(phases[2].first == "readback");
  }
  CHECK(want_w == std::vector<float>{0, 4, -1, 4, -1, 10});

  // Backend::write goes to the front; a wrong size is refused
  leaves.write(st, w, w0);
  CHECK(slots.of(wid).data == w0);
  CHECK_THROWS_AS(leaves.write(st, w, {1, 2}), ValueError);
  // an input is not a persistent value
  CHECK_THROWS_WITH(leaves.get(st, x.node()), Catch::Contains("host: ") && Catch::Contains("not a parameter or state"));
  // a missing feed is refused before anything is uploaded
  CHECK_THROWS_AS(slots.upload_feeds(checker, {}), ValueError);
}

TEST_CASE("plan executor: a larger allocation replaces a leaf's slots and keeps its value, a transposed value reads "
          "back row-major",
          "[plan_executor]") {
  const Tensor x = input("x", {2, 3});
  const std::vector<float> w0 = {1, 2, 3, 4, 5, 6};
  const Tensor w = param("w", {2, 3}, w0);
  Program p;
  p.add_output("y", x * w);
  Plan plan = schedule(p);
  const int yid = plan.output_values.at(0);

  HostStorage st;
  Leaves leaves("host");
  Slots slots(st, leaves, plan);
  auto& pair = leaves.get(st, w.node());
  leaves.write(st, w, {7, 8, 9, 10, 11, 12});
  const int old_front = pair.front().serial;
  CHECK(&leaves.get(st, w.node(), Extent{1, 1}) == &pair);  // covered: nothing new
  CHECK(pair.front().serial == old_front);
  auto& grown = leaves.get(st, w.node(), Extent{16, 4});
  CHECK(&grown == &pair);  // the same pair (executables keep its address), new slots
  CHECK(pair.front().serial != old_front);
  CHECK(pair.front().alloc == Extent{16, 4});
  CHECK(pair.back().alloc == Extent{16, 4});
  CHECK(leaves.read(st, w) == std::vector<float>{7, 8, 9, 10, 11, 12});

  // Value::transposed: the slot holds element (i, j) of the 2x3 value at j * 2 + i
  plan.values[yid].transposed = true;
  const std::vector<float> row_major = {1, 2, 3, 4, 5, 6};
  std::vector<float>& stored = slots.of(yid).data;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) stored[j * 2 + i] = row_major[i * 3 + j];
  CHECK(stored == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(slots.read(yid) == row_major);
}
