#!/usr/bin/python3
"""bench/peers.py -- the PyTorch peer for bench_ops (issue 8), and the join that prints ours/peer ratios.

Measure (same cases, keys and table format as build*/bin/bench_ops):
    /usr/bin/python3 bench/peers.py [--device cpu|cuda|both|auto] [--json FILE] [--repeats N] [--warmup N]
                                    [--large] [--sgemm N,N,..] [--threads N] [--max-seconds S]
Join (what bench/run_all.sh calls):
    /usr/bin/python3 bench/peers.py --join OURS.json PEERS.json

Cases (torch eager, fp32; on CUDA TF32 is switched off for matmul and cuDNN):
    sgemm_N          C = A @ B, N x N (torch.mm: OpenBLAS/MKL on the CPU, cuBLAS on CUDA). GFLOP/s = 2 N^3 / median.
                     Check: 4096 sampled elements against an f64 dot product, error normalised by sum_k |a_ik b_kj|
                     (<= 1e-4), as bench_ops does.
    mlp_step_bB      Flatten, Linear(784,128), ReLU, Linear(128,10); cross entropy; Adam(lr 1e-3); B = 32, 128.
    cnn_step_b64     seed 002's CNN: Conv2d(1,8,3,p1) ReLU MaxPool2d(2) Conv2d(8,16,3,p1) ReLU MaxPool2d(2) Flatten
                     Linear(64,32) ReLU Linear(32,10) on 1x8x8 inputs; Adam; batch 64.
    charlm_step_b32  bench/charlm_torch.py's CharTransformer (d_model 64, 2 pre-LN blocks, 4 heads, context 64) on the
                     first 32 training words of /usr/share/dict/words; AdamW (lr 3e-3, weight decay 0.01),
                     clip_grad_norm_(1.0) (issue 37's bench; bench_ops' make_lm_step).
    lstm_step_b32    its CharLSTM (embedding 64, hidden 128, 2 layers) likewise, AdamW lr 1e-2.
    resnet_step_b64  `shadergrad train --model resnet`'s ResNet-8 (BatchNorm, dropout 0.2) on 1x28x28, Adam.
                     Its check uses the eager step's dropout mask in the f64 copy.
    mlp_forward_b128 the MLP's logits, batch 128, under torch.no_grad().
    On CUDA each train step is also measured as the fastest forms a PyTorch or JAX user has (the peers of
    issue 15): "torch-cuda-graph" -- the whole step (forward, backward, Adam with capturable=True) captured once
    into a CUDA graph over static input tensors and replayed, plus loss.item(); "jax-cuda" -- the same model,
    loss and Adam (torch.optim.Adam's formulas, written with jax.numpy) as one jax.jit-compiled function with the
    parameters and Adam state donated, plus float(loss). Both start from the torch model's initial weights and
    are checked like the eager step (first loss against f64). --variants picks them. jax.jit rows exist for the MLP,
    the CNN and charlm (jax_charlm: the same transformer over the torch state_dict); the LSTM and the ResNet are not
    written in jax here.
    A train step is zero_grad, forward, loss, backward, optimizer.step() and loss.item() -- the item() reads the
    loss back, as bench_ops' run() does, so each timed step is synchronised. Train-step check: the first step's
    loss against an f64 copy of the model's forward pass (<= 1e-4 (1 + |ref|)).
Timing: warm-up runs, then up to --repeats timed runs (median, min-max), stopping after --max-seconds of timed
runs (at least 3). SGEMM on CUDA times a batch of products between two synchronisations (a single product at
N=1024 takes tens of microseconds) and reports the per-product time.
Exit status 0 when every check passed, 1 otherwise, 2 on bad arguments.
"""
import argparse
import datetime
import json
import math
import os
import platform
import socket
import sys
import time


def summarize(v):
    v = sorted(v)
    n = len(v)
    if n == 0:
        return {"median": 0.0, "min": 0.0, "max": 0.0, "n": 0}
    med = v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    return {"median": med, "min": v[0], "max": v[-1], "n": n}


