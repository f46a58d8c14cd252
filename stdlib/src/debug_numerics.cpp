// Debug mode: numerics — the CPU-reference re-evaluation of a kernel's nodes from its stored inputs, used to
// recompute what fusion kept in registers (Options::recompute) and to pinpoint the node where a NaN/Inf first
// appears (Options::check_numerics). See sg/debug.h.
#include <algorithm>
#include <cmath>

#include "debug_internal.h"
#include "sg/cpu_reference.h"

namespace sg::debug {

Reevaluation Session::Impl::reevaluate(const Launch& L, const std::unordered_set<const Node*>* needed,
                                       bool stop_at_nonfinite) {
  Reevaluation r;
  std::unordered_map<const Node*, size_t> local;  // node -> index in r.values
  std::unordered_map<const Node*, std::vector<double>> ext;
  const std::unordered_set<const Node*> inside(L.nodes.begin(), L.nodes.end());
  try {
    for (const Node* n : L.nodes) {
      if (needed && !needed->count(n)) continue;
      std::vector<const std::vector<double>*> ins;
      for (auto& i : n->inputs) {
        const Node* p = i.get();
        if (auto it = local.find(p); it != local.end()) {
          ins.push_back(&r.values[it->second].second);
          continue;
        }
        if (inside.count(p)) return r;  // an input of this kernel that was not evaluated (not needed?): give up
        auto e = ext.find(p);
        if (e == ext.end()) {
          const std::vector<float>* v = value_of(p);
          if (!v) return r;
          e = ext.emplace(p, std::vector<double>(v->begin(), v->end())).first;
        }
        ins.push_back(&e->second);
      }
      std::vector<double> v = cpu::eval_node(*n, ins);
      for (double& x : v) x = static_cast<float>(x);  // f32 storage semantics, as on the GPU
      const bool bad = std::any_of(v.begin(), v.end(), [](double x) { return !std::isfinite(x); });
      local.emplace(n, r.values.size());
      r.values.emplace_back(n, std::move(v));
      if (bad && !r.first_nonfinite) {
        r.first_nonfinite = n;
        if (stop_at_nonfinite) {
          r.complete = true;
          return r;
        }
      }
    }
  } catch (const Error&) {
    return r;
  }
  r.complete = true;
  return r;
}

const Node* Session::Impl::pinpoint(const Launch& L, bool& ok) {
  // Of a multi-output kernel, only the nodes this output depends on (another output's chain may go non-finite
  // too, but it is not the one that failed).
  const std::unordered_set<const Node*> inside(L.nodes.begin(), L.nodes.end());
  std::unordered_set<const Node*> needed;
  if (inside.count(L.output)) {
    std::vector<const Node*> todo{L.output};
    while (!todo.empty()) {
      const Node* n = todo.back();
      todo.pop_back();
      if (!inside.count(n) || !needed.insert(n).second) continue;
      for (auto& i : n->inputs) todo.push_back(i.get());
    }
  } else {
    needed = inside;
  }
  Reevaluation r = reevaluate(L, &needed, /*stop_at_nonfinite=*/true);
  ok = r.complete;
  return r.complete ? r.first_nonfinite : nullptr;
}

void Session::Impl::recompute_unstored(const Launch& F) {
  std::vector<const Node*> unstored;
  for (const Node* n : F.nodes) {
    const int k = num(n);
    if (k >= 0 && !(stored_by[k] >= F.first && stored_by[k] <= last_of(F)) && !values.count(n)) unstored.push_back(n);
  }
  if (unstored.empty()) return;  // the kernel stored everything it computed
  Reevaluation r = reevaluate(F, nullptr, /*stop_at_nonfinite=*/false);
  // How close the CPU reference is to what the kernel stored, per output (the recomputed nodes feed them).
  for (int i = F.first; i <= last_of(F); ++i) {
    const Launch& L = launches[i];
    const std::vector<double>* ref = r.find(L.output);
    auto gpu = values.find(L.output);
    if (!ref || gpu == values.end() || gpu->second.size() != ref->size()) continue;
    double diff = 0, scale = 1e-30;
    for (size_t j = 0; j < ref->size(); ++j) {
      const double a = gpu->second[j], b = (*ref)[j];
      if (std::isfinite(a) && std::isfinite(b)) {
        diff = std::max(diff, std::abs(a - b));
        scale = std::max(scale, std::abs(b));
      } else if (!(std::isnan(a) && std::isnan(b)) && a != b) {
        diff = std::numeric_limits<double>::infinity();  // non-finite in one and not the other
      }
    }
    for (auto it = captures.rbegin(); it != captures.rend() && it->step == step; ++it)
      if (it->launch == L.index && it->node == num(L.output)) {
        it->reference_diff = diff / scale;
        break;
      }
  }
  for (const Node* n : unstored) {
    const std::vector<double>* v = r.find(n);
    if (!v) continue;  // an input was unavailable: the node keeps no value
    std::vector<float>& dst = values[n];
    dst.assign(v->begin(), v->end());
    recomputed.insert(n);
    if (const int k = num(n); capture_inside[k]) {
      const char* suffix = roles[k] == Role::Backward ? "grad" : roles[k] == Role::Update ? "update" : "value";
      add_capture(n, F.index, F.kernel_name, dst, fmt::format("{}.n{}.{}", F.kernel_name, k, suffix));
    }
  }
}

void Session::Impl::fail(const Launch& L, const TensorStats& s, const std::vector<float>& v) {
  int64_t first = -1;
  for (size_t i = 0; i < v.size() && first < 0; ++i)
    if (!std::isfinite(v[i])) first = static_cast<int64_t>(i);
  std::string msg = fmt::format(
      "check_numerics: step {}, launch {} '{}' produced {} NaN, {} +Inf, {} -Inf of {} values (first at element "
      "{}).\n",
      step, L.index, L.name, s.nan, s.posinf, s.neginf, s.numel, first);
  if (L.outputs > 1) {
    int k = num(L.output);
    std::string what = k >= 0 ? role_name(roles[k]) : "?";
    if (k >= 0 && !grad_of[k].empty()) what += ", d(loss)/d(" + grad_of[k] + ")";
    msg += fmt::format("  it is {} (one draw writing {} values): {} [{}]{}\n", output_desc(L), L.outputs,
                       describe(L.output), what,
                       L.output_index > 0 ? fmt::format("; outputs 0..{} of the kernel are finite", L.output_index - 1)
                                          : std::string());
  }
  msg += "  graph nodes it computes:\n";
  std::vector<std::string> sources;
  for (const Node* n : L.nodes) {
    int k = num(n);
    std::string stored;
    if (L.outputs > 1 && k >= 0 && stored_by[k] >= L.first && stored_by[k] <= last_of(L))
      stored = fmt::format(" (output {})", launches[stored_by[k]].output_index);
    msg += fmt::format("    {} [{}]{}\n", describe(n), k >= 0 ? role_name(roles[k]) : "?", stored);
    if (n->loc.known() && std::find(sources.begin(), sources.end(), n->loc.str()) == sources.end())
      sources.push_back(n->loc.str());
  }
  bool ok = false;
  const Node* bad = pinpoint(L, ok);
  if (bad)
    msg += fmt::format("  first non-finite node (CPU reference re-evaluation from the kernel's inputs): {}\n",
                       describe(bad));
  else if (ok)
    msg += "  the CPU reference computes finite values for every node of this kernel from the same inputs: suspect "
           "the generated kernel or the driver (compare with --backend cpu)\n";
  msg += fmt::format("  user source lines: {}\n",
                     sources.empty() ? std::string("<unknown>") : fmt::format("{}", fmt::join(sources, ", ")));
  msg += "  every earlier launch of this step produced finite values; look for log/sqrt/division of a value <= 0, "
         "overflowing exp, or a learning rate that is too large";
  NumericsError e(msg);
  e.kernel = L.name;
  e.sources = sources;
  failure = msg;
  failure_step = step;
  failure_launch = L.index;
  if (dbg && out) *out << msg << "\n";
  throw e;
}

}  // namespace sg::debug
