#!/usr/bin/python3
"""Seed 002's student baseline in PyTorch (its own code: make_cnn(8, 16, 32), Adam lr 2e-3, batch 64, 150 epochs,
torch.manual_seed(seed) before the init, the shuffling generator seeded with seed) on a chosen split: the peer
measurement behind docs/RESULTS.md's split-gap paragraph.

  /usr/bin/python3 scripts/seed002/seed002_torch.py --split seed002 --seeds 5
  build/bin/shadergrad compress split --name ours --out /tmp/ours.json
  /usr/bin/python3 scripts/seed002/seed002_torch.py --split /tmp/ours.json --seeds 5

Prints one JSON line: the split, the per-seed test accuracies, mean and sample SD (statistics.stdev, as seed 002).
"""
import argparse
import csv
import gzip
import json
import statistics

import torch
import torch.nn.functional as F
from torch import nn

DIGITS = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


def load():
    with gzip.open(DIGITS, "rt") as f:
        rows = [list(map(float, r)) for r in csv.reader(f)]
    X = torch.tensor([r[:64] for r in rows], dtype=torch.float32).view(-1, 1, 8, 8) / 16
    y = torch.tensor([int(r[64]) for r in rows])
    return X, y


def make_cnn(c1, c2, hidden):
    return nn.Sequential(
        nn.Conv2d(1, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(c2 * 4, hidden), nn.ReLU(), nn.Linear(hidden, 10),
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="seed002", help="seed002 or a JSON file {train, pool, test}")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=150)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    X, y = load()
    if a.split == "seed002":
        order = torch.randperm(len(X), generator=torch.Generator().manual_seed(0))
        train_idx, test_idx = order[:600], order[1000:]
    else:
        s = json.load(open(a.split))
        train_idx, test_idx = torch.tensor(s["train"]), torch.tensor(s["test"])
    accs = []
    for seed in range(a.seeds):
        torch.manual_seed(seed)
        model = make_cnn(8, 16, 32)
        generator = torch.Generator().manual_seed(seed)
        opt = torch.optim.Adam(model.parameters(), lr=2e-3)
        for _ in range(a.epochs):
            model.train()
            perm = train_idx[torch.randperm(len(train_idx), generator=generator)]
            for i in range(0, len(perm), 64):
                idx = perm[i:i + 64]
                loss = F.cross_entropy(model(X[idx]), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        model.eval()
        with torch.no_grad():
            accs.append((model(X[test_idx]).argmax(1) == y[test_idx]).float().mean().item())
    print(json.dumps({"split": a.split, "accuracy": accs, "mean": statistics.mean(accs),
                      "sd": statistics.stdev(accs) if len(accs) > 1 else 0.0, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
