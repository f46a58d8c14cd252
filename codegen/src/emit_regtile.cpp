// Register-tiled contractions without workgroup memory (ComputeLimits::register_tiles: CPU implementations of
// WebGPU, e.g. SwiftShader in Chromium): every invocation computes a TM x TN tile of C[batch][M][N] = sum_k
// A[m][k] B[k][n] (contraction.h) over the whole K, reading both factors straight from the storage buffers through
// factor_a / factor_b (the factor functions of the shared-memory kernel, emit_tiled.cpp, here taking coordinates
// split once per register row and column before the loop, and the loop index split into the reduction's loop
// variables once per iteration), then applies the kernel's epilogue to each accumulator (store_tile). No
// `var<workgroup>` tile, no barrier, no unrolled staging. The accumulators are one private array `acc` (row-major,
// read and written at constant indices in the loop) and the epilogue is one loop over it: 64 scalar accumulators and
// 64 inlined epilogues made SwiftShader's JIT take 1.3-3.2 s per 8x8 kernel (the MLP's first step 5-10 s), the
// array and the loop 0.1-0.4 s, and their kernels ran no slower (docs/perf-log/W12b.md).
//
// Why: a CPU implementation runs the invocations of a workgroup as SIMD lanes and fibers; each barrier switches
// every fiber of the workgroup, and the shared tile is ordinary memory behind the same caches as the storage buffers,
// so the shared-memory kernel pays its staging and barriers for nothing (docs/perf-log/W4.md: its per-kernel
// profile on SwiftShader). In WGSL the loads are not clamped (the language bounds every storage access). The tile's
// invocation order: n fastest (TILES_N tiles per row of tiles), then m; batch
// from the workgroup id's z, as the factor functions expect.
#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "compute_emit.h"
#include "contraction.h"

