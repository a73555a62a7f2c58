"""Reads of the knowledge base: documents and their chunks, always within one tenant."""

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connections
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404

from ai.services import active_embedding_model, degraded_without, query_vector_or_none
from core.db import vector_literal
from core.keywords import Bm25, KeywordQuery, idf
from core.metrics import SEARCH_SECONDS, timed
from core.replicas import read_alias
from search.nearest import NearestPath, VectorTable, nearest_path, nearest_sql
from search.planner import rows_after_settings
from tenancy.models import Tenant

from .models import Document, DocumentIndexing, KBChunk


def documents_list(*, tenant: Tenant) -> QuerySet[Document]:
    """The tenant's documents, by doc id."""
    return Document.objects.filter(tenant=tenant).order_by("doc_id")


def document_get(*, tenant: Tenant, document_id: int) -> Document:
    """One document of `tenant`; a document of any other tenant is indistinguishable from a missing one (404)."""
    return get_object_or_404(Document.objects.filter(tenant=tenant), pk=document_id)


def document_by_doc_id(*, tenant: Tenant, doc_id: str) -> Document | None:
    return Document.objects.filter(tenant=tenant, doc_id=doc_id).first()


def documents_under_root(*, tenant: Tenant, source_root: Path | str) -> QuerySet[Document]:
    """The tenant's documents whose source_path lies inside the directory `source_root` (an absolute path)."""
    prefix = str(source_root).rstrip("/") + "/"  # "/docs" must not match "/docs-old/a.md"
    return Document.objects.filter(tenant=tenant, source_path__startswith=prefix).order_by("doc_id")


def document_chunks(*, tenant: Tenant, document: Document) -> QuerySet[KBChunk]:
    """A document's chunks in reading order."""
    return KBChunk.objects.filter(tenant=tenant, document=document).order_by("ordinal")


def documents_with_chunk_counts(*, tenant: Tenant, path_prefix: str = "") -> QuerySet[Document]:
    """documents_list annotated with `chunk_count`; the count is a per-row subquery, so a page of documents
    costs a page of index-only counts however large the knowledge base is."""
    chunk_counts = (
        KBChunk.objects.filter(tenant=tenant, document=OuterRef("pk"))
        .order_by()
        .values("document")
        .annotate(count=Count("pk"))
        .values("count")
    )
    queryset = documents_list(tenant=tenant)
    if path_prefix:
        queryset = queryset.filter(doc_id__startswith=path_prefix)
    return queryset.annotate(chunk_count=Coalesce(Subquery(chunk_counts), 0))


def document_with_chunk_count(*, tenant: Tenant, document_id: int) -> Document:
    """document_get with `chunk_count`."""
    return get_object_or_404(documents_with_chunk_counts(tenant=tenant), pk=document_id)


def document_indexing_progress(*, tenant: Tenant, document: Document) -> DocumentIndexing | None:
    """The worker's progress on the document's waiting text (None when nothing waits); the text itself unread."""
    return DocumentIndexing.objects.filter(tenant=tenant, document=document).defer("text", "fields").first()


@dataclass(frozen=True)
class DocumentHit:
    """A passage from the tenant's knowledge base, with where it comes from and why it ranked where it did."""

    document_id: int
    doc_id: str
    heading_path: str
    line_start: int
    line_end: int
    text: str
    score: float
    vector: float = 0.0
    keyword: float = 0.0

    @property
    def citation(self) -> str:
        section = f" §{self.heading_path}" if self.heading_path else ""
        return f"doc:{self.doc_id}{section}, lines {self.line_start}-{self.line_end}"


# --- search -------------------------------------------------------------------------------------------------------

