import pytest

from harness.linkmodel import K_MIN_PACKETS, LinkError, LinkParams


def test_default_is_50mbps_jumbo_with_measured_queue():
    p = LinkParams.default()
    assert p.rate_mbps == 50 and p.mtu == 9000
    assert p.ecn_k_bytes == K_MIN_PACKETS * 9000          # 90 KB: the K the platform probe used
    assert p.queue_bytes == 300_000                       # 48 ms at 50 Mbit/s, measured fidelity 0.96
    assert p.ecn_k_bytes < p.queue_bytes


def test_scaling_keeps_reference_relation_where_packets_allow():
    # at 50 Gbit/s the rule gives back CASSINI's WRED threshold (1000 cells of 80 B)
    p = LinkParams.scaled(50_000, mtu=1500)
    assert p.ecn_k_bytes == 80_000
    # and it grows linearly with the rate above the packet floor
    assert LinkParams.scaled(100_000, mtu=1500).ecn_k_bytes == 160_000


def test_floor_in_packets_at_emulated_rates():
    for rate in (10, 20, 50, 100):
        p = LinkParams.scaled(rate, mtu=1500)
        assert p.ecn_k_bytes == K_MIN_PACKETS * 1500
        assert p.queue_bytes >= 3 * p.ecn_k_bytes


def test_queue_grows_with_rate():
    assert LinkParams.scaled(100).queue_bytes == 600_000
    assert LinkParams.scaled(20).queue_bytes == 270_000  # 3 x K dominates 48 ms


def test_burst_at_least_three_frames():
    assert LinkParams.scaled(10).burst_bytes == 3 * 9014
    assert LinkParams.scaled(1000).burst_bytes == 125_000


def test_explicit_values_override():
    p = LinkParams.from_spec({"rate_mbps": 20, "ecn_k_bytes": 30000, "queue_bytes": 100000, "mtu": 1500})
    assert (p.rate_mbps, p.ecn_k_bytes, p.queue_bytes, p.mtu) == (20, 30000, 100000, 1500)


@pytest.mark.parametrize("spec,key", [
    ({"rate_mbps": 0}, "link.rate_mbps"),
    ({"rate_mbps": -5}, "link.rate_mbps"),
    ({"rate_mbps": "fast"}, "link.rate_mbps"),
    ({"mtu": 100}, "link.mtu"),
    ({"ecn_k_bytes": 500_000, "queue_bytes": 300_000}, "link.ecn_k_bytes"),
    ({"ecn_k_bytes": 100}, "link.ecn_k_bytes"),
    ({"queue_bytes": 1000}, "link.queue_bytes"),        # below two MTUs: the queue is named, not K
    ({"speed": 3}, "link.speed"),
])
def test_bad_link_values_name_key_and_value(spec, key):
    with pytest.raises(LinkError) as e:
        LinkParams.from_spec(spec)
    assert e.value.key == key
    assert str(e.value).startswith(key)


def test_delay_is_a_time_kept_by_the_scaling_rule_and_stretched_by_dilation():
    from agents.timing import Dilation
    p = LinkParams.from_spec({"rate_mbps": 50, "delay_ms": 2, "sharing": "fair"})
    assert p.delay_ms == 2.0 and LinkParams.from_spec({}).delay_ms == 0.0
    d = p.dilated(Dilation(3))
    assert (d.rate_mbps, d.delay_ms, d.sharing) == (pytest.approx(50 / 3), 6.0, "fair")
    assert p.dilated(Dilation(1)) is p
    for bad in (-1, float("nan"), "soon"):
        with pytest.raises(LinkError, match="link.delay_ms"):
            LinkParams.from_spec({"delay_ms": bad})
