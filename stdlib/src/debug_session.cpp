// Debug mode: the session — attaching to an executable, node roles and launches, what to capture, values and
// captures per step, gradient norms. See sg/debug.h; numerics in debug_numerics.cpp, the debugger in
// debug_repl.cpp, the report in debug_report.cpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "debug_internal.h"
#include "sg/train.h"

namespace sg::debug {

TrainStep make_train_step(const Tensor& loss, const std::vector<std::pair<std::string, Tensor>>& params,
                          Optimizer& opt, const std::vector<std::pair<std::string, Tensor>>& extra_outputs,
                          bool output_grads) {
  if (!loss) throw ValueError("debug::make_train_step: the loss is an empty Tensor");
  std::unordered_set<const Node*> depends;
  std::vector<Tensor> ps;
  for (auto& [name, p] : params) {
    if (!p || p.node()->op != Op::Param)
      throw ValueError(fmt::format("debug::make_train_step: '{}' is not a parameter (sg::param){}", name,
                                   p ? " but " + p.node()->describe() : std::string()));
    depends.insert(p.node().get());
    ps.push_back(p);
  }
  // Every forward node that depends on a parameter: its adjoint is built by the backward pass anyway.
  TrainStepGradients inspect;
  for (auto& n : topo_order({loss.node()})) {
    if (n->is_leaf()) continue;
    bool d = false;
    for (auto& i : n->inputs) d |= depends.count(i.get()) > 0;
    if (d) {
      depends.insert(n.get());
      inspect.also.emplace_back(n);
    }
  }
  TrainStep ts;
  ts.program = sg::make_train_step(loss, ps, opt, extra_outputs, inspect);
  ts.loss = loss;
  ts.params = params;
  for (size_t i = 0; i < inspect.grads.size(); ++i) {
    const Tensor& wrt = i < ps.size() ? ps[i] : inspect.also[i - ps.size()];
    ts.adjoint[wrt.node().get()] = inspect.grads[i].node();
    if (i < ps.size()) ts.param_grads.push_back(inspect.grads[i]);
  }
  if (output_grads)
    for (size_t i = 0; i < params.size(); ++i) ts.program.add_output("grad:" + params[i].first, ts.param_grads[i]);
  return ts;
}

void Session::Impl::setup(Executable& e, const Program& p, const TrainStep* t, Backend* be) {
  exe = nullptr;  // set last: a failed attach leaves the session detached
  backend = be;
  program = p;
  ts.reset();
  if (t) ts = *t;
  nodes = program.nodes();
  number.clear();
  for (size_t i = 0; i < nodes.size(); ++i) number[nodes[i].get()] = static_cast<int>(i);
  const size_t N = nodes.size();

  // Roles.
  std::unordered_set<const Node*> fwd, bwd;
  std::vector<NodePtr> fwd_roots, bwd_roots;
  if (ts) {
    std::unordered_set<const Node*> grads;
    for (auto& g : ts->param_grads) grads.insert(g.node().get());
    fwd_roots.push_back(ts->loss.node());
    for (auto& o : program.outputs)
      if (!grads.count(o.get())) fwd_roots.push_back(o);
    for (auto& g : ts->param_grads) bwd_roots.push_back(g.node());
  } else {
    fwd_roots = program.outputs;
  }
  for (auto& n : topo_order(fwd_roots)) fwd.insert(n.get());
  if (!bwd_roots.empty())
    for (auto& n : topo_order(bwd_roots)) bwd.insert(n.get());
  roles.assign(N, Role::Update);
  for (size_t i = 0; i < N; ++i) {
    const Node* n = nodes[i].get();
    switch (n->op) {
      case Op::Input: roles[i] = Role::Input; break;
      case Op::Param: roles[i] = Role::Param; break;
      case Op::State: roles[i] = Role::State; break;
      case Op::Const: roles[i] = Role::Const; break;
      default: roles[i] = fwd.count(n) ? Role::Forward : bwd.count(n) ? Role::Backward : Role::Update;
    }
  }
  // Gradient bookkeeping.
  grad_of.assign(N, "");
  param_grad.clear();
  named.clear();
  if (ts) {
    for (size_t i = 0; i < ts->params.size(); ++i) {
      const Node* g = ts->param_grads[i].node().get();
      param_grad.emplace_back(ts->params[i].first, g);
      int k = num(g);
      if (k >= 0 && !nodes[k]->is_leaf())
        grad_of[k] += (grad_of[k].empty() ? "" : ", ") + ts->params[i].first;
    }
    // Forward nodes, in topological order.
    for (size_t i = 0; i < N; ++i) {
      auto it = ts->adjoint.find(nodes[i].get());
      if (it == ts->adjoint.end() || nodes[i]->op == Op::Param) continue;
      int k = num(it->second.get());
      if (k >= 0 && !nodes[k]->is_leaf())
        grad_of[k] += fmt::format("{}n{}", grad_of[k].empty() ? "" : ", ", i);
    }
  }
  for (size_t i = 0; i < N; ++i) {
    const Node* n = nodes[i].get();
    if ((n->op == Op::Param || n->op == Op::State || n->op == Op::Input) && !n->name.empty())
      named.emplace(n->name, n);
  }
  for (size_t i = 0; i < program.outputs.size(); ++i) named.emplace(program.output_names[i], program.outputs[i].get());

  // Launches.
  launches.clear();
  if (const Plan* plan = e.plan()) {
    bool same = plan->order.size() == N;
    for (size_t i = 0; same && i < N; ++i) same = plan->order[i].get() == nodes[i].get();
    if (!same)
      throw ValueError("debug::Session::attach: the executable was not compiled from this program (compile the "
                       "Program you pass to attach, e.g. TrainStep::program)");
    for (size_t k = 0; k < plan->kernels.size(); ++k) {
      const Kernel& kern = plan->kernels[k];
      const int first = static_cast<int>(launches.size());
      for (size_t j = 0; j < kern.outputs.size(); ++j) {  // a multi-output kernel: one launch entry per output
        const Value& out = plan->values[kern.outputs[j]];
        Launch L;
        L.index = static_cast<int>(launches.size());
        L.name = kern.outputs.size() == 1 ? kern.name : fmt::format("{}.{}", kern.name, out.name);
        L.kernel_name = kern.name;
        for (auto& n : kern.nodes) L.nodes.push_back(n.get());
        L.output = out.node.get();
        L.kernel = &kern;
        L.output_index = static_cast<int>(j);
        L.outputs = static_cast<int>(kern.outputs.size());
        L.first = first;
        launches.push_back(std::move(L));
      }
    }
  } else {
    for (size_t i = 0; i < N; ++i) {
      const Node* n = nodes[i].get();
      if (n->is_leaf()) continue;
      Launch L;
      L.index = static_cast<int>(launches.size());
      L.name = fmt::format("n{:03}_{}", i, op_short(*n));
      L.kernel_name = L.name;
      L.first = L.index;
      L.nodes = {n};
      L.output = n;
      launches.push_back(std::move(L));
    }
  }
  stored_by.assign(N, -1);
  computed_in.assign(N, -1);
  for (auto& L : launches) {
    int o = num(L.output);
    if (o >= 0 && stored_by[o] < 0) stored_by[o] = L.index;
    for (const Node* n : L.nodes) {
      int k = num(n);
      if (k >= 0 && computed_in[k] < 0) computed_in[k] = L.index;
    }
  }
  select_captures();
  find_tile_shapes();
  find_layers();

  captures.clear();
  values.clear();
  recomputed.clear();
  losses.clear();
  failure.clear();
  step = -1;
  done = 0;
  shaders_done = false;
  shader_info.clear();
  shaders.clear();
  ref_plan.reset();
  quit = false;
  exe = &e;
  e.set_kernel_hook([this](const KernelEvent& ev) { on_launch(ev); });
}

void Session::Impl::select_captures() {
  const size_t N = nodes.size();
  capture_launch.assign(launches.size(), opt.capture.empty());
  capture_leaf.assign(N, 0);
  capture_inside.assign(N, opt.capture.empty());
  auto mark_inside = [&](const Launch& L) {
    for (const Node* n : L.nodes)
      if (int k = num(n); k >= 0) capture_inside[k] = 1;
  };
  for (size_t i = 0; i < N; ++i)
    capture_leaf[i] = opt.capture_leaves && opt.capture.empty() &&
                      (roles[i] == Role::Param || roles[i] == Role::Input);
  if (ts && opt.capture_leaves && opt.capture.empty())
    for (auto& [fwd, adj] : ts->adjoint)  // constant gradients (d(loss)/d(loss) = 1): shown like computed ones
      if (int k = num(adj.get()); k >= 0 && adj->op == Op::Const) capture_leaf[k] = 1;
  for (const std::string& c : opt.capture) {
    bool hit = false;
    auto mark_node = [&](int k) {
      if (k < 0 || k >= static_cast<int>(N)) return;
      if (nodes[k]->is_leaf()) {
        capture_leaf[k] = 1;
        hit = true;
      } else if (stored_by[k] >= 0) {
        capture_launch[stored_by[k]] = 1;
        hit = true;
      } else if (computed_in[k] >= 0) {
        capture_launch[computed_in[k]] = 1;
        capture_inside[k] = 1;
        hit = true;
      }
    };
    if (c == "all") {
      std::fill(capture_launch.begin(), capture_launch.end(), 1);
      std::fill(capture_inside.begin(), capture_inside.end(), 1);
      hit = true;
    }
    for (auto& L : launches)
      if (L.name == c || L.kernel_name == c || (L.name.rfind(c + "_", 0) == 0)) {
        capture_launch[L.index] = 1;
        mark_inside(L);
        hit = true;
      }
    if (NodeRef r = parse_node_ref(c, N); r.kind == NodeRef::Ok) mark_node(static_cast<int>(r.index));
    for (auto& [pname, g] : param_grad)
      if (pname == c) {
        mark_node(num(g));
        mark_node(num(named.count(c) ? named.at(c) : nullptr));
      }
    if (auto it = named.find(c); it != named.end()) mark_node(num(it->second));
    if (c == "forward" || c == "backward" || c == "update" || c == "gradients") {
      hit = true;
      for (auto& L : launches) {
        int o = num(L.output);
        Role r = o >= 0 ? roles[o] : Role::Update;
        bool sel = (c == "forward" && r == Role::Forward) || (c == "backward" && r == Role::Backward) ||
                   (c == "update" && r == Role::Update);
        if (c == "gradients")
          for (auto& [pname, g] : param_grad) sel |= g == L.output;
        if (sel) capture_launch[L.index] = 1;
        if (c != "gradients") {
          const Role want = c == "forward" ? Role::Forward : c == "backward" ? Role::Backward : Role::Update;
          for (const Node* n : L.nodes)
            if (int k = num(n); k >= 0 && roles[k] == want) capture_inside[k] = 1;
        }
      }
    }
    if (!hit)
      throw ValueError(fmt::format(
          "debug capture '{}' matches nothing: use a kernel name or its prefix ({}), a node number (n0..n{}), a "
          "parameter or input name, 'all', 'forward', 'backward', 'update' or 'gradients'",
          c, launches.empty() ? std::string("none") : launches.front().name + " ...", N ? N - 1 : 0));
  }
  // Recompute (Options::recompute) when a node fusion did not store is to be captured, or for the debugger.
  recompute_any = false;
  for (size_t k = 0; k < N; ++k)
    recompute_any |= opt.recompute && capture_inside[k] && stored_by[k] < 0 && computed_in[k] >= 0;
  // Parameter gradients are always recorded (gradient_norms, the gradient-flow plot).
  for (auto& [pname, g] : param_grad) {
    int k = num(g);
    if (k >= 0 && stored_by[k] >= 0) capture_launch[stored_by[k]] = 1;
  }
}

/// The value of `n` in the current step if known (launch read back, leaf recorded or readable), else nullptr.
const std::vector<float>* Session::Impl::value_of(const Node* n) {
  auto it = values.find(n);
  if (it != values.end()) return &it->second;
  int k = num(n);
  if (k < 0) return nullptr;
  if (n->op == Op::Const || ((n->op == Op::Param || n->op == Op::State) && !backend)) {
    if (!n->data) return nullptr;
    return &(values[n] = *n->data);
  }
  if ((n->op == Op::Param || n->op == Op::State) && backend) return &(values[n] = backend->read(Tensor(nodes[k])));
  return nullptr;
}

void Session::Impl::begin_step(const std::vector<Feed>& feeds) {
  ++step;
  done = 0;
  graph_cursor = -1;
  step_target = -1;
  values.clear();
  recomputed.clear();
  for (const Feed& f : feeds) {
    auto it = named.find(f.name);
    if (it == named.end() || it->second->op != Op::Input || !f.data) continue;
    values[it->second] = *f.data;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i].get();
    if (roles[i] == Role::Input) {
      auto it = values.find(n);
      if (it == values.end() || static_cast<int64_t>(it->second.size()) != n->numel()) continue;  // run() reports
      if (opt.check_numerics) {
        TensorStats s = compute_stats(it->second.data(), n->shape);
        if (s.nonfinite()) {
          NumericsError e(fmt::format(
              "check_numerics: step {}: input '{}' ({}) holds {} NaN, {} +Inf, {} -Inf values before any kernel ran "
              "(the data fed to the program, not a kernel, is at fault)",
              step, n->name, shape_str(n->shape), s.nan, s.posinf, s.neginf));
          e.kernel = "";
          failure = e.what();
          failure_step = step;
          failure_launch = -1;
          throw e;
        }
      }
      if (capture_leaf[i]) add_capture(n, -1, "", it->second, "input." + n->name);
    } else if (roles[i] == Role::Param && capture_leaf[i]) {
      if (const std::vector<float>* v = value_of(n)) add_capture(n, -1, "", *v, "param." + n->name);
    } else if (roles[i] == Role::Const && capture_leaf[i]) {  // a constant gradient (the loss's seed)
      if (const std::vector<float>* v = value_of(n)) add_capture(n, -1, "", *v, fmt::format("const.n{}", i));
    }
  }
}

