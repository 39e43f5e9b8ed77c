"""Find the claims the prose makes and check that each one is asserted or sourced.

    python tools/prose_claims.py [paths...]   # problems only; exit 1 if any
    python tools/prose_claims.py --list       # every flagged or marked sentence with its status
    python tools/prose_claims.py --stats      # counts per file

Without paths it reads notebooks/*.ipynb and book/*.md. A sentence of the prose is *flagged*
when it compares, gives a cause, a tolerance or a percentage (see ``PATTERNS``). A flagged
sentence needs a mark written right after it, invisible on the site and in Jupyter:

    ... reaches only a few per cent of the peak. <!-- claim: decode-gemm-share -->
    ... as Meta reports 38-43 % MFU. <!-- sourced: Llama 3 paper, 2024, Table 4 -->

A ``claim`` id (lowercase words joined by '-', several separated by commas) must appear as the
text ``claim <id>:`` inside an ``assert`` statement: for a notebook, in a code cell at most
``NEAR`` cells before or after the markdown cell; for a book page, in a test under tests/ or in
a ``{code-cell}`` of the page itself. A mark on an unflagged sentence is checked the same way.

Three more rules make a mark mean what it says:

* **Numbers are bound.** Every number a claim-marked sentence states (``15 %``, ``1.4 times``,
  ``twice``, ``half``, ``35 s``, ``1.2 GB``) must appear in the *test* of an assert that quotes one
  of the sentence's claim ids, as a literal (a number, or digits inside a string it compares), in
  the sentence's unit or a decimal multiple of it (15 % as 15 or 0.15; 1.2 GB as 1.2 or 1.2e9).
  Changing the sentence's number without the check, or the check's literal without the sentence,
  fails. Years, and the numbers of tables, figures, sections, notebooks and exercises, are no
  claims; numbers inside names (H100, Llama-3-8B, ZeRO-3) are not read as numbers.
* **One id, one sentence.** A claim id marks one sentence of a file; a second sentence needs an id
  (and an assert) of its own.
* **Sources resolve.** A ``sourced`` mark names bibliography keys of the book's ``.bib`` file
  (several separated by ``;``), each optionally followed by where in the source (``Table 4``):
  ``<!-- sourced: grattafiori2024llama3 Table 4 -->``.
"""
from __future__ import annotations

import argparse
import ast
import json
import math
import re
import sys
import textwrap
import threading
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEAR = 8  # cells either side of a notebook's markdown cell where the asserting code may sit

# --- what makes a sentence a claim -------------------------------------------------------------
PATTERNS = [
    re.compile(r"\b(?!rather\b|other\b)\w+er than\b", re.I),  # faster than, larger than, ...
    re.compile(r"\b(more|less|fewer|worse|better) than\b", re.I),
    re.compile(r"\bbecause\b", re.I),
    re.compile(r"\bwithin\s+(a factor|±|\+/-|\d)", re.I),
    re.compile(r"\d\s*\\?%"),
    re.compile(r"\bper ?cent\b", re.I),
    # multiplicative and comparative words
    re.compile(r"\b\d+(?:\.\d+)?\s*(?:times\b|×)|\b\d+(?:\.\d+)?x\b", re.I),
    re.compile(r"\b(?:twice|half|a third|a quarter|a tenth|doubles?|halves)\b", re.I),
    re.compile(r"\b(?:two|three|four|five|six|seven|eight|nine|ten|a hundred|a thousand) times\b", re.I),
    re.compile(r"\bdominat\w*", re.I),
    re.compile(r"\b(?:largest|smallest|fastest|slowest|best|worst|highest|lowest|longest|shortest|cheapest"
               r"|biggest|greatest|most|least)\b", re.I),
    re.compile(r"\b(?:never|always|only)\b", re.I),
    # causal words
    re.compile(r"\b(?:since|which is why|so that)\b", re.I),
    # a number with a unit
    re.compile(r"(?<![\w.\-])\d[\d,]*(?:\.\d+)?\s+(?:ms|µs|us|s|h|min|days?|years?|[kMGTP]?B(?:/s)?|[kMGTP]?W"
               r"|[kMGTP]?Wh|[kMGTPE]?FLOP(?:/s)?|TOPS|kg|t|°C|GPUs?|nodes?|tokens?)(?![\w/])"),
]
MARK = re.compile(r"<!--\s*(claim|sourced)\s*:(.*?)-->", re.S | re.I)
COMMENT = re.compile(r"<!--.*?-->", re.S)
CLAIM_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


