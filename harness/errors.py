"""Error types and the exit statuses they map to (documented in the README).

  2  bad input: a bad argument or a bad spec; the message names file, key, value and what is allowed
  3  environment problem: not root, OVS down, another run active; the message says the fix
  1  a check that ran and failed (netcheck, a test of the fabric)
  70 an internal error (a bug): one line and the path of the saved traceback
"""
import math

EXIT_FAILED, EXIT_USAGE, EXIT_ENV, EXIT_INTERNAL = 1, 2, 3, 70


def require_number(key, value, minimum=0.0, strict=True, whole=False, error=None):
    """``value`` if it is a number (a whole one with ``whole``) above ``minimum`` (at least it, when
    not ``strict``); else raises ``error(key, value, allowed)`` (default BadValue)."""
    error = error or BadValue
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) \
            or value < minimum or (strict and value == minimum):
        what = "a whole number" if whole else "a number"
        raise error(key, value, f"{what} {'>' if strict else '>='} {minimum:g}")
    return value


class InterleaveError(Exception):
    exit_status = EXIT_FAILED


class BadValue(ValueError):
    """A value outside what is allowed: carries where (a file or spec, optional), key, value and
    what is allowed; the message is the one line users see."""

    def __init__(self, key, value, allowed, where=None):
        from harness.limits import short
        super().__init__(f"{where + ': ' if where else ''}{key}: {short(value)} is not allowed ({allowed})")
        self.where, self.key, self.value, self.allowed = where, key, value, allowed


class UsageError(InterleaveError):
    """Bad input from the user: one line naming what is wrong and what is allowed."""
    exit_status = EXIT_USAGE


class EnvError(InterleaveError):
    """The machine cannot do what was asked; ``fix`` says what to do."""
    exit_status = EXIT_ENV

    def __init__(self, problem, fix=""):
        super().__init__(f"{problem}" + (f" -- fix: {fix}" if fix else ""))
        self.problem, self.fix = problem, fix
