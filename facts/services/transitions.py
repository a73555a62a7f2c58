"""State changes several services share: lock a fact, retire it in favour of another, open or close a conflict."""

from django.db.models import Q
from django.utils import timezone

from core.errors import ApplicationError
from core.validation import metadata_within_limits
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
    """Retire `old` in favour of `new`: it stays as history ("what did we use before?"), out of default reads.
    It was true until the new fact took over, and never less than from its own start (a new fact about an earlier
    time ends the old one where it began)."""
    old = Fact.objects.select_for_update().get(pk=old.pk)
    before = snapshot(old)
    old.valid_to = max(new.valid_from, old.valid_from)
    old.superseded_by = new
    old.save(update_fields=["valid_to", "superseded_by", "updated_at"])
    record_event(old, FactEvent.Action.SUPERSEDED, actor, before=before, after={**snapshot(old), "reason": reason})
    return old.pk


def fact_merge_into(existing: Fact, new: Fact, *, refined: bool, actor: str) -> Fact:
    """The information is already there: strengthen the existing fact instead of adding a twin (a refinement also
    takes the new wording, with its vector)."""
    existing = Fact.objects.select_for_update().get(pk=existing.pk)
    before = snapshot(existing)
    # Each independent confirmation closes half of the remaining doubt.
    existing.confidence = round(min(1.0, existing.confidence + (1 - existing.confidence) * new.confidence * 0.5), 4)
    existing.confidence = max(existing.confidence, new.confidence)
    existing.pinned = existing.pinned or new.pinned
    merged_metadata = {**existing.metadata, **new.metadata}
    if metadata_within_limits(merged_metadata):  # else the held fact keeps its own: merges never grow it unbounded
        existing.metadata = merged_metadata
    existing.occurred_at = existing.occurred_at or new.occurred_at
    if refined:
        existing.content, existing.embedding = new.content, new.embedding
        existing.embedding_model = new.embedding_model
    existing.save()
    after = {**snapshot(existing), "merged": new.content}
    record_event(existing, FactEvent.Action.MERGED, actor, before=before, after=after)
    return existing


def fact_retire_into(fact: Fact, into: Fact, *, actor: str) -> None:
    """`fact` was merged into `into` (what it says is there now): history, pointing at the fact that holds it."""
    before = snapshot(fact)
    fact.valid_to = max(timezone.now(), fact.valid_from)
    fact.superseded_by = into
    fact.save(update_fields=["valid_to", "superseded_by", "updated_at"])
    record_event(fact, FactEvent.Action.MERGED, actor, before=before, after={**snapshot(fact), "into": into.pk})


def fact_activate(fact: Fact, *, actor: str) -> None:
    """A person approved `fact` (locked by the caller): active and reviewed, with its event."""
    before = snapshot(fact)
    fact.status, fact.reviewed_at = Fact.Status.ACTIVE, timezone.now()
    fact.save(update_fields=["status", "reviewed_at", "updated_at"])
    record_event(fact, FactEvent.Action.APPROVED, actor, before=before, after=snapshot(fact))


def fact_refuse(fact: Fact, *, actor: str, reason: str = "") -> list[int]:
    """A person rejected `fact` (locked by the caller): rejected and reviewed, its open conflicts closed in favour of
    the facts it contradicted, and every fact it had superseded current again. Returns the ids reinstated."""
    before = snapshot(fact)
    fact.status, fact.reviewed_at = Fact.Status.REJECTED, timezone.now()
    fact.save(update_fields=["status", "reviewed_at", "updated_at"])
    record_event(fact, FactEvent.Action.REJECTED, actor, before=before, after={**snapshot(fact), "reason": reason})
    open_conflicts = FactConflict.objects.select_for_update().filter(
        tenant_id=fact.tenant_id, new_fact=fact, status=FactConflict.Status.OPEN
    )
    for conflict in open_conflicts.order_by("pk"):
        conflict_close(conflict, FactConflict.Resolution.KEEP_OLD, actor)
    return facts_reinstate_superseded_by(fact, actor=actor)


def facts_reinstate_superseded_by(new: Fact, *, actor: str) -> list[int]:
    """Make current again every fact `new` superseded (not those merged into it): the rejection of a fact takes
    back what it did."""
    retired = Fact.objects.select_for_update().filter(tenant_id=new.tenant_id, superseded_by=new).order_by("pk")
    reinstated = []
    for old in retired:
        if fact_retirement(old) != FactEvent.Action.SUPERSEDED:
            continue
        before = snapshot(old)
        old.valid_to, old.superseded_by = None, None
        old.save(update_fields=["valid_to", "superseded_by", "updated_at"])
        record_event(old, FactEvent.Action.REINSTATED, actor, before=before, after={**snapshot(old), "was": new.pk})
        reinstated.append(old.pk)
    return reinstated


def fact_retirement(fact: Fact) -> str | None:
    """How a retired fact was retired: "superseded" (contradicted) or "merged" (folded into another)."""
    # The fact that takes a merge in logs "merged" too, without "into": it was not retired.
    retirements = Q(action=FactEvent.Action.SUPERSEDED) | Q(action=FactEvent.Action.MERGED, after__has_key="into")
    return (
        FactEvent.objects.filter(retirements, tenant_id=fact.tenant_id, fact_id=fact.pk)
        .order_by("-created_at", "-id")
        .values_list("action", flat=True)
        .first()
    )


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
