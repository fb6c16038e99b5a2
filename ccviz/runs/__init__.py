"""Runs: one call from inputs to judged results (pipeline, sweeps, workloads of concurrent groups)."""