@dataclass(frozen=True)
class Finding:
    """One flagged or marked sentence. ``where`` is 'cell N' (notebook) or 'line N' (page)."""
    file: str
    where: str
    sentence: str
    marks: tuple  # (("claim", "id"), ("sourced", "citation"), ...)
    status: str   # asserted | sourced | unmarked | unasserted | unbound | reused | malformed
    reason: str = ""

    @property
    def problem(self) -> bool:
        return self.status in ("unmarked", "unasserted", "unbound", "reused", "malformed")


# --- markdown -> units (paragraphs, list items, table rows) ------------------------------------
FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})\s*(\{([\w:-]+)\})?\s*(.*)$")
CODE_DIRECTIVES = {"code-cell", "code", "code-block", "sourcecode", "math", "literalinclude",
                   "raw", "eval-rst", "mermaid", "toctree", "include", "image", "csv-table"}
OPTION = re.compile(r"^\s*:[\w-]+:")          # ":tags: [hide-input]" after a directive fence
ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s+")   # a list item starts a unit
RULE = re.compile(r"^\s*([-*_]\s*){3,}$")      # horizontal rule
TABLE_SEP = re.compile(r"^\s*\|?[\s:|-]+\|[\s:|-]*$")


def units(markdown: str) -> list[tuple[int, str]]:
    """Split markdown into (first line number, text) units; code, math blocks and headings go."""
    out, buf, start = [], [], 0
    fences = []  # stack of (fence string, keep content as prose?)
    lines = markdown.split("\n")
    if lines and lines[0].strip() == "---":  # front matter (MyST text notebooks)
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
        lines = [""] * (end + 1) + lines[end + 1:]

    def flush():
        text = " ".join(l.strip() for l in buf).strip()
        if text:
            out.append((start, text))
        buf.clear()

    after_fence = False
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fences and m and m.group(1)[0] == fences[-1][0][0] and len(m.group(1)) >= len(fences[-1][0]) \
                and not m.group(2) and not m.group(4):
            flush()
            fences.pop()
            continue
        if m and (not fences or fences[-1][1]):
            flush()  # opening fence: ``` or ~~~ blocks are code unless they name a prose directive
            name = m.group(3)
            prose = bool(name) and name not in CODE_DIRECTIVES
            fences.append((m.group(1), prose))
            after_fence = True  # its argument (an admonition title) and option lines are no prose
            continue
        if fences and not fences[-1][1]:
            continue
        if after_fence and OPTION.match(line):
            continue
        after_fence = False
        s = line.strip()
        if not s or RULE.match(s) or s == "+++" or re.match(r"^\(.+\)=$", s):
            flush()
        elif s.startswith("#"):  # heading
            flush()
        elif s.startswith("|"):  # a table row is a unit; the separator row is dropped
            flush()
            if not TABLE_SEP.match(s):
                out.append((n, " ; ".join(c.strip() for c in s.strip("|").split("|"))))
        elif ITEM.match(line):
            flush()
            start, buf[:] = n, [ITEM.sub("", line)]
        else:
            if not buf:
                start = n
            buf.append(re.sub(r"^(\s*>)+", "", line))
    flush()
    return out


# --- units -> sentences with their marks -------------------------------------------------------
ABBREV = re.compile(r"\b(e\.g|i\.e|etc|vs|cf|al|approx|Fig|Eq|No|Sec|Ch|ca|resp|U\.S|U\.K)\.$", re.I)
BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]*_]*(\s*\x00\d+\x00)*\s+")  # marks stay with the sentence


