"""Reads of the knowledge base: documents and their chunks, always within one tenant."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404

from ai.services import active_embedding_model, embed_query
from core.db import vector_literal
from core.text import query_terms
from tenancy.models import Tenant

from .models import Document, KBChunk


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

# Tenant-wide hybrid search. Each channel picks its own candidates with its own index: the vector side an HNSW
# scan (iterative, so the tenant filter cannot starve it), the keyword side the GIN index on search_vector. The
# union is then scored on both sides alike, so a passage found by one channel still gets the other's score.
_SEARCH_SQL = """
WITH vector_hits AS MATERIALIZED (
    SELECT id
    FROM kb_kbchunk
    WHERE {where}
    ORDER BY embedding <=> %(vector)s::vector
    LIMIT %(candidates)s
),
keyword_hits AS MATERIALIZED (
    SELECT id
    FROM kb_kbchunk
    WHERE {where} AND search_vector @@ {tsquery}
    ORDER BY {rank} DESC, id
    LIMIT %(candidates)s
),
candidates AS (
    SELECT id FROM vector_hits
    UNION
    SELECT id FROM keyword_hits
)
SELECT c.id, c.document_id, d.doc_id, c.heading_path, c.line_start, c.line_end, c.text,
       (1 - (c.embedding <=> %(vector)s::vector))::float8 AS cosine,
       CASE WHEN c.search_vector @@ {tsquery} THEN {c_rank} ELSE 0 END::float8 AS rank,
       {c_matched} AS matched
FROM candidates
JOIN kb_kbchunk c ON c.id = candidates.id
JOIN kb_document d ON d.id = c.document_id
WHERE c.tenant_id = %(tenant)s AND d.tenant_id = %(tenant)s
"""
_NO_KEYWORDS = "NULL::tsquery"  # @@ NULL is never true: the keyword side is empty
MAX_QUERY_TERMS = 32
_MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search


def kb_search(
    *,
    tenant: Tenant,
    query: str,
    limit: int = 10,
    vector: np.ndarray | None = None,
    doc_ids: Sequence[str] | None = None,
    path_prefix: str = "",
) -> list[DocumentHit]:
    """The tenant's passages that best answer `query`, best first: fused = w x cosine + (1 - w) x keyword, where
    w is FACTS_SEARCH_VECTOR_WEIGHT and keyword is ts_rank_cd x terms matched, scaled so the best keyword hit
    among the candidates is 1, times the share of the query's terms the passage contains (1.0 = the best hit
    has every term). `vector` is the query's embedding when the caller already has it.

    doc_ids / path_prefix (a doc id prefix, e.g. "guides/") narrow the search to some documents. Only chunks
    embedded by the active model are searched (others are stale until re-indexed).
    """
    if not query.strip() or limit <= 0:
        return []
    where, params = ["tenant_id = %(tenant)s", "embedding_model = %(model)s", "embedding IS NOT NULL"], {}
    if doc_ids is not None or path_prefix:
        documents = _document_ids(tenant=tenant, doc_ids=doc_ids, path_prefix=path_prefix)
        if not documents:
            return []
        where.append("document_id = ANY(%(documents)s)")
        params["documents"] = documents
    vector = embed_query(query) if vector is None else vector
    candidates = max(limit * settings.KB_SEARCH_CANDIDATE_FACTOR, 40)
    terms = query_terms(query)[:MAX_QUERY_TERMS]
    params |= {f"term{n}": term for n, term in enumerate(terms)}
    params |= {
        "tenant": tenant.pk,
        "model": active_embedding_model(),
        "vector": vector_literal(vector),
        "candidates": candidates,
    }
    sql = _SEARCH_SQL.format(
        where=" AND ".join(where),
        tsquery=_any_term(len(terms)),
        rank=_keyword_rank(len(terms), "search_vector"),
        c_rank=_keyword_rank(len(terms), "c.search_vector"),
        c_matched=_terms_matched(len(terms), "c.search_vector"),
    )
    with transaction.atomic(), connection.cursor() as cursor:
        # Without iterative scan, HNSW returns ef_search rows before the tenant filter and the filter can leave
        # almost nothing; relaxed order is fine because the candidates are re-scored below.
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        ef_search = min(max(settings.KB_SEARCH_EF_SEARCH, candidates), _MAX_EF_SEARCH)
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef_search)])
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        # A read: rolling back ends the SET LOCALs here, even inside a caller's transaction.
        transaction.set_rollback(True)
    return _fused(rows, limit, term_count=len(terms))


def _any_term(count: int) -> str:
    """The query's terms ORed, as constants in the statement (not a CTE), so the planner can use the GIN index."""
    return "(" + (" || ".join(_term(n) for n in range(count)) or _NO_KEYWORDS) + ")"


def _keyword_rank(count: int, column: str) -> str:
    """ts_rank_cd x the number of distinct query terms matched: without it, a heading word repeated three times
    outranks a passage that has both words of a two-word query (ts_rank_cd knows nothing of rarity)."""
    return f"ts_rank_cd({column}, {_any_term(count)}, 1) * {_terms_matched(count, column)}"


def _terms_matched(count: int, column: str) -> str:
    return "(" + (" + ".join(f"({column} @@ {_term(n)})::int" for n in range(count)) or "0") + ")"


def _term(n: int) -> str:
    return f"phraseto_tsquery('english', %(term{n})s)"


def _document_ids(*, tenant: Tenant, doc_ids: Sequence[str] | None, path_prefix: str) -> list[int]:
    documents = Document.objects.filter(tenant=tenant)
    if doc_ids is not None:
        documents = documents.filter(doc_id__in=list(doc_ids))
    if path_prefix:
        documents = documents.filter(doc_id__startswith=path_prefix)
    return list(documents.values_list("pk", flat=True))


def _fused(rows: list[tuple], limit: int, *, term_count: int) -> list[DocumentHit]:
    weight = settings.FACTS_SEARCH_VECTOR_WEIGHT
    best_rank = max((row[8] for row in rows), default=0.0) or 1.0
    hits = []
    for _, document_id, doc_id, heading_path, line_start, line_end, text, cosine, rank, matched in rows:
        # Scaled to the best keyword hit, and by the share of the query's terms the passage has: a passage
        # sharing one incidental word with a long question is not a full keyword match, even if it is the best.
        keyword = rank / best_rank * matched / max(term_count, 1)
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
