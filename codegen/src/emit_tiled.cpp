// Workgroup-cooperative compute kernels: tiled contractions and tree reductions (see emit_compute.cpp).
//
// Tiled contraction (a Contraction of contraction.h, viewed as C[batch][M][N] = sum_k A[m][k] B[k][n]), for a
// TileConfig t (sg/compute_kernel.h; tile_config.cpp picks the heuristic one and the autotuner's candidates):
//   a workgroup of TX x TY invocations computes a BM x BN tile of C (BM = TY * TM, BN = TX * TN) of batch
//   the workgroup id's z. The tile's origin is row-major in a 2-D grid, or (group_m > 1) from a 1-D grid walked in groups
//   of group_m tile rows, column by column within a group, for L2 reuse. Per chunk of BK values of k it stages
//   A[m0 .. m0+BM)[k0 .. k0+BK) and B[..][..] into shared memory (factor_a/factor_b evaluate the factors, prologues
//   included, at one (m, k); 0 outside the ranges), a barrier, then each invocation accumulates its TM x TN register
//   tile, a barrier. Register rows are ty + i*TY (scalar tiles: the shared reads of B are consecutive across
//   invocations, those of A broadcast), or with vec4 groups of 4 adjacent rows 4*(ty + g*TY) + c read as one vec4
//   (the tile is then a vec4 array). With prefetch the next chunk's factors are loaded into registers before the
//   inner product and stored after the second barrier (register double buffering). store_tile applies the kernel's
//   epilogue (bias, relu, optimizer math of every output) to each accumulator and stores it guarded. With k_rotate
//   the chunks of tile row r start at chunk r mod (K / BK) and wrap around.
//   Staging is unrolled (each invocation stages a fixed number of elements at coordinates computed once), so an
//   invocation runs about K * (1 + 1/BK) loop iterations (Mesa's gallivm stops loops after 65535 per invocation).
//   Both languages print this one kernel through the Lang of compute_lang.h. WGSL (W3C WGSL, uniformity analysis):
//   every barrier sits in the uniform control flow of main (loops of constant trip count; staging guarded per
//   element with `if`, never the barrier), the tiles are fixed-size `var<workgroup>` arrays (of vec4<f32> when vec4)
//   indexed by i32 expressions, a guarded staging load is an `if` (GLSL's `g ? load : 0.0`: WGSL's select would
//   evaluate the load everywhere). The tile config must fit the device's workgroup memory, invocations and grid;
//   otherwise the kernel is per-element, its header saying which limit.
// Tree reduction (<= 1024 outputs of a reduction at least as long; on GPUs also <= 8192 outputs of >= 512
//   iterations): one workgroup per output element; invocation t sums (max/min) the body over k = t, t + NT, ...;
//   a tree in shared memory halves the partial results; invocation 0 applies the epilogue and stores every output.
//   On GPUs the kernel's other top-level reductions of the same kind (not nested, up to 32 in all) are folded in
//   the same loop into accumulators of their own (fold1, fold2, ...): one strided loop over their iteration spaces end
//   to end, each position folded into its reduction's accumulator, reduced by the same tree (a clipped step's global
//   norm: one sum of squares per parameter), and with many elements of short reductions a workgroup takes E
//   adjacent elements x NT / E slices (k = slice, slice + NT / E, ...), slice 0 storing (adjacent invocations read
//   adjacent elements' operands).
// Subgroup rows (GLSL with subgroup arithmetic on GPUs; WGSL and GLES keep one invocation per element): a kernel of
//   fewer elements than 256 per compute unit whose reductions reach 32 iterations (LayerNorm's row mean and variance,
//   its backward's three dependent row sums: rows of 64 read 256 bytes apart by adjacent invocations) runs one subgroup
//   per element: each reduction outside the others loops over its flat iteration space strided by the lanes (adjacent
//   lanes read adjacent floats) and is combined by subgroupAdd / subgroupMax / subgroupMin (NaN by subgroupAny), which
//   leaves the result in every lane, so reductions depending on it and the maps run in every lane; the first lane
//   stores. Elements are walked by a loop over the dispatch's subgroups, so any subgroup size covers them. Not where
//   a reduction's body reads adjacent floats for adjacent elements and far apart for adjacent iterations (a column
//   sum: coalesced one invocation per element).
#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "compute_emit.h"
#include "compute_glsl.h"
#include "contraction.h"
#include "sg/error.h"

