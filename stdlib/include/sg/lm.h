// shadergrad — character language models on the words dataset: `shadergrad train --model charlm|lstm` and
// `shadergrad sample`.
//
//   sg::lm::LmSpec spec;                                  // charlm: d_model 64, 2 blocks, 4 heads, context 32
//   auto model = sg::lm::make_lm(spec);
//   sg::nn::Rng rng(0);
//   model->build(rng);
//   sg::lm::LmLoss l = sg::lm::lm_loss(*model, spec, 64); // inputs "x", "y" (64, 32) i32 and "mask" (64, 32) f32
//   sg::Program step = sg::make_train_step(l.loss, model->parameters(), *opt);
//
// The data are sg::data::WordRows (datasets.h): one word per row, token 0 the word boundary ('.'), 1..26 a..z, padded
// positions masked out of the loss, so the loss is the mean negative log-likelihood in nats per character (the end
// boundary counts as a character), makemore's measure. bench/charlm_torch.py is the same model, data, batch order
// and schedule in PyTorch (the reference validation loss).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sg/backend.h"
#include "sg/datasets.h"
#include "sg/nn.h"

namespace sg::lm {

/// The models `shadergrad train` builds with make_lm (the others are image classifiers, nn::make_model).
inline const std::vector<std::string> kLmModels = {"charlm", "lstm"};
/// True for "charlm" and "lstm".
bool is_lm_model(const std::string& name);

/// The hyper-parameters that fix a language model's structure; train --save writes them into the checkpoint's
/// metadata (metadata()) and `shadergrad sample` rebuilds the model from them (from_metadata()).
struct LmSpec {
  std::string model = "charlm";  ///< charlm | lstm
  int64_t vocab = data::kCharVocab;
  int64_t context = 32;          ///< T: the positions of a row (a word of up to T - 1 letters fits with its end)
  int64_t d_model = 64;          ///< charlm: the width; lstm: the embedding size
  int64_t layers = 2;            ///< charlm: transformer blocks; lstm: stacked LSTM layers
  int64_t heads = 4;             ///< charlm: attention heads (d_model must be divisible by heads)
  int64_t dim_feedforward = 0;   ///< charlm: the MLP's hidden width; 0 = 4 * d_model
  int64_t hidden = 128;          ///< lstm: hidden_size
  /// Throws ValueError naming the field: an unknown model, sizes < 1 (context < 2), d_model not divisible by heads,
  /// vocab other than data::kCharVocab.
  void validate() const;
  /// dim_feedforward, or 4 * d_model when 0.
  int64_t ff() const { return dim_feedforward > 0 ? dim_feedforward : 4 * d_model; }
  /// {"lm_model", ...}, {"context", "32"}, ...: every field as checkpoint metadata (keys prefixed "lm_" where generic).
  std::vector<std::pair<std::string, std::string>> metadata() const;
  /// The spec a checkpoint's metadata describes. Throws IOError naming `path` and the key when a key is missing or not
  /// a number, and what validate() throws as IOError.
  static LmSpec from_metadata(const std::map<std::string, std::string>& meta, const std::string& path);
  /// "charlm(d_model=64, layers=2, heads=4, dim_feedforward=256, context=32)" / "lstm(embedding=64, hidden=128,
  /// layers=2, context=32)".
  std::string describe() const;
};

/// The character transformer (GPT-style, pre-LN; Radford et al. 2019 without dropout), a module tree with the
/// state_dict names of bench/charlm_torch.py's CharTransformer:
///   tok_emb  nn::Embedding(vocab, d_model)      (N(0, 1), torch's init)
///   pos_emb  nn::Embedding(context, d_model)    learned positions: h = tok_emb(x) + pos_emb(arange(T))
///   blocks   Sequential of `layers` nn::TransformerEncoderLayer(d_model, heads, dim_feedforward, dropout 0, "gelu",
///            1e-5, batch_first, norm_first = true), each called with is_causal (position t attends to 0..t)
///   ln_f     nn::LayerNorm(d_model)
///   head     nn::Linear(d_model, vocab)
/// forward(x): x (N, T) i32 tokens, T <= context -> logits (N, T, vocab) f32. Position t's logits depend on x[:, 0..t]
/// only. Throws ShapeError for another rank or T > context, ValueError for a non-i32 x, both naming "CharTransformer".
class CharTransformer final : public nn::Module {
 public:
  explicit CharTransformer(const LmSpec& spec);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "CharTransformer"; }
  nn::Embedding tok_emb, pos_emb;
  nn::Sequential blocks;
  nn::LayerNorm ln_f;
  nn::Linear head;

