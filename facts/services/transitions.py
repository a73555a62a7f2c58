"""State changes several services share: lock a fact, retire it in favour of another, open or close a conflict."""

from django.utils import timezone

from core.errors import ApplicationError
from tenancy.models import Tenant

from ..models import Fact, FactConflict, FactEvent
from .history import record_event, snapshot

# Set by the service itself, not by callers; the field validators (range, choices) still run.
FULL_CLEAN_EXCLUDE = ["tenant", "embedding", "source_episode", "superseded_by", "valid_from"]


def fact_locked(tenant: Tenant, fact_id: int) -> Fact:
    """The fact, locked until commit; a fact of another tenant is as missing as one that never was (404)."""
    try:
        return Fact.objects.select_for_update().get(tenant=tenant, pk=fact_id)
    except Fact.DoesNotExist:
        raise ApplicationError("Fact not found.", code="not_found", status_code=404) from None


def fact_supersede(old: Fact, new: Fact, reason: str, *, actor: str) -> int:
    """Retire `old` in favour of `new`: it stays as history ("what did we use before?"), out of default reads."""
    old = Fact.objects.select_for_update().get(pk=old.pk)
    before = snapshot(old)
    old.valid_to = new.valid_from
    old.superseded_by = new
    old.save(update_fields=["valid_to", "superseded_by", "updated_at"])
    record_event(old, FactEvent.Action.SUPERSEDED, actor, before=before, after={**snapshot(old), "reason": reason})
    return old.pk


def conflict_open(old: Fact, new: Fact, reason: str, *, actor: str) -> FactConflict:
    conflict = FactConflict.objects.create(
        tenant_id=new.tenant_id, user_id=new.user_id, existing_fact=old, new_fact=new, reason=reason
    )
    details = {"conflict": conflict.pk, "existing_fact": old.pk, "new_fact": new.pk, "reason": reason}
    record_event(old, FactEvent.Action.CONFLICT_OPENED, actor, after=details)
    record_event(new, FactEvent.Action.CONFLICT_OPENED, actor, after=details)
    return conflict


def conflict_close(conflict: FactConflict, resolution: str, actor: str) -> None:
    conflict.status, conflict.resolution = FactConflict.Status.RESOLVED, resolution
    conflict.resolved_by, conflict.resolved_at = actor, timezone.now()
    conflict.save(update_fields=["status", "resolution", "resolved_by", "resolved_at"])
    details = {"conflict": conflict.pk, "resolution": resolution}
    for fact_id in (conflict.existing_fact_id, conflict.new_fact_id):
        FactEvent.objects.create(
            tenant_id=conflict.tenant_id,
            fact_id=fact_id,
            user_id=conflict.user_id,
            action=FactEvent.Action.CONFLICT_RESOLVED,
            actor=actor,
            after=details,
        )
