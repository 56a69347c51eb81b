"""Experiment sets (interleave reproduce): loading, resuming, aggregation, floors; simulated sets."""
import json
from pathlib import Path

import pytest

from harness import sets
from harness.errors import UsageError


def write_set(tmp_path, body):
    p = tmp_path / "s.yaml"
    p.write_text(body)
    return p


SPEC = str(Path(__file__).resolve().parents[2] / "experiments/demo.yaml")


def test_bad_set_files_name_the_key(tmp_path):
    with pytest.raises(UsageError, match="runs"):
        sets.load_set(write_set(tmp_path, "name: x\n"))
    with pytest.raises(UsageError, match=r"repeats: value 0"):
        sets.load_set(write_set(tmp_path, f"repeats: 0\nruns: [{{spec: {SPEC}, schedulers: [themis]}}]\n"))
    with pytest.raises(UsageError, match=r"floors\[0\]"):
        sets.load_set(write_set(tmp_path, f"runs: [{{spec: {SPEC}, schedulers: [themis]}}]\n"
                                          "floors: [{spec: demo, base: themis, other: x, metric: nope, min: 1}]\n"))
    with pytest.raises(UsageError, match="scheduler"):      # every spec x scheduler validated up front
        sets.load_set(write_set(tmp_path, f"runs: [{{spec: {SPEC}, schedulers: [bogus]}}]\n"))


@pytest.mark.parametrize("body,message", [
    ("repeat: 3\nruns: [{{spec: {spec}, schedulers: [themis]}}]\n",
     "key repeat: value 3 is not a set key; allowed: name, repeats, runs, floors"),
    ("runs: [{{spec: {spec}, schedulers: [themis]}}]\nfloor: [{{spec: demo}}]\n", "key floor: value"),
    ("runs: [{{spec: {spec}, schedulers: [themis], repeat: 2}}]\n", "key runs[0].repeat: value 2 is not a run key"),
    ("runs: [{{spec: {spec}, schedulers: [themis, cassini]}}]\n", "key runs[0].schedulers[1]: value 'cassini'"),
    ("runs: [{{spec: {spec}, schedulers: themis}}]\n", "key runs[0].schedulers: value 'themis' is not a list"),
    ("runs: [{{spec: {spec}, schedulers: [themis], repeats: 0}}]\n", "key runs[0].repeats: value 0"),
    ("runs: [{{spec: {spec}, schedulers: [themis], label: 7}}]\n", "key runs[0].label: value 7"),
    ("runs: [{{spec: {spec}, scheduler: [themis]}}]\n", "key runs[0].scheduler: value ['themis'] is not a run key"),
    ("runs: [{{spec: nowhere.yaml, schedulers: [themis]}}]\n", "key runs[0].spec: value 'nowhere.yaml' is not a file"),
    ("runs: [{{spec: {spec}, schedulers: [themis]}}, {{spec: {spec}, schedulers: [fixed]}}]\n",
     "'demo' names two runs"),
    ("runs: [{{spec: {spec}, schedulers: [themis]}}]\nfloors: [{{spec: demo, base: themis, other: ideal, "
     "metric: ecn_marks, min: 1}}]\n", "key floors[0].other: value 'ideal' is not a scheduler of run demo"),
    ("runs: [{{spec: {spec}, schedulers: [themis, ideal]}}]\nfloors: [{{spec: demo, base: themis, other: ideal, "
     "metric: ecn_marks, min: 1, max: 2}}]\n", "key floors[0].max: value 2 is not a floor key"),
])
def test_a_typo_in_a_set_file_is_one_line_naming_the_file_and_key(tmp_path, body, message):
    path = write_set(tmp_path, body.format(spec=SPEC))
    with pytest.raises(UsageError) as e:
        sets.load_set(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value) and "\n" not in str(e.value), str(e.value)


