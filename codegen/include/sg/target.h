// shadergrad — Target: what the scheduler and the emitters know of the machine a Plan is made for.
//
// A Target is built from a device's capabilities (DeviceCaps: what GL, Vulkan or WebGPU report) by make_target.
// It names the code the emitter writes (TargetName), the pipeline stage, the storage model (textures or buffers)
// and the limits every kernel must respect. The Target is the one thing that flows from the device probe (or a
// preset) to the schedule and the emitter: backends turn (Target, BackendOptions) into ScheduleOptions and
// EmitOptions with the one policy sg::target_policy (sg/backend.h), and make_emitter(Target, EmitOptions)
// (sg/emitter.h) gives the target's emitter; `shadergrad dump` and the web export use the same functions over the
// DeviceCaps presets below, so a dump shows what a backend runs.
//
//   target            stage     storage   make_emitter's emitter over           backend
//   glsl-es-fragment  fragment  textures  emit_glsl450(.., Fragment) -> ES 3.00  GLES (runtime/src/gles_*)
//   glsl-es-compute   compute   buffers   emit_compute_kernel (sg/compute_kernel.h) -> ES 3.10
//   spirv-vulkan      compute   buffers   emit_compute_kernel -> SPIR-V          Vulkan
//   wgsl              compute   buffers   emit_compute_kernel(.., Wgsl) -> WGSL    WebGPU (runtime/web, bundles)
//   cpu-simd          compute   buffers   emit_compute_kernel(.., C) -> C11 -> cc   cpu-simd (runtime/src/cpu_simd_*)
//   cpu               host      host      none: the f64 reference runs the graph
// docs/ARCHITECTURE.md ("Adding a target") lists what a new target needs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "sg/compute_kernel.h"
#include "sg/schedule.h"

