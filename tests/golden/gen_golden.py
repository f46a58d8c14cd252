#!/usr/bin/python3
"""Golden reference values for shadergrad's op and autodiff tests, computed with PyTorch.

HOW TO REGENERATE (deterministic: same torch/numpy give byte-identical files; commit the JSON it writes):

    /usr/bin/python3 tests/golden/gen_golden.py          # from the repository root

Needs Debian's python3-torch (1.13, CPU) and python3-numpy (use /usr/bin/python3, not a pyenv python).
Writes tests/golden/{elementwise,reduce,movement,nn,fake_quant,math,gather,batch_norm,rnn,conv_transpose,conv_groups,masks,
layers,mlp,cnn}.json, read by tests/golden_util.h; numerics.json (IEEE edge cases and Adam steps; read by
tests/test_numerics.cpp), random.json (Philox values and torch's dropout; read by tests/test_random.cpp) and
optim.json (AdamW, gradient clipping, learning-rate schedules; read by tests/test_optim.cpp).

Conventions
-----------
* Every input is float32-representable (drawn in float32, deterministic seeds). PyTorch then computes in
  float64 from those exact values (so the golden is a precise reference, not float32 PyTorch's own rounding),
  EXCEPT fake_quant.json, computed in float32 because torch.fake_quantize_per_tensor_affine's rounding of
  x * (1/scale) is part of its definition there.
* Stored numbers are float32 values written with the shortest decimal that round-trips to that float32.
* A tensor is {"shape": [...], "data": [...]} (row-major), or sparse {"shape", "index", "value"} (every other
  element is 0), or {"shape", "fill": v}, or {"shape", "init": {"hash_seed": s, "scale": c}}: element i is
  float32(((k + 0.5) / 2^24 * 2 - 1) * c) with k = splitmix64((s << 32) + i) >> 40 (see hash_init below;
  golden_util.h reproduces it bit-exactly; it keeps the 784x128 MLP weights out of the files).
* An op case: {"name", "op", "attrs", "inputs": [{"name", "dtype": "f32"|"i32", "grad": bool, "fd": bool,
  tensor...}], "output", "R", "grads": {input name: tensor}}. "grads" are d/d(input) of sum(output * R) for
  a fixed random R (torch.autograd), for every f32 input with "grad": true (zeros where PyTorch has no
  gradient, e.g. comparisons). "fd": false marks inputs at non-differentiable points (ties, discontinuities)
  where a finite-difference check must be skipped; everything else is kept away from kinks on purpose.
* Models use PyTorch's state_dict names and layouts: Linear weight is (out, in) and y = x @ W^T + b.
"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT_DIR = os.path.dirname(os.path.abspath(__file__))
torch.set_num_threads(1)


# ------------------------------------------------------------------------------------------------
# encoding
# ------------------------------------------------------------------------------------------------

def f32s(a):
    """float32 values -> list of Python floats whose repr is the shortest float32 round-trip decimal."""
    a = np.asarray(a, dtype=np.float32).ravel()
    out = []
    for v in a:
        if not np.isfinite(v):
            raise ValueError("non-finite value in golden data")
        out.append(float(str(v)) if v != 0 else 0.0)
    return out


def dense(t):
    a = t.detach().cpu().numpy() if torch.is_tensor(t) else np.asarray(t)
    return {"shape": list(a.shape), "data": f32s(a)}


def ints(t):
    a = t.detach().cpu().numpy() if torch.is_tensor(t) else np.asarray(t)
    return {"shape": list(a.shape), "data": [int(v) for v in a.ravel()]}


def sparse(t):
    a = (t.detach().cpu().numpy() if torch.is_tensor(t) else np.asarray(t)).astype(np.float32)
    flat = a.ravel()
    idx = np.nonzero(flat)[0]
    return {"shape": list(a.shape), "index": [int(i) for i in idx], "value": f32s(flat[idx])}


def splitmix64(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)).astype(np.uint64)
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)).astype(np.uint64)
    return x ^ (x >> np.uint64(31))


def hash_init(shape, seed, scale):
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        z = splitmix64((np.uint64(seed) << np.uint64(32)) + np.arange(n, dtype=np.uint64))
    k = (z >> np.uint64(40)).astype(np.float64)
    v = ((k + 0.5) / 16777216.0 * 2.0 - 1.0) * scale
    return v.astype(np.float32).reshape(shape)


def write(name, obj):
    path = os.path.join(OUT_DIR, name)
    with open(path, "w") as f:
        head = {k: v for k, v in obj.items() if k != "cases"}
        f.write("{\n")
        for k, v in head.items():
            f.write(json.dumps(k) + ": " + json.dumps(v, separators=(",", ":")) + ",\n")
        f.write('"cases": [\n')
        cases = obj.get("cases", [])
        for i, c in enumerate(cases):
            f.write(json.dumps(c, separators=(",", ":")) + (",\n" if i + 1 < len(cases) else "\n"))
        f.write("]\n}\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(obj.get('cases', []))} cases)")


# ------------------------------------------------------------------------------------------------
# deterministic inputs
# ------------------------------------------------------------------------------------------------

class Rng:
    def __init__(self, seed):
        self.r = np.random.RandomState(seed)

    def normal(self, shape, scale=1.0):
        return (self.r.standard_normal(shape) * scale).astype(np.float32)

    def uniform(self, shape, lo, hi):
        return self.r.uniform(lo, hi, shape).astype(np.float32)

    def away_from_zero(self, shape, gap=0.1):
        x = self.r.standard_normal(shape)
        return (np.sign(x) * (np.abs(x) + gap)).astype(np.float32)

    def non_integer(self, shape, scale=3.0):
        """Values whose fractional part is in [0.1, 0.4] or [0.6, 0.9]: away from floor/round jumps."""
        base = np.floor(self.r.standard_normal(shape) * scale)
        frac = self.r.uniform(0.1, 0.4, shape) + 0.5 * self.r.randint(0, 2, shape)
        return (base + frac).astype(np.float32)

    def distinct(self, shape, gap=0.01):
        """A random permutation of well-separated values (no ties: max/min/pool stay differentiable)."""
        n = int(np.prod(shape))
        v = (np.arange(n) - n / 2) * gap * 7 + self.r.uniform(0, gap, n)
        return self.r.permutation(v).astype(np.float32).reshape(shape) if n else np.zeros(shape, np.float32)

    def ints(self, shape, lo, hi):
        return self.r.randint(lo, hi, shape).astype(np.int64)


def T(a, grad=True):
    return torch.tensor(np.asarray(a, dtype=np.float32), dtype=torch.float64, requires_grad=grad)


def make_case(name, op, attrs, inputs, fn, rng, no_grad_inputs=(), fd_off=(), sparse_grads=False):
    """inputs: list of (name, np array, dtype). fn(*torch tensors) -> torch output (float64)."""
    tins = []
    for nm, arr, dt in inputs:
        if dt == "i32":
            tins.append(torch.tensor(np.asarray(arr), dtype=torch.int64))
        else:
            tins.append(T(arr, grad=nm not in no_grad_inputs))
    out = fn(*tins)
    out_f = out.to(torch.float64) if out.dtype != torch.float64 else out
    R = rng.normal(tuple(out.shape)) if out.dim() > 0 else rng.normal((1,)).reshape(())
    grads = {}
    float_ins = [(nm, t) for (nm, _, dt), t in zip(inputs, tins) if dt == "f32" and nm not in no_grad_inputs]
    if out_f.requires_grad and float_ins:
        loss = (out_f * torch.tensor(R, dtype=torch.float64)).sum()
        gs = torch.autograd.grad(loss, [t for _, t in float_ins], allow_unused=True)
        for (nm, t), g in zip(float_ins, gs):
            grads[nm] = torch.zeros_like(t) if g is None else g
    else:
        for nm, t in float_ins:
            grads[nm] = torch.zeros_like(t)
    enc_in = []
    for (nm, arr, dt) in inputs:
        e = ints(arr) if dt == "i32" else dense(arr)
        e = {"name": nm, "dtype": dt, "grad": dt == "f32" and nm not in no_grad_inputs,
             "fd": dt == "f32" and nm not in no_grad_inputs and nm not in fd_off, **e}
        enc_in.append(e)
    out_enc = ints(out) if out.dtype in (torch.int64, torch.int32) else dense(out_f)
    return {"name": name, "op": op, "attrs": attrs, "inputs": enc_in, "output": out_enc,
            "R": dense(R), "grads": {k: (sparse(v) if sparse_grads else dense(v)) for k, v in grads.items()}}


# ------------------------------------------------------------------------------------------------
# elementwise
# ------------------------------------------------------------------------------------------------

def gen_elementwise():
    rng = Rng(1001)
    cases = []
    shapes = [(1,), (3,), (7,), (13,), (3, 7), (1, 13), (7, 1, 3), (2, 3, 5), (11,), (5, 3)]
    unary = [
        ("neg", lambda r, s: r.normal(s), torch.neg),
        ("abs", lambda r, s: r.away_from_zero(s), torch.abs),
        ("exp", lambda r, s: r.normal(s), torch.exp),
        ("log", lambda r, s: r.uniform(s, 0.2, 4.0), torch.log),
        ("sqrt", lambda r, s: r.uniform(s, 0.2, 4.0), torch.sqrt),
        ("rsqrt", lambda r, s: r.uniform(s, 0.2, 4.0), torch.rsqrt),
        ("sin", lambda r, s: r.normal(s, 3.0), torch.sin),
        ("cos", lambda r, s: r.normal(s, 3.0), torch.cos),
        ("tanh", lambda r, s: r.normal(s, 2.0), torch.tanh),
        ("sigmoid", lambda r, s: r.normal(s, 3.0), torch.sigmoid),
        ("relu", lambda r, s: r.away_from_zero(s), torch.relu),
        ("leaky_relu", lambda r, s: r.away_from_zero(s), lambda x: F.leaky_relu(x, 0.01)),
        ("softplus", lambda r, s: r.normal(s, 4.0), F.softplus),
        ("sign", lambda r, s: r.away_from_zero(s), torch.sign),
        ("floor", lambda r, s: r.non_integer(s), torch.floor),
        ("round", lambda r, s: r.non_integer(s), torch.round),
        ("reciprocal", lambda r, s: r.away_from_zero(s, 0.3), torch.reciprocal),
    ]
    for i, (op, gen, fn) in enumerate(unary):
        for j in range(2):
            s = shapes[(i + 3 * j) % len(shapes)]
            cases.append(make_case(f"{op}_{'x'.join(map(str, s))}", op, {}, [("x", gen(rng, s), "f32")], fn, rng))
    # leaky_relu with another slope; softplus in the linear regime (x > 20 returns x in torch)
    cases.append(make_case("leaky_relu_slope0.2", "leaky_relu", {"slope": 0.2},
                           [("x", rng.away_from_zero((3, 7)), "f32")], lambda x: F.leaky_relu(x, 0.2), rng))
    cases.append(make_case("softplus_large", "softplus", {},
                           [("x", np.array([-30, -21, -5, 0.5, 5, 21, 30], np.float32), "f32")], F.softplus, rng))
    # round: half to even (forward only: halves are discontinuities)
    halves = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, -3.49, 3.51, 0.49999997], np.float32)
    cases.append(make_case("round_halves", "round", {}, [("x", halves, "f32")], torch.round, rng, fd_off=("x",)))

    def cmp(fn):
        return lambda a, b: fn(a, b).to(torch.float64)

    binary = [
        ("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div),
        ("pow", torch.pow), ("maximum", torch.maximum), ("minimum", torch.minimum),
        ("lt", cmp(torch.lt)), ("le", cmp(torch.le)), ("gt", cmp(torch.gt)), ("ge", cmp(torch.ge)),
        ("eq", cmp(torch.eq)), ("ne", cmp(torch.ne)),
    ]
    big = ((7, 1, 5), (3, 1))
    small = [((3, 7), (7,)), ((2, 1, 3), (1, 5, 1)), ((1,), (2, 3))]
    for i, (op, fn) in enumerate(binary):
        pairs = [((13,), (13,))]
        pairs.append(big if op in ("add", "mul", "div", "maximum", "eq") else small[i % len(small)])
        for sa, sb in pairs:
            if op == "pow":
                a, b = rng.uniform(sa, 0.3, 2.5), rng.normal(sb)
            elif op == "div":
                a, b = rng.normal(sa), rng.away_from_zero(sb, 0.3)
            elif op in ("maximum", "minimum"):
                a, b = rng.normal(sa), rng.normal(sb)
                ab = np.broadcast_arrays(a, b)
                # keep every broadcast pair at least 0.05 apart (no ties: differentiable)
                while np.min(np.abs(ab[0] - ab[1])) < 0.05:
                    a, b = rng.normal(sa), rng.normal(sb)
                    ab = np.broadcast_arrays(a, b)
            elif op in ("eq", "ne", "le", "ge", "lt", "gt"):
                a = rng.normal(sa)
                b = rng.normal(sb)
                if sa == sb:  # make some entries equal
                    b = np.where(rng.r.randint(0, 2, sb) == 1, a, b).astype(np.float32)
                else:
                    b.ravel()[0] = a.ravel()[0]
            else:
                a, b = rng.normal(sa), rng.normal(sb)
            fd_off = ("a", "b") if op in ("lt", "le", "gt", "ge", "eq", "ne") else ()
            nm = f"{op}_{'x'.join(map(str, sa))}_{'x'.join(map(str, sb))}"
            cases.append(make_case(nm, op, {}, [("a", a, "f32"), ("b", b, "f32")], fn, rng, fd_off=fd_off))
    # maximum/minimum with ties: torch splits the gradient 0.5/0.5
    a = np.array([1.0, 2.0, -3.0, 0.5, 4.0, -1.0, 2.0], np.float32)
    b = np.array([1.0, 1.0, -3.0, 0.7, 4.0, -2.0, 2.0], np.float32)
    cases.append(make_case("maximum_ties", "maximum", {}, [("a", a, "f32"), ("b", b, "f32")], torch.maximum, rng,
                           fd_off=("a", "b")))
    cases.append(make_case("minimum_ties", "minimum", {}, [("a", a, "f32"), ("b", b, "f32")], torch.minimum, rng,
                           fd_off=("a", "b")))
    # where(c, a, b): c is a 0/1 float tensor (nonzero selects a), broadcast over (7,1,5) / (3,1) / (5,)
    c = (rng.r.randint(0, 2, (7, 1, 5))).astype(np.float32)
    cases.append(make_case("where_7x1x5_3x1_5", "where", {},
                           [("c", c, "f32"), ("a", rng.normal((3, 1)), "f32"), ("b", rng.normal((5,)), "f32")],
                           lambda c, a, b: torch.where(c != 0, a, b), rng, fd_off=("c",)))
    c = (rng.r.randint(0, 2, (13,))).astype(np.float32)
    cases.append(make_case("where_13", "where", {},
                           [("c", c, "f32"), ("a", rng.normal((13,)), "f32"), ("b", rng.normal((13,)), "f32")],
                           lambda c, a, b: torch.where(c != 0, a, b), rng, fd_off=("c",)))
    # a fused expression: relu(x * w + b) with broadcasting
    cases.append(make_case("relu_xw_plus_b", "relu_xw_plus_b", {},
                           [("x", rng.away_from_zero((5, 7)), "f32"), ("w", rng.normal((7,)), "f32"),
                            ("b", rng.normal((5, 1)), "f32")],
                           lambda x, w, b: torch.relu(x * w + b), rng))
    return {"file": "elementwise.json", "cases": cases}


# ------------------------------------------------------------------------------------------------
# reductions and matmul
# ------------------------------------------------------------------------------------------------

def gen_reduce():
    rng = Rng(2002)
    cases = []
    specs = [((7,), [], False), ((3, 7), [1], True), ((3, 7), [0], False), ((2, 3, 5), [0, 2], True),
             ((2, 3, 5), [-1], False), ((2, 3, 5), [1], False), ((13, 1), [1], True), ((1,), [0], False),
             ((3, 5), [], True)]
    for op in ["sum", "mean", "max", "min"]:
        for shape, axes, keep in specs:
            x = rng.distinct(shape)
            dims = tuple(axes) if axes else tuple(range(len(shape)))

            def fn(t, dims=dims, keep=keep, op=op):
                if op == "sum":
                    return t.sum(dim=dims, keepdim=keep)
                if op == "mean":
                    return t.mean(dim=dims, keepdim=keep)
                if op == "max":
                    return torch.amax(t, dim=dims, keepdim=keep)
                return torch.amin(t, dim=dims, keepdim=keep)
            nm = f"{op}_{'x'.join(map(str, shape))}_axes{''.join(map(str, axes)) or 'all'}{'_keep' if keep else ''}"
            cases.append(make_case(nm, op, {"axes": axes, "keepdims": keep}, [("x", x, "f32")], fn, rng))
    # ties: amax/amin split the gradient evenly among tied extrema
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, 5, 4, 5]], np.float32)
    for op, fn in [("max", torch.amax), ("min", torch.amin)]:
        cases.append(make_case(f"{op}_ties_axis1", op, {"axes": [1], "keepdims": False}, [("x", x, "f32")],
                               lambda t, fn=fn: fn(t, dim=1), rng, fd_off=("x",)))
        cases.append(make_case(f"{op}_ties_all", op, {"axes": [], "keepdims": False}, [("x", x, "f32")],
                               lambda t, fn=fn: fn(t, dim=(0, 1)), rng, fd_off=("x",)))
    # argmax (first maximum wins ties)
    for shape, axis, keep in [((3, 7), 1, False), ((3, 7), 0, True), ((2, 3, 5), -1, False), ((2, 3, 5), 1, True)]:
        x = rng.normal(shape)
        cases.append(make_case(f"argmax_{'x'.join(map(str, shape))}_axis{axis}{'_keep' if keep else ''}", "argmax",
                               {"axis": axis, "keepdims": keep}, [("x", x, "f32")],
                               lambda t, a=axis, k=keep: torch.argmax(t, dim=a, keepdim=k), rng,
                               fd_off=("x",)))
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, 5, 4, 5]], np.float32)
    cases.append(make_case("argmax_ties", "argmax", {"axis": 1, "keepdims": False}, [("x", x, "f32")],
                           lambda t: torch.argmax(t, dim=1), rng, fd_off=("x",)))
    # matmul
    for sa, sb in [((3, 5), (5, 7)), ((1, 13), (13, 1)), ((7, 1), (1, 3)), ((2, 3, 5), (2, 5, 4)),
                   ((2, 1, 3, 5), (3, 5, 2)), ((3, 5), (2, 5, 2)), ((7, 11), (11, 3))]:
        nm = f"matmul_{'x'.join(map(str, sa))}_{'x'.join(map(str, sb))}"
        cases.append(make_case(nm, "matmul", {}, [("a", rng.normal(sa), "f32"), ("b", rng.normal(sb), "f32")],
                               torch.matmul, rng))
    # x used twice: matmul(x, x^T)
    cases.append(make_case("matmul_x_xT", "matmul_x_xT", {}, [("x", rng.normal((5, 3)), "f32")],
                           lambda x: x @ x.T, rng))
    return {"file": "reduce.json", "cases": cases}


# ------------------------------------------------------------------------------------------------
# movement ops
# ------------------------------------------------------------------------------------------------

def gen_movement():
    rng = Rng(3003)
    cases = []

    def add(nm, op, attrs, ins, fn, **kw):
        cases.append(make_case(nm, op, attrs, ins, fn, rng, **kw))

    add("reshape_2x3x5_to_5x6", "reshape", {"shape": [5, 6]}, [("x", rng.normal((2, 3, 5)), "f32")],
        lambda x: x.reshape(5, 6))
    add("reshape_infer", "reshape", {"shape": [3, -1]}, [("x", rng.normal((7, 3)), "f32")],
        lambda x: x.reshape(3, -1))
    add("flatten_2x3x2x2", "flatten", {"start_dim": 1}, [("x", rng.normal((2, 3, 2, 2)), "f32")],
        lambda x: torch.flatten(x, 1))
    add("flatten_2x3x2x2_from2", "flatten", {"start_dim": 2}, [("x", rng.normal((2, 3, 2, 2)), "f32")],
        lambda x: torch.flatten(x, 2))
    add("transpose_3x7", "transpose", {"axis0": -2, "axis1": -1}, [("x", rng.normal((3, 7)), "f32")],
        lambda x: x.transpose(-2, -1))
    add("transpose_2x3x5_0_2", "transpose", {"axis0": 0, "axis1": 2}, [("x", rng.normal((2, 3, 5)), "f32")],
        lambda x: x.transpose(0, 2))
    add("permute_2x3x5_120", "permute", {"perm": [1, 2, 0]}, [("x", rng.normal((2, 3, 5)), "f32")],
        lambda x: x.permute(1, 2, 0))
    add("permute_2x3x1x5_3021", "permute", {"perm": [3, 0, 2, 1]}, [("x", rng.normal((2, 3, 1, 5)), "f32")],
        lambda x: x.permute(3, 0, 2, 1))
    add("broadcast_to_3x1_7x3x5", "broadcast_to", {"shape": [7, 3, 5]}, [("x", rng.normal((3, 1)), "f32")],
        lambda x: torch.broadcast_to(x, (7, 3, 5)))
    add("broadcast_to_1_13", "broadcast_to", {"shape": [2, 13]}, [("x", rng.normal((1,)), "f32")],
        lambda x: torch.broadcast_to(x, (2, 13)))
    for shape, axis, start, end, step in [((7, 5), 0, 1, 6, 1), ((7, 5), 1, -3, 5, 1), ((13,), 0, 2, 13, 3),
                                          ((3, 11), 1, 0, 11, 2), ((2, 7, 3), 1, 1, -1, 2), ((7,), 0, 3, 4, 1)]:
        nm = f"slice_{'x'.join(map(str, shape))}_ax{axis}_{start}_{end}_{step}"
        sl = [slice(None)] * len(shape)
        sl[axis] = slice(start, end, step)
        add(nm, "slice", {"axis": axis, "start": start, "end": end, "step": step},
            [("x", rng.normal(shape), "f32")], lambda x, sl=tuple(sl): x[sl])
    for shape, before, after, value in [((3, 5), [1, 0], [2, 3], 0.0), ((2, 3, 4), [0, 1, 2], [1, 0, 1], 0.0),
                                        ((7,), [3], [1], 1.5)]:
        pads = []
        for b, a in zip(reversed(before), reversed(after)):
            pads += [b, a]
        nm = f"pad_{'x'.join(map(str, shape))}_{'_'.join(map(str, before))}__{'_'.join(map(str, after))}"
        add(nm, "pad", {"before": before, "after": after, "value": value}, [("x", rng.normal(shape), "f32")],
            lambda x, p=pads, v=value: F.pad(x, p, value=v))
    add("concat_axis0", "concat", {"axis": 0},
        [("x0", rng.normal((2, 5)), "f32"), ("x1", rng.normal((3, 5)), "f32"), ("x2", rng.normal((1, 5)), "f32")],
        lambda a, b, c: torch.cat([a, b, c], 0))
    add("concat_axis1", "concat", {"axis": 1},
        [("x0", rng.normal((3, 2, 2)), "f32"), ("x1", rng.normal((3, 5, 2)), "f32")],
        lambda a, b: torch.cat([a, b], 1))
    add("concat_axis_neg1", "concat", {"axis": -1},
        [("x0", rng.normal((3, 1)), "f32"), ("x1", rng.normal((3, 4)), "f32"), ("x2", rng.normal((3, 2)), "f32")],
        lambda a, b, c: torch.cat([a, b, c], -1))
    labels = np.array([0, 3, 1, 6, 6, 2, 0], np.int64)
    add("one_hot_7_classes7", "one_hot", {"num_classes": 7}, [("labels", labels, "i32")],
        lambda l: F.one_hot(l, 7).to(torch.float64))
    add("one_hot_3_classes10", "one_hot", {"num_classes": 10}, [("labels", np.array([9, 0, 4], np.int64), "i32")],
        lambda l: F.one_hot(l, 10).to(torch.float64))
    return {"file": "movement.json", "cases": cases}


# ------------------------------------------------------------------------------------------------
# conv, pool, softmax, losses
# ------------------------------------------------------------------------------------------------

def gen_nn():
    rng = Rng(4004)
    cases = []

    def add(nm, op, attrs, ins, fn, **kw):
        cases.append(make_case(nm, op, attrs, ins, fn, rng, **kw))

    conv = [  # x shape, w shape, bias, stride, padding, dilation
        ((1, 3, 5, 5), (4, 3, 3, 3), True, (1, 1), (1, 1), (1, 1)),
        ((1, 2, 9, 7), (3, 2, 3, 2), False, (2, 1), (0, 1), (1, 1)),
        ((1, 2, 7, 7), (2, 2, 3, 3), True, (1, 1), (2, 2), (2, 2)),
        ((1, 1, 5, 5), (1, 1, 5, 5), True, (1, 1), (0, 0), (1, 1)),
        ((1, 3, 11, 7), (2, 3, 3, 3), True, (3, 2), (2, 1), (1, 2)),
        ((3, 1, 1, 1), (5, 1, 1, 1), True, (1, 1), (0, 0), (1, 1)),
    ]
    for xs, ws, bias, st, pd, dl in conv:
        ins = [("x", rng.normal(xs), "f32"), ("w", rng.normal(ws, 0.5), "f32")]
        if bias:
            ins.append(("bias", rng.normal((ws[0],)), "f32"))
        nm = f"conv2d_{'x'.join(map(str, xs))}_{'x'.join(map(str, ws))}_s{st[0]}{st[1]}_p{pd[0]}{pd[1]}_d{dl[0]}{dl[1]}"
        add(nm, "conv2d", {"stride": list(st), "padding": list(pd), "dilation": list(dl)}, ins,
            lambda x, w, b=None, st=st, pd=pd, dl=dl: F.conv2d(x, w, b, stride=st, padding=pd, dilation=dl))
    pools = [  # x shape, kernel, stride (0 = kernel), padding
        ((1, 2, 6, 6), (2, 2), (0, 0), (0, 0)),
        ((2, 1, 7, 7), (3, 3), (2, 2), (1, 1)),
        ((1, 2, 5, 7), (3, 2), (1, 2), (1, 0)),
        ((1, 1, 7, 5), (3, 3), (1, 1), (0, 0)),
        ((1, 3, 5, 5), (2, 2), (0, 0), (1, 1)),
    ]
    for op, fn in [("max_pool2d", F.max_pool2d), ("avg_pool2d", F.avg_pool2d)]:
        for xs, k, s, p in pools:
            stride = s if s != (0, 0) else None
            nm = f"{op}_{'x'.join(map(str, xs))}_k{k[0]}{k[1]}_s{s[0]}{s[1]}_p{p[0]}{p[1]}"
            add(nm, op, {"kernel": list(k), "stride": list(s), "padding": list(p)}, [("x", rng.distinct(xs), "f32")],
                lambda x, fn=fn, k=k, stride=stride, p=p: fn(x, k, stride, p))
    # max_pool2d ties: PyTorch gives the whole gradient to the first maximum in the window (row-major)
    x = np.array([[[[1, 1, 0, 2], [1, 0, 2, 2], [3, 3, 5, 4], [3, 3, 4, 5]]]], np.float32)
    add("max_pool2d_ties", "max_pool2d", {"kernel": [2, 2], "stride": [0, 0], "padding": [0, 0]},
        [("x", x, "f32")], lambda x: F.max_pool2d(x, 2), fd_off=("x",))
    add("max_pool2d_ties_overlap", "max_pool2d", {"kernel": [3, 3], "stride": [1, 1], "padding": [1, 1]},
        [("x", x, "f32")], lambda x: F.max_pool2d(x, 3, 1, 1), fd_off=("x",))
    # softmax family
    big = np.array([[1000, -1000, 0, 999], [-1000, -1000, -999, 1000], [1000, 1000, 1000, 1000]], np.float32)
    for op, fn in [("softmax", F.softmax), ("log_softmax", F.log_softmax)]:
        add(f"{op}_3x7_axis-1", op, {"axis": -1}, [("x", rng.normal((3, 7), 2.0), "f32")],
            lambda x, fn=fn: fn(x, dim=-1))
        add(f"{op}_3x7_axis0", op, {"axis": 0}, [("x", rng.normal((3, 7), 2.0), "f32")],
            lambda x, fn=fn: fn(x, dim=0))
        add(f"{op}_2x3x5_axis1", op, {"axis": 1}, [("x", rng.normal((2, 3, 5), 2.0), "f32")],
            lambda x, fn=fn: fn(x, dim=1))
        add(f"{op}_pm1000", op, {"axis": -1}, [("x", big, "f32")], lambda x, fn=fn: fn(x, dim=-1))
    add("cross_entropy_5x7", "cross_entropy", {}, [("logits", rng.normal((5, 7), 2.0), "f32"),
                                                   ("labels", rng.ints((5,), 0, 7), "i32")],
        lambda x, l: F.cross_entropy(x, l))
    add("cross_entropy_1x3", "cross_entropy", {}, [("logits", rng.normal((1, 3)), "f32"),
                                                   ("labels", np.array([2], np.int64), "i32")],
        lambda x, l: F.cross_entropy(x, l))
    add("cross_entropy_pm1000", "cross_entropy", {},
        [("logits", big, "f32"), ("labels", np.array([1, 3, 2], np.int64), "i32")],
        lambda x, l: F.cross_entropy(x, l))
    add("cross_entropy_pm1000_right", "cross_entropy", {},
        [("logits", big, "f32"), ("labels", np.array([0, 3, 0], np.int64), "i32")],
        lambda x, l: F.cross_entropy(x, l))
    add("mse_loss_3x7", "mse_loss", {}, [("a", rng.normal((3, 7)), "f32"), ("b", rng.normal((3, 7)), "f32")],
        F.mse_loss)
    add("mse_loss_13", "mse_loss", {}, [("a", rng.normal((13,)), "f32"), ("b", rng.normal((13,)), "f32")],
        F.mse_loss)
    tgt = F.softmax(torch.tensor(rng.normal((4, 5))), dim=1).numpy().astype(np.float32)
    add("kl_div_4x5", "kl_div", {}, [("log_probs", F.log_softmax(torch.tensor(rng.normal((4, 5))), 1).numpy(), "f32"),
                                     ("target", tgt, "f32")],
        lambda lp, t: F.kl_div(lp, t, reduction="batchmean"))
    tgt0 = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.2, 0.3, 0.5]], np.float32)
    add("kl_div_zero_target", "kl_div", {},
        [("log_probs", F.log_softmax(torch.tensor(rng.normal((3, 3))), 1).numpy(), "f32"), ("target", tgt0, "f32")],
        lambda lp, t: F.kl_div(lp, t, reduction="batchmean"), no_grad_inputs=("target",))
    return {"file": "nn.json", "cases": cases}


# ------------------------------------------------------------------------------------------------
# fake quantisation (float32, as torch defines it)
# ------------------------------------------------------------------------------------------------

def gen_fake_quant():
    rng = Rng(5005)
    cases = []
    for nm, scale, zp, qmin, qmax, spread in [("symmetric_s0.1_zp0", 0.1, 0, -128, 127, 1.0),
                                              ("asymmetric_s0.05_zp10_0_255", 0.05, 10, 0, 255, 1.0)]:
        x = rng.normal((1000,), spread)
        t = torch.tensor(x, dtype=torch.float32, requires_grad=True)
        y = torch.fake_quantize_per_tensor_affine(t, scale, zp, qmin, qmax)
        y.sum().backward()  # R = ones: the gradient is the straight-through mask
        cases.append({"name": nm, "op": "fake_quant",
                      "attrs": {"scale": scale, "zero_point": zp, "qmin": qmin, "qmax": qmax},
                      "inputs": [{"name": "x", "dtype": "f32", "grad": True, "fd": False, **dense(x)}],
                      "output": dense(y), "R": {"shape": [1000], "fill": 1.0},
                      "grads": {"x": dense(t.grad)}})
    return {"file": "fake_quant.json", "note": "computed in float32; R is all ones", "cases": cases}


# ------------------------------------------------------------------------------------------------
# models
# ------------------------------------------------------------------------------------------------

# ------------------------------------------------------------------------------------------------
# gather, take, Embedding (gather.json)
# ------------------------------------------------------------------------------------------------

def gen_gather():
    """gather.json: torch.gather / index_select / F.embedding cases (op cases as above) and an nn.Embedding train
    step (Adam, 3 steps), in float64. Indices repeat (the gradient sums them) and miss some rows (zero gradient)."""
    rng = Rng(7007)
    cases = []

    def add(nm, op, attrs, ins, fn, **kw):
        cases.append(make_case(nm, op, attrs, ins, fn, rng, **kw))

    # torch.gather(input, dim, index): index has input's rank, any size along dim, <= input's size elsewhere
    add("gather_3x5_dim1", "gather", {"axis": 1},
        [("x", rng.normal((3, 5)), "f32"), ("index", np.array([[0, 4, 4, 1], [2, 2, 2, 2], [3, 0, 1, 0]]), "i32")],
        lambda x, i: torch.gather(x, 1, i))
    add("gather_4x3x2_dim0_smaller_index", "gather", {"axis": 0},
        [("x", rng.normal((4, 3, 2)), "f32"), ("index", rng.ints((5, 2, 2), 0, 4), "i32")],
        lambda x, i: torch.gather(x, 0, i))
    add("gather_2x3x6_dim_neg1", "gather", {"axis": -1},
        [("x", rng.normal((2, 3, 6)), "f32"), ("index", rng.ints((2, 3, 7), 0, 6), "i32")],
        lambda x, i: torch.gather(x, -1, i))
    # take(x, indices, axis) = torch.index_select for 1-D indices; x[..., indices, ...] for N-D (numpy.take)
    add("take_10x4_axis0_3x5", "take", {"axis": 0},
        [("x", rng.normal((10, 4)), "f32"), ("index", rng.ints((3, 5), 0, 10), "i32")],
        lambda x, i: F.embedding(i, x))
    add("take_3x6x2_axis1_index_select", "take", {"axis": 1},
        [("x", rng.normal((3, 6, 2)), "f32"), ("index", np.array([5, 0, 5, 2]), "i32")],
        lambda x, i: torch.index_select(x, 1, i))
    add("take_2x7x3_axis1_2x2", "take", {"axis": 1},
        [("x", rng.normal((2, 7, 3)), "f32"), ("index", np.array([[6, 1], [1, 3]]), "i32")],
        lambda x, i: x[:, i])
    add("take_5x3_axis_neg1_4", "take", {"axis": -1},
        [("x", rng.normal((5, 3)), "f32"), ("index", np.array([2, 2, 0, 1]), "i32")],
        lambda x, i: torch.index_select(x, -1, i))
    add("embedding_padding_idx2", "embedding", {"padding_idx": 2},
        [("x", rng.normal((6, 3)), "f32"), ("index", np.array([[2, 0, 5], [2, 2, 1]]), "i32")],
        lambda w, i: F.embedding(i, w, padding_idx=2), fd_off=("x",))  # the padding row's zero gradient is not d/dx

    # nn.Embedding(10, 4, padding_idx=1) as logits of a 4-class cross_entropy, Adam(lr=0.1), 3 steps
    emb = torch.nn.Embedding(10, 4, padding_idx=1).double()
    w0 = rng.normal((10, 4))
    w0[1] = 0.0  # torch zeroes the padding row at init
    with torch.no_grad():
        emb.weight.copy_(torch.tensor(w0, dtype=torch.float64))
    idx = np.array([[3, 1, 7, 3, 0, 9], [1, 3, 3, 5, 8, 2]], np.int64)
    labels = rng.ints((12,), 0, 4)
    opt = torch.optim.Adam(emb.parameters(), lr=0.1)
    steps = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(emb(torch.tensor(idx)).reshape(12, 4), torch.tensor(labels))
        loss.backward()
        g = emb.weight.grad.detach().clone()
        opt.step()
        steps.append({"loss": f32s([loss.item()])[0], "grad": dense(g), "weight": dense(emb.weight)})
    train = {"model": "nn.Embedding(10, 4, padding_idx=1); logits = emb(idx).reshape(12, 4); "
                      "cross_entropy (mean); Adam(lr=0.1)",
             "num_embeddings": 10, "embedding_dim": 4, "padding_idx": 1, "lr": 0.1, "weight": dense(w0),
             "indices": ints(idx), "labels": ints(labels), "steps": steps}
    return {"file": "gather.json", "embedding_train": train, "cases": cases}


def gen_conv_transpose():
    """conv_transpose2d (stride, padding, output_padding, dilation, bias) and nearest upsampling by whole factors."""
    rng = Rng(9339)
    cases = []

    def add(nm, op, attrs, ins, fn, **kw):
        cases.append(make_case(nm, op, attrs, ins, fn, rng, **kw))

    convt = [  # x shape, w shape (C_in, C_out, KH, KW), bias, stride, padding, output_padding, dilation
        ((1, 3, 4, 4), (3, 2, 3, 3), True, (2, 2), (1, 1), (1, 1), (1, 1)),
        ((2, 2, 5, 3), (2, 3, 2, 3), False, (1, 2), (0, 1), (0, 1), (1, 1)),
        ((1, 2, 3, 4), (2, 2, 3, 2), True, (3, 1), (1, 0), (2, 0), (2, 2)),
        ((1, 4, 2, 2), (4, 1, 4, 4), True, (2, 2), (1, 1), (0, 0), (1, 1)),
    ]
    for xs, ws, bias, st, pd, op, dl in convt:
        ins = [("x", rng.normal(xs), "f32"), ("w", rng.normal(ws, 0.5), "f32")]
        if bias:
            ins.append(("bias", rng.normal((ws[1],)), "f32"))
        nm = (f"conv_transpose2d_{'x'.join(map(str, xs))}_{'x'.join(map(str, ws))}_s{st[0]}{st[1]}_p{pd[0]}{pd[1]}"
              f"_op{op[0]}{op[1]}_d{dl[0]}{dl[1]}")
        add(nm, "conv_transpose2d",
            {"stride": list(st), "padding": list(pd), "output_padding": list(op), "dilation": list(dl)}, ins,
            lambda x, w, b=None, st=st, pd=pd, op=op, dl=dl:
            F.conv_transpose2d(x, w, b, stride=st, padding=pd, output_padding=op, dilation=dl))
    for xs, sc in [((1, 2, 3, 4), (2, 2)), ((2, 1, 2, 3), (3, 1))]:
        add(f"upsample_nearest2d_{'x'.join(map(str, xs))}_x{sc[0]}{sc[1]}", "upsample_nearest2d",
            {"scale": list(sc)}, [("x", rng.normal(xs), "f32")],
            lambda x, sc=sc: F.interpolate(x, scale_factor=sc, mode="nearest"))
    return {"file": "conv_transpose.json", "cases": cases}


def gen_conv_groups():
    """Grouped and depthwise conv2d / conv_transpose2d (groups, with stride, padding, dilation, bias or not) and bilinear
    interpolation (align_corners True/False, size or scale_factor, up and down, non-integer factors; computed in f32
    as a user's f32 tensor is, then widened: torch's f32 source indices and weights)."""
    rng = Rng(4242)
    cases = []

    def add(nm, op, attrs, ins, fn, **kw):
        cases.append(make_case(nm, op, attrs, ins, fn, rng, **kw))

    def dims(s):
        return 'x'.join(map(str, s))

    convs = [  # x shape, w shape (O, C/groups, KH, KW), groups, bias, stride, padding, dilation
        ((2, 4, 5, 5), (6, 2, 3, 3), 2, True, (1, 1), (1, 1), (1, 1)),
        ((1, 3, 6, 5), (3, 1, 3, 3), 3, False, (2, 2), (1, 1), (1, 1)),   # depthwise
        ((1, 2, 5, 6), (4, 1, 2, 3), 2, True, (1, 2), (1, 0), (2, 1)),    # depthwise, channel multiplier 2
        ((1, 4, 4, 4), (2, 2, 3, 3), 2, False, (1, 1), (2, 2), (2, 2)),   # one output channel per group
    ]
    for xs, ws, g, bias, st, pd, dl in convs:
        ins = [("x", rng.normal(xs), "f32"), ("w", rng.normal(ws, 0.5), "f32")]
        if bias:
            ins.append(("bias", rng.normal((ws[0],)), "f32"))
        add(f"conv2d_{dims(xs)}_{dims(ws)}_g{g}_s{st[0]}{st[1]}_p{pd[0]}{pd[1]}_d{dl[0]}{dl[1]}", "conv2d",
            {"stride": list(st), "padding": list(pd), "dilation": list(dl), "groups": g}, ins,
            lambda x, w, b=None, st=st, pd=pd, dl=dl, g=g: F.conv2d(x, w, b, stride=st, padding=pd, dilation=dl,
                                                                     groups=g))
    convt = [  # x shape, w shape (C_in, C_out/groups, KH, KW), groups, bias, stride, padding, output_padding
        ((1, 4, 3, 3), (4, 3, 3, 3), 2, True, (2, 2), (1, 1), (1, 1)),
        ((2, 3, 3, 4), (3, 1, 2, 2), 3, False, (2, 1), (0, 1), (1, 0)),
    ]
    for xs, ws, g, bias, st, pd, op in convt:
        ins = [("x", rng.normal(xs), "f32"), ("w", rng.normal(ws, 0.5), "f32")]
        if bias:
            ins.append(("bias", rng.normal((ws[1] * g,)), "f32"))
        add(f"conv_transpose2d_{dims(xs)}_{dims(ws)}_g{g}_s{st[0]}{st[1]}_p{pd[0]}{pd[1]}_op{op[0]}{op[1]}",
            "conv_transpose2d",
            {"stride": list(st), "padding": list(pd), "output_padding": list(op), "dilation": [1, 1], "groups": g},
            ins, lambda x, w, b=None, st=st, pd=pd, op=op, g=g:
            F.conv_transpose2d(x, w, b, stride=st, padding=pd, output_padding=op, groups=g))
    bilinear = [  # x shape, size or None, scale_factor or None, align_corners
        ((1, 2, 3, 4), (5, 7), None, False),
        ((1, 2, 3, 4), (5, 7), None, True),
        ((2, 1, 4, 5), None, (2.0, 2.0), False),
        ((1, 1, 4, 5), None, (2.5, 1.5), False),   # non-integer factors: the given scale, not in/out
        ((1, 1, 4, 5), None, (2.5, 1.5), True),
        ((1, 2, 6, 7), (4, 3), None, True),        # down
        ((1, 2, 6, 7), None, (0.5, 0.6), False),   # down by factors
        ((1, 1, 7, 3), (3, 1), None, True),        # one output column (ratio 0)
        ((1, 1, 2, 3), (2, 3), None, False),       # same size: the identity with zero-weight taps
    ]
    for xs, size, sf, ac in bilinear:
        tag = f"size{size[0]}x{size[1]}" if size else f"scale{sf[0]}x{sf[1]}"
        attrs = {"align_corners": ac}
        if size:
            attrs["size"] = list(size)
        else:
            attrs["scale_factor"] = list(sf)
        add(f"upsample_bilinear2d_{dims(xs)}_{tag}_ac{int(ac)}", "upsample_bilinear2d", attrs,
            [("x", rng.normal(xs), "f32")],
            lambda x, size=size, sf=sf, ac=ac:
            F.interpolate(x.float(), size=size, scale_factor=sf, mode="bilinear", align_corners=ac).double())
    return {"file": "conv_groups.json", "cases": cases}


def gen_batch_norm():
    """nn.BatchNorm1d/2d in train mode inside small models, 10 SGD steps (one fresh batch per step), then eval.

    Records per step the loss; after the steps every parameter, the running statistics (momentum 0.1 and None, the
    cumulative average) and num_batches_tracked, and the eval-mode output for a test batch. f64 throughout.
    """
    rng = Rng(7117)

    def run(model, x_shape, classes, lr, steps=10):
        inits = {k: rng.normal(tuple(v.shape), 0.5) for k, v in model.named_parameters()}
        with torch.no_grad():
            for k, v in model.named_parameters():
                v.copy_(torch.tensor(inits[k], dtype=torch.float64))
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        batches, labels, losses = [], [], []
        model.train()
        for _ in range(steps):
            x = rng.normal(x_shape)
            y = rng.ints((x_shape[0],), 0, classes)
            opt.zero_grad()
            loss = F.cross_entropy(model(T(x, False)), torch.tensor(y, dtype=torch.int64))
            loss.backward()
            opt.step()
            batches.append(dense(x))
            labels.append(ints(y))
            losses.append(f32s([loss.item()])[0])
        x_test = rng.normal(x_shape)
        model.eval()
        with torch.no_grad():
            y_eval = model(T(x_test, False))
        return {"init": {k: dense(v) for k, v in inits.items()}, "lr": lr, "batches": batches, "labels": labels,
                "losses": losses, "state_dict": {k: dense(v.double()) for k, v in model.state_dict().items()},
                "x_test": dense(x_test), "eval_out": dense(y_eval)}

    torch.manual_seed(0)
    m2 = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
                             torch.nn.Flatten(), torch.nn.Linear(48, 4)).double()
    bn2d = run(m2, (4, 2, 4, 4), 4, 0.1)
    bn2d["model"] = "Conv2d(2, 3, 3, padding=1), BatchNorm2d(3), ReLU, Flatten, Linear(48, 4); SGD(lr=0.1)"
    m1 = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.BatchNorm1d(6, momentum=None), torch.nn.Tanh(),
                             torch.nn.Linear(6, 3)).double()
    bn1d = run(m1, (8, 5), 3, 0.2)
    bn1d["model"] = "Linear(5, 6), BatchNorm1d(6, momentum=None), Tanh, Linear(6, 3); SGD(lr=0.2)"
    # (N, C, L) without affine parameters: one train-mode forward and the input's gradient of sum(y * w)
    bn = torch.nn.BatchNorm1d(3, affine=False).double()
    x = T(rng.normal((4, 3, 5)))
    w = rng.normal((4, 3, 5))
    y = bn(x)
    (y * T(w, False)).sum().backward()
    ncl = {"x": dense(x), "w": dense(w), "y": dense(y), "dx": dense(x.grad),
           "running_mean": dense(bn.running_mean), "running_var": dense(bn.running_var)}
    return {"file": "batch_norm.json", "bn2d_train": bn2d, "bn1d_train": bn1d, "bn1d_ncl": ncl}


def gen_rnn():
    """torch.nn.LSTM and nn.GRU with torch's own initialisation (seeded), forward and backward.

    Each case: the state_dict, the input x (and h0/c0 where given), output, h_n (c_n), and the gradients of
    L = sum(output * R) + sum(h_n * Rh) (+ sum(c_n * Rc)) with respect to x, h0, c0 and every parameter. f64.
    """
    rng = Rng(8228)
    cases = []

    def case(name, layer, x_shape, with_state):
        layer = layer.double()
        x = T(rng.normal(x_shape))
        nl, hs = layer.num_layers, layer.hidden_size
        n = x_shape[0] if layer.batch_first else x_shape[1]
        lstm = isinstance(layer, torch.nn.LSTM)
        h0 = T(rng.normal((nl, n, hs), 0.5)) if with_state else None
        c0 = T(rng.normal((nl, n, hs), 0.5)) if with_state and lstm else None
        if lstm:
            out, (hn, cn) = layer(x, (h0, c0)) if with_state else layer(x)
        else:
            out, hn = layer(x, h0) if with_state else layer(x)
            cn = None
        R, Rh = rng.normal(tuple(out.shape)), rng.normal(tuple(hn.shape))
        loss = (out * T(R, False)).sum() + (hn * T(Rh, False)).sum()
        Rc = None
        if lstm:
            Rc = rng.normal(tuple(cn.shape))
            loss = loss + (cn * T(Rc, False)).sum()
        loss.backward()
        c = {"name": name, "layer": "LSTM" if lstm else "GRU", "input_size": layer.input_size, "hidden_size": hs,
             "num_layers": nl, "bias": layer.bias, "batch_first": layer.batch_first,
             "state_dict": {k: dense(v) for k, v in layer.state_dict().items()},
             "grads": {k: dense(v.grad) for k, v in layer.named_parameters()},
             "x": dense(x), "dx": dense(x.grad), "output": dense(out), "h_n": dense(hn), "R": dense(R),
             "Rh": dense(Rh)}
        if with_state:
            c.update({"h0": dense(h0), "dh0": dense(h0.grad)})
        if lstm:
            c.update({"c_n": dense(cn), "Rc": dense(Rc)})
            if with_state:
                c.update({"c0": dense(c0), "dc0": dense(c0.grad)})
        cases.append(c)

    torch.manual_seed(36)
    case("lstm_2layers_batch_first", torch.nn.LSTM(3, 4, num_layers=2, batch_first=True), (2, 5, 3), False)
    case("lstm_h0_c0_time_major", torch.nn.LSTM(2, 3), (4, 3, 2), True)
    case("gru_2layers_h0", torch.nn.GRU(3, 5, num_layers=2), (6, 2, 3), True)
    case("gru_no_bias_batch_first", torch.nn.GRU(4, 3, bias=False, batch_first=True), (3, 4, 4), False)
    return {"file": "rnn.json", "cases": cases}


# ------------------------------------------------------------------------------------------------
# index masks and flip (masks.json, issue 36): iota/arange, tril/triu, flip
# ------------------------------------------------------------------------------------------------

def gen_masks():
    """masks.json: torch.arange viewed along an axis (sg::iota), torch.arange, torch.tril/triu over the last two
    dimensions (batch dimensions, diagonals above, on and below the main one, past the edges) and torch.flip, as op
    cases in float64 (the gradients of tril/triu are the same triangle of R, of flip R flipped back)."""
    rng = Rng(8008)
    cases = []

    def add(nm, op, attrs, ins, fn, **kw):
        cases.append(make_case(nm, op, attrs, ins, fn, rng, **kw))

    def iota(shape, axis):
        n = shape[axis]
        view = [1] * len(shape)
        view[axis] = n
        return lambda: torch.arange(n, dtype=torch.float64).reshape(view).expand(*shape).contiguous()

    add("iota_3x4_axis0", "iota", {"shape": [3, 4], "axis": 0}, [], iota((3, 4), 0))
    add("iota_2x3x5_axis1", "iota", {"shape": [2, 3, 5], "axis": 1}, [], iota((2, 3, 5), 1))
    add("iota_2x3x5_axis_neg1", "iota", {"shape": [2, 3, 5], "axis": -1}, [], iota((2, 3, 5), 2))
    add("arange_7", "arange", {"n": 7}, [], lambda: torch.arange(7, dtype=torch.float64))
    # an i32 iota as gather's index: x[:, :4] picked by torch.arange(4) broadcast over the rows
    add("gather_by_iota_3x5", "gather_iota", {"axis": 1, "index_shape": [3, 4]}, [("x", rng.normal((3, 5)), "f32")],
        lambda x: torch.gather(x, 1, torch.arange(4).expand(3, 4)))
    for shape, diag in [((4, 5), 0), ((5, 4), 0), ((4, 5), 1), ((4, 5), -1), ((4, 4), 3), ((4, 4), 7), ((4, 4), -5),
                        ((2, 3, 5, 4), 0), ((3, 1, 6), -2), ((1, 6), 2)]:
        tag = f"{'x'.join(map(str, shape))}_diag{diag}".replace("-", "neg")
        for op, fn in [("tril", torch.tril), ("triu", torch.triu)]:
            add(f"{op}_{tag}", op, {"diagonal": diag}, [("x", rng.normal(shape), "f32")],
                lambda x, fn=fn, d=diag: fn(x, d))
    for shape, dims in [((7,), [0]), ((3, 5), [1]), ((3, 5), [0, 1]), ((2, 3, 4), [0, 2]), ((2, 3, 4), [-1]),
                        ((2, 1, 3, 4), [1, 3]), ((4, 3), [])]:
        tag = f"{'x'.join(map(str, shape))}_dims{''.join(map(str, dims)).replace('-', 'neg') or 'none'}"
        add(f"flip_{tag}", "flip", {"dims": dims}, [("x", rng.normal(shape), "f32")],
            lambda x, d=dims: torch.flip(x, d))
    return {"file": "masks.json", "cases": cases}


# ------------------------------------------------------------------------------------------------
# layers (layers.json, issue 36): LayerNorm, RMSNorm, MultiheadAttention, TransformerEncoderLayer
# ------------------------------------------------------------------------------------------------

F32_EPS = float(np.finfo(np.float32).eps)  # torch.finfo(torch.float32).eps: nn.RMSNorm's eps=None on f32 inputs


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """torch 2.4's F.rms_norm (torch 1.13 here lacks it): x * rsqrt(mean(x^2) + eps) * weight over the trailing
    dims, eps None = the f32 machine epsilon (the inputs are f32 tensors in the tested code), in float64."""
    dims = tuple(range(-len(normalized_shape), 0))
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + (F32_EPS if eps is None else eps))
    return y if weight is None else y * weight


def gen_layers():
    """layers.json: F.layer_norm and F.rms_norm op cases (affine or not, one or two normalized dims, a large mean
    offset), F.multi_head_attention_forward cases (nn.MultiheadAttention's computation), nn.TransformerEncoderLayer
    (post- and pre-norm) in float64, and a Linear -> LayerNorm -> ReLU -> Linear -> RMSNorm model trained 3 Adam steps
    (state_dict names as torch's)."""
    rng = Rng(9009)
    cases = []

    def add(nm, op, attrs, ins, fn, **kw):
        cases.append(make_case(nm, op, attrs, ins, fn, rng, **kw))

    for nm, shape, ns, affine, eps, offset in [
            ("layer_norm_4x8", (4, 8), [8], "both", 1e-5, 0.0),
            ("layer_norm_2x3x5_last2", (2, 3, 5), [3, 5], "both", 1e-5, 0.0),
            ("layer_norm_3x6_no_affine", (3, 6), [6], "none", 1e-5, 0.0),
            ("layer_norm_2x4x16_weight_only", (2, 4, 16), [16], "weight", 1e-5, 0.0),
            ("layer_norm_5x7_eps1e-3_offset50", (5, 7), [7], "both", 1e-3, 50.0)]:
        ins = [("x", rng.normal(shape) + np.float32(offset), "f32")]
        if affine in ("both", "weight"):
            ins.append(("weight", (1.0 + 0.3 * rng.normal(tuple(ns))).astype(np.float32), "f32"))
        if affine == "both":
            ins.append(("bias", rng.normal(tuple(ns), 0.5), "f32"))
        add(nm, "layer_norm", {"normalized_shape": ns, "eps": eps, "weight": affine != "none", "bias": affine == "both"},
            ins, lambda x, *wb, ns=ns, eps=eps: F.layer_norm(x, ns, *wb, eps=eps))
    for nm, shape, ns, weight, eps in [
            ("rms_norm_4x8", (4, 8), [8], True, None),
            ("rms_norm_2x3x5_last2_eps1e-6", (2, 3, 5), [3, 5], True, 1e-6),
            ("rms_norm_3x6_no_weight", (3, 6), [6], False, None),
            ("rms_norm_2x5x12_small_values", (2, 5, 12), [12], True, None)]:
        x = rng.normal(shape) * (np.float32(1e-3) if "small" in nm else np.float32(1.0))
        ins = [("x", x, "f32")]
        if weight:
            ins.append(("weight", (1.0 + 0.3 * rng.normal(tuple(ns))).astype(np.float32), "f32"))
        add(nm, "rms_norm", {"normalized_shape": ns, "eps": eps, "weight": weight}, ins,
            lambda x, *w, ns=ns, eps=eps: rms_norm(x, ns, *w, eps=eps))

    # nn.MultiheadAttention through F.multi_head_attention_forward (the module's computation, with the weights as
    # inputs so that their gradients are golden too): self- and cross-attention, batch_first or not, unbatched,
    # causal (torch.triu(ones(L, S), 1) as the bool attn_mask), key padding (bool), bool and float attn_mask,
    # the averaged and per-head attention weights, bias=False
    def mha(nm, n, tgt, src, e, h, self_attn=False, bias=True, kpm=False, mask=None, causal=False, weights=None,
            batch_first=True, unbatched=False):
        def seq(length):
            shape = (length, e) if unbatched else ((n, length, e) if batch_first else (length, n, e))
            return rng.normal(shape)
        ins = [("x", seq(tgt), "f32")] if self_attn else [("query", seq(tgt), "f32"), ("key", seq(src), "f32"),
                                                          ("value", seq(src), "f32")]
        ins.append(("in_proj_weight", rng.normal((3 * e, e), 0.4), "f32"))
        if bias:
            ins.append(("in_proj_bias", rng.normal((3 * e,), 0.2), "f32"))
        ins.append(("out_proj_weight", rng.normal((e, e), 0.4), "f32"))
        if bias:
            ins.append(("out_proj_bias", rng.normal((e,), 0.2), "f32"))
        bsz = 1 if unbatched else n
        pad = None
        if kpm:  # padding at the end of some sequences (never a whole row)
            pad = np.zeros((bsz, src), np.int64)
            for b in range(bsz):
                pad[b, src - 1 - b % 2:] = 1
            ins.append(("key_padding_mask", pad.reshape(src) if unbatched else pad, "i32"))
        no_grad = ()
        if mask == "bool":
            m = (rng.uniform((tgt, src), 0, 1) < 0.3).astype(np.int64)
            m[:, 0] = 0  # every query keeps key 0
            ins.append(("attn_mask", m, "i32"))
        elif mask == "bool3d":
            m = (rng.uniform((bsz * h, tgt, src), 0, 1) < 0.3).astype(np.int64)
            m[:, :, 0] = 0
            ins.append(("attn_mask", m, "i32"))
        elif mask == "float":
            ins.append(("attn_mask", rng.normal((tgt, src)), "f32"))
            no_grad = ("attn_mask",)
        names = [i[0] for i in ins]

        def fn(*ts):
            t = dict(zip(names, ts))
            q, k, v = (t["x"],) * 3 if self_attn else (t["query"], t["key"], t["value"])
            if batch_first and not unbatched:
                q, k, v = (x.transpose(0, 1) for x in (q, k, v))
            am = t.get("attn_mask")
            if am is not None and am.dtype == torch.int64:
                am = am.bool()
            if causal:
                c = torch.triu(torch.ones(tgt, src, dtype=torch.bool), 1)
                am = c if am is None else am.logical_or(c)
            kp = t.get("key_padding_mask")
            out, w = F.multi_head_attention_forward(
                q, k, v, e, h, t["in_proj_weight"], t.get("in_proj_bias"), None, None, False, 0.0,
                t["out_proj_weight"], t.get("out_proj_bias"), training=True,
                key_padding_mask=None if kp is None else kp.bool(), need_weights=weights is not None, attn_mask=am,
                average_attn_weights=weights == "avg")
            if weights is not None:
                return w
            return out.transpose(0, 1) if batch_first and not unbatched else out
        attrs = {"num_heads": h, "self": self_attn, "bias": bias, "key_padding_mask": kpm, "attn_mask": mask or "none",
                 "is_causal": causal, "weights": weights or "none", "batch_first": batch_first}
        add(nm, "multi_head_attention", attrs, ins, fn, no_grad_inputs=no_grad)

    mha("attention_self_2x5x8_h2", 2, 5, 5, 8, 2, self_attn=True)
    mha("attention_cross_2x4_2x6_e8_h4", 2, 4, 6, 8, 4)
    mha("attention_self_causal_2x6x8_h2", 2, 6, 6, 8, 2, self_attn=True, causal=True)
    mha("attention_key_padding_2x3_2x5_e6_h3", 2, 3, 5, 6, 3, kpm=True)
    mha("attention_self_causal_key_padding_h1", 2, 5, 5, 4, 1, self_attn=True, causal=True, kpm=True)
    mha("attention_bool_mask_h2", 2, 4, 5, 8, 2, mask="bool")
    mha("attention_bool_mask_per_head_h2", 2, 4, 5, 8, 2, mask="bool3d", kpm=True)
    mha("attention_float_mask_h2", 2, 4, 5, 8, 2, mask="float")
    mha("attention_weights_averaged", 2, 4, 5, 8, 2, kpm=True, weights="avg")
    mha("attention_weights_per_head_causal", 2, 5, 5, 8, 2, self_attn=True, causal=True, weights="per_head")
    mha("attention_no_bias_h2", 2, 4, 4, 8, 2, bias=False)
    mha("attention_seq_first_3x2_e8_h2", 2, 3, 4, 8, 2, batch_first=False)
    mha("attention_unbatched_causal_5x8_h4", 1, 5, 5, 8, 4, self_attn=True, causal=True, unbatched=True)

    # nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout=0, activation, batch_first=True,
    # norm_first): the module run by torch.nn.utils.stateless.functional_call with every parameter an input (so
    # their gradients are golden), in state_dict order; post-norm with relu and a causal src_mask, pre-norm with gelu
    # and a key padding mask
    def encoder(nm, n, length, d, h, ff, activation, norm_first, causal=False, kpm=False):
        layer = torch.nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, activation=activation, batch_first=True,
                                                 norm_first=norm_first).double()
        names = [k for k, _ in layer.named_parameters()]
        ins = [("src", rng.normal((n, length, d)), "f32")]
        for k, p in layer.named_parameters():
            if k.startswith("norm"):
                v = (1.0 + 0.2 * rng.normal(tuple(p.shape))).astype(np.float32) if k.endswith("weight") else \
                    rng.normal(tuple(p.shape), 0.2)
            else:
                v = rng.normal(tuple(p.shape), 0.3)
            ins.append((k, v, "f32"))
        if kpm:
            pad = np.zeros((n, length), np.int64)
            pad[1, length - 2:] = 1
            ins.append(("src_key_padding_mask", pad, "i32"))

        def fn(src, *rest):
            params = dict(zip(names, rest[:len(names)]))
            mask = torch.triu(torch.ones(length, length, dtype=torch.bool), 1) if causal else None
            kp = rest[len(names)].bool() if kpm else None
            return torch.nn.utils.stateless.functional_call(layer, params, (src,),
                                                            {"src_mask": mask, "src_key_padding_mask": kp})
        attrs = {"d_model": d, "nhead": h, "dim_feedforward": ff, "activation": activation, "norm_first": norm_first,
                 "is_causal": causal, "key_padding_mask": kpm, "parameters": names}
        add(nm, "transformer_encoder_layer", attrs, ins, fn)

    encoder("transformer_encoder_layer_post_norm_relu_causal", 2, 5, 8, 2, 16, "relu", False, causal=True)
    encoder("transformer_encoder_layer_pre_norm_gelu_key_padding", 2, 6, 8, 4, 12, "gelu", True, kpm=True)

    # nn.Sequential(Linear(6, 8), LayerNorm(8), ReLU(), Linear(8, 4), RMSNorm(4)): mse_loss to a target, Adam(lr 0.05)
    lin1, ln, lin2 = torch.nn.Linear(6, 8).double(), torch.nn.LayerNorm(8).double(), torch.nn.Linear(8, 4).double()
    rms_w = torch.nn.Parameter(torch.ones(4, dtype=torch.float64))  # nn.RMSNorm(4).weight (torch 2.4), ones at init
    params = {"0.weight": lin1.weight, "0.bias": lin1.bias, "1.weight": ln.weight, "1.bias": ln.bias,
              "3.weight": lin2.weight, "3.bias": lin2.bias, "4.weight": rms_w}
    with torch.no_grad():
        for k, p in params.items():
            if k.startswith("0.") or k.startswith("3."):
                p.copy_(torch.tensor(rng.normal(tuple(p.shape), 0.4), dtype=torch.float64))
    init = {k: dense(p) for k, p in params.items()}
    x = rng.normal((5, 6))
    target = rng.normal((5, 4))
    opt = torch.optim.Adam(list(params.values()), lr=0.05)
    steps = []
    for _ in range(3):
        opt.zero_grad()
        h = torch.relu(ln(lin1(torch.tensor(x, dtype=torch.float64))))
        y = rms_norm(lin2(h), [4], rms_w)
        loss = F.mse_loss(y, torch.tensor(target, dtype=torch.float64))
        loss.backward()
        grads = {k: dense(p.grad) for k, p in params.items()}
        opt.step()
        steps.append({"loss": f32s([loss.item()])[0], "grads": grads, "params": {k: dense(p) for k, p in params.items()}})
    train = {"model": "Sequential(Linear(6, 8), LayerNorm(8), ReLU(), Linear(8, 4), RMSNorm(4)); mse_loss; Adam(lr=0.05)",
             "lr": 0.05, "init": init, "x": dense(x), "target": dense(target), "steps": steps}
    return {"file": "layers.json", "norm_train": train, "cases": cases}


def params_of(model):
    return {k: v for k, v in model.state_dict().items()}


def gen_mlp():
    """MLP 784-128-10 (Linear, ReLU, Linear), cross-entropy, batch 8; weights from hash_init.

    The inputs are non-zero on only 8 pixels (the same for every image), so the gradient of 0.weight and the
    optimizer's change to it are sparse and the file stays small; the code path is the same as dense input.
    """
    torch.manual_seed(0)
    rng = Rng(6006)
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).double()
    inits = {}
    seed = 11
    for name, p in model.named_parameters():
        fan_in = p.shape[1] if p.dim() == 2 else (784 if name.startswith("0.") else 128)
        scale = 1.0 / np.sqrt(fan_in)
        inits[name] = {"shape": list(p.shape), "init": {"hash_seed": seed, "scale": float(scale)}}
        with torch.no_grad():
            p.copy_(torch.tensor(hash_init(tuple(p.shape), seed, scale), dtype=torch.float64))
        seed += 1
    pixels = np.sort(rng.r.choice(784, 8, replace=False))
    x = np.zeros((8, 784), np.float32)
    x[:, pixels] = rng.uniform((8, 8), 0.0, 1.0)
    labels = rng.ints((8,), 0, 10)
    xt = torch.tensor(x, dtype=torch.float64)
    lt = torch.tensor(labels)
    p0 = {k: v.detach().clone() for k, v in model.named_parameters()}

    def loss_grads():
        model.zero_grad()
        loss = F.cross_entropy(model(xt), lt)
        loss.backward()
        return loss.item(), {k: v.grad.detach().clone() for k, v in model.named_parameters()}

    loss, grads = loss_grads()
    out = {"model": "Sequential(Linear(784,128), ReLU, Linear(128,10)); cross_entropy (mean)",
           "params": inits, "x": sparse(x), "labels": ints(labels), "loss": f32s([loss])[0],
           "grads": {k: sparse(v) for k, v in grads.items()}}

    def deltas(before):
        return {k: sparse(v.detach() - before[k]) for k, v in model.named_parameters()}

    # Adam, lr 1e-3: two steps on the same batch (the second step exercises the step counter)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    adam = []
    for _ in range(2):
        l, _ = loss_grads()
        opt.step()
        adam.append({"loss": f32s([l])[0], "delta": deltas(p0)})
    out["adam"] = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "steps": adam}
    # SGD with momentum: restore, two steps (step 1 alone equals plain SGD: buf = g)
    with torch.no_grad():
        for k, v in model.named_parameters():
            v.copy_(p0[k])
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sgd = []
    for step in range(2):
        l, _ = loss_grads()
        opt.step()
        # step 1 alone is p0 - lr*g (no momentum yet): store only its loss, and the delta after step 2
        sgd.append({"loss": f32s([l])[0], **({"delta": deltas(p0)} if step == 1 else {})})
    out["sgd_momentum"] = {"lr": 0.1, "momentum": 0.9, "steps": sgd}
    out["note"] = ("float64 PyTorch; 'delta' is parameter after the step minus the initial parameter "
                   "(sparse: missing entries are exactly 0)")
    return out


