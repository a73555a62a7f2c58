import hashlib
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connection, connections
from django.db.models import Q, QuerySet, Sum
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from django.utils import timezone

from ai.services import active_embedding_model, degraded_without, query_vector_or_none
from core.db import parse_timestamps_in_c, vector_from_binary, vector_literal
from core.keywords import Bm25, KeywordQuery, keyword_score, scored_rows
from core.metrics import SEARCH_SECONDS, timed
from core.replicas import read_alias
from search.diversity import diversified
from search.filters import Field as FilterField
from search.filters import Node as FilterNode
from search.filters import filter_parse, filter_q, filter_sql
from search.nearest import (
    NearestPath,
    VectorTable,
    nearest_path,
    nearest_sql,
    walks_graph_params,
    walks_graph_sql,
)
from search.planner import graph_walk_settings, rows_after_settings
from tenancy.models import Tenant

from .models import Fact, FactConflict, FactEvent, FactSearchCount


def fact_get(*, tenant: Tenant, fact_id: int) -> Fact:
    """One fact of `tenant`; a fact of any other tenant is indistinguishable from a missing one (404)."""
    return get_object_or_404(Fact.objects.filter(tenant=tenant), pk=fact_id)


def facts_list(
    *,
    tenant: Tenant,
    user_id: str,
    statuses: list[str] | None = None,
    categories: list[str] | None = None,
    sources: list[str] | None = None,
    pinned: bool | None = None,
    agent_id: str | None = None,
    validity: str = "current",
    filters: FilterNode | None = None,
) -> QuerySet[Fact]:
    """A user's facts, newest first. validity: current (not superseded), superseded, or all. filters: a tree of the
    filter language (fact_filters_parse)."""
    queryset = Fact.objects.filter(tenant=tenant, user_id=user_id)
    if filters is not None:
        queryset = queryset.filter(filter_q(filters, fields=FACT_FILTER_FIELDS))
    if statuses:
        queryset = queryset.filter(status__in=statuses)
    if categories:
        queryset = queryset.filter(category__in=categories)
    if sources:
        queryset = queryset.filter(source__in=sources)
    if pinned is not None:
        queryset = queryset.filter(pinned=pinned)
    if agent_id is not None:
        queryset = queryset.filter(agent_id=agent_id)
    if validity == "current":
        queryset = queryset.filter(valid_to__isnull=True)
    elif validity == "superseded":
        queryset = queryset.filter(valid_to__isnull=False)
    return queryset.order_by("-id")


# What the filter language may name of a fact (search.filters): the same names in every API that takes filters.
FACT_FILTER_FIELDS: dict[str, FilterField] = {
    "id": FilterField("integer", "id"),
    "content": FilterField("text", "content"),
    "category": FilterField("text", "category", tuple(Fact.Category.values)),
    "agent_id": FilterField("text", "agent_id"),
    "source": FilterField("text", "source", tuple(Fact.Source.values)),
    "status": FilterField("text", "status", tuple(Fact.Status.values)),
    "pinned": FilterField("boolean", "pinned"),
    "confidence": FilterField("number", "confidence"),
    "usage_count": FilterField("integer", "usage_count"),
    "created_at": FilterField("datetime", "created_at"),
    "updated_at": FilterField("datetime", "updated_at"),
    "occurred_at": FilterField("datetime", "occurred_at"),
    "last_used_at": FilterField("datetime", "last_used_at"),
    "metadata": FilterField("metadata", "metadata"),
}


def fact_filters_parse(value, *, path: str = "filters") -> FilterNode:
    """The filter language's tree of `value` (decoded JSON) over a fact's fields; FilterError naming the path."""
    return filter_parse(value, fields=FACT_FILTER_FIELDS, path=path)


def facts_active_count(*, tenant: Tenant, user_id: str) -> int:
    """How many current active facts the user has, as FactSearchCount keeps them (no read of the user's facts)."""
    counts = FactSearchCount.objects.filter(tenant=tenant, user_id=user_id, status=Fact.Status.ACTIVE)
    return counts.aggregate(active=Coalesce(Sum("entries"), 0))["active"]


def fact_of_user(*, tenant: Tenant, user_id: str, fact_id: int, agent_id: str | None = None) -> Fact | None:
    """One fact of `tenant`'s `user_id` (and of `agent_id`, when given); None for a fact of anyone else, as for one
    that does not exist."""
    return facts_list(tenant=tenant, user_id=user_id, agent_id=agent_id, validity="all").filter(pk=fact_id).first()


