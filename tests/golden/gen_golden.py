#!/usr/bin/python3
"""Golden reference values for shadergrad's op and autodiff tests, computed with PyTorch.

HOW TO REGENERATE (deterministic: same torch/numpy give byte-identical files; commit the JSON it writes):

    /usr/bin/python3 tests/golden/gen_golden.py          # from the repository root

Needs Debian's python3-torch (1.13, CPU) and python3-numpy (use /usr/bin/python3, not a pyenv python).
Writes tests/golden/{elementwise,reduce,movement,nn,fake_quant,math,mlp,cnn}.json, read by tests/golden_util.h, and
numerics.json (IEEE edge cases and Adam steps; read by tests/test_numerics.cpp).

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


def main():
    obj = {"generator": "tests/golden/gen_golden.py", "torch": torch.__version__, **gen_numerics()}
    path = os.path.join(OUT_DIR, obj.pop("file"))
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=1) + "\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    for gen in [gen_elementwise, gen_reduce, gen_movement, gen_nn, gen_fake_quant, gen_math]:
        obj = gen()
        fname = obj.pop("file")
        obj = {"generator": "tests/golden/gen_golden.py", "torch": torch.__version__, **obj}
        write(fname, obj)
    for fname, gen in [("mlp.json", gen_mlp), ("cnn.json", gen_cnn)]:
        obj = {"generator": "tests/golden/gen_golden.py", "torch": torch.__version__, **gen()}
        path = os.path.join(OUT_DIR, fname)
        with open(path, "w") as f:
            f.write(json.dumps(obj, separators=(",", ":")) + "\n")
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
