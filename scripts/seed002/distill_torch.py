#!/usr/bin/python3
"""Seed 002's distillation experiment in PyTorch (its own code: distill_loss with T = 4, alpha = 0.9; students
make_cnn(8, 16, 32) alone 150 epochs, distilled 150 epochs, distilled + the 400 unlabeled pool images 90 epochs;
seeds 0..N-1) on the seed's split, with the seed's own teacher (torch.manual_seed(0), 40 epochs) and/or shadergrad's
teacher loaded from a safetensors file. Separates "our distillation differs" from "the teacher differs" and gives
the peer's figures on this torch build for docs/RESULTS.md.

  /usr/bin/python3 scripts/seed002/distill_torch.py [--ours DIR/teacher_model_0.safetensors] [--skip-torch-teacher]
      [--seeds 5] [--torch-teachers K] > bench/results/seed002_distill_torch.json
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F

from prune_check import read_safetensors
from seed002_torch import load, make_cnn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours")
    ap.add_argument("--skip-torch-teacher", action="store_true")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epoch-scale", type=float, default=1.0)
    ap.add_argument("--torch-teachers", type=int, default=1,
                    help="torch teachers of seeds 0..K-1 (torch.manual_seed(k), shuffling seed k); the students of "
                         "teachers k >= 1 are distilled only (alone does not depend on the teacher)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    X, y = load()
    order = torch.randperm(len(X), generator=torch.Generator().manual_seed(0))
    train_idx, pool_idx, test_idx = order[:600], order[600:1000], order[1000:]
    E = lambda n: max(1, round(n * a.epoch_scale))  # noqa: E731

    def evaluate(m):
        m.eval()
        with torch.no_grad():
            return (m(X[test_idx]).argmax(1) == y[test_idx]).float().mean().item()

    def train(model, epochs, lr=2e-3, seed=0, loss_fn=None, data=train_idx):  # seed 002's train()
        g = torch.Generator().manual_seed(seed)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        for _ in range(epochs):
            model.train()
            perm = data[torch.randperm(len(data), generator=g)]
            for i in range(0, len(perm), 64):
                idx = perm[i:i + 64]
                out = model(X[idx])
                loss = loss_fn(out, idx) if loss_fn else F.cross_entropy(out, y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        return model

    labeled = torch.zeros(len(X))
    labeled[train_idx] = 1
    T, ALPHA = 4.0, 0.9
    more = torch.cat([train_idx, pool_idx])

    def study(large, with_alone=True):
        large.eval()
        with torch.no_grad():
            teacher_logits = large(X)

        def distill_loss(out, idx):  # seed 002's distill_loss
            soft = F.kl_div(F.log_softmax(out / T, dim=1), F.softmax(teacher_logits[idx] / T, dim=1), reduction="batchmean")
            hard = (F.cross_entropy(out, y[idx], reduction="none") * labeled[idx]).mean()
            return ALPHA * T * T * soft + (1 - ALPHA) * hard

        def run(seed, **kw):
            torch.manual_seed(seed)
            return evaluate(train(make_cnn(8, 16, 32), seed=seed, **kw))

        r = {"teacher": evaluate(large),
             "alone": [run(s, epochs=E(150)) for s in range(a.seeds)] if with_alone else [],
             "distilled": [run(s, epochs=E(150), loss_fn=distill_loss) for s in range(a.seeds)],
             "distilled_unlabeled": [run(s, epochs=E(90), loss_fn=distill_loss, data=more) for s in range(a.seeds)]}
        for k in ("alone", "distilled", "distilled_unlabeled") if with_alone else ("distilled", "distilled_unlabeled"):
            r[k + "_mean_sd"] = [statistics.mean(r[k]), statistics.stdev(r[k]) if len(r[k]) > 1 else 0.0]
        return r

    res = {"torch": torch.__version__, "seeds": a.seeds, "epoch_scale": a.epoch_scale}
    if not a.skip_torch_teacher:
        torch.manual_seed(0)
        res["torch_teacher"] = study(train(make_cnn(64, 128, 256), E(40)))
        for k in range(1, a.torch_teachers):
            torch.manual_seed(k)
            res[f"torch_teacher_{k}"] = study(train(make_cnn(64, 128, 256), E(40), seed=k), with_alone=False)
    if a.ours:
        m = make_cnn(64, 128, 256)
        m.load_state_dict(read_safetensors(a.ours))
        res["shadergrad_teacher"] = study(m)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
