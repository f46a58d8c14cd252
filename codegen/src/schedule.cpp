// The fusion scheduler: materialisation decisions, lowering of nodes to kernel IR, memory plan.
#include "sg/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace sg {

namespace {

bool is_heavy(Op op) {
  switch (op) {
    case Op::Reduce:
    case Op::MatMul:
    case Op::Conv2d:
    case Op::Conv2dGradInput:
    case Op::Conv2dGradWeight:
    case Op::MaxPool2d:
    case Op::MaxPool2dGrad:
    case Op::AvgPool2d:
    case Op::AvgPool2dGrad: return true;
    default: return false;
  }
}

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

KExprPtr linearize(const std::vector<KExprPtr>& idx, ShapeRef shape) {
  KExprPtr flat = kint(0);
  Shape st = contiguous_strides(shape);
  for (size_t i = 0; i < idx.size(); ++i)
    if (shape[i] != 1) flat = kibin(KOp::IAdd, flat, kibin(KOp::IMul, idx[i], kint(st[i])));
  return flat;
}

std::vector<KExprPtr> delinearize(const KExprPtr& flat, ShapeRef shape) {
  std::vector<KExprPtr> idx(shape.size());
  Shape st = contiguous_strides(shape);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) {
      idx[i] = kint(0);
      continue;
    }
    KExprPtr q = kibin(KOp::IDiv, flat, kint(st[i]));
    idx[i] = i == 0 ? q : kibin(KOp::IMod, q, kint(shape[i]));
  }
  return idx;
}

/// Index into an input of shape `in` broadcast to `out` (NumPy rules).
std::vector<KExprPtr> broadcast_index(const std::vector<KExprPtr>& idx, ShapeRef in, ShapeRef out) {
  std::vector<KExprPtr> r(in.size());
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) r[i] = in[i] == 1 ? kint(0) : idx[off + i];
  return r;
}

KExprPtr band(KExprPtr a, KExprPtr b) { return kibin(KOp::IAnd, std::move(a), std::move(b)); }
KExprPtr in_range(const KExprPtr& v, int64_t hi) {
  return band(kibin(KOp::IGe, v, kint(0)), kibin(KOp::ILt, v, kint(hi)));
}

/// Loop iterations per output element from which a kernel with few output texels counts as latency-bound
/// (ScheduleOptions::min_parallel_texels).
constexpr double kLongLoop = 256;

/// The split-K rule's test: few output texels, long loops (see ScheduleOptions::min_parallel_texels).
bool latency_bound(int64_t numel, double loop_iterations, const ScheduleOptions& opt) {
  return !opt.unfused && opt.min_parallel_texels > 0 && (numel + 3) / 4 < opt.min_parallel_texels &&
         loop_iterations >= kLongLoop;
}

/// Row planes (ScheduleOptions::row_planes): a stored shape whose rows can be split into P planes of at least
/// min_plane_texels texels each, with whole texels per row.
bool plane_shape_ok(ShapeRef st, int P, const ScheduleOptions& opt) {
  return st.size() >= 2 && st.back() % 4 == 0 && st[st.size() - 2] % P == 0 &&
         (numel(st) / P + 3) / 4 >= opt.min_plane_texels;
}

/// Thrown by Lowerer when an output of the kernel being built is read at another element than its own
/// (multi-output fusion is then not possible).
struct NotIdentity {};

/// Lowers nodes to kernel IR for one kernel; reads of materialised values become Loads.
class Lowerer {
 public:
  Lowerer(const std::unordered_map<const Node*, int>& value_of, Kernel& k, std::vector<NodePtr>& inlined,
          const std::unordered_set<const Node*>* transposed = nullptr)
      : value_of_(value_of), k_(k), inlined_(inlined), transposed_(transposed) {}

  /// The value of node `n` itself (not a load of it) at coordinates idx.
  KExprPtr root_at(const NodePtr& n, const std::vector<KExprPtr>& idx) { return lower(n, idx); }
  /// Registers `n` as an output of this kernel whose value at coordinates idx is `root`: a read of n at the
  /// same element returns `root` (computed once); a read at another element throws NotIdentity.
  void add_member(const NodePtr& n, const std::vector<KExprPtr>& idx, KExprPtr root) {
    members_[n.get()] = {linearize(idx, n->shape), std::move(root)};
  }

 private:
  struct Member {
    KExprPtr flat;  // the member's own element index
    KExprPtr root;
  };
  std::unordered_map<const Node*, Member> members_;

  KExprPtr member_read(const Node* n, const KExprPtr& flat) {
    const Member& m = members_.at(n);
    if (kequal(flat, m.flat)) return m.root;
    throw NotIdentity{};
  }

  const std::unordered_map<const Node*, int>& value_of_;
  Kernel& k_;
  std::vector<NodePtr>& inlined_;
  std::unordered_set<const Node*> seen_;
  std::map<std::pair<const Node*, std::vector<const KExpr*>>, KExprPtr> memo_;
  int loop_counter_ = 0;

  std::string fresh() { return fmt::format("r{}", loop_counter_++); }

  int input_slot(int value_id) {
    auto it = std::find(k_.inputs.begin(), k_.inputs.end(), value_id);
    if (it != k_.inputs.end()) return static_cast<int>(it - k_.inputs.begin());
    k_.inputs.push_back(value_id);
    return static_cast<int>(k_.inputs.size()) - 1;
  }

  bool materialized(const Node* n) const { return value_of_.count(n) > 0; }
  const std::unordered_set<const Node*>* transposed_;
  bool stored_transposed(const Node* n) const { return transposed_ && transposed_->count(n) > 0; }
  /// A Load of materialised n at coordinates idx (of n's shape), through its transposed storage if any.
  KExprPtr load(const NodePtr& n, const std::vector<KExprPtr>& idx) {
    int slot = input_slot(value_of_.at(n.get()));
    if (!stored_transposed(n.get())) return kload(slot, linearize(idx, n->shape));
    return kload(slot, linearize({idx[1], idx[0]}, Shape{n->shape[1], n->shape[0]}));
  }

  KExprPtr read_flat(const NodePtr& n, const KExprPtr& flat) {
    if (members_.count(n.get())) return member_read(n.get(), flat);
    if (materialized(n.get()))
      return stored_transposed(n.get()) ? load(n, delinearize(flat, n->shape)) : kload(input_slot(value_of_.at(n.get())), flat);
    if (n->op == Op::Reshape) {
      note(n);
      return read_flat(n->inputs[0], flat);
    }
    return lower(n, delinearize(flat, n->shape));
  }

  KExprPtr read(const NodePtr& n, const std::vector<KExprPtr>& idx) {
    if (members_.count(n.get())) return member_read(n.get(), linearize(idx, n->shape));
    if (materialized(n.get())) return load(n, idx);
    return lower(n, idx);
  }

  void note(const NodePtr& n) {
    if (seen_.insert(n.get()).second) inlined_.push_back(n);
  }

  KExprPtr lower(const NodePtr& n, const std::vector<KExprPtr>& idx) {
    std::vector<const KExpr*> key;
    for (auto& e : idx) key.push_back(e.get());
    auto mk = std::make_pair(n.get(), key);
    auto it = memo_.find(mk);
    if (it != memo_.end()) return it->second;
    note(n);
    KExprPtr r = lower_uncached(n, idx);
    memo_[mk] = r;
    return r;
  }

  KExprPtr to_kexpr(const SExprPtr& e, const std::vector<KExprPtr>& args) {
    switch (e->op) {
      case SOp::Const: return kfloat(e->value);
      case SOp::Arg: return args[e->arg];
      default: break;
    }
    return kmath(e->op, to_kexpr(e->a, args), e->b ? to_kexpr(e->b, args) : nullptr,
                 e->c ? to_kexpr(e->c, args) : nullptr);
  }

