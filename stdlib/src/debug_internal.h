// Internal to the debug session's sources (debug_*.cpp): Session::Impl and the helpers they share.
// Not installed; the public API is sg/debug.h.
#pragma once

#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/debug.h"
#include "sg/kernel_cache.h"
#include "sg/schedule.h"

namespace sg::debug {

namespace fs = std::filesystem;

// ---- small helpers (debug_stats.cpp) ------------------------------------------------------------------------

std::string fnum(double v);         ///< {:.6g}, "nan", "inf", "-inf"
nlohmann::json jnum(double v);      ///< a number, or the string fnum() gives for NaN/Inf (JSON has neither)
std::string op_short(const Node& n);  ///< "matmul", "sum" (reduce kind), "map"
std::string truncate(const std::string& s, size_t n);
std::string file_safe(const std::string& s);  ///< letters, digits, '.', '-', '_'; anything else becomes '_'
/// (N, 1, H, W) with N > 3 as an R x (N/R) grid of tiles (R the largest divisor of N not above sqrt(N)), reading
/// order; other shapes unchanged.
Shape display_shape(ShapeRef shape);

/// A node number typed by a user: "nN" or "N".
struct NodeRef {
  enum Kind { NotANumber, OutOfRange, Ok } kind = NotANumber;
  size_t index = 0;  ///< valid when kind == Ok
};
/// Parses "nN" / "N" with std::from_chars: NotANumber for anything else (empty, signs, spaces, other text),
/// OutOfRange when the digits name no node below `count` (including numbers too large for size_t).
NodeRef parse_node_ref(std::string_view s, size_t count);

/// Thrown through Executable::run by the debugger's `quit` (not an sg::Error: nothing else should catch it).
struct QuitSignal {};

/// The CPU-reference re-evaluation of a kernel's nodes (Session::Impl::reevaluate).
struct Reevaluation {
  std::vector<std::pair<const Node*, std::vector<double>>> values;  ///< in kernel order
  bool complete = false;                 ///< every requested node was evaluated (no input was missing)
  const Node* first_nonfinite = nullptr;
  const std::vector<double>* find(const Node* n) const {
    for (auto& [m, v] : values)
      if (m == n) return &v;
    return nullptr;
  }
};

/// Schedule options of the plan the report's shader listing shows for a run on the CPU backend (which has no
/// plan): what the GLES backend would run, one kernel per graph node. One place, so that it can follow the
/// backends' option policy when that moves.
ScheduleOptions reference_schedule_options();

// ---- the session ----------------------------------------------------------------------------------------------

struct Session::Impl {
  Options opt;
  Executable* exe = nullptr;
  Backend* backend = nullptr;
  Program program;
  std::optional<TrainStep> ts;

  std::vector<NodePtr> nodes;
  std::unordered_map<const Node*, int> number;
  std::vector<Role> roles;
  std::vector<std::string> grad_of;
  std::vector<std::string> layer_of;  // per node number: "1: Linear(784, 128)" or "" (TrainStep::layers)
  std::vector<std::pair<std::string, const Node*>> param_grad;  // parameter name -> its gradient node
  std::map<std::string, const Node*> named;                     // parameter/input/state/output names
  std::vector<Launch> launches;
  std::vector<int> stored_by;    // per node number: launch storing it, -1
  std::vector<int> computed_in;  // per node number: first launch computing it, -1
  std::vector<char> capture_launch, capture_leaf;
  std::vector<char> capture_inside;  // per node: capture its recomputed value when a fused kernel did not store it
  bool recompute_any = false;        // some unstored node is to be recomputed (or the debugger is attached)

  KernelCache cache;
  std::optional<Plan> ref_plan;
  struct ShaderInfo {
    std::string name;
    std::vector<int> nodes;
    std::string source;
    std::string extension;  ///< of its file in the report's shaders/: "frag" (GLSL ES), "c" (cpu-simd's C)
  };
  std::vector<ShaderInfo> shader_info;
  std::vector<std::pair<std::string, std::string>> shaders;
  bool shaders_done = false;

