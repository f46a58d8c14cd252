// The value table: every materialised tensor gets a Value (id, readable name, kind, layout).
//
// Value ids are dense and assigned in creation order: leaves (topological order), update targets the program
// does not read, then per launched kernel its partial-reduction values and outputs, then update copies. Names are
// GLSL identifiers made from the user's names (a program output by its name, an update by its target plus
// "_next", a constant by its node number, temporaries t<kernel>[_<output>]), unique within the plan ("_2", "_3"
// on clashes); the emitters name samplers, buffers and render targets after them. Layouts follow the storage
// options (TextureLayout::for_shape when row_aligned_layout, else for_numel, within the texture limits); a program
// input that is only ever read through one reshape merging its trailing axes (an image batch [N, C, H, W] flattened
// to [N, C*H*W] for a dense layer) is laid out by that reshape's shape, so the rows its readers walk are texture
// rows (the fragment emitter's direct texel addressing, docs/perf-log/W9.md).
#include "schedule/state.h"

#include <cctype>

#include <fmt/format.h>

namespace sg::sched {

namespace {

/// A GLSL identifier from a user name: other characters become '_', runs of '_' collapse and none trails
/// (GLSL reserves identifiers containing "__" and SPIRV-Cross renames them), never starting with a digit or "gl_".
std::string sanitize(const std::string& s) {
  std::string r;
  for (char c : s) {
    char x = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (x == '_' && (r.empty() || r.back() == '_')) continue;
    r += x;
  }
  while (!r.empty() && r.back() == '_') r.pop_back();
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0])) || r.rfind("gl_", 0) == 0) r = "v_" + r;
  return r;
}

}  // namespace

TextureLayout value_layout(ShapeRef shape, const ScheduleState& st) {
  const ScheduleOptions& opt = st.opt;
  return opt.row_aligned_layout
             ? TextureLayout::for_shape(std::vector<int64_t>(shape.begin(), shape.end()), opt.max_texture_width, st.max_h)
             : TextureLayout::for_numel(numel(shape), opt.max_texture_width, st.max_h);
}

/// The shape value n's texture layout follows: n's own, or for a program input (its layout is the plan's to choose:
/// the runtimes upload inputs by the plan's layout) whose every reader is a Reshape to one shape of 2+ axes whose
/// last axis merges n's trailing axes (a multiple of 4 elements, longer than n's last axis), that shape.
/// Parameters and state keep their own shape's layout (the GLES backend recomputes theirs from the node's shape).
std::vector<int64_t> layout_shape(const ScheduleState& st, const Node* n) {
  std::vector<int64_t> own(n->shape.begin(), n->shape.end());
  if (n->op != Op::Input || own.size() < 3 || !st.opt.row_aligned_layout) return own;
  auto it = st.consumers.find(n);
  if (it == st.consumers.end() || it->second.empty()) return own;
  const Node* r0 = it->second.front();
  for (const Node* r : it->second)
    if (r->op != Op::Reshape || r->shape != r0->shape) return own;
  std::vector<int64_t> view(r0->shape.begin(), r0->shape.end());
  if (view.size() < 2 || view.back() % TextureLayout::kComponents != 0) return own;
  int64_t trailing = own.back();  // the product of n's last k >= 2 axes must be the view's last axis
  for (size_t k = 2; k <= own.size() && trailing < view.back(); ++k) trailing *= own[own.size() - k];
  return trailing == view.back() && view.back() > own.back() ? view : own;
}

int add_value(ScheduleState& st, const NodePtr& n, ValueKind kind, const std::string& base, bool reg) {
  Value v;
  v.id = static_cast<int>(st.plan.values.size());
  v.node = n;
  v.kind = kind;
  std::string nm = sanitize(base);
  for (int s = 2; st.names.count(nm); ++s) nm = sanitize(base) + "_" + std::to_string(s);
  st.names.insert(nm);
  v.name = nm;
  try {
    const std::vector<int64_t> ls = layout_shape(st, n.get());
    v.layout = value_layout(ShapeRef(ls.data(), ls.size()), st);
  } catch (const Error& e) {
    throw ValueError(fmt::format("schedule: {} does not fit in a texture: {}", n->describe(), e.what()));
  }
  st.plan.values.push_back(v);
  if (reg) st.value_of[n.get()] = v.id;
  return v.id;
}

void create_leaf_values(ScheduleState& st) {
  for (auto& n : st.plan.order) {
    if (!n->is_leaf() || !st.mat.count(n.get())) continue;
    ValueKind k = n->op == Op::Input ? ValueKind::Input
                  : n->op == Op::Const ? ValueKind::Constant
                                       : ValueKind::Persistent;
    add_value(st, n, k, n->op == Op::Const ? fmt::format("const{}", st.node_index(n.get())) : n->name);
  }
  for (auto& u : st.program.updates)
    if (!st.value_of.count(u.target.get())) add_value(st, u.target, ValueKind::Persistent, u.target->name);
}

}  // namespace sg::sched
