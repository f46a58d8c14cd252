// shadergrad tests — golden files (PyTorch reference values) and tolerant comparison.
//
// The golden JSON files under tests/golden/ are written by tests/golden/gen_golden.py (see its header for
// the format and how to regenerate). This header loads them (paths relative to the repository root, found
// via the SG_SOURCE_DIR environment variable or the SG_SOURCE_DIR macro the test build defines), decodes
// tensors (dense, sparse, or hash-initialised), compares value vectors with a relative/absolute tolerance
// reporting the worst element, and builds the DSL graph of one golden op case.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/autodiff.h"
#include "sg/cpu_reference.h"
#include "sg/sg.h"

namespace sg::golden {

using json = nlohmann::json;

/// The repository root: $SG_SOURCE_DIR, else the SG_SOURCE_DIR macro, else ".".
inline std::string source_dir() {
  if (const char* e = std::getenv("SG_SOURCE_DIR"); e && *e) return e;
#ifdef SG_SOURCE_DIR
  return SG_SOURCE_DIR;
#else
  return ".";
#endif
}

/// Parses tests/golden/<file> (e.g. "elementwise.json"). Throws sg::IOError naming the path when the file
/// is missing or malformed (regenerate with /usr/bin/python3 tests/golden/gen_golden.py).
inline json load(const std::string& file) {
  std::string path = source_dir() + "/tests/golden/" + file;
  std::ifstream in(path);
  if (!in)
    throw IOError(fmt::format("golden: cannot open {} (set SG_SOURCE_DIR to the repository root, or regenerate "
                              "with /usr/bin/python3 tests/golden/gen_golden.py)", path));
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw IOError(fmt::format("golden: {} is not valid JSON: {}", path, e.what()));
  }
}

/// splitmix64 (Vigna), the generator behind gen_golden.py's hash_init.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A decoded golden tensor: shape and row-major values (float32 values held as double).
struct GTensor {
  Shape shape;
  std::vector<double> data;
  std::vector<float> floats() const { return std::vector<float>(data.begin(), data.end()); }
  int64_t numel() const { return sg::numel(shape); }
};

/// Decodes {"shape","data"} | {"shape","index","value"} (sparse, rest 0) | {"shape","fill"} |
/// {"shape","init":{"hash_seed","scale"}} (bit-exact with gen_golden.py's hash_init).
inline GTensor tensor(const json& j) {
  GTensor t;
  for (auto& d : j.at("shape")) t.shape.push_back(d.get<int64_t>());
  const int64_t n = sg::numel(t.shape);
  if (j.contains("data")) {
    for (auto& v : j.at("data")) t.data.push_back(v.get<double>());
  } else if (j.contains("index")) {
    t.data.assign(n, 0.0);
    auto& idx = j.at("index");
    auto& val = j.at("value");
    for (size_t i = 0; i < idx.size(); ++i) t.data.at(idx[i].get<int64_t>()) = val[i].get<double>();
  } else if (j.contains("fill")) {
    t.data.assign(n, j.at("fill").get<double>());
  } else if (j.contains("init")) {
    uint64_t seed = j.at("init").at("hash_seed").get<uint64_t>();
    double scale = j.at("init").at("scale").get<double>();
    t.data.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      uint64_t k = splitmix64((seed << 32) + static_cast<uint64_t>(i)) >> 40;
      t.data[i] = static_cast<float>(((static_cast<double>(k) + 0.5) / 16777216.0 * 2.0 - 1.0) * scale);
    }
  } else {
    throw IOError("golden: tensor has none of data/index/fill/init: " + j.dump().substr(0, 200));
  }
  if (static_cast<int64_t>(t.data.size()) != n)
    throw IOError(fmt::format("golden: tensor of shape {} has {} values", shape_str(t.shape), t.data.size()));
  return t;
}

/// Result of an element-wise comparison: passes when |got - expected| <= atol + rtol*|expected| everywhere.
struct Comparison {
  bool ok = true;
  int64_t worst = -1;  ///< index of the element with the largest error relative to its tolerance
  double got = 0, expected = 0, max_abs_err = 0;
  std::string what;    ///< size mismatch / non-finite explanation
  std::string report() const {
    if (!what.empty()) return what;
    if (worst < 0) return "ok (empty)";
    return fmt::format("{}: worst [{}]: got {:.9g}, expected {:.9g} (abs err {:.3g}, max abs err {:.3g})",
                       ok ? "ok" : "MISMATCH", worst, got, expected, std::fabs(got - expected), max_abs_err);
  }
};

