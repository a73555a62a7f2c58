"""Writes to episodic memory: store a session's messages (only what is new) and queue the background extraction
after commit; retry it; erase a user's episodes."""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django_q.conf import Conf
from django_q.tasks import async_task

from core.db import copy_insert
from core.errors import ApplicationError
from core.locks import LockNamespace, is_locked
from core.queue import task_records_delete
from core.text import search_text
from core.validation import validate_identifier, validate_metadata, validate_user_id
from tenancy.models import Tenant

from .matching import new_after, said_count, with_range
from .messages import clean_messages, time_of, too_large
from .models import Episode, EpisodeMessage
from .selectors import HEAVY_FIELDS, episode_stored_said, episode_stored_system

EXTRACT_TASK = "episodes.tasks.episode_extract"
logger = logging.getLogger(__name__)


Status = Episode.ExtractionStatus


@dataclass(frozen=True)
class StoreResult:
    episode: Episode
    created: bool
    appended: int  # messages added by this request (0: everything posted was already stored)


def episode_store(
    *,
    tenant: Tenant,
    user_id: str,
    session_id: str,
    messages: list[dict],
    agent_id: str = "",
    extract: bool = True,
    metadata: dict | None = None,
) -> StoreResult:
    """Keep a session's messages verbatim, appending only those not stored yet (see new_messages), and queue
    the background extraction after commit. extract=False keeps this request's messages out of fact extraction
    (they are still stored, summarised and searchable). `metadata` is merged into the episode's (its keys win) when
    the post appends messages, and every fact extracted from the episode carries it. All or nothing: over a limit,
    nothing is stored.

    A post's cost follows what was posted, not the session's length: the matching reads as many stored rows as
    were posted (from each end), the new messages are inserted, and their words appended to the tsvector in SQL."""
    user_id = validate_user_id(user_id)
    session_id = validate_identifier(session_id, field="session_id")
    agent_id = agent_id or ""
    posted = clean_messages(messages)
    metadata = validate_metadata(metadata)
    now = timezone.now()

    with transaction.atomic():
        # get_or_create is safe under concurrency: a racing insert of the same session hits the unique constraint,
        # then the committed row is read (and locked) instead.
        episode, created = (
            Episode.objects.select_for_update()
            .defer(*HEAVY_FIELDS)
            .get_or_create(tenant=tenant, user_id=user_id, session_id=session_id, defaults={"agent_id": agent_id})
        )
        window = said_count(posted)
        new = new_after(
            posted=posted,
            # Fewer stored messages than posted: the head cannot equal the post (the session so far, grown), unread.
            head=lambda: episode_stored_said(episode=episode, count=window) if episode.message_count >= window else [],
            tail=lambda: episode_stored_said(episode=episode, count=window, from_end=True),
            stored_system=lambda: episode_stored_system(
                episode=episode, contents={message["content"] for message in posted}
            ),
        )
        if not new:
            return StoreResult(episode, created, 0)
        if episode.message_count + len(new) > settings.EPISODES_MAX_MESSAGES_PER_EPISODE:
            raise too_large(
                f"The episode would hold {episode.message_count + len(new):,} messages, at most "
                f"{settings.EPISODES_MAX_MESSAGES_PER_EPISODE:,} (EPISODES_MAX_MESSAGES_PER_EPISODE). "
                "Start a new session_id.",
                "messages",
            )
        total = episode.content_chars + sum(len(message["content"]) for message in new)
        if total > settings.EPISODES_MAX_EPISODE_CHARS:
            raise too_large(
                f"The episode would hold {total} characters, at most {settings.EPISODES_MAX_EPISODE_CHARS} "
                "(EPISODES_MAX_EPISODE_CHARS). Start a new session_id.",
                "messages",
            )
        start = episode.message_count
        EpisodeMessage.objects.bulk_create(
            [
                EpisodeMessage(
                    tenant=tenant,
                    episode=episode,
                    position=position,
                    role=message["role"],
                    content=message["content"],
                    timestamp=time_of(message),
                )
                for position, message in enumerate(new, start=start)
            ],
            batch_size=500,
        )
        previous_time = episode.last_message_at
        times = [time_of(message) or now for message in new]
        episode.message_count = start + len(new)
        episode.content_chars = total
        if not extract:
            episode.extraction_excluded = with_range(episode.extraction_excluded, start, episode.message_count)
        episode.agent_id = episode.agent_id or agent_id
        if metadata:
            episode.metadata = validate_metadata({**episode.metadata, **metadata})
        episode.last_message_at = max([*times, previous_time] if previous_time else times)
        episode.extraction_status = Status.PENDING
        episode.extraction_error = episode.extraction_skip_reason = ""
        episode.extraction_attempts, episode.extraction_next_attempt_at = 0, None  # new messages, a fresh start
        episode.updated_at = now
        episode.full_clean(
            exclude=["tenant", "embedding", "extraction_excluded", *HEAVY_FIELDS],
            validate_unique=False,
            validate_constraints=False,
        )
        # One UPDATE: PostgreSQL appends the new messages' words to the tsvector, never reading the old text back.
        Episode.objects.filter(pk=episode.pk).update(
            **{field: getattr(episode, field) for field in STORE_FIELDS},
            search_vector=RawSQL(
                "search_vector || to_tsvector('english', %s)", [_search_text_of(new, times, previous_time)]
            ),
        )
        _enqueue_after_commit(episode.pk)
    return StoreResult(episode, created, len(new))


