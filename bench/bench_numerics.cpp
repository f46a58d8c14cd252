// bench_numerics — the edge-value table of the float ops on every GPU backend against the CPU reference.
//
// Usage: bench_numerics [--backend KIND[,KIND...]] [--all] [--only TEXT[,TEXT...]]
//   KIND: gles, gles-compute, vulkan (default: all three; one that cannot be created is reported and skipped).
//   --all prints every value; by default only the cases with a disagreement print their rows in full.
//   --only keeps the cases whose name contains one of the TEXTs (e.g. --only argmax,pow).
// SG_ARGMAX_FORM=NAME selects a formulation of argmax's comparison in GLSL (codegen/src/glsl_argmax.cpp; the probe
// of scripts/device/phase_numerics.sh); the header line names the one in effect.
//
// The cases are tests/edge_cases.h (NaN, infinities, x/0, pow's special cases, tanh/softplus/sigmoid'/sin/exp/log
// accuracy, NaN in reductions, pools and argmax); the same list runs as a test on every backend of the op-case
// tests. A value agrees when |got - cpu| <= 1e-5 |cpu| + FLT_MIN (NaN with NaN, an infinity with the same one;
// argmax exactly). Exit status: 0 when every backend agrees everywhere, 1 otherwise, 2 on a usage error.
// Nothing here is timed: the output records what a machine's drivers compute (docs/RELIABILITY.md).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../tests/edge_cases.h"
#include "sg/backend.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t e = s.find(',', pos);
    if (e == std::string::npos) e = s.size();
    if (e > pos) out.push_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  return out;
}

std::string num(float v) { return fmt::format("{:.7g}", v); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> kinds = {"gles", "gles-compute", "vulkan"};
  bool all = false;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc) {
      kinds = split(argv[++i]);
    } else if (a == "--all") {
      all = true;
    } else if (a == "--only" && i + 1 < argc) {
      only = split(argv[++i]);
    } else {
      fmt::print(stderr, "usage: bench_numerics [--backend gles,gles-compute,vulkan] [--all] [--only TEXT[,TEXT...]]\n");
      return 2;
    }
  }
  using namespace sg::edge_cases;
  std::vector<EdgeCase> cases;
  for (EdgeCase& c : sg::edge_cases::all())
    if (only.empty() || std::any_of(only.begin(), only.end(), [&](const std::string& t) { return c.name.find(t) != std::string::npos; }))
      cases.push_back(std::move(c));
  if (cases.empty()) {
    fmt::print(stderr, "bench_numerics: no case name contains any of the --only texts\n");
    return 2;
  }
  const EdgeProgram ep = build(cases);
  const auto want = sg::make_cpu_backend()->compile(ep.program)->run(ep.feeds());
  std::vector<std::string> names;
  std::vector<std::vector<std::vector<float>>> got;
  for (const std::string& kind : kinds) {
    try {
      auto be = sg::make_backend({.kind = kind}).backend;
      auto out = be->compile(ep.program)->run(ep.feeds());
      names.push_back(fmt::format("{} ({})", kind, be->device()));
      got.push_back(std::move(out));
    } catch (const std::exception& e) {
      fmt::print("backend {}: skipped: {}\n", kind, e.what());
    }
  }
  const char* form = std::getenv("SG_ARGMAX_FORM");
  fmt::print("argmax form (SG_ARGMAX_FORM): {}\n", form && *form ? form : "intkey (default)");
  fmt::print("bench_numerics: {} cases; columns: input(s), cpu reference (f64, torch semantics), then", cases.size());
  for (size_t b = 0; b < names.size(); ++b) fmt::print(" [{}] {}", b, names[b]);
  fmt::print("\n'!' marks a disagreement (|got - cpu| > 1e-5 |cpu| + FLT_MIN, or NaN/inf mismatch)\n\n");
  std::vector<int> bad(names.size(), 0);
  for (size_t i = 0; i < cases.size(); ++i) {
    const EdgeCase& c = cases[i];
    const bool elementwise = c.shapes.size() == 2 || (c.shapes.size() == 1 && c.inputs[0].size() == want[i].size());
    std::vector<std::string> rows;
    int case_bad = 0;
    std::vector<double> worst(got.size(), 0.0);  // the largest |got - cpu| / |cpu| over normal finite cpu values
    for (size_t k = 0; k < want[i].size(); ++k) {
      std::string row = elementwise ? "  " + num(c.inputs[0][k]) + (c.shapes.size() == 2 ? ", " + num(c.inputs[1][k]) : "")
                                    : fmt::format("  [{}]", k);
      row = fmt::format("{:<24} {:>14}", row, num(want[i][k]));
      for (size_t b = 0; b < got.size(); ++b) {
        const float g = got[b][i][k];
        const bool ok = agrees(g, want[i][k], c.exact);
        bad[b] += !ok;
        case_bad += !ok;
        const double w = want[i][k];
        if (!c.exact && std::isfinite(w) && std::fabs(w) >= FLT_MIN && std::isfinite(g))
          worst[b] = std::max(worst[b], std::fabs(g - w) / std::fabs(w));
        row += fmt::format(" {:>14}{}", num(g), ok ? ' ' : '!');
      }
      rows.push_back(row);
    }
    std::string rel;
    for (size_t b = 0; b < got.size() && !c.exact; ++b) rel += fmt::format("{}{:.2g}", b ? "/" : "", worst[b]);
    fmt::print("{}{}{}\n", c.name, case_bad ? fmt::format("  -- {} disagreement(s)", case_bad) : std::string("  -- agrees"),
               rel.empty() ? std::string() : "; max rel err " + rel);
    if (all || case_bad)
      for (auto& r : rows) fmt::print("{}\n", r);
  }
  fmt::print("\nsummary:");
  int total = 0;
  for (size_t b = 0; b < names.size(); ++b) {
    fmt::print(" [{}] {} disagreement(s);", b, bad[b]);
    total += bad[b];
  }
  fmt::print("\n");
  return total == 0 ? 0 : 1;
}
