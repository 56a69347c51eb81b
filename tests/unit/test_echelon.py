"""EchelonFlow arrangement functions against hand-computed pipelines, and the metric."""
from pathlib import Path

import pytest

from workloads import echelon


def offsets(e):
    return {f.name: d for f, d in zip(e.flows, e.d)}


def test_gpipe_4_stages_8_microbatches():
    # forward 1 ms, backward 2 ms per micro-batch and stage. Stage s runs F(m) at s + m (ms);
    # the last forward ends at 3 + 7 + 1 = 11 ms; backwards in reverse order: stage 3 runs B(m) at
    # 11 + 2 (7 - m), stage s at 11 + 2 (3 - s) + 2 (7 - m). The reference is act:0:0 (needed at 1 ms).
    e = echelon.pipeline("g", 4, 8, fwd_ms=1, bwd_ms=2, act_bytes=1e6, schedule="gpipe")
    d = offsets(e)
    assert len(e.flows) == 3 * 8 * 2
    for s in range(3):
        for m in range(8):
            assert d[f"act:{s}:{m}"] * 1000 == pytest.approx(s + m)
            assert d[f"grad:{s + 1}:{m}"] * 1000 == pytest.approx(11 + 2 * (3 - s - 1) + 2 * (7 - m) + 2 - 1)
    assert not e.is_coflow
    # step time with every flow arriving at its ideal time (no communication): 11 + 2 x (3 + 8) = 33 ms
    assert echelon.step_time(e, {}) * 1000 == pytest.approx(11 + 2 * 8 + 2 * 3)


def test_1f1b_4_stages_8_microbatches():
    # 1F1B, forward 1 ms, backward 2 ms. Stage 3 (last, no warm-up) runs F0 B0 F1 B1 ...: F(3,0) at
    # 3, B(3,0) at 4, F(3,1) at 6 (its input F(2,1) ended at 4; stage busy until 6), ...
    e = echelon.pipeline("p", 4, 8, fwd_ms=1, bwd_ms=2, act_bytes=1e6, schedule="1f1b")
    start, _ = echelon.timeline(e.ops, e.order)
    ms = {k: round(v * 1000, 6) for k, v in start.items()}
    assert [ms[f"F:0:{m}"] for m in range(3)] == [0, 1, 2]        # 3 warm-up forwards on stage 0
    assert ms["F:3:0"] == 3 and ms["B:3:0"] == 4 and ms["F:3:1"] == 6 and ms["B:3:1"] == 7
    assert ms["B:2:0"] == 6                                       # gradient of B(3,0) ended at 6
    d = offsets(e)
    assert d["act:2:1"] * 1000 == pytest.approx(ms["F:3:1"] - 1)   # consumed by F(3,1); reference at 1 ms
    assert d["grad:3:0"] * 1000 == pytest.approx(ms["B:2:0"] - 1)
    # 1F1B keeps fewer micro-batches in flight and ends no later than GPipe here
    g = echelon.pipeline("g", 4, 8, fwd_ms=1, bwd_ms=2, act_bytes=1e6, schedule="gpipe")
    assert echelon.step_time(e, {}) <= echelon.step_time(g, {})


def test_tensor_parallel_offsets_follow_layer_compute():
    e = echelon.tensor_parallel("t", layers=4, layer_ms=5, allreduce_bytes=2e6, ranks=2)
    d = offsets(e)
    assert [d[f"ar:{l}:0"] * 1000 for l in range(3)] == pytest.approx([0, 5, 10])
    assert d["ar:1:0"] == d["ar:1:1"]          # the flows of one all-reduce share a slot


def test_data_parallel_is_a_coflow():
    e = echelon.data_parallel("d", buckets=4, bucket_bytes=1e6, ranks=4)
    assert e.is_coflow and len(e.flows) == 16


def test_data_parallel_buckets_leave_during_the_backward_and_the_update_waits_for_all():
    e = echelon.data_parallel("d", buckets=2, bucket_bytes=1e6, ranks=2, forward_ms=10, backward_ms=20)
    assert e.is_coflow
    assert echelon.step_time(e, {}) == pytest.approx(0.030)
    start, end = echelon.timeline(e.ops, e.order, {}, e.flows)
    assert end["B:0"] == pytest.approx(0.020)                  # bucket 0 leaves half-way through the backward
    assert {f.after for f in e.flows if f.name.startswith("ar:0:")} == {"B:0"}
    # bucket 0 arriving 15 ms after it left still beats the update; bucket 1's lateness delays it
    assert echelon.step_time(e, {"ar:0:0": 0.035, "ar:1:1": 0.045}) == pytest.approx(0.045)


def test_ect_metric_on_crafted_finish_times():
    d = [0.0, 0.010, 0.020]
    assert echelon.ect([0.005, 0.015, 0.025], d) == pytest.approx(0.005)     # every flow 5 ms after its slot
    assert echelon.ect([0.005, 0.015, 0.040], d) == pytest.approx(0.020)     # the last one 20 ms late
    assert echelon.ect([0.030, 0.030, 0.030], d) == pytest.approx(0.030)     # all together: the first is late
    assert echelon.coflow_completion([0.030, 0.030, 0.030]) == 0.030
    assert echelon.ect([0.0, 0.0], [0.0, 0.0]) == echelon.coflow_completion([0.0, 0.0])   # d = 0: a coflow


