"""The judges of a schedule: the alpha-beta simulator (the only judge of correctness and timing) and,
optionally, a packet-level replay on ns-3 as a second opinion."""
