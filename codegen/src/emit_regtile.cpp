// Register-tiled contractions without workgroup memory (ComputeLimits::register_tiles: CPU implementations of
// WebGPU, e.g. SwiftShader in Chromium): every invocation computes a TM x TN tile of C[batch][M][N] = sum_k
// A[m][k] B[k][n] (contraction.h) over the whole K, reading both factors straight from the storage buffers through
// factor_a / factor_b (the factor functions of the shared-memory kernel, emit_tiled.cpp, here taking coordinates
// split once per register row and column before the loop, and the loop index split into the reduction's loop
// variables once per iteration), then applies the kernel's epilogue to each accumulator (store_tile). No
// `var<workgroup>` tile, no barrier, no unrolled staging. The accumulators are one private array `acc` (row-major,
// read and written at constant indices in the loop) and the epilogue is one loop over it: 64 scalar accumulators and
// 64 inlined epilogues made SwiftShader's JIT take 1.3-3.2 s per 8x8 kernel (the MLP's first step 5-10 s), the
// array and the loop 0.1-0.4 s, and their kernels ran no slower (docs/PERFORMANCE.md Run W12b).
//
// Why: a CPU implementation runs the invocations of a workgroup as SIMD lanes and fibers; each barrier switches
// every fiber of the workgroup, and the shared tile is ordinary memory behind the same caches as the storage buffers,
// so the shared-memory kernel pays its staging and barriers for nothing (docs/PERFORMANCE.md Run W4: its per-kernel
// profile on SwiftShader). In WGSL the loads are not clamped (the language bounds every storage access). The tile's
// invocation order: n fastest (TILES_N tiles per row of tiles), then m; batch
// from the workgroup id's z, as the factor functions expect.
#include <algorithm>

#include <fmt/format.h>

#include "compute_emit.h"
#include "contraction.h"