def gen_cnn():
    """seed-002 CNN make_cnn(8,16,32) on 8x8 inputs, batch 4."""
    torch.manual_seed(7007)
    rng = Rng(7007)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)).double()
    inits = {}
    seed = 21
    for name, p in model.named_parameters():
        fan_in = int(np.prod(model.state_dict()[name.replace("bias", "weight")].shape[1:]))
        scale = 1.0 / np.sqrt(fan_in)  # PyTorch's default init range for conv/linear weights and biases
        inits[name] = {"shape": list(p.shape), "init": {"hash_seed": seed, "scale": float(scale)}}
        with torch.no_grad():
            p.copy_(torch.tensor(hash_init(tuple(p.shape), seed, scale), dtype=torch.float64))
        seed += 1
    x = rng.uniform((4, 1, 8, 8), 0.0, 1.0)
    labels = rng.ints((4,), 0, 10)
    model.zero_grad()
    loss = F.cross_entropy(model(torch.tensor(x, dtype=torch.float64)), torch.tensor(labels))
    loss.backward()
    return {"model": "Sequential(Conv2d(1,8,3,pad1), ReLU, MaxPool2d(2), Conv2d(8,16,3,pad1), ReLU, MaxPool2d(2), "
                     "Flatten, Linear(64,32), ReLU, Linear(32,10)); cross_entropy (mean)",
            "note": "float64 PyTorch",
            "params": inits,
            "x": dense(x), "labels": ints(labels), "loss": f32s([loss.item()])[0],
            "grads": {k: dense(v.grad) for k, v in model.named_parameters()}}


