"""What a search tells PostgreSQL before its statement, in one place: how the HNSW graph is walked, and whether a
plan may run in parallel; and how the settings are sent and ended (rows_after_settings)."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import transaction

MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search


def graph_walk_settings(*, ef_search: int, serial: bool = False) -> str:
    """The statement that sets the walk: iterative scan (without it the walk stops at ef_search entries of every
    user or tenant, of which few may be the caller's; relaxed order, since the candidates are re-scored exactly
    afterwards) and `ef_search` (bounded by pgvector's maximum). serial: no parallel plan, for a statement that
    relies on the parts of an Append running in order. Set with is_local: they end with the transaction."""
    ef_search = min(ef_search, MAX_EF_SEARCH)
    serial_setting = ", set_config('max_parallel_workers_per_gather', '0', true)" if serial else ""
    return (
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
        f" set_config('hnsw.ef_search', '{ef_search:d}', true){serial_setting};\n"
    )


def rows_after_settings(cursor, settings_statement: str, sql: str, params) -> list[tuple]:
    """The rows of `sql`, sent after `settings_statement` (graph_walk_settings) in one simple query: one round trip,
    run as one transaction, so the settings end with it. Inside a caller's transaction they end with a savepoint
    rolled back (the statement only reads), so that the caller's next statements run on its own settings."""
    with _settings_ended(cursor.db):
        cursor.execute(settings_statement + sql, params)
        cursor.nextset()
        return cursor.fetchall()


@contextmanager
def _settings_ended(connection) -> Iterator[None]:
    if connection.get_autocommit():
        yield
        return
    with transaction.atomic(using=connection.alias):
        yield
        transaction.set_rollback(True, using=connection.alias)
