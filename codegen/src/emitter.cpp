// make_emitter: one Emitter per TargetName over the existing emitters (see sg/emitter.h).
#include "sg/emitter.h"

#include <fmt/format.h>

#include "sg/emit.h"
#include "sg/error.h"

namespace sg {

namespace {

/// glsl-es-fragment: emit_glsl450 for the fragment stage (textures).
class FragmentEmitter final : public Emitter {
 public:
  FragmentEmitter(const Target& t, const EmitOptions& o) : Emitter(t, o) {}
  std::string_view language() const override { return "glsl450"; }
  std::string_view extension() const override { return "glsl"; }
  std::optional<ShaderStage> shader_stage() const override { return ShaderStage::Fragment; }
  std::string source(const Plan& plan, const Kernel& k) const override {
    return emit_glsl450(plan, k, ShaderStage::Fragment);
  }
};

/// The buffer targets: emit_compute_kernel in the target's ComputeLanguage.
class ComputeEmitter final : public Emitter {
 public:
  ComputeEmitter(const Target& t, const EmitOptions& o, ComputeLanguage lang) : Emitter(t, o), lang_(lang) {}
  std::string_view language() const override { return compute_language_name(lang_); }
  std::string_view extension() const override { return lang_ == ComputeLanguage::Glsl450 ? "glsl" : language(); }
  std::optional<ShaderStage> shader_stage() const override {
    if (lang_ == ComputeLanguage::Glsl450) return ShaderStage::Compute;
    return std::nullopt;
  }
  std::string source(const Plan& plan, const Kernel& k) const override { return compute_kernel(plan, k).source; }
  ComputeKernel compute_kernel(const Plan& plan, const Kernel& k) const override {
    return emit_compute_kernel(plan, k, options().limits, lang_, options().tiles);
  }
  ComputeKernel compute_kernel(const Plan& plan, const Kernel& k, const TileConfig& tiles) const override {
    return emit_compute_kernel(plan, k, options().limits, lang_, tiles);
  }
  std::vector<TileConfig> tile_candidates(const Plan& plan, const Kernel& k) const override {
    return sg::tile_candidates(plan, k, options().limits);
  }

 private:
  ComputeLanguage lang_;
};

/// UnsupportedError unless `t` has the stage and storage model its name's emitter writes for.
void require(const Target& t, TargetStage stage, StorageModel storage) {
  if (t.stage == stage && t.storage == storage) return;
  throw UnsupportedError(fmt::format(
      "make_emitter: target {} has {} stage and {} storage, but its emitter writes {} kernels over {}; make the "
      "Target with make_target(TargetName, DeviceCaps), which sets both",
      target_name(t.name), target_stage_name(t.stage), storage_model_name(t.storage), target_stage_name(stage),
      storage_model_name(storage)));
}

}  // namespace

ComputeKernel Emitter::compute_kernel(const Plan&, const Kernel& k) const {
  throw UnsupportedError(fmt::format("kernel {}: target {} draws fragment shaders over textures, it has no compute "
                                     "dispatch; Emitter::source gives the shader",
                                     k.name, target_name(target_.name)));
}

ComputeKernel Emitter::compute_kernel(const Plan& plan, const Kernel& k, const TileConfig&) const {
  return compute_kernel(plan, k);
}

std::vector<TileConfig> Emitter::tile_candidates(const Plan&, const Kernel&) const { return {}; }

std::string Emitter::code_key(Plan& plan, const Kernel& k) const {
  return kernel_code_key(plan, k, [&] { return source(plan, k); });
}

EmitOptions emit_options(const Target& target) {
  EmitOptions o;
  o.limits = target.compute;
  return o;
}

std::unique_ptr<const Emitter> make_emitter(const Target& t, const EmitOptions& o) {
  switch (t.name) {
    case TargetName::GlslEsFragment:
      require(t, TargetStage::Fragment, StorageModel::Textures);
      return std::make_unique<FragmentEmitter>(t, o);
    case TargetName::GlslEsCompute:
    case TargetName::SpirvVulkan:
      require(t, TargetStage::Compute, StorageModel::Buffers);
      return std::make_unique<ComputeEmitter>(t, o, ComputeLanguage::Glsl450);
    case TargetName::Wgsl:
      require(t, TargetStage::Compute, StorageModel::Buffers);
      return std::make_unique<ComputeEmitter>(t, o, ComputeLanguage::Wgsl);
    case TargetName::CpuSimd:
      require(t, TargetStage::Compute, StorageModel::Buffers);
      if (!o.limits.register_tiles)
        throw UnsupportedError("make_emitter: target cpu-simd writes C kernels of the cpu plan only (no workgroup "
                               "memory or barriers): EmitOptions::limits needs register_tiles, as "
                               "preset_caps(\"cpu-simd\") sets it");
      return std::make_unique<ComputeEmitter>(t, o, ComputeLanguage::C);
    case TargetName::Cpu: break;
  }
  throw UnsupportedError(fmt::format("make_emitter: target {} has no emitter: the CPU reference executor interprets "
                                     "the graph node by node (cpu-simd is the target of generated C kernels)",
                                     target_name(t.name)));
}

std::unique_ptr<const Emitter> make_emitter(const Target& target) { return make_emitter(target, emit_options(target)); }

}  // namespace sg