def gen_resnet():
    """resnet.json: a small ResNet of torchvision's BasicBlocks (sg::nn::ResNet(1, 3, widths {4, 8}, blocks {1, 1},
    dropout 0): stem conv3x3 + BatchNorm2d + ReLU, layer1 = one identity-shortcut block, layer2 = one stride-2 block with
    the 1x1-conv projection shortcut, global average pool, Linear) on a (4, 1, 8, 8) batch, weights given (normal,
    BatchNorm affine parameters away from 1 and 0, running statistics away from 0 and 1). Records the train-mode forward
    (logits, cross-entropy loss), every parameter's gradient, the state_dict after that forward (running statistics
    updated with momentum 0.1, num_batches_tracked 1), and the eval-mode logits of the same batch (the updated running
    statistics). float64 throughout; names are torchvision's (layer2.0.downsample.1.running_var)."""
    torch.manual_seed(0)
    rng = Rng(8118)
    nn = torch.nn

    class BasicBlock(nn.Module):  # torchvision.models.resnet.BasicBlock
        def __init__(self, inplanes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + (x if self.downsample is None else self.downsample(x)))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(4)
            self.relu = nn.ReLU()
            self.layer1 = nn.Sequential(BasicBlock(4, 4))
            self.layer2 = nn.Sequential(BasicBlock(4, 8, 2))
            self.dropout = nn.Dropout(0.0)
            self.fc = nn.Linear(8, 3)

        def forward(self, x):
            h = self.layer2(self.layer1(self.relu(self.bn1(self.conv1(x)))))
            return self.fc(self.dropout(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)))

    model = ResNet().double()
    init = {}
    for k, v in model.state_dict().items():
        if k.endswith("num_batches_tracked"):
            continue
        if k.endswith("running_var"):
            a = rng.uniform(tuple(v.shape), 0.5, 1.5)
        elif k.endswith("running_mean"):
            a = rng.normal(tuple(v.shape), 0.2)
        elif ".bn" in k or k.startswith("bn") or "downsample.1" in k:
            a = (1.0 + rng.normal(tuple(v.shape), 0.2)).astype(np.float32) if k.endswith("weight") else \
                rng.normal(tuple(v.shape), 0.2)
        else:
            a = rng.normal(tuple(v.shape), 0.5)
        init[k] = a
        with torch.no_grad():
            v.copy_(torch.tensor(a, dtype=torch.float64))
    x = rng.normal((4, 1, 8, 8))
    labels = rng.ints((4,), 0, 3)
    model.train()
    model.zero_grad()
    logits = model(T(x, False))
    loss = F.cross_entropy(logits, torch.tensor(labels))
    loss.backward()
    grads = {k: dense(v.grad) for k, v in model.named_parameters()}
    state = {k: dense(v.double()) for k, v in model.state_dict().items()}
    model.eval()
    with torch.no_grad():
        eval_logits = model(T(x, False))
    return {"model": "ResNet(1, 3, widths [4, 8], blocks [1, 1], dropout 0) of torchvision BasicBlocks; cross_entropy",
            "note": "float64 PyTorch; init: the state_dict before the step (parameters and running statistics)",
            "init": {k: dense(v) for k, v in init.items()}, "x": dense(x), "labels": ints(labels),
            "logits": dense(logits), "loss": f32s([loss.item()])[0], "grads": grads, "state_dict": state,
            "eval_logits": dense(eval_logits)}