def sentences(unit: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """Split a unit into (sentence, marks); a mark belongs to the sentence it follows."""
    comments = []

    def hide(m):  # comments become placeholders so that sentence splitting sees no spaces in them
        comments.append(m.group(0))
        return f"\x00{len(comments) - 1}\x00"

    text = COMMENT.sub(hide, unit)
    pieces, last = [], 0
    for m in BOUNDARY.finditer(text):
        head = text[last:m.start()]
        if ABBREV.search(head.rstrip("\"')]*_")):
            continue
        pieces.append(text[last:m.end()])
        last = m.end()
    pieces.append(text[last:])
    out = []
    for piece in pieces:
        if re.fullmatch(r"\s*(\x00\d+\x00\s*)+", piece) and out:  # a mark after the full stop
            out[-1] += piece
        elif piece.strip():
            out.append(piece)
    restore = lambda s: re.sub(r"\x00(\d+)\x00", lambda m: comments[int(m.group(1))], s)
    return [(restore(s).strip(), marks(restore(s))) for s in out]


def marks(sentence: str) -> list[tuple[str, str]]:
    """The (kind, value) marks in a sentence; a claim mark gives one pair per id."""
    found = []
    for kind, body in MARK.findall(sentence):
        kind = kind.lower()
        values = [v.strip() for v in body.split(",")] if kind == "claim" else [body.strip()]
        found += [(kind, v) for v in values]
    return found


def plain(sentence: str) -> str:
    """The sentence as read: no comments, code, math, link targets, roles, emphasis or tags."""
    s = COMMENT.sub(" ", sentence)
    s = re.sub(r"\$\$.*?\$\$", " ", s)
    s = re.sub(r"(?<![\\$])\$(?=\S)[^$]+?(?<=\S)\$(?!\d)", " ", s)   # $x$, not $2 and $3
    s = re.sub(r"\{[\w:-]+\}`[^`]*`", " ", s)                       # {cite}`x`, {doc}`x`
    s = re.sub(r"``.+?``|`[^`]*`", " ", s)                           # inline code
    s = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", s)                 # [text](target)
    s = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", s)                  # [text][ref]
    s = re.sub(r"<[^>\s][^>]*>", " ", s)                             # html tags, <autolinks>
    s = re.sub(r"\*+|(?<!\w)_+|_+(?!\w)", "", s)                    # emphasis
    return re.sub(r"\s+", " ", s).strip()


def is_flagged(text: str) -> bool:
    """True for a statement (not a question) that matches one of ``PATTERNS``."""
    return not text.rstrip("\"')]* ").endswith("?") and any(p.search(text) for p in PATTERNS)


# --- where claims are asserted -----------------------------------------------------------------
def _parse(code: str) -> ast.Module:
    """``ast.parse``; where CPython 3.11 raises "AST constructor recursion depth mismatch" (a stale
    recursion counter left in this thread by an earlier deep recursion, CPython gh-106905), parse
    again in a new thread, whose counter is fresh."""
    try:
        return ast.parse(code)
    except SystemError:
        out: dict = {}

        def parse() -> None:
            try:
                out["tree"] = ast.parse(code)
            except (SyntaxError, SystemError) as e:
                out["error"] = e
        t = threading.Thread(target=parse)
        t.start()
        t.join()
        if "error" in out:
            raise out["error"]
        return out["tree"]


def asserted_texts(code: str) -> list[str]:
    """Source text of every assert statement in a code cell or file (magics ignored)."""
    code = "\n".join("pass  # " + l if l.lstrip().startswith(("%", "!")) else l
                     for l in code.split("\n"))
    try:
        tree = _parse(code)
    except (SyntaxError, SystemError):  # not Python (or see _parse): the whole text, if it asserts anything
        return [code] if re.search(r"\bassert\b", code) else []
    lines = code.split("\n")
    return ["\n".join(lines[node.lineno - 1:node.end_lineno]) for node in ast.walk(tree)
            if isinstance(node, ast.Assert)]


def is_asserted(claim_id: str, assert_sources: list[str]) -> bool:
    return any(f"claim {claim_id}:" in text for text in assert_sources)


@lru_cache(maxsize=None)
def asserts_under(tests_dir: Path) -> tuple[str, ...]:
    """Assert statements of every Python file under ``tests_dir`` (fixtures left out)."""
    found = []
    for py in sorted(tests_dir.rglob("*.py")):
        if "fixtures" not in py.relative_to(tests_dir).parts:
            found += asserted_texts(py.read_text(encoding="utf-8"))
    return tuple(found)


# --- the numbers a sentence states, the literals an assert checks --------------------------------
WORDS = {"twice": (2,), "half": (0.5, 2), "a third": (1 / 3, 3), "a quarter": (0.25, 4), "a tenth": (0.1, 10),
         "doubles": (2,), "double": (2,), "halves": (0.5, 2), "two": (2,), "three": (3,), "four": (4,),
         "five": (5,), "six": (6,), "seven": (7,), "eight": (8,), "nine": (9,), "ten": (10,),
         "a hundred": (100,), "a thousand": (1000,)}
UNIT = (r"[kMGTPE]?(?:B/s|B|W|Wh|FLOP/s|FLOP)|TOPS|ms|µs|us|ns|s|h|min|days?|years?|kg|t|°C|GPUs?|nodes?"
        r"|tokens?|parameters?")
NUMBER = re.compile(
    r"(?<![\w.\-/§^])(?P<n>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?:\s*(?P<pct>\\?%)|\s*(?P<x>×)|(?P<xx>x)\b|\s+(?P<unit>" + UNIT + r")(?![\w/]))?(?!\w|\.\d|-\d|-bit\b)"
    r"|\b(?P<w>twice|half|a third|a quarter|a tenth|doubles?|halves)\b"
    r"|\b(?P<t>two|three|four|five|six|seven|eight|nine|ten|a hundred|a thousand) times\b", re.I)
REFERENCE = re.compile(r"(?:\b(?:Tables?|Figures?|Fig\.|Sections?|Eqs?\.|notebooks?|chapters?|exercises?|"
                       r"versions?|v|Llama|GPT|Python|PyTorch|torch|CUDA|NCCL|SXM|PCIe|Gen|NVLink|LPDDR|DDR|HBM)"
                       r"|[§#])\s*$", re.I)
SCALES = (1.0, 1e2, 1e-2) + tuple(10.0 ** k for k in (-15, -12, -9, -6, -3, 3, 6, 9, 12, 15))


def stated_numbers(text: str) -> list[tuple[str, tuple[float, ...]]]:
    """(as written, values it may be checked as) of every number ``text`` states: digits (a per cent
    also as a fraction), "twice", "half", "three times"; years and references to tables, figures,
    sections, notebooks and versions are left out."""
    out = []
    for m in NUMBER.finditer(text):
        if m.group("n"):
            if REFERENCE.search(text[:m.start()]):
                continue
            value = float(m.group("n").replace(",", ""))
            year = 1900 <= value <= 2099 and m.group("n").isdigit() and not m.group("pct")
            if year and not text[m.end():m.end() + 1] == "-":
                continue                                  # a year (not "2048-token")
            scaled = tuple(value * k for k in SCALES) if m.group("unit") else (value,)   # 1.2 GB as 1.2e9
            out.append((m.group(0), (value, value / 100) if m.group("pct") else scaled))
        else:
            word = (m.group("w") or m.group("t")).lower()
            out.append((m.group(0), WORDS[word]))
    return out


def checked_literals(assert_source: str) -> set[float]:
    """Numbers in the test of the asserts in ``assert_source``: numeric literals and the digits of
    string literals it compares (an f-string's text included); the assert's message is left out."""
    try:
        tree = _parse(textwrap.dedent(assert_source))
    except (SyntaxError, SystemError):
        return set()
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for n in ast.walk(node.test):
            if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
                found.add(float(n.value))
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                found.update(float(x) for x in re.findall(r"(?<![\w.\-])\d+(?:\.\d+)?(?![\w\-]|\.\d)",
                                                          n.value.replace(",", "")))
    return found


def is_bound(values: tuple[float, ...], literals: set[float]) -> bool:
    """True when a literal equals one of ``values`` (a number with a unit offers its decimal
    multiples, :data:`SCALES`; a per cent its fraction; a bare number or a ratio only itself)."""
    return any(math.isclose(v, lit, rel_tol=1e-9, abs_tol=1e-300) for v in values for lit in literals)


@dataclass(frozen=True)
class CodeCell:
    """What a notebook's code cell can bind a number with: its asserts, the numeric literals of its
    code (the inputs of what it computes) and the numbers its stored output printed."""
    asserts: tuple
    literals: frozenset
    printed: tuple

    @classmethod
    def of(cls, cell: dict) -> "CodeCell":
        code = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        try:
            tree = _parse("\n".join("pass" if l.lstrip().startswith(("%", "!")) else l for l in code.split("\n")))
            literals = frozenset(float(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
                                 and isinstance(n.value, (int, float)) and not isinstance(n.value, bool))
        except (SyntaxError, SystemError):
            literals = frozenset()
        text = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                       for o in cell.get("outputs", []))
        printed = tuple(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?", text.replace(",", "")))
        return cls(tuple(asserted_texts(code)), literals, printed)


def rounds_to(shown: str, values: tuple[float, ...], printed: tuple[str, ...]) -> bool:
    """True when a printed number, rounded to the decimals ``shown`` states, is one of ``values``
    (or a hundred times or a hundredth of one: a fraction printed, a per cent stated). Only a number
    written with two significant digits or more binds this way: "4", "twice" or "a third" would
    match too many printed numbers by chance, and must be checked by an assert's literal."""
    digits = re.search(r"\d[\d,]*(?:\.(\d+))?", shown)
    if not digits or len(digits.group(0).replace(",", "").replace(".", "").lstrip("0")) < 2:
        return False
    decimals = len(digits.group(1) or "")
    return any(math.isclose(round(float(p) * k, decimals), v, rel_tol=1e-9)
               for p in printed for k in (1.0, 100.0, 0.01) for v in values)


def unbound_numbers(sentence: str, claim_asserts: list[str], cells=()) -> list[str]:
    """The numbers ``sentence`` states that neither the tests of the asserts of its claim ids check
    as literals, nor the cells holding those asserts take as inputs or print (rounded as stated)."""
    literals = set().union(*(checked_literals(a) for a in claim_asserts)) if claim_asserts else set()
    theirs = [c for c in cells if set(c.asserts) & set(claim_asserts)]
    literals |= set().union(*(c.literals for c in theirs)) if theirs else set()
    printed = tuple(p for c in theirs for p in c.printed)
    return [shown for shown, values in stated_numbers(plain(sentence))
            if not is_bound(values, literals) and not rounds_to(shown, values, printed)]


# --- the bibliography ----------------------------------------------------------------------------
@lru_cache(maxsize=None)
def bibliography_keys(book_dir: Path = ROOT / "book") -> frozenset:
    """Keys of every entry in the book's .bib files."""
    keys = set()
    for bib in sorted(Path(book_dir).glob("*.bib")):
        keys.update(re.findall(r"^@\w+\s*\{\s*([^,\s]+)\s*,", bib.read_text(encoding="utf-8"), re.M))
    return frozenset(keys)


def unknown_sources(citation: str, keys) -> list[str]:
    """The parts of a ``sourced`` mark (separated by ';') whose first word is no bibliography key."""
    parts = [p.strip() for p in citation.split(";")]
    return [p for p in parts if not p or p.split()[0] not in keys]


# --- where a mark may stand ---------------------------------------------------------------------
def misplaced_marks(markdown: str) -> list[tuple[int, str]]:
    """(line, text) of marks that start a line inside a paragraph. Markdown reads a line that begins
    with ``<!--`` as an HTML block: the paragraph breaks there and the rest of the line after ``-->``
    is passed on as raw HTML, not as prose. A mark belongs after the full stop, on the same line."""
    lines = markdown.split("\n")
    out = []
    for n, line in enumerate(lines):
        if not MARK.match(line.lstrip()):
            continue
        rest = line.split("-->", 1)[1].strip()
        following = lines[n + 1].strip() if n + 1 < len(lines) else ""
        if rest or following:
            out.append((n + 1, line.strip()))
    return out


def misplaced(file: str, where: str, markdown: str) -> list[Finding]:
    reason = "a mark at the start of a line breaks the paragraph; put it after the sentence it marks"
    return [Finding(file, f"{where}, line {n}" if where else f"line {n}", text, (), "malformed", reason)
            for n, text in misplaced_marks(markdown)]


# --- files -> findings -------------------------------------------------------------------------
def judge(file: str, where: str, sentence: str, assert_sources, keys=None, cells=()) -> Finding | None:
    """The finding for one sentence, or None for an unflagged sentence without marks. ``keys``: the
    bibliography's keys (default: those of book/*.bib); ``cells``: the notebook's code cells near
    the sentence (:class:`CodeCell`), whose inputs and printed numbers may bind its numbers."""
    keys = bibliography_keys() if keys is None else keys
    text, ms = plain(sentence), tuple(marks(sentence))
    if not ms and not is_flagged(text):
        return None
    shown = COMMENT.sub("", sentence).strip()
    record = lambda status, reason="": Finding(file, where, shown, ms, status, reason)
    for kind, value in ms:
        if kind == "claim" and not CLAIM_ID.fullmatch(value):
            return record("malformed", f"claim id {value!r} is not lowercase words joined by '-'")
        if kind == "sourced" and not value:
            return record("malformed", "sourced mark without a citation")
    unknown = [p for k, v in ms if k == "sourced" for p in unknown_sources(v, keys)]
    if unknown:
        return record("malformed", "sourced mark names no key of book/references.bib: "
                      + ", ".join(repr(p) for p in unknown))
    missing = [v for k, v in ms if k == "claim" and not is_asserted(v, assert_sources)]
    if missing:
        return record("unasserted", "no assert quotes " + ", ".join(f"'claim {v}:'" for v in missing))
    ids = [v for k, v in ms if k == "claim"]
    if ids:
        theirs = [a for a in assert_sources if any(f"claim {v}:" in a for v in ids)]
        loose = unbound_numbers(sentence, theirs, cells)
        if loose:
            return record("unbound", "no assert of " + ", ".join(ids) + " checks "
                          + ", ".join(repr(n) for n in loose))
        return record("asserted")
    if ms:
        return record("sourced")
    return record("unmarked", "comparison, cause, tolerance or percentage without a claim or sourced mark")


def notebook_findings(path: Path, keys=None) -> list[Finding]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    source = lambda c: "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
    code = [CodeCell.of(c) if c["cell_type"] == "code" else None for c in cells]
    found = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        around = [c for c in code[max(0, i - NEAR):i + NEAR + 1] if c is not None]
        near = [a for c in around for a in c.asserts]
        found += misplaced(shown_path(path), f"cell {i}", source(cell))
        for _, unit in units(source(cell)):
            for sentence, _ in sentences(unit):
                f = judge(shown_path(path), f"cell {i}", sentence, near, keys, cells=tuple(around))
                found += [f] if f else []
    return one_sentence_per_id(found)


def page_findings(path: Path, tests_dir: Path, keys=None) -> list[Finding]:
    text = path.read_text(encoding="utf-8")
    own = re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", text, re.S | re.M)
    asserts = list(asserts_under(tests_dir)) + [a for code in own for a in asserted_texts(code)]
    found = misplaced(shown_path(path), "", text)
    for line, unit in units(text):
        for sentence, _ in sentences(unit):
            f = judge(shown_path(path), f"line {line}", sentence, asserts, keys)
            found += [f] if f else []
    return one_sentence_per_id(found)


def one_sentence_per_id(found: list[Finding]) -> list[Finding]:
    """A claim id that marks a second sentence of the file makes that sentence ``reused``."""
    seen, out = {}, []
    for f in found:
        again = [v for k, v in f.marks if k == "claim" and v in seen]
        if again and not f.problem:
            f = replace(f, status="reused", reason="claim id " + ", ".join(again) + " already marks: "
                        + seen[again[0]][:60])
        for k, v in f.marks:
            if k == "claim":
                seen.setdefault(v, f.sentence)
        out.append(f)
    return out


def shown_path(path: Path) -> str:
    """The path relative to the repository where it lies inside it."""
    full = path.resolve()
    return str(full.relative_to(ROOT) if full.is_relative_to(ROOT) else path)


def findings(path, tests_dir: Path = ROOT / "tests", keys=None) -> list[Finding]:
    """Every flagged or marked sentence of a notebook (.ipynb) or book page (.md). ``keys``: the
    bibliography keys a ``sourced`` mark may name (default: those of book/*.bib)."""
    path = Path(path)
    return notebook_findings(path, keys) if path.suffix == ".ipynb" else page_findings(path, tests_dir, keys)


def problems(path, tests_dir: Path = ROOT / "tests", keys=None) -> list[Finding]:
    """The findings that fail the check: unmarked, unasserted, unbound, reused or malformed."""
    return [f for f in findings(path, tests_dir, keys) if f.problem]


def default_paths() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.md"))


def describe(f: Finding) -> str:
    return f"{f.file}, {f.where}: \"{f.sentence}\"\n    {f.status}: {f.reason}" if f.reason \
        else f"{f.file}, {f.where}: \"{f.sentence}\"\n    {f.status}"


def stats_line(path, found: list[Finding]) -> str:
    count = lambda pred: sum(1 for f in found if pred(f))
    flagged = count(lambda f: is_flagged(plain(f.sentence)))
    claims = count(lambda f: any(k == "claim" for k, _ in f.marks))
    sourced = count(lambda f: any(k == "sourced" for k, _ in f.marks))
    return (f"{str(path):48s} flagged {flagged:3d}  claim-marked {claims:3d}  sourced-marked {sourced:3d}"
            f"  unmarked {count(lambda f: f.status == 'unmarked'):3d}"
            f"  problems {count(lambda f: f.problem):3d}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--list", action="store_true", help="every flagged or marked sentence with its status")
    ap.add_argument("--stats", action="store_true", help="counts per file")
    args = ap.parse_args(argv)
    paths = args.paths or default_paths()
    bad = 0
    for path in paths:
        found = findings(path)
        bad += sum(f.problem for f in found)
        if args.stats:
            print(stats_line(shown_path(path), found))
        else:
            for f in found:
                if args.list or f.problem:
                    print(describe(f))
    if not args.stats:
        print(f"{bad} problem(s) in {len(paths)} file(s)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
