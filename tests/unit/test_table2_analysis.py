"""harness.table2: which of Table 2's columns a run's job is set beside, and a clear line when the
results directory holds none of the set's runs."""
import pytest

from harness import sets
from harness.errors import UsageError
from harness.table2 import paper_ms, render
from tests.helpers import ROOT


def test_each_run_is_set_beside_its_column():
    assert paper_ms("snapshot1", "themis", "wrn101") == (205, "Themis")
    assert paper_ms("snapshot1-bg0.10", "themis+cassini", "vgg16") == (148, "Th+CASSINI")
    assert paper_ms("alone", "fixed", "vgg16-1700") == (163, "Th+CASSINI")     # snapshot 2's VGG16
    assert paper_ms("snapshot2", "themis", "busy") is None and paper_ms("fig11", "themis", "vgg16") is None


def test_a_directory_without_the_sets_runs_is_refused(tmp_path):
    st = sets.load_set(ROOT / "experiments" / "sets" / "table2.yaml")
    with pytest.raises(UsageError, match="none of set table2's runs"):
        render(st, tmp_path / "empty")
