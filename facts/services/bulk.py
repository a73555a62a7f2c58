"""Bulk import: facts stored exactly as given, validated once, embedded in one batch, inserted with COPY."""

import logging
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_texts
from core.db import copy_insert
from core.timestamps import parse_timestamp
from core.validation import validate_user_id
from tenancy.models import Tenant

from ..content import clean_content
from ..models import Fact, FactEvent
from .embed_queue import facts_embed_after_commit

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
    without their vectors (embedding_pending) and embedded later.
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
