"""kb_search: tenant-wide hybrid search over chunks, with citations and a score breakdown."""

import importlib
import re

import pytest
from django.apps import apps
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from ai.embedders import HashEmbedder
from core.db import vector_literal
from core.keywords import KeywordQuery
from core.text import query_terms
from kb.models import KBChunk
from kb.selectors import (
    DocumentHit,
    TermChunks,
    document_by_doc_id,
    document_chunks,
    kb_search,
    kb_search_statement,
    keyword_chunks_read,
)
from kb.services import document_index
from tests.factories import make_tenant
from tests.kb.plans import plan_node, search_plans

pytestmark = pytest.mark.django_db

BILLING = """\
# Billing handbook

How invoices are produced every month.

## Refunds

Customers who cancel within 30 days have their payment returned in full.
The reimbursement reaches the original card within five business days.

## Error codes

A declined card shows ERR_QUOTA_4711 on the invoice page.
"""
OPERATIONS = """\
# Operations runbook

## Deploys

Deploys go out on Tuesdays through the Kubernetes pipeline.

## Backups

PostgreSQL is backed up nightly with point-in-time recovery.
"""
ONBOARDING = """\
# Onboarding

## First week

New engineers pair with a buddy and ship a small change on day one.
"""


@pytest.fixture
def other_tenant(db):
    return make_tenant("globex")[0]


def index(tenant, doc_id, text, title=""):
    return document_index(tenant=tenant, doc_id=doc_id, text=text, content_type="markdown", title=title)


@pytest.fixture
def corpus(tenant):
    index(tenant, "guides/billing.md", BILLING, title="Billing handbook")
    index(tenant, "guides/operations.md", OPERATIONS)
    index(tenant, "people/onboarding.md", ONBOARDING)


def test_an_exact_term_finds_its_passage_with_citation_and_score_breakdown(tenant, corpus):
    hits = kb_search(tenant=tenant, query="ERR_QUOTA_4711", limit=3)

    top = hits[0]
    assert (top.doc_id, top.heading_path, top.line_start, top.line_end) == (
        "guides/billing.md",
        "Billing handbook > Error codes",
        10,
        12,
    )
    assert "declined card" in top.text
    assert top.citation == "doc:guides/billing.md §Billing handbook > Error codes, lines 10-12"
    assert top.keyword == 1.0  # the best keyword hit of this query
    weight = settings.KB_SEARCH_VECTOR_WEIGHT
    assert top.score == pytest.approx(weight * top.vector + (1 - weight) * top.keyword, abs=1e-5)
    assert all(hit.keyword < 1.0 for hit in hits[1:])


def test_kb_search_has_weights_of_its_own(tenant, corpus, settings):
    def scores():
        return [(hit.doc_id, hit.line_start, hit.score) for hit in kb_search(tenant=tenant, query="invoice card")]

    default = scores()
    settings.FACTS_SEARCH_VECTOR_WEIGHT, settings.FACTS_SEARCH_BM25_B = 0.1, 0.75  # fact search's, not KB's
    assert scores() == default
    settings.KB_SEARCH_VECTOR_WEIGHT = 0.1
    assert scores() != default


def test_a_rare_term_weighs_more_than_a_term_in_many_passages(tenant):
    # Every passage says "deploy"; one says "canary". BM25 weighs each matched term by its rarity (ts_rank_cd,
    # before, scored by occurrences: the passage repeating "deploy" three times won).
    index(tenant, "a.md", "# Deploys\n\nDeploy, deploy and deploy again on Tuesdays.")
    index(tenant, "b.md", "# Rollout\n\nA canary release goes first, then the deploy.")
    for n in range(6):
        index(tenant, f"filler-{n}.md", f"# Note {n}\n\nThe deploy of service {n} runs at night.")

    hits = kb_search(tenant=tenant, query="deploy canary", limit=3)

    assert hits[0].doc_id == "b.md"
    assert hits[0].keyword == 1.0
    a = next(hit for hit in kb_search(tenant=tenant, query="deploy canary", limit=10) if hit.doc_id == "a.md")
    assert a.keyword < 0.2  # "deploy" is in every passage: it says almost nothing


