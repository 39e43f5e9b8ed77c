"""Fail if any built page loads a script, style, font or image from another host.

Links to other sites (<a href>) are fine; resources a page *loads* are not, because the site
must work offline. Usage: python tools/check_site.py _build/html
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

TAG = re.compile(r"<(script|link|img|iframe|source|video|audio)\b[^>]*>", re.IGNORECASE)
ATTR = re.compile(r"\b(src|href|rel)\s*=\s*[\"']([^\"']*)[\"']", re.IGNORECASE)
REMOTE = re.compile(r"^(https?:)?//", re.IGNORECASE)
CSS_URL = re.compile(r"url\(\s*[\"']?(https?:)?//", re.IGNORECASE)
LOADING_RELS = {"stylesheet", "preload", "modulepreload", "icon", "shortcut", "prefetch"}


def remote_loads(page: str) -> list[str]:
    """Remote URLs that a page would fetch: script/img/iframe sources and loading <link>s."""
    found = []
    for m in TAG.finditer(page):
        tag = m.group(1).lower()
        attrs = {k.lower(): v for k, v in ATTR.findall(m.group(0))}
        url = attrs.get("src") or (attrs.get("href") if tag == "link" else None)
        if not url or not REMOTE.match(url):
            continue
        if tag == "link" and not LOADING_RELS & set(attrs.get("rel", "").lower().split()):
            continue
        found.append(f"<{tag}> {url}")
    return found


def main(root: str) -> int:
    pages = sorted(Path(root).rglob("*.html"))
    if not pages:
        print(f"check_site: no pages under {root}")
        return 1
    bad = {}
    for p in pages:
        hits = remote_loads(p.read_text(encoding="utf-8", errors="replace"))
        if hits:
            bad[p] = hits
    for css in Path(root).rglob("*.css"):
        if CSS_URL.search(css.read_text(encoding="utf-8", errors="replace")):
            bad[css] = ["url() to a remote host"]
    for p, hits in bad.items():
        print(f"{p}: loads {', '.join(sorted(set(hits)))}")
    print(f"check_site: {len(pages)} pages, {len(bad)} with remote resources")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "_build/html"))
