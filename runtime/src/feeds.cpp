// Validation of Executable::run's feeds (sg/feeds.h): one place for every backend.
#include "sg/feeds.h"

#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

namespace sg {

namespace {

/// The Input leaf whose values `n` is (reshape/permute/expand of it: every element read), or nullptr.
const Node* source_input(const Node* n) {
  while (n && (n->op == Op::Reshape || n->op == Op::Permute || n->op == Op::Expand)) n = n->inputs[0].get();
  return n && n->op == Op::Input ? n : nullptr;
}

constexpr double kMaxExactInt = 16777216.0;  // 2^24: integers GPU backends store exactly as f32

}  // namespace

FeedChecker::FeedChecker(const Program& program)
    : inputs_(program.inputs()), classes_(inputs_.size(), 0), gathers_(inputs_.size(), nullptr) {
  std::unordered_map<const Node*, size_t> slot;
  for (size_t i = 0; i < inputs_.size(); ++i) slot[inputs_[i].get()] = i;
  for (auto& n : program.nodes()) {
    if (n->op != Op::OneHot && n->op != Op::Gather) continue;
    const bool gather = n->op == Op::Gather;
    const Node* in = source_input(n->inputs[gather ? 1 : 0].get());
    auto it = in ? slot.find(in) : slot.end();
    if (it == slot.end()) continue;
    const int64_t bound = gather ? n->inputs[0]->shape[n->attrs.axes[0]] : n->attrs.num_classes;
    int64_t& c = classes_[it->second];
    const Node*& by = gathers_[it->second];
    // the smallest bound wins; at equal bounds a gather names the op (gather's gradient reads its index by one_hot)
    if (c == 0 || bound < c || (bound == c && gather && !by)) by = gather ? n.get() : nullptr;
    c = c == 0 ? bound : std::min(c, bound);
  }
}

std::string FeedChecker::bound_by(const Node& input) const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].get() == &input && gathers_[i]) {
      const Node& g = *gathers_[i];
      return fmt::format("gather{}", g.loc.known() ? " at " + g.loc.str() : std::string());
    }
  return "";
}

int64_t FeedChecker::classes_of(const Node& input) const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].get() == &input) return classes_[i];
  return 0;
}

std::vector<const std::vector<float>*> FeedChecker::check(const std::vector<Feed>& feeds) const {
  std::vector<const std::vector<float>*> out(inputs_.size(), nullptr);
  std::unordered_map<std::string, size_t> slot;
  for (size_t i = 0; i < inputs_.size(); ++i) slot.emplace(inputs_[i]->name, i);
  for (size_t f = 0; f < feeds.size(); ++f) {
    auto it = slot.find(feeds[f].name);
    if (it == slot.end()) continue;  // not an input of this program
    const Node& in = *inputs_[it->second];
    if (out[it->second])
      throw ValueError(fmt::format("run: input '{}' is fed twice (feeds {} and {} have that name); feed each input "
                                   "once", in.name, [&] {
                                     for (size_t g = 0; g < f; ++g)
                                       if (feeds[g].name == in.name) return g;
                                     return f;
                                   }(), f));
    if (!feeds[f].data)
      throw ValueError(fmt::format("run: input '{}' ({}) has no data (Feed::data is null)", in.name,
                                   shape_str(in.shape)));
    out[it->second] = feeds[f].data;
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Node& in = *inputs_[i];
    if (!out[i]) throw ValueError(fmt::format("run: input '{}' ({}) was not fed", in.name, shape_str(in.shape)));
    const std::vector<float>& v = *out[i];
    if (static_cast<int64_t>(v.size()) != in.numel())
      throw ValueError(fmt::format("run: input '{}' expects {} values ({}), got {}", in.name, in.numel(),
                                   shape_str(in.shape), v.size()));
    if (in.dtype != DType::i32 && classes_[i] == 0) continue;
    const std::string by = gathers_[i] ? bound_by(in) : std::string();
    for (size_t e = 0; e < v.size(); ++e) {
      const double x = v[e];
      if (!by.empty() && !(x >= 0 && x < static_cast<double>(classes_[i]) && x == std::floor(x)))
        throw ValueError(fmt::format("run: input '{}' element {} is {}, {} [0, {}) ({} picks along an axis of {}; "
                                     "torch raises for it too); indices must be integers 0..{}", in.name, e, v[e],
                                     x == std::floor(x) ? "outside" : "not an integer index in", classes_[i], by,
                                     classes_[i], classes_[i] - 1));
      if (!(std::fabs(x) <= kMaxExactInt) || x != std::floor(x))
        throw ValueError(fmt::format("run: input '{}' element {} is {}, not an integer{} (integer inputs hold exact "
                                     "integers up to 2^24 in magnitude)", in.name, e, v[e],
                                     classes_[i] ? fmt::format(" class index in [0, {})", classes_[i]) : ""));
      if (classes_[i] && (x < 0 || x >= static_cast<double>(classes_[i])))
        throw ValueError(fmt::format("run: input '{}' element {} is {}, outside [0, {}) (one_hot/cross_entropy with "
                                     "{} classes); labels must be class indices 0..{}", in.name, e, v[e], classes_[i],
                                     classes_[i], classes_[i] - 1));
    }
  }
  return out;
}

}  // namespace sg
