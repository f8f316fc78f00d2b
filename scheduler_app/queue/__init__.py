"""The executor queue: claims of GPUs on PostgreSQL (claims), an executor, its request and its
run changing state together (lifecycle), and why a queued request waits (wait_reasons)."""