void Session::Impl::on_launch(const KernelEvent& ev) {
  int li = -1;
  if (ev.index >= 0 && ev.index < static_cast<int>(launches.size()) && launches[ev.index].output == ev.node)
    li = ev.index;
  for (size_t i = 0; li < 0 && i < launches.size(); ++i)
    if (launches[i].output == ev.node) li = static_cast<int>(i);
  if (li < 0)
    throw ValueError(fmt::format("debug::Session: launch '{}' is not part of the attached program (attach the "
                                 "session to the executable compiled from the program you passed)", ev.name));
  done = li + 1;
  const Launch& L = launches[li];
  // Recomputing a fused kernel's unstored nodes needs every stored value before it: read back everything.
  const bool recompute = (recompute_any || (dbg && opt.recompute)) && L.kernel != nullptr;
  bool need = capture_launch[li] || opt.check_numerics || dbg || recompute;
  if (need) {
    std::vector<float> v = ev.read();
    const std::vector<float>& stored = values[L.output] = std::move(v);
    if (capture_launch[li]) {
      int o = num(L.output);
      const char* suffix = o < 0                         ? "value"
                           : roles[o] == Role::Backward ? "grad"
                           : roles[o] == Role::Update   ? "update"
                                                        : "value";
      add_capture(L.output, li, L.name, stored, L.name + "." + suffix);
    }
    if (opt.check_numerics) {
      TensorStats s = capture_launch[li] ? captures.back().stats : compute_stats(stored.data(), L.output->shape);
      if (s.nonfinite()) fail(L, s, stored);
    }
  }
  // A multi-output kernel wrote all its outputs in one draw; its events arrive one per output. The debugger
  // stops once, after the last one, when every output has been read back.
  if (recompute && li == last_of(L)) recompute_unstored(launches[L.first]);
  if (dbg && li == last_of(L)) maybe_stop(launches[L.first]);
}

