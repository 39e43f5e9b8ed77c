"""Open built pages in headless Chromium and report what really rendered.

    python tools/check_browser.py _build/html/index.html _build/html/notebooks/00_hello_roofline.html

For each page it prints the images that decoded (an <img> whose pixels the browser loaded),
the math MathJax typeset, the widget views the embedded widget state turned into live
controls, any request to another host, and any JavaScript error. It drives Chromium through
the DevTools protocol over a pipe (``--remote-debugging-pipe``), so it needs nothing beyond
the standard library and a ``chromium`` binary. tests/test_site_browser.py asserts on the
same report.
"""
from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--mute-audio",
         "--window-size=1280,1800", "--remote-debugging-pipe"]

# Evaluated in the page: counts of what rendered, as JSON.
PROBE = r"""(() => {
  const imgs = [...document.images];
  const ok = i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0;
  const out = [...document.querySelectorAll('.cell_output img, .output img')];
  return JSON.stringify({
    title: document.title,
    images: imgs.length,
    images_decoded: imgs.filter(ok).length,
    broken_images: imgs.filter(i => i.complete && !ok(i)).map(i => i.getAttribute('src')),
    output_figures: out.filter(ok).length,
    widget_state: document.querySelectorAll('script[type="application/vnd.jupyter.widget-state+json"]').length,
    widget_views: document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length,
    widgets_rendered: document.querySelectorAll('.jupyter-widgets').length,
    sliders: document.querySelectorAll('.widget-slider').length,
    math_sources: document.querySelectorAll('.math, span.math, div.math').length,
    math_rendered: document.querySelectorAll('mjx-container').length,
    links: document.querySelectorAll('a[href]').length,
  });
})()"""


def find_chromium() -> str | None:
    """The Chromium binary: $CHROMIUM, else chromium or chromium-browser on the PATH."""
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """A headless Chromium spoken to over the DevTools pipe (fd 3 in, fd 4 out)."""

    def __init__(self, executable: str):
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # Move the child's ends above any fd the dup2 calls below could clobber.
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        os.close(to_child_r)
        os.close(from_child_w)

        def child_fds():
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self._profile = tempfile.TemporaryDirectory(prefix="mlsysim-chromium-")
        self.proc = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, pass_fds=(3, 4, high_r, high_w),
                                     preexec_fn=child_fds)
        os.close(high_r)
        os.close(high_w)
        self._buffer, self._next_id, self.events = b"", 0, []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict:
        """Send one command and return its result, collecting events that arrive meanwhile."""
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply is None:
                raise TimeoutError(f"no answer from Chromium to {method} within {timeout} s")
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def pump(self, seconds: float) -> None:
        """Collect events for a while."""
        deadline = time.monotonic() + seconds
        while (msg := self._read(deadline)) is not None:
            self.events.append(msg)

    def _read(self, deadline: float) -> dict | None:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
                return None
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe (did it start?)")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (OSError, RuntimeError, TimeoutError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            os.close(fd)
        self._profile.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _ready(stats: dict) -> bool:
    """Everything the page promises has rendered: images decoded, widgets and math drawn."""
    return (stats["images_decoded"] + len(stats["broken_images"]) == stats["images"]
            and (stats["widget_views"] == 0 or stats["widgets_rendered"] > 0)
            and (stats["math_sources"] == 0 or stats["math_rendered"] > 0))


def inspect(browser: Browser, page: Path, settle_s: float = 20.0) -> dict:
    """Load one page in a new tab and report what rendered (see :data:`PROBE`) once it settles."""
    url = page.resolve().as_uri()
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Network", "Runtime", "Log"):
        browser.send(f"{domain}.enable", session=session)
    first_event = len(browser.events)
    browser.send("Page.navigate", {"url": url}, session=session)
    deadline = time.monotonic() + settle_s
    stats, stable_since, last = {}, None, None
    while time.monotonic() < deadline:
        browser.pump(0.25)
        loaded = any(e.get("method") == "Page.loadEventFired" and e.get("sessionId") == session
                     for e in browser.events[first_event:])
        if not loaded:
            continue
        result = browser.send("Runtime.evaluate", {"expression": PROBE, "returnByValue": True}, session=session)
        stats = json.loads(result["result"]["value"])
        if stats != last:
            stable_since, last = time.monotonic(), stats
        elif _ready(stats) and time.monotonic() - stable_since > 1.0:
            break
    mine = [e for e in browser.events[first_event:] if e.get("sessionId") == session]
    requests = [e["params"]["request"]["url"] for e in mine if e.get("method") == "Network.requestWillBeSent"]
    errors = [e["params"]["exceptionDetails"].get("exception", {}).get("description")
              or e["params"]["exceptionDetails"].get("text", "") for e in mine
              if e.get("method") == "Runtime.exceptionThrown"]
    urls = {e["params"]["requestId"]: e["params"]["request"]["url"] for e in mine
            if e.get("method") == "Network.requestWillBeSent"}
    errors += [f"failed to load {urls.get(e['params']['requestId'], '?')}: {e['params'].get('errorText')}"
               for e in mine if e.get("method") == "Network.loadingFailed"]
    errors += [e["params"]["entry"]["text"] for e in mine
               if e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"
               and not e["params"]["entry"]["text"].startswith("Failed to load resource")]
    browser.send("Target.closeTarget", {"targetId": target})
    return {**stats, "page": str(page), "loaded": bool(stats), "ready": bool(stats) and _ready(stats),
            "remote_requests": sorted({u for u in requests if u.split(":", 1)[0] in ("http", "https", "ws", "wss")}),
            "js_errors": errors}


def main(pages: list[str]) -> int:
    exe = find_chromium()
    if not exe:
        print("check_browser: no chromium found (apt-get install chromium, or set CHROMIUM)")
        return 2
    bad = 0
    with Browser(exe) as browser:
        for page in pages:
            t0 = time.monotonic()
            r = inspect(browser, Path(page))
            ok = r["ready"] and not r["remote_requests"] and not r["js_errors"] and not r["broken_images"]
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {page} ({time.monotonic() - t0:.1f} s): "
                  f"images {r.get('images_decoded', 0)}/{r.get('images', 0)} decoded, "
                  f"math {r.get('math_rendered', 0)} rendered, widgets {r.get('widgets_rendered', 0)} rendered "
                  f"({r.get('sliders', 0)} sliders), remote requests {len(r['remote_requests'])}, "
                  f"JS errors {len(r['js_errors'])}")
            for item in r["remote_requests"] + r["js_errors"] + r.get("broken_images", []):
                print(f"     {item}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or ["_build/html/index.html"]))
