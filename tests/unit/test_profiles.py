import numpy as np
import pytest
import yaml

from workloads.profiles import BUILTIN_NAMES, PROFILE_DIR, ProfileError, builtins, from_dict, load_file


def test_thirteen_builtins_with_full_provenance():
    b = builtins()
    assert sorted(b) == sorted(BUILTIN_NAMES) and len(b) == 13
    for name, p in b.items():
        raw = yaml.safe_load((PROFILE_DIR / f"{name}.yaml").read_text())
        for k in ("iteration_ms", "reference_gbps", "batch_size", "workers", "model_mb"):
            assert p.provenance.get(k), (name, k)
        for i in range(len(raw["phases"])):
            for k in ("start_ms", "duration_ms", "gbps"):
                assert p.provenance.get(f"phases[{i}].{k}"), (name, i, k)


def test_paper_anchors():
    b = builtins()
    v = b["vgg16"]
    assert v.iteration_ms == 255 and v.phases[0].start_ms == 141 and v.up_ms == 114    # Fig. 3
    assert len(b["gpt3"].phases) == 6 and b["gpt3"].parallelism == "hybrid"            # §2.1
    assert {b[m].parallelism for m in ("vgg11", "vgg19", "wideresnet101", "resnet50", "bert", "roberta",
                                       "camembert", "xlm")} == {"data"}


def test_derivation_is_reproducible(tmp_path, monkeypatch):
    import workloads.derive_profiles as d
    for name in BUILTIN_NAMES:
        assert yaml.safe_load((PROFILE_DIR / f"{name}.yaml").read_text()) == d.profiles[name]


def test_demand_and_scaling():
    v = builtins()["vgg16"]
    assert v.demand(np.array([0, 140.9, 141, 254.9, 255 + 141]))[[0, 1, 2, 3, 4]].tolist() == [0, 0, 37, 37, 37]
    # 50 Mbit/s emulated: same timing, bytes and rates scaled by 1/1000
    assert v.scaled_mbps(50) == [pytest.approx(37.0)]
    assert v.bytes_per_phase(50 / 50000)[0] == pytest.approx(37e9 / 8 * 0.114 / 1000)


@pytest.mark.parametrize("d,key", [
    ({"iteration_ms": 100, "phases": [{"start_ms": 0, "duration_ms": 10, "gbps": 60}]}, "phases[0].gbps"),
    ({"iteration_ms": 100, "phases": [{"start_ms": 0, "duration_ms": 50, "gbps": 1},
                                      {"start_ms": 40, "duration_ms": 10, "gbps": 1}]}, "phases"),
    ({"iteration_ms": 100, "phases": [{"start_ms": -1, "duration_ms": 10, "gbps": 1}]}, "phases[0].start_ms"),
    ({"iteration_ms": 100, "phases": [{"start_ms": 0, "duration_ms": 10, "gbps": 1, "pattern": "mesh"}]},
     "phases[0].pattern"),
    ({"iteration_ms": 100, "parallelism": "magic", "phases": [{"start_ms": 0, "duration_ms": 1, "gbps": 1}]},
     "parallelism"),
    ({"phases": [{"start_ms": 0, "duration_ms": 1, "gbps": 1}]}, "iteration_ms"),
])
def test_invalid_profiles_name_the_key(d, key):
    with pytest.raises(ProfileError) as e:
        from_dict("x", d, "spec.yaml: profiles.x")
    assert e.value.key == key and str(e.value).startswith("spec.yaml: profiles.x")


def test_builtin_without_provenance_is_refused(tmp_path):
    f = tmp_path / "toy.yaml"
    f.write_text(yaml.safe_dump({"model": "toy", "iteration_ms": 100,
                                 "phases": [{"start_ms": 0, "duration_ms": 10, "gbps": 5}],
                                 "provenance": {"iteration_ms": "measured"}}))
    with pytest.raises(ProfileError, match=r"toy.yaml: provenance.phases\[0\].start_ms"):
        load_file(f)


def test_time_dilation_keeps_bytes_and_stretches_time():
    from workloads.profiles import dilate
    v = builtins()["vgg16"]
    d = dilate(v, 4)
    assert d.iteration_ms == 1020 and d.phases[0].start_ms == 564 and d.phases[0].duration_ms == 456
    assert d.bytes_per_phase(1e-3) == pytest.approx(v.bytes_per_phase(1e-3))
    assert d.comm_fraction == pytest.approx(v.comm_fraction)
    assert dilate(v, 1) is v
