"""Writes of the Mem0-compatible API, each one of the existing services: facts as given (facts_import), a conversation
(episode_store, whose background extraction turns it into facts), edits and deletions of facts."""

import uuid
from datetime import datetime

from django.core.exceptions import ValidationError

from core.timestamps import timestamp_text
from episodes.messages import clean_messages
from episodes.services import StoreResult, episode_store
from facts import services as facts_services
from facts.models import Fact
from tenancy.models import Tenant

from .selectors import memory_get, memory_superseded_ids
from .translation import Scope


def memories_add_as_given(
    *, tenant: Tenant, scope: Scope, messages: list, metadata: dict | None, occurred_at: datetime | None, actor: str
) -> list[Fact]:
    """Mem0's add with infer=false: each user and assistant message's content stored as one fact, as it is (no
    merging, no judging: as Mem0 stores it), with the request's metadata and time (a message's own timestamp first).
    All or nothing."""
    posted = [message for message in clean_messages(messages) if message["role"] != "system"]
    if not posted:
        raise ValidationError({"messages": "No user or assistant message to store."})
    return facts_services.facts_import(
        tenant=tenant,
        facts=[
            {
                "user_id": scope.user_id,
                "agent_id": scope.agent_id or "",
                "content": message["content"],
                "metadata": metadata or {},
                "occurred_at": message["timestamp"] or (occurred_at and timestamp_text(occurred_at)),
            }
            for message in posted
        ],
        actor=actor,
    )


def memories_add_conversation(
    *,
    tenant: Tenant,
    scope: Scope,
    messages: list,
    run_id: str | None,
    occurred_at: datetime | None,
    metadata: dict | None = None,
) -> StoreResult:
    """Mem0's add with inference: the messages kept as an episode (the run_id is its session; without one, a session
    of its own), whose extraction after commit distils the facts, each carrying the request's metadata. The
    request's time is the time of the messages that carry none."""
    if occurred_at is not None:
        moment = timestamp_text(occurred_at)
        messages = [
            {**message, "timestamp": message.get("timestamp") or moment} if isinstance(message, dict) else message
            for message in messages
        ]
    return episode_store(
        tenant=tenant,
        user_id=scope.user_id,
        session_id=run_id or f"mem0-{uuid.uuid4().hex}",
        messages=messages,
        agent_id=scope.agent_id or "",  # its extracted facts are that agent's
        metadata=metadata,
    )


def memory_update(*, tenant: Tenant, memory_id: str, actor: str, **changes) -> Fact:
    """Edit a memory (content, metadata, occurred_at) through fact_update; its history keeps the previous values."""
    fact = memory_get(tenant=tenant, memory_id=memory_id)
    return facts_services.fact_update(tenant=tenant, fact_id=fact.pk, actor=actor, **changes)


def memory_delete(*, tenant: Tenant, memory_id: str, actor: str, linked: bool = False) -> list[int]:
    """Delete a memory; with `linked`, also the older facts it replaced (superseded or merged into it)."""
    fact = memory_get(tenant=tenant, memory_id=memory_id)
    older = memory_superseded_ids(tenant=tenant, fact_id=fact.pk) if linked else []
    return facts_services.facts_delete(tenant=tenant, fact_ids=[fact.pk, *older], actor=actor)


def memories_delete_all(*, tenant: Tenant, scope: Scope, actor: str) -> list[int]:
    """Delete every fact of the user (of the agent, the categories and the filters, when the scope names them):
    memories, and what waits for review or is kept as history too, so nothing of it comes back on approval. Their
    events stay."""
    return facts_services.facts_delete_of_user(
        tenant=tenant,
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        categories=list(scope.categories) if scope.categories else None,
        filters=scope.filters,
        actor=actor,
    )