# What a post changes; the rest (watermark, summary, vector) belongs to the background run.
STORE_FIELDS = [
    "message_count", "content_chars", "extraction_excluded", "agent_id", "metadata", "last_message_at",
    "extraction_status", "extraction_error", "extraction_skip_reason", "extraction_attempts",
    "extraction_next_attempt_at", "updated_at",
]  # fmt: skip
MAX_DATES_PER_POST = 20  # date words let "May 2023" find what was said then; a handful per post says when


def _search_text_of(new: list[dict], times: list, previous_time) -> str:
    """The keyword text of the new messages, with the date words of days the session had not reached yet."""
    days = sorted({time.date() for time in times} - ({previous_time.date()} if previous_time else set()))
    return search_text("\n".join(message["content"] for message in new), dates=tuple(days[:MAX_DATES_PER_POST]))


def _enqueue_after_commit(episode_id: int) -> None:
    """Queue the extraction once the messages are committed (the task must see them). When the broker cannot take
    it (Redis down), the caller hears 503, yet the messages are stored: episodes_requeue queues it again later."""
    transaction.on_commit(lambda: _enqueue(episode_id), robust=Conf.SYNC)


def _enqueue(episode_id: int) -> None:
    try:
        async_task(EXTRACT_TASK, episode_id, task_name=_task_name(episode_id), group="episodes")
    except Exception as exc:  # noqa: BLE001 - whatever the broker raises (redis, database), the answer is the same
        if Conf.SYNC:  # the task ran inline (the tests): this is its own failure, already recorded on the episode
            raise
        logger.warning("episode %s stored, its extraction not queued: %s", episode_id, exc)
        raise ApplicationError(
            "The episode is stored, but the task queue is unavailable: its extraction will be queued again "
            "automatically when the queue is back.",
            code="queue_unavailable",
            status_code=503,
            details={"episode_id": episode_id},
        ) from None


def episodes_requeue(*, older_than: timedelta, now: datetime | None = None) -> int:
    """Queue again every extraction that would otherwise wait for nobody: failed ones whose next attempt is due
    (marked pending as they are queued, so a lost task is caught by the next rule), pending ones `older_than`
    after their last change (their task was lost: the broker was down, or a worker died with it), and running
    ones as old whose run died (no live run holds the episode). A task still queued runs twice at worst, and the
    second run finds nothing new. Across tenants: the scheduler runs it. Returns how many were queued."""
    now = now or timezone.now()
    with transaction.atomic():
        due = Episode.objects.select_for_update(skip_locked=True).filter(
            extraction_status=Status.FAILED, extraction_next_attempt_at__lte=now
        )
        retried = list(due.values_list("pk", flat=True))
        Episode.objects.filter(pk__in=retried).update(extraction_status=Status.PENDING, updated_at=now)
    stalled = Episode.objects.filter(
        extraction_status__in=[Status.PENDING, Status.RUNNING], updated_at__lt=now - older_than
    ).exclude(pk__in=retried)
    queued = 0
    for episode_id in [*retried, *stalled.values_list("pk", flat=True).iterator(chunk_size=1000)]:
        if is_locked(LockNamespace.EPISODE_EXTRACTION, episode_id):
            continue  # a live run holds it, and leaves it done, pending (with its task queued) or failed
        _enqueue(episode_id)  # a broker still down raises: the next run tries again
        queued += 1
    return queued


def _task_name(episode_id: int) -> str:
    return f"episode_extract-{episode_id}"