def facts_most_important(
    *, tenant: Tenant, user_id: str, limit: int, agent_id: str | None = None, now=None
) -> list[Fact]:
    """The user's current active facts that matter most when there is no query yet (an agent's first look at its
    user): pinned first, then by (0.5 + 0.5 x confidence) x ln(2 + usage_count) x the search's recency decay, newest
    first on a tie. usage_count is how often the fact was picked *by relevance* for a prompt (/context, search): the
    facts a user's conversations keep needing; its logarithm lets confidence and recency still count. Decay follows
    FACTS_SEARCH_HALF_LIFE_DAYS, since the fact was last used or learned, as in facts_search."""
    half_life_days = settings.FACTS_SEARCH_HALF_LIFE_DAYS
    last_seen = "coalesce(last_used_at, occurred_at, valid_from)"
    decay, params = "1", []
    if half_life_days:
        decay = f"power(0.5, greatest(0, extract(epoch from (%s::timestamptz - {last_seen}))) / %s)"
        params = [now or timezone.now(), half_life_days * 86400]
    importance = RawSQL(f"(0.5 + 0.5 * confidence) * ln(2 + usage_count) * {decay}", params)
    current = facts_list(tenant=tenant, user_id=user_id, statuses=[Fact.Status.ACTIVE], agent_id=agent_id)
    ranked = current.annotate(importance=importance, last_seen=RawSQL(last_seen, []))
    return list(ranked.order_by("-pinned", "-importance", "-last_seen", "-id")[:limit])


@dataclass(frozen=True)
class Neighbour:
    fact: Fact
    similarity: float


def facts_nearest(
    *,
    tenant: Tenant,
    user_id: str,
    vector: np.ndarray,
    limit: int,
    statuses: list[str] | None = None,
    agent_id: str = "",
) -> list[Neighbour]:
    """The user's current facts (active and pending unless `statuses` says) closest to `vector`: the nearest by the
    narrow entries' half-precision vectors, re-scored exactly with the full ones, in one statement (the ORM's
    compiling cost more than the query). The facts come without their vectors and search columns.
    With an `agent_id`, only that agent's facts and the facts of no agent: another agent's are never a neighbour."""
    sql, params = facts_nearest_statement(
        tenant=tenant, user_id=user_id, vector=vector, limit=limit, statuses=statuses, agent_id=agent_id
    )
    with connection.cursor() as cursor:
        rows = _fetch_search_rows(cursor, sql, params)
    return [Neighbour(fact=_hit_fact(values), similarity=1.0 - distance) for *values, distance in rows]


def facts_nearest_statement(
    *,
    tenant: Tenant,
    user_id: str,
    vector: np.ndarray,
    limit: int,
    statuses: list[str] | None = None,
    agent_id: str = "",
) -> tuple[str, dict]:
    """The statement facts_nearest runs, and its parameters (also for EXPLAIN ANALYZE in tests). It counts the
    user's entries itself and chooses its path from them (search.nearest's rule in SQL): no statement before it."""
    params = (
        {
            "tenant": tenant.pk,
            "user_id": user_id,
            "agent_ids": [agent_id, ""],
            "statuses": statuses or [Fact.Status.ACTIVE, Fact.Status.PENDING],
            "model": active_embedding_model(),  # a fact awaiting its vector is judged when it arrives
            "vector": vector_literal(vector),
            "limit": limit,
            "sort_max_entries": settings.FACTS_SEARCH_EXACT_MAX_ENTRIES,
        }
        | nearest_params(limit + NEAREST_MARGIN)
        | walks_graph_params()
    )
    return (_AGENT_NEIGHBOURS_SQL if agent_id else _NEIGHBOURS_SQL), params


# Entries picked by half precision beyond the `limit` asked for, so that exact re-scoring decides the boundary.
NEAREST_MARGIN = 10


def facts_neighbours_of(*, fact_ids: list[int], limit: int) -> dict[int, list[Neighbour]]:
    """For each of `fact_ids` (facts the caller may see), its user's nearest active current facts, most similar
    first (the review console shows them beside a fact to review). One statement for a page of facts: a LATERAL
    exact scan per fact through the (tenant, user_id, status) index, instead of a search per fact."""
    if not fact_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_NEIGHBOURS_OF_SQL, {"ids": fact_ids, "limit": limit})
        rows = cursor.fetchall()
    found: dict[int, list[Neighbour]] = {}
    for fact_id, *values, distance in rows:
        found.setdefault(fact_id, []).append(Neighbour(fact=_hit_fact(values), similarity=round(1.0 - distance, 3)))
    return found


def fact_events(*, tenant: Tenant, fact_id: int) -> QuerySet[FactEvent]:
    """The audit trail of one fact, oldest first (it outlives the fact itself)."""
    return FactEvent.objects.filter(tenant=tenant, fact_id=fact_id).order_by("created_at", "id")


def fact_events_of(*, tenant: Tenant, fact_ids: list[int]) -> QuerySet[FactEvent]:
    """The audit trails of several facts at once (an export reads them a page of facts at a time), each oldest first."""
    return FactEvent.objects.filter(tenant=tenant, fact_id__in=fact_ids).order_by("fact_id", "created_at", "id")


