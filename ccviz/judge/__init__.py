"""Judges of a schedule: the alpha-beta simulator and, optionally, a packet-level replay on ns-3."""
