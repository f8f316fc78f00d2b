"""One moment of the database for a reader that draws rows and then follows a stream from a
position (a chat page: its messages, its live turn, the stream's last seq). Each statement
under READ COMMITTED sees its own moment: a reply committed between the read of the messages
and the read of the live turn was in neither (the turn had ended, the stream's position was
past it). Inside `read_snapshot` every read sees the same committed state (REPEATABLE READ,
read only), so a change is either in what is drawn or after the position."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import connections, transaction


@contextlib.contextmanager
def read_snapshot(using: str = "default") -> Iterator[None]:
    connection = connections[using]
    if connection.in_atomic_block:
        # Already in a transaction (a test's, or a caller's): its isolation is set by then,
        # and what it wrote must stay visible to these reads.
        yield
        return
    with transaction.atomic(using=using):
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield
