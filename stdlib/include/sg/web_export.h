// shadergrad — exporting programs as a web bundle: a directory the JavaScript runtime (runtime/web/) loads and
// runs in a browser on WebGPU (WGSL compute kernels over storage buffers) or WebGL2 (GLSL ES fragment shaders over
// RGBA32F textures); docs/BUNDLE.md is the format's schema.
//
//   DIR/bundle.json                 format "shadergrad-bundle/3": targets, persistent values, programs (inputs/
//                                   outputs; the webgl2 plan: values with their texture layouts, pooled buffers,
//                                   kernels in launch order with their samplers, render targets and draw extents;
//                                   the webgpu plans — one for GPUs, one for CPU implementations of WebGPU — each
//                                   with values with their buffer sizes, pooled buffers, kernels in dispatch order
//                                   with their bindings and workgroups), checks
//   DIR/weights.safetensors         initial values of every persistent value (parameters and optimizer state)
//                                   and every constant, F32; bundle.json gives each one's absolute byte offset
//   DIR/expected.safetensors        the checks: fixed inputs and the outputs the native CPU reference backend
//                                   computed for them (a sequence of runs), and the persistent values after it
//   DIR/shaders/PROGRAM/*.frag      GLSL ES 3.00 fragment shaders, one per kernel, as `shadergrad dump` writes
//                                   them (header comment naming the graph nodes and user source lines)
//   DIR/shaders/PROGRAM/*.wgsl      WGSL compute shaders, one per kernel of the first webgpu plan (emit_compute_kernel
//                                   in WGSL: the same kernel IR as the Vulkan and GLES compute backends); those of
//                                   the other plan in shaders/PROGRAM/PLAN/ unless byte-identical to one already
//                                   written for the program (then the kernel names that file)
//   DIR/shaders/PROGRAM/plan.json   Plan::to_json of the program (for people; the runtime reads bundle.json);
//                                   plan.webgpu.json the same for the webgpu plan
//   DIR/runtime/                    a copy of the JavaScript runtime (ES modules + shadergrad.d.ts)
//
// The bundle description is built here from the public Plan/Value/Kernel structs (sg/schedule.h); the shader
// sources come from the same emitter and compiler pipeline as the GLES backend (emit_glsl450 -> glslang ->
// SPIRV-Cross), so a bundle runs exactly the kernels the native GLES backend would run for its schedule.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sg/backend.h"
#include "sg/compute_kernel.h"
#include "sg/schedule.h"

namespace sg::web {

/// The format tag of bundle.json. The JavaScript runtime reads it and format 2 (one webgpu plan; a format-3 bundle
/// with a single webgpu plan has the same fields plus `webgpu.plans`) and refuses any other.
inline constexpr const char* kBundleFormat = "shadergrad-bundle/3";

/// The schedule a WebGL2 bundle is made for. The defaults stay within what every WebGL2 implementation
/// guarantees except the texture size (WebGL2 guarantees MAX_DRAW_BUFFERS >= 4, MAX_TEXTURE_IMAGE_UNITS >= 16,
/// MAX_TEXTURE_SIZE >= 2048; 4096 is what nearly every device offers, SwiftShader gives 8192). The runtime checks
/// the device's limits against the bundle's `requires` and refuses with the limit named.
/// Guarded reads (zero-padding reads: one branch each in a fragment shader's loop over a texel's elements) per WebGL2
/// kernel (ScheduleOptions::max_guarded_reads). SwiftShader (Chromium 156's WebGL2 without a GPU) lost the GPU
/// process for the 31 branches of a concat of 15 slices with its gradient in one kernel and rendered zeros for 33
/// (a concat of 32 slices); 29 ran. Half of that leaves room for the lane loop's own branches. A contraction's prologue
/// counts its guarded reads as emitted (ScheduleOptions::loop_body_copies). The WebGPU cpu plans (SwiftShader as well)
/// keep the same limit: a register-tiled contraction reading a concat (48 guarded reads as emitted) lost the device
/// after 230 s of pipeline creation (issue 37).
inline constexpr int kWebGL2MaxGuardedReads = 16;

struct WebGL2Target {
  int64_t max_texture_size = 4096;  ///< texels per texture side (layouts wrap rows at this width)
  int max_draw_buffers = 4;         ///< render targets per kernel (ScheduleOptions::max_outputs)
  int max_texture_units = 16;       ///< samplers per kernel (ScheduleOptions::max_inputs; 1..16)
  int row_planes = 4;               ///< ScheduleOptions::row_planes (1 = off)
  int col_planes = 1;               ///< ScheduleOptions::col_planes (1 = off, 2 = on; needs 8 draw buffers with 4 row planes)
  bool union_domains = false;       ///< ScheduleOptions::union_domains (off: CPU rasterisers run every block masked)
  /// ScheduleOptions::row_aligned_layout: 2-D textures (tensor rows kept whole in texture rows, near-square
  /// blocks at most 64 texels wide for the rest: TextureLayout::for_shape) instead of one long texture row per
  /// small tensor. On by default: SwiftShader shades 2x2 quads and hands quad rows to its threads (row r to
  /// cluster r mod 16), so a 1-texel-high draw wastes half its lanes and all but one thread (measured in
  /// docs/perf-log/W1.md and W14.md); hardware GPUs gain from 2-D locality too.
  bool row_aligned_layout = true;
  int64_t min_parallel_texels = 0;  ///< ScheduleOptions::min_parallel_texels (split-K; 0 = off)

