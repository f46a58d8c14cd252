// Targets: names, DeviceCaps presets, make_target (see sg/target.h).
#include "sg/target.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "sg/error.h"

namespace sg {

namespace {

constexpr std::array<std::pair<TargetName, std::string_view>, 6> kNames{{
    {TargetName::GlslEsFragment, "glsl-es-fragment"},
    {TargetName::GlslEsCompute, "glsl-es-compute"},
    {TargetName::SpirvVulkan, "spirv-vulkan"},
    {TargetName::Wgsl, "wgsl"},
    {TargetName::CpuSimd, "cpu-simd"},
    {TargetName::Cpu, "cpu"},
}};

Target fragment_target(const DeviceCaps& caps) {
  if (caps.max_draw_buffers < 1 || caps.max_texture_units < 1 || caps.max_texture_size < 1)
    throw ValueError(fmt::format("fragment target on '{}': {} draw buffers, {} texture units, {} texels per texture "
                                 "side; a kernel needs at least 1 of each",
                                 caps.renderer, caps.max_draw_buffers, caps.max_texture_units, caps.max_texture_size));
  Target t;
  t.stage = TargetStage::Fragment;
  t.storage = StorageModel::Textures;
  t.limits.max_outputs = std::clamp(caps.max_draw_buffers, 1, 8);
  t.limits.max_bindings = std::min(caps.max_texture_units, 16);
  t.limits.max_texture_width = caps.max_texture_width > 0 ? caps.max_texture_width : caps.max_texture_size;
  t.limits.max_texture_height = caps.max_texture_size;
  return t;
}

Target buffer_target(const DeviceCaps& caps) {
  const ScheduleOptions so = compute_schedule_options(caps.compute);  // validates the storage-buffer budget
  Target t;
  t.stage = TargetStage::Compute;
  t.storage = StorageModel::Buffers;
  t.compute = caps.compute;
  t.limits.max_outputs = so.max_outputs;
  t.limits.max_bindings = so.max_inputs;
  t.limits.max_storage_buffers = so.max_storage_buffers;
  t.limits.max_loop_iterations = so.max_loop_iterations;
  t.limits.max_texture_width = so.max_texture_width;
  t.limits.max_texture_height = so.max_texture_height;
  t.limits.max_shared_bytes = caps.compute.max_shared_bytes;
  t.limits.max_workgroup_invocations = caps.compute.max_workgroup_invocations;
  t.limits.max_workgroup_count = caps.compute.max_workgroup_count;
  return t;
}

}  // namespace

std::string_view target_stage_name(TargetStage s) {
  switch (s) {
    case TargetStage::Fragment: return "fragment";
    case TargetStage::Compute: return "compute";
    case TargetStage::Host: return "host";
  }
  return "?";
}

std::string_view storage_model_name(StorageModel s) {
  switch (s) {
    case StorageModel::Textures: return "textures";
    case StorageModel::Buffers: return "buffers";
    case StorageModel::Host: return "host memory";
  }
  return "?";
}

std::string_view target_name(TargetName name) {
  for (auto& [n, s] : kNames)
    if (n == name) return s;
  return "?";
}

TargetName parse_target_name(std::string_view s) {
  for (auto& [n, str] : kNames)
    if (str == s) return n;
  throw ValueError(
      fmt::format("unknown target '{}' (glsl-es-fragment, glsl-es-compute, spirv-vulkan, wgsl, cpu-simd or cpu)", s));
}

std::span<const std::string_view> cpu_renderer_names() {
  // Mesa's CPU rasterisers (GL) and lavapipe (Vulkan, also Dawn over it), Google's SwiftShader (Chromium's WebGPU
  // fallback adapter and ANGLE's software GL), Microsoft's WARP ("Microsoft Basic Render Driver"), and adapters
  // whose description calls them a CPU (a WebGPU adapter's architecture "cpu").
  static constexpr std::array<std::string_view, 8> kNames{
      "llvmpipe", "lavapipe", "softpipe", "swiftshader", "software rasterizer", "basic render driver", "warp", "cpu"};
  return kNames;
}

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool word_char(char c) { return (c >= '0' && c <= '9') || (lower(c) >= 'a' && lower(c) <= 'z') || c == '_'; }

/// Whether `text` contains `word` (lower case) as a whole word, ignoring case (JavaScript's /\bword\b/i).
bool contains_word(std::string_view text, std::string_view word) {
  for (size_t i = 0; i + word.size() <= text.size(); ++i) {
    size_t j = 0;
    while (j < word.size() && lower(text[i + j]) == word[j]) ++j;
    if (j < word.size()) continue;
    const bool starts = i == 0 || !word_char(text[i - 1]);
    const bool ends = i + word.size() == text.size() || !word_char(text[i + word.size()]);
    if (starts && ends) return true;
  }
  return false;
}

}  // namespace

