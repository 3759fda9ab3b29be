#!/usr/bin/env python3
# tests/cli_checkpoint.sh's editor of checkpoints: ckpt_edit.py DIR RANK TENSOR INDEX VALUE|swap:J : rewrite one fp32 element of a precfuzz checkpoint's
# rank file in place (or swap two); prints 'old new' as %.9g
import json, struct, sys
d, r, name, i, what = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
p = f"{d}/rank-{r}.safetensors"
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
assert h[name]["dtype"] == "F32"
base = 8 + n + h[name]["data_offsets"][0]
get = lambda k: struct.unpack("<f", b[base + 4 * k:base + 4 * k + 4])[0]
put = lambda k, v: b.__setitem__(slice(base + 4 * k, base + 4 * k + 4), struct.pack("<f", v))
old = get(i)
if what.startswith("swap:"):
    j = int(what[5:])
    new = get(j)
    put(i, new), put(j, old)
else:
    new = float.fromhex(what) if what.startswith("0x") else float(what)
    put(i, new)
new = get(i)
open(p, "wb").write(b)
print("%.9g %.9g" % (old, new))
