// shadergrad — debug mode: tensors and gradients as colour images, per-launch statistics, numerics checks,
// the gradient-flow report (report.html) and a scriptable step-through debugger over a compiled plan.
//
//   sg::debug::TrainStep ts = sg::debug::make_train_step(loss, model.named_parameters(), *opt);
//   auto exe = backend->compile(ts.program);
//   sg::debug::Session dbg({.out_dir = "debug_out"});
//   dbg.attach(*exe, ts, backend.get());           // installs the kernel hook (Executable::set_kernel_hook)
//   for (...) dbg.run({{"x", &xs}, {"labels", &ys}});  // one train step, every launch captured
//   dbg.write_report();                              // report.html, stats.json, gradient_flow.png
//
// A Session sees every launch of the executable it is attached to: on GPU backends one kernel (a fusion group:
// Kernel::nodes), on the CPU backend one graph node. For each captured launch it computes TensorStats of the
// value just written and renders it with sg::image::render_tensor (colormaps: docs/COLORMAPS.md) into
// OUT/stepNNN/<launch>.<role>.png. Values that a fused kernel computes only in registers are never stored on
// the device; with Options::recompute (the default) the session re-evaluates them on the CPU reference from the
// kernel's stored inputs right after the kernel ran (and checks the kernel's stored outputs against the same
// re-evaluation), so every node has a value and, for parameter-dependent forward nodes, a gradient.
// BackendOptions::unfused (one kernel per node) stores every node on the device instead.
//
// Roles: a node of a TrainStep is "forward" (needed for the loss), "backward" (needed for a parameter gradient
// but not for the loss) or "update" (optimizer); a backward node that is the gradient d(loss)/d(t) of a
// parameter or of a forward node t says so (Capture::grad_of). make_train_step() builds the Program with one
// sg::grad call whose `wrt` lists the parameters and every forward node depending on them, so this mapping is
// exact, and (by default) adds each parameter gradient as a program output so that it is materialised (and
// its L2 norm recorded) even in fused plans.
//
// Node numbers ("n12") are positions in Program::nodes() (deterministic topological order, the numbers
// plan.json uses), not the process-wide Node::id: transcripts and reports are reproducible.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sg/backend.h"
#include "sg/image.h"

namespace sg::debug {

/// Thrown by a Session with Options::check_numerics at the first launch whose value holds a NaN or ±Inf (or a
/// fed input holding one). The message names the step, the kernel, every graph node it computes with the
/// user's source line, the node that first goes non-finite (re-evaluated on the CPU reference from the
/// kernel's stored inputs, when they are available), and how to proceed.
class NumericsError : public Error {
 public:
  using Error::Error;
  std::string kernel;                ///< the launch's name ("k05_map_log"; "k05_sum_mul_add_pow.t5_3" for output 3 of a
                                     ///< multi-output kernel; on the CPU backend "n012_map")
  std::vector<std::string> sources;  ///< user source lines ("model.cpp:42") of the kernel's nodes, distinct
};

/// Statistics of one tensor. min/max/mean/std/l2 are over the finite elements only (NaN when there are none);
/// std is the population standard deviation sqrt(mean((v - mean)^2)) (numpy's default, ddof = 0);
/// l2 = sqrt(sum v^2). Accumulated in double.
struct TensorStats {
  Shape shape;
  int64_t numel = 0;
  double min = 0, max = 0, mean = 0, std = 0, l2 = 0;
  int64_t nan = 0, posinf = 0, neginf = 0;

