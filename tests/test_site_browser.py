"""The built site in a real browser: figures decode, math typesets, widgets render, nothing remote loads.

Needs the built site: tools/test.sh runs this after the book build with MLSYSIM_SITE=_build/html;
without that variable the module is skipped. Headless Chromium is required: where it is missing
the tests fail and say how to install it, unless MLSYSIM_SKIP_BROWSER=1 says to skip them (for a
machine without a browser; CI installs one in .ci/run).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = os.environ.get("MLSYSIM_SITE")
if not SITE:
    pytest.skip("checks the built site: run after the book build with MLSYSIM_SITE=_build/html "
                "(tools/test.sh does)", allow_module_level=True)
SITE = Path(SITE) if Path(SITE).is_absolute() else ROOT / SITE



def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


check_browser, check_site = _load("check_browser"), _load("check_site")

HOME = SITE / "book" / "intro.html"
NOTEBOOK = SITE / "notebooks" / "00_hello_roofline.html"
ACCURACY = SITE / "book" / "accuracy.html"


def test_site_was_built():
    assert (SITE / "index.html").exists(), f"no site in {SITE}: build it first (bash tools/build_book.sh)"
    assert NOTEBOOK.exists() and HOME.exists() and ACCURACY.exists()


def test_notebook_pages_offer_download_and_launch_links():
    page = NOTEBOOK.read_text(encoding="utf-8")
    assert "_sources/notebooks/00_hello_roofline.ipynb" in page, "no .ipynb download button"
    assert "mybinder.org/v2/" in page and "colab.research.google.com/github/" in page, "no launch buttons"
    assert check_site.remote_loads(page) == [], "launch buttons must be links, not loaded resources"


def test_pages_load_the_course_stylesheet():
    css = SITE / "_static" / "course_site.css"
    assert css.exists() and "max-width" in css.read_text(encoding="utf-8"), "course_site.css not copied"
    for page in (HOME, NOTEBOOK):
        assert 'href="../_static/course_site.css' in page.read_text(encoding="utf-8"), f"{page.name} lacks it"


@pytest.fixture(scope="module")
def browser():
    exe = check_browser.find_chromium()
    if not exe:
        if os.environ.get("MLSYSIM_SKIP_BROWSER") == "1":
            pytest.skip("no chromium; skipped because MLSYSIM_SKIP_BROWSER=1")
        pytest.fail("headless Chromium is needed for the site test but was not found: install it "
                    "(apt-get install chromium) or set CHROMIUM=/path/to/chromium; to skip this check "
                    "on a machine without a browser, set MLSYSIM_SKIP_BROWSER=1", pytrace=False)
    with check_browser.Browser(exe) as b:
        yield b


@pytest.fixture(scope="module")
def reports(browser):
    return {page: check_browser.inspect(browser, page) for page in (HOME, NOTEBOOK, ACCURACY)}


@pytest.mark.parametrize("page", [HOME, NOTEBOOK, ACCURACY], ids=lambda p: p.stem)
def test_page_renders_offline_without_errors(reports, page):
    r = reports[page]
    assert r["loaded"], f"{page.name} did not load"
    assert r["remote_requests"] == [], f"{page.name} requested other hosts: {r['remote_requests']}"
    assert r["js_errors"] == [], f"{page.name} raised JavaScript errors: {r['js_errors']}"
    assert r["broken_images"] == [], f"{page.name} has images that did not load: {r['broken_images']}"


@pytest.mark.parametrize("page", [HOME, NOTEBOOK, ACCURACY], ids=lambda p: p.stem)
def test_figures_decode(reports, page):
    r = reports[page]
    assert r["output_figures"] >= 1, f"{page.name}: no figure with decoded pixels ({r})"
    assert r["images_decoded"] == r["images"]


def test_notebook_widgets_render_from_saved_state(reports):
    r = reports[NOTEBOOK]
    assert r["widget_state"] == 1 and r["widget_views"] >= 1
    assert r["widgets_rendered"] >= 3 and r["sliders"] >= 1, f"widgets did not render: {r}"


@pytest.mark.parametrize("page", [NOTEBOOK, ACCURACY], ids=lambda p: p.stem)
def test_math_is_typeset(reports, page):
    r = reports[page]
    assert r["math_sources"] >= 1 and r["math_rendered"] >= 1, f"{page.name}: math not typeset ({r})"
