#!/usr/bin/python3
"""The PyTorch reference of `shadergrad train --model charlm|lstm` (issue 37): the same model, data pipeline,
hyper-parameters, batch order and schedule, printing the validation loss (mean nats per character) after the run.

Run with Debian's torch (1.13):  /usr/bin/python3 bench/charlm_torch.py [--model charlm|lstm] [--epochs 2] ...
The options and defaults are those of `shadergrad train --model M` (sg::train::lm_defaults); only the initial values
differ (torch's generator; the same distributions), so the two validation losses agree to the run-to-run spread of the
initialisation, not bit for bit.

Data (sg::data::load_words, make_word_rows; stdlib/include/sg/datasets.h): /usr/share/dict/words (Debian `wamerican`),
each line lower-cased in ASCII, kept iff every byte is a-z, deduplicated, sorted by bytes; a word is a validation word
iff FNV-1a-64(word) % 10 == 0. Tokens: 0 = the word boundary '.', 1..26 = a..z. Row of word w with context T:
x = [0, w...][:T], y = [w..., 0][:T], positions past the end padded (x = y = 0) and left out of the loss
(ignore_index). Epoch e (1-based) visits the training rows in the order of sg::data::seeded_permutation(n, seed + e - 1)
(Fisher-Yates with std::mt19937_64, reimplemented below bit for bit), batches of `batch` rows, the last one partial.
Schedule: torch.optim.AdamW(lr, weight_decay 0.01) with LambdaLR of sg::LRSchedule::warmup_cosine, stepped after every
optimizer step; torch.nn.utils.clip_grad_norm_(params, clip) before the step.
"""
import argparse
import json
import math
import re
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MASK64 = (1 << 64) - 1


class MT19937_64:
    """std::mt19937_64 (the C++ standard's parameters), for sg::data::seeded_permutation's batch order."""

    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & MASK64
        for i in range(1, 312):
            self.mt[i] = (6364136223846793005 * (self.mt[i - 1] ^ (self.mt[i - 1] >> 62)) + i) & MASK64
        self.index = 312

    def _twist(self):
        mt = self.mt
        for i in range(312):
            x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            mt[i] = mt[(i + 156) % 312] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK64


def seeded_permutation(n, seed):
    p = list(range(n))
    rng = MT19937_64(seed)
    for i in range(n - 1, 0, -1):
        j = rng() % (i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def fnv1a64(b):
    h = 14695981039346656037
    for c in b:
        h = ((h ^ c) * 1099511628211) & MASK64
    return h


def load_words(path="/usr/share/dict/words"):
    words = set()
    with open(path, "rb") as f:
        for line in f.read().split(b"\n"):
            w = line.lower()  # bytes.lower: ASCII only, as the C++ rule
            if w and re.fullmatch(rb"[a-z]+", w):
                words.add(w)
    words = sorted(words)
    train = [w for w in words if fnv1a64(w) % 10 != 0]
    val = [w for w in words if fnv1a64(w) % 10 == 0]
    return train, val


def word_rows(words, context):
    n = len(words)
    x = torch.zeros(n, context, dtype=torch.long)
    y = torch.full((n, context), -100, dtype=torch.long)  # -100: F.cross_entropy's ignore_index
    for i, w in enumerate(words):
        s = [0] + [c - 96 for c in w] + [0]
        k = min(context, len(s) - 1)
        x[i, :k] = torch.tensor(s[:k])
        y[i, :k] = torch.tensor(s[1:k + 1])
    return x, y


class CharTransformer(nn.Module):
    """sg::lm::CharTransformer: token + learned position embeddings, pre-LN causal blocks, final LayerNorm, head."""

    def __init__(self, vocab, context, d_model, layers, heads, ff):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=True) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, x):
        t = x.shape[1]
        h = self.tok_emb(x) + self.pos_emb(torch.arange(t, device=x.device))
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)  # True = may not attend
        for b in self.blocks:
            h = b(h, src_mask=causal)
        return self.head(self.ln_f(h))


