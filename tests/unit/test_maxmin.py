import pytest

from harness.maxmin import maxmin_rates


def test_single_bottleneck_splits_evenly():
    r = maxmin_rates({"a": ["l"], "b": ["l"]}, {"l": 10})
    assert r == {"a": 5, "b": 5}


def test_classic_parking_lot():
    # a crosses both links, b only l1, c only l2; l1=10, l2=4 -> a=c=2 on l2, b gets the rest of l1
    r = maxmin_rates({"a": ["l1", "l2"], "b": ["l1"], "c": ["l2"]}, {"l1": 10, "l2": 4})
    assert r["a"] == pytest.approx(2) and r["c"] == pytest.approx(2) and r["b"] == pytest.approx(8)


def test_no_link_over_capacity_and_every_flow_bottlenecked():
    flows = {f"f{i}": [f"l{i % 3}", f"l{(i + 1) % 4 + 3}"] for i in range(9)}
    cap = {f"l{i}": float(i + 1) for i in range(7)}
    r = maxmin_rates(flows, cap)
    for l, c in cap.items():
        assert sum(r[f] for f in flows if l in flows[f]) <= c + 1e-9
    for f, links in flows.items():   # each flow has a saturated link where it is among the largest
        assert any(abs(sum(r[g] for g in flows if l in flows[g]) - cap[l]) < 1e-9 and
                   r[f] >= max(r[g] for g in flows if l in flows[g]) - 1e-9 for l in links)


def test_alpha_fair_rates_on_the_parking_lot():
    """A crosses both links, B and C one each: proportional fairness gives A 1/3, alpha 2 gives
    1 / (1 + sqrt 2), and a large alpha approaches max-min's 1/2; every allocation fills both links."""
    from math import sqrt

    from harness.maxmin import alpha_fair_rates
    flows, cap = {"A": ["L1", "L2"], "B": ["L1"], "C": ["L2"], "idle": []}, {"L1": 10.0, "L2": 10.0}
    for alpha, a in ((1, 10 / 3), (2, 10 / (1 + sqrt(2))), (8, 10 / (1 + 2 ** (1 / 8)))):
        got = alpha_fair_rates(flows, cap, alpha)
        assert abs(got["A"] - a) < 1e-3 and abs(got["B"] - (10 - a)) < 1e-3 and got["idle"] == 0.0
    assert alpha_fair_rates(flows, cap, 8)["A"] > alpha_fair_rates(flows, cap, 2)["A"]
