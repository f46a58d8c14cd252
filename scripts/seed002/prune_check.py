#!/usr/bin/python3
"""Global 90 % L1 pruning (seed 002's prune.global_unstructured) of two teachers in PyTorch, without fine-tuning:
the seed's own teacher (its code: torch.manual_seed(0), make_cnn(64, 128, 256), 40 epochs) and shadergrad's
teacher loaded from a safetensors file (bench_seed002 --tmp DIR writes DIR/teacher_model.safetensors). Also seed
002's structured slim() of both at 25/50/75 % before fine-tuning. Separates "our pruning differs" from "our teacher
differs" in docs/RESULTS.md.

  /usr/bin/python3 scripts/seed002/prune_check.py [--ours DIR/teacher_model.safetensors] [--skip-torch-teacher]
"""
import argparse
import json
import struct

import torch
import torch.nn.utils.prune as prune
from torch import nn

from seed002_torch import load, make_cnn


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        assert v["dtype"] == "F32"
        out[k] = torch.frombuffer(bytearray(b[8 + n + s:8 + n + e]), dtype=torch.float32).view(v["shape"]).clone()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours")
    ap.add_argument("--skip-torch-teacher", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    X, y = load()
    order = torch.randperm(len(X), generator=torch.Generator().manual_seed(0))
    train_idx, test_idx = order[:600], order[1000:]

    def evaluate(m):
        m.eval()
        with torch.no_grad():
            return (m(X[test_idx]).argmax(1) == y[test_idx]).float().mean().item()

    def pruned(m):
        ps = [(l, "weight") for l in m if isinstance(l, (nn.Conv2d, nn.Linear))]
        prune.global_unstructured(ps, pruning_method=prune.L1Unstructured, amount=0.9)
        return evaluate(m), [round((l.weight == 0).float().mean().item(), 3) for l, _ in ps]

    def slim_pruned(m):  # seed 002's slim() without fine-tuning (torch_tables.py has the whole table)
        from torch_tables import slim_model
        return {f"{a:g}": evaluate(slim_model(m, a)) for a in (0.25, 0.5, 0.75)}

    res = {}
    if not a.skip_torch_teacher:
        torch.manual_seed(0)
        m = make_cnn(64, 128, 256)
        g = torch.Generator().manual_seed(0)
        opt = torch.optim.Adam(m.parameters(), lr=2e-3)
        for _ in range(40):
            m.train()
            perm = train_idx[torch.randperm(len(train_idx), generator=g)]
            for i in range(0, len(perm), 64):
                idx = perm[i:i + 64]
                loss = torch.nn.functional.cross_entropy(m(X[idx]), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        acc = evaluate(m)
        res["torch_teacher"] = {"accuracy": acc, "slim_pruned": slim_pruned(m), "pruned_90": pruned(m)}
    if a.ours:
        m = make_cnn(64, 128, 256)
        m.load_state_dict(read_safetensors(a.ours))
        res["shadergrad_teacher"] = {"accuracy": evaluate(m), "slim_pruned": slim_pruned(m), "pruned_90": pruned(m)}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