  int64_t nonfinite() const { return nan + posinf + neginf; }
  /// "min -1.5 max 2 mean 0.25 std 1.2 l2 3.4 nan 0 +inf 0 -inf 0" (numbers as {:.6g}).
  std::string str() const;
  nlohmann::json to_json() const;
};

/// Stats of a row-major tensor with `shape` (numel(shape) floats at `data`).
TensorStats compute_stats(const float* data, ShapeRef shape);

/// What a node is in a train step (see the file comment).
enum class Role : uint8_t { Input, Param, State, Const, Forward, Backward, Update };
const char* role_name(Role r);  ///< "input", "param", "state", "const", "forward", "backward", "update"

/// A train-step Program plus the bookkeeping debug tools need: which node is the gradient of which tensor.
struct TrainStep {
  Program program;
  Tensor loss;
  std::vector<std::pair<std::string, Tensor>> params;  ///< named parameters, as given
  std::vector<Tensor> param_grads;                     ///< d(loss)/d(param), same order as params
  /// d(loss)/d(t) for every forward node t that depends on a parameter (and for the parameters).
  std::map<const Node*, NodePtr> adjoint;
  /// Optional layer labels for the report and the debugger: (label, the layer's output) in order; a forward node
  /// belongs to the first layer whose output was created at or after it (Node::id), parameters to the layer
  /// their name's prefix ("1." of "1.weight") names, a gradient d(loss)/d(t) to t's layer. run_debug fills it from
  /// Sequential::forward_layers.
  std::vector<std::pair<std::string, Tensor>> layers{};
};

/// Like sg::make_train_step (outputs "loss" first, then `extra_outputs`; updates from `opt`) but computes the
/// gradients with wrt = parameters + every parameter-dependent forward node (the backward graph is the same
/// one: these adjoints are the nodes the backward pass builds anyway). With `output_grads`, every parameter
/// gradient is also a program output named "grad:<param name>" (materialised, read back each step).
/// Throws ValueError when a tensor in `params` is not a Param leaf.
TrainStep make_train_step(const Tensor& loss, const std::vector<std::pair<std::string, Tensor>>& params,
                          Optimizer& opt, const std::vector<std::pair<std::string, Tensor>>& extra_outputs = {},
                          bool output_grads = true);

/// One stored value of one launch of the attached executable. A kernel writing several values at once
/// (multi-output fusion: one draw, several render targets) appears once per output, consecutively, named
/// "<kernel>.<value>" ("k05_sum_mul_add_pow.t5_2"); a single-output kernel keeps the kernel's name.
struct Launch {
  int index = 0;
  std::string name;                 ///< kernel name, "<kernel>.<value>" for multi-output kernels; on the CPU
                                    ///< backend "n012_matmul" (node number + op)
  std::string kernel_name;          ///< the kernel's own name ("k05_sum_mul_add_pow"; = name on the CPU backend)
  std::vector<const Node*> nodes;   ///< graph nodes computed by the kernel (all its outputs'; one on the CPU)
  const Node* output = nullptr;     ///< the node whose value this entry stores
  const Kernel* kernel = nullptr;   ///< the scheduled kernel (GPU backends), else nullptr
  int output_index = 0;             ///< render target of `output` in its kernel (0 .. outputs - 1)
  int outputs = 1;                  ///< values the kernel stores (render targets)
  int first = 0;                    ///< index of the kernel's first entry (its output 0)
};

/// One captured tensor of one step.
struct Capture {
  int step = 0;
  int launch = -1;         ///< launch index; -1 for leaves recorded before the run (parameters, fed inputs)
  std::string kernel;      ///< the launch's name ("" for leaves)
  int node = -1;           ///< node number
  Role role = Role::Forward;
  std::string grad_of;     ///< "0.weight" / "n12" when the node is d(loss)/d(that), else ""
  TensorStats stats;
  std::string png;         ///< image path relative to Options::out_dir ("" when none was written)
  std::string note;        ///< render_tensor's note (downsampling), if any, and how the image is tiled
  std::string colormap;    ///< the image's colormap ("diverging", "viridis", ...; "" without an image)
  double lo = 0, hi = 0;   ///< the image's colour range (its colour bar's end values)
  /// The kernel computed this node in registers without storing it (fusion): the value is its CPU-reference
  /// re-evaluation from the kernel's stored inputs (Options::recompute).
  bool recomputed = false;
  /// For a stored output of a kernel whose unstored nodes were recomputed: max |stored - CPU reference| /
  /// max(max |CPU reference|, 1e-30), the CPU reference evaluated from the same stored inputs (how far the
  /// recomputed values can be trusted to be what the GPU computed). NaN when not checked.
  double reference_diff = std::numeric_limits<double>::quiet_NaN();
};

/// The L2 norm of one parameter's gradient per step.
struct GradientNorms {
  std::string param;
  /// L2 norm of d(loss)/d(param) per step; NaN where the gradient holds a non-finite element or was not computed.
  std::vector<double> l2;
  /// Per step: false where the gradient was never computed (the session stopped, e.g. on `quit`, before the
  /// kernel that writes it ran); l2 is NaN there too, and the report and stats.json show "not computed" / null.
  std::vector<bool> computed;
};

struct Options {
  /// Where images, stats.json and report.html go; "" = keep everything in memory (no files).
  std::string out_dir{};
  /// What to capture (stats, and images when out_dir is set). Empty = everything. Otherwise each entry selects
  /// launches: a launch name or its prefix up to an '_' ("k03"), a node number ("n12" or "12": the launch that
  /// stores or computes it; for a leaf, its value at the start of each step), a parameter or input name
  /// ("0.weight": its value, and the launch computing its gradient), "all", or a role ("forward", "backward",
  /// "update", "gradients" = launches computing a parameter gradient); a multi-output kernel's own name selects
  /// all its launches, a launch name ("k05_....t5_2") one of them. Launches computing parameter gradients
  /// are always captured (gradient_norms). An entry matching nothing makes attach() throw ValueError.
  std::vector<std::string> capture{};
  /// Stop at the first launch producing a NaN/±Inf (throws NumericsError); reads back every launch.
  bool check_numerics = false;
  /// Give every node a value: after a fused kernel ran, the nodes it kept in registers are re-evaluated on the
  /// CPU reference (f64, rounded to f32 per node) from the kernel's stored inputs, and each stored output is
  /// compared with its own re-evaluation (Capture::reference_diff). Done when such a node is to be captured
  /// (`capture` empty, or selecting it or its kernel) or the debugger is attached; then every launch is read back.
  bool recompute = true;
  bool write_images = true;           ///< render PNGs of captured tensors (when out_dir is set)
  bool capture_leaves = true;         ///< also record parameter values and fed inputs at the start of each step
  image::RenderOptions render{};      ///< colormap and sizes of the images
};

/// Heading of a report: title plus (key, value) lines shown at the top.
struct ReportInfo {
  std::string title = "shadergrad debug report";
  std::vector<std::pair<std::string, std::string>> facts{};
};

/// The step-through debugger's settings (see Session::set_debugger).
struct DebuggerOptions {
  bool echo = true;            ///< echo each command after the prompt (scripts: a readable transcript)
  bool stop_at_start = true;   ///< prompt before the first launch of the first step
  std::string prompt = "(sgdb) ";
};

/// Attaches to an Executable as its kernel hook and records what every launch computes. Not thread-safe.
class Session {
 public:
  explicit Session(Options opt = {});
  ~Session();  ///< detaches
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Attaches to `exe`, compiled from `step.program`. `backend` (optional) is used to read parameter values
  /// (images, `print`, NaN pinpointing); without it parameters show their initial data.
  /// `exe` (and `backend`) must outlive the session, or be detached first (the destructor clears exe's hook).
  /// Throws ValueError when exe's plan was not scheduled from this program, or a capture entry matches nothing.
  void attach(Executable& exe, const TrainStep& step, Backend* backend = nullptr);
  /// Attaches to an executable of any program: forward = nodes the outputs need, the rest are "update".
  void attach(Executable& exe, const Program& program, Backend* backend = nullptr);
  /// Removes the hook (also done by the destructor and by the next attach).
  void detach();

