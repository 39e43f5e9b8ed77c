"""The site's sources: configuration, table of contents, glossary, API pages and the offline check.

These run without building the site; tests/test_site_browser.py checks the built pages.
"""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC_TEXT = (ROOT / "_toc.yml").read_text()


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


check_site = _load("check_site", ROOT / "tools" / "check_site.py")
course_site = _load("course_site", ROOT / "book" / "_ext" / "course_site.py")


def _toc_files() -> list[str]:
    """Files listed in _toc.yml, commented lines excluded."""
    toc = yaml.safe_load(TOC_TEXT)
    found = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                found.append(e["file"])
            walk(e.get("sections"))
            walk(e.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return found


# --- the offline check itself ---------------------------------------------------------------------

@pytest.mark.parametrize("tag, remote", [
    ('<script src="https://cdn.example.org/x.js"></script>', True),
    ('<script src="//cdn.example.org/x.js"></script>', True),
    ('<link rel="stylesheet" href="https://fonts.example.org/a.css">', True),
    ('<img src="http://example.org/a.png">', True),
    ('<script src="../_static/vendor/require.js"></script>', False),
    ('<link rel="canonical" href="https://example.org/page.html">', False),
    ('<a href="https://mybinder.org/v2/gh/x/y/main">Binder</a>', False),
    ('<script>const URL = "https://unpkg.com/x.js"</script>', False),
])
def test_remote_loads_are_found_and_links_are_not(tag, remote):
    assert bool(check_site.remote_loads(f"<html><head>{tag}</head></html>")) is remote


def test_check_site_fails_on_a_remote_script_and_passes_without(tmp_path, capsys):
    (tmp_path / "a.html").write_text('<script src="https://cdn.example.org/x.js"></script>')
    assert check_site.main(str(tmp_path)) == 1
    (tmp_path / "a.html").write_text('<script src="x.js"></script><a href="https://example.org">x</a>')
    assert check_site.main(str(tmp_path)) == 0
    (tmp_path / "s.css").write_text("@font-face { src: url(https://fonts.example.org/f.woff2) }")
    assert check_site.main(str(tmp_path)) == 1
    assert "remote" in capsys.readouterr().out


# --- configuration --------------------------------------------------------------------------------

def test_repository_url_is_one_setting_and_launch_buttons_use_it():
    urls = re.findall(r"https?://(?:github|gitlab|bitbucket)\.(?:com|org)/[^\s\"']+", (ROOT / "_config.yml").read_text())
    assert urls == [CONFIG["repository"]["url"]], "the repository URL must appear once, under repository: url:"
    assert CONFIG["launch_buttons"]["binderhub_url"] and CONFIG["launch_buttons"]["colab_url"]
    assert CONFIG["html"]["use_download_button"] is True


def test_site_loads_math_and_widgets_from_its_own_files():
    cfg = CONFIG["sphinx"]["config"]
    assert not re.match(r"(https?:)?//", cfg["mathjax_path"])
    scripts = list(cfg["nb_ipywidgets_js"])
    assert scripts == ["vendor/require.js", "vendor/widgets-offline.js", "vendor/embed-amd.js"]
    build = (ROOT / "tools" / "build_book.sh").read_text()
    assert "widgets-offline.js" in build and (ROOT / "book" / "assets" / "widgets-offline.js").exists()


def test_build_fails_on_warnings_and_executes_every_page():
    build = (ROOT / "tools" / "build_book.sh").read_text()
    assert "-W" in build and "-n" in build and "--all" in build
    assert CONFIG["execute"]["execute_notebooks"] == "force" and CONFIG["execute"]["timeout"] > 0


def test_the_test_build_renders_stored_outputs_only_after_nbval_compared_them():
    """tools/test.sh builds the site from the chapters' stored outputs, so those outputs must be the
    ones nbval has just compared: the build comes after the nbval stage, and every stored notebook was
    executed top to bottom in one run (its figures from the same run as the text nbval checks)."""
    test_sh = (ROOT / "tools" / "test.sh").read_text()
    assert test_sh.index("--nbval") < test_sh.index("MLSYSIM_BOOK_STORED_OUTPUTS=1 bash tools/build_book.sh")
    assert "MLSYSIM_BOOK_STORED_OUTPUTS" in (ROOT / "tools" / "build_book.sh").read_text()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        counts = [c["execution_count"] for c in cells if c["cell_type"] == "code"]
        assert counts == list(range(1, len(counts) + 1)), f"{path.name}: execute it again, top to bottom"


def test_npm_lockfile_names_no_registry_host():
    lock = (ROOT / "book" / "assets" / "package-lock.json").read_text()
    assert "registry.npmjs.org" not in lock and '"resolved"' not in lock


# --- table of contents ----------------------------------------------------------------------------

def test_every_toc_entry_exists():
    for f in _toc_files():
        assert any((ROOT / f"{f}{ext}").exists() for ext in (".md", ".ipynb")), f"_toc.yml lists missing {f}"


def test_every_notebook_and_book_page_is_in_the_toc():
    listed = set(_toc_files())
    pages = [p.relative_to(ROOT).with_suffix("").as_posix()
             for p in [*ROOT.glob("notebooks/[0-9][0-9]_*.ipynb"), *ROOT.glob("book/*.md"), *ROOT.glob("book/api/*.md")]]
    missing = sorted(set(pages) - listed)
    assert not missing, f"not in _toc.yml (so not on the site): {missing}"


# --- glossary, symbols, API -----------------------------------------------------------------------

GLOSSARY = (ROOT / "book" / "glossary.md").read_text()
REQUIRED_TERMS = ["Roofline", "Arithmetic intensity", "Ridge point", "TTFT", "ITL", "KV cache", "MFU", "HFU",
                  "ZeRO", "Pipeline bubble", "Goodput", "MTBF", "PUE", "Prefill", "Decode", "All-reduce",
                  "Tensor parallelism", "Pipeline parallelism", "Data parallelism", "Young interval"]


def _glossary_terms() -> set[str]:
    body = GLOSSARY.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    return {line.strip().lower() for line in body.split("\n") if line and not line.startswith((" ", ":"))}


def test_glossary_defines_the_course_terms():
    terms = _glossary_terms()
    assert not [t for t in REQUIRED_TERMS if t.lower() not in terms]


def test_glossary_cross_references_resolve_within_the_glossary():
    terms = _glossary_terms()
    for ref in re.findall(r"\{term\}`([^`]+)`", GLOSSARY + (ROOT / "book" / "symbols.md").read_text()):
        target = re.sub(r".*<(.+)>$", r"\1", ref).lower()
        assert target in terms, f"{{term}}`{ref}` has no glossary entry"


def test_api_reference_covers_every_module():
    modules = course_site.other_modules(ROOT / "mlsysim", set())   # and each subpackage's modules
    explicit = course_site.documented_modules(ROOT / "book" / "api")
    assert {"mlsysim.lab.pytorch", "mlsysim.lab.distributed"} <= explicit
    assert "mlsysim.roofline" in modules and "mlsysim.units" in modules
    missing = {m for m in explicit - set(modules)                  # deeper modules: their files
               if not (ROOT / Path(*m.split("."))).with_suffix(".py").exists()}
    assert not missing, f"API pages name modules that do not exist: {missing}"
    assert "mlsysim-other-modules" in (ROOT / "book" / "api" / "solvers.md").read_text()


def test_other_modules_follow_the_package_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .zeta import a\nfrom .alpha import b\n")
    for name in ("zeta", "alpha", "beta", "_private"):
        (pkg / f"{name}.py").write_text("")
    assert course_site.package_modules(pkg) == ["mlsysim.zeta", "mlsysim.alpha", "mlsysim.beta"]


def test_other_modules_list_a_subpackage_then_its_modules(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .sub import x\nfrom .alpha import b\n")
    (pkg / "alpha.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .two import x\nfrom .one import y\n")
    for name in ("one", "two", "_private"):
        (pkg / "sub" / f"{name}.py").write_text("")
    assert course_site.other_modules(pkg, {"mlsysim.alpha"}) == ["mlsysim.sub", "mlsysim.sub.two",
                                                                  "mlsysim.sub.one"]


@pytest.mark.parametrize("lines, expected", [
    (["Parameters", "----------", "batch : sequences or images.", "    more text.", "", ">>> 1"],
     ["Parameters", "----------", "batch", "    sequences or images.", "    more text.", "",
      "Examples", "--------", ">>> 1"]),
    (["Parameters", "----------", "a, b : sizes.", "", "Some prose: after."],
     ["Parameters", "----------", "a, b", "    sizes.", "", "", "Some prose: after."]),
    (["Summary: details."], ["Summary: details."]),
    (["Text with a : colon outside a section."], ["Text with a : colon outside a section."]),
])
def test_compact_parameter_lines_become_descriptions(lines, expected):
    course_site._plain_descriptions(None, "function", "f", None, {}, lines)
    assert lines == expected


def test_book_pages_keep_code_lines_short():
    for page in ROOT.glob("book/*.md"):
        inside = False
        for n, line in enumerate(page.read_text().split("\n"), 1):
            if line.startswith("```{code-cell}"):
                inside = True
            elif line.startswith("```"):
                inside = False
            elif inside:
                assert len(line) <= 90, f"{page.name}:{n} is {len(line)} characters (limit 90)"


def test_build_executes_pages_with_the_sliced_kernel_client(monkeypatch, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    executors = pytest.importorskip("jupyter_cache.executors.utils")
    monkeypatch.setattr(executors, "executenb", executors.executenb)  # restored after the test

    class App:
        def connect(self, *a, **k):
            pass

        def add_directive(self, *a, **k):
            pass

        def add_css_file(self, name, **k):
            css.append(name)

    import mlsysim.assign
    made, css = [], []
    real = mlsysim.assign.notebook_client
    monkeypatch.setattr(mlsysim.assign, "notebook_client", lambda *a, **k: made.append(a) or real(*a, **k))
    course_site.setup(App())
    assert executors.executenb is course_site._execute
    assert css == ["course_site.css"] and (ROOT / "book" / "_ext" / "static" / "course_site.css").is_file()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    result = executors.single_nb_execution(nb, cwd=str(tmp_path), timeout=60, allow_errors=False)
    assert result.err is None and nb.cells[0].outputs[0]["text"] == "42\n"
    assert len(made) == 1


@pytest.mark.parametrize("target, expected", [
    ("ms.roofline", "mlsysim.roofline.roofline"),          # the function, not ms.plots.roofline
    ("mlsysim.table", "mlsysim.tables.table"),
    ("Hardware", "mlsysim.systems.Hardware"),
    ("~mlsysim.roofline.Roofline", None),                   # full names are Sphinx's own business
    ("mlsysim.serving.decode", "mlsysim.serving.phases.decode"),   # re-exported by its package
    ("roofline", None),                                     # ambiguous: function and plot
    ("nothing_like_this", None),
])
def test_short_references_resolve_to_one_object(target, expected):
    objects = {"mlsysim.roofline.roofline": 1, "mlsysim.plots.roofline": 1, "mlsysim.tables.table": 1,
               "mlsysim.systems.Hardware": 1, "mlsysim.serving.phases.decode": 1}
    assert course_site.resolve_short(target, objects) == expected


def test_absolute_value_bars_are_escaped_but_literals_and_line_blocks_are_not():
    lines = ["Largest |one-sided elasticity| first.", "Code ``a|b|c`` stays.", "| a line block |",
             "A |link|_ stays."]
    course_site.escape_bars(lines)
    assert lines == ["Largest \\|one-sided elasticity\\| first.", "Code ``a|b|c`` stays.", "| a line block |",
                     "A |link|_ stays."]


def test_undocumented_names_become_text_but_typos_still_fail():
    text = object()
    assert course_site._existing_undocumented({"py:module": "mlsysim.units", "reftarget": "KB"}, text) is text
    assert course_site._existing_undocumented({"py:module": "mlsysim.units", "reftarget": "KBB"}, text) is None
    assert course_site._existing_undocumented({"py:module": "numpy", "reftarget": "pi"}, text) is None


def test_moved_pages_redirect_to_pages_of_the_toc(tmp_path):
    toc = (ROOT / "_toc.yml").read_text()
    for old, new in course_site.MOVED.items():
        assert f"file: {new}\n" in toc and f"file: {old}\n" not in toc
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "06_lab_pytorch.html").write_text("a page lives here again")
    written = course_site.write_redirects(tmp_path)
    assert sorted(p.name for p in written) == ["06_lab_checkpoint.html", "06_lab_distributed.html"]
    page = (tmp_path / "notebooks" / "06_lab_checkpoint.html").read_text()
    assert 'content="0; url=../notebooks/06a_lab_checkpoint.html"' in page and 'href="../notebooks/06a_lab_checkpoint.html"' in page
    assert (tmp_path / "notebooks" / "06_lab_pytorch.html").read_text() == "a page lives here again"
    assert 'url=../../x/y.html"' in course_site.redirect_page("a/b/old", "x/y")


def test_every_bibliography_entry_parses_and_formats():
    """The site's references page formats every entry; one bad field (an unbalanced brace, a '%' that
    LaTeX markup reads as a comment) stops the whole build."""
    database = pytest.importorskip("pybtex.database")
    from pybtex.plugin import find_plugin
    bib = database.parse_file(str(ROOT / "book" / "references.bib"))
    style = find_plugin("pybtex.style.formatting", "plain")()
    formatted = list(style.format_entries(bib.entries.values()))
    assert len(formatted) == len(bib.entries) > 50
    assert all(e.fields.get("title") and e.fields.get("year") for e in bib.entries.values())
