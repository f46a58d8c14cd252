// compress: quantisation parameters, the int8 export (safetensors), integer inference on the CPU, and file sizes.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include "sg/compress.h"

namespace sg::compress {

QParams act_qparams(float lo, float hi, int64_t qmin, int64_t qmax) {
  // torch.ao.quantization ObserverBase._calculate_qparams, per_tensor_affine, in float32
  const float min_neg = std::min(lo, 0.f), max_pos = std::max(hi, 0.f);
  float scale = (max_pos - min_neg) / static_cast<float>(qmax - qmin);
  scale = std::max(scale, FLT_EPSILON);
  float zp = static_cast<float>(qmin) - std::nearbyint(min_neg / scale);
  zp = std::clamp(zp, static_cast<float>(qmin), static_cast<float>(qmax));
  return {scale, static_cast<int32_t>(zp)};
}

std::vector<float> weight_scales(const io::NamedTensor& w, int64_t qmax, bool per_channel) {
  const size_t rows = per_channel ? static_cast<size_t>(w.shape[0]) : 1, cols = w.data.size() / rows;
  std::vector<float> s(rows);
  for (size_t r = 0; r < rows; ++r) {
    float m = 0;
    for (size_t c = 0; c < cols; ++c) m = std::max(m, std::fabs(w.data[r * cols + c]));
    s[r] = std::max(m / static_cast<float>(qmax), FLT_EPSILON);  // as the graph: max(max|w| / qmax, eps)
  }
  return s;
}

namespace {

/// round(x * (1/s)) + z clamped to [lo, hi]: ATen's fake_quantize arithmetic (inv_scale = 1.0f / scale).
float quantise(float x, float scale, int32_t zp, float lo, float hi) {
  const float inv = 1.0f / scale;
  return std::clamp(std::nearbyint(x * inv) + static_cast<float>(zp), lo, hi);
}

const char* const kBiases[] = {"0.bias", "3.bias", "7.bias", "9.bias"};

}  // namespace

Int8Model to_int8(const Model& m) {
  if (!m.quant || m.quant->bits != 8 || m.act_hi.size() != kActPoints)
    throw ValueError("compress::to_int8: the model must be fake-quantised at 8 bits with calibrated activations "
                     "(compress::quantize with bits = 8, then optionally train)");
  Int8Model q;
  q.spec = m.spec;
  q.per_channel = m.quant->per_channel;
  const int64_t qmax = m.quant->weight_qmax();
  for (auto& name : Model::weight_names()) {
    io::NamedTensor w = m.param(name);
    if (auto it = m.masks.find(name); it != m.masks.end())
      for (size_t i = 0; i < w.data.size(); ++i) w.data[i] *= it->second[i];
    std::vector<float> s = weight_scales(w, qmax, q.per_channel);
    const size_t cols = w.data.size() / s.size();
    for (size_t i = 0; i < w.data.size(); ++i)
      w.data[i] = quantise(w.data[i], s[i / cols], 0, static_cast<float>(-qmax), static_cast<float>(qmax));
    w.dtype = "I8";
    q.weights.push_back(std::move(w));
    q.weight_scales.push_back(std::move(s));
  }
  for (const char* b : kBiases) q.biases.push_back(m.param(b));
  for (int i = 0; i < kActPoints; ++i) q.acts.push_back(act_qparams(m.act_lo[i], m.act_hi[i], 0, 255));
  return q;
}

void save_int8(const std::string& path, const Int8Model& q) {
  std::vector<io::NamedTensor> ts;
  for (size_t i = 0; i < q.weights.size(); ++i) {
    ts.push_back(q.weights[i]);
    ts.back().dtype = "I8";
    ts.push_back({q.weights[i].name + ".scale", {static_cast<int64_t>(q.weight_scales[i].size())}, q.weight_scales[i]});
    ts.push_back(q.biases[i]);
  }
  for (size_t i = 0; i < q.acts.size(); ++i) {
    ts.push_back({fmt::format("act{}.scale", i), {1}, {q.acts[i].scale}});
    ts.push_back({fmt::format("act{}.zero_point", i), {1}, {static_cast<float>(q.acts[i].zero_point)}, "I32"});
  }
  const CnnSpec& s = q.spec;
  io::save_safetensors(path, ts,
                       {{"format", kInt8Format},
                        {"model", fmt::format("make_cnn({}, {}, {})", s.c1, s.c2, s.hidden)},
                        {"spec", fmt::format("{} {} {} {} {} {} {}", s.c1, s.c2, s.hidden, s.channels, s.height,
                                             s.width, s.classes)},
                        {"weights", q.per_channel ? "int8 per-channel symmetric" : "int8 per-tensor symmetric"},
                        {"activations", "uint8 affine (input and after every ReLU)"}});
}

Int8Model load_int8(const std::string& path) {
  io::SafetensorsFile f = io::load_safetensors(path);
  auto meta = [&](const char* k) {
    auto it = f.metadata.find(k);
    return it == f.metadata.end() ? std::string() : it->second;
  };
  if (meta("format") != kInt8Format)
    throw IOError(fmt::format("{}: not a shadergrad int8 model (metadata format '{}', expected '{}'; write one with "
                              "`shadergrad compress ptq|qat --bits 8 --int8-out FILE`)", path, meta("format"),
                              kInt8Format));
  Int8Model q;
  CnnSpec& s = q.spec;
  if (std::sscanf(meta("spec").c_str(), "%ld %ld %ld %ld %ld %ld %ld", &s.c1, &s.c2, &s.hidden, &s.channels, &s.height,
                  &s.width, &s.classes) != 7)
    throw IOError(fmt::format("{}: metadata 'spec' is '{}', expected 7 integers", path, meta("spec")));
  q.per_channel = meta("weights").find("per-channel") != std::string::npos;
  auto get = [&](const std::string& name, const char* dtype) {
    const io::NamedTensor* t = f.find(name);
    if (!t) throw IOError(fmt::format("{}: tensor '{}' is missing", path, name));
    if (t->dtype != dtype) throw IOError(fmt::format("{}: tensor '{}' is {}, expected {}", path, name, t->dtype, dtype));
    return *t;
  };
  Model ref = init_cnn(s, 0);  // the shapes the spec implies
  for (size_t i = 0; i < Model::weight_names().size(); ++i) {
    const std::string w = Model::weight_names()[i];
    q.weights.push_back(get(w, "I8"));
    if (q.weights.back().shape != ref.param(w).shape)
      throw IOError(fmt::format("{}: tensor '{}' has shape [{}], the spec needs [{}]", path, w,
                                fmt::join(q.weights.back().shape, ", "), fmt::join(ref.param(w).shape, ", ")));
    q.weight_scales.push_back(get(w + ".scale", "F32").data);
    const size_t want = q.per_channel ? static_cast<size_t>(q.weights.back().shape[0]) : 1;
    if (q.weight_scales.back().size() != want)
      throw IOError(fmt::format("{}: tensor '{}.scale' has {} values, expected {}", path, w, q.weight_scales.back().size(), want));
    q.biases.push_back(get(kBiases[i], "F32"));
  }
  for (int i = 0; i < kActPoints; ++i)
    q.acts.push_back({get(fmt::format("act{}.scale", i), "F32").data.at(0),
                      static_cast<int32_t>(get(fmt::format("act{}.zero_point", i), "I32").data.at(0))});
  return q;
}

Model from_int8(const Int8Model& q) {
  Model m = init_cnn(q.spec, 0);
  for (size_t i = 0; i < q.weights.size(); ++i) {
    auto& w = m.param(q.weights[i].name);
    const size_t cols = w.data.size() / q.weight_scales[i].size();
    for (size_t j = 0; j < w.data.size(); ++j) w.data[j] = q.weights[i].data[j] * q.weight_scales[i][j / cols];
    m.param(q.biases[i].name).data = q.biases[i].data;
  }
  m.quant = QuantConfig{.bits = 8, .per_channel = q.per_channel, .weights = false};
  m.act_lo.assign(kActPoints, 0.f);
  m.act_hi.assign(kActPoints, 0.f);
  for (int i = 0; i < kActPoints; ++i) m.act_hi[i] = q.acts[i].scale * 255.f;
  m.act_given = q.acts;
  return m;
}

namespace {

/// One integer layer: in (n, C, H, W) uint8 codes with qparams `a`; returns the float pre-activation (bias added).
std::vector<float> conv3x3(const std::vector<float>& in, int64_t n, int64_t C, int64_t H, int64_t W, QParams a,
                           const io::NamedTensor& w, const std::vector<float>& ws, const io::NamedTensor& bias) {
  const int64_t O = w.shape[0];
  std::vector<float> out(static_cast<size_t>(n * O * H * W));
  for (int64_t s = 0; s < n; ++s)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          int32_t acc = 0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = y + ky - 1, ix = x + kx - 1;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;  // zero padding: real 0 is code z
                const int32_t qa = static_cast<int32_t>(in[static_cast<size_t>(((s * C + c) * H + iy) * W + ix)]) - a.zero_point;
                acc += qa * static_cast<int32_t>(w.data[static_cast<size_t>(((o * C + c) * 3 + ky) * 3 + kx)]);
              }
          const float sw = ws[ws.size() == 1 ? 0 : static_cast<size_t>(o)];
          out[static_cast<size_t>(((s * O + o) * H + y) * W + x)] = static_cast<float>(acc) * (a.scale * sw) + bias.data[o];
        }
  return out;
}
std::vector<float> linear(const std::vector<float>& in, int64_t n, QParams a, const io::NamedTensor& w,
                          const std::vector<float>& ws, const io::NamedTensor& bias) {
  const int64_t O = w.shape[0], K = w.shape[1];
  std::vector<float> out(static_cast<size_t>(n * O));
  for (int64_t s = 0; s < n; ++s)
    for (int64_t o = 0; o < O; ++o) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += (static_cast<int32_t>(in[static_cast<size_t>(s * K + k)]) - a.zero_point) *
               static_cast<int32_t>(w.data[static_cast<size_t>(o * K + k)]);
      const float sw = ws[ws.size() == 1 ? 0 : static_cast<size_t>(o)];
      out[static_cast<size_t>(s * O + o)] = static_cast<float>(acc) * (a.scale * sw) + bias.data[o];
    }
  return out;
}
/// ReLU, then the uint8 code of the next activation point.
void relu_requant(std::vector<float>& v, QParams a) {
  for (float& x : v) x = quantise(std::max(x, 0.f), a.scale, a.zero_point, 0, 255);
}
std::vector<float> maxpool2(const std::vector<float>& in, int64_t n, int64_t C, int64_t H, int64_t W) {
  std::vector<float> out(static_cast<size_t>(n * C * (H / 2) * (W / 2)));
  for (int64_t p = 0; p < n * C; ++p)
    for (int64_t y = 0; y < H / 2; ++y)
      for (int64_t x = 0; x < W / 2; ++x) {
        float m = in[static_cast<size_t>((p * H + 2 * y) * W + 2 * x)];
        for (int64_t d = 1; d < 4; ++d) m = std::max(m, in[static_cast<size_t>((p * H + 2 * y + d / 2) * W + 2 * x + d % 2)]);
        out[static_cast<size_t>((p * (H / 2) + y) * (W / 2) + x)] = m;
      }
  return out;
}

}  // namespace