  /// Runs one step of the attached executable with capture: records leaves, runs, returns the outputs.
  /// Throws NumericsError (check_numerics), ValueError when nothing is attached, and whatever the run throws.
  /// Returns an empty vector when the debugger's `quit` ended the run (see quit_requested()).
  std::vector<std::vector<float>> run(const std::vector<Feed>& feeds);
  int steps_run() const;        ///< steps started so far (the current step is steps_run() - 1)
  bool quit_requested() const;  ///< the debugger's `quit` was given

  /// Interactive mode: the session stops (before the first launch when stop_at_start, after `next`/`step`,
  /// at breakpoints) and reads commands from `in` (lines; EOF = quit), writing a deterministic transcript to
  /// `out` (no timings, no addresses). Commands: next, step, continue, break NODE|KERNEL, print TENSOR,
  /// show TENSOR, grad PARAM, shader KERNEL, list, help, quit. `in` and `out` must outlive the session.
  /// A multi-output kernel is one draw: the debugger stops once, after its last output was read back (a
  /// breakpoint on any of its launches, or on a node one of them stores, is a breakpoint on the kernel), and a
  /// kernel name given to break/print/show/shader means the whole kernel (print/show: every output).
  /// Calling it again installs new streams and clears an earlier quit (quit_requested() is false again).
  void set_debugger(std::istream& in, std::ostream& out, DebuggerOptions opt = {});
  /// After the last step: a final prompt where the run's state can still be inspected (returns on quit/EOF).
  void debugger_finish();

