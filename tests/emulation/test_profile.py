"""interleave profile: replaying a known profile and measuring it gives the profile back."""
import pytest
import json


from tests.helpers import interleave
from workloads.profiles import load_file

pytestmark = pytest.mark.root

SPEC = """
name: profile-toy
topology: {name: dumbbell, hosts_per_side: 2}
profiles:
  toy:
    iteration_ms: 180
    phases:
      - {start_ms: 30, duration_ms: 40, gbps: 25}
      - {start_ms: 100, duration_ms: 60, gbps: 40}
jobs:
  - {name: a, model: toy, workers: 2, hosts: [h1, h3]}
scheduler: fixed
"""


def test_profiling_a_replayed_profile_gives_it_back(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "toy-measured.yaml"
    p = interleave("profile", str(spec), "--job", "a", "--out", str(out), "--seconds", "6", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    info = json.loads(p.stdout)
    prof = load_file(out)                      # a valid profile, every number with provenance
    # the profiler recovers the period the replay really had (the agents' own clocks) within 2 %,
    # and the replay ran within its own 5 % of the profile
    assert abs(prof.iteration_ms / info["replay_iteration_ms"] - 1) <= 0.02, info
    assert abs(info["replay_iteration_ms"] / 180 - 1) <= 0.05, info
    assert len(prof.phases) == 2
    for got, (dur, gbps) in zip(prof.phases, [(40, 25), (60, 40)]):
        assert abs(got.duration_ms / dur - 1) <= 0.10, (got, dur)
        assert abs(got.gbps / gbps - 1) <= 0.15, (got, gbps)
    assert "measured by `interleave profile" in prof.provenance["iteration_ms"]
