// Lowering of graph nodes to kernel IR (see schedule/lower.h).
#include "schedule/lower.h"

#include "index_simplify.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include <fmt/format.h>

namespace sg::sched {

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

namespace {

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

  /// The Map body e over `args`; memo == nullptr: its tree view (bodies of at most kSExprTreeLimit nodes), else
  /// memoised per body node (a shared subexpression stays shared in the kernel IR and is printed once).
  KExprPtr to_kexpr(const SExprPtr& e, const std::vector<KExprPtr>& args,
                    std::unordered_map<const SExpr*, KExprPtr>* memo) {
    switch (e->op) {
      case SOp::Const: return kfloat(e->value);
      case SOp::Arg: return args[e->arg];
      default: break;
    }
    if (memo)
      if (auto it = memo->find(e.get()); it != memo->end()) return it->second;
    KExprPtr r = kmath(e->op, to_kexpr(e->a, args, memo), e->b ? to_kexpr(e->b, args, memo) : nullptr,
                       e->c ? to_kexpr(e->c, args, memo) : nullptr);
    if (memo) memo->emplace(e.get(), r);
    return r;
  }

  KExprPtr lower_reduce(const Node& n, const std::vector<KExprPtr>& idx) {
    const Attrs& a = n.attrs;
    auto in = [&](size_t i) { return n.inputs[i]; };
    auto ishape = [&](size_t i) -> ShapeRef { return n.inputs[i]->shape; };
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

  KExprPtr lower_matmul(const Node& n, const std::vector<KExprPtr>& idx) {
    auto in = [&](size_t i) { return n.inputs[i]; };
    auto ishape = [&](size_t i) -> ShapeRef { return n.inputs[i]->shape; };
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
    // read() assigns sampler slots and fresh names: sequenced, B first (the unspecified argument order had GCC
    // read B first and clang A, so the two compilers' kernels bound their inputs differently)
    KExprPtr b = read(in(1), bi);
    KExprPtr a = read(in(0), ai);
    return kreduce(ReduceKind::Sum, {kv}, {as.back()}, kmath(SOp::Mul, a, b));
  }

  // Grouped convolutions (attrs.groups = G > 1; O output and C input channels, OG = O/G and CG = C/G per group):
  // output channel o reads input channels (o / OG) * CG + c for c < CG. groups == 1 lowers exactly as before (the
  // channel is the loop variable); a loop of one channel (depthwise: CG == 1, or OG == 1 in the input gradient) is
  // no loop.

  /// The input channel of group member `c` (a loop variable, or nullptr when CG == 1) for output channel `o`.
  static KExprPtr group_channel(const KExprPtr& o, const KExprPtr& c, int64_t og, int64_t cg) {
    KExprPtr base = og == 1 ? o : kibin(KOp::IDiv, o, kint(og));
    if (cg != 1) base = kibin(KOp::IMul, base, kint(cg));
    return c ? (cg == 1 ? base : kibin(KOp::IAdd, base, c)) : base;
  }

  KExprPtr lower_conv2d(const Node& n, const std::vector<KExprPtr>& idx) {
    const Attrs& a = n.attrs;
    auto in = [&](size_t i) { return n.inputs[i]; };
    auto ishape = [&](size_t i) -> ShapeRef { return n.inputs[i]->shape; };
    ShapeRef xs = ishape(0), ws = ishape(1);
    const bool grouped = a.groups != 1, channel_loop = !grouped || ws[1] != 1;
    std::string c = channel_loop ? fresh() : std::string(), kh = fresh(), kw = fresh();
    KExprPtr ih = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, idx[2], kint(a.stride[0])), kint(a.padding[0])),
                        kibin(KOp::IMul, kvar(kh), kint(a.dilation[0])));
    KExprPtr iw = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, idx[3], kint(a.stride[1])), kint(a.padding[1])),
                        kibin(KOp::IMul, kvar(kw), kint(a.dilation[1])));
    KExprPtr valid = kint(1);
    if (a.padding[0]) valid = band(valid, in_range(ih, xs[2]));
    if (a.padding[1]) valid = band(valid, in_range(iw, xs[3]));
    KExprPtr cv = channel_loop ? kvar(c) : nullptr;
    KExprPtr xc = grouped ? group_channel(idx[1], cv, ws[0] / a.groups, ws[1]) : cv;
    KExprPtr xv = kselect(valid, read(in(0), {idx[0], xc, ih, iw}), kfloat(0));
    KExprPtr wv = read(in(1), {idx[1], channel_loop ? cv : kint(0), kvar(kh), kvar(kw)});
    if (!channel_loop) return kreduce(ReduceKind::Sum, {kh, kw}, {ws[2], ws[3]}, kmath(SOp::Mul, xv, wv));
    return kreduce(ReduceKind::Sum, {c, kh, kw}, {ws[1], ws[2], ws[3]}, kmath(SOp::Mul, xv, wv));
  }

  KExprPtr lower_conv2d_grad_input(const Node& n, const std::vector<KExprPtr>& idx) {
    const Attrs& a = n.attrs;
    auto in = [&](size_t i) { return n.inputs[i]; };
    auto ishape = [&](size_t i) -> ShapeRef { return n.inputs[i]->shape; };
    // dx[b,c,h,w] = sum_{o,kh,kw} dy[b,o,(h+p-kh*d)/s,(w+p-kw*d)/s] * w[o,c,kh,kw] where divisible, in range;
    // grouped: input channel ci = g*CG + c sums over the OG output channels o = g*OG + o' of its group g = ci / CG
    ShapeRef ys = ishape(0), ws = ishape(1);
    const bool grouped = a.groups != 1;
    const int64_t og = ys[1] / a.groups, cg = ws[1];
    const bool channel_loop = !grouped || og != 1;
    std::string o = channel_loop ? fresh() : std::string(), kh = fresh(), kw = fresh();
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
    KExprPtr oc = channel_loop ? kvar(o) : nullptr, wc = idx[1];
    if (grouped) {
      // the group's first output channel (ci / CG) * OG, plus the loop variable o' when OG > 1
      KExprPtr first = group_channel(idx[1], nullptr, cg, og);
      oc = channel_loop ? kibin(KOp::IAdd, first, oc) : first;
      if (cg != 1) wc = kibin(KOp::IMod, idx[1], kint(cg));
      else wc = kint(0);
    }
    KExprPtr w = read(in(1), {oc, wc, kvar(kh), kvar(kw)});  // sequenced, w first: as in lower_matmul
    KExprPtr prod = kmath(SOp::Mul, read(in(0), {idx[0], oc, pos[0], pos[1]}), w);
    if (!channel_loop) return kreduce(ReduceKind::Sum, {kh, kw}, {ws[2], ws[3]}, kselect(valid, prod, kfloat(0)));
    return kreduce(ReduceKind::Sum, {o, kh, kw}, {grouped ? og : ys[1], ws[2], ws[3]}, kselect(valid, prod, kfloat(0)));
  }

  KExprPtr lower_conv2d_grad_weight(const Node& n, const std::vector<KExprPtr>& idx) {
    const Attrs& a = n.attrs;
    auto in = [&](size_t i) { return n.inputs[i]; };
    auto ishape = [&](size_t i) -> ShapeRef { return n.inputs[i]->shape; };
    // dw[o,c,kh,kw] = sum_{b,oh,ow} dy[b,o,oh,ow] * x[b,c,oh*s-p+kh*d,ow*s-p+kw*d]; grouped: x's channel
    // (o / OG) * CG + c
    ShapeRef ys = ishape(0), xs = ishape(1);
    std::string b = fresh(), oh = fresh(), ow = fresh();
    KExprPtr ih = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, kvar(oh), kint(a.stride[0])), kint(a.padding[0])),
                        kibin(KOp::IMul, idx[2], kint(a.dilation[0])));
    KExprPtr iw = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, kvar(ow), kint(a.stride[1])), kint(a.padding[1])),
                        kibin(KOp::IMul, idx[3], kint(a.dilation[1])));
    KExprPtr valid = kint(1);
    if (a.padding[0]) valid = band(valid, in_range(ih, xs[2]));
    if (a.padding[1]) valid = band(valid, in_range(iw, xs[3]));
    KExprPtr xc = a.groups == 1 ? idx[1] : group_channel(idx[0], idx[1], ys[1] / a.groups, n.shape[1]);
    KExprPtr xv = kselect(valid, read(in(1), {kvar(b), xc, ih, iw}), kfloat(0));
    KExprPtr dy = read(in(0), {kvar(b), idx[0], kvar(oh), kvar(ow)});
    return kreduce(ReduceKind::Sum, {b, oh, ow}, {ys[0], ys[2], ys[3]}, kmath(SOp::Mul, dy, xv));
  }

  KExprPtr lower_pool(const Node& n, const std::vector<KExprPtr>& idx) {
    const Attrs& a = n.attrs;
    auto in = [&](size_t i) { return n.inputs[i]; };
    auto ishape = [&](size_t i) -> ShapeRef { return n.inputs[i]->shape; };
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

  /// Where input coordinate `h` (dimension d of the pool) sits in the windows that contain it: the window
  /// coordinate `pos` and the position inside it `k` for one window, `valid` when that window exists.
  struct WindowSlot {
    KExprPtr pos, k, valid;
  };

  /// Windows of dimension d that do not overlap (stride >= kernel): `h` lies in at most one window,
  /// (h + p) / s at offset (h + p) % s, so the gradient needs no loop over window positions along d (the 2x2 max
  /// pool's gradient reads its window's 4 inputs and 1 dy per element instead of 16 and 4).
  WindowSlot only_window(const Attrs& a, int d, const KExprPtr& h, int64_t in_extent, int64_t out_extent) {
    KExprPtr t = kibin(KOp::IAdd, h, kint(a.padding[d]));
    KExprPtr q = kibin(KOp::IDiv, t, kint(a.stride[d]));
    KExprPtr r = kibin(KOp::IMod, t, kint(a.stride[d]));
    KExprPtr valid = kint(1);
    if (a.stride[d] > a.kernel[d]) valid = band(valid, kibin(KOp::ILt, r, kint(a.kernel[d])));
    if ((in_extent - 1 + a.padding[d]) / a.stride[d] >= out_extent) valid = band(valid, kibin(KOp::ILt, q, kint(out_extent)));
    return {q, r, valid};
  }

  /// Overlapping windows along d: the window whose position `kvar` covers `h`, for each kvar in [0, kernel).
  WindowSlot window_at(const Attrs& a, int d, const KExprPtr& h, const std::string& kvar_name, int64_t out_extent) {
    KExprPtr t = kibin(KOp::ISub, kibin(KOp::IAdd, h, kint(a.padding[d])), kvar(kvar_name));
    KExprPtr q = kibin(KOp::IDiv, t, kint(a.stride[d]));
    KExprPtr valid = kibin(KOp::IGe, t, kint(0));
    if (a.stride[d] != 1) valid = band(valid, kibin(KOp::IEq, kibin(KOp::IMod, t, kint(a.stride[d])), kint(0)));
    valid = band(valid, kibin(KOp::ILt, q, kint(out_extent)));
    return {q, kvar(kvar_name), valid};
  }

  KExprPtr lower_pool_grad(const Node& n, const std::vector<KExprPtr>& idx) {
    const Attrs& a = n.attrs;
    auto in = [&](size_t i) { return n.inputs[i]; };
    auto ishape = [&](size_t i) -> ShapeRef { return n.inputs[i]->shape; };
    // dx[b,c,h,w] = sum over windows (oh,ow) that contain (h,w) at window position (kh,kw); along a dimension
    // whose windows do not overlap (stride >= kernel, the usual 2x2 max pool) that is one window, no loop
    ShapeRef ys = ishape(0);
    Shape xs = n.shape;
    bool max_pool = n.op == Op::MaxPool2dGrad;
    std::vector<std::string> loop_vars;
    std::vector<int64_t> loop_extents;
    WindowSlot slot[2];
    for (int d = 0; d < 2; ++d) {
      if (a.stride[d] >= a.kernel[d]) {
        slot[d] = only_window(a, d, idx[2 + d], xs[2 + d], ys[2 + d]);
        continue;
      }
      loop_vars.push_back(fresh());
      loop_extents.push_back(a.kernel[d]);
      slot[d] = window_at(a, d, idx[2 + d], loop_vars.back(), ys[2 + d]);
    }
    KExprPtr valid = band(slot[0].valid, slot[1].valid);
    KExprPtr dy = read(in(0), {idx[0], idx[1], slot[0].pos, slot[1].pos});
    if (!max_pool) {
      KExprPtr r = kselect(valid, dy, kfloat(0));
      if (!loop_vars.empty()) r = kreduce(ReduceKind::Sum, loop_vars, loop_extents, r);
      return kmath(SOp::Mul, r, kfloat(1.0 / static_cast<double>(a.kernel[0] * a.kernel[1])));
    }
    // the window's first maximum (row-major window order, NaN wins), as PyTorch picks it; only that element gets
    // dy (a select, not dy * [is max]: an infinite or NaN dy reaches no other element, as on the CPU reference)
    std::string kh2 = fresh(), kw2 = fresh();
    KExprPtr ih2 = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, slot[0].pos, kint(a.stride[0])), kint(a.padding[0])), kvar(kh2));
    KExprPtr iw2 = kibin(KOp::IAdd, kibin(KOp::ISub, kibin(KOp::IMul, slot[1].pos, kint(a.stride[1])), kint(a.padding[1])), kvar(kw2));
    KExprPtr valid2 = kint(1);
    if (a.padding[0]) valid2 = band(valid2, in_range(ih2, xs[2]));
    if (a.padding[1]) valid2 = band(valid2, in_range(iw2, xs[3]));
    KExprPtr xv = kselect(valid2, read(in(1), {idx[0], idx[1], ih2, iw2}),
                          kfloat(-std::numeric_limits<double>::infinity()));
    KExprPtr am = kreduce(ReduceKind::ArgMax, {kh2, kw2}, {a.kernel[0], a.kernel[1]}, xv);
    KExprPtr here = kibin(KOp::IAdd, kibin(KOp::IMul, slot[0].k, kint(a.kernel[1])), slot[1].k);
    KExprPtr contrib = kselect(band(valid, kibin(KOp::IEq, kto_int(am), here)), dy, kfloat(0));
    return loop_vars.empty() ? contrib : kreduce(ReduceKind::Sum, loop_vars, loop_extents, contrib);
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
        if (sexpr_size(n.body) <= kSExprTreeLimit) return to_kexpr(n.body, args, nullptr);
        std::unordered_map<const SExpr*, KExprPtr> memo;
        return to_kexpr(n.body, args, &memo);
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
      case Op::Gather: {
        // x at idx with coordinate `axis` read from the index; clamped into [0, V): fed indices are checked on the
        // host (sg/feeds.h), a computed one outside the axis (or NaN) must still never read outside x
        const int ax = a.axes[0];
        const int64_t extent = ishape(0)[ax];
        KExprPtr at = kto_int(read(in(1), idx));
        at = kibin(KOp::IMin, kibin(KOp::IMax, at, kint(0)), kint(extent - 1));
        std::vector<KExprPtr> j(idx);
        j[ax] = at;
        return read(in(0), j);
      }
      case Op::RandomUniform: {
        // a pure function of the element's flat index and the step (one element, stored as an exact float): computed
        // where it is read, never loaded
        std::vector<KExprPtr> at(ishape(0).size(), kint(0));
        return krandom_uniform(a.seed, a.stream, linearize(idx, n.shape), kto_int(read(in(0), at)));
      }
      // the element's own coordinate along the axis (no load: nothing is stored)
      case Op::Iota: return kto_float(idx[a.axes[0]]);
      case Op::Reduce: return lower_reduce(n, idx);
      case Op::MatMul: return lower_matmul(n, idx);
      case Op::Conv2d: return lower_conv2d(n, idx);
      case Op::Conv2dGradInput: return lower_conv2d_grad_input(n, idx);
      case Op::Conv2dGradWeight: return lower_conv2d_grad_weight(n, idx);
      case Op::MaxPool2d:
      case Op::AvgPool2d: return lower_pool(n, idx);
      case Op::MaxPool2dGrad:
      case Op::AvgPool2dGrad: return lower_pool_grad(n, idx);
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

}  // namespace

bool same_domain(ShapeRef a, ShapeRef b) { return squeezed(a) == squeezed(b); }

Lowered lower_group(const std::vector<NodePtr>& members, const std::unordered_map<const Node*, int>& value_of,
                    const Node* domain, const std::unordered_set<const Node*>* transposed,
                    std::vector<int> inputs) {
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
  // integer divisions and modulos the coordinates' and loop variables' ranges decide (index_simplify.h): every
  // emitter (GLSL, WGSL, C) prints the simplified index
  std::map<std::string, KVarRange> coords;
  for (size_t i = 0; i < dom.size(); ++i) coords[fmt::format("i{}", i)] = {0, dom[i] - 1};
  r.exprs = ksimplify_index(r.exprs, coords);
  r.inputs = k.inputs;
  return r;
}

}  // namespace sg::sched