std::vector<float> int8_logits_cpu(const Int8Model& q, const Data& d, const std::vector<int64_t>& indices) {
  std::vector<int64_t> idx = indices;
  if (idx.empty())
    for (int64_t i = 0; i < d.all.n; ++i) idx.push_back(i);
  const CnnSpec& s = q.spec;
  const int64_t n = static_cast<int64_t>(idx.size()), H = s.height, W = s.width;
  std::vector<float> x;
  for (int64_t i : idx) {
    if (i < 0 || i >= d.all.n) throw ValueError(fmt::format("int8_logits_cpu: sample index {} outside the data", i));
    for (int64_t k = 0; k < d.all.sample_size(); ++k)
      x.push_back(quantise(d.all.sample(i)[k], q.acts[0].scale, q.acts[0].zero_point, 0, 255));
  }
  std::vector<float> h = conv3x3(x, n, s.channels, H, W, q.acts[0], q.weights[0], q.weight_scales[0], q.biases[0]);
  relu_requant(h, q.acts[1]);
  h = maxpool2(h, n, s.c1, H, W);
  h = conv3x3(h, n, s.c1, H / 2, W / 2, q.acts[1], q.weights[1], q.weight_scales[1], q.biases[1]);
  relu_requant(h, q.acts[2]);
  h = maxpool2(h, n, s.c2, H / 2, W / 2);  // (n, c2, H/4, W/4) = Flatten's order
  h = linear(h, n, q.acts[2], q.weights[2], q.weight_scales[2], q.biases[2]);
  relu_requant(h, q.acts[3]);
  return linear(h, n, q.acts[3], q.weights[3], q.weight_scales[3], q.biases[3]);
}

