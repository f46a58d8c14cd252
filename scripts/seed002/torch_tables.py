#!/usr/bin/python3
"""Seed 002's own PyTorch code for the pruning tables (teacher, sparsity sweep, structured pruning) and the
iterative pruning that bench_seed002 adds, over torch seeds: teacher seed S = torch.manual_seed(S) before
make_cnn(64, 128, 256) and the shuffling generator seeded S, fine-tuning with seed S, the from-scratch control with
torch.manual_seed(S) and seed S (seed 002 ran S = 0 only). Gives the peer's seed-to-seed spread that the single
figures seed 002 printed lack: docs/RESULTS.md compares shadergrad's 5-seed means with it.

  /usr/bin/python3 scripts/seed002/torch_tables.py --seeds 5 [--epoch-scale 1] > bench/results/seed002_torch_tables.json

Prints one JSON object: torch version, seeds, teacher accuracies, and per row lists over the seeds.
"""
import argparse
import copy
import json

import torch
import torch.nn.functional as F
import torch.nn.utils.prune as prune
from torch import nn

from seed002_torch import load, make_cnn

SWEEP = [0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99]
SLIM = [0.25, 0.5, 0.75]


def kept(layer):
    return layer.weight_mask.flatten(1).any(dim=1).nonzero().flatten()


def slim_model(model, amount):  # seed 002's slim()
    masked = copy.deepcopy(model)
    for i in (0, 3, 7):
        prune.ln_structured(masked[i], name="weight", amount=amount, n=1, dim=0)
        mask = torch.zeros_like(masked[i].bias)
        mask[kept(masked[i])] = 1
        prune.custom_from_mask(masked[i], name="bias", mask=mask)
    k1, k2, k3 = kept(masked[0]), kept(masked[3]), kept(masked[7])
    small = make_cnn(len(k1), len(k2), len(k3))
    with torch.no_grad():
        small[0].weight.copy_(masked[0].weight[k1])
        small[3].weight.copy_(masked[3].weight[k2][:, k1])
        small[7].weight.copy_(masked[7].weight[k3].view(len(k3), -1, 4)[:, k2].flatten(1))
        small[9].weight.copy_(masked[9].weight[:, k3])
        for i, k in ((0, k1), (3, k2), (7, k3), (9, slice(None))):
            small[i].bias.copy_(masked[i].bias[k])
    return small


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epoch-scale", type=float, default=1.0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    X, y = load()
    order = torch.randperm(len(X), generator=torch.Generator().manual_seed(0))
    train_idx, test_idx = order[:600], order[1000:]
    E = lambda n: max(1, round(n * a.epoch_scale))  # noqa: E731

    def evaluate(m):
        m.eval()
        with torch.no_grad():
            return (m(X[test_idx]).argmax(1) == y[test_idx]).float().mean().item()

    def train(m, epochs, lr=2e-3, seed=0):  # seed 002's train()
        g = torch.Generator().manual_seed(seed)
        opt = torch.optim.Adam(m.parameters(), lr=lr)
        for _ in range(epochs):
            m.train()
            perm = train_idx[torch.randperm(len(train_idx), generator=g)]
            for i in range(0, len(perm), 64):
                idx = perm[i:i + 64]
                loss = F.cross_entropy(m(X[idx]), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        return m

    def prunable(m):
        return [(l, "weight") for l in m if isinstance(l, (nn.Conv2d, nn.Linear))]
    res = {"torch": torch.__version__, "seeds": list(range(a.seeds)), "epoch_scale": a.epoch_scale, "teacher": [],
           "sweep": {f"{x:g}": {"before": [], "after": []} for x in SWEEP},
           "slim": {f"{x:g}": {"pruned": [], "finetuned": [], "scratch": []} for x in SLIM},
           "iterative": {str(r + 1): {"pruned": [], "finetuned": []} for r in range(4)}}
    for s in range(a.seeds):
        torch.manual_seed(s)
        large = train(make_cnn(64, 128, 256), E(40), seed=s)
        res["teacher"].append(evaluate(large))
        for amount in SWEEP:
            m = copy.deepcopy(large)
            prune.global_unstructured(prunable(m), pruning_method=prune.L1Unstructured, amount=amount)
            res["sweep"][f"{amount:g}"]["before"].append(evaluate(m))
            res["sweep"][f"{amount:g}"]["after"].append(evaluate(train(m, E(10), lr=1e-3, seed=s)))
        for amount in SLIM:
            small = slim_model(large, amount)
            d = res["slim"][f"{amount:g}"]
            d["pruned"].append(evaluate(small))
            d["finetuned"].append(evaluate(train(small, E(10), lr=1e-3, seed=s)))
            torch.manual_seed(s)
            shape = (small[0].out_channels, small[3].out_channels, small[7].out_features)
            d["scratch"].append(evaluate(train(make_cnn(*shape), E(40), seed=s)))
        m = copy.deepcopy(large)
        for r in range(4):  # bench_seed002's iterative table: 4 rounds to 90 % overall
            prune.global_unstructured(prunable(m), pruning_method=prune.L1Unstructured, amount=1 - 0.1 ** 0.25)
            res["iterative"][str(r + 1)]["pruned"].append(evaluate(m))
            res["iterative"][str(r + 1)]["finetuned"].append(evaluate(train(m, E(10), lr=1e-3, seed=4 * s + r)))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