def measure(fn, args, sync=lambda: None, inner=1):
    """Times fn (ms per call). `inner` calls per timed sample, between two sync()s."""
    for _ in range(args.warmup):
        fn()
    sync()
    times, total = [], 0.0
    for _ in range(args.repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        dt = (time.perf_counter() - t0) * 1000.0
        times.append(dt / inner)
        total += dt
        if len(times) >= 3 and total > args.max_seconds * 1000.0:
            break
    return summarize(times)


ROWS = []
FAILED = [False]


def print_header():
    print("| {:<30} | {:<10} | {:>4} | {:>10} | {:>21} | {:>12} | {:<8} | {:<30} |".format(
        "case", "backend", "reps", "median ms", "min - max ms", "throughput", "unit", "check"))
    print("|{}|{}|{}|{}|{}|{}|{}|{}|".format("-" * 32, "-" * 12, "-" * 6, "-" * 12, "-" * 23, "-" * 14, "-" * 10,
                                             "-" * 32))


def add_row(key, label, backend, st, throughput, unit, ok, check, **extra):
    if not ok:
        FAILED[0] = True
    print("| {:<30} | {:<10} | {:>4} | {:>10.3f} | {:>10.3f} - {:>8.3f} | {:>12.2f} | {:<8} | {:<30} |".format(
        label, backend, st["n"], st["median"], st["min"], st["max"], throughput, unit, check), flush=True)
    row = {"key": key, "label": label, "backend": backend, "median_ms": st["median"], "min_ms": st["min"],
           "max_ms": st["max"], "repeats": st["n"], "throughput": throughput, "unit": unit, "check": check, "ok": ok}
    row.update(extra)
    ROWS.append(row)


def mlp(torch):
    nn = torch.nn
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn(torch):
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 2 * 2, 32), nn.ReLU(), nn.Linear(32, 10))


def bench_sgemm(torch, dev, n, args):
    g = torch.Generator().manual_seed(1000 + n)
    a = (torch.rand(n, n, generator=g) * 2 - 1).to(dev)
    b = (torch.rand(n, n, generator=g) * 2 - 1).to(dev)
    c = torch.mm(a, b)
    # check: sampled elements vs f64
    import numpy as np
    an, bn, cn = a.double().cpu().numpy(), b.double().cpu().numpy(), c.double().cpu().numpy()
    rng = np.random.default_rng(7 + n)
    ii, jj = rng.integers(0, n, 4096), rng.integers(0, n, 4096)
    prod = an[ii, :] * bn[:, jj].T
    ref, mag = prod.sum(axis=1), np.abs(prod).sum(axis=1)
    err = float(np.max(np.abs(cn[ii, jj] - ref) / (mag + 1e-30)))
    ok = bool(np.isfinite(err) and err <= 1e-4)
    if dev.type == "cuda":
        sync = torch.cuda.synchronize
        # batch enough products per sample to make the timers' resolution irrelevant (~>= 20 ms per sample)
        sync()
        t0 = time.perf_counter()
        for _ in range(10):
            torch.mm(a, b, out=c)
        sync()
        one = (time.perf_counter() - t0) / 10
        inner = max(1, min(1000, int(0.02 / max(one, 1e-7))))
        st = measure(lambda: torch.mm(a, b, out=c), args, sync, inner)
    else:
        inner = 1
        st = measure(lambda: torch.mm(a, b, out=c), args)
    gflops = 2.0 * n ** 3 / (st["median"] * 1e-3) / 1e9
    add_row("sgemm_%d" % n, "SGEMM N=%d" % n, "torch-" + dev.type, st, gflops, "GFLOP/s", ok,
            "%s (rel %.1e on 4096)" % ("ok" if ok else "FAIL", err), n=n, inner=inner)


