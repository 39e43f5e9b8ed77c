#!/usr/bin/env bash
# Every test, in stages, with the time of each: unit/property/validation/widget/doctest tests
# (student copies included), nbval re-execution of every notebook, the offline book build
# (warnings are errors), the check that no page loads a remote script or style, and a headless
# Chromium test of the built pages (figures, math and widgets render; no request leaves the site).
# Without Chromium the last stage fails and says so; MLSYSIM_SKIP_BROWSER=1 skips it instead.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONHASHSEED=0
timings=()
report() { echo "=== stage times"; printf '%s\n' "${timings[@]}"; }
trap report EXIT  # the times print even when a stage fails
stage() {
  local name=$1; shift
  local t0=$SECONDS
  echo "=== $name"
  "$@"
  timings+=("$(printf '%-28s %4d s' "$name" $((SECONDS - t0)))")
}
# loadscope: a module's tests stay on one worker, so its module-scoped fixtures (the labs' real runs) run once
stage "unit and property tests" python -m pytest -q -n 2 --dist loadscope -p no:cacheprovider --durations=10
stage "notebooks (nbval)" python -m pytest -q -n 2 --dist loadfile -p no:cacheprovider --nbval \
  --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg notebooks
stage "book build" env MLSYSIM_BOOK_STORED_OUTPUTS=1 bash tools/build_book.sh   # nbval has just run them
stage "offline site check" python tools/check_site.py _build/html
stage "browser test" env MLSYSIM_SITE=_build/html python -m pytest -q -p no:cacheprovider \
  tests/test_site_browser.py
