// Private to codegen: the three languages the compute emitter prints (GLSL 4.50, WGSL and C11), as one small layer.
//
// The compute emitter (emit_compute.cpp, emit_tiled.cpp, compute_glsl.cpp) writes every kernel once and asks a
// Lang for each construct whose spelling differs: declarations (`int x = e;` / `let x: i32 = e;`), loops, casts,
// select, functions, shared (workgroup) arrays, barriers, storage-buffer bindings and stores, builtins (workgroup and
// invocation ids), the entry point, and float bit patterns (NaN/Inf). Float math goes through the SOp tables
// (glsl_math.h). Everything else (integer arithmetic, comparisons, `+=`, blocks, comments, `return`)
// is spelled alike in both languages.
//
// WGSL notes (W3C WGSL, 2024 CR): a constant expression that evaluates to NaN or an infinity is a shader-creation
// error, so non-finite floats print as a call of the module's sg_f32_bits (a user function call is never a
// constant expression); builtins are entry-point parameters, copied into module-scope `var<private>` variables so
// that helper functions read them as GLSL's gl_* globals; WGSL has no write-only storage buffers (outputs are
// `read_write`); `if` bodies need braces.
//
// C notes (the cpu-simd target; ComputeLanguage::C in sg/compute_kernel.h has the entry point's contract): C has no
// builtins, bindings or shared memory, so an invocation's state is one `const sg_inv* sg` (its bindings `sg->buf[b]`
// and its builtins `sg->wg[axis]`, `sg->lid[axis]`, `sg->gid[axis]`), passed as the first parameter of every function
// the kernel defines (function_open) and call (call); no globals, so threads may run workgroups of one dispatch at
// once. Many kernels share a translation unit: their functions are `static` and carry the kernel's prefix
// (`k03_matmul_load_x`), the prelude (version_line: <math.h>, <stdint.h>, <stdbool.h>, sg_inv, GLSL's integer
// min/max/clamp, the float bit casts) and each math helper are include-guarded. Float literals carry `f` (a double
// literal would make the expression double: another rounding than f32 arithmetic's); loads are clamped (an index
// past a buffer would read other memory, not some element or 0) but for the register tiles' factors whose indices are
// in range by construction (loadu_, in_range_by_construction); shared arrays, barriers and subgroups throw
// UnsupportedError (the cpu plan, ComputeLimits::register_tiles, uses none).
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "glsl_math.h"
#include "sg/compute_kernel.h"

namespace sg::compute {

/// Scalar types of the kernel IR as the languages spell them.
enum class LType { Float, Int, Bool, Void, Vec4 };

/// Invocation builtins the emitter reads (each as an int of one axis).
enum class Builtin { WorkgroupId, LocalInvocationId, GlobalInvocationId };

class Lang {
 public:
  /// `shift_divisions`: integer division and modulo of non-negative values by a power of two print as a shift and a
  /// mask (div_const / mod_const). For CPU implementations (ComputeLimits::register_tiles): SwiftShader's Subzero
  /// JIT divides a vector lane by lane and does not strength-reduce a constant divisor (docs/perf-log/W5.md,
  /// W8.md); GPU compilers do that themselves, so other plans print the division and stay byte-identical.
  /// `prefix` (C only): the start of the name of every function the kernel defines (unique per kernel of a
  /// translation unit, an identifier).
  explicit Lang(ComputeLanguage language, bool shift_divisions = false, std::string prefix = {})
      : language_(language), shift_divisions_(shift_divisions), prefix_(std::move(prefix)) {}
  ComputeLanguage language() const { return language_; }
  bool wgsl() const { return language_ == ComputeLanguage::Wgsl; }
  bool c() const { return language_ == ComputeLanguage::C; }
  /// The name a kernel-defined function `name` has in the source: `name`, or in C the prefixed one.
  std::string fn(const std::string& name) const { return c() ? prefix_ + name : name; }
  /// A call of the kernel-defined function `name` with the comma-separated `args`: `name(args)`, in C
  /// `PREFIXname(sg, args)`.
  std::string call(const std::string& name, const std::string& args) const;
  bool shift_divisions() const { return shift_divisions_; }
  /// `(x / d)`, or `(x >> log2 d)` with shift_divisions and d a power of two; `x` must be non-negative (d > 0).
  std::string div_const(const std::string& x, int64_t d) const;
  /// `x % d` (not parenthesised: callers print it as a whole initialiser), or `(x & (d - 1))` with shift_divisions
  /// and d a power of two (WGSL does not mix `&` with arithmetic unparenthesised); `x` must be non-negative (d > 0).
  std::string mod_const(const std::string& x, int64_t d) const;

