"""The tiers: tests marked ``root`` (the emulation tier: real namespaces, OVS, tc) are skipped
without root; every other test runs anywhere. Root tests also marked ``experiment`` re-measure a
claim over full-length runs: ``make test-experiments`` runs them, ``make test`` leaves them out."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (real namespaces and OVS): sudo make test")
    for item in items:
        if item.get_closest_marker("root"):
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    """Runs the fidelity guard flagged and a test repeated (tests.helpers.run_kept), one line each."""
    from tests.helpers import GUARD_REPEATS_SEEN
    if GUARD_REPEATS_SEEN:
        terminalreporter.section("runs repeated: flagged by the fidelity guard")
        for line in GUARD_REPEATS_SEEN:
            terminalreporter.write_line(line)
