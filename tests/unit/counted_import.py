"""A forkserver preload that records each import of itself, by pid, in $COUNTED_IMPORT_LOG
(tests/unit/test_forkserver_fork_here.py): Django's import, counted."""

import os

with open(os.environ["COUNTED_IMPORT_LOG"], "a") as log:
    log.write(f"{os.getpid()}\n")