  /// float / f32, int / i32, bool, void, vec4 / vec4<f32>.
  std::string type(LType t) const;
  /// The first line(s) of a kernel source: `#version 450\n` (GLSL) or nothing (WGSL).
  std::string version_line() const;

  /// An immutable local: `int x = e;` / `let x: i32 = e;`.
  std::string let(LType t, const std::string& name, const std::string& value) const;
  /// A mutable local: `float x = e;` / `var x: f32 = e;`.
  std::string var(LType t, const std::string& name, const std::string& value) const;
  /// Several immutable (or mutable) locals of one type on one line: `int a = 1, b = 2;` / `let a: i32 = 1; let b...`.
  std::string lets(LType t, const std::vector<std::pair<std::string, std::string>>& names_values,
                   bool mutable_ = false) const;
  /// `for (int v = begin; v < end; ++v) {` (step 1) or `v += step`; WGSL `for (var v: i32 = ...; v++)`.
  /// `explicit_step`: `v += 1` rather than `++v` for step 1 (GLSL; a loop whose step is a parameter).
  std::string for_open(const std::string& v, const std::string& begin, const std::string& end, int64_t step = 1,
                       bool explicit_step = false) const;
  /// A loop over one statement: `for (int v = begin; v < end; v += step) stmt` (GLSL) / `for (...) { stmt }` (WGSL).
  std::string for_stmt(const std::string& v, const std::string& begin, const std::string& end, int64_t step,
                       const std::string& stmt) const;
  /// `++x;` / `x++;`
  std::string increment(const std::string& x) const;
  /// `if (cond) stmt` with stmt a statement (GLSL without braces, WGSL with them).
  std::string if_then(const std::string& cond, const std::string& stmt) const;
  /// `x = value` where `cond` holds, else `x = 0.0` (GLSL: `x = cond ? value : 0.0;`) or left as it is (WGSL:
  /// `if (cond) { x = value; }`: WGSL's select would evaluate `value` everywhere).
  std::string assign_if(const std::string& cond, const std::string& x, const std::string& value) const;

  /// float(x) / f32(x); int(x) / i32(x).
  std::string to_float(const std::string& x) const;
  std::string to_int(const std::string& x) const;
  /// `(c ? t : f)` / `select(f, t, c)` (c a bool expression).
  std::string select(const std::string& c, const std::string& t, const std::string& f) const;
  /// The float with bit pattern `bits` (8 hex digits): uintBitsToFloat(0x...u) / sg_f32_bits(0x...u) (a runtime
  /// value: WGSL rejects NaN/Inf constant expressions).
  std::string float_bits(uint32_t bits) const;
  /// A float literal: the shortest round-tripping f32 spelling, always with '.' or 'e'; NaN/Inf as float_bits.
  std::string float_literal(double v) const;