  // ---- what was recorded ----
  const std::vector<NodePtr>& nodes() const;  ///< Program::nodes() of the attached program
  int node_number(const Node* n) const;       ///< -1 when not in the program
  Role role(const Node* n) const;
  const std::vector<Launch>& launches() const;
  const std::vector<Capture>& captures() const;  ///< every step, in order
  /// The capture of node number `node` in `step` (-1 = latest step holding one), or nullptr.
  const Capture* find(int node, int step = -1) const;
  /// Values of the current (or last) step, for launches read back, nodes recomputed (Options::recompute) and
  /// leaves recorded; nullptr if absent.
  const std::vector<float>* value(const Node* n) const;
  std::vector<GradientNorms> gradient_norms() const;  ///< per parameter of a TrainStep, one entry per step

  /// (kernel name, GLSL ES 3.00 fragment source) of every kernel: the attached plan's, or on the CPU backend the
  /// unfused plan the GLES backend would run for the program (sg::schedule). The generated GLSL 4.50 header
  /// comment (kernel, output, graph nodes with source lines) is inserted after the #version line (SPIRV-Cross
  /// drops comments). Compiled on first use (kernel cache). Throws CompileError.
  const std::vector<std::pair<std::string, std::string>>& shader_sources();

  /// The gradient-flow picture: gradient_norms() as lines (log-scale y when all positive) with axes and legend.
  image::RGBImage gradient_flow_plot(int width = 760, int height = 440) const;
  /// Writes OUT/stats.json, OUT/gradient_flow.png, OUT/shaders/<kernel>.frag and OUT/report.html (the forward,
  /// backward and update nodes of the last step with value/gradient thumbnails and stats, each kernel's GLSL ES
  /// source, the gradient-flow plot). Returns the report's path. Throws ValueError without out_dir, IOError.
  std::string write_report(const ReportInfo& info = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// One line of a plot.
struct Series {
  std::string name{};
  std::vector<double> y{};  ///< y[i] at x = i; NaN/Inf/non-positive (log scale) points are skipped
  std::optional<image::RGB> color{};  ///< default: the Tableau 10 palette in order (series 10.. dashed)
};

struct PlotOptions {
  int width = 760, height = 440;
  std::string title{}, x_label = "step", y_label{};
  bool log_y = true;  ///< log10 y axis when every drawn value is > 0 (falls back to linear otherwise)
};

/// Draws line series into an RGB image with its own raster code: white background, axes with tick labels,
/// 2-px lines, square markers at the points and a legend (names drawn in a built-in 5x7 upper-case font).
/// Throws ValueError for sizes below 200x150.
image::RGBImage plot_series(const std::vector<Series>& series, const PlotOptions& opt = {});

/// The Tableau 10 palette (matplotlib's "tab10"), colour i % 10.
image::RGB palette_color(size_t i);

/// What `shadergrad debug` runs: N train steps of a stdlib model (sg::nn::make_model) on a dataset.
struct RunConfig {
  std::string model = "mlp";     ///< mlp | cnn (any sg::nn::make_model name)
  std::string dataset{};         ///< fashion-mnist | digits; "" = fashion-mnist for mlp, digits otherwise
  std::string backend = "auto";  ///< auto | gles | cpu
  std::string optimizer = "adam";  ///< sgd | momentum | adam
  double lr = 1e-3;
  int64_t steps = 3;
  int64_t batch = 16;
  uint64_t seed = 0;             ///< parameter init and batch order
  bool unfused = false;          ///< one kernel per graph node: every value and gradient is stored on the device
  bool recompute = true;         ///< Options::recompute: fused-away values recomputed on the CPU reference
  bool check_numerics = false;
  std::vector<std::string> capture{};  ///< Options::capture
  std::string out_dir{};         ///< required
  bool step = false;             ///< interactive debugger
  std::string commands{};        ///< debugger commands from this file instead of `in`
  bool echo = true;              ///< echo debugger commands (off for an interactive terminal)
};

struct RunResult {
  int64_t steps = 0;            ///< steps completed
  std::vector<double> losses;   ///< loss per completed step
  std::string report;           ///< path of report.html
  bool quit = false;            ///< the debugger's `quit` ended the run
};

/// Runs a debug session: loads the dataset's training split, builds the model and a TrainStep (Adam/SGD as
/// configured), compiles it (BackendOptions::unfused as configured), runs `steps` batches (seeded shuffle,
/// full batches only) through a Session writing into out_dir, then writes the report. Progress and the
/// debugger transcript go to `out`; debugger commands are read from `in` (or the commands file).
/// On a NumericsError the report of everything captured so far is written, then the error is rethrown.
/// Throws ValueError (bad config, dataset smaller than one batch), IOError, BackendError, NumericsError.
RunResult run_debug(const RunConfig& cfg, std::istream& in, std::ostream& out);

}  // namespace sg::debug
