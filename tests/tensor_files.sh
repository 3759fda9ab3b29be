#!/bin/bash
# Tensor files in and out, and precfuzz judge, on fixtures written by numpy.save, ml_dtypes and
# safetensors (tests/data/tensors/make.py): a file-fed run gives the same per-element results as
# the same values in a case file; outputs made elsewhere are judged; every malformed file is
# exit 2 with one line naming it.
# usage: tests/tensor_files.sh PRECFUZZ
P=$(realpath "$1")
D=$(cd "$(dirname "$0")" && pwd)/data/tensors
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/check.sh"

# the per-element results (input values, outputs, exact values, verdicts) of a run or replay --json
elements() {
  python3 -c '
import json, sys
j = json.load(sys.stdin)
r = j["cases"][0] if isinstance(j, dict) else j[0]
print(json.dumps([r["verdict"], r["input_values"], r["elements"]]))'
}
same_as_values() { # what, values case, then run's arguments
  local what=$1 values=$2
  shift 2
  n=$((n + 1))
  local a b
  a=$("$P" run "$@" --json 2>&1 | elements) || { fail "$what: run $*"; return; }
  b=$("$P" replay --json "$values" 2>&1 | elements) || { fail "$what: replay $values"; return; }
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$what: the file-fed run differs from the values case"
}
same_as_values "fp16 .npy" "$D/logits_fp16.values.json" -k softmax -v safe --input x:file="$D/logits_fp16.npy"
same_as_values "fp16 .npy in Fortran order" "$D/logits_fp16.values.json" -k softmax -v safe --input x:file="$D/logits_fp16_fortran.npy"
same_as_values "bf16 safetensors" "$D/logits_bf16.values.json" -k softmax -v safe --input x:file="$D/logits_bf16.safetensors,tensor=logits"
same_as_values "bf16 .npy (ml_dtypes, |V2)" "$D/logits_bf16.values.json" -k softmax -v safe -t bf16 --input x:file="$D/logits_bf16.npy"

# dtype, shape and one case from the file
n=$((n + 1))
out=$("$P" run -k softmax -v safe --input x:file="$D/logits_bf16.safetensors,tensor=logits" 2>&1)
echo "$out" | grep -q "^softmax/safe bf16/fp32: 1 cases" || fail "dtype and case count from the file: $out"
n=$((n + 1))
out=$("$P" run -k softmax -v safe --input x:file="$D/logits_fp16.npy" --json 2>&1)
echo "$out" | tr -d ' \t\n' | grep -q '"shape":\[4,8\]' || fail "shape from the file: $out"

# a case file naming a tensor file (relative to itself), and the hash that notices a change
cp "$D/logits_fp16.npy" "$T/x.npy"
sha=$(sha256sum "$T/x.npy" | cut -d' ' -f1)
cat >"$T/case.json" <<JSON
{"format": "precfuzz-case/1", "kernel": "softmax", "variant": "safe", "dtype": "fp16", "accum": "fp32",
 "shape": [4, 8], "inputs": {"x": {"file": "x.npy", "sha256": "$sha"}}}
JSON
n=$((n + 1))
a=$(cd / && "$P" replay --json "$T/case.json" 2>&1 | elements)
b=$("$P" replay --json "$D/logits_fp16.values.json" 2>&1 | elements)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "a case naming x.npy: $a"

