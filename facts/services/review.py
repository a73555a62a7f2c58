"""Human review: approve a fact (applying what it proposed), reject it (taking back what it did), resolve a
conflict, undo a supersession."""

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_query
from core.errors import ApplicationError
from core.locks import LockNamespace, xact_lock
from tenancy.models import Tenant

from ..content import clean_content
from ..models import Fact, FactConflict, FactEvent
from ..selectors import facts_nearest
from .embed_queue import facts_embed_after_commit
from .history import record_event, snapshot
from .proposals import Decision, decision_of, decision_stored, decision_unchanged, open_conflict_ids
from .remember import judge_neighbours, judged_then_written
from .transitions import (
    conflict_close,
    conflict_open,
    fact_activate,
    fact_locked,
    fact_merge_into,
    fact_refuse,
    fact_retire_into,
    fact_retirement,
    fact_supersede,
)


@dataclass(frozen=True)
class _Unresolved:
    conflict_ids: list[int]  # judged again and now unsure: conflicts opened, a person resolves them first


def fact_approve(*, tenant: Tenant, fact_id: int, actor: str) -> Fact:
    """Make the fact active and apply what it proposed when it arrived (merge into its twin, supersede the facts it
    contradicts), in one transaction with their events. When a fact the proposal acts on has changed since, the fact
    is judged again against the user's active facts first (outside the transaction: a chat call may be slow). A fact
    with an open conflict is approved only by resolving the conflict (409 naming it). A fact still awaiting its
    vector is only activated: it is judged, as an active fact, when the vector arrives."""
    outcome = judged_then_written(
        tenant=tenant,
        user_id=_fact(tenant, fact_id).user_id,
        judge=lambda: _approval(tenant, fact_id),
        write=lambda approval: _approval_written(tenant, fact_id, *approval, actor=actor),
    )
    if isinstance(outcome, _Unresolved):
        raise _unresolved(outcome.conflict_ids)
    return outcome


def _approval(tenant: Tenant, fact_id: int) -> tuple[Fact, Decision]:
    """The fact as read, and what approving it does: its stored proposal, or a new judgement when that is stale."""
    fact = _reviewable(tenant, fact_id)
    if fact.status == Fact.Status.ACTIVE or fact.embedding is None:  # decided when it arrives: this marks it reviewed
        return fact, Decision("create")
    decision = decision_stored(tenant=tenant, fact=fact)
    if decision is None:  # no proposal, or stale: judged again
        neighbours = facts_nearest(
            tenant=tenant,
            user_id=fact.user_id,
            vector=fact.embedding,
            limit=settings.FACTS_JUDGE_CANDIDATES,
            statuses=[Fact.Status.ACTIVE],
            agent_id=fact.agent_id,
        )
        neighbours = [neighbour for neighbour in neighbours if neighbour.fact.pk != fact.pk]
        decision = decision_of(fact, list(zip(neighbours, judge_neighbours(fact.content, neighbours), strict=True)))
    return fact, decision


def _approval_written(tenant: Tenant, fact_id: int, read: Fact, decision: Decision, *, actor: str):
    fact = _reviewable(tenant, fact_id, lock=True)
    if fact.updated_at != read.updated_at or not decision_unchanged(decision):
        return None  # the fact or a target changed meanwhile: decide again
    if decision.conflicts:
        return _Unresolved(_open_conflicts(fact, decision, actor=actor))
    return _apply_approved(fact, decision, actor=actor)


def _reviewable(tenant: Tenant, fact_id: int, *, lock: bool = False) -> Fact:
    fact = fact_locked(tenant, fact_id) if lock else _fact(tenant, fact_id)
    if fact.status == Fact.Status.ARCHIVED:
        raise ApplicationError(
            "An archived fact must be restored before it can be approved.", code="conflict", status_code=409
        )
    if fact.valid_to is not None:
        raise ApplicationError(
            f"This fact is history (retired in favour of #{fact.superseded_by_id}); it cannot be approved.",
            code="conflict",
            status_code=409,
        )
    conflicts = open_conflict_ids(fact)
    if conflicts:
        raise _unresolved(conflicts)
    return fact


def _fact(tenant: Tenant, fact_id: int) -> Fact:
    try:
        return Fact.objects.get(tenant=tenant, pk=fact_id)
    except Fact.DoesNotExist:
        raise ApplicationError("Fact not found.", code="not_found", status_code=404) from None


def _unresolved(conflict_ids: list[int]) -> ApplicationError:
    listed = ", ".join(f"#{pk}" for pk in conflict_ids)
    return ApplicationError(
        f"This fact is in open conflict {listed}: resolve the conflict to decide it "
        "(POST /api/v1/conflicts/{id}/resolve).",
        code="open_conflict",
        status_code=409,
        details={"conflicts": conflict_ids},
    )


def _open_conflicts(fact: Fact, decision: Decision, *, actor: str) -> list[int]:
    conflicts = [conflict_open(t.fact, fact, t.judgement.reason, actor=actor) for t in decision.conflicts]
    fact.proposal = decision.as_proposal(conflict_ids=[conflict.pk for conflict in conflicts])
    fact.save(update_fields=["proposal", "updated_at"])
    return [conflict.pk for conflict in conflicts]


def _apply_approved(fact: Fact, decision: Decision, *, actor: str) -> Fact:
    """The locked, approved fact takes effect as an active fact would have: merged into its twin (and kept as
    history pointing at it), or active, retiring the facts it supersedes."""
    fact_activate(fact, actor=actor)
    if decision.action in ("merge", "refine"):
        target = decision.targets[0].fact
        fact_merge_into(target, fact, refined=decision.action == "refine", actor=actor)
        fact_retire_into(fact, target, actor=actor)
    else:
        for target in decision.targets:
            fact_supersede(target.fact, fact, target.judgement.reason, actor=actor)
    return fact


