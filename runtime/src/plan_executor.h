// Private to runtime: the one execution model of a Plan on the native backends (gles, gles-compute, vulkan,
// cpu-simd). A backend supplies its storage (the slot type: a texture, a device buffer, a host array; how to create,
// fill and read one) and how kernels launch; this file holds which slot holds which value, the persistent values'
// front/back commits, the hook calls, the row-major readback and the shape of a run.
//
//   value kind            slot
//   Input, Constant       a slot of the executable (constants uploaded once, inputs at every run)
//   Persistent            the front slot of the Param/State leaf (PersistentValues: shared by every executable of
//                         the backend, created with the leaf's data on first use)
//   Temp updating a leaf  that leaf's back slot (no kernel reads what it writes)
//   other Temp            pooled slot Value::buffer of the memory plan (row plane p > 0: Value::plane_buffers[p])
//
// A run (PlanSlots::run) uploads the fed inputs ("upload" phase), submits the kernels (the backend's part;
// launch_each launches them one at a time from the host and calls the kernel hook after each: "submit"), reads back
// the program outputs row-major ("readback"), then commit_updates makes every updated leaf's back slot its front.
// Readback is row-major whatever the storage: row planes are interleaved back, a transposed temporary transposed.
//
// `Storage`, the backend's part (one object per backend, shared by its executables):
//   using Slot = ...;
//   Slot create_value(const Value& v)            an Input's or Constant's slot
//   Slot create_pooled(const Plan& plan, int b)  pooled slot b (Plan::buffers[b], Plan::buffer_extents[b])
//   Slot create_leaf(const Node& leaf, const std::string& name, Extent alloc, const Slot* like)
//       a persistent leaf's front or back slot, allocated to cover `alloc` (Value::extent); `like`: the slot it
//       replaces when an earlier allocation was too small (same layout, at least as large)
//   bool covers(const Slot& s, Extent alloc)     whether `s` is allocated to cover `alloc`
//   void upload(Slot& s, const float* data, int64_t numel)
//   void download(const Slot& s, float* data, int64_t numel)   in the slot's own element order
// BufferStorage adapts a device of plain buffers (`create_buffer(numel, name)`, upload, download).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/error.h"
#include "sg/feeds.h"

namespace sg::detail {

/// Storage of plain buffers over `Device`: `Buffer create_buffer(int64_t numel, std::string_view name)`,
/// `void upload(Buffer&, const float*, int64_t numel)`, `void download(const Buffer&, float*, int64_t numel)`.
template <class Device, class Buffer>
struct BufferStorage {
  using Slot = Buffer;
  Device* dev;
  Slot create_value(const Value& v) { return dev->create_buffer(v.node->numel(), v.name); }
  Slot create_pooled(const Plan& plan, int b) { return dev->create_buffer(plan.buffers[b].numel, "pool"); }
  Slot create_leaf(const Node& leaf, const std::string& name, Extent, const Slot*) {
    return dev->create_buffer(leaf.numel(), name);
  }
  bool covers(const Slot&, Extent) { return true; }
  void upload(Slot& s, const float* data, int64_t numel) { dev->upload(s, data, numel); }
  void download(const Slot& s, float* data, int64_t numel) { dev->download(s, data, numel); }
};

/// The front/back slots of the Param/State leaves of one backend.
template <class Storage>
class PersistentValues {
 public:
  using Slot = typename Storage::Slot;
  struct Pair {
    Slot slot[2];
    int front_index = 0;  ///< slot[front_index] holds the current value
    Slot& front() { return slot[front_index]; }
    Slot& back() { return slot[1 - front_index]; }
  };
  /// `backend` names the backend in messages ("gles-compute").
  explicit PersistentValues(std::string backend) : backend_(std::move(backend)) {}

