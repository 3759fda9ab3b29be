# What the command-line test scripts share (sourced): counting checks and failures, and the
# check that a command is refused with exit 2 and one line.
n=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

expect2() { # what-the-line-says, then the command's arguments
  local want=$1
  shift
  n=$((n + 1))
  local out rc
  out=$("$@" 2>&1); rc=$?
  [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -qF -- "$want" || fail "$* -> exit $rc: $out"
}
