// shadergrad — character language models: CharTransformer, CharLSTM, their loss and the host-side sampler.
#include "sg/lm.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "sg/error.h"

namespace sg::lm {

bool is_lm_model(const std::string& name) {
  return std::find(kLmModels.begin(), kLmModels.end(), name) != kLmModels.end();
}

void LmSpec::validate() const {
  if (!is_lm_model(model))
    throw ValueError(fmt::format("unknown language model '{}' (choose charlm or lstm)", model));
  if (vocab != data::kCharVocab)
    throw ValueError(fmt::format("{}: vocab must be {} (boundary + a..z), got {}", model, data::kCharVocab, vocab));
  auto at_least = [&](const char* what, int64_t v, int64_t lo) {
    if (v < lo) throw ValueError(fmt::format("{}: {} must be >= {}, got {}", model, what, lo, v));
  };
  at_least("--context", context, 2);
  at_least("--d-model", d_model, 1);
  at_least("--layers", layers, 1);
  at_least("--heads", heads, 1);
  at_least("--hidden", hidden, 1);
  if (dim_feedforward < 0) throw ValueError(fmt::format("{}: dim_feedforward must be >= 0, got {}", model, dim_feedforward));
  if (model == "charlm" && d_model % heads != 0)
    throw ValueError(fmt::format("charlm: --d-model {} must be divisible by --heads {}", d_model, heads));
}

std::vector<std::pair<std::string, std::string>> LmSpec::metadata() const {
  return {{"lm_model", model},
          {"vocab", std::to_string(vocab)},
          {"context", std::to_string(context)},
          {"d_model", std::to_string(d_model)},
          {"lm_layers", std::to_string(layers)},
          {"heads", std::to_string(heads)},
          {"dim_feedforward", std::to_string(ff())},
          {"hidden", std::to_string(hidden)}};
}

LmSpec LmSpec::from_metadata(const std::map<std::string, std::string>& meta, const std::string& path) {
  auto get = [&](const std::string& k) -> const std::string& {
    auto it = meta.find(k);
    if (it == meta.end())
      throw IOError(fmt::format("{}: checkpoint metadata has no '{}' (a language model checkpoint of `shadergrad train "
                                "--model charlm|lstm --save` records it)", path, k));
    return it->second;
  };
  auto num = [&](const std::string& k) -> int64_t {
    const std::string& s = get(k);
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE)
      throw IOError(fmt::format("{}: checkpoint metadata '{}' is '{}', not a whole number", path, k, s));
    return v;
  };
  LmSpec s;
  s.model = get("lm_model");
  s.vocab = num("vocab");
  s.context = num("context");
  s.d_model = num("d_model");
  s.layers = num("lm_layers");
  s.heads = num("heads");
  s.dim_feedforward = num("dim_feedforward");
  s.hidden = num("hidden");
  try {
    s.validate();
  } catch (const ValueError& e) {
    throw IOError(fmt::format("{}: checkpoint metadata describes no valid model: {}", path, e.what()));
  }
  return s;
}

std::string LmSpec::describe() const {
  if (model == "lstm")
    return fmt::format("lstm(embedding={}, hidden={}, layers={}, context={})", d_model, hidden, layers, context);
  return fmt::format("charlm(d_model={}, layers={}, heads={}, dim_feedforward={}, context={})", d_model, layers, heads,
                     ff(), context);
}

namespace {

/// x (N, T) i32 with T <= context, else ShapeError / ValueError naming the model.
void check_tokens(const char* model, const Tensor& x, int64_t context) {
  if (!x) throw ValueError(fmt::format("{}: x is an empty Tensor", model));
  if (x.dtype() != DType::i32)
    throw ValueError(fmt::format("{}: x must be i32 tokens, got {} {}", model, dtype_name(x.dtype()), shape_str(x.shape())));
  if (x.rank() != 2 || x.dim(1) > context)
    throw ShapeError(fmt::format("{}: x must be (N, T) tokens with T <= context {}, got {}", model, context,
                                 shape_str(x.shape())));
}

}  // namespace

CharTransformer::CharTransformer(const LmSpec& spec)
    : tok_emb((spec.validate(), spec.vocab), spec.d_model),
      pos_emb(spec.context, spec.d_model),
      ln_f(spec.d_model),
      head(spec.d_model, spec.vocab),
      spec_(spec) {
  for (int64_t i = 0; i < spec.layers; ++i)
    blocks.add<nn::TransformerEncoderLayer>(spec.d_model, spec.heads, spec.ff(), 0.0, "gelu", 1e-5, true, true);
  register_module("tok_emb", tok_emb);
  register_module("pos_emb", pos_emb);
  register_module("blocks", blocks);
  register_module("ln_f", ln_f);
  register_module("head", head);
}

Tensor CharTransformer::forward(const Tensor& x) {
  check_tokens("CharTransformer", x, spec_.context);
  const int64_t t = x.dim(1);
  Tensor h = tok_emb.forward(x) + pos_emb.forward(iota({t}, 0, DType::i32));  // (N, T, D) + (T, D)
  nn::AttentionOptions causal;
  causal.is_causal = true;
  for (auto& [name, block] : blocks.children()) h = static_cast<nn::TransformerEncoderLayer*>(block)->encode(h, causal);
  return head.forward(ln_f.forward(h));
}

CharLSTM::CharLSTM(const LmSpec& spec)
    : embedding((spec.validate(), spec.vocab), spec.d_model),
      lstm(spec.d_model, spec.hidden, spec.layers, true, true),
      head(spec.hidden, spec.vocab),
      spec_(spec) {
  register_module("embedding", embedding);
  register_module("lstm", lstm);
  register_module("head", head);
}