inline Comparison compare(const std::vector<double>& got, const std::vector<double>& expected, double rtol,
                          double atol) {
  Comparison c;
  if (got.size() != expected.size()) {
    c.ok = false;
    c.what = fmt::format("MISMATCH: got {} values, expected {}", got.size(), expected.size());
    return c;
  }
  double worst_score = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], e = expected[i];
    double err = std::fabs(g - e);
    double tol = atol + rtol * std::fabs(e);
    double score = std::isfinite(g) ? err / tol : std::numeric_limits<double>::infinity();
    if (std::isnan(err) || err > tol) c.ok = false;
    if (std::isfinite(err)) c.max_abs_err = std::max(c.max_abs_err, err);
    if (score > worst_score || std::isnan(score)) {
      worst_score = std::isnan(score) ? std::numeric_limits<double>::infinity() : score;
      c.worst = static_cast<int64_t>(i);
      c.got = g;
      c.expected = e;
    }
  }
  return c;
}

inline Comparison compare(const std::vector<double>& got, const GTensor& expected, double rtol, double atol) {
  return compare(got, expected.data, rtol, atol);
}

// ------------------------------------------------------------------------------------------------
// Op cases
// ------------------------------------------------------------------------------------------------

/// One golden op case, built as a DSL graph: every f32 input is a Param (its golden value as data), every
/// i32 input an Input fed through `feeds`.
struct Case {
  struct In {
    std::string name;
    bool is_int = false;
    bool grad = false;  ///< golden has d(sum(out*R))/d(this)
    bool fd = false;    ///< safe for a finite-difference check (no kink nearby)
    GTensor value;
    Tensor t;
  };
  std::string name, op;
  json attrs;
  std::vector<In> inputs;
  GTensor output, R;
  std::map<std::string, GTensor> grads;
  bool int_output = false;
  Tensor out;
  cpu::LeafValues feeds;
};

inline std::vector<int> ints_of(const json& j) {
  std::vector<int> v;
  for (auto& x : j) v.push_back(x.get<int>());
  return v;
}
inline Shape shape_of(const json& j) {
  Shape s;
  for (auto& x : j) s.push_back(x.get<int64_t>());
  return s;
}
inline std::array<int64_t, 2> pair_of(const json& j) { return {j.at(0).get<int64_t>(), j.at(1).get<int64_t>()}; }

