"""``trace: {kind: csv}``: the Pollux artifact's workloads replayed (workloads.traces.read_rows and
from_rows through spec loading), seeded; a bad row is one line naming the file, line and column."""
import pytest

from harness import spec as spec_mod
from harness.errors import UsageError
from tests.helpers import ROOT

SPEC = ROOT / "experiments/sim/pollux-workload1.yaml"


def test_the_pollux_workload_replays_with_its_arrivals_replicas_and_applications():
    spec = spec_mod.load(SPEC)
    jobs = {j.name: j for j in spec.jobs}
    assert len(jobs) == 160
    first, big = jobs["cifar10-0"], jobs["imagenet-126"]
    assert (first.model, first.workers, first.arrival_s) == ("resnet50", 16, 1.07)
    assert (big.model, big.workers, big.arrival_s) == ("resnet50", 48, 213.08)
    assert jobs["ncf-5"].model == "dlrm" and jobs["deepspeech2-1"].model == "bert"   # the spec's stand-in
    assert all(200 <= j.iterations <= 1000 for j in spec.jobs)
    again = spec_mod.load(SPEC)
    assert [(j.name, j.iterations) for j in again.jobs] == [(j.name, j.iterations) for j in spec.jobs]
    other = spec_mod.load(SPEC, seed=2)
    assert [j.iterations for j in other.jobs] != [j.iterations for j in spec.jobs]


def test_the_realistic_workload_and_the_files_batch_sizes(tmp_path):
    (tmp_path / "s.yaml").write_text(
        f"name: r\ntopology: {{name: fattree, k: 8, hosts_per_edge: 8}}\nscheduler: themis\nseed: 1\n"
        f"trace: {{kind: csv, file: {ROOT}/workloads/trace_data/pollux/workloads-realistic-6.csv, jobs: 20,\n"
        f"        batch: file, applications: {{deepspeech2: bert, yolov3: vgg16}}}}\n")
    spec = spec_mod.load(tmp_path / "s.yaml")
    assert len(spec.jobs) == 20
    img = next(j for j in spec.jobs if j.name == "imagenet-18")
    assert img.workers == 8 and spec.profiles[img.model].batch_size == 200        # 1600 / 8 per GPU


def bad(tmp_path, rows, extra=""):
    (tmp_path / "t.csv").write_text("name,time,application,num_replicas,batch_size\n" + rows)
    (tmp_path / "s.yaml").write_text("name: b\ntopology: {name: fattree, k: 4, hosts_per_edge: 3}\n"
                                     f"scheduler: themis\ntrace: {{kind: csv, file: t.csv{extra}}}\n")
    with pytest.raises(UsageError) as e:
        spec_mod.load(tmp_path / "s.yaml")
    return str(e.value)


def test_bad_rows_name_the_file_line_and_column(tmp_path):
    msg = bad(tmp_path, "a,1,cifar10,2,64\nb,2,cifar10,48,64\n")
    assert "trace.file t.csv: line 3, num_replicas: '48'" in msg and "1..24" in msg and "\n" not in msg
    assert "line 2, application: 'yolov3'" in bad(tmp_path, "a,1,yolov3,2,64\n")
    assert "line 3, time" in bad(tmp_path, "a,5,cifar10,2,64\nb,4,cifar10,2,64\n")
    assert "line 3, name" in bad(tmp_path, "a,1,cifar10,2,64\na,2,cifar10,2,64\n")
    assert "rows: 0" in bad(tmp_path, "")
    assert "trace.applications.yolov3: 'nope'" in bad(tmp_path, "a,1,yolov3,2,64\n", ", applications: {yolov3: nope}")
    assert "no such file" in bad(tmp_path, "a,1,cifar10,2,64\n", "x")
    assert "trace.bogus" in bad(tmp_path, "a,1,cifar10,2,64\n", ", bogus: 1")