def facts_user_ids(*, tenant: Tenant) -> list[str]:
    """Every user id the tenant holds facts of, sorted."""
    return list(Fact.objects.filter(tenant=tenant).order_by("user_id").values_list("user_id", flat=True).distinct())


def conflicts_list(*, tenant: Tenant, user_id: str | None = None, status: str | None = None) -> QuerySet[FactConflict]:
    queryset = FactConflict.objects.filter(tenant=tenant).select_related("existing_fact", "new_fact")
    if user_id is not None:
        queryset = queryset.filter(user_id=user_id)
    if status:
        queryset = queryset.filter(status=status)
    return queryset.order_by("-id")


def conflict_get(*, tenant: Tenant, conflict_id: int) -> FactConflict:
    return get_object_or_404(conflicts_list(tenant=tenant), pk=conflict_id)


def facts_open_conflicts_of(*, tenant: Tenant, fact: Fact) -> QuerySet[FactConflict]:
    return FactConflict.objects.filter(tenant=tenant, status=FactConflict.Status.OPEN).filter(
        Q(existing_fact=fact) | Q(new_fact=fact)
    )


# --- hybrid search ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoredFact:
    """A search hit with the reasons for its rank, so a person can see why it came back."""

    fact: Fact
    score: float  # what the ranking used: fused x confidence x decay (before diversity re-ranking)
    vector: float  # cosine similarity to the query (0 in a keyword-only search, or for a fact awaiting its vector)
    keyword: float  # BM25 over the user's facts, scaled so the best keyword hit of this query is 1
    decay: float  # 1.0 = no decay (pinned, fresh, or decay off)


# One statement over one user's rows (the measured fastest exact plan: btree on (tenant, user_id, status), no
# HNSW): cosine for every row, and BM25 over the user's facts (core.keywords.scored_rows: document frequencies
# counted on the same rows, from the few groups of rows matching the same terms), without length normalisation by
# default: facts are a sentence long, and penalising longer ones measured worse on LoCoMo (b = 0.75: 0.696
# recall@10, b = 0: 0.708). Only the best candidates travel back, as whole facts in the same statement, their
# vectors in pgvector's binary form (parsing the text form of 40 vectors costs more than the scan of 1,000 rows).
# Here and in the statements below the hits' facts are joined by primary key alone, the tenant checked through no
# index (`tenant_id + 0`): statistics taken before a tenant's facts arrived estimate it at one row, and the planner
# then read every fact of the tenant to find the few it returns (a new tenant of 5,000: a search 31.8 -> 12.7 ms).
_SEARCH_SQL = """
WITH {scored_rows},
best AS (
    SELECT id, vector_score, {keyword_score} AS keyword_score
    FROM base CROSS JOIN idf CROSS JOIN top{keyword_hits_only}
    ORDER BY %(vector_weight)s * vector_score + %(keyword_weight)s * {keyword_score} DESC, id DESC
    LIMIT %(candidates)s
)
SELECT {columns}, best.vector_score, best.keyword_score, vector_send(f.embedding) AS embedding_binary,
    true AS complete
FROM best JOIN facts_fact f ON f.id = best.id AND f.tenant_id + 0 = %(tenant)s
"""
# What a hit carries back; the text columns only the keyword side needs stay in the database (Django defers them).
_HIT_FIELDS = [
    field for field in Fact._meta.concrete_fields if field.name not in ("embedding", "search_text", "search_vector")
]
_HIT_COLUMNS = ", ".join(f"f.{field.column}" for field in _HIT_FIELDS)
_AT = {field.attname: index for index, field in enumerate(_HIT_FIELDS)}  # a column's place in a hit row
MIN_CANDIDATES = 20  # what MMR chooses from at least; LoCoMo recall@10 is the same with 20, 30 or 40


