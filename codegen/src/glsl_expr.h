// shadergrad — the GLSL expression printer both emitters share (private to codegen/src/emit*).
//
// ExprEmitter prints kernel IR (sg/kernel_ir.h) as GLSL 4.50 statements and expressions: common subexpressions
// become named locals (v<N>, j<N>, c<N>), reductions become loops with accumulators (acc<N>; sibling loops of the
// same shape fused into one, loop-invariant reductions hoisted), loads become load_<value>(index) calls (or
// load4_<value> for a whole texel), and one integer variable may be vectorised over 4 consecutive values (lane,
// reduce and jam modes of the fragment emitter). What a load means (texel fetch, buffer read) is the stage
// emitter's business: it defines load_/load4_ for every input the printer used (ExprEmitter::texel_loads_).
// Output is deterministic: the same kernel prints the same text.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <iterator>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "glsl_math.h"
#include "kernel_analysis.h"
#include "sg/kernel_ir.h"
#include "sg/schedule.h"

namespace sg::glsl {

/// A float literal GLSL reads back exactly (9 significant digits; NaN and infinities as uintBitsToFloat).
std::string flit(double v);

/// values (the output's last coordinate across the 4 elements of a texel: "lane mode"; or the innermost loop
/// variable of a sum reduction stepped by 4: "reduce mode"). Values depending on that variable become vec4;
/// a load whose index is var + (multiple of 4) reads one whole texel instead of 4 scalars.
class ExprEmitter {
 public:
  struct Code {
    std::string s;
    bool vec = false;
  };

  ExprEmitter(const Plan& plan, const Kernel& k) : plan_(plan), k_(k) {
    for (auto& e : k.exprs) count_refs(e);
  }

  /// Emits statements for `e` into body_ at the current indentation; returns a GLSL expression.
  Code emit(const KExprPtr& e) {
    bool gathering = !subst_.empty();
    bool var_dep = !vvar_.empty() && varies(e);
    if (!(gathering && var_dep)) {
      for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
        auto f = it->find(e.get());
        if (f != it->end()) return f->second;
      }
    } else {
      const std::string sig = subst_signature();
      for (auto it = lane_scopes_.rbegin(); it != lane_scopes_.rend(); ++it) {
        auto f = it->find({e.get(), sig});
        if (f != it->end()) return f->second;
      }
    }
    if (const size_t level = hoist_level(e); level < loops_.size()) return hoist(e, level);
    Code c = emit_raw(e);
    bool trivial = e->op == KOp::IntConst || e->op == KOp::FloatConst || e->op == KOp::Var;
    if (!trivial && refs_[e.get()] > 1 && !(gathering && var_dep)) {
      std::string name = fmt::format("{}{}", e->type == KType::Int ? (is_bool(e) ? "c" : "j") : "v", temp_++);
      line(fmt::format("{} {} = {};", type_name(e, c.vec), name, c.s));
      c.s = name;
      scopes_.back()[e.get()] = c;
    }
    return c;
  }

  void line(const std::string& s) { body_ += std::string(indent_ * 2, ' ') + s + "\n"; }

  /// Lane mode: vectorise output coordinate `var` (whose lane-0 value is `base`, a multiple of 4).
  void set_vector_var(const std::string& var, const std::string& base) {
    vvar_ = var;
    vbase_ = base;
    varies_.clear();
  }
  /// True when some load of `e` reads 4 consecutive elements along `var` (worth vectorising).
  bool has_unit_load(const KExprPtr& e, const std::string& var) {
    std::string saved = vvar_;
    vvar_ = var;
    varies_.clear();
    bool r = find_unit_load(e);
    vvar_ = saved;
    varies_.clear();
    return r;
  }
  /// The outermost sum reduction whose innermost loop variable can be vectorised (or nullptr).
  const KExpr* pick_vector_reduce(const KExprPtr& root) {
    std::set<const KExpr*> seen;  // each node once (a visited node held none)
    std::function<const KExpr*(const KExprPtr&)> go = [&](const KExprPtr& e) -> const KExpr* {
      if (!e || !seen.insert(e.get()).second) return nullptr;
      if (e->op == KOp::Reduce) {
        if (e->reduce == ReduceKind::Sum && e->extents.back() % 4 == 0 && !kcontains_reduce(e->a) &&
            has_unit_load(e->a, e->loop_vars.back()))
          return e.get();
        return nullptr;  // do not look inside other reductions
      }
      for (auto* x : {&e->a, &e->b, &e->c})
        if (auto* r = go(*x)) return r;
      return nullptr;
    };
    return go(root);
  }
  /// Reduce mode: sum reduction `r`'s innermost loop is vectorised (4 iterations per step, vec4 accumulator).
  /// Several such reductions with the same loops (the texel's 4 lanes, emit_fragment.cpp) are fused into one loop
  /// nest by fuse_sibling_loops, so that their common texel fetches are made once per step.
  void set_vector_reduce(const KExpr* r) { vreduces_.insert(r); }
  /// Reductions whose innermost loop steps by 4 (their body already sums the 4 iterations v, v+1, v+2, v+3):
  /// the loop variable is then a multiple of 4, which lets loads of v + d share one texel fetch.
  void set_step4_reduces(std::set<const KExpr*> r) { step4_ = std::move(r); }
  /// The values integer variable `var` takes (inclusive); the printer's range analysis (`range`) starts from
  /// these and from the loops it opens. Coordinates of the output, the element index...
  void set_var_range(const std::string& var, int64_t lo, int64_t hi) { var_ranges_[var] = {true, lo, hi}; }
  /// Fragment stage: inputs are textures `in_<value>`. A load whose flat index is provably row * (4 * width) +
  /// column, column in [0, 4 * width) and row inside the texture (range analysis), is printed as a texture() read
  /// of texel (column >> 2, row) at its centre (`uv_texel_<value>`, one texel's size in texture coordinates, is
  /// the stage emitter's to declare: uv_inputs_), its loop-invariant parts in loop preheaders, instead of a
  /// load4_/load_ call turning the flat index back into texel coordinates per fetch (CPU rasterisers pay every
  /// integer op per fetch: docs/perf-log/W7.md), and
  /// divisions and modulos by powers of two of provably non-negative values are printed as shifts and masks.
  void set_texture_addressing(bool on) { textures_ = on; }

  std::string body_;
  int indent_ = 2;
  MathHelpers helpers_;  // the math helper functions (glsl_math.h) the printed code calls
  std::set<std::string> texel_loads_;  // inputs read as whole texels
  std::set<std::string> unaligned_loads_;  // inputs read as 4 consecutive elements from any index (load4u_)
  std::set<std::string> uv_inputs_;        // inputs sampled by texture() at texel centres (uv_texel_<name>)
  /// Jam mode: lanes whose element is past `elem_hi` are discarded, so the clamp min(elem, elem_hi) of their
  /// coordinates does not break the lanes' unit stride (lane_stride).
  void set_discarded_lanes_past(int64_t elem_hi) { discard_past_ = elem_hi; }
  /// The vectorised variable's lane-0 value (its base) is a multiple of 4 (jam mode without a clamp): a gathered
  /// load of 4 consecutive elements from base-derived index + constant then reads the texels it spans through the
  /// scope's texel cache (shared by the loads at nearby offsets, e.g. a conv's taps).
  void set_aligned_base() { base_aligned_ = true; }
  /// Every loop-invariant piece of integer math (comparisons and sums too, not only divisions, modulos, min and
  /// max) is computed once before the loops it does not depend on: reduce mode's padding masks and tap shifts
  /// (CPU rasterisers' shader compilers do not move code out of loops: docs/perf-log/W12d.md).
  void set_hoist_index_math() { hoist_index_math_ = true; }
  /// Inside loops, scalar loads at an aligned base + a loop-invariant runtime shift + a constant read their elements
  /// from shifted 4-element windows (invariant_scalar): worth it where runs of neighbouring constants share a window
  /// (a conv input gradient's 3x3 taps of weights: jam mode with its taps unrolled), not for a lone load.
  void set_windowed_scalars() { windowed_scalars_ = true; }

 private:
  const Plan& plan_;
  const Kernel& k_;
  std::unordered_map<const KExpr*, int> refs_;
  std::vector<std::unordered_map<const KExpr*, Code>> scopes_{1};
  int temp_ = 0;
  std::string vvar_, vbase_;                       // vectorised variable and its lane-0 value
  std::map<std::string, std::string> subst_;       // scalar gather: variable -> replacement
  std::unordered_map<const KExpr*, bool> varies_;  // depends on vvar_
  std::set<const KExpr*> vreduces_;  // set_vector_reduce
  std::set<const KExpr*> step4_;
  std::set<std::string> aligned_vars_;                         // integer variables known to be multiples of 4
  std::vector<std::map<std::string, std::string>> texels_{1};  // per scope: "input|texel index" -> vec4 local
  // per scope: values printed under a lane substitution (subst_ of a gathered load), keyed by that substitution
  std::vector<std::map<std::pair<const KExpr*, std::string>, Code>> lane_scopes_{1};