# Tenant-wide hybrid search. Each channel picks its own candidates with its own index: the vector side as search.nearest
# finds a scope's nearest rows (an HNSW walk, iterative so the tenant filter cannot starve it, or an exact sort of a
# small tenant's chunks), the keyword side the GIN index on search_vector, or the primary key in id order for a common
# term. The keyword side is BM25 (core.keywords) with the tenant's own statistics, N and each term's chunks
# (KBTermFrequency, read before the statement). With b = 0 a chunk's score depends only on which terms it holds, so the
# best `candidates` are found exactly without ranking every chunk of a common term (a term in a fifth of 107k chunks
# cost 336 of 364 ms so): every chunk of the rarest terms is read and ranked (rare_best); a chunk holding none of them
# holds a pattern of the common terms, and every chunk of one pattern scores alike, so per pattern only the lowest ids
# can rank (ties go to the lower id), and only a pattern scoring at least the rare ranking's last place (bar) is read at
# all (a one-time filter). The patterns are walked best first and the walk stops once it has `candidates` chunks: the
# patterns after them cannot rank (pattern_walk).
# With a query vector, the chunks the keyword side reads in full are also ranked by the fused score itself (rare_fused:
# their vectors are in the rows read anyway, and the keyword side's best score is known once keyword_hits is), and a
# small pattern's chunks are read nearest first: chunks that tie on the keyword side are told apart by cosine, and
# the vector side's 40 nearest (or the walk's misses, with the hash embedder's vectors) need not hold them.
# The union is then scored on both sides alike, so a passage found by one channel still gets the other's score.
# Its chunks and their documents are read by primary key, one lookup each: a LATERAL ... OFFSET 0 is not made a join,
# and `tenant_id + 0` is checked through no index. Statistics taken before a tenant's chunks arrived estimate it at
# one row, and the planner then looked for each candidate among every chunk of the tenant (a new tenant of 20k
# chunks beside 60k: p50 213-221 -> 67-74 ms; with fresh statistics the same plan, 35-38 against 30-37 ms).
_SEARCH_SQL = """
WITH vector_hits AS MATERIALIZED (
    {vector_hits}
),
rare_matches AS MATERIALIZED (
    SELECT id{match_columns}{length_column}{distance_column}
    FROM kb_kbchunk
    WHERE {where} AND search_vector @@ {rare_terms}
),
idf AS MATERIALIZED (
    SELECT {idf_columns}{average_length}
),
rare_best AS MATERIALIZED (
    SELECT id, {match_score} AS score
    FROM rare_matches CROSS JOIN idf
    ORDER BY score DESC, id
    LIMIT %(candidates)s
),
bar AS MATERIALIZED (
    SELECT CASE WHEN count(*) < %(candidates)s THEN '-infinity'::float8 ELSE min(score) END AS score FROM rare_best
),
patterns AS MATERIALIZED (
    SELECT pattern, {pattern_score} AS score
    FROM idf CROSS JOIN (VALUES {pattern_rows}) AS p(pattern{pattern_columns})
),
pattern_best AS MATERIALIZED (
    SELECT id, score FROM (
        {pattern_walk}
    ) walk
    LIMIT %(candidates)s
),
keyword_hits AS MATERIALIZED (
    SELECT id, score FROM (
        SELECT id, score FROM rare_best
        UNION ALL
        SELECT id, score FROM pattern_best
    ) ranked
    ORDER BY score DESC, id
    LIMIT %(candidates)s
),
rare_fused AS MATERIALIZED (
    {rare_fused}
),
candidates AS (
    SELECT id FROM vector_hits
    UNION
    SELECT id FROM rare_fused
    UNION
    SELECT id FROM keyword_hits{pattern_candidates}
),
scored AS (
    SELECT c.id, c.document_id, c.heading_path, c.line_start, c.line_end, c.text,
           {cosine} AS cosine{candidate_columns}
    FROM candidates CROSS JOIN LATERAL (
        SELECT * FROM kb_kbchunk c WHERE c.id = candidates.id AND c.tenant_id + 0 = %(tenant)s OFFSET 0
    ) c
)
SELECT s.id, s.document_id, d.doc_id, s.heading_path, s.line_start, s.line_end, s.text, s.cosine,
       {candidate_score} AS bm25, {matched} AS matched
FROM scored s CROSS JOIN idf
CROSS JOIN LATERAL (
    SELECT doc_id FROM kb_document d WHERE d.id = s.document_id AND d.tenant_id + 0 = %(tenant)s OFFSET 0
) d
"""
# The chunks of one pattern of the common terms, lowest ids first, read only when the pattern can still rank.
_PATTERN_HITS_SQL = """(
            SELECT id, (SELECT score FROM patterns WHERE pattern = {pattern}) AS score
            FROM kb_kbchunk
            WHERE {where} AND search_vector @@ {tsquery}
                AND (SELECT score FROM patterns WHERE pattern = {pattern}) >= (SELECT score FROM bar)
            ORDER BY {order}
            LIMIT %(candidates)s
        )"""
