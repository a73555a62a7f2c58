"""Reads of episodic memory, always scoped to a tenant (and a user where it is personal memory)."""

import re
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connections
from django.db.models import Prefetch, Q, QuerySet
from django.shortcuts import get_object_or_404

from ai.services import active_embedding_model, embed_query
from core.db import vector_literal
from core.keywords import Bm25, KeywordQuery, keyword_score, scored_rows
from core.metrics import SEARCH_SECONDS, timed
from core.replicas import read_alias
from core.timestamps import timestamp_text
from facts.models import Fact
from tenancy.models import Tenant

from .models import Episode, EpisodeMessage

# Columns that lists, search results and posts never need: the tsvector grows with the session.
HEAVY_FIELDS = ("search_vector", "embedding")
MESSAGE_FIELDS = ("position", "role", "content", "timestamp")


def episode_get(*, tenant: Tenant, episode_id: int) -> Episode:
    """One episode of `tenant` with its messages in order (`episode.message_rows.all()`) and the facts extracted
    from it (`episode.facts.all()`); any other tenant's episode is indistinguishable from a missing one (404)."""
    facts = Prefetch("facts", queryset=Fact.objects.filter(tenant=tenant).order_by("id"))
    rows = EpisodeMessage.objects.filter(tenant=tenant).only(*MESSAGE_FIELDS, "episode").order_by("position")
    queryset = Episode.objects.filter(tenant=tenant).defer(*HEAVY_FIELDS)
    return get_object_or_404(queryset.prefetch_related(facts, Prefetch("message_rows", queryset=rows)), pk=episode_id)


def episode_messages(*, episode: Episode, start: int = 0, end: int | None = None) -> list[dict]:
    """Messages [start, end) of an episode, in order, each as posted with its "index" (its position)."""
    rows = EpisodeMessage.objects.filter(tenant_id=episode.tenant_id, episode=episode, position__gte=start)
    if end is not None:
        rows = rows.filter(position__lt=end)
    return [{**row.as_dict(), "index": row.position} for row in rows.only(*MESSAGE_FIELDS).order_by("position")]


def episode_stored_said(*, episode: Episode, count: int, from_end: bool = False) -> list[dict]:
    """The first (or, from_end, the last) `count` non-system messages of the episode, in order: what the matching
    rules (episodes.matching.new_after) read of a stored session, as many rows as were posted."""
    if count <= 0 or episode.message_count == 0:
        return []
    rows = EpisodeMessage.objects.filter(tenant_id=episode.tenant_id, episode=episode).exclude(
        role=EpisodeMessage.Role.SYSTEM
    )
    rows = rows.order_by("-position" if from_end else "position").values_list("role", "content", "timestamp")
    said = [_message(*row) for row in rows[:count]]
    return said[::-1] if from_end else said


def episode_stored_system(*, episode: Episode, contents: set[str]) -> list[dict]:
    """The episode's system messages saying one of `contents` (a post of system messages alone is matched
    against them)."""
    if episode.message_count == 0:
        return []
    rows = EpisodeMessage.objects.filter(
        tenant_id=episode.tenant_id, episode=episode, role=EpisodeMessage.Role.SYSTEM, content__in=contents
    )
    return [_message(*row) for row in rows.order_by("position").values_list("role", "content", "timestamp")]


def _message(role: str, content: str, timestamp) -> dict:
    return {"role": role, "content": content, "timestamp": timestamp and timestamp_text(timestamp)}


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


def episodes_messages_of(*, tenant: Tenant, episode_ids: list[int]) -> dict[int, list[dict]]:
    """The messages of several episodes at once (an export reads them a page of episodes at a time), each episode's
    in order, as posted."""
    rows = EpisodeMessage.objects.filter(tenant=tenant, episode_id__in=episode_ids).only(*MESSAGE_FIELDS, "episode")
    found: dict[int, list[dict]] = {episode_id: [] for episode_id in episode_ids}
    for row in rows.order_by("episode_id", "position"):
        found[row.episode_id].append(row.as_dict())
    return found


def episodes_user_ids(*, tenant: Tenant) -> list[str]:
    """Every user id the tenant holds episodes of, sorted."""
    return list(Episode.objects.filter(tenant=tenant).order_by("user_id").values_list("user_id", flat=True).distinct())


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
    keyword_only: bool = False,
) -> list[ScoredEpisode]:
    """The user's episodes that best answer `query`: the summary's vector and the words that were said.
    keyword_only ranks by the words alone (no embedding asked for: the provider is down), scores = keyword."""
    if not query.strip() or limit <= 0:
        return []
    if not keyword_only and vector is None:
        vector = embed_query(query, tenant=tenant, user_id=user_id)
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
    weight = 0.0 if keyword_only else settings.EPISODES_SEARCH_VECTOR_WEIGHT
    if not keyword_only:
        params |= {"model": active_embedding_model(), "vector": vector_literal(vector)}
    params |= keywords.params | {
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
            vector_score="0::float8" if keyword_only else _VECTOR_SCORE,
        ),
        keyword_score=keyword_score(keywords, bm25),
    )
    with connections[read_alias()].cursor() as cursor:  # the replica during an API read (core.replicas)
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    episodes = Episode.objects.filter(tenant=tenant).defer(*HEAVY_FIELDS).in_bulk([row[0] for row in rows])
    candidates = _candidate_messages(tenant, list(episodes), keywords.terms)
    return [
        ScoredEpisode(
            episode=episodes[episode_id],
            score=round(weight * vector_score + (1 - weight) * keyword_score, 6),
            vector=round(vector_score, 6),
            keyword=round(keyword_score, 6),
            matches=matching_messages(candidates.get(episode_id, []), keywords.terms),
        )
        for episode_id, vector_score, keyword_score in rows
    ]


def _candidate_messages(tenant: Tenant, episode_ids: list[int], terms: list[str]) -> dict[int, list[dict]]:
    """Per episode, the messages that may hold one of the terms (a substring, any case; matching_messages applies
    the exact rule), in order: one query for all the hits, never their whole sessions."""
    if not episode_ids or not terms:
        return {}
    holds = Q()
    for term in terms:
        holds |= Q(content__icontains=term.replace(" ", ""))
    rows = EpisodeMessage.objects.filter(tenant=tenant, episode_id__in=episode_ids).filter(holds)
    found: dict[int, list[dict]] = {}
    for row in rows.only(*MESSAGE_FIELDS, "episode").order_by("episode_id", "position"):
        found.setdefault(row.episode_id, []).append({**row.as_dict(), "index": row.position})
    return found


def matching_messages(messages: list[dict], terms: list[str], limit: int = 3) -> list[dict]:
    """The messages (each with its "index") holding most of the query's terms (whole words, any case), in the
    order they were said."""
    patterns = [_term_pattern(term) for term in terms]
    counted = []
    for order, message in enumerate(messages):
        found = sum(1 for pattern in patterns if pattern.search(message["content"]))
        if found:
            counted.append((found, order))
    best = sorted(counted, key=lambda item: (-item[0], item[1]))[:limit]
    return [messages[order] for _, order in sorted(best, key=lambda item: item[1])]


def _term_pattern(term: str) -> re.Pattern[str]:
    if " " in term:  # a CJK character pair, spaced apart for the tsvector
        return re.compile(re.escape(term.replace(" ", "")))
    return re.compile(rf"\b{re.escape(term)}", re.IGNORECASE)
