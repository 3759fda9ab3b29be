#!/usr/bin/env bash
# Opens the precision report in headless Chromium, fails on any console message or resource
# that could not load (the page must open offline, with no script and no external asset), and
# writes screenshots of its top (the summary) and of the whole page.
#   scripts/report-screenshot.sh [REPORT.html] [OUTDIR]
# Defaults: build/reports/precision-report.html, build/reports/. Installs Chromium (Debian's
# chromium package) through scripts/install-deps.sh --chromium when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
report=${1:-build/reports/precision-report.html}
outdir=${2:-build/reports}
[ -f "$report" ] || { echo "report-screenshot: no report at $report (run make report)" >&2; exit 2; }
scripts/install-deps.sh --chromium --check 2>/dev/null || scripts/install-deps.sh --chromium
mkdir -p "$outdir"
url="file://$(readlink -f "$report")"
log="$outdir/chromium.log"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
run() { # run ARGS...: headless Chromium with logging of console messages
  chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
    --no-first-run --disable-extensions --enable-logging=stderr --v=0 "$@" "$url" 2>>"$log"
}
: >"$log"
run --window-size=1400,1000 --screenshot="$outdir/precision-report-top.png" >/dev/null
run --window-size=1400,9000 --screenshot="$outdir/precision-report-full.png" >/dev/null
run --dump-dom >"$outdir/precision-report.dom.html"
if grep -E 'CONSOLE|Failed to load resource|ERR_FILE_NOT_FOUND|Uncaught' "$log"; then
  echo "report-screenshot: the page logged console messages or failed loads (above; $log)" >&2
  exit 1
fi
# the DOM Chromium built has the report's tables and plots
grep -q '<svg' "$outdir/precision-report.dom.html" || { echo "report-screenshot: no SVG in the rendered page" >&2; exit 1; }
grep -q 'id="summary"' "$outdir/precision-report.dom.html" || { echo "report-screenshot: no summary in the rendered page" >&2; exit 1; }
echo "$outdir/precision-report-top.png"
echo "$outdir/precision-report-full.png"