  /// The slots of leaf `n`, created (front = its initial data) on first use, allocated to cover `alloc`: slots
  /// allocated smaller by an earlier plan are replaced by larger ones holding the same current value. ValueError
  /// for a node without data. The Pair's address is stable.
  Pair& get(Storage& st, const NodePtr& n, Extent alloc = {}) {
    auto it = values_.find(n.get());
    if (it != values_.end()) {
      Pair& p = it->second;
      if (!st.covers(p.front(), alloc)) {
        std::vector<float> current(static_cast<size_t>(n->numel()));
        st.download(p.front(), current.data(), n->numel());
        Pair grown{{st.create_leaf(*n, n->name, alloc, &p.front()), st.create_leaf(*n, n->name + ".back", alloc, &p.front())}};
        st.upload(grown.front(), current.data(), n->numel());
        p = std::move(grown);
      }
      return p;
    }
    if (!n->data) throw ValueError(fmt::format("{}: {} is not a parameter or state", backend_, n->describe()));
    Pair p{{st.create_leaf(*n, n->name, alloc, nullptr), st.create_leaf(*n, n->name + ".back", alloc, nullptr)}};
    st.upload(p.front(), n->data->data(), n->numel());
    keep_.push_back(n);
    return values_.emplace(n.get(), std::move(p)).first->second;  // node-based map: the reference stays valid
  }
  /// The current value of `leaf` (Backend::read).
  std::vector<float> read(Storage& st, const Tensor& leaf) {
    std::vector<float> out(static_cast<size_t>(leaf.numel()));
    st.download(get(st, leaf.node()).front(), out.data(), leaf.numel());
    return out;
  }
  /// Overwrites the current value of `leaf` (Backend::write); ValueError on a size mismatch.
  void write(Storage& st, const Tensor& leaf, const std::vector<float>& data) {
    if (static_cast<int64_t>(data.size()) != leaf.numel())
      throw ValueError(fmt::format("write: {} expects {} values, got {}", leaf.node()->describe(), leaf.numel(),
                                   data.size()));
    st.upload(get(st, leaf.node()).front(), data.data(), leaf.numel());
  }

