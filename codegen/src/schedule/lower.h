// shadergrad — lowering: graph nodes to kernel IR (private to codegen/src/schedule*).
//
// The Lowerer turns the nodes of one fusion group into one KExpr per member, evaluated at the kernel's element
// coordinates i0, i1, ... (the iteration domain: the first member's shape, reversed for a value stored
// transposed). Invariants:
//  - a read of a materialised node (one with a value id in `value_of`) becomes a Load of that value through its
//    storage (transposed values are read at swapped coordinates); every other node is inlined, i.e. lowered again
//    at the reader's coordinates (memoised per node and coordinates, so shared subtrees stay shared);
//  - Load slots are the kernel's inputs in first-read order (after any `inputs` given: earlier domain blocks);
//  - reduction loop variables are r0, r1, ... in lowering order, so a program lowers to the same KExprs every run;
//  - a member read by another member at its own element is computed once; at another element the lowering
//    throws NotIdentity (such members cannot share a kernel).
#pragma once

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sg/kernel_ir.h"
#include "sg/schedule.h"

namespace sg::sched {

/// The flat (row-major) index of coordinates idx of `shape` (size-1 axes skipped).
KExprPtr linearize(const std::vector<KExprPtr>& idx, ShapeRef shape);
/// The coordinates of flat index `flat` of `shape`.
std::vector<KExprPtr> delinearize(const KExprPtr& flat, ShapeRef shape);

/// Thrown by lower_group when a member of the kernel being built is read at another element than its own
/// (multi-output fusion is then not possible).
struct NotIdentity {};

/// Outputs of one kernel share the iteration domain: equal shapes up to size-1 axes.
bool same_domain(ShapeRef a, ShapeRef b);

/// A fusion group lowered to kernel IR.
struct Lowered {
  std::vector<KExprPtr> exprs;   ///< per member
  std::vector<int> inputs;       ///< value ids read, in Load slot order
  std::vector<NodePtr> inlined;  ///< nodes computed (members included), in lowering order
};

/// Lowers `members` (topological order, same domain) as the outputs of one kernel at shared coordinates
/// i0.. of shape `domain` (default: members[0]'s). Throws NotIdentity if a member is read at another element
/// than its own. `inputs`: value ids already bound to sampler slots (earlier blocks of the kernel); the result's
/// inputs start with them. `transposed`: materialised nodes stored transposed.
Lowered lower_group(const std::vector<NodePtr>& members, const std::unordered_map<const Node*, int>& value_of,
                    const Node* domain = nullptr, const std::unordered_set<const Node*>* transposed = nullptr,
                    std::vector<int> inputs = {});

}  // namespace sg::sched
