"""Edits of a stored fact by a person or an agent, and bringing an archived fact back."""

import logging

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_query
from core.errors import ApplicationError
from core.validation import validate_metadata
from tenancy.models import Tenant

from ..content import clean_content, hold_reason
from ..models import Fact, FactEvent
from .embed_queue import facts_embed_after_commit
from .history import record_event, snapshot
from .transitions import FULL_CLEAN_EXCLUDE, fact_locked

logger = logging.getLogger(__name__)

UPDATABLE_FIELDS = ("content", "category", "confidence", "pinned", "metadata", "occurred_at", "agent_id")


def fact_update(*, tenant: Tenant, fact_id: int, actor: str, **changes) -> Fact:
    """Edit a fact in place; the previous values stay in its history. New content is re-embedded; while the embedder
    fails, the fact keeps the edit without a vector and is embedded later (embedding_pending)."""
    unknown = set(changes) - set(UPDATABLE_FIELDS)
    if unknown:
        raise ValidationError({name: "This field cannot be changed." for name in sorted(unknown)})
    if "content" in changes:
        changes["content"] = clean_content(changes["content"])
    if "metadata" in changes:
        changes["metadata"] = validate_metadata(changes["metadata"])
    reembed = {"content", "occurred_at"} & set(changes)
    vector = None
    if reembed:  # embedded before the row lock is taken: a slow embedding call must not hold it
        current = Fact.objects.filter(tenant=tenant, pk=fact_id).values("user_id", "content", "occurred_at").first()
        current = current or {}  # (no such fact: refused below, once locked)
        user_id = current.pop("user_id", None)
        text = Fact(**{**current, **{name: changes[name] for name in reembed}}).embedding_text()
        try:
            vector = embed_query(text, tenant=tenant, user_id=user_id)
        except AIProviderError as exc:
            logger.warning("embedding unavailable, fact %s edited awaiting its vector: %s", fact_id, exc.message)
    with transaction.atomic():
        fact = fact_locked(tenant, fact_id)
        changed = {name: value for name, value in changes.items() if getattr(fact, name) != value}
        if not changed:  # the same values again: no write, no event
            return fact
        before = snapshot(fact)
        for name, value in changed.items():
            setattr(fact, name, value)
        if "content" in changed:
            _hold_when_instruction_like(fact)
        if reembed & set(changed):
            _take_vector(fact, vector)
        fact.full_clean(exclude=FULL_CLEAN_EXCLUDE, validate_constraints=False)
        fact.save()
        record_event(fact, FactEvent.Action.UPDATED, actor, before=before, after=snapshot(fact))
    return fact


def _hold_when_instruction_like(fact: Fact) -> None:
    """New text that reads as instructions takes an active fact out of prompts until a person approves it again."""
    fact.hold_reason = hold_reason(fact.content)
    if fact.hold_reason and fact.status == Fact.Status.ACTIVE:
        fact.status = Fact.Status.PENDING


def _take_vector(fact: Fact, vector) -> None:
    """The edited fact's new vector; without one (the embedder failed), or while it still awaits its judgement on
    arrival (which needs the vector of what it says now), it is embedded later."""
    if vector is not None and fact.embedding_pending != Fact.EmbeddingPending.JUDGE:
        fact.embedding, fact.embedding_model = vector, active_embedding_model()
        fact.embedding_pending, fact.embedding_attempts, fact.embedding_next_attempt_at = "", 0, None
        return
    fact.embedding, fact.embedding_model = None, ""
    fact.embedding_pending = fact.embedding_pending or Fact.EmbeddingPending.EMBED
    fact.embedding_attempts, fact.embedding_next_attempt_at = 0, timezone.now()
    facts_embed_after_commit([fact.pk])


def fact_restore(*, tenant: Tenant, fact_id: int, actor: str) -> Fact:
    """Bring an archived fact back (until it is purged) with the status it had before; its unused-days clock
    starts again, so the next forgetting sweep does not take it straight back."""
    with transaction.atomic():
        fact = fact_locked(tenant, fact_id)
        if fact.status != Fact.Status.ARCHIVED:
            raise ApplicationError(
                f"Only an archived fact can be restored; this one is {fact.status}.", code="conflict", status_code=409
            )
        archived = (
            FactEvent.objects.filter(tenant=tenant, fact_id=fact.pk, action=FactEvent.Action.ARCHIVED)
            .order_by("-created_at", "-id")
            .values_list("before", flat=True)
            .first()
        )
        previous = (archived or {}).get("status")
        before = snapshot(fact)
        fact.status = previous if previous in (Fact.Status.ACTIVE, Fact.Status.PENDING) else Fact.Status.ACTIVE
        fact.archived_at = None
        fact.save(update_fields=["status", "archived_at", "updated_at"])
        record_event(fact, FactEvent.Action.RESTORED, actor, before=before, after=snapshot(fact))
    return fact
