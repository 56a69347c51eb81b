"""CASSINI's stress tests as constructed on the paper's testbed (experiments/cassini/sec53.yaml,
sec54.yaml): Themis and Th+CASSINI choose the placements the paper names, and in the simulator
CASSINI's placement marks fewer packets. §5.3: Themis puts DLRM beside RoBERTa and ResNet50 beside
VGG16, CASSINI flips the two. §5.4: Themis pairs <GPT-3, GPT-2> and <GPT-1, DLRM>, CASSINI
<GPT-1, GPT-2> and <GPT-3, DLRM>. "Beside": the arriving job's servers are under ToRs the running
job spans."""
import pytest

import interleave
from harness.simulate import simulate_spec
from tests.helpers import ROOT

CASSINI = ROOT / "experiments" / "cassini"


def beside(spec, scheduler):
    """{arriving job: the running job whose ToRs hold all its servers}."""
    topo = interleave.load_spec(spec).topology

    def tors(hosts):
        return {topo.edge_of(h) for h in hosts}

    jobs = interleave.schedule(spec, scheduler).jobs
    arriving = [j for j in jobs if j.arrival_s > 0]
    running = [j for j in jobs if j.arrival_s == 0 and len(tors(j.hosts)) > 1]
    return {a.name: next((r.name for r in running if tors(a.hosts) <= tors(r.hosts)), None) for a in arriving}


@pytest.mark.parametrize("spec, themis, cassini", [
    ("sec53.yaml", {"dlrm": "roberta", "resnet50": "vgg16"}, {"dlrm": "vgg16", "resnet50": "roberta"}),
    ("sec54.yaml", {"gpt2": "gpt3", "dlrm": "gpt1"}, {"gpt2": "gpt1", "dlrm": "gpt3"}),
])
def test_themis_and_cassini_choose_the_papers_placements(spec, themis, cassini):
    assert beside(CASSINI / spec, "themis") == themis
    assert beside(CASSINI / spec, "themis+cassini") == cassini


@pytest.mark.parametrize("spec", ["sec53.yaml", "sec54.yaml"])
def test_cassinis_placement_marks_fewer_packets_in_the_simulator(spec):
    marks = {s: simulate_spec(interleave.load_spec(CASSINI / spec, s))["totals"]["ecn_marks"]
             for s in ("themis", "themis+cassini")}
    assert marks["themis+cassini"] < marks["themis"], marks