namespace sg::compute {

std::string split_dims(const Shape& shape, const std::vector<int>& dims, const std::string& flat, const char* prefix,
                       int indent, const Lang& lang) {
  std::string s;
  int64_t stride = 1;
  std::vector<int64_t> strides(dims.size());
  for (size_t i = dims.size(); i-- > 0;) strides[i] = stride, stride *= shape[dims[i]];
  for (size_t i = 0; i < dims.size(); ++i) {
    std::string q = strides[i] == 1 ? flat : lang.div_const(flat, strides[i]);
    if (i > 0) q = lang.mod_const(q, shape[dims[i]]);
    s += std::string(indent * 2, ' ') + lang.let(LType::Int, fmt::format("{}{}", prefix, dims[i]), q) + "\n";
  }
  return s;
}

/// `int r0 = ...;` lines splitting flat loop index `flat` over a reduction's loop variables.
std::string split_loop(const KExprPtr& r, const std::string& flat, int indent, const Lang& lang) {
  std::string s;
  int64_t stride = 1;
  std::vector<int64_t> strides(r->extents.size());
  for (size_t i = r->extents.size(); i-- > 0;) strides[i] = stride, stride *= r->extents[i];
  for (size_t i = 0; i < r->extents.size(); ++i) {
    std::string q = strides[i] == 1 ? flat : lang.div_const(flat, strides[i]);
    if (i > 0) q = lang.mod_const(q, r->extents[i]);
    s += std::string(indent * 2, ' ') + lang.let(LType::Int, r->loop_vars[i], q) + "\n";
  }
  return s;
}

namespace {

/// The flat element index of coordinates i0.. of `shape` (row-major).
std::string flat_index(const Shape& shape) {
  const Shape st = contiguous_strides(shape);
  std::string s;
  for (size_t d = 0; d < shape.size(); ++d)
    s += fmt::format("{}i{}{}", s.empty() ? "" : " + ", d, st[d] == 1 ? std::string() : fmt::format(" * {}", st[d]));
  return s.empty() ? "0" : s;
}

std::string dims_str(const Shape& shape, const std::vector<int>& dims) {
  std::string s;
  for (int d : dims) s += fmt::format("{}i{}<{}", s.empty() ? "" : ", ", d, shape[d]);
  return s.empty() ? "-" : s;
}

}  // namespace

std::string factor_function(const Plan& plan, const Kernel& k, const Contraction& c, const Shape& shape,
                            const KExprPtr& factor, const std::vector<int>& dims, int64_t extent, const char* name,
                            std::set<int>& loaded, MathHelpers& helpers, const Lang& lang, bool guarded,
                            bool coord_args, std::set<int>* unclamped) {
  // the factor's formula in the comment when short (kexpr_str prints the tree view: only for a small one)
  const std::string what = kcost(factor) <= 40 ? kexpr_str(factor) : std::string(101, ' ');
  const std::string formula = what.size() > 100 ? "the factor (prologue inlined)" : what;
  std::string s;
  if (coord_args) {  // the caller splits idx and k once: no division by a constant per call
    std::vector<std::pair<LType, std::string>> params;
    std::string loop_vars;
    for (int d : dims) params.emplace_back(LType::Int, fmt::format("i{}", d));
    for (const std::string& v : c.reduce->loop_vars) {
      params.emplace_back(LType::Int, v);
      loop_vars += (loop_vars.empty() ? "" : ", ") + v;
    }
    s = lang.function_open(LType::Float, name, params) +
        fmt::format("  // {} at ({}), loop variables {} (callers keep them in range)\n", formula,
                    dims_str(shape, dims), loop_vars);
  } else {
    s = lang.function_open(LType::Float, name, {{LType::Int, "idx"}, {LType::Int, "k"}}) +
        fmt::format("  // {} at idx over ({}), k over the loop{}\n", formula, dims_str(shape, dims),
                    guarded ? "" : fmt::format(" (callers keep idx < {} and k < {})", extent, c.K));
    if (guarded) s += "  " + lang.if_then(fmt::format("idx >= {} || k >= {}", extent, c.K), "return 0.0;") + "\n";
    s += split_dims(shape, dims, "idx", "i", 1, lang);
  }
  if (!c.batch_dims.empty()) s += split_dims(shape, c.batch_dims, lang.builtin(Builtin::WorkgroupId, 2), "i", 1, lang);
  if (!coord_args) s += split_loop(c.reduce, "k", 1, lang);
  KPrinter p(plan, k, {factor}, "", lang);
  p.unclamped_loads = unclamped && lang.c() && !guarded && in_range_by_construction(factor);
  const std::string v = p.print(factor);
  s += p.take_code() + fmt::format("  return {};\n}}\n", v);
  loaded.insert(p.loaded_inputs().begin(), p.loaded_inputs().end());
  if (unclamped) unclamped->insert(p.unclamped_inputs().begin(), p.unclamped_inputs().end());
  helpers |= p.helpers();
  return s;
}

std::string epilogue_function(const Plan& plan, const Kernel& k, const KExprPtr& r, const std::string& signature,
                              const std::string& guard_and_coords, const Shape& shape, std::set<int>& loaded,
                              MathHelpers& helpers, const Lang& lang) {
  std::string s = signature + "\n" + guard_and_coords;
  s += "  " + lang.let(LType::Int, "elem", flat_index(shape)) + "\n";
  KPrinter p(plan, k, k.exprs, "", lang);
  p.bind(r.get(), "acc");
  std::vector<std::string> values;
  for (auto& e : k.exprs) values.push_back(p.print(e));
  s += p.take_code();
  for (size_t j = 0; j < k.outputs.size(); ++j) s += "  " + lang.store(plan.values[k.outputs[j]].name, "elem", values[j]) + "\n";
  loaded.insert(p.loaded_inputs().begin(), p.loaded_inputs().end());
  helpers |= p.helpers();
  return s + "}\n";
}

std::string tile_functions(const Plan& plan, const Kernel& k, const Contraction& c, const Shape& shape,
                           std::set<int>& loaded, MathHelpers& helpers, const Lang& lang, bool guarded,
                           bool coord_args, std::set<int>* unclamped) {
  std::string fns = factor_function(plan, k, c, shape, c.factor_a, c.m_dims, c.M, "factor_a", loaded, helpers, lang,
                                    guarded, coord_args, unclamped);
  fns += factor_function(plan, k, c, shape, c.factor_b, c.n_dims, c.N, "factor_b", loaded, helpers, lang, guarded,
                         coord_args, unclamped);
  std::string coords = "  " + lang.if_then(fmt::format("m >= {} || n >= {}", c.M, c.N), "return;") + "\n" +
                       split_dims(shape, c.m_dims, "m", "i", 1, lang) + split_dims(shape, c.n_dims, "n", "i", 1, lang);
  if (!c.batch_dims.empty()) coords += split_dims(shape, c.batch_dims, lang.builtin(Builtin::WorkgroupId, 2), "i", 1, lang);
  fns += "// the epilogue of every output at one element of the tile, `acc` the contraction's sum there\n";
  fns += epilogue_function(plan, k, c.reduce,
                           lang.function_open(LType::Void, "store_tile", {{LType::Int, "m"}, {LType::Int, "n"}, {LType::Float, "acc"}}),
                           coords, shape, loaded, helpers, lang);
  return fns;
}

namespace {

/// One factor's tile: how it lives in shared memory, how invocations stage it and which registers read it.
struct SideTile {
  char name = 'a';        ///< 'a' (rows m, registers along ty) or 'b' (columns n, registers along tx)
  int rows = 1;           ///< the tile's extent along m (a) or n (b): BM or BN
  int regs = 1;           ///< register-tile extent: TM or TN
  int along = 1;          ///< invocations along that side: TY or TX
  bool vec = false;       ///< shared as vec4 (4 adjacent rows per vec4), read one vec4 per 4 registers
  bool k_fastest = true;  ///< staged with k fastest across invocations (the factor is contiguous along k)
  int stride = 1;         ///< floats per k row of the tile, padding included (a multiple of 4 when vec)
  std::string tile() const { return fmt::format("tile_{}", name); }
  std::string t() const { return name == 'a' ? "ty" : "tx"; }
};

/// A tile staged k-fastest is padded (one float, or one vec4 for vec tiles) per k row: consecutive invocations then
/// write different banks.
SideTile side_tile(char name, const TileConfig& t, bool k_fastest) {
  SideTile s;
  s.name = name;
  s.rows = name == 'a' ? t.bm() : t.bn();
  s.regs = name == 'a' ? t.tm : t.tn;
  s.along = name == 'a' ? t.ty : t.tx;
  s.vec = t.vec4 && s.regs % 4 == 0;
  s.k_fastest = k_fastest;
  s.stride = s.rows + (k_fastest ? (s.vec ? 4 : 1) : 0);
  return s;
}

/// The tile row (column) of register r: scalar tiles interleave invocations (t + r * along), vec tiles give each
/// invocation groups of 4 adjacent rows (4 * (t + g * along) + c for r = 4g + c).
std::string reg_offset(const SideTile& s, int r) {
  if (!s.vec) return r ? fmt::format("{} + {}", s.t(), r * s.along) : s.t();
  const int g = r / 4, c = r % 4;
  const int add = 4 * g * s.along + c;
  return add ? fmt::format("4 * {} + {}", s.t(), add) : fmt::format("4 * {}", s.t());
}

/// The register holding the factor for register-tile index r at the current kk (a0 or a1.z).
std::string reg_name(const SideTile& s, int r) {
  return s.vec ? fmt::format("{}{}.{}", s.name, r / 4, "xyzw"[r % 4]) : fmt::format("{}{}", s.name, r);
}

/// The shared reads of one k row (kk) of the tile into the side's registers.
std::string shared_reads(const SideTile& s, const Lang& lang) {
  std::string out;
  if (s.vec) {
    for (int g = 0; g < s.regs / 4; ++g)
      out += "      " +
             lang.let(LType::Vec4, fmt::format("{}{}", s.name, g),
                      fmt::format("{}[kk * {} + {}{}]", s.tile(), s.stride / 4, s.t(), g ? fmt::format(" + {}", g * s.along) : "")) +
             "\n";
    return out;
  }
  for (int r = 0; r < s.regs; ++r)
    out += "      " +
           lang.let(LType::Float, fmt::format("{}{}", s.name, r), fmt::format("{}[kk * {} + {}]", s.tile(), s.stride, reg_offset(s, r))) +
           "\n";
  return out;
}

/// Staging of one factor's BK x rows tile, unrolled: element s = tid + u * threads of the tile, (kk, row) from s in
/// the order that lets consecutive invocations read consecutive memory. The coordinates do not depend on the chunk,
/// so they are computed once (`decl`); `load(k)` evaluates the factor of chunk k into registers <n>_st<u>, `store`
/// writes those registers into the tile.
struct Staging {
  std::string decl, store;
  std::function<std::string(const std::string&)> load;
};

Staging staging(const SideTile& side, int bk, int threads, const char* base, const Lang& lang) {
  Staging st;
  const int total = side.rows * bk;
  const int per = (total + threads - 1) / threads;
  std::vector<std::pair<std::string, std::string>> regs;
  std::vector<std::string> guard(static_cast<size_t>(per));
  for (int u = 0; u < per; ++u) {
    const std::string s = u == 0 ? "tid" : fmt::format("(tid + {})", u * threads);
    const std::string kk = side.k_fastest ? fmt::format("{} % {}", s, bk) : fmt::format("{} / {}", s, side.rows);
    const std::string row = side.k_fastest ? fmt::format("{} / {}", s, bk) : fmt::format("{} % {}", s, side.rows);
    st.decl += "  " + lang.lets(LType::Int, {{fmt::format("{}_kk{}", side.name, u), kk}, {fmt::format("{}_row{}", side.name, u), row}}) + "\n";
    if ((u + 1) * threads > total) {
      guard[u] = fmt::format("{}_in{}", side.name, u);
      st.decl += "  " + lang.let(LType::Bool, guard[u], fmt::format("{} < {}", s, total)) + "\n";
    }
    regs.emplace_back(fmt::format("{}_st{}", side.name, u), "0.0");
  }
  st.decl += "  " + lang.lets(LType::Float, regs, true) + "\n";
  const char n = side.name;
  st.load = [=, &lang](const std::string& k) {
    std::string out;
    for (int u = 0; u < per; ++u) {
      const std::string call = fmt::format("factor_{0}({1} + {0}_row{2}, {3} + {0}_kk{2})", n, base, u, k);
      const std::string reg = fmt::format("{}_st{}", n, u);
      out += "    " + (guard[u].empty() ? fmt::format("{} = {};", reg, call) : lang.assign_if(guard[u], reg, call)) + "\n";
    }
    return out;
  };
  for (int u = 0; u < per; ++u) {
    const std::string at = side.vec ? fmt::format("{}[{}_kk{} * {} + {}_row{} / 4][{}_row{} % 4]", side.tile(), n, u,
                                                  side.stride / 4, n, u, n, u)
                                    : fmt::format("{}[{}_kk{} * {} + {}_row{}]", side.tile(), n, u, side.stride, n, u);
    const std::string store = fmt::format("{} = {}_st{};", at, n, u);
    st.store += "    " + (guard[u].empty() ? store : lang.if_then(guard[u], store)) + "\n";
  }
  return st;
}

/// `int m0 = ..., n0 = ...;`: the workgroup's tile origin. Row-major over a gx x gy grid, or (group_m > 1, a 1-D
/// grid of gx * gy workgroups) groups of group_m tile rows walked column by column.
std::string tile_origin(const TileConfig& t, int64_t gx, int64_t gy, const Lang& lang) {
  const std::string wx = lang.builtin(Builtin::WorkgroupId, 0), wy = lang.builtin(Builtin::WorkgroupId, 1);
  if (t.group_m <= 1)
    return "  " + lang.lets(LType::Int, {{"m0", fmt::format("{} * {}", wy, t.bm())}, {"n0", fmt::format("{} * {}", wx, t.bn())}}) + "\n";
  std::string s = fmt::format("  // tile order: groups of {} tile rows, column by column within a group (the workgroups "
                              "running at once share A's rows and B's columns in L2)\n",
                              t.group_m);
  s += "  " + lang.lets(LType::Int, {{"wg", wx}, {"in_group", fmt::format("wg % {}", t.group_m * gx)},
                                    {"first_row", fmt::format("wg / {} * {}", t.group_m * gx, t.group_m)}}) + "\n";
  s += "  " + lang.let(LType::Int, "rows_here", fmt::format("min({} - first_row, {})", gy, t.group_m)) + "\n";
  s += "  " + lang.lets(LType::Int, {{"m0", fmt::format("(first_row + in_group % rows_here) * {}", t.bm())},
                                    {"n0", fmt::format("(in_group / rows_here) * {}", t.bn())}}) + "\n";
  return s;
}

/// The chunk's inner product: for every kk, the registers' shared reads, then TM x TN FMAs.
std::string inner_product(const TileConfig& t, const SideTile& a, const SideTile& b, const Lang& lang) {
  std::string s = "    " + lang.for_open("kk", "0", std::to_string(t.bk)) + "\n";
  s += shared_reads(a, lang) + shared_reads(b, lang);
  for (int i = 0; i < t.tm; ++i) {
    s += "     ";
    for (int j = 0; j < t.tn; ++j) s += fmt::format(" acc_{}_{} += {} * {};", i, j, reg_name(a, i), reg_name(b, j));
    s += "\n";
  }
  return s + "    }\n";
}

/// The loop over K chunks: k0 in order, or (k_rotate) starting at chunk `rot` of the workgroup's tile row and
/// wrapping around. `first` / `next`: the k0 of the first chunk and of the one after the current (prefetch; past the
/// end the factors are 0 without a load, or with rotation the first chunk again, loaded and never stored).
struct ChunkLoop {
  std::string setup, header, first, next;
};

ChunkLoop chunk_loop(const TileConfig& t, int64_t K, const Lang& lang) {
  ChunkLoop l;
  const int64_t chunks = (K + t.bk - 1) / t.bk;
  if (!t.k_rotate) {
    l.header = "  " + lang.for_open("k0", "0", std::to_string(K), t.bk, true) + "\n";
    l.first = "0";
    l.next = fmt::format("k0 + {}", t.bk);
    return l;
  }
  l.setup = "  " + lang.let(LType::Int, "rot", fmt::format("(m0 / {}) % {}", t.bm(), chunks)) +
            "  // k rotation: this tile row's first chunk\n";
  l.header = "  " + lang.for_open("chunk", "0", std::to_string(chunks)) + "\n    " +
             lang.let(LType::Int, "k0", fmt::format("(chunk + rot) % {} * {}", chunks, t.bk)) + "\n";
  l.first = fmt::format("rot * {}", t.bk);
  l.next = fmt::format("(chunk + rot + 1) % {} * {}", chunks, t.bk);
  return l;
}

/// The comment lines describing the contraction and the tiling.
std::string tiling_comment(const Contraction& c, const Shape& shape, const TileConfig& t, const SideTile& a,
                           const SideTile& b, int64_t shared, int64_t gx, int64_t gy) {
  std::string loops;
  for (size_t i = 0; i < c.reduce->loop_vars.size(); ++i)
    loops += fmt::format("{}{}<{}", i ? ", " : "", c.reduce->loop_vars[i], c.reduce->extents[i]);
  std::string s = fmt::format("// contraction: C[batch][m][n] = sum_k A[m][k] * B[k][n] with m over ({}) = {}, n over ({}) "
                              "= {}, batch over ({}) = {}, k over ({}) = {}\n",
                              dims_str(shape, c.m_dims), c.M, dims_str(shape, c.n_dims), c.N,
                              dims_str(shape, c.batch_dims), c.batch, loops, c.K);
  auto regs = [](const SideTile& x) {
    return x.vec ? fmt::format("4 adjacent per vec4, groups strided by {}", 4 * x.along)
                 : fmt::format("{} + i*{}", x.t(), x.along);
  };
  s += fmt::format("// tile config {}: workgroup tile {}x{} (m x n) of {}x{} invocations, register tile {}x{} per "
                   "invocation (rows: {}; columns: {}), K chunks of {} staged in shared memory ({} bytes){}{}; grid {}x{}x{}\n",
                   t.str(), t.bm(), t.bn(), t.tx, t.ty, t.tm, t.tn, regs(a), regs(b), t.bk, shared,
                   t.prefetch ? ", the next chunk's loads issued before this chunk's FMAs" : "",
                   t.k_rotate ? ", each tile row starting at another chunk" : "", gx, gy, c.batch);
  return s;
}

}  // namespace

int64_t tile_shared_bytes(const TileConfig& t, const Contraction& c) {
  return int64_t{t.bk} * (side_tile('a', t, c.a_k_contiguous).stride + side_tile('b', t, c.b_k_contiguous).stride) * 4;
}

/// The kernel: tile origin, staging coordinates, accumulators; per chunk of k: stage (or store the prefetched
/// registers), barrier, [prefetch the next chunk], inner product, barrier; then the epilogue per accumulator.
std::optional<ComputeKernel> emit_tiled_contraction(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                    const std::optional<TileConfig>& tiles, const Lang& lang,
                                                    std::string* not_tiled) {
  const Shape shape = plan.values[k.output()].stored_shape();
  auto found = find_contraction(k, shape);
  if (!found) return std::nullopt;
  const Contraction& c = *found;
  const TileConfig t = tiles ? fit_tile_config(*tiles, limits, c) : default_tile_config(limits, c);
  const int64_t gx = (c.N + t.bn() - 1) / t.bn(), gy = (c.M + t.bm() - 1) / t.bm();
  const bool grouped = t.group_m > 1;
  auto give_up = [&](std::string why) -> std::optional<ComputeKernel> {
    if (not_tiled) *not_tiled = fmt::format("a contraction (M={}, N={}, K={}, batch {}), not tiled: {}", c.M, c.N, c.K, c.batch, why);
    return std::nullopt;
  };
  if ((grouped ? gx * gy : std::max(gx, gy)) > limits.max_workgroup_count || c.batch > limits.max_workgroup_count)
    return give_up(fmt::format("tile config {} needs a grid of {}x{}x{} workgroups, more than max_workgroup_count {}", t.str(),
                               grouped ? gx * gy : gx, grouped ? 1 : gy, c.batch, limits.max_workgroup_count));
  if (t.threads() > limits.max_workgroup_invocations)
    return give_up(fmt::format("tile config {} runs {} invocations per workgroup, more than max_workgroup_invocations {}",
                               t.str(), t.threads(), limits.max_workgroup_invocations));
  const SideTile a = side_tile('a', t, c.a_k_contiguous), b = side_tile('b', t, c.b_k_contiguous);
  ComputeKernel ck;
  ck.strategy = "tiled-contraction";
  ck.tiles = t;
  ck.local_size = {static_cast<uint32_t>(t.tx), static_cast<uint32_t>(t.ty), 1};
  ck.workgroups = {static_cast<uint32_t>(grouped ? gx * gy : gx), static_cast<uint32_t>(grouped ? 1 : gy),
                   static_cast<uint32_t>(c.batch)};
  ck.shared_bytes = tile_shared_bytes(t, c);
  if (ck.shared_bytes > limits.max_shared_bytes)
    return give_up(fmt::format("tile config {} needs {} bytes of workgroup memory, more than max_shared_bytes {}", t.str(),
                               ck.shared_bytes, limits.max_shared_bytes));
  std::set<int> loaded;
  MathHelpers helpers;
  std::string fns = tile_functions(plan, k, c, shape, loaded, helpers, lang, true);

  // main's body (the builtins it reads decide WGSL's entry-point parameters, so it is printed before the module)
  std::string body = "  " + lang.lets(LType::Int, {{"tx", lang.builtin(Builtin::LocalInvocationId, 0)},
                                                  {"ty", lang.builtin(Builtin::LocalInvocationId, 1)},
                                                  {"tid", fmt::format("ty * {} + tx", t.tx)}}) + "\n";
  body += tile_origin(t, gx, gy, lang);
  const Staging sa = staging(a, t.bk, t.threads(), "m0", lang), sb = staging(b, t.bk, t.threads(), "n0", lang);
  body += sa.decl + sb.decl;
  std::vector<std::pair<std::string, std::string>> accs;
  for (int i = 0; i < t.tm; ++i)
    for (int j = 0; j < t.tn; ++j) accs.emplace_back(fmt::format("acc_{}_{}", i, j), "0.0");
  body += "  " + lang.lets(LType::Float, accs, true) + "\n";
  const ChunkLoop loop = chunk_loop(t, c.K, lang);
  body += loop.setup;
  if (t.prefetch) body += "  // the first chunk into registers\n" + sa.load(loop.first) + sb.load(loop.first);
  body += loop.header;
  if (!t.prefetch) body += sa.load("k0") + sb.load("k0");
  body += sa.store + sb.store + "    " + lang.barrier() + "\n";
  if (t.prefetch)
    body += "    // the next chunk's loads, in flight during this chunk's FMAs\n" + sa.load(loop.next) + sb.load(loop.next);
  body += inner_product(t, a, b, lang) + "    " + lang.barrier() + "\n  }\n";
  for (int i = 0; i < t.tm; ++i)
    for (int j = 0; j < t.tn; ++j)
      body += fmt::format("  store_tile(m0 + {}, n0 + {}, acc_{}_{});\n", reg_offset(a, i), reg_offset(b, j), i, j);
  body += "}\n";

  std::string src = kernel_header(plan, k, ck.strategy, lang) + tiling_comment(c, shape, t, a, b, ck.shared_bytes, gx, gy);
  src += lang.workgroup_size_layout(t.tx, t.ty, true);
  src += buffer_declarations(plan, k, loaded, lang);
  src += lang.helpers(helpers, fns + body);
  for (const SideTile* s : {&a, &b})
    src += lang.shared_array(s->tile(), t.bk * s->stride / (s->vec ? 4 : 1),
                             fmt::format("{}[{} + {}][k0 + kk] at kk * {} + {} (floats)", s->name == 'a' ? "A" : "B^T",
                                         s->name == 'a' ? "m0" : "n0", s->name == 'a' ? "row" : "col", s->stride,
                                         s->name == 'a' ? "row" : "col"),
                             s->vec ? LType::Vec4 : LType::Float);
  src += fns;
  src += lang.entry_open(t.tx, t.ty, fns + body) + body;
  ck.source = std::move(src);
  return ck;
}

namespace {

/// The tree-reduction kernel's end after each invocation folded its strided share into `acc`: a tree of `nt` partial
/// results in shared memory halved by barriers; invocation 0 stores the element.
std::string shared_tree(int nt, int64_t n, const std::function<std::string(std::string, std::string)>& combine,
                        const Lang& lang) {
  std::string body = "  partial[tid] = acc;\n  " + lang.barrier() + "\n";
  for (int h = nt / 2; h >= 1; h /= 2) {
    body += "  " + lang.if_then(fmt::format("tid < {}", h), fmt::format("partial[tid] = {};", combine("partial[tid]", fmt::format("partial[tid + {}]", h)))) + "\n";
    body += "  " + lang.barrier() + "\n";
  }
  return body + "  " + lang.if_then(fmt::format("tid == 0 && elem < {}", n), "store_element(elem, partial[0]);") + "\n}\n";
}

/// GLSL `x = subgroupAdd(x);` (sum) or the max/min over the subgroup with torch's NaN semantics: subgroupMax/Min
/// leave NaN operands undefined (SPIR-V OpGroupNonUniformFMax), so a subgroupAny of sg_isnan decides NaN.
std::string subgroup_step(ReduceKind kind, const std::string& x, int indent) {
  const std::string pad(static_cast<size_t>(indent) * 2, ' ');
  if (kind == ReduceKind::Sum) return fmt::format("{0}{1} = subgroupAdd({1});\n", pad, x);
  const char* op = kind == ReduceKind::Max ? "subgroupMax" : "subgroupMin";
  return fmt::format("{0}{{\n{0}  bool any_nan = subgroupAny(sg_isnan({1}));  // {2} of NaN operands is undefined\n"
                     "{0}  {1} = any_nan ? uintBitsToFloat(0x7fc00000u) : {2}({1});\n{0}}}\n",
                     pad, x, op);
}

/// The tree-reduction kernel's end with GL_KHR_shader_subgroup_arithmetic (GLSL only): each subgroup reduces its
/// invocations' `acc`, its first invocation writes the result to partial[gl_SubgroupID], and after one barrier
/// subgroup 0 folds the gl_NumSubgroups results (strided by gl_SubgroupSize) and reduces them once more. Correct for
/// any subgroup size (the workgroup's invocations are all active at both subgroup operations).
std::string subgroup_tree(ReduceKind kind, int64_t n, const std::string& init,
                          const std::function<std::string(std::string, std::string)>& combine) {
  std::string body = "  // subgroup reduction, then one partial result per subgroup\n";
  body += subgroup_step(kind, "acc", 1);
  body += "  if (subgroupElect()) partial[gl_SubgroupID] = acc;\n  barrier();\n";
  body += "  if (gl_SubgroupID == 0u) {\n";
  body += fmt::format("    float total = {};\n", init);
  body += fmt::format("    for (uint s = gl_SubgroupInvocationID; s < gl_NumSubgroups; s += gl_SubgroupSize) total = {};\n",
                      combine("total", "partial[s]"));
  body += subgroup_step(kind, "total", 2);
  body += fmt::format("    if (subgroupElect() && elem < {}) store_element(elem, total);\n  }}\n}}\n", n);
  return body;
}

}  // namespace

namespace {

/// The end of a tree-reduction kernel of E elements x S slices per workgroup (E > 1) or of several reductions folded
/// side by side (acc, fold1, fold2, ...: not acc<N>, the names of the printer's own reduction locals), through shared memory: partial[j * nt + tid] holds accumulator j of invocation
/// tid = slice * E + e; the slices halve by barriers; slice 0 stores its element with every accumulator.
/// The kernel's reductions not nested in another one, each once, in expression order.
std::vector<KExprPtr> outer_reductions(const Kernel& k) {
  std::vector<KExprPtr> out;
  std::set<const KExpr*> seen;
  std::function<void(const KExprPtr&)> walk = [&](const KExprPtr& e) {
    if (!e || !seen.insert(e.get()).second) return;
    if (e->op == KOp::Reduce) return out.push_back(e);
    walk(e->a), walk(e->b), walk(e->c);
  };
  for (auto& e : k.exprs) walk(e);
  return out;
}

std::string shared_tree_multi(int nt, int E, int R, int64_t n,
                              const std::function<std::string(std::string, std::string)>& combine, const Lang& lang) {
  const int S = nt / E;
  const std::string slice = E == 1 ? "tid" : "slice";
  auto acc = [](int j) { return j == 0 ? std::string("acc") : fmt::format("fold{}", j); };
  auto slot = [&](int j, const std::string& off) {
    return fmt::format("partial[{}tid{}]", j == 0 ? std::string() : fmt::format("{} + ", j * nt), off);
  };
  std::string body;
  for (int j = 0; j < R; ++j) body += "  " + slot(j, "") + " = " + acc(j) + ";\n";
  body += "  " + lang.barrier() + "\n";
  for (int h = S / 2; h >= 1; h /= 2) {
    std::string step;
    for (int j = 0; j < R; ++j)
      step += slot(j, "") + " = " + combine(slot(j, ""), slot(j, fmt::format(" + {}", h * E))) + "; ";
    body += "  " + lang.if_then(fmt::format("{} < {}", slice, h), "{ " + step + "}") + "\n";
    body += "  " + lang.barrier() + "\n";
  }
  std::string args;
  for (int j = 0; j < R; ++j) args += ", " + slot(j, "");
  return body + "  " + lang.if_then(fmt::format("{} == 0 && elem < {}", slice, n), fmt::format("store_element(elem{});", args)) +
         "\n}\n";
}

/// The end of a tree-reduction kernel of several reductions (one element per workgroup) with subgroup arithmetic:
/// each accumulator reduced within the subgroups, the subgroups' results in partial[j * nsub + subgroup], one
/// barrier, and subgroup 0 folds and reduces each accumulator before its first invocation stores the element.
std::string subgroup_tree_multi(ReduceKind kind, int R, int nsub, int64_t n, const std::string& init,
                                const std::function<std::string(std::string, std::string)>& combine) {
  auto acc = [](int j) { return j == 0 ? std::string("acc") : fmt::format("fold{}", j); };
  auto off = [&](int j, const char* s) { return j == 0 ? std::string(s) : fmt::format("{} + {}", j * nsub, s); };
  std::string body = fmt::format("  // subgroup reductions, then one partial result per subgroup and accumulator ({} subgroups at "
                                 "most)\n", nsub);
  for (int j = 0; j < R; ++j) body += subgroup_step(kind, acc(j), 1);
  body += "  if (subgroupElect()) {\n";
  for (int j = 0; j < R; ++j) body += fmt::format("    partial[{}] = {};\n", off(j, "gl_SubgroupID"), acc(j));
  body += "  }\n  barrier();\n  if (gl_SubgroupID == 0u) {\n";
  std::string args;
  for (int j = 0; j < R; ++j) {
    const std::string t = fmt::format("total{}", j);
    body += fmt::format("    float {} = {};\n", t, init);
    body += fmt::format("    for (uint s = gl_SubgroupInvocationID; s < gl_NumSubgroups; s += gl_SubgroupSize) {} = {};\n", t,
                        combine(t, fmt::format("partial[{}]", off(j, "s"))));
    body += subgroup_step(kind, t, 2);
    args += ", " + t;
  }
  body += fmt::format("    if (subgroupElect() && elem < {}) store_element(elem{});\n  }}\n}}\n", n, args);
  return body;
}

/// The launch shape of a tree-reduction kernel: the reductions folded into its strided loop (the main one first), E
/// elements per workgroup of nt invocations (S = nt / E slices per element), shared memory for the partial results.
struct TreeShape {
  std::vector<KExprPtr> rs;  ///< the main reduction, then the folded ones (GPUs)
  int64_t n = 0;             ///< output elements
  int64_t L = 0;             ///< the main reduction's iterations per element
  int64_t work = 0;          ///< loop iterations per element over the folded reductions
  int E = 1, nt = 0;
  bool subgroups = false;
  int64_t subgroup_size = 1;
  int R() const { return static_cast<int>(rs.size()); }
  int S() const { return nt / E; }
  /// Floats of shared memory for `threads` invocations: one per invocation and accumulator (per subgroup and
  /// accumulator with subgroup arithmetic).
  int64_t shared_floats(int threads) const {
    if (R() == 1 && E == 1) return threads;
    if (subgroups) return int64_t{R()} * ((threads + subgroup_size - 1) / subgroup_size);
    return int64_t{R()} * threads;
  }
};

int64_t loop_length(const KExprPtr& x) {
  int64_t l = 1;
  for (int64_t e : x->extents) l *= e;
  return l;
}

/// Whether kernel k is a tree reduction on this device, and its launch shape (nullopt: another strategy).
std::optional<TreeShape> tree_shape(const Plan& plan, const Kernel& k, const ComputeLimits& limits, const Lang& lang) {
  TreeShape t;
  t.n = plan.values[k.output()].node->numel();
  const int64_t n = t.n;
  KExprPtr r = main_reduction(k);
  if (!r) return std::nullopt;
  const int64_t L = t.L = loop_length(r);
  // GPUs also take a few thousand outputs of a long reduction (a conv weight gradient fused with its optimizer update:
  // 1152 outputs over 1024 products), which as a tiled contraction is a handful of workgroups that each walk all of K
  // (0.071 ms of a 0.18 ms CNN step on the H200) and here one workgroup per output
  const bool many_long = !limits.cpu_device && n <= 8192 && L >= 512;
  if (L < 128 || ((n > 1024 || L < n) && !many_long)) return std::nullopt;
  // On GPUs the kernel's other top-level reductions (same kind, none nested) are folded in the same strided loop, each
  // into its own accumulator, instead of by the storing invocation alone: global-norm clipping's sum of squares adds
  // one reduction per parameter (charlm: 30, 91k products, 0.70 ms of a 2.0 ms step on an H100 by invocation 0 alone).
  // Short ones too: the loop runs over all of them end to end, so a short one costs its iterations, not a loop.
  std::vector<KExprPtr>& rs = t.rs;
  rs.push_back(r);
  if (!limits.cpu_device)
    for (const KExprPtr& x : outer_reductions(k))
      if (x != r && x->reduce == r->reduce && !kcontains_reduce(x->a) && rs.size() < 32)
        rs.push_back(x);
  for (auto& x : rs) t.work += loop_length(x);
  // On GPUs a workgroup takes E adjacent elements of S slices each (E * S invocations) when there are many elements:
  // adjacent invocations then read adjacent elements' operands (a weight gradient's rows: 8 floats of 32 bytes, one
  // memory sector, where one element per workgroup reads 4 bytes of each), and E elements share a workgroup's loads.
  // Only while an invocation's share stays short (L * E <= 16384: at most 64 iterations of 256 invocations): a conv
  // weight gradient's 50176-long sums on 8x fewer workgroups made the ResNet-8 step 3.30 -> 3.70 ms on an H100.
  int& E = t.E;
  if (!limits.cpu_device)
    while (E < 8 && n / (2 * E) >= 256 && L * 2 * E <= 16384) E *= 2;
  int& nt = t.nt;
  nt = limits.cpu_device ? 64 : 256;
  if (!limits.cpu_device && n <= 8 && t.work >= 65536) nt = 1024;  // a few elements of a long sum: more invocations
  t.subgroups = limits.subgroup_arithmetic && !lang.wgsl() && E == 1;
  t.subgroup_size = std::max(limits.subgroup_size, 1);
  while (nt > E && (nt > limits.max_workgroup_invocations || t.shared_floats(nt) * 4 > limits.max_shared_bytes)) nt /= 2;
  while (nt > E && (nt / E) * 2 > (t.R() > 1 ? t.work : L)) nt /= 2;  // (one loop over all folded reductions)
  if (nt / E < 2 || t.shared_floats(nt) * 4 > limits.max_shared_bytes) return std::nullopt;
  return t;
}

/// The reduction kind's combine step and initial value (max/min propagate NaN: glsl_math.h).
struct TreeCombine {
  ReduceKind kind;
  std::string init;
  std::function<std::string(const std::string&, const std::string&)> combine;
};

std::string tree_acc_name(size_t j) { return j == 0 ? std::string("acc") : fmt::format("fold{}", j); }
std::string tree_body_name(size_t j) { return j == 0 ? std::string("body") : fmt::format("body{}", j); }

/// The kernel's functions: one body per folded reduction at flat loop index k, and store_element (the epilogue with
/// every reduction bound to its accumulator). Records the inputs loaded and the math helpers used.
std::string tree_functions(const Plan& plan, const Kernel& k, const TreeShape& t, const Shape& shape, std::set<int>& loaded,
                           MathHelpers& helpers, const Lang& lang) {
  const std::vector<KExprPtr>& rs = t.rs;
  const KExprPtr& r = rs[0];
  const int R = t.R();
  // the bodies at flat loop index k, coordinates from the workgroup's element
  std::string fns;
  for (size_t j = 0; j < rs.size(); ++j) {
    fns += lang.function_open(LType::Float, tree_body_name(j), {{LType::Int, "elem"}, {LType::Int, "k"}}) +
           "  // the reduction's body at the element's coordinates and k\n";
    fns += coordinates(shape, "elem", 1, lang) + split_loop(rs[j], "k", 1, lang);
    KPrinter p(plan, k, {rs[j]->a}, "", lang);
    const std::string v = p.print(rs[j]->a);
    fns += p.take_code() + fmt::format("  return {};\n}}\n", v);
    loaded.insert(p.loaded_inputs().begin(), p.loaded_inputs().end());
    helpers |= p.helpers();
  }
  if (R == 1) {
    fns += epilogue_function(plan, k, r,
                             lang.function_open(LType::Void, "store_element", {{LType::Int, "element"}, {LType::Float, "acc"}}),
                             coordinates(shape, "element", 1, lang), shape, loaded, helpers, lang);
  } else {  // epilogue_function with every folded reduction bound to its accumulator
    std::vector<std::pair<LType, std::string>> params{{LType::Int, "element"}};
    for (size_t j = 0; j < rs.size(); ++j) params.emplace_back(LType::Float, tree_acc_name(j));
    fns += lang.function_open(LType::Void, "store_element", params) + "\n" + coordinates(shape, "element", 1, lang);
    fns += "  " + lang.let(LType::Int, "elem", flat_index(shape)) + "\n";
    KPrinter p(plan, k, k.exprs, "", lang);
    for (size_t j = 0; j < rs.size(); ++j) p.bind(rs[j].get(), tree_acc_name(j));
    std::vector<std::string> values;
    for (auto& e : k.exprs) values.push_back(p.print(e));
    fns += p.take_code();
    for (size_t j = 0; j < k.outputs.size(); ++j)
      fns += "  " + lang.store(plan.values[k.outputs[j]].name, "elem", values[j]) + "\n";
    fns += "}\n";
    loaded.insert(p.loaded_inputs().begin(), p.loaded_inputs().end());
    helpers |= p.helpers();
  }
  return fns;
}

/// The entry point's body: the element and slice of the invocation, the strided loops into the accumulators, then the
/// tree (shared memory or subgroups) whose last step stores the element.
std::string tree_entry_body(const TreeShape& t, const TreeCombine& c, const ComputeKernel& ck, int& nsub,
                            const Lang& lang) {
  const std::vector<KExprPtr>& rs = t.rs;
  const int E = t.E, nt = t.nt, R = t.R();
  const int64_t n = t.n;
  const bool subgroups = t.subgroups;
  const ReduceKind kind = c.kind;
  const std::string& init = c.init;
  const auto& combine = c.combine;
  const std::string wg = fmt::format("{} * {} + {}", lang.builtin(Builtin::WorkgroupId, 1), ck.workgroups[0],
                                     lang.builtin(Builtin::WorkgroupId, 0));
  const std::string tid = lang.builtin(Builtin::LocalInvocationId, 0);
  std::string body;
  if (E == 1) {
    body += "  " + lang.let(LType::Int, "elem", wg) + "\n";
    body += "  " + lang.let(LType::Int, "tid", tid) + "\n";
  } else {
    body += "  " + lang.let(LType::Int, "tid", tid) + "\n";
    body += "  " + lang.let(LType::Int, "slice", lang.div_const("tid", E)) + "\n";
    body += "  " + lang.let(LType::Int, "elem", fmt::format("({}) * {} + {}", wg, E, lang.mod_const("tid", E))) + "\n";
  }
  const int S = t.S();
  const std::string start = E == 1 ? "tid" : "slice";
  for (size_t j = 0; j < rs.size(); ++j) body += "  " + lang.var(LType::Float, tree_acc_name(j), init) + "\n";
  std::string loops;
  if (R == 1) {
    loops = lang.for_stmt("k", start, std::to_string(loop_length(rs[0])), S,
                          fmt::format("acc = {};", combine("acc", "body(elem, k)")));
  } else {
    // one strided loop over the reductions' iteration spaces end to end, each position folded into its reduction's
    // accumulator: an invocation runs about work / S iterations in all, where a loop per reduction ran at least one
    // (a memory round trip) per reduction
    std::string chain;
    int64_t off = 0;
    for (size_t j = 0; j < rs.size(); ++j) {
      const int64_t end = off + loop_length(rs[j]);
      const std::string k = off == 0 ? std::string("k") : fmt::format("k - {}", off);
      const std::string step =
          fmt::format("{0} = {1};", tree_acc_name(j), combine(tree_acc_name(j), tree_body_name(j) + "(elem, " + k + ")"));
      chain += j + 1 == rs.size() ? fmt::format("{{ {} }}", step) : fmt::format("if (k < {}) {{ {} }} else ", end, step);
      off = end;
    }
    loops = "{ " + lang.for_stmt("k", start, std::to_string(off), S, chain) + " }";
  }
  body += "  " + lang.if_then(fmt::format("elem < {}", n), loops) + "\n";
  if (R == 1 && E == 1) {
    body += subgroups ? subgroup_tree(kind, n, init, combine) : shared_tree(nt, n, combine, lang);
  } else if (subgroups) {
    nsub = static_cast<int>(t.shared_floats(nt) / R);
    body += subgroup_tree_multi(kind, R, nsub, n, init, combine);
  } else {
    body += shared_tree_multi(nt, E, R, n, combine, lang);
  }
  return body;
}

}  // namespace

namespace {

/// An integer index expression's value with variables from `env` (absent ones 0), or nullopt where it reads data.
std::optional<int64_t> index_value(const KExprPtr& e, const std::map<std::string, int64_t>& env) {
  if (!e) return std::nullopt;
  switch (e->op) {
    case KOp::IntConst: return e->ivalue;
    case KOp::Var: {
      auto it = env.find(e->name);
      return it == env.end() ? 0 : it->second;
    }
    case KOp::ISelect: {
      if (e->type != KType::Int) return std::nullopt;
      auto c = index_value(e->a, env);
      if (!c) return std::nullopt;
      return index_value(*c ? e->b : e->c, env);
    }
    default: break;
  }
  auto a = index_value(e->a, env), b = index_value(e->b, env);
  if (!a || !b) return std::nullopt;
  switch (e->op) {
    case KOp::IAdd: return *a + *b;
    case KOp::ISub: return *a - *b;
    case KOp::IMul: return *a * *b;
    case KOp::IDiv: return *b ? std::optional<int64_t>(*a / *b) : std::nullopt;
    case KOp::IMod: return *b ? std::optional<int64_t>(*a % *b) : std::nullopt;
    case KOp::IMin: return std::min(*a, *b);
    case KOp::IMax: return std::max(*a, *b);
    case KOp::ILt: return int64_t{*a < *b};
    case KOp::ILe: return int64_t{*a <= *b};
    case KOp::IEq: return int64_t{*a == *b};
    case KOp::IGe: return int64_t{*a >= *b};
    case KOp::IAnd: return int64_t{*a && *b};
    default: return std::nullopt;
  }
}

/// Whether lanes striding reduction r's innermost loop read no worse than one invocation per element: no load of its
/// body that adjacent elements read at adjacent addresses (coalesced one invocation per element) while adjacent
/// iterations read apart (a column sum: per element, adjacent invocations read one row's adjacent floats).
bool lanes_read_well(const KExprPtr& r, const Shape& shape) {
  std::map<std::string, int64_t> base;
  std::string coord;  // the coordinate adjacent elements differ in: the last of extent > 1
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1) coord = fmt::format("i{}", d);
  const std::string& v = r->loop_vars.back();
  std::set<const KExpr*> seen;
  bool ok = true;
  std::function<void(const KExprPtr&)> walk = [&](const KExprPtr& e) {
    if (!e || !ok || !seen.insert(e.get()).second) return;
    if (e->op == KOp::Load) {
      auto at = [&](const std::string& var) {
        std::map<std::string, int64_t> env = base;
        if (!var.empty()) env[var] = 1;
        return index_value(e->a, env);
      };
      const auto i0 = at(""), ir = at(v), ie = coord.empty() ? std::nullopt : at(coord);
      if (i0 && ir && ie && std::llabs(*ir - *i0) > 1 && std::llabs(*ie - *i0) == 1) ok = false;
    }
    walk(e->a), walk(e->b), walk(e->c);
  };
  walk(r->a);
  return ok;
}

}  // namespace

