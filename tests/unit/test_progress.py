"""Progress lines: off a terminal, one newline-terminated status line every STATUS_EVERY_S seconds
with elapsed and remaining time; a set's remaining time from the runs it ran."""
import io

from harness.progress import Progress, SetProgress, hms


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_plain_status_lines_when_not_a_terminal():
    out, clock = io.StringIO(), Clock()
    p = Progress(200, "iterations", desc="demo", stream=out, every_s=10, clock=clock)
    for k in range(0, 201, 10):        # an update every second of the fake clock
        p.update(k, "jobs running 2")
        clock.t += 1.0
    p.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and len(lines) == 3         # at 0 s, 10 s, 20 s
    assert lines[1] == "  demo: 100/200 iterations (50%), 10 s elapsed, about 10 s left; jobs running 2"
    assert "about" not in lines[0]                                   # nothing done yet: no estimate


def test_quiet_prints_nothing():
    out = io.StringIO()
    p = Progress(10, "runs", stream=out, quiet=True)
    p.update(5)
    assert out.getvalue() == ""


def test_set_progress_estimates_from_the_runs_it_ran():
    clock = Clock()
    sp = SetProgress(4, clock=clock)
    assert sp.label(1) == "run 1/4"
    sp.begin()
    clock.t += 120
    sp.end()
    assert sp.label(2) == "run 2/4, about 6 min 00 s left for the set"
    assert hms(5) == "5 s" and hms(3725) == "1 h 02 min"


def test_quick_work_stays_silent_and_long_work_shows_its_progress():
    out, clock = io.StringIO(), Clock()
    p = Progress(1000, "jobs", desc="simulate trace", stream=out, every_s=10, clock=clock, delay_s=5)
    for k in range(0, 1000, 100):      # one update a second: silent for the first 5 s
        p.update(k)
        clock.t += 1.0
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("  simulate trace: 500/1000 jobs (50%), 5 s elapsed, about 5 s left")