def test_late_arrival_delays_the_consumer():
    e = echelon.pipeline("g", 2, 2, fwd_ms=10, bwd_ms=10, act_bytes=1e6, schedule="gpipe")
    base = echelon.step_time(e, {})
    # act:0:0 is needed at 10 ms; arriving at 25 ms shifts stage 1's work by 15 ms
    assert echelon.step_time(e, {"act:0:0": 0.025}) == pytest.approx(base + 0.015)


def test_bad_offsets_are_refused():
    with pytest.raises(ValueError):
        echelon.EchelonFlow("x", 0, [echelon.Flow("a", 0, 1, 1.0)], [0.0, 1.0])


def fabric(gbps):
    """The demo's 24-host fat-tree: its routes and every directed link at ``gbps``."""
    from harness import spec as spec_mod
    from harness.routing import compute_routes
    sp = spec_mod.load(str(Path(__file__).resolve().parents[2] / "experiments/demo.yaml"))
    return compute_routes(sp.topology), {d: gbps for link in sp.topology.links for d, *_ in link.directions()}


def two_pipelines(policy, schedule="gpipe"):
    from harness.sim.flows import JobStep, simulate_steps
    routes, cap = fabric(50.0)
    steps = [JobStep(n, echelon.pipeline(n, 4, 8, 10, 20, 40e6, schedule=schedule), hosts)
             for n, hosts in (("a", ["h1", "h7", "h13", "h19"]), ("b", ["h2", "h8", "h14", "h20"]))]
    return simulate_steps(steps, routes, cap, policy)


def test_alone_every_policy_meets_the_ideal_when_links_are_fast():
    from harness.sim.flows import JobStep, simulate_steps
    routes, cap = fabric(1e6)
    e = echelon.pipeline("a", 4, 8, 10, 20, 40e6)
    for pol in ("fair", "coflow", "echelon"):
        out = simulate_steps([JobStep("a", e, ["h1", "h7", "h13", "h19"])], routes, cap, pol)["a"]
        assert out["step_s"] == pytest.approx(echelon.step_time(e, {}), abs=1e-3)
        assert out["ect_s"] == pytest.approx(0.010, abs=1e-3)        # every flow at its slot (the first at 10 ms)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_coflow_and_echelon_beat_fair_sharing_for_sharing_pipelines(schedule):
    # both order the jobs (smallest bottleneck first) instead of splitting every shared link evenly
    mean = {p: sum(v["step_s"] for v in two_pipelines(p, schedule).values()) / 2 for p in ("fair", "coflow", "echelon")}
    assert mean["echelon"] < mean["fair"] and mean["coflow"] < mean["fair"], mean


def lone_pair(policy, micro_batches=4, hop=0.0, act_bytes=40e6):
    from harness.sim.flows import JobStep, simulate_steps
    routes, cap = fabric(50.0)
    e = echelon.pipeline("a", 2, micro_batches, 1, 2, act_bytes)
    return e, simulate_steps([JobStep("a", e, ["h1", "h7"])], routes, cap, policy, hop_latency_s=hop)["a"]


def test_a_connection_sends_its_flows_one_after_another():
    # activations of 40 MB (6.4 ms at 50 Gbit/s) released every 1 ms: they queue on the stage pair's
    # connection and finish 6.4 ms apart, in order (processor sharing would finish them together)
    e, out = lone_pair("fair")
    fin = [out["finish_s"][f"act:0:{m}"] for m in range(4)]
    assert fin == sorted(fin)
    assert [b - a for a, b in zip(fin, fin[1:])] == pytest.approx([0.0064] * 3, abs=1e-6)


def test_hop_latency_is_added_to_each_arrival():
    _e, out = lone_pair("fair", micro_batches=1)
    _e, late = lone_pair("fair", micro_batches=1, hop=0.001)
    # h1 -> h7 crosses pods: 6 links
    assert late["finish_s"]["act:0:0"] - out["finish_s"]["act:0:0"] == pytest.approx(0.006, abs=1e-9)


@pytest.mark.parametrize("policy", ["coflow", "echelon"])
def test_sending_schedules_end_when_the_flows_finish(policy):
    _e, out = lone_pair(policy, hop=0.001)
    for name, pts in out["curve"].items():
        ts, xs = [p[0] for p in pts], [p[1] for p in pts]
        assert ts == sorted(ts) and xs == sorted(xs) and xs[-1] == 1.0
        assert ts[-1] + 0.006 == pytest.approx(out["finish_s"][name], abs=1e-6)   # arrival = last byte + 6 hops
        slopes = [(x1 - x0) * 40e6 / (t1 - t0) for (t0, x0), (t1, x1) in zip(pts, pts[1:]) if t1 > t0]
        assert max(slopes) <= 50e9 / 8 * (1 + 1e-6)                              # never above the link


def test_schedule_time_inverts_a_sending_schedule():
    from agents.stage import schedule_time
    ts, xs = [0.0, 0.1, 0.3, 0.4], [0.0, 0.5, 0.5, 1.0]           # half, a pause, the other half
    assert schedule_time(ts, xs, 0.25) == pytest.approx(0.05)
    assert schedule_time(ts, xs, 0.5) == pytest.approx(0.1)       # reached before the pause
    assert schedule_time(ts, xs, 0.75) == pytest.approx(0.35)
    assert schedule_time(ts, xs, 1.0) == pytest.approx(0.4)
    assert schedule_time([0.2, 0.2], [0.0, 1.0], 0.5) == pytest.approx(0.2)
