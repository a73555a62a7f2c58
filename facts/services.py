"""Writes to the fact store: remember (dedupe, supersede, conflict), review, usage, import, extraction."""

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from ai.chat import get_chat
from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_query, embed_texts
from core.db import copy_insert
from core.errors import ApplicationError
from core.locks import LockNamespace, xact_lock
from core.timestamps import parse_timestamp
from core.validation import validate_user_id
from tenancy.models import Tenant

from .extraction_rules import extract_by_rules
from .judging import Judgement, Relation, judge_by_rules
from .llm import llm_extract, llm_judge
from .models import Fact, FactConflict, FactEvent
from .selectors import Neighbour, facts_list, facts_nearest, facts_open_conflicts_of

logger = logging.getLogger(__name__)

SYSTEM = "system"
# Set by the service itself, not by callers; the field validators (range, choices) still run.
FULL_CLEAN_EXCLUDE = ["tenant", "embedding", "source_episode", "superseded_by", "valid_from"]


@dataclass(frozen=True)
class RememberResult:
    outcome: str  # created | merged | superseded | conflict
    fact: Fact  # the new fact, or the one the information was merged into
    superseded_ids: list[int] = field(default_factory=list)
    conflict_ids: list[int] = field(default_factory=list)


# --- validation ---------------------------------------------------------------------------------


def clean_content(content: str) -> str:
    content = " ".join(str(content or "").split())
    if not content:
        raise ValidationError({"content": "Must not be empty."})
    if len(content) > settings.FACTS_MAX_CONTENT_CHARS:
        raise ValidationError({"content": f"Must be at most {settings.FACTS_MAX_CONTENT_CHARS} characters."})
    return content


def normalised(content: str) -> str:
    """What counts as "the same words": case, spacing and trailing punctuation aside."""
    return " ".join(content.lower().split()).rstrip(".!。！ ")


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


def _log(fact: Fact, action: str, actor: str, before: dict | None = None, after: dict | None = None) -> FactEvent:
    return FactEvent.objects.create(
        tenant_id=fact.tenant_id,
        fact_id=fact.pk,
        user_id=fact.user_id,
        action=action,
        actor=actor,
        before=before,
        after=after,
    )


# --- remember -----------------------------------------------------------------------------------


def fact_remember(
    *,
    tenant: Tenant,
    user_id: str,
    content: str,
    category: str = Fact.Category.OTHER,
    confidence: float = 1.0,
    source: str = Fact.Source.AGENT,
    pinned: bool = False,
    occurred_at: datetime | None = None,
    metadata: dict | None = None,
    agent_id: str = "",
    actor: str = SYSTEM,
    source_episode=None,
) -> RememberResult:
    """Store what was learned, keeping the store clean: merge duplicates, retire contradicted facts (or open a
    conflict for review when unsure), insert what is new."""
    fact = Fact(
        tenant=tenant,
        user_id=validate_user_id(user_id),
        agent_id=agent_id or "",
        content=clean_content(content),
        category=category,
        confidence=confidence,
        source=source,
        pinned=pinned,
        occurred_at=occurred_at,
        metadata=metadata or {},
        source_episode=source_episode,
        embedding_model=active_embedding_model(),
    )
    fact.full_clean(exclude=FULL_CLEAN_EXCLUDE, validate_constraints=False)
    fact.embedding = embed_query(fact.embedding_text())  # before the lock: a slow embedding call must not hold it

    with transaction.atomic():
        # Writes to one user's memory queue here until commit, so two identical saves cannot both insert.
        xact_lock(LockNamespace.USER_MEMORY, tenant.pk, fact.user_id)
        neighbours = facts_nearest(
            tenant=tenant, user_id=fact.user_id, vector=fact.embedding, limit=settings.FACTS_JUDGE_CANDIDATES
        )
        judged = list(zip(neighbours, _judge(fact.content, neighbours), strict=True))

        duplicates = [(n, j) for n, j in judged if j.relation == Relation.DUPLICATE]
        if duplicates:
            return _merge(duplicates[0][0].fact, fact, refined=False, actor=actor)
        contradictions = [(n, j) for n, j in judged if j.relation == Relation.CONTRADICTS]
        if contradictions:
            return _insert_contradicting(fact, contradictions, actor=actor)
        refinements = [(n, j) for n, j in judged if j.relation == Relation.REFINES]
        if refinements:
            return _merge(refinements[0][0].fact, fact, refined=True, actor=actor)
        _insert(fact, actor=actor)
        return RememberResult("created", fact)


