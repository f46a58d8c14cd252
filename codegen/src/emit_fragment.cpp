// The fragment-stage emitter: kernel IR -> Vulkan-flavoured GLSL 4.50 fragment shader (glslang's input; SPIRV-Cross
// makes the GLSL ES 3.00 the GLES backend runs). Storage: RGBA32F textures (sg/texture_layout.h); each fragment
// renders one texel, i.e. 4 consecutive elements, of every render target; inputs are samplers read with texelFetch, or
// with texture() at texel centres where the texel coordinates come straight from the index (NEAREST textures).
#include "emit_stages.h"

#include "emit_common.h"
#include "glsl_expr.h"

namespace sg {

namespace {

using glsl::BlockSource;
using glsl::ExprEmitter;
using glsl::indent2;
using glsl::unroll_reductions;

/// How one domain block is vectorised, and the kernel IR (rewritten for the mode) with its printer.
struct BlockMode {
  Kernel k;
  std::unique_ptr<ExprEmitter> em;
  std::set<const KExpr*> unrolled;
  bool tile = false, lane = false, jam = false;
  bool lanes4 = false;  // reduce mode with the texel's 4 lanes as 4 fused loop nests (exprs: lane-major copies)
};

/// `most_copies`: the most body copies of one sum (9 for a 3x3 conv's taps), if more than it was.
/// Jam mode: a sum whose innermost loops are short (2 to 4 iterations each, not a multiple of 4 unrollable by 4: a
/// conv's kernel width, then its kernel height; a sum of one loop up to kMaxTapCopies long: an MLP's contraction
/// over its 10 classes) loses them, innermost first while the body's copies stay within kMaxTapCopies, its body
/// written once per iteration with the loop variables constants (strided reads of the lanes then share texels:
/// ExprEmitter::shared_strided). A
/// conv's taps along a row then read the lanes' elements at constant offsets from one aligned base, which the
/// printer fetches as the few texels they span, shared by the taps (3 texels for a 3-wide kernel instead of 2 per
/// tap: docs/perf-log/W8.md); with the kernel height gone too, the remaining input-channel loop can be
/// unrolled by 4 (unroll_reductions), and the weights of 4 channels' 3x3 taps are 36 consecutive elements from an
/// aligned base: 9 texel fetches with components picked at compile time, shared by the taps, instead of one
/// fetch and a runtime component select per tap (docs/perf-log/W15.md).
std::vector<KExprPtr> unroll_taps(const std::vector<KExprPtr>& roots, int64_t& most_copies) {
  constexpr int64_t kMaxTapCopies = 16;
  auto short_loop = [](const KExprPtr& r, int64_t copies) {
    const int64_t k = r->extents.back();
    // a sum with one loop only: any length up to kMaxTapCopies (a contraction over 10 classes), the sum then gone
    const int64_t most = r->loop_vars.size() == 1 ? kMaxTapCopies : 4;
    return r->op == KOp::Reduce && r->reduce == ReduceKind::Sum && k >= 2 && k <= most &&
           copies * k <= kMaxTapCopies && !kunrollable_sum(r) && !kcontains_reduce(r->a);
  };
  return krewrite(roots, [&](const KExprPtr& e) -> KExprPtr {
    if (e->op != KOp::Reduce) return nullptr;
    KExprPtr r = e;
    for (int64_t copies = 1; r->op == KOp::Reduce && short_loop(r, copies);) {
      const std::string v = r->loop_vars.back();
      const int64_t k = r->extents.back();
      copies *= k;
      KExprPtr body;
      for (int64_t d = 0; d < k; ++d) {
        KExprPtr t = ksubstitute(r->a, {{v, kint(d)}});
        body = body ? kmath(SOp::Add, body, t) : t;
      }
      std::vector<std::string> vars(r->loop_vars.begin(), r->loop_vars.end() - 1);
      std::vector<int64_t> ext(r->extents.begin(), r->extents.end() - 1);
      r = vars.empty() ? body : kreduce(ReduceKind::Sum, vars, ext, body);
      most_copies = std::max(most_copies, copies);
    }
    return r;
  });
}

/// Reduce mode: a sum whose innermost loop has 8 to 16 iterations (a multiple of 4: a conv weight gradient's output
/// row) keeps 4 of them, its body written once per block of 4 with the loop variable + 4 d. The vectorised loop is
/// then one step, no loop at all (ExprEmitter), and its padding masks and tap shifts are computed once before the
/// loops around it (docs/perf-log/W12d.md).
std::vector<KExprPtr> fold_vector_loops(const std::vector<KExprPtr>& roots) {
  return krewrite(roots, [&](const KExprPtr& e) -> KExprPtr {
    if (e->op != KOp::Reduce) return nullptr;
    const int64_t k = e->extents.back();
    if (e->reduce != ReduceKind::Sum || k % 4 != 0 || k < 8 || k > 16 || kcontains_reduce(e->a)) return e;
    const std::string v = e->loop_vars.back();
    KExprPtr body;
    for (int64_t d = 0; d < k; d += 4) {
      KExprPtr t = d == 0 ? e->a : ksubstitute(e->a, {{v, kibin(KOp::IAdd, kvar(v), kint(d))}});
      body = body ? kmath(SOp::Add, body, t) : t;
    }
    std::vector<int64_t> ext = e->extents;
    ext.back() = 4;
    return kreduce(ReduceKind::Sum, e->loop_vars, ext, body);
  });
}

/// Reduce mode's lanes (choose_mode): the kernel's expressions once per lane l of the texel, lane-major, with the
/// output coordinates i0.. of element elem + l (elem = texel * 4), clamped to the last element where the texel may
/// run past the end (those lanes are zeroed on output). A coordinate whose stride is a multiple of 4 is the same in
/// the 4 lanes and is written as a function of elem alone, so that loads through it are one texel fetch for all
/// lanes (the conv weight gradient's dy row: docs/perf-log/W8.md).
std::vector<KExprPtr> lane_copies(const std::vector<KExprPtr>& exprs, const Shape& shape, int64_t n) {
  Shape st = contiguous_strides(shape);
  std::vector<KExprPtr> out;
  for (int l = 0; l < 4; ++l) {
    KExprPtr e = l == 0 ? kvar("elem") : kibin(KOp::IAdd, kvar("elem"), kint(l));
    if (n % 4 != 0 && l > 0) e = kibin(KOp::IMin, e, kint(n - 1));
    std::map<std::string, KExprPtr> subs;
    for (size_t i = 0; i < shape.size(); ++i) {
      KExprPtr base = st[i] % 4 == 0 ? kvar("elem") : e;
      KExprPtr q = st[i] == 1 ? base : kibin(KOp::IDiv, base, kint(st[i]));
      subs[fmt::format("i{}", i)] = i == 0 ? q : kibin(KOp::IMod, q, kint(shape[i]));
    }
    for (auto& x : krewrite(exprs, [&](const KExprPtr& v) -> KExprPtr {
           if (v->op != KOp::Var) return nullptr;
           auto it = subs.find(v->name);
           return it == subs.end() ? v : it->second;
         }))
      out.push_back(x);
  }
  return out;
}

/// Vectorisation, first match wins:
  //  - tile mode: the output's last axis is a multiple of 4 and a sum reduction's loop length too (matmul and
  //    friends): 4 output elements of a texel as vec4 (lanes) x 4 loop iterations per step, so each texel read
  //    along the loop serves 4 iterations and each texel read along the output row serves 4 lanes (x.W^T:
  //    5 fetches per 16 multiply-adds instead of 8);
  //  - reduce mode: a sum reduction over contiguous elements reads whole texels;
  //  - lane mode: the output's last axis is a multiple of 4 and some input is read along it: the four elements
  //    of a texel are computed together as vec4.
//  - jam mode: otherwise, when there is a reduction (see below).
BlockMode choose_mode(const Plan& plan, const Kernel& kernel, const Shape& shape, const Value& out,
                      const std::string& vector_var, const std::string& last_var) {
  BlockMode b;
  b.k = kernel;
  const int Pc = out.col_planes;
  if (!shape.empty() && shape.back() % 4 == 0) {
    for (auto& e : b.k.exprs) b.tile |= khas_unrollable_sum(e);
    if (b.tile) b.k.exprs = unroll_reductions(b.k.exprs, b.unrolled);
  }
  b.em = std::make_unique<ExprEmitter>(plan, b.k);
  b.em->set_step4_reduces(b.unrolled);
  b.lane = b.tile;
  if (!b.tile) {
    const KExpr* r = nullptr;
    for (auto& e : b.k.exprs)
      if (!r) r = b.em->pick_vector_reduce(e);
    if (r && Pc == 1) {
      // reduce mode: each lane's sum steps 4 iterations at a time; the 4 lanes' loop nests are fused into one
      // (sibling loop fusion), so a load the lanes share (same texel) is fetched once per step, not once per lane
      b.lanes4 = true;
      b.k.exprs = lane_copies(fold_vector_loops(kernel.exprs), shape, out.layout.numel);
      b.em = std::make_unique<ExprEmitter>(plan, b.k);
      const size_t nout = kernel.exprs.size();
      for (int l = 0; l < 4; ++l) {
        const KExpr* rl = nullptr;
        for (size_t j = 0; j < nout && !rl; ++j) rl = b.em->pick_vector_reduce(b.k.exprs[l * nout + j]);
        if (rl) b.em->set_vector_reduce(rl);
      }
    } else if (r) {
      b.em->set_vector_reduce(r);
    } else {
      if (!shape.empty() && shape.back() % 4 == 0)
        for (auto& e : b.k.exprs) b.lane |= b.em->has_unit_load(e, vector_var);
      if (!b.lane)
        for (auto& e : b.k.exprs) b.jam |= kcontains_reduce(e);
    }
  }
  if (b.jam) {
  // Jam mode: the texel's 4 elements (which may straddle rows) are computed together, their loops jammed into
  // one loop with a vec4 accumulator: 4 independent loads per iteration instead of 4 loops run one after the
  // other (a fragment's serial work, i.e. its latency, drops 4x; measured on the H200: bias gradients of 10
  // outputs were 512 dependent iterations per fragment). Coordinates become functions of the element index
  // `elem`, the vectorised variable; lanes past the end are clamped to the last element and zeroed on output.
  const int64_t n = out.layout.numel;
  // elem (lane 0) is a multiple of 4 below n; only a texel running past the end (n % 4 != 0) needs the clamp
  KExprPtr elemc = n % 4 == 0 ? kvar("elem") : n > 1 ? kibin(KOp::IMin, kvar("elem"), kint(n - 1)) : kint(0);
  Shape st = contiguous_strides(shape);
  std::map<std::string, KExprPtr> subs;
  for (size_t i = 0; i < shape.size(); ++i) {
    KExprPtr q = kibin(KOp::IDiv, elemc, kint(st[i]));
    subs[fmt::format("i{}", i)] = i == 0 ? q : kibin(KOp::IMod, q, kint(shape[i]));
  }
  if (Pc > 1) {
    const KExprPtr& l = subs.at(last_var);
    KExprPtr m = kibin(KOp::IMod, l, kint(4));
    subs[kColumnVar] = kibin(KOp::IAdd, kibin(KOp::IMul, kint(Pc), kibin(KOp::ISub, l, m)), m);
  }
  b.k.exprs = krewrite(b.k.exprs, [&](const KExprPtr& e) -> KExprPtr {
    if (e->op != KOp::Var) return nullptr;
    auto it = subs.find(e->name);
    return it == subs.end() ? e : it->second;
  });
  // sums are unrolled by 4 as in tile mode, here for latency: 16 independent loads in flight per step instead
  // of 4 (on the H200 a 10-output bias gradient looping 128 times took 0.118 ms, ~0.9 us per iteration)
  int64_t tap_copies = 1;
  b.k.exprs = unroll_taps(b.k.exprs, tap_copies);
  b.k.exprs = unroll_reductions(b.k.exprs, b.unrolled);
  b.em = std::make_unique<ExprEmitter>(plan, b.k);
  b.em->set_step4_reduces(b.unrolled);
  if (n % 4 == 0) b.em->set_aligned_base();
  // a conv's taps (kernel height and width gone): runs of weights at a runtime shift share texel windows
  if (tap_copies >= 4) b.em->set_windowed_scalars();
  }
  return b;
}

/// The declarations of the element coordinates i0.. (and of kColumnVar with column planes) from `elem`.
std::string coordinates(const Shape& shape, int indent, bool lane_mode, int Pc, const std::string& last_var) {
  std::string coords;
  Shape st = contiguous_strides(shape);
  for (size_t i = 0; i < shape.size(); ++i) {
    std::string q = st[i] == 1 ? "elem" : fmt::format("(elem / {})", st[i]);
    std::string v = i == 0 ? q : fmt::format("{} % {}", q, shape[i]);
    coords += fmt::format("{}int i{} = {};\n", std::string(indent * 2, ' '), i, v);
  }
  if (Pc > 1)
    coords += lane_mode ? fmt::format("{}int {} = {} * {};  // column of lane 0 in column plane 0 (+ 4 q in plane q)\n",
                                      std::string(indent * 2, ' '), kColumnVar, Pc, last_var)
                        : fmt::format("{0}int {1} = {2} * ({3} - {3} % 4) + {3} % 4;  // column in column plane 0 (+ 4 q in plane q)\n",
                                      std::string(indent * 2, ' '), kColumnVar, Pc, last_var);
  return coords;
}

/// main()'s statements of a vectorised block (lane or jam mode): one vec4 per render target.
std::string vector_main(const BlockMode& b, const Value& out, const std::vector<std::string>& onames,
                        const std::vector<ExprEmitter::Code>& values, const std::string& coords,
                        const std::string& texel_line, bool in_union) {
  const int64_t n = out.layout.numel;
  const size_t nout = onames.size();
  std::string src = texel_line;
  src += b.lane ? "  int elem = texel * 4;  // first of the 4 elements (same row: the last axis is a multiple of 4)\n"
                : "  int elem = texel * 4;  // first of the texel's 4 elements\n";
  std::string zero;
  for (size_t j = 0; j < nout; ++j) zero += fmt::format(" {} = vec4(0.0);", onames[j]);
  std::string rest = b.lane ? coords + b.em->body_ : b.em->body_;
  for (size_t j = 0; j < nout; ++j) {
    std::string v = values[j].vec ? values[j].s : fmt::format("vec4({})", values[j].s);
    if ((b.jam || b.lanes4) && n % 4 != 0)  // the last texel's lanes past the end hold 0, as after an upload
      v = fmt::format("mix(vec4(0.0), {}, lessThan(ivec4(elem) + ivec4(0, 1, 2, 3), ivec4({})))", v, n);
    rest += fmt::format("  {} = {};\n", onames[j], v);
  }
  if (!in_union) return src + fmt::format("  if (elem >= {}) {{{} return; }}\n", n, zero) + rest;
  return src + fmt::format("  if (elem >= {}) {{{} }} else {{\n", n, zero) + indent2(rest) + "  }\n";
}

/// main()'s statements of a scalar block: a loop over the texel's 4 lanes.
std::string scalar_main(const BlockMode& b, const Value& out, const std::vector<std::string>& onames,
                        const std::vector<ExprEmitter::Code>& values, const std::string& coords,
                        const std::string& texel_line) {
  const size_t nout = onames.size();
  std::string src = texel_line;
  for (size_t j = 0; j < nout; ++j) src += fmt::format("  vec4 result{} = vec4(0.0);\n", nout == 1 ? std::string() : std::to_string(j));
  src += "  for (int lane = 0; lane < 4; ++lane) {\n";
  src += "    int elem = texel * 4 + lane;\n";
  src += fmt::format("    if (elem >= {}) break;\n", out.layout.numel);
  src += coords + b.em->body_;
  for (size_t j = 0; j < nout; ++j)
    src += fmt::format("    result{}[lane] = {};\n", nout == 1 ? std::string() : std::to_string(j), values[j].s);
  src += "  }\n";
  for (size_t j = 0; j < nout; ++j) src += fmt::format("  {} = result{};\n", onames[j], nout == 1 ? std::string() : std::to_string(j));
  return src;
}

/// Emits `kernel`, whose outputs share one iteration domain (one block; exprs in the coordinates of the stored
/// shape of its first output), writing render target j to `onames[j]`. In a union-domain kernel (`in_union`) the
/// draw covers a larger extent: fragments outside the block's layout (x >= its width, or past its texels) write 0
/// and the block does not return from main().
BlockSource emit_block(const Plan& plan, const Kernel& kernel, const std::vector<std::string>& onames, bool in_union) {
  const Value& out = plan.values[kernel.output()];  // all outputs share its layout and iteration domain
  const Shape shape = out.stored_shape();
  // column planes (Value::col_planes): the expressions read column kColumnVar + 4 q (+ lane) instead of the last
  // coordinate; kColumnVar = Pc * (i_last - i_last % 4) + i_last % 4 (in lane mode i_last is a multiple of 4) is
  // then the vectorised variable
  const int Pc = out.col_planes;
  const std::string last_var = shape.empty() ? std::string() : fmt::format("i{}", shape.size() - 1);
  const std::string vector_var = Pc > 1 ? std::string(kColumnVar) : last_var;
  BlockMode b = choose_mode(plan, kernel, shape, out, vector_var, last_var);
  ExprEmitter& em = *b.em;
  const std::string coords = coordinates(shape, b.lane ? 2 : em.indent_, b.lane, Pc, last_var);
  // inputs are textures: texel coordinates straight from the index where the ranges of the coordinates prove it
  em.set_texture_addressing(true);
  for (size_t i = 0; i < shape.size(); ++i) em.set_var_range(fmt::format("i{}", i), 0, shape[i] - 1);
  em.set_var_range("elem", 0, 4 * out.layout.texels - 1);
  if (b.lane) {
    em.indent_ = 2;
    em.set_vector_var(vector_var, vector_var);
  } else if (b.lanes4) {
    em.indent_ = 2;
    em.set_hoist_index_math();  // padding masks and tap shifts once per fragment (Run W12d)
  } else if (b.jam) {
    em.indent_ = 2;
    em.set_vector_var("elem", "elem");
    em.set_discarded_lanes_past(out.layout.numel - 1);  // lanes past the end are zeroed on output
  }
  em.fuse_sibling_loops(b.k.exprs);
  std::vector<ExprEmitter::Code> values;
  for (auto& e : b.k.exprs) values.push_back(em.emit(e));
  if (b.lanes4) {  // lane-major copies -> one vec4 per output
    const size_t nout = b.k.exprs.size() / 4;
    std::vector<ExprEmitter::Code> v4;
    for (size_t j = 0; j < nout; ++j)
      v4.push_back({fmt::format("vec4({}, {}, {}, {})", values[j].s, values[nout + j].s, values[2 * nout + j].s,
                                values[3 * nout + j].s),
                    true});
    values = std::move(v4);
  }
  BlockSource bs;
  bs.texel_loads = em.texel_loads_;
  bs.unaligned_loads = em.unaligned_loads_;
  bs.uv_inputs = em.uv_inputs_;
  bs.helpers = em.helpers_;
  if (b.tile)
    bs.mode = "// vectorised: the 4 elements of each output texel are computed together (vec4), and loops are unrolled by 4\n";
  else if (b.lane)
    bs.mode = "// vectorised: the 4 elements of each output texel are computed together (vec4)\n";
  else if (b.lanes4)
    bs.mode = "// vectorised: each element's sum steps 4 iterations at a time (vec4), the texel's 4 elements in one loop nest (texel fetches shared)\n";
  else if (b.jam)
    bs.mode = "// vectorised: the 4 elements of each output texel are computed together, their loops jammed into one (vec4 accumulators)\n";
  // the fragment's texel of this block's layout; in a union-domain draw, columns past the layout's width are
  // sent past the end (their outputs are 0) instead of wrapping into the next row
  const std::string texel_line =
      in_union ? fmt::format("  int texel = int(gl_FragCoord.x) < {0} ? int(gl_FragCoord.y) * {0} + int(gl_FragCoord.x) : {1};\n",
                             out.layout.width, out.layout.texels)
               : fmt::format("  int texel = int(gl_FragCoord.y) * {} + int(gl_FragCoord.x);\n", out.layout.width);
  bs.main = b.lane || b.jam || b.lanes4 ? vector_main(b, out, onames, values, coords, texel_line, in_union)
                            : scalar_main(b, out, onames, values, coords, texel_line);
  return bs;
}

/// Statements declaring `ivec2 xy`, the texel coordinates of texel index `t` (a non-negative int) in a texture
/// `width` texels wide. CPU rasterisers' shader compilers keep an integer division by a constant a division, done
/// lane by lane (docs/perf-log/W5.md), so neither a modulo nor a division is printed: a power-of-two width
/// takes a mask and a shift; any other width a float multiply by 1/width (the product's relative error is below
/// 3 * 2^-24, i.e. less than one row for textures under 2^22 rows high), truncated: the row or one off, corrected
/// by one step on the remainder's sign and size.
std::string texel_xy(int64_t width) {
  if (width > 0 && (width & (width - 1)) == 0) {
    int shift = 0;
    while ((int64_t{1} << shift) < width) ++shift;
    return fmt::format("  ivec2 xy = ivec2(t & {}, t >> {});\n", width - 1, shift);
  }
  return fmt::format("  int y = int(float(t) * {1});  // t / {0}, or one off\n  int x = t - y * {0};\n"
                     "  y += int(x >= {0}) - int(x < 0);\n  ivec2 xy = ivec2(t - y * {0}, y);\n",
                     width, glsl::flit(1.0 / static_cast<double>(width)));
}

/// The sampler declarations (`decls`) and load_/load4_ functions (`loads`) of kernel k's inputs; load4_ only for
/// the inputs the printer read as whole texels.
void declare_inputs(const Plan& plan, const Kernel& k, const std::set<std::string>& texel_loads,
                    const std::set<std::string>& unaligned_loads, std::string& decls, std::string& loads) {
  int binding = 0;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const Value& v = plan.values[k.inputs[i]];
    std::string desc = fmt::format("{} {}", v.name, shape_str(v.node->shape));
    if (v.planes > 1) {
      const int P = v.planes, Pc = v.col_planes, Pr = v.row_planes();
      for (int p = 0; p < P; ++p) {
        const std::string which = Pc > 1 ? fmt::format("rows {} mod {}, texels {} mod {} of each row", p / Pc, Pr, p % Pc, Pc)
                                         : fmt::format("rows {} mod {}", p, P);
        decls += fmt::format("layout(set = 0, binding = {}) uniform sampler2D in_{}_p{};  // {}: {}, texture {}x{}\n",
                             binding++, v.name, p, desc, which, v.layout.width, v.layout.height);
      }
      const std::string locate = glsl::plane_locate(v);
      std::string pick = "  int t = j >> 2;\n" + texel_xy(v.layout.width) + "  vec4 v;\n";
      for (int p = 0; p < P; ++p)
        pick += fmt::format("  {}v = texelFetch(in_{}_p{}, xy, 0);\n", p == 0 ? "if (p == 0) " : p + 1 < P ? fmt::format("else if (p == {}) ", p) : "else ", v.name, p);
      loads += fmt::format("float load_{}(int i) {{\n{}{}  return sg_component(v, i & 3);\n}}\n", v.name, locate, pick);
      if (texel_loads.count(v.name))
        loads += fmt::format("vec4 load4_{}(int i) {{  // elements i..i+3, i a multiple of 4: one texel\n{}{}  return v;\n}}\n",
                             v.name, locate, pick);
      continue;
    }
    decls += fmt::format("layout(set = 0, binding = {}) uniform sampler2D in_{};  // {}, texture {}x{}\n", binding++,
                         v.name, desc, v.layout.width, v.layout.height);
    loads += fmt::format(
        "float load_{0}(int i) {{\n  int t = max(i, 0) >> 2;\n{1}  return sg_component(texelFetch(in_{0}, xy, 0), i & 3);\n}}\n",
        v.name, texel_xy(v.layout.width));
    if (texel_loads.count(v.name) || unaligned_loads.count(v.name))
      loads += fmt::format(
          "vec4 load4_{0}(int i) {{  // elements i..i+3, i a multiple of 4: one texel\n  int t = max(i, 0) >> 2;\n"
          "{1}  return texelFetch(in_{0}, xy, 0);\n}}\n",
          v.name, texel_xy(v.layout.width));
    if (unaligned_loads.count(v.name))
      loads += fmt::format(
          "vec4 load4u_{0}(int i) {{  // elements i..i+3, any i: from the two texels holding them (past either end: "
          "elements the caller discards)\n  int t = i >> 2;\n  vec4 lo = load4_{0}(min(t, {1}) * 4);\n"
          "  vec4 hi = load4_{0}(min(t + 1, {1}) * 4);\n  return sg_unaligned(lo, hi, i & 3);\n}}\n",
          v.name, v.layout.texels - 1);
  }
}

std::string header(const Plan& plan, const Kernel& k) {
  auto storage = [](const Value& out) { return fmt::format(", RGBA32F texture {}x{}", out.layout.width, out.layout.height); };
  const std::string union_note =
      fmt::format("// union-domain kernel: {} blocks of different domains drawn over {}x{} texels; each block "
                  "computes the fragments inside its own texture layout and writes 0 elsewhere\n",
                  k.blocks(), k.extent.width, k.extent.height);
  return glsl::kernel_header(plan, k, ShaderStage::Fragment, storage, union_note);
}

}  // namespace

