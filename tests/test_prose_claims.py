"""Every comparison, cause, tolerance or percentage in the prose is asserted or sourced.

The checker is tools/prose_claims.py (its docstring states the convention). The first test runs it
on every notebook and book page; the others show on fixtures that it can fail.
"""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import prose_claims as pc  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "prose"
KEYS = pc.bibliography_keys(FIXTURES)          # the fixtures' own bibliography


@pytest.mark.parametrize("path", pc.default_paths(), ids=lambda p: p.name)
def test_prose_claims_are_asserted_or_sourced(path):
    bad = pc.problems(path)
    if bad:
        pytest.fail(f"{len(bad)} claim(s) in {path.name} need an assert or a source:\n"
                    + "\n".join(pc.describe(f) for f in bad), pytrace=False)


def by_sentence(found):
    return {f.sentence: f for f in found}


def status(found, start):
    """Status of the one finding whose sentence starts with ``start``."""
    hits = [f for f in found if f.sentence.startswith(start)]
    assert len(hits) == 1, (start, [f.sentence for f in found])
    return hits[0].status


# --- notebooks ---------------------------------------------------------------------------------
def test_notebook_fixture_reports_what_is_wrong_and_nothing_else():
    found = pc.findings(FIXTURES / "claims.ipynb", keys=KEYS)
    assert status(found, "The planted stale claim") == "unmarked"
    assert status(found, "It is also faster per watt") == "unasserted"       # no assert quotes its id
    assert status(found, "A GPU with twice the bandwidth") == "unasserted"  # its assert is 20 cells away
    assert status(found, "A malformed mark") == "malformed"
    assert status(found, "The fast part is faster") == "asserted"           # next cell, same paragraph
    assert status(found, "The edge of the window") == "asserted"            # 8 cells away
    assert status(found, "Meta reports") == "sourced"
    assert not [f for f in found if "?" in f.sentence]                        # questions are skipped
    assert {f.status for f in found if f.problem} == {"unmarked", "unasserted", "malformed"}
    assert len(pc.problems(FIXTURES / "claims.ipynb", keys=KEYS)) == 4


def test_command_line_fails_and_names_the_sentence(capsys):
    assert pc.main([str(FIXTURES / "claims.ipynb")]) == 1
    out = capsys.readouterr().out
    assert "cell 3" in out and "ten times faster than the slow one" in out
    assert pc.main(["--stats", str(FIXTURES / "claims.ipynb")]) == 1
    assert "unmarked   1" in capsys.readouterr().out


def run_cells(path):
    """Execute a notebook's code cells in order, as a kernel would (magics skipped)."""
    namespace = {}
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            code = "".join(cell["source"])
            code = "\n".join("" if l.startswith("%") else l for l in code.split("\n"))
            exec(compile(code, str(path), "exec"), namespace)


def test_a_stale_asserted_claim_fails_with_the_claim_quoted():
    # The checker accepts the marked claim; running the notebook (as nbval does) catches that it
    # no longer holds, and the error quotes it.
    assert status(pc.findings(FIXTURES / "claims.ipynb", keys=KEYS), "The slow part is within 5 %") == "asserted"
    with pytest.raises(AssertionError, match="claim fixture-stale: the slow part is within 5 % of the fast one"):
        run_cells(FIXTURES / "claims.ipynb")


# --- book pages --------------------------------------------------------------------------------
def test_page_fixture_checks_asserts_under_tests_and_in_its_own_code_cells():
    found = pc.findings(FIXTURES / "page.md", keys=KEYS)
    assert status(found, "A question is never a claim") == "asserted"        # asserted below, in this file
    assert status(found, "The planted stale claim") == "unmarked"
    assert status(found, "A mark whose id no test asserts") == "unasserted"
    assert status(found, "Meta reports 38 %") == "sourced"
    assert status(found, "The GEMMs take more") == "asserted"          # by the page's own code cell
    assert status(found, "A list item is a unit") == "unmarked"
    assert status(found, "GEMMs ; 90 %") == "unmarked"                 # a table row
    assert status(found, "Within an admonition") == "unmarked"
    # code blocks, math, inline code, roles, a directive's title and questions are not read
    assert not [f for f in found if "code" in f.sentence or "Faster than light" in f.sentence
                or "Is a question" in f.sentence or "$2" in f.sentence]