@timed(SEARCH_SECONDS, operation="facts_search")
def facts_search(
    *,
    tenant: Tenant,
    user_id: str,
    query: str,
    limit: int = 10,
    vector: np.ndarray | None = None,
    keyword_only: bool = False,
    categories: list[str] | None = None,
    agent_id: str | None = None,
    include_pending: bool = False,
    as_of=None,
    occurred_after=None,
    occurred_before=None,
    filters: FilterNode | None = None,
    mmr_lambda: float | None = None,
    half_life_days: float | None = None,
    now=None,
) -> list[ScoredFact]:
    """The user's facts that best answer `query`: vector + keyword, fused, weighed by confidence and recency,
    made diverse by MMR. Never counts usage (only injection into a prompt does).

    keyword_only (or a query the embedder cannot embed now) ranks by keywords alone: only facts sharing a term
    with the query. A fact awaiting its vector is found by its keywords in every search (vector score 0).
    filters: a tree of the filter language (fact_filters_parse); only facts it selects are candidates, and BM25
    counts among them."""
    if not query.strip() or limit <= 0:
        return []
    if vector is None and not keyword_only:
        vector = query_vector_or_none(query, tenant=tenant, user_id=user_id)
    if keyword_only:
        vector = None
    mmr_lambda = settings.FACTS_SEARCH_MMR_LAMBDA if mmr_lambda is None else mmr_lambda
    half_life_days = settings.FACTS_SEARCH_HALF_LIFE_DAYS if half_life_days is None else half_life_days
    now = now or timezone.now()

    statement = {
        "tenant": tenant,
        "user_id": user_id,
        "query": query,
        "vector": vector,
        "limit": limit,
        "categories": categories,
        "agent_id": agent_id,
        "include_pending": include_pending,
        "as_of": as_of,
        "occurred_after": occurred_after,
        "occurred_before": occurred_before,
        "filters": filters,
    }
    sql, params = facts_search_statement(**statement)
    with connections[read_alias()].cursor() as cursor:  # the replica during an API read (core.replicas)
        rows = _fetch_search_rows(cursor, sql, params)
        if params.get("common_terms") and not (rows and rows[0][-1]):  # a common term's entries could rank
            sql, params = facts_search_statement(**statement, read_every_term=True)
            rows = _fetch_search_rows(cursor, sql, params)
    vector_weight = settings.FACTS_SEARCH_VECTOR_WEIGHT if vector is not None else 0.0
    candidates = [_candidate(row, now, half_life_days, vector_weight) for row in rows]
    candidates.sort(key=lambda candidate: (-candidate.score, -candidate.values[_AT["id"]]))
    chosen = diversified(
        [candidate.score for candidate in candidates], [candidate.vector for candidate in candidates], limit, mmr_lambda
    )
    return [candidates[place].hit() for place in chosen]


@dataclass(frozen=True)
class FactsFound:
    results: list[ScoredFact]
    degraded: list[str]  # what the search did without: ai.services.DEGRADED_EMBEDDINGS when ranked by keywords alone


def facts_search_answer(*, tenant: Tenant, user_id: str, query: str, **options) -> FactsFound:
    """facts_search, saying whether it ranked by keywords alone (the query could not be embedded now)."""
    vector = query_vector_or_none(query, tenant=tenant, user_id=user_id) if query.strip() else None
    results = facts_search(
        tenant=tenant, user_id=user_id, query=query, vector=vector, keyword_only=vector is None, **options
    )
    return FactsFound(results, degraded_without(vector) if query.strip() else [])


def facts_search_statement(
    *,
    tenant: Tenant,
    user_id: str,
    query: str,
    vector: np.ndarray | None,
    limit: int = 10,
    categories: list[str] | None = None,
    agent_id: str | None = None,
    include_pending: bool = False,
    as_of=None,
    occurred_after=None,
    occurred_before=None,
    filters: FilterNode | None = None,
    read_every_term: bool = False,
) -> tuple[str, dict]:
    """The statement facts_search runs, and its parameters (also for EXPLAIN ANALYZE in tests and benchmarks).
    Without a vector: keywords alone, over the facts sharing a term with the query. A search of the current facts
    reads the user's statistics first (one statement, SearchStatistics); params["common_terms"] lists the terms
    whose entries it then does not read, and read_every_term builds the statement that reads them all.

    A search of the current facts reads their narrow copies (FactSearchEntry, _ENTRIES_SQL); one in the past
    (as_of), by when facts occurred, with filters (on what the copies do not hold) or with BM25 length normalisation
    scans the user's facts_fact rows (_SEARCH_SQL). Both return the same candidates, in the same order."""
    keywords = KeywordQuery(query)
    bm25 = Bm25(k1=settings.FACTS_SEARCH_BM25_K1, b=settings.FACTS_SEARCH_BM25_B)
    statuses = [Fact.Status.ACTIVE, Fact.Status.PENDING] if include_pending else [Fact.Status.ACTIVE]
    clauses = [
        "tenant_id = %(tenant)s",
        "user_id = %(user_id)s",
        "status = ANY(%(statuses)s)",
    ]
    params = {"tenant": tenant.pk, "user_id": user_id, "statuses": statuses, "model": active_embedding_model()}
    if categories:
        clauses.append("category = ANY(%(categories)s)")
        params["categories"] = list(categories)
    if agent_id is not None:
        clauses.append("agent_id = %(agent_id)s")
        params["agent_id"] = agent_id
    vector_weight = settings.FACTS_SEARCH_VECTOR_WEIGHT if vector is not None else 0.0
    candidates = max(limit * settings.FACTS_SEARCH_CANDIDATE_FACTOR, MIN_CANDIDATES)
    params |= keywords.params | {
        "vector_weight": vector_weight,
        "keyword_weight": 1 - vector_weight,
        "candidates": candidates,
    }
    if vector is not None:
        params["vector"] = vector_literal(vector)
    scans_facts = as_of is not None or occurred_after is not None or occurred_before is not None or filters is not None
    if not scans_facts and not bm25.b:
        return _entries_statement(
            keywords, bm25, clauses, params | {"pool": 2 * candidates}, vector is not None, read_every_term
        )

    # Embedded by the active model, or awaiting a vector (found by keywords meanwhile).
    clauses.append("(embedding_model = %(model)s AND embedding IS NOT NULL OR embedding_pending <> '')")
    if as_of is None:
        clauses.append("valid_to IS NULL")
    else:  # what was true then, superseded facts included
        clauses.append("valid_from <= %(as_of)s AND (valid_to IS NULL OR valid_to > %(as_of)s)")
        params["as_of"] = as_of
    if occurred_after is not None:
        clauses.append("coalesce(occurred_at, valid_from) >= %(occurred_after)s")
        params["occurred_after"] = occurred_after
    if occurred_before is not None:
        clauses.append("coalesce(occurred_at, valid_from) < %(occurred_before)s")
        params["occurred_before"] = occurred_before
    if filters is not None:
        condition, values = filter_sql(filters, fields=FACT_FILTER_FIELDS, model=Fact)
        clauses.append(condition)
        params |= values
    sql = _SEARCH_SQL.format(
        scored_rows=scored_rows(
            keywords=keywords,
            bm25=bm25,
            table="facts_fact",
            where=" AND ".join(clauses),
            # A fact awaiting its vector scores 0 on this side.
            vector_score="coalesce(1 - (embedding <=> %(vector)s::vector), 0)" if vector is not None else "0::float8",
        ),
        keyword_score=keyword_score(keywords, bm25),
        keyword_hits_only="" if vector is not None else f"\n    WHERE {keyword_score(keywords, bm25)} > 0",
        columns=_HIT_COLUMNS,
    )
    return sql, params