def episode_retry(*, tenant: Tenant, episode_id: int) -> Episode:
    """Queue the extraction now, without waiting for its next attempt, the backoff starting afresh: for a failed
    episode, one whose run died (running, but no live run holds it), or one still pending (its task may have been
    lost)."""
    with transaction.atomic():
        try:
            episode = Episode.objects.select_for_update().defer(*HEAVY_FIELDS).get(tenant=tenant, pk=episode_id)
        except Episode.DoesNotExist:
            raise ApplicationError("Episode not found.", code="not_found", status_code=404) from None
        status = episode.extraction_status
        running = status == Status.RUNNING and is_locked(LockNamespace.EPISODE_EXTRACTION, episode.pk)
        if status in (Status.DONE, Status.SKIPPED) or running:
            raise ApplicationError(
                f"Only a failed or stalled extraction can be retried; this one is {status}.",
                code="conflict",
                status_code=409,
            )
        episode.extraction_status, episode.extraction_error, episode.extraction_attempts = Status.PENDING, "", 0
        episode.extraction_next_attempt_at = None
        episode.save(
            update_fields=[
                "extraction_status", "extraction_error", "extraction_attempts", "extraction_next_attempt_at",
                "updated_at",
            ]
        )  # fmt: skip
        _enqueue_after_commit(episode.pk)
    return episode


# Every column of an episode an import writes (COPY leaves out none that has no database default); search_vector is
# computed from the messages by PostgreSQL afterwards.
RESTORE_FIELDS = [
    "tenant", "user_id", "agent_id", "session_id", "message_count", "content_chars", "last_message_at", "summary",
    "summarized_message_count", "embedding", "embedding_model", "extraction_status", "extraction_error",
    "extraction_skip_reason", "extraction_fallback_reason", "extracted_message_count", "extraction_excluded",
    "extraction_attempts", "metadata", "created_at", "updated_at",
]  # fmt: skip
MESSAGE_RESTORE_FIELDS = ["tenant", "episode", "position", "role", "content", "timestamp", "created_at"]


def episodes_insert_restored(
    *, tenant: Tenant, user_id: str, episodes: list[Episode], messages: list[list[dict]]
) -> None:
    """Store whole sessions an import brings (`messages[i]`, cleaned by clean_messages, are episode i's, in order),
    with binary COPY: the counters and the keyword text follow from the messages, and each is marked extracted up to
    its last message (its facts come with the import), so no extraction is queued; a later post to the session is
    extracted from there on. Every other field is the caller's (summary and its vector included). The caller holds
    the transaction."""
    for episode, said in zip(episodes, messages, strict=True):
        episode.tenant, episode.user_id = tenant, user_id
        episode.message_count = episode.extracted_message_count = len(said)
        episode.content_chars = sum(len(message["content"]) for message in said)
        episode.summarized_message_count = len(said) if episode.summary else 0
        if episode.last_message_at is None:
            episode.last_message_at = max(filter(None, map(time_of, said)), default=episode.created_at)
    copy_insert(Episode, episodes, RESTORE_FIELDS)
    copy_insert(
        EpisodeMessage,
        [
            EpisodeMessage(
                tenant=tenant,
                episode_id=episode.pk,
                position=position,
                role=message["role"],
                content=message["content"],
                timestamp=time_of(message),
                created_at=episode.created_at,
            )
            for episode, said in zip(episodes, messages, strict=True)
            for position, message in enumerate(said)
        ],
        MESSAGE_RESTORE_FIELDS,
    )
    # The same words and date words as the posts that built the original (an untimed message is dated with the
    # session): the same keyword hits.
    texts = [
        _search_text_of(said, [time_of(message) or episode.last_message_at for message in said], None)
        for episode, said in zip(episodes, messages, strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE episodes_episode e SET search_vector = to_tsvector('english', said.text) "
            "FROM unnest(%s::bigint[], %s::text[]) AS said(id, text) WHERE e.id = said.id AND e.tenant_id = %s",
            [[episode.pk for episode in episodes], texts, tenant.pk],
        )


@dataclass(frozen=True)
class EpisodesErased:
    episode_ids: list[int]
    task_records: int  # django-q rows of their extraction tasks (results, failures with their errors, queued ones)


def episodes_erase_user(*, tenant: Tenant, user_id: str) -> EpisodesErased:
    """Delete every episode of one user, with the records of their extraction tasks (part of the user's erasure;
    the caller holds the transaction)."""
    episodes = Episode.objects.filter(tenant=tenant, user_id=user_id)
    ids = list(episodes.values_list("pk", flat=True))
    episodes.delete()
    tasks = task_records_delete(func=EXTRACT_TASK, names=[_task_name(pk) for pk in ids])
    return EpisodesErased(episode_ids=ids, task_records=tasks)
