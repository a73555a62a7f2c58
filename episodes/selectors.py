"""Reads of episodic memory, always scoped to a tenant (and a user where it is personal memory)."""

import re
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connections
from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404

from ai.services import active_embedding_model, embed_query
from core.db import vector_literal
from core.keywords import Bm25, KeywordQuery, keyword_score, scored_rows
from core.metrics import SEARCH_SECONDS, timed
from core.replicas import read_alias
from facts.models import Fact
from tenancy.models import Tenant

from .models import Episode

# Columns that lists and search results never need: the messages can be large, the rest is for the database.
HEAVY_FIELDS = ("messages", "search_text", "search_vector", "embedding")


def episode_get(*, tenant: Tenant, episode_id: int) -> Episode:
    """One episode of `tenant` with the facts extracted from it (`episode.facts.all()`); any other tenant's
    episode is indistinguishable from a missing one (404)."""
    facts = Prefetch("facts", queryset=Fact.objects.filter(tenant=tenant).order_by("id"))
    queryset = Episode.objects.filter(tenant=tenant).defer("search_text", "search_vector", "embedding")
    return get_object_or_404(queryset.prefetch_related(facts), pk=episode_id)


def episodes_list(
    *,
    tenant: Tenant,
    user_id: str,
    session_id: str | None = None,
    agent_id: str | None = None,
    statuses: list[str] | None = None,
) -> QuerySet[Episode]:
    """A user's episodes, newest first, without their messages."""
    queryset = Episode.objects.filter(tenant=tenant, user_id=user_id).defer(*HEAVY_FIELDS)
    if session_id is not None:
        queryset = queryset.filter(session_id=session_id)
    if agent_id is not None:
        queryset = queryset.filter(agent_id=agent_id)
    if statuses:
        queryset = queryset.filter(extraction_status__in=statuses)
    return queryset.order_by("-id")


@dataclass(frozen=True)
class ScoredEpisode:
    episode: Episode
    score: float  # w * vector + (1 - w) * keyword
    vector: float  # cosine similarity of the query to the summary (0 until the summary is made)
    keyword: float  # BM25 over the message text, scaled so the best keyword hit of this query is 1
    matches: list[dict]  # the messages that hold the query's words, best first: {"index", "role", "content", ...}


# One statement over one user's episodes (an exact scan through the (tenant, user_id) index): cosine to the
# summary vector, and BM25 over the messages' tsvector (core.keywords.scored_rows, with length normalisation:
# sessions run from a few lines to hundreds), document frequencies counted on the same episodes.
_SEARCH_SQL = """
WITH {scored_rows}
SELECT id, vector_score, {keyword_score} AS keyword_score
FROM base CROSS JOIN idf CROSS JOIN top
WHERE vector_score > 0 OR {keyword_score} > 0
ORDER BY %(vector_weight)s * vector_score + %(keyword_weight)s * {keyword_score} DESC, id DESC
LIMIT %(limit)s
"""
# Until the summary is made (or for another model's vector) the vector side scores 0.
_VECTOR_SCORE = (
    "CASE WHEN embedding IS NOT NULL AND embedding_model = %(model)s THEN 1 - (embedding <=> %(vector)s::vector) "
    "ELSE 0 END"
)


@timed(SEARCH_SECONDS, operation="episodes_search")
def episodes_search(
    *,
    tenant: Tenant,
    user_id: str,
    query: str,
    limit: int = 10,
    session_id: str | None = None,
    agent_id: str | None = None,
    vector: np.ndarray | None = None,
) -> list[ScoredEpisode]:
    """The user's episodes that best answer `query`: the summary's vector and the words that were said."""
    if not query.strip() or limit <= 0:
        return []
    vector = embed_query(query, tenant=tenant, user_id=user_id) if vector is None else vector
    clauses = ["tenant_id = %(tenant)s", "user_id = %(user_id)s"]
    params = {"tenant": tenant.pk, "user_id": user_id}
    if session_id is not None:
        clauses.append("session_id = %(session_id)s")
        params["session_id"] = session_id
    if agent_id is not None:
        clauses.append("agent_id = %(agent_id)s")
        params["agent_id"] = agent_id
    keywords = KeywordQuery(query)
    bm25 = Bm25(k1=settings.EPISODES_SEARCH_BM25_K1, b=settings.EPISODES_SEARCH_BM25_B)
    weight = settings.EPISODES_SEARCH_VECTOR_WEIGHT
    params |= keywords.params | {
        "model": active_embedding_model(),
        "vector": vector_literal(vector),
        "vector_weight": weight,
        "keyword_weight": 1 - weight,
        "limit": limit,
    }
    sql = _SEARCH_SQL.format(
        scored_rows=scored_rows(
            keywords=keywords,
            bm25=bm25,
            table="episodes_episode",
            where=" AND ".join(clauses),
            vector_score=_VECTOR_SCORE,
        ),
        keyword_score=keyword_score(keywords, bm25),
    )
    with connections[read_alias()].cursor() as cursor:  # the replica during an API read (core.replicas)
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    scoped = Episode.objects.filter(tenant=tenant).defer("search_text", "search_vector", "embedding")
    episodes = scoped.in_bulk([row[0] for row in rows])
    return [
        ScoredEpisode(
            episode=episodes[episode_id],
            score=round(weight * vector_score + (1 - weight) * keyword_score, 6),
            vector=round(vector_score, 6),
            keyword=round(keyword_score, 6),
            matches=matching_messages(episodes[episode_id].messages, keywords.terms),
        )
        for episode_id, vector_score, keyword_score in rows
    ]


def matching_messages(messages: list[dict], terms: list[str], limit: int = 3) -> list[dict]:
    """The messages holding most of the query's terms (whole words, any case), in the order they were said."""
    patterns = [_term_pattern(term) for term in terms]
    counted = []
    for index, message in enumerate(messages):
        found = sum(1 for pattern in patterns if pattern.search(message["content"]))
        if found:
            counted.append((found, index))
    best = sorted(counted, key=lambda item: (-item[0], item[1]))[:limit]
    return [{"index": index, **messages[index]} for _, index in sorted(best, key=lambda item: item[1])]


def _term_pattern(term: str) -> re.Pattern[str]:
    if " " in term:  # a CJK character pair, spaced apart for the tsvector
        return re.compile(re.escape(term.replace(" ", "")))
    return re.compile(rf"\b{re.escape(term)}", re.IGNORECASE)
