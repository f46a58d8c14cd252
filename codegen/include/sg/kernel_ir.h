// shadergrad — the kernel IR: what one kernel computes for one output element.
//
// A kernel evaluates, for every element of its output (iteration domain = the output's shape), one
// expression tree (KExpr). Leaves are integer output coordinates (Var "i0".."iN"), loop variables of
// reductions (Var "r0".."rN"), constants, and Loads of materialised inputs at a flat (row-major) element
// index. Interior nodes are float math (the same SOp codes as Map bodies), integer index math, and
// Reduce nodes: a loop nest over their own variables whose body is folded with sum/max/min/argmax.
// Fusion is substitution: an inlined producer's expression replaces the Load that would have read it.
// The emitters (GLSL 4.50 fragment for ES 3.00, GLSL 4.50 compute for ES 3.10) print this tree; repeated
// subtrees (same pointer) are emitted once as locals.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sg/graph.h"

namespace sg {

enum class KType : uint8_t { Int, Float };

enum class KOp : uint8_t {
  IntConst,    ///< ivalue
  FloatConst,  ///< fvalue (may be +-inf)
  Var,         ///< integer variable `name` (output coordinate or loop variable)
  FMath,       ///< float op `sop` over float operands a, b, c (same semantics as Map bodies)
  IAdd, ISub, IMul, IDiv, IMod, IMin, IMax,  ///< integer arithmetic (operands non-negative where it matters)
  ILt, ILe, IEq, IGe, IAnd,                   ///< integer comparisons / logical and (result Int 0/1)
  ToFloat,     ///< int -> float
  FToInt,      ///< float -> int (labels stored as exact floats)
  ISelect,     ///< a (Int cond) != 0 ? b : c   (float or int branches)
  Load,        ///< float = input[input] at flat element index a (Int)
  Reduce,      ///< loop over loop_vars x extents; fold body `a` with `reduce` (ArgMax: linear iteration index)
  RandomUniform,  ///< float = philox_uniform(seed, stream, step b (Int), element index a (Int)) (sg/philox.h),
                  ///< printed as a call of the math helper sg_philox_uniform (codegen/shaders/math/philox.glsl)
};

struct KExpr;
using KExprPtr = std::shared_ptr<const KExpr>;

struct KExpr {
  KOp op;
  KType type = KType::Float;
  SOp sop = SOp::Add;       ///< FMath
  int64_t ivalue = 0;       ///< IntConst
  double fvalue = 0;        ///< FloatConst
  std::string name;         ///< Var
  int input = -1;           ///< Load: index into the kernel's inputs
  ReduceKind reduce = ReduceKind::Sum;  ///< Reduce
  std::vector<std::string> loop_vars;   ///< Reduce
  std::vector<int64_t> extents;         ///< Reduce
  uint64_t seed = 0;                    ///< RandomUniform: the Philox key
  uint32_t stream = 0;                  ///< RandomUniform: word 3 of the Philox counter
  KExprPtr a, b, c;
};

// Builders (fold integer constants: x+0, x*1, x*0, 0/x, x/1, x%1, constant arithmetic).
KExprPtr kint(int64_t v);
KExprPtr kfloat(double v);
KExprPtr kvar(const std::string& name);
KExprPtr kmath(SOp op, KExprPtr a, KExprPtr b = nullptr, KExprPtr c = nullptr);
KExprPtr kibin(KOp op, KExprPtr a, KExprPtr b);
KExprPtr kto_float(KExprPtr a);
KExprPtr kto_int(KExprPtr a);
KExprPtr kselect(KExprPtr cond, KExprPtr a, KExprPtr b);
KExprPtr kload(int input, KExprPtr flat_index);
KExprPtr kreduce(ReduceKind kind, std::vector<std::string> vars, std::vector<int64_t> extents, KExprPtr body);
/// The uniform random value of element `index` (Int) at step `step` (Int) of a random_uniform(seed, stream) node.
KExprPtr krandom_uniform(uint64_t seed, uint32_t stream, KExprPtr index, KExprPtr step);

bool kis_int(const KExprPtr& e, int64_t v);
// The queries below (kcost, kcode_size, kcontains_reduce, kloop_iterations, kunrollable_sum, khas_unrollable_sum, kequal) and
// krewrite visit each node of the shared DAG once: time linear in the number of distinct nodes, also where a DAG of
// N nodes has 2^N paths (a chain of maps whose bodies read their input twice). kexpr_str prints the tree.
/// Node count of the tree view; Reduce counts its body times its trip count (a cost estimate in scalar ops).
double kcost(const KExprPtr& e);
bool kcontains_reduce(const KExprPtr& e);
/// Loop iterations one invocation executes to evaluate all of `roots` when every shared subtree (same pointer)
/// is evaluated once, as the emitters do (a multi-output kernel computes a shared reduction once).
double kloop_iterations(const std::vector<KExprPtr>& roots);
/// True for a sum reduction the fragment emitter's tile mode unrolls by 4: innermost extent a multiple of 4 and
/// at least 8, no reduction inside its body. The scheduler's row-planes rule relies on the same test.
bool kunrollable_sum(const KExprPtr& r);
/// True when `e` has such a sum outside any other reduction (the emitter's tile mode applies).
bool khas_unrollable_sum(const KExprPtr& e);
/// Weight of a float op the emitters print as a call of a math helper (exp, log, log1p, pow, sin, cos, tanh,
/// sigmoid, erf, erfc, random_uniform: codegen/shaders/math/) in kcode_size: drivers inline the helper at every call.
inline constexpr double kHelperCallSize = 16;
/// The size of the code an emitter prints for `roots`: their distinct nodes (by pointer: a shared subtree is
/// printed once), a math-helper call counting kHelperCallSize. Drivers' compile time grows with it.
double kcode_size(const std::vector<KExprPtr>& roots);
/// Structural equality: same ops, constants, variable names, load slots and children.
bool kequal(const KExprPtr& a, const KExprPtr& b);
/// Loop iterations one evaluation executes (nested loops multiply; a GPU's per-invocation loop budget —
/// llvmpipe stops every loop after 65535 iterations in total per invocation — is checked against this).
double kloop_iterations(const KExprPtr& e);
/// e with children a, b, c (e itself when they are unchanged).
KExprPtr kwith_children(const KExprPtr& e, KExprPtr a, KExprPtr b, KExprPtr c);
/// Rewrites the DAGs of `roots` top-down with one memo (a subtree shared by several roots or parents stays
/// shared): where `replace(x)` returns non-null that result is used and x is not descended into; elsewhere x is
/// rebuilt from its rewritten children (x itself when none changed).
std::vector<KExprPtr> krewrite(const std::vector<KExprPtr>& roots,
                               const std::function<KExprPtr(const KExprPtr&)>& replace);
/// Simultaneous substitution of integer variables by expressions (by name).
KExprPtr ksubstitute(const KExprPtr& e, const std::map<std::string, KExprPtr>& subs);
/// Replaces every occurrence of the subtree `target` (by identity) with `replacement`.
KExprPtr kreplace(const KExprPtr& e, const KExpr* target, const KExprPtr& replacement);
/// Human-readable infix form (for tests and comments). Prints the tree view: its length grows with the number of
/// paths, not of nodes, so do not call it on large shared DAGs.
std::string kexpr_str(const KExprPtr& e);

}  // namespace sg
