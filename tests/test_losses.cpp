// Distillation loss vs a direct f64 computation of Hinton et al.'s T^2 * KL(softmax(t/T) || softmax(s/T)).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "sg/cpu_reference.h"
#include "sg/nn.h"

using namespace sg;

TEST_CASE("distillation_loss equals T^2 * batchmean KL of temperature-softened distributions", "[nn][loss]") {
  const int64_t N = 5, C = 7;
  std::mt19937 g(3);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> sv(N * C), tv(N * C);
  for (auto& v : sv) v = d(g);
  for (auto& v : tv) v = d(g);
  for (double T : {1.0, 4.0}) {
    Tensor s = param("s", {N, C}, sv), t = param("t", {N, C}, tv);
    Tensor loss = nn::distillation_loss(s, t, T);
    double got = cpu::evaluate({loss.node()}, {}, {false})[0][0];
    double expected = 0;
    for (int64_t i = 0; i < N; ++i) {
      double ms = -1e300, mt = -1e300, zs = 0, zt = 0;
      for (int64_t j = 0; j < C; ++j) ms = std::max(ms, sv[i * C + j] / T), mt = std::max(mt, tv[i * C + j] / T);
      for (int64_t j = 0; j < C; ++j) zs += std::exp(sv[i * C + j] / T - ms), zt += std::exp(tv[i * C + j] / T - mt);
      for (int64_t j = 0; j < C; ++j) {
        double lps = sv[i * C + j] / T - ms - std::log(zs), lpt = tv[i * C + j] / T - mt - std::log(zt);
        expected += std::exp(lpt) * (lpt - lps);
      }
    }
    expected = expected / N * T * T;
    CHECK(got == Approx(expected).epsilon(1e-9));
    // the teacher gets no gradient; the student's matches finite differences
    auto gr = grad(loss, {t});
    auto gt = cpu::evaluate({gr[0].node()}, {}, {false})[0];
    for (double x : gt) CHECK(x == 0.0);
    CHECK(cpu::check_gradients(loss, {s}, {}).ok);
  }
  Tensor a = param("a", {2, 3}, std::vector<float>(6, 0.f)), b = param("b", {3, 2}, std::vector<float>(6, 0.f));
  CHECK_THROWS_AS(nn::distillation_loss(a, b, 2.0), ShapeError);
  CHECK_THROWS_AS(nn::distillation_loss(a, a, 0.0), ValueError);
}
