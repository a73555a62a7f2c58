"""Hybrid fact search: keyword and vector channels, filters, time travel, diversity, decay, isolation."""

import math
import time
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ai.services import embed_query
from core.keywords import MAX_QUERY_TERMS
from facts.models import Fact
from facts.selectors import (
    NEAREST_MARGIN,
    NEAREST_REACH,
    facts_nearest,
    facts_nearest_statement,
    facts_search,
    facts_search_statement,
    graph_settings,
)
from facts.services import fact_reject, fact_remember, facts_import
from tenancy.services import tenant_create

pytestmark = pytest.mark.django_db

DISTRACTORS = [
    "Deploys the billing service with Kubernetes",
    "Keeps API keys in the team vault",
    "Rotates credentials every quarter",
    "Prefers short code reviews",
    "Works from Lisbon most of the year",
]


def store(tenant, contents, user_id="u1", **fields):
    return facts_import(
        tenant=tenant, facts=[{"user_id": user_id, "content": c, **fields} for c in contents], actor="test"
    )


def search(tenant, query, user_id="u1", **kwargs):
    return [hit.fact.content for hit in facts_search(tenant=tenant, user_id=user_id, query=query, **kwargs)]


def test_an_exact_code_is_found_by_the_keyword_channel(tenant):
    store(tenant, [*DISTRACTORS, "The staging deploy key is ZX-4471-QP"])

    [best, *_] = facts_search(tenant=tenant, user_id="u1", query="ZX-4471-QP", limit=3)

    assert best.fact.content == "The staging deploy key is ZX-4471-QP"
    assert best.keyword == 1.0
    assert best.score > 0


def test_a_neighbour_lookup_inside_a_write_transaction_sends_one_statement_and_no_savepoint(tenant):
    """Tests run inside a transaction, as a write's neighbour lookup does under the user's lock: the walk's settings
    go with the statement and last to the transaction's end (only an HNSW scan reads them, and each search sends its
    own), so no savepoint is paid for ending them (search.planner.rows_after_settings; kb's serial search does end
    its own: tests/kb/test_search.py)."""
    [fact] = store(tenant, ["Keeps API keys in the team vault"])
    vector = embed_query("vault", tenant=tenant, user_id="u1")

    with CaptureQueriesContext(connection) as queries:
        neighbours = facts_nearest(tenant=tenant, user_id="u1", vector=vector, limit=1)

    assert [neighbour.fact.pk for neighbour in neighbours] == [fact.pk]
    assert len(queries) == 1
    assert "set_config('hnsw.ef_search'" in queries[0]["sql"]
    assert "SAVEPOINT" not in queries[0]["sql"]


def test_every_hit_explains_its_score(tenant):
    store(tenant, DISTRACTORS)

    hits = facts_search(tenant=tenant, user_id="u1", query="vault credentials", limit=5)

    assert hits
    for hit in hits:
        assert 0 <= hit.keyword <= 1
        assert -1 <= hit.vector <= 1
        assert hit.decay == 1.0
        assert hit.score == pytest.approx((0.7 * hit.vector + 0.3 * hit.keyword) * hit.fact.confidence, abs=1e-4)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


def test_the_keyword_score_is_the_idf_of_the_matched_terms_over_the_best(tenant):
    store(tenant, ["Drinks green tea and coffee", "Drinks coffee", "Drinks coffee at night", "Drinks water", "Walks"])
    idf = {term: math.log(1 + (5 - df + 0.5) / (df + 0.5)) for term, df in {"tea": 1, "coffee": 3}.items()}

    hits = {hit.fact.content: hit.keyword for hit in facts_search(tenant=tenant, user_id="u1", query="tea coffee")}

    assert hits["Drinks green tea and coffee"] == 1.0
    assert hits["Drinks coffee"] == pytest.approx(idf["coffee"] / (idf["tea"] + idf["coffee"]), abs=1e-6)
    assert hits["Drinks water"] == hits["Walks"] == 0


