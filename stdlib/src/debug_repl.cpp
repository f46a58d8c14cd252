// Debug mode: the step-through debugger (REPL) — commands, name and number parsing, what each command prints.
// Deterministic transcripts: no timings, no addresses. See sg/debug.h and docs/DEBUGGING.md.
#include <algorithm>
#include <istream>
#include <ostream>
#include <sstream>

#include "debug_internal.h"

namespace sg::debug {

int Session::Impl::next_graph_node(int k) const {
  for (int i = std::max(k + 1, 0); i < static_cast<int>(nodes.size()); ++i)
    if (!nodes[i]->is_leaf()) return i;
  return -1;
}

bool Session::Impl::reached(int k) const {
  if (values.count(nodes[k].get())) return true;  // read back, or recomputed
  const int c = computed_in[k] >= 0 ? computed_in[k] : stored_by[k];
  return c >= 0 && done > last_of(launches[c]);  // its kernel ran (a value kept in registers: none to show)
}

void Session::Impl::print_graph_node(int k) {
  const Node* n = nodes[k].get();
  std::string where = role_name(roles[k]);
  if (stored_by[k] >= 0)
    where += ", stored by " + launches[stored_by[k]].name;
  else if (computed_in[k] >= 0)
    where += fmt::format(", in {}: not stored{}", launches[computed_in[k]].kernel_name,
                         recomputed.count(n) ? "; recomputed on the CPU reference" : "");
  if (!grad_of[k].empty()) where += ", d(loss)/d(" + grad_of[k] + ")";
  if (!layer_of[k].empty()) where += ", layer " + layer_of[k];
  o() << fmt::format("[step {}] {} [{}]\n", step, describe(n, 60), where);
  if (auto it = values.find(n); it != values.end()) o() << "  " << compute_stats(it->second.data(), n->shape).str() << "\n";
}

std::string Session::Impl::value_origin(const Node* n) const {
  return recomputed.count(n) ? " (recomputed on the CPU reference: fused, not stored)" : "";
}

void Session::Impl::print_launch(const Launch& L) {
  if (L.outputs > 1) {
    print_kernel(launches[L.first]);
    return;
  }
  o() << fmt::format("[step {}] launch {} of {}: {}", step, L.index, launches.size(), L.name);
  if (L.nodes.size() == 1 && L.nodes[0] == L.output) {
    o() << fmt::format(" computed {}\n", describe(L.output, 60));
    if (auto it = values.find(L.output); it != values.end())
      o() << "  " << compute_stats(it->second.data(), L.output->shape).str() << "\n";
    return;
  }
  o() << fmt::format(" (fused: {} nodes, stores {})\n", L.nodes.size(), nname(L.output));
  for (const Node* n : L.nodes) o() << "  " << describe(n, 60) << "\n";
  if (auto it = values.find(L.output); it != values.end())
    o() << fmt::format("  {}: {}\n", nname(L.output), compute_stats(it->second.data(), L.output->shape).str());
}

/// A multi-output kernel (F = its first launch): one draw that stored every output listed.
void Session::Impl::print_kernel(const Launch& F) {
  std::vector<std::string> outs;
  for (const Node* n : kernel_outputs(F)) outs.push_back(nname(n));
  o() << fmt::format("[step {}] launches {}-{} of {}: {} (one draw, {} outputs; fused: {} nodes, stores {})\n", step,
                     F.first, last_of(F), launches.size(), F.kernel_name, F.outputs, F.nodes.size(),
                     fmt::join(outs, ", "));
  for (const Node* n : F.nodes) {
    int k = num(n);
    bool stored = k >= 0 && stored_by[k] >= F.first && stored_by[k] <= last_of(F);
    o() << "  " << describe(n, 60)
        << (stored ? fmt::format(" [output {}: {}]", launches[stored_by[k]].output_index, launches[stored_by[k]].name)
                   : std::string())
        << "\n";
  }
  for (int i = F.first; i <= last_of(F); ++i) {
    const Launch& L = launches[i];
    if (auto it = values.find(L.output); it != values.end())
      o() << fmt::format("  {} (output {}): {}\n", nname(L.output), L.output_index,
                         compute_stats(it->second.data(), L.output->shape).str());
  }
}

/// After the last output of L's kernel (L = its first launch; breakpoints are kept as first launches).
void Session::Impl::maybe_stop(const Launch& L) {
  bool bp = std::find(breakpoints.begin(), breakpoints.end(), L.first) != breakpoints.end();
  if (mode == Mode::Step && !bp) {  // `step`: run until the next node in graph order has been computed
    if (step_target < 0 || !reached(step_target)) return;
    graph_cursor = step_target;
    step_target = -1;
    print_graph_node(graph_cursor);
    interact();
    return;
  }
  if (mode == Mode::Run && !bp) return;
  if (bp) {
    int k = static_cast<int>(std::find(breakpoints.begin(), breakpoints.end(), L.first) - breakpoints.begin());
    o() << fmt::format("breakpoint {} hit\n", k + 1);
  }
  // `step` from here walks this kernel's nodes (in graph order) and goes on from them.
  int first_node = static_cast<int>(nodes.size());
  for (const Node* n : L.nodes) first_node = std::min(first_node, num(n));
  graph_cursor = first_node - 1;
  print_launch(L);
  interact();
}

const char* Session::Impl::help_text() {
  return "commands:\n"
         "  next (n)               run the next kernel, then stop\n"
         "  step (s)               the next graph node in graph order (forward, then backward layer by layer,\n"
         "                         then updates), running kernels until it is computed; fused ones recomputed\n"
         "  continue (c)           run until a breakpoint or the end of the run\n"
         "  break (b) NODE|KERNEL  stop after the kernel computing node nN (or N), or after kernel KERNEL;\n"
         "                         `break` alone lists the breakpoints\n"
         "  print (p) TENSOR       stats and the first values of a tensor: nN, a kernel name (its output;\n"
         "                         every output of a multi-output kernel), a parameter, an input or a program\n"
         "                         output (loss)\n"
         "  show TENSOR            write TENSOR as a PNG (colormaps: docs/COLORMAPS.md) and print its path\n"
         "  grad PARAM             the gradient d(loss)/d(PARAM): a parameter name, or nN of a forward node\n"
         "  shader KERNEL          the generated GLSL ES source of a kernel (a kernel name or nN)\n"
         "  list (l)               the launches of one step (=> next to run, * breakpoint)\n"
         "  help (h)               this text\n"
         "  quit (q)               stop the run\n";
}

/// Resolves a tensor name; on failure returns nullptr and sets `why`.
const Node* Session::Impl::resolve_tensor(const std::string& a, std::string& why) const {
  if (NodeRef r = parse_node_ref(a, nodes.size()); r.kind != NodeRef::NotANumber) {
    if (r.kind == NodeRef::Ok) return nodes[r.index].get();
    why = fmt::format("no node {} (nodes are n0..n{})", a, nodes.size() - 1);
    return nullptr;
  }
  if (auto it = named.find(a); it != named.end()) return it->second;
  for (auto& L : launches)
    if (L.name == a) return L.output;
  if (auto [f, l] = kernel_range(a); f >= 0) return launches[f].output;
  std::vector<std::string> ps;
  for (auto& [n, node] : named) ps.push_back(n);
  why = fmt::format("no tensor '{}': use a node number (n0..n{}), a kernel name ({}; `list`), or a name ({})", a,
                    nodes.size() - 1, launch_names_hint(), fmt::join(ps, ", "));
  return nullptr;
}

/// Every value a print/show argument names: one tensor, or each output of a multi-output kernel named by its
/// kernel name or prefix ("k05_sum_mul_add_pow", "k05"). Empty (and `why` set) when nothing matches.
std::vector<const Node*> Session::Impl::resolve_tensors(const std::string& a, std::string& why) const {
  const Node* n = resolve_tensor(a, why);
  if (!n) return {};
  for (auto& L : launches)
    if (L.name == a) return {n};
  if (named.count(a)) return {n};
  if (auto [f, l] = kernel_range(a); f >= 0) return kernel_outputs(launches[f]);
  return {n};
}

int Session::Impl::resolve_launch(const std::string& a, std::string& why) const {
  for (auto& L : launches)
    if (L.name == a) return L.index;
  if (auto [f, l] = kernel_range(a); f >= 0) return f;
  for (auto& L : launches)
    if (L.name.rfind(a + "_", 0) == 0) return L.index;
  if (NodeRef r = parse_node_ref(a, nodes.size()); r.kind != NodeRef::NotANumber) {
    if (r.kind == NodeRef::OutOfRange) {
      why = fmt::format("no node {} (nodes are n0..n{})", a, nodes.size() - 1);
      return -1;
    }
    const size_t k = r.index;
    if (stored_by[k] >= 0) return stored_by[k];
    if (computed_in[k] >= 0) return computed_in[k];
    why = fmt::format("n{} {} is a leaf ({}): no kernel computes it", k, nodes[k]->label(), role_name(roles[k]));
    return -1;
  }
  why = fmt::format("no kernel or node '{}': use a kernel name or its prefix ({}; `list`) or a node number "
                    "(n0..n{})", a, launch_names_hint(), nodes.size() - 1);
  return -1;
}

void Session::Impl::cmd_print(const Node* n, const std::string& header) {
  int k = num(n);
  std::string where;
  if (n->is_leaf())
    where = role_name(roles[k]);
  else if (stored_by[k] >= 0 && launches[stored_by[k]].outputs > 1)
    where = fmt::format("{}, stored by {} ({})", role_name(roles[k]), launches[stored_by[k]].name,
                        output_desc(launches[stored_by[k]]));
  else if (stored_by[k] >= 0)
    where = fmt::format("{}, stored by {}", role_name(roles[k]), launches[stored_by[k]].name);
  else if (computed_in[k] >= 0)
    where = fmt::format("{}, computed inside {}{}", role_name(roles[k]), launches[computed_in[k]].kernel_name,
                        value_origin(n));
  else
    where = role_name(roles[k]);
  if (!grad_of[k].empty()) where += ", d(loss)/d(" + grad_of[k] + ")";
  o() << header << describe(n) << " [" << where << "]\n";
  const std::vector<float>* v = nullptr;
  if (n->is_leaf()) {
    v = value_of(n);
    if (!v) {
      o() << fmt::format("  no value: input '{}' was not fed\n", n->name);
      return;
    }
  } else {
    auto it = values.find(n);
    if (it != values.end()) {
      v = &it->second;
    } else if (stored_by[k] < 0 && opt.recompute && computed_in[k] >= 0 && (step < 0 || done <= computed_in[k])) {
      o() << fmt::format("  not computed yet in step {}: {} computes it (`break n{}` then `continue`)\n",
                         std::max(step, 0), launches[computed_in[k]].kernel_name, k);
      return;
    } else if (stored_by[k] < 0) {
      o() << fmt::format("  not stored: {} computes it in registers only (fused); keep Options::recompute on to "
                         "recompute it, or rerun unfused (--unfused)\n",
                         computed_in[k] >= 0 ? launches[computed_in[k]].kernel_name : "no kernel");
      return;
    } else if (step < 0 || done <= stored_by[k]) {
      o() << fmt::format("  not computed yet in step {}: {} computes it (`break n{}` then `continue`)\n",
                         std::max(step, 0), launches[stored_by[k]].name, k);
      return;
    } else {
      o() << "  not read back\n";
      return;
    }
  }
  TensorStats s = compute_stats(v->data(), n->shape);
  o() << "  " << s.str() << "\n";
  size_t show = std::min<size_t>(8, v->size());
  std::vector<std::string> xs;
  for (size_t i = 0; i < show; ++i) xs.push_back(fnum((*v)[i]));
  o() << fmt::format("  [{}{}]", fmt::join(xs, ", "), show < v->size() ? ", ..." : "");
  if (show < v->size()) o() << fmt::format(" (first {} of {})", show, v->size());
  o() << "\n";
}

void Session::Impl::cmd_show(const Node* n) {
  if (opt.out_dir.empty()) {
    o() << "show needs an output directory (Options::out_dir / --out)\n";
    return;
  }
  int k = num(n);
  const std::vector<float>* v = n->is_leaf() ? value_of(n) : nullptr;
  if (!n->is_leaf())
    if (auto it = values.find(n); it != values.end()) v = &it->second;
  if (!v) {
    cmd_print(n, "");  // explains why there is no value
    return;
  }
  image::RenderOptions ro = opt.render;
  if (ro.colormap == image::Colormap::Auto && roles[k] == Role::Backward) ro.colormap = image::Colormap::Diverging;
  image::RenderResult rr = image::render_tensor(v->data(), display_shape(n->shape), ro);
  fs::create_directories(fs::path(opt.out_dir) / "repl");
  const std::string path =
      (fs::path(opt.out_dir) / "repl" / fmt::format("step{:03}_n{:03}.png", std::max(step, 0), k)).string();
  image::write_png(path, rr.image);
  o() << fmt::format("wrote {} ({}x{}, colormap {}, range {} .. {}{}{})\n", path, rr.image.width, rr.image.height,
                     image::to_string(rr.colormap), fnum(rr.lo), fnum(rr.hi), rr.note.empty() ? "" : "; ", rr.note);
}

void Session::Impl::cmd_grad(const std::string& a) {
  if (!ts) {
    o() << "gradients are known only for programs built with sg::debug::make_train_step\n";
    return;
  }
  for (auto& [pname, g] : param_grad)
    if (pname == a) {
      if (num(g) < 0) {
        o() << fmt::format("d(loss)/d({}) is not part of the program\n", a);
        return;
      }
      cmd_print(g, fmt::format("d(loss)/d({}) = ", a));
      return;
    }
  std::string why;
  if (parse_node_ref(a, nodes.size()).kind != NodeRef::NotANumber) {
    const Node* n = resolve_tensor(a, why);
    if (!n) {
      o() << why << "\n";
      return;
    }
    auto it = ts->adjoint.find(n);
    if (it == ts->adjoint.end() || num(it->second.get()) < 0) {
      o() << fmt::format("{} has no gradient in this program (only forward nodes that depend on a parameter do)\n",
                         nname(n));
      return;
    }
    cmd_print(it->second.get(), fmt::format("d(loss)/d({}) = ", nname(n)));
    return;
  }
  std::vector<std::string> ps;
  for (auto& [pname, g] : param_grad) ps.push_back(pname);
  o() << fmt::format("no parameter '{}' (parameters: {}; or nN of a forward node)\n", a, fmt::join(ps, ", "));
}

void Session::Impl::cmd_shader(const std::string& arg) {
  ensure_shaders();
  std::string a = arg;
  for (auto& L : launches)  // an entry of a multi-output kernel ("k05_....t5_2"): the kernel's source
    if (L.name == arg && exe && exe->plan()) a = L.kernel_name;
  const ShaderInfo* hit = nullptr;
  for (auto& s : shader_info)
    if (s.name == a) hit = &s;
  for (auto& s : shader_info)
    if (!hit && s.name.rfind(a + "_", 0) == 0) hit = &s;
  if (NodeRef r = parse_node_ref(a, nodes.size()); !hit && r.kind == NodeRef::Ok) {
    const int k = static_cast<int>(r.index);
    for (auto& s : shader_info)
      if (!hit && std::find(s.nodes.begin(), s.nodes.end(), k) != s.nodes.end()) hit = &s;
  }
  if (!hit) {
    o() << fmt::format("no kernel '{}': use a kernel name or its prefix ({} ... {}) or a node number\n", a,
                       shader_info.empty() ? "" : shader_info.front().name,
                       shader_info.empty() ? "" : shader_info.back().name);
    return;
  }
  o() << fmt::format("// {}: GLSL ES 3.00 fragment shader{}\n", hit->name,
                     exe && exe->plan() ? "" : " (what the GLES backend runs for this node; this run is on the CPU)");
  o() << hit->source;
  if (!hit->source.empty() && hit->source.back() != '\n') o() << "\n";
}

void Session::Impl::cmd_list() {
  o() << fmt::format("{} launches per step{}:\n", launches.size(),
                     exe && exe->plan() ? "" : " (CPU backend: one per graph node)");
  for (auto& L : launches) {
    bool next_here = running && L.index == done;
    bool bp = std::find(breakpoints.begin(), breakpoints.end(), L.index) != breakpoints.end();
    std::vector<std::string> ns;
    for (const Node* n : L.nodes) ns.push_back(nname(n) + " " + truncate(n->label(), 40));
    if (L.outputs > 1) {
      // A multi-output kernel: one draw; its computed nodes once, then one line per stored value.
      if (L.output_index == 0)
        o() << fmt::format("{}{}     {} (one draw, {} outputs): {}\n", next_here ? "=>" : "  ", bp ? "*" : " ",
                           L.kernel_name, L.outputs, fmt::join(ns, ", "));
      int k = num(L.output);
      std::string what = k >= 0 ? role_name(roles[k]) : "?";
      if (k >= 0 && !grad_of[k].empty()) what += ", d(loss)/d(" + grad_of[k] + ")";
      o() << fmt::format("    {:>3} {:<24} output {}: {} {} [{}]\n", L.index, L.name, L.output_index, nname(L.output),
                         truncate(L.output->label(), 40), what);
      continue;
    }
    o() << fmt::format("{}{} {:>3} {:<24} {}\n", next_here ? "=>" : "  ", bp ? "*" : " ", L.index, L.name,
                       fmt::join(ns, ", "));
  }
}

void Session::Impl::cmd_break(const std::string& a) {
  if (a.empty()) {
    if (breakpoints.empty()) o() << "no breakpoints\n";
    for (size_t i = 0; i < breakpoints.size(); ++i)
      o() << fmt::format("breakpoint {}: {}\n", i + 1, launches[breakpoints[i]].kernel_name);
    return;
  }
  std::string why;
  int li = resolve_launch(a, why);
  if (li < 0) {
    o() << why << "\n";
    return;
  }
  // A multi-output kernel is one draw: the debugger stops after all its outputs, so a breakpoint on any of
  // them is a breakpoint on the kernel (kept as its first launch).
  li = launches[li].first;
  auto it = std::find(breakpoints.begin(), breakpoints.end(), li);
  if (it != breakpoints.end()) {
    o() << fmt::format("breakpoint {} already stops after {}\n", it - breakpoints.begin() + 1,
                       launches[li].kernel_name);
    return;
  }
  breakpoints.push_back(li);
  std::string outs;
  if (launches[li].outputs > 1) {
    std::vector<std::string> os;
    for (const Node* n : kernel_outputs(launches[li])) os.push_back(nname(n));
    outs = fmt::format("; {} outputs: stores {}", launches[li].outputs, fmt::join(os, ", "));
  }
  o() << fmt::format("breakpoint {}: after {} (computes {}{})\n", breakpoints.size(), launches[li].kernel_name,
                     [&] {
                       std::vector<std::string> ns;
                       for (const Node* n : launches[li].nodes) ns.push_back(nname(n));
                       return fmt::format("{}", fmt::join(ns, ", "));
                     }(), outs);
}

/// Reads and executes commands until one resumes the run. Throws QuitSignal on `quit` or end of input.
void Session::Impl::interact() {
  for (;;) {
    o() << dopt.prompt;
    std::string line;
    if (!std::getline(*in, line)) {
      o() << "\n(end of input: quit)\n";
      quit = true;
      throw QuitSignal{};
    }
    if (dopt.echo) o() << line << "\n";
    std::istringstream ls(line);
    std::string cmd, arg, extra;
    ls >> cmd >> arg;
    std::getline(ls, extra);
    if (cmd.empty() || cmd[0] == '#') continue;
    bool needs_arg = cmd == "print" || cmd == "p" || cmd == "show" || cmd == "grad" || cmd == "shader";
    if (needs_arg && arg.empty()) {
      o() << fmt::format("{} needs an argument (type `help`)\n", cmd);
      continue;
    }
    // no command ends the session on a bad argument (DEBUGGING.md): errors are printed, the prompt comes back
    try {
      if (cmd == "help" || cmd == "h" || cmd == "?") {
        o() << help_text();
      } else if (cmd == "next" || cmd == "n" || cmd == "step" || cmd == "s" || cmd == "continue" || cmd == "c") {
        if (!arg.empty()) {  // no silent ignoring: `next 5` used to run one kernel
          o() << fmt::format("{} takes no argument (got '{}'); to run up to a kernel or node use `break NAME` then "
                             "`continue`\n", cmd, arg);
          continue;
        }
        if (!running) {
          o() << fmt::format("the run has finished ({} steps); inspect with print/show/grad/shader, `quit` to exit\n",
                             step + 1);
          continue;
        }
        if (cmd == "step" || cmd == "s") {
          // The next node in graph order (Program::nodes(): forward, then backward from the loss to the first layer,
          // then the updates), whatever kernel computes it: shown at once when its kernel already ran, else the run
          // goes on until it has.
          const int k = next_graph_node(graph_cursor);
          if (k < 0) {
            o() << fmt::format("every node of step {} was shown; running on to the next kernel\n", step);
            mode = Mode::Next;
            return;
          }
          if (reached(k)) {
            graph_cursor = k;
            print_graph_node(k);
            continue;
          }
          step_target = k;
          mode = Mode::Step;
        } else {
          mode = (cmd == "continue" || cmd == "c") ? Mode::Run : Mode::Next;
        }
        return;
      } else if (cmd == "break" || cmd == "b") {
        cmd_break(arg);
      } else if (cmd == "print" || cmd == "p" || cmd == "show") {
        std::string why;
        std::vector<const Node*> ns = resolve_tensors(arg, why);
        if (ns.empty()) o() << why << "\n";
        for (const Node* n : ns) {
          if (cmd == "show")
            cmd_show(n);
          else
            cmd_print(n, "");
        }
      } else if (cmd == "grad") {
        cmd_grad(arg);
      } else if (cmd == "shader") {
        try {
          cmd_shader(arg);
        } catch (const Error& e) {
          o() << "could not compile the shader: " << e.what() << "\n";
        }
      } else if (cmd == "list" || cmd == "l") {
        cmd_list();
      } else if (cmd == "quit" || cmd == "q" || cmd == "exit") {
        quit = true;
        throw QuitSignal{};
      } else {
        o() << fmt::format("unknown command '{}' (type `help` for the list)\n", cmd);
      }
    } catch (const std::exception& e) {  // QuitSignal is not a std::exception: quit still ends the session
      o() << fmt::format("{}: {}\n", cmd, e.what());
    }
  }
}

}  // namespace sg::debug