def resnet(torch):
    """sg::nn::make_resnet(1, 28, 28, 10): torchvision BasicBlocks, widths 16-32-64, one block per stage, no max pool,
    dropout 0.2 before the classifier (stdlib/include/sg/nn.h; tests/golden/gen_golden.py's smaller copy)."""
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            out = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            return torch.relu(out + (x if self.downsample is None else self.downsample(x)))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.layer1 = nn.Sequential(BasicBlock(16, 16))
            self.layer2 = nn.Sequential(BasicBlock(16, 32, 2))
            self.layer3 = nn.Sequential(BasicBlock(32, 64, 2))
            self.dropout = nn.Dropout(0.2)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            h = self.layer3(self.layer2(self.layer1(torch.relu(self.bn1(self.conv1(x))))))
            return self.fc(self.dropout(h.mean(dim=(2, 3))))

    return ResNet()


LM_CONTEXT = 64  # bench_ops' make_lm_step


class StepCase:
    """One train step case, as bench_ops' make_step: the model (seed 0) on `dev`, a fixed batch, the loss, the
    optimizer and the clipping. mlp/cnn/resnet: Adam(lr 1e-3) on a seeded random batch; charlm/lstm: the word models
    of bench/charlm_torch.py at context 64 on the first `batch` training words, AdamW (lr 3e-3 / 1e-2, weight decay
    0.01), clip_grad_norm_(1.0), cross entropy with ignore_index over the padded positions."""

    def __init__(self, torch, dev, model_name, batch):
        self.torch, self.name, self.batch = torch, model_name, batch
        F = torch.nn.functional
        torch.manual_seed(0)
        self.lm = model_name in ("charlm", "lstm")
        if self.lm:
            import charlm_torch as cl
            train, _ = cl.load_words()
            x, y = cl.word_rows(train[:batch], LM_CONTEXT)
            self.model = (cl.CharTransformer(27, LM_CONTEXT, 64, 2, 4, 256) if model_name == "charlm"
                          else cl.CharLSTM(27, 64, 128, 2)).to(dev)
            self.x, self.y = x.to(dev), y.to(dev)
            self.lossf = lambda logits, yb: F.cross_entropy(logits.reshape(-1, 27), yb.reshape(-1), ignore_index=-100)
            self.clip = 1.0
            self.label = ("%s train step (AdamW, clip) b=%d T=%d" % (
                "charlm(d_model=64, layers=2, heads=4, dim_feedforward=256, context=64)" if model_name == "charlm"
                else "lstm(embedding=64, hidden=128, layers=2, context=64)", batch, LM_CONTEXT))
        else:
            build = {"mlp": mlp, "cnn": cnn, "resnet": resnet}[model_name]
            self.model = build(torch).to(dev)
            hw = 8 if model_name == "cnn" else 28
            g = torch.Generator().manual_seed(42 + batch)
            self.x = torch.rand(batch, 1, hw, hw, generator=g).to(dev)
            self.y = torch.randint(0, 10, (batch,), generator=g).to(dev)
            self.lossf = F.cross_entropy
            self.clip = 0.0
            self.label = "%s train step (Adam) b=%d" % ({"mlp": "MLP 784-128-10", "cnn": "CNN 8-16-32",
                                                         "resnet": "ResNet-8 16-32-64 (BatchNorm, dropout) 28x28"}
                                                        [model_name], batch)
        self.key = "%s_step_b%d" % (model_name, batch)
        import copy
        self.initial = copy.deepcopy(self.model)

    def optimizer(self, capturable=False):
        opt = self.torch.optim
        if self.lm:
            return opt.AdamW(self.model.parameters(), lr=1e-2 if self.name == "lstm" else 3e-3, weight_decay=0.01,
                             capturable=capturable)
        return opt.Adam(self.model.parameters(), lr=1e-3, capturable=capturable)

    def forward_backward(self, opt):
        """zero_grad, loss, backward, clipping, step; returns the loss tensor."""
        opt.zero_grad(set_to_none=False)
        loss = self.lossf(self.model(self.x), self.y)
        loss.backward()
        if self.clip > 0:
            self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        opt.step()
        return loss

    def first_step_checked(self, opt):
        """The first step (from the initial weights), its loss checked against an f64 copy of the model with the
        same dropout mask (captured from the step): returns (ok, error)."""
        torch = self.torch
        masks = []
        hooks = [m.register_forward_hook(lambda mod, i, o: masks.append(o != 0))
                 for m in self.model.modules() if isinstance(m, torch.nn.Dropout) and m.p > 0]
        first = float(self.forward_backward(opt).item())
        for h in hooks:
            h.remove()
        ref_model = self.initial.double()
        dropouts = [m for m in ref_model.modules() if isinstance(m, torch.nn.Dropout) and m.p > 0]
        for m, mask in zip(dropouts, masks):
            m.forward = (lambda p, mk: (lambda h: h * mk.double() / (1 - p)))(m.p, mask)
        with torch.no_grad():
            ref = float(self.lossf(ref_model(self.x.double() if not self.lm else self.x), self.y))
        err = abs(first - ref)
        return math.isfinite(first) and err <= 1e-4 * (1 + abs(ref)), err