  /// The ScheduleOptions these settings stand for. Throws ValueError for values out of range (the message names
  /// the field and the allowed range).
  ScheduleOptions schedule_options() const;
  /// {"name": "webgl2", "stage": "fragment", "language": "glsl-es-3.00", ...the fields above}.
  nlohmann::json to_json() const;
};

/// The schedule a WebGPU bundle is made for: the WGSL compute target of a WebGPU device preset (sg::preset_caps:
/// "webgpu" = the limits every WebGPU device guarantees in core mode, "webgpu-compat" = compatibility mode, e.g.
/// WebGPU on OpenGL ES). The runtime requests the limits the kernels need (bundle.json `webgpu.requires`) and
/// refuses a device below them with the limit named.
struct WebGPUTarget {
  std::string preset = "webgpu";  ///< "webgpu" | "webgpu-compat"
  /// Kernels for a CPU implementation of WebGPU (SwiftShader in Chromium, Dawn over llvmpipe): reductions split below
  /// the fragment target's 32768 iterations per invocation (Mesa's gallivm stops a loop after 65535,
  /// ComputeLimits::cpu_device), no split-K, and contractions as register tiles without workgroup memory or barriers
  /// (ComputeLimits::register_tiles). Off by default. write_bundle sets it per plan (BundleTargets::webgpu_plans).
  bool cpu_device = false;
  /// With cpu_device: register tiles whose 4 lanes share one factor's loads through WGSL subgroup operations
  /// (ComputeLimits::broadcast_lanes): the "cpu-subgroups" plan, which needs the 'subgroups' feature and subgroups of
  /// exactly 4 consecutive invocations (SwiftShader's). write_bundle sets it per plan.
  bool subgroup_broadcast = false;

