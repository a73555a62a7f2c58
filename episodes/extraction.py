"""The background run of an episode (the django-q task calls it): extract facts from the messages not extracted
yet, then refresh the summary and its embedding."""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_query
from core.locks import LockNamespace, session_lock
from facts.services import facts_extract

from .matching import excluded
from .messages import time_of, user_chars
from .models import Episode
from .summaries import episode_summary

logger = logging.getLogger(__name__)


Status = Episode.ExtractionStatus


def episode_extract(*, episode_id: int) -> str:
    """The background run (django-q task): extract facts from the messages past the watermark, then refresh the
    summary and its embedding. Returns the resulting status.

    Idempotent: facts and the watermark are written in one transaction, so a re-run never extracts a message
    twice and a run that dies mid-way writes nothing. Runs of one episode are serialised. A failure is recorded
    on the episode (status failed, the error kept) and re-raised, so django-q retries, until
    EPISODES_EXTRACTION_MAX_ATTEMPTS runs have failed; then the episode stays failed until retried.
    """
    # Held across the run's transactions (released if the process dies), so runs of one episode never overlap.
    with session_lock(LockNamespace.EPISODE_EXTRACTION, episode_id):
        message_count = _claim(episode_id)
        if message_count is None:
            return "up to date"
        try:
            episode, skip_reason = _extract_pending(episode_id, message_count)
            summary = _summary_of(episode, message_count)
        except Exception as exc:
            if _record_failure(episode_id, exc):
                raise
            return Status.FAILED
        return _finish(episode_id, message_count, skip_reason, summary)


def _claim(episode_id: int) -> int | None:
    """Mark the episode running (one attempt more) and return how many messages this run covers; None when there
    is nothing to do: deleted, already up to date, or failed with no attempts left. One statement, committed at
    once, so readers see "running" during the run."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE episodes_episode
            SET extraction_status = %(running)s, extraction_attempts = extraction_attempts + 1
            WHERE id = %(id)s AND CASE WHEN extraction_status = %(failed)s THEN extraction_attempts < %(max)s
                                       ELSE summarized_message_count < message_count END
            RETURNING message_count
            """,
            {
                "id": episode_id,
                "running": Status.RUNNING,
                "failed": Status.FAILED,
                "max": settings.EPISODES_EXTRACTION_MAX_ATTEMPTS,
            },
        )
        row = cursor.fetchone()
    return row[0] if row else None


def _extract_pending(episode_id: int, message_count: int) -> tuple[Episode, str]:
    """Extract facts from messages [watermark, message_count) and move the watermark, in one transaction.
    Returns the episode as read and why extraction was skipped ("" when it was not)."""
    with transaction.atomic():
        # No row lock: a post appending to this session must not wait for the chat model.
        episode = Episode.objects.select_related("tenant").defer("search_text", "embedding").get(pk=episode_id)
        start = episode.extracted_message_count
        if start >= message_count:
            return episode, ""
        messages = episode.messages[:message_count]
        said = user_chars(messages)
        if said < settings.EPISODES_EXTRACT_MIN_USER_CHARS:
            # The watermark stays: once the session grows past the threshold, all of it is extracted.
            return episode, (
                f"Too short to extract facts from: {said} characters from the user, fewer than "
                f"{settings.EPISODES_EXTRACT_MIN_USER_CHARS} (EPISODES_EXTRACT_MIN_USER_CHARS)."
            )
        pending = [
            {**message, "index": index}  # the facts' provenance: which messages of the episode they come from
            for index, message in enumerate(messages[start:], start=start)
            if not excluded(index, episode.extraction_excluded)
        ]
        skip_reason = "" if pending else "Extraction was switched off for the new messages (extract=false)."
        # Facts are about the user: a batch without a user message (an assistant reply alone) has none to give.
        if any(message["role"] == "user" for message in pending):
            facts_extract(
                tenant=episode.tenant,
                user_id=episode.user_id,
                messages=pending,
                reference_time=_reference_time(pending, episode),
                episode=episode,
                on_chat_failure="raise",  # today's behaviour: failed, retried by django-q (issue 17 makes it a setting)
            )
        Episode.objects.filter(pk=episode_id).update(extracted_message_count=message_count)
        return episode, skip_reason


def _reference_time(messages: list[dict], episode: Episode) -> datetime:
    """When it was said: the latest timestamp of these messages, else the episode's time."""
    times = [time for time in map(time_of, messages) if time is not None]
    return max(times) if times else (episode.last_message_at or timezone.now())


@dataclass(frozen=True)
class _Summary:
    text: str
    vector: object  # the embedding of text, None for an empty summary
    model: str


def _summary_of(episode: Episode, message_count: int) -> _Summary | None:
    """The summary of the first `message_count` messages (stored messages never change: they are only appended
    to) and its embedding; None when the stored summary already covers them."""
    if episode.summarized_message_count >= message_count:
        return None
    text = episode_summary(episode, message_count=message_count)
    if not text:
        return _Summary(text, None, "")
    vector = embed_query(text, tenant=episode.tenant, user_id=episode.user_id)
    return _Summary(text, vector, active_embedding_model())


def _finish(episode_id: int, message_count: int, skip_reason: str, summary: _Summary | None) -> str:
    with transaction.atomic():
        current = Episode.objects.select_for_update().only("message_count", "summarized_message_count")
        current = current.get(pk=episode_id)
        changes = {"extraction_error": "", "extraction_skip_reason": skip_reason}
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


def _record_failure(episode_id: int, exc: Exception) -> bool:
    """Keep the error on the episode; True when attempts are left (the caller re-raises so django-q retries)."""
    message = exc.message if isinstance(exc, AIProviderError) else f"{type(exc).__name__}: {exc}"
    logger.warning("extraction of episode %s failed: %s", episode_id, message)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE episodes_episode SET extraction_status = %s, extraction_error = %s WHERE id = %s "
            "RETURNING extraction_attempts",
            [Status.FAILED, message[:4000], episode_id],
        )
        row = cursor.fetchone()
    return row is not None and row[0] < settings.EPISODES_EXTRACTION_MAX_ATTEMPTS
