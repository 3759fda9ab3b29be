#!/usr/bin/env bash
# The Python package: its pytest suite (tests/python: check, judge, the plugin, the Hypothesis
# strategies) on the checkout's code against this build; then `pip install ./python` into a
# fresh virtual environment (numpy, pytest and setuptools from PyPI), where a user's test in
# another directory uses the plugin's fixture with no path set: the package finds this
# checkout's build by itself, the finding fails the test, and its replay line reruns it.
# usage: python_package.sh PRECFUZZ VENV_PYTHON SOURCE_DIR
P=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
py=$2
S=$(cd "$3" && pwd)
if [ ! -x "$py" ] || ! "$py" -c "import pytest, hypothesis, numpy" 2>/dev/null; then
  echo "python_package: skipped (no $py with pytest and hypothesis: scripts/python-env.sh)"
  exit 77
fi
T=$(mktemp -d)
# pip builds in the source tree (python/build, python/precfuzz.egg-info: ignored by git); what
# this test made there goes with it
left=()
for d in "$S/python/build" "$S/python/precfuzz.egg-info"; do [ -e "$d" ] || left+=("$d"); done
trap 'rm -rf "$T" "${left[@]}"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

(cd "$S" && PRECFUZZ_BIN="$P" "$py" -m pytest -q -p no:cacheprovider tests/python) || fail "tests/python"

# a fresh environment, the package installed as a user installs it
"$py" -m venv "$T/v" || { echo "FAIL: python -m venv"; exit 1; }
"$T/v/bin/python" -m pip install -q --disable-pip-version-check "$S/python" numpy "pytest==9.2.0" >"$T/pip.log" 2>&1 ||
  { cat "$T/pip.log"; echo "FAIL: pip install ./python (PyPI reachable?)"; exit 1; }
mkdir "$T/user" && cp "$S/tests/python/kernels.py" "$T/user/" && cat >"$T/user/test_mine.py" <<'PY'
from kernels import softmax_sum_in_storage as my_softmax  # sums in fp16: loses ulps over 256 columns

def test_my_softmax(precfuzz):
    precfuzz.check(my_softmax, op="softmax", like="safe", dtypes=["fp16"], cases=3, params={"mask": "none"},
                   variant="py-my_softmax")
PY
out=$(cd "$T/user" && env -u PRECFUZZ_BIN PATH=/usr/bin:/bin "$T/v/bin/python" -m pytest -q -p no:cacheprovider 2>&1)
case "$out" in *"1 failed"*"FINDING softmax/py-my_softmax fp16/fp32"*|*"FINDING softmax/py-my_softmax fp16/fp32"*"1 failed"*) ;;
*) fail "the installed plugin did not fail the user's test with the finding: $(echo "$out" | tail -5)" ;; esac
line=$(echo "$out" | grep -m1 -o 'reproduce with: cd .*' | sed 's/^reproduce with: //')
[ -n "$line" ] || fail "no replay line"
again=$(cd / && env -u PRECFUZZ_BIN PATH=/usr/bin:/bin bash -c "$line" 2>&1)
case "$again" in *"1 failed"*) ;; *) fail "the replay line did not fail the test again: $(echo "$again" | tail -3)" ;; esac
echo "$again" | grep -q "1 cases, 1 findings" || fail "the replay line ran more than its one case: $(echo "$again" | grep -m1 cases)"

echo "python_package: $([ $failed -eq 0 ] && echo passed || echo "$failed failed")"
[ $failed -eq 0 ]