std::optional<ComputeKernel> emit_subgroup_rows(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                const Lang& lang) {
  // GLSL on a GPU with subgroup arithmetic (WGSL has no subgroups here: per-element there); one block, its
  // reductions outside every other one (the cooperative ones) at least 32 iterations at their longest, and too few
  // elements to fill the device one invocation each (fewer than 256 per compute unit)
  if (limits.cpu_device || limits.register_tiles || !limits.subgroup_arithmetic || lang.wgsl() || lang.c() ||
      k.blocks() > 1)
    return std::nullopt;
  const Value& out = plan.values[k.output()];
  const int64_t n = std::max<int64_t>(out.node->numel(), 1);
  const int64_t units = limits.compute_units > 0 ? limits.compute_units : 128;
  if (n >= units * 256) return std::nullopt;
  int64_t longest = 0;
  for (const KExprPtr& r : outer_reductions(k)) {
    if (r->reduce == ReduceKind::ArgMax) continue;
    longest = std::max(longest, loop_length(r));
    if (!lanes_read_well(r, out.stored_shape())) return std::nullopt;
  }
  if (longest < 32) return std::nullopt;
  const int w = std::max(limits.subgroup_size, 1);
  const int local = std::min(std::max(128, w), limits.max_workgroup_invocations);
  if (local < w || local % w != 0) return std::nullopt;
  ComputeKernel ck;
  ck.strategy = "subgroup-rows";
  ck.local_size = {static_cast<uint32_t>(local), 1, 1};
  ck.workgroups = grid_for(k, (n + local / w - 1) / (local / w), limits);
  KPrinter p(plan, k, k.exprs, "", lang);
  p.indent = 2;
  p.lane_start = "lane";
  p.lane_step = "lanes";
  p.lane_combine = [](ReduceKind kind, const std::string& acc) { return subgroup_step(kind, acc, 2); };
  std::vector<std::string> values;
  for (auto& e : k.exprs) values.push_back(p.print(e));
  std::string body;
  body += "  int lane = int(gl_SubgroupInvocationID);\n  int lanes = int(gl_SubgroupSize);\n";
  body += "  int subgroups = int(gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumSubgroups);\n";
  body += fmt::format("  for (int elem = int((gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_NumSubgroups + "
                      "gl_SubgroupID); elem < {}; elem += subgroups) {{\n", out.node->numel());
  body += coordinates(out.stored_shape(), "elem", 2, lang) + p.take_code();
  body += "    if (subgroupElect()) {\n";
  for (size_t j = 0; j < k.outputs.size(); ++j)
    body += "      " + lang.store(plan.values[k.outputs[j]].name, "elem", values[j]) + "\n";
  body += "    }\n  }\n}\n";
  std::string src = kernel_header(plan, k, ck.strategy, lang);
  src.insert(src.find('\n') + 1, "#extension GL_KHR_shader_subgroup_basic : require\n"
                                  "#extension GL_KHR_shader_subgroup_vote : require\n"
                                  "#extension GL_KHR_shader_subgroup_arithmetic : require\n");
  src += fmt::format("// one subgroup per element of {} ({} elements; {} workgroups of {}, {} subgroups of {} each on "
                     "this device, any subgroup size covers them): each reduction outside the others strided over the "
                     "lanes and combined by a subgroup operation (every lane gets the result: dependent reductions "
                     "follow), maps in every lane, the first lane stores\n",
                     out.name, n, ck.workgroups[0] * ck.workgroups[1], local, local / w, w);
  src += lang.workgroup_size_layout(local, 1);
  src += buffer_declarations(plan, k, p.loaded_inputs(), lang);
  src += lang.helpers(p.helpers(), body);
  src += lang.entry_open(local, 1, body) + body;
  ck.source = std::move(src);
  ck.language = lang.language();
  return ck;
}

