// Random numbers inside kernels (issue 36): sg::random_uniform, bernoulli and dropout on Philox-4x32-10
// (sg/philox.h). The op-case list "random" (tests/op_cases.h) runs them forward and backward on gles, gles-compute,
// vulkan, WebGPU (Dawn) and WebGL2 (Chromium) against the CPU reference, bit for bit; the edge list
// (tests/edge_cases.h) holds dropout of NaN, infinities and signed zeros. Here:
//  - Philox-4x32-10 against Random123's known-answer vectors, and random_uniform against an independent Python
//    implementation of the same counter/key layout (tests/golden/random.json, written by tests/golden/gen_golden.py)
//    on cpu, gles, gles-compute and vulkan;
//  - one compiled program with a State step counter draws a fresh stream every step, the same bits on every native
//    backend; other steps, streams and seeds give other values; streams are taken per call;
//  - uniformity: a chi-square over 256 bins of 2^20 values, mean, variance, every bit's frequency and correlations
//    (neighbouring elements, consecutive steps, two streams), on the CPU reference and on gles;
//  - dropout: its expectation (mean of dropout(ones), fraction of zeros within binomial bounds) on cpu and gles;
//    torch's scale 1 / (1 - p), NaN/inf/-0 semantics, p = 0, p = 1 and eval (random.json); the backward mask equals
//    the forward mask on cpu, gles, gles-compute and vulkan; bernoulli;
//  - errors name the op and the user's line;
//  - nn::Dropout: a compiled train step draws a new mask every run, its step counter incremented on the device by
//    the program (Node::effects), equal on the four native backends; eval is the identity; torch's repr.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "golden_util.h"
#include "sg/autodiff.h"
#include "sg/backend.h"
#include "sg/nn.h"
#include "sg/philox.h"
#include "sg/schedule.h"
#include "vulkan_test_util.h"

using namespace sg;
using Catch::Matchers::Contains;

namespace {

constexpr auto& kNative = sg::testing::kNativeBackends;
using sg::testing::native_backend;

void expect_clean(const std::string& kind, Backend& be) {
  if (kind == "vulkan") sg::testing::expect_no_validation_messages(vulkan_device(be));
}

/// The first element where a and b differ as bits (-1: none).
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  return -1;
}

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / static_cast<double>(v.size());
}

/// Pearson's correlation of a and b.
double correlation(const std::vector<float>& a, const std::vector<float>& b) {
  const double ma = mean_of(a), mb = mean_of(b);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

/// Uniformity of values that should be i.i.d. uniform on the grid {k 2^-24}: every value on the grid in [0, 1), a
/// chi-square over 256 equal bins within 5 standard deviations of its 255 degrees of freedom, the mean and variance
/// within 5 standard errors of 1/2 - 2^-25 and (1 - 2^-48) / 12, every one of the 24 bits set with frequency 1/2
/// within 5 standard errors, and neighbouring elements uncorrelated (|r| < 5 / sqrt(n)).
void expect_uniform(const std::vector<float>& u, const std::string& what) {
  INFO(what << ": " << u.size() << " values");
  const double n = static_cast<double>(u.size());
  std::vector<double> bins(256, 0.0), bits(24, 0.0);
  double s = 0, s2 = 0;
  bool on_grid = true;
  for (float x : u) {
    const double k = static_cast<double>(x) * 16777216.0;
    on_grid = on_grid && x >= 0.f && x < 1.f && k == std::floor(k);
    const uint32_t m = static_cast<uint32_t>(k);
    bins[m >> 16] += 1;
    for (int b = 0; b < 24; ++b) bits[b] += (m >> b) & 1u;
    s += x;
    s2 += static_cast<double>(x) * x;
  }
  CHECK(on_grid);
  double chi2 = 0;
  for (double c : bins) chi2 += (c - n / 256) * (c - n / 256) / (n / 256);
  const double df = 255, sd = std::sqrt(2 * df);
  INFO("chi-square " << chi2 << " (255 degrees of freedom: " << df << " +- " << sd << ")");
  CHECK(std::fabs(chi2 - df) < 5 * sd);
  const double mean = s / n, var = s2 / n - mean * mean;
  const double want_mean = 0.5 - std::ldexp(1.0, -25), want_var = (1 - std::ldexp(1.0, -48)) / 12;
  INFO("mean " << mean << " variance " << var);
  CHECK(std::fabs(mean - want_mean) < 5 * std::sqrt(want_var / n));
  CHECK(std::fabs(var - want_var) < 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));  // Var(u^2) = 1/5 - 1/9 = 4/45
  for (int b = 0; b < 24; ++b) {
    INFO("bit " << b << " set in " << bits[b] << " values");
    CHECK(std::fabs(bits[b] / n - 0.5) < 5 * 0.5 / std::sqrt(n));
  }
  const std::vector<float> head(u.begin(), u.end() - 1), tail(u.begin() + 1, u.end());
  const double r = correlation(head, tail);
  INFO("lag-1 correlation " << r);
  CHECK(std::fabs(r) < 5 / std::sqrt(n));
}

}  // namespace

