"""Files generated from the code and checked in (docs/cli.md, docs/spec.md, results/README.md): one
way to write them and to tell a stale one, for each generator's ``main``."""
import sys
from pathlib import Path


def write_or_check(path, text, module, argv=None):
    """``python -m MODULE`` writes ``text`` to ``path``; with ``--check`` it writes nothing and exits
    1 when the file differs (a unit test or CI asks). Returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    path = Path(path)
    if argv == ["--check"]:
        if path.is_file() and path.read_text() == text:
            return 0
        print(f"{path} is stale: regenerate it with python -m {module}", file=sys.stderr)
        return 1
    path.write_text(text)
    print(f"written: {path}", file=sys.stderr)
    return 0