std::optional<ComputeKernel> emit_tree_reduction(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                 const Lang& lang) {
  const std::optional<TreeShape> shaped = tree_shape(plan, k, limits, lang);
  if (!shaped) return std::nullopt;
  const TreeShape& t = *shaped;
  const Shape shape = plan.values[k.output()].stored_shape();
  const int64_t n = t.n, L = t.L, work = t.work;
  const int E = t.E, nt = t.nt, R = t.R(), S = t.S();
  const bool subgroups = t.subgroups;
  ComputeKernel ck;
  ck.strategy = "tree-reduction";
  ck.local_size = {static_cast<uint32_t>(nt), 1, 1};
  ck.workgroups = grid_for(k, (n + E - 1) / E, limits);
  ck.shared_bytes = t.shared_floats(nt) * 4;
  std::set<int> loaded;
  MathHelpers helpers;
  const ReduceKind kind = t.rs[0]->reduce;
  const std::string init =
      kind == ReduceKind::Sum ? "0.0" : lang.float_literal(kind == ReduceKind::Min ? INFINITY : -INFINITY);
  auto combine = [&](const std::string& a, const std::string& b) {  // max/min propagate NaN (glsl_math.h)
    return kind == ReduceKind::Sum ? fmt::format("{} + {}", a, b) : reduce_step(lang.wgsl(), kind == ReduceKind::Max, a, b, helpers);
  };
  if (kind != ReduceKind::Sum) combine("", "");  // records the helper before the source's helper section
  const TreeCombine c{kind, init, combine};
  const std::string fns = tree_functions(plan, k, t, shape, loaded, helpers, lang);
  int nsub = 0;
  const std::string body = tree_entry_body(t, c, ck, nsub, lang);
  std::string src = kernel_header(plan, k, ck.strategy, lang);
  if (subgroups) {  // right after #version
    ck.strategy += "+subgroups";
    src.insert(src.find('\n') + 1, "#extension GL_KHR_shader_subgroup_basic : require\n"
                                    "#extension GL_KHR_shader_subgroup_vote : require\n"
                                    "#extension GL_KHR_shader_subgroup_arithmetic : require\n");
  }
  if (E == 1 && R == 1) {
    src += fmt::format("// one workgroup of {} invocations per element ({} elements, grid {}x{}); each folds ({}) of {} "
                       "iterations strided by {}, then {}\n",
                       nt, n, ck.workgroups[0], ck.workgroups[1], reduce_name(kind), L, nt,
                       subgroups ? "a subgroup reduction, the subgroups' results in shared memory, and subgroup 0 "
                                   "reduces those; its first invocation stores"
                                 : "a tree in shared memory; invocation 0 stores");
  } else {
    src += fmt::format("// one workgroup of {} invocations per {} element(s) ({} elements, grid {}x{}): {} slices per element; "
                       "each invocation folds ({}) {} reduction(s) of {} iterations in all, strided by {}, then {}\n",
                       nt, E, n, ck.workgroups[0], ck.workgroups[1], S, reduce_name(kind), R, work, S,
                       subgroups ? fmt::format("subgroup reductions, the subgroups' results in shared memory ({} per "
                                               "reduction), and subgroup 0 reduces those; its first invocation stores", nsub)
                                 : "a tree over the slices in shared memory; slice 0 stores");
  }
  src += lang.workgroup_size_layout(nt, 1);
  src += buffer_declarations(plan, k, loaded, lang);
  src += lang.helpers(helpers, fns + body);
  src += lang.shared_array("partial", t.shared_floats(nt), "");
  src += fns;
  src += lang.entry_open(nt, 1, fns + body) + body;
  ck.source = std::move(src);
  return ck;
}

}  // namespace sg::compute