def fact_reject(*, tenant: Tenant, fact_id: int, actor: str) -> Fact:
    """Reject the fact: nothing else changes, but what the fact itself did is taken back (its open conflicts close
    in favour of the facts it contradicted; facts it superseded are current again)."""
    with transaction.atomic():
        xact_lock(LockNamespace.USER_MEMORY, tenant.pk, _fact(tenant, fact_id).user_id)  # before any row, as writers do
        fact = fact_locked(tenant, fact_id)
        fact_refuse(fact, actor=actor)
    return fact


def fact_supersession_undo(*, tenant: Tenant, fact_id: int, actor: str) -> Fact:
    """The fact `fact_id` was superseded wrongly: it is current again, and the fact that superseded it is rejected
    (so the other facts that one superseded are current again too), with history."""
    with transaction.atomic():
        xact_lock(LockNamespace.USER_MEMORY, tenant.pk, _fact(tenant, fact_id).user_id)
        old = fact_locked(tenant, fact_id)
        if old.superseded_by_id is None or fact_retirement(old) != FactEvent.Action.SUPERSEDED:
            raise ApplicationError(
                "Only a superseded fact can be made current again; this one is not (a merged fact is undone by "
                "editing the fact it was merged into).",
                code="conflict",
                status_code=409,
            )
        new = fact_locked(tenant, old.superseded_by_id)
        fact_refuse(new, actor=actor, reason=f"supersession of #{old.pk} undone")
        old.refresh_from_db()
    return old


def conflict_resolve(
    *, tenant: Tenant, conflict_id: int, resolution: str, actor: str, content: str | None = None
) -> FactConflict:
    """keep_new: the new fact wins and the old one is superseded; keep_old: the new one is rejected; keep_both: both
    stay (they were compatible after all); merge: `content` (one edited text) replaces both, in the old fact.
    The new fact becomes active (with the rest of its proposal applied) once none of its conflicts is open."""
    if resolution not in FactConflict.Resolution.values:
        raise ValidationError({"resolution": f"Must be one of {', '.join(FactConflict.Resolution.values)}."})
    if resolution == FactConflict.Resolution.MERGE:
        if not content:
            raise ValidationError({"content": "The merged text is required to resolve by merging."})
        content = clean_content(content)
    elif content:
        raise ValidationError({"content": "Only a merge takes a text."})
    user_id = FactConflict.objects.filter(tenant=tenant, pk=conflict_id).values_list("user_id", flat=True).first()
    if user_id is None:
        raise ApplicationError("Conflict not found.", code="not_found", status_code=404)
    merged_vector = None
    if resolution == FactConflict.Resolution.MERGE:  # before any lock: may be slow
        try:
            merged_vector = embed_query(Fact(content=content).embedding_text(), tenant=tenant, user_id=user_id)
        except AIProviderError:  # the merged text is kept, and embedded later
            merged_vector = None
    with transaction.atomic():
        xact_lock(LockNamespace.USER_MEMORY, tenant.pk, user_id)
        conflict = FactConflict.objects.select_for_update().filter(tenant=tenant, pk=conflict_id).first()
        if conflict is None:  # (deleted with its fact meanwhile)
            raise ApplicationError("Conflict not found.", code="not_found", status_code=404)
        if conflict.status != FactConflict.Status.OPEN:
            raise ApplicationError("This conflict is already resolved.", code="conflict", status_code=409)
        old, new = fact_locked(tenant, conflict.existing_fact_id), fact_locked(tenant, conflict.new_fact_id)
        if resolution == FactConflict.Resolution.KEEP_OLD:
            fact_refuse(new, actor=actor, reason=f"conflict #{conflict.pk}: the existing fact stays")  # closes it
            conflict.refresh_from_db()
            return conflict
        if resolution == FactConflict.Resolution.MERGE:
            _merge_texts(old, new, content, merged_vector, actor=actor)
            conflict_close(conflict, resolution, actor)
            others = FactConflict.objects.select_for_update().filter(
                tenant=tenant, new_fact=new, status=FactConflict.Status.OPEN
            )
            for other in others.order_by("pk"):  # what the new fact contradicted elsewhere no longer matters
                conflict_close(other, FactConflict.Resolution.KEEP_OLD, actor)
            return conflict
        if resolution == FactConflict.Resolution.KEEP_NEW:
            fact_supersede(old, new, conflict.reason or "conflict resolved: keep the new fact", actor=actor)
        conflict_close(conflict, resolution, actor)
        if new.status == Fact.Status.PENDING and not open_conflict_ids(new):
            # Decided: the rest of its proposal applies, to the facts that are still as they were judged.
            _apply_approved(new, decision_stored(tenant=tenant, fact=new, drop_stale=True), actor=actor)
    return conflict


def _merge_texts(old: Fact, new: Fact, content: str, vector, *, actor: str) -> None:
    """One edited text replaces both: the old fact takes it (re-embedded), the new one is kept as history in it."""
    before = snapshot(old)
    old.content, old.embedding, old.embedding_model = content, vector, active_embedding_model()
    if vector is None:  # the embedder failed: found by keywords until the sweep embeds it
        old.embedding_model, old.embedding_pending = "", Fact.EmbeddingPending.EMBED
        old.embedding_attempts, old.embedding_next_attempt_at = 0, timezone.now()
        facts_embed_after_commit([old.pk])
    old.confidence = max(old.confidence, new.confidence)
    old.save()
    record_event(old, FactEvent.Action.MERGED, actor, before=before, after={**snapshot(old), "merged": new.content})
    fact_activate(new, actor=actor)
    fact_retire_into(new, old, actor=actor)
