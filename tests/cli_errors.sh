#!/usr/bin/env bash
# Every malformed command line or input file gets exit status 2 and exactly one line on
# stderr that names the problem; none crashes (run against the ASan/UBSan build too).
# usage: cli_errors.sh PRECFUZZ
set -u
P=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
n=0

expect2() { # expect2 NEEDLE ARGS...
  local needle=$1; shift
  n=$((n + 1))
  "$P" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$T/err")
  if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$needle" "$T/err"; then
    echo "FAIL: precfuzz $* -> exit $rc, $lines stderr lines (want 2, 1 line with '$needle'):"
    sed 's/^/    /' "$T/err" | head -5
    fail=$((fail + 1))
  fi
}

case_json() { # case_json SHAPE PARAMS [KERNEL VARIANT DTYPE]
  printf '{"format":"precfuzz-case/1","kernel":"%s","variant":"%s","dtype":"%s","accum":"fp32","shape":%s,%s"inputs":{"x":{"dist":"normal","seed":1}}}' \
    "${3:-softmax}" "${4:-safe}" "${5:-fp16}" "$1" "$2"
}
case_json '[2,3]' '' >"$T/good.json"
head -c 60 "$T/good.json" >"$T/truncated.json"
head -c 300 /dev/urandom >"$T/garbage.json"
printf '\x00\x01\x02' >"$T/binary.json"
case_json '[0,3]' '' >"$T/zero.json"
case_json '[-2,3]' '' >"$T/negative.json"
case_json '[99999999999,3]' '' >"$T/enormous.json"
case_json '[2,3]' '' softmax quick >"$T/variant.json"
case_json '[2,3]' '' softmax safe fp64 >"$T/dtype.json"
case_json '[2,3]' '' mish >"$T/kernel.json"
case_json '[2,3]' '"params":{"alpha":"nan"},' >"$T/nanparam.json"
case_json '[2,3]' '"params":{"alpha":-1},' >"$T/negparam.json"
mkdir "$T/dir.json"

