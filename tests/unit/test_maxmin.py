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