def test_a_hit_is_the_fact_as_stored(tenant):
    store(tenant, DISTRACTORS, occurred_at="2024-05-07T10:00:00+02:00", metadata={"source": {"page": 3}})

    for hit in facts_search(tenant=tenant, user_id="u1", query="vault credentials", limit=5):
        stored = Fact.objects.get(pk=hit.fact.pk)
        for field in Fact._meta.concrete_fields:
            if field.name not in ("embedding", "search_text", "search_vector"):
                found, expected = getattr(hit.fact, field.attname), getattr(stored, field.attname)
                assert (found, getattr(found, "tzinfo", None)) == (expected, getattr(expected, "tzinfo", None))
        np.testing.assert_allclose(hit.fact.embedding, stored.embedding, rtol=1e-6)


def test_a_chinese_query_finds_a_chinese_fact(tenant):
    store(tenant, ["我喜欢喝绿茶", "我们的项目用 PostgreSQL", "我住在柏林", "周末喜欢爬山"])

    assert search(tenant, "用户住在哪个城市？", limit=1) == ["我住在柏林"]
    assert search(tenant, "项目用的数据库", limit=1) == ["我们的项目用 PostgreSQL"]


def test_dates_are_searchable_as_words(tenant):
    store(tenant, ["Went to the support group"], occurred_at=datetime(2023, 5, 7, tzinfo=UTC))
    store(tenant, ["Went to the climbing gym"], occurred_at=datetime(2023, 8, 1, tzinfo=UTC))

    [hit] = facts_search(tenant=tenant, user_id="u1", query="what happened in May 2023", limit=1)

    assert hit.fact.content == "Went to the support group"


def test_superseded_and_rejected_facts_are_left_out_but_as_of_brings_the_old_one_back(tenant):
    old = fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin").fact
    fact_remember(tenant=tenant, user_id="u1", content="Lives in Paris")
    rejected = fact_remember(tenant=tenant, user_id="u1", content="Dreams of living in a castle").fact
    fact_reject(tenant=tenant, fact_id=rejected.pk, actor="staff:1")
    old.refresh_from_db()

    assert search(tenant, "where does the user live") == ["Lives in Paris"]
    during = old.valid_from + (old.valid_to - old.valid_from) / 2
    assert search(tenant, "where does the user live", as_of=during) == ["Lives in Berlin"]


def test_pending_facts_only_when_asked(tenant):
    fact_remember(tenant=tenant, user_id="u1", content="Might move to Oslo", confidence=0.3)

    assert search(tenant, "Oslo") == []
    assert search(tenant, "Oslo", include_pending=True) == ["Might move to Oslo"]


def test_filters_by_category_agent_and_time(tenant):
    store(tenant, ["Prefers tea over coffee"], category="preference", agent_id="cook")
    store(
        tenant, ["Decided to drink tea in meetings"], category="decision", occurred_at=datetime(2024, 1, 1, tzinfo=UTC)
    )

    assert search(tenant, "tea", categories=["decision"]) == ["Decided to drink tea in meetings"]
    assert search(tenant, "tea", agent_id="cook") == ["Prefers tea over coffee"]
    assert search(
        tenant,
        "tea",
        occurred_after=datetime(2023, 12, 1, tzinfo=UTC),
        occurred_before=datetime(2024, 2, 1, tzinfo=UTC),
    ) == ["Decided to drink tea in meetings"]


def test_mmr_keeps_a_near_duplicate_out_of_the_top_three(tenant):
    store(
        tenant,
        [
            "Prefers dark mode in the VS Code editor",
            "Prefers dark mode in the VS Code editor always",
            "Turns on dark mode in the editor at night",
            "Uses dark mode on the phone and in the editor",
            "Likes dark chocolate after lunch",
        ],
    )

    plain = search(tenant, "dark mode in VS Code", limit=3, mmr_lambda=1.0)
    diverse = search(tenant, "dark mode in VS Code", limit=3, mmr_lambda=0.3)

    twins = {"Prefers dark mode in the VS Code editor", "Prefers dark mode in the VS Code editor always"}
    assert twins <= set(plain)
    assert len(twins & set(diverse)) == 1