expect2 "unknown command" frobnicate
expect2 "-k KERNEL is required" run
expect2 "unknown kernel 'mish'" run -k mish
expect2 "unknown variant 'quick'" run -k softmax -v quick
expect2 "unknown dtype 'fp64'" run -k softmax -t fp64
expect2 "unknown accumulation dtype" run -k softmax -a int8
expect2 "does not support" run -k softmax -v safe -t bf16 -a fp16 --cases 1
expect2 "rows = 0" run -k softmax --shape 0x4 --cases 1
expect2 "--shape" run -k softmax --shape -3x4 --cases 1
expect2 "--shape" run -k softmax --shape 4 --cases 1
expect2 "--shape" run -k softmax --shape 4x4x4 --cases 1
expect2 "--shape" run -k softmax --shape 99999999999999999999999x4 --cases 1
expect2 "elements" run -k softmax --shape 65536x65536 --cases 1
expect2 "--scale" run -k softmax --scale nan
expect2 "--scale" run -k softmax --scale -2
expect2 "--scale" run -k softmax --scale 1e400
expect2 "--cases" run -k softmax --cases 0
expect2 "--cases" run -k softmax --cases -5
expect2 "--cases" run -k softmax --cases 12abc
expect2 "--seed" run -k softmax --seed -1
expect2 "--seed" run -k softmax --seed 184467440737095516160
expect2 "--dist" run -k softmax --dist cauchy
expect2 "--fault" run -k softmax -v naive --fault softmax-no-max
expect2 "fault" run -k softmax -v safe --fault nope --cases 1
expect2 "--param" run -k softmax --param alpha
expect2 "no parameter 'beta'" run -k softmax --param beta=1 --cases 1
expect2 "NaN" run -k softmax --param alpha=nan --cases 1
expect2 "alpha" run -k softmax --param alpha=-1 --cases 1
expect2 "choices" run -k softmax --param mask=diag --cases 1
expect2 "--special-rate" run -k softmax --special-rate 1.5
expect2 "--exp-range" run -k softmax --exp-range 5:1
expect2 "--oracle-prec" run -k softmax --oracle-prec 8
expect2 "--backend" run -k softmax --backend tpu
expect2 "needs a value" run -k softmax --seed
expect2 "unknown option" run -k softmax --frobnicate
expect2 "unexpected argument" run -k softmax extra
expect2 "not a directory" run -k softmax --cases 1 --save-findings "$T/good.json"
expect2 "applies to the layer-scaled variant only" run -k attention -v post-scale --param layer=4 --cases 1
expect2 "softmax_accum must be fp32" run -k attention -v flash --param softmax_accum=storage --cases 1
expect2 "--shape" run -k attention --shape 1x1x16x16 --cases 1
expect2 "head_dim = 0" run -k attention --shape 1x1x4x4x0 --cases 1
expect2 "head_dim = 99999" run -k attention --shape 1x1x4x4x99999 --cases 1
expect2 "block" run -k attention -v flash --param block=0 --cases 1
expect2 "no input 'q'" run -k adam --input q:value=1 --cases 1
expect2 "is not NAME:FIELD" run -k adam --input g --cases 1
expect2 "unknown field 'colour'" run -k adam --input g:colour=red --cases 1
expect2 "scale" run -k adam --input g:scale=-1 --cases 1
expect2 "not representable" run -k adam -v torch -t fp16 --input g:value=0.1 --cases 1
expect2 "no l2 mode" run -k adam -v torch --param mode=l2 --cases 1
expect2 "beta2" run -k adam --param beta2=1.5 --cases 1
expect2 "NaN" run -k adam --param lr=nan --cases 1
expect2 "longer than the trajectory" run -k schedule --param warmup=500 --cases 1
expect2 "final value" run -k schedule --param lr=1e-4 --param lr_final=1e-3 --cases 1
expect2 "tolerance" run -k schedule --param tolerance=0 --cases 1
expect2 "scale0 is set but scaler is none" run -k schedule --param scale0=1024 --cases 1
expect2 "spike_tensor" run -k schedule --param tensors=2 --param spike_tensor=3 --cases 1
expect2 "nonfinite_from" run -k schedule --shape 10x4 --param nonfinite_from=11 --cases 1
expect2 "scaler" run -k schedule --param scaler=apex --cases 1
expect2 "unknown argument" list --bogus
expect2 "no FILE" replay
expect2 "cannot open" replay "$T/missing.json"
expect2 "not valid JSON" replay "$T/truncated.json"
expect2 "truncated.json" replay "$T/truncated.json"
expect2 "garbage.json" replay "$T/garbage.json"
expect2 "binary" replay "$T/binary.json"
expect2 "rows = 0" replay "$T/zero.json"
expect2 "'shape'" replay "$T/negative.json"
expect2 "rows = 99999999999" replay "$T/enormous.json"
expect2 "unknown variant 'quick'" replay "$T/variant.json"
expect2 "dtype 'fp64'" replay "$T/dtype.json"
expect2 "unknown kernel 'mish'" replay "$T/kernel.json"
expect2 "NaN" replay "$T/nanparam.json"
expect2 "alpha" replay "$T/negparam.json"
expect2 "dir.json" replay "$T/dir.json"
expect2 "unknown option" replay --frob "$T/good.json"
expect2 "hidden (7) must be even" diff-tp --shape 3x7x16x11x4 --cases 1
expect2 "ffn (5) must be even" diff-tp --shape 3x8x5x11x4 --cases 1
expect2 "vocab (1)" diff-tp --shape 3x8x16x1x4 --cases 1
expect2 "does not support dtype fp32" diff-tp -v megatron -t fp32 --cases 1
expect2 "experts must be 0 or 2" diff-tp --param experts=1 --cases 1
expect2 "tp_diff/torch takes experts in [0, 0] only, not 2" diff-tp -v torch -t fp32 --param experts=2 --cases 1
expect2 "loss_scale is for fp16" diff-tp --param loss_scale=1024 --cases 1
expect2 "are for the dynamic scaler (scaler=1)" diff-tp -t fp16 --param hysteresis=3 --cases 1
expect2 "scaler=1 (a dynamic loss scale) is for fp16" diff-tp --param scaler=1 --cases 1
expect2 "min_loss_scale (3) must be a power of two" diff-tp -t fp16 --param scaler=1 --param min_loss_scale=3 --cases 1
expect2 "must not exceed the initial loss_scale (2)" diff-tp -t fp16 --param scaler=1 --param min_loss_scale=4 --param loss_scale=2 --cases 1
expect2 "comm=1 (the reduction in the storage dtype) is for bf16 (and DeepSpeed's ZeRO in fp16)" diff-tp -t fp16 --param comm=1 --cases 1
expect2 "tp_diff/deepspeed-zero2 does not support dtype fp32" run -k tp_diff -v deepspeed-zero2 -t fp32 --param tied=0 --cases 1
expect2 "power of two" diff-tp -t fp16 --param loss_scale=1000 --cases 1
expect2 "-k is not an option" diff-tp -k softmax
expect2 "fault" diff-tp --fault softmax-no-max --cases 1
expect2 "shape" diff-tp --shape 3x8 --cases 1
# a case file still refuses a value its fp32 parameter cannot hold (the file is the exact record)
case_json '[2,4]' '"params":{"scale0":"65519.99999"},' loss_scale static fp16 | sed 's/"x":/"g":/' >"$T/scale0.json"
expect2 "is not a fp32 value" replay "$T/scale0.json"