TEST_CASE("random: Philox-4x32-10 gives Random123's known-answer vectors", "[random]") {
  // Random123 tests/kat_vectors (philox4x32 10): counter 0, key 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8
  static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0}) == PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  const golden::json kat = golden::load("random.json").at("kat");
  REQUIRE(kat.size() == 3);
  for (const auto& v : kat) {
    const PhiloxCounter c{v["counter"][0], v["counter"][1], v["counter"][2], v["counter"][3]};
    const PhiloxKey k{v["key"][0], v["key"][1]};
    const PhiloxCounter want{v["result"][0], v["result"][1], v["result"][2], v["result"][3]};
    INFO(fmt::format("counter {:08x} {:08x} {:08x} {:08x} key {:08x} {:08x}", c[0], c[1], c[2], c[3], k[0], k[1]));
    CHECK(philox4x32_10(c, k) == want);
  }
  // the layout: key (seed low, seed high), counter (index, 0, step, stream), top 24 bits of word 0
  const PhiloxCounter r = philox4x32_10({5, 0, 7, 3}, {0x9abcdef0u, 0x12345678u});
  CHECK(philox_uniform(0x123456789abcdef0ull, 3, 7, 5) == static_cast<float>(r[0] >> 8) / 16777216.f);
}

TEST_CASE("random_uniform equals an independent Philox implementation (random.json) on cpu, gles, gles-compute and "
          "vulkan", "[random][golden]") {
  const golden::json cases = golden::load("random.json").at("uniform");
  REQUIRE(cases.size() == 4);
  Program p;
  std::vector<std::vector<float>> want, steps;
  std::vector<Feed> feeds;
  steps.reserve(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const golden::json& c = cases[i];
    Shape shape;
    for (auto& d : c["shape"]) shape.push_back(d.get<int64_t>());
    const uint64_t seed = std::stoull(c["seed"].get<std::string>());
    const std::string name = fmt::format("step{}", i);
    Tensor step = input(name, {1});
    steps.push_back({c["step"].get<float>()});
    p.add_output(fmt::format("case {} seed {} step {} stream {}", i, seed, c["step"].get<uint32_t>(),
                             c["stream"].get<uint32_t>()),
                 random_uniform(shape, seed, step, c["stream"].get<uint32_t>()));
    want.push_back(c["values"].get<std::vector<float>>());
  }
  for (size_t i = 0; i < steps.size(); ++i) feeds.push_back({fmt::format("step{}", i), &steps[i]});
  for (const char* kind : kNative) {
    auto be = native_backend(kind);
    const auto got = be->compile(p)->run(feeds);
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("backend " << kind << ", " << p.output_names[i]);
      CHECK(first_difference(got[i], want[i]) == -1);
    }
    expect_clean(kind, *be);
  }
}

