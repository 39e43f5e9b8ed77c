"""The ``mlsysim`` command line.

    mlsysim assign notebooks/ --out student/        # student copies of the notebooks
    mlsysim assign notebooks/ --out source/ps1 --nbgrader
    mlsysim score --execute submitted/alice/               # exercises answered correctly

Each subcommand is one ``_add_<name>(commands)`` function that declares its
arguments and sets ``run`` to a ``_run_<name>(args) -> int`` function; list the
``_add_`` function in :data:`COMMANDS`. Run functions import what they need
when they run, so that ``mlsysim --help`` stays instant. Errors from the
package (:class:`~mlsysim.errors.MlsysimError`) print as one line and exit with
status 2; :func:`emit` prints a result as text or, with ``--json``, as JSON.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Give a subcommand the ``--json`` flag that :func:`emit` honours."""
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def jsonable(obj):
    """Plain JSON types for a result: dataclasses become dicts, NumPy values lists or floats."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "tolist"):  # NumPy arrays and scalars
        return obj.tolist()
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def emit(result, args: argparse.Namespace) -> None:
    """Print ``result`` as text, or as indented JSON when the command was given ``--json``."""
    if getattr(args, "json", False):
        print(json.dumps(jsonable(result), indent=2))
    else:
        print(result)


# --- assign --------------------------------------------------------------------------------

def _add_assign(commands) -> None:
    p = commands.add_parser(
        "assign", help="write student copies of notebooks (solutions replaced by stubs)",
        description="Write a student copy of each notebook: code between '### BEGIN SOLUTION' and "
                    "'### END SOLUTION' becomes '# YOUR CODE HERE' + 'raise NotImplementedError()', "
                    "marked markdown becomes 'YOUR ANSWER HERE', outputs and widget state are cleared, "
                    "checks are kept. With --nbgrader, write nbgrader source notebooks instead "
                    "(solutions kept, cell metadata added) for 'nbgrader generate_assignment'.")
    p.add_argument("paths", nargs="+", help="notebooks, or folders holding them")
    p.add_argument("--out", required=True, help="folder for the copies (never the input folder)")
    p.add_argument("--nbgrader", action="store_true",
                   help="write nbgrader source notebooks (answer and autograder test cells)")
    p.set_defaults(run=_run_assign)


def _run_assign(args) -> int:
    from .assign import assign
    for path, regions in assign(args.paths, args.out, nbgrader=args.nbgrader):
        print(f"{path}: {regions} solution region{'s' if regions != 1 else ''} "
              f"{'marked for nbgrader' if args.nbgrader else 'replaced by stubs'}")
    return 0


def _add_score(commands) -> None:
    p = commands.add_parser(
        "score", help="count the exercises a submitted notebook answers correctly",
        description="Read the output of every ms.exercises.check in each notebook and count the "
                    "exercises answered correctly. Use --execute to run each notebook first (in a "
                    "fresh kernel, continuing after errors): stored outputs can be edited by hand.")
    p.add_argument("paths", nargs="+", help="submitted notebooks, or folders holding them")
    p.add_argument("--execute", action="store_true", help="run each notebook before scoring it")
    add_json_flag(p)
    p.set_defaults(run=_run_score)


def _run_score(args) -> int:
    from . import exercises
    from .assign import execute, notebooks, read, score
    from .errors import UnknownNameError
    results = {}
    for path in notebooks(args.paths):
        nb = execute(read(path), path.parent) if args.execute else read(path)
        try:
            expected = exercises.ids(path.name[:2])
        except UnknownNameError:
            expected = None
        results[str(path)] = score(nb, expected)
    if args.json:
        emit(results, args)
        return 0
    for path, marks in results.items():
        missing = [i for i, ok in marks.items() if not ok]
        print(f"{path}: {len(marks) - len(missing)} / {len(marks)} correct"
              + (f" (not yet: {', '.join(missing)})" if missing else ""))
    return 0


#: The subcommands' ``_add_<name>`` functions, in the order ``mlsysim --help`` lists them.
COMMANDS = [_add_assign, _add_score]


def parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand of :data:`COMMANDS`."""
    p = argparse.ArgumentParser(prog="mlsysim", description="First-principles models of what bounds "
                                "an ML system, and tools for the course that teaches them.")
    p.add_argument("--version", action="store_true", help="print the package version and exit")
    commands = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in COMMANDS:
        add(commands)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    p = parser()
    args = p.parse_args(argv)
    if args.version:
        from . import __version__
        print(__version__)
        return 0
    if not args.command:
        p.print_help()
        return 2
    from .errors import MlsysimError
    try:
        return args.run(args)
    except MlsysimError as e:
        print(f"mlsysim {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
