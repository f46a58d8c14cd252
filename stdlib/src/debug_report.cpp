// Debug mode: the report — stats.json (every number), report.html (the page: its HTML, CSS and script are the
// template stdlib/src/debug_report.html, compiled into the library; this file fills in the data as JSON),
// gradient_flow.png and the kernels' GLSL ES sources. See sg/debug.h and docs/DEBUGGING.md.
#include <algorithm>
#include <sstream>

#include "debug_internal.h"
#include "sg/backend.h"
#include "sg/dump.h"
#include "sg/emitter.h"
#include "sg/safetensors.h"

namespace sg::debug {

namespace {

/// The template: generated at build time from stdlib/src/debug_report.html (stdlib/CMakeLists.txt).
constexpr const char kReportTemplate[] =
#include "debug_report_template.inc"
    ;

std::string html_escape(const std::string& s) {
  std::string r;
  r.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      default: r += c;
    }
  }
  return r;
}

/// JSON safe inside <script type="application/json">: no "</" (which would end the element), no U+2028/2029.
std::string script_json(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), r;
  r.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') {
      r += "<\\/";
      ++i;
    } else {
      r += s[i];
    }
  }
  return r;
}

/// Replaces the one occurrence of `key` in `page`; throws when the template lacks it (a build problem).
void fill(std::string& page, const std::string& key, const std::string& value) {
  size_t p = page.find(key);
  if (p == std::string::npos)
    throw ValueError(
        fmt::format("debug report template: placeholder {} is missing (stdlib/src/debug_report.html)", key));
  page.replace(p, key.size(), value);
}

nlohmann::json capture_json(const Capture& c) {
  nlohmann::json j = {{"png", c.png}, {"stats", c.stats.to_json()}, {"launch", c.launch}, {"kernel", c.kernel},
                      {"recomputed", c.recomputed}, {"colormap", c.colormap}, {"lo", jnum(c.lo)}, {"hi", jnum(c.hi)}};
  if (!c.note.empty()) j["note"] = c.note;
  if (!std::isnan(c.reference_diff)) j["reference_diff"] = jnum(c.reference_diff);
  return j;
}

}  // namespace

/// The CPU reference runs node by node: its shader listing shows one kernel per node (the cpu target's policy).
ScheduleOptions reference_schedule_options() {
  BackendOptions bo;
  bo.unfused = true;
  return schedule_options(make_target(TargetName::Cpu, {}), bo);
}

void Session::Impl::ensure_shaders() {
  if (shaders_done) return;
  const Plan* plan = exe ? exe->plan() : nullptr;
  if (!plan) {
    ref_plan = schedule(program, reference_schedule_options());
    plan = &*ref_plan;
  }
  shader_info.clear();
  shaders.clear();
  // kernels of a plan without a compute backend's are listed as the fragment target's emitter prints them
  const auto fragment = make_emitter(make_target(TargetName::GlslEsFragment, {}));
  for (const Kernel& k : plan->kernels) {
    // a compute backend's kernels as it runs them, else the fragment kernels of the plan
    const auto* compute = exe ? exe->compute_kernels() : nullptr;
    const size_t ki = static_cast<size_t>(&k - plan->kernels.data());
    const ShaderStage stage = compute ? ShaderStage::Compute : ShaderStage::Fragment;
    ShaderInfo si{k.name, {}, "", "frag"};
    if (compute && (*compute)[ki].language == ComputeLanguage::C) {
      si.source = (*compute)[ki].source;  // cpu-simd: the C that ran (its header names the nodes and lines)
      si.extension = "c";
    } else {
      const std::string src = compute ? (*compute)[ki].source : fragment->source(*plan, k);
      const CompiledShader& c = cache.get_or_compile(k.name, src, stage);
      // SPIRV-Cross drops comments: carry the GLSL 4.50 header (kernel, output, nodes with source lines) over,
      // right after the #version line so the file stays valid GLSL ES.
      si.source = with_header_comment(c.gles, c.glsl450);
    }
    for (auto& n : k.nodes) si.nodes.push_back(num(n.get()));
    shader_info.push_back(si);
    shaders.emplace_back(k.name, si.source);
  }
  shaders_done = true;
}

nlohmann::json Session::Impl::stats_json(const ReportInfo& info) const {
  nlohmann::json j;
  j["title"] = info.title;
  for (auto& [k, v] : info.facts) j["facts"][k] = v;
  j["nodes"] = nlohmann::json::array();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i].get();
    nlohmann::json nj = {{"node", i},
                         {"label", n->label()},
                         {"op", op_short(*n)},
                         {"shape", std::vector<int64_t>(n->shape.begin(), n->shape.end())},
                         {"role", role_name(roles[i])},
                         {"source", n->loc.known() ? n->loc.str() : ""}};
    if (!grad_of[i].empty()) nj["grad_of"] = grad_of[i];
    if (!layer_of[i].empty()) nj["layer"] = layer_of[i];
    if (stored_by[i] >= 0) nj["stored_by"] = launches[stored_by[i]].name;
    j["nodes"].push_back(nj);
  }
  j["launches"] = nlohmann::json::array();
  for (auto& L : launches) {
    std::vector<int> ns;
    for (const Node* n : L.nodes) ns.push_back(num(n));
    j["launches"].push_back({{"index", L.index},
                             {"name", L.name},
                             {"kernel", L.kernel_name},
                             {"render_target", L.output_index},
                             {"outputs", L.outputs},
                             {"nodes", ns},
                             {"output", num(L.output)}});
  }
  j["captures"] = nlohmann::json::array();
  for (auto& c : captures) {
    nlohmann::json cj = {{"step", c.step}, {"launch", c.launch}, {"kernel", c.kernel}, {"node", c.node},
                         {"role", role_name(c.role)}, {"stats", c.stats.to_json()}, {"png", c.png}};
    if (!c.grad_of.empty()) cj["grad_of"] = c.grad_of;
    if (!c.note.empty()) cj["note"] = c.note;
    if (c.recomputed) cj["recomputed"] = true;
    if (!std::isnan(c.reference_diff)) cj["reference_diff"] = jnum(c.reference_diff);
    j["captures"].push_back(cj);
  }
  j["losses"] = nlohmann::json::array();
  for (double l : losses) j["losses"].push_back(jnum(l));
  for (auto& g : gradient_norms()) {
    nlohmann::json a = nlohmann::json::array();
    for (size_t s = 0; s < g.l2.size(); ++s) a.push_back(g.computed[s] ? jnum(g.l2[s]) : nlohmann::json());
    j["gradient_norms"][g.param] = a;
  }
  if (!failure.empty()) j["failure"] = {{"message", failure}, {"step", failure_step}, {"launch", failure_launch}};
  return j;
}