TEST_CASE("random_uniform: a State step counter draws a fresh stream every step of one compiled program, the same "
          "bits on cpu, gles, gles-compute and vulkan", "[random]") {
  Tensor step = state("step", {}, {0.f});
  Tensor x = input("x", {6, 11});
  Program p;
  p.add_output("u", random_uniform({6, 11}, 2024, step, 0));
  p.add_output("dropout(x)", dropout(x, 0.5, 2024, step));
  p.updates.push_back({step.node(), Tensor(step + 1.0).node()});
  const std::vector<float> xs(66, 1.5f);
  std::vector<std::vector<std::vector<float>>> cpu;  // per step: outputs
  for (const char* kind : kNative) {
    auto be = native_backend(kind);
    auto exe = be->compile(p);  // compiled once: the step is read by the kernels, never a constant of theirs
    for (int t = 0; t < 3; ++t) {
      INFO("backend " << kind << ", step " << t);
      const auto got = exe->run({{"x", &xs}});
      // the step counter's value t: the CPU reference's philox_uniform for it
      for (size_t j = 0; j < got[0].size(); ++j)
        if (got[0][j] != philox_uniform(2024, 0, static_cast<uint32_t>(t), static_cast<uint32_t>(j))) FAIL("element " << j);
      if (std::string(kind) == "cpu") {
        cpu.push_back(got);
        if (t > 0) CHECK(first_difference(cpu[t][0], cpu[t - 1][0]) == 0);  // a new stream each step
        if (t > 0) CHECK(cpu[t][1] != cpu[t - 1][1]);                        // a new dropout mask each step
      } else {
        CHECK(first_difference(got[0], cpu[t][0]) == -1);
        CHECK(first_difference(got[1], cpu[t][1]) == -1);
      }
    }
    expect_clean(kind, *be);
  }
}

TEST_CASE("random_uniform: other steps, streams and seeds give other values, the same ones the same, calls take "
          "streams in turn", "[random]") {
  auto values = [](uint64_t seed, float step, uint32_t stream) {
    Tensor s = constant({1}, {step});
    Program p;
    p.add_output("u", random_uniform({64, 64}, seed, s, stream));
    return make_cpu_backend()->compile(p)->run({})[0];
  };
  const std::vector<float> base = values(7, 3, 1);
  CHECK(values(7, 3, 1) == base);
  for (const auto& other : {values(7, 4, 1), values(7, 2, 1), values(7, 3, 2), values(8, 3, 1),
                            values(7ull | (1ull << 32), 3, 1)}) {
    size_t same = 0;
    for (size_t i = 0; i < base.size(); ++i) same += other[i] == base[i];
    CHECK(same <= 2);  // 4096 pairs of values on a grid of 2^24: equal ones are rare
  }
  // streams: each call without one takes the next of its seed's (dropout's in training too; eval takes none)
  const uint64_t seed = 0x5eed0123456789ull;
  const uint32_t first = peek_random_stream(seed);
  Tensor step = constant({}, {0.f});
  Tensor a = random_uniform({3}, seed, step), b = random_uniform({3}, seed, step);
  CHECK(a.node()->attrs.stream == first);
  CHECK(b.node()->attrs.stream == first + 1);
  Tensor x = constant({3}, {1.f, 2.f, 3.f});
  CHECK(dropout(x, 0.5, seed, step, false).node() == x.node());  // eval: x itself, no stream taken
  CHECK(peek_random_stream(seed) == first + 2);
  Tensor d = dropout(x, 0.5, seed, step);
  CHECK(peek_random_stream(seed) == first + 3);
  CHECK(dropout(x, 0.0, seed, step).node() == x.node());  // p = 0: x itself (a stream taken all the same)
  CHECK(peek_random_stream(seed) == first + 4);
  CHECK(random_uniform({3}, seed, step, 99).node()->attrs.stream == 99);  // an explicit stream takes none
  CHECK(peek_random_stream(seed) == first + 4);
  CHECK(a.node()->label() == fmt::format("random_uniform[seed {}, stream {}]", seed, first));
}