  std::vector<Capture> captures;
  std::unordered_map<const Node*, std::vector<float>> values;  // current step
  std::unordered_set<const Node*> recomputed;                  // current step: values[] from the CPU reference
  std::unordered_map<const Node*, Shape> tile_shapes;          // image_shape() overrides (dense weights over images)
  int step = -1;
  int done = 0;  // launches completed in the current step
  std::vector<double> losses;
  std::string failure;
  int failure_step = -1, failure_launch = -1;

  // debugger
  bool dbg = false;
  std::istream* in = nullptr;
  std::ostream* out = nullptr;
  DebuggerOptions dopt;
  enum class Mode { Run, Next, Step } mode = Mode::Next;
  std::vector<int> breakpoints;
  int graph_cursor = -1;  // `step`: the last node shown, in graph order (-1: none yet this step)
  int step_target = -1;   // `step`: the node the run goes on to compute
  bool running = false, quit = false;

  // ---------------------------------------------------------------------------------------------------------
  std::string nname(const Node* n) const {
    auto it = number.find(n);
    return it == number.end() ? std::string("n?") : fmt::format("n{}", it->second);
  }
  int num(const Node* n) const {
    auto it = number.find(n);
    return it == number.end() ? -1 : it->second;
  }
  std::string describe(const Node* n, size_t max_label = 10000) const {
    std::string s = fmt::format("{} {} ({})", nname(n), truncate(n->label(), max_label), shape_str(n->shape));
    if (n->loc.known()) s += " at " + n->loc.str();
    return s;
  }

  void setup(Executable& e, const Program& p, const TrainStep* t, Backend* be);

  void select_captures();

  // ---------------------------------------------------------------------------------------------------------
  // Values and capture
  // ---------------------------------------------------------------------------------------------------------

  /// The value of `n` in the current step if known (launch read back, leaf recorded or readable), else nullptr.
  const std::vector<float>* value_of(const Node* n);

  /// The shape `n` is drawn with (stats use the real shape): display_shape() of it, except that a rank-2 tensor
  /// (R, C*H*W) where an image input holds (N, C, H, W) samples is drawn as R tiles of C x H x W: the rows of a
  /// dense layer's weight (and of its gradient and optimizer moments) over that input, one 28x28 tile per unit
  /// for the MNIST MLP's first layer, or the flattened input batch itself.
  Shape image_shape(const Node* n) const;
  void find_tile_shapes();  ///< fills tile_shapes (setup)
  void find_layers();       ///< fills layer_of from TrainStep::layers (setup)
  /// `step`: the next non-leaf node number after k in graph order (Program::nodes()), -1 at the end.
  int next_graph_node(int k) const;
  /// Node k's value is known in this step (read back or recomputed), or its kernel ran without storing it.
  bool reached(int k) const;
  /// "[step S] nK label (shape) at file:line [role, stored by / in KERNEL: not stored; recomputed ...]" + stats.
  void print_graph_node(int k);
  /// " (recomputed on the CPU reference: fused, not stored)" when n's value in this step was recomputed, else "".
  std::string value_origin(const Node* n) const;

  std::string step_dir() const { return fmt::format("step{:03}", step); }

  /// Records the stats of `v` as node n's capture in this step (launch -1 for leaves) and, with out_dir, writes its
  /// image DIR/stepNNN/<file_stem>.png (shape from image_shape()).
  Capture& add_capture(const Node* n, int launch, const std::string& kernel, const std::vector<float>& v,
                       const std::string& file_stem);

  void begin_step(const std::vector<Feed>& feeds);

  void on_launch(const KernelEvent& ev);

  int last_of(const Launch& L) const { return L.first + L.outputs - 1; }
  int kernel_count() const {
    int n = 0;
    for (auto& L : launches) n += L.output_index == 0;
    return n;
  }
  /// " (CPU backend: one per graph node)", " (10 kernels: a multi-output kernel counts once per stored value)", "".
  std::string launch_count_note() const {
    if (!exe || !exe->plan()) return " (CPU backend: one per graph node)";
    int k = kernel_count();
    if (k == static_cast<int>(launches.size())) return "";
    return fmt::format(" ({} kernels: a multi-output kernel counts once per stored value)", k);
  }
  /// "k05_sum_mul_add_pow" for a single-output launch; with several outputs also which one this entry is.
  std::string output_desc(const Launch& L) const {
    if (L.outputs == 1) return "";
    return fmt::format("output {} of {} of kernel {}", L.output_index, L.outputs, L.kernel_name);
  }
  /// The launches of the kernel named `a` (its exact name, or a prefix up to an '_': "k05"), as [first, last];
  /// {-1, -1} when no kernel matches.
  std::pair<int, int> kernel_range(const std::string& a) const {
    for (int pass = 0; pass < 2; ++pass)
      for (auto& L : launches)
        if (pass == 0 ? L.kernel_name == a : L.kernel_name.rfind(a + "_", 0) == 0) return {L.first, last_of(L)};
    return {-1, -1};
  }
  /// Node numbers stored by the launches of L's kernel, in output order.
  std::vector<const Node*> kernel_outputs(const Launch& L) const {
    std::vector<const Node*> r;
    for (int i = L.first; i <= last_of(L); ++i) r.push_back(launches[i].output);
    return r;
  }

