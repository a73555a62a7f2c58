"""The background run of an episode (the django-q task calls it): extract facts from the messages not extracted
yet, one small range at a time, then refresh the summary and its embedding."""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Sum
from django.db.models.functions import Coalesce, Length, Trim
from django.utils import timezone

from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_query, embed_texts
from core.backoff import retry_delay as backoff
from core.locks import LockNamespace, session_lock
from facts.services import facts_extract

from .matching import excluded
from .messages import time_of
from .models import Episode, EpisodeMessage
from .selectors import HEAVY_FIELDS, episode_messages
from .summaries import episode_summary

logger = logging.getLogger(__name__)


Status = Episode.ExtractionStatus

# EPISODES_EXTRACTION_ON_CHAT_FAILURE -> facts_extract's on_chat_failure.
ON_CHAT_FAILURE = {"fallback": "fallback", "retry": "raise"}


def episode_extract(*, episode_id: int, now: datetime | None = None) -> str:
    """The background run (django-q task): extract facts from the messages past the watermark, then refresh the
    summary and its embedding. Returns the resulting status.

    Idempotent, in small steps: each range of at most EPISODES_EXTRACTION_STEP_MESSAGES messages commits its facts
    with the watermark moved past it, so a run that dies repeats no committed range and loses none. No transaction
    is open across steps, nor during a chat or embedding call. Runs of one episode are serialised.

    A failure is recorded on the episode (failed, the error kept, extraction_next_attempt_at after an exponential
    backoff) and not raised: the episodes-requeue schedule is the one retry mechanism (django-q's own retry would
    come back on its fixed delay, whatever the backoff says)."""
    # Held across the run's transactions (released if the process dies), so runs of one episode never overlap.
    with session_lock(LockNamespace.EPISODE_EXTRACTION, episode_id):
        message_count = _claim(episode_id)
        if message_count is None:
            return "up to date"
        try:
            episode = Episode.objects.select_related("tenant").defer(*HEAVY_FIELDS).get(pk=episode_id)
            skip_reason = _extract_pending(episode, message_count)
            summary = _summary_of(episode, message_count)
        except Exception as exc:  # noqa: BLE001 - whatever failed (a provider, the database, a bug), retried later
            _record_failure(episode_id, exc, now or timezone.now())
            return Status.FAILED
        return _finish(episode_id, message_count, skip_reason, summary)


def _claim(episode_id: int) -> int | None:
    """Mark the episode running and return how many messages this run covers; None when there is nothing to do
    (deleted, or done and up to date: a duplicate delivery). One statement, committed at once, so readers see
    "running" during the run. The fallback reason is the previous run's: this run records its own, if any."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE episodes_episode
            SET extraction_status = %(running)s, extraction_fallback_reason = '', updated_at = now()
            WHERE id = %(id)s
              AND (summarized_message_count < message_count OR extraction_status NOT IN (%(done)s, %(skipped)s))
            RETURNING message_count
            """,
            {"id": episode_id, "running": Status.RUNNING, "done": Status.DONE, "skipped": Status.SKIPPED},
        )
        row = cursor.fetchone()
    return row[0] if row else None


def _extract_pending(episode: Episode, message_count: int) -> str:
    """Extract facts from messages [watermark, message_count), range by range. Returns why extraction was skipped
    ("" when it was not)."""
    start = episode.extracted_message_count
    if start >= message_count:
        return ""
    if start == 0:  # past the threshold once, a session stays past it (messages are only appended)
        said = _user_chars(episode, message_count)
        if said < settings.EPISODES_EXTRACT_MIN_USER_CHARS:
            # The watermark stays: once the session grows past the threshold, all of it is extracted.
            return (
                f"Too short to extract facts from: {said} characters from the user, fewer than "
                f"{settings.EPISODES_EXTRACT_MIN_USER_CHARS} (EPISODES_EXTRACT_MIN_USER_CHARS)."
            )
    any_pending = False
    while start < message_count:
        start, pending = _extract_step(episode, start, message_count)
        any_pending = any_pending or pending
    return "" if any_pending else "Extraction was switched off for the new messages (extract=false)."


def _user_chars(episode: Episode, message_count: int) -> int:
    rows = EpisodeMessage.objects.filter(
        tenant_id=episode.tenant_id, episode=episode, position__lt=message_count, role=EpisodeMessage.Role.USER
    )
    return rows.aggregate(chars=Coalesce(Sum(Length(Trim("content"))), 0))["chars"]


def _extract_step(episode: Episode, start: int, message_count: int) -> tuple[int, bool]:
    """One range from `start`: its facts and the watermark moved to its end commit together (facts_extract runs
    `then` in its transaction), with the reason when the range was extracted offline because the chat model failed.
    Returns where the next range starts, and whether any message was extractable."""
    size = max(settings.EPISODES_EXTRACTION_STEP_MESSAGES, 1)
    # One message more is read: a user message is not parted from the assistant's reply right after it.
    messages = episode_messages(episode=episode, start=start, end=min(start + size + 1, message_count))
    if len(messages) > size and not (messages[size - 1]["role"] == "user" and messages[size]["role"] == "assistant"):
        messages = messages[:size]
    end = start + len(messages)
    pending = [message for message in messages if not excluded(message["index"], episode.extraction_excluded)]
    fallback_reasons: list[str] = []  # facts_extract says why before it writes, so the watermark carries it

    def move_watermark() -> None:
        changes = {"extracted_message_count": end}
        if fallback_reasons:
            changes["extraction_fallback_reason"] = fallback_reasons[-1][:4000]
        moved = Episode.objects.filter(pk=episode.pk, extracted_message_count=start).update(**changes)
        if not moved:  # another run moved it (runs are serialised, so only by hand): this range's facts go back
            raise RuntimeError(f"the watermark of episode {episode.pk} moved during the run")

    # Facts are about the user: a range without a user message (an assistant reply alone) has none to give.
    if any(message["role"] == "user" for message in pending):
        facts_extract(
            tenant=episode.tenant,
            user_id=episode.user_id,
            messages=pending,
            reference_time=_reference_time(pending, episode),
            episode=episode,
            on_chat_failure=ON_CHAT_FAILURE[settings.EPISODES_EXTRACTION_ON_CHAT_FAILURE],
            on_fallback=fallback_reasons.append,
            then=move_watermark,
        )
    else:
        with transaction.atomic():
            move_watermark()
    return end, bool(pending)


