"""Bounds on any schedule: lower bounds and the fabric's limits."""