  /// A loop of a reduction nest being printed, innermost last (the loop-invariant code motion's view).
  struct OpenLoop {
    std::string var;   ///< its loop variable
    size_t at = 0;     ///< offset in body_ of its `for` line: its preheader goes there when the nest is closed
    int indent = 0;    ///< the indentation of its `for` line
    size_t scope = 0;  ///< index in scopes_ (texels_, lane_scopes_) of the scope around the loop
    std::string pre;   ///< loop-invariant definitions hoisted out of it (its preheader)
    std::map<std::string, std::string> pre_names;  ///< "type = expression" printed in `pre` -> its local (one each)
  };
  std::vector<OpenLoop> loops_;
  std::unordered_map<const KExpr*, bool> index_math_;  // memo of pure_index_math
  bool force_hoist_ = false;
  std::set<const KExpr*> cheap_index_math_;  // pure index math without a division, modulo, min or max  // hoist_level: any pure index math (texel coordinates), not only the costly kind
  bool textures_ = false;     // set_texture_addressing
  std::optional<int64_t> discard_past_;  // set_discarded_lanes_past
  bool base_aligned_ = false;            // set_aligned_base
  bool vreduce_aligned_ = false;         // inside a vectorised reduction: the vectorised variable's base is a multiple of 4
  bool hoist_index_math_ = false;        // set_hoist_index_math
  bool windowed_scalars_ = false;        // set_windowed_scalars

  /// How an integer expression changes across the 4 lanes of the vectorised variable: by 0 (the same value), by
  /// 1 per lane (lane d = lane 0 + d, in every lane that is not discarded), or otherwise (nullopt).
  std::optional<int64_t> lane_stride(const KExprPtr& e) {
    if (!varies(e) || lane_form(e) == LaneForm::Uniform) return 0;
    if (e->op == KOp::Var) return 1;
    if (!e->a || !e->b) return std::nullopt;
    switch (e->op) {
      case KOp::IAdd:
      case KOp::ISub: {
        auto a = lane_stride(e->a), b = lane_stride(e->b);
        if (!a || !b) return std::nullopt;
        return e->op == KOp::IAdd ? *a + *b : *a - *b;
      }
      case KOp::IMul: {
        const KExprPtr& k = e->a->op == KOp::IntConst ? e->a : e->b;
        const KExprPtr& x = e->a->op == KOp::IntConst ? e->b : e->a;
        auto a = k->op == KOp::IntConst ? lane_stride(x) : std::nullopt;
        if (!a) return std::nullopt;
        return *a * k->ivalue;
      }
      case KOp::IMin:  // jam mode's clamp of the element index: it only changes discarded lanes
        if (discard_past_ && e->a->op == KOp::Var && e->a->name == vvar_ && kis_int(e->b, *discard_past_)) return 1;
        return std::nullopt;
      case KOp::IDiv:
        if (lane_form(e) == LaneForm::Uniform) return 0;
        return std::nullopt;
      case KOp::IMod:  // an aligned block of 4 modulo a multiple of 4 stays consecutive
        if (e->b->op == KOp::IntConst && e->b->ivalue > 0 && e->b->ivalue % 4 == 0 &&
            lane_form(e->a) == LaneForm::InBlock && lane_stride(e->a) == std::optional<int64_t>(1))
          return 1;
        return std::nullopt;
      default: return std::nullopt;
    }
  }

  /// The values an integer expression takes (inclusive bounds), where the analysis knows them.
  struct Range {
    bool ok = false;
    int64_t lo = 0, hi = 0;
  };
  std::map<std::string, Range> var_ranges_;
  std::unordered_map<const KExpr*, Range> range_memo_;   // cleared when a variable's range changes
  std::map<std::string, KExprPtr> canon_;                // texel coordinate nodes by their text: one node each
  std::vector<KExprPtr> made_;  // every node texel_coords built, kept alive: range_memo_ is keyed by address
  static constexpr int64_t kRangeLimit = int64_t{1} << 40;  // beyond this the analysis gives up (no overflow)