def test_decay_ranks_an_old_fact_below_a_fresh_equal_one_but_spares_pinned_facts(tenant):
    now = datetime(2025, 1, 1, tzinfo=UTC)
    store(tenant, ["Drinks oolong tea every morning"], occurred_at=now - timedelta(days=365))
    store(tenant, ["Drinks oolong tea every morning!"], occurred_at=now - timedelta(days=1))

    fresh_first = facts_search(tenant=tenant, user_id="u1", query="oolong tea", half_life_days=30, now=now)
    assert fresh_first[0].fact.content.endswith("!")
    assert fresh_first[1].decay < 0.01

    Fact.objects.filter(content="Drinks oolong tea every morning").update(pinned=True)
    pinned_first = facts_search(tenant=tenant, user_id="u1", query="oolong tea", half_life_days=30, now=now)
    assert pinned_first[0].fact.pinned
    assert pinned_first[0].decay == 1.0


def test_searching_never_counts_usage(tenant):
    store(tenant, DISTRACTORS)

    search(tenant, "vault")

    assert set(Fact.objects.values_list("usage_count", flat=True)) == {0}


def test_users_and_tenants_are_isolated(tenant, other_tenant_and_key):
    store(tenant, ["Secret project Falcon uses Rust"], user_id="u2")
    facts_import(
        tenant=other_tenant_and_key[0], facts=[{"user_id": "u1", "content": "Secret project Falcon"}], actor="t"
    )

    assert search(tenant, "project Falcon") == []


def test_an_empty_store_or_query_finds_nothing(tenant):
    assert search(tenant, "anything") == []
    store(tenant, DISTRACTORS)
    assert search(tenant, "   ") == []


def test_a_query_of_stop_words_ranks_by_meaning_alone(tenant):
    store(tenant, DISTRACTORS)

    hits = facts_search(tenant=tenant, user_id="u1", query="what is it about", limit=50)

    assert sorted(hit.fact.content for hit in hits) == sorted(DISTRACTORS)  # each once
    assert {hit.keyword for hit in hits} == {0}


def test_a_long_query_keeps_its_first_terms(tenant):
    store(tenant, [*DISTRACTORS, "The staging deploy key is ZX-4471-QP"])
    filler = " ".join(f"word{n}" for n in range(MAX_QUERY_TERMS + 10))

    [best, *_] = facts_search(tenant=tenant, user_id="u1", query=f"staging deploy key {filler}", limit=3)

    assert best.fact.content == "The staging deploy key is ZX-4471-QP"
    assert best.keyword == 1.0


@pytest.mark.slow
def test_a_paraphrase_with_no_shared_words_is_found_by_meaning(settings, tenant):
    settings.EMBEDDING_PROVIDER = "local"
    store(tenant, [*DISTRACTORS, "Has a golden retriever called Biscuit"])

    assert search(tenant, "What kind of pet do they own?", limit=1) == ["Has a golden retriever called Biscuit"]


# The plans these tests pin are a production-sized table's. At 3,530 rows, PostgreSQL's default random_page_cost of
# 4 (the external-database run's) finds a whole-table scan cheaper than the user's index; in a table of a million
# rows the index wins at either cost (docs/benchmarks.md). So they plan at the embedded server's cost.
PLAN_RANDOM_PAGE_COST = "1.1"


