// Debug mode: line plots (the gradient-flow picture) drawn on the stdlib's image::Canvas. See sg/debug.h.
#include <algorithm>
#include <cmath>
#include <limits>

#include "debug_internal.h"

namespace sg::debug {

using image::RGB;
using image::RGBImage;

namespace {

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
  image::Canvas cv(opt.width, opt.height, kWhite);
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
  for (auto& s : series) legend_w = std::max(legend_w, image::text_width(s.name, 1));
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
    cv.text(left - 8 - image::text_width(s, 1), y - 3, s, kAxisText);
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
      cv.text(X - image::text_width(s, 1) / 2, top + ph + 8, s, kAxisText);
    }
  }
  // Axes box.
  cv.hline(left, left + pw - 1, top, kBlack);
  cv.hline(left, left + pw - 1, top + ph - 1, kBlack);
  cv.vline(left, top, top + ph - 1, kBlack);
  cv.vline(left + pw - 1, top, top + ph - 1, kBlack);
  // Labels.
  if (!opt.title.empty()) cv.text(left + (pw - image::text_width(opt.title, 2)) / 2, 10, opt.title, kBlack, 2);
  if (!opt.x_label.empty())
    cv.text(left + (pw - image::text_width(opt.x_label, 1)) / 2, top + ph + 24, opt.x_label, kBlack);
  std::string yl = opt.y_label + (log_y ? (opt.y_label.empty() ? "LOG SCALE" : " (LOG SCALE)") : "");
  if (!yl.empty()) cv.text_up(6, top + (ph + image::text_width(yl, 1)) / 2, yl, kBlack);
  if (!any) {
    std::string s = "NO FINITE VALUES";
    cv.text(left + (pw - image::text_width(s, 1)) / 2, top + ph / 2 - 3, s, kAxisText);
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
  return cv.take();
}

}  // namespace sg::debug
