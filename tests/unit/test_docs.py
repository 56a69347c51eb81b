"""The generated references are current: docs/cli.md is what the parser gives."""
from harness import clidoc


def test_the_cli_reference_is_generated_from_the_parser():
    assert clidoc.TARGET.read_text() == clidoc.render(), \
        "docs/cli.md is stale: regenerate it with python -m harness.clidoc"


def test_the_cli_reference_names_every_command_and_option():
    text = clidoc.render()
    for name, parser, _help in clidoc._subparsers(clidoc.build_parser()):
        assert f"## `interleave {name}`" in text
        for a in parser._actions:
            for opt in a.option_strings:
                if opt not in ("-h", "--help"):
                    assert f"`{opt}" in text, (name, opt)