def bench_step(torch, dev, model_name, batch, args):
    case = StepCase(torch, dev, model_name, batch)
    opt = case.optimizer()
    ok, err = case.first_step_checked(opt)
    last = [0.0]

    def step():
        last[0] = case.forward_backward(opt).item()

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    st = measure(step, args, sync)
    ok = ok and math.isfinite(last[0])
    add_row(case.key, case.label, "torch-" + dev.type, st, 1000.0 / st["median"], "steps/s", ok,
            "%s (loss vs f64 %.1e)" % ("ok" if ok else "FAIL", err), batch=batch, model=model_name,
            last_loss=last[0])


def reference_loss(torch, case):
    """The f64 loss of `case`'s model at its initial weights (no dropout masks: the MLP and CNN have none)."""
    import copy
    with torch.no_grad():
        x = case.x if case.lm else case.x.double()
        return float(case.lossf(copy.deepcopy(case.initial).double()(x), case.y))


def bench_step_graph(torch, dev, model_name, batch, args):
    """The train step captured once as a CUDA graph (static inputs, Adam/AdamW with capturable=True, the clipping
    inside the graph) and replayed."""
    case = StepCase(torch, dev, model_name, batch)
    opt = case.optimizer(capturable=True)
    # first step eagerly (the check) and the warm-up, both on a side stream as torch.cuda.graphs requires, then
    # capture. Every eager step's autograd graph is dropped before the capture: a graph kept alive (by `loss`) keeps
    # its AccumulateGrad nodes bound to the stream they were made on, and the capture then syncs across streams and
    # fails with cudaErrorStreamCaptureInvalidated (seen at MLP b=32, the process's first capture).
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ok, err = case.first_step_checked(opt)
        for _ in range(3):
            case.forward_backward(opt)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    # capture on the warmed-up stream: a fresh capture stream would create its cuBLAS workspace during the capture
    # (the process's first capture then fails with cudaErrorStreamCaptureInvalidated)
    with torch.cuda.graph(graph, stream=s):
        static_loss = case.forward_backward(opt)
    last = [0.0]

    def step():
        graph.replay()
        last[0] = static_loss.item()

    st = measure(step, args, torch.cuda.synchronize)
    ok = ok and math.isfinite(last[0])
    add_row(case.key, case.label, "torch-cuda-graph", st, 1000.0 / st["median"], "steps/s", ok,
            "%s (loss vs f64 %.1e)" % ("ok" if ok else "FAIL", err), batch=batch, model=model_name,
            last_loss=last[0])


