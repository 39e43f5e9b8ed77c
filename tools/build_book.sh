#!/usr/bin/env bash
# Build the static site into _build/html, offline, with warnings as errors.
# 1. Fetch the widget manager, require.js and MathJax from npm (pinned by book/assets/package-lock.json)
#    and copy the files the pages load into book/_vendor (ignored by git).
# 2. Run Jupyter Book; every notebook is executed and any warning fails the build.
# Without npm the site still builds, loading those scripts from public CDNs (fine for online readers).
# MLSYSIM_BOOK_STORED_OUTPUTS=1 renders the chapters in notebooks/ from their stored outputs instead of
# executing them (the pages in book/ still run): tools/test.sh sets it, because its nbval stage has just
# executed every notebook and compared its outputs with the stored ones.
set -euo pipefail
cd "$(dirname "$0")/.."
vendor=book/_vendor/vendor
config=_config.yml
offline=1
if command -v npm >/dev/null 2>&1; then
  (cd book/assets && npm ci --no-progress --ignore-scripts --loglevel=error)
  rm -rf book/_vendor && mkdir -p "$vendor/mathjax/output/chtml"
  cp book/assets/node_modules/requirejs/require.js book/assets/widgets-offline.js "$vendor/"
  cp -r book/assets/node_modules/@jupyter-widgets/html-manager/dist/. "$vendor/"
  rm -f "$vendor"/*.map
  cp book/assets/node_modules/mathjax/es5/tex-mml-chtml.js "$vendor/mathjax/"
  cp -r book/assets/node_modules/mathjax/es5/output/chtml/fonts "$vendor/mathjax/output/chtml/"
else
  echo "build_book: npm not found - offline assets skipped; the site will load MathJax and widgets from CDNs" >&2
  offline=0
fi
stored=${MLSYSIM_BOOK_STORED_OUTPUTS:-0}
if [ "$offline" = 0 ] || [ "$stored" = 1 ]; then
  config=$(mktemp --suffix=.yml)
  trap 'rm -f "$config"' EXIT
  python - "$config" "$offline" "$stored" <<'PY'
import os, sys, yaml
out, offline, stored = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
cfg = yaml.safe_load(open("_config.yml"))
if not offline:
    for key in ("html_static_path", "mathjax_path", "nb_ipywidgets_js"):
        cfg["sphinx"]["config"].pop(key, None)
if stored:
    cfg["execute"]["exclude_patterns"] = ["notebooks/*"]
for name, path in cfg["sphinx"].get("local_extensions", {}).items():  # paths are relative to the config
    cfg["sphinx"]["local_extensions"][name] = os.path.abspath(path)
yaml.safe_dump(cfg, open(out, "w"), sort_keys=False)   # the scripts load in their order
PY
  if [ "$stored" = 1 ]; then
    echo "build_book: the chapters in notebooks/ rendered from their stored outputs" >&2
  fi
fi
jupyter-book build --all -W -n --keep-going --config "$config" .
