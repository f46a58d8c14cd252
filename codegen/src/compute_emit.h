// Private to codegen: the pieces of the buffer-storage compute emitter (emit_compute.cpp, emit_tiled.cpp); each
// prints in the language of its Lang (compute_lang.h).
#pragma once

#include <array>
#include <optional>
#include <set>
#include <string>

#include "compute_lang.h"
#include "sg/compute_kernel.h"

namespace sg::compute {

/// `#version 450` (GLSL) and the comment naming the kernel, its strategy, outputs, notes, graph nodes and source lines.
std::string kernel_header(const Plan& plan, const Kernel& k, const std::string& strategy, const Lang& lang);
/// The storage-buffer declarations (binding order: inputs, then outputs) and load_<value>(i) for the inputs in
/// `loaded` (kernel input slots), each index clamped into its buffer.
std::string buffer_declarations(const Plan& plan, const Kernel& k, const std::set<int>& loaded, const Lang& lang);
/// `int iD = ...;` lines decomposing the row-major flat index `flat` of `shape` into coordinates i0.. .
std::string coordinates(const Shape& shape, const std::string& flat, int indent, const Lang& lang);
/// A grid of `groups` workgroups as x (<= max_workgroup_count) by y; UnsupportedError when it does not fit.
std::array<uint32_t, 3> grid_for(const Kernel& k, int64_t groups, const ComputeLimits& limits);

/// The shared-memory tiled kernel of a matmul-like contraction (emit_tiled.cpp), or nullopt when the kernel has
/// none or its grid / tiles do not fit `limits`.
std::optional<ComputeKernel> emit_tiled_contraction(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                    const Lang& lang);
/// A workgroup tree reduction per output element for kernels of few outputs (<= 1024) with a long (>= 128, >= the
/// element count) sum/max/min reduction (emit_tiled.cpp), or nullopt.
std::optional<ComputeKernel> emit_tree_reduction(const Plan& plan, const Kernel& k, const ComputeLimits& limits,
                                                 const Lang& lang);
/// One invocation per output element (always applicable).
ComputeKernel emit_per_element(const Plan& plan, const Kernel& k, const ComputeLimits& limits, const Lang& lang);

}  // namespace sg::compute
