"""How much work a statement's plan did, read from EXPLAIN ANALYZE: a test that the work
grows with the rows, not with their square, whatever plan the statistics lead to."""

from __future__ import annotations

from django.db import connection


def stale_statistics(model, fill) -> None:
    """Statistics that say `model`'s table holds no row in pages it has: `fill()` adds rows,
    they go, and ANALYZE runs (a table whose rows were deleted, before new ones came)."""
    fill()
    model.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {model._meta.db_table}")


def rows_through(sql: str, params: dict) -> int:
    """Rows every node of the statement's plan returned, over all its loops (it runs)."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0][0]["Plan"]
    return _rows(plan)


def _rows(node: dict) -> int:
    own = int(node.get("Actual Rows", 0) * node.get("Actual Loops", 1))
    return own + sum(_rows(child) for child in node.get("Plans", []))