# boundary
expect2 "--along AXIS is required" boundary -k softmax -v naive
expect2 "-v VARIANT is required" boundary -k softmax --along value
expect2 "not value[:INPUT]" boundary -k softmax -v naive --along frob
expect2 "has no input 'y'" boundary -k softmax -v naive --along value:y
expect2 "has no parameter 'beta'" boundary -k softmax -v naive --along param:beta
expect2 "has no dimension 'heads'" boundary -k softmax -v naive --along dim:heads
expect2 "a choice has no order" boundary -k softmax -v naive --along param:mask
expect2 "is not a verdict that fails" boundary -k softmax -v naive --along value --fail ok
expect2 "is not an event" boundary -k softmax -v naive --along value --fail event:boom
expect2 "is not a finite number" boundary -k softmax -v naive --along value --from inf
expect2 "--from must be below --to" boundary -k softmax -v naive --along value --from 2 --to 1
expect2 "leaves" boundary -k softmax -v naive -t fp16 --along value --to 1e6
expect2 "unknown format" boundary -k softmax -v naive --along value --format fp8
expect2 "takes integers only" boundary -k softmax -v naive --along dim:cols --format fp32
expect2 "--points" boundary -k softmax -v naive --along value --points 0
expect2 "takes integers" boundary -k softmax -v naive --along dim:cols --from 1.5 --to 8
expect2 "holds no value of fp16" boundary -k softmax -v naive -t fp16 --along value --from 1.0001 --to 1.0002
expect2 "does not take dtype" boundary -k softmax -v safe -t bf16 -a fp16 --along value
expect2 "holds explicit values" boundary -k softmax -v naive --along scale --input x:value=1 --from 1 --to 2