namespace sg::compute {

namespace {

/// Invocations per workgroup of a register-tiled kernel (SIMD lanes times a few fibers on a CPU implementation).
constexpr int kInvocations = 64;

/// Workgroups a cpu-plan dispatch should have at least (over all batches), and the fewest invocations a workgroup
/// is cut to for them (cpu_plan_workgroup_size).
constexpr int kMinWorkgroups = 4;
constexpr int kMinInvocations = 16;

/// Outputs per invocation along each side of a register tile (at most; a power of two). Every factor load of a lane
/// whose address is not a compile-time constant is a per-lane gather on SwiftShader (four scalar loads, each behind
/// a branch on the lane's mask), and the multiply-adds are SIMD: an 8x8 tile loads 16 values per 64 multiply-adds
/// where a 4x4 one loads 8 per 16 (SGEMM 512 on SwiftShader 1.5-2.3x faster; 16x8, 128 accumulators, no faster
/// again: docs/perf-log/W8.md).
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
/// and 64 epilogues made SwiftShader compile one conv kernel ~9 s longer (docs/perf-log/W8.md).
constexpr int64_t kMaxFactorNodesFor8x8 = 32;

/// Steps of k per loop iteration in a long single-variable reduction of the C kernels (cpu-simd, wasm), their products
/// summed before one update of each sum. WGSL no longer takes them: W16 measured SwiftShader's x.W1^T of the MLP b=128
/// (K = 784, 16x8 subgroup tiles) at 4.2-5.8 ms with 4 steps against 5.4-7.6 without, but Chromium 156's SwiftShader
/// ran it in 4.9 ms (min of 10; median 5.0) without against 6.4 (8.6) with, and charlm's long contractions (K = 256
/// and 2048) in 13-25 ms instead of 20-34 but for the smallest (64x27 outputs: 2.1 -> 3.7 ms; docs/perf-log/W21.md).
constexpr int kUnrollSteps = 4;
constexpr int64_t kUnrollMinK = 256;

/// Lanes of a subgroup that share a factor's loads (ComputeLimits::broadcast_lanes; SwiftShader's subgroup size).
constexpr int kLanes = 4;

/// A register tile with subgroup-shared loads: tm x tn outputs per invocation, and which side the 4 lanes share.
struct TileShape {
  int tm, tn;
  bool rows_shared;  // lanes share the rows (A's loads), each has its own columns; else the other way round
};

/// Relative costs of a register tile's step on SwiftShader, per lane, in units of one storage load (a per-lane
/// gather, about 30 cycles): a factor value costs a load plus 0.1 per further IR node of its expression (index math,
/// a padded window's bounds), a multiply-add into the private sums 0.25 (the sums live in memory: SwiftShader merges
/// every store under the lanes' mask), a broadcast 0.1. Fitted to the MLP b=128's contractions and the CNN's convs
/// (docs/perf-log/W13a.md: x.W1^T with no factor loads 5.1 ms of 12.8, without B's loads 8.7 ms).
constexpr double kLoadCost = 1.0, kNodeCost = 0.1, kMacCost = 0.25, kBroadcastCost = 0.1;

/// Sharing the columns must be this much cheaper than sharing the rows to be chosen: at equal cost the rows, whose
/// lanes' tiles lie side by side along n (the MLP b=128's dW1: rows shared 5.6 ms, columns shared 7.3 ms, without
/// subgroups 7.0 ms; docs/perf-log/W13a.md).
constexpr double kColsBias = 0.9;

double factor_cost(int64_t nodes) { return kLoadCost + kNodeCost * static_cast<double>(std::max<int64_t>(nodes - 1, 0)); }

/// The register tile of a contraction whose lanes share one factor's loads (ComputeLimits::broadcast_lanes): the 4
/// lanes of a subgroup take 4 tiles side by side along their own side and share the other one; each lane loads 1 of
/// every 4 values of the shared factor per step and subgroupBroadcast passes them on. Picked among 16/8/4 along the
/// shared side and 8/4/2 along the own side, either side shared, by the step cost per output (kLoadCost...: loads,
/// broadcasts, multiply-adds, and the outputs computed in vain: partial tiles, the own side padded to whole subgroups), preferring grids of at
/// least a workgroup's worth of tiles; nullopt where the tile without subgroups (tm x tn) costs no more. A large own
/// factor (a conv's im2col) gets at most 4 copies per step (SwiftShader's compile time, Run W8). The MLP b=128's
/// x.W1^T and dW1 get 16x8 (4 + 8 loads per 128 multiply-adds against 16 per 64 without subgroups: 12.8 -> 8.8 ms
/// and 13.7 -> 10.3 ms, SGEMM 512 114 -> 70 ms; docs/perf-log/W13a.md).
std::optional<TileShape> subgroup_tile_shape(const Contraction& c, int64_t nodes_a, int64_t nodes_b, int tm, int tn) {
  const double cost_a = factor_cost(nodes_a), cost_b = factor_cost(nodes_b);
  auto tiles_of = [](int64_t extent, int r) { return (extent + r - 1) / r; };
  std::optional<TileShape> best;
  double best_cost = 0;
  bool best_full = false;  // a grid of >= kInvocations tiles
  int64_t best_tiles = 0;
  for (bool rows : {true, false}) {
    const int64_t shared_extent = rows ? c.M : c.N, own_extent = rows ? c.N : c.M;
    const double shared_cost = rows ? cost_a : cost_b, own_cost = rows ? cost_b : cost_a;
    const int64_t own_nodes = rows ? nodes_b : nodes_a;
    for (int ts : {16, 8, 4})
      for (int to : {8, 4, 2}) {
        if (ts > reg_extent(shared_extent, 16) || to > reg_extent(own_extent, 8)) continue;
        if (own_nodes > kMaxFactorNodesFor8x8 / 2 && to > 4) continue;
        const int64_t own_tiles = tiles_of(own_extent, to), padded = tiles_of(own_tiles, kLanes) * kLanes;
        const int64_t tiles = tiles_of(shared_extent, ts) * padded;
        const bool full = tiles >= kInvocations;
        const double step = ts / kLanes * shared_cost + ts * kBroadcastCost + to * own_cost + ts * to * kMacCost;
        // per output computed, times the computed outputs per needed one (partial tiles, padded subgroups)
        const double cost = step / (ts * to) * static_cast<double>(padded * to) / static_cast<double>(own_extent) *
                            static_cast<double>(tiles_of(shared_extent, ts) * ts) / static_cast<double>(shared_extent);
        // a full grid first; among grids short of one, more tiles first (SwiftShader runs the SIMD groups of a
        // workgroup on several threads: a conv weight gradient of 8x9 outputs ran 2x slower in 4 tiles than in 6)
        const bool better = !best || (full && !best_full) ||
                            (full == best_full && (full || tiles == best_tiles ? cost < best_cost * (rows ? 1.0 : kColsBias)
                                                                               : tiles > best_tiles));
        if (better) {
          best = rows ? TileShape{ts, to, true} : TileShape{to, ts, false};
          best_cost = cost, best_full = full, best_tiles = tiles;
        }
      }
  }
  const int64_t plain_tiles = tiles_of(c.M, tm) * tiles_of(c.N, tn);
  const double plain = (tm * cost_a + tn * cost_b + tm * tn * kMacCost) / (tm * tn) *
                       static_cast<double>(tiles_of(c.M, tm) * tm) / static_cast<double>(c.M) *
                       static_cast<double>(tiles_of(c.N, tn) * tn) / static_cast<double>(c.N);
  if (!best || (plain <= best_cost && (plain_tiles >= kInvocations || !best_full)) ||
      (!best_full && plain_tiles > best_tiles))
    return std::nullopt;
  return best;
}

/// `x` in parentheses unless it already is parenthesised as a whole (`(tile & 127)`).
std::string paren(const std::string& x) { return x.front() == '(' && x.back() == ')' ? x : "(" + x + ")"; }

/// The register tile without subgroups (tm, tn).
std::pair<int, int> plain_tile_shape(const Contraction& c, int64_t nodes_a, int64_t nodes_b) {
  auto count = [&](int64_t extent, int r) { return (extent + r - 1) / r; };
  // kRegisterTile per side where that leaves a workgroup's worth of tiles, else 4: with fewer tiles than lanes and
  // fibers, larger tiles only idle SIMD lanes (the digits MLP's 16-row steps, a conv weight gradient of 8x9
  // outputs) (and factors small enough to be repeated 8 times per iteration: kMaxFactorNodesFor8x8)
  int tm = reg_extent(c.M, kRegisterTile), tn = reg_extent(c.N, kRegisterTile);
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
  return {tm, tn};
}

/// A register tile's sides as its reduction loop reads them: registers per side, whether the subgroup's lanes share
/// that side's loads (one load per lane, subgroupBroadcast for the rest), and each register's coordinate arguments
/// of the factor functions.
struct TileSides {
  int tm, tn;
  bool a_shared, b_shared;
  std::vector<std::string> row_args, col_args;
};

/// The loop over the reduction's index k (its counters' declarations, the loop with every step's factor values and
/// the sums' updates, its closing brace); `steps` is set to the steps of k per iteration (kUnrollSteps or 1).
std::string reduction_loop(const Contraction& c, const TileSides& t, const Lang& lang, int& steps) {
  std::string loop;
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
    loop += "  " + lang.lets(LType::Int, zeros, true) + "  // the loop variables of k, stepped with it\n";
    step = in + fmt::format("{0} += 1;", loop_vars.back());
    for (size_t i = loop_vars.size() - 1; i > 0; --i) {
      const std::string carry = fmt::format("carry{}", i), &v = loop_vars[i], &outer = loop_vars[i - 1];
      step += fmt::format(" {} {} = {}; {} = {};", lang.let(LType::Bool, carry, fmt::format("{} == {}", v, extents[i])), v,
                          lang.select(carry, "0", v), outer, lang.select(carry, outer + " + 1", outer));
    }
    step += "\n";
  }
  // a long reduction over one loop variable: kUnrollSteps steps per iteration (steps u = 0..U-1 at k = kk U + u)
  const int U = !lang.wgsl() && !counters && loop_vars.size() == 1 && c.K >= kUnrollMinK && c.K % kUnrollSteps == 0
                    ? kUnrollSteps : 1;
  if (U > 1) {
    loop += "  " + lang.for_open("kk", "0", std::to_string(c.K / U)) + "  // " + std::to_string(U) +
            " steps of k per iteration, their products summed before each update of a sum\n";
  } else {
    loop += "  " + lang.for_open("k", "0", std::to_string(c.K)) + "\n";
    if (!counters) loop += split_loop(c.reduce, "k", 2, lang);
  }
  // the names of step u's values (a3_1) and loop variable; plain (a3, r0) without unrolling
  auto stepped = [&](const std::string& name, int u) { return U > 1 ? fmt::format("{}_{}", name, u) : name; };
  auto call = [&](const char* fn, const std::string& coords, int u) {
    std::string args = U > 1 ? ", " + stepped(loop_vars[0], u) : loop_args;
    return lang.call(fn, coords + (coords.empty() ? args.substr(2) : args));
  };
  // a factor's values of step u for registers 0..regs-1: loaded, or (the shared side) each lane loads one of every 4
  // and the others come from its subgroup
  // C: the values in arrays a[step][register], b[step][register] and the sums' updates as one loop nest over the tile,
  // which C compilers vectorise along n (gcc 12 -O2: dW1 of the MLP b=128 3.2 ms, 14x faster than the 64 scalar
  // updates, whose SLP vectorisation shuffled every clamped load's index, and compiled 10x faster); the same
  // products in the same order
  const bool arrays = lang.c();
  auto factor_values = [&](const char* reg, const char* fn, const std::vector<std::string>& args, int regs, bool shared,
                           int u) {
    std::string s;
    if (arrays) {
      for (int i = 0; i < regs; ++i) s += in + fmt::format("{}[{}][{}] = {};", reg, u, i, call(fn, args[i], u)) + "\n";
      return s;
    }
    if (!shared) {
      for (int i = 0; i < regs; ++i)
        s += in + lang.let(LType::Float, stepped(fmt::format("{}{}", reg, i), u), call(fn, args[i], u)) + "\n";
      return s;
    }
    for (int t = 0; t < regs / kLanes; ++t)
      s += in + lang.let(LType::Float, stepped(fmt::format("{}_lane{}", reg, t), u), call(fn, args[t], u)) + "\n";
    for (int i = 0; i < regs; ++i)
      s += in + lang.let(LType::Float, stepped(fmt::format("{}{}", reg, i), u),
                         lang.subgroup_broadcast(stepped(fmt::format("{}_lane{}", reg, i / kLanes), u), i % kLanes)) + "\n";
    return s;
  };
  if (arrays) loop += in + fmt::format("float a[{}][{}], b[{}][{}];", U, t.tm, U, t.tn) + "\n";
  for (int u = 0; u < U; ++u) {
    if (U > 1) loop += in + lang.let(LType::Int, stepped(loop_vars[0], u), fmt::format("kk * {} + {}", U, u)) + "\n";
    loop += factor_values("a", "factor_a", t.row_args, t.tm, t.a_shared, u);
    loop += factor_values("b", "factor_b", t.col_args, t.tn, t.b_shared, u);
  }
  // a product of the two factors; a side of masks only (1 or 0) selects the other factor instead of multiplying it
  // (Contraction::a_mask_only: a NaN or infinity it excludes stays out of the sum)
  const std::string zero = lang.float_literal(0.0);
  auto product = [&](const std::string& a, const std::string& b) {
    if (c.a_mask_only) return lang.select(fmt::format("{} != {}", a, zero), b, zero);
    if (c.b_mask_only) return lang.select(fmt::format("{} != {}", b, zero), a, zero);
    return fmt::format("{} * {}", a, b);
  };
  // the U products of a sum added pairwise ((p0 + p1) + (p2 + p3)), then to the sum
  auto products = [&](int i, int j) {
    std::vector<std::string> terms;
    for (int u = 0; u < U; ++u)
      terms.push_back(arrays ? product(fmt::format("a[{}][ti]", u), fmt::format("b[{}][tj]", u))
                             : product(stepped(fmt::format("a{}", i), u), stepped(fmt::format("b{}", j), u)));
    while (terms.size() > 1) {
      std::vector<std::string> next;
      for (size_t x = 0; x + 1 < terms.size(); x += 2) next.push_back(fmt::format("({} + {})", terms[x], terms[x + 1]));
      if (terms.size() % 2) next.push_back(terms.back());
      terms = std::move(next);
    }
    return U > 1 ? terms[0].substr(1, terms[0].size() - 2) : terms[0];
  };
  // (the rows unrolled: gcc 12 -O2 then keeps the sums in vector registers, not in memory; SGEMM 1024 1.2-1.7x,
  // the MLP's x.W1^T 1.4x; clang takes the same pragma)
  if (arrays)
    loop += fmt::format("#pragma GCC unroll {}\n", t.tm) + in +
            fmt::format("for (int ti = 0; ti < {0}; ++ti) for (int tj = 0; tj < {1}; ++tj) acc[ti * {1} + tj] += {2};",
                        t.tm, t.tn, products(0, 0)) + "\n";
  for (int i = 0; i < t.tm && !arrays; ++i) {
    loop += in.substr(1);
    for (int j = 0; j < t.tn; ++j) loop += fmt::format(" acc[{}] += {};", i * t.tn + j, products(i, j));
    loop += "\n";
  }
  loop += step + "  }\n";
  steps = U;
  return loop;
}

}  // namespace

