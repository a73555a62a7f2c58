"""The audit trail of facts: the reviewable state of a fact, and the immutable event that records each change."""

from ..models import Fact, FactEvent

SYSTEM = "system"


def snapshot(fact: Fact) -> dict:
    """The reviewable state of a fact, as events store it before and after a change."""
    return {
        "content": fact.content,
        "category": fact.category,
        "confidence": fact.confidence,
        "status": fact.status,
        "pinned": fact.pinned,
        "valid_to": fact.valid_to.isoformat() if fact.valid_to else None,
        "superseded_by": fact.superseded_by_id,
        "occurred_at": fact.occurred_at.isoformat() if fact.occurred_at else None,
        "metadata": fact.metadata,
    }


def record_event(
    fact: Fact, action: str, actor: str, before: dict | None = None, after: dict | None = None
) -> FactEvent:
    """Append one immutable event to the fact's history."""
    return FactEvent.objects.create(
        tenant_id=fact.tenant_id,
        fact_id=fact.pk,
        user_id=fact.user_id,
        action=action,
        actor=actor,
        before=before,
        after=after,
    )
