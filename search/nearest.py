"""How a search finds the nearest vectors of one scope (a user's facts, a tenant's chunks) in a table every scope
shares: one rule for facts and the knowledge base, in Python and, for a statement that counts its scope itself, in
SQL.

- A small scope is sorted exactly: reading each of its rows once is cheap.
- A large scope that is a large share of the rows its walk meets walks the HNSW graph: a walk visits about met /
  scope rows for each of the scope's it finds, so it costs little when the scope is most of what it meets.
- A large scope that is a small share of them would make the walk visit mostly other scopes' rows, so it is read
  without the graph: a domain that keeps its vectors' signs (facts: FactSearchEntry.signs, in the index the scope is
  read by) takes a shortlist by their Hamming distance and re-scores it with the vectors; the others sort their rows
  exactly.

The rows a walk meets are its partition's: the table's, or, in a table hash-partitioned by scope (facts, by user),
the scope's own and an even share of the others' (the partitions' graphs are separate). The graph is walked while
rows^2 >= met rows x SEARCH_GRAPH_MIN_SHARE_ROWS: a scope of 10,000 rows among at most 100,000, one of 100,000 among
at most 10,000,000. docs/benchmarks.md has the measurements.

Each path's statement is written here too (nearest_sql), for the table a domain declares (VectorTable), so facts and
the knowledge base read their nearest rows alike."""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from django.conf import settings


class NearestPath(Enum):
    SORT = "sort"  # every row of the scope, exactly
    SHORTLIST = "shortlist"  # the rows nearest by their signs, re-scored exactly
    GRAPH = "graph"  # the HNSW graph of the scope's table or partition, walked until it found enough of its rows


def nearest_path(
    *, rows: float, table_rows: float, sort_max_rows: int, has_signs: bool, partitions: int = 1
) -> NearestPath:
    """The path for a scope of `rows` in a table of `table_rows` (as last estimated) hash-partitioned by scope into
    `partitions`; sort_max_rows: the domain's largest scope to sort exactly; has_signs: whether the domain keeps its
    vectors' signs."""
    if rows <= sort_max_rows:
        return NearestPath.SORT
    if walks_graph(rows=rows, table_rows=table_rows, partitions=partitions):
        return NearestPath.GRAPH
    return NearestPath.SHORTLIST if has_signs else NearestPath.SORT


def walks_graph(*, rows: float, table_rows: float, partitions: int = 1) -> bool:
    """Whether a scope too large to sort is a large enough share of the rows its walk meets for the graph's."""
    met = rows + max(table_rows - rows, 0) / partitions
    return rows * rows >= met * settings.SEARCH_GRAPH_MIN_SHARE_ROWS


def walks_graph_sql(rows: str, table_rows: str, partitions: str) -> str:
    """walks_graph as an SQL condition over three expressions, with the setting as %(graph_min_share_rows)s
    (walks_graph_params)."""
    met = f"({rows})::float8 + greatest(({table_rows}) - ({rows}), 0) / ({partitions})"
    return f"({rows})::float8 * ({rows}) >= ({met}) * %(graph_min_share_rows)s"


def walks_graph_params() -> dict:
    return {"graph_min_share_rows": settings.SEARCH_GRAPH_MIN_SHARE_ROWS}


@dataclass(frozen=True)
class VectorTable:
    """A domain's table as the nearest statements read it: its rows' `embedding` column (cosine distance), compared
    with the query's %(vector)s cast to `vector_type`, and, when `signs`, the vectors' signs (`signs`,
    binary_quantize) for the shortlist."""

    name: str
    key: str  # the column returned as `id`
    vector_type: str  # "vector" or "halfvec", the embedding column's
    signs: bool = False


# Each path's SELECT of the `limit` rows nearest %(vector)s among those `where` selects, best first, as (id,
# vector_score = 1 - cosine distance, and `columns`): the sort orders by an expression no index serves; the shortlist
# takes %(shortlist)s rows by the Hamming distance of their signs (read from the btree that selects the scope) and
# re-scores them (its join names the scope again, so a partitioned table is read in one partition); the walk orders
# by the distance the HNSW index serves (iterative scan: walked until `limit` of the scope's rows are found).
_BRANCHES = {
    NearestPath.SORT: """(SELECT {key} AS id, 1 - (embedding <=> %(vector)s::{type}) AS vector_score{columns}
    FROM {table}
    WHERE {where} AND {gate}
    ORDER BY vector_score DESC, {key} DESC
    LIMIT {limit})""",
    NearestPath.SHORTLIST: """(SELECT {key} AS id, 1 - (embedding <=> %(vector)s::{type}) AS vector_score{columns}
    FROM (
        SELECT {key} AS shortlisted FROM {table}
        WHERE {where} AND {gate}
        ORDER BY signs <~> binary_quantize(%(vector)s::{type}), {key} DESC
        LIMIT %(shortlist)s
    ) shortlist JOIN {table} ON {key} = shortlist.shortlisted
    WHERE {where} AND {gate}
    ORDER BY vector_score DESC, id DESC
    LIMIT {limit})""",
    NearestPath.GRAPH: """(SELECT {key} AS id, 1 - (embedding <=> %(vector)s::{type}) AS vector_score{columns}
    FROM {table}
    WHERE {where} AND {gate}
    ORDER BY embedding <=> %(vector)s::{type}
    LIMIT {limit})""",
}


def nearest_sql(
    table: VectorTable,
    *,
    where: str,
    limit: str,
    path: NearestPath | None = None,
    gates: Mapping[NearestPath, str] | None = None,
    columns: str = "",
) -> str:
    """The rows of `table` that `where` selects nearest the query, through `path`; or, path None, every path the
    table can take, each gated by a one-time filter of `gates` (a statement that decides its path itself) so that
    one runs. limit: an SQL expression (a placeholder); columns: more of the row's columns to return, ", a, b"."""
    if path is not None:
        paths, gates = [path], {path: "true"}
    elif gates is None:
        raise ValueError("nearest_sql: every path gated needs `gates`, or name one `path`")
    else:
        paths = [each for each in NearestPath if table.signs or each is not NearestPath.SHORTLIST]
    return "\n    UNION ALL\n    ".join(
        _BRANCHES[each].format(
            table=table.name,
            key=table.key,
            type=table.vector_type,
            where=where,
            gate=gates[each],
            limit=limit,
            columns=columns,
        )
        for each in paths
    )