def test_results_are_ranked_by_the_fused_score_and_cut_at_the_limit(tenant, corpus):
    hits = kb_search(tenant=tenant, query="Kubernetes deploys on Tuesdays", limit=2)

    assert len(hits) == 2
    assert hits[0].heading_path == "Operations runbook > Deploys"
    assert hits[0].score >= hits[1].score


def test_the_document_title_and_headings_are_searchable_keywords(tenant, corpus):
    # "handbook" is only in the title and heading; "reimbursement" is in the text.
    hits = kb_search(tenant=tenant, query="handbook reimbursement", limit=5)

    by_heading = {hit.heading_path: hit for hit in hits}
    assert by_heading["Billing handbook > Refunds"].keyword == 1.0  # both terms
    assert by_heading["Billing handbook > Error codes"].keyword > 0  # the title term alone
    assert (
        by_heading.get("Operations runbook > Deploys") is None
        or by_heading["Operations runbook > Deploys"].keyword == 0
    )


def test_a_new_title_reaches_the_keyword_text_of_unchanged_chunks(tenant, corpus):
    assert not any(hit.keyword for hit in kb_search(tenant=tenant, query="playbook", limit=5))

    result = index(tenant, "guides/operations.md", OPERATIONS, title="Operations playbook")

    assert (result.outcome, result.chunks) == ("unchanged", 0)
    hits = [hit for hit in kb_search(tenant=tenant, query="playbook", limit=5) if hit.keyword > 0]
    assert {hit.doc_id for hit in hits} == {"guides/operations.md"}


def test_doc_ids_and_path_prefix_narrow_the_search(tenant, corpus):
    only_people = kb_search(tenant=tenant, query="Kubernetes deploys", limit=5, path_prefix="people/")
    only_ops = kb_search(tenant=tenant, query="buddy", limit=5, doc_ids=["guides/operations.md"])

    assert {hit.doc_id for hit in only_people} == {"people/onboarding.md"}
    assert {hit.doc_id for hit in only_ops} == {"guides/operations.md"}
    assert kb_search(tenant=tenant, query="buddy", limit=5, doc_ids=["no/such.md"]) == []
    assert kb_search(tenant=tenant, query="buddy", limit=5, doc_ids=[]) == []


def test_another_tenants_documents_are_never_found(tenant, corpus, other_tenant):
    index(other_tenant, "secret.md", "# Secret\n\n## Plans\n\nGlobex migrates to ERR_QUOTA_4711 Oracle.\n")

    hits = kb_search(tenant=tenant, query="Globex Oracle ERR_QUOTA_4711", limit=50)
    named = kb_search(tenant=tenant, query="Globex Oracle", limit=50, doc_ids=["secret.md"])
    theirs = kb_search(tenant=other_tenant, query="ERR_QUOTA_4711 invoice", limit=50)

    assert hits
    assert all(hit.doc_id != "secret.md" and "Oracle" not in hit.text for hit in hits)
    assert named == []
    assert {hit.doc_id for hit in theirs} == {"secret.md"}


def test_a_tenant_newer_than_the_tables_statistics_reads_its_candidates_by_primary_key(tenant, corpus):
    with connection.cursor() as cursor:  # statistics of tables holding one tenant: any other is estimated at 1 row
        cursor.execute("ANALYZE kb_kbchunk")
        cursor.execute("ANALYZE kb_document")
    newcomer, _ = make_tenant("newcomer")
    for page in range(40):
        rules = "\n\n".join(f"## Rule {n}\n\nShipping rule {n} covers parcels of case {n * 7}." for n in range(5))
        index(newcomer, f"shipping/{page}.md", rules)

    with search_plans() as plans:
        hits = kb_search(tenant=newcomer, query="shipping rule case 49", limit=5)

    assert len(hits) == 5
    # One lookup per candidate; not each candidate looked for among every chunk (document) of the tenant.
    chunks, documents = plan_node(plans[0], "kb_kbchunk c"), plan_node(plans[0], "kb_document d")
    assert "kb_kbchunk_pkey" in chunks
    assert "kbchunk_tenant_document" not in chunks
    assert "document_unique_doc_id" not in documents