def _judge(content: str, neighbours: list[Neighbour]) -> list[Judgement]:
    """How `content` relates to each neighbour: same words first, then the chat model if any, else rules."""
    chat = get_chat()
    answers: dict[int, Judgement] = {}
    if chat is not None:
        asked = [
            index
            for index, neighbour in enumerate(neighbours)
            if neighbour.similarity >= settings.FACTS_LLM_JUDGE_MIN_SIMILARITY
            and normalised(neighbour.fact.content) != normalised(content)
        ]
        try:
            if asked:
                labels = llm_judge(chat, new=content, existing=[neighbours[index].fact.content for index in asked])
                answers = dict(zip(asked, labels, strict=True))
        except AIProviderError as exc:
            # The rules are a real judge too: memory keeps working while the chat model is down.
            logger.warning("chat judge unavailable, judging by rules: %s", exc.message)
            chat = None
    judgements = []
    for index, neighbour in enumerate(neighbours):
        if normalised(neighbour.fact.content) == normalised(content):
            judgements.append(Judgement(Relation.DUPLICATE, 1.0, "same words"))
        elif index in answers:
            judgements.append(answers[index])
        elif chat is not None:
            judgements.append(Judgement(Relation.UNRELATED, 1.0, "not similar enough to ask the chat model"))
        else:
            judgements.append(judge_by_rules(content, neighbour.fact.content, similarity=neighbour.similarity))
    return judgements


def _initial_status(fact: Fact) -> str:
    if fact.source == Fact.Source.MANUAL:
        return Fact.Status.ACTIVE
    threshold = (
        settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE
        if fact.source == Fact.Source.EXTRACTED
        else settings.FACTS_AUTO_APPROVE_CONFIDENCE
    )
    return Fact.Status.ACTIVE if fact.confidence >= threshold else Fact.Status.PENDING


def _insert(fact: Fact, *, actor: str, status: str | None = None) -> None:
    fact.status = status or _initial_status(fact)
    fact.valid_from = fact.occurred_at or timezone.now()
    fact.save()
    _log(fact, FactEvent.Action.CREATED, actor, after=snapshot(fact))


def _merge(existing: Fact, new: Fact, *, refined: bool, actor: str) -> RememberResult:
    """The information is already there: strengthen the existing fact instead of adding a twin."""
    existing = Fact.objects.select_for_update().get(pk=existing.pk)
    before = snapshot(existing)
    # Each independent confirmation closes half of the remaining doubt.
    existing.confidence = round(min(1.0, existing.confidence + (1 - existing.confidence) * new.confidence * 0.5), 4)
    existing.confidence = max(existing.confidence, new.confidence)
    existing.pinned = existing.pinned or new.pinned
    existing.metadata = {**existing.metadata, **new.metadata}
    existing.occurred_at = existing.occurred_at or new.occurred_at
    if refined:  # the new wording says more: keep it, with its vector
        existing.content, existing.embedding = new.content, new.embedding
        existing.embedding_model = new.embedding_model
    existing.save()
    _log(existing, FactEvent.Action.MERGED, actor, before=before, after={**snapshot(existing), "merged": new.content})
    return RememberResult("merged", existing)


