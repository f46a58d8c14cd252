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
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/autodiff.h"
#include "sg/cpu_reference.h"
#include "sg/nn.h"
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
  if (op == "gather") return gather(x(), a.at("axis").get<int>(), y());
  if (op == "take") return take(x(), y(), a.at("axis").get<int>());
  if (op == "embedding") {  // torch.nn.functional.embedding(index, x, padding_idx): the row gets no gradient
    const int64_t p = a.at("padding_idx").get<int64_t>();
    std::vector<float> keep(static_cast<size_t>(x().dim(0)), 1.0f);
    keep.at(p) = 0.0f;
    return take(where(constant({x().dim(0), 1}, keep), x(), stop_gradient(x())), y(), 0);
  }
  // index masks and flip
  if (op == "iota") return iota(shape_of(a.at("shape")), a.at("axis").get<int>());
  if (op == "arange") return arange(a.at("n").get<int64_t>());
  if (op == "gather_iota")  // gather along `axis` by an i32 iota of index_shape counting along that axis
    return gather(x(), a.at("axis").get<int>(), iota(shape_of(a.at("index_shape")), a.at("axis").get<int>(), DType::i32));
  if (op == "tril") return tril(x(), a.at("diagonal").get<int64_t>());
  if (op == "triu") return triu(x(), a.at("diagonal").get<int64_t>());
  if (op == "flip") return flip(x(), ints_of(a.at("dims")));
  // layers (layers.json): inputs x, then weight and bias where the attributes say so
  if (op == "layer_norm") {
    const bool w = a.at("weight").get<bool>(), b = a.at("bias").get<bool>();
    return layer_norm(x(), shape_of(a.at("normalized_shape")), w ? in.at(1) : Tensor(), b ? in.at(2) : Tensor(),
                      a.at("eps").get<double>());
  }
  if (op == "rms_norm") {
    std::optional<double> eps;
    if (!a.at("eps").is_null()) eps = a.at("eps").get<double>();
    return rms_norm(x(), shape_of(a.at("normalized_shape")), a.at("weight").get<bool>() ? in.at(1) : Tensor(), eps);
  }
  if (op == "multi_head_attention") {  // F.multi_head_attention_forward; inputs in gen_golden.py's order
    size_t i = 0;
    auto next = [&]() -> const Tensor& { return in.at(i++); };
    const bool self = a.at("self").get<bool>(), bias = a.at("bias").get<bool>();
    Tensor q = next(), k = self ? q : next(), v = self ? q : next();
    Tensor w_in = next(), b_in = bias ? next() : Tensor(), w_out = next(), b_out = bias ? next() : Tensor();
    nn::AttentionOptions o;
    if (a.at("key_padding_mask").get<bool>()) o.key_padding_mask = next();
    if (a.at("attn_mask").get<std::string>() != "none") o.attn_mask = next();
    o.is_causal = a.at("is_causal").get<bool>();
    const std::string weights = a.at("weights").get<std::string>();
    o.need_weights = weights != "none";
    o.average_attn_weights = weights == "avg";
    nn::AttentionOutput r = nn::multi_head_attention_forward(q, k, v, a.at("num_heads").get<int64_t>(), w_in, b_in,
                                                             w_out, b_out, o, a.at("batch_first").get<bool>());
    return o.need_weights ? r.weights : r.output;
  }
  if (op == "transformer_encoder_layer") {  // nn::TransformerEncoderLayer with the inputs as its parameters
    nn::TransformerEncoderLayer layer(a.at("d_model").get<int64_t>(), a.at("nhead").get<int64_t>(),
                                      a.at("dim_feedforward").get<int64_t>(), 0.0, a.at("activation").get<std::string>(),
                                      1e-5, true, a.at("norm_first").get<bool>());
    // torch's state_dict names, in order, onto the submodules' public parameters
    const std::map<std::string, Tensor*> slot = {
        {"self_attn.in_proj_weight", &layer.self_attn.in_proj_weight}, {"self_attn.in_proj_bias", &layer.self_attn.in_proj_bias},
        {"self_attn.out_proj.weight", &layer.self_attn.out_proj.weight}, {"self_attn.out_proj.bias", &layer.self_attn.out_proj.bias},
        {"linear1.weight", &layer.linear1.weight}, {"linear1.bias", &layer.linear1.bias},
        {"linear2.weight", &layer.linear2.weight}, {"linear2.bias", &layer.linear2.bias},
        {"norm1.weight", &layer.norm1.weight}, {"norm1.bias", &layer.norm1.bias},
        {"norm2.weight", &layer.norm2.weight}, {"norm2.bias", &layer.norm2.bias}};
    size_t i = 1;
    for (const auto& name : a.at("parameters")) *slot.at(name.get<std::string>()) = in.at(i++);
    nn::AttentionOptions o;
    o.is_causal = a.at("is_causal").get<bool>();
    if (a.at("key_padding_mask").get<bool>()) o.key_padding_mask = in.at(i++);
    return layer.encode(x(), o);
  }
  // nn
  if (op == "conv2d") {
    Conv2dOptions o;
    o.stride = pair_of(a.at("stride"));
    o.padding = pair_of(a.at("padding"));
    o.dilation = pair_of(a.at("dilation"));
    o.groups = a.value("groups", int64_t{1});
    return conv2d(x(), y(), in.size() > 2 ? in[2] : Tensor(), o);
  }
  if (op == "conv_transpose2d") {
    ConvTranspose2dOptions o;
    o.stride = pair_of(a.at("stride"));
    o.padding = pair_of(a.at("padding"));
    o.output_padding = pair_of(a.at("output_padding"));
    o.dilation = pair_of(a.at("dilation"));
    o.groups = a.value("groups", int64_t{1});
    return conv_transpose2d(x(), y(), in.size() > 2 ? in[2] : Tensor(), o);
  }
  if (op == "upsample_bilinear2d") {
    UpsampleBilinearOptions o;
    o.align_corners = a.at("align_corners").get<bool>();
    if (a.contains("size")) o.size = pair_of(a.at("size"));
    if (a.contains("scale_factor"))
      o.scale_factor = std::array<double, 2>{a.at("scale_factor")[0].get<double>(), a.at("scale_factor")[1].get<double>()};
    return upsample_bilinear2d(x(), o);
  }
  if (op == "upsample_nearest2d") {
    auto sc = pair_of(a.at("scale"));
    return upsample_nearest2d(x(), sc[0], sc[1]);
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
