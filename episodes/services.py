"""Writes to episodic memory: store a session's messages (only what is new) and queue the background extraction
after commit; retry it; erase a user's episodes."""

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_q.conf import Conf
from django_q.tasks import async_task

from core.errors import ApplicationError
from core.locks import LockNamespace, is_locked
from core.queue import task_records_delete
from core.validation import validate_identifier, validate_user_id
from tenancy.models import Tenant

from .matching import new_messages, with_range
from .messages import clean_messages, time_of, too_large
from .models import Episode

EXTRACT_TASK = "episodes.tasks.episode_extract"
logger = logging.getLogger(__name__)


Status = Episode.ExtractionStatus


@dataclass(frozen=True)
class StoreResult:
    episode: Episode
    created: bool
    appended: int  # messages added by this request (0: everything posted was already stored)


# What a post changes; the rest (watermark, summary, vector) belongs to the background run.
STORE_FIELDS = [
    "messages", "message_count", "extraction_excluded", "agent_id", "last_message_at", "extraction_status",
    "extraction_error", "extraction_skip_reason", "extraction_attempts", "search_text", "updated_at",
]  # fmt: skip


def episode_store(
    *,
    tenant: Tenant,
    user_id: str,
    session_id: str,
    messages: list[dict],
    agent_id: str = "",
    extract: bool = True,
) -> StoreResult:
    """Keep a session's messages verbatim, appending only those not stored yet (see new_messages), and queue
    the background extraction after commit. extract=False keeps this request's messages out of fact extraction
    (they are still stored, summarised and searchable). All or nothing: over a limit, nothing is stored."""
    user_id = validate_user_id(user_id)
    session_id = validate_identifier(session_id, field="session_id")
    agent_id = agent_id or ""
    posted = clean_messages(messages)
    now = timezone.now()

    with transaction.atomic():
        # get_or_create is safe under concurrency: a racing insert of the same session hits the unique constraint,
        # then the committed row is read (and locked) instead.
        episode, created = Episode.objects.select_for_update().get_or_create(
            tenant=tenant, user_id=user_id, session_id=session_id, defaults={"agent_id": agent_id}
        )
        new = new_messages(episode.messages, posted)
        if not new:
            return StoreResult(episode, created, 0)
        total = sum(len(message["content"]) for message in [*episode.messages, *new])
        if total > settings.EPISODES_MAX_EPISODE_CHARS:
            raise too_large(
                f"The episode would hold {total} characters, at most {settings.EPISODES_MAX_EPISODE_CHARS} "
                "(EPISODES_MAX_EPISODE_CHARS). Start a new session_id.",
                "messages",
            )
        start = len(episode.messages)
        episode.messages = [*episode.messages, *new]
        episode.message_count = len(episode.messages)
        if not extract:
            episode.extraction_excluded = with_range(episode.extraction_excluded, start, episode.message_count)
        episode.agent_id = episode.agent_id or agent_id
        times = [time_of(message) or now for message in new]
        episode.last_message_at = max([*times, episode.last_message_at] if episode.last_message_at else times)
        episode.extraction_status = Status.PENDING
        episode.extraction_error = episode.extraction_skip_reason = ""
        episode.extraction_attempts = 0  # new messages, new budget of attempts
        episode.refresh_search_text()
        episode.full_clean(
            exclude=["tenant", "messages", "embedding", "extraction_excluded"],
            validate_unique=False,
            validate_constraints=False,
        )
        episode.save(update_fields=STORE_FIELDS)
        _enqueue_after_commit(episode.pk)
    return StoreResult(episode, created, len(new))


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


def episodes_requeue(*, older_than: timedelta) -> int:
    """Queue again the extraction of every episode still pending `older_than` after its last change: one whose
    task was lost (the broker was down, or a worker died with it). A task still queued runs twice at worst, and the
    second run finds nothing new. Across tenants: the scheduler runs it. Returns how many were queued."""
    stalled = Episode.objects.filter(
        extraction_status=Status.PENDING, updated_at__lt=timezone.now() - older_than
    ).values_list("pk", flat=True)
    queued = 0
    for episode_id in stalled.iterator(chunk_size=1000):
        _enqueue(episode_id)  # a broker still down raises: the next run tries again
        queued += 1
    return queued


def _task_name(episode_id: int) -> str:
    return f"episode_extract-{episode_id}"


def episode_retry(*, tenant: Tenant, episode_id: int) -> Episode:
    """Queue the extraction again, with a fresh budget of attempts: for a failed episode, one whose run died
    (running, but no live run holds it), or one still pending (its task may have been lost)."""
    with transaction.atomic():
        try:
            episode = (
                Episode.objects.select_for_update().defer("messages", "search_text").get(tenant=tenant, pk=episode_id)
            )
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
        episode.save(update_fields=["extraction_status", "extraction_error", "extraction_attempts", "updated_at"])
        _enqueue_after_commit(episode.pk)
    return episode


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
