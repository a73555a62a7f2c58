"""Bulk import: facts stored exactly as given, validated once, embedded in one batch, inserted with COPY."""

import logging
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_texts
from core.db import copy_insert
from core.statistics import tenant_statistics_refresh_after_commit
from core.timestamps import parse_timestamp
from core.validation import validate_metadata, validate_user_id
from tenancy.models import Tenant

from ..content import clean_content, hold_reason
from ..models import Fact, FactConflict, FactEvent, FactSearchEntry
from .embed_queue import facts_embed_after_commit
from .history import record_event, snapshot

logger = logging.getLogger(__name__)

IMPORT_STATUSES = [Fact.Status.ACTIVE, Fact.Status.PENDING]  # history (superseded, rejected) has no import path

IMPORT_FIELDS = [
    "tenant",
    "user_id",
    "agent_id",
    "category",
    "content",
    "embedding",
    "embedding_model",
    "embedding_pending",
    "embedding_attempts",
    "embedding_next_attempt_at",
    "confidence",
    "usage_count",
    "status",
    "source",
    "valid_from",
    "occurred_at",
    "pinned",
    "metadata",
    "search_text",
    "hold_reason",
    "source_messages",
    "created_at",
    "updated_at",
]


# What one import item may carry (the API's FactImportItemSerializer documents the same).
IMPORT_ITEM_KEYS = frozenset(
    {"user_id", "content", "category", "confidence", "status", "pinned", "occurred_at", "valid_from", "metadata",
     "agent_id"}
)  # fmt: skip


def facts_import(*, tenant: Tenant, facts: list[dict], actor: str) -> list[Fact]:
    """Store facts exactly as given (no merging, no extraction): for migrations and evaluation.

    All or nothing; one embedding batch and batched inserts. While the embedder fails the facts are stored
    without their vectors (embedding_pending) and embedded later. After the commit, the tables' statistics are
    refreshed if they do not know the tenant yet (core.statistics).
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
    try:
        vectors = embed_texts(
            [row.embedding_text() for row in rows], tenant=tenant, user_id=[row.user_id for row in rows]
        )
    except AIProviderError as exc:
        logger.warning("embedding unavailable, %d imported facts stored awaiting vectors: %s", len(rows), exc.message)
        vectors = None
    for index, row in enumerate(rows):
        if vectors is None:
            row.embedding_model, row.embedding_pending = "", Fact.EmbeddingPending.EMBED
            row.embedding_next_attempt_at = now
        else:
            row.embedding = vectors[index]
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
        if vectors is None:
            facts_embed_after_commit([row.pk for row in rows])
        tenant_statistics_refresh_after_commit(models=[Fact, FactSearchEntry], tenant_id=tenant.pk)
    return rows


def _import_fact(item: dict, *, tenant: Tenant, model_name: str, now: datetime) -> Fact:
    """One import item as an unsaved Fact. Checks what full_clean would (choices, range, types, lengths) at a
    tenth of its cost, which is most of an import's time."""
    if not isinstance(item, dict):
        raise ValidationError({"non_field_errors": "Must be an object."})
    unknown = set(item) - IMPORT_ITEM_KEYS
    if unknown:
        raise ValidationError({name: "Unknown field." for name in sorted(unknown)})
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
    metadata = validate_metadata(item.get("metadata"))
    agent_id = item.get("agent_id") or ""
    if not isinstance(agent_id, str) or len(agent_id) > 255:
        raise ValidationError({"agent_id": "Must be text of at most 255 characters."})
    occurred_at = parse_timestamp(item.get("occurred_at"), field="occurred_at")
    content = clean_content(item.get("content"))
    held = hold_reason(content)
    return Fact(
        tenant=tenant,
        user_id=validate_user_id(item.get("user_id")),
        content=content,
        hold_reason=held,
        agent_id=agent_id,
        category=category,
        confidence=float(confidence),
        status=Fact.Status.PENDING if held else status,
        source=Fact.Source.IMPORT,
        pinned=pinned,
        occurred_at=occurred_at,
        valid_from=parse_timestamp(item.get("valid_from"), field="valid_from") or occurred_at or now,
        metadata=metadata,
        embedding_model=model_name,
        created_at=now,
        updated_at=now,
    )


# --- restoring an export (privacy.imports): facts with their history, validity, review state and usage -------------