bool is_cpu_renderer(std::string_view r) {
  return std::any_of(cpu_renderer_names().begin(), cpu_renderer_names().end(),
                     [&](std::string_view name) { return contains_word(r, name); });
}

DeviceCaps preset_caps(std::string_view preset) {
  DeviceCaps c;
  c.max_texture_size = 16384;
  c.max_draw_buffers = 8;
  c.max_texture_units = 16;
  // compute limits as Mesa's llvmpipe/lavapipe and a desktop GPU (the H200's NVIDIA driver) report them
  c.compute.max_storage_buffers = 16;
  c.compute.max_workgroup_invocations = 1024;
  if (preset == "llvmpipe") {
    c.renderer = "llvmpipe";
    c.cpu_device = true;
    c.compute.cpu_device = true;
    c.compute.max_shared_bytes = 32768;
  } else if (preset == "gpu") {
    c.renderer = "a hardware GPU";
    c.compute.max_shared_bytes = 49152;
  } else if (preset == "webgpu" || preset == "webgpu-compat") {
    // the limits every WebGPU device has (a device asked for no requiredLimits gets exactly these): W3C WebGPU
    // "Limits" defaults; compatibility mode lowers invocations per workgroup (and workgroup size x/y) to 128 and
    // keeps maxStorageBuffersPerShaderStage at 8 for compute (gpuweb proposals/compatibility-mode.md, "Lower
    // limits"; only the fragment and vertex stages get 4 and 0)
    const bool compat = preset == "webgpu-compat";
    c.renderer = compat ? "a WebGPU device (compatibility mode default limits)" : "a WebGPU device (default limits)";
    c.max_texture_size = compat ? 4096 : 8192;
    c.max_draw_buffers = compat ? 4 : 8;
    c.compute.max_storage_buffers = 8;                                 // maxStorageBuffersPerShaderStage
    c.compute.max_workgroup_invocations = compat ? 128 : 256;          // maxComputeInvocationsPerWorkgroup
    c.compute.max_shared_bytes = 16384;                                // maxComputeWorkgroupStorageSize
    c.compute.max_workgroup_count = 65535;                             // maxComputeWorkgroupsPerDimension
    c.compute.max_buffer_bytes = int64_t{128} << 20;                   // maxStorageBufferBindingSize
  } else if (preset == "cpu-simd") {
    // C kernels run by the host's threads: the cpu plan (register tiles read straight from memory, no workgroup
    // memory or barriers: a workgroup's invocations run in turn on one thread), limits only as wide as the int
    // indices of the kernels and the schedule's fusion budget need
    c.renderer = "the host CPU (C kernels)";
    c.cpu_device = true;
    c.compute.cpu_device = true;
    c.compute.register_tiles = true;
    c.compute.max_shared_bytes = 0;
    c.compute.max_workgroup_count = int64_t{1} << 30;
    c.compute.max_buffer_bytes = int64_t{1} << 40;
  } else {
    throw ValueError(fmt::format("unknown device preset '{}' (llvmpipe, gpu, webgpu, webgpu-compat or cpu-simd)", preset));
  }
  return c;
}

Target make_target(TargetName name, const DeviceCaps& caps) {
  Target t;
  switch (name) {
    case TargetName::GlslEsFragment: t = fragment_target(caps); break;
    case TargetName::GlslEsCompute:
    case TargetName::SpirvVulkan:
    case TargetName::Wgsl: t = buffer_target(caps); break;
    case TargetName::CpuSimd:
      t = buffer_target(caps);
      t.limits.max_loop_iterations = 1 << 24;  // C loops have no iteration limit (schedule_options: the same)
      break;
    case TargetName::Cpu:
      t.stage = TargetStage::Host;
      t.storage = StorageModel::Host;
      break;
  }
  t.name = name;
  t.cpu_device = caps.cpu_device;
  t.renderer = caps.renderer;
  return t;
}

std::string Target::describe() const {
  std::string s =
      fmt::format("{} ({} stage, {}", target_name(name), target_stage_name(stage), storage_model_name(storage));
  if (storage == StorageModel::Textures)
    s += fmt::format("; {} render targets, {} samplers, textures up to {}x{}", limits.max_outputs, limits.max_bindings,
                     limits.max_texture_width, limits.max_texture_height);
  else if (storage == StorageModel::Buffers)
    s += fmt::format("; {} storage buffers per kernel (up to {} outputs), workgroups of up to {} invocations",
                     limits.max_storage_buffers, limits.max_outputs, limits.max_workgroup_invocations);
  return s + (cpu_device ? "; a CPU device)" : ")");
}

}  // namespace sg