/// Builds the DSL expression of op `op` (gen_golden.py's op names) over `in`. Throws ValueError for an
/// unknown op name.
inline Tensor build_op(const std::string& op, const json& a, const std::vector<Tensor>& in) {
  auto x = [&]() -> const Tensor& { return in.at(0); };
  auto y = [&]() -> const Tensor& { return in.at(1); };
  // unary
  if (op == "neg") return -x();
  if (op == "abs") return abs(x());
  if (op == "exp") return exp(x());
  if (op == "log") return log(x());
  if (op == "sqrt") return sqrt(x());
  if (op == "rsqrt") return rsqrt(x());
  if (op == "sin") return sin(x());
  if (op == "cos") return cos(x());
  if (op == "tanh") return tanh(x());
  if (op == "sigmoid") return sigmoid(x());
  if (op == "relu") return relu(x());
  if (op == "leaky_relu") return leaky_relu(x(), a.value("slope", 0.01));
  if (op == "softplus") return softplus(x());
  if (op == "sign") return sign(x());
  if (op == "floor") return floor(x());
  if (op == "round") return round(x());
  if (op == "reciprocal") return reciprocal(x());
  if (op == "erf") return erf(x());
  if (op == "erfc") return erfc(x());
  if (op == "gelu") return gelu(x(), a.value("approximate", std::string("none")));
  // binary
  if (op == "add") return x() + y();
  if (op == "sub") return x() - y();
  if (op == "mul") return x() * y();
  if (op == "div") return x() / y();
  if (op == "pow") return pow(x(), y());
  if (op == "maximum") return maximum(x(), y());
  if (op == "minimum") return minimum(x(), y());
  if (op == "lt") return lt(x(), y());
  if (op == "le") return le(x(), y());
  if (op == "gt") return gt(x(), y());
  if (op == "ge") return ge(x(), y());
  if (op == "eq") return eq(x(), y());
  if (op == "ne") return ne(x(), y());
  if (op == "where") return where(in.at(0), in.at(1), in.at(2));
  if (op == "relu_xw_plus_b") return relu(in.at(0) * in.at(1) + in.at(2));
  // reductions
  if (op == "sum" || op == "mean" || op == "max" || op == "min") {
    std::vector<int> axes = ints_of(a.at("axes"));
    bool keep = a.at("keepdims").get<bool>();
    if (op == "sum") return sum(x(), axes, keep);
    if (op == "mean") return mean(x(), axes, keep);
    if (op == "max") return max(x(), axes, keep);
    return min(x(), axes, keep);
  }
  if (op == "logsumexp") return logsumexp(x(), ints_of(a.at("axes")), a.at("keepdims").get<bool>());
  if (op == "var" || op == "std") {
    const bool unbiased = a.at("unbiased").get<bool>(), keep = a.at("keepdims").get<bool>();
    return op == "var" ? var(x(), ints_of(a.at("axes")), unbiased, keep) : sg::std(x(), ints_of(a.at("axes")), unbiased, keep);
  }
  if (op == "argmax") return argmax(x(), a.at("axis").get<int>(), a.at("keepdims").get<bool>());
  if (op == "matmul") return matmul(x(), y());
  if (op == "matmul_x_xT") return matmul(x(), transpose(x()));
  // movement
  if (op == "reshape") return reshape(x(), shape_of(a.at("shape")));
  if (op == "flatten") return flatten(x(), a.at("start_dim").get<int>());
  if (op == "transpose") return transpose(x(), a.at("axis0").get<int>(), a.at("axis1").get<int>());
  if (op == "permute") return permute(x(), ints_of(a.at("perm")));
  if (op == "broadcast_to") return broadcast_to(x(), shape_of(a.at("shape")));
  if (op == "slice")
    return slice(x(), a.at("axis").get<int>(), a.at("start").get<int64_t>(), a.at("end").get<int64_t>(),
                 a.at("step").get<int64_t>());
  if (op == "pad") return pad(x(), shape_of(a.at("before")), shape_of(a.at("after")), a.at("value").get<double>());
  if (op == "concat") return concat(in, a.at("axis").get<int>());
  if (op == "one_hot") return one_hot(x(), a.at("num_classes").get<int64_t>());
  // nn
  if (op == "conv2d") {
    Conv2dOptions o;
    o.stride = pair_of(a.at("stride"));
    o.padding = pair_of(a.at("padding"));
    o.dilation = pair_of(a.at("dilation"));
    return conv2d(x(), y(), in.size() > 2 ? in[2] : Tensor(), o);
  }
  if (op == "max_pool2d" || op == "avg_pool2d") {
    Pool2dOptions o;
    o.kernel = pair_of(a.at("kernel"));
    o.stride = pair_of(a.at("stride"));
    o.padding = pair_of(a.at("padding"));
    return op == "max_pool2d" ? max_pool2d(x(), o) : avg_pool2d(x(), o);
  }
  if (op == "softmax") return softmax(x(), a.at("axis").get<int>());
  if (op == "log_softmax") return log_softmax(x(), a.at("axis").get<int>());
  if (op == "cross_entropy") return cross_entropy(x(), y());
  if (op == "mse_loss") return mse_loss(x(), y());
  if (op == "kl_div") return kl_div(x(), y());
  if (op == "fake_quant")
    return fake_quant(x(), a.at("scale").get<double>(), a.at("zero_point").get<int64_t>(),
                      a.at("qmin").get<int64_t>(), a.at("qmax").get<int64_t>());
  throw ValueError("golden: unknown op '" + op + "'");
}

/// Decodes a golden case and builds its graph.
inline Case build_case(const json& c) {
  Case k;
  k.name = c.at("name").get<std::string>();
  k.op = c.at("op").get<std::string>();
  k.attrs = c.at("attrs");
  std::vector<Tensor> ts;
  for (auto& ij : c.at("inputs")) {
    Case::In in;
    in.name = ij.at("name").get<std::string>();
    in.is_int = ij.at("dtype").get<std::string>() == "i32";
    in.grad = ij.at("grad").get<bool>();
    in.fd = ij.at("fd").get<bool>();
    in.value = tensor(ij);
    if (in.is_int) {
      in.t = input(in.name, in.value.shape, DType::i32);
      k.feeds[in.t.node().get()] = in.value.data;
    } else {
      in.t = param(in.name, in.value.shape, in.value.floats());
    }
    ts.push_back(in.t);
    k.inputs.push_back(std::move(in));
  }
  k.output = tensor(c.at("output"));
  k.R = tensor(c.at("R"));
  for (auto& [nm, gj] : c.at("grads").items()) k.grads[nm] = tensor(gj);
  k.out = build_op(k.op, k.attrs, ts);
  k.int_output = k.op == "argmax";
  return k;
}

/// sum(out * R) with R a constant (the scalar whose gradients the golden file stores).
inline Tensor weighted_sum(const Case& k) {
  Tensor R = constant(k.R.shape, k.R.floats());
  return sum(k.out * R);
}

}  // namespace sg::golden
