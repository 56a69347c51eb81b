"""A set's runs on Dask (harness.sweep): the same table as a serial set, whether the runs went to
local worker processes or through a scheduler's address; a worker killed mid-run is retried once,
its partial directory set aside; a run that cannot complete is listed as missing."""
import json
import os
import signal
import sys
from pathlib import Path

import cloudpickle
import dask
import pytest
from distributed import LocalCluster

from harness import sets, sweep
from harness.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "experiments/demo.yaml"


def small_set(tmp_path, schedulers="[themis, themis+cassini, random]", repeats=2):
    p = tmp_path / "s.yaml"
    p.write_text(f"name: small\nrepeats: {repeats}\nruns:\n"
                 f"  - {{spec: {SPEC}, schedulers: {schedulers}}}\n"
                 f"  - {{spec: {SPEC}, label: demo-loaded, background: 0.3, schedulers: [themis]}}\n")
    return sets.load_set(p)


def serial(st, out):
    sets.execute(st, out, sets.simulated_run, log=lambda m: None, quiet=True)
    sets.write(st, out, plots=False)
    return (out / "table.md").read_text(), (out / "table.json").read_text()


def on_dask(st, out, run=sets.simulated_run, **kw):
    logs = []
    failed = sweep.execute(st, out, sets.run_dir, run, logs.append, **kw)
    sets.write(st, out, plots=False)
    return failed, logs, (out / "table.md").read_text(), (out / "table.json").read_text()


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    """A LocalCluster of two worker processes, configured like the one ``--workers`` starts."""
    scratch = tmp_path_factory.mktemp("dask")
    with dask.config.set({**sweep.DASK_CONFIG, "temporary-directory": str(scratch)}):
        lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                          local_directory=scratch)
    yield lc.scheduler_address
    lc.close()


def test_two_local_workers_give_the_serial_table_byte_for_byte(tmp_path):
    st = small_set(tmp_path)
    md, js = serial(st, tmp_path / "serial")
    failed, logs, pmd, pjs = on_dask(st, tmp_path / "parallel", workers=2)
    assert failed == []
    assert (pmd, pjs) == (md, js)
    assert json.loads(js)["missing"] == []
    assert sum(1 for m in logs if m.startswith("[")) == 8      # one line per finished run
    failed, logs, _md, _js = on_dask(st, tmp_path / "parallel", workers=2)   # complete runs are kept
    assert failed == [] and logs == ["set small: every run done earlier, kept"]


def test_cluster_workers_send_their_directories_back(tmp_path, two_workers):
    st = small_set(tmp_path, schedulers="[themis]", repeats=1)
    md, js = serial(st, tmp_path / "serial")
    scratch = tmp_path / "worker-scratch"
    failed, logs, pmd, pjs = on_dask(st, tmp_path / "via", cluster=two_workers, remote_scratch=scratch)
    assert failed == [] and (pmd, pjs) == (md, js)
    landed = tmp_path / "via/demo/themis-r0"
    assert sorted(p.name for p in landed.iterdir()) == ["iteration_ms.csv", "jobs.csv", "provenance.json", "spec.yaml",
                                                        "summary.json"]
    assert not list(tmp_path.glob("via/**/*.receiving"))
    assert not [p for p in scratch.rglob("*") if p.is_file()]       # the worker keeps no copy


def dies_once(spec, d, quiet=True, log=None):
    """The demo with themis (not the loaded one, which also runs themis with seed 1 and may reach a
    worker first) kills its own worker process the first time, half-way: its partial directory holds
    one file."""
    flag = d.parent.parent / "died"
    if spec.scheduler == "themis" and spec.seed == 1 and not spec.background and not flag.exists():
        partial = d.with_name(d.name + ".partial")
        partial.mkdir(parents=True)
        (partial / "half-written").write_text("x")
        flag.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return sets.simulated_run(spec, d)