const Capture* Session::Impl::find(int node, int st) const {
  for (auto it = captures.rbegin(); it != captures.rend(); ++it)
    if (it->node == node && (st < 0 || it->step == st)) return &*it;
  return nullptr;
}

std::vector<GradientNorms> Session::Impl::gradient_norms() const {
  std::vector<GradientNorms> r;
  int steps = step + 1;
  for (auto& [pname, g] : param_grad) {
    GradientNorms gn{pname, std::vector<double>(std::max(steps, 0), std::numeric_limits<double>::quiet_NaN()),
                     std::vector<bool>(std::max(steps, 0), false)};
    int k = num(g);
    for (int s = 0; s < steps; ++s) {
      if (k >= 0 && nodes[k]->is_leaf() && nodes[k]->data) {
        gn.l2[s] = compute_stats(nodes[k]->data->data(), nodes[k]->shape).l2;
        gn.computed[s] = true;
      } else if (const Capture* c = k >= 0 ? find(k, s) : nullptr) {
        gn.l2[s] = c->stats.nonfinite() ? std::numeric_limits<double>::quiet_NaN() : c->stats.l2;
        gn.computed[s] = true;
      }
    }
    r.push_back(std::move(gn));
  }
  return r;
}

image::RGBImage Session::Impl::plot(int w, int h) const {
  std::vector<Series> ss;
  for (auto& g : gradient_norms()) ss.push_back({g.param, g.l2, std::nullopt});
  PlotOptions po;
  po.width = w;
  po.height = h;
  po.title = "gradient L2 norm per parameter";
  po.y_label = "L2 norm of d(loss)/d(param)";
  return plot_series(ss, po);
}