# The chunks read in full, best fused score first: _fused's score (keyword scaled by the best keyword score, which
# keyword_hits holds, and by the share of the query's terms matched), computed in SQL.
_RARE_FUSED_SQL = """SELECT id FROM rare_matches CROSS JOIN idf
    ORDER BY %(weight)s::float8 * (1 - distance) + (1 - %(weight)s::float8) * {match_score}
        / (SELECT coalesce(nullif(max(score), 0), 1) FROM keyword_hits) * {matched} / {terms} DESC, id
    LIMIT %(candidates)s"""
# Patterns that score alike (terms in as many chunks) are ranked together, by score and then id, as in a full read.
_TIED_PATTERNS_SQL = """(
            SELECT id, score FROM ({patterns}) tied
            ORDER BY score DESC, id
            LIMIT %(candidates)s
        )"""
# The table's chunks, every tenant's, as last estimated by ANALYZE (row -1), the tenant's chunks (row 0), and each
# term's chunks in the tenant (row n for term n - 1): a one-word term's from KBTermFrequency, a phrase's (a CJK
# pair, a word the parser splits) counted; a term of stop words matches nothing.
_TERM_CHUNKS_SQL = """
SELECT -1, greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'kb_kbchunk'::regclass
UNION ALL
SELECT 0, coalesce((SELECT chunks FROM kb_kbtermfrequency WHERE tenant_id = %(tenant)s AND lexeme = ''), 0)
UNION ALL
SELECT n, CASE cardinality(lexemes)
    WHEN 0 THEN 0
    WHEN 1 THEN coalesce(
        (SELECT chunks FROM kb_kbtermfrequency WHERE tenant_id = %(tenant)s AND lexeme = lexemes[1]), 0)
    ELSE (SELECT count(*) FROM kb_kbchunk
          WHERE tenant_id = %(tenant)s AND search_vector @@ phraseto_tsquery('english', term))
END
FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS t(term, n)
CROSS JOIN LATERAL (SELECT tsvector_to_array(to_tsvector('english', term)) AS lexemes) l
ORDER BY 1
"""
# Common terms beyond these many are read in full too, the rarest first: their patterns number 2^n - 1, and five
# measured fastest at 1M chunks (docs/benchmarks.md, "What each way in gave").
MAX_PATTERN_TERMS = 5


@timed(SEARCH_SECONDS, operation="kb_search")
def kb_search(
    *,
    tenant: Tenant,
    query: str,
    limit: int = 10,
    vector: np.ndarray | None = None,
    keyword_only: bool = False,
    doc_ids: Sequence[str] | None = None,
    path_prefix: str = "",
) -> list[DocumentHit]:
    """The tenant's passages that best answer `query`, best first: fused = w x cosine + (1 - w) x keyword, where
    w is KB_SEARCH_VECTOR_WEIGHT and keyword is BM25 over the tenant's chunks (KB_SEARCH_BM25_K1 / _B), scaled so
    the best keyword hit among the candidates is 1, times the share of the query's terms the passage contains.
    `vector` is the query's embedding when the caller already has it. keyword_only (or a query the embedder cannot
    embed now) ranks by the keyword side alone.

    doc_ids / path_prefix (a doc id prefix, e.g. "guides/") narrow the search to some documents. Only chunks
    embedded by the active model are searched (others are stale until re-indexed).
    """
    begun = _search_begun(tenant, query, limit)
    if begun is None:
        return []
    return _search_chunks(
        begun,
        tenant=tenant,
        query=query,
        limit=limit,
        vector=vector,
        keyword_only=keyword_only,
        doc_ids=doc_ids,
        path_prefix=path_prefix,
    )


