"""A database outage as agentsys's stores report it: StoreUnavailable, which the daemon's
`db` waits out. Both Django stores (runtime_store.py, chat_store.py) are wrapped with it."""

from __future__ import annotations

import functools

from django.db import connection

from agentsys.store import StoreUnavailable
from common.db_outage import DATABASE_ERRORS, drop_connection, first_line


def raising_store_unavailable(cls):
    """Wrap every public method of `cls`: see _translated."""
    for name, method in list(vars(cls).items()):
        if callable(method) and not name.startswith("_") and name != "close":
            setattr(cls, name, _translated(method))
    return cls


def _translated(method):
    """A database outage becomes StoreUnavailable once the call's transaction is over, and
    the broken connection is dropped: runagentd serves no requests, so nothing else would
    close it, and every later call would fail on it even once the database is back."""

    @functools.wraps(method)
    def call(self, **kwargs):
        try:
            return method(self, **kwargs)
        except DATABASE_ERRORS as error:
            if connection.in_atomic_block:  # called from another method: that one translates
                raise
            drop_connection()
            raise StoreUnavailable(first_line(error)) from error

    return call
