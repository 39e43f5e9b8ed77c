"""Small Sphinx adjustments for the course site (Jupyter Book 1 loads this from _config.yml).

1. Jupyter Book 1 runs the set-up of sphinx-thebe and sphinx-togglebutton twice, so every page
   declared ``const THEBE_JS_URL`` twice: a JavaScript SyntaxError. Identical scripts are kept once.
2. The package's docstrings list parameters compactly as ``name : description`` and often open
   with ``Summary: details``. Napoleon would read the text after ``name :`` as a type (rewritten
   into a plain description before napoleon runs) and the text before the first colon of a
   property's docstring as its type (the docstring is restored after napoleon ran).
3. A short cross-reference such as ``:class:`Hardware``` or ``{py:func}`ms.roofline``` resolves
   to the one ``mlsysim`` object of that name, so docstrings and notebooks need not spell out
   the module it comes from.
4. Pages are executed with :func:`mlsysim.assign.notebook_client`, whose kernel client does not
   sleep through an execute reply when widgets are involved (jupyter/nbclient#312): with the
   stock client, about one build in two spent the whole cell timeout on one widget cell.
5. Vertical bars in docstrings mean absolute values (``|elasticity|``), never reST substitutions:
   they are escaped. A reference to a module-level name that exists but has no docstring of its
   own (``:data:`SPECS```) stays plain text instead of failing the build; a name that does not
   exist still fails it.
6. ``.. mlsysim-other-modules::`` documents every module of the package that no page of
   book/api names in an ``automodule`` line, in the order of the imports in
   mlsysim/__init__.py: a new solver module appears in the API reference without any edit. A
   subpackage split by concept (``mlsysim.serving``) is followed by its modules.
7. ``static/course_site.css``: on wide screens a wider page, so that code cells and printed tables
   scroll sideways less.
8. Pages that moved keep their old address: for each entry of :data:`MOVED` the build writes a small
   page at the old address that sends the reader on to the new one (an HTML refresh, a canonical
   link and a plain link for a reader whose browser does not follow the refresh).
"""
import pkgutil
import re
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