@dataclass(frozen=True)
class _SearchBegun:
    """A query about to be searched: the database it reads, its terms, and the tenant's statistics for them."""

    alias: str
    keywords: KeywordQuery
    statistics: "TermChunks"


def _search_begun(tenant: Tenant, query: str, limit: int) -> _SearchBegun | None:
    """None when there is nothing to search: no query, no room for a hit, or no knowledge base. Answered before the
    query is embedded (and before the HNSW scan, ~1.5 ms alone)."""
    if not query.strip() or limit <= 0:
        return None
    alias = read_alias()  # the replica during an API read (core.replicas): the search reads there too
    with connections[alias].cursor() as cursor:
        # Asked on every /context, and most tenants have no knowledge base: this statement answers in 0.11-0.14 ms,
        # the statistics' (which count the tenant's chunks too) in 0.44-0.47 ms.
        cursor.execute("SELECT EXISTS (SELECT 1 FROM kb_kbchunk WHERE tenant_id = %s)", [tenant.pk])
        if not cursor.fetchone()[0]:
            return None
        keywords = KeywordQuery(query)
        return _SearchBegun(alias, keywords, _term_chunks(cursor, tenant=tenant, keywords=keywords))


def _search_chunks(
    begun: _SearchBegun,
    *,
    tenant: Tenant,
    query: str,
    limit: int,
    vector: np.ndarray | None,
    keyword_only: bool,
    doc_ids: Sequence[str] | None = None,
    path_prefix: str = "",
) -> list[DocumentHit]:
    """kb_search's work once the tenant is known to have chunks: the query embedded if it must be, then searched."""
    documents = None
    if doc_ids is not None or path_prefix:
        documents = _document_ids(tenant=tenant, doc_ids=doc_ids, path_prefix=path_prefix)
        if not documents:
            return []
    if vector is None and not keyword_only:
        # A query asked without a user is nobody's text: not cached, so nothing of it outlives the request.
        vector = query_vector_or_none(query, tenant=tenant, user_id=None)
    if keyword_only:
        vector = None
    sql, params = kb_search_statement(
        tenant=tenant,
        keywords=begun.keywords,
        statistics=begun.statistics,
        vector=vector,
        limit=limit,
        documents=documents,
    )
    # Serial: the keyword side's pattern walk relies on the parts of an Append running in order.
    ef_search = max(settings.KB_SEARCH_EF_SEARCH, params["candidates"])
    with connections[begun.alias].cursor() as cursor:
        rows = rows_after_settings(cursor, sql, params, ef_search=ef_search, serial=True)
    weight = settings.KB_SEARCH_VECTOR_WEIGHT if vector is not None else 0.0
    return _fused(rows, limit, term_count=len(begun.keywords), weight=weight)


@dataclass(frozen=True)
class DocumentsFound:
    results: list[DocumentHit]
    degraded: list[str]  # what the search did without: ai.services.DEGRADED_EMBEDDINGS when ranked by keywords alone


@timed(SEARCH_SECONDS, operation="kb_search")  # it searches without kb_search: observed here, its embedding included
def kb_search_answer(*, tenant: Tenant, query: str, limit: int = 10, **filters) -> DocumentsFound:
    """kb_search, saying whether it ranked by keywords alone (the query could not be embedded now). A tenant without
    chunks is answered before the query is embedded: no call to the embedding provider for nothing."""
    begun = _search_begun(tenant, query, limit)
    if begun is None:
        return DocumentsFound([], [])
    vector = query_vector_or_none(query, tenant=tenant, user_id=None)
    results = _search_chunks(
        begun, tenant=tenant, query=query, limit=limit, vector=vector, keyword_only=vector is None, **filters
    )
    return DocumentsFound(results, degraded_without(vector))