# --backend cuda: a kernel without a CUDA implementation, and no device (CUDA_VISIBLE_DEVICES=
# hides every device, so these hold on GPU machines too)
expect2 "is not cpu or cuda" run -k softmax --backend gpu --cases 1
expect2 "no variant of schedule has a CUDA implementation" run -k schedule --backend cuda --cases 1
expect2 "tp_diff/megatron has no CUDA implementation" run -k tp_diff -v megatron --backend cuda --cases 1
expect2 "has no CUDA implementation" boundary -k schedule -v fp32-state --along param:lr --backend cuda
expect2 "has no CUDA implementation" diff-backend -k tp_diff
expect2 "-v needs -k" diff-backend -v safe
expect2 "--fault is not an option here" diff-backend -k softmax --fault softmax-no-max
CUDA_VISIBLE_DEVICES= expect2 "no CUDA" run -k softmax --backend cuda --cases 1
CUDA_VISIBLE_DEVICES= expect2 "no CUDA" replay --backend cuda "$T/good.json"
CUDA_VISIBLE_DEVICES= expect2 "no CUDA" boundary -k softmax -v naive --along value --backend cuda
CUDA_VISIBLE_DEVICES= expect2 "no CUDA" diff-backend -k softmax --cases 1
CUDA_VISIBLE_DEVICES= expect2 "no CUDA" sweep --backend cuda -o "$T/cuda.json"
# a case whose judging is estimated beyond the time limit is refused before anything is made
expect2 "judging one case is estimated at" run -k attention -v flash --shape 1x1x512x512x64 --cases 1 --max-case-seconds 0.01
expect2 "judging one case is estimated at" run -k softmax --shape 4096x4096 --cases 1 --max-case-seconds 0.5
expect2 "judging one case is estimated at 41 min" run -k attention -v flash --shape 4x256x4096x4096x1 --max-case-seconds 600
expect2 "--max-case-seconds: '0' is not a number of seconds > 0" run -k softmax --cases 1 --max-case-seconds 0
expect2 "--max-case-seconds: 'inf' is not a number of seconds > 0" run -k softmax --cases 1 --max-case-seconds inf
PRECFUZZ_PROGRESS=yes expect2 "PRECFUZZ_PROGRESS: 'yes' is not 0 or 1" run -k softmax --cases 1
PRECFUZZ_DOCS_URL=ftp://docs expect2 "PRECFUZZ_DOCS_URL: 'ftp://docs' is not an http:// or https:// URL" run -k softmax --cases 1 --sarif "$T/d.sarif"
expect2 "--sarif: $T/no/dir/f.sarif: cannot write" run -k softmax --cases 1 --sarif "$T/no/dir/f.sarif"
expect2 "--sarif: no file name given" run -k softmax --cases 1 --sarif ""
expect2 "--sarif: $T: is a directory" run -k softmax --cases 1 --sarif "$T"
expect2 "--junit: $T/no/dir/j.xml: cannot write" run -k softmax --cases 1 --junit "$T/no/dir/j.xml"
expect2 "--junit: no file name given" run -k softmax --cases 1 --junit ""
expect2 "--junit: $T: is a directory" run -k softmax --cases 1 --junit "$T"
expect2 ": is a directory" sweep --quick --kernel softmax -o "$T"
# the CUDA kernels are a module loaded on first use: a module that is not there is exit 2 naming
# it (a build without CUDA says it has none), and a CPU run loads no CUDA library at all
PRECFUZZ_CUDA_MODULE=$T/none.so expect2 "--backend cuda: " run -k softmax --backend cuda --cases 1
n=$((n + 1))
if LD_DEBUG=files "$P" run -k softmax -v safe --cases 2 2>&1 >/dev/null | grep -qE 'libcuda|libcublas|libcurand'; then
  echo "FAIL: a CPU run loaded a CUDA library"
  fail=$((fail + 1))
fi

# shapes are bounded by memory: the budget (PRECFUZZ_MEMORY_BYTES, else half the machine's)
# against 112 bytes per output and 16 per input element; 4096x4096 softmax needs 2.0 GiB
PRECFUZZ_MEMORY_BYTES=1G expect2 "shape: the case needs about 2.0 GiB (112 bytes per output element, 16 per input element), more than the 1.0 GiB" \
  run -k softmax --shape 4096x4096
PRECFUZZ_SIMD=of expect2 "PRECFUZZ_SIMD: 'of' is not on or off" run -k softmax --cases 1
PRECFUZZ_MEMORY_BYTES=1X expect2 "PRECFUZZ_MEMORY_BYTES: '1X' is not a size" run -k softmax
PRECFUZZ_MEMORY_BYTES=0.5 expect2 "PRECFUZZ_MEMORY_BYTES: '0.5' is not a size" run -k softmax
PRECFUZZ_MEMORY_BYTES=0.5G expect2 "more than the 512.0 MiB precfuzz may use" run -k softmax --shape 4096x4096
expect2 "input 'x' would have 4294967296 elements, more than 1073741824" run -k softmax --shape 65536x65536
# a vocabulary-sized row fits (was refused above 65536 columns)
n=$((n + 1))
PRECFUZZ_MEMORY_BYTES=3G "$P" run -k softmax -v safe -t bf16 --shape 2x131072 --cases 1 2>&1 | grep -q "ok 1" ||
  { echo "FAIL: softmax 2x131072 did not run ok"; fail=$((fail + 1)); }

