// Workgroup-cooperative compute kernels: tiled contractions and tree reductions (see emit_compute.cpp).
//
// Tiled contraction (a Contraction of contraction.h, viewed as C[batch][M][N] = sum_k A[m][k] B[k][n]):
//   a workgroup of TX x TY invocations computes a BM x BN tile of C (BM = TY * TM, BN = TX * TN) of batch
//   gl_WorkGroupID.z; per chunk of BK values of k it stages A[m0 .. m0+BM)[k0 .. k0+BK) and B[..][..] into shared
//   memory (factor_a/factor_b evaluate the factors, prologues included, at one (m, k); 0 outside the ranges), a
//   barrier, then each invocation accumulates its TM x TN register tile (rows ty + i*TY, columns tx + j*TX: the
//   shared reads of B are consecutive across invocations, those of A broadcast), a barrier. store_tile applies the
//   kernel's epilogue (bias, relu, optimizer math of every output) to each accumulator and stores it guarded.
//   Staging is unrolled (each invocation stages a fixed number of elements), so an invocation runs about
//   K * (1 + 1/BK) loop iterations (Mesa's gallivm stops loops after 65535 per invocation).
// Tree reduction: one workgroup per output element; invocation t sums (max/min) the body over k = t, t + NT, ...;
//   a tree in shared memory halves the partial results; invocation 0 applies the epilogue and stores every output.
#include <algorithm>

#include <fmt/format.h>

#include "compute_emit.h"
#include "compute_glsl.h"
#include "contraction.h"
#include "sg/error.h"

