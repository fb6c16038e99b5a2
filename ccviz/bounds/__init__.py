"""Bounds: closed-form costs, the fabric's limit and lower bounds no schedule can beat."""