# The same search over the narrow copies of the current facts (FactSearchEntry), touching only what can rank: the
# user's `nearest` entries by their half-precision vectors (at least `pool` of them; btree on (tenant, user_id,
# status), a top-N sort), and the entries matching a query term (GIN: the scope lexeme AND any term), with N read
# before (SearchStatistics). An entry in neither scores below every one of the nearest (no keyword score, a lower
# vector score), so the best `pool` of the two sets are the best of all; they are re-scored with their full vectors
# before the best `candidates` are kept, as the exact scan keeps them.
# A common term's entries (more than FACTS_SEARCH_COMMON_TERM_ENTRIES of the user's hold it; a name is in ~1,400
# of a 10k user's LoCoMo turns, reading them was most of the statement) are not read: its document frequency
# comes from FactSearchTerm, and an unread entry holds common terms only, so it scores at most their summed IDF
# (`ceiling`) on the keyword side and at most the last nearest entry's cosine on the vector side. When that bound
# is below the pool's last fused score, and the entries read hold the best keyword score (so the scaling is right
# too), no unread entry could rank: `complete`. When not, facts_search runs the statement again reading every
# term's entries. Through the HNSW graph or a shortlist, "the last nearest entry" is the walk's or the shortlist's,
# so such a pool is as approximate as their nearest.
_ENTRIES_SQL = """
WITH {nearest}matched AS MATERIALIZED (
    SELECT fact_id AS id, {vector_score} AS vector_score{match_columns}
    FROM facts_factsearchentry
    WHERE {where} AND keywords @@ (%(scope)s::tsquery && {read_terms})
),
idf AS MATERIALIZED (
    SELECT {idf_columns} FROM matched
),
top AS MATERIALIZED (
    SELECT greatest(max({top_score}), 1e-9) AS score{ceiling_column} FROM matched AS base CROSS JOIN idf
),
pool AS MATERIALIZED (
    SELECT {pool_id} AS id, {pool_vector_score} AS vector_score, {pool_keyword_score} AS keyword_score
    FROM {pool_rows} CROSS JOIN idf CROSS JOIN top
    ORDER BY %(vector_weight)s * {pool_vector_score} + %(keyword_weight)s * {pool_keyword_score} DESC, {pool_id} DESC
    LIMIT %(pool)s
){bound}
SELECT {columns}, scored.vector_score, scored.keyword_score, vector_send(f.embedding) AS embedding_binary,
    {complete} AS complete
FROM pool JOIN facts_fact f ON f.id = pool.id AND f.tenant_id + 0 = %(tenant)s
CROSS JOIN LATERAL (SELECT {exact_vector_score} AS vector_score, pool.keyword_score) scored
ORDER BY %(vector_weight)s * scored.vector_score + %(keyword_weight)s * scored.keyword_score DESC, f.id DESC
LIMIT %(candidates)s
"""
# Whether no unread entry (common terms only) could rank; see above.
_BOUND_SQL = """,
bound AS MATERIALIZED (
    SELECT top.score >= top.ceiling AND pool.entries >= %(pool)s
        AND %(vector_weight)s * greatest(
            (SELECT CASE WHEN count(*) >= %(nearest)s THEN min(vector_score) ELSE 0 END FROM nearest), 0
        ) + %(keyword_weight)s * top.ceiling / top.score < pool.last
        AS complete
    FROM top CROSS JOIN (
        SELECT count(*) AS entries, min(%(vector_weight)s * vector_score + %(keyword_weight)s * keyword_score) AS last
        FROM pool
    ) pool
)"""
# The entries' table as last estimated by ANALYZE, which counts each partition (the parent holds no rows): its rows,
# and how many partitions by user they are spread over (facts migration 0023).
_ENTRIES_TABLE_SQL = """SELECT sum(greatest(c.reltuples, 0)) AS entries, count(*) AS partitions
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'facts_factsearchentry'::regclass"""
# What the search statement is built with, read in one statement before it: the user's entries (N for BM25, and
# whether the nearest come through the graph), as FactSearchCount keeps them (its columns are the entries' a
# search filters by, so the same conditions select the counts to add up); the table's entries as last estimated
# and its partitions (_ENTRIES_TABLE_SQL); and each term's entries among the user's (FactSearchTerm; NULL for a
# phrase or a stop word, whose entries are always read and counted there).
_STATISTICS_SQL = f"""SELECT (SELECT coalesce(sum(entries), 0) FROM facts_factsearchcount WHERE {{where}}),
    entries_table.entries, entries_table.partitions,
    ARRAY(
        SELECT CASE WHEN cardinality(a) = 1 THEN
            (SELECT coalesce(sum(entries), 0) FROM facts_factsearchterm WHERE {{where}} AND lexeme = a[1]) END
        FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS t(term, n)
        CROSS JOIN tsvector_to_array(to_tsvector('english', term)) a
        ORDER BY n
    )
FROM ({_ENTRIES_TABLE_SQL}) entries_table"""


