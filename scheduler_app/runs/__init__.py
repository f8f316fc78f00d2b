"""Runs: made one at a time (launch) or many at once (batch), with their executor (executor),
the code they run (code) and their logs (log_reader, log_store, failure_line)."""
