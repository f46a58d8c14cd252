// shadergrad — the language models' web bundles (sg/lm_export.h): infer (logits and charlm's attention maps) and an
// AdamW train step, with the CPU reference's checks and the metadata the word-completion page needs.
#include "sg/lm_export.h"

#include <memory>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sg/error.h"
#include "sg/safetensors.h"
#include "sg/train.h"

namespace sg::lm {

using nlohmann::json;

namespace {

/// CharTransformer::forward with every block's per-head attention weights (the same graph for the logits: the blocks
/// are encoded with encode_with_weights, whose output is encode's).
Tensor charlm_forward_with_attention(CharTransformer& m, const Tensor& x, std::vector<Tensor>& attn) {
  const int64_t t = x.dim(1);
  Tensor h = m.tok_emb.forward(x) + m.pos_emb.forward(iota({t}, 0, DType::i32));
  nn::AttentionOptions causal;
  causal.is_causal = true;
  causal.need_weights = true;
  causal.average_attn_weights = false;
  for (auto& [name, block] : m.blocks.children()) {
    nn::AttentionOutput o = static_cast<nn::TransformerEncoderLayer*>(block)->encode_with_weights(h, causal);
    h = o.output;
    attn.push_back(o.weights);
  }
  return m.head.forward(m.ln_f.forward(h));
}

}  // namespace

web::BundleSpec lm_bundle_spec(const LmExportOptions& opt) {
  if (opt.batch < 1 || opt.infer_batch < 1)
    throw ValueError(fmt::format("export: --batch and --infer-batch must be >= 1, got {} and {}", opt.batch,
                                 opt.infer_batch));
  if (!(opt.lr > 0)) throw ValueError(fmt::format("export: --lr must be > 0, got {}", opt.lr));
  if (!(opt.weight_decay >= 0) || !(opt.clip_grad_norm >= 0) || opt.check_steps < 0)
    throw ValueError("export: weight decay, gradient clipping and check steps must not be negative");
  LmSpec spec = opt.spec;
  std::map<std::string, std::string> ck_meta;
  if (!opt.load.empty()) {
    const io::SafetensorsFile f = io::load_safetensors(opt.load);
    ck_meta = f.metadata;
    const auto it = f.metadata.find("model");
    if (it == f.metadata.end() || !is_lm_model(it->second))
      throw IOError(fmt::format("{}: not a language model checkpoint (metadata model '{}'; `shadergrad train --model "
                                "charlm|lstm --save` writes one)", opt.load,
                                it == f.metadata.end() ? std::string() : it->second));
    if (it->second != opt.spec.model)
      throw ValueError(fmt::format("export --model {}: {} is a {} checkpoint", opt.spec.model, opt.load, it->second));
    spec = LmSpec::from_metadata(f.metadata, opt.load);
  }
  spec.validate();
  std::shared_ptr<nn::Module> model = make_lm(spec);
  nn::Rng rng(opt.seed);
  model->build(rng);
  model->eval();

  web::BundleSpec b;
  b.model = spec.model;
  json attention = json::array();
  {
    Tensor x = input("x", {opt.infer_batch, spec.context}, DType::i32);
    Program infer;
    if (auto* tr = dynamic_cast<CharTransformer*>(model.get())) {
      std::vector<Tensor> attn;
      infer.add_output("logits", charlm_forward_with_attention(*tr, x, attn));
      for (size_t l = 0; l < attn.size(); ++l) {
        const std::string name = fmt::format("attn/{}", l);
        infer.add_output(name, attn[l]);
        attention.push_back(name);
      }
    } else {
      infer.add_output("logits", model->forward(x));
    }
    b.programs.push_back({"infer", std::move(infer)});
  }
  std::shared_ptr<Optimizer> adamw = make_adamw({.lr = opt.lr, .weight_decay = opt.weight_decay});
  {
    LmLoss l = lm_loss(*model, spec, opt.batch);
    b.programs.push_back({"train", make_train_step(l.loss, model->parameters(), *adamw,
                                                   TrainStepOptions{.clip_grad_norm = opt.clip_grad_norm})});
  }
  std::string vocab;
  for (int32_t k = 0; k < spec.vocab; ++k) vocab += data::token_char(k);
  json ckm = json::object();
  for (auto& [k, v] : spec.metadata()) ckm[k] = v;
  b.metadata = {{"dataset", "words"},
                {"vocab", vocab},
                {"context", std::to_string(spec.context)},
                {"batch", std::to_string(opt.batch)},
                {"infer_batch", std::to_string(opt.infer_batch)},
                {"lm_model", spec.model},
                {"describe", spec.describe()},
                {"attention", attention.dump()},
                {"heads", std::to_string(spec.model == "charlm" ? spec.heads : 0)},
                {"layers", std::to_string(spec.layers)},
                {"optimizer", fmt::format("adamw(lr={}, weight_decay={}), clip_grad_norm {}", opt.lr, opt.weight_decay,
                                          opt.clip_grad_norm)},
                {"seed", std::to_string(opt.seed)},
                {"initial_parameters", opt.load.empty() ? "fresh init (seed)" : opt.load},
                {"checkpoint_model", spec.model},
                {"checkpoint_structure_hash", model->structure_hash()},
                {"checkpoint_metadata", ckm.dump()}};
  if (auto it = ck_meta.find("validation_loss"); it != ck_meta.end())
    b.metadata["checkpoint_validation_loss"] = it->second;
  // the key third of every in_proj_bias has a zero gradient in exact arithmetic: AdamW moves it by rounding noise
  // (docs/BUNDLE.md "Checks"), about lr a step at most in each run
  if (spec.model == "charlm" && opt.check_steps > 0)
    for (int64_t l = 0; l < spec.layers; ++l)
      b.persistent_tolerance[fmt::format("blocks.{}.self_attn.in_proj_bias", l)] = {
          2 * opt.lr * opt.check_steps,
          "the key bias's gradient is zero in exact arithmetic (softmax ignores a shift of a query's scores): AdamW moves "
          "it by each backend's rounding noise, up to about lr per step"};
  // a logit near zero is the near-cancelling result of the whole f32 forward: every f32 backend misses the reference
  // there by a few rounding units of the logits' scale, more than the default floor allows (docs/BUNDLE.md "Checks")
  b.outputs_tolerance = web::OutputTolerance{
      1e-4, 1e-2,
      "a logit near zero is the near-cancelling result of the whole f32 forward (embeddings, LayerNorms or LSTM cells, "
      "attention, MLPs): every f32 backend misses the f64-accumulated reference there by a few f32 rounding units of "
      "the logits' largest magnitude (charlm and lstm, batch 32, context 64: |a - e| up to 4.9e-7 of it, 8 units, on "
      "the native gles, vulkan and cpu-simd backends and in Chromium alike), beyond the 1e-7 of it that floor 1e-3 "
      "allows; floor 1e-2 allows 1e-6 of it (elements above 1e-2 of the scale are still judged to 1e-4 of themselves)"};
  if (!opt.load.empty()) {
    const std::string path = opt.load;
    b.prepare = [model, path](Backend& be) { train::load_checkpoint(path, *model, be); };
  }

  // the check rows: words of random letters, bit-exact everywhere (mt19937 is specified; <random>'s distributions
  // are not)
  std::mt19937 gen(static_cast<uint32_t>(opt.seed ^ (opt.seed >> 32)));
  const int64_t longest = std::max<int64_t>(1, std::min<int64_t>(8, spec.context - 1));
  auto words = [&](int64_t n) {
    std::vector<std::string> w(static_cast<size_t>(n));
    for (std::string& s : w) {
      const int64_t len = std::min<int64_t>(longest, 2 + static_cast<int64_t>(gen() % 7));
      for (int64_t k = 0; k < len; ++k) s += static_cast<char>('a' + gen() % 26);
    }
    return w;
  };
  const data::WordRows ri = data::make_word_rows(words(opt.infer_batch), spec.context);
  const data::WordRows rt = data::make_word_rows(words(opt.batch), spec.context);
  b.checks.push_back({"infer", {{"x", ri.x}}});
  for (int s = 0; s < opt.check_steps; ++s) b.checks.push_back({"train", {{"x", rt.x}, {"y", rt.y}, {"mask", rt.mask}}});
  b.checks.push_back({"infer", {{"x", ri.x}}});
  return b;
}

}  // namespace sg::lm
