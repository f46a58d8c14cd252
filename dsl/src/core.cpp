// Errors, source locations, shapes.
#include <fmt/format.h>

#include "sg/error.h"
#include "sg/shape.h"

namespace sg {

namespace {
thread_local const SourceLoc* g_override = nullptr;
}

LocationOverride::LocationOverride(const SourceLoc& loc) : active_(g_override == nullptr && loc.known()) {
  if (active_) g_override = new SourceLoc(loc);
}
LocationOverride::~LocationOverride() {
  if (active_) {
    delete g_override;
    g_override = nullptr;
  }
}

SourceLoc::SourceLoc(const source_location& l) : line(l.line()), function(l.function_name()) {
  if (g_override) {
    *this = *g_override;
    return;
  }
  std::string f = l.file_name();
  auto slash = f.find_last_of('/');
  file = slash == std::string::npos ? f : f.substr(slash + 1);
}

std::string SourceLoc::str() const { return known() ? fmt::format("{}:{}", file, line) : "<unknown>"; }

const char* dtype_name(DType d) { return d == DType::f32 ? "f32" : "i32"; }

int64_t numel(ShapeRef s) { return checked_numel(s, "numel"); }

int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (a < 0 || b < 0)
    throw ValueError(fmt::format("{}: negative size in {} x {}", what, a, b));
  if (__builtin_mul_overflow(a, b, &r))
    throw ValueError(fmt::format("{}: {} x {} exceeds the largest size (2^63-1 elements or bytes); use smaller "
                                 "sizes", what, a, b));
  return r;
}

int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (a < 0 || b < 0)
    throw ValueError(fmt::format("{}: negative size in {} + {}", what, a, b));
  if (__builtin_add_overflow(a, b, &r))
    throw ValueError(fmt::format("{}: {} + {} exceeds the largest size (2^63-1); use smaller sizes", what, a, b));
  return r;
}

int64_t checked_numel(ShapeRef s, std::string_view what) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw ValueError(fmt::format("{}: negative size in shape {}", what, shape_str(s)));
    int64_t r = 0;
    if (__builtin_mul_overflow(n, d, &r))
      throw ValueError(fmt::format("{}: shape {} has more than 2^63-1 elements; use smaller sizes", what,
                                   shape_str(s)));
    n = r;
  }
  return n;
}

Shape contiguous_strides(ShapeRef s) {
  Shape st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

std::string shape_str(ShapeRef s) {
  if (s.empty()) return "scalar";
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
  return r;
}

bool broadcast_shapes(ShapeRef a, ShapeRef b, Shape& out) {
  size_t n = std::max(a.size(), b.size());
  out.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

int normalize_axis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  return (axis < 0 || axis >= rank) ? -1 : static_cast<int>(axis);
}

}  // namespace sg