def explained(sql: str, params: dict) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE facts_fact")
        cursor.execute("ANALYZE facts_factsearchentry")
        prefix, params = graph_settings(params)  # as facts_search sends it
        page_cost = f"SELECT set_config('random_page_cost', '{PLAN_RANDOM_PAGE_COST}', true);\n"
        cursor.execute(f"{page_cost}{prefix}EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        cursor.nextset()
        cursor.nextset()
        [[[plan]]] = cursor.fetchall()
    return plan["Plan"]


def plan_nodes(node):
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def indexes_used(node) -> set[str]:
    """The indexes the plan under `node` read (a branch a one-time filter kept from running reads none), a
    partition's by the name of the partitioned table's index it belongs to."""
    return {
        parent_index(child["Index Name"])
        for child in plan_nodes(node)
        if "Index Name" in child and child["Actual Loops"]
    }


def parent_index(name: str) -> str:
    """The partitioned table's index that a partition's index `name` belongs to (the partition's own is named by
    PostgreSQL); `name` itself for an index of a table without partitions."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT inhparent::regclass::text FROM pg_inherits WHERE inhrelid = %s::regclass", [name])
        row = cursor.fetchone()
    return row[0] if row else name


def crowd_the_table(tenant):
    """The user's 530 facts (30 about tea) among 3,000 of ten other users: one user's rows are a small share of a
    table, as in production, where the plan matters."""
    for other in range(10):
        store(tenant, [f"Note {n} about billing and deploys" for n in range(300)], user_id=f"someone-else-{other}")
    store(tenant, [f"Fact {n} about tea" for n in range(30)] + [f"Fact {n} about cake" for n in range(500)])


def test_the_plan_reads_the_users_entries_by_btree_and_gin_and_only_the_pool_of_facts(tenant):
    crowd_the_table(tenant)
    sql, params = facts_search_statement(
        tenant=tenant, user_id="u1", query="tea", vector=embed_query("tea", tenant=tenant, user_id="u1")
    )

    plan = explained(sql, params)

    nodes = list(plan_nodes(plan))
    ctes = {node["Subplan Name"].removeprefix("CTE "): node for node in nodes if "Subplan Name" in node}
    assert params["entries"] == 530  # the user's N, read before from its counts, not from its entries
    scans = {node["Node Type"] for node in nodes if node.get("Relation Name", "").startswith("facts_")}
    assert "Seq Scan" not in scans
    # A small user (530 facts): the exact top-N sort of its entries, not the HNSW graph.
    assert indexes_used(ctes["nearest"]) == {"factsearch_tenant_user_status"}
    assert ctes["nearest"]["Actual Rows"] == params["pool"]  # the user's nearest entries, each once
    assert "factsearch_keywords" in indexes_used(ctes["matched"])
    assert ctes["matched"]["Actual Rows"] == 30  # the user's entries with "tea" alone, not the crowd's
    facts = [node for node in nodes if node.get("Relation Name") == "facts_fact"]
    assert [node["Index Name"] for node in facts] == ["facts_fact_pkey"]
    assert facts[0]["Actual Loops"] == params["pool"]  # whole facts are read for the pool only


def facts_rows_read() -> int:
    """The facts_fact rows this transaction has read so far, by any scan."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables"
            " WHERE relid = 'facts_fact'::regclass"
        )
        return cursor.fetchone()[0]


def test_a_tenant_newer_than_the_tables_statistics_reads_only_the_facts_it_returns(tenant):
    store(tenant, [f"Note {n} about billing and deploys" for n in range(300)], user_id="someone-else")
    with connection.cursor() as cursor:  # statistics of a table holding one tenant: any other is estimated at 1 row
        cursor.execute("ANALYZE facts_fact")
    newcomer, _ = tenant_create(name="newcomer")
    store(newcomer, [f"Fact {n} about tea" for n in range(30)] + [f"Fact {n} about cake" for n in range(500)])
    vector = embed_query("tea", tenant=newcomer, user_id="u1")

    _, params = facts_search_statement(tenant=newcomer, user_id="u1", query="tea", vector=vector)

    before = facts_rows_read()
    hits = facts_search(tenant=newcomer, user_id="u1", query="tea", vector=vector, limit=10)
    searched = facts_rows_read()
    neighbours = facts_nearest(tenant=newcomer, user_id="u1", vector=vector, limit=5)

    assert len(hits) == 10
    assert len(neighbours) == 5
    # By primary key, the pool's facts alone; not every fact of the tenant, with the pool's ids looked up among them.
    assert searched - before <= params["pool"]
    assert facts_rows_read() - searched == 5 + NEAREST_MARGIN


def nearest_read(tenant, query: str) -> tuple[str, set[str], int, int]:
    """How the search's nearest CTE found u1's entries (path_taken), the indexes it read, the rows it gave, and the
    pool it was asked for."""
    sql, params = facts_search_statement(
        tenant=tenant, user_id="u1", query=query, vector=embed_query(query, tenant=tenant, user_id="u1")
    )
    plan = explained(sql, params)
    nearest = next(node for node in plan_nodes(plan) if node.get("Subplan Name") == "CTE nearest")
    return path_taken(nearest), indexes_used(nearest), nearest["Actual Rows"], params["pool"]