@dataclass(frozen=True)
class TermChunks:
    """A tenant's BM25 statistics for one query: its chunks (N), and how many of them hold each query term; and
    the chunks of the whole table (every tenant's, estimated)."""

    chunks: int
    per_term: list[int]
    table_chunks: int


def _term_chunks(cursor, *, tenant: Tenant, keywords: KeywordQuery) -> TermChunks:
    cursor.execute(_TERM_CHUNKS_SQL, {"tenant": tenant.pk, "terms": keywords.terms})
    counts = [count for _, count in cursor.fetchall()]
    return TermChunks(chunks=counts[1], per_term=counts[2:], table_chunks=counts[0])


def kb_search_statement(
    *,
    tenant: Tenant,
    keywords: KeywordQuery,
    statistics: TermChunks,
    vector: np.ndarray | None,
    limit: int,
    documents: list[int] | None = None,
) -> tuple[str, dict]:
    """The statement kb_search runs and its parameters (also for EXPLAIN in tests and benchmarks); without a vector,
    the keyword channel alone."""
    clauses = ["tenant_id = %(tenant)s", "embedding_model = %(model)s", "embedding IS NOT NULL"]
    if documents is not None:
        clauses.append("document_id = ANY(%(documents)s)")
    where = " AND ".join(clauses)
    bm25 = Bm25(k1=settings.KB_SEARCH_BM25_K1, b=settings.KB_SEARCH_BM25_B)
    lengths = bool(bm25.b)
    chunks_read = keyword_chunks_read(statistics.chunks)
    rare, common = _read_in_full(statistics.per_term, budget=chunks_read, every_term=lengths)
    with_vector = vector is not None
    rare_score = keywords.score(
        bm25, alias="rare_matches", length="rare_matches.len", average_length="idf.average_length"
    )
    if with_vector:
        vector_hits = nearest_sql(CHUNKS, where=where, limit="%(candidates)s", path=_vector_path(statistics))
        cosine = "(1 - (c.embedding <=> %(vector)s::vector))::float8"
    else:
        vector_hits, cosine = "SELECT id FROM kb_kbchunk WHERE false", "0::float8"
    patterns = _patterns(common)
    names = keywords.match_names()
    sql = _SEARCH_SQL.format(
        vector_hits=vector_hits,
        cosine=cosine,
        where=where,
        rare_terms=keywords.any_term(rare),
        match_columns=keywords.match_columns("search_vector"),
        length_column=", length(search_vector) AS len" if lengths else "",
        distance_column=", embedding <=> %(vector)s::vector AS distance" if with_vector else "",
        rare_fused=_RARE_FUSED_SQL.format(
            match_score=rare_score, matched=keywords.matched_count("rare_matches"), terms=max(len(keywords), 1)
        )
        if with_vector
        else "SELECT id FROM rare_matches WHERE false",
        idf_columns=keywords.idf_columns("%(chunks)s", lambda match: f"%(chunks_{match})s"),
        # Over the chunks that match (every term is read with b > 0): the tenant-wide average would cost a read of
        # every chunk.
        average_length=", greatest(avg(len), 1)::float8 AS average_length FROM rare_matches" if lengths else "",
        match_score=rare_score,
        pattern_score=keywords.idf_sum("p"),
        pattern_rows=_pattern_rows(patterns, len(keywords)),
        pattern_columns="".join(f", {name}" for name in names),
        pattern_walk=_pattern_walk(
            patterns,
            keywords=keywords,
            statistics=statistics,
            where=where,
            # What the rare terms left of the chunks the keyword side reads in full.
            read_nearest_first=chunks_read - sum(statistics.per_term[n] for n in rare) if with_vector else None,
        ),
        # The walk's chunks nearest first stay candidates even where keyword_hits cuts their score's ties by id.
        pattern_candidates="\n    UNION\n    SELECT id FROM pattern_best" if with_vector else "",
        candidate_columns=keywords.match_columns("c.search_vector")
        + (", length(c.search_vector) AS len" if lengths else ""),
        candidate_score=keywords.score(bm25, alias="s", length="s.len", average_length="idf.average_length"),
        matched=keywords.matched_count("s"),
    )
    params = keywords.params | {
        "tenant": tenant.pk,
        "model": active_embedding_model(),
        "candidates": max(limit * settings.KB_SEARCH_CANDIDATE_FACTOR, 40),
        "chunks": statistics.chunks,
        "weight": settings.KB_SEARCH_VECTOR_WEIGHT,
    }
    params |= {f"chunks_{name}": count for name, count in zip(names, statistics.per_term, strict=True)}
    if with_vector:
        params["vector"] = vector_literal(vector)
    if documents is not None:
        params["documents"] = documents
    return sql, params