  KExprPtr lower_uncached(const NodePtr& np, const std::vector<KExprPtr>& idx) {
    const Node& n = *np;
    const Attrs& a = n.attrs;
    auto in = [&](size_t i) { return n.inputs[i]; };
    auto ishape = [&](size_t i) -> ShapeRef { return n.inputs[i]->shape; };
    switch (n.op) {
      case Op::Input:
      case Op::Param:
      case Op::State:
      case Op::Const:
        throw ValueError("schedule: leaf " + n.describe() + " must be materialised");
      case Op::Map: {
        std::vector<KExprPtr> args;
        for (size_t i = 0; i < n.inputs.size(); ++i)
          args.push_back(read(in(i), broadcast_index(idx, ishape(i), n.shape)));
        return to_kexpr(n.body, args);
      }
      case Op::Reshape: return read_flat(in(0), linearize(idx, n.shape));
      case Op::Permute: {
        std::vector<KExprPtr> j(idx.size());
        for (size_t i = 0; i < idx.size(); ++i) j[a.perm[i]] = idx[i];
        return read(in(0), j);
      }
      case Op::Expand: return read(in(0), broadcast_index(idx, ishape(0), n.shape));
      case Op::Slice: {
        std::vector<KExprPtr> j(idx.size());
        for (size_t i = 0; i < idx.size(); ++i)
          j[i] = kibin(KOp::IAdd, kint(a.starts[i]), kibin(KOp::IMul, idx[i], kint(a.steps[i])));
        return read(in(0), j);
      }
      case Op::Pad: {
        std::vector<KExprPtr> j(idx.size());
        KExprPtr valid = kint(1);
        for (size_t i = 0; i < idx.size(); ++i) {
          j[i] = kibin(KOp::ISub, idx[i], kint(a.pads_before[i]));
          if (a.pads_before[i] || a.pads_after[i]) valid = band(valid, in_range(j[i], ishape(0)[i]));
        }
        return kselect(valid, read(in(0), j), kfloat(a.value));
      }
      case Op::OneHot: {
        std::vector<KExprPtr> j(idx.begin(), idx.end() - 1);
        return kmath(SOp::Eq, read(in(0), j), kto_float(idx.back()));
      }
      case Op::Reduce: {
        std::vector<std::string> vars;
        std::vector<int64_t> ext;
        std::vector<KExprPtr> j;
        size_t pos = 0;
        for (size_t i = 0; i < ishape(0).size(); ++i) {
          bool red = std::find(a.axes.begin(), a.axes.end(), static_cast<int>(i)) != a.axes.end();
          if (red) {
            vars.push_back(fresh());
            ext.push_back(ishape(0)[i]);
            j.push_back(kvar(vars.back()));
            if (a.keepdims) ++pos;
          } else {
            j.push_back(idx[pos++]);
          }
        }
        return kreduce(a.reduce, vars, ext, read(in(0), j));
      }
      case Op::MatMul: {
        ShapeRef as = ishape(0), bs = ishape(1);
        size_t r = idx.size();
        std::vector<KExprPtr> batch(idx.begin(), idx.end() - 2);
        Shape obatch(n.shape.begin(), n.shape.end() - 2);
        std::string kv = fresh();
        auto ai = broadcast_index(batch, as.drop_back(2), obatch);
        auto bi = broadcast_index(batch, bs.drop_back(2), obatch);
        ai.push_back(idx[r - 2]);
        ai.push_back(kvar(kv));
        bi.push_back(kvar(kv));
        bi.push_back(idx[r - 1]);
        return kreduce(ReduceKind::Sum, {kv}, {as.back()}, kmath(SOp::Mul, read(in(0), ai), read(in(1), bi)));
      }
      case Op::Conv2d: {
        ShapeRef xs = ishape(0), ws = ishape(1);
        std::string c = fresh(), kh = fresh(), kw = fresh();
        KExprPtr ih = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, idx[2], kint(a.stride[0])), kint(a.padding[0])),
                            kibin(KOp::IMul, kvar(kh), kint(a.dilation[0])));
        KExprPtr iw = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, idx[3], kint(a.stride[1])), kint(a.padding[1])),
                            kibin(KOp::IMul, kvar(kw), kint(a.dilation[1])));
        KExprPtr valid = kint(1);
        if (a.padding[0]) valid = band(valid, in_range(ih, xs[2]));
        if (a.padding[1]) valid = band(valid, in_range(iw, xs[3]));
        KExprPtr xv = kselect(valid, read(in(0), {idx[0], kvar(c), ih, iw}), kfloat(0));
        KExprPtr wv = read(in(1), {idx[1], kvar(c), kvar(kh), kvar(kw)});
        return kreduce(ReduceKind::Sum, {c, kh, kw}, {ws[1], ws[2], ws[3]}, kmath(SOp::Mul, xv, wv));
      }
      case Op::Conv2dGradInput: {
        // dx[b,c,h,w] = sum_{o,kh,kw} dy[b,o,(h+p-kh*d)/s,(w+p-kw*d)/s] * w[o,c,kh,kw] where divisible, in range
        ShapeRef ys = ishape(0), ws = ishape(1);
        std::string o = fresh(), kh = fresh(), kw = fresh();
        KExprPtr valid = kint(1);
        KExprPtr pos[2];
        std::string kvars[2] = {kh, kw};
        for (int d = 0; d < 2; ++d) {
          KExprPtr t = kibin(KOp::ISub, kibin(KOp::IAdd, idx[2 + d], kint(a.padding[d])),
                             kibin(KOp::IMul, kvar(kvars[d]), kint(a.dilation[d])));
          KExprPtr q = kibin(KOp::IDiv, t, kint(a.stride[d]));
          valid = band(valid, kibin(KOp::IGe, t, kint(0)));
          if (a.stride[d] != 1) valid = band(valid, kibin(KOp::IEq, kibin(KOp::IMod, t, kint(a.stride[d])), kint(0)));
          valid = band(valid, kibin(KOp::ILt, q, kint(ys[2 + d])));
          pos[d] = q;
        }
        KExprPtr prod = kmath(SOp::Mul, read(in(0), {idx[0], kvar(o), pos[0], pos[1]}),
                              read(in(1), {kvar(o), idx[1], kvar(kh), kvar(kw)}));
        return kreduce(ReduceKind::Sum, {o, kh, kw}, {ys[1], ws[2], ws[3]}, kselect(valid, prod, kfloat(0)));
      }
      case Op::Conv2dGradWeight: {
        // dw[o,c,kh,kw] = sum_{b,oh,ow} dy[b,o,oh,ow] * x[b,c,oh*s-p+kh*d,ow*s-p+kw*d]
        ShapeRef ys = ishape(0), xs = ishape(1);
        std::string b = fresh(), oh = fresh(), ow = fresh();
        KExprPtr ih = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, kvar(oh), kint(a.stride[0])), kint(a.padding[0])),
                            kibin(KOp::IMul, idx[2], kint(a.dilation[0])));
        KExprPtr iw = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, kvar(ow), kint(a.stride[1])), kint(a.padding[1])),
                            kibin(KOp::IMul, idx[3], kint(a.dilation[1])));
        KExprPtr valid = kint(1);
        if (a.padding[0]) valid = band(valid, in_range(ih, xs[2]));
        if (a.padding[1]) valid = band(valid, in_range(iw, xs[3]));
        KExprPtr xv = kselect(valid, read(in(1), {kvar(b), idx[1], ih, iw}), kfloat(0));
        KExprPtr dy = read(in(0), {kvar(b), idx[0], kvar(oh), kvar(ow)});
        return kreduce(ReduceKind::Sum, {b, oh, ow}, {ys[0], ys[2], ys[3]}, kmath(SOp::Mul, dy, xv));
      }
      case Op::MaxPool2d:
      case Op::AvgPool2d: {
        ShapeRef xs = ishape(0);
        std::string kh = fresh(), kw = fresh();
        KExprPtr ih = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, idx[2], kint(a.stride[0])), kint(a.padding[0])), kvar(kh));
        KExprPtr iw = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, idx[3], kint(a.stride[1])), kint(a.padding[1])), kvar(kw));
        KExprPtr valid = kint(1);
        if (a.padding[0]) valid = band(valid, in_range(ih, xs[2]));
        if (a.padding[1]) valid = band(valid, in_range(iw, xs[3]));
        bool mx = n.op == Op::MaxPool2d;
        KExprPtr v = kselect(valid, read(in(0), {idx[0], idx[1], ih, iw}),
                             kfloat(mx ? -std::numeric_limits<double>::infinity() : 0.0));
        KExprPtr r = kreduce(mx ? ReduceKind::Max : ReduceKind::Sum, {kh, kw}, {a.kernel[0], a.kernel[1]}, v);
        return mx ? r : kmath(SOp::Mul, r, kfloat(1.0 / static_cast<double>(a.kernel[0] * a.kernel[1])));
      }
      case Op::MaxPool2dGrad:
      case Op::AvgPool2dGrad: {
        // dx[b,c,h,w] = sum over windows (oh,ow) that contain (h,w) at window position (kh,kw)
        ShapeRef ys = ishape(0);
        Shape xs = n.shape;
        std::string kh = fresh(), kw = fresh();
        std::string kvars[2] = {kh, kw};
        KExprPtr valid = kint(1);
        KExprPtr pos[2];
        for (int d = 0; d < 2; ++d) {
          KExprPtr t = kibin(KOp::ISub, kibin(KOp::IAdd, idx[2 + d], kint(a.padding[d])), kvar(kvars[d]));
          KExprPtr q = kibin(KOp::IDiv, t, kint(a.stride[d]));
          valid = band(valid, kibin(KOp::IGe, t, kint(0)));
          if (a.stride[d] != 1) valid = band(valid, kibin(KOp::IEq, kibin(KOp::IMod, t, kint(a.stride[d])), kint(0)));
          valid = band(valid, kibin(KOp::ILt, q, kint(ys[2 + d])));
          pos[d] = q;
        }
        KExprPtr dy = read(in(0), {idx[0], idx[1], pos[0], pos[1]});
        if (n.op == Op::AvgPool2dGrad) {
          KExprPtr r = kreduce(ReduceKind::Sum, {kh, kw}, {a.kernel[0], a.kernel[1]}, kselect(valid, dy, kfloat(0)));
          return kmath(SOp::Mul, r, kfloat(1.0 / static_cast<double>(a.kernel[0] * a.kernel[1])));
        }
        // the window's first maximum (row-major window order), as PyTorch picks it
        std::string kh2 = fresh(), kw2 = fresh();
        KExprPtr ih2 = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, pos[0], kint(a.stride[0])), kint(a.padding[0])), kvar(kh2));
        KExprPtr iw2 = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, pos[1], kint(a.stride[1])), kint(a.padding[1])), kvar(kw2));
        KExprPtr valid2 = kint(1);
        if (a.padding[0]) valid2 = band(valid2, in_range(ih2, xs[2]));
        if (a.padding[1]) valid2 = band(valid2, in_range(iw2, xs[3]));
        KExprPtr xv = kselect(valid2, read(in(1), {idx[0], idx[1], ih2, iw2}),
                              kfloat(-std::numeric_limits<double>::infinity()));
        KExprPtr am = kreduce(ReduceKind::ArgMax, {kh2, kw2}, {a.kernel[0], a.kernel[1]}, xv);
        KExprPtr here = kto_float(kibin(KOp::IAdd, kibin(KOp::IMul, kvar(kh), kint(a.kernel[1])), kvar(kw)));
        KExprPtr is_max = kmath(SOp::Eq, am, here);
        KExprPtr contrib = kselect(valid, kmath(SOp::Mul, dy, is_max), kfloat(0));
        return kreduce(ReduceKind::Sum, {kh, kw}, {a.kernel[0], a.kernel[1]}, contrib);
      }
    }
    throw ValueError("schedule: cannot lower " + n.describe());
  }
};