TEST_CASE("random_uniform: 2^20 values are uniform (chi-square, mean, variance, bits, correlations) on the CPU "
          "reference and on gles, bit for bit equal", "[random][uniformity]") {
  const int64_t n = int64_t{1} << 20;
  Tensor step = input("step", {});
  Program p;
  p.add_output("u", random_uniform({1024, 1024}, 0xC0FFEE, step, 5));
  p.add_output("u next step", random_uniform({1024, 1024}, 0xC0FFEE, Tensor(step + 1.0), 5));
  p.add_output("u other stream", random_uniform({1024, 1024}, 0xC0FFEE, step, 6));
  const std::vector<float> s = {41.f};
  const auto cpu = make_cpu_backend()->compile(p)->run({{"step", &s}});
  REQUIRE(static_cast<int64_t>(cpu[0].size()) == n);
  expect_uniform(cpu[0], "cpu");
  INFO("correlation with the next step " << correlation(cpu[0], cpu[1]) << ", with another stream "
                                         << correlation(cpu[0], cpu[2]));
  CHECK(std::fabs(correlation(cpu[0], cpu[1])) < 5 / std::sqrt(static_cast<double>(n)));
  CHECK(std::fabs(correlation(cpu[0], cpu[2])) < 5 / std::sqrt(static_cast<double>(n)));
  auto gles = native_backend("gles");
  const auto got = gles->compile(p)->run({{"step", &s}});
  expect_uniform(got[0], "gles");
  for (size_t i = 0; i < cpu.size(); ++i) {
    INFO(p.output_names[i]);
    CHECK(first_difference(got[i], cpu[i]) == -1);
  }
}

TEST_CASE("dropout: mean of dropout(ones) ~ 1 and the fraction of zeros ~ p within binomial bounds on cpu and gles",
          "[random][dropout]") {
  const int64_t n = int64_t{1} << 18;
  Tensor step = input("step", {1});
  Tensor ones = constant({512, 512}, std::vector<float>(n, 1.f));
  const std::vector<double> ps = {0.1, 0.5, 0.9};
  Program p;
  for (double pr : ps) p.add_output(fmt::format("p {}", pr), dropout(ones, pr, 99, step));
  const std::vector<float> s = {3.f};
  for (const char* kind : {"cpu", "gles"}) {
    const auto got = native_backend(kind)->compile(p)->run({{"step", &s}});
    for (size_t i = 0; i < ps.size(); ++i) {
      const double pr = ps[i], q = 1 - pr, scale = static_cast<float>(1.0f / static_cast<float>(q));
      double zeros = 0, sum = 0;
      bool values = true;
      for (float y : got[i]) {
        zeros += y == 0.f;
        sum += y;
        values = values && (y == 0.f || y == static_cast<float>(scale));
      }
      const double frac = zeros / static_cast<double>(n), mean = sum / static_cast<double>(n);
      const double sd = std::sqrt(pr * q / static_cast<double>(n));
      INFO("backend " << kind << ", p " << pr << ": fraction of zeros " << frac << ", mean " << mean);
      CHECK(values);
      CHECK(std::fabs(frac - pr) < 5 * sd);
      CHECK(std::fabs(mean - 1.0) < 5 * scale * sd);
    }
  }
}