# The chunks as the vector side reads them (search.nearest): full vectors, no signs, so a tenant too large to sort
# walks the HNSW graph every tenant shares, or, a small share of the table, is sorted all the same.
CHUNKS = VectorTable(name="kb_kbchunk", key="id", vector_type="vector")


def _vector_path(statistics: TermChunks) -> NearestPath:
    """How the vector side finds the tenant's nearest chunks (search.nearest's rule)."""
    return nearest_path(
        rows=statistics.chunks,
        table_rows=statistics.table_chunks,
        sort_max_rows=settings.KB_SEARCH_EXACT_MAX_CHUNKS,
        has_signs=CHUNKS.signs,
    )


# The keyword side's chunks read in full when KB_SEARCH_KEYWORD_CHUNKS_READ is unset: this many times the square root
# of the tenant's chunks, at least the floor. A fixed budget left the exhaustive top 10 less found as a tenant grew,
# since more chunks tie on the keyword side in the sets of common terms it could not read (docs/benchmarks.md, the
# knowledge base's guard).
KEYWORD_CHUNKS_READ_PER_ROOT = 20
KEYWORD_CHUNKS_READ_FLOOR = 2000


def keyword_chunks_read(chunks: int) -> int:
    """How many chunks kb_search's keyword side reads in full for a tenant of `chunks` chunks (see the settings)."""
    if settings.KB_SEARCH_KEYWORD_CHUNKS_READ is not None:
        return settings.KB_SEARCH_KEYWORD_CHUNKS_READ
    return max(KEYWORD_CHUNKS_READ_FLOOR, round(KEYWORD_CHUNKS_READ_PER_ROOT * math.sqrt(chunks)))


def _read_in_full(per_term: list[int], *, budget: int, every_term: bool) -> tuple[list[int], list[int]]:
    """The terms whose chunks the keyword side reads in full (the rarest, while their chunks add up to at most
    `budget`, and past MAX_PATTERN_TERMS common ones the rarest of those too), and the common ones, reached through
    their patterns; every term with b > 0 (a chunk's length then counts: no two score alike)."""
    rarest_first = sorted(range(len(per_term)), key=lambda n: (per_term[n], n))
    if every_term:
        return rarest_first, []
    read = 0
    while read < len(rarest_first) and per_term[rarest_first[read]] <= budget:
        budget -= per_term[rarest_first[read]]
        read += 1
    read = max(read, len(rarest_first) - MAX_PATTERN_TERMS)
    return rarest_first[:read], rarest_first[read:]


def _patterns(common: list[int]) -> list[tuple[int, ...]]:
    """Every non-empty set of the common terms: which of them a chunk holding no rare term holds."""
    return [combination for size in range(1, len(common) + 1) for combination in itertools.combinations(common, size)]


