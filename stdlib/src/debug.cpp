// Debug mode: per-launch capture (stats + PNGs), numerics checks, the gradient-flow plot and report.html, and
// the step-through debugger. See sg/debug.h.
#include "sg/debug.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <istream>
#include <limits>
#include <ostream>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/cpu_reference.h"
#include "sg/emit.h"
#include "sg/kernel_cache.h"
#include "sg/safetensors.h"
#include "sg/train.h"

namespace sg::debug {

namespace fs = std::filesystem;
using image::RGB;
using image::RGBImage;

// =============================================================================================================
// Stats, roles
// =============================================================================================================

namespace {
std::string fnum(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.6g}", v);
}
nlohmann::json jnum(double v) {
  if (std::isfinite(v)) return v;
  return fnum(v);  // JSON has no NaN/Inf: strings "nan", "inf", "-inf"
}
}  // namespace

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

// =============================================================================================================
// Train step with known adjoints
// =============================================================================================================

TrainStep make_train_step(const Tensor& loss, const std::vector<std::pair<std::string, Tensor>>& params,
                          Optimizer& opt, const std::vector<std::pair<std::string, Tensor>>& extra_outputs,
                          bool output_grads) {
  if (!loss) throw ValueError("debug::make_train_step: the loss is an empty Tensor");
  std::unordered_set<const Node*> depends;
  std::vector<Tensor> wrt, ps;
  for (auto& [name, p] : params) {
    if (!p || p.node()->op != Op::Param)
      throw ValueError(fmt::format("debug::make_train_step: '{}' is not a parameter (sg::param){}", name,
                                   p ? " but " + p.node()->describe() : std::string()));
    depends.insert(p.node().get());
    wrt.push_back(p);
    ps.push_back(p);
  }
  // Every forward node that depends on a parameter: its adjoint is built by the backward pass anyway.
  std::vector<NodePtr> order = topo_order({loss.node()});
  std::vector<NodePtr> inner;
  for (auto& n : order) {
    if (n->is_leaf()) continue;
    bool d = false;
    for (auto& i : n->inputs) d |= depends.count(i.get()) > 0;
    if (d) {
      depends.insert(n.get());
      inner.push_back(n);
      wrt.emplace_back(n);
    }
  }
  std::vector<Tensor> gs = grad(loss, wrt);
  TrainStep ts;
  ts.loss = loss;
  ts.params = params;
  for (size_t i = 0; i < wrt.size(); ++i) {
    ts.adjoint[wrt[i].node().get()] = gs[i].node();
    if (i < ps.size()) ts.param_grads.push_back(gs[i]);
  }
  ts.program.add_output("loss", loss);
  for (auto& [name, t] : extra_outputs) ts.program.add_output(name, t);
  if (output_grads)
    for (size_t i = 0; i < params.size(); ++i) ts.program.add_output("grad:" + params[i].first, ts.param_grads[i]);
  ts.program.updates = opt.updates(ps, ts.param_grads);
  return ts;
}

// =============================================================================================================
// Raster plot: 5x7 font, lines, axes
// =============================================================================================================

namespace {

/// 5x7 glyphs: 7 rows of 5 bits (bit 4 = leftmost column). Upper case only; lower case is drawn upper case.
const uint8_t* glyph5x7(char ch) {
  static const uint8_t kLetters[26][7] = {
      {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11},  // A
      {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E},  // B
      {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E},  // C
      {0x1E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1E},  // D
      {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F},  // E
      {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10},  // F
      {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F},  // G
      {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11},  // H
      {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E},  // I
      {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C},  // J
      {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11},  // K
      {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F},  // L
      {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11},  // M
      {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11},  // N
      {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E},  // O
      {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10},  // P
      {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D},  // Q
      {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11},  // R
      {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E},  // S
      {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},  // T
      {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E},  // U
      {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04},  // V
      {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A},  // W
      {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11},  // X
      {0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04},  // Y
      {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F},  // Z
  };
  static const uint8_t kDigits[10][7] = {
      {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E},  // 0
      {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E},  // 1
      {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F},  // 2
      {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E},  // 3
      {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02},  // 4
      {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E},  // 5
      {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E},  // 6
      {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},  // 7
      {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E},  // 8
      {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C},  // 9
  };
  struct Sym {
    char c;
    uint8_t rows[7];
  };
  static const Sym kSymbols[] = {
      {' ', {0, 0, 0, 0, 0, 0, 0}},
      {'.', {0, 0, 0, 0, 0, 0x0C, 0x0C}},
      {',', {0, 0, 0, 0, 0x0C, 0x04, 0x08}},
      {'-', {0, 0, 0, 0x1F, 0, 0, 0}},
      {'+', {0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0}},
      {'_', {0, 0, 0, 0, 0, 0, 0x1F}},
      {'/', {0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10}},
      {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
      {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}},
      {':', {0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0}},
      {'=', {0, 0, 0x1F, 0, 0x1F, 0, 0}},
      {'[', {0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E}},
      {']', {0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E}},
      {'\'', {0x04, 0x04, 0x08, 0, 0, 0, 0}},
      {'*', {0, 0x04, 0x15, 0x0E, 0x15, 0x04, 0}},
      {'<', {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02}},
      {'>', {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08}},
      {'?', {0x0E, 0x11, 0x01, 0x02, 0x04, 0, 0x04}},
      {'!', {0x04, 0x04, 0x04, 0x04, 0x04, 0, 0x04}},
      {'#', {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A}},
      {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}},
      {'^', {0x04, 0x0A, 0x11, 0, 0, 0, 0}},
  };
  static const uint8_t kBox[7] = {0x1F, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1F};
  if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
  if (ch >= 'A' && ch <= 'Z') return kLetters[ch - 'A'];
  if (ch >= '0' && ch <= '9') return kDigits[ch - '0'];
  for (const Sym& s : kSymbols)
    if (s.c == ch) return s.rows;
  return kBox;
}