Capture& Session::Impl::add_capture(const Node* n, int launch, const std::string& kernel, const std::vector<float>& v,
                                    const std::string& file_stem) {
  Capture c;
  c.step = step;
  c.launch = launch;
  c.kernel = kernel;
  c.node = num(n);
  c.role = c.node >= 0 ? roles[c.node] : Role::Update;
  c.grad_of = c.node >= 0 ? grad_of[c.node] : "";
  c.recomputed = recomputed.count(n) > 0;
  c.stats = compute_stats(v.data(), n->shape);
  if (!opt.out_dir.empty() && opt.write_images) {
    image::RenderOptions ro = opt.render;
    if (ro.colormap == image::Colormap::Auto && c.role == Role::Backward) ro.colormap = image::Colormap::Diverging;
    const Shape shown = image_shape(n);
    image::RenderResult rr = image::render_tensor(v.data(), shown, ro);
    c.png = step_dir() + "/" + file_safe(file_stem) + ".png";
    fs::create_directories(fs::path(opt.out_dir) / step_dir());
    image::write_png((fs::path(opt.out_dir) / c.png).string(), rr.image);
    c.note = rr.note;
    if (tile_shapes.count(n))
      c.note += fmt::format("{}drawn as {} tiles of {}x{} (one per row)", c.note.empty() ? "" : "; ",
                            shown[0] * shown[1], shown[2], shown[3]);
    c.colormap = image::to_string(rr.colormap);
    c.lo = rr.lo;
    c.hi = rr.hi;
  }
  captures.push_back(std::move(c));
  return captures.back();
}