def _pattern_walk(
    patterns: list[tuple[int, ...]],
    *,
    keywords: KeywordQuery,
    statistics: TermChunks,
    where: str,
    read_nearest_first: float | None = None,
) -> str:
    """The patterns' chunks best pattern first, for a LIMIT to stop reading at (PostgreSQL's Append runs its parts
    in order, and kb_search turns parallel plans off). The order is the SQL's scores, computed here alike; patterns
    closer than a rounding error are one part, ranked inside. Patterns whose chunks (estimated) add up to at most
    read_nearest_first (None: no query vector), best first, are read in full and nearest the query first instead of
    lowest ids first: their chunks score alike on the keyword side, so the fused score ranks them by cosine."""
    if not patterns:
        return "SELECT id, 0::float8 AS score FROM kb_kbchunk WHERE false"
    idfs = [idf(statistics.chunks, chunks) for chunks in statistics.per_term]
    scores = [sum(idfs[n] for n in inside) for inside in patterns]
    groups: list[list[int]] = []
    for number in sorted(range(len(patterns)), key=lambda number: -scores[number]):
        if groups and math.isclose(scores[groups[-1][0]], scores[number], rel_tol=1e-9):
            groups[-1].append(number)
        else:
            groups.append([number])
    parts = []
    for group in groups:
        nearest = False
        if read_nearest_first is not None and len(group) == 1:  # tied patterns are ranked together, by id
            chunks = _pattern_chunks(patterns[group[0]], statistics)
            nearest = chunks <= read_nearest_first
            read_nearest_first -= chunks if nearest else 0
        hits = [
            _PATTERN_HITS_SQL.format(
                pattern=number,
                where=where,
                tsquery=keywords.pattern(
                    patterns[number], [n for n in range(len(keywords)) if n not in patterns[number]]
                ),
                # `+ 0`: never an HNSW scan filtered by the pattern.
                order="(embedding <=> %(vector)s::vector) + 0, id" if nearest else "id",
            )
            for number in group
        ]
        parts.append(hits[0] if len(hits) == 1 else _TIED_PATTERNS_SQL.format(patterns=" UNION ALL ".join(hits)))
    return "\n        UNION ALL ".join(parts)


def _pattern_chunks(inside: tuple[int, ...], statistics: TermChunks) -> float:
    """The chunks holding exactly these of the query's terms, were the terms independent."""
    share = 1.0
    for n, chunks in enumerate(statistics.per_term):
        held = chunks / max(statistics.chunks, 1)
        share *= held if n in inside else 1 - held
    return statistics.chunks * share


def _pattern_rows(patterns: list[tuple[int, ...]], terms: int) -> str:
    """VALUES rows (number, m0, m1, ...) saying which terms each pattern holds (one row that no pattern query reads
    when there are none)."""
    return ", ".join(
        "(" + ", ".join([str(number), *("true" if n in inside else "false" for n in range(terms))]) + ")"
        for number, inside in enumerate(patterns or [()])
    )


def _document_ids(*, tenant: Tenant, doc_ids: Sequence[str] | None, path_prefix: str) -> list[int]:
    documents = Document.objects.filter(tenant=tenant)
    if doc_ids is not None:
        documents = documents.filter(doc_id__in=list(doc_ids))
    if path_prefix:
        documents = documents.filter(doc_id__startswith=path_prefix)
    return list(documents.values_list("pk", flat=True))


def _fused(rows: list[tuple], limit: int, *, term_count: int, weight: float) -> list[DocumentHit]:
    best = max((row[8] for row in rows), default=0.0) or 1.0
    hits = []
    for _, document_id, doc_id, heading_path, line_start, line_end, text, cosine, bm25, matched in rows:
        # Scaled to the best keyword hit, and by the share of the query's terms the passage has: a passage
        # sharing one incidental word with a long question is not a full keyword match, even if it is the best.
        keyword = bm25 / best * matched / max(term_count, 1)
        hits.append(
            DocumentHit(
                document_id=document_id,
                doc_id=doc_id,
                heading_path=heading_path,
                line_start=line_start,
                line_end=line_end,
                text=text,
                score=round(weight * cosine + (1 - weight) * keyword, 6),
                vector=round(cosine, 6),
                keyword=round(keyword, 6),
            )
        )
    hits.sort(key=lambda hit: (-hit.score, hit.doc_id, hit.line_start))
    return hits[:limit]