 private:
  std::string backend_;
  std::unordered_map<const Node*, Pair> values_;
  std::vector<NodePtr> keep_;  ///< keeps the leaves alive while their slots exist
};

/// A value's content in row-major order from its storage order: a transposed temporary (Value::transposed) holds
/// the transpose of its 2-D value.
inline std::vector<float> to_row_major(const Value& val, std::vector<float> v) {
  if (!val.transposed) return v;
  const int64_t rows = val.node->shape[0], cols = val.node->shape[1];
  std::vector<float> t(v.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[i * cols + j] = v[j * rows + i];
  return t;
}

/// Timed phases of a run (Executable::last_phases).
using Phases = std::vector<std::pair<std::string, double>>;

/// The slots of one executable's plan: its pooled temporaries, inputs and constants, and the backend's persistent
/// values; and the run of a step over them. `st`, `persistent` and `plan` must outlive it (the executable holds the
/// backend's context).
template <class Storage>
class PlanSlots {
 public:
  using Slot = typename Storage::Slot;
  using Persistent = PersistentValues<Storage>;

  PlanSlots(Storage& st, Persistent& persistent, const Plan& plan) : st_(&st), persistent_(&persistent), plan_(&plan) {
    for (size_t b = 0; b < plan.buffers.size(); ++b) pool_.push_back(st.create_pooled(plan, static_cast<int>(b)));
    std::unordered_set<const void*> seen;
    for (const Value& v : plan.values) {
      if (v.kind == ValueKind::Input) {
        own_.emplace(v.id, st.create_value(v));
        inputs_.emplace(v.node.get(), v.id);
      }
      if (v.kind == ValueKind::Constant) {
        Slot s = st.create_value(v);
        st.upload(s, v.node->data->data(), v.node->numel());
        own_.emplace(v.id, std::move(s));
      }
      if (v.kind == ValueKind::Persistent)
        if (auto* p = &persistent.get(st, v.node, v.extent); seen.insert(p).second) leaves_.push_back(p);
    }
  }

  /// The slot holding value `id` of the plan now (`plane` > 0: that row plane's pooled slot, Value::planes).
  Slot& of(int id, int plane = 0) {
    const Value& v = plan_->values[id];
    if (plane > 0) return pool_.at(v.plane_buffers.at(plane));  // row planes exist for temporaries only
    switch (v.kind) {
      case ValueKind::Input:
      case ValueKind::Constant: return own_.at(id);
      case ValueKind::Persistent: return persistent_->get(*st_, v.node).front();
      case ValueKind::Temp:
        if (v.update_of >= 0) return persistent_->get(*st_, plan_->values[v.update_of].node).back();
        return pool_.at(v.buffer);
    }
    throw BackendError("unknown value kind of value " + v.name);
  }

  /// Value `id` read back row-major (numel floats). `download(const Slot&, int id, float*, int64_t numel)` reads a
  /// slot in its own element order (default: Storage::download).
  std::vector<float> read(int id) {
    return read(id, [this](const Slot& s, int, float* dst, int64_t n) { st_->download(s, dst, n); });
  }
  template <class Download>
  std::vector<float> read(int id, Download&& download) {
    const Value& val = plan_->values[id];
    std::vector<float> v(static_cast<size_t>(val.node->numel()));
    if (val.planes > 1) {  // row planes (Value::planes): interleave the planes' rows back
      const int64_t P = val.row_planes(), Pc = val.col_planes, cols = val.node->shape.back(), per = val.layout.numel;
      const int64_t pcols = cols / Pc;  // a plane's row: texel t of it is texel t * Pc + q of the tensor row
      std::vector<float> plane(static_cast<size_t>(per));
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Pc; ++q) {
          download(of(id, static_cast<int>(p * Pc + q)), id, plane.data(), per);
          for (int64_t r = 0; r < per / pcols; ++r)
            for (int64_t t = 0; t < pcols / 4; ++t)
              std::copy_n(plane.data() + r * pcols + t * 4, 4, v.data() + (r * P + p) * cols + (t * Pc + q) * 4);
        }
      return v;
    }
    download(of(id), id, v.data(), static_cast<int64_t>(v.size()));
    return to_row_major(val, std::move(v));
  }

  /// Checks the feeds (ValueError before any upload) and calls `fn(int value_id, const std::vector<float>& data)`
  /// for each one the plan reads.
  template <class Fn>
  void for_each_feed(const FeedChecker& checker, const std::vector<Feed>& feeds, Fn&& fn) {
    const std::vector<const std::vector<float>*> data = checker.check(feeds);
    for (size_t i = 0; i < checker.inputs().size(); ++i)
      if (auto it = inputs_.find(checker.inputs()[i].get()); it != inputs_.end()) fn(it->second, *data[i]);
  }
  /// Checks the feeds and uploads the ones the plan reads into their slots.
  void upload_feeds(const FeedChecker& checker, const std::vector<Feed>& feeds) {
    for_each_feed(checker, feeds, [this](int id, const std::vector<float>& d) {
      st_->upload(own_.at(id), d.data(), plan_->values[id].node->numel());
    });
  }

  /// Kernels launched one at a time from the host: `launch(size_t k)` for each kernel in Plan::kernels order, then
  /// `notify(int k, read)` (the backend's Executable::notify_hook; `read(value_id)` reads a value row-major).
  template <class Launch, class Notify>
  void launch_each(Launch&& launch, Notify&& notify) {
    const std::function<std::vector<float>(int)> read_value = [this](int v) { return read(v); };
    for (size_t k = 0; k < plan_->kernels.size(); ++k) {
      launch(k);
      notify(static_cast<int>(k), read_value);
    }
  }

  /// One step: `upload()` ("upload" phase), `submit()` ("submit"), the program outputs read back in
  /// Program::output_names order with `download` (see read; "readback"), then the updates committed.
  template <class Upload, class Submit, class Download>
  std::vector<std::vector<float>> run(Phases& phases, Upload&& upload, Submit&& submit, Download&& download) {
    using Clock = std::chrono::steady_clock;
    auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
    phases.clear();
    Clock::time_point t0 = Clock::now();
    upload();
    phases.emplace_back("upload", ms_since(t0));
    t0 = Clock::now();
    submit();
    phases.emplace_back("submit", ms_since(t0));
    t0 = Clock::now();
    std::vector<std::vector<float>> out;
    for (int id : plan_->output_values) out.push_back(read(id, download));
    phases.emplace_back("readback", ms_since(t0));
    commit_updates();
    return out;
  }
  template <class Upload, class Submit>
  std::vector<std::vector<float>> run(Phases& phases, Upload&& upload, Submit&& submit) {
    return run(phases, std::forward<Upload>(upload), std::forward<Submit>(submit),
               [this](const Slot& s, int, float* dst, int64_t n) { st_->download(s, dst, n); });
  }

  /// Makes this run's updates current: the back slot of every updated leaf becomes its front.
  void commit_updates() {
    for (auto& [target, value] : plan_->updates) {
      auto& p = persistent_->get(*st_, plan_->values[target].node);
      p.front_index = 1 - p.front_index;
    }
  }

  /// Which slot is the front of each persistent value the plan reads or updates (plan order): a backend that
  /// records the slots into command buffers keeps one recording per key.
  std::vector<uint8_t> fronts() const {
    std::vector<uint8_t> key;
    key.reserve(leaves_.size());
    for (const auto* p : leaves_) key.push_back(static_cast<uint8_t>(p->front_index));
    return key;
  }

 private:
  Storage* st_;
  Persistent* persistent_;
  const Plan* plan_;
  std::vector<Slot> pool_;                        ///< pooled temporaries
  std::unordered_map<int, Slot> own_;             ///< inputs and constants, by value id
  std::unordered_map<const Node*, int> inputs_;   ///< Input leaf -> its value id
  std::vector<typename Persistent::Pair*> leaves_;  ///< the persistent values' slots, once each, in plan order
};

}  // namespace sg::detail
