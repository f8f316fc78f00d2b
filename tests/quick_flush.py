"""The flush after each transactional test, less the half that remakes the same rows.

Django's TransactionTestCase empties every table after the test (`manage.py flush`), then
sends post_migrate, which makes every content type and permission again: the rows the
migrations made, one query each. That second half was 28 ms of the worker's CPU and ~50 ms of
the test's time, after each of the suite's ~750 transactional tests. Here the two tables it
remakes are kept; every other table is emptied as before, in one TRUNCATE.

Kept only while they hold what a full flush leaves: a test may change them (the migration
tests rewrite content types as an old version left them). Their checksum is taken after each
full flush; a teardown that finds another one flushes the whole way, as Django does.
"""

from __future__ import annotations

from django.db import connections, transaction
from django.test import TransactionTestCase

KEPT_TABLES = ("django_content_type", "auth_permission")
_CHECKSUM = """
SELECT (SELECT md5(coalesce(string_agg(concat_ws(',', id, app_label, model), ';'
                                       ORDER BY id), ''))
          FROM django_content_type),
       (SELECT md5(coalesce(string_agg(concat_ws(',', id, content_type_id, codename, name), ';'
                                       ORDER BY id), ''))
          FROM auth_permission)
"""

_full_flush = TransactionTestCase._fixture_teardown
_after_full_flush: dict[str, tuple] = {}  # database name → the kept tables' checksum


def _checksum(connection) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(_CHECKSUM)
        return cursor.fetchone()


def _flush_keeping_static_rows(self) -> None:
    if self.available_apps is not None or self.serialized_rollback:
        _full_flush(self)  # flushes that Django words otherwise: as Django does them
        return
    for alias in self._databases_names(include_mirrors=False):
        connection = connections[alias]
        name = connection.settings_dict["NAME"]
        if _after_full_flush.get(name) != _checksum(connection):
            _full_flush(self)
            _after_full_flush[name] = _checksum(connection)
            continue
        tables = [
            table
            for table in connection.introspection.django_table_names(
                only_existing=True, include_views=False
            )
            if table not in KEPT_TABLES
        ]
        if tables:
            with transaction.atomic(using=alias), connection.cursor() as cursor:
                cursor.execute("TRUNCATE " + ", ".join(map(connection.ops.quote_name, tables)))


def install() -> None:
    TransactionTestCase._fixture_teardown = _flush_keeping_static_rows
