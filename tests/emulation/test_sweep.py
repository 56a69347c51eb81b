"""An emulated run through a Dask worker offering ``fabric=1`` (``reproduce --cluster``): the run
is ``interleave run`` in the worker's own process, its results directory comes back to the
submitting side complete, and the set's table is made from it like a local run's."""
import json

import dask
import pytest
from distributed import LocalCluster

from harness import sets, sweep

pytestmark = pytest.mark.root

SPEC = """name: short
topology: {name: fattree, k: 4, hosts_per_edge: 3}
link: {rate_mbps: 50}
jobs:
  - {name: vgg19-a, model: vgg19, workers: 2, iterations: 10, hosts: [h1, h13]}
  - {name: vgg19-b, model: vgg19, workers: 2, iterations: 10, hosts: [h2, h14]}
scheduler: themis+cassini
duration_s: 20
seed: 1
"""
FILES = {"spec.yaml", "schedule.json", "environment.json", "iterations.csv", "links.csv", "summary.json"}


def test_an_emulated_run_goes_through_a_fabric_worker(tmp_path):
    (tmp_path / "short.yaml").write_text(SPEC)
    (tmp_path / "set.yaml").write_text("name: one\nruns: [{spec: short.yaml, schedulers: [themis+cassini]}]\n")
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
    d = tmp_path / "out/short/themis-cassini-r0"
    assert FILES <= {p.name for p in d.iterdir()}
    summary = json.loads((d / "summary.json").read_text())
    assert all(j["iterations"] == 10 for j in summary["jobs"].values()), summary["jobs"]
    assert json.loads((d / "environment.json").read_text())["backends"]["datapath"]
    assert not [p for p in (tmp_path / "worker").rglob("*") if p.is_file()]
    md, _floors = sets.write(st, tmp_path / "out", plots=False)
    assert "| short | themis+cassini | 1 / 0 |" in md or "| short | themis+cassini | 0 / 1 |" in md
