"""A forkserver preload that takes 30 s (tests/unit/test_forkserver_stop.py): a busy host's
Django import, drawn out."""

import time

time.sleep(30)
