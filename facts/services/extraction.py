"""Facts distilled from a conversation, each remembered like any other fact (source=extracted)."""

import logging
from collections.abc import Callable
from datetime import datetime

from django.db import transaction

from ai.chat import get_chat
from ai.errors import AIProviderError
from tenancy.models import Tenant

from ..extraction import extract_by_rules, llm_extract
from ..models import Fact
from ..selectors import facts_list
from .history import SYSTEM
from .remember import RememberResult, fact_remember

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
    then: Callable[[], None] | None = None,
) -> list[RememberResult]:
    """Distil atomic facts from a conversation and remember each (source=extracted), with the messages it came from
    (a message's "index", its place in the episode, when it has one). All or nothing: `then` (the caller's
    watermark) runs in the same transaction as the facts' writes. When the chat model fails for good,
    on_chat_failure "fallback" extracts by rules, "raise" lets the AIProviderError through."""
    if on_chat_failure not in ON_CHAT_FAILURE:
        raise ValueError(f"on_chat_failure must be one of {ON_CHAT_FAILURE}, not {on_chat_failure!r}")
    candidates = _candidates(tenant, user_id, messages, reference_time, on_chat_failure)
    with transaction.atomic():
        results = [
            fact_remember(
                tenant=tenant,
                user_id=user_id,
                content=candidate.content,
                category=candidate.category,
                confidence=candidate.confidence,
                source=Fact.Source.EXTRACTED,
                occurred_at=reference_time,
                source_episode=episode,
                source_messages=[messages[n].get("index", n) for n in candidate.messages],
                actor=SYSTEM,
            )
            for candidate in candidates
        ]
        if then is not None:
            then()
        return results


def _candidates(tenant: Tenant, user_id: str, messages: list[dict], reference_time: datetime, on_chat_failure: str):
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
        # The rules are a real extractor too: memory keeps learning while the chat model is down.
        logger.warning("chat extraction unavailable, extracting by rules: %s", exc.message)
        return extract_by_rules(messages, reference_time=reference_time)