# --save-findings --tensors: inputs, output and expected beside the case, which names them
for fmt in npy safetensors; do
  n=$((n + 1))
  "$P" run -k softmax -v naive -t fp16 -a fp16 --scale 16 --at-defaults --cases 1 --save-findings "$T/f-$fmt" --tensors $fmt >/dev/null 2>&1
  c=$(ls "$T/f-$fmt"/*.json 2>/dev/null | head -1)
  out=$("$P" replay "$c" 2>&1)
  echo "$out" | grep -q "overflow .*\[as expected\]" && tr -d ' \t\n' <"$c" | grep -q '"x":{"file":"softmax-naive[^"]*","\(tensor":"x","\)\?sha256"' ||
    fail "--tensors $fmt: $(ls "$T/f-$fmt") $out"
  if [ $fmt = npy ]; then ls "$T/f-$fmt"/*.x.npy "$T/f-$fmt"/*.output.npy "$T/f-$fmt"/*.expected.npy >/dev/null 2>&1 || fail "--tensors npy files"; fi
done

# judge: correctly rounded (ok), one element 3 ulps up under 1 ulp (a finding naming it)
n=$((n + 1))
out=$("$P" judge "$D/logits_fp16.values.json" --outputs "$D/softmax_rn.npy" 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q "32 of 32 outputs judged against the correctly rounded result within 1 ulp: ok" &&
  echo "$out" | grep -q "max ulps 0," || fail "judge rn -> $rc: $out"
n=$((n + 1))
# judge: the outputs transposed (8x4 for the case's 4x8) are refused; flat, in order, taken
# (the header's shape rewritten: same length, same values in order)
python3 - "$D/softmax_rn.npy" "$T" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<H", b[8:10])[0]
h = b[10:10 + n].decode()
for name, shape in (("rn_t.npy", "(8, 4)"), ("rn_flat.npy", "(32,)")):
    g = h.replace("(4, 8)", shape)
    g = g.rstrip("\n").ljust(n - 1) + "\n"
    open(f"{sys.argv[2]}/{name}", "wb").write(b[:10] + g.encode() + b[10 + n:])
PY
out=$("$P" judge "$D/logits_fp16.values.json" --outputs "$T/rn_t.npy" 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "has shape \[8,4\], the stage's is \[4,8\]" || fail "judge transposed -> $rc: $out"
out=$("$P" judge "$D/logits_fp16.values.json" --outputs "$T/rn_flat.npy" 2>&1) || fail "judge flat -> $?: $out"
out=$("$P" judge "$D/logits_fp16.values.json" --outputs "$D/softmax_3ulps.npy" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q ": inaccurate (inaccurate at \[1,2\]: .* 3 ulps, allowed 1;" &&
  echo "$out" | grep -q "reproduce with: [^ ]*precfuzz judge .*softmax_3ulps.npy" || fail "judge 3 ulps -> $rc: $out"
n=$((n + 1))
out=$("$P" judge "$D/logits_fp16.values.json" --outputs "$D/softmax_3ulps.npy" --ulps 3 2>&1) || fail "judge --ulps 3 -> $?: $out"
n=$((n + 1))
out=$("$P" judge "$D/logits_fp16.values.json" --outputs "$D/softmax_3ulps.npy" --like safe 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "against the contract of softmax/safe: inaccurate" || fail "judge --like safe -> $rc: $out"
n=$((n + 1))
out=$("$P" judge "$D/logits_fp16.values.json" --outputs "$D/softmax_rn.npy" --like online 2>&1) || fail "judge rn --like online -> $?: $out"

# safetensors written here: st FILE NAME:DTYPE:VALUE,VALUE... ... (F32, F16 from Python floats; I32)
st() {
  python3 - "$@" <<'PY'
import json, struct, sys
tensors, data = {}, b""
for spec in sys.argv[2:]:
    name, dt, vals = spec.split(":")
    vals = [float(v) for v in vals.split(",")]
    raw = b"".join(struct.pack({"F32": "<f", "F16": "<e", "I32": "<i"}[dt], int(v) if dt == "I32" else v) for v in vals)
    tensors[name] = {"dtype": dt, "shape": [len(vals)], "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
h = json.dumps(tensors).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
}

# judge by stage name: a finding exported as safetensors (x, output, expected) is judged on its
# "output" tensor: the same NaN at [0,0], now "nan" (outputs made elsewhere carry no
# floating-point events, so nothing says an overflow made it)
n=$((n + 1))
c=$(ls "$T/f-safetensors"/*.json | head -1)
out=$("$P" judge "$c" --outputs "${c%.json}.safetensors" --like naive 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "1024 of 1024 outputs judged against the contract of softmax/naive: nan (nan at \[0,0\]: got nan" ||
  fail "judge the exported finding's output tensor -> $rc: $out"
# tensor files are written with the umask's permissions, not mkstemp's 0600
n=$((n + 1))
m=$(cd "$T" && umask 022 && "$P" run -k softmax -v naive -t fp16 -a fp16 --scale 16 --at-defaults --cases 1 --save-findings perm --tensors npy >/dev/null 2>&1; stat -c %a perm/*.x.npy)
[ "$m" = 644 ] || fail "a written .npy has mode $m, not 644 under umask 022"
# the case's dtype is not taken from Adam's fp32 master: without -t it stays the default fp16
python3 -c 'import struct,sys; h=b"{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: (20,), }"; h+=b" "*(117-len(h))+b"\n"; sys.stdout.buffer.write(b"\x93NUMPY\x01\x00"+struct.pack("<H",len(h))+h+struct.pack("<20f",*[0.5]*20))' >"$T/master.npy"
n=$((n + 1))
out=$("$P" run -k adam -v fused --input p:file="$T/master.npy" 2>&1) && echo "$out" | grep -q "^adam/fused fp16/fp32: 100 cases" ||
  fail "adam with an fp32 master file: $out"
# an Adam (torch, fp16) case judged by stage tensors: a stage in fp32 (its values are fp16), a stage in I32
cat >"$T/adam.json" <<'JSON'
{"format": "precfuzz-case/1", "kernel": "adam", "variant": "torch", "dtype": "fp16", "accum": "fp32", "shape": [2],
 "inputs": {"p": {"values": ["0x1p+0", "-0x1p-1"]}, "g": {"values": ["0x1p-4", "0x1p-3"]},
            "m": {"values": ["0x0p+0", "0x0p+0"]}, "v": {"values": ["0x0p+0", "0x0p+0"]}}}
JSON
st "$T/adam-f32.safetensors" m:F32:0.1,0.1 v:F32:0,0 param:F32:1,-0.5
st "$T/adam-i32.safetensors" m:I32:0,0 v:F16:0,0
st "$T/adam-mv.safetensors" m:F16:0.00625,0.0125 v:F16:0,0
head -c 150 "$D/logits_fp16.npy" >"$T/trunc.npy"
head -c 60 "$D/logits_fp16.npy" >"$T/trunc-header.npy"
{ cat "$D/logits_fp16.npy"; printf 'X'; } >"$T/trailing.npy"
python3 -c 'import sys; h=b"{\"descr\": \"<f2\", \"fortran_order\": False, \"shape\": (1,), }"; h=h+b" "*(100000-len(h)-1)+b"\n"; sys.stdout.buffer.write(b"\x93NUMPY\x02\x00"+len(h).to_bytes(4,"little")+h+b"\0\0")' >"$T/big-header.npy"
python3 -c 'import sys; sys.stdout.buffer.write((200).to_bytes(8,"little")+b"{}")' >"$T/trunc.safetensors"
python3 -c 'import sys; h=b"{\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]}}"; sys.stdout.buffer.write(len(h).to_bytes(8,"little")+h+bytes(8))' >"$T/dup.safetensors"
python3 -c 'import sys; h=b"{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"},\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}"; sys.stdout.buffer.write(len(h).to_bytes(8,"little")+h+bytes(4))' >"$T/dup-meta.safetensors"
python3 -c 'import sys; h=b"{\"x\\u0000y\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}"; sys.stdout.buffer.write(len(h).to_bytes(8,"little")+h+bytes(4))' >"$T/nul-name.safetensors"
echo '{}' >"$T/notatensor.json"
R="run -k softmax -v safe"
expect2 "$T/trunc.npy: truncated .npy data (22 of 64 bytes)" "$P" $R --input x:file="$T/trunc.npy"
expect2 "$T/trunc-header.npy: truncated .npy header" "$P" $R --input x:file="$T/trunc-header.npy"
expect2 "$T/trailing.npy: 1 bytes after the .npy data" "$P" $R --input x:file="$T/trailing.npy"
expect2 "$T/big-header.npy: .npy header of 100000 bytes is larger than 65536" "$P" $R --input x:file="$T/big-header.npy"
expect2 "$T/trunc.safetensors: truncated safetensors header" "$P" $R --input x:file="$T/trunc.safetensors"
expect2 "$T/dup.safetensors: the safetensors header: field 'x' is given twice" "$P" $R --input x:file="$T/dup.safetensors"
expect2 "$T/dup-meta.safetensors: the safetensors header: field 'a' is given twice" "$P" $R --input x:file="$T/dup-meta.safetensors"
expect2 "$T/nul-name.safetensors: the safetensors header: a string holds a NUL character" "$P" $R --input x:file="$T/nul-name.safetensors"
expect2 "$T/notatensor.json: not a .npy or safetensors file" "$P" $R --input x:file="$T/notatensor.json"
expect2 "bad_float64.npy: .npy dtype '<f8' is not float32" "$P" $R --input x:file="$D/bad_float64.npy"
expect2 "bad_int32.safetensors: tensor 'ids' is I32, not F32, F16 or BF16" "$P" $R --input x:file="$D/bad_int32.safetensors"
expect2 "logits_bf16.safetensors: holds 2 tensors (bias, logits): name one with tensor=NAME" "$P" $R --input x:file="$D/logits_bf16.safetensors"
expect2 "logits_bf16.safetensors: no tensor 'nope' (it holds bias, logits)" "$P" $R --input x:file="$D/logits_bf16.safetensors,tensor=nope"
expect2 "logits_fp16.npy has shape 4x8, the case needs 4x9" "$P" $R --shape 4x9 --input x:file="$D/logits_fp16.npy"
expect2 "logits_fp16.npy holds fp16 values, the case needs bf16" "$P" $R -t bf16 --input x:file="$D/logits_fp16.npy"
expect2 "$T/none.npy: cannot open" "$P" $R --input x:file="$T/none.npy"
expect2 "--input x: file= takes only tensor=NAME beside it, got 'scale=2'" "$P" $R --input x:file="$D/logits_fp16.npy",scale=2
expect2 "--tensors: 'csv' is not npy or safetensors" "$P" $R --save-findings "$T/s" --tensors csv
expect2 "--tensors needs --save-findings DIR" "$P" $R --tensors npy
cp "$D/logits_bf16.npy" "$T/x.npy" # the file the case names changed
expect2 "input 'x': $T/x.npy changed since the case was written" "$P" replay "$T/case.json"
expect2 "outputs are fp32, the case's dtype is fp16" "$P" judge "$D/logits_fp16.values.json" --outputs "$D/softmax_fp32.npy"
expect2 "outputs: 48 values, the case has 32 outputs" "$P" judge "$D/logits_fp16.values.json" --outputs "$D/logits_bf16.npy"
expect2 "--like: softmax has no variant 'nope'" "$P" judge "$D/logits_fp16.values.json" --outputs "$D/softmax_rn.npy" --like nope
expect2 "judge: --like and --ulps are two different contracts" "$P" judge "$D/logits_fp16.values.json" --outputs "$D/softmax_rn.npy" --like safe --ulps 2
expect2 "outputs: 'm' is fp32, the stage holds fp16 values" "$P" judge "$T/adam.json" --outputs "$T/adam-f32.safetensors"
expect2 "tensor 'm' is I32, not F32, F16 or BF16" "$P" judge "$T/adam.json" --outputs "$T/adam-i32.safetensors"
# judge --tensor NAME judges that stage alone (2 of the case's 6 outputs)
n=$((n + 1))
out=$("$P" judge "$T/adam.json" --outputs "$T/adam-mv.safetensors" --tensor m 2>&1)
[ $? -le 1 ] && echo "$out" | grep -q "2 of 6 outputs judged" || fail "judge --tensor m: $out"
expect2 "judge: --outputs FILE is required" "$P" judge "$D/logits_fp16.values.json"
# judge from tensors alone: the case run would build from -k, -t and --input file= (no case file):
# the same verdict as with the case file, a replay line that finds it again, --save-case writes
# the case, which judges the same
n=$((n + 1))
out=$("$P" judge -k softmax -t fp16 --input x:file="$D/logits_fp16.npy" --outputs "$D/softmax_3ulps.npy" 2>&1); rc=$?
line=$(echo "$out" | sed -n 's/^  reproduce with: //p')
[ $rc -eq 1 ] && echo "$out" | grep -q "judged against the correctly rounded result within 1 ulp: inaccurate (inaccurate at \[1,2\]: .* 3 ulps" &&
  echo "$line" | grep -q " judge -k softmax .*--input x:file=$D/logits_fp16.npy .*--outputs $D/softmax_3ulps.npy" ||
  fail "judge -k softmax --input x:file= -> $rc: $out"
n=$((n + 1))
out=$(bash -c "$line" 2>&1); [ $? -eq 1 ] && echo "$out" | grep -q "3 ulps" || fail "judge -k's replay line: $line: $out"
n=$((n + 1))
"$P" judge -k softmax -t fp16 --input x:file="$D/logits_fp16.npy" --outputs "$D/softmax_rn.npy" --save-case "$T/jc.json" >/dev/null 2>&1 &&
  "$P" judge "$T/jc.json" --outputs "$D/softmax_rn.npy" >/dev/null 2>&1 &&
  ! "$P" judge "$T/jc.json" --outputs "$D/softmax_3ulps.npy" >/dev/null 2>&1 || fail "judge -k --save-case: the case file judges otherwise"
n=$((n + 1))
out=$("$P" judge -k softmax -t fp16 --input x:file="$D/logits_fp16.npy" --outputs "$D/softmax_3ulps.npy" --like safe 2>&1)
[ $? -eq 1 ] && echo "$out" | grep -q "softmax/safe .* against the contract of softmax/safe: inaccurate" || fail "judge -k --like safe: $out"
expect2 "judge: with -k the case is the options': no CASE file" "$P" judge -k softmax "$D/logits_fp16.values.json" --outputs "$D/softmax_rn.npy"
expect2 "judge: one case (--cases 1)" "$P" judge -k softmax --input x:file="$D/logits_fp16.npy" --outputs "$D/softmax_rn.npy" --cases 2
expect2 "judge: --outputs FILE is required" "$P" judge -k softmax --input x:file="$D/logits_fp16.npy"
# run --save-case: the case run builds (and judges) written for judge and replay
n=$((n + 1))
"$P" run -k softmax -v safe -t fp16 --input x:file="$D/logits_fp16.npy" --cases 1 --save-case "$T/rc.json" >/dev/null 2>&1 &&
  out=$("$P" judge "$T/rc.json" --outputs "$D/softmax_3ulps.npy" 2>&1); [ $? -eq 1 ] && echo "$out" | grep -q "3 ulps, allowed 1" ||
  fail "run --save-case, then judge: $out"
expect2 "--save-case writes one case: give -v and --cases 1" "$P" run -k softmax --save-case "$T/x.json"
expect2 "--save-case: no file name given" "$P" run -k softmax -v safe --cases 1 --save-case ""
expect2 "--save-case: no file name given" "$P" judge -k softmax --input x:file="$D/logits_fp16.npy" --outputs "$D/softmax_rn.npy" --save-case ""
expect2 "--save-case: $T/no/dir/c.json: cannot write" "$P" run -k softmax -v safe --cases 1 --save-case "$T/no/dir/c.json"

echo "tensor_files: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