# strict JSON (issue 17): data after the value, a NUL inside a string, a key twice, a seed that
# a JSON number cannot hold, literals that binary64 holds as 0
good=$(cat "$T/good.json")
printf '%s {"x":1}' "$good" >"$T/trailing.json"
printf '%s' "$good" | sed 's/"variant":"safe"/"variant":"safe\\u0000evil"/' >"$T/nul.json"
printf '%s' "$good" | sed 's/"dtype":"fp16"/"dtype":"fp16","dtype":"bf16"/' >"$T/dupkey.json"
case_json '[2,3]' '"params":{"alpha":1,"alpha":2},' >"$T/dupparam.json"
printf '%s' "$good" | sed 's/"seed":1/"seed":18446744073709551615/' >"$T/bigseed.json"
case_json '[1,2]' '' | sed 's/"inputs":{"x":{"dist":"normal","seed":1}}/"inputs":{"x":{"values":["1","1e-400"]}}/' >"$T/underflow.json"
case_json '[1,2]' '' | sed 's/"inputs":{"x":{"dist":"normal","seed":1}}/"inputs":{"x":{"values":["1","0x1p-99999"]}}/' >"$T/underflow2.json"
expect2 "data after the JSON value" replay "$T/trailing.json"
{ printf '%s' "$good"; printf '\001'; } >"$T/ctrl.json" # cJSON would skip it as whitespace
expect2 "a control character (0x01)" replay "$T/ctrl.json"
expect2 "NUL character" replay "$T/nul.json"
expect2 "field 'dtype' is given twice" replay "$T/dupkey.json"
expect2 "field 'alpha' is given twice" replay "$T/dupparam.json"
expect2 "beyond 2^53" replay "$T/bigseed.json"
expect2 "underflow.json: value 1 of input 'x' is not a hex float (or inf, -inf, nan): it underflows to 0" replay "$T/underflow.json"
expect2 "underflow2.json: value 1 of input 'x' is not a hex float" replay "$T/underflow2.json"
expect2 "value '1e-400' is not a number" run -k softmax --shape 1x2 --input x:value=1e-400 --cases 1
printf '{"format":"precfuzz-results/2","format":"x"}' >"$T/dupresults.json"
n=$((n + 1))
"$(dirname "$P")/precision-report" -i "$T/dupresults.json" -o "$T/r.html" 2>"$T/err" >/dev/null
if [ $? -ne 2 ] || ! grep -qF "field 'format' is given twice" "$T/err"; then
  echo "FAIL: precision-report on a results file with a key twice:"; sed 's/^/    /' "$T/err"; fail=$((fail + 1))
fi
# numbers on the command line: decimal or 0x hex, no sign, no whitespace, no octal, no wrap
expect2 "--seed" run -k softmax --seed ' -1' --cases 1
expect2 "--seed" run -k softmax --seed '1 ' --cases 1
expect2 "--cases" run -k softmax --cases ' 3'
expect2 "the seeds would pass 2^64 - 1" run -k softmax --seed 18446744073709551615 --cases 3
expect2 "the seeds would pass 2^64 - 1" sweep --seed 18446744073709551615 --cases 3 -o "$T/never.json"
n=$((n + 1))
"$P" run -k softmax -v safe --cases 010 2>&1 | grep -q "10 cases" ||
  { echo "FAIL: --cases 010 is not ten cases"; fail=$((fail + 1)); }
n=$((n + 1))
"$P" run -k softmax -v safe --cases 0x3 2>&1 | grep -q "3 cases" ||
  { echo "FAIL: --cases 0x3 is not three cases"; fail=$((fail + 1)); }