def test_page_claims_need_an_assert_under_the_tests_dir(tmp_path):
    # the same page against an empty tests folder: the claim asserted only in this file is reported
    found = pc.findings(FIXTURES / "page.md", tests_dir=tmp_path, keys=KEYS)
    assert status(found, "A question is never a claim") == "unasserted"
    (tmp_path / "test_x.py").write_text('assert True, "claim fixture-page-orphan: reported"\n')
    pc.asserts_under.cache_clear()
    found = pc.findings(FIXTURES / "page.md", tests_dir=tmp_path, keys=KEYS)
    assert status(found, "A mark whose id no test asserts") == "asserted"


# --- markdown handling -------------------------------------------------------------------------
def test_questions_are_skipped():
    assert not pc.is_flagged("Is the fast part more than twice as fast?")
    assert pc.is_flagged("The fast part is more than twice as fast.")
    questions = [f for f in pc.findings(FIXTURES / "page.md", keys=KEYS) if f.sentence.endswith("?")]
    assert not questions, "claim fixture-page-questions: the checker skips questions"


def test_sentences_keep_their_marks_and_abbreviations():
    text = "It is 3 % slower, e.g. on the H100. <!-- claim: a-b, c --> Next one is faster than that."
    (first, m1), (second, m2) = pc.sentences(text)
    assert first.startswith("It is 3 %") and m1 == [("claim", "a-b"), ("claim", "c")]
    assert second == "Next one is faster than that." and m2 == []


def test_units_split_lists_tables_and_drop_code_headings_and_directive_options():
    md = ("# Title 5 %\n\nA paragraph\non two lines.\n- item one\n- item two\n\n| a | b |\n|---|---|\n"
          "| 1 | 2 |\n\n```{note} A title\n:class: tip\nInside.\n```\n\n```\nx = 5 % 3\n```\n")
    assert [u for _, u in pc.units(md)] == ["A paragraph on two lines.", "item one", "item two",
                                            "a ; b", "1 ; 2", "Inside."]


def test_plain_strips_markdown():
    s = "**Bold** _em_ [link](https://x.org/a_b) {cite}`k` `a % b` $x \\% y$ costs $2 and $3"
    assert pc.plain(s) == "Bold em link costs $2 and $3"
    assert pc.is_flagged("It runs 5% faster.") and pc.is_flagged("Seventy per cent of it.")
    assert not pc.is_flagged("Rather than this, other than that.")
    assert pc.is_flagged("within a factor of two") and not pc.is_flagged("within the node")


def test_a_mark_that_starts_a_line_inside_a_paragraph_is_reported():
    text = ("The fast part is faster than the slow one.\n<!-- claim: fast --> The next sentence.\n\n"
            "Alone on its line, closing a paragraph, a mark is harmless.\n<!-- claim: fine -->\n\n"
            "A mark after the full stop is fine. <!-- claim: also-fine -->\nThe paragraph goes on.\n")
    assert pc.misplaced_marks(text) == [(2, "<!-- claim: fast --> The next sentence.")]
    found = pc.misplaced("x.md", "", text)
    assert [f.status for f in found] == ["malformed"] and "breaks the paragraph" in found[0].reason
    assert pc.misplaced_marks("A claim.\n<!-- sourced: a paper -->\nMore text.\n") == [
        (2, "<!-- sourced: a paper -->")]


def test_an_ast_systemerror_is_parsed_again_in_a_fresh_thread(monkeypatch):
    """CPython 3.11's "AST constructor recursion depth mismatch" (gh-106905) hits the thread that
    ran a deep recursion before; the parse is repeated in a new thread."""
    import threading
    real, main = pc.ast.parse, threading.get_ident()

    def broken_here(src, *args, **kwargs):
        if threading.get_ident() == main:
            raise SystemError("AST constructor recursion depth mismatch (before=153, after=207)")
        return real(src, *args, **kwargs)

    monkeypatch.setattr(pc.ast, "parse", broken_here)
    assert pc.asserted_texts('x = 1\nassert x, "claim a: b"') == ['assert x, "claim a: b"']


