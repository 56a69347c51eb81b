"""The schedule's timing, one owner: the iteration grid, the wrap of an offset into one period, the
re-alignment rule, and time dilation. Standard library only: the replay agents import it.

Grid. All jobs of a run share one reference instant ``t0``; slot ``k`` of a job with shift ``s`` and
period ``p`` is at ``t0 + s + k * p`` (any unit, the same for all arguments). A job that starts
later in the run starts at its first slot after an earliest instant (``first_slot``).

Alignment (decided by the planner, harness.schedulers.policy.alignment, recorded per job in
schedule.json):
  grid   the job keeps its own slots: its leader never starts an iteration before its slot and,
         late by more than ``REALIGN_FRAC`` of a period, waits for the next slot (a re-alignment);
  group  the job keeps its shift relative to the other members of its group (jobs sharing links, of
         one period or, on CASSINI's unified circle, of periods whose pattern repeats every
         ``perimeter``): it waits for the slowest member (``lag``), re-aligning when that wait is
         over ``REALIGN_FRAC`` of a period. A member's lag is how far its latest start is behind its
         own grid; lags are compared modulo the group's perimeter, where the relative pattern of
         the members repeats;
  free   the job starts each iteration when the previous one ends.

Dilation. With ``time_dilation: D`` the fabric runs at rate / D and every time of the plan is
stretched by D on the wall clock; results are reported back in undilated (model) time.
"""
import math
from fractions import Fraction

ALIGNMENTS = ("grid", "group", "free")
REALIGN_FRAC = 0.05     # CASSINI §4.2: a job late by more than 5 % of its iteration re-aligns
LAG_TOLERANCE_MS = 0.5  # a group member this little behind is not waited for
LAG_TOLERANCE = LAG_TOLERANCE_MS / 1000  # the same in seconds


def slot_time(t0, shift, k, period):
    """Start of slot ``k`` on a job's grid."""
    return t0 + shift + k * period


def first_slot(earliest, t0, shift, period):
    """The first slot index (>= 0) whose start is not before ``earliest``."""
    return max(0, int(math.ceil((earliest - t0 - shift) / period)))


def wrap(offset, period):
    """``offset`` into (-period/2, period/2]: the signed distance to the nearest grid point (a number
    or an array of them)."""
    d = offset % period
    return d - period * (d > period / 2)


def _fractions(periods):
    return [Fraction(p).limit_denominator(1000) for p in periods]


def perimeter(periods):
    """The least common multiple of ``periods`` (numbers of any unit, taken to a thousandth): where
    the members of a group repeat their relative pattern (a group of one period: that period)."""
    fr = _fractions(periods)
    return float(Fraction(math.lcm(*(f.numerator for f in fr)), math.gcd(*(f.denominator for f in fr))))


def common_divisor(periods):
    """The greatest common divisor of ``periods`` (taken to a thousandth): the offsets between the
    iteration starts of jobs of these periods take every value of one class modulo it."""
    fr = _fractions(periods)
    return float(Fraction(math.gcd(*(f.numerator for f in fr)), math.lcm(*(f.denominator for f in fr))))


def grid_lag(start, t0, slot, period):
    """How far a start is behind slot ``slot`` of its grid (``t0`` includes the shift)."""
    return start - slot_time(t0, 0.0, slot, period)


def realigns(late, period):
    """Is an iteration this late (same unit as ``period``) a re-alignment?"""
    return late > REALIGN_FRAC * period


def grid_start(t, t0, period):
    """Where a grid job's leader starts an iteration that is due at ``t`` (``t0`` includes the
    shift): (start time, re-aligned?). Early: its slot; late by more than REALIGN_FRAC of a period:
    the next slot; otherwise at once."""
    slot = round((t - t0) / period)
    dev = (t - t0) - slot * period
    if dev < 0:
        return t0 + slot * period, False
    if realigns(dev, period):
        return t0 + (slot + 1) * period, True
    return t, False


def slot_of(t, t0, period):
    """The index of the grid slot nearest to ``t`` (``t0`` includes the shift)."""
    return round((t - t0) / period)


class Dilation:
    """Model time <-> wall-clock time for ``time_dilation: D``: ``wall(x)`` = x * D for a time of the
    plan or a profile, ``model(x)`` = x / D for a measured time (seconds, ms: any unit)."""

    def __init__(self, factor=1.0):
        self.factor = float(factor)

    def wall(self, x):
        return x * self.factor

    def model(self, x):
        return x / self.factor

    def rate(self, r):
        """A link rate on the wall clock: the fabric runs D times slower."""
        return r / self.factor