def fake(spec, d, quiet=False, log=None):
    d.mkdir(parents=True)
    mean = 300.0 if spec.scheduler == "themis" else 250.0
    (d / "summary.json").write_text(json.dumps({
        "scheduler": spec.scheduler, "fidelity": {"ok": True}, "jobs": {},
        "totals": {"iteration_ms_mean": mean + spec.seed, "iteration_ms_p99": 400, "ecn_marks": 10,
                   "slowdown_mean": 1.0, "slowdown_p99": 1.2}}))
    fake.calls.append((spec.scheduler, spec.seed))


def test_execute_resumes_aggregates_and_checks_floors(tmp_path):
    st = sets.load_set(write_set(tmp_path, f"repeats: 2\nruns: [{{spec: {SPEC}, schedulers: [themis, themis+cassini]}}]\n"
                                           "floors: [{spec: demo, base: themis, other: themis+cassini, "
                                           "metric: iteration_ms_mean, min: 1.3}]\n"))
    fake.calls = []
    sets.execute(st, tmp_path / "out", fake, log=lambda m: None)
    assert sorted(fake.calls) == [("themis", 1), ("themis", 2), ("themis+cassini", 1), ("themis+cassini", 2)]
    fake.calls = []
    sets.execute(st, tmp_path / "out", fake, log=lambda m: None)      # complete runs are kept
    assert fake.calls == []
    table = sets.aggregate(st, tmp_path / "out")
    row = table["demo"]["schedulers"]["themis"]
    assert row["iteration_ms_mean"] == pytest.approx(301.5) and row["runs"] == 2
    assert table["demo"]["ratios"]["themis vs themis+cassini"]["iteration_ms_mean"] == pytest.approx(301.5 / 251.5, abs=1e-3)
    (f, got, ok), = sets.check_floors(st, table)
    assert not ok and got == pytest.approx(1.199, abs=1e-3)


def test_simulated_set_writes_complete_directories(tmp_path):
    st = sets.load_set(write_set(tmp_path, f"runs: [{{spec: {SPEC}, schedulers: [themis, themis+cassini], "
                                           "background: 0.0, label: demo-sim}]\n"))
    sets.execute(st, tmp_path / "o", sets.simulated_run, log=lambda m: None)
    md, _ = sets.write(st, tmp_path / "o", plots=False)
    assert "| demo-sim | themis vs themis+cassini | 1 | 1.19x |" in md
    assert not list((tmp_path / "o").rglob("*.partial"))


def test_mean_ci_is_students_t_interval():
    m, ci = sets.mean_ci([1.0, 2.0, 3.0, None])
    # t(0.975, 2) = 4.30265; s = 1; half width = 4.30265 / sqrt(3) = 2.48414
    assert m == 2.0 and ci == pytest.approx([0.0, 4.48414], abs=1e-4)      # t's -0.484, cut at 0
    assert sets.mean_ci([5.0]) == (5.0, None) and sets.mean_ci([]) == (None, None)


def flagged(spec, d, quiet=False, log=None):
    """themis repeat 0 is flagged by the fidelity guard; the rest are clean."""
    d.mkdir(parents=True)
    ok = not (spec.scheduler == "themis" and spec.seed == 1)
    mean = (300.0 if spec.scheduler == "themis" else 250.0) + spec.seed + (0 if ok else 1000)
    (d / "summary.json").write_text(json.dumps({
        "scheduler": spec.scheduler, "fidelity": {"ok": ok, "notes": [] if ok else ["cpu"]}, "jobs": {},
        "totals": {"iteration_ms_mean": mean, "ecn_marks": 10}}))


def test_flagged_runs_are_excluded_counted_and_unpaired(tmp_path):
    st = sets.load_set(write_set(tmp_path, f"repeats: 3\nruns: [{{spec: {SPEC}, schedulers: [themis, themis+cassini]}}]\n"))
    sets.execute(st, tmp_path / "out", flagged, log=lambda m: None)
    table = sets.aggregate(st, tmp_path / "out")
    row = table["demo"]["schedulers"]["themis"]
    assert (row["runs"], row["excluded"]) == (2, 1)
    assert row["iteration_ms_mean"] == pytest.approx(302.5)          # seeds 2 and 3; the 1301 ms run left out
    rt = table["demo"]["ratios"]["themis vs themis+cassini"]
    assert rt["pairs"] == 2                                           # repeats 1 and 2 (seeds 2, 3)
    assert rt["iteration_ms_mean"] == pytest.approx((302 / 252 + 303 / 253) / 2, abs=1e-3)
    md = sets.markdown(st, table)
    assert "| demo | themis | 2 / 1 | 302.5 [" in md


