// Private to runtime: the execution model of a Plan over storage buffers, one copy for the buffer backends that run
// a plan kernel by kernel from the host (gles-compute; Vulkan records the same model into command buffers).
//
//   value kind            storage
//   Input, Constant       a buffer of the executable (constants uploaded once, inputs at every run)
//   Persistent            the backend's front buffer of the Param/State leaf (PersistentValues: shared by every
//                         executable of the backend, created with the leaf's data on first use)
//   Temp updating a leaf  that leaf's back buffer (no kernel reads what it writes)
//   other Temp            pooled buffer Value::buffer of the memory plan
//
// A run uploads the fed inputs, launches the kernels (the backend's part), reads back the program outputs
// (row-major, numel floats), then commit_updates swaps the front and back buffers of every updated leaf.
//
// `Device` is what allocates and copies: `Buffer create_buffer(int64_t numel, std::string_view name)`,
// `void upload(Buffer&, const float*, int64_t numel)`, `void download(const Buffer&, float*, int64_t numel)`.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sg/backend.h"
#include "sg/error.h"
#include "sg/feeds.h"

namespace sg::detail {

/// The front/back buffers of the Param/State leaves of one backend.
template <class Device, class Buffer>
class PersistentValues {
 public:
  struct Pair {
    Buffer front, back;  ///< `front` holds the current value
  };
  /// `backend` names the backend in messages ("gles-compute").
  explicit PersistentValues(std::string backend) : backend_(std::move(backend)) {}

  /// The buffers of leaf `n`, created (front = its initial data) on first use. ValueError for a node without data.
  Pair& get(Device& dev, const NodePtr& n) {
    auto it = values_.find(n.get());
    if (it != values_.end()) return it->second;
    if (!n->data) throw ValueError(fmt::format("{}: {} is not a parameter or state", backend_, n->describe()));
    Pair p{dev.create_buffer(n->numel(), n->name), dev.create_buffer(n->numel(), n->name + ".back")};
    dev.upload(p.front, n->data->data(), n->numel());
    keep_.push_back(n);
    return values_.emplace(n.get(), std::move(p)).first->second;
  }
  /// The current value of `leaf` (Backend::read).
  std::vector<float> read(Device& dev, const Tensor& leaf) {
    std::vector<float> out(leaf.numel());
    dev.download(get(dev, leaf.node()).front, out.data(), leaf.numel());
    return out;
  }
  /// Overwrites the current value of `leaf` (Backend::write); ValueError on a size mismatch.
  void write(Device& dev, const Tensor& leaf, const std::vector<float>& data) {
    if (static_cast<int64_t>(data.size()) != leaf.numel())
      throw ValueError(fmt::format("write: {} expects {} values, got {}", leaf.node()->describe(), leaf.numel(),
                                   data.size()));
    dev.upload(get(dev, leaf.node()).front, data.data(), leaf.numel());
  }

 private:
  std::string backend_;
  std::unordered_map<const Node*, Pair> values_;
  std::vector<NodePtr> keep_;  ///< keeps the leaves alive while their buffers exist
};

/// The buffers of one executable's plan: its pooled temporaries, inputs and constants, and the backend's persistent
/// values. `dev` and `persistent` must outlive it (the executable holds the backend's context).
template <class Device, class Buffer>
class PlanBuffers {
 public:
  PlanBuffers(Device& dev, PersistentValues<Device, Buffer>& persistent, const Plan& plan)
      : dev_(&dev), persistent_(&persistent), plan_(&plan) {
    for (const auto& b : plan.buffers) pool_.push_back(dev.create_buffer(b.numel, "pool"));
    for (const Value& v : plan.values) {
      if (v.kind == ValueKind::Input) {
        own_.emplace(v.id, dev.create_buffer(v.node->numel(), v.name));
        inputs_.emplace(v.node.get(), v.id);
      }
      if (v.kind == ValueKind::Constant) {
        Buffer b = dev.create_buffer(v.node->numel(), v.name);
        dev.upload(b, v.node->data->data(), v.node->numel());
        own_.emplace(v.id, std::move(b));
      }
      if (v.kind == ValueKind::Persistent) persistent.get(dev, v.node);
    }
  }

  /// The buffer holding value `id` of the plan now.
  Buffer& of(int id) {
    const Value& v = plan_->values[id];
    switch (v.kind) {
      case ValueKind::Input:
      case ValueKind::Constant: return own_.at(id);
      case ValueKind::Persistent: return persistent_->get(*dev_, v.node).front;
      case ValueKind::Temp:
        if (v.update_of >= 0) return persistent_->get(*dev_, plan_->values[v.update_of].node).back;
        return pool_.at(v.buffer);
    }
    throw BackendError("unknown value kind of value " + v.name);
  }
  /// Value `id` read back (row-major, numel floats).
  std::vector<float> read(int id) {
    std::vector<float> out(plan_->values[id].node->numel());
    dev_->download(of(id), out.data(), static_cast<int64_t>(out.size()));
    return out;
  }
  /// Checks the feeds (ValueError before any upload) and uploads the ones the plan reads.
  void upload_feeds(const FeedChecker& checker, const std::vector<Feed>& feeds) {
    const std::vector<const std::vector<float>*> data = checker.check(feeds);
    for (size_t i = 0; i < checker.inputs().size(); ++i) {
      const Node* n = checker.inputs()[i].get();
      if (auto it = inputs_.find(n); it != inputs_.end()) dev_->upload(own_.at(it->second), data[i]->data(), n->numel());
    }
  }
  /// The program outputs, in Program::output_names order.
  std::vector<std::vector<float>> read_outputs() {
    std::vector<std::vector<float>> out;
    for (int id : plan_->output_values) out.push_back(read(id));
    return out;
  }
  /// Makes this run's updates current: swaps the front and back buffers of every updated leaf.
  void commit_updates() {
    for (auto& [target, value] : plan_->updates) {
      auto& p = persistent_->get(*dev_, plan_->values[target].node);
      std::swap(p.front, p.back);
    }
  }

 private:
  Device* dev_;
  PersistentValues<Device, Buffer>* persistent_;
  const Plan* plan_;
  std::vector<Buffer> pool_;                  ///< pooled temporaries
  std::unordered_map<int, Buffer> own_;       ///< inputs and constants, by value id
  std::unordered_map<const Node*, int> inputs_;  ///< Input leaf -> its value id
};

}  // namespace sg::detail
