// shadergrad — range-aware simplification of integer division and modulo in kernel IR (private to codegen).
//
// Index expressions built by lowering (linearize / delinearize of permutes, reshapes, one-hots, pads) divide flat
// indices by the extents they were multiplied by: (r0 * 1728 + i2 * 27 + i1) / 27 is r0 * 64 + i2 when i1 is in
// [0, 27). CPU implementations of the shading languages (SwiftShader, llvmpipe) divide lane by lane, so every such
// division left in a loop costs. ksimplify_index rewrites them from interval ranges of the integer variables:
// output coordinates (given by the caller), loop variables (their Reduce's extents) and, inside the taken branch of
// an ISelect, the bounds its condition checks (a padded operand's index is only read where the pad condition holds).
// Every rewrite keeps the value exact for every variable in its range under truncating division (C, GLSL, WGSL):
//   a / c -> 0 and a % c -> a            where a is in [0, c)
//   a % c -> a - q * c                   where a is in [q * c, (q + 1) * c)
//   an IDiv / IMod of one value -> that value (a / c where a is in [q * c, (q + 1) * c))
//   (x / b) / c -> x / (b * c)           where x >= 0
//   (M + R) / c -> M / c + R / c         where c divides every term of M, a >= 0 and R >= 0
//   (M + R) % c -> R % c                 same conditions
//   (x % m) % c -> x % c                 where c divides m and x >= 0
// Nothing is rewritten where a range is unknown or may be negative.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sg/kernel_ir.h"

namespace sg {

/// Inclusive bounds of an integer variable.
using KVarRange = std::pair<int64_t, int64_t>;

/// `roots` with their integer divisions and modulos by positive constants simplified (see the file comment).
/// `free_vars`: the ranges of the variables no Reduce of `roots` binds (output coordinates); loop variables get
/// [0, extent) of every Reduce binding them (their hull where one name is bound by several). Shared subtrees stay
/// shared where their context is the same.
std::vector<KExprPtr> ksimplify_index(const std::vector<KExprPtr>& roots, const std::map<std::string, KVarRange>& free_vars);

}  // namespace sg
