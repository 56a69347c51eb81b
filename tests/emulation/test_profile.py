"""interleave profile: replaying a known profile and measuring it gives the profile back, or the
profile says the emulator did not keep up while it was measured."""
import json
from pathlib import Path

import pytest

from harness import spec as spec_mod
from tests.helpers import interleave
from workloads.profiles import load_file

pytestmark = pytest.mark.root

SPEC = Path(__file__).resolve().parents[2] / "experiments" / "profile-toy.yaml"
# bench/profile_accuracy.py over 16 quiet runs (results/profile/README.md): every phase's mean error
# within 2 % and its sd at most 1.5 % (frame headers count in the rates); 10 % is >= 5 sd from each mean
PHASE_TOL = 0.10


def test_profiling_a_replayed_profile_gives_it_back(tmp_path):
    out = tmp_path / "toy-measured.yaml"
    p = interleave("profile", str(SPEC), "--job", "a", "--out", str(out), "--seconds", "6", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    info = json.loads(p.stdout)
    prof = load_file(out)                      # a valid profile, every number with provenance
    want = spec_mod.load(str(SPEC)).profiles["toy"]
    # the profiler recovers the period the replay really had (the agents' own clocks) within 2 %,
    # and the replay ran within its own 5 % of the profile
    assert abs(prof.iteration_ms / info["replay_iteration_ms"] - 1) <= 0.02, info
    assert abs(info["replay_iteration_ms"] / want.iteration_ms - 1) <= 0.05, info
    assert "measured by `interleave profile" in prof.provenance["iteration_ms"]
    # the guard's verdict travels with every measured number
    verdict = "fidelity guard ok" if info["fidelity"]["ok"] else "fidelity guard FLAGGED"
    assert all(verdict in v for k, v in prof.provenance.items() if k.startswith(("iteration_ms", "phases["))), \
        prof.provenance
    assert len(prof.phases) == len(want.phases), f"{len(prof.phases)} phases measured, {len(want.phases)} replayed"
    if info["fidelity"]["ok"]:
        # a faithful measurement has the shape that was replayed
        for got, ref in zip(prof.phases, want.phases):
            assert abs(got.duration_ms / ref.duration_ms - 1) <= PHASE_TOL, \
                f"phase of {got.duration_ms:.1f} ms measured, {ref.duration_ms:.1f} replayed (within {PHASE_TOL:.0%})"
            assert abs(got.gbps / ref.gbps - 1) <= PHASE_TOL, \
                f"phase at {got.gbps:.2f} Gbit/s measured, {ref.gbps:.2f} replayed (within {PHASE_TOL:.0%})"
    else:
        assert "warning: the fidelity guard flagged" in p.stderr, p.stderr[-2000:]