# With common terms, the nearest entries read are this many pools: the unread entries' cosine bound is then lower,
# so the statement is complete more often (10k LoCoMo turns, 300 questions: read again 14 times with 2, 6 with 3).
NEAREST_REACH = 3


@dataclass(frozen=True)
class SearchStatistics:
    entries: int  # the user's, as the search filters them
    table_entries: float  # every user's, as last estimated by ANALYZE
    partitions: int  # of the entries' table, by user
    term_entries: list[int | None]  # per query term (None: a phrase or a stop word)


# facts_nearest's count of the user's entries (what decides how the nearest are found, with the table's rows and
# partitions), as FactSearchCount keeps them: its columns are the entries' a search filters by, so the same
# conditions select the counts to add up.
_COUNTED_SQL = f"""counted AS MATERIALIZED (
    SELECT (SELECT coalesce(sum(entries), 0) FROM facts_factsearchcount WHERE {{where}}) AS rows,
        entries_table.entries AS table_rows, entries_table.partitions
    FROM ({_ENTRIES_TABLE_SQL}) entries_table
)"""
# The user's `nearest` entries nearest to the query by half precision (the search's and facts_nearest's), found by
# the path search.nearest chooses: an exact sort of the user's rows (btree); a shortlist of the rows nearest by
# their vectors' signs, re-scored by half precision; or the HNSW graph of the user's partition. The shortlist and the
# walk find a measured 0.99 and more of the exact nearest; every path's entries are re-scored exactly afterwards. A
# statement whose path is decided before holds that branch alone; facts_nearest's holds the three, each gated by a
# one-time filter on `counted`, so that only one runs.
ENTRIES = VectorTable(name="facts_factsearchentry", key="fact_id", vector_type="halfvec", signs=True)
_WALKS_GRAPH = walks_graph_sql("rows", "table_rows", "partitions")
# The paths as facts_nearest decides them, from `counted` (search.nearest's rule in SQL).
_COUNTED_PATHS = {
    NearestPath.SORT: "(SELECT rows <= %(sort_max_entries)s FROM counted)",
    NearestPath.SHORTLIST: f"(SELECT rows > %(sort_max_entries)s AND NOT {_WALKS_GRAPH} FROM counted)",
    NearestPath.GRAPH: f"(SELECT rows > %(sort_max_entries)s AND {_WALKS_GRAPH} FROM counted)",
}
# Shortlisted by their signs: this many entries for each nearest one asked for, and at least the floor (the signs
# of 384 dimensions tell near from far coarsely; docs/benchmarks.md has the share of the exact nearest found).
SHORTLIST_PER_NEAREST = 5
SHORTLIST_FLOOR = 400


