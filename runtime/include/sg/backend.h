// shadergrad — backends: one interface over the CPU reference and the GLES (fragment-shader) runtime.
//
//   auto be = sg::make_backend({.kind = "auto"});        // GLES when the probe passes, else CPU (says why)
//   auto step = be.backend->compile(program);            // schedule + codegen + shader compile (cached)
//   auto out = step->run({{"x", xs}, {"labels", ys}});   // one step: outputs read back, updates committed
//
// Persistent values (Param/State leaves) live in the backend, shared by every Executable compiled from it
// (a train step and an eval program see the same parameters). On GLES and Vulkan they stay on the GPU: per step
// only the program outputs are read back; updates are ping-ponged (front/back textures or buffers swapped after
// the step). Vulkan records each step once per ping-pong parity into a command buffer and replays it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sg/autodiff.h"
#include "sg/compute_kernel.h"
#include "sg/emitter.h"
#include "sg/schedule.h"
#include "sg/target.h"

namespace sg {

/// One input fed to a run: the Input leaf's name and its row-major values (numel(shape) floats;
/// integer inputs such as labels as exact floats).
struct Feed {
  std::string name{};
  const std::vector<float>* data{};
};

/// Per-kernel time of the last profiled run (ms), in launch order.
struct KernelTiming {
  std::string kernel;
  double ms = 0;
  bool gpu_timer = false;  ///< true: GL timer query or Vulkan timestamps; false: glFinish- or submit-bounded CPU time
  /// Vulkan timestamps: when the kernel started, ms after the first kernel of the run started (the gap to the
  /// previous kernel's end is the barrier and launch cost between them); -1 where unknown.
  double start_ms = -1;
};

/// What a kernel hook sees after each launch (GPU: one kernel; CPU: one graph node) of Executable::run.
struct KernelEvent {
  int index = 0;                    ///< launch index within the run (GPU: kernel index)
  int output = 0;                   ///< which output of the kernel (multi-output kernels send one event each)
  std::string name;                 ///< kernel name ("k03_matmul_add_relu") or node label on the CPU
  const Kernel* kernel = nullptr;   ///< the scheduled kernel (GPU backends), else nullptr
  const Node* node = nullptr;       ///< the node whose value was just computed (GPU: output `output` of the kernel)
  /// Reads back the value just computed (row-major, numel(node->shape) floats). Synchronises the GPU.
  std::function<std::vector<float>()> read;
};
/// Called after every launch; may throw (e.g. a numerics check) to abort the run before updates commit.
using KernelHook = std::function<void(const KernelEvent&)>;

/// A program compiled for one backend.
class Executable {
 public:
  virtual ~Executable() = default;
  /// Runs one step. Every Input leaf must be fed (ValueError names a missing or mis-sized one). Returns the
  /// program outputs in Program::output_names order, then commits all updates at once.
  virtual std::vector<std::vector<float>> run(const std::vector<Feed>& feeds) = 0;
  /// GPU launches per run (CPU: graph nodes evaluated).
  virtual int kernels_per_step() const = 0;
  /// The schedule (GPU backends), or nullptr.
  virtual const Plan* plan() const { return nullptr; }
  /// The compute kernels (compute backends: gles-compute), one per plan kernel in launch order, or nullptr.
  virtual const std::vector<ComputeKernel>* compute_kernels() const { return nullptr; }
  /// Timings of the last run when profiling is on (BackendOptions::profile), else empty.
  virtual std::vector<KernelTiming> last_timings() const { return {}; }
  /// Host wall-clock milliseconds of the phases of the last run (GLES: "upload" of the fed inputs, "submit" of
  /// every draw call, "readback" of the outputs — which waits for the GPU to finish); empty if not recorded.
  virtual std::vector<std::pair<std::string, double>> last_phases() const { return {}; }
  /// Installs (or clears, with an empty function) a hook called after every launch of later runs.
  void set_kernel_hook(KernelHook hook) { hook_ = std::move(hook); }

