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

  /// Appends output `name` = t, and the State updates (Node::effects) of every node t's value depends on that are
  /// not yet in `updates` (BatchNorm's running statistics in a train-mode forward). Throws ValueError when one State
  /// would get two different next values in one program (a train-mode BatchNorm layer called twice), naming both nodes.
  void add_output(const std::string& name, const Tensor& t);
  /// Adds the effects of every node that `root`'s value depends on to `updates`, as add_output does (for programs
  /// whose outputs or updates are set by hand); repeated calls add nothing twice. Throws as add_output.
  void add_effects_of(const NodePtr& root);
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
