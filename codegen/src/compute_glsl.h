// Private to codegen: the scalar kernel-IR printer of the compute emitter (GLSL 4.50 or WGSL, buffer storage).
//
// KPrinter prints the KExpr DAG of a kernel as scalar statements of its Lang (compute_lang.h): every subtree referenced more than once
// (same pointer) becomes one local; a Reduce becomes a loop nest with an accumulator, and reductions inside a
// loop body that do not read the loop's variables are computed once before the loop (a softmax's max inside its
// sum of exps). Loads print as calls `load_<value>(flat index)` (the emitter defines them over std430 buffers).
// Variables can be substituted by expressions (the tiled emitter evaluates a factor at a staged tile
// coordinate) and subtrees pre-bound to an expression (the contraction's register accumulator).
//
// Float math prints through float_math() (glsl_math.h: the GLSL and WGSL table; the fragment emitter uses its GLSL
// half too).
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "compute_lang.h"
#include "glsl_math.h"
#include "kernel_analysis.h"
#include "sg/schedule.h"

namespace sg::compute {

/// Scalar printer of one kernel's expressions (see the file comment).
class KPrinter {
 public:
  /// `roots`: every expression this printer will print (shared-subtree detection counts references in all of
  /// them). `prefix` starts every local's name (printers whose code shares one scope use distinct ones).
  KPrinter(const Plan& plan, const Kernel& k, const std::vector<KExprPtr>& roots, std::string prefix, const Lang& lang);

  /// Emits the statements computing `e` (into code()) and returns the expression of its value.
  std::string print(const KExprPtr& e);
  /// Integer variable `name` prints as `expr` (e.g. "(m0 + 3)").
  void substitute(const std::string& name, std::string expr) { subst_[name] = std::move(expr); }
  /// `e` (by identity) prints as `expr` without evaluating it.
  void bind(const KExpr* e, std::string expr) { bound_[e] = std::move(expr); }
  /// Forgets every local (the next print() starts a new scope); substitutions and bindings stay.
  void new_scope();

  /// Statements emitted so far (each line indented by `indent` levels of 2 spaces), and clears them.
  std::string take_code();
  int indent = 1;
  /// The math helper functions (glsl_math.h) the printed code calls.
  const MathHelpers& helpers() const { return helpers_; }
  /// Inputs (kernel input slots) read through load_<value>.
  const std::set<int>& loaded_inputs() const { return loaded_; }
  /// C: loads print as `loadu_<value>` (no clamp; the caller knows every index is in range: in_range_by_construction)
  /// and their inputs are recorded in unclamped_inputs() instead of loaded_inputs().
  bool unclamped_loads = false;
  const std::set<int>& unclamped_inputs() const { return unclamped_; }
  /// Lane-cooperative reductions (emit_tiled.cpp's subgroup rows): when set, a reduction outside every other one (not
  /// argmax) loops over its flat iteration space from `lane_start` in steps of `lane_step`, then `lane_combine(kind,
  /// acc)` returns the statements that leave the lanes' combined result in `acc` in every lane.
  std::function<std::string(ReduceKind, const std::string&)> lane_combine;
  std::string lane_start, lane_step;

 private:
  std::string raw(const KExprPtr& e);
  std::string reduce(const KExprPtr& e);
  std::string cond(const KExprPtr& e);
  void line(const std::string& s);
  void count(const KExprPtr& e);

  const Plan& plan_;
  const Kernel& k_;
  std::string prefix_;
  const Lang& lang_;
  std::string code_;
  int temp_ = 0;
  MathHelpers helpers_;
  std::set<int> loaded_;
  std::set<int> unclamped_;
  std::map<std::string, std::string> subst_;
  std::unordered_map<const KExpr*, int> refs_;
  std::unordered_map<const KExpr*, std::string> bound_;
  std::vector<std::unordered_map<const KExpr*, std::string>> scopes_{1};
  KFreeVars free_vars_;  ///< memoised free variables (loop-invariant reductions, kernel_analysis.h)
  int reduce_depth_ = 0;  ///< reductions whose loop bodies are being printed
};

/// True for comparison / logical KOps (printed as bool).
bool is_bool_op(KOp op);

/// Whether every load index of `e` is in its buffer whenever its coordinates and loop variables are in their ranges:
/// no mask that could hide an index out of range (ISelect, a float select), no index read from data (FToInt, a load
/// inside an index) and no subtraction or negative constant (a padded window's offset). The register-tiled C kernels
/// load such factors without a clamp (their coordinates are in range by construction).
bool in_range_by_construction(const KExprPtr& e);


}  // namespace sg::compute