def _insert_contradicting(fact: Fact, contradictions: list[tuple[Neighbour, Judgement]], *, actor: str):
    sure = [(n.fact, j) for n, j in contradictions if _safe_to_supersede(fact, n.fact, j)]
    unsure = [(n.fact, j) for n, j in contradictions if not _safe_to_supersede(fact, n.fact, j)]
    _insert(fact, actor=actor, status=Fact.Status.PENDING if unsure else None)
    superseded = [_supersede(old, fact, judgement.reason, actor=actor) for old, judgement in sure]
    conflicts = [_open_conflict(old, fact, judgement.reason, actor=actor) for old, judgement in unsure]
    outcome = "conflict" if conflicts else "superseded"
    return RememberResult(outcome, fact, superseded_ids=superseded, conflict_ids=[c.pk for c in conflicts])


def _safe_to_supersede(new: Fact, old: Fact, judgement: Judgement) -> bool:
    reviewed = old.reviewed_at is not None or old.source == Fact.Source.MANUAL
    return (
        judgement.certainty >= settings.FACTS_SUPERSEDE_CERTAINTY
        and new.confidence >= settings.FACTS_SUPERSEDE_MIN_CONFIDENCE
        and not old.pinned
        and not (new.source == Fact.Source.EXTRACTED and reviewed)
    )


def _supersede(old: Fact, new: Fact, reason: str, *, actor: str) -> int:
    """Retire `old` in favour of `new`: it stays as history ("what did we use before?"), out of default reads."""
    old = Fact.objects.select_for_update().get(pk=old.pk)
    before = snapshot(old)
    old.valid_to = new.valid_from
    old.superseded_by = new
    old.save(update_fields=["valid_to", "superseded_by", "updated_at"])
    _log(old, FactEvent.Action.SUPERSEDED, actor, before=before, after={**snapshot(old), "reason": reason})
    return old.pk


def _open_conflict(old: Fact, new: Fact, reason: str, *, actor: str) -> FactConflict:
    conflict = FactConflict.objects.create(
        tenant_id=new.tenant_id, user_id=new.user_id, existing_fact=old, new_fact=new, reason=reason
    )
    details = {"conflict": conflict.pk, "existing_fact": old.pk, "new_fact": new.pk, "reason": reason}
    _log(old, FactEvent.Action.CONFLICT_OPENED, actor, after=details)
    _log(new, FactEvent.Action.CONFLICT_OPENED, actor, after=details)
    return conflict


# --- review -------------------------------------------------------------------------------------


def _locked(tenant: Tenant, fact_id: int) -> Fact:
    try:
        return Fact.objects.select_for_update().get(tenant=tenant, pk=fact_id)
    except Fact.DoesNotExist:
        raise ApplicationError("Fact not found.", code="not_found", status_code=404) from None


def fact_approve(*, tenant: Tenant, fact_id: int, actor: str) -> Fact:
    with transaction.atomic():
        fact = _locked(tenant, fact_id)
        if fact.status == Fact.Status.ARCHIVED:
            raise ApplicationError(
                "An archived fact must be restored before it can be approved.", code="conflict", status_code=409
            )
        before = snapshot(fact)
        fact.status, fact.reviewed_at = Fact.Status.ACTIVE, timezone.now()
        fact.save(update_fields=["status", "reviewed_at", "updated_at"])
        _log(fact, FactEvent.Action.APPROVED, actor, before=before, after=snapshot(fact))
    return fact


def fact_reject(*, tenant: Tenant, fact_id: int, actor: str) -> Fact:
    with transaction.atomic():
        fact = _locked(tenant, fact_id)
        before = snapshot(fact)
        fact.status, fact.reviewed_at = Fact.Status.REJECTED, timezone.now()
        fact.save(update_fields=["status", "reviewed_at", "updated_at"])
        _log(fact, FactEvent.Action.REJECTED, actor, before=before, after=snapshot(fact))
        # A rejected newcomer loses its open conflicts: the existing fact simply stays.
        for conflict in facts_open_conflicts_of(tenant=tenant, fact=fact).filter(new_fact=fact):
            _close_conflict(conflict, FactConflict.Resolution.KEEP_OLD, actor)
    return fact


UPDATABLE_FIELDS = ("content", "category", "confidence", "pinned", "metadata", "occurred_at", "agent_id")