namespace sg::compute {

namespace {

struct Tiles {
  int tx = 16, ty = 16, tm = 8, tn = 8, bk = 8;
  int bm() const { return ty * tm; }
  int bn() const { return tx * tn; }
  int threads() const { return tx * ty; }
};

/// Workgroups a GPU contraction should launch at least: about one per multiprocessor of a large GPU (the H200 has
/// 132), so that a small matmul (an MLP layer of batch 128: one 128x128 tile) does not run on one multiprocessor.
constexpr int64_t kGpuTargetWorkgroups = 128;

/// Tile sizes from the device limits: 16x16 invocations of 8x8 outputs (128x128 tiles) on GPUs, 8x8 of 4x4 on CPU
/// devices (fewer invocations and barriers per output); halved where the device allows fewer invocations or less
/// shared memory, and per dimension where M or N is small. On GPUs the tile then shrinks (register tile first, down
/// to 2x2 outputs per invocation, then invocations, down to 8x8) until the dispatch has kGpuTargetWorkgroups
/// workgroups or cannot shrink further.
Tiles choose_tiles(const ComputeLimits& l, int64_t M, int64_t N, int64_t K, int64_t batch) {
  Tiles t;
  if (l.cpu_device) t = {8, 8, 4, 4, 16};
  while (t.threads() > l.max_workgroup_invocations && (t.tx > 1 || t.ty > 1)) (t.ty >= t.tx ? t.ty : t.tx) /= 2;
  auto shrink = [](int& tile, int& threads, int64_t extent) {
    while (tile > 1 && int64_t{tile} * threads >= 2 * extent) tile /= 2;
    while (threads > 1 && int64_t{tile} * threads >= 2 * extent) threads /= 2;
  };
  shrink(t.tm, t.ty, M);
  shrink(t.tn, t.tx, N);
  auto groups = [&] { return ((M + t.bm() - 1) / t.bm()) * ((N + t.bn() - 1) / t.bn()) * batch; };
  while (!l.cpu_device && groups() < kGpuTargetWorkgroups) {
    if (t.tm >= t.tn && t.tm > 2 && t.bm() > 16) t.tm /= 2;
    else if (t.tn > 2 && t.bn() > 16) t.tn /= 2;
    else if (t.ty >= t.tx && t.ty > 8 && t.bm() > 16) t.ty /= 2;
    else if (t.tx > 8 && t.bn() > 16) t.tx /= 2;
    else break;
  }
  t.bk = static_cast<int>(std::min<int64_t>(t.bk, K));
  while (t.bk > 1 && int64_t{t.bk} * (t.bm() + t.bn() + 2) * 4 > l.max_shared_bytes) t.bk /= 2;  // + padding
  return t;
}

/// `int <name> = ...;` lines splitting flat index `flat` over the dims `dims` of `shape` (row-major among them).
std::string split_dims(const Shape& shape, const std::vector<int>& dims, const std::string& flat, const char* prefix,
                       int indent) {
  std::string s;
  int64_t stride = 1;
  std::vector<int64_t> strides(dims.size());
  for (size_t i = dims.size(); i-- > 0;) strides[i] = stride, stride *= shape[dims[i]];
  for (size_t i = 0; i < dims.size(); ++i) {
    std::string q = strides[i] == 1 ? flat : fmt::format("({} / {})", flat, strides[i]);
    if (i > 0) q = fmt::format("{} % {}", q, shape[dims[i]]);
    s += fmt::format("{}int {}{} = {};\n", std::string(indent * 2, ' '), prefix, dims[i], q);
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
    std::string q = strides[i] == 1 ? flat : fmt::format("({} / {})", flat, strides[i]);
    if (i > 0) q = fmt::format("{} % {}", q, r->extents[i]);
    s += std::string(indent * 2, ' ') + lang.let(LType::Int, r->loop_vars[i], q) + "\n";
  }
  return s;
}

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

/// A GLSL function `float NAME(int idx, int k)` evaluating `factor` at flat side index idx and flat loop index k
/// (0 outside [0, extent) x [0, K)); batch coordinates come from gl_WorkGroupID.z.
std::string factor_function(const Plan& plan, const Kernel& k, const Contraction& c, const Shape& shape,
                            const KExprPtr& factor, const std::vector<int>& dims, int64_t extent, const char* name,
                            std::set<int>& loaded, const Lang& lang) {
  const std::string what = kexpr_str(factor);
  std::string s = fmt::format("float {}(int idx, int k) {{  // {} at idx over ({}), k over the loop\n", name,
                              what.size() > 100 ? "the factor (prologue inlined)" : what, dims_str(shape, dims));
  s += fmt::format("  if (idx >= {} || k >= {}) return 0.0;\n", extent, c.K);
  s += split_dims(shape, dims, "idx", "i", 1);
  if (!c.batch_dims.empty()) s += split_dims(shape, c.batch_dims, "int(gl_WorkGroupID.z)", "i", 1);
  s += split_loop(c.reduce, "k", 1, lang);
  KPrinter p(plan, k, {factor}, "", lang);
  const std::string v = p.print(factor);
  s += p.take_code() + fmt::format("  return {};\n}}\n", v);
  loaded.insert(p.loaded_inputs().begin(), p.loaded_inputs().end());
  return s;
}

/// `void NAME(...)`: the epilogue of every output at one element, with `acc` standing for reduction r;
/// `guard_and_coords` declares i0.. from the function's parameters.
std::string epilogue_function(const Plan& plan, const Kernel& k, const KExprPtr& r, const std::string& signature,
                              const std::string& guard_and_coords, const Shape& shape, std::set<int>& loaded,
                              const Lang& lang) {
  std::string s = signature + "\n" + guard_and_coords;
  s += "  " + lang.let(LType::Int, "elem", flat_index(shape)) + "\n";
  KPrinter p(plan, k, k.exprs, "", lang);
  p.bind(r.get(), "acc");
  std::vector<std::string> values;
  for (auto& e : k.exprs) values.push_back(p.print(e));
  s += p.take_code();
  for (size_t j = 0; j < k.outputs.size(); ++j) s += "  " + lang.store(plan.values[k.outputs[j]].name, "elem", values[j]) + "\n";
  loaded.insert(p.loaded_inputs().begin(), p.loaded_inputs().end());
  return s + "}\n";
}

/// Unrolled staging of one factor's BK x `rows` tile (row kk at kk * stride): element s = tid + u * threads, (kk, row)
/// from s in the order that lets consecutive invocations read consecutive memory.
std::string stage(const char* tile, const char* fn, int rows, int stride, const char* base, int bk, int threads,
                  bool k_fastest) {
  std::string s;
  const int total = rows * bk;
  const int per = (total + threads - 1) / threads;
  for (int u = 0; u < per; ++u) {
    const std::string sidx = u == 0 ? "tid" : fmt::format("tid + {}", u * threads);
    const std::string kk = k_fastest ? fmt::format("s % {}", bk) : fmt::format("s / {}", rows);
    const std::string row = k_fastest ? fmt::format("s / {}", bk) : fmt::format("s % {}", rows);
    const std::string store = fmt::format("int kk = {}, row = {}; {}[kk * {} + row] = {}({} + row, k0 + kk);", kk, row, tile,
                                          stride, fn, base);
    s += (u + 1) * threads > total ? fmt::format("    {{ int s = {}; if (s < {}) {{ {} }} }}\n", sidx, total, store)
                                   : fmt::format("    {{ int s = {}; {} }}\n", sidx, store);
  }
  return s;
}

}  // namespace

std::optional<ComputeKernel> emit_tiled_contraction(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                    const Lang& lang) {
  if (lang.wgsl()) return std::nullopt;  // (the WGSL form of the tiled kernel is not written yet: per-element)
  const Shape shape = plan.values[k.output()].stored_shape();
  auto found = find_contraction(k, shape);
  if (!found) return std::nullopt;
  const Contraction& c = *found;
  const Tiles t = choose_tiles(limits, c.M, c.N, c.K, c.batch);
  const int64_t gx = (c.N + t.bn() - 1) / t.bn(), gy = (c.M + t.bm() - 1) / t.bm();
  if (gx > limits.max_workgroup_count || gy > limits.max_workgroup_count || c.batch > limits.max_workgroup_count ||
      t.threads() > limits.max_workgroup_invocations)
    return std::nullopt;
  ComputeKernel ck;
  ck.strategy = "tiled-contraction";
  ck.local_size = {static_cast<uint32_t>(t.tx), static_cast<uint32_t>(t.ty), 1};
  ck.workgroups = {static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), static_cast<uint32_t>(c.batch)};
  // a tile staged k-fastest is padded by one float per k row: consecutive invocations then write different banks
  const int sa = t.bm() + (c.a_k_contiguous ? 1 : 0), sb = t.bn() + (c.b_k_contiguous ? 1 : 0);
  ck.shared_bytes = int64_t{t.bk} * (sa + sb) * 4;
  if (ck.shared_bytes > limits.max_shared_bytes) return std::nullopt;
  std::set<int> loaded;
  std::string fns = factor_function(plan, k, c, shape, c.factor_a, c.m_dims, c.M, "factor_a", loaded, lang);
  fns += factor_function(plan, k, c, shape, c.factor_b, c.n_dims, c.N, "factor_b", loaded, lang);
  std::string coords = fmt::format("  if (m >= {} || n >= {}) return;\n", c.M, c.N) + split_dims(shape, c.m_dims, "m", "i", 1) +
                       split_dims(shape, c.n_dims, "n", "i", 1);
  if (!c.batch_dims.empty()) coords += split_dims(shape, c.batch_dims, "int(gl_WorkGroupID.z)", "i", 1);
  fns += "// the epilogue of every output at one element of the tile, `acc` the contraction's sum there\n";
  fns += epilogue_function(plan, k, c.reduce,
                           lang.function_open(LType::Void, "store_tile", {{LType::Int, "m"}, {LType::Int, "n"}, {LType::Float, "acc"}}),
                           coords, shape, loaded, lang);