# Every stored column an export carries back; superseded_by and proposal name other facts, so they are set once every
# fact of the import has its id (facts_link_restored).
RESTORE_FIELDS = [
    "tenant", "user_id", "agent_id", "category", "content", "embedding", "embedding_model", "embedding_pending",
    "embedding_attempts", "embedding_next_attempt_at", "confidence", "usage_count", "last_used_at", "status",
    "source", "source_episode", "valid_from", "valid_to", "occurred_at", "pinned", "metadata", "reviewed_at",
    "archived_at", "source_messages", "search_text", "hold_reason", "created_at", "updated_at",
]  # fmt: skip
EVENT_FIELDS = ["tenant", "fact_id", "user_id", "action", "actor", "before", "after", "created_at"]
CONFLICT_FIELDS = [
    "tenant", "user_id", "existing_fact", "new_fact", "reason", "status", "resolution", "resolved_by", "resolved_at",
    "created_at",
]  # fmt: skip


def facts_insert_restored(*, facts: list[Fact]) -> None:
    """Insert facts exactly as given (status, validity, usage and times included: nothing is judged, merged or
    extracted), with a binary COPY; their ids are set. A fact without its vector is queued for embedding after
    commit (embedded only: the export it came from was already clean). A current active fact whose text reads as
    instructions comes back pending (an export file can be written by anyone). The caller holds the transaction."""
    for fact in facts:
        fact.refresh_search_text()  # COPY skips save()
        fact.hold_reason = hold_reason(fact.content)
        if fact.hold_reason and fact.status == Fact.Status.ACTIVE and fact.valid_to is None:
            fact.status = Fact.Status.PENDING
    copy_insert(Fact, facts, RESTORE_FIELDS)
    facts_embed_after_commit([fact.pk for fact in facts if fact.embedding_pending])
    for tenant_id in {fact.tenant_id for fact in facts}:
        tenant_statistics_refresh_after_commit(models=[Fact, FactSearchEntry], tenant_id=tenant_id)


def facts_link_restored(*, tenant: Tenant, links: list[tuple[int, int | None, dict | None]]) -> None:
    """Set (fact id, superseded_by id, proposal) on facts just restored, in one statement."""
    if not links:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE facts_fact f SET superseded_by_id = link.superseded_by, proposal = link.proposal "
            "FROM unnest(%s::bigint[], %s::bigint[], %s::jsonb[]) AS link(id, superseded_by, proposal) "
            "WHERE f.id = link.id AND f.tenant_id = %s",
            [
                [fact_id for fact_id, _, _ in links],
                [superseded_by for _, superseded_by, _ in links],
                [None if proposal is None else Jsonb(proposal) for _, _, proposal in links],
                tenant.pk,
            ],
        )


def fact_events_insert(*, events: list[FactEvent]) -> None:
    """Append restored history (each event as it was: its action, actor, snapshots and time)."""
    copy_insert(FactEvent, events, EVENT_FIELDS)


def fact_conflicts_insert(*, conflicts: list[FactConflict]) -> None:
    copy_insert(FactConflict, conflicts, CONFLICT_FIELDS)


MERGED_FIELDS = ("confidence", "usage_count", "last_used_at", "pinned", "metadata", "occurred_at")


def merged_values(held: Fact, incoming: Fact) -> dict:
    """What a fact the user holds takes from an imported copy of it (the fields that change): the higher confidence,
    the larger usage count, the later last use, pinned when either is, the metadata keys it lacks, a time it lacks.
    Each only grows, so importing the same file again changes nothing."""
    values = {
        "confidence": max(held.confidence, incoming.confidence),
        "usage_count": max(held.usage_count, incoming.usage_count),
        "last_used_at": max(filter(None, [held.last_used_at, incoming.last_used_at]), default=None),
        "pinned": held.pinned or incoming.pinned,
        "metadata": {**incoming.metadata, **held.metadata},
        "occurred_at": held.occurred_at or incoming.occurred_at,
    }
    return {name: value for name, value in values.items() if getattr(held, name) != value}


def fact_merge_restored(*, tenant: Tenant, fact_id: int, incoming: Fact, actor: str) -> bool:
    """An imported fact the user already holds: the held one keeps its id, text and history and takes what
    merged_values says (then a "merged" event records it). Returns whether anything changed."""
    fact = Fact.objects.select_for_update().get(tenant=tenant, pk=fact_id)
    changes = merged_values(fact, incoming)
    if not changes:
        return False
    before = snapshot(fact)
    for name, value in changes.items():
        setattr(fact, name, value)
    fact.save(update_fields=[*changes, "search_text", "updated_at"])
    record_event(fact, FactEvent.Action.MERGED, actor, before=before, after={**snapshot(fact), "merged": "import"})
    return True