def nf(a):
    """float64 values -> JSON numbers, with the non-finite ones as the strings "nan", "inf", "-inf"."""
    out = []
    for v in np.asarray(a, dtype=np.float64).ravel():
        out.append("nan" if np.isnan(v) else ("inf" if v == np.inf else ("-inf" if v == -np.inf else float(v))))
    return out


def gen_numerics():
    """numerics.json: IEEE edge cases (NaN, inf, empty tensors) and the first Adam steps, in float64.

    NaN and inf are stored as strings (tests/test_numerics.cpp decodes them). Read by the CPU reference's
    semantics tests; every backend must give the same values (docs/RELIABILITY.md).
    """
    nan, inf = float("nan"), float("inf")
    d = torch.float64
    cases = {}
    x = torch.tensor([1.5, nan, -2.0, 0.0, inf, -inf, -0.5, 3.0], dtype=d)
    cases["relu"] = {"x": nf(x), "y": nf(torch.relu(x))}
    xg = x.clone().requires_grad_(True)
    r = torch.tensor([0.5, -1.0, 2.0, 1.5, -0.25, 3.0, 1.0, -2.0], dtype=d)
    (torch.relu(xg) * r).sum().backward()
    cases["relu_grad"] = {"x": nf(x), "r": nf(r), "dx": nf(xg.grad)}
    a = torch.tensor([1.0, nan, nan, 2.0, -inf, 0.0], dtype=d)
    b = torch.tensor([nan, 3.0, nan, 1.0, 5.0, -0.0], dtype=d)
    cases["maximum_minimum"] = {"a": nf(a), "b": nf(b), "maximum": nf(torch.maximum(a, b)),
                                "minimum": nf(torch.minimum(a, b))}
    m = torch.tensor([[1.0, nan, 3.0, 2.0], [5.0, 6.0, nan, 8.0], [4.0, -1.0, 7.0, 0.5]], dtype=d)
    cases["row_reductions"] = {"x": nf(m), "shape": [3, 4], "amax": nf(torch.amax(m, 1)), "amin": nf(torch.amin(m, 1)),
                               "argmax": [int(v) for v in torch.argmax(m, 1)], "sum": nf(m.sum(1))}
    pool_in = torch.tensor([[[[1.0, nan, 3.0, 2.0], [5.0, 6.0, 0.0, 8.0],
                              [4.0, -1.0, 7.0, 0.5], [2.0, 2.5, -3.0, 1.0]]]], dtype=d)
    cases["max_pool2d"] = {"x": nf(pool_in), "shape": [1, 1, 4, 4], "y": nf(F.max_pool2d(pool_in, 2))}
    cases["mean_empty"] = {"mean": nf(torch.mean(torch.empty(0, dtype=d))), "sum": nf(torch.empty(0, dtype=d).sum())}
    num = torch.tensor([1.0, -1.0, 0.0, nan], dtype=d)
    cases["divide_by_zero"] = {"x": nf(num), "y": nf(num / 0.0)}
    base = torch.tensor([0.0, 0.0, -8.0, 2.0, -2.0], dtype=d)
    expo = torch.tensor([-1.0, 0.5, 1.0 / 3.0, 0.5, 2.0], dtype=d)
    cases["pow"] = {"a": nf(base), "b": nf(expo), "y": nf(torch.pow(base, expo))}
    z = torch.tensor([nan, inf, -inf, 0.0], dtype=d)
    cases["times_zero"] = {"x": nf(z), "y": nf(z * 0.0), "zero_div": nf(0.0 / z)}
    # cross_entropy with out-of-range labels: torch raises (IndexError / RuntimeError); record that it does
    logits = torch.zeros(2, 3, dtype=d)
    raises = {}
    for name, lab in [("label_5", [0, 5]), ("label_minus_1", [-1, 1])]:
        try:
            F.cross_entropy(logits, torch.tensor(lab))
            raises[name] = False
        except (IndexError, RuntimeError):
            raises[name] = True
    cases["cross_entropy_bad_labels"] = {"classes": 3, "label_5": [0, 5], "label_minus_1": [-1, 1], "raises": raises}
    # Adam, torch.optim defaults (lr 1e-3, betas (0.9, 0.999), eps 1e-8), gradient g of loss = sum(p * g)
    rng = np.random.default_rng(19)
    p0 = (rng.standard_normal(16) * 1e-3).astype(np.float32)
    g = np.array([1e-9, -1e-8, 1e-6, -1e-4, 0.01, -0.3, 1.0, -2.5, 10.0, -100.0, 0.5, 3e-3, -7e-7, 42.0, -0.07, 1e-2],
                 dtype=np.float32)
    pt = torch.tensor(p0.astype(np.float64), requires_grad=True)
    opt = torch.optim.Adam([pt])
    steps = []
    for _ in range(3):
        opt.zero_grad()
        (pt * torch.tensor(g.astype(np.float64))).sum().backward()
        opt.step()
        steps.append(nf(pt.detach()))
    cases["adam"] = {"p0": nf(p0), "g": nf(g), "steps": steps}
    return {"file": "numerics.json", "cases": cases}