def jax_model(jnp, lax, model_name):
    """The forward pass of mlp()/cnn() in jax (NCHW, OIHW weights as torch stores them)."""
    def dense(p, k, h):
        return h @ p[k + ".weight"].T + p[k + ".bias"]

    def conv(p, k, h):
        o = lax.conv_general_dilated(h, p[k + ".weight"], (1, 1), ((1, 1), (1, 1)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return o + p[k + ".bias"][None, :, None, None]

    def pool(h):
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def forward(p, x):
        if model_name == "mlp":
            h = x.reshape(x.shape[0], -1)
            return dense(p, "3", jnp.maximum(dense(p, "1", h), 0))
        h = pool(jnp.maximum(conv(p, "0", x), 0))
        h = pool(jnp.maximum(conv(p, "3", h), 0))
        h = h.reshape(h.shape[0], -1)
        return dense(p, "9", jnp.maximum(dense(p, "7", h), 0))
    return forward


def bench_step_jax(torch, model_name, batch, args):
    """The train step as one jax.jit function (Adam by torch.optim.Adam's formulas), buffers donated."""
    try:
        import jax
        import jax.numpy as jnp
        from jax import lax
    except ImportError as e:
        print("peers.py: jax not importable (%s): no jax-cuda rows" % e, file=sys.stderr)
        return
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("peers.py: jax sees no GPU: no jax-cuda rows", file=sys.stderr)
        return
    case = StepCase(torch, torch.device("cpu"), model_name, batch)
    model, x, y, ref = case.model, case.x, case.y, reference_loss(torch, case)
    params = {k: jnp.asarray(v.detach().numpy()) for k, v in model.state_dict().items()}
    forward = jax_model(jnp, lax, model_name)
    xj, yj = jnp.asarray(x.numpy()), jnp.asarray(y.numpy())
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8

    def loss_fn(p, xb, yb):
        logp = jax.nn.log_softmax(forward(p, xb), axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, yb[:, None], axis=1))

    def step(p, m, v, t, xb, yb):
        loss, g = jax.value_and_grad(loss_fn)(p, xb, yb)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m_, g_: b1 * m_ + (1 - b1) * g_, m, g)
        v = jax.tree_util.tree_map(lambda v_, g_: b2 * v_ + (1 - b2) * g_ * g_, v, g)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        p = jax.tree_util.tree_map(lambda p_, m_, v_: p_ - lr * (m_ / c1) / (jnp.sqrt(v_ / c2) + eps), p, m, v)
        return p, m, v, t, loss

    jstep = jax.jit(step, donate_argnums=(0, 1, 2, 3))
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = [params, zeros, jax.tree_util.tree_map(jnp.zeros_like, params), jnp.asarray(0.0, jnp.float32)]
    last = [0.0]

    def run():
        p, m, v, t, loss = jstep(state[0], state[1], state[2], state[3], xj, yj)
        state[:] = [p, m, v, t]
        last[0] = float(loss)

    run()
    first = last[0]
    err = abs(first - ref)
    ok = math.isfinite(first) and err <= 1e-4 * (1 + abs(ref))
    st = measure(run, args)
    ok = ok and math.isfinite(last[0])
    add_row(case.key, case.label, "jax-cuda", st,
            1000.0 / st["median"], "steps/s", ok, "%s (loss vs f64 %.1e)" % ("ok" if ok else "FAIL", err),
            batch=batch, model=model_name, last_loss=last[0], jax=jax.__version__)


