"""Schedules in and out of the formats real runtimes use: MSCCL XML, TE-CCL outputs, JSON/CSV exports."""
