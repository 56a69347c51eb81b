"""CASSINI (NSDI '24) Table 2, the snapshot trace: per snapshot, its compatibility score and its jobs,
each with its batch size, the average communication time the paper measured under Th+CASSINI and
under Themis (ms) and the time-shift CASSINI gave it (ms). Jobs are named as in
experiments/cassini/snapshotN.yaml.
"""
from collections import namedtuple

Row = namedtuple("Row", "snapshot job model batch cassini_ms themis_ms shift_ms")

SCORES = {1: 1.0, 2: 1.0, 3: 0.9, 4: 0.8, 5: 0.6}
ROWS = (Row(1, "wrn101", "wideresnet101", 800, 138, 205, 0), Row(1, "vgg16", "vgg16", 1400, 148, 199, 150),
        Row(2, "vgg19", "vgg19", 1400, 168, 220, 0), Row(2, "vgg16", "vgg16", 1700, 163, 220, 158),
        Row(2, "resnet50", "resnet50", 1600, 59, 55, 46),
        Row(3, "vgg19", "vgg19", 1024, 166, 176, 0), Row(3, "vgg16", "vgg16", 1200, 168, 177, 100),
        Row(4, "roberta-a", "roberta", 12, 164, 210, 0), Row(4, "roberta-b", "roberta", 12, 180, 208, 60),
        Row(5, "bert", "bert", 8, 209, 213, 0), Row(5, "vgg19", "vgg19", 1400, 294, 292, 42),
        Row(5, "wrn101", "wideresnet101", 800, 265, 266, 191))
# the rows whose jobs ran interleaved (score >= 0.8, Fig. 15(a)-(d)); snapshot 5's collided (Fig. 15(e))
INTERLEAVED = tuple(r for r in ROWS if SCORES[r.snapshot] >= 0.8)


def alone(r):
    """(the communication time row ``r``'s job takes alone, its column): Table 2's Th+CASSINI time, or
    its Themis time where that is shorter, since sharing a link makes no job faster."""
    return (r.themis_ms, "Themis") if r.themis_ms < r.cassini_ms else (r.cassini_ms, "Th+CASSINI")


def snapshot(n):
    """The rows of snapshot ``n``."""
    return [r for r in ROWS if r.snapshot == n]


def row(n, job):
    """The row of job ``job`` in snapshot ``n``, or None."""
    return next((r for r in ROWS if r.snapshot == n and r.job == job), None)