def _reference_time(messages: list[dict], episode: Episode) -> datetime:
    """When it was said: the latest timestamp of these messages, else the episode's time."""
    times = [time for time in map(time_of, messages) if time is not None]
    return max(times) if times else (episode.last_message_at or timezone.now())


@dataclass(frozen=True)
class _Summary:
    text: str
    vector: object  # the embedding of text; None for an empty summary, or while the embedding provider fails
    model: str


def _summary_of(episode: Episode, message_count: int) -> _Summary | None:
    """The summary of the first `message_count` messages (stored messages never change: they are only appended
    to) and its embedding; None when the stored summary already covers them. The embedding failing leaves the
    vector None: the summary is kept, found by keywords meanwhile, and embedded later (episodes_embed_summaries)."""
    if episode.summarized_message_count >= message_count:
        return None
    text = episode_summary(episode, messages=episode_messages(episode=episode, end=message_count))
    if not text:
        return _Summary(text, None, "")
    try:
        vector = embed_query(text, tenant=episode.tenant, user_id=episode.user_id)
    except AIProviderError as exc:
        logger.warning("episode %s summary stored without its embedding: %s", episode.pk, exc.message)
        return _Summary(text, None, "")
    return _Summary(text, vector, active_embedding_model())


def _finish(episode_id: int, message_count: int, skip_reason: str, summary: _Summary | None) -> str:
    with transaction.atomic():
        current = Episode.objects.select_for_update().only("message_count", "summarized_message_count")
        current = current.get(pk=episode_id)
        changes = {
            "extraction_error": "",
            "extraction_skip_reason": skip_reason,
            "extraction_attempts": 0,
            "extraction_next_attempt_at": None,
        }
        # Only forward: an older run never overwrites the summary of a longer session.
        if summary is not None and current.summarized_message_count < message_count:
            changes |= {"summary": summary.text, "embedding": summary.vector, "embedding_model": summary.model}
            changes["summarized_message_count"] = message_count
        if current.message_count > message_count:
            changes["extraction_status"] = Status.PENDING  # messages arrived during the run; their task is queued
        else:
            changes["extraction_status"] = Status.SKIPPED if skip_reason else Status.DONE
        Episode.objects.filter(pk=episode_id).update(**changes)
    return changes["extraction_status"]


def retry_delay(failures: int) -> timedelta:
    """The wait before the next attempt after `failures` failed runs in a row: doubling from the base, capped."""
    return backoff(
        failures,
        base_seconds=settings.EPISODES_EXTRACTION_RETRY_BASE_SECONDS,
        max_seconds=settings.EPISODES_EXTRACTION_RETRY_MAX_SECONDS,
    )


def _record_failure(episode_id: int, exc: Exception, now: datetime) -> None:
    """Keep the error on the episode, count the failure and set when it is due again (never left without one)."""
    message = exc.message if isinstance(exc, AIProviderError) else f"{type(exc).__name__}: {exc}"
    logger.warning("extraction of episode %s failed: %s", episode_id, message)
    with transaction.atomic():
        episode = Episode.objects.select_for_update().only("extraction_attempts").filter(pk=episode_id).first()
        if episode is None:  # erased during the run
            return
        failures = min(episode.extraction_attempts + 1, 32767)
        Episode.objects.filter(pk=episode_id).update(
            extraction_status=Status.FAILED,
            extraction_error=message[:4000],
            extraction_attempts=failures,
            extraction_next_attempt_at=now + retry_delay(failures),
            updated_at=now,
        )


def episodes_embed_summaries(*, limit: int = 500) -> int:
    """Embed the summaries stored without a vector (the embedding provider was failing when they were made), a
    batch per tenant, and store each vector unless the summary changed meanwhile. Across tenants: the requeue
    schedule runs it. Returns how many were embedded; a provider still failing leaves them for the next run."""
    waiting = list(
        Episode.objects.filter(embedding__isnull=True)
        .exclude(summary="")
        .only("id", "tenant", "user_id", "summary")
        .select_related("tenant")
        .order_by("tenant_id", "id")[:limit]
    )
    embedded = 0
    for tenant_id in dict.fromkeys(episode.tenant_id for episode in waiting):
        batch = [episode for episode in waiting if episode.tenant_id == tenant_id]
        try:
            vectors = embed_texts(
                [episode.summary for episode in batch],
                tenant=batch[0].tenant,
                user_id=[episode.user_id for episode in batch],
            )
        except AIProviderError as exc:
            logger.warning("summaries of tenant %s still without embeddings: %s", tenant_id, exc.message)
            continue
        model = active_embedding_model()
        with transaction.atomic():
            for episode, vector in zip(batch, vectors, strict=True):
                embedded += Episode.objects.filter(
                    pk=episode.pk, summary=episode.summary, embedding__isnull=True
                ).update(embedding=vector, embedding_model=model)
    return embedded