Tensor CharLSTM::forward(const Tensor& x) {
  check_tokens("CharLSTM", x, spec_.context);
  return head.forward(lstm.forward(embedding.forward(x)));
}

std::unique_ptr<nn::Module> make_lm(const LmSpec& spec) {
  spec.validate();
  if (spec.model == "lstm") return std::make_unique<CharLSTM>(spec);
  return std::make_unique<CharTransformer>(spec);
}

LmLoss lm_loss(nn::Module& model, const LmSpec& spec, int64_t batch, loc_t loc) {
  SourceLoc l(loc);
  LocationOverride at_caller(l);
  if (batch < 1) throw ValueError(fmt::format("lm_loss: batch must be >= 1, got {}", batch));
  LmLoss r;
  const int64_t t = spec.context, v = spec.vocab;
  r.x = input("x", {batch, t}, DType::i32);
  r.y = input("y", {batch, t}, DType::i32);
  r.mask = input("mask", {batch, t});
  r.logits = model.forward(r.x);
  Tensor logp = log_softmax(reshape(r.logits, {batch * t, v}), 1);
  Tensor picked = reshape(gather(logp, 1, reshape(r.y, {batch * t, 1})), {batch * t});
  r.loss_sum = -sum(picked * reshape(r.mask, {batch * t}));
  r.loss = r.loss_sum / sum(r.mask);
  return r;
}

std::vector<int32_t> encode_prefix(const std::string& prefix, int64_t context) {
  std::vector<int32_t> r;
  size_t chars = 0;
  for (size_t i = 0; i < prefix.size(); ++chars) {
    const unsigned char c = static_cast<unsigned char>(prefix[i]);
    size_t len = 1;  // a UTF-8 sequence is one character (named whole in the error)
    if (c >= 0xC0) len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    len = std::min(len, prefix.size() - i);
    char lc = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    const int32_t t = len == 1 ? data::char_token(lc) : -1;
    if (t <= 0)
      throw ValueError(fmt::format("--prefix '{}': character '{}' at position {} is not a letter a-z (the words models "
                                   "know a-z; A-Z are lower-cased)",
                                   prefix, prefix.substr(i, len), chars + 1));
    r.push_back(t);
    i += len;
  }
  if (static_cast<int64_t>(r.size()) >= context)
    throw ValueError(fmt::format("--prefix '{}' has {} letters: the model's context {} leaves room for at most {}",
                                 prefix, r.size(), context, context - 1));
  return r;
}

int32_t sample_token(const float* logits, int64_t vocab, double temperature, std::mt19937_64& rng) {
  if (vocab < 1) throw ValueError("sample_token: no logits");
  if (!(temperature >= 0) || !std::isfinite(temperature))
    throw ValueError(fmt::format("--temperature must be >= 0 and finite, got {}", temperature));
  int64_t best = 0;
  for (int64_t k = 1; k < vocab; ++k)
    if (logits[k] > logits[best]) best = k;
  if (temperature == 0) return static_cast<int32_t>(best);
  std::vector<double> p(static_cast<size_t>(vocab));
  double total = 0;
  for (int64_t k = 0; k < vocab; ++k) total += p[k] = std::exp((double(logits[k]) - double(logits[best])) / temperature);
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  int64_t last = best;
  for (int64_t k = 0; k < vocab; ++k) {
    if (p[k] <= 0) continue;
    last = k;
    acc += p[k];
    if (acc > u) return static_cast<int32_t>(k);
  }
  return static_cast<int32_t>(last);
}

std::vector<std::string> sample_words(nn::Module& model, const LmSpec& spec, Backend& backend,
                                      const SampleOptions& o) {
  if (o.count < 1) throw ValueError(fmt::format("--count must be >= 1, got {}", o.count));
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    throw ValueError(fmt::format("--temperature must be >= 0 and finite, got {}", o.temperature));
  const std::vector<int32_t> prefix = encode_prefix(o.prefix, spec.context);
  const int64_t n = o.count, t_len = spec.context, v = spec.vocab;
  model.eval();
  Tensor x = input("x", {n, t_len}, DType::i32);
  Program p;
  p.add_output("logits", model.forward(x));
  auto exe = backend.compile(p);
  std::vector<float> rows(static_cast<size_t>(n * t_len), 0.f);  // boundary at 0 and as padding after the end
  std::vector<std::string> words(static_cast<size_t>(n), o.prefix);
  for (std::string& w : words)
    for (char& c : w)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  for (int64_t r = 0; r < n; ++r)
    for (size_t k = 0; k < prefix.size(); ++k) rows[r * t_len + 1 + k] = static_cast<float>(prefix[k]);
  std::vector<bool> done(static_cast<size_t>(n), false);
  std::mt19937_64 rng(o.seed);
  // position t's logits predict token t + 1; the last prediction (t = T - 1) gives a word's T-th letter
  for (int64_t t = static_cast<int64_t>(prefix.size()); t < t_len; ++t) {
    const std::vector<float> logits = exe->run({{"x", &rows}})[0];
    bool any = false;
    for (int64_t r = 0; r < n; ++r) {
      if (done[r]) continue;
      const int32_t tok = sample_token(logits.data() + (r * t_len + t) * v, v, o.temperature, rng);
      if (tok == 0) {
        done[r] = true;
        continue;
      }
      words[r] += data::token_char(tok);
      if (t + 1 < t_len) rows[r * t_len + t + 1] = static_cast<float>(tok);
      any = true;
    }
    if (!any) break;
  }
  return words;
}

}  // namespace sg::lm