 private:
  LmSpec spec_;
};

/// The LSTM character model, bench/charlm_torch.py's CharLSTM:
///   embedding nn::Embedding(vocab, d_model) (N(0, 1))
///   lstm      nn::LSTM(d_model, hidden, layers, bias, batch_first = true)
///   head      nn::Linear(hidden, vocab)
/// forward(x): x (N, T) i32 -> logits (N, T, vocab), the state starting at zeros. Errors as CharTransformer's.
class CharLSTM final : public nn::Module {
 public:
  explicit CharLSTM(const LmSpec& spec);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "CharLSTM"; }
  nn::Embedding embedding;
  nn::LSTM lstm;
  nn::Linear head;

 private:
  LmSpec spec_;
};

/// The model `spec` describes (not built: call build(rng)). Throws as LmSpec::validate.
std::unique_ptr<nn::Module> make_lm(const LmSpec& spec);

/// The loss of a batch of WordRows: inputs "x", "y" (batch, context) i32 and "mask" (batch, context) f32;
///   nll[n, t] = -log_softmax(model(x))[n, t, y[n, t]]
///   loss_sum  = sum(nll * mask)          (nats over the batch's predicted characters; the eval program outputs it)
///   loss      = loss_sum / sum(mask)     (torch's F.cross_entropy(..., ignore_index) over the unmasked positions)
/// Every node names `loc` (the caller's line).
struct LmLoss {
  Tensor x, y, mask, logits, loss_sum, loss;
};
LmLoss lm_loss(nn::Module& model, const LmSpec& spec, int64_t batch, loc_t loc = loc_t::current());

/// The prefix of generated words as tokens: ASCII A-Z are lower-cased (the dataset's rule), then every character must
/// be a-z. Throws ValueError naming the character (as written, a UTF-8 sequence whole) and its 1-based position, or a
/// prefix of `context` letters or more (a generated word holds at most `context` letters).
std::vector<int32_t> encode_prefix(const std::string& prefix, int64_t context);

/// One draw from softmax(logits / temperature) (host side, f64): with temperature > 0, u = (rng() >> 11) * 2^-53
/// (one std::mt19937_64 draw, uniform in [0, 1)) and the token is the first k whose cumulative probability exceeds u
/// (the last token with a nonzero probability if rounding leaves none); temperature 0 is the argmax (the first
/// maximum, no draw). Throws ValueError for a negative or NaN temperature or empty logits.
int32_t sample_token(const float* logits, int64_t vocab, double temperature, std::mt19937_64& rng);

struct SampleOptions {
  std::string prefix;         ///< every word starts with it (encode_prefix)
  int64_t count = 10;         ///< words generated (one batch of `count` rows)
  double temperature = 1.0;   ///< 0 = greedy (argmax)
  uint64_t seed = 0;          ///< the sampler's std::mt19937_64 seed
};
/// Generates `count` words with `model` (built for `spec`, parameters in `backend`): the rows start as
/// [boundary, prefix...]; at each position t the program (model in eval mode on (count, context) rows) gives the
/// logits of position t, and every unfinished row draws its next token with sample_token, rows in order, one shared
/// generator seeded with `seed`; a row ends at the boundary token or after `context` letters (prefix included). The
/// same (checkpoint, options) give the same words on every run and backend (up to a backend's rounding of near-ties).
/// Sets model.eval(). Returns the words (prefix included, the boundary not). Throws ValueError: count < 1, a bad prefix or temperature.
std::vector<std::string> sample_words(nn::Module& model, const LmSpec& spec, Backend& backend,
                                      const SampleOptions& options);

}  // namespace sg::lm