 protected:
  /// GPU backends, after launching kernel `index` of `plan`: one hook event per output value of `k`, whose `read`
  /// is `read_value(value id)`. Does nothing without a hook.
  void notify_hook(int index, const Kernel& k, const Plan& plan,
                   const std::function<std::vector<float>(int value_id)>& read_value) const {
    if (!hook_) return;
    for (size_t j = 0; j < k.outputs.size(); ++j) {
      const int out = k.outputs[j];
      KernelEvent ev;
      ev.index = index;
      ev.output = static_cast<int>(j);
      ev.name = k.name;
      ev.kernel = &k;
      ev.node = plan.values[out].node.get();
      ev.read = [read_value, out] { return read_value(out); };  // a copy: a hook may keep it
      hook_(ev);
    }
  }

  KernelHook hook_;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;    ///< "gles", "vulkan" or "cpu"
  /// GL_RENDERER, the Vulkan device name, or "CPU reference (f32 storage, f64 accumulation)"
  virtual std::string device() const = 0;
  /// Schedules and compiles a program. Throws CompileError (a codegen bug) or BackendError.
  virtual std::unique_ptr<Executable> compile(const Program& program) = 0;
  /// Current value of a Param/State leaf (its initial data until a run updates it).
  virtual std::vector<float> read(const Tensor& leaf) = 0;
  /// Overwrites a Param/State leaf's current value (e.g. loading a checkpoint). ValueError on size mismatch.
  virtual void write(const Tensor& leaf, const std::vector<float>& data) = 0;
};

/// Options of the Vulkan backend (BackendOptions::vulkan; runtime/include/sg/vulkan_device.h for the device).
struct VulkanOptions {
  /// Validation layer + message counter: empty = env SG_VULKAN_VALIDATION ("1" = on), else on/off.
  std::optional<bool> validation{};
  /// Physical device: "" = env SG_VULKAN_DEVICE, else the best (discrete > integrated > virtual > cpu); an index or
  /// a case-insensitive part of the device name.
  std::string device{};
  /// Buffer access: empty = auto (direct map on integrated/cpu devices with host-visible device memory); false =
  /// staging buffers + copies (the discrete-GPU path); true = direct map.
  std::optional<bool> direct_map{};
  /// true: each step is recorded once into a command buffer per ping-pong parity and replayed (only the program
  /// outputs are read back); false: recorded afresh every step (the same commands; for tests and debugging).
  bool record_steps = true;
  /// Clamps the device's limits (each field the smaller of the device's and this; tests simulate small devices).
  std::optional<ComputeLimits> max_limits{};
  /// Forces the tile configuration of every tiled contraction (fitted per kernel: bk <= K, group_m where the grid
  /// allows; tests run every kernel with each configuration, experiments on a device): empty = env SG_TILE_CONFIG
  /// (TileConfig::str() form, e.g. "16x16.8x8.k8.g8.v4.pf"; ValueError when it does not parse), else the heuristic
  /// or the autotuner's pick.
  std::optional<TileConfig> tiles{};
  /// Subgroup operations in tree reductions (GL_KHR_shader_subgroup_arithmetic) where the device has them
  /// (ComputeLimits::subgroup_arithmetic): empty = env SG_VULKAN_SUBGROUPS ("0" = off; default on), else on/off.
  std::optional<bool> subgroups{};
  /// Buffer placement (vk::DeviceOptions::memory_policy): "" = env SG_VULKAN_MEMORY, default "dedicated"; "blocks".
  std::string memory_policy{};
  /// Each run() dispatches the step's kernels this many times back to back in its command buffer before the one
  /// readback (>= 1; ValueError otherwise). The repeats compute the same outputs from the same buffers, so results are
  /// those of one run; with profiling a kernel's time is the mean of its repeats. For benchmarks: a GPU left idle
  /// between short dispatches (readbacks, host work) is clocked down by its driver (docs/perf-log/13.md).
  int repeat_dispatches = 1;
};

/// Options of the cpu-simd backend (BackendOptions::cpu_simd; runtime/src/cpu_simd_backend.cpp).
struct CpuSimdOptions {
  /// The C compiler, a program name or path: "" = env SG_CC, else "cc" (gcc or clang; scripts/setup.sh installs gcc).
  std::string compiler{};
  /// The directory of compiled kernel libraries: "" = $SG_KERNEL_CACHE/cpu-simd when SG_KERNEL_CACHE is set, else
  /// $XDG_CACHE_HOME/shadergrad/cpu-simd, else ~/.cache/shadergrad/cpu-simd (created when missing).
  std::string cache_dir{};
  /// Threads running a kernel's workgroups: 0 = env SG_THREADS, else std::thread::hardware_concurrency(); 1 = the
  /// calling thread only. Kernels of little work always run on the calling thread.
  int threads = 0;
};

/// How a backend is made and what it may choose. Every std::optional left empty means "auto": the backend
/// decides from its device through sg::target_policy (below), the one place where the auto policy lives.
struct BackendOptions {
  /// "auto" | "gles" (fragment shaders) | "gles-compute" (GLES 3.1 compute shaders over storage buffers) |
  /// "vulkan" (SPIR-V compute) | "cpu-simd" (C kernels compiled by the system C compiler, run on the host's threads) |
  /// "cpu". The texture options below — max_texture_width, row_layout, row/col
  /// planes, flush_draws — apply to "gles" only (union_domains to all three GPU kinds).
  std::string kind = "auto";
  std::optional<int64_t> max_texture_width{};  ///< texels; empty = device limit; smaller forces row wrapping (tests)
  bool unfused = false;                       ///< one kernel per node (debug)
  /// Render targets (outputs) per kernel, i.e. multi-output fusion: empty = device limit (<= 8), 1 = off; capped by
  /// the device. schedule_options throws ValueError below 1.
  std::optional<int> max_outputs{};
  /// ScheduleOptions::min_parallel_texels (split-K for parallelism): empty = auto (gles: 16384 on GPUs; compute
  /// targets: 256 x the device's compute units (128 when unknown) on GPUs; 0 = off on CPU devices such as llvmpipe
  /// and lavapipe; cpu-simd: 1024), else the value (>= 0; tests force split-K on CPU devices with it).
  std::optional<int64_t> min_parallel_texels{};
  /// ScheduleOptions::row_aligned_layout: empty = auto (on for GPUs, off for CPU rasterisers).
  std::optional<bool> row_layout{};
  /// ScheduleOptions::row_planes (matmul-like kernels compute this many rows per fragment into as many render
  /// targets): empty = auto (4 on every device; docs/perf-log/5.md, Run 5a, and 6.md), else 1..8 (1 = off; capped by
  /// max_outputs, i.e. the device's draw buffers). schedule_options throws ValueError for other values.
  std::optional<int> row_planes{};
  /// ScheduleOptions::col_planes (column planes: a kernel given row planes also computes 2 texels of each row,
  /// i.e. a row_planes x 8 tile per fragment into row_planes x 2 render targets, when the render targets, its
  /// shape and its readers' samplers allow; Value::col_planes gives the storage). empty = auto (2 on every device;
  /// docs/perf-log/7.md, Run 7d), 1 = off, 2 = on. schedule_options throws ValueError for other values.
  std::optional<int> col_planes{};
  /// ScheduleOptions::union_domains: independent kernels of different shapes become one draw (union-domain
  /// kernels). gles: empty = auto: on for GPUs, off for CPU rasterisers (on llvmpipe every fragment runs every block's
  /// code under a mask; docs/decisions.md). gles-compute and vulkan: small independent kernels become one dispatch
  /// with its workgroups partitioned among them (ScheduleOptions::union_invocation_blocks); empty = on.
  std::optional<bool> union_domains{};
  /// gles-compute and vulkan: ScheduleOptions::reduce_tree_workgroups (a reduction to a few outputs over a long axis
  /// as a two-stage tree: many workgroups of partial reductions, then one per output). empty = auto (on for GPUs, off
  /// for CPU devices, whose loop budget splits such loops already), true = on (sg::reduce_tree_workgroups of the
  /// device), false = off.
  std::optional<bool> reduce_tree{};
  /// glFlush after the uploads and after every draw of a run, so the GPU starts on a step's kernels while the CPU
  /// is still submitting the later ones (drivers otherwise buffer the commands until the readback waits).
  /// empty = auto: on for GPUs, off for CPU rasterisers.
  std::optional<bool> flush_draws{};
  /// gles-compute and vulkan: the tile sizes of tiled kernels. empty = the device's class (ComputeLimits::cpu_device:
  /// small tiles on CPU implementations such as llvmpipe), true = GPU tile sizes, false = CPU tile sizes (tests run
  /// the GPU kernels on llvmpipe this way; the loop budget of the schedule still follows the device).
  std::optional<bool> gpu_tiles{};
  /// vulkan: time the tile configurations of every tiled contraction on the device (sg::tile_candidates, Vulkan
  /// timestamps) and run the fastest; winners are kept in the kernel cache (memory, and SG_KERNEL_CACHE's directory:
  /// later runs reuse them without timing). empty = env SG_AUTOTUNE ("1" = on), else off: the heuristic tiles
  /// (deterministic). ComputeKernel::tuning says which each kernel got. Other backends ignore it.
  std::optional<bool> autotune{};
  bool profile = false;            ///< per-kernel timings (timer queries or glFinish-bounded)
  std::string dump_dir{};          ///< dump every compiled plan here ("" = env SG_DUMP or none)
  VulkanOptions vulkan{};          ///< kind "vulkan" only
  CpuSimdOptions cpu_simd{};       ///< kind "cpu-simd" only
};

/// What the one target policy derives from a Target and BackendOptions: how to schedule a program for it and what
/// its emitter (sg::make_emitter, sg/emitter.h) is told.
struct TargetPolicy {
  ScheduleOptions schedule;
  EmitOptions emit;
};

/// The one target policy: the ScheduleOptions and EmitOptions a backend of `target` uses under `opt` (the backends,
/// `shadergrad dump`, the web export, the benchmarks and the debug session all call it, or schedule_options below).
/// Schedule options:
///  - textures (glsl-es-fragment): the target's texture, render-target and sampler limits; row planes 4 and column
///    planes 2 on every device; split-K (16384 texels), row-aligned layouts and union-domain kernels on GPUs, off
///    on CPU devices; each overridable by `opt`;
///  - buffers (compute targets): compute_schedule_options(target.compute) (sg/compute_kernel.h), with `unfused`
///    a max_outputs cap, min_parallel_texels (split-K), union_domains (small independent kernels as one dispatch) and
///    reduce_tree (the two-stage tree) from `opt`; the texture-only options are ignored;
///  - host (cpu): ScheduleOptions defaults with `unfused` (the schedule the debug session shows for the CPU
///    reference, which itself runs node by node).
/// Emit options (buffer targets; the fragment emitter takes none): the limits are target.compute, with the tile
/// class `opt.gpu_tiles` forces (ComputeLimits::cpu_device = !gpu_tiles) on every buffer target but cpu-simd (whose C
/// kernels are the cpu plan); spirv-vulkan's tiles are `opt.vulkan.tiles`.
/// Throws ValueError naming the field for out-of-range values (max_outputs < 1, min_parallel_texels < 0,
/// row_planes outside 1..8, col_planes other than 1 or 2).
TargetPolicy target_policy(const Target& target, const BackendOptions& opt);

/// target_policy(target, opt).schedule.
ScheduleOptions schedule_options(const Target& target, const BackendOptions& opt);

struct BackendChoice {
  std::unique_ptr<Backend> backend;
  std::string note;  ///< kind "auto": why it skipped each backend before the one it chose, one line each ("" = none)
};

/// Creates a backend. A kind "gles", "gles-compute" or "vulkan" that cannot work throws BackendError with the
/// probe's reason; "auto" is make_auto_backend. Invalid options (ValueError, e.g. max_texture_width above the device
/// limit) are thrown, never hidden by a fallback. Unknown kinds throw ValueError.
BackendChoice make_backend(const BackendOptions& opt = {});

/// kind "auto": tries the backends in their measured order of speed for the device class (docs/decisions.md):
/// on a GPU vulkan, then gles-compute, then gles; where the GL and Vulkan devices are CPU implementations (Mesa's
/// lavapipe, llvmpipe) or missing, cpu-simd (the C kernels; probed by compiling a one-kernel program, cached), then
/// gles, then the CPU reference. `note` says, one line per backend, why each one before the chosen one was skipped.
BackendChoice make_auto_backend(const BackendOptions& opt);

std::unique_ptr<Backend> make_cpu_backend();
/// Throws BackendError when no EGL/GLES 3 context with float render targets can be made.
std::unique_ptr<Backend> make_gles_backend(const BackendOptions& opt);
/// GLES 3.1 compute backend (runtime/src/gles_compute_backend.cpp). Throws BackendError when no EGL context of
/// ES 3.1 or later can be made (the message names the version the device gave) or the device allows fewer than
/// 2 storage buffers per compute shader.
std::unique_ptr<Backend> make_gles_compute_backend(const BackendOptions& opt);

/// The cpu-simd backend (runtime/src/cpu_simd_backend.cpp): every kernel of a compiled program printed in C
/// (emit_compute_kernel(.., ComputeLanguage::C), the cpu plan of the cpu-simd preset), one translation unit per
/// program compiled once by the system C compiler into a shared library in the kernel cache, loaded with dlopen.
/// Throws BackendError when the compiler cannot be run (at compile(): the message names it and how to choose
/// another).
std::unique_ptr<Backend> make_cpu_simd_backend(const BackendOptions& opt);

/// How the last compile() of a cpu-simd backend got its kernels.
struct CpuSimdBuild {
  std::string source;    ///< the translation unit's path (HASH.c in the cache directory)
  std::string library;   ///< the shared library's path (HASH.so)
  bool cache_hit = false;  ///< the library was in the cache: the compiler did not run
  double compile_ms = 0;   ///< wall time of the compiler (0 on a hit)
  int kernels = 0;         ///< kernels in the translation unit
};
/// The last build of cpu-simd backend `backend`. Throws ValueError when it is not one, or compiled nothing yet.
CpuSimdBuild cpu_simd_last_build(Backend& backend);

/// Throws BackendError when no Vulkan loader, driver (ICD) or device with a compute queue exists (the reason
/// names what is missing), or when the validation layer is asked for and not installed.
std::unique_ptr<Backend> make_vulkan_backend(const BackendOptions& opt);

namespace gles {
struct LiveObjects;  // sg/gles_device.h
}
namespace vk {
class Device;  // sg/vulkan_device.h
}
/// The Vulkan device of a Vulkan backend (limits, validation-message counter, live objects). Include
/// sg/vulkan_device.h to use it. Throws ValueError when `backend` is not a Vulkan backend.
vk::Device& vulkan_device(Backend& backend);
/// GL objects (textures, programs, framebuffers, storage buffers) alive on a GLES or GLES compute backend's
/// device, for leak tests.
/// Include sg/gles_device.h to use the result. Throws ValueError when `backend` is not a GLES backend.
gles::LiveObjects gles_live_objects(Backend& backend);

}  // namespace sg