def test_publish_replaces_only_the_sets_block(tmp_path):
    st = {"name": "demo"}
    doc = tmp_path / "R.md"
    doc.write_text("intro\n<!-- interleave reproduce demo -->\nold\n<!-- end interleave reproduce demo -->\nafter\n")
    sets.publish(st, "# title\n\n| a |\n", doc, "interleave reproduce s.yaml", dates=("2026-12-01", "2026-12-02"))
    text = doc.read_text()
    assert text.startswith("intro\n<!-- interleave reproduce demo -->\nGenerated by `interleave reproduce s.yaml` "
                           "(runs made 2026-12-01 to 2026-12-02, UTC).")
    assert "| a |" in text and "old" not in text and text.endswith("<!-- end interleave reproduce demo -->\nafter\n")
    with pytest.raises(UsageError, match="has no block"):
        sets.publish({"name": "other"}, "x", doc, "c")


def test_publish_files_a_long_per_job_table_beside_the_page(tmp_path):
    """A per-job table longer than PUBLISH_MAX_JOB_ROWS goes to <set>-jobs.md beside the page (with
    the block's command), linked from the block; a short one is published whole; what follows the
    per-job section is kept."""
    st = {"name": "demo"}
    doc = tmp_path / "R.md"
    block = "<!-- interleave reproduce demo -->\n<!-- end interleave reproduce demo -->\n"
    head = "# title\n\n## Ratios\n\n| r |\n\n## Per job (mean)\n\n| spec | job |\n| --- | --- |\n"
    for n in (sets.PUBLISH_MAX_JOB_ROWS, sets.PUBLISH_MAX_JOB_ROWS + 1):
        doc.write_text(block)
        sets.publish(st, head + "".join(f"| s | j{i} |\n" for i in range(n)) + "\n## Floors\n\n| f |\n", doc, "c")
        text = doc.read_text()
        assert "| r |" in text and "| f |" in text
        assert (f"| s | j{n - 1} |" in text) == (n <= sets.PUBLISH_MAX_JOB_ROWS)
        assert (f"{n} rows: [demo-jobs.md](demo-jobs.md)." in text) == (n > sets.PUBLISH_MAX_JOB_ROWS)
    jobs = (tmp_path / "demo-jobs.md").read_text()
    assert jobs.startswith("# demo: per job (mean)\n\nGenerated by `c` (runs made ")
    assert f"| s | j{n - 1} |" in jobs and "| spec | job |" in jobs


def test_a_block_under_a_section_nests_its_headings(tmp_path):
    doc = tmp_path / "R.md"
    other = "<!-- interleave reproduce x -->\n## Ratios\n<!-- end interleave reproduce x -->\n"
    for above, level in (("# Page\n", "## "), ("# Page\n\n## Section\n", "### "), ("# Page\n" + other, "## ")):
        doc.write_text(above + "<!-- interleave reproduce demo -->\n<!-- end interleave reproduce demo -->\n")
        sets.publish({"name": "demo"}, "# t\n\n| x |\n\n## Ratios\n\n| r |\n", doc, "c")
        assert f"\n{level}Ratios\n" in doc.read_text()


def test_a_pair_with_zero_marks_in_the_second_is_counted_not_dropped_silently():
    runs = {k: {"totals": {"ecn_marks": m}} for k, m in enumerate([40, 30, 50])}
    other = {k: {"totals": {"ecn_marks": m}} for k, m in enumerate([4, 0, 10])}
    rt = sets.ratio_row(runs, other, {}, {})
    assert rt["ecn_marks"] == pytest.approx(7.5) and rt["ecn_marks_unbounded"] == 1 and rt["pairs"] == 3
    assert "+1 pair(s) with 0 in the second" in sets.fmt(rt, "ecn_marks", "x", 1)