def test_chunks_embedded_by_another_model_are_not_searched(tenant, corpus):
    KBChunk.objects.filter(tenant=tenant, document__doc_id="guides/billing.md").update(embedding_model="old-model")

    hits = kb_search(tenant=tenant, query="ERR_QUOTA_4711", limit=10)

    assert hits
    assert all(hit.doc_id != "guides/billing.md" for hit in hits)


def test_a_query_of_stop_words_still_searches_by_vector(tenant, corpus):
    assert query_terms("what is it") == []

    hits = kb_search(tenant=tenant, query="what is it", limit=3)

    assert len(hits) == 3
    assert all(hit.keyword == 0 for hit in hits)


def test_an_empty_query_or_limit_returns_nothing(tenant, corpus):
    assert kb_search(tenant=tenant, query="  ", limit=5) == []
    assert kb_search(tenant=tenant, query="deploys", limit=0) == []


def test_a_tenant_without_chunks_gets_nothing_at_once_not_even_an_embedding(tenant, corpus, monkeypatch):
    empty, _ = make_tenant("empty")
    embedded = []
    monkeypatch.setattr(HashEmbedder, "embed", lambda self, texts: embedded.append(texts))

    with CaptureQueriesContext(connection) as queries:
        hits = kb_search(tenant=empty, query="deploys", limit=5)

    assert hits == []
    assert len(queries) == 1  # whether the tenant has a chunk: no HNSW scan, no keyword scan
    assert embedded == []


def test_the_search_settings_do_not_leak_into_the_callers_transaction(tenant, corpus):
    with transaction.atomic(), connection.cursor() as cursor:
        hits = kb_search(tenant=tenant, query="backups", limit=2)
        cursor.execute("SELECT current_setting('hnsw.iterative_scan'), current_setting('hnsw.ef_search')")
        after = cursor.fetchone()

    assert hits
    assert after == ("off", "40")  # pgvector's defaults


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_search_is_three_statements_and_its_settings_end_with_it():
    """Whether the tenant has chunks, its statistics, then settings and search in one simple query: the settings end
    with that query's own transaction (inside a caller's, a savepoint ends them: the test above), and the hits are
    those of the savepoint's way."""
    tenant, _ = make_tenant("initech")
    index(tenant, "guides/operations.md", OPERATIONS)
    index(tenant, "guides/billing.md", BILLING)

    with CaptureQueriesContext(connection) as queries:
        hits = kb_search(tenant=tenant, query="backups deploys", limit=3)
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('hnsw.iterative_scan'), current_setting('hnsw.ef_search')")
        after = cursor.fetchone()
    with transaction.atomic():
        in_a_transaction = kb_search(tenant=tenant, query="backups deploys", limit=3)

    assert len(queries) == 3
    assert "WITH vector_hits" in queries[2]["sql"]
    assert after == ("off", "40")  # pgvector's defaults
    assert hits == in_a_transaction
    assert hits[0].doc_id == "guides/operations.md"


def test_hits_are_document_hits_that_context_build_can_cite(tenant, corpus):
    hit = kb_search(tenant=tenant, query="backups", limit=1)[0]

    assert isinstance(hit, DocumentHit)
    document = document_by_doc_id(tenant=tenant, doc_id="guides/operations.md")
    assert hit.document_id == document.pk


def test_the_data_migration_fills_the_keyword_text_of_older_chunks(tenant, corpus):
    KBChunk.objects.filter(tenant=tenant).update(search_text="")
    assert not any(hit.keyword for hit in kb_search(tenant=tenant, query="ERR_QUOTA_4711", limit=3))
    migration = importlib.import_module("kb.migrations.0003_fill_search_text")

    migration.fill(apps, schema_editor=None)

    document = document_by_doc_id(tenant=tenant, doc_id="guides/billing.md")
    first = document_chunks(tenant=tenant, document=document).first()
    assert first.search_text.startswith("Billing handbook Billing handbook # Billing handbook")
    assert kb_search(tenant=tenant, query="ERR_QUOTA_4711", limit=1)[0].keyword == 1.0