def path_taken(nearest) -> str:
    """The path the plan under a nearest CTE ran: "graph" (the HNSW index), "shortlist" (a sort by the Hamming
    distance of the signs) or "sort" (an exact sort)."""
    if "factsearch_embedding_hnsw" in indexes_used(nearest):
        return "graph"
    sorted_rows = [node for node in plan_nodes(nearest) if node.get("Actual Rows")]  # a gated branch sorts none
    return "shortlist" if any("<~>" in key for node in sorted_rows for key in node.get("Sort Key", [])) else "sort"


# The indexes each path reads. A shortlist reads the user's signs by the btree, then the shortlisted entries'
# vectors by their primary key, or, in a partition the user is most of, by the same btree again (the planner's
# choice by the partition's size).
PATH_INDEXES = {
    "graph": [{"factsearch_embedding_hnsw"}],
    "shortlist": [{"factsearch_tenant_user_status", "facts_factsearchentry_pkey"}, {"factsearch_tenant_user_status"}],
    "sort": [{"factsearch_tenant_user_status"}],
}


def vacuum_entries(*, all_visible: bool = False) -> None:
    """The steady state autovacuum keeps: the entries earlier tests rolled back are dead in the graph, and a walk
    counts them against hnsw.max_scan_tuples (in the whole suite, a walk once found none of the user's).
    all_visible: vacuum again until every page is marked all-visible, which a snapshot held meanwhile (autovacuum's
    own ANALYZE of the rows just written) can keep one VACUUM from doing."""
    with connection.cursor() as cursor:
        for _ in range(50):
            cursor.execute("VACUUM facts_factsearchentry")
            cursor.execute(
                "SELECT bool_and(relallvisible >= relpages) FROM pg_class WHERE oid IN"
                " (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'facts_factsearchentry'::regclass)"
            )
            if not all_visible or cursor.fetchone()[0]:
                return
            time.sleep(0.1)


@pytest.mark.django_db(transaction=True)
def test_a_large_users_nearest_entries_come_through_the_hnsw_graph_or_a_shortlist_by_their_signs(tenant, settings):
    vacuum_entries()
    crowd_the_table(tenant)
    # u1 holds 530 of the table's 3,530, ~577 of its partition's (its own and a 64th of the others')
    settings.FACTS_SEARCH_EXACT_MAX_ENTRIES = 500
    settings.SEARCH_GRAPH_MIN_SHARE_ROWS = 50  # 530^2 >= 577 x 50: a large enough share for the walk

    path, indexes, rows, pool = nearest_read(tenant, "tea")

    assert (path, indexes) == ("graph", {"factsearch_embedding_hnsw"})
    assert rows == pool  # the walk went on past the crowd's entries
    settings.SEARCH_GRAPH_MIN_SHARE_ROWS = 1000  # 530^2 < 577 x 1,000: too small a share, the shortlist
    path, indexes, rows, pool = nearest_read(tenant, "tea")
    assert path == "shortlist"
    assert indexes in PATH_INDEXES["shortlist"], indexes
    assert rows == pool
    settings.FACTS_SEARCH_EXACT_MAX_ENTRIES = 2000  # a user of 530 facts: the exact sort
    assert nearest_read(tenant, "tea")[:2] == ("sort", {"factsearch_tenant_user_status"})