Shape Session::Impl::image_shape(const Node* n) const {
  if (auto it = tile_shapes.find(n); it != tile_shapes.end()) return display_shape(it->second);
  return display_shape(n->shape);
}

void Session::Impl::find_layers() {
  layer_of.assign(nodes.size(), "");
  if (!ts || ts->layers.empty()) return;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i].get();
    if (n->op == Op::Param) {  // "1.weight" belongs to the layer labelled "1: ..."
      const std::string prefix = n->name.substr(0, n->name.find('.')) + ":";
      for (auto& [label, out] : ts->layers)
        if (label.rfind(prefix, 0) == 0) layer_of[i] = label;
    } else if (roles[i] == Role::Forward) {  // created during the first layer whose output is not older
      for (auto& [label, out] : ts->layers)
        if (out && out.node()->id >= n->id) {
          layer_of[i] = label;
          break;
        }
      if (layer_of[i].empty()) layer_of[i] = "loss";  // created after the last layer's output
    }
  }
  for (auto& [fwd, adj] : ts->adjoint) {  // d(loss)/d(t) is in t's layer
    const int f = num(fwd), a = num(adj.get());
    if (f >= 0 && a >= 0 && layer_of[a].empty() && !adj->is_leaf()) layer_of[a] = layer_of[f];
  }
  // The other backward nodes (parts of one VJP) take the layer of the gradient they build on, else of an input.
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (roles[i] != Role::Backward || !layer_of[i].empty()) continue;
    for (int pass = 0; pass < 2 && layer_of[i].empty(); ++pass)
      for (auto& in : nodes[i]->inputs) {
        const int k = num(in.get());
        if (k >= 0 && !layer_of[k].empty() && (pass == 1 || roles[k] == Role::Backward)) {
          layer_of[i] = layer_of[k];
          break;
        }
      }
  }
}

/// Rank-2 nodes (R, C*H*W) over an image input (N, C, H, W): drawn as R tiles (image_shape()).
void Session::Impl::find_tile_shapes() {
  tile_shapes.clear();
  std::vector<Shape> samples;  // (C, H, W) of each image input
  for (auto& n : nodes)
    if (n->op == Op::Input && n->shape.size() == 4 && n->shape[2] > 1 && n->shape[3] > 1)
      samples.push_back({n->shape[1], n->shape[2], n->shape[3]});
  for (auto& n : nodes) {
    if (n->shape.size() != 2) continue;
    for (auto& s : samples)
      if (n->shape[1] == s[0] * s[1] * s[2]) {
        tile_shapes[n.get()] = {n->shape[0], s[0], s[1], s[2]};
        break;
      }
  }
}