@pytest.mark.slow
def test_a_paraphrase_finds_the_passage_without_sharing_a_word(tenant, settings):
    settings.EMBEDDING_PROVIDER = "local"
    index(tenant, "guides/billing.md", BILLING, title="Billing handbook")
    index(tenant, "guides/operations.md", OPERATIONS)
    index(tenant, "people/onboarding.md", ONBOARDING)
    query = "how do I get my money back after I stop my subscription"

    hits = kb_search(tenant=tenant, query=query, limit=3)

    assert hits[0].heading_path == "Billing handbook > Refunds"
    assert hits[0].keyword == 0  # found by meaning alone
    assert hits[0].vector > hits[1].vector


# The vector side's ORDER BY on each of search.nearest's paths: the exact sort's, which no index serves, and the
# walk's, which the HNSW index serves.
# (WALKED matches the statement as built and as sent, its vector written in.)
SORTED = "ORDER BY vector_score DESC, id DESC"
WALKED = re.compile(r"ORDER BY embedding <=> \S+::vector\n")


def vector_side_sorted(sql: str) -> bool:
    walked = WALKED.search(sql) is not None
    assert (SORTED in sql) != walked, "the vector side's statement changed: update SORTED and WALKED"
    return SORTED in sql


@pytest.mark.parametrize(
    ("chunks", "table_chunks", "sorted_exactly"),
    [
        (10_000, 10_000, True),  # a small knowledge base
        (20_000, 1_000_000, True),  # beyond KB_SEARCH_EXACT_MAX_CHUNKS, but 2% of the table
        (20_000, 100_000, False),  # a fifth of the table: the graph's walk finds its chunks soon
        (100_000, 1_000_000, False),
    ],
)
def test_the_vector_side_sorts_a_small_knowledge_base_or_a_small_share_of_the_table_exactly(
    tenant, chunks, table_chunks, sorted_exactly
):
    statistics = TermChunks(chunks=chunks, per_term=[chunks // 10], table_chunks=table_chunks)
    vector = HashEmbedder(dimensions=settings.EMBEDDING_DIMENSIONS).embed(["deploys"])[0]

    sql, _ = kb_search_statement(
        tenant=tenant, keywords=KeywordQuery("deploys"), statistics=statistics, vector=vector, limit=10
    )

    assert vector_side_sorted(sql) is sorted_exactly


def test_the_share_of_the_table_is_read_from_its_statistics(tenant, other_tenant, settings):
    for n in range(2):
        index(tenant, f"deploys/{n}.md", f"# Deploys {n}\n\nDeploys go out on Tuesdays.\n")
    for n in range(40):
        index(other_tenant, f"notes/{n}.md", f"# Note {n}\n\nA note about deploys of service {n}.\n")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE kb_kbchunk")  # the table's 42 chunks, as the planner knows them
    # Past the limit of 1, only the share decides: 2^2 < 42 x 10 is sorted, 40^2 is walked.
    settings.KB_SEARCH_EXACT_MAX_CHUNKS = 1
    settings.SEARCH_GRAPH_MIN_SHARE_ROWS = 10

    def sorted_exactly(scope) -> bool:
        with CaptureQueriesContext(connection) as queries:
            assert kb_search(tenant=scope, query="deploys", limit=3)
        (search,) = [query["sql"] for query in queries if "WITH vector_hits" in query["sql"]]
        return vector_side_sorted(search)

    assert sorted_exactly(tenant)
    assert not sorted_exactly(other_tenant)


# --- what the graph's walk misses, the keyword side's reads find -------------------------------------------------


@pytest.fixture
def starved_graph(tenant, other_tenant, settings):
    """A tenant whose vector side walks the graph and finds nothing: 600 of another tenant's chunks nearer the
    query come first, and the scan stops soon after (hnsw.max_scan_tuples). Its chunks: "zebra canary" in 50 (the
    last, with the fewest other words, nearest the query), "zebra" alone in 60, "canary" alone in 60."""
    settings.KB_SEARCH_EXACT_MAX_CHUNKS = 0
    settings.SEARCH_GRAPH_MIN_SHARE_ROWS = 0  # walked at any share
    filler = "of the service during the weekly release window with notes"
    sections = [f"## Part {n}\n\nZebra canary {filler} {n}." for n in range(49)]
    sections += [f"## Part {n}\n\nZebra {filler} {n}." for n in range(49, 109)]
    sections += [f"## Part {n}\n\nCanary {filler} {n}." for n in range(109, 169)]
    sections += ["## Part 169\n\nZebra canary 169."]
    index(tenant, "notes.md", "# Notes\n\n" + "\n\n".join(sections) + "\n")
    index(other_tenant, "other.md", "# Z\n\n" + "\n\n".join("## Z\n\nZebra canary." for _ in range(600)) + "\n")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE kb_kbchunk")
        # So few rows would be sorted by the tenant's index: the graph only walks where the sort costs more.
        cursor.execute("SET enable_sort = off")
        cursor.execute("SET hnsw.max_scan_tuples = 1")
        # The graph's levels are drawn at random: in a few builds in a hundred (more with earlier tests' rolled-back
        # chunks in it) the walk starts among this tenant's chunks and never reaches the 600 equal ones. Rebuilt
        # until it misses them; the test's rollback puts the index back.
        for _ in range(10):
            if not chunks_the_walk_finds(tenant):
                break
            cursor.execute("REINDEX INDEX kbchunk_embedding_hnsw")
    yield tenant
    with connection.cursor() as cursor:
        cursor.execute("RESET enable_sort")
        cursor.execute("RESET hnsw.max_scan_tuples")


def exact_vector_side(tenant, query: str, settings) -> list[DocumentHit]:
    settings.KB_SEARCH_EXACT_MAX_CHUNKS = 10**9
    try:
        return kb_search(tenant=tenant, query=query, limit=10)
    finally:
        settings.KB_SEARCH_EXACT_MAX_CHUNKS = 0


def chunks_the_walk_finds(tenant) -> int:
    """How many of the tenant's chunks the graph's walk for "zebra canary" finds, walked as kb_search walks it."""
    vector = HashEmbedder(dimensions=settings.EMBEDDING_DIMENSIONS).embed(["zebra canary"])[0]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', %s, true)",
            [str(settings.KB_SEARCH_EF_SEARCH)],
        )
        cursor.execute(
            "SELECT count(*) FROM (SELECT id FROM kb_kbchunk WHERE tenant_id = %s ORDER BY embedding <=> %s::vector"
            " LIMIT %s) walked",
            [tenant.pk, vector_literal(vector), settings.KB_SEARCH_EF_SEARCH],
        )
        (found,) = cursor.fetchone()
        transaction.set_rollback(True)  # the walk's settings end with the savepoint
    return found


def test_the_graph_is_starved_here(starved_graph):
    assert chunks_the_walk_finds(starved_graph) == 0


def test_the_chunks_read_in_full_are_ranked_by_the_fused_score(starved_graph, settings):
    settings.KB_SEARCH_KEYWORD_CHUNKS_READ = 10**9  # both terms read in full; 50 chunks tie on the keyword side

    hits = kb_search(tenant=starved_graph, query="zebra canary", limit=10)

    assert hits[0].text.endswith("Zebra canary 169.")
    assert hits == exact_vector_side(starved_graph, "zebra canary", settings)


def test_a_pattern_of_common_terms_is_read_nearest_first(starved_graph, settings):
    settings.KB_SEARCH_KEYWORD_CHUNKS_READ = 100  # both terms common (110 chunks each); "both" estimated at 71

    hits = kb_search(tenant=starved_graph, query="zebra canary", limit=10)

    assert hits[0].text.endswith("Zebra canary 169.")
    assert hits == exact_vector_side(starved_graph, "zebra canary", settings)


@pytest.mark.parametrize(
    ("chunks", "configured", "chunks_read"),
    [
        (500, None, 2_000),
        (10_000, None, 2_000),
        (100_000, None, 6_325),
        (1_000_000, None, 20_000),
        (1_000_000, 700, 700),
    ],
)
def test_the_chunks_read_in_full_grow_with_the_tenant_unless_set(settings, chunks, configured, chunks_read):
    settings.KB_SEARCH_KEYWORD_CHUNKS_READ = configured

    assert keyword_chunks_read(chunks) == chunks_read


@pytest.mark.parametrize(("configured", "patterns"), [(None, 1), (2_000, 3)])
def test_a_large_tenant_reads_in_full_a_term_a_fixed_budget_leaves_common(tenant, settings, configured, patterns):
    # In 1M chunks, "alpha" (15,000 chunks) fits the grown budget (20,000): "beta" alone is left common, one pattern.
    # With 2,000 both are common: both, alpha alone, beta alone.
    settings.KB_SEARCH_KEYWORD_CHUNKS_READ = configured
    statistics = TermChunks(chunks=1_000_000, per_term=[15_000, 300_000], table_chunks=1_000_000)
    vector = HashEmbedder(dimensions=settings.EMBEDDING_DIMENSIONS).embed(["alpha beta"])[0]

    sql, _ = kb_search_statement(
        tenant=tenant, keywords=KeywordQuery("alpha beta"), statistics=statistics, vector=vector, limit=10
    )

    assert sql.count("AND (SELECT score FROM patterns WHERE pattern =") == patterns


@pytest.mark.parametrize(("chunks_read", "nearest_first"), [(2_000, 0), (3_000, 1), (9_400, 2)])
def test_patterns_are_read_nearest_first_within_what_the_rare_terms_left_to_read(tenant, settings, chunks_read,
                                                                                 nearest_first):  # fmt: skip
    # "alpha" is read in full (1,500 chunks), "beta" and "gamma" are common: their patterns, best first, hold ~709
    # chunks (both), ~7,171 (beta alone) and ~8,156 (gamma alone), estimated.
    settings.KB_SEARCH_KEYWORD_CHUNKS_READ = chunks_read
    statistics = TermChunks(chunks=100_000, per_term=[1_500, 8_000, 9_000], table_chunks=100_000)
    vector = HashEmbedder(dimensions=settings.EMBEDDING_DIMENSIONS).embed(["alpha beta gamma"])[0]
    keywords = KeywordQuery("alpha beta gamma")

    sql, _ = kb_search_statement(tenant=tenant, keywords=keywords, statistics=statistics, vector=vector, limit=10)
    keyword_only, _ = kb_search_statement(
        tenant=tenant, keywords=keywords, statistics=statistics, vector=None, limit=10
    )

    assert sql.count("ORDER BY (embedding <=> %(vector)s::vector) + 0, id") == nearest_first
    assert "<=>" not in keyword_only


def test_what_the_search_reads_of_a_chunk_stays_inline_and_its_texts_make_room(tenant):
    # The project's documentation is real prose and code: its 400-token chunks are what a knowledge base holds. The
    # search reads every matching chunk's vector and tsvector, and only the returned chunks' texts (migration kb 0010).
    if connection.pg_version < 170000:
        pytest.skip("pg_column_toast_chunk_id, which tells where a value is stored, needs PostgreSQL 17+")
    for page in sorted((settings.BASE_DIR / "docs").glob("*.md")):
        index(tenant, f"docs/{page.name}", page.read_text())
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT count(*),
                   count(*) FILTER (WHERE pg_column_toast_chunk_id(embedding) IS NOT NULL
                                       OR pg_column_compression(embedding) IS NOT NULL
                                       OR pg_column_toast_chunk_id(search_vector) IS NOT NULL
                                       OR pg_column_compression(search_vector) IS NOT NULL),
                   count(*) FILTER (WHERE pg_column_toast_chunk_id(text) IS NULL AND pg_column_compression(text) IS NULL
                                       AND pg_column_toast_chunk_id(search_text) IS NULL
                                       AND pg_column_compression(search_text) IS NULL)
            FROM kb_kbchunk WHERE tenant_id = %s AND token_count >= 300
            """,
            [tenant.pk],
        )
        long_chunks, search_columns_moved, texts_kept_whole = cursor.fetchone()
    assert long_chunks >= 20
    assert search_columns_moved == 0
    assert texts_kept_whole == 0
