#!/usr/bin/env bash
# Every test, in stages, with the time of each: unit/property/validation/widget/doctest tests,
# nbval re-execution of every notebook, the offline book build (warnings are errors) and the
# check that no page loads a remote script or style.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONHASHSEED=0
timings=()
stage() {
  local name=$1; shift
  local t0=$SECONDS
  echo "=== $name"
  "$@"
  timings+=("$(printf '%-28s %4d s' "$name" $((SECONDS - t0)))")
}
stage "unit and property tests" python -m pytest -q -n 2 -p no:cacheprovider
stage "notebooks (nbval)" python -m pytest -q -n 2 --dist loadfile -p no:cacheprovider --nbval \
  --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg notebooks
stage "book build" bash tools/build_book.sh
stage "offline site check" python tools/check_site.py _build/html
echo "=== stage times"
printf '%s\n' "${timings[@]}"
