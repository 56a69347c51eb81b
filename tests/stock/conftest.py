"""Stock-kernel tier: run by ``make vm-test`` inside the user-mode-Linux guest (scripts/vm_test.sh),
never by ``make test``: these tests assert that the backends a stock kernel offers are the ones
picked and that they work, so on a kernel without them they fail, as they should. Every test is
checked for leaks as in the emulation tier."""
import pytest

from tests.helpers import assert_no_leaks, net_state


@pytest.fixture(autouse=True)
def no_leaks():
    before = net_state()
    yield
    assert_no_leaks(before, net_state())