Shape squeezed(ShapeRef s) {
  Shape r;
  for (int64_t d : s)
    if (d != 1) r.push_back(d);
  return r;
}

/// Outputs of one kernel share the iteration domain: equal shapes up to size-1 axes.
bool same_domain(ShapeRef a, ShapeRef b) { return squeezed(a) == squeezed(b); }

/// Coordinates of `shape` for the element at domain coordinates `vars` (same_domain(domain, shape)).
std::vector<KExprPtr> domain_coords(const std::vector<KExprPtr>& vars, ShapeRef domain, ShapeRef shape) {
  std::vector<KExprPtr> nonunit;
  for (size_t i = 0; i < domain.size(); ++i)
    if (domain[i] != 1) nonunit.push_back(vars[i]);
  std::vector<KExprPtr> idx;
  size_t k = 0;
  for (int64_t d : shape) idx.push_back(d == 1 ? kint(0) : nonunit[k++]);
  return idx;
}

/// A fusion group lowered to kernel IR.
struct Lowered {
  std::vector<KExprPtr> exprs;   // per member
  std::vector<int> inputs;       // value ids read
  std::vector<NodePtr> inlined;  // nodes computed (members included)
};

/// Lowers `members` (topological order, same domain) as the outputs of one kernel at shared coordinates
/// i0.. of shape `domain` (default: members[0]'s). Throws NotIdentity if a member is read at another element
/// than its own. `inputs`: value ids already bound to sampler slots (earlier blocks of the kernel); the result's
/// inputs start with them.
Lowered lower_group(const std::vector<NodePtr>& members, const std::unordered_map<const Node*, int>& value_of,
                    const Node* domain = nullptr, const std::unordered_set<const Node*>* transposed = nullptr,
                    std::vector<int> inputs = {}) {
  Kernel k;
  k.inputs = std::move(inputs);  // a later domain block of a union-domain kernel appends to the earlier blocks' inputs
  Lowered r;
  Lowerer low(value_of, k, r.inlined, transposed);
  // a value stored transposed is a kernel of its own whose coordinates are those of the stored (reversed) shape
  const bool swap = members.size() == 1 && transposed && transposed->count(members[0].get());
  Shape dom((domain ? domain : members[0].get())->shape.begin(), (domain ? domain : members[0].get())->shape.end());
  if (swap) std::reverse(dom.begin(), dom.end());
  std::vector<KExprPtr> vars;
  for (size_t i = 0; i < dom.size(); ++i) vars.push_back(kvar(fmt::format("i{}", i)));
  for (auto& m : members) {
    std::vector<KExprPtr> idx = swap ? std::vector<KExprPtr>{vars[1], vars[0]} : domain_coords(vars, dom, m->shape);
    KExprPtr e = low.root_at(m, idx);
    low.add_member(m, idx, e);
    r.exprs.push_back(e);
  }
  r.inputs = k.inputs;
  return r;
}

std::string kernel_name(int index, const std::vector<NodePtr>& nodes) {
  std::vector<std::string> parts;
  auto add = [&](const std::string& p) {
    if (std::find(parts.begin(), parts.end(), p) == parts.end()) parts.push_back(p);
  };
  std::function<void(const SExprPtr&)> walk = [&](const SExprPtr& e) {
    if (!e || e->op == SOp::Const || e->op == SOp::Arg) return;
    walk(e->a), walk(e->b), walk(e->c);
    add(sop_name(e->op));
  };
  for (auto& n : nodes) {
    if (n->op == Op::Map)
      walk(n->body);
    else if (n->op == Op::Reduce)
      add(reduce_name(n->attrs.reduce));
    else if (n->op != Op::Reshape)
      add(op_name(n->op));
  }
  if (parts.empty()) parts.push_back("copy");
  if (parts.size() > 4) parts.resize(4);
  std::string name = fmt::format("k{:02}", index);
  for (auto& p : parts) name += "_" + p;
  return name;
}

}  // namespace

int Plan::node_index(const Node* n) const {
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i].get() == n) return static_cast<int>(i);
  return -1;
}

const Value& Plan::value_of(const Node* n) const {
  for (auto& v : values)
    if (v.node.get() == n) return v;
  throw ValueError("plan: node " + n->describe() + " is not materialised");
}