def jax_charlm(jax, jnp, layers=2, heads=4):
    """charlm_torch.CharTransformer's forward and loss in jax over its torch state_dict names (pre-LN blocks of
    nn.TransformerEncoderLayer: in_proj q|k|v, exact-erf GELU, LayerNorm eps 1e-5; the loss over y >= 0)."""
    def ln(h, p, k):
        mu = h.mean(-1, keepdims=True)
        var = ((h - mu) ** 2).mean(-1, keepdims=True)
        return (h - mu) / jnp.sqrt(var + 1e-5) * p[k + ".weight"] + p[k + ".bias"]

    def dense(h, p, k):
        return h @ p[k + ".weight"].T + p[k + ".bias"]

    def forward(p, x):
        b, t = x.shape
        h = p["tok_emb.weight"][x] + p["pos_emb.weight"][:t]
        d = h.shape[-1]
        dh = d // heads
        causal = jnp.tril(jnp.ones((t, t), dtype=bool))
        for l in range(layers):
            k = "blocks.%d." % l
            a = ln(h, p, k + "norm1")
            qkv = a @ p[k + "self_attn.in_proj_weight"].T + p[k + "self_attn.in_proj_bias"]
            q, kk, v = [z.reshape(b, t, heads, dh).transpose(0, 2, 1, 3) for z in jnp.split(qkv, 3, axis=-1)]
            sc = jnp.where(causal, q @ kk.transpose(0, 1, 3, 2) / math.sqrt(dh), -jnp.inf)
            o = (jax.nn.softmax(sc, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
            h = h + dense(o, p, k + "self_attn.out_proj")
            h = h + dense(jax.nn.gelu(dense(ln(h, p, k + "norm2"), p, k + "linear1"), approximate=False), p,
                          k + "linear2")
        return dense(ln(h, p, "ln_f"), p, "head")

    def loss(p, x, y):
        logp = jax.nn.log_softmax(forward(p, x), axis=-1)
        m = y >= 0
        nll = -jnp.take_along_axis(logp, jnp.where(m, y, 0)[..., None], axis=-1)[..., 0]
        return jnp.sum(nll * m) / jnp.sum(m)
    return loss


def bench_step_jax_charlm(torch, batch, args):
    """charlm's train step as one jax.jit function: torch.optim.AdamW's formulas (lr 3e-3, weight decay 0.01) after
    clip_grad_norm_(1.0), parameters and state donated; starts from the torch model's initial weights."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        print("peers.py: jax not importable (%s): no jax-cuda rows" % e, file=sys.stderr)
        return
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("peers.py: jax sees no GPU: no jax-cuda rows", file=sys.stderr)
        return
    case = StepCase(torch, torch.device("cpu"), "charlm", batch)
    ref = reference_loss(torch, case)
    params = {k: jnp.asarray(v.detach().numpy()) for k, v in case.model.state_dict().items()}
    loss_fn = jax_charlm(jax, jnp)
    xj, yj = jnp.asarray(case.x.numpy().astype("int32")), jnp.asarray(case.y.numpy().astype("int32"))
    lr, wd, b1, b2, eps, clip = 3e-3, 0.01, 0.9, 0.999, 1e-8, 1.0
    tmap = jax.tree_util.tree_map

    def step(p, m, v, t, xb, yb):
        loss, g = jax.value_and_grad(loss_fn)(p, xb, yb)
        norm = jnp.sqrt(sum(jnp.sum(g_ * g_) for g_ in jax.tree_util.tree_leaves(g)))
        g = tmap(lambda g_: g_ * jnp.minimum(clip / (norm + 1e-6), 1.0), g)
        t = t + 1
        m = tmap(lambda m_, g_: b1 * m_ + (1 - b1) * g_, m, g)
        v = tmap(lambda v_, g_: b2 * v_ + (1 - b2) * g_ * g_, v, g)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        p = tmap(lambda p_, m_, v_: p_ * (1 - lr * wd) - (lr / c1) * m_ / (jnp.sqrt(v_) / jnp.sqrt(c2) + eps), p, m, v)
        return p, m, v, t, loss

    jstep = jax.jit(step, donate_argnums=(0, 1, 2, 3))
    state = [params, tmap(jnp.zeros_like, params), tmap(jnp.zeros_like, params), jnp.asarray(0.0, jnp.float32)]
    last = [0.0]

    def run():
        p, m, v, t, loss = jstep(state[0], state[1], state[2], state[3], xj, yj)
        state[:] = [p, m, v, t]
        last[0] = float(loss)

    run()
    err = abs(last[0] - ref)
    ok = math.isfinite(last[0]) and err <= 1e-4 * (1 + abs(ref))
    st = measure(run, args)
    ok = ok and math.isfinite(last[0])
    add_row(case.key, case.label, "jax-cuda", st, 1000.0 / st["median"], "steps/s", ok,
            "%s (loss vs f64 %.1e)" % ("ok" if ok else "FAIL", err), batch=batch, model="charlm",
            last_loss=last[0], jax=jax.__version__)


def bench_forward(torch, dev, args):
    torch.manual_seed(0)
    model = mlp(torch).to(dev)
    g = torch.Generator().manual_seed(5)
    x = torch.rand(128, 1, 28, 28, generator=g).to(dev)
    ref_model = mlp(torch).double()
    ref_model.load_state_dict(model.state_dict())
    with torch.no_grad():
        got = model(x).double().cpu()
        ref = ref_model.to(dev)(x.double()).cpu()
        err = float(((got - ref).abs() / (1 + ref.abs())).max())
    ok = err <= 1e-5
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def fwd():
        with torch.no_grad():
            out = model(x)
            out.cpu()  # read back, as bench_ops' run() does

    st = measure(fwd, args, sync)
    add_row("mlp_forward_b128", "MLP forward b=128 (logits)", "torch-" + dev.type, st, 1000.0 / st["median"],
            "runs/s", ok, "%s (f64 %.1e)" % ("ok" if ok else "FAIL", err), batch=128)


def blas_note():
    """Which libblas.so.3 Debian's torch calls (the reference BLAS is ~20x slower than OpenBLAS)."""
    try:
        link = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
        return link
    except OSError:
        return "?"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return f.read().strip()
    except OSError:
        return "?"


def run_measure(args):
    try:
        import torch
    except ImportError as e:
        print("peers.py: PyTorch is not importable with %s: %s" % (sys.executable, e), file=sys.stderr)
        return 1
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("highest")
    cuda = torch.cuda.is_available()
    if args.device == "auto":
        devices = ["cpu"] + (["cuda"] if cuda else [])
    elif args.device == "both":
        devices = ["cpu", "cuda"]
    else:
        devices = [args.device]
    if "cuda" in devices and not cuda:
        print("peers.py: --device %s asks for CUDA but torch.cuda.is_available() is False" % args.device,
              file=sys.stderr)
        return 1
    meta = {"tool": "peers.py", "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": socket.gethostname(), "cpu": cpu_model(), "cores": os.cpu_count(), "loadavg_start": loadavg(),
            "command": " ".join([sys.executable] + sys.argv), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "blas": blas_note(), "repeats": args.repeats,
            "warmup": args.warmup, "tf32": False}
    if cuda:
        meta["cuda_device"] = torch.cuda.get_device_name(0)
    print("peers.py  %s  host %s  cpu %s x%s  load %s" % (meta["date"], meta["host"], meta["cpu"], meta["cores"],
                                                         meta["loadavg_start"]))
    print("torch %s, %d CPU threads, libblas.so.3 -> %s%s" % (
        torch.__version__, meta["torch_threads"], meta["blas"],
        (", CUDA: %s (TF32 off)" % meta["cuda_device"]) if cuda else ", no CUDA"))
    print("warm-up %d run(s), then up to %d timed repeats (stopping after %g s of timed runs, at least 3)\n" % (
        args.warmup, args.repeats, args.max_seconds))
    sizes = [int(s) for s in args.sgemm.split(",") if s] if args.sgemm else [256, 512, 1024] + (
        [2048] if args.large else [])
    print_header()
    for d in devices:
        dev = torch.device(d)
        for n in sizes if not args.only or "sgemm" in args.only else []:
            bench_sgemm(torch, dev, n, args)
        steps = [("mlp", 32), ("mlp", 128), ("cnn", 64), ("charlm", 32), ("lstm", 32), ("resnet", 64)]
        for model_name, b in steps:
            if args.only and model_name not in args.only:
                continue
            for variant, fn in (("eager", lambda: bench_step(torch, dev, model_name, b, args)),
                                ("graph", lambda: bench_step_graph(torch, dev, model_name, b, args)),
                                ("jax", lambda: bench_step_jax_charlm(torch, b, args) if model_name == "charlm"
                                 else bench_step_jax(torch, model_name, b, args))):
                if variant not in args.variants or (variant != "eager" and d != "cuda") or (
                        variant == "jax" and model_name not in ("mlp", "cnn", "charlm")):
                    continue
                try:  # a peer variant that breaks must not take the other rows with it
                    fn()
                except Exception as e:  # noqa: BLE001 -- reported and counted as a failed check
                    FAILED[0] = True
                    print("peers.py: %s step %s b=%d failed: %s: %s" % (variant, model_name, b,
                                                                      type(e).__name__, e), file=sys.stderr)
        if not args.only or "forward" in args.only:
            bench_forward(torch, dev, args)
    meta["loadavg_end"] = loadavg()
    print("\nload average at end: %s" % meta["loadavg_end"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": ROWS}, f, indent=2)
            f.write("\n")
        print("wrote %s" % args.json)
    if FAILED[0]:
        print("SOME CORRECTNESS CHECKS FAILED (see FAIL rows)")
    return 1 if FAILED[0] else 0


def run_join(ours_path, peers_path):
    with open(ours_path) as f:
        ours = json.load(f)
    with open(peers_path) as f:
        peers = json.load(f)
    om, pm = ours.get("meta", {}), peers.get("meta", {})
    print("ours:  %s  %s  renderer %s  load %s -> %s" % (om.get("date"), om.get("host"), om.get("renderer"),
                                                          om.get("loadavg_start"), om.get("loadavg_end")))
    print("peers: %s  %s  torch %s (%s threads, BLAS %s)%s  load %s -> %s" % (
        pm.get("date"), pm.get("host"), pm.get("torch"), pm.get("torch_threads"), pm.get("blas"),
        (", CUDA " + pm["cuda_device"]) if pm.get("cuda_device") else "", pm.get("loadavg_start"),
        pm.get("loadavg_end")))
    print("\nratio = ours median time / peer median time (> 1: we are slower); for SGEMM also our GFLOP/s as a "
          "fraction of the peer's (kernel-only: GL timer query, no readback)\n")
    peer_rows = {}
    for r in peers.get("results", []):
        peer_rows.setdefault(r["key"], []).append(r)
    hdr = ["case", "ours", "ours ms", "peer", "peer ms", "time ratio", "GFLOP/s fraction", "kernel-only fraction"]
    lines = []
    for r in ours.get("results", []):
        for p in peer_rows.get(r["key"], []):
            ratio = r["median_ms"] / p["median_ms"] if p["median_ms"] > 0 else float("nan")
            frac = kfrac = ""
            if r["unit"] == "GFLOP/s" and p["unit"] == "GFLOP/s" and p["throughput"] > 0:
                frac = "%.4f" % (r["throughput"] / p["throughput"])
                if "kernel_gflops" in r:
                    kfrac = "%.4f%s" % (r["kernel_gflops"] / p["throughput"],
                                        "" if r.get("kernel_time_plausible", True) else " (timer implausible)")
            ok = "" if (r.get("ok", True) and p.get("ok", True)) else " CHECK FAILED"
            lines.append([r["label"], r["backend"], "%.3f" % r["median_ms"], p["backend"], "%.3f" % p["median_ms"],
                          "%.2f%s" % (ratio, ok), frac, kfrac])
    widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h) for i, h in enumerate(hdr)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(hdr, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for l in lines:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(l, widths)) + " |")
    if not lines:
        print("(no case present in both files)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto", choices=["cpu", "cuda", "both", "auto"],
                    help="auto: the CPU, and CUDA when torch sees a GPU")
    ap.add_argument("--json", help="write the rows as JSON")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=30)
    ap.add_argument("--large", action="store_true", help="adds SGEMM N=2048")
    ap.add_argument("--sgemm", help="comma-separated SGEMM sizes (replaces the defaults)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--variants", default="eager,graph,jax",
                    help="train-step peers, comma-separated: eager, graph (CUDA graph), jax (jax.jit); "
                         "graph and jax run on CUDA only")
    ap.add_argument("--only", default="",
                    help="cases, comma-separated: sgemm, mlp, cnn, charlm, lstm, resnet, forward (default all)")
    ap.add_argument("--join", nargs=2, metavar=("OURS", "PEERS"), help="print ratios from two JSON files")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    args.variants = set(v for v in args.variants.split(",") if v)
    args.only = set(c for c in args.only.split(",") if c)
    unknown = args.only - {"sgemm", "mlp", "cnn", "charlm", "lstm", "resnet", "forward"}
    if unknown:
        ap.error("--only: unknown %s" % ",".join(sorted(unknown)))
    bad = args.variants - {"eager", "graph", "jax"}
    if bad:
        ap.error("--variants: unknown %s (eager, graph, jax)" % ",".join(sorted(bad)))
    if args.join:
        return run_join(args.join[0], args.join[1])
    return run_measure(args)


if __name__ == "__main__":
    sys.exit(main())