# generator options that would be ignored are refused
expect2 "--exp-range applies to --dist loguniform only" run -k softmax --exp-range -4:4 --cases 1
expect2 "--outlier-magnitude" run -k softmax --outliers 3 --cases 1
expect2 "value sets every element and takes no other field" run -k softmax --input x:value=12,dist=uniform --cases 1
expect2 "exp applies to dist=loguniform only" run -k softmax --input x:exp=-3:3 --cases 1
expect2 "outliers need outlier_magnitude" run -k softmax --input x:outliers=2 --cases 1

# sizes are checked before anything is made: --input value= fills an input of the shape's size
PRECFUZZ_MEMORY_BYTES=1G expect2 "the case needs about" run -k softmax -v safe --shape 16384x16384 --input x:value=1 --cases 1
expect2 "input 'x' would have" run -k softmax -v safe --shape 1048592x1048592 --input x:value=1 --cases 1

# what is written is whole or not at all, and a write that fails is exit 2 (issue 17)
n=$((n + 1))
"$P" list >/dev/full 2>"$T/err"
if [ $? -ne 2 ] || ! grep -q "cannot write to standard output" "$T/err"; then
  echo "FAIL: precfuzz list >/dev/full did not exit 2"; fail=$((fail + 1))
fi
mkdir -p "$T/saves/softmax-naive-fp16-fp16-seed1-overflow.json" # a directory where the finding would go
expect2 "--save-findings" run -k softmax -v naive -t fp16 -a fp16 --scale 16 --at-defaults --cases 1 --save-findings "$T/saves"
n=$((n + 1))
if ls "$T/saves" | grep -q tmp; then echo "FAIL: a temporary file was left in --save-findings"; fail=$((fail + 1)); fi
echo '{"old": "results"}' >"$T/old.json"
n=$((n + 1))
timeout -s INT 2 "$P" sweep -o "$T/old.json" >/dev/null 2>&1
if [ "$(cat "$T/old.json")" != '{"old": "results"}' ] || ls "$T" | grep -q "old.json.tmp"; then
  echo "FAIL: an interrupted sweep -o did not leave the old file as it was"; fail=$((fail + 1))
fi
expect2 "-o: " sweep -o /dev/full/results.json

# loss_scale's domain: fp16's overflow threshold is max + ulp/2 = 65520, so a gradient of
# 65504 (or 65519) at scale 1 is applied, not "overflows even at the smallest scale"
for g in 65504 65519; do
  n=$((n + 1))
  ! "$P" run -k loss_scale -v static -t fp16 --param scale0=1 --shape 2x4 --input g:value=$g --cases 1 2>&1 |
    grep -q "cases outside the contract's domain" || { echo "FAIL: loss_scale g = $g at scale 1 is outside the domain"; fail=$((fail + 1)); }
done
n=$((n + 1))
"$P" run -k loss_scale -v static -t fp16 --param scale0=1 --shape 2x4 --input g:value=65520 --cases 1 2>&1 |
  grep -q "1 of 1 cases outside the contract's domain" || { echo "FAIL: loss_scale g = 65520 at scale 1 is in the domain"; fail=$((fail + 1)); }