def _nearest_sql(where: str, path: NearestPath | None = None, keywords_column: bool = False) -> str:
    """The nearest CTE over entries selected by `where`: the branch of `path`, or, path None, every branch, each
    gated by a one-time filter on `counted` that decides it in the statement."""
    nearest = nearest_sql(
        ENTRIES,
        where=f"{where} AND vector_model = %(model)s",
        limit="%(nearest)s",
        path=path,
        gates=_COUNTED_PATHS,
        columns=", keywords" if keywords_column else "",
    )
    return f"nearest AS MATERIALIZED (\n    {nearest}\n)"


def graph_settings(params: dict) -> tuple[str, dict]:
    """The statement that sets the graph walk's settings (search.planner), to send before a statement built on
    _nearest_sql in the same call, as _fetch_search_rows does (for EXPLAIN in tests and benchmarks)."""
    return graph_walk_settings(ef_search=_ef_search(params)), params


def _ef_search(params: dict) -> int:
    return max(settings.FACTS_SEARCH_EF_SEARCH, params.get("nearest", 0))


def nearest_params(nearest: int) -> dict:
    """How many entries a statement built on _nearest_sql reads: `nearest`, from a shortlist of `shortlist`."""
    return {"nearest": nearest, "shortlist": max(nearest * SHORTLIST_PER_NEAREST, SHORTLIST_FLOOR)}


def _fetch_search_rows(cursor, sql: str, params: dict) -> list[tuple]:
    """The rows of a search or neighbours statement, sent after the graph walk's settings (unused by the statements
    that walk no graph: a keyword-only search, or one scanning facts_fact)."""
    parse_timestamps_in_c(cursor)
    return rows_after_settings(cursor, sql, params, ef_search=_ef_search(params))


_NEIGHBOURS_WHERE = "tenant_id = %(tenant)s AND user_id = %(user_id)s AND status = ANY(%(statuses)s)"
# facts_nearest's statement: those entries' facts (by primary key, see _SEARCH_SQL), re-scored with their full vectors.
_NEIGHBOURS_TEMPLATE = """
WITH {counted},
{nearest}
SELECT {columns}, f.embedding <=> %(vector)s::vector AS distance
FROM nearest JOIN facts_fact f ON f.id = nearest.id AND f.tenant_id + 0 = %(tenant)s
ORDER BY distance, f.id
LIMIT %(limit)s
"""


def _neighbours_sql(where: str) -> str:
    return _NEIGHBOURS_TEMPLATE.format(
        counted=_COUNTED_SQL.format(where=where), nearest=_nearest_sql(where), columns=_HIT_COLUMNS
    )


_NEIGHBOURS_SQL = _neighbours_sql(_NEIGHBOURS_WHERE)
_AGENT_NEIGHBOURS_SQL = _neighbours_sql(_NEIGHBOURS_WHERE + " AND agent_id = ANY(%(agent_ids)s)")
# facts_neighbours_of's statement: for each fact of a page, its user's nearest active current facts.
_NEIGHBOURS_OF_SQL = f"""
SELECT p.id, {_HIT_COLUMNS}, f.embedding <=> p.embedding AS distance
FROM facts_fact p
CROSS JOIN LATERAL (
    SELECT * FROM facts_fact n
    WHERE n.tenant_id = p.tenant_id AND n.user_id = p.user_id AND n.status = 'active' AND n.valid_to IS NULL
      AND n.embedding_model = p.embedding_model AND n.id <> p.id AND n.embedding IS NOT NULL
    ORDER BY n.embedding <=> p.embedding
    LIMIT %(limit)s
) f
WHERE p.id = ANY(%(ids)s) AND p.embedding IS NOT NULL
ORDER BY p.id, distance, f.id
"""


def _search_statistics(keywords: KeywordQuery, where: str, params: dict) -> SearchStatistics:
    with connections[read_alias()].cursor() as cursor:
        cursor.execute(_STATISTICS_SQL.format(where=where), params | {"terms": keywords.terms})
        return SearchStatistics(*cursor.fetchone())