def fact_update(*, tenant: Tenant, fact_id: int, actor: str, **changes) -> Fact:
    """Edit a fact in place; the previous values stay in its history. New content is re-embedded."""
    unknown = set(changes) - set(UPDATABLE_FIELDS)
    if unknown:
        raise ValidationError({name: "This field cannot be changed." for name in sorted(unknown)})
    if "content" in changes:
        changes["content"] = clean_content(changes["content"])
    reembed = {"content", "occurred_at"} & set(changes)
    if reembed:  # embedded before the row lock is taken: a slow embedding call must not hold it
        current = Fact.objects.filter(tenant=tenant, pk=fact_id).values("content", "occurred_at").first() or {}
        vector = embed_query(Fact(**{**current, **{name: changes[name] for name in reembed}}).embedding_text())
    with transaction.atomic():
        fact = _locked(tenant, fact_id)
        before = snapshot(fact)
        for name, value in changes.items():
            setattr(fact, name, value)
        if reembed:
            fact.embedding, fact.embedding_model = vector, active_embedding_model()
        fact.full_clean(exclude=FULL_CLEAN_EXCLUDE, validate_constraints=False)
        fact.save()
        _log(fact, FactEvent.Action.UPDATED, actor, before=before, after=snapshot(fact))
    return fact


def fact_delete(*, tenant: Tenant, fact_id: int, actor: str) -> None:
    with transaction.atomic():
        fact = _locked(tenant, fact_id)
        _log(fact, FactEvent.Action.DELETED, actor, before=snapshot(fact))
        fact.delete()


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
        old, new = _locked(tenant, conflict.existing_fact_id), _locked(tenant, conflict.new_fact_id)
        now = timezone.now()
        if resolution in (FactConflict.Resolution.KEEP_NEW, FactConflict.Resolution.KEEP_BOTH):
            before = snapshot(new)
            new.status, new.reviewed_at = Fact.Status.ACTIVE, now
            new.save(update_fields=["status", "reviewed_at", "updated_at"])
            _log(new, FactEvent.Action.APPROVED, actor, before=before, after=snapshot(new))
        if resolution == FactConflict.Resolution.KEEP_NEW:
            _supersede(old, new, conflict.reason or "conflict resolved: keep the new fact", actor=actor)
        if resolution == FactConflict.Resolution.KEEP_OLD:
            before = snapshot(new)
            new.status, new.reviewed_at = Fact.Status.REJECTED, now
            new.save(update_fields=["status", "reviewed_at", "updated_at"])
            _log(new, FactEvent.Action.REJECTED, actor, before=before, after=snapshot(new))
        _close_conflict(conflict, resolution, actor)
    return conflict


def _close_conflict(conflict: FactConflict, resolution: str, actor: str) -> None:
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


# --- usage --------------------------------------------------------------------------------------