class CharLSTM(nn.Module):
    """sg::lm::CharLSTM: embedding, LSTM (batch_first), head."""

    def __init__(self, vocab, d_model, hidden, layers):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_model)
        self.lstm = nn.LSTM(d_model, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x):
        return self.head(self.lstm(self.embedding(x))[0])


def warmup_cosine(base_lr, warmup, total, min_lr):
    """sg::LRSchedule::warmup_cosine as LambdaLR's factor (autodiff.h)."""
    def f(t):
        if t < warmup:
            return (t + 1) / warmup
        if total == warmup:
            return min_lr / base_lr
        c = min(t - warmup, total - warmup) / (total - warmup)
        return (min_lr + (base_lr - min_lr) * (1 + math.cos(math.pi * c)) / 2) / base_lr
    return f


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="charlm", choices=["charlm", "lstm"])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=None, help="default 3e-3 (charlm), 1e-2 (lstm)")
    ap.add_argument("--min-lr", type=float, default=None, help="default lr / 10")
    ap.add_argument("--warmup-steps", type=int, default=100)
    ap.add_argument("--clip-grad-norm", type=float, default=1.0)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--context", type=int, default=32)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--train-limit", type=int, default=0, help="the first N training words (0: all)")
    ap.add_argument("--test-limit", type=int, default=0, help="the first N validation words (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--json", default="", help="write the result as JSON to this file")
    a = ap.parse_args()
    if a.lr is None:
        a.lr = 1e-2 if a.model == "lstm" else 3e-3
    if a.min_lr is None:
        a.min_lr = a.lr / 10
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    train_words, val_words = load_words()
    if a.train_limit > 0:
        train_words = train_words[:a.train_limit]
    if a.test_limit > 0:
        val_words = val_words[:a.test_limit]
    xt, yt = word_rows(train_words, a.context)
    xv, yv = word_rows(val_words, a.context)
    vocab = 27
    if a.model == "charlm":
        model = CharTransformer(vocab, a.context, a.d_model, a.layers, a.heads, 4 * a.d_model)
    else:
        model = CharLSTM(vocab, a.d_model, a.hidden, a.layers)
    n = len(train_words)
    batch = min(a.batch, n)
    steps_per_epoch = (n + batch - 1) // batch
    total = a.epochs * steps_per_epoch
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(a.lr, a.warmup_steps, total, a.min_lr))
    params = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__}: {a.model} ({params} parameters) on words ({n} train / {len(val_words)} "
          f"validation words, {int((yv >= 0).sum())} validation characters), batch {batch}, {total} steps")

    def validation_loss():
        model.eval()
        nats = 0.0
        with torch.no_grad():
            for s in range(0, len(val_words), 512):
                logits = model(xv[s:s + 512])
                nats += F.cross_entropy(logits.reshape(-1, vocab), yv[s:s + 512].reshape(-1), ignore_index=-100,
                                        reduction="sum").item()
        model.train()
        return nats / int((yv >= 0).sum())

    history = []
    t0 = time.time()
    for epoch in range(1, a.epochs + 1):
        order = torch.tensor(seeded_permutation(n, a.seed + epoch - 1))
        losses = []
        for s in range(0, n, batch):
            idx = order[s:s + batch]
            logits = model(xt[idx])
            loss = F.cross_entropy(logits.reshape(-1, vocab), yt[idx].reshape(-1), ignore_index=-100)
            opt.zero_grad()
            loss.backward()
            if a.clip_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_grad_norm)
            opt.step()
            sched.step()
            losses.append(loss.item())
        v = validation_loss()
        history.append({"epoch": epoch, "train_loss": sum(losses) / len(losses), "validation_loss": v})
        print(f"epoch {epoch}/{a.epochs}: train loss {history[-1]['train_loss']:.4f}, validation loss {v:.4f} "
              f"nats/char ({time.time() - t0:.1f}s)", flush=True)
    print(f"validation_loss {history[-1]['validation_loss']:.4f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "args": vars(a), "steps": total, "parameters": params, "history": history,
                       "validation_loss": history[-1]["validation_loss"], "torch": torch.__version__}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
