"""search.nearest: one rule, for facts and the knowledge base, for how a scope's nearest vectors are found."""

import pytest

from search.nearest import NearestPath, VectorTable, nearest_path, nearest_sql


@pytest.mark.parametrize(
    ("rows", "table_rows", "has_signs", "path"),
    [
        (2_000, 2_000, True, NearestPath.SORT),  # small enough to sort, whatever its share
        (10_000, 10_100, True, NearestPath.GRAPH),  # nearly the whole table: the walk meets mostly its own rows
        (10_000, 100_000, True, NearestPath.GRAPH),  # 10%: 10,000^2 >= 100,000 x 1,000
        (10_000, 1_010_000, True, NearestPath.SHORTLIST),  # 1%: the walk would meet ~100 other rows per own
        (10_000, 1_010_000, False, NearestPath.SORT),  # a domain without signs sorts instead
        (100_000, 10_000_000, True, NearestPath.GRAPH),  # 1% of a larger table, but a larger scope
    ],
)
def test_a_scope_is_sorted_walked_or_shortlisted_by_its_size_and_share(rows, table_rows, has_signs, path):
    assert nearest_path(rows=rows, table_rows=table_rows, sort_max_rows=2_000, has_signs=has_signs) is path


def test_the_share_that_walks_the_graph_is_one_setting(settings):
    settings.SEARCH_GRAPH_MIN_SHARE_ROWS = 10_000

    assert nearest_path(rows=10_000, table_rows=100_000, sort_max_rows=2_000, has_signs=True) is NearestPath.SHORTLIST
    assert nearest_path(rows=10_000, table_rows=10_000, sort_max_rows=2_000, has_signs=True) is NearestPath.GRAPH


@pytest.mark.parametrize(
    ("rows", "table_rows", "partitions", "path"),
    [
        # The 10,000 of a table of a million in 64 partitions by scope: its partition holds ~25,600 (its own and
        # 1/64 of the others'), a large enough share for the walk of the partition's graph.
        (10_000, 1_010_000, 64, NearestPath.GRAPH),
        (10_000, 100_010_000, 64, NearestPath.SHORTLIST),  # ~1.57 million others in its partition: shortlisted
        (10_000, 1_010_000, 1, NearestPath.SHORTLIST),  # one partition: the whole table
    ],
)
def test_in_a_table_partitioned_by_scope_the_share_is_of_the_scopes_partition(rows, table_rows, partitions, path):
    chosen = nearest_path(rows=rows, table_rows=table_rows, sort_max_rows=2_000, has_signs=True, partitions=partitions)

    assert chosen is path


def test_a_statement_that_decides_its_path_itself_holds_each_path_the_table_can_take_gated():
    with_signs = VectorTable(name="entries", key="entry_id", vector_type="halfvec", signs=True)
    without = VectorTable(name="chunks", key="id", vector_type="vector")
    gates = {path: f"gate_{path.value}" for path in NearestPath}

    both = nearest_sql(with_signs, where="scope = 1", limit="%(n)s", gates=gates)
    sorted_or_walked = nearest_sql(without, where="scope = 1", limit="%(n)s", gates=gates)
    walked = nearest_sql(without, where="scope = 1", limit="%(n)s", path=NearestPath.GRAPH)

    assert [both.count(f"gate_{path.value}") for path in NearestPath] == [1, 2, 1]  # the shortlist: twice
    assert "gate_shortlist" not in sorted_or_walked
    assert "<~>" not in sorted_or_walked
    assert sorted_or_walked.count("UNION ALL") == 1
    assert "gate_" not in walked
    assert "UNION ALL" not in walked
    assert "ORDER BY embedding <=> %(vector)s::vector\n    LIMIT %(n)s" in walked