nlohmann::json Session::Impl::report_data(const ReportInfo& info) const {
  const int S = step;
  nlohmann::json d;
  d["title"] = info.title;
  d["facts"] = nlohmann::json::array();
  for (auto& [k, v] : info.facts) d["facts"].push_back({k, v});
  d["step"] = S;
  d["launches"] = launches.size();
  d["launch_note"] = launch_count_note();
  d["cpu_backend"] = !(exe && exe->plan());
  d["recompute"] = opt.recompute;
  if (!failure.empty()) d["failure"] = {{"message", failure}, {"step", failure_step}, {"launch", failure_launch}};
  d["losses"] = nlohmann::json::array();
  for (double l : losses) d["losses"].push_back(jnum(l));
  d["plot"] = !param_grad.empty() && step >= 0;
  d["gradient_norms"] = nlohmann::json::array();
  for (auto& g : gradient_norms()) {
    nlohmann::json a = nlohmann::json::array();
    for (size_t s = 0; s < g.l2.size(); ++s) a.push_back(g.computed[s] ? jnum(g.l2[s]) : nlohmann::json());
    d["gradient_norms"].push_back({{"param", g.param}, {"l2", a}});
  }
  d["nodes"] = nlohmann::json::array();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i].get();
    const int k = static_cast<int>(i);
    nlohmann::json nj = {{"n", k},
                         {"label", n->label()},
                         {"op", op_short(*n)},
                         {"shape", shape_str(n->shape)},
                         {"role", role_name(roles[i])},
                         {"source", n->loc.known() ? n->loc.str() : ""},
                         {"grad_of", grad_of[i]},
                         {"layer", layer_of[i]}};
    nlohmann::json ins = nlohmann::json::array();
    for (auto& in : n->inputs) ins.push_back(num(in.get()));
    nj["inputs"] = ins;
    if (stored_by[i] >= 0) {
      const Launch& L = launches[stored_by[i]];
      nj["kernel"] = L.kernel_name;
      nj["launch"] = L.name;
      if (L.outputs > 1) nj["output"] = fmt::format("output {} of {}", L.output_index, L.outputs);
    } else if (computed_in[i] >= 0) {
      nj["kernel"] = launches[computed_in[i]].kernel_name;
      nj["inside"] = true;  // fused: kept in registers
    }
    for (auto& si : shader_info)  // the listed kernel computing it (on the CPU backend: the reference plan's)
      if (std::find(si.nodes.begin(), si.nodes.end(), k) != si.nodes.end()) {
        nj["shader"] = si.name;
        break;
      }
    if (const Capture* c = find(k, S)) nj["value"] = capture_json(*c);
    if (ts) {
      auto it = ts->adjoint.find(n);
      if (it != ts->adjoint.end() && num(it->second.get()) >= 0) nj["grad"] = num(it->second.get());
    }
    d["nodes"].push_back(nj);
  }
  d["kernels"] = nlohmann::json::array();
  for (auto& s : shader_info) {
    std::vector<std::string> outs;
    if (exe && exe->plan())
      for (auto& L : launches)
        if (L.kernel_name == s.name && L.outputs > 1)
          outs.push_back(fmt::format("{} = n{}", L.output_index, num(L.output)));
    d["kernels"].push_back({{"name", s.name}, {"nodes", s.nodes}, {"render_targets", outs}, {"source", s.source}});
  }
  return d;
}

std::string Session::Impl::write_report(const ReportInfo& info) {
  if (opt.out_dir.empty()) throw ValueError("debug::Session::write_report: Options::out_dir is empty");
  const fs::path dir(opt.out_dir);
  fs::create_directories(dir / "shaders");
  ensure_shaders();
  for (auto& s : shader_info)
    io::write_file_atomic((dir / "shaders" / (s.name + "." + s.extension)).string(), s.source);
  if (!param_grad.empty() && step >= 0) image::write_png((dir / "gradient_flow.png").string(), plot(760, 440));
  io::write_file_atomic((dir / "stats.json").string(), stats_json(info).dump(1) + "\n");

  std::string page = kReportTemplate;
  fill(page, "@TITLE@", html_escape(info.title));
  fill(page, "@DATA@", script_json(report_data(info)));
  const std::string path = (dir / "report.html").string();
  io::write_file_atomic(path, page);
  return path;
}

}  // namespace sg::debug
