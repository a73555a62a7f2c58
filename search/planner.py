"""What a search tells PostgreSQL before its statement, in one place: how the HNSW graph is walked, and whether a
plan may run in parallel; and how the settings are sent and ended (rows_after_settings)."""

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


def rows_after_settings(cursor, sql: str, params, *, ef_search: int, serial: bool = False) -> list[tuple]:
    """The rows of `sql`, sent after graph_walk_settings in one simple query: one round trip, run as one transaction,
    so the settings end with it. Inside a caller's transaction the walk's settings last to its end: only an HNSW scan
    reads them, and every search sends its own. A serial plan's setting would bind every later statement of the
    caller, so it ends with a savepoint rolled back (the statement only reads); a savepoint adds round trips to a
    write's neighbour lookup, under the user's lock, so only a serial search pays for one."""
    statement = graph_walk_settings(ef_search=ef_search, serial=serial) + sql
    connection = cursor.db
    if not serial or connection.get_autocommit():
        return _rows(cursor, statement, params)
    with transaction.atomic(using=connection.alias):
        rows = _rows(cursor, statement, params)
        transaction.set_rollback(True, using=connection.alias)
    return rows


def _rows(cursor, statement: str, params) -> list[tuple]:
    cursor.execute(statement, params)
    cursor.nextset()  # past the settings' row
    return cursor.fetchall()