namespace sg {

enum class TargetName { GlslEsFragment, GlslEsCompute, SpirvVulkan, Wgsl, CpuSimd, Cpu };

/// "glsl-es-fragment", "glsl-es-compute", "spirv-vulkan", "wgsl", "cpu-simd", "cpu".
std::string_view target_name(TargetName name);
/// The TargetName spelled `s` (as target_name writes it); ValueError listing the names otherwise.
TargetName parse_target_name(std::string_view s);

/// Where a kernel runs: a fragment shader (one texel per invocation), a compute shader, or the host (CPU).
enum class TargetStage { Fragment, Compute, Host };
/// How materialised values are stored: RGBA32F textures (Plan layouts are texture layouts; Value::planes,
/// union-domain extents apply), storage buffers of floats (row-major, numel floats), or host memory.
enum class StorageModel { Textures, Buffers, Host };

/// "fragment", "compute" or "host" (messages, Target::describe).
std::string_view target_stage_name(TargetStage stage);
/// "textures", "buffers" or "host memory" (messages, Target::describe).
std::string_view storage_model_name(StorageModel storage);

/// What a device reports (GL: glGetIntegerv and GL_RENDERER; Vulkan: VkPhysicalDeviceLimits).
struct DeviceCaps {
  std::string renderer;            ///< GL_RENDERER / VkPhysicalDeviceProperties::deviceName
  bool cpu_device = false;         ///< a CPU implementation (llvmpipe, softpipe, SwiftShader, lavapipe)
  int64_t max_texture_size = 16384;  ///< GL_MAX_TEXTURE_SIZE (texels per dimension)
  /// The texture width layouts may use (<= max_texture_size; a smaller value forces row wrapping); 0 = the size.
  int64_t max_texture_width = 0;
  int max_draw_buffers = 4;        ///< GL_MAX_DRAW_BUFFERS (GLES 3.0 guarantees 4)
  int max_texture_units = 16;      ///< GL_MAX_TEXTURE_IMAGE_UNITS (GLES 3.0 guarantees 16)
  ComputeLimits compute;           ///< compute and buffer limits (compute targets)
};

/// The names by which a device's description (GL_RENDERER, a Vulkan device name, a WebGPU adapter's info) reveals a
/// CPU implementation of the API: llvmpipe, lavapipe, softpipe, swiftshader, software rasterizer, basic render
/// driver (Microsoft WARP), warp, cpu. Lower case; matched as whole words, ignoring case. The one list behind
/// is_cpu_renderer and the web runtime's choice of a webgpu plan (bundle.json `webgpu.cpu_adapter`, docs/BUNDLE.md).
std::span<const std::string_view> cpu_renderer_names();

/// True when `renderer` (GL_RENDERER, a Vulkan device name, a WebGPU adapter description) contains one of
/// cpu_renderer_names() as a whole word, ignoring case ("llvmpipe (LLVM 15.0.6, 256 bits)", "ANGLE (Google, Vulkan
/// 1.3.0 (SwiftShader Device (Subzero) ...))").
bool is_cpu_renderer(std::string_view renderer);

/// DeviceCaps of a device shadergrad dumps for without opening it: "llvmpipe" (Mesa llvmpipe: a CPU rasteriser,
/// 16384-texel textures, 8 draw buffers, 16 samplers; compute: 16 storage buffers, 1024 invocations, 32 KiB shared
/// memory, CPU tile sizes) and "gpu" (a hardware GPU such as NVIDIA's: the same texture, draw-buffer, sampler,
/// storage-buffer and invocation limits, 48 KiB shared memory, GPU tile sizes), "webgpu" (the W3C WebGPU default
/// limits every device has: 8 storage buffers per stage, 256 invocations per workgroup, 16 KiB workgroup storage,
/// 65535 workgroups per dimension, 128 MiB storage bindings; f32 only) and "webgpu-compat" (WebGPU compatibility
/// mode's defaults: the same but 128 invocations per workgroup; gpuweb proposals/compatibility-mode.md keeps 8
/// storage buffers for compute) and "cpu-simd" (this machine's CPU as the cpu-simd backend runs it: the cpu plan's
/// register tiles and window blocks (ComputeLimits::register_tiles), 16 storage buffers per kernel, no workgroup
/// memory, workgroups of up to 1024 invocations, 2^30 workgroups per dimension, 1 TiB buffers). ValueError for other
/// names.
DeviceCaps preset_caps(std::string_view preset);

/// The limits a kernel of a target must respect.
struct TargetLimits {
  int max_bindings = 16;     ///< samplers (textures) or input storage buffers (buffers) per kernel
  int max_storage_buffers = 0;  ///< buffers: inputs + outputs per kernel together; 0 = separate budgets (textures)
  int max_outputs = 4;       ///< render targets (textures) or output buffers (buffers) per kernel
  /// Loop iterations per invocation (4 elements counted per fragment): llvmpipe silently stops a loop after 65535.
  double max_loop_iterations = 32768;
  int64_t max_texture_width = 16384;   ///< textures: layout width limit
  int64_t max_texture_height = 16384;  ///< textures: height limit
  int64_t max_shared_bytes = 0;        ///< buffers: shared (workgroup) memory per workgroup; 0 = none
  int max_workgroup_invocations = 0;   ///< buffers: local_size x*y*z; 0 = no workgroups
  int64_t max_workgroup_count = 0;     ///< buffers: workgroups per dispatch dimension
};

/// A code-generation target built from a device's capabilities.
struct Target {
  TargetName name = TargetName::GlslEsFragment;
  TargetStage stage = TargetStage::Fragment;
  StorageModel storage = StorageModel::Textures;
  TargetLimits limits;
  bool cpu_device = false;  ///< runs on a CPU (the schedule policy skips GPU-only choices)
  /// Buffer targets: the limits compute_schedule_options sees, and the emitter unless the policy forces its tile class
  /// (emit_options, sg::target_policy).
  ComputeLimits compute;
  std::string renderer;     ///< the device, for messages
  /// One line: name, stage, storage and the main limits.
  std::string describe() const;
};

/// The target `name` on a device with capabilities `caps`: fragment targets take the texture, draw-buffer (at
/// most 8) and sampler (at most 16) limits; buffer targets carry caps.compute (bindings split between inputs and
/// outputs as compute_schedule_options does). Throws ValueError for limits no kernel fits (fewer than 1 draw
/// buffer or sampler, fewer than 2 storage buffers).
Target make_target(TargetName name, const DeviceCaps& caps);

}  // namespace sg