  /// The compute limits of the preset (what compute_schedule_options and emit_compute_kernel see). Throws
  /// ValueError for an unknown preset (naming the known ones).
  ComputeLimits limits() const;
  /// The ScheduleOptions of the preset's WGSL target (sg::schedule_options over make_target(Wgsl, caps)).
  ScheduleOptions schedule_options() const;
  /// {"name": "webgpu", "preset", "stage": "compute", "language": "wgsl", "storage": "buffers", ...limits}.
  nlohmann::json to_json() const;
};

/// A webgpu plan a bundle may carry: its name, the WebGPUTarget flags it is scheduled with, and its preference among
/// the plans for its kind of adapter (0 first). Written into bundle.json (`webgpu.plans[].target.cpu_device`,
/// `preference`), from which the runtime picks one by the adapter (docs/BUNDLE.md "Choosing a webgpu plan").
struct WebGPUPlanKind {
  const char* name;
  bool cpu_device;          ///< for CPU implementations of WebGPU (WebGPUTarget::cpu_device)
  bool subgroup_broadcast;  ///< register tiles sharing loads across subgroups (WebGPUTarget::subgroup_broadcast)
  int preference;           ///< among the plans of its adapter kind: 0 = tried first
};

/// The webgpu plans: "gpu" (kernels for hardware GPUs), "cpu" (for CPU implementations of WebGPU) and
/// "cpu-subgroups" (the cpu plan whose contractions share loads across subgroups; preferred to "cpu" where the
/// adapter's subgroups are 4 consecutive invocations, with "cpu" as the fallback when they are not).
inline constexpr WebGPUPlanKind kWebGPUPlans[] = {
    {"gpu", false, false, 0}, {"cpu", true, false, 1}, {"cpu-subgroups", true, true, 0}};

/// The plan of kWebGPUPlans named `name`; ValueError listing the names otherwise.
const WebGPUPlanKind& webgpu_plan_kind(const std::string& name);

/// The targets a bundle carries; at least one. Converts from a WebGL2Target (both targets, that webgl2 schedule).
struct BundleTargets {
  bool webgpu = true;
  bool webgl2 = true;
  /// The webgpu plans, in bundle.json order (`webgpu.plans`; the first one is `programs.NAME.webgpu`, another one
  /// `programs.NAME.webgpu_PLAN`): a non-empty list of distinct kWebGPUPlans names. Default all three, GPU first.
  std::vector<std::string> webgpu_plans = {"gpu", "cpu", "cpu-subgroups"};
  /// The wasm plan (bundle.json `wasm`, `programs.NAME.wasm`): every program scheduled like the native cpu-simd
  /// backend, its C11 kernels compiled at export time into one WebAssembly SIMD128 module (wasm/kernels.wasm) by
  /// clang-14 --target=wasm32-wasi and wasm-ld ($SG_WASM_CC for another clang), run by the JavaScript runtime when
  /// neither WebGPU nor WebGL2 can. Off here (a BundleTargets made in code carries webgpu and webgl2);
  /// `shadergrad export` turns it on by default (--targets webgpu,webgl2,wasm).
  bool wasm = false;
  /// The preset of every webgpu plan. Its cpu_device must stay false (write_bundle throws ValueError otherwise):
  /// choose the CPU implementation's kernels with webgpu_plans = {"cpu"}.
  WebGPUTarget webgpu_target;
  WebGL2Target webgl2_target;
  BundleTargets() = default;
  BundleTargets(const WebGL2Target& t) : webgl2_target(t) {}  // NOLINT: implicit on purpose (one-target callers)
};

/// One program of a bundle ("infer", "train"): its name is the key in bundle.json's `programs` and the folder of
/// its shaders. Persistent values (Param/State leaves) are shared between the programs of a bundle by node name.
struct BundleProgram {
  std::string name{};
  Program program{};
};

/// One run of the checks sequence: `program` fed with `feeds` (Input leaf name -> row-major values; integer inputs
/// as exact floats). The runs are replayed in order on the CPU reference backend; each run's outputs are recorded,
/// and the persistent values after the last run.
struct CheckRun {
  std::string program{};
  std::vector<std::pair<std::string, std::vector<float>>> feeds{};
  /// Also record the CPU reference's value of every graph node this run evaluates (bundle.json
  /// checks.runs[].nodes, keyed by node number = Plan::node_index): what the page debugger compares each kernel's
  /// outputs with (docs/BUNDLE.md "checks").
  bool nodes = false;
};

/// A checks tolerance of one persistent value that replaces the bundle's `persistent` one (bundle.json
/// checks.tolerance.persistent_by_name.NAME; docs/BUNDLE.md "Checks"): metric "abs" judges max |a_i - e_i| <= abs.
/// For a value whose gradient is zero in exact arithmetic (a key projection's bias: softmax ignores a shift of a query's
/// scores), where Adam turns each backend's rounding noise into steps of up to about lr each: its own scale says
/// nothing, the learning rate bounds the difference. `why` says so in bundle.json.
struct PersistentTolerance {
  double abs = 0;
  std::string why{};
};

/// The checks tolerance of the program outputs (bundle.json checks.tolerance.outputs; docs/BUNDLE.md "Checks"), metric
/// elementwise: |a_i - e_i| / max(|e_i|, floor * max_j |e_j|) <= rel for every element. Elements smaller than
/// floor * max|e| are judged by an absolute error of rel * floor * max|e|: the default (rel 1e-4, floor 1e-3) allows
/// 1e-7 of the output's scale there, about 1.7 f32 rounding units (2^-24) of it. An output that is a near-cancelling
/// result of a deep f32 computation (a language model's logit near zero after LayerNorms, attention and GELU MLPs)
/// misses that by a few rounding units of its scale on every f32 backend: such a model sets its own, measured, with
/// `why` (written to bundle.json).
struct OutputTolerance {
  double rel = 1e-4;
  double floor = 1e-3;
  std::string why{};
};

struct BundleSpec {
  std::string model{};                              ///< for bundle.json's `model` (free text)
  std::vector<BundleProgram> programs{};
  std::vector<CheckRun> checks{};                   ///< may be empty (no expected.safetensors then)
  std::map<std::string, std::string> metadata{};    ///< extra strings for bundle.json's `metadata`
  /// Per persistent value (by name): its own checks tolerance (PersistentTolerance); may be empty. write_bundle throws
  /// ValueError for a name that is no persistent value, or abs <= 0.
  std::map<std::string, PersistentTolerance> persistent_tolerance{};
  /// The program outputs' checks tolerance (OutputTolerance); empty = rel 1e-4, floor 1e-3 (no `why` in bundle.json).
  /// write_bundle throws ValueError for rel <= 0, floor < 0 or an empty why.
  std::optional<OutputTolerance> outputs_tolerance{};
  /// Called on the CPU backend before the initial persistent values are read (e.g. loading a checkpoint);
  /// may be empty.
  std::function<void(Backend&)> prepare;
};

/// What write_bundle wrote.
struct ExportSummary {
  std::vector<std::pair<std::string, int>> kernels;  ///< per program: kernels per run (webgl2 plan)
  std::vector<std::pair<std::string, int>> webgpu_kernels;  ///< per program: kernels per run (first webgpu plan)
  /// Per webgpu plan in bundle order: its name, kernels per run per program, and how many of its WGSL files are
  /// shared with (byte-identical to) a file written before for the same program.
  struct WebGPUPlanSummary {
    std::string name;
    std::vector<std::pair<std::string, int>> kernels;
    int shared_shaders = 0;
  };
  std::vector<WebGPUPlanSummary> webgpu_plans;
  std::vector<std::pair<std::string, int>> wasm_kernels;  ///< per program: kernels per run (wasm plan)
  double wasm_compile_ms = 0;                        ///< clang + wasm-ld time of the wasm module
  int64_t wasm_bytes = 0;                            ///< size of wasm/kernels.wasm
  int64_t weight_bytes = 0;                          ///< size of weights.safetensors
  int64_t persistent_values = 0;
  std::vector<std::string> files;                    ///< every file written, relative to the bundle directory
};

/// Schedules every program for each target of `targets` — webgl2: kernels compiled to GLSL ES 3.00 fragment
/// shaders; webgpu: WGSL compute kernels; wasm: C11 kernels compiled to one WebAssembly module — and writes the bundle into `dir` (created if missing; an earlier
/// bundle's shaders and runtime files there are replaced). Throws ValueError when no target is chosen, when the
/// webgpu plans are empty, repeated or unknown (or webgpu_target.cpu_device is set), when two persistent values
/// share a node name or a name is empty, when a persistent value gets different texture layouts in two programs, or
/// when a check names an unknown program or input; CompileError for a kernel that does not compile; UnsupportedError (naming the kernel and limit) for a kernel that does not fit the WebGPU preset;
/// IOError naming the path when a file cannot be written; CompileError naming the packages when the wasm target's
/// compiler (clang-14, wasm-ld, wasi-libc) is missing.
ExportSummary write_bundle(const BundleSpec& spec, const BundleTargets& targets, const std::string& dir);

/// The structure hash of a bundle (bundle.json `metadata.structure_hash`, 16 hex digits, FNV-1a 64): every
/// program's graph in topological order (each node's op label, shape, dtype, leaf name, attributes and the
/// positions of its inputs; constants by shape, not value), its output names and its updates' targets. It names
/// the persistent values (parameters, optimizer state) with their shapes, so weights saved under one hash fit
/// every bundle with that hash; it does not depend on the target or the schedule (the same model exported for
/// WebGL2 or WebGPU has one hash), nor on the initial values. Hyper-parameters the graph holds as literals (a
/// learning rate inside an update's map body) are part of the graph, so they change the hash too. The page's
/// IndexedDB key includes it (runtime/web/persist.js): a changed model never loads old weights.
std::string structure_hash(const BundleSpec& spec);

/// The bundle description of one scheduled program (bundle.json's `programs.NAME`: values, buffers, kernels,
/// inputs, outputs, updates), given where its shaders live (`shader_dir`, relative to the bundle). Persistent
/// values are named by their node name; constants get no `data` here (write_bundle adds it). Exposed for tests.
nlohmann::json describe_program(const Plan& plan, const std::string& shader_dir);

/// The webgpu plan of one scheduled program (bundle.json `programs.NAME.webgpu`): values with their buffer sizes
/// (bytes, vec4-rounded) and storage (own, persistent front/back, pooled), pooled buffers, kernels in dispatch order
/// with their WGSL file (`shader_dir/KERNEL.wgsl`), entry point, workgroup size, workgroups and bindings (value and
/// access per binding: inputs read, outputs read_write), inputs, outputs, updates. `kernels[i]` is the WGSL kernel
/// of plan.kernels[i]. Exposed for tests.
nlohmann::json describe_webgpu_program(const Plan& plan, const std::vector<ComputeKernel>& kernels,
                                       const std::string& shader_dir);

/// How the runtime tells a CPU implementation of WebGPU (bundle.json `webgpu.cpu_adapter`): {"fallback_adapter": true,
/// "names": sg::cpu_renderer_names()}: a fallback adapter, or adapter info naming one of `names` as a whole word.
nlohmann::json cpu_adapter_rule();

/// Options of `shadergrad export` for the built-in models.
struct ModelExportOptions {
  std::string model = "mlp";     ///< mlp | cnn | cnn-large | cnn5 | resnet (sg::nn::make_module)
  /// geometry: fashion-mnist (1x28x28) | digits (1x8x8) | shapes (1x128x128); "" = train::default_dataset(model)
  std::string dataset{};
  int64_t batch = 0;             ///< train step batch; 0 = 128 for mlp, 64 otherwise
  int64_t infer_batch = 0;       ///< inference batch; 0 = the train batch
  double lr = 0;                 ///< Adam learning rate; 0 = 1e-3 for mlp, 2e-3 otherwise (PEERS.md's models)
  std::string load{};            ///< checkpoint (shadergrad train --save) for the initial parameters; "" = fresh init
  uint64_t seed = 0;             ///< parameter init (when no checkpoint) and the fixed check inputs
  int check_steps = 3;           ///< train steps in the checks (inference, N train steps, inference again)
  /// Adds program "train_debug": the train step (same inputs, same Adam state and updates) that also outputs
  /// every layer's activation ("act/I", the output of layer I of the Sequential) and its gradient ("grad/I",
  /// d loss / d act/I), and each parameter's gradient ("gradp/NAME"), for the gradient-flow view of a page.
  /// Sequential models only (mlp, cnn, cnn-large, cnn5): model_bundle_spec throws ValueError for resnet.
  bool debug_program = false;
  /// Only program "infer" (no train step; checks: one inference), e.g. for a Worker that only classifies.
  bool infer_only = false;
  /// The first infer and the first train check runs also record every graph node's CPU reference value
  /// (CheckRun::nodes; shadergrad export --check-nodes).
  bool check_nodes = false;
};

/// The bundle of a built-in model (sg::nn::make_module): programs "infer" (output "probs" = softmax of the logits,
/// [infer_batch, classes]; built in eval mode: BatchNorm reads its running statistics, dropout is the identity) and
/// "train" (output "loss", one Adam step; built in training mode: batch statistics, and the step also commits the
/// BatchNorm running statistics, num_batches_tracked and the dropout step counters), with debug_program also
/// "train_debug"; checks: infer, check_steps train steps on one fixed batch, infer (and one train_debug step before
/// the last infer when present). metadata: dataset, batch, infer_batch, optimizer, seed, initial_parameters, layers
/// (JSON array: a Sequential's layer names "0: Flatten()"..., resnet's children "conv1: Conv2d(...)", "layer1:
/// Sequential"...), checkpoint_model, checkpoint_structure_hash (what a checkpoint of this model records,
/// sg::nn::Module::structure_hash) and checkpoint_buffers (JSON array of the state_dict's buffers, e.g.
/// "bn1.running_mean": a checkpoint holds them besides the parameters), so a page can write weights
/// `shadergrad predict --load` reads. With `load`, the checkpoint's parameters and buffers are the initial values.
/// The fixed inputs are uniform in [0, 1) (labels uniform in 0..9) from a 32-bit Mersenne twister seeded with
/// `seed` (bit-exact on every platform). resnet and cnn-large judge every parameter after the steps by abs
/// 2 * lr * check_steps (BundleSpec::persistent_tolerance: Adam turns f32 noise in a near-zero gradient into a step
/// of up to about lr), resnet's default export also its Adam moments by measured bounds (docs/BUNDLE.md "Checks").
/// Throws ValueError for unknown models/datasets, IOError for a bad checkpoint (naming the file).
BundleSpec model_bundle_spec(const ModelExportOptions& opt);

/// One file of the JavaScript runtime embedded at build time (runtime/web/): its path relative to runtime/web
/// and its bytes.
struct EmbeddedFile {
  std::string_view path;
  std::string_view bytes;
};
/// The runtime files write_bundle copies into DIR/runtime/.
const std::vector<EmbeddedFile>& runtime_files();

}  // namespace sg::web
