#!/usr/bin/python3
"""Fits the coefficients of sg_erf and sg_erfc (codegen/shaders/math/erf.glsl and erf.wgsl) and measures the f32
error of the helpers' algorithm over every f32 argument, emulated in numpy float32 (each operation rounded to f32,
Horner's scheme without FMA, exp correctly rounded to f32: the error of the algorithm; the driver's exp error (of
an argument below 0.55 in magnitude) comes on top in the tail).

    /usr/bin/python3 scripts/fit_erf.py            # prints the coefficients and the error table (~1 minute)

The ranges (the split of W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23
(1969) 631-637: erf by an odd function near 0, erfc as exp(-x^2) times a slowly varying factor beyond; here with
polynomials instead of rational functions, fitted for f32):
  |x| <  B:      erf(x)  = x + x (P(x^2) - 1)         P minimax for the relative error of erf(x)/x on [0, B^2];
                 erfc(x) = (1 - x) - x (P(x^2) - 1)   (1 - x is exact for x in [0.5, 2]; the rest is small)
  B <= x < U:    erfc(x) = exp(-x^2) F(x), with -x^2 = -h^2 + (h - x)(h + x), h = x with its 12 low mantissa bits
                 cleared (h^2 is exact, so the rounding of x^2, up to 6e-6 relative at x = 10, is not amplified by
                 exp; fdlibm's s_erf.c splits the same way); exp(-x^2) = 2^n exp(r), n = round(-h^2 / ln 2), r =
                 -h^2 - n ln 2 (ln 2 in two parts, as sg_exp) + (h - x)(h + x), |r| < 0.55: one exp; and
                   F(x) = H(x - C)        for x < M, H minimax for the relative error of erfc(x) exp(x^2)
                                          (C = (B + M) / 2: the terms of Horner's scheme decrease, no cancellation)
                   F(x) = G(1/x^2) / x    for x >= M, G minimax for the relative error of x erfc(x) exp(x^2)
                 erf(x) = 1 - erfc(x) for x < T (erfc(T) is below half an ulp of 1 in f32), 1 beyond;
  x >= U:        erfc(x) = 0 (erfc(U) rounds to 0 in f32);
  negative x:    erf(-x) = -erf(x), erfc(-x) = 2 - erfc(x).
The polynomials are fitted by the Remez exchange algorithm (remez below) against mpmath at 50 digits, then rounded
to f32.
"""
import mpmath
import numpy as np
import scipy.special

mpmath.mp.dps = 50
B, M, T, U = 0.875, 2.0, 3.925, 10.06
C = (B + M) / 2
DEG_P, DEG_H, DEG_G = 5, 8, 7


def remez(f, w, lo, hi, deg, iters=30):
    """Minimax polynomial (monomial coefficients, f64) of degree deg for max |w(u) (p(u) - f(u))| on [lo, hi];
    returns (coefficients, the largest error on a grid of 20001 points)."""
    n = deg + 2
    nodes = [mpmath.mpf(lo + hi) / 2 + mpmath.mpf(hi - lo) / 2 * mpmath.cos(mpmath.pi * (n - 1 - i) / (n - 1))
             for i in range(n)]
    grid = np.linspace(lo, hi, 20001)
    fg = np.array([float(f(mpmath.mpf(u))) for u in grid])
    wg = np.array([float(w(mpmath.mpf(u))) for u in grid])
    coef, err = None, None
    for _ in range(iters):
        A = mpmath.matrix(n, n)
        rhs = mpmath.matrix(n, 1)
        for i, u in enumerate(nodes):
            for j in range(deg + 1):
                A[i, j] = u ** j
            A[i, deg + 1] = (-1) ** i / w(u)
            rhs[i] = f(u)
        sol = mpmath.lu_solve(A, rhs)
        coef = [sol[j] for j in range(deg + 1)]
        err = wg * (np.polyval([float(c) for c in coef[::-1]], grid) - fg)
        # the new reference: the largest |err| of each run of one sign, n of them (dropping the smaller end)
        cuts = np.flatnonzero(np.diff(np.sign(err)) != 0) + 1
        ext = [s[np.argmax(np.abs(err[s]))] for s in np.split(np.arange(len(grid)), cuts) if len(s)]
        while len(ext) > n:
            ext = ext[1:] if abs(err[ext[0]]) < abs(err[ext[-1]]) else ext[:-1]
        if len(ext) < n:
            break
        nodes = [mpmath.mpf(grid[i]) for i in ext]
    return [float(c) for c in coef], float(np.max(np.abs(err)))


F32 = np.float32


def horner(coef, u):
    r = F32(coef[-1])
    for c in coef[-2::-1]:
        r = (r * u + F32(c)).astype(F32)
    return r


def exp32(x):
    """exp of f32 values, correctly rounded to f32 (numpy's own f32 exp is off by up to ~2.5 ulp)."""
    return np.exp(x.astype(np.float64)).astype(F32)


