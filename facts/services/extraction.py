"""Facts distilled from a conversation, each remembered like any other fact (source=extracted)."""

from datetime import datetime

from django.db import transaction

from ai.chat import get_chat
from tenancy.models import Tenant

from ..extraction import extract_by_rules, llm_extract
from ..models import Fact
from ..selectors import facts_list
from .history import SYSTEM
from .remember import RememberResult, fact_remember


def facts_extract(
    *, tenant: Tenant, user_id: str, messages: list[dict], reference_time: datetime, episode=None
) -> list[RememberResult]:
    """Distil atomic facts from a conversation and remember each (source=extracted), with the messages it came from
    (a message's "index", its place in the episode, when it has one). All or nothing."""
    chat = get_chat()
    if chat is not None:
        known = list(
            facts_list(tenant=tenant, user_id=user_id, statuses=[Fact.Status.ACTIVE, Fact.Status.PENDING])
            .order_by("-usage_count", "-id")
            .values_list("content", flat=True)[:50]
        )
        candidates = llm_extract(chat, messages=messages, reference_time=reference_time, known_facts=known)
    else:
        candidates = extract_by_rules(messages, reference_time=reference_time)
    with transaction.atomic():
        return [
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
