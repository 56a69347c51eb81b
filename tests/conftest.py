"""The two tiers: tests marked ``root`` (the emulation tier: real namespaces, OVS, tc) are skipped
without root; every other test runs anywhere."""
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
