// Tile configurations of tiled contractions: the heuristic default, the autotuner's candidate set, the text form.
//
// Heuristic (default_tile_config): 16x16 invocations of 8x4 outputs (128x64 tiles) on GPUs, 8x8 of 4x4 on CPU
// devices (fewer invocations and barriers per output); halved where the device allows fewer invocations, and per
// dimension where M or N is small. On GPUs the tile then shrinks (register tile first, down to 2x2 outputs per
// invocation, then invocations, down to 8x8) until the dispatch has kGpuTargetWorkgroups workgroups or cannot shrink
// further; GPU tiles read shared memory as vec4, prefetch the next chunk into registers and walk the tile grid in
// groups of 8 tile rows (the usual choices of hand-written GPU SGEMM kernels; whether each pays on a device is what
// the autotuner's candidates measure).
// Candidates (candidate_configs, at most 20): the heuristic first; the same shape without vec4 / prefetch /
// grouping (the kernel of before those options); the CPU heuristic's plain 32x32 tiles (on the H200 the fastest at
// N=4096 before these options: 19.6 against 4.8 TFLOP/s); the heuristic with k rotation, with chunks of 16 and 32
// (with and without k rotation); then a fixed list of tile shapes with chunks of 16, then of 8. Each is fitted to the device's limits and
// kept only when its tile is not far larger than the contraction.
#include <algorithm>
#include <charconv>
#include <span>

#include <fmt/format.h>

#include "compute_emit.h"
#include "contraction.h"

namespace sg {

std::string TileConfig::str() const {
  return fmt::format("{}x{}.{}x{}.k{}.g{}{}{}{}", tx, ty, tm, tn, bk, group_m, vec4 ? ".v4" : "", prefetch ? ".pf" : "",
                     k_rotate ? ".kr" : "");
}

std::optional<TileConfig> parse_tile_config(std::string_view s) {
  TileConfig t;
  auto num = [&](int& out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc() || out < 1 || out > 4096) return false;
    s.remove_prefix(static_cast<size_t>(p - s.data()));
    return true;
  };
  auto lit = [&](std::string_view l) {
    if (s.substr(0, l.size()) != l) return false;
    s.remove_prefix(l.size());
    return true;
  };
  if (!(num(t.tx) && lit("x") && num(t.ty) && lit(".") && num(t.tm) && lit("x") && num(t.tn) && lit(".k") && num(t.bk) &&
        lit(".g") && num(t.group_m)))
    return std::nullopt;
  t.vec4 = lit(".v4");
  t.prefetch = lit(".pf");
  t.k_rotate = lit(".kr");
  if (!s.empty()) return std::nullopt;
  return t;
}

