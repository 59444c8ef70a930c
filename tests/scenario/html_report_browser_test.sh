#!/usr/bin/env bash
# The HTML reports in a real headless browser (Debian's chromium): `spmdsim run --html` of a model scenario and
# `spmdsim plan --html` load without a script error, the script ran (it adds <div id="report-ready"
# data-figures="N">), every figure is in the DOM, a Ctrl + wheel step zooms the timeline, and a screenshot of each
# page is left in OUT_DIR.
#
#   tests/scenario/html_report_browser_test.sh SPMDSIM SOURCE_DIR OUT_DIR
#
# Exit 0 pass, 1 fail, 77 skipped: no chromium (scripts/install-deps.sh installs it; ctest reports the test as
# skipped, with this message, not as passed).
set -euo pipefail
spmdsim="$1"
source_dir="$2"
out="$3"

browser=""
for candidate in chromium chromium-browser google-chrome; do
  if command -v "$candidate" >/dev/null 2>&1; then
    browser="$(command -v "$candidate")"
    break
  fi
done
if [ -z "$browser" ]; then
  echo "SKIPPED: no chromium on PATH; install it with scripts/install-deps.sh (Debian package chromium)"
  exit 77
fi

rm -rf "$out"
mkdir -p "$out"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The pages: a Llama-2-70B-shaped model on 32 H100 (TP 8 + SP, PP 2, DP 2), and its plan on the same machine.
"$spmdsim" run --abstract --quiet --html "$out/run.html" "$source_dir/scenarios/llama-gqa-dgx-h100-32.yaml" ||
  fail "spmdsim run --html"
"$spmdsim" plan "$source_dir/scenarios/llama-gqa-dgx-h100-32.yaml" --no-placement --top 5 \
  --threads 2 --write '' --html "$out/plan.html" >"$out/plan.txt" || fail "spmdsim plan --html"

# One browser run per page and output; its own profile directory, so runs never share state.
browse() {
  timeout 120 "$browser" --headless --disable-gpu --no-sandbox --hide-scrollbars --user-data-dir="$out/profile" \
    --virtual-time-budget=5000 "$@" 2>>"$out/browser.log"
}

check_page() {
  local page="$1" want_figures="$2"
  shift 2
  # #self-test: the page's script also zooms its first timeline once (Ctrl + wheel, 1.25x) and records the
  # transform it set.
  browse --dump-dom "file://$out/$page.html#self-test" >"$out/$page.dom.html" ||
    fail "$page: the browser failed (browser.log)"
  grep -q 'id="report-error"' "$out/$page.dom.html" &&
    fail "$page: script error: $(grep -o 'id="report-error">[^<]*' "$out/$page.dom.html")"
  grep -q "id=\"report-ready\" data-figures=\"$want_figures\"" "$out/$page.dom.html" ||
    fail "$page: no <div id=\"report-ready\" data-figures=\"$want_figures\"> (did the script run?)"
  local scale
  scale="$(grep -o 'data-zoom="matrix([0-9.e+-]*' "$out/$page.dom.html" | sed 's/.*matrix(//')"
  awk -v k="${scale:-0}" 'BEGIN { exit !(k > 1.25 - 1e-9 && k < 1.25 + 1e-9) }' ||
    fail "$page: a Ctrl + wheel step zoomed the timeline by '$scale', not 1.25"
  for element in "$@"; do
    grep -q "$element" "$out/$page.dom.html" || fail "$page: no $element in the DOM"
  done
  browse --window-size=1280,2600 --screenshot="$out/$page.png" "file://$out/$page.html" >/dev/null ||
    fail "$page: no screenshot"
  [ "$(head -c 4 "$out/$page.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "$page: $page.png is not a PNG"
  echo "$page: loaded, $want_figures figures, screenshot $out/$page.png"
}

check_page run 3 '<svg class="figure timeline' '<rect class="block s-forward' '<rect class="block s-bubble' \
  '<svg class="figure bars memory' '<line class="limit"' '<svg class="figure bars communication'
check_page plan 4 '<svg class="figure scatter' '<circle class="point winner best"' '<circle class="point"' \
  '<svg class="figure timeline'