def test_validation_compares_simulated_with_emulated_runs(tmp_path):
    st = sets.load_set(write_set(tmp_path, f"repeats: 2\nruns: [{{spec: {SPEC}, schedulers: [themis, themis+cassini]}}]\n"))
    fake.calls = []
    sets.execute(st, tmp_path / "emu", fake, log=lambda m: None)
    sets.execute(st, tmp_path / "sim", sets.simulated_run, log=lambda m: None)
    md, rows = sets.validation(st, tmp_path / "emu", tmp_path / "sim")
    by = {r["scheduler"]: r for r in rows}
    sim = json.loads((sets.run_dir(tmp_path / "sim", "demo", "themis", 0) / "summary.json").read_text())
    assert by["themis"]["emulated"] == pytest.approx(301.5) and by["themis"]["runs"] == 2
    assert by["themis"]["simulated"] == pytest.approx(sim["totals"]["iteration_ms_mean"], abs=1e-3)
    assert by["themis"]["deviation"] == pytest.approx(by["themis"]["simulated"] / 301.5 - 1, abs=1e-4)
    n_in = sum(1 for r in rows if r["within"])
    assert f"**{n_in} of 2**" in md


def test_tables_give_the_overhead_ratio_and_what_preemptions_cost(tmp_path):
    """The ratio table has a communication-overhead column; preemption counts are averaged per
    scheduler (never a ratio) and listed only for a scheduler that preempted."""
    def run(spec, d, quiet=False, log=None):
        d.mkdir(parents=True)
        pre = spec.scheduler == "themis+cassini"
        (d / "summary.json").write_text(json.dumps({"scheduler": spec.scheduler, "fidelity": {"ok": True}, "jobs": {},
            "totals": {"iteration_ms_mean": 300.0, "communication_overhead_s": 40.0 if pre else 100.0,
                       "preemptions": 2 * pre + spec.seed - 1, "restarts": 2 * pre, "restart_gpu_s": 180.0 * pre}}))
    st = sets.load_set(write_set(tmp_path, f"repeats: 2\nruns: [{{spec: {SPEC}, schedulers: [themis, themis+cassini]}}]\n"))
    sets.execute(st, tmp_path / "o", run, log=lambda m: None)
    md, _ = sets.write(st, tmp_path / "o", plots=False)
    ratios = next(line for line in md.splitlines() if line.startswith("| demo | themis vs themis+cassini"))
    assert ratios.endswith("| 2.50x (every repeat equal) |")
    table = sets.aggregate(st, tmp_path / "o")
    assert "preemptions" not in table["demo"]["ratios"]["themis vs themis+cassini"]
    assert "| demo | themis+cassini | 2.5 [0.0, 8.9] | 2.0 (every repeat equal) | 180 GPU-s (every repeat equal) |" in md
    assert "| demo | themis | 0.5" in md       # seed 2's single preemption


def test_tuning_choices_count_the_runs_per_choice():
    a = {"high": [600.0, 600.0], "medium": [0.0, 0.0], "low": [0.0, 0.0]}
    b = {"high": [60.0, 60.0], "medium": [0.0, 0.0], "low": [0.0, 0.0]}
    rec = lambda chosen, held: {"objective": "jct_mean", "chosen": chosen, "tried": [{}] * 12, "held_out": held}
    got = sets.tuning_choices([rec(a, True), rec(b, True), rec(a, True)])
    assert got == {"objective": "jct_mean", "held_out": True, "grid": 12, "chosen": [[a, 2], [b, 1]]}
    assert sets.tuning_choices([rec(a, True), rec(a, False)])["held_out"] is False