  std::string src = kernel_header(plan, k, ck.strategy, lang);
  src += fmt::format("// contraction: C[batch][m][n] = sum_k A[m][k] * B[k][n] with m over ({}) = {}, n over ({}) = {}, "
                     "batch over ({}) = {}, k over ({}) = {}\n",
                     dims_str(shape, c.m_dims), c.M, dims_str(shape, c.n_dims), c.N, dims_str(shape, c.batch_dims), c.batch,
                     [&] {
                       std::string s;
                       for (size_t i = 0; i < c.reduce->loop_vars.size(); ++i)
                         s += fmt::format("{}{}<{}", i ? ", " : "", c.reduce->loop_vars[i], c.reduce->extents[i]);
                       return s;
                     }(),
                     c.K);
  src += fmt::format("// workgroup tile {}x{} (m x n) of {}x{} invocations, register tile {}x{} per invocation (rows ty + i*{}, "
                     "columns tx + j*{}), K chunks of {} staged in shared memory ({} bytes); grid {}x{}x{}\n",
                     t.bm(), t.bn(), t.tx, t.ty, t.tm, t.tn, t.ty, t.tx, t.bk, ck.shared_bytes, gx, gy, c.batch);
  src += fmt::format("layout(local_size_x = {}, local_size_y = {}) in;\n", t.tx, t.ty);
  src += buffer_declarations(plan, k, loaded, lang);
  src += lang.helpers(fns);
  src += fmt::format("shared float tile_a[{}];  // A[m0 + row][k0 + kk] at kk * {} + row\n", t.bk * sa, sa);
  src += fmt::format("shared float tile_b[{}];  // B[k0 + kk][n0 + col] at kk * {} + col\n", t.bk * sb, sb);
  src += fns;
  src += "\nvoid main() {\n";
  src += fmt::format("  int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y), tid = ty * {} + tx;\n", t.tx);
  src += fmt::format("  int m0 = int(gl_WorkGroupID.y) * {}, n0 = int(gl_WorkGroupID.x) * {};\n", t.bm(), t.bn());
  std::string acc_decl;
  for (int i = 0; i < t.tm; ++i)
    for (int j = 0; j < t.tn; ++j) acc_decl += fmt::format("{}acc_{}_{} = 0.0", acc_decl.empty() ? "  float " : ", ", i, j);
  src += acc_decl + ";\n";
  src += fmt::format("  for (int k0 = 0; k0 < {}; k0 += {}) {{\n", c.K, t.bk);
  src += stage("tile_a", "factor_a", t.bm(), sa, "m0", t.bk, t.threads(), c.a_k_contiguous);
  src += stage("tile_b", "factor_b", t.bn(), sb, "n0", t.bk, t.threads(), c.b_k_contiguous);
  src += "    barrier();\n";
  src += fmt::format("    for (int kk = 0; kk < {}; ++kk) {{\n", t.bk);
  for (int i = 0; i < t.tm; ++i)
    src += fmt::format("      float a{} = tile_a[kk * {} + ty{}];\n", i, sa, i ? fmt::format(" + {}", i * t.ty) : "");
  for (int j = 0; j < t.tn; ++j)
    src += fmt::format("      float b{} = tile_b[kk * {} + tx{}];\n", j, sb, j ? fmt::format(" + {}", j * t.tx) : "");
  for (int i = 0; i < t.tm; ++i) {
    src += "     ";
    for (int j = 0; j < t.tn; ++j) src += fmt::format(" acc_{0}_{1} += a{0} * b{1};", i, j);
    src += "\n";
  }
  src += "    }\n    barrier();\n  }\n";
  for (int i = 0; i < t.tm; ++i)
    for (int j = 0; j < t.tn; ++j)
      src += fmt::format("  store_tile(m0 + ty{}, n0 + tx{}, acc_{}_{});\n", i ? fmt::format(" + {}", i * t.ty) : "",
                         j ? fmt::format(" + {}", j * t.tx) : "", i, j);
  src += "}\n";
  ck.source = std::move(src);
  return ck;
}

