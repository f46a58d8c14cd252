// shadergrad — validation of the feeds given to Executable::run, shared by every backend.
//
// Every backend calls FeedChecker::check before it uploads or evaluates anything, so all backends reject the
// same feeds with the same message (one place; a new backend adds one call):
//
//   FeedChecker checker(program);                        // at compile time: which inputs, which must be labels
//   auto data = checker.check(feeds);                    // per run: ValueError on a bad feed, else the data
//   for (size_t i = 0; i < checker.inputs().size(); ++i) upload(checker.inputs()[i], *data[i]);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sg/backend.h"

namespace sg {

/// What run() checks of its feeds, derived once from a Program:
///  - every Input leaf is fed exactly once (a missing name, a duplicate name, or a null Feed::data is a
///    ValueError naming the input); feeds naming no input of the program are ignored;
///  - each feed holds numel(shape) values;
///  - an i32 input holds integers (exact floats; NaN, +-inf and fractions such as 1.5 are rejected) in the range
///    GPU backends store exactly (|v| <= 2^24);
///  - an input read as class indices — consumed by one_hot (also inside cross_entropy), directly or through
///    reshape/permute/expand/slice — holds values in [0, num_classes) (torch.nn.functional.one_hot and
///    cross_entropy raise for the same labels). Labels computed inside the graph are not checked: one_hot of an
///    out-of-range computed value is a row of zeros (graph.h, Op::OneHot);
///  - an input read as the index of gather (sg::gather, sg::take, nn::Embedding), directly or through
///    reshape/permute/expand, holds integers in [0, n) with n the size of the axis it picks along; the message names
///    the input, the element, the value, and the gather with the user's source line, e.g. "run: input 'tokens'
///    element 3 is 12, outside [0, 10) (gather at model.cpp:42 picks along an axis of 10; ...)". An index computed
///    in the graph is clamped into range by GPU kernels (never an out-of-bounds read); the CPU reference throws.
/// Messages name the input, the flat element index and the value, e.g.
/// "run: input 'labels' element 3 is 5, outside [0, 3) (one_hot/cross_entropy with 3 classes)".
class FeedChecker {
 public:
  explicit FeedChecker(const Program& program);
  /// The Input leaves, sorted by name (Program::inputs()).
  const std::vector<NodePtr>& inputs() const { return inputs_; }
  /// The number of classes the values of Input leaf `input` index (valid values are [0, n)); 0 for an input not
  /// read as class indices or not of this program. The web export records it per input (docs/BUNDLE.md,
  /// "classes"), so the JavaScript runtime refuses the same labels.
  int64_t classes_of(const Node& input) const;
  /// "gather at model.cpp:42" when the bound of classes_of(input) comes from a gather's index (the web export
  /// records it as "index_of", so the JavaScript runtime names the op too); "" otherwise.
  std::string bound_by(const Node& input) const;
  /// Validates `feeds` (ValueError as above); returns each input's data, in inputs() order.
  std::vector<const std::vector<float>*> check(const std::vector<Feed>& feeds) const;

 private:
  std::vector<NodePtr> inputs_;
  std::vector<int64_t> classes_;  ///< per input: smallest one_hot num_classes or gather extent reading it, 0 when none
  std::vector<const Node*> gathers_;  ///< per input: the gather whose extent is classes_, or nullptr
};

}  // namespace sg