def test_per_job_rows_give_intervals_and_ect_only_for_program_jobs(tmp_path):
    """Each job's mean step over the repeats with its 95 % interval; the completion-time table lists
    the jobs that have an ECT (program jobs), each with its own step, not the totals over every job."""
    def run(spec, d, quiet=False, log=None):
        d.mkdir(parents=True)
        k = spec.seed - 1
        jobs = {"a": {"model": "gpt2", "iteration_ms_mean": 1500.0 + 10 * k, "ect_ms_mean": 200.0 + 2 * k},
                "b": {"model": "vgg19", "iteration_ms_mean": 460.0 + 4 * k}}
        (d / "summary.json").write_text(json.dumps({"scheduler": spec.scheduler, "fidelity": {"ok": True},
                                                    "jobs": jobs, "totals": {"iteration_ms_mean": 600.0}}))
    st = sets.load_set(write_set(tmp_path, f"repeats: 2\nruns: [{{spec: {SPEC}, schedulers: [themis]}}]\n"))
    sets.execute(st, tmp_path / "o", run, log=lambda m: None)
    md, _ = sets.write(st, tmp_path / "o", plots=False)
    # two values 10 apart: mean +- t(0.975, 1) * 10 / sqrt(2) / sqrt(2) = 12.706 * 5
    assert "| demo | themis | a | gpt2 | 1505.0 [1441.5, 1568.5] ms | - |" in md
    assert "| demo | themis | b | vgg19 | 462.0 [436.6, 487.4] ms | - |" in md
    ect = md.split("## EchelonFlow completion time")[1]
    assert "| demo | themis | a | 1505.0 [1441.5, 1568.5] ms | 201.0 [188.3, 213.7] ms |" in ect
    assert "| b |" not in ect and "600" not in ect


def test_intervals_are_cut_at_zero_and_equal_repeats_say_so():
    m, ci = sets.mean_ci([0, 0, 300])               # counts: a t interval would reach below 0
    assert m == 100.0 and ci[0] == 0.0 and ci[1] > 300
    m, ci = sets.mean_ci([5.0, 5.0, 5.0])            # a deterministic spec's repeats
    assert (m, ci) == (5.0, [5.0, 5.0])
    assert sets.fmt({"x": m, "x_ci": ci}, "x", " ms", 1) == "5.0 ms (every repeat equal)"


def test_a_ratio_with_zero_marks_on_every_pair_is_unbounded_not_inf_and_clears_its_floor():
    base = {k: {"totals": {"ecn_marks": m}} for k, m in enumerate([40, 30])}
    zero = {k: {"totals": {"ecn_marks": 0}} for k in range(2)}
    rt = sets.ratio_row(base, zero, {"ecn_marks": 35}, {"ecn_marks": 0})
    assert rt["ecn_marks"] is None and rt["ecn_marks_unbounded"] == 2
    assert sets.fmt(rt, "ecn_marks", "x", 1) == "unbounded (the second is 0 in 2 pair(s))"
    means = sets.ratio_row({}, {}, {"ecn_marks": 35}, {"ecn_marks": 0})        # no pair: the means
    assert means["ecn_marks"] is None and sets.fmt(means, "ecn_marks", "x") == "unbounded (the second's mean is 0)"
    st = {"floors": [{"spec": "d", "base": "a", "other": "b", "metric": "ecn_marks", "min": 3.0}]}
    [(_f, got, ok)] = sets.check_floors(st, {"d": {"ratios": {"a vs b": rt}}})
    assert (got, ok) == ("unbounded", True)
    json.dumps(rt, allow_nan=False)                  # table.json stays JSON (no Infinity)


def test_run_dates_are_the_days_the_runs_completed(tmp_path):
    import os
    assert sets.run_dates(tmp_path) is None
    for name, stamp in (("a", 1764547200), ("b/c", 1764720000)):      # 2025-12-01, 2025-12-03 00:00 UTC
        f = tmp_path / name / "summary.json"
        f.parent.mkdir(parents=True)
        f.write_text("{}")
        os.utime(f, (stamp, stamp))
    assert sets.run_dates(tmp_path, None) == ("2025-12-01", "2025-12-03")


def test_a_signed_quantity_keeps_its_interval_below_zero():
    m, ci = sets.mean_ci([-0.02, -0.021, -0.019], floor=None)
    assert m == pytest.approx(-0.02) and ci[0] < m < ci[1] < 0
    assert sets.mean_ci([-0.02, -0.021, -0.019])[1][0] == 0.0          # the sets' tables: cut at 0
