"""Export of everything a tenant holds about a user, as JSON Lines (docs/export-import.md describes the format).

One header line, then the user's episodes (with their messages), facts (every status and validity, each with its
history) and conflicts, one record a line, ids as stored here. Read a page at a time inside one read-only snapshot,
so a file written while the user's memory changes is still consistent (every reference points into the file)."""

import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime

from django.db import connection, transaction
from django.http import StreamingHttpResponse
from django.utils import timezone

from ai.services import active_embedding_model
from core.timestamps import timestamp_text
from core.validation import validate_user_id
from episodes.selectors import episodes_list, episodes_messages_of, episodes_user_ids
from facts.selectors import conflicts_list, fact_events_of, facts_list, facts_user_ids
from search.filters import Node as FilterNode
from tenancy.models import Tenant

FORMAT = "memoryproject"
VERSION = 1
CONTENT_TYPE = "application/x-ndjson"
PAGE = 1000  # records read per query (with their events or messages in one more)


def user_export_lines(*, tenant: Tenant, user_id: str, filters: FilterNode | None = None) -> Iterator[str]:
    """The user's memories as JSON Lines (each line ends with "\\n"), read lazily. Another tenant's user of the same
    id is not this tenant's: a user the tenant holds nothing of exports its header alone.

    filters (the filter language's tree): only the facts it selects, with their history, and the conflicts between
    two of them; no episodes. A reference to what the file leaves out (superseded_by, source_episode) is null, so
    the file imports as it is."""
    validate_user_id(user_id)  # before the first line is asked for: a bad id is a 400, not a broken stream
    return _in_snapshot(lambda now: _user_lines(tenant, user_id, now, filters))


def tenant_export_lines(*, tenant: Tenant) -> Iterator[str]:
    """Every user of the tenant, one after the other, each its header then its records (by user id)."""

    def lines(now: datetime) -> Iterator[str]:
        for user_id in sorted({*facts_user_ids(tenant=tenant), *episodes_user_ids(tenant=tenant)}):
            yield from _user_lines(tenant, user_id, now)

    return _in_snapshot(lines)


def _in_snapshot(lines: Callable[[datetime], Iterator[str]]) -> Iterator[str]:
    # The snapshot is chosen before the transaction's first statement; inside a caller's transaction (a test's, a
    # command's) the export reads within that one.
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield from lines(timezone.now())


def _user_lines(tenant: Tenant, user_id: str, now: datetime, filters: FilterNode | None = None) -> Iterator[str]:
    header = {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "user_id": user_id,
        "exported_at": timestamp_text(now),
        "embedding_model": active_embedding_model(),
    }
    yield _line(header | ({"filtered": True} if filters is not None else {}))
    facts = facts_list(tenant=tenant, user_id=user_id, validity="all", filters=filters)
    exported: set[int] | None = None  # the facts in the file, when not all of them are
    if filters is not None:
        exported = set(facts.values_list("pk", flat=True))
    else:
        # Rows as plain values, not model instances: building 20,000 instances was a third of an export's time.
        episodes = episodes_list(tenant=tenant, user_id=user_id).values(*EPISODE_FIELDS)
        for page in _pages(episodes):
            messages = episodes_messages_of(tenant=tenant, episode_ids=[row["id"] for row in page])
            for row in page:
                yield _line({"type": "episode", **_times(row, EPISODE_TIMES), "messages": messages[row["id"]]})
    for page in _pages(facts.values(*FACT_COLUMNS)):
        events: dict[int, list[dict]] = {row["id"]: [] for row in page}
        for event in fact_events_of(tenant=tenant, fact_ids=list(events)).values("fact_id", *EVENT_FIELDS):
            events[event.pop("fact_id")].append(_times(event, ("created_at",)))
        for row in page:
            record = _times(row, FACT_TIMES)
            record["superseded_by"] = record.pop("superseded_by_id")
            record["source_episode"] = record.pop("source_episode_id")
            if exported is not None:
                record["source_episode"] = None
                record["superseded_by"] = record["superseded_by"] if record["superseded_by"] in exported else None
            yield _line({"type": "fact", **record, "events": events[row["id"]]})
    conflicts = conflicts_list(tenant=tenant, user_id=user_id).select_related(None).values(*CONFLICT_COLUMNS)
    for page in _pages(conflicts):
        for row in page:
            if exported is not None and not {row["existing_fact_id"], row["new_fact_id"]} <= exported:
                continue
            record = _times(row, ("resolved_at", "created_at"))
            record["existing_fact"] = record.pop("existing_fact_id")
            record["new_fact"] = record.pop("new_fact_id")
            yield _line({"type": "conflict", **record})


# What each record carries (docs/export-import.md), in this order; vectors, keyword text and the embedding
# machinery's state stay behind (the import embeds afresh).
EPISODE_FIELDS = [
    "id", "user_id", "agent_id", "session_id", "summary", "metadata", "extraction_status", "extraction_skip_reason",
    "extraction_excluded", "last_message_at", "created_at", "updated_at",
]  # fmt: skip
EPISODE_TIMES = ("last_message_at", "created_at", "updated_at")
FACT_COLUMNS = [
    "id", "user_id", "agent_id", "content", "category", "confidence", "status", "source", "pinned", "usage_count",
    "last_used_at", "valid_from", "valid_to", "superseded_by_id", "occurred_at", "metadata", "source_episode_id",
    "source_messages", "reviewed_at", "archived_at", "proposal", "created_at", "updated_at",
]  # fmt: skip
FACT_TIMES = ("last_used_at", "valid_from", "valid_to", "occurred_at", "reviewed_at", "archived_at", "created_at",
              "updated_at")  # fmt: skip
EVENT_FIELDS = ["action", "actor", "before", "after", "created_at"]
CONFLICT_COLUMNS = [
    "id", "user_id", "existing_fact_id", "new_fact_id", "status", "reason", "resolution", "resolved_by",
    "resolved_at", "created_at",
]  # fmt: skip


def _pages(rows) -> Iterator[list[dict]]:
    """The rows of a values() queryset in id order, PAGE at a time (keyset: each page starts after the last id)."""
    last = 0
    while page := list(rows.filter(pk__gt=last).order_by("pk")[:PAGE]):
        yield page
        last = page[-1]["id"]


def _times(row: dict, names: tuple[str, ...]) -> dict:
    for name in names:
        row[name] = _time(row[name])
    return row


def _time(value: datetime | None) -> str | None:
    return value and timestamp_text(value)


def _line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


CHUNK_BYTES = 64 * 1024  # lines sent together: one write per line would cost a system call each


def export_chunks(lines: Iterator[str]) -> Iterator[bytes]:
    buffered, size = [], 0
    for line in lines:
        data = line.encode()
        buffered.append(data)
        size += len(data)
        if size >= CHUNK_BYTES:
            yield b"".join(buffered)
            buffered, size = [], 0
    if buffered:
        yield b"".join(buffered)


def export_response(lines: Iterator[str], *, filename: str) -> StreamingHttpResponse:
    """The lines streamed as a download (a user id's unsafe characters become "_" in the file name)."""
    response = StreamingHttpResponse(export_chunks(lines), content_type=CONTENT_TYPE)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", filename)
    response["Content-Disposition"] = f'attachment; filename="{safe}"'
    return response