def erf_erfc_f32(x, P1, H, G):
    """(erf(x), erfc(x)) as the shader computes them, in f32; P1 = P - 1's coefficients."""
    x = x.astype(F32)
    a = np.abs(x)
    s = (x * x).astype(F32)
    xp = (x * horner(P1, s)).astype(F32)
    erf_small = (x + xp).astype(F32)
    erfc_small = ((F32(1) - x).astype(F32) - xp).astype(F32)
    h = (a.view(np.uint32) & np.uint32(0xfffff000)).view(F32)
    with np.errstate(under="ignore", over="ignore", divide="ignore", invalid="ignore"):
        sh = (-(h * h)).astype(F32)
        n = np.round((sh * F32(1.44269502)).astype(F32)).astype(F32)  # round half to even, as roundEven / WGSL round
        r = ((sh - (n * F32(0.693145752)).astype(F32)).astype(F32) - (n * F32(1.42860677e-6)).astype(F32)).astype(F32)
        r = (r + ((h - a).astype(F32) * (h + a).astype(F32)).astype(F32)).astype(F32)
        k = n.astype(np.int64)
        m = k >> 1
        e = ((exp32(r) * np.ldexp(F32(1), m).astype(F32)).astype(F32) * np.ldexp(F32(1), k - m).astype(F32)).astype(F32)
        fh = horner(H, (a - F32(C)).astype(F32))
        fg = (horner(G, (F32(1) / (a * a).astype(F32)).astype(F32)) / a).astype(F32)
        tail = np.where(a < F32(U), (e * np.where(a < F32(M), fh, fg)).astype(F32), F32(0))
    erf_big = np.where(a < F32(T), (F32(1) - tail).astype(F32), F32(1))
    erf = np.where(a < F32(B), erf_small, np.where(x < 0, -erf_big, erf_big))
    erfc = np.where(a < F32(B), erfc_small, np.where(x < 0, (F32(2) - tail).astype(F32), tail))
    return erf.astype(F32), erfc.astype(F32)


def ulp_error(got, want):
    """|got - want| in ulps of want rounded to f32 (0 where want is below FLT_MIN: GPUs may flush subnormals)."""
    ulp = np.spacing(np.abs(want).astype(F32)).astype(np.float64)
    return np.where(np.abs(want) >= np.finfo(F32).tiny, np.abs(got.astype(np.float64) - want) / ulp, 0.0)


def main():
    f0 = 2 / mpmath.sqrt(mpmath.pi)
    p = lambda s: mpmath.erf(mpmath.sqrt(s)) / mpmath.sqrt(s) if s > 0 else f0
    P, ep = remez(p, lambda s: 1 / p(s), 0.0, B * B, DEG_P)
    hf = lambda t: mpmath.erfc(t + C) * mpmath.exp((t + C) ** 2)
    H, eh = remez(hf, lambda t: 1 / hf(t), B - C, M - C, DEG_H)
    gf = lambda w: mpmath.erfc(1 / mpmath.sqrt(w)) * mpmath.exp(1 / w) / mpmath.sqrt(w)
    G, eg = remez(gf, lambda w: 1 / gf(w), 1 / U ** 2, 1 / M ** 2, DEG_G)
    P1 = [float(F32(P[0] - 1))] + [float(F32(c)) for c in P[1:]]
    H32, G32 = [float(F32(c)) for c in H], [float(F32(c)) for c in G]
    show = lambda cs: "  " + ", ".join(repr(F32(c)) for c in cs)
    print(f"P - 1 (|x| < {B}; variable x^2), relative minimax error {ep:.3g}:\n{show(P1)}")
    print(f"H ({B} <= x < {M}; variable x - {C}), relative minimax error {eh:.3g}:\n{show(H32)}")
    print(f"G ({M} <= x < {U}; variable 1/x^2), relative minimax error {eg:.3g}:\n{show(G32)}")
    print(f"erfc({T}) = {float(mpmath.erfc(T)):.3g} (half an ulp of 1: {2.0 ** -25:.3g}); "
          f"erfc({U}) = {float(mpmath.erfc(U)):.3g} (half the least subnormal: {2.0 ** -150:.3g})")
    # every f32 in [2^-12, U) of either sign (below 2^-12, erf(x) = x + x (P - 1) is x * 1.128... to the ulp)
    worst = {}
    lo_bits, hi_bits = int(F32(2.0 ** -12).view(np.uint32)), int(F32(U).view(np.uint32))
    for start in range(lo_bits, hi_bits, 1 << 22):
        mag = np.arange(start, min(start + (1 << 22), hi_bits), dtype=np.uint32).view(F32)
        for x in (mag, -mag):
            erf, erfc = erf_erfc_f32(x, P1, H32, G32)
            x64 = x.astype(np.float64)
            for name, got, want in (("erf", erf, scipy.special.erf(x64)), ("erfc", erfc, scipy.special.erfc(x64))):
                e = ulp_error(got, want)
                for rng, m in ((f"|x| < {B}", np.abs(x) < B), (f"{B} <= |x| < {M}", (np.abs(x) >= B) & (np.abs(x) < M)),
                               (f"|x| >= {M}", np.abs(x) >= M)):
                    key = f"{name}, {'x > 0' if x[0] > 0 else 'x < 0'}, {rng}"
                    if m.any():
                        i = np.argmax(np.where(m, e, -1))
                        if e[i] > worst.get(key, (-1, 0))[0]:
                            worst[key] = (e[i], float(x[i]))
    print("largest error over every f32 argument in the range (normal results):")
    for key, (e, x) in sorted(worst.items()):
        print(f"  {key:34s} {e:6.2f} ulp at x = {x!r}")


if __name__ == "__main__":
    main()
