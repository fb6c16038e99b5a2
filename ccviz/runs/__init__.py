"""Whole runs built on the stages below: one run (synthesize, judge, bound), comparisons, sweeps on a
cluster, workloads of concurrent process groups, and the reproduction of published tables."""