namespace sg::compute {

namespace {

/// Invocations per workgroup of a register-tiled kernel (SIMD lanes times a few fibers on a CPU implementation).
constexpr int kInvocations = 64;

/// Workgroups a register-tiled dispatch should have at least (over all batches), and the fewest invocations a
/// workgroup is cut to for them: a CPU implementation spreads a dispatch over its threads by workgroups (SwiftShader:
/// whole workgroups per worker, each workgroup's SIMD groups run in turn), so one workgroup of 64 tiles (the MLP
/// b=32's x.W1^T) ran on one thread (docs/PERFORMANCE.md Run W12b).
constexpr int kMinWorkgroups = 4;
constexpr int kMinInvocations = 16;

/// Outputs per invocation along each side of a register tile (at most; a power of two). Every factor load of a lane
/// whose address is not a compile-time constant is a per-lane gather on SwiftShader (four scalar loads, each behind
/// a branch on the lane's mask), and the multiply-adds are SIMD: an 8x8 tile loads 16 values per 64 multiply-adds
/// where a 4x4 one loads 8 per 16 (SGEMM 512 on SwiftShader 1.5-2.3x faster; 16x8, 128 accumulators, no faster
/// again: docs/PERFORMANCE.md Run W8).
constexpr int kRegisterTile = 8;

/// The register tile extent along a side of `extent` elements: `max`, or the next power of two >= extent below that.
int reg_extent(int64_t extent, int max) {
  int r = max;
  while (r > 1 && r / 2 >= extent) r /= 2;
  return r;
}

/// The nodes of an expression tree (shared subtrees counted at each use, as the printed code repeats them).
int64_t tree_size(const KExprPtr& e) { return e ? 1 + tree_size(e->a) + tree_size(e->b) + tree_size(e->c) : 0; }

/// Factors up to this many IR nodes (together) take 8x8 register tiles: a load with its index, a mask of a ReLU.
/// A conv's padded im2col factor (a select of a load on the window's bounds) is larger: 8 of its copies per iteration
/// and 64 epilogues made SwiftShader compile one conv kernel ~9 s longer (docs/PERFORMANCE.md Run W8).
constexpr int64_t kMaxFactorNodesFor8x8 = 32;

/// `x` in parentheses unless it already is parenthesised as a whole (`(tile & 127)`).
std::string paren(const std::string& x) { return x.front() == '(' && x.back() == ')' ? x : "(" + x + ")"; }

}  // namespace

std::optional<ComputeKernel> emit_register_tiled(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                 const Lang& lang, std::string* not_tiled) {
  const Shape shape = plan.values[k.output()].stored_shape();
  auto found = find_contraction(k, shape);
  if (!found) return std::nullopt;
  const Contraction& c = *found;
  // kRegisterTile per side where that leaves a workgroup's worth of tiles, else 4: with fewer tiles than lanes and
  // fibers, larger tiles only idle SIMD lanes (the digits MLP's 16-row steps, a conv weight gradient of 8x9 outputs)
  // (and factors small enough to be repeated 8 times per iteration: kMaxFactorNodesFor8x8)
  int tm = reg_extent(c.M, kRegisterTile), tn = reg_extent(c.N, kRegisterTile);
  auto count = [&](int64_t extent, int r) { return (extent + r - 1) / r; };
  const int64_t nodes_a = tree_size(c.factor_a), nodes_b = tree_size(c.factor_b);
  if (count(c.M, tm) * count(c.N, tn) < kInvocations || nodes_a + nodes_b > kMaxFactorNodesFor8x8) {
    tm = reg_extent(c.M, 4), tn = reg_extent(c.N, 4);
    // a conv's large im2col factor beside a small one (its weights: a load): 8 along the small factor's side, 4
    // along the large one's (4x8: 12 loads per 32 multiply-adds instead of 8 per 16; 4 copies of the large factor)
    const int64_t small = kMaxFactorNodesFor8x8 / 2;
    const int wide_n = reg_extent(c.N, kRegisterTile), wide_m = reg_extent(c.M, kRegisterTile);
    if (nodes_b <= small && nodes_a > small && wide_n > tn && count(c.M, tm) * count(c.N, wide_n) >= kInvocations)
      tn = wide_n;
    else if (nodes_a <= small && nodes_b > small && wide_m > tm && count(c.M, wide_m) * count(c.N, tn) >= kInvocations)
      tm = wide_m;
  }
  const int64_t tiles_m = count(c.M, tm), tiles_n = count(c.N, tn), tiles = tiles_m * tiles_n;
  int local = std::min(kInvocations, limits.max_workgroup_invocations);
  while (local > kMinInvocations && (tiles + local - 1) / local * c.batch < kMinWorkgroups) local /= 2;
  const int64_t gx = (tiles + local - 1) / local;
  if (gx > limits.max_workgroup_count || c.batch > limits.max_workgroup_count) {
    if (not_tiled)
      *not_tiled = fmt::format("a contraction (M={}, N={}, K={}, batch {}), not register-tiled: a grid of {}x1x{} "
                               "workgroups, more than max_workgroup_count {}", c.M, c.N, c.K, c.batch, gx, c.batch,
                               limits.max_workgroup_count);
    return std::nullopt;
  }
  ComputeKernel ck;
  ck.strategy = "register-tiled";
  ck.local_size = {static_cast<uint32_t>(local), 1, 1};
  ck.workgroups = {static_cast<uint32_t>(gx), 1, static_cast<uint32_t>(c.batch)};
  ck.shared_bytes = 0;
  std::set<int> loaded;
  MathHelpers helpers;
  // unguarded factors: k < K in the loop, and the rows / columns of a partial tile read the last one again (their
  // sums are discarded by store_tile's guard), so no load leaves the tile's range and no call branches
  std::string fns = tile_functions(plan, k, c, shape, loaded, helpers, lang, false, true);

  std::string body = "  " + lang.let(LType::Int, "tile", lang.builtin(Builtin::GlobalInvocationId, 0)) + "\n";
  body += "  " + lang.if_then(fmt::format("tile >= {}", tiles), "return;") + "\n";
  body += "  " + lang.lets(LType::Int, {{"m0", fmt::format("{} * {}", lang.div_const("tile", tiles_n), tm)},
                                       {"n0", fmt::format("{} * {}", paren(lang.mod_const("tile", tiles_n)), tn)}}) + "\n";
  body += "  " + lang.local_array("acc", tm * tn, fmt::format("the register tile's sums, row-major ({}x{})", tm, tn)) + "\n";
  // the rows and columns each register reads: m0 + i, or the side's last one past its end (a partial tile), split
  // into output coordinates here, once: the factor calls in the loop do no division by a constant for them
  // (SwiftShader's JIT keeps such a division a division and does not move it out of the loop, Run W1b)
  auto side = [&](const char* v, const char* origin, int regs, int64_t extent, const std::vector<int>& dims) {
    std::vector<std::pair<std::string, std::string>> at;
    for (int i = 0; i < regs; ++i)
      at.emplace_back(fmt::format("{}{}", v, i), i == 0 ? std::string(origin)
                                                 : extent % regs == 0 ? fmt::format("{} + {}", origin, i)
                                                                      : fmt::format("min({} + {}, {})", origin, i, extent - 1));
    std::string s = "  " + lang.lets(LType::Int, at) + "\n";
    std::vector<std::string> args(regs);
    for (int i = 0; i < regs; ++i) {
      const std::string reg = fmt::format("{}{}", v, i), prefix = reg + "_i";
      s += split_dims(shape, dims, reg, prefix.c_str(), 1, lang);
      for (int d : dims) args[i] += fmt::format("{}{}{}", args[i].empty() ? "" : ", ", prefix, d);
    }
    return std::pair{s, args};
  };
  auto [rows, row_args] = side("row", "m0", tm, c.M, c.m_dims);
  auto [cols, col_args] = side("col", "n0", tn, c.N, c.n_dims);
  body += rows + cols;
  // one loop over the reduction's flat index k, split into its loop variables once per iteration for every call
  // (nested loops of 3 taps ran slower on SwiftShader than the split: Run W6)
  const std::vector<std::string>& loop_vars = c.reduce->loop_vars;
  std::string loop_args;
  for (const std::string& v : loop_vars) loop_args += ", " + v;
  const std::string in = "    ";
  // a loop variable of extent other than a power of two (a conv's 3x3 taps): with shift_divisions the loop
  // variables are counters stepped at the end of each iteration (a carry by select, no division: SwiftShader
  // divides lane by lane), else split from k
  const std::vector<int64_t>& extents = c.reduce->extents;
  const bool counters = lang.shift_divisions() && loop_vars.size() > 1 &&
                        std::any_of(extents.begin() + 1, extents.end(), [](int64_t e) { return (e & (e - 1)) != 0; });
  std::string step;
  if (counters) {
    std::vector<std::pair<std::string, std::string>> zeros;
    for (const std::string& v : loop_vars) zeros.emplace_back(v, "0");
    body += "  " + lang.lets(LType::Int, zeros, true) + "  // the loop variables of k, stepped with it\n";
    step = in + fmt::format("{0} += 1;", loop_vars.back());
    for (size_t i = loop_vars.size() - 1; i > 0; --i) {
      const std::string carry = fmt::format("carry{}", i), &v = loop_vars[i], &outer = loop_vars[i - 1];
      step += fmt::format(" {} {} = {}; {} = {};", lang.let(LType::Bool, carry, fmt::format("{} == {}", v, extents[i])), v,
                          lang.select(carry, "0", v), outer, lang.select(carry, outer + " + 1", outer));
    }
    step += "\n";
  }
  body += "  " + lang.for_open("k", "0", std::to_string(c.K)) + "\n";
  if (!counters) body += split_loop(c.reduce, "k", 2, lang);
  auto call = [&](const char* fn, const std::string& coords) {
    return fmt::format("{}({}{})", fn, coords, coords.empty() ? loop_args.substr(2) : loop_args);
  };
  for (int i = 0; i < tm; ++i) body += in + lang.let(LType::Float, fmt::format("a{}", i), call("factor_a", row_args[i])) + "\n";
  for (int j = 0; j < tn; ++j) body += in + lang.let(LType::Float, fmt::format("b{}", j), call("factor_b", col_args[j])) + "\n";
  for (int i = 0; i < tm; ++i) {
    body += in.substr(1);
    for (int j = 0; j < tn; ++j) body += fmt::format(" acc[{}] += a{} * b{};", i * tn + j, i, j);
    body += "\n";
  }
  body += step + "  }\n";
  // one epilogue loop (acc read at a run-time index: 64 gathers per invocation, against the K loop's 16 per k)
  body += "  " + lang.for_stmt("e", "0", std::to_string(tm * tn), 1,
                               fmt::format("store_tile(m0 + {}, n0 + {}, acc[e]);", lang.div_const("e", tn),
                                           paren(lang.mod_const("e", tn)))) + "\n";
  body += "}\n";

  std::string src = kernel_header(plan, k, ck.strategy, lang);
  src += fmt::format("// contraction: C[batch][m][n] = sum_k A[m][k] * B[k][n], M = {}, N = {}, K = {}, batch {}\n", c.M,
                     c.N, c.K, c.batch);
  src += fmt::format("// register tiles of {}x{} outputs per invocation ({}x{} tiles, n fastest), factors read from the "
                     "buffers, no workgroup memory; {} workgroups of {} per batch\n",
                     tm, tn, tiles_m, tiles_n, gx, local);
  src += lang.workgroup_size_layout(local, 1);
  // WGSL: loads unclamped (every index is in range or masked by the factor's own select, and WGSL bounds every
  // storage access anyway: the clamp was a second bound per load, about a third of an SGEMM's time on SwiftShader)
  src += buffer_declarations(plan, k, loaded, lang, !lang.wgsl());
  src += lang.helpers(helpers, fns + body);
  src += fns;
  src += lang.entry_open(local, 1, fns + body) + body;
  ck.source = std::move(src);
  return ck;
}

}  // namespace sg::compute