# ------------------------------------------------------------------------------------------------
# the layers' math (issue 36): erf, erfc, gelu (exact and tanh), logsumexp, var, std
# ------------------------------------------------------------------------------------------------

def gen_math():
    rng = Rng(3003)
    cases = []
    # the tails: erf saturates past ~4, erfc keeps its relative precision out to ~10, gelu's negative side
    # (torch float64's 1 + erf(x/sqrt 2) is exact enough to -6: 2e-9 against its rounding 1e-16)
    tail = np.array([-9.0, -6.0, -3.5, -2.2, -1.1, -0.6, -1e-3, 1e-6, 0.3, 0.87, 0.9, 1.9, 2.1, 3.0, 4.5, 6.0, 9.0],
                    np.float32)
    gelu_tail = np.array([-6.0, -4.5, -3.0, -2.0, -1.2, -0.5, -1e-3, 1e-6, 0.4, 1.1, 2.5, 4.0, 7.0], np.float32)
    specs = [
        ("erf", {}, lambda r, s: r.normal(s, 1.5), torch.erf, tail),
        ("erfc", {}, lambda r, s: r.normal(s, 1.5), torch.erfc, tail),
        ("gelu", {"approximate": "none"}, lambda r, s: r.normal(s, 2.0), lambda x: F.gelu(x), gelu_tail),
        ("gelu", {"approximate": "tanh"}, lambda r, s: r.normal(s, 2.0), lambda x: F.gelu(x, approximate="tanh"),
         gelu_tail),
    ]
    for op, attrs, gen, fn, wide in specs:
        tag = op + ("_tanh" if attrs.get("approximate") == "tanh" else "")
        for s in [(3, 7), (13,), (2, 3, 5)]:
            cases.append(make_case(f"{tag}_{'x'.join(map(str, s))}", op, attrs, [("x", gen(rng, s), "f32")], fn, rng))
        cases.append(make_case(f"{tag}_tails", op, attrs, [("x", wide, "f32")], fn, rng))
    # logsumexp, var, std: axes (all = []), keepdims, var/std's unbiased flag; logsumexp of large logits (a shift is
    # needed: exp(90) overflows float32)
    specs = [((7,), [], False), ((3, 7), [1], True), ((3, 7), [0], False), ((2, 3, 5), [0, 2], True),
             ((2, 3, 5), [-1], False), ((13, 2), [1], False), ((3, 5), [], True)]
    for shape, axes, keep in specs:
        dims = tuple(axes) if axes else tuple(range(len(shape)))
        tag = f"{'x'.join(map(str, shape))}_axes{''.join(map(str, axes)) or 'all'}{'_keep' if keep else ''}"
        cases.append(make_case(f"logsumexp_{tag}", "logsumexp", {"axes": axes, "keepdims": keep},
                               [("x", rng.normal(shape, 3.0), "f32")],
                               lambda t, d=dims, k=keep: torch.logsumexp(t, dim=d, keepdim=k), rng))
        for op, fn in [("var", torch.var), ("std", torch.std)]:
            for unbiased in (True, False):
                cases.append(make_case(f"{op}_{tag}{'' if unbiased else '_biased'}", op,
                                       {"axes": axes, "keepdims": keep, "unbiased": unbiased},
                                       [("x", rng.normal(shape, 2.0), "f32")],
                                       lambda t, d=dims, k=keep, u=unbiased, fn=fn: fn(t, dim=d, unbiased=u, keepdim=k),
                                       rng))
    big = np.array([[90.0, 88.0, -90.0, 0.5], [-1e3, -1e3 + 1, -1e3 + 0.5, -2e3], [1e4, 1e4, 1e4, 1e4]], np.float32)
    cases.append(make_case("logsumexp_large", "logsumexp", {"axes": [1], "keepdims": False}, [("x", big, "f32")],
                           lambda t: torch.logsumexp(t, dim=1), rng))
    # std of a constant row: torch's gradient there is 0 (a kink: no finite differences)
    const = np.array([[1.5, 1.5, 1.5, 1.5], [1.0, 2.0, 4.0, -0.5]], np.float32)
    cases.append(make_case("std_constant_row", "std", {"axes": [1], "keepdims": False, "unbiased": True},
                           [("x", const, "f32")], lambda t: torch.std(t, dim=1), rng, fd_off=("x",)))
    return {"file": "math.json", "cases": cases}