  /// `float name(int idx, int k) {` / `fn name(idx: i32, k: i32) -> f32 {` / C: `static inline float
  /// PREFIXname(const sg_inv* sg, int idx, int k) {`.
  std::string function_open(LType ret, const std::string& name,
                            const std::vector<std::pair<LType, std::string>>& params) const;
  /// `shared float name[n];` / `var<workgroup> name: array<f32, n>;` (with a trailing comment when not empty);
  /// `element` Float or Vec4.
  std::string shared_array(const std::string& name, int64_t n, const std::string& comment,
                           LType element = LType::Float) const;
  /// A zero-filled private float array: `var name: array<f32, n>;` (WGSL zero-initialises it) / `float name[n];`
  /// and a loop storing 0.0 to each element (GLSL), with a trailing comment when not empty.
  std::string local_array(const std::string& name, int64_t n, const std::string& comment) const;
  /// `barrier();` / `workgroupBarrier();`
  std::string barrier() const;
  /// The builtin's component `axis` (0..2) as an int expression: int(gl_WorkGroupID.y) / i32(workgroup_id.y).
  std::string builtin(Builtin b, int axis) const;

  /// One float storage-buffer binding in set/group 0: readonly `in_<name>` or written `out_<name>`, with a comment.
  std::string buffer_binding(int binding, const std::string& name, bool readonly, const std::string& comment) const;
  /// `out_<name>.data[idx] = v;` / `out_<name>[idx] = v;`
  std::string store(const std::string& name, const std::string& idx, const std::string& v) const;
  /// `float load_<name>(int i) { return in_<name>.data[clamp(i, 0, last)]; }` and its WGSL form; in WGSL with
  /// `clamped` false the plain `in_<name>[i]` (for callers whose indices are in range or masked: WGSL itself bounds
  /// every storage access, so an index past the end reads some element of the buffer or 0, never undefined memory).
  /// C: `load_<name>` always clamps; `clamped` false defines `loadu_<name>` instead, unclamped, for the loads of
  /// KPrinter::unclamped_loads (indices in range by construction, in_range_by_construction).
  std::string load_function(const std::string& name, int64_t last, bool clamped = true) const;

  /// GLSL: `layout(local_size_x = X[, local_size_y = Y]) in;\n` (before the bindings; local_size_y also when 1 with
  /// `print_y`); WGSL: nothing.
  std::string workgroup_size_layout(uint32_t x, uint32_t y, bool print_y = false) const;
  /// The entry point's first line(s): `\nvoid main() {\n` / `@compute @workgroup_size(X[, Y])` fn main with the
  /// builtins `body` reads as parameters, copied into their private variables / C: the static function of one
  /// invocation, `static void PREFIXinvocation(const sg_inv* sg) {` (c_entry runs it).
  std::string entry_open(uint32_t x, uint32_t y, const std::string& body) const;
  /// C: the exported entry point `entry` running workgroups [begin, end) of a grid of `workgroups`, each workgroup's
  /// `local` invocations in order (x fastest); empty in the other languages.
  std::string c_entry(const std::string& entry, const std::array<uint32_t, 3>& local,
                      const std::array<uint32_t, 3>& workgroups) const;
  /// Subgroup operations (WGSL only: the `subgroups` extension; GLSL throws UnsupportedError, no GLSL plan uses them).
  /// The directive a kernel using them starts with: `enable subgroups;\n`.
  std::string subgroups_enable() const;
  /// The invocation's lane in its subgroup as an int: `i32(subgroup_invocation_id)` (entry_open declares the builtin).
  std::string subgroup_lane() const;
  /// `x` of lane `lane` (a constant) of the subgroup: `subgroupBroadcast(x, LANEu)`; every lane must be active.
  std::string subgroup_broadcast(const std::string& x, int lane) const;
  /// Module-scope declarations and helper functions of a kernel whose code (`source`) calls the float-math helpers
  /// `math` (glsl_math.h), to be inserted after the bindings: their definitions in this language, and in WGSL the
  /// private copies of the builtins `source` reads and sg_f32_bits where anything calls it.
  std::string helpers(const MathHelpers& math, const std::string& source) const;

 private:
  ComputeLanguage language_;
  bool shift_divisions_ = false;
  std::string prefix_;
};

/// C: the identifier made of `name` (characters other than letters, digits and '_' as '_'; a leading digit
/// prefixed with '_').
std::string c_identifier(const std::string& name);

}  // namespace sg::compute