def always_dies(spec, d, quiet=True, log=None):
    """The demo with themis (not the loaded one) kills its worker at every attempt."""
    if spec.scheduler == "themis" and spec.seed == 1 and not spec.background:
        d.with_name(d.name + ".partial").mkdir(parents=True, exist_ok=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return sets.simulated_run(spec, d)


@pytest.fixture
def by_value():
    """The run functions above go to the worker processes by value (they are not importable there)."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_a_worker_killed_mid_run_is_retried_once_and_its_partial_kept(tmp_path, by_value):
    st = small_set(tmp_path, schedulers="[themis, random]", repeats=1)
    md, js = serial(st, tmp_path / "serial")
    failed, logs, pmd, pjs = on_dask(st, tmp_path / "out", run=dies_once, workers=2)
    assert (tmp_path / "out/died").exists()
    assert failed == []
    assert (pmd, pjs) == (md, js)
    assert any("its worker died mid-run; submitted again" in m for m in logs)
    kept = tmp_path / "out/demo/themis-r0.interrupted-1"
    assert (kept / "half-written").read_text() == "x"
    assert any(str(kept) in m for m in logs)


def test_a_run_whose_worker_dies_twice_is_listed_missing(tmp_path, by_value):
    st = small_set(tmp_path, schedulers="[themis, random]", repeats=1)
    failed, logs, pmd, pjs = on_dask(st, tmp_path / "out", run=always_dies, workers=2)
    assert failed == [("demo with themis, repeat 0", "its worker died again")]
    missing = json.loads(pjs)["missing"]
    assert [(m["spec"], m["scheduler"], m["repeat"]) for m in missing] == [("demo", "themis", 0)]
    assert missing[0]["partial"] == ["themis-r0.interrupted-1", "themis-r0.partial"]
    assert "## Missing runs (1" in pmd
    assert json.loads(pjs)["table"]["demo"]["schedulers"].keys() == {"random"}


def test_the_queue_sends_unknown_runs_in_order_then_the_longest():
    todo = [{"group": g, "scheduler": s, "n": i} for i, (g, s) in enumerate(
        [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y"), ("a", "x"), ("a", "y")])]
    q = sweep.Queue(todo)
    first = q.pop()
    assert first["n"] == 0
    q.record(first, 1.0)                     # x known now (1 s); y unknown: y first, in order
    assert [q.pop()["n"] for _ in range(2)] == [1, 3]
    q.record(todo[1], 5.0)                   # y is the long one
    assert [q.pop()["n"] for _ in range(3)] == [5, 2, 4]
    assert len(q) == 0


def test_options():
    assert sweep.check_options(None, None, simulate=True) == (sweep.cores(), sweep.cores() > 1)
    assert sweep.check_options(1, None, simulate=True) == (1, False)
    assert sweep.check_options(None, None, simulate=False) == (1, False)
    assert sweep.check_options(None, "tcp://x:8786", simulate=False) == (None, True)
    with pytest.raises(UsageError, match="one fabric per machine"):
        sweep.check_options(2, None, simulate=False)
    with pytest.raises(UsageError, match="give one"):
        sweep.check_options(2, "tcp://x:8786", simulate=True)
    with pytest.raises(UsageError, match="--workers: 0"):
        sweep.check_options(0, None, simulate=True)


def test_set_aside_and_land(tmp_path):
    d = tmp_path / "spec/themis-r0"
    assert sweep.set_aside(d) is None
    for n in (1, 2):
        d.with_name(d.name + ".partial").mkdir(parents=True)
        assert sweep.set_aside(d) == d.with_name(f"themis-r0.interrupted-{n}")
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "summary.json").write_text("{}")
    (src / "sub/x.csv").write_text("a\n")
    sweep.land(d, sweep.pack(src))
    assert (d / "summary.json").read_text() == "{}" and (d / "sub/x.csv").read_text() == "a\n"


def reproduce(capsys, *args):
    from harness.cli import main
    status = main(["reproduce", str(SET_FILE), *args])
    return status, capsys.readouterr().err


SET_FILE = ROOT / "experiments/sets/netsens-sim.yaml"


def test_command_line_errors_are_one_line_with_their_status(capsys, monkeypatch, two_workers, tmp_path):
    out = ["--out", str(tmp_path / "x")]
    assert reproduce(capsys, "--simulate", "--workers", "0", *out) == \
        (2, "interleave reproduce: --workers: 0 is not a whole number >= 1\n")
    status, err = reproduce(capsys, "--workers", "2", *out)
    assert status == 2 and "one fabric per machine at a time" in err
    status, err = reproduce(capsys, "--simulate", "--cluster", "foo", *out)
    assert status == 2 and err.startswith("interleave reproduce: --cluster foo: not a scheduler address")
    monkeypatch.setattr(sweep, "CONNECT_TIMEOUT_S", 1)
    status, err = reproduce(capsys, "--simulate", "--cluster", "tcp://127.0.0.1:9", *out)
    assert status == 3 and "no Dask scheduler answers" in err and "fix: start one with `interleave scheduler`" in err
    status, err = reproduce(capsys, "--cluster", two_workers, *out)        # emulated: nobody offers a fabric
    assert status == 3 and "no worker offers fabric=1" in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()                                  # nothing ran, nothing written


def test_the_time_left_is_the_pace_so_far_over_every_worker():
    from harness.sweep import time_left
    assert time_left(30.0, 0, 8) == ""                        # nothing finished: no pace yet
    assert time_left(30.0, 3, 8) == ", about 50 s left"       # 10 s a run so far, 5 to go
    assert time_left(95.0, 8, 8) == ""