TEST_CASE("dropout: the backward mask equals the forward mask on cpu, gles, gles-compute and vulkan",
          "[random][dropout]") {
  // y = dropout(x) and dx = d sum(y * r) / dx = r * m: where y is 0 so is dx, elsewhere both carry the same scale
  const Shape sh = {5, 9, 7};
  const int64_t n = numel(sh);
  std::vector<float> xs(n), rs(n);
  for (int64_t i = 0; i < n; ++i) xs[i] = 0.25f + static_cast<float>(i % 13), rs[i] = 1.f + static_cast<float>(i % 7);
  Tensor x = input("x", sh), r = input("r", sh), step = input("step", {});
  Tensor y = dropout(x, 0.35, 4242, step);
  Program p;
  p.add_output("y", y);
  p.add_output("dx", grad(sum(y * r), {x})[0]);
  const float scale = 1.0f / static_cast<float>(1.0 - 0.35);
  std::vector<float> cpu_y;
  for (const char* kind : kNative) {
    auto be = native_backend(kind);
    auto exe = be->compile(p);
    for (float t : {0.f, 1.f, 77.f}) {
      const std::vector<float> st = {t};
      const auto got = exe->run({{"x", &xs}, {"r", &rs}, {"step", &st}});
      int64_t bad = -1, dropped = 0;
      for (int64_t i = 0; i < n && bad < 0; ++i) {
        const bool kept = got[0][i] != 0.f;
        dropped += !kept;
        const bool ok = kept ? got[0][i] == xs[i] * scale && got[1][i] == rs[i] * scale : got[1][i] == 0.f;
        if (!ok) bad = i;
      }
      INFO("backend " << kind << ", step " << t << ": element " << bad << " y " << (bad >= 0 ? got[0][bad] : 0.f)
                      << " dx " << (bad >= 0 ? got[1][bad] : 0.f) << "; " << dropped << " of " << n << " dropped");
      CHECK(bad == -1);
      CHECK(dropped > 0);
      CHECK(dropped < n);
      if (t == 77.f && std::string(kind) == "cpu") cpu_y = got[0];
      if (t == 77.f && std::string(kind) != "cpu") CHECK(first_difference(got[0], cpu_y) == -1);
    }
    if (std::string(kind) != "cpu") {
      const Plan* plan = exe->plan();
      REQUIRE(plan != nullptr);
      for (const Value& v : plan->values) CHECK(v.node->op != Op::RandomUniform);  // regenerated, never stored
    }
    expect_clean(kind, *be);
  }
}

TEST_CASE("dropout follows torch: the scale 1 / (1 - p), NaN, infinities and signed zeros kept and dropped, p = 1, "
          "p = 0 and eval (random.json)", "[random][dropout][golden]") {
  const golden::json j = golden::load("random.json");
  Tensor step = constant({}, {5.f});
  Tensor ones = constant({64}, std::vector<float>(64, 1.f));
  Program p;
  for (const auto& c : j.at("dropout_scale")) p.add_output(fmt::format("p {}", c["p"].get<double>()),
                                                           dropout(ones, c["p"].get<double>(), 5, step));
  const auto got = make_cpu_backend()->compile(p)->run({});
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = j["dropout_scale"][i]["scale"].get<float>();
    INFO(p.output_names[i] << ": torch's survivors " << want);
    CHECK(std::all_of(got[i].begin(), got[i].end(), [&](float v) { return v == 0.f || v == want; }));
    CHECK(std::count(got[i].begin(), got[i].end(), want) > 0);
  }
  // NaN, +-inf, +-0 and finite values: a row of each, its mask that of dropout(ones) with the same stream
  const golden::json& sp = j.at("dropout_special");
  auto decode = [](const golden::json& v) {
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      return s == "nan" ? NAN : s == "inf" ? INFINITY : -INFINITY;
    }
    return v.get<float>();
  };
  const size_t k = sp["x"].size();
  const int64_t per = 32;
  std::vector<float> xs;
  for (size_t i = 0; i < k; ++i)
    for (int64_t r = 0; r < per; ++r) xs.push_back(decode(sp["x"][i]));
  Tensor x = input("x", {static_cast<int64_t>(k), per});
  Program q;
  const uint32_t s0 = peek_random_stream(6);  // the stream dropout(x) takes: its mask is u < 1 - p of that stream
  q.add_output("dropout(x)", dropout(x, 0.5, 6, step, true));
  q.add_output("p 1", dropout(x, 1.0, 6, step));
  q.add_output("p 0", dropout(x, 0.0, 6, step));
  q.add_output("eval", dropout(x, 0.5, 6, step, false));
  const auto out = make_cpu_backend()->compile(q)->run({{"x", &xs}});
  std::vector<float> m(xs.size());
  for (size_t e = 0; e < xs.size(); ++e) m[e] = philox_uniform(6, s0, 5, static_cast<uint32_t>(e)) < 0.5f ? 1.f : 0.f;
  CHECK(std::count(m.begin(), m.end(), 1.f) > 0);
  CHECK(std::count(m.begin(), m.end(), 0.f) > 0);
  for (size_t i = 0; i < k; ++i) {
    const float kept = decode(sp["kept"][i]), dropped = decode(sp["dropped"][i]), p1 = decode(sp["p1"][i]);
    for (int64_t r = 0; r < per; ++r) {
      const size_t e = i * per + static_cast<size_t>(r);
      const float want = m[e] != 0.f ? kept : dropped;
      INFO("x " << xs[e] << (m[e] != 0.f ? " kept" : " dropped") << ": torch " << want << ", got " << out[0][e]);
      CHECK((std::isnan(want) ? std::isnan(out[0][e]) : out[0][e] == want));
      if (!std::isnan(want)) CHECK(std::signbit(out[0][e]) == std::signbit(want));
      CHECK((std::isnan(p1) ? std::isnan(out[1][e]) : out[1][e] == p1 && std::signbit(out[1][e]) == std::signbit(p1)));
      CHECK(std::memcmp(&out[2][e], &xs[e], 4) == 0);  // p = 0: identity
      CHECK(std::memcmp(&out[3][e], &xs[e], 4) == 0);  // eval: identity
    }
  }
  CHECK(j.at("dropout_raises").at("1.5").get<bool>());   // torch raises for p outside [0, 1]: so do we
  CHECK(j.at("dropout_raises").at("-0.1").get<bool>());
  CHECK_THROWS_AS(dropout(ones, 1.5, 1, step), ValueError);
  CHECK_THROWS_AS(dropout(ones, -0.1, 1, step), ValueError);
}

