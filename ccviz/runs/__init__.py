"""Whole runs built on the stages below: one run (synthesize, judge, bound), comparisons, sweeps on a
cluster, and the reproduction of published tables."""
