"""Metric series of runs: writes (series) and downsampled reads (queries)."""