TEST_CASE("random: bernoulli(p) gives 0 and 1 with probability p, p = 0 and p = 1 exactly", "[random]") {
  const int64_t per = 1 << 14;
  std::vector<float> ps;
  const std::vector<float> levels = {0.f, 1.f, 0.25f, 0.8f};
  for (float pr : levels) ps.insert(ps.end(), per, pr);
  Tensor p = input("p", {4, per});
  Tensor step = input("step", {});
  Program prog;
  prog.add_output("b", bernoulli(p, 31337, step));
  const std::vector<float> st = {12.f};
  const auto cpu = make_cpu_backend()->compile(prog)->run({{"p", &ps}, {"step", &st}});
  for (size_t r = 0; r < levels.size(); ++r) {
    double ones = 0;
    bool binary = true;
    for (int64_t i = 0; i < per; ++i) {
      const float v = cpu[0][r * per + static_cast<size_t>(i)];
      binary = binary && (v == 0.f || v == 1.f);
      ones += v;
    }
    const double pr = levels[r], frac = ones / per;
    INFO("p " << pr << ": fraction of ones " << frac);
    CHECK(binary);
    CHECK(std::fabs(frac - pr) <= 5 * std::sqrt(pr * (1 - pr) / per));
  }
  CHECK(std::all_of(cpu[0].begin(), cpu[0].begin() + per, [](float v) { return v == 0.f; }));
  CHECK(std::all_of(cpu[0].begin() + per, cpu[0].begin() + 2 * per, [](float v) { return v == 1.f; }));
  // no gradient flows to p (torch: zeros): grad gives the zeros constant of an input it does not reach
  Tensor q = param("q", {3}, {0.5f, 0.5f, 0.5f});
  CHECK(grad(sum(bernoulli(q, 1, step)), {q})[0].node()->op == Op::Const);
}