Session::Session(Options opt) : impl_(std::make_unique<Impl>()) { impl_->opt = std::move(opt); }
Session::~Session() { detach(); }

void Session::attach(Executable& exe, const TrainStep& step, Backend* backend) {
  detach();
  impl_->setup(exe, step.program, &step, backend);
}
void Session::attach(Executable& exe, const Program& program, Backend* backend) {
  detach();
  impl_->setup(exe, program, nullptr, backend);
}
void Session::detach() {
  if (impl_ && impl_->exe) {
    impl_->exe->set_kernel_hook({});
    impl_->exe = nullptr;
  }
}

std::vector<std::vector<float>> Session::run(const std::vector<Feed>& feeds) {
  Impl& m = *impl_;
  if (!m.exe) throw ValueError("debug::Session::run: no executable attached (call attach first)");
  if (m.quit) return {};
  try {
    m.begin_step(feeds);
    m.running = true;
    if (m.dbg && m.step == 0 && m.dopt.stop_at_start) {
      m.o() << fmt::format("shadergrad debugger: {} launches per step{}; type `help` for the commands\n",
                           m.launches.size(), m.launch_count_note());
      m.o() << "[step 0] stopped before the first launch\n";
      m.interact();
    }
    std::vector<std::vector<float>> out = m.exe->run(feeds);
    m.running = false;
    m.done = static_cast<int>(m.launches.size());
    double loss = !out.empty() && out[0].size() == 1 ? out[0][0] : std::numeric_limits<double>::quiet_NaN();
    m.losses.push_back(loss);
    if (m.dbg)
      m.o() << fmt::format("[step {}] finished: {} = {}\n", m.step,
                           m.program.output_names.empty() ? "output" : m.program.output_names[0], fnum(loss));
    return out;
  } catch (const QuitSignal&) {
    m.running = false;
    m.quit = true;
    return {};
  } catch (...) {
    m.running = false;
    throw;
  }
}

int Session::steps_run() const { return impl_->step + 1; }
bool Session::quit_requested() const { return impl_->quit; }

void Session::set_debugger(std::istream& in, std::ostream& out, DebuggerOptions opt) {
  impl_->dbg = true;
  impl_->in = &in;
  impl_->out = &out;
  impl_->dopt = std::move(opt);
  impl_->mode = Impl::Mode::Next;
  impl_->quit = false;  // a new command stream starts a new conversation (quit/EOF ended the previous one)
}

void Session::debugger_finish() {
  Impl& m = *impl_;
  if (!m.dbg || m.quit) return;
  m.running = false;
  m.o() << fmt::format("run finished after {} steps; inspect with print/show/grad/shader, `quit` to exit\n",
                       m.step + 1);
  try {
    m.interact();
    for (;;) m.interact();  // resume commands have nothing to resume: interact only returns on them
  } catch (const QuitSignal&) {
    m.quit = true;
  }
}

const std::vector<NodePtr>& Session::nodes() const { return impl_->nodes; }
int Session::node_number(const Node* n) const { return impl_->num(n); }
Role Session::role(const Node* n) const {
  int k = impl_->num(n);
  if (k < 0) throw ValueError("debug::Session::role: the node is not part of the attached program");
  return impl_->roles[k];
}
const std::vector<Launch>& Session::launches() const { return impl_->launches; }
const std::vector<Capture>& Session::captures() const { return impl_->captures; }
const Capture* Session::find(int node, int step) const { return impl_->find(node, step); }
const std::vector<float>* Session::value(const Node* n) const {
  auto it = impl_->values.find(n);
  return it == impl_->values.end() ? nullptr : &it->second;
}
std::vector<GradientNorms> Session::gradient_norms() const { return impl_->gradient_norms(); }
const std::vector<std::pair<std::string, std::string>>& Session::shader_sources() {
  impl_->ensure_shaders();
  return impl_->shaders;
}
image::RGBImage Session::gradient_flow_plot(int width, int height) const { return impl_->plot(width, height); }
std::string Session::write_report(const ReportInfo& info) { return impl_->write_report(info); }

}  // namespace sg::debug