@pytest.mark.django_db(transaction=True)
def test_a_shortlist_reads_the_users_signs_from_the_index_alone(tenant, settings):
    crowd_the_table(tenant)
    vacuum_entries(all_visible=True)  # as autovacuum keeps them
    settings.FACTS_SEARCH_EXACT_MAX_ENTRIES = 0
    settings.SEARCH_GRAPH_MIN_SHARE_ROWS = 10**9
    sql, params = facts_search_statement(
        tenant=tenant, user_id="u1", query="tea", vector=embed_query("tea", tenant=tenant, user_id="u1")
    )

    plan = explained(sql, params)

    shortlist = [node for node in plan_nodes(plan) if node.get("Node Type") == "Index Only Scan"]
    assert [parent_index(node["Index Name"]) for node in shortlist] == ["factsearch_tenant_user_status"]
    assert shortlist[0]["Actual Rows"] == 530  # every entry of the user's, none of the crowd's
    assert shortlist[0]["Heap Fetches"] == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("max_entries", "share_rows", "path"),
    [
        (2000, 1000, "sort"),  # 530 facts: sorted
        (500, 1000, "shortlist"),  # 530^2 < ~577 x 1,000 (u1's partition): shortlisted
        (500, 50, "graph"),  # 530^2 >= ~577 x 50: walked
    ],
)
def test_the_neighbours_of_a_new_fact_take_the_rules_path_decided_in_their_statement(
    tenant, settings, max_entries, share_rows, path
):
    vacuum_entries()
    crowd_the_table(tenant)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE facts_factsearchentry")  # the table's rows, as the statement reads them
    settings.FACTS_SEARCH_EXACT_MAX_ENTRIES, settings.SEARCH_GRAPH_MIN_SHARE_ROWS = max_entries, share_rows
    vector = embed_query("tea", tenant=tenant, user_id="u1")
    sql, params = facts_nearest_statement(tenant=tenant, user_id="u1", vector=vector, limit=5)

    plan = explained(sql, params)
    neighbours = facts_nearest(tenant=tenant, user_id="u1", vector=vector, limit=5)

    nearest = next(node for node in plan_nodes(plan) if node.get("Subplan Name") == "CTE nearest")
    assert path_taken(nearest) == path
    assert indexes_used(nearest) in PATH_INDEXES[path]
    assert nearest["Actual Rows"] == params["nearest"]
    assert len(neighbours) == 5
    assert all("tea" in neighbour.fact.content for neighbour in neighbours)


@pytest.mark.django_db(transaction=True)
def test_a_search_through_the_graph_or_the_shortlist_finds_what_the_exact_sort_finds(tenant, settings):
    vacuum_entries()
    crowd_the_table(tenant)
    rng = np.random.default_rng(7)
    words = "tea coffee vault deploy lisbon billing review cake river train piano chess".split()
    store(tenant, [" ".join(rng.choice(words, size=4)) + f" note {n}" for n in range(300)])
    queries = ["tea lisbon", "piano chess river", "vault", "cake review", "train to lisbon", "coffee"]
    settings.FACTS_SEARCH_EXACT_MAX_ENTRIES = 500
    settings.SEARCH_GRAPH_MIN_SHARE_ROWS = 0
    assert nearest_read(tenant, queries[0])[0] == "graph"  # what "graph" below walks

    found = {}
    for path, max_entries, share_rows in (("exact", 10**9, 0), ("graph", 500, 0), ("shortlist", 500, 10**9)):
        settings.FACTS_SEARCH_EXACT_MAX_ENTRIES, settings.SEARCH_GRAPH_MIN_SHARE_ROWS = max_entries, share_rows
        found[path] = [[hit.fact.pk for hit in facts_search(tenant=tenant, user_id="u1", query=q)] for q in queries]

    for path in ("graph", "shortlist"):
        overlap = [len(set(exact) & set(hits)) for exact, hits in zip(found["exact"], found[path], strict=True)]
        assert all(len(hits) == 10 for hits in found[path])
        assert sum(overlap) >= 0.95 * 10 * len(queries), (path, overlap)  # approximate nearest, re-scored exactly


def test_a_search_in_the_past_scans_the_users_rows_through_the_tenant_user_btree(tenant):
    crowd_the_table(tenant)
    sql, params = facts_search_statement(
        tenant=tenant,
        user_id="u1",
        query="tea",
        vector=embed_query("tea", tenant=tenant, user_id="u1"),
        as_of=datetime.now(UTC),
    )

    plan = explained(sql, params)

    scans = [node for node in plan_nodes(plan) if node.get("Relation Name") == "facts_fact"]
    assert "Seq Scan" not in {node["Node Type"] for node in scans}
    base = next(node for node in plan_nodes(plan) if node.get("Subplan Name") == "CTE base")
    assert indexes_used(base) == {"fact_tenant_user_status"}
    assert base["Actual Rows"] == 530  # the user's rows only, each once