namespace compute {

namespace {

/// Workgroups a GPU contraction should launch at least: about one per multiprocessor of a large GPU (the H200 has
/// 132), so that a small matmul (an MLP layer of batch 128: one 128x128 tile) does not run on one multiprocessor.
constexpr int64_t kGpuTargetWorkgroups = 128;

int64_t groups_of(const TileConfig& t, const Contraction& c) {
  return ((c.M + t.bm() - 1) / t.bm()) * ((c.N + t.bn() - 1) / t.bn()) * c.batch;
}

}  // namespace

TileConfig fit_tile_config(TileConfig t, const ComputeLimits& l, const Contraction& c) {
  t.bk = static_cast<int>(std::min<int64_t>(t.bk, c.K));
  while (t.bk > 1 && tile_shared_bytes(t, c) > l.max_shared_bytes) t.bk /= 2;
  const int64_t tiles = ((c.M + t.bm() - 1) / t.bm()) * ((c.N + t.bn() - 1) / t.bn());
  if (tiles > l.max_workgroup_count || t.group_m >= (c.M + t.bm() - 1) / t.bm()) t.group_m = 1;
  if (c.K <= t.bk || (c.M + t.bm() - 1) / t.bm() < 2) t.k_rotate = false;  // one chunk, or one tile row
  return t;
}

TileConfig default_tile_config(const ComputeLimits& l, const Contraction& c) {
  TileConfig t;
  // GPUs: 8x4 register tiles (128 x 64 workgroup tiles). Measured on the H200 (docs/perf-log/12a.md, each
  // configuration forced in its own process): 16x16.8x4.k8.g8.v4.pf was the fastest of ten at N=1024, 2048, 3072 and
  // 4096 (0.077 / 0.473 / 1.539 / 12.35 ms against 0.148 / 0.507 / 1.838 / 18.32 ms for 8x8, the heuristic before).
  if (l.cpu_device) t = {.tx = 8, .ty = 8, .tm = 4, .tn = 4, .bk = 16};
  else t.tn = 4;
  while (t.threads() > l.max_workgroup_invocations && (t.tx > 1 || t.ty > 1)) (t.ty >= t.tx ? t.ty : t.tx) /= 2;
  auto shrink = [](int& tile, int& threads, int64_t extent) {
    while (tile > 1 && int64_t{tile} * threads >= 2 * extent) tile /= 2;
    while (threads > 1 && int64_t{tile} * threads >= 2 * extent) threads /= 2;
  };
  shrink(t.tm, t.ty, c.M);
  shrink(t.tn, t.tx, c.N);
  while (!l.cpu_device && groups_of(t, c) < kGpuTargetWorkgroups) {
    if (t.tm >= t.tn && t.tm > 2 && t.bm() > 16) t.tm /= 2;
    else if (t.tn > 2 && t.bn() > 16) t.tn /= 2;
    else if (t.ty >= t.tx && t.ty > 8 && t.bm() > 16) t.ty /= 2;
    else if (t.tx > 8 && t.bn() > 16) t.tx /= 2;
    else break;
  }
  if (!l.cpu_device) t.group_m = 8, t.vec4 = true, t.prefetch = true;
  return fit_tile_config(t, l, c);
}

std::vector<TileConfig> candidate_configs(const ComputeLimits& l, const Contraction& c) {
  std::vector<TileConfig> out;
  auto add = [&](TileConfig t) {
    if (t.threads() > l.max_workgroup_invocations) return;
    if (t.bm() > 2 * std::max<int64_t>(c.M, 16) || t.bn() > 2 * std::max<int64_t>(c.N, 16)) return;  // mostly idle
    t = fit_tile_config(t, l, c);
    if (tile_shared_bytes(t, c) > l.max_shared_bytes) return;
    if (std::find(out.begin(), out.end(), t) == out.end() && out.size() < 20) out.push_back(t);
  };
  const TileConfig h = default_tile_config(l, c);
  out.push_back(h);
  TileConfig v = h;
  v.vec4 = v.prefetch = false, v.group_m = 1;  // the kernel of before these options
  add(v);
  add({.tx = 8, .ty = 8, .tm = 4, .tn = 4, .bk = 16});  // the CPU heuristic's tiles, plain
  v = h, v.k_rotate = true;
  add(v);
  for (int bk : {16, 32}) v = h, v.bk = bk, add(v), v.k_rotate = true, add(v);
  struct Shape {
    int tx, ty, tm, tn;
  };
  static constexpr Shape kGpu[] = {{16, 16, 8, 8}, {16, 16, 4, 8}, {16, 16, 8, 4}, {16, 16, 4, 4},
                                   {8, 8, 4, 4},   {16, 16, 2, 2}, {8, 8, 2, 2}};
  static constexpr Shape kCpu[] = {{8, 8, 4, 4}, {8, 8, 8, 8}, {4, 4, 8, 8}, {16, 16, 4, 4}, {8, 8, 2, 2}};
  const int group = l.cpu_device ? 1 : 8;
  for (const Shape& s : l.cpu_device ? std::span<const Shape>(kCpu) : std::span<const Shape>(kGpu))
    add({.tx = s.tx, .ty = s.ty, .tm = s.tm, .tn = s.tn, .bk = 16, .group_m = group, .vec4 = true, .prefetch = true});
  for (const Shape& s : l.cpu_device ? std::span<const Shape>(kCpu) : std::span<const Shape>(kGpu))
    add({.tx = s.tx, .ty = s.ty, .tm = s.tm, .tn = s.tn, .bk = 8, .group_m = group, .vec4 = true, .prefetch = true});
  return out;
}

}  // namespace compute

}  // namespace sg