# ------------------------------------------------------------------------------------------------
# random numbers (issue 36): Philox-4x32-10 written here from the paper, independently of sg/philox.h; torch's dropout
# ------------------------------------------------------------------------------------------------

PHILOX_KAT = [  # Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter, key, result
    ([0x00000000, 0x00000000, 0x00000000, 0x00000000], [0x00000000, 0x00000000],
     [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
    ([0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff], [0xffffffff, 0xffffffff],
     [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
    ([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0],
     [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]),
]


def philox4x32_10(ctr, key):
    """Salmon et al. (SC 2011), Philox-4x32 with 10 rounds, in Python integers (no 32-bit tricks to share bugs with)."""
    m0, m1, w0, w1, mask = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85, 0xFFFFFFFF
    c, k = list(ctr), list(key)
    for r in range(10):
        if r > 0:
            k = [(k[0] + w0) & mask, (k[1] + w1) & mask]
        p0, p1 = m0 * c[0], m1 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & mask, (p0 >> 32) ^ c[3] ^ k[1], p0 & mask]
    return c


def random_uniform(shape, seed, step, stream):
    """sg::random_uniform's layout (sg/philox.h): key (seed low, seed high), counter (index, 0, step, stream), the top 24
    bits of word 0 times 2^-24."""
    key = [seed & 0xFFFFFFFF, seed >> 32]
    n = int(np.prod(shape))
    return np.array([(philox4x32_10([j, 0, step, stream], key)[0] >> 8) / 2.0 ** 24 for j in range(n)],
                    np.float64).reshape(shape)


def gen_random():
    """random.json: sg::random_uniform values from this file's Philox (checked against Random123's vectors first), and
    torch's dropout: the survivors' scale 1 / (1 - p) as torch rounds it, and what torch makes of NaN, +-inf and signed
    zeros, dropped and kept (with the mask of dropout(ones) under the same torch seed)."""
    for ctr, key, want in PHILOX_KAT:
        assert philox4x32_10(ctr, key) == want, (ctr, key)
    uniform = []
    for shape, seed, step, stream in [((4, 5), 0, 0, 0), ((37,), 0x123456789ABCDEF0, 7, 3), ((3,), 42, 1 << 24, 1),
                                      ((2, 3, 4), 0xFFFFFFFFFFFFFFFF, 123456, 0xFFFFFFFF)]:
        uniform.append({"shape": list(shape), "seed": str(seed), "step": step, "stream": stream,
                        "values": f32s(random_uniform(shape, seed, step, stream))})
    scales = []
    for p in [0.1, 0.25, 1.0 / 3.0, 0.5, 0.7, 0.9, 0.99, 0.123456789]:
        torch.manual_seed(0)
        y = F.dropout(torch.ones(4096), p, True)
        assert len(set(y.tolist()) - {0.0}) == 1
        scales.append({"p": p, "scale": f32s([y.max().item()])[0]})
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([nan, inf, -inf, -2.5, -0.0, 0.0, 3.0] * 64)
    torch.manual_seed(5)
    mask = F.dropout(torch.ones_like(x), 0.5, True) != 0
    torch.manual_seed(5)
    y = F.dropout(x, 0.5, True)
    special = {"x": nf(x[:7]), "kept": [], "dropped": []}
    for i in range(7):
        kept = {repr(v) for v in y[i::7][mask[i::7]].tolist()}
        dropped = {repr(v) for v in y[i::7][~mask[i::7]].tolist()}
        assert len(kept) == 1 and len(dropped) == 1, (i, kept, dropped)
        special["kept"] += nf([float(kept.pop())])
        special["dropped"] += nf([float(dropped.pop())])
    special["signbit_dropped"] = [bool(np.signbit(v)) for v in [y[i::7][~mask[i::7]][0].item() for i in range(7)]]
    special["p1"] = nf(F.dropout(x[:7], 1.0, True))
    special["signbit_p1"] = [bool(np.signbit(v)) for v in F.dropout(x[:7], 1.0, True).tolist()]
    raises = {}
    for p in [-0.1, 1.5]:
        try:
            F.dropout(x, p, True)
            raises[str(p)] = False
        except ValueError:
            raises[str(p)] = True
    return {"file": "random.json", "kat": [{"counter": c, "key": k, "result": r} for c, k, r in PHILOX_KAT],
            "uniform": uniform, "dropout_scale": scales, "dropout_special": special, "dropout_raises": raises}


# ------------------------------------------------------------------------------------------------
# optimizers (issue 36): AdamW, global-norm gradient clipping, learning-rate schedules (optim.json)
# ------------------------------------------------------------------------------------------------

def lr_schedule_torch(opt, sched):
    """The torch scheduler a shadergrad LRSchedule equals (autodiff.h's LRSchedule docstring), or None."""
    kind = sched["kind"]
    if kind == "constant":
        return None
    if kind == "step":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=sched["step_size"], gamma=sched["gamma"])
    if kind == "cosine_annealing":  # warmup_cosine with warmup 0, as torch's own class
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=sched["total_steps"], eta_min=sched["min_lr"])
    assert kind == "warmup_cosine"
    W, T, floor = sched["warmup_steps"], sched["total_steps"], sched["min_lr"]
    base = opt.param_groups[0]["lr"]

    def factor(t):
        if t < W:
            return (t + 1) / W
        if T == W:
            return floor / base
        progress = min(t - W, T - W) / (T - W)
        return (floor + (base - floor) * (1 + np.cos(np.pi * progress)) / 2) / base
    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def gen_optim():
    """optim.json: 10 train steps of a small MLP (Linear(6,8), Tanh, Linear(8,5), cross_entropy, batch 12) per
    optimizer setting, in float64: AdamW; AdamW with global-norm clipping active in some steps only; AdamW with
    linear warmup + cosine (LambdaLR); SGD with momentum and StepLR; Adam with CosineAnnealingLR (torch's class: the
    warmup_cosine schedule with no warmup); SGD with max-norm (norm_type inf) clipping; AdamW + clipping + warmup
    cosine together. Per step: the loss before it, the lr it used (scheduler.get_last_lr() before
    scheduler.step()), clip_grad_norm_'s total norm; the parameters after the 10 steps.
    Also clip_grad_norm_ of given float32 gradients with zeros, inf and NaN (error_if_nonfinite=False), values as
    strings "nan"/"inf"/"-inf" where non-finite, "-0" marking a negative zero."""
    rng = Rng(9009)
    torch.manual_seed(0)
    x = rng.normal((12, 6))
    labels = rng.ints((12,), 0, 5)
    init = {"0.weight": rng.normal((8, 6), 0.5), "0.bias": rng.normal((8,), 0.2),
            "2.weight": rng.normal((5, 8), 0.5), "2.bias": rng.normal((5,), 0.2)}
    xt, lt = torch.tensor(x, dtype=torch.float64), torch.tensor(labels)
    model_desc = "Sequential(Linear(6, 8), Tanh, Linear(8, 5)); cross_entropy (mean); batch 12"
    runs = []

    def run(name, optimizer, options, sched, clip, steps=10):
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 5)).double()
        with torch.no_grad():
            for k, v in model.named_parameters():
                v.copy_(torch.tensor(init[k], dtype=torch.float64))
        if optimizer == "adamw":
            opt = torch.optim.AdamW(model.parameters(), lr=options["lr"], betas=tuple(options["betas"]),
                                    eps=options["eps"], weight_decay=options["weight_decay"])
        elif optimizer == "adam":
            opt = torch.optim.Adam(model.parameters(), lr=options["lr"], betas=tuple(options["betas"]),
                                   eps=options["eps"], weight_decay=options["weight_decay"])
        else:
            opt = torch.optim.SGD(model.parameters(), lr=options["lr"], momentum=options["momentum"],
                                  weight_decay=options["weight_decay"])
        scheduler = lr_schedule_torch(opt, sched)
        out = []
        for _ in range(steps):
            opt.zero_grad()
            loss = F.cross_entropy(model(xt), lt)
            loss.backward()
            step = {"loss": f32s([loss.item()])[0], "lr": float(opt.param_groups[0]["lr"])}
            if clip:
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip["max_norm"],
                                                      norm_type=clip["norm_type"])
                step["grad_norm"] = f32s([norm.item()])[0]
            opt.step()
            if scheduler:
                scheduler.step()
            out.append(step)
        if clip:  # the case must clip in some steps and not in others
            above = [s["grad_norm"] > clip["max_norm"] for s in out]
            assert any(above) and not all(above), (name, [s["grad_norm"] for s in out])
        enc_clip = None if not clip else {"max_norm": clip["max_norm"],
                                          "norm_type": "inf" if clip["norm_type"] == float("inf") else clip["norm_type"]}
        runs.append({"name": name, "optimizer": optimizer, "options": options, "schedule": sched, "clip": enc_clip,
                     "steps": out, "params_after": {k: dense(v) for k, v in model.named_parameters()}})

    adamw = {"lr": 0.02, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.1}
    run("adamw", "adamw", adamw, {"kind": "constant"}, None)
    run("adamw_clip", "adamw", {**adamw, "weight_decay": 0.01}, {"kind": "constant"},
        {"max_norm": 0.5, "norm_type": 2.0})
    run("adamw_lr_schedule_warmup_cosine", "adamw", {**adamw, "lr": 0.05},
        {"kind": "warmup_cosine", "warmup_steps": 3, "total_steps": 8, "min_lr": 0.005}, None)
    run("sgd_lr_schedule_step", "sgd", {"lr": 0.5, "momentum": 0.9, "weight_decay": 0.001},
        {"kind": "step", "step_size": 3, "gamma": 0.5}, None)
    run("adam_lr_schedule_cosine_annealing", "adam", {"lr": 0.03, "betas": [0.9, 0.999], "eps": 1e-8,
                                                     "weight_decay": 0.0},
        {"kind": "cosine_annealing", "total_steps": 10, "min_lr": 0.002}, None)
    run("sgd_clip_inf", "sgd", {"lr": 0.3, "momentum": 0.0, "weight_decay": 0.0}, {"kind": "constant"},
        {"max_norm": 0.25, "norm_type": float("inf")})
    run("adamw_clip_lr_schedule", "adamw", {**adamw, "lr": 0.05},
        {"kind": "warmup_cosine", "warmup_steps": 2, "total_steps": 10, "min_lr": 0.0},
        {"max_norm": 0.5, "norm_type": 2.0})

    def nfz(a):  # nf, with negative zeros as "-0"
        return ["-0" if (v == 0 and np.signbit(v)) else e for v, e in zip(np.asarray(a, np.float64).ravel(), nf(a))]

    nan, inf = float("nan"), float("inf")
    clip_cases = []
    for name, grads, max_norm, norm_type in [
            ("zero gradients stay zero", [[0.0, 0.0, 0.0], [0.0, 0.0]], 1.0, 2.0),
            ("an inf element: total inf, finite elements 0 (-0), the inf NaN", [[1.0, -2.0, inf], [3.0, -0.5]], 1.0,
             2.0),
            ("a -inf element", [[-inf, 1.0, -1.0], [0.0, 2.0]], 1.0, 2.0),
            ("a NaN element: every gradient NaN", [[1.0, nan, 2.0], [3.0, 4.0]], 1.0, 2.0),
            ("below max_norm: unchanged", [[0.1, -0.2, 0.05], [0.0, 0.1]], 1.0, 2.0),
            ("above max_norm: scaled", [[3.0, -4.0, 12.0], [0.0, 1.0]], 2.0, 2.0),
            ("max norm (inf) above max_norm", [[1.0, -5.0, 2.0], [3.0, 0.5]], 2.0, inf),
            ("max norm (inf) with an inf", [[1.0, -5.0, 2.0], [-inf, 0.5]], 2.0, inf),
            ("max norm (inf) with a NaN", [[1.0, nan, 2.0], [3.0, 0.5]], 2.0, inf),
            ("1-norm above max_norm", [[1.0, -5.0, 2.0], [3.0, 0.5]], 2.0, 1.0)]:
        ps = [torch.zeros(len(g), dtype=torch.float32, requires_grad=True) for g in grads]
        for p, g in zip(ps, grads):
            p.grad = torch.tensor(g, dtype=torch.float32)
        total = torch.nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
        clip_cases.append({"name": name, "max_norm": max_norm, "norm_type": "inf" if norm_type == inf else norm_type,
                           "grads": [nfz(g) for g in grads], "total_norm": nfz([total.item()])[0],
                           "clipped": [nfz(p.grad.numpy()) for p in ps]})
    return {"file": "optim.json", "model": model_desc,
            "note": "float64 PyTorch; steps[i].lr is the lr step i used; params_after: after all steps. "
                    "clip_grad_norm: torch.nn.utils.clip_grad_norm_ in float32, error_if_nonfinite=False",
            "x": dense(x), "labels": ints(labels), "init": {k: dense(v) for k, v in init.items()},
            "runs": runs, "clip_grad_norm": clip_cases}


