"""An emulated run through a Dask worker offering ``fabric=1`` (``reproduce --cluster``): the run
is ``interleave run`` in the worker's own process, its results directory comes back to the
submitting side complete, and the set's table is made from it like a local run's. The spec's
scheduler is a plug-in (examples/plugins/highest_free.py) with CASSINI: the worker loads it from
the spec as the submitting side did."""
import json
from pathlib import Path

import dask
import pytest
from distributed import LocalCluster

from harness import sets, sweep

pytestmark = pytest.mark.root

PLUGIN = Path(__file__).resolve().parents[2] / "examples/plugins/highest_free.py"
SPEC = f"""name: short
plugins: [{PLUGIN}]
topology: {{name: fattree, k: 4, hosts_per_edge: 3}}
link: {{rate_mbps: 50}}
jobs:
  - {{name: vgg19-a, model: vgg19, workers: 2, iterations: 10}}
  - {{name: vgg19-b, model: vgg19, workers: 2, iterations: 10}}
scheduler: highest-free+cassini
duration_s: 20
seed: 1
"""
FILES = {"spec.yaml", "schedule.json", "environment.json", "iterations.csv", "links.csv", "summary.json"}


def test_an_emulated_run_goes_through_a_fabric_worker(tmp_path):
    (tmp_path / "short.yaml").write_text(SPEC)
    (tmp_path / "set.yaml").write_text("name: one\nruns: [{spec: short.yaml, schedulers: [highest-free+cassini]}]\n")
    st = sets.load_set(tmp_path / "set.yaml")
    logs = []
    with dask.config.set({**sweep.DASK_CONFIG, "temporary-directory": str(tmp_path / "dask")}):
        lc = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                          resources={sweep.FABRIC: 1}, local_directory=tmp_path / "dask")
    try:
        failed = sweep.execute(st, tmp_path / "out", sets.run_dir, sweep.emulated_run, logs.append,
                               cluster=lc.scheduler_address, emulated=True, remote_scratch=tmp_path / "worker")
    finally:
        lc.close()
    assert failed == [], logs
    d = tmp_path / "out/short/highest-free-cassini-r0"
    assert FILES <= {p.name for p in d.iterdir()}
    summary = json.loads((d / "summary.json").read_text())
    assert all(j["iterations"] == 10 for j in summary["jobs"].values()), summary["jobs"]
    env = json.loads((d / "environment.json").read_text())
    assert env["backends"]["datapath"] and list(env["plugins"]) == [str(PLUGIN)]
    hosts = {j["name"]: j["hosts"] for j in json.loads((d / "schedule.json").read_text())["jobs"]}
    assert sorted(hosts["vgg19-a"] + hosts["vgg19-b"]) == ["h21", "h22", "h23", "h24"], hosts
    assert not [p for p in (tmp_path / "worker").rglob("*") if p.is_file()]
    md, _floors = sets.write(st, tmp_path / "out", plots=False)
    assert "| short | highest-free+cassini | 1 / 0 |" in md or "| short | highest-free+cassini | 0 / 1 |" in md
