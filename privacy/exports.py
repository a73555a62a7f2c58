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
from episodes.models import Episode
from episodes.selectors import episodes_list, episodes_messages_of, episodes_user_ids
from facts.models import Fact, FactConflict, FactEvent
from facts.selectors import conflicts_list, fact_events_of, facts_list, facts_user_ids
from tenancy.models import Tenant

FORMAT = "memoryproject"
VERSION = 1
CONTENT_TYPE = "application/x-ndjson"
PAGE = 1000  # records read per query (with their events or messages in one more)


def user_export_lines(*, tenant: Tenant, user_id: str) -> Iterator[str]:
    """The user's memories as JSON Lines (each line ends with "\\n"), read lazily. Another tenant's user of the same
    id is not this tenant's: a user the tenant holds nothing of exports its header alone."""
    validate_user_id(user_id)  # before the first line is asked for: a bad id is a 400, not a broken stream
    return _in_snapshot(lambda now: _user_lines(tenant, user_id, now))


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


def _user_lines(tenant: Tenant, user_id: str, now: datetime) -> Iterator[str]:
    yield _line(
        {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "user_id": user_id,
            "exported_at": timestamp_text(now),
            "embedding_model": active_embedding_model(),
        }
    )
    episodes = episodes_list(tenant=tenant, user_id=user_id).order_by("id")  # without the vector and tsvector
    for page in _pages(episodes):
        messages = episodes_messages_of(tenant=tenant, episode_ids=[episode.pk for episode in page])
        for episode in page:
            yield _line(episode_record(episode, messages[episode.pk]))
    facts = facts_list(tenant=tenant, user_id=user_id, validity="all").defer("embedding", "search_text")
    for page in _pages(facts.order_by("id")):
        events: dict[int, list[FactEvent]] = {fact.pk: [] for fact in page}
        for event in fact_events_of(tenant=tenant, fact_ids=list(events)):
            events[event.fact_id].append(event)
        for fact in page:
            yield _line(fact_record(fact, events[fact.pk]))
    for page in _pages(conflicts_list(tenant=tenant, user_id=user_id).select_related(None).order_by("id")):
        for conflict in page:
            yield _line(conflict_record(conflict))


def _pages(queryset) -> Iterator[list]:
    """The rows of an id-ordered queryset, PAGE at a time (keyset: each page starts after the last id)."""
    last = 0
    while page := list(queryset.filter(pk__gt=last)[:PAGE]):
        yield page
        last = page[-1].pk


def episode_record(episode: Episode, messages: list[dict]) -> dict:
    return {
        "type": "episode",
        "id": episode.pk,
        "user_id": episode.user_id,
        "agent_id": episode.agent_id,
        "session_id": episode.session_id,
        "summary": episode.summary,
        "extraction_status": episode.extraction_status,
        "extraction_skip_reason": episode.extraction_skip_reason,
        "extraction_excluded": episode.extraction_excluded,
        "last_message_at": _time(episode.last_message_at),
        "created_at": _time(episode.created_at),
        "updated_at": _time(episode.updated_at),
        "messages": messages,
    }


def fact_record(fact: Fact, events: list[FactEvent]) -> dict:
    return {
        "type": "fact",
        "id": fact.pk,
        "user_id": fact.user_id,
        "agent_id": fact.agent_id,
        "content": fact.content,
        "category": fact.category,
        "confidence": fact.confidence,
        "status": fact.status,
        "source": fact.source,
        "pinned": fact.pinned,
        "usage_count": fact.usage_count,
        "last_used_at": _time(fact.last_used_at),
        "valid_from": _time(fact.valid_from),
        "valid_to": _time(fact.valid_to),
        "superseded_by": fact.superseded_by_id,
        "occurred_at": _time(fact.occurred_at),
        "metadata": fact.metadata,
        "source_episode": fact.source_episode_id,
        "source_messages": fact.source_messages,
        "reviewed_at": _time(fact.reviewed_at),
        "archived_at": _time(fact.archived_at),
        "proposal": fact.proposal,
        "created_at": _time(fact.created_at),
        "updated_at": _time(fact.updated_at),
        "events": [
            {
                "action": event.action,
                "actor": event.actor,
                "before": event.before,
                "after": event.after,
                "created_at": _time(event.created_at),
            }
            for event in events
        ],
    }


def conflict_record(conflict: FactConflict) -> dict:
    return {
        "type": "conflict",
        "id": conflict.pk,
        "user_id": conflict.user_id,
        "existing_fact": conflict.existing_fact_id,
        "new_fact": conflict.new_fact_id,
        "status": conflict.status,
        "reason": conflict.reason,
        "resolution": conflict.resolution,
        "resolved_by": conflict.resolved_by,
        "resolved_at": _time(conflict.resolved_at),
        "created_at": _time(conflict.created_at),
    }


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