TEST_CASE("random_uniform, bernoulli and dropout: bad shapes, steps and probabilities name the op and the line",
          "[random][dropout][errors]") {
  Tensor step = input("step", {});
  Tensor x = input("x", {4});
  CHECK_THROWS_AS(random_uniform({2, -1}, 1, step), ValueError);
  CHECK_THROWS_WITH(random_uniform({2, -1}, 1, step), Contains("random_uniform: negative size") && Contains("test_random.cpp"));
  CHECK_THROWS_WITH(random_uniform({1 << 16, 1 << 16}, 1, step), Contains("at most 2^31 - 1 elements"));
  CHECK_THROWS_WITH(random_uniform({3}, 1, input("two", {2})), Contains("random_uniform: step must have exactly one element") &&
                                                                    Contains("test_random.cpp"));
  CHECK_THROWS_WITH(random_uniform({3}, 1, Tensor()), Contains("random_uniform: step is an empty Tensor"));
  CHECK_THROWS_WITH(bernoulli(x, 1, input("s3", {3})), Contains("bernoulli: step must have exactly one element"));
  CHECK_THROWS_WITH(dropout(x, 1.5, 1, step), Contains("dropout: dropout probability has to be between 0 and 1, but got 1.5") &&
                                                  Contains("test_random.cpp"));
  CHECK_THROWS_WITH(dropout(x, -0.1, 1, step), Contains("but got -0.1"));
  CHECK_THROWS_WITH(dropout(x, NAN, 1, step), Contains("but got nan"));
  CHECK_THROWS_WITH(dropout(x, 0.5, 1, input("s2", {1, 2})), Contains("dropout: step must have exactly one element"));
  // a step that is not an integer in [0, 2^24]: the CPU reference refuses it, naming the node and its line
  Program p;
  p.add_output("u", random_uniform({3}, 1, step, 0));
  auto exe = make_cpu_backend()->compile(p);
  for (float bad : {0.5f, -1.f, 16777218.f, NAN}) {
    const std::vector<float> s = {bad};
    CHECK_THROWS_WITH(exe->run({{"step", &s}}), Contains("random_uniform#") && Contains("test_random.cpp") &&
                                                     Contains("must be an integer in [0, 2^24]"));
  }
  const std::vector<float> ok = {16777216.f};
  CHECK(exe->run({{"step", &ok}})[0].size() == 3);
}

TEST_CASE("dropout: nn::Dropout trains with a new mask every step of one compiled train step, its step counter "
          "incremented by the program, equal on cpu, gles, gles-compute and vulkan, eval the identity",
          "[random][dropout][nn]") {
  // Linear(6, 16) -> ReLU -> Dropout(0.4) -> Linear(16, 3), cross_entropy, SGD; the dropout's output is an extra output
  const int64_t n = 8;
  std::vector<float> xs(n * 6), ys(n);
  for (int64_t i = 0; i < n * 6; ++i) xs[i] = std::sin(0.7f * static_cast<float>(i)) * 2.f;
  for (int64_t i = 0; i < n; ++i) ys[i] = static_cast<float>(i % 3);
  nn::Rng rng(3);
  nn::Linear fc1(6, 16), fc2(16, 3);
  nn::Dropout drop(0.4);
  fc1.build("fc1.", rng);
  drop.build("drop.", rng);
  fc2.build("fc2.", rng);
  CHECK(drop.describe() == "Dropout(p=0.4, inplace=False)");
  CHECK(drop.state_dict().empty());  // torch's Dropout has no parameters or buffers
  Tensor x = input("x", {n, 6}), labels = input("labels", {n}, DType::i32);
  Tensor h = drop(relu(fc1(x)));
  Tensor loss = cross_entropy(fc2(h), labels);
  auto sgd = make_sgd({.lr = 0.5});
  Program p = make_train_step(loss, {fc1.weight, fc1.bias, fc2.weight, fc2.bias}, *sgd, {{"h", h}});
  // the counter's update came with the dropout's output (Node::effects), besides the 4 parameter updates
  REQUIRE(p.updates.size() == 5);
  CHECK(std::count_if(p.updates.begin(), p.updates.end(), [&](const Update& u) { return u.target == drop.step.node(); }) == 1);
  std::vector<std::vector<float>> cpu_h, cpu_loss;
  for (const char* kind : kNative) {
    INFO("backend " << kind);
    auto be = native_backend(kind);  // each backend starts from the leaves' initial values (parameters, counter 0)
    auto exe = be->compile(p);
    std::vector<std::vector<float>> hs;
    for (int t = 0; t < 3; ++t) {
      const auto got = exe->run({{"x", &xs}, {"labels", &ys}});
      hs.push_back(got[1]);
      if (std::string(kind) == "cpu") {
        cpu_loss.push_back(got[0]);
        cpu_h.push_back(got[1]);
        continue;
      }
      INFO("step " << t << ": loss " << got[0][0] << ", cpu " << cpu_loss[t][0]);
      CHECK(std::fabs(got[0][0] - cpu_loss[t][0]) <= 1e-4 * std::fabs(cpu_loss[t][0]) + 1e-5);
      for (size_t i = 0; i < got[1].size(); ++i) {
        INFO("h element " << i << ": " << got[1][i] << ", cpu " << cpu_h[t][i]);
        CHECK(std::fabs(got[1][i] - cpu_h[t][i]) <= 1e-4 * std::fabs(cpu_h[t][i]) + 1e-5);
        CHECK((got[1][i] == 0.f) == (cpu_h[t][i] == 0.f));  // the same mask
      }
    }
    CHECK(be->read(drop.step) == std::vector<float>{3.f});  // incremented once per run, on the device
    int differ = 0;  // the masks (zeros of h) of consecutive steps differ
    for (size_t i = 0; i < hs[0].size(); ++i) differ += (hs[0][i] == 0.f) != (hs[1][i] == 0.f);
    CHECK(differ > 0);
    expect_clean(kind, *be);
  }
  // eval: the identity, no random numbers and no counter in the program
  drop.eval();
  CHECK(drop(h).node() == h.node());
  Program ev;
  ev.add_output("logits", fc2(drop(relu(fc1(x)))));
  CHECK(ev.updates.empty());
  for (const NodePtr& nd : ev.nodes()) CHECK(nd->op != Op::RandomUniform);
}

