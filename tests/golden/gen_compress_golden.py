#!/usr/bin/python3
"""Writes tests/golden/compress.json: PyTorch reference values for sg::compress (tests/test_compress.cpp).

Run with Debian's torch: /usr/bin/python3 tests/golden/gen_compress_golden.py (deterministic; float32 throughout).
Cases:
  fake_quant_tensor   torch.fake_quantize_per_tensor_affine with tensor scale / zero_point: value and the STE
                      gradient of sum(R * out) (the upstream gradient R is random)
  fake_quant_channel  torch.fake_quantize_per_channel_affine (axis 0) of a (4, 3, 3, 3) weight, value and gradient
  observer            torch.ao MinMaxObserver(quint8, per_tensor_affine) qparams of data with negative values, and
                      of ReLU-like data (lo = 0)
  distill             seed 002's distill_loss (T = 4, alpha = 0.9, two unlabeled samples): loss and d/d student
  masked_adam         prune.custom_from_mask on a Linear(6, 4), 3 Adam steps (lr 0.01) of cross entropy: the
                      effective weight, bias, and Adam's exp_avg / exp_avg_sq of weight_orig after the steps
  prune               prune.global_unstructured(L1Unstructured, 0.6) over three tensors; l1_unstructured 0.5 then
                      0.2 on one; ln_structured(0.5, n=1, dim=0) masks
"""
import json
import pathlib

import torch
import torch.nn.functional as F
import torch.nn.utils.prune as prune
from torch import nn

torch.manual_seed(0)
g = torch.Generator().manual_seed(1234)


def flat(t):
    return [float(v) for v in t.detach().flatten().tolist()]


def T(t):
    return {"shape": list(t.shape), "data": flat(t)}


cases = {}

# fake_quant with tensor qparams (per tensor)
x = (torch.randn(500, generator=g) * 2).requires_grad_(True)
scale, zp = torch.tensor([0.05]), torch.tensor([3], dtype=torch.int32)
R = torch.randn(500, generator=g)
y = torch.fake_quantize_per_tensor_affine(x, scale, zp, 0, 255)
(y * R).sum().backward()
cases["fake_quant_tensor"] = {"x": T(x), "scale": 0.05, "zero_point": 3, "qmin": 0, "qmax": 255, "R": T(R),
                              "out": T(y), "grad": T(x.grad)}

# per channel (weights: symmetric, narrow range as seed 002's QuantWeight at 4 bits)
w = (torch.randn(4, 3, 3, 3, generator=g) * 0.3).requires_grad_(True)
scales = torch.tensor([0.02, 0.05, 0.03, 0.08])
zps = torch.zeros(4, dtype=torch.int32)
Rw = torch.randn(4, 3, 3, 3, generator=g)
yw = torch.fake_quantize_per_channel_affine(w, scales, zps, 0, -7, 7)
(yw * Rw).sum().backward()
cases["fake_quant_channel"] = {"x": T(w), "scales": flat(scales), "qmin": -7, "qmax": 7, "R": T(Rw), "out": T(yw),
                               "grad": T(w.grad)}

# observers
obs = []
for data in [torch.randn(200, generator=g) * 1.5 + 0.3, torch.relu(torch.randn(200, generator=g) * 2)]:
    o = torch.ao.quantization.MinMaxObserver(dtype=torch.quint8, qscheme=torch.per_tensor_affine)
    o(data)
    s, z = o.calculate_qparams()
    obs.append({"lo": float(o.min_val), "hi": float(o.max_val), "scale": float(s), "zero_point": int(z)})
cases["observer"] = obs

# distillation (seed 002's distill_loss)
Tm, alpha = 4.0, 0.9
zs = (torch.randn(6, 10, generator=g) * 3).requires_grad_(True)
zt = torch.randn(6, 10, generator=g) * 5
labels = torch.tensor([3, 1, 4, 1, 5, 9])
labeled = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 1.0])
soft = F.kl_div(F.log_softmax(zs / Tm, dim=1), F.softmax(zt / Tm, dim=1), reduction="batchmean")
hard = (F.cross_entropy(zs, labels, reduction="none") * labeled).mean()
loss = alpha * Tm * Tm * soft + (1 - alpha) * hard
loss.backward()
cases["distill"] = {"student": T(zs), "teacher": T(zt), "labels": labels.tolist(), "labeled": flat(labeled),
                    "temperature": Tm, "alpha": alpha, "loss": float(loss), "grad": T(zs.grad)}

# masked Adam: pruned weights get zero gradient, stay 0, and their Adam moments stay 0
lin = nn.Linear(6, 4)
w0, b0 = lin.weight.detach().clone(), lin.bias.detach().clone()
mask = (torch.rand(4, 6, generator=g) > 0.5).float()
prune.custom_from_mask(lin, "weight", mask)
xs = torch.randn(5, 6, generator=g)
ys = torch.tensor([0, 3, 2, 1, 3])
opt = torch.optim.Adam(lin.parameters(), lr=0.01)
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(lin(xs), ys).backward()
    opt.step()
st = opt.state[lin.weight_orig]  # (lin.weight is recomputed by the pre-forward hook: stale after step())
cases["masked_adam"] = {"weight": T(w0), "bias": T(b0), "mask": T(mask), "x": T(xs), "labels": ys.tolist(),
                        "lr": 0.01, "steps": 3, "weight_after": T(lin.weight_orig * lin.weight_mask), "bias_after": T(lin.bias),
                        "exp_avg": T(st["exp_avg"]), "exp_avg_sq": T(st["exp_avg_sq"])}

# pruning masks
a, b, c = nn.Linear(5, 4), nn.Linear(4, 3), nn.Conv2d(2, 3, 3)
for m in (a, b, c):
    with torch.no_grad():
        m.weight.copy_(torch.randn(m.weight.shape, generator=g))
ws = [T(m.weight) for m in (a, b, c)]
prune.global_unstructured([(a, "weight"), (b, "weight"), (c, "weight")], pruning_method=prune.L1Unstructured,
                          amount=0.6)
global_masks = [T(m.weight_mask) for m in (a, b, c)]
d = nn.Linear(10, 6)
wd = T(d.weight)
prune.l1_unstructured(d, "weight", 0.5)
prune.l1_unstructured(d, "weight", 0.2)
iter_mask = T(d.weight_mask)
e = nn.Conv2d(3, 8, 3)
we = T(e.weight)
prune.ln_structured(e, "weight", amount=0.5, n=1, dim=0)
struct_mask = T(e.weight_mask)
cases["prune"] = {"global_weights": ws, "global_amount": 0.6, "global_masks": global_masks,
                  "iterative_weight": wd, "iterative_mask": iter_mask,
                  "structured_weight": we, "structured_mask": struct_mask}

out = pathlib.Path(__file__).resolve().parent / "compress.json"
out.write_text(json.dumps({"generator": "tests/golden/gen_compress_golden.py", "torch": torch.__version__,
                           "cases": cases}) + "\n")
print(f"wrote {out}")