  Range range(const KExprPtr& e) {
    if (!e || e->type != KType::Int) return {};
    if (auto it = range_memo_.find(e.get()); it != range_memo_.end()) return it->second;
    Range r = range_raw(e);
    made_.push_back(e);  // (its address stays its own while the memo holds it)
    if (r.ok && (r.lo < -kRangeLimit || r.hi > kRangeLimit)) r = {};
    return range_memo_[e.get()] = r;
  }
  Range range_raw(const KExprPtr& e) {
    if (e->op == KOp::IntConst) return {true, e->ivalue, e->ivalue};
    if (e->op == KOp::Var) {
      // a substituted variable is one lane of the vectorised variable (or a gathered lane): the variable's range
      // covers every lane value (a lane-0 base plus 0..3 stays inside the coordinate's range)
      auto it = var_ranges_.find(e->name);
      return it == var_ranges_.end() ? Range{} : it->second;
    }
    if (!e->a || !e->b) return {};
    const Range a = range(e->a), b = range(e->b);
    if (!a.ok || !b.ok) return {};
    switch (e->op) {
      case KOp::IAdd: return {true, a.lo + b.lo, a.hi + b.hi};
      case KOp::ISub: return {true, a.lo - b.hi, a.hi - b.lo};
      case KOp::IMul: {
        const int64_t p[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
        return {true, *std::min_element(p, p + 4), *std::max_element(p, p + 4)};
      }
      case KOp::IDiv:  // C-style division of non-negative values by a positive constant
        if (e->b->op != KOp::IntConst || e->b->ivalue <= 0 || a.lo < 0) return {};
        return {true, a.lo / e->b->ivalue, a.hi / e->b->ivalue};
      case KOp::IMod:
        if (e->b->op != KOp::IntConst || e->b->ivalue <= 0 || a.lo < 0) return {};
        if (a.hi < e->b->ivalue) return a;
        return {true, 0, e->b->ivalue - 1};
      case KOp::IMin: return {true, std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
      case KOp::IMax: return {true, std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
      default: return {};
    }
  }
  void push_var_range(const std::string& var, Range r, std::vector<std::pair<std::string, std::optional<Range>>>& saved) {
    auto it = var_ranges_.find(var);
    saved.emplace_back(var, it == var_ranges_.end() ? std::nullopt : std::optional<Range>(it->second));
    var_ranges_[var] = r;
    range_memo_.clear();
  }
  void pop_var_ranges(std::vector<std::pair<std::string, std::optional<Range>>>& saved) {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second) var_ranges_[it->first] = *it->second;
      else var_ranges_.erase(it->first);
    }
    saved.clear();
    range_memo_.clear();
  }
  /// One node per printed form, so that the scopes (keyed by node) share a texel coordinate between fetches.
  KExprPtr canon(const KExprPtr& e) {
    if (e->op == KOp::IntConst || e->op == KOp::Var) return e;
    auto [it, fresh] = canon_.emplace(kexpr_str(e), e);
    if (fresh) refs_[e.get()] = 2;  // named once it is printed (count_refs never saw the new nodes)
    return it->second;
  }
  static bool power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
  static int log2i(int64_t v) {
    int k = 0;
    while ((int64_t{1} << k) < v) ++k;
    return k;
  }
  /// The texel coordinates (column texel, row) of flat element index `idx` (a multiple of 4 when `aligned`) of
  /// input `v`, when the analysis proves idx = row * 4W + column with column in [0, 4W) and row in [0, H);
  /// {nullptr, nullptr} otherwise (planed textures, unknown ranges, an index of another form).
  /// `in_plane`: idx is an element index of one of v's row planes (each has v.layout), not of v.
  std::pair<KExprPtr, KExprPtr> texel_coords(const KExprPtr& idx, const Value& v, bool in_plane = false) {
    if (!textures_ || (v.planes > 1 && !in_plane)) return {};
    const int64_t W = v.layout.width, H = v.layout.height, L = 4 * W;
    std::vector<KExprPtr> terms;
    std::function<void(const KExprPtr&)> flat = [&](const KExprPtr& x) {
      if (x->op == KOp::IAdd) flat(x->a), flat(x->b);
      else terms.push_back(x);
    };
    flat(idx);
    KExprPtr row, col, sub;  // sub: x of a term x * k with k dividing 4W (k rows of k elements per texture row)
    int64_t konst = 0, k_sub = 0;
    auto add = [this](KExprPtr& acc, const KExprPtr& t) {
      made_.push_back(t);
      acc = acc ? kibin(KOp::IAdd, acc, t) : t;
      made_.push_back(acc);
    };
    for (const auto& t : terms) {
      if (t->op == KOp::IntConst) {
        konst += t->ivalue;
        continue;
      }
      if (t->op == KOp::IMul) {
        const bool ka = t->a->op == KOp::IntConst, kb = t->b->op == KOp::IntConst;
        const int64_t k = ka ? t->a->ivalue : kb ? t->b->ivalue : 0;
        const KExprPtr& x = ka ? t->b : t->a;
        if (k > 0 && k % L == 0) {
          add(row, k == L ? x : kibin(KOp::IMul, x, kint(k / L)));
          continue;
        }
        if (k > 0 && L % k == 0 && !sub) {
          sub = x, k_sub = k;
          continue;
        }
      }
      add(col, t);
    }
    if (konst < 0) return {};
    if (konst / L) add(row, kint(konst / L));
    if (konst % L) add(col, kint(konst % L));
    if (sub) {
      // idx = ... + sub * k + col with col in [0, k): texture row sub / (4W / k), element (sub % (4W / k)) * k + col
      const Range rs = range(sub), rc = col ? range(col) : Range{true, 0, 0};
      if (!rs.ok || rs.lo < 0 || !rc.ok || rc.lo < 0 || rc.hi >= k_sub) return {};
      const int64_t m = L / k_sub;
      add(row, kibin(KOp::IDiv, sub, kint(m)));
      KExprPtr within = kibin(KOp::IMul, kibin(KOp::IMod, sub, kint(m)), kint(k_sub));
      made_.push_back(within);
      if (col) {
        KExprPtr c2 = kibin(KOp::IAdd, within, col);
        made_.push_back(c2);
        col = c2;
      } else {
        col = within;
      }
    }
    if (!row) row = kint(0);
    if (!col) col = kint(0);
    const Range rr = range(row), rc = range(col);
    if (!rr.ok || !rc.ok || rr.lo < 0 || rr.hi >= H || rc.lo < 0 || rc.hi >= L) return {};
    made_.push_back(row), made_.push_back(col);
    KExprPtr ctexel = canon(kibin(KOp::IDiv, canon(col), kint(4)));
    made_.push_back(ctexel);
    range_memo_[ctexel.get()] = {true, rc.lo / 4, rc.hi / 4};
    return {ctexel, canon(row)};
  }
  /// Prints texel coordinates: hoisted to the outermost loop they do not depend on.
  std::string coord(const KExprPtr& e) {
    const bool saved = force_hoist_;
    force_hoist_ = true;
    std::string s = emit(e).s;
    force_hoist_ = saved;
    return s;
  }
  /// `texelFetch(in_<name>, ivec2(column texel, row), 0)` for flat index `idx` of input `v`, or "" (see texel_coords).
  std::string texel_fetch(const KExprPtr& idx, const Value& v) {
    auto [c, r] = texel_coords(idx, v);
    if (!c) return {};
    const std::string cs = coord(c), rs = coord(r);
    // texture() at the texel's centre (the textures are NEAREST): SwiftShader's texelFetch costs more than a
    // float multiply-add and a nearest sample (docs/perf-log/W7.md)
    uv_inputs_.insert(v.name);
    return fmt::format("texture(in_{0}, (vec2(ivec2({1}, {2})) + 0.5) * uv_texel_{0})", v.name, cs, rs);
  }

  /// A gather from a value with P row planes (P dividing 4, no column planes) whose index is row * C + rest
  /// (row the vectorised variable, or in jam mode a function of it whose lanes are row + d with lane 0's a multiple
  /// of 4; C the value's row length; rest the same in every lane and in [0, C)): lane d
  /// reads row base + d (base, the lane-0 value, a multiple of 4), which is row base / P + d / P of plane d % P,
  /// element rest of that row. The texel coordinates are then known once for all lanes (with P = 4 one position in
  /// the 4 planes): P texture() reads and a component select per lane instead of 4 load_ calls, each a flat index
  /// turned into a plane, a branch over the planes and texel coordinates (a weight update reading the transpose of
  /// a row-planed weight gradient: docs/perf-log/W9.md). "" when the index has another form.
  std::string planed_gather(const KExprPtr& idx, const Value& v) {
    const int P = v.planes;
    if (!textures_ || P <= 1 || v.col_planes != 1 || 4 % P != 0 || v.node->shape.size() < 2) return {};
    const int64_t C = v.node->shape.back();
    if (C % 4) return {};
    std::vector<KExprPtr> terms;
    std::function<void(const KExprPtr&)> flat = [&](const KExprPtr& x) {
      if (x->op == KOp::IAdd) flat(x->a), flat(x->b);
      else terms.push_back(x);
    };
    flat(idx);
    KExprPtr rest;
    KExprPtr row;  // the row of lane 0 (its lanes read row + d)
    for (const auto& t : terms) {
      if (lane_form(t) == LaneForm::Uniform) {  // the same in every lane (a function of the texel's block or none)
        rest = rest ? kibin(KOp::IAdd, rest, t) : t;
        made_.push_back(rest);
        continue;
      }
      const KExprPtr* x = t->op != KOp::IMul ? nullptr : kis_int(t->a, C) ? &t->b : kis_int(t->b, C) ? &t->a : nullptr;
      // the vectorised variable, or (jam mode) a function of it whose lanes are consecutive from a multiple of 4
      // (a transposed read of a row-planed value: the batch row (elem + d) % B of a texel of elements elem + d)
      const bool is_row = x && (((*x)->op == KOp::Var && (*x)->name == vvar_) ||
                                (lane_stride(*x) == std::optional<int64_t>(1) && lane_form(*x) == LaneForm::InBlock &&
                                 aligned_lane0(*x)));
      if (!is_row || row) return {};
      row = *x;
    }
    if (!row) return {};
    if (!rest) rest = kint(0);
    const Range rr = range(rest);
    if (!rr.ok || rr.lo < 0 || rr.hi >= C) return {};
    const Value& plane0 = v;  // every plane has v.layout
    // First every lane group's texel position (lanes g * P .. g * P + P - 1 share plane row base / P + g), then
    // the reads: a group whose position has no closed form gives up before anything is emitted (P < 4 has groups)
    struct Group {
      std::string column, row, component, first_row;
    };
    std::vector<Group> groups;
    for (int g = 0; g < 4 / P; ++g) {
      KExprPtr prow = kibin(KOp::IDiv, row, kint(P));
      if (g) prow = kibin(KOp::IAdd, prow, kint(g));
      KExprPtr pidx = kibin(KOp::IAdd, kibin(KOp::IMul, prow, kint(C)), rest);
      made_.push_back(prow), made_.push_back(pidx);
      auto saved = subst_;  // the lane-0 value of the variable (as emit_lane)
      subst_[vvar_] = vbase_;
      auto [c, r] = texel_coords(pidx, plane0, /*in_plane=*/true);
      if (c) {
        const bool var_row = row->op == KOp::Var;  // (else the kernel IR's text of the row: a comment's)
        const std::string first = var_row ? (g ? fmt::format("{} + {}", vbase_, g * P) : vbase_)
                                          : (g ? fmt::format("{} + {}", kexpr_str(row), g * P) : kexpr_str(row));
        groups.push_back({coord(c), coord(r), coord(canon(kibin(KOp::IMod, rest, kint(4)))), first});
      }
      subst_ = saved;
      if (!c) return {};
    }
    std::vector<std::string> lanes(4);
    for (int g = 0; g < 4 / P; ++g) {
      const Group& gr = groups[static_cast<size_t>(g)];
      std::string uv;  // the texel centre, one for the planes
      for (int p = 0; p < P; ++p) {
        const std::string plane = fmt::format("{}_p{}", v.name, p);
        const std::string key = plane + "|" + gr.column + "," + gr.row;
        std::string var;
        for (auto it = texels_.rbegin(); it != texels_.rend() && var.empty(); ++it)
          if (auto f = it->find(key); f != it->end()) var = f->second;
        if (var.empty()) {
          if (uv.empty()) {
            uv = fmt::format("uv{}", temp_++);
            line(fmt::format("vec2 {} = (vec2(ivec2({}, {})) + 0.5) * uv_texel_{}_p0;  // rows {}..+{} of {}: one "
                             "texel position in its {} planes", uv, gr.column, gr.row, v.name, gr.first_row, P - 1,
                             v.name, P));
          }
          var = fmt::format("tx{}", temp_++);
          line(fmt::format("vec4 {} = texture(in_{}, {});", var, plane, uv));
          texels_.back()[key] = var;
        }
        lanes[static_cast<size_t>(g * P + p)] = fmt::format("sg_component({}, {})", var, gr.component);
      }
    }
    uv_inputs_.insert(v.name + "_p0");
    return fmt::format("vec4({}, {}, {}, {})", lanes[0], lanes[1], lanes[2], lanes[3]);
  }

  std::string subst_signature() const {
    std::string s;
    for (auto& [var, value] : subst_) s += var + "=" + value + ";";
    return s;
  }
  /// Integer arithmetic and comparisons over variables and constants only, with at least one division, modulo,
  /// min or max inside: the index math worth computing once per loop instead of once per iteration (CPU
  /// rasterisers' shader compilers do not move it out of loops: docs/perf-log/W1.md and W5.md).
  bool pure_index_math(const KExprPtr& e, bool& costly) {
    switch (e->op) {
      case KOp::IntConst:
      case KOp::Var: return true;
      case KOp::IDiv:
      case KOp::IMod:
      case KOp::IMin:
      case KOp::IMax: costly = true; [[fallthrough]];
      case KOp::IAdd:
      case KOp::ISub:
      case KOp::IMul:
      case KOp::ILt:
      case KOp::ILe:
      case KOp::IEq:
      case KOp::IGe:
      case KOp::IAnd: return pure_index_math(e->a, costly) && pure_index_math(e->b, costly);
      default: return false;
    }
  }
  /// The outermost open loop that integer expression `e` can be hoisted out of (loops_.size() when none: `e` is
  /// trivial, not pure index math, or reads the innermost loop's variable).
  size_t hoist_level(const KExprPtr& e) {
    if (loops_.empty() || e->type != KType::Int || e->op == KOp::IntConst || e->op == KOp::Var) return loops_.size();
    auto memo = index_math_.find(e.get());
    if (memo == index_math_.end()) {
      bool costly = false;
      const bool pure = pure_index_math(e, costly);
      memo = index_math_.emplace(e.get(), pure && costly).first;
      if (pure && !costly) cheap_index_math_.insert(e.get());
    }
    if (!memo->second && !((force_hoist_ || hoist_index_math_) && cheap_index_math_.count(e.get()))) return loops_.size();
    const auto& fv = free_vars(e);
    size_t level = 0;
    for (size_t i = 0; i < loops_.size(); ++i)
      if (fv.count(loops_[i].var)) level = i + 1;
    return level;
  }
  /// Prints loop-invariant `e` once, into the preheader of open loop `level` (hiding the scopes inside that loop
  /// while doing so; its own subexpressions may go further out), and returns the local holding it.
  Code hoist(const KExprPtr& e, size_t level) {
    const size_t keep = loops_[level].scope + 1;
    auto cut = [keep](auto& v) {
      std::remove_reference_t<decltype(v)> tail(std::make_move_iterator(v.begin() + static_cast<std::ptrdiff_t>(keep)),
                                                std::make_move_iterator(v.end()));
      v.resize(keep);
      return tail;
    };
    auto inner_scopes = cut(scopes_);
    auto inner_texels = cut(texels_);
    auto inner_lanes = cut(lane_scopes_);
    std::vector<OpenLoop> inner(std::make_move_iterator(loops_.begin() + static_cast<std::ptrdiff_t>(level)),
                                std::make_move_iterator(loops_.end()));
    loops_.resize(level);
    std::swap(body_, inner.front().pre);
    const int saved_indent = indent_;
    indent_ = inner.front().indent;
    Code c = emit_raw(e);
    // equal text in one preheader is one value (distinct nodes of equal trees: the texel coordinates of the taps)
    std::string& slot = inner.front().pre_names[fmt::format("{} = {}", type_name(e, c.vec), c.s)];
    if (slot.empty()) {
      slot = fmt::format("{}{}", is_bool(e) ? "c" : "j", temp_++);
      line(fmt::format("{} {} = {};", type_name(e, c.vec), slot, c.s));
    }
    const std::string name = slot;
    indent_ = saved_indent;
    std::swap(body_, inner.front().pre);
    loops_.insert(loops_.end(), std::make_move_iterator(inner.begin()), std::make_move_iterator(inner.end()));
    auto put_back = [](auto& v, auto& tail) { v.insert(v.end(), std::make_move_iterator(tail.begin()), std::make_move_iterator(tail.end())); };
    put_back(scopes_, inner_scopes);
    put_back(texels_, inner_texels);
    put_back(lane_scopes_, inner_lanes);
    const Code named{name, c.vec};
    if (!subst_.empty() && !vvar_.empty() && varies(e)) lane_scopes_[keep - 1][{e.get(), subst_signature()}] = named;
    else scopes_[keep - 1][e.get()] = named;
    return named;
  }

  /// Integer variables `e` reads that it does not bind itself (kernel_analysis.h, memoised).
  const std::set<std::string>& free_vars(const KExprPtr& e) { return free_vars_(e); }
  KFreeVars free_vars_;

  void count_refs(const KExprPtr& e) {
    if (!e) return;
    if (refs_[e.get()]++ > 0) return;
    count_refs(e->a), count_refs(e->b), count_refs(e->c);
  }

  bool varies(const KExprPtr& e) {
    if (!e || vvar_.empty()) return false;
    auto it = varies_.find(e.get());
    if (it != varies_.end()) return it->second;
    bool v = (e->op == KOp::Var && e->name == vvar_) || varies(e->a) || varies(e->b) || varies(e->c);
    varies_[e.get()] = v;
    return v;
  }

  struct Lin {
    bool ok = false;
    int64_t coeff = 0;     // of the vectorised variable
    bool aligned = false;  // the rest is a multiple of 4
  };
  Lin linear(const KExprPtr& e) {
    if (!varies(e)) return {true, 0, e->op == KOp::IntConst && e->ivalue % 4 == 0};
    switch (e->op) {
      case KOp::Var: return {true, 1, true};
      case KOp::IAdd:
      case KOp::ISub: {
        Lin a = linear(e->a), b = linear(e->b);
        if (!a.ok || !b.ok) return {};
        return {true, e->op == KOp::IAdd ? a.coeff + b.coeff : a.coeff - b.coeff, a.aligned && b.aligned};
      }
      case KOp::IMul: {
        const KExprPtr& k = e->a->op == KOp::IntConst ? e->a : e->b;
        const KExprPtr& x = e->a->op == KOp::IntConst ? e->b : e->a;
        if (k->op != KOp::IntConst) return {};
        Lin a = linear(x);
        if (!a.ok) return {};
        return {true, a.coeff * k->ivalue, a.aligned || k->ivalue % 4 == 0};
      }
      default: return {};
    }
  }
  // Lin for terms that do not vary: aligned only if provably a multiple of 4
  Lin linear_rest(const KExprPtr& e) {
    if (varies(e)) return linear(e);
    switch (e->op) {
      case KOp::IntConst: return {true, 0, e->ivalue % 4 == 0};
      case KOp::IAdd:
      case KOp::ISub: {
        Lin a = linear_rest(e->a), b = linear_rest(e->b);
        return {a.ok && b.ok, 0, a.aligned && b.aligned};
      }
      case KOp::IMul: {
        Lin a = linear_rest(e->a), b = linear_rest(e->b);
        bool k4 = (e->a->op == KOp::IntConst && e->a->ivalue % 4 == 0) ||
                  (e->b->op == KOp::IntConst && e->b->ivalue % 4 == 0);
        return {true, 0, k4 || a.aligned || b.aligned};
      }
      default: return {true, 0, false};
    }
  }
  Lin analyse_index(const KExprPtr& e) {
    // split into varying part (linear) and invariant part (alignment)
    if (!varies(e)) return {true, 0, false};
    if (e->op == KOp::Var) return {true, 1, true};
    if (e->op == KOp::IAdd || e->op == KOp::ISub) {
      Lin a = analyse_index(e->a), b = analyse_index(e->b);
      if (!varies(e->a)) a = linear_rest(e->a);
      if (!varies(e->b)) b = linear_rest(e->b);
      if (!a.ok || !b.ok) return {};
      return {true, e->op == KOp::IAdd ? a.coeff + b.coeff : a.coeff - b.coeff, a.aligned && b.aligned};
    }
    if (e->op == KOp::IMul) {
      const KExprPtr& k = e->a->op == KOp::IntConst ? e->a : e->b;
      const KExprPtr& x = e->a->op == KOp::IntConst ? e->b : e->a;
      if (k->op != KOp::IntConst) return {};
      Lin a = analyse_index(x);
      if (!a.ok) return {};
      return {true, a.coeff * k->ivalue, a.aligned || k->ivalue % 4 == 0};
    }
    return {};
  }

  bool find_unit_load(const KExprPtr& root) {
    std::set<const KExpr*> seen;  // each node once (a visited node found nothing)
    std::function<bool(const KExprPtr&)> go = [&](const KExprPtr& e) -> bool {
      if (!e || !seen.insert(e.get()).second) return false;
      if (e->op == KOp::Load && varies(e->a)) {
        Lin l = analyse_index(e->a);
        if (l.ok && l.coeff == 1 && l.aligned) return true;
      }
      return go(e->a) || go(e->b) || go(e->c);
    };
    return go(root);
  }

  static bool is_bool(const KExprPtr& e) {
    switch (e->op) {
      case KOp::ILt:
      case KOp::ILe:
      case KOp::IEq:
      case KOp::IGe:
      case KOp::IAnd: return true;
      default: return false;
    }
  }
  static std::string type_name(const KExprPtr& e, bool vec) {
    if (is_bool(e)) return vec ? "bvec4" : "bool";
    if (e->type == KType::Int) return vec ? "ivec4" : "int";
    return vec ? "vec4" : "float";
  }
  static std::string fvec(const Code& c) { return c.vec ? c.s : fmt::format("vec4({})", c.s); }
  static std::string ivec(const Code& c) { return c.vec ? c.s : fmt::format("ivec4({})", c.s); }

  /// Emits `e` as scalar code with the vectorised variable replaced by base + lane.
  std::string emit_lane(const KExprPtr& e, int lane) {
    auto saved = subst_;
    subst_[vvar_] = lane ? fmt::format("({} + {})", vbase_, lane) : vbase_;
    std::string saved_var = vvar_;
    Code c = emit(e);
    subst_ = saved;
    vvar_ = saved_var;
    return c.s;
  }

  Code emit_raw(const KExprPtr& e) {
    auto E = [&](const KExprPtr& x) { return emit(x); };
    auto S = [](std::string s) { return Code{std::move(s), false}; };
    switch (e->op) {
      case KOp::IntConst: return S(std::to_string(e->ivalue));
      case KOp::FloatConst: return S(flit(e->fvalue));
      case KOp::Var: {
        auto it = subst_.find(e->name);
        if (it != subst_.end()) return S(it->second);
        if (e->name == vvar_) return {fmt::format("(ivec4({}) + ivec4(0, 1, 2, 3))", vbase_), true};
        return S(e->name);
      }
      default: break;
    }
    if (e->op == KOp::Load) return emit_load(e);
    if (e->op == KOp::FMath) return emit_math(e);
    if (e->op == KOp::Reduce) return emit_reduce(e);
    if (e->op == KOp::RandomUniform) {  // vectorised: the ivec4 overload (4 elements at once)
      const Code index = E(e->a), step = E(e->b);
      const bool v = index.vec || step.vec;
      return {random_uniform_call(e->seed, e->stream, v ? ivec(index) : index.s, v ? ivec(step) : step.s, helpers_), v};
    }
    Code a = E(e->a);
    Code b = e->b ? E(e->b) : Code{};
    bool v = a.vec || b.vec;
    auto bin = [&](const char* op) {
      return Code{fmt::format("({} {} {})", a.s, op, b.s), v};
    };
    auto cmp = [&](const char* op, const char* fn) {
      if (!v) return bin(op);
      return Code{fmt::format("{}({}, {})", fn, ivec(a), ivec(b)), true};
    };
    switch (e->op) {
      case KOp::IAdd: return bin("+");
      case KOp::ISub: return bin("-");
      case KOp::IMul: return bin("*");
      case KOp::IDiv:
      case KOp::IMod: {
        // a power of two dividing a non-negative value: a shift or a mask (CPU rasterisers divide lane by lane)
        const bool pow2 = textures_ && e->b->op == KOp::IntConst && power_of_two(e->b->ivalue);
        if (pow2 && range(e->a).ok && range(e->a).lo >= 0)
          return e->op == KOp::IDiv ? Code{fmt::format("({} >> {})", a.s, log2i(e->b->ivalue)), v}
                                    : Code{fmt::format("({} & {})", a.s, e->b->ivalue - 1), v};
        return bin(e->op == KOp::IDiv ? "/" : "%");
      }
      case KOp::IMin: return {fmt::format("min({}, {})", v ? ivec(a) : a.s, v ? ivec(b) : b.s), v};
      case KOp::IMax: return {fmt::format("max({}, {})", v ? ivec(a) : a.s, v ? ivec(b) : b.s), v};
      case KOp::ILt: return cmp("<", "lessThan");
      case KOp::ILe: return cmp("<=", "lessThanEqual");
      case KOp::IEq: return cmp("==", "equal");
      case KOp::IGe: return cmp(">=", "greaterThanEqual");
      case KOp::IAnd:
        if (!v) return bin("&&");
        return {fmt::format("notEqual(ivec4({}) * ivec4({}), ivec4(0))", a.s, b.s), true};
      case KOp::ToFloat: return {fmt::format("{}({})", a.vec ? "vec4" : "float", a.s), a.vec};
      case KOp::FToInt: return {fmt::format("{}({})", a.vec ? "ivec4" : "int", a.s), a.vec};
      case KOp::ISelect: {
        // scalar: only the chosen branch is evaluated; vector: both, then a per-lane select
        Code t = E(e->b), f = E(e->c);
        if (!(a.vec || t.vec || f.vec)) return S(fmt::format("({} ? {} : {})", a.s, t.s, f.s));
        std::string cond = a.vec ? a.s : fmt::format("bvec4({})", a.s);
        return {fmt::format("mix({}, {}, {})", fvec(f), fvec(t), cond), true};
      }
      default: break;
    }
    return S("0.0");
  }

  /// Splits an index into (base, constant offset) over its top-level additions.
  static std::pair<KExprPtr, int64_t> split_offset(const KExprPtr& e) {
    if (e->op == KOp::IntConst) return {nullptr, e->ivalue};
    if (e->op == KOp::IAdd) {
      auto [ba, oa] = split_offset(e->a);
      auto [bb, ob] = split_offset(e->b);
      KExprPtr base = !ba ? bb : !bb ? ba : kibin(KOp::IAdd, ba, bb);
      return {base, oa + ob};
    }
    return {e, 0};
  }
  /// split_offset for the shared taps: also through a - constant and constant * constant (an unrolled tap's
  /// kw * dilation); the nodes it builds are kept alive (made_).
  std::pair<KExprPtr, int64_t> split_offset_taps(const KExprPtr& e) {
    if (e->op == KOp::IntConst) return {nullptr, e->ivalue};
    if (e->op == KOp::IMul && e->a->op == KOp::IntConst && e->b->op == KOp::IntConst) return {nullptr, e->a->ivalue * e->b->ivalue};
    if (e->op == KOp::IDiv && e->b->op == KOp::IntConst && e->b->ivalue == 1) return split_offset_taps(e->a);
    if (e->op == KOp::IMul && (e->a->op == KOp::IntConst || e->b->op == KOp::IntConst)) {  // (x + o) * k = x * k + o * k
      const KExprPtr& x = e->a->op == KOp::IntConst ? e->b : e->a;
      const int64_t k = e->a->op == KOp::IntConst ? e->a->ivalue : e->b->ivalue;
      auto [bx, ox] = split_offset_taps(x);
      if (!bx) return {nullptr, ox * k};
      if (ox == 0) return {e, 0};
      KExprPtr base = k == 1 ? bx : kibin(KOp::IMul, bx, kint(k));
      made_.push_back(base);
      return {base, ox * k};
    }
    if (e->op == KOp::IAdd || (e->op == KOp::ISub && split_offset_taps(e->b).first == nullptr)) {
      auto [ba, oa] = split_offset_taps(e->a);
      auto [bb, ob] = split_offset_taps(e->b);
      if (e->op == KOp::ISub) return {ba, oa - ob};
      KExprPtr base = !ba ? bb : !bb ? ba : kibin(KOp::IAdd, ba, bb);
      if (ba && bb) made_.push_back(base);
      return {base, oa + ob};
    }
    return {e, 0};
  }
  /// aligned() of lane 0: the vectorised variable is its base, a multiple of 4 under set_aligned_base; also
  /// through x / 1 and x % m (m a multiple of 4).
  bool aligned_lane0(const KExprPtr& e) const {
    if (!e) return true;
    switch (e->op) {
      case KOp::Var: return e->name == vvar_ ? (base_aligned_ || vreduce_aligned_) && subst_.count(e->name) == 0 : aligned(e);
      case KOp::IAdd:
      case KOp::ISub: return aligned_lane0(e->a) && aligned_lane0(e->b);
      case KOp::IMul:
        return (e->a->op == KOp::IntConst && e->a->ivalue % 4 == 0) || (e->b->op == KOp::IntConst && e->b->ivalue % 4 == 0) ||
               aligned_lane0(e->a) || aligned_lane0(e->b);
      case KOp::IDiv: return e->b->op == KOp::IntConst && e->b->ivalue == 1 && aligned_lane0(e->a);
      case KOp::IMod: return e->b->op == KOp::IntConst && e->b->ivalue % 4 == 0 && aligned_lane0(e->a);
      default: return aligned(e);
    }
  }
  /// The texel of lane-0 index `tb` (a multiple of 4) of input `name`, fetched once per scope (texel cache).
  std::string shared_texel(const KExprPtr& tb, const std::string& name, const Value& v) {
    auto saved = subst_;
    subst_[vvar_] = vbase_;
    const std::string key = name + "|" + kexpr_str(tb) + "|" + subst_signature();
    std::string var;
    for (auto it = texels_.rbegin(); it != texels_.rend() && var.empty(); ++it)
      if (auto f = it->find(key); f != it->end()) var = f->second;
    if (var.empty()) {
      std::string fetch = texel_fetch(tb, v);
      if (fetch.empty()) {  // past either end: the lanes it feeds are discarded by the caller's select
        texel_loads_.insert(name);
        fetch = fmt::format("load4_{}(min({}, {}))", name, emit(tb).s, 4 * (v.layout.texels - 1));
      }
      var = fmt::format("tx{}", temp_++);
      line(fmt::format("vec4 {} = {};", var, fetch));
      texels_.back()[key] = var;
    }
    subst_ = saved;
    return var;
  }
  /// 4 consecutive elements from lane-0 index base + off (base a multiple of 4): the one or two texels holding
  /// them (shared_texel), their components picked at compile time; "" when the index has no such form.
  std::string shared_unaligned(const KExprPtr& idx, const std::string& name, const Value& v) {
    if (!base_aligned_) return {};
    // named copies, not a structured binding: clang 14 (the sanitizer build) cannot capture bindings in a lambda
    const auto split = split_offset_taps(idx);
    const KExprPtr base = split.first;
    const int64_t off = split.second;
    if (!base || !aligned_lane0(base)) return {};
    const int64_t q = off >= 0 ? off / 4 : -((-off + 3) / 4), s = off - 4 * q;
    auto at = [&](int64_t t) {
      if (t == 0) return base;
      KExprPtr x = t < 0 ? kibin(KOp::ISub, base, kint(-4 * t)) : kibin(KOp::IAdd, base, kint(4 * t));
      made_.push_back(x);
      return x;
    };
    const std::string lo = shared_texel(at(q), name, v);
    if (s == 0) return lo;
    const std::string hi = shared_texel(at(q + 1), name, v);
    static const char* const kLo[] = {"", "yzw", "zw", "w"};
    static const char* const kHi[] = {"", "x", "xy", "xyz"};
    return fmt::format("vec4({}.{}, {}.{})", lo, kLo[s], hi, kHi[s]);
  }

  /// 4 elements at lane-0 index base + off and stride `stride` across the lanes (base a multiple of 4, off and
  /// stride constants; lane d reads base + off + stride * d: rows of a [B, 10] value read down a column by the
  /// texel's 4 batch rows): the texels holding them (shared_texel, shared by the loads at nearby offsets), their
  /// components picked at compile time; "" when the index has no such form.
  std::string shared_strided(const KExprPtr& idx, int64_t stride, const std::string& name, const Value& v) {
    if (!base_aligned_) return {};
    const auto split = split_offset_taps(idx);  // (named copies: see shared_unaligned)
    const KExprPtr base = split.first;
    const int64_t off = split.second;
    if (!base || !aligned_lane0(base)) return {};
    std::string lanes;
    for (int64_t d = 0; d < 4; ++d) {
      const int64_t o = off + stride * d;
      const int64_t q = o >= 0 ? o / 4 : -((-o + 3) / 4);
      KExprPtr at = base;
      if (q != 0) {
        at = q < 0 ? kibin(KOp::ISub, base, kint(-4 * q)) : kibin(KOp::IAdd, base, kint(4 * q));
        made_.push_back(at);
      }
      lanes += fmt::format("{}{}.{}", d ? ", " : "", shared_texel(at, name, v), "xyzw"[o - 4 * q]);
    }
    return "vec4(" + lanes + ")";
  }

  /// The terms of the sum `e` (through + and -), each with its sign (true: subtracted).
  static void sum_terms(const KExprPtr& e, bool neg, std::vector<std::pair<KExprPtr, bool>>& out) {
    if (e->op == KOp::IAdd || e->op == KOp::ISub) {
      sum_terms(e->a, neg, out);
      sum_terms(e->b, e->op == KOp::ISub ? !neg : neg, out);
      return;
    }
    out.emplace_back(e, neg);
  }
  /// True when integer `e` reads no open loop's variable and is the same in every lane (loop-invariant).
  bool loop_invariant(const KExprPtr& e) {
    if (varies(e)) return false;
    const auto& fv = free_vars(e);
    return std::none_of(loops_.begin(), loops_.end(), [&](const OpenLoop& l) { return fv.count(l.var) > 0; });
  }
  /// Inside loops: 4 consecutive elements from lane-0 index base + off, base a multiple of 4 and off a
  /// loop-invariant value not known at compile time (a conv weight gradient's tap shift kw - padding, a function
  /// of the output element): the two texels at base + 4 floor(off / 4) and 4 past it (through the texel cache),
  /// their components picked by selects on off mod 4, which (with the texel shift) is computed once before the
  /// loops instead of per fetch as load4u_ does (docs/perf-log/W12d.md); "" when the index has no such form.
  std::string invariant_unaligned(const KExprPtr& idx, const std::string& name, const Value& v) {
    if (loops_.empty()) return {};
    const std::string key = "unaligned|" + name + "|" + kexpr_str(idx) + "|" + subst_signature();
    for (auto it = texels_.rbegin(); it != texels_.rend(); ++it)
      if (auto f = it->find(key); f != it->end()) return f->second;
    std::vector<std::pair<KExprPtr, bool>> terms;
    sum_terms(idx, false, terms);
    KExprPtr base, off;
    bool dynamic = false;
    auto add = [&](KExprPtr acc, const KExprPtr& t, bool neg) {
      KExprPtr x = !acc ? (neg ? kibin(KOp::ISub, kint(0), t) : t) : kibin(neg ? KOp::ISub : KOp::IAdd, acc, t);
      made_.push_back(x);
      return x;
    };
    for (const auto& term : terms) {
      if (term.first->op == KOp::IntConst) {
        off = add(off, term.first, term.second);
      } else if (aligned_lane0(term.first)) {
        base = add(base, term.first, term.second);
      } else if (loop_invariant(term.first)) {
        off = add(off, term.first, term.second);
        dynamic = true;
      } else {
        return {};
      }
    }
    if (!dynamic || !base) return {};
    const std::string var = shifted_window(base, off, 0, name, v);
    if (!var.empty()) texels_.back()[key] = var;
    return var;
  }
  /// The 4 elements base + c4 + off .. + 3 (base a multiple of 4, c4 a constant multiple of 4, off a loop-invariant
  /// value with known range): the two texels at base + 4 floor(off / 4) + c4 and 4 past it (texel cache: windows
  /// at c4 and c4 + 4 share one), their components picked by selects on off mod 4, computed once before the loops;
  /// "" when off's range is unknown.
  std::string shifted_window(const KExprPtr& base, const KExprPtr& off, int64_t c4, const std::string& name, const Value& v) {
    const Range ro = range(off);
    if (!ro.ok) return {};
    // off + K >= 0 (K a multiple of 4), so that / 4 and % 4 are a floor shift and a mask
    const int64_t K = ro.lo < 0 ? (-ro.lo + 3) / 4 * 4 : 0;
    KExprPtr offk = K ? kibin(KOp::IAdd, off, kint(K)) : off;
    KExprPtr shift = kibin(KOp::ISub, kibin(KOp::IMul, kibin(KOp::IDiv, offk, kint(4)), kint(4)), kint(K));
    KExprPtr sub = kibin(KOp::IMod, offk, kint(4));
    KExprPtr at = kibin(KOp::IAdd, base, shift);
    KExprPtr lo_at = c4 ? kibin(KOp::IAdd, at, kint(c4)) : at, hi_at = kibin(KOp::IAdd, at, kint(c4 + 4));
    KExprPtr s1 = kibin(KOp::IEq, sub, kint(1)), s2 = kibin(KOp::IGe, sub, kint(2)), s3 = kibin(KOp::IEq, sub, kint(3));
    for (const KExprPtr& x : {offk, shift, sub, at, lo_at, hi_at, s1, s2, s3}) made_.push_back(x);
    const std::string lo = shared_texel(lo_at, name, v), hi = shared_texel(hi_at, name, v);
    const bool saved = force_hoist_;
    force_hoist_ = true;  // the selects' conditions: once, before the loops
    const std::string c1 = emit(s1).s, c2 = emit(s2).s, c3 = emit(s3).s;
    force_hoist_ = saved;
    const std::string var = fmt::format("tx{}", temp_++);
    line(fmt::format("vec4 {0} = mix(mix({1}, vec4({1}.yzw, {2}.x), bvec4({3})), mix(vec4({1}.zw, {2}.xy), vec4({1}.w, "
                     "{2}.xyz), bvec4({5})), bvec4({4}));  // 4 elements from {1}[s], s = the shift mod 4",
                     var, lo, hi, c1, c2, c3));
    return var;
  }
  /// Inside loops, a scalar load at base + off + c (base a multiple of 4, off a loop-invariant value not known at
  /// compile time, c a constant: a conv input gradient's weights w[co, ci, kh, kw] at co * 72 + ci * 9 + kh * 3 + kw
  /// with ci the output's channel): component c % 4 of the window of 4 elements from base + c - c % 4 + off
  /// (shifted_window), which the loads at nearby c share, instead of a fetch and a runtime component select per
  /// load; "" when the index has no such form.
  std::string invariant_scalar(const KExprPtr& idx, const std::string& name, const Value& v) {
    if (loops_.empty()) return {};
    // shared_texel prints its index for lane 0: a gathered lane d > 0 whose index depends on the lane cannot use it
    if (const auto lane = subst_.find(vvar_); varies(idx) && (lane == subst_.end() || lane->second != vbase_)) return {};
    const auto split = split_offset_taps(idx);  // constants out of (x + o) * k first (named copies: shared_unaligned)
    if (!split.first) return {};
    std::vector<std::pair<KExprPtr, bool>> terms;
    sum_terms(split.first, false, terms);
    KExprPtr base, off;
    int64_t c = split.second;
    auto add = [&](KExprPtr acc, const KExprPtr& t, bool neg) {
      KExprPtr x = !acc ? (neg ? kibin(KOp::ISub, kint(0), t) : t) : kibin(neg ? KOp::ISub : KOp::IAdd, acc, t);
      made_.push_back(x);
      return x;
    };
    for (const auto& term : terms) {
      const auto& fv = free_vars(term.first);
      if (term.first->op == KOp::IntConst) {
        c += term.second ? -term.first->ivalue : term.first->ivalue;
      } else if (aligned(term.first)) {
        base = add(base, term.first, term.second);
      } else if (std::none_of(loops_.begin(), loops_.end(), [&](const OpenLoop& l) { return fv.count(l.var) > 0; })) {
        off = add(off, term.first, term.second);
      } else {
        return {};
      }
    }
    if (!off || !base) return {};
    const int64_t comp = ((c % 4) + 4) % 4;
    const std::string key = "window|" + name + "|" + kexpr_str(base) + "|" + kexpr_str(off) + "|" +
                            std::to_string(c - comp) + "|" + subst_signature();
    std::string var;
    for (auto it = texels_.rbegin(); it != texels_.rend() && var.empty(); ++it)
      if (auto f = it->find(key); f != it->end()) var = f->second;
    if (var.empty()) {
      var = shifted_window(base, off, c - comp, name, v);
      if (var.empty()) return {};
      texels_.back()[key] = var;
    }
    return fmt::format("{}.{}", var, "xyzw"[comp]);
  }

  /// True when the (scalar) value of `e` is provably a multiple of 4.
  bool aligned(const KExprPtr& e) const {
    if (!e) return true;
    switch (e->op) {
      case KOp::IntConst: return e->ivalue % 4 == 0;
      case KOp::Var: return subst_.count(e->name) == 0 && e->name != vvar_ && aligned_vars_.count(e->name) > 0;
      case KOp::IAdd:
      case KOp::ISub: return aligned(e->a) && aligned(e->b);
      case KOp::IMul:
        return (e->a->op == KOp::IntConst && e->a->ivalue % 4 == 0) || (e->b->op == KOp::IntConst && e->b->ivalue % 4 == 0) ||
               aligned(e->a) || aligned(e->b);
      default: return false;
    }
  }
  /// A scalar load. When the index is (multiple of 4) + constant, the texel is fetched once per scope and
  /// shared by the loads of its 4 elements (an unrolled loop reads v, v+1, v+2, v+3 from one texel; an unrolled
  /// conv's weights (ci + d) * 9 + kh * 3 + kw read 36 elements from 9 texels).
  Code scalar_load(const KExprPtr& e, const std::string& name) {
    // named copies, not a structured binding: clang 14 (the sanitizer build) cannot capture bindings in a lambda
    const auto split = split_offset_taps(e->a);
    const KExprPtr base = split.first;
    const int64_t off = split.second;
    if (base && aligned(base)) {
      int64_t comp = ((off % 4) + 4) % 4;
      KExprPtr tb = off - comp == 0 ? base : kibin(KOp::IAdd, base, kint(off - comp));
      made_.push_back(tb);  // kept alive: the printer's memos are keyed by node address
      // keyed by the index's tree (and the lane substitution in effect), not its printed form: the row-plane copies
      // of a matmul build equal indices as distinct nodes, printed differently (j5 vs (4 * i0)), yet one texel
      const std::string key = name + "|" + kexpr_str(tb) + "|" + subst_signature();
      for (auto it = texels_.rbegin(); it != texels_.rend(); ++it)
        if (auto f = it->find(key); f != it->end()) return {fmt::format("{}[{}]", f->second, comp), false};
      std::string fetch = texel_fetch(tb, plan_.values[k_.inputs[e->input]]);
      if (fetch.empty()) {
        texel_loads_.insert(name);
        fetch = fmt::format("load4_{}({})", name, emit(tb).s);
      }
      std::string var = fmt::format("tx{}", temp_++);
      line(fmt::format("vec4 {} = {};", var, fetch));
      texels_.back()[key] = var;
      return {fmt::format("{}[{}]", var, comp), false};
    }
    if (textures_ && windowed_scalars_ && plan_.values[k_.inputs[e->input]].planes == 1)
      if (std::string t = invariant_scalar(e->a, name, plan_.values[k_.inputs[e->input]]); !t.empty()) return {t, false};
    return {fmt::format("load_{}({})", name, emit(e->a).s), false};
  }

  Code emit_load(const KExprPtr& e) {
    const std::string& name = plan_.values[k_.inputs[e->input]].name;
    if (!subst_.empty() || !varies(e->a)) return scalar_load(e, name);
    Lin l = analyse_index(e->a);
    if (l.ok && l.coeff == 1 && l.aligned) {
      // several fused vectorised reductions (a texel's 4 lanes in reduce mode): the texel is fetched once per
      // scope for all of them (keyed by the index's tree)
      const bool share = vreduces_.size() > 1;
      const std::string key = name + "|" + vvar_ + "|" + kexpr_str(e->a);
      if (share)
        for (auto it = texels_.rbegin(); it != texels_.rend(); ++it)
          if (auto f = it->find(key); f != it->end()) return {f->second, true};
      auto saved = subst_;  // lane 0 (as emit_lane)
      subst_[vvar_] = vbase_;
      std::string fetch = texel_fetch(e->a, plan_.values[k_.inputs[e->input]]);
      subst_ = saved;
      if (!fetch.empty() && share) {
        std::string var = fmt::format("tx{}", temp_++);
        line(fmt::format("vec4 {} = {};", var, fetch));
        texels_.back()[key] = var;
        return {var, true};
      }
      if (!fetch.empty()) return {fetch, true};
      texel_loads_.insert(name);
      return {fmt::format("load4_{}({})", name, emit_lane(e->a, 0)), true};
    }
    // the same element for all 4 lanes (e.g. a conv weight read by 4 outputs of one output row): one fetch
    if (lane_form(e->a) == LaneForm::Uniform) return {fmt::format("vec4({})", emit_lane(e, 0)), true};
    // 4 consecutive elements from an index of any alignment (a conv tap read by 4 outputs of one output row):
    // the two texels holding them instead of 4 scalar loads
    if (textures_ && plan_.values[k_.inputs[e->input]].planes == 1 && lane_stride(e->a) == std::optional<int64_t>(1)) {
      if (std::string t = shared_unaligned(e->a, name, plan_.values[k_.inputs[e->input]]); !t.empty()) return {t, true};
      if (std::string t = invariant_unaligned(e->a, name, plan_.values[k_.inputs[e->input]]); !t.empty()) return {t, true};
      unaligned_loads_.insert(name);
      return {fmt::format("load4u_{}({})", name, emit_lane(e->a, 0)), true};
    }
    if (const auto stride = lane_stride(e->a); textures_ && plan_.values[k_.inputs[e->input]].planes == 1 && stride)
      if (std::string t = shared_strided(e->a, *stride, name, plan_.values[k_.inputs[e->input]]); !t.empty()) return {t, true};
    if (std::string pg = planed_gather(e->a, plan_.values[k_.inputs[e->input]]); !pg.empty()) return {pg, true};
    std::string g = "vec4(";
    for (int lane = 0; lane < 4; ++lane) g += fmt::format("{}{}", lane ? ", " : "", emit_lane(e, lane));
    return {g + ")", true};
  }

  /// What an integer expression is across the 4 lanes of the vectorised variable (whose lane values are
  /// base + 0..3 with base a multiple of 4): the same value in every lane, values inside one aligned block of 4
  /// (base + lane, clamped or not), or anything else.
  enum class LaneForm { Uniform, InBlock, Other };
  LaneForm lane_form(const KExprPtr& e) {
    if (!varies(e)) return LaneForm::Uniform;
    // (every value involved is non-negative: the variable's base, and the bounds and divisors, which must be
    // constants; C-style division of negative values would not keep a block's quotient)
    auto multiple_of_4 = [](const KExprPtr& x) { return x->op == KOp::IntConst && x->ivalue % 4 == 0 && x->ivalue > 0; };
    auto bound = [](const KExprPtr& x) { return x->op == KOp::IntConst && x->ivalue >= 0; };
    if (e->op == KOp::Var) return LaneForm::InBlock;  // varies: the vectorised variable itself
    if (e->op < KOp::IAdd || e->op > KOp::IMax || !e->b) return LaneForm::Other;
    const LaneForm a = lane_form(e->a), b = lane_form(e->b);
    if (a == LaneForm::Uniform && b == LaneForm::Uniform) return LaneForm::Uniform;
    switch (e->op) {
      case KOp::IMin:
      case KOp::IMax:  // clamping values of one block to a constant bound keeps them in one block
        if ((a == LaneForm::InBlock && bound(e->b)) || (b == LaneForm::InBlock && bound(e->a))) return LaneForm::InBlock;
        return LaneForm::Other;
      case KOp::IDiv:  // values of one aligned block of 4 divided by a multiple of 4: one quotient
        return a == LaneForm::InBlock && multiple_of_4(e->b) ? LaneForm::Uniform : LaneForm::Other;
      case KOp::IMod:
        return a == LaneForm::InBlock && multiple_of_4(e->b) ? LaneForm::InBlock : LaneForm::Other;
      default: return LaneForm::Other;
    }
  }

  Code emit_math(const KExprPtr& e) {
    Code A = emit(e->a);
    Code B = e->b ? emit(e->b) : Code{};
    Code C = e->c ? emit(e->c) : Code{};
    bool v = A.vec || B.vec || C.vec;
    std::string a = A.s, b = B.s;
    auto R = [&](std::string s) { return Code{std::move(s), v}; };
    auto both = [&]() {  // helpers of two operands have (float, float) and (vec4, vec4) overloads
      return R(v ? glsl_math(e->sop, fvec(A), fvec(B), "", helpers_) : glsl_math(e->sop, a, b, "", helpers_));
    };
    auto cmp = [&](const char* op, const char* fn) {
      return R(v ? fmt::format("vec4({}({}, {}))", fn, fvec(A), fvec(B)) : fmt::format("float({} {} {})", a, op, b));
    };
    switch (e->sop) {  // the vec4 forms; every other op's GLSL function takes scalars and vec4s alike
      case SOp::Pow:
      case SOp::Max:
      case SOp::Min: return both();
      case SOp::Lt: return cmp("<", "lessThan");
      case SOp::Le: return cmp("<=", "lessThanEqual");
      case SOp::Gt: return cmp(">", "greaterThan");
      case SOp::Ge: return cmp(">=", "greaterThanEqual");
      case SOp::Eq: return cmp("==", "equal");
      case SOp::Ne: return cmp("!=", "notEqual");
      case SOp::Select:
        if (v) return R(fmt::format("mix({}, {}, notEqual({}, vec4(0.0)))", fvec(C), fvec(B), fvec(A)));
        break;
      default: break;
    }
    return R(glsl_math(e->sop, a, b, C.s, helpers_));
  }

  Code emit_reduce(const KExprPtr& e) {
    auto g = fused_.find(e.get());
    if (g == fused_.end()) return emit_reduces({e}).front();
    // one loop nest for the whole group of sibling reductions; every member's result is known from here on
    std::vector<KExprPtr> members = g->second;
    std::vector<Code> codes = emit_reduces(members);
    Code mine;
    for (size_t i = 0; i < members.size(); ++i) {
      scopes_.back()[members[i].get()] = codes[i];
      fused_.erase(members[i].get());
      if (members[i].get() == e.get()) mine = codes[i];
    }
    return mine;
  }

  /// Emits reductions that share one loop nest (same loop variables and extents; one member unless sibling
  /// loops are fused) as one set of loops with one accumulator each; returns each member's result.
  std::vector<Code> emit_reduces(const std::vector<KExprPtr>& rs) {
    const KExprPtr& e0 = rs.front();
    const bool vreduce = std::all_of(rs.begin(), rs.end(), [&](const KExprPtr& r) { return vreduces_.count(r.get()) > 0; });
    const bool unrolled = step4_.count(e0.get()) > 0;
    std::string saved_var = vvar_, saved_base = vbase_;
    const bool saved_vreduce_aligned = vreduce_aligned_;
    // a vectorised loop of one step (4 iterations) is no loop: its variable's lanes are 0..3, so what depends on
    // it alone (reduce mode's padding masks) is loop-invariant to the loops around it
    const bool one_step = vreduce && e0->extents.back() == 4;
    if (vreduce) set_vector_var(e0->loop_vars.back(), one_step ? "0" : e0->loop_vars.back());
    if (vreduce) vreduce_aligned_ = true;
    // loop-invariant reductions inside the bodies (e.g. a softmax's sum of exps read in a loss loop) are computed
    // once, before the loop, instead of once per iteration
    std::vector<KExprPtr> invariant;
    for (auto& e : rs)
      kloop_invariant_reductions(e->a, std::set<std::string>(e->loop_vars.begin(), e->loop_vars.end()), free_vars_,
                                 invariant);
    for (auto& r : invariant) {
      Code c = emit(r);
      scopes_.back()[r.get()] = c;
    }
    std::string loops;
    for (size_t i = 0; i < e0->loop_vars.size(); ++i)
      loops += fmt::format("{}{}<{}", i ? ", " : "", e0->loop_vars[i], e0->extents[i]);
    struct Acc {
      int id;
      std::string name, ty;
      bool v;  // lane mode: per-lane accumulators
    };
    std::vector<Acc> accs;
    for (auto& e : rs) {
      Acc a;
      a.id = temp_++;
      a.name = fmt::format("acc{}", a.id);
      a.v = !vreduce && varies(e->a);
      a.ty = a.v || vreduce ? "vec4" : "float";
      accs.push_back(a);
    }
    std::string what;
    for (size_t i = 0; i < rs.size(); ++i) what += fmt::format("{}{}", i ? ", " : "", reduce_name(rs[i]->reduce));
    line(fmt::format("// {} over {}{}{}", what, loops,
                     vreduce ? " (4 at a time)"
                     : unrolled ? (vvar_ == "elem" ? " (unrolled by 4)" : " (unrolled by 4: one texel serves 4 iterations)")
                                : "",
                     rs.size() > 1 ? fmt::format(" -- {} reductions in one loop (register tile: loads shared)", rs.size())
                                   : std::string()));
    for (size_t i = 0; i < rs.size(); ++i) {
      const Acc& a = accs[i];
      ReduceKind k = rs[i]->reduce;
      std::string init = k == ReduceKind::Sum ? "0.0" : k == ReduceKind::Min ? flit(INFINITY) : flit(-INFINITY);
      if (k == ReduceKind::ArgMax) {
        line(fmt::format("{0} {1} = {0}(0.0);", a.ty, a.name));
        line(fmt::format("{0} best{1} = {0}({2});", a.ty, a.id, flit(-INFINITY)));
        line(fmt::format("int it{} = 0;", a.id));
      } else {
        line(fmt::format("{0} {1} = {0}({2});", a.ty, a.name, init));
      }
    }
    // one scope per loop, so that loop-invariant index math (hoist) can be printed in the preheader of the
    // outermost loop it does not depend on
    const size_t nest = e0->loop_vars.size(), nloops = nest - (one_step ? 1 : 0);
    std::vector<std::pair<std::string, std::optional<Range>>> saved_ranges;
    for (size_t i = 0; i < nest; ++i) {
      bool step4 = (vreduce || unrolled) && i + 1 == nest;
      if (i >= nloops) {  // the one-step vectorised loop: a scope, no `for`
        push_var_range(e0->loop_vars[i], {true, 0, e0->extents[i] - 1}, saved_ranges);
        scopes_.emplace_back();
        texels_.emplace_back();
        lane_scopes_.emplace_back();
        continue;
      }
      if (unrolled && step4) aligned_vars_.insert(e0->loop_vars[i]);
      // an unrolled loop's variable steps by 4 up to extent - 4; a vectorised one's lanes reach extent - 1
      push_var_range(e0->loop_vars[i], {true, 0, e0->extents[i] - (unrolled && step4 && !vreduce ? 4 : 1)}, saved_ranges);
      loops_.push_back({e0->loop_vars[i], body_.size(), indent_, scopes_.size() - 1, {}});
      line(fmt::format("for (int {0} = 0; {0} < {1}; {0} += {2}) {{", e0->loop_vars[i], e0->extents[i], step4 ? 4 : 1));
      ++indent_;
      scopes_.emplace_back();
      texels_.emplace_back();
      lane_scopes_.emplace_back();
    }
    for (size_t i = 0; i < rs.size(); ++i) {
      const Acc& a = accs[i];
      Code body = emit(rs[i]->a);
      std::string x = (a.v || vreduce) ? fvec(body) : body.s;
      switch (rs[i]->reduce) {
        case ReduceKind::Sum: line(fmt::format("{} += {};", a.name, x)); break;
        case ReduceKind::Max:
        case ReduceKind::Min:
          line(fmt::format("{} = {};", a.name, glsl_reduce_step(rs[i]->reduce == ReduceKind::Max, a.name, x, helpers_)));
          break;
        case ReduceKind::ArgMax:
          line(fmt::format("{} x{} = {};", a.ty, a.id, x));
          if (a.v) {
            line(fmt::format("bvec4 better{0} = bvec4(ivec4({1}) + ivec4(it{0} == 0));", a.id,
                             glsl_argmax_better(fmt::format("x{}", a.id), fmt::format("best{}", a.id), helpers_)));
            line(fmt::format("best{0} = mix(best{0}, x{0}, better{0}); {1} = mix({1}, vec4(float(it{0})), better{0});",
                             a.id, a.name));
          } else {
            line(fmt::format("if (it{0} == 0 || {2}) {{ best{0} = x{0}; {1} = float(it{0}); }}", a.id, a.name,
                             glsl_argmax_better(fmt::format("x{}", a.id), fmt::format("best{}", a.id), helpers_)));
          }
          line(fmt::format("++it{};", a.id));
          break;
      }
    }
    if (unrolled) aligned_vars_.erase(e0->loop_vars.back());
    pop_var_ranges(saved_ranges);
    for (size_t i = 0; i < nest; ++i) {
      scopes_.pop_back();
      texels_.pop_back();
      lane_scopes_.pop_back();
      if (i < nest - nloops) continue;  // the one-step loop printed no `for`
      --indent_;
      line("}");
    }
    vreduce_aligned_ = saved_vreduce_aligned;
    // the preheaders, innermost first (an insertion leaves the offsets of the loops around it valid)
    for (size_t i = 0; i < nloops; ++i) {
      OpenLoop l = std::move(loops_.back());
      loops_.pop_back();
      if (!l.pre.empty())
        body_.insert(l.at, fmt::format("{}// loop-invariant index math of the loop over {}, computed once\n{}",
                                       std::string(l.indent * 2, ' '), l.var, l.pre));
    }
    std::vector<Code> out;
    if (vreduce) {
      vvar_ = saved_var;
      vbase_ = saved_base;
      varies_.clear();
      for (auto& a : accs) out.push_back({fmt::format("dot({}, vec4(1.0))", a.name), false});
      return out;
    }
    for (auto& a : accs) out.push_back({a.name, a.v});
    return out;
  }

 public:
  /// Sibling loop fusion: top-level reductions of `roots` (not inside another loop) with the same loop variables,
  /// extents and unrolling, none containing another, are emitted as one loop nest with one accumulator each.
  /// A kernel computing several rows of a matmul per fragment (row planes) then loads each texel of the shared
  /// operand once per loop step for all rows: a register tile.
  void fuse_sibling_loops(const std::vector<KExprPtr>& roots) {
    std::vector<KExprPtr> tops;
    std::set<const KExpr*> seen;
    std::function<void(const KExprPtr&)> walk = [&](const KExprPtr& e) {
      if (!e || !seen.insert(e.get()).second) return;
      if (e->op == KOp::Reduce) {
        tops.push_back(e);
        return;
      }
      walk(e->a), walk(e->b), walk(e->c);
    };
    for (auto& r : roots) walk(r);
    auto contains = [](const KExprPtr& hay, const KExpr* needle) {
      std::set<const KExpr*> vis;
      std::function<bool(const KExprPtr&)> f = [&](const KExprPtr& x) -> bool {
        if (!x || !vis.insert(x.get()).second) return false;
        return x.get() == needle || f(x->a) || f(x->b) || f(x->c);
      };
      return f(hay->a);
    };
    std::vector<bool> used(tops.size(), false);
    for (size_t i = 0; i < tops.size(); ++i) {
      if (used[i]) continue;
      std::vector<KExprPtr> group{tops[i]};
      for (size_t j = i + 1; j < tops.size(); ++j) {
        if (used[j] || tops[j]->loop_vars != tops[i]->loop_vars || tops[j]->extents != tops[i]->extents ||
            step4_.count(tops[j].get()) != step4_.count(tops[i].get()) ||
            vreduces_.count(tops[j].get()) != vreduces_.count(tops[i].get()))
          continue;
        bool independent = true;
        for (auto& m : group) independent = independent && !contains(m, tops[j].get()) && !contains(tops[j], m.get());
        if (!independent) continue;
        group.push_back(tops[j]);
        used[j] = true;
      }
      if (group.size() > 1)
        for (auto& m : group) fused_[m.get()] = group;
    }
  }

 private:
  std::unordered_map<const KExpr*, std::vector<KExprPtr>> fused_;
};

/// Tile mode rewrite: every top-level unrollable sum reduction's innermost loop sums 4 iterations per step
/// (v, v+1, v+2, v+3; the emitter steps v by 4). Shared subtrees stay shared across `roots`. The rewritten
/// reductions are added to `unrolled`.
std::vector<KExprPtr> unroll_reductions(const std::vector<KExprPtr>& roots, std::set<const KExpr*>& unrolled);

/// `text` with two more spaces at the start of every line.
std::string indent2(const std::string& text);

}  // namespace sg::glsl