  // ---------------------------------------------------------------------------------------------------------
  // Numerics (debug_numerics.cpp): CPU-reference re-evaluation of a kernel's nodes
  // ---------------------------------------------------------------------------------------------------------

  /// Re-evaluates the nodes of L's kernel (all of them, or those in `needed`) on the CPU reference, in the
  /// kernel's node order, from the kernel's inputs as this step computed them (stored values of earlier launches,
  /// nodes recomputed before, leaves); each node's result is rounded to f32 like the GPU's. Stops after the
  /// first non-finite node when `stop_at_nonfinite`.
  Reevaluation reevaluate(const Launch& L, const std::unordered_set<const Node*>* needed, bool stop_at_nonfinite);
  /// Returns the first node of L's kernel (that L's output depends on) whose CPU re-evaluation is not finite,
  /// nullptr when all are finite; sets `ok` = false when inputs were unavailable.
  const Node* pinpoint(const Launch& L, bool& ok);

  /// After the last output of F's kernel was read back: the values of the nodes the kernel kept in registers
  /// (fused, not stored) are recomputed on the CPU reference (values[], `recomputed`), and each stored output is
  /// compared with its own CPU re-evaluation (Capture::reference_diff); captured like stored values.
  void recompute_unstored(const Launch& F);
  [[noreturn]] void fail(const Launch& L, const TensorStats& s, const std::vector<float>& v);

  // ---------------------------------------------------------------------------------------------------------
  // Debugger
  // ---------------------------------------------------------------------------------------------------------

  std::ostream& o() { return *out; }

  void print_launch(const Launch& L);

  /// A multi-output kernel (F = its first launch): one draw that stored every output listed.
  void print_kernel(const Launch& F);


  /// After the last output of L's kernel (L = its first launch; breakpoints are kept as first launches).
  void maybe_stop(const Launch& L);

  static const char* help_text();

  std::string launch_names_hint() const {
    if (launches.empty()) return "none";
    std::string s = launches.front().name;
    if (launches.size() > 1) s += " ... " + launches.back().name;
    return s;
  }

  /// Resolves a tensor name; on failure returns nullptr and sets `why`.
  const Node* resolve_tensor(const std::string& a, std::string& why) const;

  /// Every value a print/show argument names: one tensor, or each output of a multi-output kernel named by its
  /// kernel name or prefix ("k05_sum_mul_add_pow", "k05"). Empty (and `why` set) when nothing matches.
  std::vector<const Node*> resolve_tensors(const std::string& a, std::string& why) const;

  int resolve_launch(const std::string& a, std::string& why) const;

  void cmd_print(const Node* n, const std::string& header);
  

  void cmd_show(const Node* n);

  void cmd_grad(const std::string& a);

  void ensure_shaders();

  void cmd_shader(const std::string& arg);

  void cmd_list();

  void cmd_break(const std::string& a);

  /// Reads and executes commands until one resumes the run. Throws QuitSignal on `quit` or end of input.
  void interact();

  // ---------------------------------------------------------------------------------------------------------
  // Gradient norms, report
  // ---------------------------------------------------------------------------------------------------------

  const Capture* find(int node, int st) const;

  std::vector<GradientNorms> gradient_norms() const;

  image::RGBImage plot(int w, int h) const;

  std::string write_report(const ReportInfo& info);
  nlohmann::json report_data(const ReportInfo& info) const;
  nlohmann::json stats_json(const ReportInfo& info) const;
};

}  // namespace sg::debug
