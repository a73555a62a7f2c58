"""What a search tells PostgreSQL before its statement, in one place: how the HNSW graph is walked, and whether a
plan may run in parallel. Sent with the statement in one simple query (one round trip); set with is_local, the
settings end with the statement's transaction."""

MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search


def graph_walk_settings(*, ef_search: int, serial: bool = False) -> str:
    """The statement that sets the walk: iterative scan (without it the walk stops at ef_search entries of every
    user or tenant, of which few may be the caller's; relaxed order, since the candidates are re-scored exactly
    afterwards) and `ef_search` (bounded by pgvector's maximum). serial: no parallel plan, for a statement that
    relies on the parts of an Append running in order."""
    ef_search = min(ef_search, MAX_EF_SEARCH)
    serial_setting = ", set_config('max_parallel_workers_per_gather', '0', true)" if serial else ""
    return (
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
        f" set_config('hnsw.ef_search', '{ef_search:d}', true){serial_setting};\n"
    )