@pytest.mark.parametrize("with_vector", [True, False])
def test_the_entries_give_the_candidates_and_scores_of_the_exact_scan(tenant, with_vector):
    rng = np.random.default_rng(13)
    words = "tea coffee vault deploy lisbon billing review cake river train piano chess".split()
    store(tenant, [" ".join(rng.choice(words, size=4)) + f" note {n}" for n in range(300)])
    store(tenant, ["Drinks tea in Lisbon"] * 3, user_id="someone-else")
    fact_reject(tenant=tenant, fact_id=Fact.objects.filter(tenant=tenant, user_id="u1").first().pk, actor="test")
    for query in ("tea lisbon", "piano chess river", "vault", "the"):
        vector = embed_query(query, tenant=tenant, user_id="u1") if with_vector else None
        rows = {}
        for path, options in (("entries", {}), ("scan", {"occurred_before": datetime(3000, 1, 1, tzinfo=UTC)})):
            sql, params = facts_search_statement(
                tenant=tenant, user_id="u1", query=query, vector=vector, limit=5, **options
            )
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                rows[path] = [(row[0], round(row[-4], 5), round(row[-3], 5)) for row in cursor.fetchall()]
        assert rows["entries"] == rows["scan"], query
        if with_vector:
            assert len(rows["entries"]) == 20  # every candidate, keyword match or not
        else:
            assert bool(rows["entries"]) == (query != "the")  # only facts sharing a term (a stop word is none)


def store_common_and_rare_words(tenant) -> None:
    """u1's 300 facts of four words each from twelve (each word in ~100 of them), 20 of them with a rare word too;
    facts of another user and of another tenant's u1 with the same words, which u1's counts must not include."""
    rng = np.random.default_rng(29)
    common = "tea coffee vault deploy lisbon billing review cake river train piano chess".split()
    rare = ["zebra", "quokka", "marimba", "fjord"]
    contents = [" ".join(rng.choice(common, size=4)) + f" note {n}" for n in range(280)]
    contents += [f"{rare[n % 4]} " + " ".join(rng.choice(common, size=3)) for n in range(20)]
    store(tenant, contents[:150])
    store(tenant, contents[150:], category="preference")
    store(tenant, ["tea zebra quokka"] * 60, user_id="someone-else")
    other, _ = tenant_create(name="other")
    store(other, ["tea zebra marimba fjord"] * 60)


def searched(tenant, query, vector, **options) -> list[tuple]:
    hits = facts_search(
        tenant=tenant, user_id="u1", query=query, vector=vector, keyword_only=vector is None, limit=8, **options
    )
    return [(hit.fact.pk, round(hit.score, 5), round(hit.vector, 5), round(hit.keyword, 5)) for hit in hits]


def candidates(tenant, query, vector, **options) -> tuple[list[tuple], bool, list[int]]:
    """The search statement's candidates (id, vector and keyword scores), whether it says they are complete, and
    the terms it left unread."""
    sql, params = facts_search_statement(tenant=tenant, user_id="u1", query=query, vector=vector, limit=8, **options)
    with connection.cursor() as cursor:
        cursor.execute(*graph_settings(params))
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return (
        [(row[0], round(row[-4], 6), round(row[-3], 6)) for row in rows],
        bool(rows and rows[0][-1]),
        params["common_terms"],
    )


COMMON_TERM_QUERIES = [
    "zebra tea", "quokka river piano", "marimba cake", "fjord chess cake lisbon", "tea lisbon", "zebra vault deploy",
    "quokka coffee", "marimba train review", "fjord billing", "zebra quokka cake", "piano fjord", "chess marimba tea",
    # common terms that together outscore a rare one
    "zebra tea coffee vault deploy lisbon billing", "quokka river train piano chess cake review",
]  # fmt: skip


