"""Helpers of the kernels' mpmath formulas (kernels/<op>/<op>_mpmath.py), which
tests/oracle_mpmath_check.py loads: exact values of C99 hex floats, the dtypes' lowest finite."""
import re

import mpmath

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
