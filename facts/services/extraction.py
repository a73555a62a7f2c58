"""Facts distilled from a conversation, each remembered like any other fact (source=extracted)."""

import logging
from collections.abc import Callable
from datetime import datetime

from django.db import transaction

from ai.chat import get_chat
from ai.errors import AIProviderError
from ai.services import embed_texts
from tenancy.models import Tenant

from ..content import normalised
from ..extraction import ExtractedFact, extract_by_rules, llm_extract
from ..models import Fact
from ..selectors import facts_list
from .history import SYSTEM
from .remember import Judged, RememberResult, fact_judged, fact_new, fact_written, judged_then_written

logger = logging.getLogger(__name__)

# What facts_extract does when the chat model fails for good: extract by rules, or raise (the caller retries later).
ON_CHAT_FAILURE = ("fallback", "raise")


def facts_extract(
    *,
    tenant: Tenant,
    user_id: str,
    messages: list[dict],
    reference_time: datetime,
    episode=None,
    on_chat_failure: str = "fallback",
    on_fallback: Callable[[str], None] | None = None,
    then: Callable[[], None] | None = None,
) -> list[RememberResult]:
    """Distil atomic facts from a conversation and remember each (source=extracted), with the messages it came from
    (a message's "index", its place in the episode, when it has one) and the day it refers to, when one was said
    (metadata["refers_to"], an ISO date). All or nothing: `then` (the caller's watermark) runs in the same
    transaction as the facts' writes. When the chat model fails for good (the provider, or an answer malformed or
    outside the contract twice), on_chat_failure "fallback" extracts offline, by rules, and calls `on_fallback`
    with the reason before anything is written; "raise" lets the AIProviderError through. The chat model, one
    embedding call for every candidate and the judging run before that transaction; while the embedder fails the
    facts are stored awaiting their vectors and judged when they arrive."""
    if on_chat_failure not in ON_CHAT_FAILURE:
        raise ValueError(f"on_chat_failure must be one of {ON_CHAT_FAILURE}, not {on_chat_failure!r}")
    candidates = _distinct(_candidates(tenant, user_id, messages, reference_time, on_chat_failure, on_fallback))

    def new_facts() -> list[Fact]:  # afresh for each try: a rolled-back try leaves its ids on the objects
        return [
            fact_new(
                tenant=tenant,
                user_id=user_id,
                content=candidate.content,
                category=candidate.category,
                confidence=candidate.confidence,
                source=Fact.Source.EXTRACTED,
                occurred_at=reference_time,
                source_episode=episode,
                agent_id=episode.agent_id if episode is not None else "",  # the agent's facts, as when it saves one
                source_messages=[messages[n].get("index", n) for n in candidate.messages],
                metadata=_metadata_of(episode, candidate),
            )
            for candidate in candidates
        ]

    vectors = _vectors(tenant, new_facts())  # one embedding call for every candidate, before any transaction

    def judge() -> list[Judged]:
        facts = new_facts()
        for fact, vector in zip(facts, vectors or [None] * len(facts), strict=True):
            fact.embedding = vector
        return [fact_judged(fact) for fact in facts]

    def write(judged: list[Judged]) -> list[RememberResult] | None:
        written: set[int] = set()
        try:
            with transaction.atomic():  # a savepoint: a stale judgement takes back the facts written before it
                results = []
                for one in judged:
                    result = fact_written(one, actor=SYSTEM, written=written)
                    if result is None:
                        raise _Stale
                    results.append(result)
                if then is not None:
                    then()
                return results
        except _Stale:
            return None

    return judged_then_written(tenant=tenant, user_id=user_id, judge=judge, write=write)


def _metadata_of(episode, candidate: ExtractedFact) -> dict:
    """The episode's metadata (the caller's), and the day the fact refers to when one was said."""
    metadata = dict(episode.metadata) if episode is not None else {}
    if candidate.refers_to:
        metadata["refers_to"] = candidate.refers_to.isoformat()
    return metadata


class _Stale(Exception):
    """A candidate's neighbours changed since it was judged: the batch is judged again."""


def _distinct(candidates: list[ExtractedFact]) -> list[ExtractedFact]:
    """One candidate per statement: the same words twice in one conversation are one fact."""
    seen: set[str] = set()
    kept = []
    for candidate in candidates:
        key = normalised(candidate.content)
        if key not in seen:
            seen.add(key)
            kept.append(candidate)
    return kept


def _vectors(tenant: Tenant, facts: list[Fact]):
    """The candidates' vectors, or None while the embedder fails (they are stored awaiting them)."""
    if not facts:
        return None
    try:
        return list(embed_texts([fact.embedding_text() for fact in facts], tenant=tenant, user_id=facts[0].user_id))
    except AIProviderError as exc:
        logger.warning("embedding unavailable, extracted facts stored awaiting their vectors: %s", exc.message)
        return None


def _candidates(
    tenant: Tenant,
    user_id: str,
    messages: list[dict],
    reference_time: datetime,
    on_chat_failure: str,
    on_fallback: Callable[[str], None] | None,
) -> list[ExtractedFact]:
    chat = get_chat()
    if chat is None:
        return extract_by_rules(messages, reference_time=reference_time)
    known = list(
        facts_list(tenant=tenant, user_id=user_id, statuses=[Fact.Status.ACTIVE, Fact.Status.PENDING])
        .order_by("-usage_count", "-id")
        .values_list("content", flat=True)[:50]
    )
    try:
        return llm_extract(chat, messages=messages, reference_time=reference_time, known_facts=known)
    except AIProviderError as exc:
        if on_chat_failure == "raise":
            raise
        # The rules are a real extractor too: memory keeps learning while the chat model is down or off contract.
        reason = f"The chat model failed, so the facts were extracted offline: {exc.message}"
        logger.warning("chat extraction (tenant %s) fell back to the offline extractor: %s", tenant.pk, exc.message)
        if on_fallback is not None:
            on_fallback(reason)
        return extract_by_rules(messages, reference_time=reference_time)