def main():
    obj = {"generator": "tests/golden/gen_golden.py", "torch": torch.__version__, **gen_numerics()}
    path = os.path.join(OUT_DIR, obj.pop("file"))
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=1) + "\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    for gen in [gen_elementwise, gen_reduce, gen_movement, gen_nn, gen_fake_quant, gen_math, gen_gather,
                gen_batch_norm, gen_rnn, gen_conv_transpose, gen_masks, gen_layers, gen_conv_groups]:
        obj = gen()
        fname = obj.pop("file")
        obj = {"generator": "tests/golden/gen_golden.py", "torch": torch.__version__, **obj}
        write(fname, obj)
    obj = {"generator": "tests/golden/gen_golden.py", "torch": torch.__version__, **gen_random()}
    path = os.path.join(OUT_DIR, obj.pop("file"))
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=1) + "\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    obj = {"generator": "tests/golden/gen_golden.py", "torch": torch.__version__, **gen_optim()}
    path = os.path.join(OUT_DIR, obj.pop("file"))
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=1) + "\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    for fname, gen in [("mlp.json", gen_mlp), ("cnn.json", gen_cnn), ("resnet.json", gen_resnet)]:
        obj = {"generator": "tests/golden/gen_golden.py", "torch": torch.__version__, **gen()}
        path = os.path.join(OUT_DIR, fname)
        with open(path, "w") as f:
            f.write(json.dumps(obj, separators=(",", ":")) + "\n")
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