@pytest.mark.parametrize("categories", [None, ["preference"]])
def test_a_search_that_leaves_common_terms_unread_finds_what_reading_every_term_finds(
    tenant, settings, monkeypatch, categories
):
    store_common_and_rare_words(tenant)
    monkeypatch.setattr("facts.selectors.NEAREST_REACH", 1)  # a bound that often fails, so both ways are taken
    reads = {"complete": 0, "read again": 0}
    rng = np.random.default_rng(31)
    embedded = [(query, embed_query(query, tenant=tenant, user_id="u1")) for query in COMMON_TERM_QUERIES]
    # And vectors unrelated to the words: the facts richest in common terms are then not among the nearest.
    unrelated = [(query, rng.normal(size=len(vector))) for query, vector in embedded]
    for query, vector in embedded + unrelated:
        settings.FACTS_SEARCH_COMMON_TERM_ENTRIES = 10**9  # every term's entries read
        every_term, _, _ = candidates(tenant, query, vector, categories=categories)
        found = searched(tenant, query, vector, categories=categories)
        scanned = searched(
            tenant, query, vector, categories=categories, occurred_before=datetime(3000, 1, 1, tzinfo=UTC)
        )
        settings.FACTS_SEARCH_COMMON_TERM_ENTRIES = 20  # the twelve words are common, the rare ones not

        bounded, complete, common = candidates(tenant, query, vector, categories=categories)

        assert common, query
        reads["complete" if complete else "read again"] += 1
        if complete:
            assert bounded == every_term, query
        assert searched(tenant, query, vector, categories=categories) == found == scanned, query
    # Both ways were taken: the pool found without the common terms' entries, and the statement run again.
    assert reads["complete"] >= 3, reads
    assert reads["read again"] >= 3, reads


def test_the_common_terms_entries_are_not_read(tenant, settings):
    store_common_and_rare_words(tenant)
    settings.FACTS_SEARCH_COMMON_TERM_ENTRIES = 20
    query = "zebra tea"
    sql, params = facts_search_statement(
        tenant=tenant, user_id="u1", query=query, vector=embed_query(query, tenant=tenant, user_id="u1")
    )

    plan = explained(sql, params)

    assert params["common_terms"] == [1]  # "tea": its document frequency from the counts
    assert params["entries1"] == Fact.objects.filter(tenant=tenant, user_id="u1", content__contains="tea").count() > 20
    ctes = {node["Subplan Name"]: node for node in plan_nodes(plan) if "Subplan Name" in node}
    assert ctes["CTE matched"]["Actual Rows"] == 5  # u1's facts with "zebra", not the ~100 with "tea"
    assert ctes["CTE nearest"]["Actual Rows"] == NEAREST_REACH * params["pool"]


def test_a_keyword_only_search_reads_every_terms_entries(tenant, settings):
    """Its pool is the best keyword scores alone, most of which a common term's entries would hold."""
    store_common_and_rare_words(tenant)
    settings.FACTS_SEARCH_COMMON_TERM_ENTRIES = 20

    _, params = facts_search_statement(tenant=tenant, user_id="u1", query="zebra tea", vector=None)

    assert params["common_terms"] == []
    assert searched(tenant, "zebra tea", None) == searched(
        tenant, "zebra tea", None, occurred_before=datetime(3000, 1, 1, tzinfo=UTC)
    )


def test_a_phrase_term_is_read_however_many_facts_hold_it(tenant, settings):
    """A CJK pair is a phrase of two lexemes, which FactSearchTerm does not count: its facts are read and counted."""
    store(tenant, [f"周末喜欢喝茶 {n}" for n in range(40)] + ["我住在柏林"])
    settings.FACTS_SEARCH_COMMON_TERM_ENTRIES = 20
    vector = embed_query("喝茶 柏林", tenant=tenant, user_id="u1")

    _, params = facts_search_statement(tenant=tenant, user_id="u1", query="喝茶 柏林", vector=vector)

    assert params["common_terms"] == []
    assert searched(tenant, "喝茶 柏林", vector) == searched(
        tenant, "喝茶 柏林", vector, occurred_before=datetime(3000, 1, 1, tzinfo=UTC)
    )
