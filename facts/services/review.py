"""Human review: approve or reject a fact, resolve a conflict."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from core.errors import ApplicationError
from tenancy.models import Tenant

from ..models import Fact, FactConflict, FactEvent
from ..selectors import facts_open_conflicts_of
from .history import record_event, snapshot
from .transitions import conflict_close, fact_locked, fact_supersede


def fact_approve(*, tenant: Tenant, fact_id: int, actor: str) -> Fact:
    with transaction.atomic():
        fact = fact_locked(tenant, fact_id)
        if fact.status == Fact.Status.ARCHIVED:
            raise ApplicationError(
                "An archived fact must be restored before it can be approved.", code="conflict", status_code=409
            )
        before = snapshot(fact)
        fact.status, fact.reviewed_at = Fact.Status.ACTIVE, timezone.now()
        fact.save(update_fields=["status", "reviewed_at", "updated_at"])
        record_event(fact, FactEvent.Action.APPROVED, actor, before=before, after=snapshot(fact))
    return fact


def fact_reject(*, tenant: Tenant, fact_id: int, actor: str) -> Fact:
    with transaction.atomic():
        fact = fact_locked(tenant, fact_id)
        before = snapshot(fact)
        fact.status, fact.reviewed_at = Fact.Status.REJECTED, timezone.now()
        fact.save(update_fields=["status", "reviewed_at", "updated_at"])
        record_event(fact, FactEvent.Action.REJECTED, actor, before=before, after=snapshot(fact))
        # A rejected newcomer loses its open conflicts: the existing fact simply stays.
        for conflict in facts_open_conflicts_of(tenant=tenant, fact=fact).filter(new_fact=fact):
            conflict_close(conflict, FactConflict.Resolution.KEEP_OLD, actor)
    return fact


def conflict_resolve(*, tenant: Tenant, conflict_id: int, resolution: str, actor: str) -> FactConflict:
    """keep_new: the new fact wins and the old one is superseded; keep_old: the new one is rejected;
    keep_both: both stay active (they were compatible after all)."""
    if resolution not in FactConflict.Resolution.values:
        raise ValidationError({"resolution": f"Must be one of {', '.join(FactConflict.Resolution.values)}."})
    with transaction.atomic():
        try:
            conflict = FactConflict.objects.select_for_update().get(tenant=tenant, pk=conflict_id)
        except FactConflict.DoesNotExist:
            raise ApplicationError("Conflict not found.", code="not_found", status_code=404) from None
        if conflict.status != FactConflict.Status.OPEN:
            raise ApplicationError("This conflict is already resolved.", code="conflict", status_code=409)
        old, new = fact_locked(tenant, conflict.existing_fact_id), fact_locked(tenant, conflict.new_fact_id)
        now = timezone.now()
        if resolution in (FactConflict.Resolution.KEEP_NEW, FactConflict.Resolution.KEEP_BOTH):
            before = snapshot(new)
            new.status, new.reviewed_at = Fact.Status.ACTIVE, now
            new.save(update_fields=["status", "reviewed_at", "updated_at"])
            record_event(new, FactEvent.Action.APPROVED, actor, before=before, after=snapshot(new))
        if resolution == FactConflict.Resolution.KEEP_NEW:
            fact_supersede(old, new, conflict.reason or "conflict resolved: keep the new fact", actor=actor)
        if resolution == FactConflict.Resolution.KEEP_OLD:
            before = snapshot(new)
            new.status, new.reviewed_at = Fact.Status.REJECTED, now
            new.save(update_fields=["status", "reviewed_at", "updated_at"])
            record_event(new, FactEvent.Action.REJECTED, actor, before=before, after=snapshot(new))
        conflict_close(conflict, resolution, actor)
    return conflict
