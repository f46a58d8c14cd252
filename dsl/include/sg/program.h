// shadergrad — Program: what a backend runs (graph outputs read back + persistent-value updates), next to the
// graph IR it is made of. Built by hand (Program::add_output) or by sg::make_train_step (sg/autodiff.h); scheduled
// by sg::schedule (sg/schedule.h) and executed by a Backend (sg/backend.h).
#pragma once

#include <string>
#include <vector>

#include "sg/tensor.h"

namespace sg {

/// A persistent value's next value after one step (parameter update, optimizer state update).
struct Update {
  NodePtr target{};  ///< a Param or State leaf
  NodePtr value{};   ///< its value after the step (same shape)
};

/// What a backend runs: forward + backward + updates as one graph.
/// Each run feeds the Input leaves, evaluates `outputs` (read back) and all `updates` (kept on the device),
/// then commits every update at once (reads see pre-step values: ping-pong).
struct Program {
  std::vector<std::string> output_names;
  std::vector<NodePtr> outputs;
  std::vector<Update> updates;

  void add_output(const std::string& name, const Tensor& t) {
    output_names.push_back(name);
    outputs.push_back(t.node());
  }
  /// Roots of the graph: outputs, then update values.
  std::vector<NodePtr> roots() const;
  /// Every node the program evaluates, in deterministic topological order.
  std::vector<NodePtr> nodes() const;
  /// The Input leaves (sorted by name).
  std::vector<NodePtr> inputs() const;
  /// Param and State leaves read by the program (persistent values), in topological order.
  std::vector<NodePtr> persistent() const;
};

}  // namespace sg
