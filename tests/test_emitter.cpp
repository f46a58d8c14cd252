// The emitter factory (sg/emitter.h) and the target policy (sg::target_policy, sg/backend.h): make_emitter of every
// TargetName with an emitter writes a tiny plan's kernels in that target's language — the same sources the emitter
// functions write when called by hand, GLSL compiled by glslang as the emitter's stage — and refuses the targets and
// target/storage combinations it has no emitter for, saying why.
#include <catch2/catch.hpp>

#include <string>

#include "sg/backend.h"
#include "sg/emit.h"
#include "sg/emitter.h"
#include "sg/shader_compiler.h"
#include "sg/target.h"

using namespace sg;

namespace {

/// relu(x @ w + b) and a row sum: a contraction with its epilogue and a reduction.
Program tiny_program() {
  Tensor x = input("x", {8, 16});
  Tensor w = input("w", {16, 4});
  Tensor b = input("b", {4});
  Program p;
  p.add_output("y", relu(matmul(x, w) + b));
  p.add_output("s", sum(x * x, {1}));
  return p;
}

struct Case {
  TargetName name;
  const char* preset;
  const char* language;
  const char* extension;
};

}  // namespace

TEST_CASE("make_emitter: every target with an emitter writes a tiny plan's kernels in its language", "[emit][target]") {
  const Program p = tiny_program();
  for (const Case& c : {Case{TargetName::GlslEsFragment, "llvmpipe", "glsl450", "glsl"},
                        Case{TargetName::GlslEsCompute, "gpu", "glsl450", "glsl"},
                        Case{TargetName::SpirvVulkan, "llvmpipe", "glsl450", "glsl"},
                        Case{TargetName::Wgsl, "webgpu", "wgsl", "wgsl"},
                        Case{TargetName::CpuSimd, "cpu-simd", "c", "c"}}) {
    INFO("target " << target_name(c.name) << " on preset " << c.preset);
    const Target t = make_target(c.name, preset_caps(c.preset));
    const TargetPolicy pol = target_policy(t, {});
    CHECK(pol.emit.limits.cpu_device == t.compute.cpu_device);
    CHECK(!pol.emit.tiles);
    Plan plan = schedule(p, pol.schedule);
    REQUIRE(!plan.kernels.empty());
    const auto e = make_emitter(t, pol.emit);
    CHECK(e->target().name == c.name);
    CHECK(e->language() == c.language);
    CHECK(e->extension() == c.extension);
    for (const Kernel& k : plan.kernels) {
      INFO("kernel " << k.name);
      const std::string src = e->source(plan, k);
      CHECK(src == e->source(plan, k));  // deterministic
      CHECK(src.find(k.name) != std::string::npos);
      CHECK(e->code_key(plan, k) == kernel_code_key(plan, k, [&] { return e->source(plan, k); }));
      switch (c.name) {
        case TargetName::GlslEsFragment: {
          CHECK(src == emit_glsl450(plan, k, ShaderStage::Fragment));
          CHECK(src.rfind("#version 450", 0) == 0);
          REQUIRE(e->shader_stage() == ShaderStage::Fragment);
          const CompiledShader cs = compile_shader(k.name, src, *e->shader_stage());
          CHECK(cs.gles.find("#version 300 es") != std::string::npos);  // SPIRV-Cross's GLSL ES 3.00
          CHECK_THROWS_WITH(e->compute_kernel(plan, k), Catch::Contains("no compute dispatch"));
          CHECK(e->tile_candidates(plan, k).empty());
          break;
        }
        case TargetName::GlslEsCompute:
        case TargetName::SpirvVulkan: {
          const ComputeKernel ck = e->compute_kernel(plan, k);
          CHECK(ck.source == src);
          CHECK(ck.language == ComputeLanguage::Glsl450);
          CHECK(src == emit_compute_kernel(plan, k, t.compute, ComputeLanguage::Glsl450).source);
          CHECK(src.find("local_size_x") != std::string::npos);
          REQUIRE(e->shader_stage() == ShaderStage::Compute);
          const CompiledShader cs = compile_shader(k.name, src, *e->shader_stage());
          CHECK(cs.gles.find("#version 310 es") != std::string::npos);  // SPIRV-Cross's GLSL ES 3.10
          CHECK(e->tile_candidates(plan, k) == tile_candidates(plan, k, t.compute));
          break;
        }
        case TargetName::Wgsl: {
          const ComputeKernel ck = e->compute_kernel(plan, k);
          CHECK(ck.language == ComputeLanguage::Wgsl);
          CHECK(src == emit_compute_kernel(plan, k, t.compute, ComputeLanguage::Wgsl).source);
          CHECK(src.find("@compute @workgroup_size(") != std::string::npos);
          CHECK(src.find("fn main(") != std::string::npos);
          CHECK(!e->shader_stage());
          break;
        }
        case TargetName::CpuSimd: {
          const ComputeKernel ck = e->compute_kernel(plan, k);
          CHECK(ck.language == ComputeLanguage::C);
          CHECK(ck.entry == "sg_" + k.name);
          CHECK(src == emit_compute_kernel(plan, k, t.compute, ComputeLanguage::C).source);
          CHECK(src.find("#include <math.h>") != std::string::npos);
          CHECK(src.find("void " + ck.entry + "(") != std::string::npos);
          CHECK(!e->shader_stage());
          break;
        }
        case TargetName::Cpu: FAIL("the cpu target has no emitter");
      }
    }
  }
}

