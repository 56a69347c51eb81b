"""Progress of long work on stderr, with elapsed and estimated remaining time: a live bar (tqdm) when
stderr is a terminal; otherwise one plain, newline-terminated status line every ``STATUS_EVERY_S``
seconds, so that a log (``make demo > log``, a nightly job) reads line by line. ``SetProgress`` adds
the position and remaining time of a whole experiment set (``interleave reproduce``).
"""
import sys
import time

STATUS_EVERY_S = 10.0


def hms(seconds):
    """12 s, 3 min 04 s, 1 h 02 min."""
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Progress:
    """``update(done, status)`` with an absolute count out of ``total``; ``close()`` at the end."""

    def __init__(self, total, unit, desc="", quiet=False, stream=None, every_s=STATUS_EVERY_S, clock=time.monotonic,
                 delay_s=0.0):
        """``delay_s``: nothing is shown before this much time has passed (work that is usually quick
        stays silent; a long one gets its progress)."""
        self.total, self.unit, self.desc, self.quiet = max(1, int(total)), unit, desc, quiet
        self.stream = stream or sys.stderr
        self.every_s, self.clock, self.delay_s = every_s, clock, delay_s
        self.t0 = clock()
        self.last = None
        self.bar = None
        if not quiet and self.stream.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, unit=unit, desc=desc, file=self.stream, dynamic_ncols=True,
                            leave=False, mininterval=0.5, delay=delay_s)

    def remaining_s(self, done):
        elapsed = self.clock() - self.t0
        return None if done <= 0 else elapsed / done * max(0, self.total - done)

    def line(self, done, status=""):
        elapsed = self.clock() - self.t0
        left = self.remaining_s(done)
        eta = f", about {hms(left)} left" if left is not None else ""
        head = f"{self.desc}: " if self.desc else ""
        tail = f"; {status}" if status else ""
        return (f"  {head}{done}/{self.total} {self.unit} ({done / self.total:.0%}), "
                f"{hms(elapsed)} elapsed{eta}{tail}")

    def update(self, done, status=""):
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.n = min(done, self.total)
            if status:
                self.bar.set_postfix_str(status, refresh=False)
            self.bar.refresh()
            return
        now = self.clock()
        if now - self.t0 < self.delay_s:
            return
        if self.last is None or now - self.last >= self.every_s:
            self.last = now
            print(self.line(done, status), file=self.stream, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class SetProgress:
    """Where a set is: ``label(n)`` before run n (1-based) of ``total`` gives "run n/N, about T
    left for the set", T from the mean time of the runs this invocation ran (kept runs cost none)."""

    def __init__(self, total, clock=time.monotonic):
        self.total, self.clock = total, clock
        self.ran, self.spent, self.started = 0, 0.0, None

    def begin(self):
        self.started = self.clock()

    def end(self):
        if self.started is not None:
            self.ran += 1
            self.spent += self.clock() - self.started
            self.started = None

    def label(self, n):
        left = "" if not self.ran else f", about {hms(self.spent / self.ran * (self.total - n + 1))} left for the set"
        return f"run {n}/{self.total}{left}"
