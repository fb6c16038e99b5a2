"""Runs: one call from inputs to a judged result, sweeps of them, and where they execute."""
