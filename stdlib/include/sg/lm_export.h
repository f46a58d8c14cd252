// shadergrad — the character language models (sg/lm.h) as web bundles: `shadergrad export --model charlm|lstm`, the
// bundle the word-completion page (examples/web/words/) runs and fine-tunes.
//
//   sg::lm::LmExportOptions o;                 // charlm, LmSpec defaults, fresh init; or o.load = "charlm.safetensors"
//   sg::web::write_bundle(sg::lm::lm_bundle_spec(o), {}, "bundle");
//
// Programs (docs/BUNDLE.md's format; the names are the page's contract):
//   infer  input  "x" (infer_batch, context) i32 tokens (data::char_token; 0 = the word boundary)
//          output "logits" (infer_batch, context, vocab) f32: position t's scores of token t + 1
//          charlm also "attn/L" for every block L = 0..layers-1: (infer_batch, heads, context, context) f32, the
//          causal self-attention weights of each head (row t: how much position t attends to positions 0..t; each row
//          sums to 1), nn::TransformerEncoderLayer::encode_with_weights with average_attn_weights = false
//   train  inputs "x", "y" (batch, context) i32 and "mask" (batch, context) f32 (data::WordRows); output "loss"
//          (lm::lm_loss: mean nats per predicted character); one AdamW step (torch.optim.AdamW, constant lr) after
//          global-norm gradient clipping, as `shadergrad train --model charlm|lstm` steps (without its schedule)
#pragma once

#include <cstdint>
#include <string>

#include "sg/lm.h"
#include "sg/web_export.h"

namespace sg::lm {

struct LmExportOptions {
  /// The model when `load` is empty (model "charlm" or "lstm" and its sizes); with `load`, the checkpoint's metadata
  /// gives it (LmSpec::from_metadata) and this one's model must agree (or be left as the checkpoint's).
  LmSpec spec{};
  std::string load{};          ///< a `shadergrad train --model charlm|lstm --save` checkpoint: the initial parameters
  int64_t batch = 16;          ///< train step rows
  int64_t infer_batch = 8;     ///< infer rows (the page's completions at once)
  double lr = 1e-3;            ///< AdamW learning rate (constant: fine-tuning)
  double weight_decay = 1e-2;  ///< AdamW weight decay (torch's default, train's)
  double clip_grad_norm = 1.0; ///< global L2 norm clipping before the update (train's default); 0 = none
  uint64_t seed = 0;           ///< parameter init (without `load`) and the check rows
  int check_steps = 3;         ///< train steps in the checks (infer, N train steps, infer)
};

/// The bundle of a language model: programs "infer" and "train" above; checks: infer, check_steps train steps on
/// one fixed batch, infer, with the CPU reference's outputs (charlm: every block's self_attn.in_proj_bias judged with
/// an absolute tolerance of 2 lr check_steps, web::PersistentTolerance: its key third's gradient is zero in exact
/// arithmetic; and the outputs judged with floor 1e-2, web::OutputTolerance: a logit near zero misses the f64
/// reference by a few f32 rounding units of the logits' scale on every f32 backend, docs/BUNDLE.md "Checks"). The
/// check rows are words of random letters (2 to
/// min(8, context - 1) letters, uniform, from a 32-bit Mersenne twister seeded with `seed`: bit-exact everywhere) as
/// data::make_word_rows makes them. metadata (strings): dataset "words", vocab (the token characters in order,
/// ".abcdefghijklmnopqrstuvwxyz"), context, batch, infer_batch, lm_model, describe (LmSpec::describe), attention (a
/// JSON array of the attention outputs, [] for lstm), heads, layers, optimizer, seed, initial_parameters,
/// checkpoint_model and checkpoint_structure_hash (what `shadergrad train --save` records for this model, so the
/// page's checkpoint loads in `shadergrad sample --load`), checkpoint_metadata (a JSON object: LmSpec::metadata(), the
/// keys the page adds to its checkpoint so `sample` can rebuild the model), and checkpoint_validation_loss with a
/// checkpoint that records it. Throws ValueError for batch or infer_batch < 1, lr <= 0, a negative weight decay, clip
/// or check_steps, an invalid spec (LmSpec::validate), a checkpoint of another model than spec.model asks; IOError
/// naming the file for a checkpoint that is not a language model's.
web::BundleSpec lm_bundle_spec(const LmExportOptions& options);

}  // namespace sg::lm