std::string emit_fragment(const Plan& plan, const Kernel& k) {
  const size_t nout = k.exprs.size();  // render targets: one per output, or per row plane of the output
  const int nblocks = k.blocks();      // domain blocks (union-domain kernels; they have no row planes)
  const glsl::KernelOutputs outs = glsl::kernel_outputs(plan, k);
  // one domain block at a time: a sub-kernel with the block's outputs (and all inputs, so Load slots hold)
  const auto block_outputs = glsl::block_outputs(k);
  std::vector<BlockSource> blocks;
  if (nblocks == 1) {
    blocks.push_back(emit_block(plan, k, outs.name, false));
  } else {
    for (int b = 0; b < nblocks; ++b) {
      std::vector<std::string> names;
      for (size_t j : block_outputs[b]) names.push_back(outs.name[j]);
      blocks.push_back(emit_block(plan, glsl::block_kernel(k, block_outputs[b]), names, true));
    }
  }
  std::set<std::string> texel_loads, unaligned_loads, uv_inputs;
  MathHelpers helpers;
  for (auto& b : blocks) {
    uv_inputs.insert(b.uv_inputs.begin(), b.uv_inputs.end());
    texel_loads.insert(b.texel_loads.begin(), b.texel_loads.end());
    unaligned_loads.insert(b.unaligned_loads.begin(), b.unaligned_loads.end());
    helpers |= b.helpers;
  }
  std::string src = header(plan, k);
  if (nblocks == 1) src += blocks[0].mode;
  std::string decls, loads;
  declare_inputs(plan, k, texel_loads, unaligned_loads, decls, loads);
  src += decls;
  for (size_t j = 0; j < nout; ++j)
    src += fmt::format("layout(location = {}) out vec4 {};{}\n", j, outs.name[j],
                       nout > 1 ? fmt::format("  // {}{}", outs.desc[j],
                                              nblocks > 1 ? fmt::format(", block {}", k.block_of(j)) : std::string())
                                : "");
  src += "\n";
  // a texel's component chosen by selects (docs/perf-log/7.md: NVIDIA put a dynamically indexed vec4 in
  // local memory, which serialised a bias-gradient loop)
  src += glsl::component_helper(loads);
  if (!unaligned_loads.empty())
    src += "vec4 sg_unaligned(vec4 lo, vec4 hi, int s) {  // elements s..s+3 of the 8 in lo, hi (s in 0..3): selects, no branch\n"
           "  vec4 first = mix(lo, vec4(lo.yzw, hi.x), bvec4(s == 1));\n"
           "  vec4 second = mix(vec4(lo.zw, hi.xy), vec4(lo.w, hi.xyz), bvec4(s == 3));\n"
           "  return mix(first, second, bvec4(s >= 2));\n}\n";
  src += loads;
  src += helpers.source(true);
  src += "\nvoid main() {\n";
  for (const auto& name : uv_inputs)
    src += fmt::format("  vec2 uv_texel_{0} = 1.0 / vec2(textureSize(in_{0}, 0));  // one texel of in_{0} in texture "
                       "coordinates (texture() reads texel centres)\n", name);
  if (nblocks == 1) {
    src += blocks[0].main;
  } else {
    for (int b = 0; b < nblocks; ++b) {
      const Value& first = plan.values[k.outputs[block_outputs[b].front()]];
      std::string names;
      for (size_t j : block_outputs[b]) names += (names.empty() ? "" : ", ") + plan.values[k.outputs[j]].name;
      src += fmt::format("  // block {}: {} over {} ({} elements, texture {}x{})\n", b, names,
                         shape_str(first.stored_shape()), first.layout.numel, first.layout.width, first.layout.height);
      src += "  {\n" + indent2(indent2(blocks[b].mode) + blocks[b].main) + "  }\n";
    }
  }
  src += "}\n";
  return src;
}

}  // namespace sg
