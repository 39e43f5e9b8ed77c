"""Small Sphinx adjustments for the course site (Jupyter Book 1 loads this from _config.yml).

1. Jupyter Book 1 runs the set-up of sphinx-thebe and sphinx-togglebutton twice, so every page
   declared ``const THEBE_JS_URL`` twice: a JavaScript SyntaxError. Identical scripts are kept once.
2. The package's docstrings list parameters compactly as ``name : description`` and often open
   with ``Summary: details``. Napoleon would read the text after ``name :`` as a type (rewritten
   into a plain description before napoleon runs) and the text before the first colon of a
   property's docstring as its type (the docstring is restored after napoleon ran).
3. A short cross-reference such as ``:class:`Hardware``` resolves to the one ``mlsysim`` object
   of that name, so a docstring need not spell out the module it comes from.
4. ``.. mlsysim-other-modules::`` documents every module of the package that no page of
   book/api names in an ``automodule`` line, in the order of the imports in
   mlsysim/__init__.py: a new solver module appears in the API reference without any edit.
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


def _short_python_refs(app, env, node, contnode):
    if node.get("refdomain") != "py" or node.get("reftype") not in ("class", "func", "meth", "attr", "obj",
                                                                      "data", "exc"):
        return None
    target = node.get("reftarget", "").lstrip("~.")
    if target.startswith("mlsysim."):  # e.g. mlsysim.table, re-exported from mlsysim.tables
        target = target.rsplit(".", 1)[-1]
    if not re.fullmatch(r"[A-Za-z_]\w*", target):
        return None
    domain = env.get_domain("py")
    hits = [full for full in domain.objects if full.startswith("mlsysim.") and full.rsplit(".", 1)[-1] == target]
    if len(hits) != 1:
        return None
    from sphinx.util.nodes import make_refnode
    obj = domain.objects[hits[0]]
    return make_refnode(app.builder, node["refdoc"], obj.docname, obj.node_id, contnode, hits[0])


def package_modules(package_dir: Path) -> list[str]:
    """Public modules of mlsysim, ordered as mlsysim/__init__.py imports them, then by name."""
    names = [m.name for m in pkgutil.iter_modules([str(package_dir)]) if not m.name.startswith("_")]
    init = (package_dir / "__init__.py").read_text(encoding="utf-8")
    order = {n: i for i, n in enumerate(re.findall(r"^from \.(\w+) import", init, re.MULTILINE))}
    return [f"mlsysim.{n}" for n in sorted(names, key=lambda n: (order.get(n, len(order)), n))]


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
        others = [m for m in package_modules(Path(mlsysim.__file__).parent) if m not in documented_modules(here)]
        text = StringList([f".. automodule:: {m}" if i % 2 == 0 else "" for m in others for i in (0, 1)],
                          source=self.env.docname)
        node = nodes.container()
        self.state.nested_parse(text, self.content_offset, node)
        return node.children


def setup(app):
    app.add_directive("mlsysim-other-modules", OtherModules)
    app.connect("html-page-context", _dedupe_scripts, priority=300)  # emit_firstresult: run early
    app.connect("autodoc-process-docstring", _plain_descriptions, priority=100)
    app.connect("autodoc-process-docstring", _restore_property_docstrings, priority=900)
    app.connect("missing-reference", _short_python_refs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
