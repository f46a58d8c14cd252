// Debug mode: tensor statistics, node roles, and the small helpers the debug sources share. See sg/debug.h.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "debug_internal.h"

namespace sg::debug {

std::string fnum(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.6g}", v);
}
nlohmann::json jnum(double v) {
  if (std::isfinite(v)) return v;
  return fnum(v);  // JSON has no NaN/Inf: strings "nan", "inf", "-inf"
}

std::string op_short(const Node& n) { return n.op == Op::Reduce ? reduce_name(n.attrs.reduce) : op_name(n.op); }

std::string truncate(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

std::string file_safe(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return r;
}

Shape display_shape(ShapeRef shape) {
  Shape s(shape.begin(), shape.end());
  if (s.size() == 4 && s[1] == 1 && s[0] > 3) {
    int64_t n = s[0], r = 1;
    for (int64_t d = 1; d * d <= n; ++d)
      if (n % d == 0) r = d;
    s = {r, n / r, s[2], s[3]};
  }
  return s;
}

NodeRef parse_node_ref(std::string_view s, size_t count) {
  if (!s.empty() && s.front() == 'n') s.remove_prefix(1);
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return {};
  size_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range || end != s.data() + s.size() || v >= count)
    return {NodeRef::OutOfRange, 0};
  return {NodeRef::Ok, v};
}

TensorStats compute_stats(const float* data, ShapeRef shape) {
  TensorStats s;
  s.shape = Shape(shape.begin(), shape.end());
  s.numel = sg::numel(shape);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0, sq = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < s.numel; ++i) {
    double v = data[i];
    if (std::isnan(v)) {
      ++s.nan;
    } else if (std::isinf(v)) {
      ++(v > 0 ? s.posinf : s.neginf);
    } else {
      ++finite;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
      sq += v * v;
    }
  }
  const double qnan = std::numeric_limits<double>::quiet_NaN();
  if (finite == 0) {
    s.min = s.max = s.mean = s.std = s.l2 = qnan;
    return s;
  }
  s.min = lo;
  s.max = hi;
  s.mean = sum / static_cast<double>(finite);
  double var = 0;  // two-pass: numerically stable
  for (int64_t i = 0; i < s.numel; ++i) {
    double v = data[i];
    if (std::isfinite(v)) var += (v - s.mean) * (v - s.mean);
  }
  s.std = std::sqrt(var / static_cast<double>(finite));
  s.l2 = std::sqrt(sq);
  return s;
}

std::string TensorStats::str() const {
  return fmt::format("min {} max {} mean {} std {} l2 {} nan {} +inf {} -inf {}", fnum(min), fnum(max), fnum(mean),
                     fnum(std), fnum(l2), nan, posinf, neginf);
}

nlohmann::json TensorStats::to_json() const {
  return {{"shape", std::vector<int64_t>(shape.begin(), shape.end())},
          {"numel", numel},
          {"min", jnum(min)},
          {"max", jnum(max)},
          {"mean", jnum(mean)},
          {"std", jnum(std)},
          {"l2", jnum(l2)},
          {"nan", nan},
          {"posinf", posinf},
          {"neginf", neginf}};
}

const char* role_name(Role r) {
  switch (r) {
    case Role::Input: return "input";
    case Role::Param: return "param";
    case Role::State: return "state";
    case Role::Const: return "const";
    case Role::Forward: return "forward";
    case Role::Backward: return "backward";
    case Role::Update: return "update";
  }
  return "?";
}

}  // namespace sg::debug