def _entries_statement(
    keywords: KeywordQuery, bm25: Bm25, clauses: list[str], params: dict, with_vector: bool, read_every_term: bool
) -> tuple[str, dict]:
    # Embedded by the active model, or awaiting a vector (found by keywords meanwhile).
    where = " AND ".join([*clauses, "(vector_model = %(model)s OR awaiting_vector)"])
    params["scope"] = search_scope_lexeme(params["tenant"], params["user_id"])
    statistics = _search_statistics(keywords, where, params)
    params["entries"] = statistics.entries
    # Without a vector the pool is the best keyword scores, most of which a common term's entries hold: read them.
    common = [
        n
        for n, entries in enumerate(statistics.term_entries)
        if with_vector
        and not read_every_term
        and entries is not None
        and entries > settings.FACTS_SEARCH_COMMON_TERM_ENTRIES
    ]
    params |= {f"entries{n}": statistics.term_entries[n] for n in common} | {"common_terms": common}
    params |= nearest_params(params["pool"] * (NEAREST_REACH if common else 1))
    path = nearest_path(
        rows=statistics.entries,
        table_rows=statistics.table_entries,
        partitions=statistics.partitions,
        sort_max_rows=settings.FACTS_SEARCH_EXACT_MAX_ENTRIES,
        has_signs=ENTRIES.signs,
    )

    def document_frequency(match: str) -> str:  # a common term's from the statistics, the others' counted
        n = int(match.removeprefix("m"))
        return f"%(entries{n})s" if n in common else f"count(*) FILTER (WHERE {match})"

    pool_keyword = f"coalesce({keyword_score(keywords, bm25)}, 0)"
    if common:  # a nearest entry not read as a match may hold common terms
        pool_keyword = (
            f"CASE WHEN base.id IS NULL THEN {keywords.idf_sum_matching('nearest.keywords')} / top.score"
            f" ELSE {keyword_score(keywords, bm25)} END"
        )
    sql = _ENTRIES_SQL.format(
        nearest=_nearest_sql(where, path, keywords_column=bool(common)) + ",\n" if with_vector else "",
        vector_score="coalesce(1 - (embedding <=> %(vector)s::halfvec), 0)" if with_vector else "0::float8",
        match_columns=keywords.match_columns("keywords"),
        where=where,
        read_terms=keywords.any_term(n for n in range(len(keywords)) if n not in common),
        idf_columns=keywords.idf_columns("%(entries)s", document_frequency),
        top_score=keywords.idf_sum("base"),
        ceiling_column=", (SELECT " + " + ".join(f"idf{n}" for n in common) + " FROM idf) AS ceiling" if common else "",
        pool_id="coalesce(base.id, nearest.id)" if with_vector else "base.id",
        pool_vector_score="coalesce(base.vector_score, nearest.vector_score)" if with_vector else "base.vector_score",
        pool_rows="nearest FULL JOIN matched AS base ON base.id = nearest.id" if with_vector else "matched AS base",
        pool_keyword_score=pool_keyword,
        bound=_BOUND_SQL if common else "",
        complete="(SELECT complete FROM bound)" if common else "true",
        columns=_HIT_COLUMNS,
        exact_vector_score="coalesce(1 - (f.embedding <=> %(vector)s::vector), 0)" if with_vector else "0::float8",
    )
    return sql, params


def search_scope_lexeme(tenant_id: int, user_id: str) -> str:
    """The lexeme FactSearchEntry.keywords carries for its user (facts_search_scope in facts/sql/search_upkeep.sql,
    which the triggers call, computes the same)."""
    return "zs" + hashlib.md5(f"{tenant_id}:{user_id}".encode()).hexdigest()  # noqa: S324 - a key, not a secret


@dataclass(frozen=True)
class _Candidate:
    """A scored row of the search statement; only the hits MMR finally chooses are built into Facts (building every
    candidate cost ~2 ms a search)."""

    values: tuple
    vector: np.ndarray | None
    score: float
    vector_score: float
    keyword_score: float
    decay: float

    def hit(self) -> ScoredFact:
        fact = _hit_fact(self.values)
        fact.embedding = self.vector
        return ScoredFact(
            fact, round(self.score, 6), round(self.vector_score, 6), round(self.keyword_score, 6), round(self.decay, 6)
        )


def _candidate(row: tuple, now, half_life_days: float, vector_weight: float) -> _Candidate:
    *values, vector_score, keyword_score, embedding, _complete = row
    fused = vector_weight * vector_score + (1 - vector_weight) * keyword_score
    last_seen = values[_AT["last_used_at"]] or values[_AT["occurred_at"]] or values[_AT["valid_from"]]
    decay = 1.0 if values[_AT["pinned"]] else _decay(last_seen, now, half_life_days)
    score = fused * (0.5 + 0.5 * values[_AT["confidence"]]) * decay
    vector = vector_from_binary(embedding) if embedding is not None else None  # None: awaiting its vector
    return _Candidate(tuple(values), vector, score, vector_score, keyword_score, decay)


def _hit_fact(values: tuple) -> Fact:
    """A Fact from a row of _HIT_COLUMNS, as the ORM would build it (Fact.objects.raw costs 5 ms more per search)."""
    converted = [
        field.from_db_value(value, None, connection) if hasattr(field, "from_db_value") else value
        for field, value in zip(_HIT_FIELDS, values, strict=True)
    ]
    return Fact.from_db(connection.alias, [field.attname for field in _HIT_FIELDS], converted)


def _decay(last_seen, now, half_life_days: float) -> float:
    """Exponential forgetting since the fact was last used (or learned); the caller exempts pinned facts."""
    if not half_life_days:
        return 1.0
    age_days = max(0.0, (now - last_seen).total_seconds() / 86400)
    return 0.5 ** (age_days / half_life_days)