TEST_CASE("dropout: nn::Dropout's repr, seeds, errors and a layer called twice", "[random][dropout][nn][errors]") {
  CHECK(nn::Dropout().describe() == "Dropout(p=0.5, inplace=False)");
  CHECK(nn::Dropout(1.0).describe() == "Dropout(p=1.0, inplace=False)");  // torch prints the float
  CHECK(nn::Dropout(0.0).describe() == "Dropout(p=0.0, inplace=False)");
  CHECK_THROWS_WITH(nn::Dropout(1.5), Contains("Dropout: dropout probability has to be between 0 and 1, but got 1.5"));
  CHECK_THROWS_AS(nn::Dropout(-0.1), ValueError);
  CHECK_THROWS_AS(nn::Dropout(NAN), ValueError);
  nn::Dropout unbuilt(0.5);
  Tensor x = input("x", {2, 3});
  CHECK_THROWS_WITH(unbuilt(x), Contains("call build(rng) first"));
  // seeds: the path's hash unless given; two layers of a model differ, a rebuilt model's match
  nn::Rng rng(0);
  nn::Dropout a(0.5), b(0.5), a2(0.5), given(0.5, 1234);
  a.build("0.", rng), b.build("3.", rng), a2.build("0.", rng), given.build("0.", rng);
  CHECK(a.seed() != b.seed());
  CHECK(a.seed() == a2.seed());
  CHECK(given.seed() == 1234);
  CHECK(a.step.name() == "0.dropout_step");
  // a layer called twice in one program: two streams (different masks), one counter update
  Tensor y = a(x), z = a(x);
  Program p;
  p.add_output("y", y);
  p.add_output("z", z);
  CHECK(p.updates.size() == 1);
  const std::vector<float> xs(6, 1.f);
  bool all_equal = true;
  for (int t = 0; t < 4; ++t) {
    const auto out = make_cpu_backend()->compile(p)->run({{"x", &xs}});
    all_equal = all_equal && out[0] == out[1];
  }
  CHECK_FALSE(all_equal);
}
