"""The command-line reference (docs/cli.md), generated from the parser itself (harness.cli), so that
it cannot drift from what the commands take:

    python -m harness.clidoc            # writes docs/cli.md
    python -m harness.clidoc --check    # exit 1 when docs/cli.md is not what the parser gives
"""
import argparse
import sys
from pathlib import Path

from harness.cli import BUILDS_NETWORKS, build_parser

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "cli.md"
# the tools beside ``interleave``: analyses of results, generators of checked-in files, benchmarks
TOOLS = {
    "Analyses of results": ["harness/netcost.py", "harness/modelcheck.py", "harness/flowcheck.py", "harness/drift.py",
                            "harness/table2.py"],
    "Generators of checked-in files": ["workloads/derive_profiles.py", "workloads/derive_sensitivity.py",
                                       "harness/clidoc.py", "harness/specref.py", "harness/resultsindex.py",
                                       "scripts/plan_outputs.py",
                                       "scripts/snapshot_scores.py"],
    "Benchmarks (their tables are in the docs pages that cite them)": sorted(
        f"bench/{p.name}" for p in (ROOT / "bench").glob("*.py")),
}
ROOT_FREE = {"simulate": "--simulate", "reproduce": "--simulate or --cluster", "worker": "--no-fabric"}


def _subparsers(parser):
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in action._choices_actions}
    return [(name, p, helps.get(name, "")) for name, p in action.choices.items()]


def _name(a):
    if a.option_strings:
        opt = ", ".join(a.option_strings)
        takes = a.nargs != 0
        value = a.metavar or ("{" + ",".join(map(str, a.choices)) + "}" if a.choices else a.dest.upper())
        return f"`{opt} {value}`" if takes else f"`{opt}`"
    return f"`{a.metavar or a.dest}`" + (" (one or more)" if a.nargs == "+" else "")


def _default(a):
    if a.nargs == 0 or a.default in (None, argparse.SUPPRESS, []) or a.default is False:
        return ""
    return f"`{a.default}`"


def _cell(text):
    return " ".join(str(text or "").split()).replace("|", "\\|")


def render():
    parser = build_parser()
    out = ["# Command-line reference", "",
           "Generated from the parser (`python -m harness.clidoc`; a unit test fails when this file is "
           "stale). Exit statuses: 0 success, 1 a check failed, 2 bad input (one line naming the file or "
           "argument, the key and the value), 3 environment problem (with the fix), 70 internal error, "
           "130 interrupted.", ""]
    for name, p, help_ in _subparsers(parser):
        root = "no"
        if name in BUILDS_NETWORKS:            # the commands that build or clean networks need root
            root = f"yes (no with {ROOT_FREE[name]})" if name in ROOT_FREE else "yes"
        out += [f"## `interleave {name}`", "", _cell(help_)[:1].upper() + _cell(help_)[1:] + ".", "", f"Needs root: {root}.", "",
                "```", " ".join(p.format_usage().split()).replace("usage: ", ""), "```", "",
                "| argument | default | meaning |", "| --- | --- | --- |"]
        for a in p._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            out.append(f"| {_name(a)} | {_default(a)} | {_cell(a.help)} |")
        out.append("")
    out += ["## Other tools", "", "Run from the checkout; each one's first paragraph, from its module (the "
            "rest of its docstring says more: `python -m MODULE --help` or `.venv/bin/python FILE --help`).", ""]
    for group, files in TOOLS.items():
        out += [f"### {group}", ""]
        for f in files:
            out += [f"**`{_command(f)}`**: {_first_paragraph(ROOT / f)}", ""]
    return "\n".join(out)


def _command(path):
    """How a tool is run: ``python -m`` for a package module, the venv's python for a script."""
    if path.startswith(("harness/", "workloads/")):
        return "python -m " + path[:-3].replace("/", ".")
    return ".venv/bin/python " + path


def _first_paragraph(path):
    import ast
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return first[:-1] + "." if first.endswith(":") else first


def main(argv=None):
    from harness.generated import write_or_check
    return write_or_check(TARGET, render(), "harness.clidoc", argv)


if __name__ == "__main__":
    sys.exit(main())