TEST_CASE("make_emitter: the cpu target and wrong target/storage combinations are refused with the reason",
          "[emit][target]") {
  CHECK_THROWS_AS(make_emitter(make_target(TargetName::Cpu, {})), UnsupportedError);
  CHECK_THROWS_WITH(make_emitter(make_target(TargetName::Cpu, {})), Catch::Contains("target cpu has no emitter"));

  Target wgsl_on_textures = make_target(TargetName::Wgsl, preset_caps("webgpu"));
  wgsl_on_textures.storage = StorageModel::Textures;
  CHECK_THROWS_AS(make_emitter(wgsl_on_textures), UnsupportedError);
  CHECK_THROWS_WITH(make_emitter(wgsl_on_textures),
                    Catch::Contains("target wgsl has compute stage and textures storage, but its emitter writes compute "
                                    "kernels over buffers"));

  Target fragment_on_buffers = make_target(TargetName::GlslEsFragment, preset_caps("gpu"));
  fragment_on_buffers.stage = TargetStage::Compute;
  fragment_on_buffers.storage = StorageModel::Buffers;
  CHECK_THROWS_WITH(make_emitter(fragment_on_buffers),
                    Catch::Contains("target glsl-es-fragment has compute stage and buffers storage"));

  // cpu-simd's C is the cpu plan only: limits without register tiles (a GPU's) are refused up front
  const Target csimd = make_target(TargetName::CpuSimd, preset_caps("cpu-simd"));
  CHECK_NOTHROW(make_emitter(csimd));
  CHECK_THROWS_WITH(make_emitter(csimd, EmitOptions{.limits = preset_caps("gpu").compute}),
                    Catch::Contains("register_tiles"));

  // a plan of the fragment target stores values in texture planes: a compute emitter refuses it, naming the kernel
  const Target frag = make_target(TargetName::GlslEsFragment, preset_caps("gpu"));
  Tensor a = input("a", {128, 64});
  Tensor b = input("b", {64, 128});
  Tensor c = input("c", {128, 8});
  Tensor t = matmul(a, b);  // stored in row planes: its kernel computes 4 rows per fragment
  Program p;
  p.add_output("y", matmul(t, c));
  p.add_output("s", sum(t, {0}));
  const Plan fplan = schedule(p, schedule_options(frag, {}));
  bool planes = false;
  for (const Value& v : fplan.values) planes = planes || v.planes > 1 || v.transposed;
  REQUIRE(planes);
  const auto vk = make_emitter(make_target(TargetName::SpirvVulkan, preset_caps("gpu")));
  bool refused = false;
  for (const Kernel& k : fplan.kernels) {
    try {
      (void)vk->source(fplan, k);
    } catch (const UnsupportedError& e) {
      refused = true;
      CHECK(std::string(e.what()).find("texture-plane storage") != std::string::npos);
    }
  }
  CHECK(refused);
}

TEST_CASE("target_policy: the one place emit options come from (tile class, forced tiles)", "[emit][schedule]") {
  const Target lavapipe = make_target(TargetName::SpirvVulkan, preset_caps("llvmpipe"));
  REQUIRE(lavapipe.compute.cpu_device);
  BackendOptions bo;
  CHECK(target_policy(lavapipe, bo).emit.limits.cpu_device);
  bo.gpu_tiles = true;  // GPU tile sizes on a CPU device (tests); the schedule still follows the device
  const TargetPolicy gpu_tiles = target_policy(lavapipe, bo);
  CHECK(!gpu_tiles.emit.limits.cpu_device);
  CHECK(gpu_tiles.schedule.max_loop_iterations == schedule_options(lavapipe, {}).max_loop_iterations);
  CHECK(gpu_tiles.emit.limits.max_shared_bytes == lavapipe.compute.max_shared_bytes);
  bo.vulkan.tiles = parse_tile_config("8x8.4x4.k8.g1");
  REQUIRE(bo.vulkan.tiles);
  CHECK(target_policy(lavapipe, bo).emit.tiles == bo.vulkan.tiles);
  // only the Vulkan backend takes forced tiles; the cpu-simd C kernels keep the cpu plan whatever gpu_tiles says
  CHECK(!target_policy(make_target(TargetName::GlslEsCompute, preset_caps("llvmpipe")), bo).emit.tiles);
  const Target csimd = make_target(TargetName::CpuSimd, preset_caps("cpu-simd"));
  CHECK(target_policy(csimd, bo).emit.limits.cpu_device);
  CHECK(target_policy(csimd, bo).emit.limits.register_tiles);
  // schedule_options is the policy's schedule half; validation errors name the field
  CHECK(schedule_options(lavapipe, bo).max_outputs == target_policy(lavapipe, bo).schedule.max_outputs);
  bo.max_outputs = 0;
  CHECK_THROWS_WITH(target_policy(lavapipe, bo), Catch::Contains("max_outputs must be >= 1"));
}