Plan schedule(const Program& program, const ScheduleOptions& opt) {
  Plan plan;
  plan.program = program;
  plan.order = program.nodes();
  const auto& order = plan.order;
  const int64_t max_h = opt.max_texture_height ? opt.max_texture_height : opt.max_texture_width;
  if (opt.col_planes != 1 && opt.col_planes != 2)
    throw ValueError(fmt::format("ScheduleOptions::col_planes must be 1 (off) or 2, got {}", opt.col_planes));

  // consumers (with multiplicity) and external uses
  std::unordered_map<const Node*, std::vector<const Node*>> consumers;
  std::unordered_set<const Node*> external, update_values;
  for (auto& u : program.updates) update_values.insert(u.value.get());
  for (auto& n : order)
    for (auto& i : n->inputs) consumers[i.get()].push_back(n.get());
  for (auto& o : program.outputs) external.insert(o.get());
  for (auto& u : program.updates) external.insert(u.value.get());

  // materialisation decisions, in topological order
  std::unordered_set<const Node*> mat;
  std::unordered_map<const Node*, double> cost;  // scalar ops to recompute one element when inlined
  std::unordered_map<const Node*, bool> has_reduce;
  for (auto& np : order) {
    const Node* n = np.get();
    double c = 1;
    bool red = is_heavy(n->op);
    if (n->op == Op::Map) c = sexpr_size(n->body);
    for (auto& i : n->inputs) {
      if (mat.count(i.get())) continue;
      c += cost[i.get()];
      red |= has_reduce[i.get()];
    }
    cost[n] = c;
    has_reduce[n] = red;
    const auto& cons = consumers[n];
    bool m = n->is_leaf() || external.count(n) || opt.unfused;
    if (!m && red) {
      // a reduction may only be the prologue-free epilogue input of one same-shape elementwise consumer
      bool single = cons.size() == 1 && cons[0]->op == Op::Map && cons[0]->shape == n->shape;
      m = !single;
    } else if (!m) {
      bool into_heavy = std::any_of(cons.begin(), cons.end(), [](const Node* u) { return is_heavy(u->op); });
      if (cons.size() > 1 || into_heavy) m = c > opt.inline_cost_limit;
    }
    if (m) mat.insert(n);
  }

  // 2-D temporaries that every reader reduces over axis 0 are stored transposed (Value::transposed)
  std::unordered_set<const Node*> transposed;
  for (auto& np : order) {
    const Node* n = np.get();
    if (!opt.transpose_row_reduced || opt.unfused || !mat.count(n) || n->is_leaf() || external.count(n) ||
        n->shape.size() != 2 || n->shape[0] % 4 || n->shape[1] % 4 || n->shape[0] < 8)
      continue;
    // every read reduces over axis 0: a matmul's B operand, a sum over rows, or an inlined same-shape Map
    // (e.g. a relu mask) whose readers all do
    std::function<bool(const Node*, int)> row_reduced = [&](const Node* v, int depth) {
      const auto& cons = consumers[v];
      if (cons.empty() || depth > 4) return false;
      for (const Node* u : cons) {
        bool b_operand = u->op == Op::MatMul && u->inputs[1].get() == v && u->inputs[0].get() != v;
        bool row_sum = u->op == Op::Reduce && u->attrs.axes.size() == 1 && u->attrs.axes[0] == 0;
        bool through_map = u->op == Op::Map && !mat.count(u) && u->shape == v->shape && row_reduced(u, depth + 1);
        if (!(b_operand || row_sum || through_map)) return false;
      }
      return true;
    };
    if (row_reduced(n, 0)) transposed.insert(n);
  }

  // values
  std::unordered_map<const Node*, int> value_of;
  std::unordered_set<std::string> names;
  auto add_value = [&](const NodePtr& n, ValueKind kind, const std::string& base, bool reg = true) {
    Value v;
    v.id = static_cast<int>(plan.values.size());
    v.node = n;
    v.kind = kind;
    std::string nm = sanitize(base);
    for (int s = 2; names.count(nm); ++s) nm = sanitize(base) + "_" + std::to_string(s);
    names.insert(nm);
    v.name = nm;
    try {
      v.layout = opt.row_aligned_layout
                     ? TextureLayout::for_shape(std::vector<int64_t>(n->shape.begin(), n->shape.end()),
                                                opt.max_texture_width, max_h)
                     : TextureLayout::for_numel(n->numel(), opt.max_texture_width, max_h);
    } catch (const Error& e) {
      throw ValueError(fmt::format("schedule: {} does not fit in a texture: {}", n->describe(), e.what()));
    }
    plan.values.push_back(v);
    if (reg) value_of[n.get()] = v.id;
    return v.id;
  };
  for (auto& n : order) {
    if (!n->is_leaf() || !mat.count(n.get())) continue;
    ValueKind k = n->op == Op::Input ? ValueKind::Input
                  : n->op == Op::Const ? ValueKind::Constant
                                       : ValueKind::Persistent;
    add_value(n, k, n->op == Op::Const ? fmt::format("const{}", plan.node_index(n.get())) : n->name);
  }
  for (auto& u : program.updates)
    if (!value_of.count(u.target.get())) add_value(u.target, ValueKind::Persistent, u.target->name);

  // kernels
  // Appends a kernel; first splits reductions of a single-output kernel whose loop nest exceeds
  // opt.max_loop_iterations into a partial kernel (output (P, out...), each of the P chunks reducing part of one
  // loop) and a final reduction over P. (Multi-output kernels are only formed within the budget.)
  std::function<void(Kernel&&, const std::vector<NodePtr>&, const std::string&)> push_kernel =
      [&](Kernel&& k, const std::vector<NodePtr>& name_nodes, const std::string& suffix) {
    const NodePtr out_node = plan.values[k.output()].node;  // copies: add_value below grows plan.values
    const std::string out_name = plan.values[k.output()].name;
    const Shape oshape = plan.values[k.output()].stored_shape();  // the kernel's iteration domain
    const int64_t texels = (numel(oshape) + 3) / 4;
    for (int guard = 0; guard < 8 && k.exprs.size() == 1; ++guard) {
      const bool over_budget = 4 * (1 + kloop_iterations(k.exprs[0])) > opt.max_loop_iterations;
      const bool too_serial = guard == 0 && latency_bound(numel(oshape), kloop_iterations(k.exprs[0]), opt);
      if (!over_budget && !too_serial) break;
      // the most expensive top-level reduction
      const KExpr* best = nullptr;
      double best_cost = 0;
      std::function<void(const KExprPtr&)> find = [&](const KExprPtr& e) {
        if (!e) return;
        if (e->op == KOp::Reduce) {
          double c = kloop_iterations(e);
          if (e->reduce != ReduceKind::ArgMax && c > best_cost) best = e.get(), best_cost = c;
          return;  // nested reductions are not split
        }
        find(e->a), find(e->b), find(e->c);
      };
      find(k.exprs[0]);
      if (!best) break;
      size_t vi = std::max_element(best->extents.begin(), best->extents.end()) - best->extents.begin();
      int64_t E = best->extents[vi];
      int64_t P = static_cast<int64_t>(std::ceil(4 * (1 + best_cost) / (opt.max_loop_iterations / 2)));
      if (!over_budget) {
        // split-K for parallelism: enough chunks to give min_parallel_texels fragments, each chunk still running
        // kLongLoop / 4 iterations or more
        P = std::min<int64_t>((opt.min_parallel_texels + texels - 1) / texels,
                              static_cast<int64_t>(best_cost / (kLongLoop / 4)));
      }
      P = std::clamp<int64_t>(P, 2, E);
      int64_t C = (E + P - 1) / P;
      // chunks of a multiple of 4 iterations of the innermost loop keep the emitter's tile mode (unroll by 4)
      if (E >= 16 && vi + 1 == best->extents.size()) C = (C + 3) / 4 * 4;
      P = (E + C - 1) / C;
      if (P < 2) break;
      // partial kernel: coordinates (p, i0..in) -> reduce over chunk p of loop variable vi
      std::map<std::string, KExprPtr> subs;
      for (size_t i = 0; i < oshape.size(); ++i) subs[fmt::format("i{}", i)] = kvar(fmt::format("i{}", i + 1));
      const std::string& v = best->loop_vars[vi];
      KExprPtr pos = kibin(KOp::IAdd, kibin(KOp::IMul, kvar("i0"), kint(C)), kvar(v));
      subs[v] = pos;
      KExprPtr body = ksubstitute(best->a, subs);
      double identity = best->reduce == ReduceKind::Sum ? 0.0
                        : best->reduce == ReduceKind::Max ? -std::numeric_limits<double>::infinity()
                                                          : std::numeric_limits<double>::infinity();
      if (P * C != E) body = kselect(kibin(KOp::ILt, pos, kint(E)), body, kfloat(identity));
      std::vector<int64_t> ext = best->extents;
      ext[vi] = C;
      Kernel part;
      part.inputs = k.inputs;
      part.nodes = k.nodes;
      part.exprs = {kreduce(best->reduce, best->loop_vars, ext, body)};
      Shape pshape = {P};
      pshape.append(oshape.begin(), oshape.end());
      Node pn;
      pn.op = Op::Reduce;
      pn.shape = pshape;
      pn.attrs.reduce = best->reduce;
      pn.name = fmt::format("partial {} of {}", reduce_name(best->reduce), out_name);
      pn.loc = out_node->loc;
      int pid = add_value(make_node(std::move(pn)), ValueKind::Temp, out_name + "_partial", false);
      part.outputs = {pid};
      part.comment = k.comment;
      part.notes = fmt::format("// partial {}s: {} chunks of {} iterations of loop {} (of {})\n", reduce_name(best->reduce),
                               P, C, v, E) + k.notes;
      push_kernel(std::move(part), name_nodes, suffix + "_partial");
      // the consumer reduces the P partial results
      int slot = static_cast<int>(k.inputs.size());
      k.inputs.push_back(pid);
      std::vector<KExprPtr> idx;
      for (size_t i = 0; i < oshape.size(); ++i) idx.push_back(kvar(fmt::format("i{}", i)));
      std::string pv = fmt::format("p{}", guard);
      KExprPtr flat = kibin(KOp::IAdd, kibin(KOp::IMul, kvar(pv), kint(numel(oshape))), linearize(idx, oshape));
      k.exprs[0] = kreplace(k.exprs[0], best, kreduce(best->reduce, {pv}, {P}, kload(slot, flat)));
      k.notes = fmt::format("// final {} over {} partial results\n", reduce_name(best->reduce), P) + k.notes;
    }
    double iters = kloop_iterations(k.exprs);
    if (4 * (1 + iters) > opt.max_loop_iterations)
      throw UnsupportedError(fmt::format(
          "schedule: kernel computing {} needs {:.0f} loop iterations per invocation (limit {:.0f}) and its loops "
          "cannot be split (argmax and nested reductions are not split); GPUs such as llvmpipe silently stop long "
          "loops. Reduce the axis length (e.g. argmax over at most {} elements) or reshape first.",
          out_node->describe(), 4 * (1 + iters), opt.max_loop_iterations,
          static_cast<int64_t>(opt.max_loop_iterations / 4)));
    k.extent = {};  // the draw covers every output's layout
    for (int o : k.outputs) k.extent = k.extent.cover({plan.values[o].layout.width, plan.values[o].layout.height});
    k.name = kernel_name(static_cast<int>(plan.kernels.size()), name_nodes) + suffix;
    for (int o : k.outputs) plan.values[o].producer = static_cast<int>(plan.kernels.size());
    plan.kernels.push_back(std::move(k));
  };
  auto node_comment = [&](const std::vector<NodePtr>& nodes) {
    std::string c;
    for (auto& x : nodes)
      c += fmt::format("//   n{:<4} {:<40} {:>12}  {}\n", plan.node_index(x.get()), x->label().substr(0, 40),
                       shape_str(x->shape), x->loc.known() ? x->loc.str() : "");
    return c;
  };
  auto by_position = [&](std::vector<NodePtr>& nodes) {
    std::sort(nodes.begin(), nodes.end(), [&](const NodePtr& x, const NodePtr& y) {
      return plan.node_index(x.get()) < plan.node_index(y.get());
    });
  };
  // A kernel that copies value `source` into a new value for node n (an update that needs its own texture).
  auto build_copy = [&](const NodePtr& n, const NodePtr& source) {
    Kernel k;
    int vid = add_value(n, ValueKind::Temp, fmt::format("t{}", plan.kernels.size()), false);
    k.inputs.push_back(value_of.at(source.get()));
    std::vector<KExprPtr> idx;
    for (size_t i = 0; i < n->shape.size(); ++i) idx.push_back(kvar(fmt::format("i{}", i)));
    k.exprs = {kload(0, linearize(idx, n->shape))};
    k.outputs = {vid};
    push_kernel(std::move(k), {}, "");
    return vid;
  };

  // Fusion groups: every materialised non-leaf node, in topological order, either starts a group or joins an
  // earlier one (multi-output fusion, see sg/schedule.h). Groups are decided on trial lowerings in which each
  // materialised node has a pseudo value id; they form a DAG (a group depends on the groups whose values it
  // reads) and are launched in a topological order of it.
  std::vector<NodePtr> mat_nodes;
  for (auto& n : order)
    if (!n->is_leaf() && mat.count(n.get())) mat_nodes.push_back(n);
  constexpr int kPseudo = 1 << 28;
  std::unordered_map<const Node*, int> trial_of = value_of;  // leaves: real ids
  for (size_t i = 0; i < mat_nodes.size(); ++i) trial_of[mat_nodes[i].get()] = kPseudo + static_cast<int>(i);
  struct Group {
    std::vector<NodePtr> members;
    Lowered lowered;
    std::set<int> deps;  // groups whose values it reads
    bool dead = false;
  };
  std::vector<Group> groups;
  std::unordered_map<const Node*, int> group_of;
  const int max_out = opt.unfused ? 1 : std::max(1, opt.max_outputs);
  auto producer_group = [&](int id) { return id < kPseudo ? -1 : group_of.at(mat_nodes[id - kPseudo].get()); };
  auto reads = [](const Lowered& l, int id) { return std::find(l.inputs.begin(), l.inputs.end(), id) != l.inputs.end(); };
  auto deps_of = [&](const Lowered& l, int self) {
    std::set<int> d;
    for (int id : l.inputs)
      if (int g = producer_group(id); g >= 0 && g != self) d.insert(g);
    return d;
  };
  // true when group `to` depends (transitively) on group `from`
  auto depends = [&](int to, int from) {
    std::vector<int> stack = {to};
    std::set<int> seen;
    while (!stack.empty()) {
      int g = stack.back();
      stack.pop_back();
      if (g == from) return true;
      if (!seen.insert(g).second) continue;
      for (int d : groups[g].deps) stack.push_back(d);
    }
    return false;
  };
  // lowered as group gi's kernel: inputs within the sampler limit, loops within budget, no dependency cycle
  auto fits = [&](const Lowered& l, int gi) {
    if (static_cast<int>(l.inputs.size()) > opt.max_inputs) return false;
    if (4 * (1 + kloop_iterations(l.exprs)) > opt.max_loop_iterations) return false;
    for (int d : deps_of(l, gi))
      if (depends(d, gi)) return false;
    return true;
  };
  auto try_lower = [&](const std::vector<NodePtr>& members, const std::unordered_map<const Node*, int>& vo)
      -> std::optional<Lowered> {
    try {
      return lower_group(members, vo, nullptr, &transposed);
    } catch (const NotIdentity&) {
      return std::nullopt;
    }
  };
  // a kernel the split-K rule would split (see ScheduleOptions::min_parallel_texels) stays on its own
  auto split_k_candidate = [&](const NodePtr& n, const Lowered& l) {
    return latency_bound(n->numel(), kloop_iterations(l.exprs), opt);
  };
  for (auto& n : mat_nodes) {
    Lowered solo = lower_group({n}, trial_of, nullptr, &transposed);
    int joined = -1;
    // candidates: related groups (n reads a member, or they share an input) first, latest first; then others
    std::vector<int> related, others;
    for (int gi = static_cast<int>(groups.size()) - 1; max_out > 1 && gi >= 0 && !transposed.count(n.get()); --gi) {
      Group& g = groups[gi];
      if (g.dead || static_cast<int>(g.members.size()) >= max_out || !same_domain(g.members[0]->shape, n->shape) ||
          transposed.count(g.members[0].get()))
        continue;
      bool rel = false;
      for (auto& m : g.members) rel |= reads(solo, trial_of.at(m.get()));
      for (int id : solo.inputs) rel |= reads(g.lowered, id);
      (rel ? related : others).push_back(gi);
    }
    related.insert(related.end(), others.begin(), others.end());
    for (int gi : related) {
      Group& g = groups[gi];
      std::vector<NodePtr> members = g.members;
      members.push_back(n);
      auto l = try_lower(members, trial_of);
      if (!l || !fits(*l, gi) || split_k_candidate(n, *l)) continue;
      g.members = std::move(members);
      g.lowered = std::move(*l);
      g.deps = deps_of(g.lowered, gi);
      joined = gi;
      break;
    }
    if (joined < 0) {
      joined = static_cast<int>(groups.size());
      groups.push_back({{n}, std::move(solo), {}, false});
      group_of[n.get()] = joined;
      groups[joined].deps = deps_of(groups[joined].lowered, joined);
    }
    group_of[n.get()] = joined;
  }
  // A reduction stored only for one later kernel is computed inside it instead when that kernel reads it at a
  // single element per output element (so it is computed once), e.g. a weight gradient read through a transpose
  // only by its optimizer kernel.
  for (size_t gi = 0; max_out > 1 && gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    if (g.dead || g.members.size() != 1) continue;
    const NodePtr r = g.members[0];
    if (external.count(r.get()) || !is_heavy(r->op) || split_k_candidate(r, g.lowered)) continue;
    int reader = -1, readers = 0;
    for (size_t gj = 0; gj < groups.size(); ++gj)
      if (gj != gi && !groups[gj].dead && reads(groups[gj].lowered, trial_of.at(r.get())))
        reader = static_cast<int>(gj), ++readers;
    if (readers != 1) continue;
    // a matmul-like sum the row-planes pass can tile (P rows per fragment) is not sunk into a reader that writes
    // updates (an optimizer's m, v and parameter): such a kernel cannot be planed, and there the sum would run one
    // row per fragment (the MLP's dW1 inside W1's Adam kernel, docs/PERFORMANCE.md Run 7b). (The row-planes pass
    // may still leave it unplaned, e.g. when its readers would run out of samplers.)
    if (const int P = std::min(opt.row_planes, opt.max_outputs);
        P > 1 && !transposed.count(r.get()) && khas_unrollable_sum(g.lowered.exprs[0]) &&
        plane_shape_ok(r->shape, P, opt) &&
        std::any_of(groups[reader].members.begin(), groups[reader].members.end(),
                    [&](const NodePtr& m) { return update_values.count(m.get()) > 0; }))
      continue;
    auto vo = trial_of;
    vo.erase(r.get());
    auto l = try_lower(groups[reader].members, vo);
    if (!l || static_cast<int>(l->inputs.size()) > opt.max_inputs ||
        4 * (1 + kloop_iterations(l->exprs)) > opt.max_loop_iterations)
      continue;
    double before = kloop_iterations(groups[reader].lowered.exprs), own = kloop_iterations(g.lowered.exprs);
    if (kloop_iterations(l->exprs) > before + own + 0.5) continue;  // it would be computed more than once
    groups[reader].lowered = std::move(*l);
    g.dead = true;
    mat.erase(r.get());
    trial_of = std::move(vo);
    groups[reader].deps = deps_of(groups[reader].lowered, reader);
  }
  // members nobody else reads (not program outputs or updates either) are computed but not stored
  std::set<const Node*> read_elsewhere;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    if (groups[gi].dead) continue;
    for (int id : groups[gi].lowered.inputs)
      if (id >= kPseudo) read_elsewhere.insert(mat_nodes[id - kPseudo].get());
  }
  // members stored as textures: a single member, program outputs/updates, values other kernels read
  auto is_stored = [&](const Group& g, const NodePtr& m) {
    return g.members.size() == 1 || external.count(m.get()) > 0 || read_elsewhere.count(m.get()) > 0;
  };
  // Union-domain kernels (ScheduleOptions::union_domains): each union is one kernel made of one or more groups
  // (its domain blocks), merged greedily while they stay independent and within the output, sampler and loop
  // budgets; the pair sharing the most inputs (then the most producing groups) first, earliest pair on ties.
  std::vector<std::vector<int>> unions;  // per union: its groups, in formation order
  std::vector<int> union_of(groups.size(), -1);
  for (size_t gi = 0; gi < groups.size(); ++gi)
    if (!groups[gi].dead) union_of[gi] = static_cast<int>(unions.size()), unions.push_back({static_cast<int>(gi)});
  if (opt.union_domains && !opt.unfused && max_out > 1) {
    std::unordered_set<const Node*> next_of_persistent;  // update values: front and back textures
    for (auto& u : program.updates) next_of_persistent.insert(u.value.get());
    auto stored_extent = [&](const NodePtr& m) {  // the layout's size, as the kernel loop below makes it
      Shape st(m->shape.begin(), m->shape.end());
      if (transposed.count(m.get())) std::reverse(st.begin(), st.end());
      TextureLayout l = opt.row_aligned_layout
                            ? TextureLayout::for_shape(std::vector<int64_t>(st.begin(), st.end()), opt.max_texture_width, max_h)
                            : TextureLayout::for_numel(m->numel(), opt.max_texture_width, max_h);
      return Extent{l.width, l.height};
    };
    struct U {
      std::set<int> inputs;     // value ids read (pseudo ids for materialised nodes)
      std::vector<std::pair<Extent, int>> outs;  // per stored output: its layout's size, textures holding it
      Extent extent;            // the draw: every output layout covered
      std::set<int> producers;  // groups whose values it reads
      int outputs = 0;          // stored outputs (render targets)
      double iters = 0;         // loop iterations of all its blocks
      bool fixed = false;       // stays alone: split (split-K, loop budget) or given row planes
      bool dead = false;
    };
    std::vector<U> us(unions.size());
    for (size_t u = 0; u < unions.size(); ++u) {
      const Group& g = groups[unions[u][0]];
      U& x = us[u];
      x.inputs.insert(g.lowered.inputs.begin(), g.lowered.inputs.end());
      x.producers = g.deps;
      for (auto& m : g.members)
        if (is_stored(g, m)) {
          ++x.outputs;
          x.outs.push_back({stored_extent(m), next_of_persistent.count(m.get()) ? 2 : 1});
          x.extent = x.extent.cover(x.outs.back().first);
        }
      x.iters = kloop_iterations(g.lowered.exprs);
      // a single stored output is split by push_kernel when over the loop budget or latency-bound (split-K)
      x.fixed = x.outputs == 1 && (4 * (1 + x.iters) > opt.max_loop_iterations ||
                                   latency_bound(g.members[0]->numel(), x.iters, opt));
      // a kernel the row-planes rule below will tile (P rows per fragment into P render targets, the GPU's
      // matmul fast path) stays alone as well: the same test on its stored members
      if (const int P = std::min(opt.row_planes, opt.max_outputs); P > 1 && !x.fixed && x.outputs * P <= opt.max_outputs) {
        bool plane = true, tiled = false;
        for (size_t j = 0; j < g.members.size(); ++j) {
          const NodePtr& m = g.members[j];
          if (!is_stored(g, m)) continue;
          tiled |= khas_unrollable_sum(g.lowered.exprs[j]);
          if (next_of_persistent.count(m.get()) || transposed.count(m.get()) || !plane_shape_ok(m->shape, P, opt))
            plane = false;
        }
        x.fixed = plane && tiled;
      }
    }
    const size_t n = unions.size();
    for (;;) {
      // reach[a][b]: union a depends (transitively) on union b
      std::vector<std::vector<char>> reach(n, std::vector<char>(n, 0));
      std::vector<std::set<int>> udeps(n);
      for (size_t u = 0; u < n; ++u)
        if (!us[u].dead)
          for (int gi : unions[u])
            for (int d : groups[gi].deps)
              if (union_of[d] >= 0 && union_of[d] != static_cast<int>(u)) udeps[u].insert(union_of[d]);
      std::vector<char> done(n, 0);
      std::function<void(size_t)> close = [&](size_t u) {
        if (done[u]) return;
        done[u] = 1;
        for (int d : udeps[u]) {
          close(static_cast<size_t>(d));
          reach[u][d] = 1;
          for (size_t x = 0; x < n; ++x) reach[u][x] |= reach[d][x];
        }
      };
      for (size_t u = 0; u < n; ++u)
        if (!us[u].dead) close(u);
      auto overlap = [](const std::set<int>& a, const std::set<int>& b) {
        int c = 0;
        for (int x : a) c += b.count(x) > 0;
        return c;
      };
      int best_a = -1, best_b = -1;
      std::pair<int, int> best_score{-1, -1};
      for (size_t a = 0; a < n; ++a) {
        if (us[a].dead || us[a].fixed) continue;
        for (size_t b = a + 1; b < n; ++b) {
          if (us[b].dead || us[b].fixed || reach[a][b] || reach[b][a]) continue;
          if (us[a].outputs + us[b].outputs > max_out) continue;
          if (4 * (1 + us[a].iters + us[b].iters) > opt.max_loop_iterations) continue;
          const int shared = overlap(us[a].inputs, us[b].inputs);
          if (static_cast<int>(us[a].inputs.size() + us[b].inputs.size()) - shared > opt.max_inputs) continue;
          // texture memory allocated beyond the outputs' own layouts (every output covers the draw's extent)
          const Extent e = us[a].extent.cover(us[b].extent);
          double extra = 0;
          for (const U* x : {&us[a], &us[b]})
            for (auto& [le, copies] : x->outs) extra += double(copies) * double(e.texels() - le.texels()) * 16.0;
          if (extra > static_cast<double>(opt.union_max_extra_bytes)) continue;
          std::pair<int, int> score{shared, overlap(us[a].producers, us[b].producers)};
          if (score > best_score) best_score = score, best_a = static_cast<int>(a), best_b = static_cast<int>(b);
        }
      }
      if (best_a < 0) break;
      U& a = us[best_a];
      U& b = us[best_b];
      a.inputs.insert(b.inputs.begin(), b.inputs.end());
      a.producers.insert(b.producers.begin(), b.producers.end());
      a.outputs += b.outputs;
      a.iters += b.iters;
      a.outs.insert(a.outs.end(), b.outs.begin(), b.outs.end());
      a.extent = a.extent.cover(b.extent);
      b.dead = true;
      for (int gi : unions[best_b]) union_of[gi] = best_a;
      unions[best_a].insert(unions[best_a].end(), unions[best_b].begin(), unions[best_b].end());
      std::sort(unions[best_a].begin(), unions[best_a].end());
      unions[best_b].clear();
    }
  }
  // launch order: a topological order of the union DAG, the union of the earliest-formed group first among the
  // ready ones
  std::vector<int> launch;
  {
    std::vector<int> pending(unions.size(), 0);
    std::vector<std::vector<int>> users(unions.size());
    for (size_t u = 0; u < unions.size(); ++u) {
      std::set<int> deps;
      for (int gi : unions[u])
        for (int d : groups[gi].deps)
          if (union_of[d] >= 0 && union_of[d] != static_cast<int>(u)) deps.insert(union_of[d]);
      for (int d : deps) users[d].push_back(static_cast<int>(u)), ++pending[u];
    }
    std::set<std::pair<int, int>> ready;  // (first group, union)
    for (size_t u = 0; u < unions.size(); ++u)
      if (!unions[u].empty() && pending[u] == 0) ready.insert({unions[u][0], static_cast<int>(u)});
    while (!ready.empty()) {
      int u = ready.begin()->second;
      ready.erase(ready.begin());
      launch.push_back(u);
      for (int x : users[u])
        if (--pending[x] == 0) ready.insert({unions[x][0], x});
    }
  }
  // the kernels, with real value ids
  std::unordered_map<const Node*, std::string> role_name;
  for (auto& u : program.updates) role_name.emplace(u.value.get(), u.target->name + "_next");
  for (size_t i = 0; i < program.outputs.size(); ++i) role_name.emplace(program.outputs[i].get(), program.output_names[i]);
  for (int ui : launch) {
    int kindex = static_cast<int>(plan.kernels.size());
    Kernel k;
    std::vector<NodePtr> all_inlined;
    std::unordered_set<const Node*> have;
    std::string comment;
    const bool union_kernel = unions[ui].size() > 1;
    for (size_t bi = 0; bi < unions[ui].size(); ++bi) {
      Group& g = groups[unions[ui][bi]];
      const size_t first = k.outputs.size();
      std::vector<bool> stored;
      for (size_t j = 0; j < g.members.size(); ++j) {
        const Node* m = g.members[j].get();
        stored.push_back(is_stored(g, g.members[j]));
        if (!stored.back()) continue;
        // readable names: a program output by its name, an update by its target ("fc1_weight_next"), else t<k>
        std::string base = k.outputs.empty() ? fmt::format("t{}", kindex) : fmt::format("t{}_{}", kindex, k.outputs.size());
        if (auto it = role_name.find(m); it != role_name.end()) base = it->second;
        k.outputs.push_back(add_value(g.members[j], ValueKind::Temp, base));
        k.block.push_back(static_cast<int>(bi));
        if (transposed.count(m)) {
          Value& v = plan.values[k.outputs.back()];
          v.transposed = true;
          Shape st = v.stored_shape();
          v.layout = opt.row_aligned_layout ? TextureLayout::for_shape(std::vector<int64_t>(st.begin(), st.end()),
                                                                       opt.max_texture_width, max_h)
                                            : v.layout;
        }
      }
      // coordinates of the block's first output; sampler slots continue those of the earlier blocks
      Lowered l = lower_group(g.members, value_of, plan.values[k.outputs[first]].node.get(), &transposed,
                              std::move(k.inputs));
      by_position(l.inlined);
      for (size_t j = 0; j < g.members.size(); ++j)
        if (stored[j]) k.exprs.push_back(l.exprs[j]);
      k.inputs = std::move(l.inputs);
      if (union_kernel) {
        const Value& fv = plan.values[k.outputs[first]];
        Shape dom = fv.stored_shape();
        comment += fmt::format("// block {} (domain {}, texture {}x{}):\n", bi, shape_str(dom), fv.layout.width,
                               fv.layout.height);
      }
      comment += node_comment(l.inlined);
      for (auto& x : l.inlined)
        if (have.insert(x.get()).second) all_inlined.push_back(x);
    }
    by_position(all_inlined);
    if (!union_kernel) k.block.clear();
    k.nodes = all_inlined;
    k.comment = comment;
    push_kernel(std::move(k), all_inlined, "");
  }

  // outputs and updates
  for (auto& o : program.outputs) plan.output_values.push_back(value_of.at(o.get()));
  std::unordered_set<int> used_as_update;
  for (auto& u : program.updates) {
    int target = value_of.at(u.target.get());
    if (u.value == u.target) continue;  // no change
    int vid = value_of.at(u.value.get());
    if (plan.values[vid].kind != ValueKind::Temp || used_as_update.count(vid) ||
        std::count(plan.output_values.begin(), plan.output_values.end(), vid))
      vid = build_copy(u.value, u.value);  // its own copy, so it can live in the target's back texture
    used_as_update.insert(vid);
    plan.values[vid].update_of = target;
    plan.updates.push_back({target, vid});
  }

  // row planes (Value::planes): a one-domain kernel whose values are tile-mode sums (the emitter unrolls them by
  // 4: innermost extent a multiple of 4, at least 8, no nested loop) computes `P` rows per fragment
  if (opt.row_planes > 1) {
    const int P = std::min(opt.row_planes, opt.max_outputs);
    for (auto& k : plan.kernels) {
      // every output of the kernel gets P planes (P render targets each); union-domain kernels are left alone
      if (P < 2 || k.blocks() > 1 || k.exprs.size() != k.outputs.size() ||
          k.outputs.size() * P > static_cast<size_t>(opt.max_outputs))
        continue;
      bool ok = std::any_of(k.exprs.begin(), k.exprs.end(), khas_unrollable_sum);
      Shape st;
      for (int o : k.outputs) {
        const Value& v = plan.values[o];
        if (v.kind != ValueKind::Temp || v.update_of >= 0 || v.transposed) ok = false;
        st = v.stored_shape();
        if (!plane_shape_ok(st, P, opt)) ok = false;
      }
      // every kernel reading these values takes `planes` - 1 more samplers per value read; stay within max_inputs
      auto readers_fit = [&](int planes) {
        for (auto& r : plan.kernels) {
          int samplers = 0, extra = 0;
          for (int in : r.inputs) {
            samplers += plan.values[in].planes;
            if (std::find(k.outputs.begin(), k.outputs.end(), in) != k.outputs.end()) extra += planes - 1;
          }
          if (extra > 0 && samplers + extra > opt.max_inputs) return false;
        }
        return true;
      };
      if (!ok || !readers_fit(P)) continue;
      // column planes (Value::col_planes): each row's texels dealt out over Pc planes as well, when the render
      // targets, the shape (whole texels per plane row, enough texels per plane) and every reader's samplers allow
      int Pc = 1;
      if (opt.col_planes == 2 && k.outputs.size() * P * 2 <= static_cast<size_t>(opt.max_outputs)) {
        Shape rs = st;  // the row-planed stored shape
        rs[rs.size() - 2] /= P;
        if (rs.back() % 8 == 0 && (numel(rs) / 2 + 3) / 4 >= opt.min_plane_texels && readers_fit(2 * P)) Pc = 2;
      }
      const std::string row = fmt::format("i{}", st.size() - 2), last = fmt::format("i{}", st.size() - 1);
      std::vector<KExprPtr> per_plane;  // output-major: exprs[j * P * Pc + p * Pc + q]
      for (size_t j = 0; j < k.outputs.size(); ++j) {
        Value& v = plan.values[k.outputs[j]];
        v.planes = P * Pc;
        v.col_planes = Pc;
        const Shape ps = v.stored_shape();
        v.layout = opt.row_aligned_layout
                       ? TextureLayout::for_shape(std::vector<int64_t>(ps.begin(), ps.end()), opt.max_texture_width,
                                                  opt.max_texture_height)
                       : TextureLayout::for_numel(numel(ps), opt.max_texture_width, opt.max_texture_height);
        for (int p = 0; Pc == 1 && p < P; ++p)
          per_plane.push_back(ksubstitute(k.exprs[j], {{row, kibin(KOp::IAdd, kibin(KOp::IMul, kint(P), kvar(row)), kint(p))}}));
      }
      if (Pc > 1) {
        // column plane q: the plane's column c' is the tensor's column Pc * (c' - c' % 4) + 4 q + c' % 4, written
        // jc + 4 q with jc (kColumnVar) declared by the emitter; in lane mode jc is the vectorised variable (a
        // multiple of 4), so lane l reads column jc + 4 q + l and loads along it stay whole texels. One rewrite per
        // column plane, then one per row plane over all of them: a subtree that depends on the row only (the A
        // operand's load) or on the column only (B's) stays one node for the emitter to load once per step.
        std::vector<std::vector<KExprPtr>> cols;  // [q][j]
        for (int q = 0; q < Pc; ++q) {
          const KExprPtr jc = kibin(KOp::IAdd, kvar(kColumnVar), kint(4 * q));
          cols.push_back(krewrite(k.exprs, [&](const KExprPtr& x) -> KExprPtr {
            return x->op == KOp::Var && x->name == last ? jc : nullptr;
          }));
        }
        std::vector<KExprPtr> all;  // [q][j] flattened
        for (auto& c : cols) all.insert(all.end(), c.begin(), c.end());
        std::vector<std::vector<KExprPtr>> rows;  // [p][q * outputs + j]
        for (int p = 0; p < P; ++p) {
          const KExprPtr r = kibin(KOp::IAdd, kibin(KOp::IMul, kint(P), kvar(row)), kint(p));
          rows.push_back(krewrite(all, [&](const KExprPtr& x) -> KExprPtr {
            return x->op == KOp::Var && x->name == row ? r : nullptr;
          }));
        }
        for (size_t j = 0; j < k.outputs.size(); ++j)
          for (int p = 0; p < P; ++p)
            for (int q = 0; q < Pc; ++q) per_plane.push_back(rows[p][q * k.outputs.size() + j]);
      }
      k.exprs = std::move(per_plane);
      k.notes += fmt::format("// row planes: each invocation computes rows {0}*{1}+0 .. {0}*{1}+{2} of its outputs, one "
                             "render target (or buffer) per row\n", P, row, P - 1);
      if (Pc > 1)
        k.notes += fmt::format("// column planes: and {0} texels of each row, columns {1} + 4*q + 0..3 (q < {0}, "
                               "{1} = {0} * {2} - {3} * ({2} % 4)), one render target per (row, q); plane p * {0} + q\n",
                               Pc, kColumnVar, last, Pc - 1);
    }
  }

  // draw extents (row planes may have narrowed a kernel's layouts since push_kernel)
  for (auto& k : plan.kernels) {
    k.extent = {};
    for (int o : k.outputs) k.extent = k.extent.cover({plan.values[o].layout.width, plan.values[o].layout.height});
  }
  // memory plan: liveness over launch order; update values live in their target's back texture
  for (size_t ki = 0; ki < plan.kernels.size(); ++ki)
    for (int in : plan.kernels[ki].inputs) plan.values[in].last_use = static_cast<int>(ki);
  for (int o : plan.output_values) plan.values[o].last_use = std::numeric_limits<int>::max();
  std::vector<int> buffer_free_after;  // kernel index after which the buffer is free
  for (auto& k : plan.kernels)
    for (int out : k.outputs) {
      Value& v = plan.values[out];
      if (v.update_of >= 0) continue;
      for (int plane = 0; plane < v.planes; ++plane) {
        // same physical size (addressing), free strictly before this kernel (never read and written by one
        // kernel); among those, one already allocated for this draw's extent (no growth)
        int found = -1;
        for (size_t b = 0; b < plan.buffers.size(); ++b) {
          if (buffer_free_after[b] < v.producer && plan.buffers[b].width == v.layout.width &&
              plan.buffers[b].height == v.layout.height) {
            if (found < 0 || (!plan.buffer_extents[found].covers(k.extent) && plan.buffer_extents[b].covers(k.extent)))
              found = static_cast<int>(b);
          }
        }
        if (found < 0) {
          found = static_cast<int>(plan.buffers.size());
          plan.buffers.push_back(v.layout);
          plan.buffer_extents.push_back({v.layout.width, v.layout.height});
          buffer_free_after.push_back(-1);
        }
        if (plane == 0) v.buffer = found;
        if (v.planes > 1) v.plane_buffers.push_back(found);
        // a reused buffer has the same physical size but may hold more elements than its first user: the
        // runtime checks downloads (and sizes its textures) against the buffer's numel, so keep the largest
        TextureLayout& bl = plan.buffers[found];
        if (v.layout.numel > bl.numel) bl.numel = v.layout.numel, bl.texels = v.layout.texels;
        // allocated for the largest draw writing it (a union-domain draw renders its whole extent)
        plan.buffer_extents[found] = plan.buffer_extents[found].cover(k.extent);
        // taken until after the last reader (and, for the other planes of this value, already now)
        buffer_free_after[found] = std::max(v.last_use, v.producer);
      }
    }
  // allocation extents (Value::extent) and the bytes of all textures as allocated
  for (auto& v : plan.values) v.extent = {v.layout.width, v.layout.height};
  for (auto& v : plan.values)
    if (v.buffer >= 0) v.extent = plan.buffer_extents[v.buffer];
  for (auto& [target, value] : plan.updates) {
    Value& t = plan.values[target];
    const Value& u = plan.values[value];
    if (u.producer >= 0) t.extent = t.extent.cover(plan.kernels[u.producer].extent);
  }
  for (auto& [target, value] : plan.updates) plan.values[value].extent = plan.values[target].extent;
  int64_t bytes = 0;
  constexpr int64_t kTexelBytes = 4 * TextureLayout::kComponents;
  for (auto& v : plan.values) {
    if (v.kind == ValueKind::Persistent) bytes += 2 * v.extent.texels() * kTexelBytes;
    if (v.kind == ValueKind::Input || v.kind == ValueKind::Constant) bytes += v.extent.texels() * kTexelBytes;
  }
  for (auto& e : plan.buffer_extents) bytes += e.texels() * kTexelBytes;
  plan.peak_bytes = bytes;
  return plan;
}

