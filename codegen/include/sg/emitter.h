// shadergrad — the emitter of a target: one interface over the code generators, one factory choosing by Target.
//
// A backend, `shadergrad dump`, the web export and the autotuner do not pick an emitter function and its arguments
// at each call site: they ask make_emitter for the Target they scheduled for, with the EmitOptions the one target
// policy derived (sg::target_policy in sg/backend.h, from the Target and BackendOptions), and call its methods:
//
//   target            Emitter::language()  source()                                   compute_kernel()
//   glsl-es-fragment  glsl450 (.glsl)      emit_glsl450(.., Fragment) (sg/emit.h)     UnsupportedError (no dispatch)
//   glsl-es-compute   glsl450 (.glsl)      emit_compute_kernel(.., Glsl450).source    emit_compute_kernel(.., Glsl450)
//   spirv-vulkan      glsl450 (.glsl)      the same as glsl-es-compute                the same
//   wgsl              wgsl (.wgsl)         emit_compute_kernel(.., Wgsl).source       emit_compute_kernel(.., Wgsl)
//   cpu-simd          c (.c)               emit_compute_kernel(.., C).source          emit_compute_kernel(.., C)
//   cpu               none: make_emitter throws UnsupportedError (the reference executor interprets the graph)
//
// The emitters stay the free functions of sg/emit.h and sg/compute_kernel.h (the Emitter only carries their
// arguments: the ComputeLimits they see and forced tile configurations). GLSL 4.50 sources are compiled by glslang
// (sg/shader_compiler.h) as shader_stage(); WGSL and C are written as emitted. The models are Halide's
// CodeGen_GPU_Dev (one code generator per GPU API, made from a Target) and CubeCL's Compiler trait (one per target,
// with its file extension).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sg/compute_kernel.h"
#include "sg/schedule.h"
#include "sg/shader_compiler.h"
#include "sg/target.h"

namespace sg {

/// What an emitter is told beyond its Target. sg::target_policy (sg/backend.h) derives it from the Target and the
/// BackendOptions, the one place that does; emit_options(target) is the Target's own, nothing forced.
struct EmitOptions {
  /// Buffer targets: the limits kernels are emitted for (tile and workgroup sizes follow shared memory, invocations
  /// and cpu_device): Target::compute, with the tile class the policy chose (BackendOptions::gpu_tiles forces GPU or
  /// CPU tile sizes). The fragment emitter ignores it.
  ComputeLimits limits{};
  /// Buffer targets: the tile configuration of every tiled contraction (VulkanOptions::tiles, SG_TILE_CONFIG);
  /// empty = the heuristic (default_tile_config). Ignored by kernels of other strategies.
  std::optional<TileConfig> tiles{};
};

/// The EmitOptions of `target` with nothing forced: limits = target.compute, no tiles.
EmitOptions emit_options(const Target& target);

/// The code generator of one Target: immutable after make_emitter, cheap to make.
class Emitter {
 public:
  virtual ~Emitter() = default;
  Emitter(const Emitter&) = delete;
  Emitter& operator=(const Emitter&) = delete;

  const Target& target() const { return target_; }
  const EmitOptions& options() const { return options_; }

  /// The language source() is written in: "glsl450" (GLSL 4.50, Vulkan flavour: glslang's input), "wgsl" or "c".
  virtual std::string_view language() const = 0;
  /// The file extension of source() without the dot ("glsl", "wgsl", "c"); a dump writes KERNEL.EXT.
  virtual std::string_view extension() const = 0;
  /// The stage glslang compiles source() as (fragment or compute); nullopt for WGSL and C, which it does not read.
  virtual std::optional<ShaderStage> shader_stage() const = 0;

  /// The source of kernel `k` of `plan` (a plan scheduled for this target). Deterministic: the same plan gives
  /// byte-identical source. Throws what the emitter throws (UnsupportedError naming the kernel and the limit).
  virtual std::string source(const Plan& plan, const Kernel& k) const = 0;
  /// Buffer targets: kernel `k` ready to compile and dispatch (source, local size, workgroups, bindings, strategy),
  /// with options().tiles. The fragment target throws UnsupportedError (its kernels are draws: source() only).
  virtual ComputeKernel compute_kernel(const Plan& plan, const Kernel& k) const;
  /// compute_kernel with the tile configuration `tiles` instead of options().tiles (an autotuner's candidates).
  virtual ComputeKernel compute_kernel(const Plan& plan, const Kernel& k, const TileConfig& tiles) const;
  /// Buffer targets: the tile configurations an autotuner may time for `k` (sg::tile_candidates over
  /// options().limits); empty for the fragment target and for kernels that are not tiled contractions.
  virtual std::vector<TileConfig> tile_candidates(const Plan& plan, const Kernel& k) const;

  /// kernel_code_key (sg/emit.h) of source(): kernels with equal keys share one compiled program.
  std::string code_key(Plan& plan, const Kernel& k) const;

 protected:
  Emitter(Target target, EmitOptions options) : target_(std::move(target)), options_(std::move(options)) {}

 private:
  Target target_;
  EmitOptions options_;
};

/// The emitter of `target` (see the table above) under `options` (from sg::target_policy; emit_options(target)
/// when nothing is forced). Throws UnsupportedError for the cpu target (no generated code) and for a Target whose
/// stage or storage model is not the one its name's emitter writes (a glsl-es-fragment Target over buffers, a
/// compute target over textures: make the Target with make_target), and for cpu-simd without
/// options.limits.register_tiles (its C kernels exist for the cpu plan only).
std::unique_ptr<const Emitter> make_emitter(const Target& target, const EmitOptions& options);
/// make_emitter(target, emit_options(target)).
std::unique_ptr<const Emitter> make_emitter(const Target& target);

}  // namespace sg