def facts_record_usage(*, tenant: Tenant, fact_ids: Iterable[int]) -> int:
    """Count one more use of each fact (it was injected into a prompt): one UPDATE for all of them.

    Cheap by design: usage_count and last_used_at are in no index and the table keeps free space on each page
    (fillfactor), so PostgreSQL updates the rows in place (HOT) without touching any index.
    """
    ids = sorted(set(fact_ids))
    if not ids:
        return 0
    # Lock the rows in primary-key order first: concurrent callers with overlapping ids then queue instead of
    # deadlocking.
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE facts_fact SET usage_count = usage_count + 1, last_used_at = %s
            WHERE id IN (SELECT id FROM facts_fact WHERE tenant_id = %s AND id = ANY(%s) ORDER BY id FOR UPDATE)
            """,
            [timezone.now(), tenant.pk, ids],
        )
        return cursor.rowcount


# --- bulk import --------------------------------------------------------------------------------


IMPORT_STATUSES = [Fact.Status.ACTIVE, Fact.Status.PENDING]  # history (superseded, rejected) has no import path
IMPORT_FIELDS = [
    "tenant",
    "user_id",
    "agent_id",
    "category",
    "content",
    "embedding",
    "embedding_model",
    "confidence",
    "usage_count",
    "status",
    "source",
    "valid_from",
    "occurred_at",
    "pinned",
    "metadata",
    "search_text",
    "created_at",
    "updated_at",
]


def facts_import(*, tenant: Tenant, facts: list[dict], actor: str) -> list[Fact]:
    """Store facts exactly as given (no merging, no extraction): for migrations and evaluation.

    All or nothing; one embedding batch and batched inserts.
    """
    if len(facts) > settings.FACTS_IMPORT_MAX_BATCH:
        raise ValidationError({"facts": f"At most {settings.FACTS_IMPORT_MAX_BATCH} facts per request."})
    model_name = active_embedding_model()
    now = timezone.now()
    rows = []
    for index, item in enumerate(facts):
        try:
            rows.append(_import_fact(item, tenant=tenant, model_name=model_name, now=now))
        except ValidationError as exc:
            raise ValidationError(
                {f"facts[{index}].{name}": messages for name, messages in exc.message_dict.items()}
            ) from None
    for row, vector in zip(rows, embed_texts([row.embedding_text() for row in rows]), strict=True):
        row.embedding = vector
        row.refresh_search_text()  # bulk_create skips save()
    events = [
        FactEvent(
            tenant=tenant,
            user_id=row.user_id,
            action=FactEvent.Action.CREATED,
            actor=actor,
            after={"source": "import", "status": row.status},
            created_at=now,
        )
        for row in rows
    ]
    with transaction.atomic():
        copy_insert(Fact, rows, IMPORT_FIELDS)
        for row, event in zip(rows, events, strict=True):
            event.fact_id = row.pk
        copy_insert(
            FactEvent, events, ["tenant", "fact_id", "user_id", "action", "actor", "before", "after", "created_at"]
        )
    return rows


def _import_fact(item: dict, *, tenant: Tenant, model_name: str, now: datetime) -> Fact:
    """One import item as an unsaved Fact. Checks what full_clean would (choices, range, types, lengths) at a
    tenth of its cost, which is most of an import's time."""
    if not isinstance(item, dict):
        raise ValidationError({"non_field_errors": "Must be an object."})
    confidence = item.get("confidence", 1.0)
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0.0 <= confidence <= 1.0:
        raise ValidationError({"confidence": "Must be a number from 0 to 1."})
    category = item.get("category", Fact.Category.OTHER)
    if category not in Fact.Category.values:
        raise ValidationError({"category": f"Must be one of: {', '.join(Fact.Category.values)}."})
    status = item.get("status", Fact.Status.ACTIVE)
    if status not in IMPORT_STATUSES:
        raise ValidationError({"status": f"Must be one of: {', '.join(IMPORT_STATUSES)}."})
    pinned = item.get("pinned", False)
    if not isinstance(pinned, bool):
        raise ValidationError({"pinned": "Must be true or false."})
    metadata = item.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValidationError({"metadata": "Must be an object."})
    agent_id = item.get("agent_id") or ""
    if not isinstance(agent_id, str) or len(agent_id) > 255:
        raise ValidationError({"agent_id": "Must be text of at most 255 characters."})
    occurred_at = parse_timestamp(item.get("occurred_at"), field="occurred_at")
    return Fact(
        tenant=tenant,
        user_id=validate_user_id(item.get("user_id")),
        content=clean_content(item.get("content")),
        agent_id=agent_id,
        category=category,
        confidence=float(confidence),
        status=status,
        source=Fact.Source.IMPORT,
        pinned=pinned,
        occurred_at=occurred_at,
        valid_from=parse_timestamp(item.get("valid_from"), field="valid_from") or occurred_at or now,
        metadata=metadata,
        embedding_model=model_name,
        created_at=now,
        updated_at=now,
    )


# --- extraction ---------------------------------------------------------------------------------


def facts_extract(
    *, tenant: Tenant, user_id: str, messages: list[dict], reference_time: datetime, episode=None
) -> list[RememberResult]:
    """Distil atomic facts from a conversation and remember each (source=extracted). All or nothing."""
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
                actor=SYSTEM,
            )
            for candidate in candidates
        ]