struct Canvas {
  RGBImage img;
  Canvas(int w, int h, RGB bg) {
    img.width = w;
    img.height = h;
    img.rgb.resize(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
    for (size_t i = 0; i < img.rgb.size(); i += 3) {
      img.rgb[i] = bg.r;
      img.rgb[i + 1] = bg.g;
      img.rgb[i + 2] = bg.b;
    }
  }
  void put(int x, int y, RGB c) {
    if (x < 0 || y < 0 || x >= img.width || y >= img.height) return;
    size_t i = (static_cast<size_t>(y) * static_cast<size_t>(img.width) + static_cast<size_t>(x)) * 3;
    img.rgb[i] = c.r;
    img.rgb[i + 1] = c.g;
    img.rgb[i + 2] = c.b;
  }
  void rect(int x0, int y0, int w, int h, RGB c) {
    for (int y = y0; y < y0 + h; ++y)
      for (int x = x0; x < x0 + w; ++x) put(x, y, c);
  }
  void hline(int x0, int x1, int y, RGB c) {
    for (int x = std::min(x0, x1); x <= std::max(x0, x1); ++x) put(x, y, c);
  }
  void vline(int x, int y0, int y1, RGB c) {
    for (int y = std::min(y0, y1); y <= std::max(y0, y1); ++y) put(x, y, c);
  }
  /// Bresenham line, `thick` x `thick` pen; `dash` > 0 draws `dash` pixels on, `dash` off.
  void line(int x0, int y0, int x1, int y1, RGB c, int thick = 2, int dash = 0) {
    int dx = std::abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -std::abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (int k = 0;; ++k) {
      if (dash <= 0 || (k / dash) % 2 == 0) rect(x0 - thick / 2, y0 - thick / 2, thick, thick, c);
      if (x0 == x1 && y0 == y1) break;
      int e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  }
  static int text_width(const std::string& s, int scale) {
    return s.empty() ? 0 : (static_cast<int>(s.size()) * 6 - 1) * scale;
  }
  void text(int x0, int y0, const std::string& s, RGB c, int scale = 1) {
    for (size_t k = 0; k < s.size(); ++k) {
      const uint8_t* g = glyph5x7(s[k]);
      for (int r = 0; r < 7; ++r)
        for (int col = 0; col < 5; ++col)
          if (g[r] & (0x10 >> col)) rect(x0 + (static_cast<int>(k) * 6 + col) * scale, y0 + r * scale, scale, scale, c);
    }
  }
  /// Text rotated 90 degrees counter-clockwise (reads bottom to top), its left end at (x0, y0 = bottom).
  void text_up(int x0, int y0, const std::string& s, RGB c, int scale = 1) {
    for (size_t k = 0; k < s.size(); ++k) {
      const uint8_t* g = glyph5x7(s[k]);
      for (int r = 0; r < 7; ++r)
        for (int col = 0; col < 5; ++col)
          if (g[r] & (0x10 >> col))
            rect(x0 + r * scale, y0 - (static_cast<int>(k) * 6 + col + 1) * scale, scale, scale, c);
    }
  }
};

/// "Nice" tick step (1, 2 or 5 x 10^k) for about `target` ticks over `span`.
double nice_step(double span, int target) {
  if (!(span > 0)) return 1;
  double raw = span / std::max(target, 1);
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  double m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

std::string tick_label(double v) {
  if (std::abs(v) < 1e-12) return "0";
  return fmt::format("{:g}", v);
}

}  // namespace

RGB palette_color(size_t i) {
  static const RGB kTab10[10] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},   {148, 103, 189},
                                 {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
  return kTab10[i % 10];
}

RGBImage plot_series(const std::vector<Series>& series, const PlotOptions& opt) {
  if (opt.width < 200 || opt.height < 150)
    throw ValueError(fmt::format("plot_series: image size {}x{} is too small (at least 200x150)", opt.width,
                                 opt.height));
  const RGB kBlack{0, 0, 0}, kGrid{225, 225, 225}, kWhite{255, 255, 255}, kAxisText{60, 60, 60};
  Canvas cv(opt.width, opt.height, kWhite);
  size_t npts = 0;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  bool all_pos = true, any = false;
  for (auto& s : series) {
    npts = std::max(npts, s.y.size());
    for (double v : s.y)
      if (std::isfinite(v)) {
        any = true;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        all_pos &= v > 0;
      }
  }
  bool log_y = opt.log_y && any && all_pos;
  auto ty = [&](double v) { return log_y ? std::log10(v) : v; };
  double y0, y1;  // axis range in transformed units
  if (!any) {
    y0 = 0;
    y1 = 1;
  } else if (log_y) {
    y0 = std::floor(std::log10(lo));
    y1 = std::ceil(std::log10(hi));
    if (y1 - y0 < 1) y1 = y0 + 1;
  } else {
    if (hi - lo < 1e-30) {
      lo -= std::max(std::abs(lo) * 0.5, 0.5);
      hi += std::max(std::abs(hi) * 0.5, 0.5);
    }
    double st = nice_step(hi - lo, 5);
    y0 = std::floor(lo / st) * st;
    y1 = std::ceil(hi / st) * st;
  }
  // Layout: legend on the right, tick labels on the left.
  int legend_w = 0;
  for (auto& s : series) legend_w = std::max(legend_w, Canvas::text_width(s.name, 1));
  legend_w = series.empty() ? 0 : legend_w + 34;
  const int left = 78, top = opt.title.empty() ? 14 : 36, bottom = 46, right = 16 + legend_w;
  const int pw = opt.width - left - right, ph = opt.height - top - bottom;
  if (pw < 40 || ph < 40) throw ValueError("plot_series: the legend leaves no room for the plot (make it wider)");
  double x0 = 0, x1 = npts > 1 ? static_cast<double>(npts - 1) : 1.0;
  auto px = [&](double x) {
    double t = npts > 1 ? (x - x0) / (x1 - x0) : 0.5;
    return left + static_cast<int>(std::lround(t * (pw - 1)));
  };
  auto py = [&](double v) {
    double t = (ty(v) - y0) / (y1 - y0);
    return top + ph - 1 - static_cast<int>(std::lround(t * (ph - 1)));
  };
  // Grid and y ticks.
  std::vector<double> yticks;
  if (log_y) {
    int decades = static_cast<int>(y1 - y0);
    int every = std::max(1, (decades + 7) / 8);
    for (int k = static_cast<int>(y0); k <= static_cast<int>(y1); k += every) yticks.push_back(std::pow(10.0, k));
  } else {
    double st = nice_step(y1 - y0, 5);
    for (double v = y0; v <= y1 + st * 1e-6; v += st) yticks.push_back(std::abs(v) < st * 1e-9 ? 0.0 : v);
  }
  for (double v : yticks) {
    int y = py(v);
    cv.hline(left, left + pw - 1, y, kGrid);
    cv.hline(left - 5, left - 1, y, kBlack);
    std::string s = tick_label(v);
    cv.text(left - 8 - Canvas::text_width(s, 1), y - 3, s, kAxisText);
  }
  if (log_y)  // minor ticks at 2..9 x 10^k
    for (int k = static_cast<int>(y0); k < static_cast<int>(y1); ++k)
      for (int m = 2; m <= 9; ++m) cv.hline(left - 3, left - 1, py(m * std::pow(10.0, k)), kBlack);
  // x ticks: integer steps.
  {
    double st = npts > 1 ? std::max(1.0, nice_step(x1 - x0, 8)) : 1.0;
    for (double x = 0; x <= x1 + 1e-9; x += st) {
      if (npts <= 1 && x > 0) break;
      int X = px(x);
      cv.vline(X, top, top + ph - 1, kGrid);
      cv.vline(X, top + ph, top + ph + 4, kBlack);
      std::string s = tick_label(x);
      cv.text(X - Canvas::text_width(s, 1) / 2, top + ph + 8, s, kAxisText);
    }
  }
  // Axes box.
  cv.hline(left, left + pw - 1, top, kBlack);
  cv.hline(left, left + pw - 1, top + ph - 1, kBlack);
  cv.vline(left, top, top + ph - 1, kBlack);
  cv.vline(left + pw - 1, top, top + ph - 1, kBlack);
  // Labels.
  if (!opt.title.empty()) cv.text(left + (pw - Canvas::text_width(opt.title, 2)) / 2, 10, opt.title, kBlack, 2);
  if (!opt.x_label.empty())
    cv.text(left + (pw - Canvas::text_width(opt.x_label, 1)) / 2, top + ph + 24, opt.x_label, kBlack);
  std::string yl = opt.y_label + (log_y ? (opt.y_label.empty() ? "LOG SCALE" : " (LOG SCALE)") : "");
  if (!yl.empty()) cv.text_up(6, top + (ph + Canvas::text_width(yl, 1)) / 2, yl, kBlack);
  if (!any) {
    std::string s = "NO FINITE VALUES";
    cv.text(left + (pw - Canvas::text_width(s, 1)) / 2, top + ph / 2 - 3, s, kAxisText);
  }
  // Lines and markers.
  for (size_t si = 0; si < series.size(); ++si) {
    const Series& s = series[si];
    RGB c = s.color ? *s.color : palette_color(si);
    const int dash = s.color || si < 10 ? 0 : 5;  // the palette's second round is dashed
    auto ok = [&](double v) { return std::isfinite(v) && (!log_y || v > 0); };
    for (size_t i = 0; i + 1 < s.y.size(); ++i)
      if (ok(s.y[i]) && ok(s.y[i + 1]))
        cv.line(px(static_cast<double>(i)), py(s.y[i]), px(static_cast<double>(i + 1)), py(s.y[i + 1]), c, 2,
                dash);
    for (size_t i = 0; i < s.y.size(); ++i)
      if (ok(s.y[i])) cv.rect(px(static_cast<double>(i)) - 2, py(s.y[i]) - 2, 5, 5, c);
  }
  // Legend.
  if (!series.empty()) {
    int lx = left + pw + 14, ly = top + 4;
    for (size_t si = 0; si < series.size(); ++si) {
      RGB c = series[si].color ? *series[si].color : palette_color(si);
      int y = ly + static_cast<int>(si) * 14;
      if (y + 10 > opt.height) break;
      cv.line(lx, y + 3, lx + 14, y + 3, c, 2, series[si].color || si < 10 ? 0 : 3);
      cv.rect(lx + 5, y + 1, 5, 5, c);
      cv.text(lx + 20, y, series[si].name, kBlack);
    }
  }
  return std::move(cv.img);
}

// =============================================================================================================
// Session
// =============================================================================================================

namespace {

/// Thrown through Executable::run by the debugger's `quit` (not an sg::Error: nothing else should catch it).
struct QuitSignal {};

std::string op_short(const Node& n) { return n.op == Op::Reduce ? reduce_name(n.attrs.reduce) : op_name(n.op); }

std::string truncate(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

std::string file_safe(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return r;
}

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

/// The shape an image is rendered with: an (N, 1, H, W) batch of single-channel images (or filters) is laid out
/// as an R x (N/R) grid of tiles, R the largest divisor of N not above sqrt(N), in reading order, instead of one
/// tall column. Other shapes are unchanged. Stats always use the real shape.
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

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// True when `a` names a node by number ("n12" or "12").
bool is_node_number(const std::string& a) {
  return (a.size() > 1 && a[0] == 'n' && all_digits(a.substr(1))) || all_digits(a);
}

/// The number of a node named "nN" or "N" (is_node_number); numbers past any node (more digits than a long holds,
/// e.g. n99999999999999999999) give LONG_MAX, which every caller reports as "no node": std::stol threw
/// std::out_of_range there and ended the session.
long parse_node_number(const std::string& a) {
  const std::string digits = a[0] == 'n' ? a.substr(1) : a;
  long v = 0;
  for (char c : digits)
    if (__builtin_mul_overflow(v, 10L, &v) || __builtin_add_overflow(v, static_cast<long>(c - '0'), &v))
      return std::numeric_limits<long>::max();
  return v;
}

}  // namespace

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
  std::vector<std::pair<std::string, const Node*>> param_grad;  // parameter name -> its gradient node
  std::map<std::string, const Node*> named;                     // parameter/input/state/output names
  std::vector<Launch> launches;
  std::vector<int> stored_by;    // per node number: launch storing it, -1
  std::vector<int> computed_in;  // per node number: first launch computing it, -1
  std::vector<char> capture_launch, capture_leaf;

  KernelCache cache;
  std::optional<Plan> ref_plan;
  struct ShaderInfo {
    std::string name;
    std::vector<int> nodes;
    std::string source;
  };
  std::vector<ShaderInfo> shader_info;
  std::vector<std::pair<std::string, std::string>> shaders;
  bool shaders_done = false;

  std::vector<Capture> captures;
  std::unordered_map<const Node*, std::vector<float>> values;  // current step
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
  int cursor = -1;  // node position inside the last launch (for `step`)
  bool running = false, quit = false;
  int total_steps_hint = 0;

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

  void setup(Executable& e, const Program& p, const TrainStep* t, Backend* be) {
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

    captures.clear();
    values.clear();
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

  void select_captures() {
    const size_t N = nodes.size();
    capture_launch.assign(launches.size(), opt.capture.empty());
    capture_leaf.assign(N, 0);
    for (size_t i = 0; i < N; ++i)
      capture_leaf[i] = opt.capture_leaves && opt.capture.empty() &&
                        (roles[i] == Role::Param || roles[i] == Role::Input);
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
          hit = true;
        }
      };
      if (c == "all") {
        std::fill(capture_launch.begin(), capture_launch.end(), 1);
        hit = true;
      }
      for (auto& L : launches)
        if (L.name == c || L.kernel_name == c || (L.name.rfind(c + "_", 0) == 0)) {
          capture_launch[L.index] = 1;
          hit = true;
        }
      if (is_node_number(c) && parse_node_number(c) <= std::numeric_limits<int>::max())
        mark_node(static_cast<int>(parse_node_number(c)));
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
        }
      }
      if (!hit)
        throw ValueError(fmt::format(
            "debug capture '{}' matches nothing: use a kernel name or its prefix ({}), a node number (n0..n{}), a "
            "parameter or input name, 'all', 'forward', 'backward', 'update' or 'gradients'",
            c, launches.empty() ? std::string("none") : launches.front().name + " ...", N ? N - 1 : 0));
    }
    // Parameter gradients are always recorded (gradient_norms, the gradient-flow plot).
    for (auto& [pname, g] : param_grad) {
      int k = num(g);
      if (k >= 0 && stored_by[k] >= 0) capture_launch[stored_by[k]] = 1;
    }
  }

  // ---------------------------------------------------------------------------------------------------------
  // Values and capture
  // ---------------------------------------------------------------------------------------------------------

  /// The value of `n` in the current step if known (launch read back, leaf recorded or readable), else nullptr.
  const std::vector<float>* value_of(const Node* n) {
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

  std::string step_dir() const { return fmt::format("step{:03}", step); }

  Capture& add_capture(const Node* n, int launch, const std::string& kernel, const std::vector<float>& v,
                       const std::string& file_stem) {
    Capture c;
    c.step = step;
    c.launch = launch;
    c.kernel = kernel;
    c.node = num(n);
    c.role = c.node >= 0 ? roles[c.node] : Role::Update;
    c.grad_of = c.node >= 0 ? grad_of[c.node] : "";
    c.stats = compute_stats(v.data(), n->shape);
    if (!opt.out_dir.empty() && opt.write_images) {
      image::RenderOptions ro = opt.render;
      if (ro.colormap == image::Colormap::Auto && c.role == Role::Backward) ro.colormap = image::Colormap::Diverging;
      image::RenderResult rr = image::render_tensor(v.data(), display_shape(n->shape), ro);
      c.png = step_dir() + "/" + file_safe(file_stem) + ".png";
      fs::create_directories(fs::path(opt.out_dir) / step_dir());
      image::write_png((fs::path(opt.out_dir) / c.png).string(), rr.image);
      c.note = rr.note;
    }
    captures.push_back(std::move(c));
    return captures.back();
  }

  void begin_step(const std::vector<Feed>& feeds) {
    ++step;
    done = 0;
    cursor = -1;
    values.clear();
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
      }
    }
  }

  void on_launch(const KernelEvent& ev) {
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
    bool need = capture_launch[li] || opt.check_numerics || dbg;
    if (need) {
      std::vector<float> v = ev.read();
      const std::vector<float>& stored = values[L.output] = std::move(v);
      if (capture_launch[li]) {
        int o = num(L.output);
        const char* suffix = o < 0 ? "value" : roles[o] == Role::Backward ? "grad" : roles[o] == Role::Update ? "update" : "value";
        add_capture(L.output, li, L.name, stored, L.name + "." + suffix);
      }
      if (opt.check_numerics) {
        TensorStats s = capture_launch[li] ? captures.back().stats : compute_stats(stored.data(), L.output->shape);
        if (s.nonfinite()) fail(L, s, stored);
      }
    }
    // A multi-output kernel wrote all its outputs in one draw; its events arrive one per output. The debugger
    // stops once, after the last one, when every output has been read back.
    if (dbg && li == last_of(L)) maybe_stop(launches[L.first]);
  }

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

  /// Re-evaluates the launch's nodes on the CPU reference from the stored inputs; returns the first node whose
  /// value is not finite, nullptr when all are finite; sets `ok` = false when inputs were unavailable.
  const Node* pinpoint(const Launch& L, bool& ok) {
    ok = false;
    std::unordered_map<const Node*, std::vector<double>> local, ext;
    std::unordered_set<const Node*> inside(L.nodes.begin(), L.nodes.end());
    // Of a multi-output kernel, only the nodes this output depends on (another output's chain may go non-finite
    // too, but it is not the one that failed).
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
    try {
      for (const Node* n : L.nodes) {
        if (!needed.count(n)) continue;
        std::vector<const std::vector<double>*> ins;
        for (auto& i : n->inputs) {
          const Node* p = i.get();
          if (auto it = local.find(p); it != local.end()) {
            ins.push_back(&it->second);
            continue;
          }
          if (inside.count(p)) return nullptr;
          auto e = ext.find(p);
          if (e == ext.end()) {
            const std::vector<float>* v = value_of(p);
            if (!v) return nullptr;
            e = ext.emplace(p, std::vector<double>(v->begin(), v->end())).first;
          }
          ins.push_back(&e->second);
        }
        std::vector<double> r = cpu::eval_node(*n, ins);
        for (double& x : r) x = static_cast<float>(x);
        bool bad = std::any_of(r.begin(), r.end(), [](double x) { return !std::isfinite(x); });
        local.emplace(n, std::move(r));
        if (bad) {
          ok = true;
          return n;
        }
      }
    } catch (const Error&) {
      return nullptr;
    }
    ok = true;
    return nullptr;
  }

  [[noreturn]] void fail(const Launch& L, const TensorStats& s, const std::vector<float>& v) {
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
    msg += fmt::format("  user source lines: {}\n", sources.empty() ? std::string("<unknown>") : fmt::format("{}", fmt::join(sources, ", ")));
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

  // ---------------------------------------------------------------------------------------------------------
  // Debugger
  // ---------------------------------------------------------------------------------------------------------

  std::ostream& o() { return *out; }

  void print_launch(const Launch& L, bool walk) {
    if (L.outputs > 1) {
      print_kernel(launches[L.first], walk);
      return;
    }
    o() << fmt::format("[step {}] launch {} of {}: {}", step, L.index, launches.size(), L.name);
    if (L.nodes.size() == 1 && L.nodes[0] == L.output) {
      o() << fmt::format(" computed {}\n", describe(L.output, 60));
      if (auto it = values.find(L.output); it != values.end())
        o() << "  " << compute_stats(it->second.data(), L.output->shape).str() << "\n";
      cursor = -1;
      return;
    }
    o() << fmt::format(" (fused: {} nodes, stores {})\n", L.nodes.size(), nname(L.output));
    if (walk) {
      cursor = 0;
      print_cursor(L);
      return;
    }
    for (const Node* n : L.nodes) o() << "  " << describe(n, 60) << "\n";
    if (auto it = values.find(L.output); it != values.end())
      o() << fmt::format("  {}: {}\n", nname(L.output), compute_stats(it->second.data(), L.output->shape).str());
    cursor = -1;
  }

  /// A multi-output kernel (F = its first launch): one draw that stored every output listed.
  void print_kernel(const Launch& F, bool walk) {
    std::vector<std::string> outs;
    for (const Node* n : kernel_outputs(F)) outs.push_back(nname(n));
    o() << fmt::format("[step {}] launches {}-{} of {}: {} (one draw, {} outputs; fused: {} nodes, stores {})\n", step,
                       F.first, last_of(F), launches.size(), F.kernel_name, F.outputs, F.nodes.size(),
                       fmt::join(outs, ", "));
    if (walk) {
      cursor = 0;
      print_cursor(F);
      return;
    }
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
    cursor = -1;
  }

  void print_cursor(const Launch& L) {
    const Node* n = L.nodes[cursor];
    o() << fmt::format("  node {} of {}: {}", cursor + 1, L.nodes.size(), describe(n, 60));
    const int k = num(n);
    if (L.outputs > 1 && k >= 0 && stored_by[k] >= L.first && stored_by[k] <= last_of(L)) {
      const Launch& S = launches[stored_by[k]];
      o() << fmt::format(" [stored: output {} of {}, {}]\n", S.output_index, S.outputs, S.name);
      if (auto it = values.find(n); it != values.end())
        o() << "  " << compute_stats(it->second.data(), n->shape).str() << "\n";
    } else if (n == L.output) {
      o() << " [stored]\n";
      if (auto it = values.find(n); it != values.end())
        o() << "  " << compute_stats(it->second.data(), n->shape).str() << "\n";
    } else {
      o() << " [inside the kernel: not stored]\n";
    }
  }

  /// After the last output of L's kernel (L = its first launch; breakpoints are kept as first launches).
  void maybe_stop(const Launch& L) {
    bool bp = std::find(breakpoints.begin(), breakpoints.end(), L.first) != breakpoints.end();
    if (mode == Mode::Run && !bp) return;
    if (bp) {
      int k = static_cast<int>(std::find(breakpoints.begin(), breakpoints.end(), L.first) - breakpoints.begin());
      o() << fmt::format("breakpoint {} hit\n", k + 1);
    }
    print_launch(L, mode == Mode::Step);
    interact();
  }

  static const char* help_text() {
    return "commands:\n"
           "  next (n)               run the next kernel, then stop\n"
           "  step (s)               one graph node: walk the nodes of a fused kernel, then run the next kernel\n"
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

  std::string launch_names_hint() const {
    if (launches.empty()) return "none";
    std::string s = launches.front().name;
    if (launches.size() > 1) s += " ... " + launches.back().name;
    return s;
  }

  /// Resolves a tensor name; on failure returns nullptr and sets `why`.
  const Node* resolve_tensor(const std::string& a, std::string& why) const {
    if (is_node_number(a)) {
      long k = parse_node_number(a);
      if (k >= 0 && k < static_cast<long>(nodes.size())) return nodes[k].get();
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
  std::vector<const Node*> resolve_tensors(const std::string& a, std::string& why) const {
    const Node* n = resolve_tensor(a, why);
    if (!n) return {};
    for (auto& L : launches)
      if (L.name == a) return {n};
    if (named.count(a)) return {n};
    if (auto [f, l] = kernel_range(a); f >= 0) return kernel_outputs(launches[f]);
    return {n};
  }

  int resolve_launch(const std::string& a, std::string& why) const {
    for (auto& L : launches)
      if (L.name == a) return L.index;
    if (auto [f, l] = kernel_range(a); f >= 0) return f;
    for (auto& L : launches)
      if (L.name.rfind(a + "_", 0) == 0) return L.index;
    if (is_node_number(a)) {
      long k = parse_node_number(a);
      if (k < 0 || k >= static_cast<long>(nodes.size())) {
        why = fmt::format("no node {} (nodes are n0..n{})", a, nodes.size() - 1);
        return -1;
      }
      if (stored_by[k] >= 0) return stored_by[k];
      if (computed_in[k] >= 0) return computed_in[k];
      why = fmt::format("n{} {} is a leaf ({}): no kernel computes it", k, nodes[k]->label(), role_name(roles[k]));
      return -1;
    }
    why = fmt::format("no kernel or node '{}': use a kernel name or its prefix ({}; `list`) or a node number "
                      "(n0..n{})", a, launch_names_hint(), nodes.size() - 1);
    return -1;
  }

  void cmd_print(const Node* n, const std::string& header) {
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
      where = fmt::format("{}, computed inside {}", role_name(roles[k]), launches[computed_in[k]].kernel_name);
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
      } else if (stored_by[k] < 0) {
        o() << fmt::format("  not stored: {} computes it in registers only (fused); rerun unfused (--unfused) to "
                           "see every node\n", computed_in[k] >= 0 ? launches[computed_in[k]].kernel_name : "no kernel");
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
  

  void cmd_show(const Node* n) {
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
    std::string path = (fs::path(opt.out_dir) / "repl" / fmt::format("step{:03}_n{:03}.png", std::max(step, 0), k)).string();
    image::write_png(path, rr.image);
    o() << fmt::format("wrote {} ({}x{}, colormap {}, range {} .. {}{}{})\n", path, rr.image.width, rr.image.height,
                       image::to_string(rr.colormap), fnum(rr.lo), fnum(rr.hi), rr.note.empty() ? "" : "; ", rr.note);
  }

  void cmd_grad(const std::string& a) {
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
    if ((a.size() > 1 && a[0] == 'n' && all_digits(a.substr(1))) || all_digits(a)) {
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

  void ensure_shaders() {
    if (shaders_done) return;
    const Plan* plan = exe ? exe->plan() : nullptr;
    if (!plan) {
      ScheduleOptions so;
      so.unfused = true;
      ref_plan = schedule(program, so);
      plan = &*ref_plan;
    }
    shader_info.clear();
    shaders.clear();
    for (const Kernel& k : plan->kernels) {
      std::string src = emit_glsl450(*plan, k, ShaderStage::Fragment);
      const CompiledShader& c = cache.get_or_compile(k.name, src, ShaderStage::Fragment);
      // SPIRV-Cross drops comments: carry the GLSL 4.50 header (kernel, output, nodes with source lines) over,
      // right after the #version line so the file stays valid GLSL ES.
      std::string header, line, gles = c.gles;
      std::istringstream ss(src);
      std::getline(ss, line);
      while (std::getline(ss, line) && line.rfind("//", 0) == 0) header += line + "\n";
      size_t nl = gles.find('\n');
      if (nl != std::string::npos) gles.insert(nl + 1, header);
      ShaderInfo si{k.name, {}, gles};
      for (auto& n : k.nodes) si.nodes.push_back(num(n.get()));
      shader_info.push_back(si);
      shaders.emplace_back(k.name, gles);
    }
    shaders_done = true;
  }

  void cmd_shader(const std::string& arg) {
    ensure_shaders();
    std::string a = arg;
    for (auto& L : launches)  // an entry of a multi-output kernel ("k05_....t5_2"): the kernel's source
      if (L.name == arg && exe && exe->plan()) a = L.kernel_name;
    const ShaderInfo* hit = nullptr;
    for (auto& s : shader_info)
      if (s.name == a) hit = &s;
    for (auto& s : shader_info)
      if (!hit && s.name.rfind(a + "_", 0) == 0) hit = &s;
    if (!hit && is_node_number(a)) {
      long k = parse_node_number(a);
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

  void cmd_list() {
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

  void cmd_break(const std::string& a) {
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
  void interact() {
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
          if (!running) {
            o() << fmt::format("the run has finished ({} steps); inspect with print/show/grad/shader, `quit` to exit\n",
                               step + 1);
            continue;
          }
          if (cmd == "step" || cmd == "s") {
            if (cursor >= 0 && done > 0) {
              const Launch& L = launches[done - 1];
              if (cursor + 1 < static_cast<int>(L.nodes.size())) {
                ++cursor;
                print_cursor(L);
                continue;
              }
            }
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

  // ---------------------------------------------------------------------------------------------------------
  // Gradient norms, report
  // ---------------------------------------------------------------------------------------------------------

  const Capture* find(int node, int st) const {
    for (auto it = captures.rbegin(); it != captures.rend(); ++it)
      if (it->node == node && (st < 0 || it->step == st)) return &*it;
    return nullptr;
  }

  std::vector<GradientNorms> gradient_norms() const {
    std::vector<GradientNorms> r;
    int steps = step + 1;
    for (auto& [pname, g] : param_grad) {
      GradientNorms gn{pname, std::vector<double>(std::max(steps, 0), std::numeric_limits<double>::quiet_NaN())};
      int k = num(g);
      for (int s = 0; s < steps; ++s) {
        if (k >= 0 && nodes[k]->is_leaf() && nodes[k]->data) {
          gn.l2[s] = compute_stats(nodes[k]->data->data(), nodes[k]->shape).l2;
        } else if (const Capture* c = k >= 0 ? find(k, s) : nullptr) {
          gn.l2[s] = c->stats.nonfinite() ? std::numeric_limits<double>::quiet_NaN() : c->stats.l2;
        }
      }
      r.push_back(std::move(gn));
    }
    return r;
  }

  RGBImage plot(int w, int h) const {
    std::vector<Series> ss;
    for (auto& g : gradient_norms()) ss.push_back({g.param, g.l2, std::nullopt});
    PlotOptions po;
    po.width = w;
    po.height = h;
    po.title = "gradient L2 norm per parameter";
    po.y_label = "L2 norm of d(loss)/d(param)";
    return plot_series(ss, po);
  }

  std::string write_report(const ReportInfo& info);
};

// ---- report ------------------------------------------------------------------------------------------------

std::string Session::Impl::write_report(const ReportInfo& info) {
  if (opt.out_dir.empty()) throw ValueError("debug::Session::write_report: Options::out_dir is empty");
  const fs::path dir(opt.out_dir);
  fs::create_directories(dir / "shaders");
  ensure_shaders();
  for (auto& s : shader_info) io::write_file_atomic((dir / "shaders" / (s.name + ".frag")).string(), s.source);
  const bool have_plot = !param_grad.empty() && step >= 0;
  if (have_plot) image::write_png((dir / "gradient_flow.png").string(), plot(760, 440));

  // stats.json
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
    j["captures"].push_back(cj);
  }
  j["losses"] = nlohmann::json::array();
  for (double l : losses) j["losses"].push_back(jnum(l));
  for (auto& g : gradient_norms()) {
    nlohmann::json a = nlohmann::json::array();
    for (double v : g.l2) a.push_back(jnum(v));
    j["gradient_norms"][g.param] = a;
  }
  if (!failure.empty()) j["failure"] = {{"message", failure}, {"step", failure_step}, {"launch", failure_launch}};
  io::write_file_atomic((dir / "stats.json").string(), j.dump(1) + "\n");

  // report.html
  const int S = step;
  std::string h;
  auto add = [&](const std::string& s) { h += s; };
  add("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
  add("<link rel=\"icon\" href=\"data:,\">\n");
  add(fmt::format("<title>{}</title>\n", html_escape(info.title)));
  add(R"(<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1600px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#f3f3f3}code,pre{font-family:ui-monospace,monospace;font-size:12px}
pre{background:#f8f8f8;border:1px solid #e3e3e3;padding:8px;overflow-x:auto}
img.t{max-width:180px;max-height:180px;image-rendering:pixelated;border:1px solid #ccc;display:block}
.st{font-family:ui-monospace,monospace;font-size:11px;color:#444;white-space:nowrap}
.bad{color:#b00;font-weight:bold}.fail{border:2px solid #b00;background:#fff0f0;padding:6px}
.muted{color:#888}.sw{display:inline-block;width:14px;height:14px;border:1px solid #999;vertical-align:middle}
tr.failrow{background:#ffe0e0}
</style>
</head>
<body>
)");
  add(fmt::format("<h1>{}</h1>\n", html_escape(info.title)));
  add("<table>\n");
  for (auto& [k, v] : info.facts) add(fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", html_escape(k), html_escape(v)));
  add(fmt::format("<tr><th>steps</th><td>{}{}</td></tr>\n<tr><th>launches per step</th><td>{}{}</td></tr>\n", S + 1,
                  failure.empty() ? "" : fmt::format(" (step {} stopped at the numerics failure)", failure_step),
                  launches.size(), html_escape(launch_count_note())));
  add(fmt::format("<tr><th>graph nodes</th><td>{}</td></tr>\n</table>\n", nodes.size()));
  if (!failure.empty())
    add(fmt::format("<h2>Numerics failure</h2>\n<div class=\"fail\"><pre>{}</pre></div>\n", html_escape(failure)));

  if (!losses.empty()) {
    add("<h2>Loss</h2>\n<table><tr><th>step</th>");
    for (size_t s = 0; s < losses.size(); ++s) add(fmt::format("<td>{}</td>", s));
    add("</tr><tr><th>loss</th>");
    for (double l : losses) add(fmt::format("<td>{}</td>", fnum(l)));
    add("</tr></table>\n");
  }

  if (have_plot) {
    add("<h2>Gradient flow</h2>\n<p>L2 norm of each parameter's gradient d(loss)/d(param) at every step. Layers whose "
        "gradients are orders of magnitude smaller than their neighbours' learn slowly (vanishing gradients); "
        "growing norms warn of divergence.</p>\n");
    add("<img src=\"gradient_flow.png\" alt=\"gradient flow plot\" width=\"760\" height=\"440\">\n<table><tr><th>parameter</th>");
    auto norms = gradient_norms();
    for (int s = 0; s <= S; ++s) add(fmt::format("<th>step {}</th>", s));
    add("</tr>\n");
    for (auto& g : norms) {
      add(fmt::format("<tr><td><code>{}</code></td>", html_escape(g.param)));
      for (double v : g.l2) add(fmt::format("<td>{}</td>", fnum(v)));
      add("</tr>\n");
    }
    add("</table>\n");
  }

  auto cell = [&](int k, const std::string& prefix = std::string()) -> std::string {
    if (k < 0) return "<td class=\"muted\">&mdash;</td>";
    const Capture* c = find(k, S);
    if (!c) {
      const Node* n = nodes[k].get();
      if (!n->is_leaf() && stored_by[k] < 0 && computed_in[k] >= 0)
        return fmt::format("<td class=\"muted\">{}fused in <code>{}</code>, not stored (run unfused)</td>", prefix,
                           launches[computed_in[k]].kernel_name);
      return fmt::format("<td class=\"muted\">{}not captured</td>", prefix);
    }
    std::string r = "<td>" + prefix;
    if (!c->png.empty())
      r += fmt::format("<a href=\"{0}\"><img class=\"t\" src=\"{0}\" alt=\"n{1}\" title=\"n{1} step {2}\"></a>",
                       html_escape(c->png), k, c->step);
    const TensorStats& s = c->stats;
    r += fmt::format("<div class=\"st\">min {} max {}<br>mean {} std {}<br>l2 {}</div>", fnum(s.min), fnum(s.max),
                     fnum(s.mean), fnum(s.std), fnum(s.l2));
    if (s.nonfinite())
      r += fmt::format("<div class=\"st bad\">NaN {} +Inf {} -Inf {}</div>", s.nan, s.posinf, s.neginf);
    if (!c->note.empty()) r += fmt::format("<div class=\"st muted\">{}</div>", html_escape(c->note));
    return r + "</td>";
  };
  auto kernel_cell = [&](int k) -> std::string {
    if (nodes[k]->is_leaf()) return "<td class=\"muted\">leaf</td>";
    if (stored_by[k] >= 0) {
      const Launch& L = launches[stored_by[k]];
      if (L.outputs == 1) return fmt::format("<td><code>{}</code></td>", L.name);
      return fmt::format("<td><code>{}</code><div class=\"st muted\">output {} of {}</div></td>", L.name,
                         L.output_index, L.outputs);
    }
    if (computed_in[k] >= 0)
      return fmt::format("<td class=\"muted\">in <code>{}</code></td>", launches[computed_in[k]].kernel_name);
    return "<td class=\"muted\">&mdash;</td>";
  };
  auto head_cells = [&](int k) {
    const Node* n = nodes[k].get();
    bool failed = failure_step == S && failure_launch >= 0 && stored_by[k] == failure_launch;
    return fmt::format("<tr{}><td>n{}</td><td><code title=\"{}\">{}</code></td><td>{}</td><td>{}</td>",
                       failed ? " class=\"failrow\"" : "", k, html_escape(n->label()),
                       html_escape(truncate(n->label(), 60)), shape_str(n->shape),
                       n->loc.known() ? html_escape(n->loc.str()) : "");
  };
  auto grad_node = [&](int k) -> int {
    if (!ts) return -1;
    auto it = ts->adjoint.find(nodes[k].get());
    return it == ts->adjoint.end() ? -1 : num(it->second.get());
  };

  add(fmt::format("<h2>Forward graph (step {})</h2>\n", S));
  add("<p>Every node that computes the loss, in evaluation order, with its value and (for nodes that depend on a "
      "parameter) its gradient d(loss)/d(node). Signed values and gradients use the diverging map "
      "(<span class=\"sw\" style=\"background:#0571b0\"></span> negative, <span class=\"sw\" "
      "style=\"background:#fff\"></span> zero, <span class=\"sw\" style=\"background:#ca0020\"></span> positive); "
      "non-negative values use viridis; <span class=\"sw\" style=\"background:#f0f\"></span> NaN, <span class=\"sw\" "
      "style=\"background:#0f0\"></span> +Inf, <span class=\"sw\" style=\"background:#0ff\"></span> -Inf "
      "(docs/COLORMAPS.md). The bar under each image spans the colour range.</p>\n");
  add("<table>\n<tr><th>#</th><th>node</th><th>shape</th><th>source</th><th>kernel</th><th>value</th><th>gradient</th></tr>\n");
  for (size_t i = 0; i < nodes.size(); ++i) {
    Role r = roles[i];
    if (r != Role::Forward && r != Role::Param && r != Role::Input) continue;
    int k = static_cast<int>(i);
    int g = grad_node(k);
    add(head_cells(k) + kernel_cell(k) + cell(k));
    add(g >= 0 ? cell(g, fmt::format("<div class=\"st\">n{}</div>", g)) : "<td class=\"muted\">&mdash;</td>");
    add("</tr>\n");
  }
  add("</table>\n");

  auto section = [&](Role role, const std::string& title, const std::string& blurb, bool with_grad_of) {
    bool any = false;
    for (Role r : roles) any |= r == role;
    if (!any) return;
    add(fmt::format("<h2>{} (step {})</h2>\n<p>{}</p>\n<table>\n<tr><th>#</th><th>node</th><th>shape</th><th>source</th>"
                    "{}<th>kernel</th><th>value</th></tr>\n",
                    title, S, blurb, with_grad_of ? "<th>gradient of</th>" : ""));
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (roles[i] != role) continue;
      int k = static_cast<int>(i);
      add(head_cells(k));
      if (with_grad_of) add(fmt::format("<td>{}</td>", html_escape(grad_of[k])));
      add(kernel_cell(k) + cell(k) + "</tr>\n");
    }
    add("</table>\n");
  };
  section(Role::Backward, "Backward graph",
          "Nodes appended by reverse-mode autodiff (one VJP rule per op); source lines name the forward line "
          "they differentiate.", true);
  section(Role::Update, "Updates", "Optimizer nodes: new parameter values and optimizer state.", false);

  add("<h2>Kernels</h2>\n");
  add(exe && exe->plan()
          ? "<p>The generated GLSL ES 3.00 fragment shader of every launch, in order.</p>\n"
          : "<p>This run used the CPU backend; these are the GLSL ES 3.00 fragment shaders the GLES backend runs for "
            "the same program (unfused plan).</p>\n");
  for (auto& s : shader_info) {
    std::vector<std::string> ns, outs;
    for (int k : s.nodes) ns.push_back(fmt::format("n{}", k));
    if (exe && exe->plan())
      for (auto& L : launches)
        if (L.kernel_name == s.name && L.outputs > 1)
          outs.push_back(fmt::format("{} = n{}", L.output_index, num(L.output)));
    add(fmt::format("<details><summary><code>{}</code> &mdash; {}{}</summary>\n<pre>{}</pre>\n</details>\n",
                    html_escape(s.name), html_escape(fmt::format("{}", fmt::join(ns, ", "))),
                    outs.empty() ? std::string()
                                 : html_escape(fmt::format("; render targets {}", fmt::join(outs, ", "))),
                    html_escape(s.source)));
  }
  add("<p class=\"muted\">Written by shadergrad debug mode. Every image is a file next to this page; stats.json holds "
      "every number shown here for every step.</p>\n</body>\n</html>\n");
  std::string path = (dir / "report.html").string();
  io::write_file_atomic(path, h);
  return path;
}

// ---- Session forwarding ----------------------------------------------------------------------------------------

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
RGBImage Session::gradient_flow_plot(int width, int height) const { return impl_->plot(width, height); }
std::string Session::write_report(const ReportInfo& info) { return impl_->write_report(info); }


// =============================================================================================================
// run_debug: `shadergrad debug`
// =============================================================================================================

RunResult run_debug(const RunConfig& cfg, std::istream& in, std::ostream& out) {
  if (cfg.out_dir.empty()) throw ValueError("debug: an output directory is required (--out DIR)");
  if (cfg.steps < 1) throw ValueError(fmt::format("debug: --steps must be >= 1 (got {})", cfg.steps));
  if (cfg.batch < 1) throw ValueError(fmt::format("debug: --batch must be >= 1 (got {})", cfg.batch));
  if (!(cfg.lr > 0)) throw ValueError(fmt::format("debug: --lr must be > 0 (got {})", cfg.lr));
  std::string dataset = cfg.dataset.empty() ? (cfg.model == "mlp" ? "fashion-mnist" : "digits") : cfg.dataset;
  std::unique_ptr<Optimizer> opt;
  if (cfg.optimizer == "adam")
    opt = make_adam({.lr = cfg.lr});
  else if (cfg.optimizer == "sgd")
    opt = make_sgd({.lr = cfg.lr});
  else if (cfg.optimizer == "momentum")
    opt = make_sgd({.lr = cfg.lr, .momentum = 0.9});
  else
    throw ValueError(fmt::format("debug: unknown optimizer '{}' (choose sgd, momentum or adam)", cfg.optimizer));
  std::ifstream cmd_file;
  std::istream* cmds = &in;
  if (cfg.step && !cfg.commands.empty()) {
    cmd_file.open(cfg.commands);
    if (!cmd_file) throw IOError(fmt::format("debug: cannot read the commands file '{}'", cfg.commands));
    cmds = &cmd_file;
  }

  data::Dataset train = train::load_split(dataset).first;
  data::BatchIterator it(train, cfg.batch, /*shuffle=*/true, cfg.seed, /*drop_last=*/true);
  if (it.batches_per_epoch() < 1)
    throw ValueError(fmt::format("debug: the {} training split has {} samples, fewer than one batch of {}", dataset,
                                 train.n, cfg.batch));
  BackendOptions bo;
  bo.kind = cfg.backend;
  bo.unfused = cfg.unfused;
  BackendChoice choice = make_backend(bo);
  Backend& be = *choice.backend;
  if (!choice.note.empty()) out << choice.note << "\n";

  nn::Rng rng(cfg.seed);
  auto model = nn::make_model(cfg.model, train.c, train.h, train.w, train.num_classes);
  model->build(rng);
  Tensor x = input("x", {cfg.batch, train.c, train.h, train.w});
  Tensor y = input("labels", {cfg.batch}, DType::i32);
  Tensor loss = cross_entropy((*model)(x), y);
  TrainStep ts = make_train_step(loss, model->named_parameters(), *opt);
  std::unique_ptr<Executable> exe = be.compile(ts.program);

  Options so;
  so.out_dir = cfg.out_dir;
  so.capture = cfg.capture;
  so.check_numerics = cfg.check_numerics;
  Session session(so);
  session.attach(*exe, ts, &be);
  ReportInfo info;
  info.title = fmt::format("shadergrad debug: {} on {}", cfg.model, dataset);
  info.facts = {{"model", model->describe()},
                {"parameters", std::to_string(model->num_parameters())},
                {"dataset", fmt::format("{} ({} training samples), batch {}", dataset, train.n, cfg.batch)},
                {"optimizer", opt->describe()},
                {"backend", fmt::format("{} ({})", be.name(), be.device())},
                {"plan", cfg.unfused ? "unfused (one kernel per graph node)" : "fused"},
                {"seed", std::to_string(cfg.seed)}};
  if (cfg.step) {
    DebuggerOptions d;
    d.echo = cfg.echo;
    session.set_debugger(*cmds, out, d);
  } else {
    // Launches as the session counts them (one per stored value); kernels (draws) too when they differ.
    const size_t entries = session.launches().size();
    const int kernels = exe->kernels_per_step();
    out << fmt::format("shadergrad debug: {} on {} ({} backend, {} launches per step{}{}), {} -> {}\n", cfg.model,
                       dataset, be.name(), entries,
                       exe->plan() && static_cast<size_t>(kernels) != entries
                           ? fmt::format(" from {} kernels", kernels)
                           : std::string(),
                       cfg.unfused ? ", unfused" : "", cfg.steps == 1 ? "1 step" : fmt::format("{} steps", cfg.steps),
                       cfg.out_dir);
  }

  RunResult r;
  data::Batch b;
  int64_t epoch = 0;
  try {
    for (int64_t s = 0; s < cfg.steps; ++s) {
      if (!it.next(b)) {
        it.reset(++epoch);
        it.next(b);
      }
      auto outs = session.run({{"x", &b.images}, {"labels", &b.labels}});
      if (session.quit_requested()) {
        r.quit = true;
        break;
      }
      r.losses.push_back(outs[0][0]);
      ++r.steps;
      if (!cfg.step) out << fmt::format("step {}: loss {:.6g}\n", s, outs[0][0]);
    }
  } catch (const NumericsError&) {
    r.report = session.write_report(info);
    out << fmt::format("wrote {} (up to the failing launch)\n", r.report);
    throw;
  }
  if (cfg.step && !r.quit) {
    session.debugger_finish();
    r.quit = session.quit_requested();
  }
  r.report = session.write_report(info);
  out << fmt::format("wrote {} ({} captures, gradient_flow.png, stats.json, shaders/)\n", r.report,
                     session.captures().size());
  return r;
}

}  // namespace sg::debug