void save(const std::string& path, const Model& m) {
  std::vector<io::NamedTensor> ts;
  for (auto& p : m.params) {
    auto it = m.masks.find(p.name);
    if (it == m.masks.end()) {
      ts.push_back(p);
      continue;
    }
    ts.push_back({p.name + "_orig", p.shape, p.data});  // torch.nn.utils.prune's state_dict names
    ts.push_back({p.name + "_mask", p.shape, it->second});
  }
  const CnnSpec& s = m.spec;
  io::save_safetensors(path, ts, {{"format", kModelFormat},
                                  {"model", fmt::format("make_cnn({}, {}, {})", s.c1, s.c2, s.hidden)}});
}

Model load(const std::string& path) {
  io::SafetensorsFile f = io::load_safetensors(path);
  if (auto it = f.metadata.find("format"); it != f.metadata.end() && it->second == kInt8Format)
    throw IOError(fmt::format("{}: an int8 model ({}), not float weights: `shadergrad compress int8-eval --load {}` "
                              "evaluates it", path, kInt8Format, path));
  auto find = [&](const std::string& name) -> const io::NamedTensor* {
    if (const io::NamedTensor* t = f.find(name)) return t;
    return f.find(name + "_orig");
  };
  auto shape_of = [&](const std::string& name) {
    const io::NamedTensor* t = find(name);
    if (!t) throw IOError(fmt::format("{}: tensor '{}' is missing (not a make_cnn model?)", path, name));
    return t->shape;
  };
  auto w0 = shape_of("0.weight"), w3 = shape_of("3.weight"), w7 = shape_of("7.weight"), w9 = shape_of("9.weight");
  if (w0.size() != 4 || w3.size() != 4 || w7.size() != 2 || w9.size() != 2)
    throw IOError(fmt::format("{}: the weights' ranks are not make_cnn's (Conv2d, Conv2d, Linear, Linear)", path));
  CnnSpec spec{.c1 = w0[0], .c2 = w3[0], .hidden = w7[0], .channels = w0[1], .classes = w9[0]};
  const int64_t hw = w7[1] / std::max<int64_t>(spec.c2, 1);
  spec.height = spec.width = 4 * static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(hw))));
  Model m = init_cnn(spec, 0);
  for (auto& p : m.params) {
    const io::NamedTensor* t = find(p.name);
    if (!t) throw IOError(fmt::format("{}: tensor '{}' is missing", path, p.name));
    if (t->shape != p.shape)
      throw IOError(fmt::format("{}: tensor '{}' has shape [{}], make_cnn({}, {}, {}) needs [{}]", path, t->name,
                                fmt::join(t->shape, ", "), spec.c1, spec.c2, spec.hidden, fmt::join(p.shape, ", ")));
    p.data = t->data;
    if (const io::NamedTensor* mask = f.find(p.name + "_mask")) {
      m.masks[p.name] = mask->data;
      for (size_t i = 0; i < p.data.size(); ++i) p.data[i] *= mask->data[i];
    }
  }
  return m;
}

FileSize file_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(fmt::format("compress::file_size: cannot read '{}'", path));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  z_stream zs{};
  if (deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)  // 15 + 16: a gzip wrapper
    throw Error("compress::file_size: zlib deflateInit2 failed");
  std::string out(deflateBound(&zs, bytes.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(bytes.data());
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  const int64_t gz = static_cast<int64_t>(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw Error(fmt::format("compress::file_size: gzip of '{}' failed (zlib {})", path, rc));
  return {static_cast<int64_t>(bytes.size()), gz};
}

}  // namespace sg::compress
