#!/bin/bash
# diff-tp --param resume_at=K (docs/checkpoint.md): clean round trips exit 0; a broken load is a
# finding named as loaded (the value saved and the value loaded), whose replay line gives it
# again; bad values of resume_at are refused with one line, and so is a kernel process whose
# hello does not take it. A checkpoint the user's code wrote (--checkpoint DIR, here one kept
# with --save-checkpoint and then edited by tests/ckpt_edit.py): loaded back unchanged it is
# clean; an element or the step count changed is a finding naming both values (read from the
# files, not from precfuzz), whose replay line names the directory and gives it again, from
# the case file too; a run resharded from it is judged by the differential's set; every
# misuse and every checkpoint that does not fit the case is refused with one line.
# usage: tests/cli_checkpoint.sh PRECFUZZ
P=$1
. "$(dirname "$0")/check.sh"

n=$((n + 1))
out=$("$P" diff-tp -v megatron --param resume_at=2 --cases 20 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "^tp_diff/megatron bf16/fp32: 20 cases (seeds 1..20): ok 20" || fail "clean round trips: $out"
for f in ckpt-master-from-param ckpt-last-stage-init ckpt-adam-state-dropped ckpt-step-reset; do
  n=$((n + 1))
  out=$("$P" diff-tp -v megatron --param resume_at=1 --fault $f --cases 5 --max-print 1 2>&1); rc=$?
  first=$(echo "$out" | grep -m1 "^FINDING")
  rep=$(echo "$out" | grep -A1 -m1 "^FINDING" | sed -n 's/.*reproduce with: //p')
  [ $rc -eq 1 ] && echo "$first" | grep -q "seed 1: divergent, born in resume .*the run saved after step 1, loaded into a fresh group: .* was .* when saved, .* as loaded" &&
    echo "$rep" | grep -q -- "--param resume_at=1 .*--fault $f" && [ "$(eval "$rep" 2>&1 | grep -m1 "^FINDING")" = "$first" ] ||
    fail "$f: $out"
done
n=$((n + 1))
out=$("$P" diff-tp -v megatron -t fp16 --param scaler=1 --param growth_interval=1 --param resume_at=1 --fault ckpt-scale-reset --cases 1 2>&1)
# the scaler doubled after step 1 (growth_interval 1): 2^13 saved, its start 2^12 loaded
echo "$out" | grep -q "loaded into a fresh group: the loss scale of DP replica 0, pipeline stage 0, TP rank 0 was 8192 when saved, 4096 as loaded" || fail "ckpt-scale-reset: $out"
expect2 "resume_at (3) must be a step before the last (steps: 3)" "$P" diff-tp -v megatron --param resume_at=3 --cases 1
expect2 "resume_at" "$P" diff-tp -v megatron --param resume_at=-1 --cases 1

# --- a checkpoint the user's code wrote ---
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ED="python3 $(dirname "$0")/ckpt_edit.py"
S=(diff-tp -v megatron --shape 5x8x16x12x4 --cases 1)
n=$((n + 1))
out=$("$P" "${S[@]}" --param resume_at=2 --save-checkpoint "$T/s" 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "checkpoints kept in $T/s" && [ -f "$T/s/tp2-dp1/rank-3.safetensors" ] &&
  [ "$(ls "$T/s")" = tp2-dp1 ] || fail "--save-checkpoint: $out"
n=$((n + 1))
out=$("$P" "${S[@]}" --param resume_at=2 --checkpoint "$T/s/tp2-dp1" 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q "ok 1" || fail "the saved checkpoint loaded back: $out"
# rank 1 (stage 0, TP rank 1) holds ln1.w whole (replicated): its element 3 is ln1.w[3]
cp -r "$T/s/tp2-dp1" "$T/e"
read -r was is < <($ED "$T/e" 1 master 3 0x1.8p-1)
n=$((n + 1))
out=$(cd "$T" && "$P" "${S[@]}" --param resume_at=2 --checkpoint e --save-findings f 2>&1); rc=$?
first=$(echo "$out" | grep -m1 "^FINDING")
rep=$(echo "$out" | sed -n 's/^  or: //p' | head -1)
[ $rc -eq 1 ] && echo "$first" | grep -qF "the checkpoint given (--checkpoint), loaded after step 2: ln1.w[3]'s master is $was in the run straight, $is in the checkpoint (bound 0: bit for bit)" &&
  echo "$rep" | grep -qF -- "--param resume_at=2 --checkpoint $T/e " && [ "$(cd / && eval "$rep" 2>&1 | grep -m1 "^FINDING")" = "$first" ] ||
  fail "an element changed: $was -> $is: $out"
# the case file names it (absolute); moved beside it as a relative path, it replays from anywhere
n=$((n + 1))
cf=$(ls "$T"/f/*.json 2>/dev/null | head -1)
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); assert c["checkpoint"] == sys.argv[2], c.get("checkpoint"); c["checkpoint"] = "../e"; json.dump(c, open(sys.argv[1], "w"))' "$cf" "$T/e" &&
  [ "$(cd / && "$P" replay "$cf" 2>&1 | grep -c "ln1.w\[3\]'s master is $was in the run straight, $is in the checkpoint")" -eq 1 ] ||
  fail "the case file's checkpoint: $cf"
# the step count on rank 0 (Adam's bias correction): 2 in the run straight
cp -r "$T/s/tp2-dp1" "$T/t"
sed -i '0,/"step":\t"0x1p+1"/s//"step":\t"0x0p+0"/' "$T/t/checkpoint.json"
n=$((n + 1))
out=$("$P" "${S[@]}" --param resume_at=2 --checkpoint "$T/t" 2>&1)
echo "$out" | grep -q "loaded after step 2: the step count of DP replica 0, pipeline stage 0, TP rank 0 is 2 in the run straight, 0 in the checkpoint" ||
  fail "the step count: $out"
# resharding: each run's own state, as a converter from the other layout would write it, goes on
# in the set; two elements swapped by a broken converter are found as loaded
n=$((n + 1))
"$P" "${S[@]}" --param reshard_at=2 --save-checkpoint "$T/r" >/dev/null 2>&1 &&
  [ "$(ls "$T/r" | tr '\n' ' ')" = "tp1-dp1 tp2-dp1 " ] &&
  "$P" "${S[@]}" --param reshard_at=2 --checkpoint "$T/r/tp1-dp1" >/dev/null 2>&1 &&
  "$P" "${S[@]}" --param reshard_at=2 --checkpoint "$T/r/tp2-dp1" >/dev/null 2>&1 || fail "resharded from either layout's checkpoint"
cp -r "$T/r/tp1-dp1" "$T/w"
read -r was is < <($ED "$T/w" 0 master 0 swap:20)
n=$((n + 1))
out=$("$P" "${S[@]}" --param reshard_at=2 --checkpoint "$T/w" 2>&1)
echo "$out" | grep -m1 "^FINDING" | grep -qF "ln1.w[0] (TP=1) after step 2: master $is outside [$was, $was]" &&
  echo "$out" | grep -q "a run went on from the checkpoint given (--checkpoint) after step 2" || fail "a converter's swap: $out"
# misuse and checkpoints that do not fit
expect2 "checkpoint $T/t: saved after step 2, the case loads it after step 1" "$P" "${S[@]}" --param resume_at=1 --checkpoint "$T/t"
expect2 "checkpoint $T/r/tp1-dp1: 2 ranks, TP=2 x PP=2 x DP=1 loading it has 4" "$P" "${S[@]}" --param resume_at=2 --checkpoint "$T/r/tp1-dp1"
expect2 "checkpoint $T/t: 4 ranks: neither layout of the case" "$P" "${S[@]}" --param tied=0 --param reshard_at=2 --checkpoint "$T/t"
expect2 "checkpoint: say the step it was saved after: --param resume_at=K" "$P" "${S[@]}" --checkpoint "$T/t"
expect2 "--checkpoint: checkpoint $T/none: No such file or directory" "$P" "${S[@]}" --param resume_at=2 --checkpoint "$T/none"
expect2 "--checkpoint: checkpoint $T/t/checkpoint.json: not a directory" "$P" "${S[@]}" --param resume_at=2 --checkpoint "$T/t/checkpoint.json"
expect2 "--checkpoint: kernel softmax loads none (tp_diff does)" "$P" run -k softmax --checkpoint "$T/t"
expect2 "checkpoint $T/t: rank 0: tensor param is bf16, the case's is fp16" "$P" "${S[@]}" -t fp16 --param resume_at=2 --checkpoint "$T/t"
expect2 "--save-checkpoint: $T/s already exists" "$P" "${S[@]}" --param resume_at=2 --save-checkpoint "$T/s"
expect2 "--save-checkpoint: $T/none is not a directory precfuzz can write in" "$P" "${S[@]}" --param resume_at=2 --save-checkpoint "$T/none/k"
expect2 "--save-checkpoint keeps one case's checkpoints: give -v and --cases 1" "$P" diff-tp -v megatron --param resume_at=2 --save-checkpoint "$T/n"
expect2 "--save-checkpoint: the case saves none (a round trip does" "$P" "${S[@]}" --save-checkpoint "$T/n"
n=$((n + 1))
[ ! -e "$T/n" ] || fail "a refused --save-checkpoint left $T/n"
rm -f "$T/t/rank-2.safetensors"
expect2 "rank-2.safetensors" "$P" "${S[@]}" --param resume_at=2 --checkpoint "$T/t"

echo "cli_checkpoint: $((n - failed))/$n checks passed"
[ $failed -eq 0 ]
