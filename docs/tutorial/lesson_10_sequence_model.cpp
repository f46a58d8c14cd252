// Lesson 10: a sequence model — a tiny character-level transformer, written as a module of modules.
//
// Lesson 7 trained an nn::Sequential on images. Text needs more: integer tokens, embeddings, attention that may only
// look back (causal), dropout that is on while training and off while generating, and a model that is not a chain
// of layers (a residual block, two inputs). This lesson writes one as torch users do: a class derived from
// sg::nn::Module whose members are layers (registered by name, so parameters are named by path as in a torch
// state_dict and a torch model's weights load: sg::train::load_state_dict), trains it with AdamW, a warmup-cosine
// learning-rate schedule and gradient clipping — all inside the one compiled train step — and generates text from
// an eval-mode program.
//
//   cmake --build build --target lesson_10_sequence_model && build/bin/lesson_10_sequence_model
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sg/shadergrad.h"

static void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) std::exit(1);
}

// The model: token + learned position embeddings, one pre-norm transformer block with causal self-attention,
// a final LayerNorm and a Linear head giving the next character's logits at every position.
struct TinyCharLM : sg::nn::Module {
  static constexpr int64_t kDim = 32, kHeads = 4, kContext = 16;
  sg::nn::Embedding tok, pos;
  sg::nn::TransformerEncoderLayer block;
  sg::nn::LayerNorm norm;
  sg::nn::Linear head;
  explicit TinyCharLM(int64_t vocab)
      : tok(vocab, kDim),
        pos(kContext, kDim),
        // d_model, nhead, dim_feedforward, dropout, activation, eps, batch_first, norm_first (pre-norm)
        block(kDim, kHeads, 4 * kDim, 0.1, "gelu", 1e-5, true, true),
        norm(kDim),
        head(kDim, vocab) {
    register_module("tok", tok), register_module("pos", pos), register_module("block", block);
    register_module("norm", norm), register_module("head", head);
  }
  // tokens: (B, T) i32 -> logits (B, T, vocab). The positions 0..T-1 come from iota: no host constant to feed.
  sg::Tensor forward(const sg::Tensor& tokens) override {
    const int64_t t = tokens.dim(1);
    sg::Tensor positions = sg::arange(t, sg::DType::i32);
    sg::Tensor h = tok(tokens) + pos(positions);                // (B, T, D) + (T, D): broadcast over the batch
    h = block.encode(h, {.is_causal = true});                    // position t attends to positions <= t only
    return head(norm(h));
  }
  std::string type_name() const override { return "TinyCharLM"; }
};

int main() {
  // The data: a few sentences, characters as tokens. Token 0 is the end of a sentence ('.').
  const std::string text = "the cat sat on the mat. the dog sat on the log. a cat and a dog met on a mat. ";
  std::string vocab = ".";
  for (char c : text)
    if (vocab.find(c) == std::string::npos) vocab += c;
  const int64_t V = static_cast<int64_t>(vocab.size()), T = TinyCharLM::kContext, B = 8;
  std::printf("%lld characters, vocabulary of %lld\n", (long long)text.size(), (long long)V);

  TinyCharLM model(V);
  sg::nn::Rng rng(0);
  model.build(rng);
  std::printf("%lld parameters, e.g. %s\n", (long long)model.num_parameters(),
              model.state_dict()[2].first.c_str());  // "block.self_attn.in_proj_weight": torch's name

  // The train step. Integer inputs are i32 tensors; like every input they are fed as floats (exact up to 2^24).
  // Cross-entropy over every position: logits (B*T, V) against the next characters (B*T).
  sg::Tensor x = sg::input("tokens", {B, T}, sg::DType::i32);
  sg::Tensor y = sg::input("targets", {B * T}, sg::DType::i32);
  sg::Tensor loss = sg::cross_entropy(sg::reshape(model(x), {B * T, V}), y);
  const int64_t steps = 150;
  auto adamw = sg::make_adamw({.lr = 1e-2, .schedule = sg::LRSchedule::warmup_cosine(15, steps)});
  sg::Program step = sg::make_train_step(loss, model.parameters(), *adamw,
                                         sg::TrainStepOptions{.clip_grad_norm = 1.0});

  // Generation: an eval-mode graph (dropout off), the logits of one context. model.eval() before building it, as
  // in torch; model.train() after, so graphs built later train again.
  model.eval();
  sg::Tensor context = sg::input("context", {1, T}, sg::DType::i32);
  sg::Program generate;
  generate.add_output("logits", model(context));
  model.train();

  auto backend = sg::make_backend({.kind = "auto"}).backend;
  auto train_exe = backend->compile(step);
  auto gen_exe = backend->compile(generate);
  std::printf("backend %s: %d kernels per train step\n", backend->name().c_str(), train_exe->kernels_per_step());

  // Batches: B windows of T+1 characters at random offsets; inputs are the first T, targets the next T.
  auto id = [&](char c) { return static_cast<float>(vocab.find(c)); };
  sg::nn::Rng offsets(1);
  std::vector<float> tokens(B * T), targets(B * T);
  double first = 0, last = 0;
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<float> start = offsets.uniform(B, 0, static_cast<double>(text.size() - T - 1));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const size_t at = static_cast<size_t>(start[b]) + static_cast<size_t>(t);
        tokens[b * T + t] = id(text[at]);
        targets[b * T + t] = id(text[at + 1]);
      }
    const double l = train_exe->run({{"tokens", &tokens}, {"targets", &targets}})[0][0];
    if (s == 0) first = l;
    if (s >= steps - 10) last += l / 10;
    if (s % 50 == 0 || s == steps - 1) std::printf("step %3lld: loss %.4f nats per character\n", (long long)s, l);
  }

  // Greedy generation: the most likely next character, appended, the context sliding along. The last n <= T
  // characters sit at positions 0..n-1 and the prediction is read at position n-1: the causal mask keeps the
  // padding after it out of that position's attention.
  std::string out = "the c";
  std::vector<float> ctx(T, 0.f);
  while (out.size() < 40) {
    const size_t n = std::min<size_t>(out.size(), T);
    for (size_t t = 0; t < n; ++t) ctx[t] = id(out[out.size() - n + t]);
    const std::vector<float> logits = gen_exe->run({{"context", &ctx}})[0];
    const float* row = &logits[(n - 1) * static_cast<size_t>(V)];
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (row[v] > row[best]) best = v;
    out += vocab[static_cast<size_t>(best)];
  }
  std::printf("greedy completion of \"the c\": \"%s\"\n", out.c_str());
  expect(std::abs(first - std::log(static_cast<double>(V))) < 0.5, "the first loss is near ln(vocab): uniform guesses");
  expect(last < 0.5 * first, "the mean loss of the last 10 steps is less than half the first");
  expect(text.find(out.substr(0, 12)) != std::string::npos, "the completion's first 12 characters are in the text");
  std::printf("lesson 10 done\n");
  return 0;
}
