#!/usr/bin/python3
"""Independent check of the softmax, attention, Adam and clip oracles: recompute every exact value that
`precfuzz run --json` printed with mpmath (not MPFR) at 1000 bits, from the stored inputs the
JSON lists, and require agreement to better than 2^-150 relative.

usage: oracle_mpmath_check.py PRECFUZZ -- RUN-ARGS...   (runs precfuzz run RUN-ARGS --json)
"""
import json
import re
import subprocess
import sys

import mpmath

mpmath.mp.prec = 1000
HEX = re.compile(r"^(-?)0x([0-9a-f]+)(?:\.([0-9a-f]*))?p([+-]?\d+)$")


def parse_hex(s):
    """Exact value of a C99 hex float of any length (float.fromhex would round to 53 bits)."""
    if s in ("nan", "inf", "-inf"):
        return mpmath.mpf(s)
    m = HEX.match(s)
    if not m:
        raise ValueError("not a hex float: %r" % s)
    sign, ip, fp, exp = m.group(1), m.group(2), m.group(3) or "", int(m.group(4))
    v = mpmath.mpf(int(ip + fp, 16)) * mpmath.mpf(2) ** (exp - 4 * len(fp))
    return -v if sign else v


def lowest(dtype):
    return {"fp16": -65504.0, "bf16": -float.fromhex("0x1.fep127"), "fp32": -float.fromhex("0x1.fffffep127")}[dtype]


def softmax_rows(case, xs):
    rows, cols = case["shape"]
    p = case["params"]
    alpha = parse_hex(p["alpha"])
    sentinel = {"-inf": mpmath.mpf("-inf"), "-10000": mpmath.mpf(-10000), "lowest": mpmath.mpf(lowest(case["dtype"]))}[p["mask_value"]]
    off = cols - rows if cols >= rows else 0
    out = []
    for i in range(rows):
        t = []
        for j in range(cols):
            if p["mask"] == "causal" and j > i + off:
                t.append(sentinel)
            else:
                t.append(alpha * xs[i * cols + j])
        finite = [v for v in t if mpmath.isfinite(v)]
        if any(mpmath.isnan(v) or v == mpmath.inf for v in t) or not finite:
            out.extend([None] * cols)
            continue
        m = max(finite)
        e = [mpmath.mpf(0) if v == mpmath.ninf else mpmath.exp(v - m) for v in t]
        s = mpmath.fsum(e)
        out.extend(v / s for v in e)
    return out


def attention(case, q, k, v):
    """Exact O, then (non-flash) S and P, in the layout precfuzz uses."""
    B, H, Lq, Lk, d = case["shape"]
    p = case["params"]
    sentinel = {"-inf": mpmath.mpf("-inf"), "-10000": mpmath.mpf(-10000),
                "lowest": mpmath.mpf(lowest(case["dtype"]))}[p["mask_value"]]
    Lstore = p["layer"] if case["variant"] == "layer-scaled" else 1
    off = Lk - Lq if Lk >= Lq else 0
    alpha = 1 / mpmath.sqrt(d)
    O, S, P = [], [], []
    for h in range(B * H):
        for i in range(Lq):
            qi = q[(h * Lq + i) * d:(h * Lq + i + 1) * d]
            s = [alpha * mpmath.fsum(qi[m] * k[(h * Lk + j) * d + m] for m in range(d)) for j in range(Lk)]
            S.extend(x / Lstore for x in s)
            t = [sentinel if p["mask"] == "causal" and j > i + off else s[j] for j in range(Lk)]
            mx = max(x for x in t if mpmath.isfinite(x))
            e = [mpmath.mpf(0) if x == mpmath.ninf else mpmath.exp(x - mx) for x in t]
            z = mpmath.fsum(e)
            pr = [x / z for x in e]
            P.extend(pr)
            O.extend(mpmath.fsum(pr[j] * v[(h * Lk + j) * d + m] for j in range(Lk)) for m in range(d))
    return O if case["variant"] == "flash" else O + S + P


def adam(case, pv, gv, mv, vv):
    """Exact m', v', p' (and the written-back parameter for variants with an fp32 master)."""
    p = {k: (parse_hex(x) if isinstance(x, str) and x.startswith(("0x", "-0x")) else x) for k, x in case["params"].items()}
    b1, b2, lr, eps, wd, t = p["beta1"], p["beta2"], p["lr"], p["eps"], p["wd"], int(p["step"])
    var = case["variant"]
    nobc = var == "no-bias-correction"
    bc1 = 1 if nobc else 1 - b1 ** t
    bc2 = 1 if nobc else 1 - b2 ** t
    M, V, P = [], [], []
    for p0, g0, m0, v0 in zip(pv, gv, mv, vv):
        g = g0 + wd * p0 if p["mode"] == "l2" else g0
        m = b1 * m0 + (1 - b1) * g
        v = b2 * v0 + (1 - b2) * g * g
        d = mpmath.sqrt(v / bc2 + eps) if var == "eps-inside" else mpmath.sqrt(v / bc2) + eps
        upd = (m / bc1) / d + (0 if p["mode"] == "l2" else wd * p0)
        M.append(m)
        V.append(v)
        P.append(p0 - lr * upd)
    master = var not in ("torch", "no-master")
    return M + V + P + (P if master else [])


def clip(case, g):
    """Exact global norm and the clipped gradients."""
    max_norm = parse_hex(case["params"]["max_norm"])
    norm = max(abs(x) for x in g) if case["variant"] == "inf" else mpmath.sqrt(mpmath.fsum(x * x for x in g))
    f = min(mpmath.mpf(1), max_norm / (norm + mpmath.mpf(1e-6)))
    return [norm] + [x * f for x in g]


def main():
    precfuzz, args = sys.argv[1], sys.argv[3:]
    res = json.loads(subprocess.run([precfuzz, "run"] + args + ["--json"], capture_output=True, text=True).stdout)
    worst, checked, tiny = mpmath.mpf(0), 0, 0
    for r in res["cases"]:
        case = r["case"]
        iv = {name: [parse_hex(v) for v in vals] for name, vals in r["input_values"].items()}
        if case["kernel"] == "softmax":
            want = softmax_rows(case, iv["x"])
        elif case["kernel"] == "attention":
            want = attention(case, iv["q"], iv["k"], iv["v"])
        elif case["kernel"] == "clip":
            want = clip(case, iv["g"])
        else:
            want = adam(case, iv["p"], iv["g"], iv["m"], [abs(x) for x in iv["v"]])
        assert len(want) == len(r["elements"]), "element count"
        for w, el in zip(want, r["elements"]):
            got = parse_hex(el["exact"])
            if "exact_upper" in el:  # below MPFR's exponent range: only a bound is claimed
                assert w != 0 and abs(w) < parse_hex(el["exact_upper"]), "tiny element out of its bound"
                tiny += 1
                continue
            if w is None:
                assert mpmath.isnan(got), "undefined element reported as %s" % el["exact"]
                continue
            if w == 0:
                assert got == 0, "exact zero reported as %s" % el["exact"]
                continue
            rel = abs(got - w) / abs(w)
            worst = max(worst, rel)
            checked += 1
    bound = mpmath.mpf(2) ** -150
    print("checked %d elements (and %d below MPFR's range, within their bound); worst relative difference 2^%s (bound 2^-150)" %
          (checked, tiny, mpmath.nstr(mpmath.log(worst, 2), 6) if worst else "-inf"))
    if checked == 0 or worst >= bound:
        sys.exit(1)


main()