std::optional<ComputeKernel> emit_tree_reduction(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                 const Lang& lang) {
  const Shape shape = plan.values[k.output()].stored_shape();
  const int64_t n = plan.values[k.output()].node->numel();
  KExprPtr r = main_reduction(k);
  if (!r) return std::nullopt;
  int64_t L = 1;
  for (int64_t e : r->extents) L *= e;
  if (n > 1024 || L < 128 || L < n) return std::nullopt;
  int nt = limits.cpu_device ? 64 : 256;
  while (nt > limits.max_workgroup_invocations || nt * 4 > limits.max_shared_bytes) nt /= 2;
  while (nt > 1 && nt * 2 > L) nt /= 2;
  if (nt < 2) return std::nullopt;
  ComputeKernel ck;
  ck.strategy = "tree-reduction";
  ck.local_size = {static_cast<uint32_t>(nt), 1, 1};
  ck.workgroups = grid_for(k, n, limits);
  ck.shared_bytes = int64_t{nt} * 4;
  std::set<int> loaded;
  const ReduceKind kind = r->reduce;
  const std::string init =
      kind == ReduceKind::Sum ? "0.0" : lang.float_literal(kind == ReduceKind::Min ? INFINITY : -INFINITY);
  auto combine = [&](const std::string& a, const std::string& b) {
    return kind == ReduceKind::Sum ? fmt::format("{} + {}", a, b)
                                   : fmt::format("{}({}, {})", kind == ReduceKind::Min ? "min" : "max", a, b);
  };
  // the body at flat loop index k, coordinates from the workgroup's element
  std::string fns = lang.function_open(LType::Float, "body", {{LType::Int, "elem"}, {LType::Int, "k"}}) +
                    "  // the reduction's body at the element's coordinates and k\n";
  fns += coordinates(shape, "elem", 1, lang) + split_loop(r, "k", 1, lang);
  {
    KPrinter p(plan, k, {r->a}, "", lang);
    const std::string v = p.print(r->a);
    fns += p.take_code() + fmt::format("  return {};\n}}\n", v);
    loaded.insert(p.loaded_inputs().begin(), p.loaded_inputs().end());
  }
  fns += epilogue_function(plan, k, r,
                           lang.function_open(LType::Void, "store_element", {{LType::Int, "element"}, {LType::Float, "acc"}}),
                           coordinates(shape, "element", 1, lang), shape, loaded, lang);
  std::string body = "  " + lang.let(LType::Int, "elem",
                                     fmt::format("{} * {} + {}", lang.builtin(Builtin::WorkgroupId, 1), ck.workgroups[0],
                                                 lang.builtin(Builtin::WorkgroupId, 0))) + "\n";
  body += "  " + lang.let(LType::Int, "tid", lang.builtin(Builtin::LocalInvocationId, 0)) + "\n";
  body += "  " + lang.var(LType::Float, "acc", init) + "\n";
  body += "  " + lang.if_then(fmt::format("elem < {}", n), lang.for_stmt("k", "tid", std::to_string(L), nt,
                                                                  fmt::format("acc = {};", combine("acc", "body(elem, k)")))) + "\n";
  body += "  partial[tid] = acc;\n  " + lang.barrier() + "\n";
  for (int h = nt / 2; h >= 1; h /= 2) {
    body += "  " + lang.if_then(fmt::format("tid < {}", h), fmt::format("partial[tid] = {};", combine("partial[tid]", fmt::format("partial[tid + {}]", h)))) + "\n";
    body += "  " + lang.barrier() + "\n";
  }
  body += "  " + lang.if_then(fmt::format("tid == 0 && elem < {}", n), "store_element(elem, partial[0]);") + "\n}\n";
  std::string src = kernel_header(plan, k, ck.strategy, lang);
  src += fmt::format("// one workgroup of {} invocations per element ({} elements, grid {}x{}); each folds ({}) of {} "
                     "iterations strided by {}, then a tree in shared memory; invocation 0 stores\n",
                     nt, n, ck.workgroups[0], ck.workgroups[1], reduce_name(kind), L, nt);
  src += lang.workgroup_size_layout(nt, 1);
  src += buffer_declarations(plan, k, loaded, lang);
  src += lang.helpers(fns + body);
  src += lang.shared_array("partial", nt, "");
  src += fns;
  src += lang.entry_open(nt, 1, fns + body) + body;
  ck.source = std::move(src);
  return ck;
}

}  // namespace sg::compute