nlohmann::json Plan::to_json() const {
  using nlohmann::json;
  auto kind_name = [](ValueKind k) {
    switch (k) {
      case ValueKind::Input: return "input";
      case ValueKind::Persistent: return "persistent";
      case ValueKind::Constant: return "constant";
      case ValueKind::Temp: return "temp";
    }
    return "?";
  };
  auto value_json = [&](int id) {
    const Value& v = values[id];
    json j = {{"value", v.id}, {"name", v.name}, {"kind", kind_name(v.kind)}, {"shape", json(std::vector<int64_t>(v.node->shape.begin(), v.node->shape.end()))},
              {"numel", v.layout.numel}, {"texture", {v.layout.width, v.layout.height}}};
    if (v.buffer >= 0) j["buffer"] = v.buffer;
    if (v.update_of >= 0) j["update_of"] = values[v.update_of].name;
    if (v.transposed) j["stored_transposed"] = true;
    if (v.planes > 1) {
      // "numel" and "texture" are one plane's; row r of the [rows, C] view of the tensor is in plane r % planes
      // (with column planes: element (r, c) in plane (r % row_planes) * col_planes + (c / 4) % col_planes)
      j["row_planes"] = v.row_planes();
      if (v.col_planes > 1) j["col_planes"] = v.col_planes;
      j["tensor_numel"] = v.node->numel();
      if (!v.plane_buffers.empty()) j["plane_buffers"] = v.plane_buffers;
    }
    if (v.extent.width != v.layout.width || v.extent.height != v.layout.height)
      j["allocated"] = {v.extent.width, v.extent.height};  // larger than its layout: written by a union-domain draw
    return j;
  };
  json ks = json::array();
  for (auto& k : kernels) {
    json ins = json::array();
    for (size_t i = 0; i < k.inputs.size(); ++i) {
      json j = value_json(k.inputs[i]);
      const Value& v = values[k.inputs[i]];
      if (v.planes == 1) {
        j["sampler"] = "in_" + v.name;
      } else {  // one sampler per row plane
        j["samplers"] = json::array();
        for (int p = 0; p < v.planes; ++p) j["samplers"].push_back(fmt::format("in_{}_p{}", v.name, p));
      }
      ins.push_back(j);
    }
    json nodes = json::array();
    for (auto& n : k.nodes)
      nodes.push_back({{"node", node_index(n.get())}, {"op", n->label()}, {"shape", shape_str(n->shape)},
                       {"source", n->loc.known() ? n->loc.str() : ""}});
    json outs = json::array();
    for (size_t j = 0, target = 0; j < k.outputs.size(); ++j) {
      json o = value_json(k.outputs[j]);
      const int planes = values[k.outputs[j]].planes;
      if (planes > 1) {
        o["render_targets"] = json::array();
        for (int p = 0; p < planes; ++p) o["render_targets"].push_back(target++);
      } else {
        o["render_target"] = target++;
      }
      if (k.blocks() > 1) o["block"] = k.block_of(j);
      outs.push_back(o);
    }
    ks.push_back({{"name", k.name}, {"extent", {k.extent.width, k.extent.height}}, {"blocks", k.blocks()},
                  {"outputs", outs}, {"inputs", ins}, {"nodes", nodes}});
  }
  json outs = json::array();
  for (size_t i = 0; i < output_values.size(); ++i)
    outs.push_back({{"name", program.output_names[i]}, {"value", values[output_values[i]].name}});
  json ups = json::array();
  for (auto& [t, v] : updates) ups.push_back({{"target", values[t].name}, {"value", values[v].name}});
  return {{"format", "shadergrad-plan/1"}, {"kernels", ks}, {"outputs", outs}, {"updates", ups},
          {"buffers", buffers.size()}, {"peak_bytes", peak_bytes}};
}

}  // namespace sg
