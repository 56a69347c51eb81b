"""The spec reference (harness/specref.py, docs/spec.md) against the validators: every key a
validator accepts is described, nothing is described that none accepts, the generated page is
current, and every key documented is one a spec really may hold (loading it does not fail as
unknown)."""
import pytest

from harness import spec as spec_mod
from harness import specref


def test_every_section_describes_exactly_the_keys_its_validator_accepts():
    for section, (accepted, _defaults) in specref.SECTIONS.items():
        described = {k for s, k in specref.KEYS if s == section}
        assert described == set(accepted), (section, sorted(set(accepted) - described), sorted(described - set(accepted)))
    assert {s for s, _k in specref.KEYS} == set(specref.SECTIONS)


def test_defaults_are_keys_of_their_section():
    for section, (accepted, defaults) in specref.SECTIONS.items():
        assert set(defaults) <= set(accepted), (section, set(defaults) - set(accepted))


def test_the_checked_in_page_is_current():
    assert specref.main(["--check"]) == 0, "docs/spec.md is stale: run python -m harness.specref"


def test_a_misspelt_key_of_any_section_is_refused_naming_it(tmp_path):
    """One key per section, spelt wrong, in an otherwise valid spec: exit-2 errors naming the key."""
    base = {"name": "t", "jobs": [{"name": "a", "model": "vgg19", "workers": 2, "iterations": 3}]}
    cases = [({"cassini": {"candidatez": 3}}, "cassini.candidatez"), ({"link": {"rate": 5}}, "link.rate"),
             ({"netsens": {"timer": "auto"}}, "netsens.timer"), ({"telemetry": {"period": 5}}, "telemetry.period"),
             ({"background": {"loads": 0.1}}, "background.loads"), ({"themis": {"rack": "fewest"}}, "themis.rack"),
             ({"pollux": {"interval": 5}}, "pollux.interval"), ({"tiresias": {"queue": [1]}}, "tiresias.queue"),
             ({"jobs": [{"name": "a", "model": "vgg19", "worker": 2}]}, "jobs[0].worker"),
             ({"seeds": 3}, "seeds")]
    for extra, key in cases:
        with pytest.raises(spec_mod.UsageError) as exc:
            spec_mod.from_mapping({**base, **extra}, where="t.yaml")
        assert f"t.yaml: {key}: " in str(exc.value) and "unknown key" in str(exc.value), (key, str(exc.value))


def test_a_settings_block_its_scheduler_does_not_read_is_warned_and_the_reference_names_its_readers(tmp_path):
    """Schedulers declare the blocks they read (``reads``); a spec holding another's block loads with
    a warning naming the block and who reads it (not an error: a set runs one spec under several)."""
    raw = {"name": "t", "jobs": [{"name": "a", "model": "vgg19", "workers": 2, "iterations": 3}],
           "netsens": {"preemption": False}, "cassini": {"candidates": 3}, "themis": {"racks": "penalty"}}
    s = spec_mod.from_mapping({**raw, "scheduler": "themis"}, where="t.yaml")
    assert s.warnings == ["t.yaml: cassini: no effect under scheduler themis (read by NAME+cassini)",
                          "t.yaml: netsens: no effect under scheduler themis (read by netsens, tiresias)"]
    assert spec_mod.from_mapping({**raw, "scheduler": "netsens"}, where="t.yaml").warnings == [
        "t.yaml: cassini: no effect under scheduler netsens (read by NAME+cassini)",
        "t.yaml: themis: no effect under scheduler netsens (read by ideal, themis)"]
    assert "| `netsens` | a mapping | - | The network-sensitive delay scheduler's settings (below). | netsens, tiresias |" \
        in specref.render()


def test_schedule_prints_the_warning_and_goes_on(tmp_path, capsys):
    from tests.helpers import cli_main
    f = tmp_path / "w.yaml"
    f.write_text("jobs: [{name: a, model: vgg19, workers: 2, iterations: 3}]\nscheduler: themis\n"
                 "pollux: {interval_s: 60}\n")
    p = cli_main(capsys, "schedule", str(f))
    assert p.returncode == 0 and f"warning: {f}: pollux: no effect under scheduler themis (read by pollux)" in p.stderr