# a flag given twice is refused, not the last silently kept (getopt commands, --param and
# --input by name, the commands that read their flags by hand); the command's own dtype
# (diff-tp's bf16) gives way to the user's -t without a repeat
expect2 "--cases given twice" run -k softmax --cases 3 --cases 4
expect2 "-v (--variant) given twice" run -k softmax -v safe --variant safe
expect2 "-t (--dtype) given twice" diff-tp -t fp16 -t bf16
expect2 "--seed given twice" boundary -k softmax --seed 1 --seed 2
expect2 "--imprecise given twice" diff-variant -k softmax -v safe --imprecise fp16=0.1 --imprecise fp16=0.2
expect2 "--param tied given twice" diff-tp --param tied=0 --param tied=1
expect2 "--input x given twice" run -k softmax --input x:value=1 --input x:value=2
expect2 "--outputs given twice" judge "$T/good.json" --outputs a.npy --outputs b.npy
expect2 "--json given twice" replay --json --json "$T/good.json"
expect2 "-o given twice" minimize "$T/good.json" -o "$T/a.json" -o "$T/b.json"
expect2 "--quick given twice" sweep --quick --quick
n=$((n + 1))
"$P" diff-tp -t fp16 -v megatron --cases 1 >/dev/null 2>&1 || { echo "FAIL: diff-tp -t fp16 refused"; fail=$((fail + 1)); }
# flags that would have no effect
expect2 "--outlier-magnitude applies with --outliers N only" run -k softmax --outlier-magnitude 8
expect2 "version: unexpected argument '--bogus'" version --bogus
# an output over an input, or two outputs on one path: refused before anything is written
expect2 "--sarif and --junit name one file" run -k softmax --cases 1 --sarif "$T/f.xml" --junit "$T/./f.xml"
"$P" diff-tp --fault norm-no-dedup --cases 1 --save-findings "$T/mf" >/dev/null 2>&1
mf=$(ls "$T"/mf/*.json | head -1)
cp "$mf" "$T/mf.keep"
expect2 "is the input itself" minimize "$mf" -o "$mf"
n=$((n + 1))
cmp -s "$mf" "$T/mf.keep" || { echo "FAIL: minimize -o over its input changed it"; fail=$((fail + 1)); }

# a decimal for a parameter the frameworks hold in fp32 is rounded as they round it, said once on
# stderr, and carried as fp32's bits
n=$((n + 1))
"$P" run -k cross_entropy -v fused --param label_smoothing=0.1 --cases 2 --json >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -ne 0 ] || [ "$(grep -c 'label_smoothing=0.1 taken as the fp32 value 0x1.99999ap-4' "$T/err")" -ne 1 ] ||
  ! grep -q '"label_smoothing":.*"0x1.99999ap-4"' "$T/out"; then
  echo "FAIL: --param label_smoothing=0.1 -> $rc: $(head -3 "$T/err")"; fail=$((fail + 1))
fi

# a named pipe or a device as a file: refused at once (a FIFO's open would wait for a writer)
mkfifo "$T/pipe.npy"
n=$((n + 1))
out=$(timeout 10 "$P" run -k softmax --input x:file="$T/pipe.npy" --cases 1 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "pipe.npy: not a regular file" || { echo "FAIL: a FIFO as a tensor file -> $rc: $out"; fail=$((fail + 1)); }
expect2 "not a regular file" replay /dev/zero

# a finding that cannot be saved (its name taken by a directory) stops the run: one line, exit 2
mkdir -p "$T/sv/softmax-safe-fp16-fp32-seed1-overflow.json"
n=$((n + 1))
"$P" run -k softmax -v safe -t fp16 --fault softmax-no-max --scale 0x1p10 --cases 200 --save-findings "$T/sv" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -ne 2 ] || [ "$(grep -c -- '--save-findings' "$T/err")" -ne 1 ] ||
  ! grep -qE '^stopped \(a finding could not be saved\) after [0-9]+ of 200 cases' "$T/out"; then
  echo "FAIL: a finding that cannot be saved -> $rc: $(head -3 "$T/err")"; fail=$((fail + 1))
fi

# a case file that is not UTF-8 (a Latin-1 byte in its note) is refused; UTF-8 is taken
case_json '[2,3]' '"note":"caf'"$(printf '\xe9')"'",' >"$T/latin1.json"
expect2 "not UTF-8 at byte" replay "$T/latin1.json"
case_json '[2,3]' '"note":"caf'"$(printf '\xc3\xa9')"'",' >"$T/utf8.json"
n=$((n + 1))
"$P" replay "$T/utf8.json" >/dev/null 2>&1 || { echo "FAIL: a UTF-8 note refused"; fail=$((fail + 1)); }

# and the good file is fine
"$P" replay "$T/good.json" >/dev/null 2>&1 || { echo "FAIL: good case did not replay"; fail=$((fail + 1)); }
echo "cli_errors: $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