# --- numbers bound, one id per sentence, sources that resolve (planted in small notebooks) ----------
def _notebook(tmp_path, markdown: str, code: str, printed: str = "") -> Path:
    """A two-cell notebook: the prose, then the code that asserts it (with ``printed`` as its output)."""
    outputs = [{"output_type": "stream", "name": "stdout", "text": [printed]}] if printed else []
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": [markdown]},
                    {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": outputs,
                     "source": [code]}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "plant.ipynb"
    path.write_text(json.dumps(nb))
    return path


def _status(tmp_path, markdown, code, printed=""):
    return [f.status for f in pc.findings(_notebook(tmp_path, markdown, code, printed), keys=KEYS)]


TOLERANCE = "The model lands within 15 % of the published run. <!-- claim: lands -->"
CHECK = 'miss = 0.11\nassert abs(miss) < 0.15, "claim lands: within 15 %"'


def test_a_bound_claim_passes(tmp_path):
    assert _status(tmp_path, TOLERANCE, CHECK) == ["asserted"]


def test_the_sentences_number_changed_without_the_check_fails(tmp_path):
    assert _status(tmp_path, TOLERANCE.replace("15 %", "2 %"), CHECK) == ["unbound"]


def test_the_checks_number_changed_without_the_sentence_fails(tmp_path):
    assert _status(tmp_path, TOLERANCE, CHECK.replace("< 0.15", "< 0.02")) == ["unbound"]


def test_a_number_printed_by_the_asserting_cell_binds_as_rounded(tmp_path):
    prose = "Serving costs 17 times less per token at batch 64. <!-- claim: cheaper -->"
    code = 'ratio = cost_1 / cost_64\nassert ratio > 10, "claim cheaper: many times cheaper"'
    out = "cost ratio batch 1 / batch 64: 17.2\n"
    assert _status(tmp_path, prose, code, out) == ["asserted"]
    assert _status(tmp_path, prose.replace("17 times", "9 times"), code, out) == ["unbound"]


def test_an_unmarked_twice_and_dominates_sentence_fails(tmp_path):
    prose = "The H200 prefills twice as fast as the H100 and dominates every other GPU."
    assert _status(tmp_path, prose, "x = 1") == ["unmarked"]


def test_a_second_sentence_under_an_existing_id_fails(tmp_path):
    prose = TOLERANCE + " It also dominates every other GPU. <!-- claim: lands -->"
    assert _status(tmp_path, prose, CHECK) == ["asserted", "reused"]


def test_a_source_must_name_a_bibliography_key(tmp_path):
    fact = "Meta reports 38 % MFU."
    assert _status(tmp_path, fact + " <!-- sourced: fixture2024llama Table 4 -->", "x = 1") == ["sourced"]
    assert _status(tmp_path, fact + " <!-- sourced: me -->", "x = 1") == ["malformed"]
    assert _status(tmp_path, fact + " <!-- sourced: fixture2024llama; me -->", "x = 1") == ["malformed"]


def test_stated_numbers_skip_years_references_and_names():
    said = [shown for shown, _ in pc.stated_numbers(
        "In 2024 (Table 4, §3.3.2) the H100 and Llama-3-8B ran 4-bit weights 2.5 times faster, twice the "
        "rate, on 1,024 GPUs at 15 % of peak, a 2,048-token prompt.")]
    assert said == ["2.5", "twice", "1,024 GPUs", "15 %", "2,048"]
    assert dict(pc.stated_numbers("about half"))["half"] == (0.5, 2)
    gb = dict(pc.stated_numbers("a 1.2 GB state"))["1.2 GB"]
    assert pc.is_bound((15, 0.15), {0.15}) and pc.is_bound(gb, {1.2e9}) and pc.is_bound(gb, {1.2})
    assert not pc.is_bound((15,), {1.5}) and not pc.is_bound((2,), {0.02})   # a bare number is itself