_SECTION = re.compile(r"^\s*(Parameters|Other Parameters|Returns|Yields|Raises|Attributes)\s*$")
_FIELD = re.compile(r"^(\s*)([A-Za-z_*][\w*]*(?:\s*,\s*[A-Za-z_*][\w*]*)*) : (.+)$")


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts, seen, kept = context.get("script_files") or [], set(), []
    for s in scripts:
        # the second copy of an inline script carries filename "" instead of None
        key = (str(getattr(s, "filename", s) or ""), repr(sorted((getattr(s, "attributes", None) or {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(s)
    if scripts:
        scripts[:] = kept  # in place: the builder keeps adding page scripts to this very list


def _restore_property_docstrings(app, what, name, obj, options, lines):
    """After napoleon: a property's 'Summary: details' was split into a type and a text; undo that."""
    if what in ("attribute", "property", "data") and any(line.startswith(":type: ") for line in lines):
        from sphinx.util.docstrings import prepare_docstring
        from sphinx.util.inspect import getdoc
        doc = getdoc(getattr(obj, "fget", obj))
        if doc:
            lines[:] = prepare_docstring(doc)


def _plain_descriptions(app, what, name, obj, options, lines):
    out, in_section, i = [], False, 0
    while i < len(lines):
        line = lines[i]
        if _SECTION.match(line) and i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}:
            in_section = True
            out += [line, lines[i + 1]]
            i += 2
            continue
        m = _FIELD.match(line) if in_section else None
        if m:
            out += [m.group(1) + m.group(2), m.group(1) + "    " + m.group(3)]
        else:
            out.append(line)
            if in_section and not line.strip() and i + 1 < len(lines) and lines[i + 1].strip() and \
                    not lines[i + 1].startswith((" ", "\t")) and not _FIELD.match(lines[i + 1]) and \
                    not _SECTION.match(lines[i + 1]):
                # napoleon would read what follows as more fields: end the section explicitly
                in_section = False
                out += ["Examples", "--------"] if lines[i + 1].startswith(">>>") else [""]
        i += 1
    lines[:] = out


def resolve_short(target: str, objects) -> str | None:
    """The documented full name for a short mlsysim reference, or None.

    ``ms.X`` / ``mlsysim.X`` name what the package exports at its top level (``ms.roofline`` is
    the function, not the plot of the same name), ``mlsysim.serving.X`` what a subpackage
    re-exports from the module that defines it; a bare ``X`` must name one object only.
    """
    target = target.lstrip("~.")
    parts = target.split(".")
    if len(parts) >= 2 and parts[0] in ("ms", "mlsysim"):
        import mlsysim
        obj = mlsysim
        for name in parts[1:]:
            obj = getattr(obj, name, None)
        full = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
        if full in objects:
            return full
        if len(parts) > 2:
            return None
        target = parts[1]
    if not re.fullmatch(r"[A-Za-z_]\w*", target):
        return None
    hits = [full for full in objects if full.startswith("mlsysim.") and full.rsplit(".", 1)[-1] == target]
    return hits[0] if len(hits) == 1 else None


_BARS = re.compile(r"(?<![\\`|\w])\|([^|`\n]+?)\|(?![`|_\w])")


def escape_bars(lines: list[str]) -> None:
    """Escape ``|x|`` (absolute values) outside inline literals; lines starting with ``|`` stay."""
    for i, line in enumerate(lines):
        if line.lstrip().startswith("|"):
            continue
        parts = re.split(r"(``.*?``)", line)
        lines[i] = "".join(part if part.startswith("``") else _BARS.sub(r"\\|\1\\|", part) for part in parts)


def _escape_bars(app, what, name, obj, options, lines):
    escape_bars(lines)


def _short_python_refs(app, env, node, contnode):
    if node.get("refdomain") != "py" or node.get("reftype") not in ("class", "func", "meth", "attr", "obj",
                                                                      "data", "exc"):
        return None
    domain = env.get_domain("py")
    full = resolve_short(node.get("reftarget", ""), domain.objects)
    if full is None:
        return _existing_undocumented(node, contnode)
    from sphinx.util.nodes import make_refnode
    obj = domain.objects[full]
    return make_refnode(app.builder, node["refdoc"], obj.docname, obj.node_id, contnode, full)


def _existing_undocumented(node, contnode):
    """Plain text for a name that its module defines but the API pages do not document."""
    module, target = node.get("py:module") or "", node.get("reftarget", "").lstrip("~.")
    if not module.startswith("mlsysim") or not re.fullmatch(r"[A-Za-z_]\w*", target):
        return None
    import importlib
    try:
        return contnode if hasattr(importlib.import_module(module), target) else None
    except ImportError:
        return None


def package_modules(package_dir: Path, prefix: str = "mlsysim") -> list[str]:
    """Public modules of mlsysim, ordered as mlsysim/__init__.py imports them, then by name."""
    names = [m.name for m in pkgutil.iter_modules([str(package_dir)]) if not m.name.startswith("_")]
    init = (package_dir / "__init__.py").read_text(encoding="utf-8")
    # eager "from .x import" lines, then the entries of a table of lazily loaded modules ('    "x": (')
    found = re.findall(r'^(?:from \.(\w+) import|    "(\w+)": \()', init, re.MULTILINE)
    order = {n: i for i, n in enumerate(a or b for a, b in found)}
    return [f"{prefix}.{n}" for n in sorted(names, key=lambda n: (order.get(n, len(order)), n))]


def other_modules(package_dir: Path, documented: set[str]) -> list[str]:
    """Modules no API page names, in import order; a subpackage is followed by its own modules."""
    out = []
    for m in package_modules(package_dir):
        if m in documented:
            continue
        out.append(m)
        sub = package_dir / m.rsplit(".", 1)[-1]
        if sub.is_dir():
            out += [s for s in package_modules(sub, m) if s not in documented]
    return out


def documented_modules(api_dir: Path) -> set[str]:
    """Modules named in an ``automodule`` line of the API pages."""
    return {m for page in api_dir.glob("*.md")
            for m in re.findall(r"automodule::\s+(mlsysim(?:\.\w+)+)", page.read_text(encoding="utf-8"))}


class OtherModules(SphinxDirective):
    """Document every mlsysim module that no API page lists explicitly."""

    def run(self):
        import mlsysim
        here = Path(self.env.srcdir) / Path(self.env.docname).parent
        self.env.note_dependency(str(Path(mlsysim.__file__)))
        others = other_modules(Path(mlsysim.__file__).parent, documented_modules(here))
        text = StringList([f".. automodule:: {m}" if i % 2 == 0 else "" for m in others for i in (0, 1)],
                          source=self.env.docname)
        node = nodes.container()
        self.state.nested_parse(text, self.content_offset, node)
        return node.children


def _execute(nb, cwd=None, km=None, **options):
    """Drop-in for ``nbclient.execute`` (as jupyter-cache calls it for MyST-NB)."""
    from mlsysim.assign import notebook_client
    options.setdefault("kernel_name", "")  # as nbclient: the notebook's own kernelspec
    return notebook_client(nb, cwd or ".", km=km, **options).execute()


# old page -> new page (paths without suffix, relative to the site's root)
MOVED = {
    "notebooks/06_lab_checkpoint": "notebooks/06a_lab_checkpoint",
    "notebooks/06_lab_pytorch": "notebooks/06b_lab_pytorch",
    "notebooks/06_lab_distributed": "notebooks/06c_lab_distributed",
}


def redirect_page(old: str, new: str) -> str:
    """The HTML of a page at ``old`` that sends the reader to ``new`` (both relative to the root)."""
    depth = old.count("/")
    target = "../" * depth + new + ".html"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<title>Moved to {new}</title>\n"
            f"<link rel=\"canonical\" href=\"{target}\">\n"
            f"<meta http-equiv=\"refresh\" content=\"0; url={target}\">\n"
            f"</head><body><p>This page moved to <a href=\"{target}\">{new}</a>.</p></body></html>\n")


def write_redirects(outdir: Path, moved: dict = MOVED) -> list[Path]:
    """Write a redirect page for every moved page whose old address is free; return the paths."""
    written = []
    for old, new in moved.items():
        path = Path(outdir) / f"{old}.html"
        if path.exists():   # a page lives at the old address again: it wins
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(redirect_page(old, new), encoding="utf-8")
        written.append(path)
    return written


def _redirects(app, exception):
    if exception is None and app.builder.format == "html":
        write_redirects(Path(app.outdir))


def _add_static(app):
    app.config.html_static_path.append(str(Path(__file__).parent / "static"))


def setup(app):
    import jupyter_cache.executors.utils as executors
    if getattr(executors, "executenb", None) is not None:
        executors.executenb = _execute
    app.add_directive("mlsysim-other-modules", OtherModules)
    app.connect("builder-inited", _add_static)
    app.add_css_file("course_site.css")
    app.connect("html-page-context", _dedupe_scripts, priority=300)  # emit_firstresult: run early
    app.connect("autodoc-process-docstring", _escape_bars, priority=90)
    app.connect("autodoc-process-docstring", _plain_descriptions, priority=100)
    app.connect("autodoc-process-docstring", _restore_property_docstrings, priority=900)
    app.connect("missing-reference", _short_python_refs)
    app.connect("build-finished", _redirects)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