int cpu_plan_workgroup_size(int64_t invocations, int64_t batch, const ComputeLimits& limits) {
  int local = std::min(kInvocations, limits.max_workgroup_invocations);
  while (local > kMinInvocations && (invocations + local - 1) / local * batch < kMinWorkgroups) local /= 2;
  return local;
}

std::optional<ComputeKernel> emit_register_tiled(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                 const Lang& lang, std::string* not_tiled) {
  const Shape shape = plan.values[k.output()].stored_shape();
  auto found = find_contraction(k, shape, /*where_masks=*/true);
  if (!found) return std::nullopt;
  const Contraction& c = *found;
  auto count = [&](int64_t extent, int r) { return (extent + r - 1) / r; };
  const int64_t nodes_a = tree_size(c.factor_a), nodes_b = tree_size(c.factor_b);
  int tm = 0, tn = 0;
  std::tie(tm, tn) = plain_tile_shape(c, nodes_a, nodes_b);
  // with subgroups of 4 (the cpu-subgroups plan), a tile whose lanes share one factor's loads where that costs less
  const std::optional<TileShape> t = lang.wgsl() && limits.broadcast_lanes == kLanes
                                         ? subgroup_tile_shape(c, nodes_a, nodes_b, tm, tn) : std::nullopt;
  const bool sg = t.has_value();
  if (sg) tm = t->tm, tn = t->tn;
  const bool rows_shared = sg && t->rows_shared;
  // the tile grid: with subgroups the own side's tiles run fastest and are padded to whole subgroups, so that the 4
  // lanes of a subgroup are 4 tiles of one block of the shared side
  int64_t tiles_m = count(c.M, tm), tiles_n = count(c.N, tn);
  int64_t& own_tiles = rows_shared ? tiles_n : tiles_m;
  const bool padded = sg && own_tiles % kLanes != 0;  // tiles past the own side's end: they read its last row/column
  if (padded) own_tiles = count(own_tiles, kLanes) * kLanes;
  const int64_t tiles = tiles_m * tiles_n;
  const int local = cpu_plan_workgroup_size(tiles, c.batch, limits);
  const int64_t gx = (tiles + local - 1) / local;
  if (gx > limits.max_workgroup_count || c.batch > limits.max_workgroup_count) {
    if (not_tiled)
      *not_tiled = fmt::format("a contraction (M={}, N={}, K={}, batch {}), not register-tiled: a grid of {}x1x{} "
                               "workgroups, more than max_workgroup_count {}", c.M, c.N, c.K, c.batch, gx, c.batch,
                               limits.max_workgroup_count);
    return std::nullopt;
  }
  ComputeKernel ck;
  ck.strategy = sg ? "register-tiled-subgroups" : "register-tiled";
  ck.subgroup_size = sg ? kLanes : 0;
  ck.local_size = {static_cast<uint32_t>(local), 1, 1};
  ck.workgroups = {static_cast<uint32_t>(gx), 1, static_cast<uint32_t>(c.batch)};
  ck.shared_bytes = 0;
  std::set<int> loaded;
  MathHelpers helpers;
  // unguarded factors: k < K in the loop, and the rows / columns of a partial tile read the last one again (their
  // sums are discarded by store_tile's guard), so no load leaves the tile's range and no call branches
  // C: a factor whose indices are in range by construction loads unclamped (the clamps kept gcc from merging a
  // register row's loads into vector loads: the MLP b=128's dW1 1.99 -> 0.95 ms, x.W1^T 1.40 -> 0.92 ms)
  std::set<int> unclamped;
  std::string fns = tile_functions(plan, k, c, shape, loaded, helpers, lang, false, true, &unclamped);

  // with subgroups no invocation returns before the loop (every lane of a subgroup must reach each broadcast): one
  // past the grid computes the last tile again and stores nothing
  const bool spare = sg && gx * local > tiles;
  const std::string gid = lang.builtin(Builtin::GlobalInvocationId, 0);
  std::string body = "  " + lang.let(LType::Int, "tile", spare ? fmt::format("min({}, {})", gid, tiles - 1) : gid) + "\n";
  if (!sg) body += "  " + lang.if_then(fmt::format("tile >= {}", tiles), "return;") + "\n";
  const bool m_fastest = sg && !rows_shared;  // the own side's tiles run fastest
  const std::string slow = lang.div_const("tile", m_fastest ? tiles_m : tiles_n),
                    fast = paren(lang.mod_const("tile", m_fastest ? tiles_m : tiles_n));
  body += "  " + lang.lets(LType::Int, {{"m0", fmt::format("{} * {}", m_fastest ? fast : slow, tm)},
                                       {"n0", fmt::format("{} * {}", m_fastest ? slow : fast, tn)}}) + "\n";
  if (sg) body += "  " + lang.let(LType::Int, "lane", lang.subgroup_lane()) + "\n";
  body += "  " + lang.local_array("acc", tm * tn, fmt::format("the register tile's sums, row-major ({}x{})", tm, tn)) + "\n";
  // the rows and columns each register reads: m0 + i, or the side's last one past its end (a partial tile, or a
  // padded one of the subgroup grid), split into output coordinates here, once: the factor calls in the loop do no
  // division by a constant for them (SwiftShader's JIT keeps such a division a division and does not move it out of
  // the loop, Run W1b). The shared side of a subgroup tile: lane l reads m0 + 4 t + l for t < tm / 4.
  auto side = [&](const char* v, const char* origin, int regs, int64_t extent, const std::vector<int>& dims,
                  bool shared, bool padded) {
    std::vector<std::pair<std::string, std::string>> at;
    const int n = shared ? regs / kLanes : regs;
    for (int i = 0; i < n; ++i) {
      std::string e = shared ? fmt::format("{} + {}lane", origin, i ? fmt::format("{} + ", kLanes * i) : "")
                             : i ? fmt::format("{} + {}", origin, i) : std::string(origin);
      if ((extent % regs != 0 && (shared || i > 0)) || padded) e = fmt::format("min({}, {})", e, extent - 1);
      at.emplace_back(fmt::format("{}{}", v, i), e);
    }
    std::string s = "  " + lang.lets(LType::Int, at) + "\n";
    std::vector<std::string> args(n);
    for (int i = 0; i < n; ++i) {
      const std::string reg = fmt::format("{}{}", v, i), prefix = reg + "_i";
      s += split_dims(shape, dims, reg, prefix.c_str(), 1, lang);
      for (int d : dims) args[i] += fmt::format("{}{}{}", args[i].empty() ? "" : ", ", prefix, d);
    }
    return std::pair{s, args};
  };
  auto [rows, row_args] = side("row", "m0", tm, c.M, c.m_dims, rows_shared, padded && !rows_shared);
  auto [cols, col_args] = side("col", "n0", tn, c.N, c.n_dims, sg && !rows_shared, padded && rows_shared);
  body += rows + cols;
  int U = 1;  // steps of k per iteration
  body += reduction_loop(c, TileSides{tm, tn, rows_shared, sg && !rows_shared, row_args, col_args}, lang, U);
  // one epilogue loop (acc read at a run-time index: 64 gathers per invocation, against the K loop's 16 per k)
  const std::string epilogue = lang.for_stmt("e", "0", std::to_string(tm * tn), 1,
                                             lang.call("store_tile", fmt::format("m0 + {}, n0 + {}, acc[e]", lang.div_const("e", tn),
                                                                                 paren(lang.mod_const("e", tn)))) + ";");
  body += "  " + (spare ? lang.if_then(fmt::format("{} < {}", gid, tiles), epilogue) : epilogue) + "\n";
  body += "}\n";

  std::string src = (sg ? lang.subgroups_enable() : std::string()) + kernel_header(plan, k, ck.strategy, lang);
  src += fmt::format("// contraction: C[batch][m][n] = sum_k A[m][k] * B[k][n], M = {}, N = {}, K = {}, batch {}\n", c.M,
                     c.N, c.K, c.batch);
  src += fmt::format("// register tiles of {}x{} outputs per invocation ({}x{} tiles, {} fastest), factors read from the "
                     "buffers, no workgroup memory; {} workgroups of {} per batch{}\n",
                     tm, tn, tiles_m, tiles_n, m_fastest ? "m" : "n", gx, local,
                     U > 1 ? fmt::format("; k in {} steps per iteration", U) : std::string());
  if (sg)
    src += fmt::format("// the {} lanes of a subgroup are {} tiles side by side: they share the {} ({}'s loads), each lane "
                       "loads 1 of 4 per step and subgroupBroadcast passes it on\n", kLanes, kLanes,
                       rows_shared ? "rows" : "columns", rows_shared ? "factor_a" : "factor_b");
  src += lang.workgroup_size_layout(local, 1);
  // WGSL: loads unclamped (every index is in range or masked by the factor's own select, and WGSL bounds every
  // storage access anyway: the clamp was a second bound per load, about a third of an SGEMM's time on SwiftShader)
  src += buffer_declarations(plan, k, loaded, lang, !lang.wgsl(), &unclamped);
  src += lang.helpers(helpers, fns + body);
  src += fns;
  src += lang.entry_open(local, 1, fns + body) + body;
  ck.source = std::move(src);
  return ck;
}

}  // namespace sg::compute
